//! The browser runtime: onnxruntime-web 1.30 through our own bindings.
//!
//! On WebGPU every `present.*` of a run that keeps its past stays a GPU
//! buffer and becomes the next run's `past_key_values.*`; a readout run
//! fetches only `logits`, written into a buffer this engine allocated on the
//! shared device, where the WGSL kernel (spec §8) reads the letters and the
//! row's log-sum-exp: only those floats are mapped back. On the WASM backend
//! the past lives in memory and the logits come to the host.

mod gpu_read;
mod io;
pub mod ort;
mod runtime_impl;

use crate::platform::js;
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
use crate::core::read::logits::Logits;
use crate::core::read::slots::{from_gathered, HeadColumns};
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
    meter: super::Meter,
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
    /// A diagnostic's armed loss: the device is destroyed once the run this
    /// many runs from now has started (0: none armed).
    lose_in_run: Cell<u32>,
}

fn run_err(m: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Run(m.to_string())
}

fn dtype_of(meta: &JsValue, name: &str) -> Result<(Dtype, Vec<i64>), RuntimeError> {
    let ty = js::get(meta, "type").as_string().unwrap_or_default();
    let d = match ty.as_str() {
        "float32" => Dtype::F32,
        "float16" => Dtype::F16,
        other => {
            return Err(RuntimeError::Signature(format!(
                "{name} is {other:?}; float32 or float16 expected"
            )))
        }
    };
    let shape = js::get(meta, "shape");
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
        .find(|m| js::get(m, "name").as_string().as_deref() == Some(name))
}

