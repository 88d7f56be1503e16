//! `Runtime` on onnxruntime-web: the engine's calls mapped onto runs.

use super::*;
use crate::platform::js;
use crate::runtime::{KvImage, KvView};

impl Runtime for WebRuntime {
    type Kv = WebKv;

    fn signature(&self) -> &Signature {
        &self.signature
    }

    async fn run(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        keep_present: bool,
    ) -> Result<RunOutput<WebKv>, RuntimeError> {
        let fetches = Array::of1(&"logits".into());
        if self.signature.exposes_hidden() {
            fetches.push(&HIDDEN_OUTPUT.into());
        }
        if keep_present {
            for n in self.present_names().iter() {
                fetches.push(&n);
            }
        }
        let out = self.run_fetch(step, past, &fetches).await?;
        let lt = Self::output(&out, "logits")?;
        let logits = self.download(&lt, "logits").await;
        lt.dispose();
        let hidden = if self.signature.exposes_hidden() {
            Some(self.take_hidden(&out).await?)
        } else {
            None
        };
        let present = if keep_present {
            Some(self.keep_present(&out)?)
        } else {
            None
        };
        match logits {
            Ok(logits) => Ok(RunOutput {
                logits,
                present,
                hidden,
            }),
            Err(e) => {
                if let Some(p) = present {
                    self.release(p);
                }
                Err(e)
            }
        }
    }

    async fn extend(&mut self, step: &Step, past: Option<&WebKv>) -> Result<WebKv, RuntimeError> {
        let out = self
            .run_fetch(step, past, &self.present_names().into())
            .await?;
        self.keep_present(&out)
    }

    async fn read(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        spec: &ReadSpec<'_>,
    ) -> Result<RowRead, RuntimeError> {
        if self.gpu.is_some() {
            return self.read_on_gpu(step, past, spec).await;
        }
        crate::runtime::read_on_host(self, step, past, spec).await
    }

    async fn log_probs_at(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        keep_present: bool,
        at: &[(usize, u32)],
    ) -> Result<Gathered<WebKv>, RuntimeError> {
        // The kernel needs the row width before the run (the logits buffer
        // is ours); a graph whose vocabulary axis is dynamic reads on the host.
        if let (Some(_), Some(width)) = (&self.gpu, self.logits_width) {
            return self
                .log_probs_on_gpu(step, past, keep_present, at, width)
                .await;
        }
        crate::runtime::log_probs_on_host(self, step, past, keep_present, at).await
    }

    /// One batched run of equal-length steps against `past` (repeated to
    /// the batch), fetching only `logits`: the seam of spec §13.
    async fn run_many(
        &mut self,
        steps: &[Step],
        past: Option<&WebKv>,
    ) -> Result<Vec<Logits>, RuntimeError> {
        self.check_device()?;
        let (Some(kv), Some(first)) = (past, steps.first()) else {
            return Err(run_err("a batched run needs a past and at least one step"));
        };
        let n = first.input_ids.len();
        if steps
            .iter()
            .any(|s| s.input_ids.len() != n || s.position_ids.is_some())
        {
            return Err(run_err(
                "a batched run needs steps of one length, without position_ids",
            ));
        }
        let b = steps.len();
        let batch_i64 = |rows: Vec<&[i64]>| -> Result<Tensor, RuntimeError> {
            let w = rows[0].len();
            let flat: Vec<i64> = rows.concat();
            let data = js_sys::BigInt64Array::new_with_length(flat.len() as u32);
            data.copy_from(&flat);
            self.ort.tensor("int64", &data, &[b, w]).map_err(run_err)
        };
        let feeds = Object::new();
        let mut temps = vec![batch_i64(
            steps.iter().map(|s| s.input_ids.as_slice()).collect(),
        )?];
        if self.signature.has_attention_mask {
            let masks: Vec<&[i64]> = steps
                .iter()
                .map(|s| s.attention_mask.as_deref().unwrap_or(&[]))
                .collect();
            temps.push(batch_i64(masks)?);
            js::set(&feeds, "attention_mask", &temps[1]);
        }
        js::set(&feeds, "input_ids", &temps[0]);
        // The past repeated to the batch, as host tensors.
        for (pair, t) in self
            .signature
            .past
            .iter()
            .flat_map(|p| [&p.past_key, &p.past_value])
            .zip(&kv.tensors)
        {
            let mut dims = t.shape();
            let host = self.unless_lost(t.data()).await?.map_err(run_err)?;
            let one = js_sys::Uint8Array::new(&host.unchecked_ref::<js_sys::Uint8Array>().buffer())
                .slice(
                    host.unchecked_ref::<js_sys::Uint8Array>().byte_offset(),
                    host.unchecked_ref::<js_sys::Uint8Array>().byte_offset()
                        + host.unchecked_ref::<js_sys::Uint8Array>().byte_length(),
                );
            let all = js_sys::Uint8Array::new_with_length(one.length() * b as u32);
            for i in 0..b as u32 {
                all.set(&one, i * one.length());
            }
            dims[0] = b;
            let (dtype, data): (&str, JsValue) = match self.signature.kv_dtype {
                Dtype::F32 => ("float32", js_sys::Float32Array::new(&all.buffer()).into()),
                Dtype::F16 => ("float16", js_sys::Uint16Array::new(&all.buffer()).into()),
            };
            let bt = self.ort.tensor(dtype, &data, &dims).map_err(run_err)?;
            js::set(&feeds, pair, &bt);
            temps.push(bt);
        }
        let out = self
            .session
            .run(&feeds, &Array::of1(&"logits".into()))
            .await;
        for t in temps {
            t.dispose();
        }
        let out = match out {
            Ok(o) => o,
            Err(m) => {
                self.check_device()?;
                self.recover().await;
                return Err(run_err(m));
            }
        };
        let lt = Self::output(&out, "logits")?;
        let logits = self.download(&lt, "logits").await;
        lt.dispose();
        Ok(vec![logits?])
    }

