//! The JS surface (ARCHITECTURE.md, `bindings`): converts between JS values and the
//! engine's types, and queues calls. It decides nothing: backend choice,
//! proofs and readout live below it.
//!
//! Every call on one engine (and its states) takes the engine's async lock
//! in call order, so calls are queued, never interleaved. Every refusal is a
//! JS `Error` whose message names the field and the limit; a refused call
//! leaves the engine usable.

#[cfg(feature = "diagnostics")]
mod bench;
mod build;
mod choose;
mod convert;
#[cfg(feature = "diagnostics")]
mod diagnostics;
mod error;
mod fetch;
mod files;
mod kept;
mod kept_prefix;
mod limits;
mod load;
mod options;
mod resolve;
#[cfg(target_feature = "atomics")]
mod threads;
mod ts_types;

use crate::platform::js;
use std::cell::Cell;
use std::rc::Rc;

use futures_util::lock::Mutex;
use js_sys::{Function, Promise, Uint8Array};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use self::convert::{core_err, engine_err, fixture_from_js, load_err, refuse, to_js};
use self::load::LoadReport;
use self::options::{load_options, prefill_options, score_options};
use crate::core::input::criteria::{Criterion, StateSpec};
use crate::core::input::prefix::PrefixSpec;
use crate::core::model::backend_choice::Requested;
use crate::engine::{EngineInfo, PrefixId, StateId};
use crate::platform::js::get;
use load::WebEngine;

#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

struct Shared {
    /// `None` once the engine is disposed.
    engine: Mutex<Option<WebEngine>>,
    /// `threads` is brought up to date after each call: a kernel worker
    /// that dies (a panic) no longer counts.
    report: std::cell::RefCell<LoadReport>,
    live: Rc<Cell<usize>>,
    /// The engine's report at load, for the synchronous `info()` (it does not
    /// change afterwards; the counters beside it do).
    info: std::cell::RefCell<Option<EngineInfo>>,
    read_back: Cell<u64>,
    /// The shared device's lost flag (WebGPU), readable while a call holds the engine.
    lost: Option<Rc<std::cell::RefCell<Option<String>>>>,
}

impl Shared {
    async fn with<T>(
        self: &Rc<Self>,
        f: impl AsyncFnOnce(&mut WebEngine) -> Result<T, crate::engine::EngineError>,
    ) -> Result<T, JsValue> {
        let mut guard = self.engine.lock().await;
        let engine = guard.as_mut().ok_or_else(|| {
            refuse(
                "engine: disposed (load a new one)",
                "engine_disposed",
                "engine",
            )
        })?;
        let r = f(engine).await.map_err(engine_err);
        self.read_back.set(engine.bytes_read_back());
        // Rebuilt only when a kernel worker died during the call: the
        // report is otherwise what the load made.
        if let Some(own) = engine.runtime().own() {
            let threads = Some(own.threads() as f64);
            if self.report.borrow().threads != threads {
                self.report.borrow_mut().threads = threads;
                self.info.replace(Some(engine.info()));
            }
        }
        r
    }
}

/// A loaded model with its proven conventions.
#[wasm_bindgen]
pub struct Engine {
    shared: Rc<Shared>,
}

fn now() -> f64 {
    // One clock for the bindings' own timings (load, each call's `ms`).
    thread_local!(static CLOCK: crate::platform::Clock = crate::platform::Clock::new());
    CLOCK.with(|c| c.ms())
}