fn names(list: &Array) -> Vec<String> {
    list.iter()
        .filter_map(|m| js::get(&m, "name").as_string())
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
                js::set(&e, "name", &"webgpu".into());
                let d = dev.js_device().ok_or_else(|| {
                    RuntimeError::Gpu("the wgpu device has no WebGPU handle".into())
                })?;
                js::set(&e, "device", &d);
                JsValue::from(e)
            }
            // onnxruntime-web creates its own device (with every feature the
            // adapter has, subgroups included); logits are then downloaded.
            (Backend::WebGpu, None) => {
                let e = Object::new();
                js::set(&e, "name", &"webgpu".into());
                JsValue::from(e)
            }
            (Backend::Wasm, _) => JsValue::from_str("wasm"),
        };
        js::set(&so, "executionProviders", &Array::of1(&ep));
        js::set(&so, "graphOptimizationLevel", &"all".into());
        if opts.profiling {
            js::set(&so, "enableProfiling", &JsValue::TRUE);
        }
        let ext = Array::new();
        for (path, data) in &model.external {
            let o = Object::new();
            js::set(&o, "path", &JsValue::from_str(path));
            js::set(&o, "data", data);
            ext.push(&o);
        }
        if ext.length() > 0 {
            js::set(&so, "externalData", &ext);
        }
        if opts.backend == Backend::WebGpu {
            // present.* stay on the GPU as the next run's past; anything
            // else fetched to the GPU is downloaded or read there by our kernel.
            js::set(&so, "preferredOutputLocation", &"gpu-buffer".into());
        }
        let session = opts
            .ort
            .create_session(&model.graph, &so)
            .await
            .map_err(|m| RuntimeError::Load {
                path: "model.onnx".into(),
                message: m.0,
            })?;
        let (inputs, outputs) = (session.input_metadata(), session.output_metadata());
        let past0 = find_meta(&inputs, "past_key_values.0.key").ok_or_else(|| {
            RuntimeError::Signature(format!(
                "no past_key_values.0.key input (inputs: {:?})",
                names(&inputs)
            ))
        })?;
        let (kv_dtype, declared) = dtype_of(&past0, "past_key_values.0.key")?;
        let kv_shape = Signature::resolve_kv_shape(declared, model.kv_dims)?;
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
            meter: super::Meter::new(),
            live,
            logits_buf: None,
            model,
            session_options: so,
            recreated: 0,
            js_device,
            lost,
            lose_in_run: Cell::new(0),
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
        // A lost device can leave the release pending: the engine is gone either way.
        let _ = self.unless_lost(self.session.release()).await;
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
        let d = self.destroy_device()?;
        if let Some(p) = crate::gpu::web::lost_promise(d) {
            let _ = wasm_bindgen_futures::JsFuture::from(p).await;
        }
        // The watcher runs as its own task; give it the turn it needs.
        let _ = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&JsValue::UNDEFINED))
            .await;
        Ok(())
    }

    /// Arms a loss in flight (tests of spec §12): the device is destroyed
    /// right after the `n`th run from now has been handed to onnxruntime-web,
    /// so the call that made that run is mid-way when the device goes.
    pub fn lose_device_during_run(&self, n: u32) -> Result<(), RuntimeError> {
        self.js_device
            .as_ref()
            .ok_or_else(|| RuntimeError::Gpu("no shared WebGPU device to lose".into()))?;
        self.lose_in_run.set(n);
        Ok(())
    }

    /// `GPUDevice.destroy()` on the shared device; returns the device.
    fn destroy_device(&self) -> Result<&JsValue, RuntimeError> {
        let d = self
            .js_device
            .as_ref()
            .ok_or_else(|| RuntimeError::Gpu("no shared WebGPU device to lose".into()))?;
        let destroy = js::get(d, "destroy")
            .dyn_into::<js_sys::Function>()
            .map_err(|_| RuntimeError::Gpu("GPUDevice.destroy is missing".into()))?;
        destroy
            .call0(d)
            .map_err(|e| RuntimeError::Gpu(format!("GPUDevice.destroy(): {e:?}")))?;
        Ok(d)
    }

    /// Counts a started run against an armed loss, and loses the device on
    /// the one it names.
    fn injected_loss(&self) {
        match self.lose_in_run.get() {
            0 => {}
            1 => {
                self.lose_in_run.set(0);
                let _ = self.destroy_device();
            }
            n => self.lose_in_run.set(n - 1),
        }
    }

    /// `failure`, or `device_lost` when a lost device is behind it. A run
    /// on a destroyed device can fail before the browser has resolved
    /// `GPUDevice.lost`, so the loss gets one turn of the event loop to show.
    pub(super) async fn loss_behind(&self, failure: RuntimeError) -> RuntimeError {
        if let Err(lost) = self.check_device() {
            return lost;
        }
        if self.js_device.is_none() {
            // No shared device (the WASM backend): nothing to wait for.
            return failure;
        }
        let turn = js_sys::Promise::new(&mut |resolve, _| {
            let set_timeout = js::get(&js_sys::global(), "setTimeout");
            if let Some(f) = set_timeout.dyn_ref::<js_sys::Function>() {
                let _ = f.call2(&JsValue::UNDEFINED, &resolve, &JsValue::from(0));
            } else {
                let _ = resolve.call0(&JsValue::UNDEFINED);
            }
        });
        match self
            .unless_lost(wasm_bindgen_futures::JsFuture::from(turn))
            .await
        {
            Err(lost) => lost,
            Ok(_) => failure,
        }
    }

    /// Awaits `work` unless the shared device is lost first. A device lost
    /// mid-run can leave onnxruntime-web's run, a tensor's download or a
    /// buffer's mapping pending for ever; the caller gets `device_lost` at
    /// once instead, and the abandoned promise is dropped.
    async fn unless_lost<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, RuntimeError> {
        let Some(lost) = self
            .js_device
            .as_ref()
            .and_then(crate::gpu::web::lost_promise)
        else {
            return Ok(work.await);
        };
        let lost = wasm_bindgen_futures::JsFuture::from(lost);
        let work = std::pin::pin!(work);
        match futures_util::future::select(work, lost).await {
            futures_util::future::Either::Left((done, _)) => Ok(done),
            futures_util::future::Either::Right((info, _)) => Err(RuntimeError::DeviceLost(
                crate::gpu::web::lost_reason(&info.unwrap_or(JsValue::UNDEFINED)),
            )),
        }
    }
}