    fn kv_len(&self, kv: &WebKv) -> usize {
        kv.len
    }

    fn kv_tensors(&self, kv: &WebKv) -> usize {
        kv.tensors.len()
    }

    fn kv_origin(&self) -> String {
        match self.backend {
            Backend::WebGpu => "onnxruntime-web 1.30 (WebGPU)".into(),
            Backend::Wasm => "onnxruntime-web 1.30 (WASM)".into(),
        }
    }

    async fn export_kv(&mut self, kv: &WebKv) -> Result<KvImage, RuntimeError> {
        let mut tensors = Vec::with_capacity(kv.tensors.len());
        for t in &kv.tensors {
            let host = self.unless_lost(t.data()).await?.map_err(run_err)?;
            let view = host.unchecked_ref::<js_sys::Uint8Array>();
            let bytes = js_sys::Uint8Array::new_with_byte_offset_and_length(
                &view.buffer(),
                view.byte_offset(),
                view.byte_length(),
            );
            tensors.push(bytes.to_vec());
        }
        Ok(KvImage {
            dtype: self.signature.kv_dtype,
            len: kv.len,
            tensors,
        })
    }

    /// Host tensors, also on WebGPU: onnxruntime-web uploads a host past
    /// when a run is given one, and the states built on it get GPU presents.
    async fn import_kv(&mut self, view: &KvView<'_>) -> Result<WebKv, RuntimeError> {
        let dtype = self.signature.kv_dtype;
        let dims = view.check(&self.signature, dtype)?;
        let mut tensors = Vec::with_capacity(view.tensors.len());
        for b in &view.tensors {
            let buf = js_sys::Uint8Array::from(*b).buffer();
            let data: JsValue = match dtype {
                Dtype::F32 => js_sys::Float32Array::new(&buf).into(),
                Dtype::F16 => js_sys::Uint16Array::new(&buf).into(),
            };
            match self.ort.tensor(dtype.name(), &data, &dims) {
                Ok(t) => tensors.push(t),
                Err(e) => {
                    tensors.iter().for_each(Tensor::dispose);
                    return Err(run_err(e));
                }
            }
        }
        self.live.set(self.live.get() + tensors.len());
        Ok(WebKv {
            tensors,
            len: view.len,
        })
    }

    fn release(&mut self, kv: WebKv) {
        self.live
            .set(self.live.get().saturating_sub(kv.tensors.len()));
        for t in kv.tensors {
            t.dispose();
        }
    }

    fn meter(&self) -> &crate::runtime::Meter {
        &self.meter
    }

    fn describe(&self) -> String {
        match self.backend {
            Backend::WebGpu => format!(
                "onnxruntime-web 1.30 (WebGPU on {}); readout: {}",
                self.adapter,
                self.readout_path()
            ),
            Backend::Wasm => "onnxruntime-web 1.30 (WASM)".to_string(),
        }
    }
}