#[wasm_bindgen]
impl Engine {
    /// Loads `source` (`".../models.json#id"` or a model directory URL),
    /// proves its conventions, and returns the engine.
    pub async fn load(
        #[wasm_bindgen(unchecked_param_type = "string")] source: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "LoadOptions")] options: JsValue,
    ) -> Result<Engine, JsValue> {
        let source = source.as_string().ok_or_else(|| {
            refuse(
                "source: must be a string (\"models.json#id\" or a model directory URL)",
                "invalid_input",
                "source",
            )
        })?;
        let (opts, progress) = load_options(&options)?;
        let report = |file: &str, loaded: f64, total: f64, source: fetch::Source| {
            if let Some(f) = &progress {
                let o = js_sys::Object::new();
                js::set(&o, "file", &file.into());
                js::set(&o, "loaded", &loaded.into());
                js::set(&o, "total", &total.into());
                js::set(&o, "source", &source.name().into());
                let _ = f.call1(&JsValue::NULL, &o);
            }
        };
        let loaded = load::load(&source, opts, &report, &now)
            .await
            .map_err(load_err)?;
        let info = loaded.engine.info();
        let lost = loaded.engine.runtime().onnx().and_then(|r| r.lost_flag());
        // What the load-time proofs read back counts from the start, so a
        // caller's before/after difference around a call is that call's.
        let read_back = Cell::new(loaded.engine.bytes_read_back());
        Ok(Engine {
            shared: Rc::new(Shared {
                engine: Mutex::new(Some(loaded.engine)),
                report: std::cell::RefCell::new(loaded.report),
                live: loaded.live,
                info: std::cell::RefCell::new(Some(info)),
                read_back,
                lost,
            }),
        })
    }

    /// Prefills a state (instruction + evidence) and keeps its KV.
    #[wasm_bindgen(unchecked_return_type = "Promise<State>")]
    pub fn prefill(
        &self,
        #[wasm_bindgen(unchecked_param_type = "StateInput")] state: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "PrefillOptions")] options: JsValue,
    ) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let spec: StateSpec = fixture_from_js(state, "state")?;
            let req = prefill_options(&options)?;
            let (id, tokens) = shared
                .with(async |e| {
                    let id = e.prefill_with(&spec, &req).await?;
                    Ok((id, e.head_tokens(id)?))
                })
                .await?;
            Ok(State::new(shared, id, tokens).into())
        })
    }

    /// Prefills a shared prefix (a rubric's instruction and worked
    /// examples) once; states built on it run only their evidence. With
    /// `keep: true` it is restored from the browser's storage when a copy
    /// this engine accepts is there, and stored after its prefill otherwise
    /// (`prefix.storage` says which, and why).
    #[wasm_bindgen(unchecked_return_type = "Promise<Prefix>")]
    pub fn prefix(
        &self,
        #[wasm_bindgen(unchecked_param_type = "PrefixInput")] spec: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "PrefixOptions")] options: JsValue,
    ) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let spec: PrefixSpec = fixture_from_js(spec, "prefix")?;
            let (req, keep) = options::prefix_options(&options)?;
            if keep {
                let entry = shared.report.borrow().model.clone();
                let (id, tokens, storage) =
                    kept_prefix::kept_prefix(&shared, &entry, &spec, &req, &now).await?;
                return Ok(Prefix::held(shared, id, tokens, Some(storage)));
            }
            let (id, tokens) = shared
                .with(async |e| {
                    let id = e.prefix(&spec, &req).await?;
                    Ok((id, e.prefix_tokens(id)?))
                })
                .await?;
            Ok(Prefix::held(shared, id, tokens, None))
        })
    }

    /// A prefix from bytes `prefix.save()` wrote, on this engine or one
    /// loaded later from the same models.json files. Given `spec` (and
    /// `options`), the prefix they would prefill must be the stored one.
    /// Refused with `stale_prefix`, naming the field that differs, when the
    /// bytes come from another model, engine, runtime or prompt, or were
    /// truncated or altered.
    #[wasm_bindgen(js_name = restorePrefix, unchecked_return_type = "Promise<Prefix>")]
    pub fn restore_prefix(
        &self,
        bytes: Uint8Array,
        #[wasm_bindgen(unchecked_optional_param_type = "PrefixInput")] spec: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "PrefillOptions")] options: JsValue,
    ) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let spec: Option<PrefixSpec> = if spec.is_undefined() || spec.is_null() {
                None
            } else {
                Some(fixture_from_js(spec, "prefix")?)
            };
            let req = prefill_options(&options)?;
            let bytes = bytes.to_vec();
            let (id, tokens) = shared
                .with(async |e| {
                    let id = e
                        .restore_prefix(&bytes, spec.as_ref().map(|s| (s, &req)))
                        .await?;
                    Ok((id, e.prefix_tokens(id)?))
                })
                .await?;
            Ok(Prefix::held(shared, id, tokens, None))
        })
    }

    /// Model, backend and why, proof report, run limit, readback counters.
    #[wasm_bindgen(unchecked_return_type = "EngineInfo")]
    pub fn info(&self) -> Result<JsValue, JsValue> {
        #[derive(Serialize)]
        struct Info<'a> {
            #[serde(flatten)]
            engine: &'a Option<EngineInfo>,
            #[serde(flatten)]
            load: &'a LoadReport,
            run_limit: Option<usize>,
            bytes_read_back: u64,
            live_gpu_tensors: usize,
            /// Why the GPU device was lost, once it was.
            device_lost: Option<String>,
        }
        let engine = self.shared.info.borrow();
        let report = self.shared.report.borrow();
        let run_limit = engine.as_ref().map(|i| i.proof.run_limit);
        let device_lost = self.shared.lost.as_ref().and_then(|l| l.borrow().clone());
        to_js(&Info {
            engine: &engine,
            load: &report,
            run_limit,
            bytes_read_back: self.shared.read_back.get(),
            live_gpu_tensors: self.shared.live.get(),
            device_lost,
        })
    }

    /// Tensors the runtime holds for live states (GPU buffers on WebGPU).
    #[wasm_bindgen(js_name = liveGpuTensors)]
    pub fn live_gpu_tensors(&self) -> usize {
        self.shared.live.get()
    }

    /// Bytes copied out of onnxruntime-web's tensors since load, counted in the runtime.
    #[wasm_bindgen(js_name = bytesReadBack)]
    pub fn bytes_read_back(&self) -> f64 {
        self.shared.read_back.get() as f64
    }

    /// Releases every state and the session; later calls are refused.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn dispose(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let mut guard = shared.engine.lock().await;
            if let Some(mut e) = guard.take() {
                e.dispose_all();
                if let Some(r) = e.runtime().onnx() {
                    r.close().await;
                }
            }
            Ok(JsValue::UNDEFINED)
        })
    }
}

