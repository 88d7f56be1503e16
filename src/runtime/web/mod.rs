//! The browser runtime: onnxruntime-web 1.30 through our own bindings.
//!
//! On WebGPU every `present.*` of a run that keeps its past stays a GPU
//! buffer and becomes the next run's `past_key_values.*`; a readout run
//! fetches only `logits`, written into a buffer this engine allocated on the
//! shared device, where the WGSL kernel (spec §8) reads the letters and the
//! row's log-sum-exp: only those floats are mapped back. On the WASM backend
//! the past lives in memory and the logits come to the host.

pub mod ort;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use half::f16;
use js_sys::{Array, Object};
use wasm_bindgen::{JsCast, JsValue};

use self::ort::{InferenceSession, Ort, Tensor};
use super::{
    Dtype, Gathered, ReadSpec, RowRead, RunOutput, Runtime, RuntimeError, Signature, Step,
    HIDDEN_OUTPUT,
};
use crate::core::logits::Logits;
use crate::core::readout::{from_gathered, read_slots, HeadColumns};
use crate::gpu::web::SharedDevice;
use crate::gpu::{GpuReadout, RowTask};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    WebGpu,
    Wasm,
}

/// A past in the browser: one onnxruntime-web tensor per `past_key_values.*`
/// input (GPU buffers on WebGPU), in signature order.
pub struct WebKv {
    tensors: Vec<Tensor>,
    len: usize,
}

/// What the loader hands the runtime.
pub struct WebModel {
    pub graph: js_sys::Uint8Array,
    /// `(location written in the graph, bytes)` for each external-data file.
    pub external: Vec<(String, js_sys::Uint8Array)>,
    /// kv heads, head dim (from config.json) for an empty past.
    pub kv_dims: [usize; 2],
}

pub struct WebOptions {
    pub backend: Backend,
    /// The onnxruntime-web build for `backend`, already configured.
    pub ort: Ort,
    /// The shared device (WebGPU only).
    pub device: Option<SharedDevice>,
    /// onnxruntime-web's profiler (WASM-backend studies).
    pub profiling: bool,
}

pub struct WebRuntime {
    ort: Ort,
    session: InferenceSession,
    signature: Signature,
    backend: Backend,
    /// The WGSL readout on the shared device, when logits can be left there.
    gpu: Option<GpuReadout>,
    /// Why the GPU readout is not used, when it is not.
    readout_note: String,
    /// `logits` dims the graph fixes (`None` where symbolic).
    logits_rows: Option<usize>,
    logits_width: Option<usize>,
    adapter: String,
    read_back: u64,
    /// Runtime-held tensors: every kept `present.*` not yet disposed.
    live: Rc<Cell<usize>>,
    /// A pre-allocated logits buffer, reused while the size is unchanged.
    logits_buf: Option<wgpu::Buffer>,
    /// What the session was created from: a refused run on WebGPU leaves
    /// onnxruntime-web's session unusable (every later run repeats the
    /// refusal, measured), so the session is recreated from these.
    model: WebModel,
    session_options: Object,
    /// Sessions recreated after a refused run.
    pub recreated: usize,
    /// The shared device's `GPUDevice` and its lost flag (WebGPU with the shared device).
    js_device: Option<JsValue>,
    lost: Option<Rc<RefCell<Option<String>>>>,
}

fn run_err(m: impl Into<String>) -> RuntimeError {
    RuntimeError::Run(m.into())
}

fn dtype_of(meta: &JsValue, name: &str) -> Result<(Dtype, Vec<i64>), RuntimeError> {
    let ty = ort::get(meta, "type").as_string().unwrap_or_default();
    let d = match ty.as_str() {
        "float32" => Dtype::F32,
        "float16" => Dtype::F16,
        other => {
            return Err(RuntimeError::Signature(format!(
                "{name} is {other:?}; float32 or float16 expected"
            )))
        }
    };
    let shape = ort::get(meta, "shape");
    let dims = shape
        .dyn_ref::<Array>()
        .map(|a| {
            a.iter()
                .map(|d| d.as_f64().map_or(-1, |v| v as i64))
                .collect()
        })
        .unwrap_or_default();
    Ok((d, dims))
}

