//! Thin bindings to onnxruntime-web 1.30 (the WebGPU build, which also
//! carries the WASM backend). Only what the runtime uses: session create
//! from bytes with external data, run with an explicit list of fetched
//! outputs, tensors from typed arrays and from GPU buffers, and the tensor
//! accessors. onnxruntime-web is a peer dependency: the caller's bundler or
//! import map resolves `onnxruntime-web` and `onnxruntime-web/webgpu`,
//! else (a Worker, which no import map reaches) `ortBase` serves them.

use js_sys::{Array, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen(module = "/js/ort_modules.js")]
extern "C" {
    #[wasm_bindgen(js_name = ortModule)]
    fn ort_module(backend: &str, ort_base: Option<String>) -> Promise;
}

// Instance methods are structural: they work on objects of either build.
#[wasm_bindgen]
extern "C" {
    pub type InferenceSession;

    #[wasm_bindgen(method, js_name = run, catch)]
    fn run_raw(
        this: &InferenceSession,
        feeds: &Object,
        fetches: &JsValue,
    ) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, js_name = release, catch)]
    fn release_raw(this: &InferenceSession) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, getter, js_name = inputMetadata)]
    pub fn input_metadata(this: &InferenceSession) -> Array;

    #[wasm_bindgen(method, getter, js_name = outputMetadata)]
    pub fn output_metadata(this: &InferenceSession) -> Array;

    #[wasm_bindgen(method, js_name = endProfiling)]
    pub fn end_profiling(this: &InferenceSession);

    #[derive(Clone)]
    pub type Tensor;

    #[wasm_bindgen(method, getter)]
    fn dims(this: &Tensor) -> Array;

    #[wasm_bindgen(method, getter, js_name = type)]
    pub fn dtype(this: &Tensor) -> String;

    #[wasm_bindgen(method, getter)]
    pub fn location(this: &Tensor) -> String;

    #[wasm_bindgen(method, js_name = getData, catch)]
    fn get_data_raw(this: &Tensor) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method)]
    pub fn dispose(this: &Tensor);
}

/// One onnxruntime-web build's namespace (`InferenceSession`, `Tensor`, `env`).
#[derive(Clone)]
pub struct Ort {
    ns: JsValue,
}

impl Ort {
    /// Imports the build for `backend` ("webgpu" or "wasm"): by its bare
    /// name, else (where that does not resolve, as in a Worker) from `ort_base`.
    pub async fn import(backend: &str, ort_base: Option<&str>) -> Result<Ort, JsFailure> {
        let ns = JsFuture::from(ort_module(backend, ort_base.map(str::to_owned)))
            .await
            .map_err(|e| {
                JsFailure(format!(
                    "import onnxruntime-web ({backend} build): {}",
                    message(&e)
                ))
            })?;
        Ok(Ort { ns })
    }

    pub fn env(&self) -> JsValue {
        get(&self.ns, "env")
    }

    fn class(&self, name: &str) -> Result<js_sys::Function, JsFailure> {
        get(&self.ns, name)
            .dyn_into()
            .map_err(|_| JsFailure(format!("onnxruntime-web has no {name}")))
    }

    pub async fn create_session(
        &self,
        model: &js_sys::Uint8Array,
        options: &Object,
    ) -> Result<InferenceSession, JsFailure> {
        let cls = self.class("InferenceSession")?;
        let create: js_sys::Function = get(&cls, "create")
            .dyn_into()
            .map_err(|_| JsFailure("InferenceSession.create is missing".into()))?;
        let p = create
            .call2(&cls, model, options)
            .map(|v| v.unchecked_into::<Promise>());
        Ok(settle(p).await?.unchecked_into())
    }

    pub fn tensor(&self, dtype: &str, data: &JsValue, dims: &[usize]) -> Result<Tensor, JsFailure> {
        let cls = self.class("Tensor")?;
        let args: Array = [
            JsValue::from_str(dtype),
            data.clone(),
            dims_array(dims).into(),
        ]
        .iter()
        .collect();
        Reflect::construct(&cls, &args)
            .map(|t| t.unchecked_into())
            .map_err(|e| JsFailure::from_js(&e))
    }

    /// A tensor over a `GPUBuffer` the caller owns (onnxruntime-web writes
    /// a pre-allocated output into it).
    pub fn tensor_from_gpu_buffer(
        &self,
        buffer: &JsValue,
        dtype: &str,
        dims: &[usize],
    ) -> Result<Tensor, JsFailure> {
        let cls = self.class("Tensor")?;
        let f: js_sys::Function = get(&cls, "fromGpuBuffer")
            .dyn_into()
            .map_err(|_| JsFailure("Tensor.fromGpuBuffer is missing".into()))?;
        let o = Object::new();
        set(&o, "dataType", &JsValue::from_str(dtype));
        set(&o, "dims", &dims_array(dims));
        f.call2(&cls, buffer, &o)
            .map(|t| t.unchecked_into())
            .map_err(|e| JsFailure::from_js(&e))
    }
}
use crate::platform::js::{get, message, set, JsFailure};

async fn settle(p: Result<Promise, JsValue>) -> Result<JsValue, JsFailure> {
    let p = p.map_err(|e| JsFailure::from_js(&e))?;
    JsFuture::from(p).await.map_err(|e| JsFailure::from_js(&e))
}

impl InferenceSession {
    /// Runs with `fetches`: an array of output names, or an object mapping
    /// each wanted output to a pre-allocated tensor (or null).
    ///
    /// The run starts before this returns (the JS call is made here, not at
    /// the first poll), so a caller can act while it is in flight.
    pub fn run(
        &self,
        feeds: &Object,
        fetches: &JsValue,
    ) -> impl std::future::Future<Output = Result<Object, JsFailure>> + 'static {
        let started = self.run_raw(feeds, fetches);
        async move { Ok(settle(started).await?.unchecked_into()) }
    }

    pub async fn release(&self) -> Result<(), JsFailure> {
        settle(self.release_raw()).await.map(|_| ())
    }
}

impl Tensor {
    pub fn shape(&self) -> Vec<usize> {
        self.dims()
            .iter()
            .map(|d| d.as_f64().unwrap_or(-1.0) as usize)
            .collect()
    }

    /// Downloads the data (a typed array); GPU tensors are copied to the host.
    pub async fn data(&self) -> Result<JsValue, JsFailure> {
        settle(self.get_data_raw()).await
    }
}

fn dims_array(dims: &[usize]) -> Array {
    dims.iter().map(|&d| JsValue::from_f64(d as f64)).collect()
}