/// A prefilled shared prefix: states built on it share its past.
#[wasm_bindgen]
pub struct Prefix {
    shared: Rc<Shared>,
    id: PrefixId,
    tokens: usize,
    storage: Option<kept_prefix::PrefixStorage>,
}

impl Prefix {
    /// The JS handle of prefix `id` on the engine `shared` holds.
    fn held(
        shared: Rc<Shared>,
        id: PrefixId,
        tokens: usize,
        storage: Option<kept_prefix::PrefixStorage>,
    ) -> JsValue {
        Prefix {
            shared,
            id,
            tokens,
            storage,
        }
        .into()
    }
}

#[wasm_bindgen]
impl Prefix {
    /// Tokens of the prefix (instruction and worked examples).
    #[wasm_bindgen(getter)]
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// A state whose head is this prefix then `state`'s evidence; only the
    /// evidence is run. The state gives no instruction of its own.
    #[wasm_bindgen(unchecked_return_type = "Promise<State>")]
    pub fn prefill(
        &self,
        #[wasm_bindgen(unchecked_param_type = "StateInput")] state: JsValue,
    ) -> Promise {
        let (shared, prefix) = (self.shared.clone(), self.id);
        future_to_promise(async move {
            let spec: StateSpec = fixture_from_js(state, "state")?;
            let (id, tokens) = shared
                .with(async |e| {
                    let id = e.prefill_on(prefix, &spec).await?;
                    Ok((id, e.head_tokens(id)?))
                })
                .await?;
            Ok(State::new(shared, id, tokens).into())
        })
    }

    /// Where a prefix made with `keep: true` came from (`from`: "storage"
    /// or "prefill"), whether it is stored now, and why not; null otherwise.
    #[wasm_bindgen(getter, unchecked_return_type = "PrefixStorage | null")]
    pub fn storage(&self) -> Result<JsValue, JsValue> {
        match &self.storage {
            Some(s) => to_js(s),
            None => Ok(JsValue::NULL),
        }
    }

    /// The prefix's past and key as bytes, for `engine.restorePrefix` in a
    /// later visit (kept wherever the page keeps bytes).
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint8Array>")]
    pub fn save(&self) -> Promise {
        let (shared, id) = (self.shared.clone(), self.id);
        future_to_promise(async move {
            let bytes = shared.with(async |e| e.export_prefix(id).await).await?;
            Ok(Uint8Array::from(bytes.as_slice()).into())
        })
    }

