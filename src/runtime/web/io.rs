//! Feeds in, outputs out: the tensors a run is given and what it returns.

use super::*;
use crate::platform::js;

impl WebRuntime {
    pub(super) fn i64_tensor(&self, v: &[i64]) -> Result<Tensor, RuntimeError> {
        let data = js_sys::BigInt64Array::new_with_length(v.len() as u32);
        data.copy_from(v);
        self.ort
            .tensor("int64", &data, &[1, v.len()])
            .map_err(run_err)
    }

    pub(super) fn empty_past(&self) -> Result<Vec<Tensor>, RuntimeError> {
        let dims = self.signature.empty_past_dims();
        (0..self.signature.past.len() * 2)
            .map(|_| match self.signature.kv_dtype {
                Dtype::F32 => {
                    self.ort
                        .tensor("float32", &js_sys::Float32Array::new_with_length(0), &dims)
                }
                Dtype::F16 => {
                    self.ort
                        .tensor("float16", &js_sys::Uint16Array::new_with_length(0), &dims)
                }
            })
            .collect::<Result<_, _>>()
            .map_err(run_err)
    }

    pub(super) fn feeds(
        &self,
        step: &Step,
        past: Option<&WebKv>,
    ) -> Result<(Object, Vec<Tensor>), RuntimeError> {
        let sig = &self.signature;
        let feeds = Object::new();
        let mut temps = Vec::new();
        let mut put = |name: &str, t: Tensor, temp: bool| {
            js::set(&feeds, name, &t);
            if temp {
                temps.push(t);
            }
        };
        sig.check_step(step)?;
        put("input_ids", self.i64_tensor(&step.input_ids)?, true);
        if let Some(m) = &step.attention_mask {
            put("attention_mask", self.i64_tensor(m)?, true);
        }
        if let Some(p) = &step.position_ids {
            put("position_ids", self.i64_tensor(p)?, true);
        }
        let empty;
        let past_t: &[Tensor] = match past {
            Some(kv) => &kv.tensors,
            None => {
                empty = self.empty_past()?;
                &empty
            }
        };
        for (i, pair) in sig.past.iter().enumerate() {
            put(&pair.past_key, past_t[2 * i].clone(), past.is_none());
            put(&pair.past_value, past_t[2 * i + 1].clone(), past.is_none());
        }
        Ok((feeds, temps))
    }

    pub(super) async fn run_fetch(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        fetches: &JsValue,
    ) -> Result<Object, RuntimeError> {
        self.check_device()?;
        let (feeds, temps) = self.feeds(step, past)?;
        let run = self.session.run(&feeds, fetches);
        self.injected_loss();
        let out = self.unless_lost(run).await;
        for t in temps {
            t.dispose();
        }
        match out? {
            Ok(o) => Ok(o),
            Err(m) => {
                if let e @ RuntimeError::DeviceLost(_) = self.loss_behind(run_err(&m)).await {
                    return Err(e);
                }
                self.recover().await;
                Err(run_err(m))
            }
        }
    }

    /// After a refused run on WebGPU: a new session from the same bytes.
    /// Live pasts stay valid (onnxruntime-web hands GPU outputs to the caller).
    pub(super) async fn recover(&mut self) {
        if self.backend != Backend::WebGpu {
            return;
        }
        if let Ok(s) = self
            .ort
            .create_session(&self.model.graph, &self.session_options)
            .await
        {
            let old = std::mem::replace(&mut self.session, s);
            let _ = old.release().await;
            self.recreated += 1;
        }
    }

    pub(super) fn output(out: &Object, name: &str) -> Result<Tensor, RuntimeError> {
        let v = js::get(out, name);
        if v.is_undefined() || v.is_null() {
            return Err(run_err(format!("{name} missing from the outputs")));
        }
        Ok(v.unchecked_into())
    }

    pub(super) async fn download(
        &mut self,
        t: &Tensor,
        name: &str,
    ) -> Result<Logits, RuntimeError> {
        let dims = t.shape();
        let data = self.unless_lost(t.data()).await?.map_err(run_err)?;
        let logits = match t.dtype().as_str() {
            "float32" => Logits::f32(dims, data.unchecked_into::<js_sys::Float32Array>().to_vec()),
            "float16" => {
                // A Uint16Array, or a Float16Array where the browser has one: read the bits.
                let view = data.unchecked_ref::<js_sys::Uint8Array>();
                let bits = js_sys::Uint16Array::new_with_byte_offset_and_length(
                    &view.buffer(),
                    view.byte_offset(),
                    view.byte_length() / 2,
                );
                Logits::f16(
                    dims,
                    bits.to_vec().into_iter().map(f16::from_bits).collect(),
                )
            }
            other => return Err(run_err(format!("{name} came back as {other}"))),
        };
        self.meter.read_back += logits.byte_len() as u64;
        Ok(logits)
    }

    /// Downloads `last_hidden` from a run's outputs and disposes its tensor.
    pub(super) async fn take_hidden(&mut self, out: &Object) -> Result<Logits, RuntimeError> {
        let t = Self::output(out, HIDDEN_OUTPUT)?;
        let h = self.download(&t, HIDDEN_OUTPUT).await;
        t.dispose();
        h
    }

    /// Takes the outputs of `names` as the new past, counting them live.
    pub(super) fn keep_present(&self, out: &Object) -> Result<WebKv, RuntimeError> {
        let mut tensors = Vec::with_capacity(self.signature.past.len() * 2);
        for pair in &self.signature.past {
            for name in [&pair.present_key, &pair.present_value] {
                match Self::output(out, name) {
                    Ok(t) => tensors.push(t),
                    Err(e) => {
                        tensors.iter().for_each(Tensor::dispose);
                        return Err(e);
                    }
                }
            }
        }
        let len = tensors[0].shape().get(2).copied().unwrap_or(0);
        self.live.set(self.live.get() + tensors.len());
        Ok(WebKv { tensors, len })
    }

    pub(super) fn present_names(&self) -> Array {
        self.signature
            .past
            .iter()
            .flat_map(|p| [&p.present_key, &p.present_value])
            .map(|n| JsValue::from_str(n))
            .collect()
    }
}