fn find_meta(list: &Array, name: &str) -> Option<JsValue> {
    list.iter()
        .find(|m| ort::get(m, "name").as_string().as_deref() == Some(name))
}

fn names(list: &Array) -> Vec<String> {
    list.iter()
        .filter_map(|m| ort::get(&m, "name").as_string())
        .collect()
}

impl WebRuntime {
    pub async fn load(
        model: WebModel,
        opts: WebOptions,
        live: Rc<Cell<usize>>,
    ) -> Result<Self, RuntimeError> {
        let so = Object::new();
        let ep = match (&opts.backend, &opts.device) {
            (Backend::WebGpu, Some(dev)) => {
                let e = Object::new();
                ort::set(&e, "name", &"webgpu".into());
                let d = dev.js_device().ok_or_else(|| {
                    RuntimeError::Gpu("the wgpu device has no WebGPU handle".into())
                })?;
                ort::set(&e, "device", &d);
                JsValue::from(e)
            }
            // onnxruntime-web creates its own device (with every feature the
            // adapter has, subgroups included); logits are then downloaded.
            (Backend::WebGpu, None) => {
                let e = Object::new();
                ort::set(&e, "name", &"webgpu".into());
                JsValue::from(e)
            }
            (Backend::Wasm, _) => JsValue::from_str("wasm"),
        };
        ort::set(&so, "executionProviders", &Array::of1(&ep));
        ort::set(&so, "graphOptimizationLevel", &"all".into());
        if opts.profiling {
            ort::set(&so, "enableProfiling", &JsValue::TRUE);
        }
        let ext = Array::new();
        for (path, data) in &model.external {
            let o = Object::new();
            ort::set(&o, "path", &JsValue::from_str(path));
            ort::set(&o, "data", data);
            ext.push(&o);
        }
        if ext.length() > 0 {
            ort::set(&so, "externalData", &ext);
        }
        if opts.backend == Backend::WebGpu {
            // present.* stay on the GPU as the next run's past; anything
            // else fetched to the GPU is downloaded or read there by our kernel.
            ort::set(&so, "preferredOutputLocation", &"gpu-buffer".into());
        }
        let session = opts
            .ort
            .create_session(&model.graph, &so)
            .await
            .map_err(|m| RuntimeError::Load {
                path: "model.onnx".into(),
                message: m,
            })?;
        let (inputs, outputs) = (session.input_metadata(), session.output_metadata());
        let past0 = find_meta(&inputs, "past_key_values.0.key").ok_or_else(|| {
            RuntimeError::Signature(format!(
                "no past_key_values.0.key input (inputs: {:?})",
                names(&inputs)
            ))
        })?;
        let (kv_dtype, mut kv_shape) = dtype_of(&past0, "past_key_values.0.key")?;
        if kv_shape.len() != 4 {
            return Err(RuntimeError::Signature(format!("past_key_values.0.key has dims {kv_shape:?}; [batch, kv_heads, past, head_dim] expected")));
        }
        for (axis, want) in [(1, model.kv_dims[0]), (3, model.kv_dims[1])] {
            match kv_shape[axis] {
                d if d < 0 => kv_shape[axis] = want as i64,
                d if d as usize == want => {}
                d => {
                    return Err(RuntimeError::Signature(format!(
                        "past_key_values.0.key dim {axis} is {d} but config.json says {want}"
                    )))
                }
            }
        }
        let lmeta = find_meta(&outputs, "logits").ok_or_else(|| {
            RuntimeError::Signature(format!("no logits output (outputs: {:?})", names(&outputs)))
        })?;
        let (logits_dtype, lshape) = dtype_of(&lmeta, "logits")?;
        let fixed = |i: usize| {
            lshape
                .get(i)
                .copied()
                .filter(|&d| d > 0)
                .map(|d| d as usize)
        };
        let signature = Signature::from_io(
            names(&inputs),
            names(&outputs),
            kv_dtype,
            kv_shape,
            logits_dtype,
        )?;
        let js_device = opts.device.as_ref().and_then(|d| d.js_device());
        let lost = opts.device.as_ref().map(|d| d.lost.clone());
        let (gpu, readout_note, adapter) = match opts.device {
            Some(dev) => {
                let adapter = dev.adapter.clone();
                let readout = GpuReadout::new(dev.device, dev.queue).await.map_err(|e| RuntimeError::Gpu(e.to_string()))?;
                (Some(readout), String::new(), adapter)
            }
            None if opts.backend == Backend::WebGpu => (
                None,
                "host readSlots on downloaded logits (onnxruntime-web's own WebGPU device, not shared with the engine)".to_string(),
                "onnxruntime-web's own adapter".to_string(),
            ),
            None => (None, "host readSlots (WASM backend: logits are in memory)".to_string(), String::new()),
        };
        Ok(Self {
            ort: opts.ort,
            session,
            signature,
            backend: opts.backend,
            gpu,
            readout_note,
            logits_rows: fixed(1),
            logits_width: fixed(2),
            adapter,
            read_back: 0,
            live,
            logits_buf: None,
            model,
            session_options: so,
            recreated: 0,
            js_device,
            lost,
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Where the readout happens, in words.
    pub fn readout_path(&self) -> String {
        if self.gpu.is_some() {
            "WGSL kernel on the logits buffer, on the device shared with onnxruntime-web".into()
        } else {
            self.readout_note.clone()
        }
    }

    /// Ends onnxruntime-web's profiler (its report goes to the console).
    pub fn end_profiling(&self) {
        self.session.end_profiling();
    }

    pub async fn close(&self) {
        let _ = self.session.release().await;
    }

    fn i64_tensor(&self, v: &[i64]) -> Result<Tensor, RuntimeError> {
        let data = js_sys::BigInt64Array::new_with_length(v.len() as u32);
        data.copy_from(v);
        self.ort
            .tensor("int64", &data, &[1, v.len()])
            .map_err(run_err)
    }

    fn empty_past(&self) -> Result<Vec<Tensor>, RuntimeError> {
        let s = &self.signature.kv_shape;
        let dims = [1, s[1] as usize, 0, s[3] as usize];
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

    fn feeds(
        &self,
        step: &Step,
        past: Option<&WebKv>,
    ) -> Result<(Object, Vec<Tensor>), RuntimeError> {
        let sig = &self.signature;
        let feeds = Object::new();
        let mut temps = Vec::new();
        let mut put = |name: &str, t: Tensor, temp: bool| {
            ort::set(&feeds, name, &t);
            if temp {
                temps.push(t);
            }
        };
        put("input_ids", self.i64_tensor(&step.input_ids)?, true);
        match (&step.attention_mask, sig.has_attention_mask) {
            (Some(m), true) => put("attention_mask", self.i64_tensor(m)?, true),
            (None, false) => {}
            (m, has) => {
                return Err(run_err(format!(
                    "attention_mask given: {}, graph takes it: {has}",
                    m.is_some()
                )))
            }
        }
        match (&step.position_ids, sig.has_position_ids) {
            (Some(p), true) => put("position_ids", self.i64_tensor(p)?, true),
            (None, false) => {}
            (p, has) => {
                return Err(run_err(format!(
                    "position_ids given: {}, graph takes it: {has}",
                    p.is_some()
                )))
            }
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

    /// Why the shared device is gone, once the browser said so.
    pub fn device_lost(&self) -> Option<String> {
        self.lost.as_ref().and_then(|l| l.borrow().clone())
    }

    /// The flag `device_lost` reads, for callers that must see it while a run holds the runtime.
    pub fn lost_flag(&self) -> Option<Rc<RefCell<Option<String>>>> {
        self.lost.clone()
    }

    fn check_device(&self) -> Result<(), RuntimeError> {
        self.device_lost()
            .map_or(Ok(()), |why| Err(RuntimeError::DeviceLost(why)))
    }

    /// Destroys the shared device, as a lost device would end it (tests of
    /// spec §12). Resolves once the browser has reported it lost.
    pub async fn lose_device(&self) -> Result<(), RuntimeError> {
        let d = self
            .js_device
            .as_ref()
            .ok_or_else(|| RuntimeError::Gpu("no shared WebGPU device to lose".into()))?;
        let destroy = ort::get(d, "destroy")
            .dyn_into::<js_sys::Function>()
            .map_err(|_| RuntimeError::Gpu("GPUDevice.destroy is missing".into()))?;
        destroy
            .call0(d)
            .map_err(|e| RuntimeError::Gpu(format!("GPUDevice.destroy(): {e:?}")))?;
        if let Ok(p) = ort::get(d, "lost").dyn_into::<js_sys::Promise>() {
            let _ = wasm_bindgen_futures::JsFuture::from(p).await;
        }
        // The watcher runs as its own task; give it the turn it needs.
        let _ = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&JsValue::UNDEFINED))
            .await;
        Ok(())
    }

    async fn run_fetch(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        fetches: &JsValue,
    ) -> Result<Object, RuntimeError> {
        self.check_device()?;
        let (feeds, temps) = self.feeds(step, past)?;
        let out = self.session.run(&feeds, fetches).await;
        for t in temps {
            t.dispose();
        }
        match out {
            Ok(o) => Ok(o),
            Err(m) => {
                self.check_device()?;
                self.recover().await;
                Err(run_err(m))
            }
        }
    }

    /// After a refused run on WebGPU: a new session from the same bytes.
    /// Live pasts stay valid (onnxruntime-web hands GPU outputs to the caller).
    async fn recover(&mut self) {
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

    fn output(out: &Object, name: &str) -> Result<Tensor, RuntimeError> {
        let v = ort::get(out, name);
        if v.is_undefined() || v.is_null() {
            return Err(run_err(format!("{name} missing from the outputs")));
        }
        Ok(v.unchecked_into())
    }

    async fn download(&mut self, t: &Tensor, name: &str) -> Result<Logits, RuntimeError> {
        let dims = t.shape();
        let data = t.data().await.map_err(run_err)?;
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
        self.read_back += logits.byte_len() as u64;
        Ok(logits)
    }

    /// Downloads `last_hidden` from a run's outputs and disposes its tensor.
    async fn take_hidden(&mut self, out: &Object) -> Result<Logits, RuntimeError> {
        let t = Self::output(out, HIDDEN_OUTPUT)?;
        let h = self.download(&t, HIDDEN_OUTPUT).await;
        t.dispose();
        h
    }

    /// Takes the outputs of `names` as the new past, counting them live.
    fn keep_present(&self, out: &Object) -> Result<WebKv, RuntimeError> {
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

    fn present_names(&self) -> Array {
        self.signature
            .past
            .iter()
            .flat_map(|p| [&p.present_key, &p.present_value])
            .map(|n| JsValue::from_str(n))
            .collect()
    }

    /// A logits buffer of `bytes` on the shared device (reused when the size repeats).
    fn logits_buffer(&mut self, bytes: u64) -> Result<JsValue, RuntimeError> {
        let gpu = self
            .gpu
            .as_ref()
            .ok_or_else(|| RuntimeError::Gpu("no shared device".into()))?;
        let size = bytes.div_ceil(4) * 4;
        if self.logits_buf.as_ref().is_none_or(|b| b.size() != size) {
            self.logits_buf = Some(gpu.device().create_buffer(&wgpu::BufferDescriptor {
                label: Some("logits"),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
        }
        let buf = self
            .logits_buf
            .as_ref()
            .and_then(|b| b.as_webgpu())
            .ok_or_else(|| RuntimeError::Gpu("the logits buffer has no WebGPU handle".into()))?;
        Ok(JsValue::from(buf.clone()))
    }

    /// Runs `step` with its logits written into this engine's buffer on the
    /// shared device (and the presents kept on the GPU when asked for). The
    /// logits stay there for the kernel; the dims and dtype say how to read them.
    async fn run_into_gpu(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        keep_present: bool,
        width: usize,
    ) -> Result<(Object, [usize; 3], bool), RuntimeError> {
        self.check_device()?;
        let rows = self.logits_rows.unwrap_or(step.input_ids.len());
        let width = self.logits_width.unwrap_or(width);
        let f16 = self.signature.logits_dtype == Dtype::F16;
        let dims = [1usize, rows, width];
        let bytes = (rows * width * if f16 { 2 } else { 4 }) as u64;
        let raw = self.logits_buffer(bytes)?;
        let tensor = self
            .ort
            .tensor_from_gpu_buffer(&raw, if f16 { "float16" } else { "float32" }, &dims)
            .map_err(RuntimeError::Gpu)?;
        let fetches = Object::new();
        ort::set(&fetches, "logits", &tensor);
        if self.signature.exposes_hidden() {
            ort::set(&fetches, HIDDEN_OUTPUT, &JsValue::NULL);
        }
        if keep_present {
            for n in self.present_names().iter() {
                ort::set(&fetches, &n.as_string().unwrap_or_default(), &JsValue::NULL);
            }
        }
        let out = self
            .run_fetch(step, past, &fetches)
            .await
            .map_err(|e| match e {
                RuntimeError::Run(m) => RuntimeError::Run(format!(
                    "{m} (logits pre-allocated as {dims:?} on the shared device)"
                )),
                other => other,
            })?;
        Ok((out, dims, f16))
    }

    /// The kernel and the logits buffer `run_into_gpu` wrote.
    fn kernel(&self) -> Result<(&GpuReadout, &wgpu::Buffer), RuntimeError> {
        let gpu = self
            .gpu
            .as_ref()
            .ok_or_else(|| RuntimeError::Gpu("no shared device".into()))?;
        let buf = self
            .logits_buf
            .as_ref()
            .ok_or_else(|| RuntimeError::Gpu("no logits buffer".into()))?;
        Ok((gpu, buf))
    }

    /// A kernel failure, or the device loss behind it when there was one.
    fn kernel_failed(&self, e: crate::gpu::GpuError) -> RuntimeError {
        match self.check_device() {
            Err(lost) => lost,
            Ok(()) => RuntimeError::Gpu(e.to_string()),
        }
    }

    /// The kernel over the logits `run_into_gpu` left in our buffer.
    async fn read_rows_on_gpu(
        &mut self,
        dims: [usize; 3],
        f16: bool,
        tasks: &[RowTask<'_>],
    ) -> Result<Vec<crate::gpu::GpuSlots>, RuntimeError> {
        let (gpu, buf) = self.kernel()?;
        let g = match gpu.read_rows(buf, dims, f16, tasks).await {
            Ok(g) => g,
            Err(e) => return Err(self.kernel_failed(e)),
        };
        self.read_back += g.iter().map(|s| s.bytes_read_back as u64).sum::<u64>();
        Ok(g)
    }

    /// log p at each (row, token) of the logits `run_into_gpu` left in our buffer.
    async fn log_probs_in_gpu(
        &mut self,
        dims: [usize; 3],
        f16: bool,
        at: &[(usize, u32)],
    ) -> Result<Vec<f64>, RuntimeError> {
        let (gpu, buf) = self.kernel()?;
        let (lp, bytes) = match gpu.read_log_probs(buf, dims, f16, at).await {
            Ok(r) => r,
            Err(e) => return Err(self.kernel_failed(e)),
        };
        self.read_back += bytes as u64;
        Ok(lp)
    }

    /// The GPU path of `read`: logits into our buffer, the kernel reads them.
    async fn read_on_gpu(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        spec: &ReadSpec<'_>,
    ) -> Result<RowRead, RuntimeError> {
        let (out, dims, f16) = self
            .run_into_gpu(step, past, false, spec.head.width())
            .await?;
        let hidden = if self.signature.exposes_hidden() {
            Some(self.take_hidden(&out).await?)
        } else {
            None
        };
        let cols: Vec<u32> = spec.columns.iter().map(|&c| c as u32).collect();
        let want_lse = spec.allowed_mass && matches!(spec.head, HeadColumns::Vocab { .. });
        let task = RowTask {
            row: dims[1] - 1,
            columns: &cols,
        };
        let mut g = self.read_rows_on_gpu(dims, f16, &[task]).await?;
        let g = g.remove(0);
        let slots = from_gathered(g.logits, want_lse.then_some(g.log_sum_exp));
        Ok(RowRead {
            slots,
            dims: dims.to_vec(),
            hidden,
        })
    }

    /// The GPU path of `log_probs_at`: one task per (row, token), one
    /// dispatch, one float back per pair instead of the rows.
    async fn log_probs_on_gpu(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        keep_present: bool,
        at: &[(usize, u32)],
        width: usize,
    ) -> Result<Gathered<WebKv>, RuntimeError> {
        let (out, dims, f16) = self.run_into_gpu(step, past, keep_present, width).await?;
        let present = if keep_present {
            Some(self.keep_present(&out)?)
        } else {
            None
        };
        // The hidden state is fetched with every run of such a graph and not
        // wanted here; a missing one must not strand the kept past.
        if self.signature.exposes_hidden() {
            match Self::output(&out, HIDDEN_OUTPUT) {
                Ok(t) => t.dispose(),
                Err(e) => {
                    if let Some(p) = present {
                        self.release(p);
                    }
                    return Err(e);
                }
            }
        }
        match self.log_probs_in_gpu(dims, f16, at).await {
            Ok(log_probs) => Ok(Gathered {
                log_probs,
                dims: dims.to_vec(),
                present,
            }),
            Err(e) => {
                if let Some(p) = present {
                    self.release(p);
                }
                Err(e)
            }
        }
    }
}

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
        let out = self.run(step, past, false).await?;
        let slots = read_slots(&out.logits, spec.head, spec.columns, spec.allowed_mass)?;
        Ok(RowRead {
            slots,
            dims: out.logits.dims,
            hidden: out.hidden,
        })
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
        super::log_probs_on_host(self, step, past, keep_present, at).await
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
            ort::set(&feeds, "attention_mask", &temps[1]);
        }
        ort::set(&feeds, "input_ids", &temps[0]);
        // The past repeated to the batch, as host tensors.
        for (pair, t) in self
            .signature
            .past
            .iter()
            .flat_map(|p| [&p.past_key, &p.past_value])
            .zip(&kv.tensors)
        {
            let mut dims = t.shape();
            let host = t.data().await.map_err(run_err)?;
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
            ort::set(&feeds, pair, &bt);
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

    fn release(&mut self, kv: WebKv) {
        self.live
            .set(self.live.get().saturating_sub(kv.tensors.len()));
        for t in kv.tensors {
            t.dispose();
        }
    }

    fn bytes_read_back(&self) -> u64 {
        self.read_back
    }

    fn now_ms(&self) -> f64 {
        let perf = ort::get(&js_sys::global(), "performance");
        js_sys::Reflect::get(&perf, &"now".into())
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
            .and_then(|f| f.call0(&perf).ok())
            .and_then(|v| v.as_f64())
            .unwrap_or_else(js_sys::Date::now)
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