    /// Releases the prefix's KV; refused while states built on it live.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn dispose(&self) -> Promise {
        let (shared, id) = (self.shared.clone(), self.id);
        future_to_promise(async move {
            shared.with(async |e| e.dispose_prefix(id)).await?;
            Ok(JsValue::UNDEFINED)
        })
    }
}

/// A prefilled state: criteria are scored against its cached KV.
#[wasm_bindgen]
pub struct State {
    shared: Rc<Shared>,
    id: StateId,
    tokens: Rc<Cell<usize>>,
}

impl State {
    fn new(shared: Rc<Shared>, id: StateId, tokens: usize) -> Self {
        State {
            shared,
            id,
            tokens: Rc::new(Cell::new(tokens)),
        }
    }
}

#[wasm_bindgen]
impl State {
    /// Tokens of the prefilled head (instruction + evidence), as it has grown.
    #[wasm_bindgen(getter)]
    pub fn tokens(&self) -> usize {
        self.tokens.get()
    }

    /// Appends `text` to the evidence as a new line; only its tokens are run.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn extend(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue,
    ) -> Promise {
        let (shared, id, tokens) = (self.shared.clone(), self.id, self.tokens.clone());
        future_to_promise(async move {
            let text = text
                .as_string()
                .ok_or_else(|| refuse("text: must be a string", "invalid_input", "text"))?;
            let n = shared
                .with(async |e| {
                    e.extend(id, &text).await?;
                    e.head_tokens(id)
                })
                .await?;
            tokens.set(n);
            Ok(JsValue::UNDEFINED)
        })
    }

    #[wasm_bindgen(unchecked_return_type = "Promise<Decision>")]
    pub fn score(
        &self,
        #[wasm_bindgen(unchecked_param_type = "CriterionInput")] criterion: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "ScoreOptions")] options: JsValue,
    ) -> Promise {
        let (shared, id) = (self.shared.clone(), self.id);
        future_to_promise(async move {
            let c: Criterion = fixture_from_js(criterion, "criterion")?;
            let req = score_options(&options)?;
            let d = shared.with(async |e| e.score(id, &c, &req).await).await?;
            to_js(&d)
        })
    }

    #[wasm_bindgen(js_name = scoreAll, unchecked_return_type = "Promise<Decision[]>")]
    pub fn score_all(
        &self,
        #[wasm_bindgen(unchecked_param_type = "CriterionInput[]")] criteria: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "ScoreOptions")] options: JsValue,
    ) -> Promise {
        let (shared, id) = (self.shared.clone(), self.id);
        future_to_promise(async move {
            let cs: Vec<Criterion> = fixture_from_js(criteria, "criteria")?;
            let req = score_options(&options)?;
            let d = shared
                .with(async |e| e.score_all(id, &cs, &req).await)
                .await?;
            to_js(&d)
        })
    }

    /// The hidden state at each criterion's answer position (graphs built
    /// with `readout expose-hidden`; proven at load).
    #[wasm_bindgen(unchecked_return_type = "Promise<Float32Array[]>")]
    pub fn extract(
        &self,
        #[wasm_bindgen(unchecked_param_type = "CriterionInput[]")] criteria: JsValue,
    ) -> Promise {
        let (shared, id) = (self.shared.clone(), self.id);
        future_to_promise(async move {
            let cs: Vec<Criterion> = fixture_from_js(criteria, "criteria")?;
            let hs = shared.with(async |e| e.extract(id, &cs).await).await?;
            Ok(hs
                .iter()
                .map(|h| JsValue::from(js_sys::Float32Array::from(h.as_slice())))
                .collect::<js_sys::Array>()
                .into())
        })
    }

    /// Releases this state's KV. A second dispose is an error naming the state.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn dispose(&self) -> Promise {
        let (shared, id) = (self.shared.clone(), self.id);
        future_to_promise(async move {
            shared.with(async |e| e.dispose(id)).await?;
            Ok(JsValue::UNDEFINED)
        })
    }
}
