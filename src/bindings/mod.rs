//! The JS surface (spec §2 `bindings`): converts between JS values and the
//! engine's types, and queues calls. It decides nothing: backend choice,
//! proofs and readout live below it.
//!
//! Every call on one engine (and its states) takes the engine's async lock
//! in call order, so calls are queued, never interleaved. Every refusal is a
//! JS `Error` whose message names the field and the limit; a refused call
//! leaves the engine usable.

#[cfg(feature = "diagnostics")]
mod bench;
#[cfg(feature = "diagnostics")]
mod diagnostics;
mod fetch;
mod limits;
mod load;

use std::cell::Cell;
use std::rc::Rc;

use futures_util::lock::Mutex;
use js_sys::{Function, Promise};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use self::load::{LoadOptions, LoadReport};
use crate::core::backend::Requested;
use crate::core::debias::Debias;
use crate::core::fixture::{Criterion, StateSpec};
use crate::core::mode::{Calibration, ClozeScore, HeadStyle, Mode, PromptStyle};
use crate::engine::{EngineInfo, ScoreOptions, StateId};
use crate::runtime::web::ort::get;
use load::WebEngine;

#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &'static str = r#"
export type Backend = "auto" | "webgpu" | "wasm" | "cpu";
export interface LoadOptions {
  /** "auto" (default): WebGPU when an adapter exists and the dtype runs there, else the entry's WASM variant.
   *  "cpu": readout's own int4 kernels (SIMD128, one thread for now) over the entry's own file, no onnxruntime-web. */
  backend?: Backend;
  /** URL prefix where onnxruntime-web's dist/ files (.wasm, .mjs) are served. Nothing else is contacted. */
  ortBase?: string;
  /** Called while files download: file role, bytes so far, bytes in all (0 when unknown). */
  onProgress?: (p: { file: string; loaded: number; total: number }) => void;
  /** WASM backend threads (needs a cross-origin isolated page). */
  threads?: number;
  /** onnxruntime-web's profiler (see Engine.endProfiling). */
  profiling?: boolean;
  /** WebGPU: "shared" (default) hands the engine's device to onnxruntime-web and reads logits on it;
   *  "onnxruntime" lets onnxruntime-web create its own (logits are then downloaded). */
  device?: "shared" | "onnxruntime";
  /** cpu: run a call's branches (scoreAll's criteria, debias rotations, cloze options) in one
   *  block-causal pass (default true); false runs them one by one, what a benchmark compares against. */
  packBranches?: boolean;
}
export interface StateInput { id?: string; instruction?: string; evidence: string; }
export interface OptionInput { id: string; description: string; }
export interface CriterionInput { id: string; family?: string; question: string; options: OptionInput[]; answer?: string; }
/** Unset fields take the model's default (models.json `readout`; else letters, plain). */
export interface ScoreOptions {
  /** "letters": the option letter's probability (one run, any graph). "cloze": each option's own text (stock graphs). */
  mode?: "letters" | "cloze";
  /** cloze: an option's score is the sum or the mean of its tokens' log-probabilities. */
  clozeScore?: "sum" | "mean";
  /** "content-free": divide out what the model prefers after evidence "N/A" (computed once per criterion, cached). */
  calibration?: "none" | "content-free";
  /** letters: "cyclic" scores every rotation of the options and averages. */
  debias?: "none" | "cyclic";
  allowedMass?: boolean;
}
/** How the state's head is written. `prompt`: "plain" text or the model's own
 *  chat template. `mode`: the readout it will be read with,
 *  which picks the default instruction when the state has none (a letters
 *  head asks for a letter, a cloze head for the answer); default: the model's. */
export interface PrefillOptions { prompt?: "plain" | "chat"; mode?: "letters" | "cloze"; }
/** Every refusal is an Error carrying these: branch on `code`, not on the message. */
export interface ReadoutError extends Error {
  /** A stable snake_case name, e.g. "too_many_options", "mode_needs_stock_graph", "unknown_field". */
  code: string;
  /** The input field concerned, e.g. "options", "evidence", "mode". */
  field?: string;
  /** The limit exceeded, e.g. 20 (letters) or 64 (cloze) options. */
  limit?: number;
}
export interface OptionProb { id: string; letter: string; p: number; }
export interface Decision {
  id: string; answer: string; letter: string; probs: OptionProb[]; margin: number;
  allowed_mass?: number; order_unstable?: boolean; ms: number;
}
export interface EngineInfo {
  model_id: string; runtime: string; backend: "webgpu" | "wasm" | "cpu"; backend_reason: string;
  readout: string; run_limit: number; bytes_read_back: number; live_gpu_tensors: number;
  /** Set once the WebGPU device was lost: every later run is refused; load the engine again. */
  device_lost?: string | null;
  [key: string]: unknown;
}
"#;

fn js_err(msg: impl std::fmt::Display) -> JsValue {
    js_sys::Error::new(&msg.to_string()).into()
}

/// An `Error` whose message says it in words and whose `code`, `field` and
/// `limit` properties say it to code that branches on them.
fn coded_err(msg: impl std::fmt::Display, info: crate::core::ErrorInfo) -> JsValue {
    use crate::runtime::web::ort::set;
    let e = js_sys::Error::new(&msg.to_string());
    set(&e, "code", &JsValue::from_str(info.code));
    if let Some(f) = &info.field {
        set(&e, "field", &JsValue::from_str(f));
    }
    if let Some(l) = info.limit {
        set(&e, "limit", &JsValue::from_f64(l as f64));
    }
    e.into()
}

fn engine_err(e: crate::engine::EngineError) -> JsValue {
    let info = e.info();
    coded_err(e, info)
}

fn core_err(e: crate::core::CoreError) -> JsValue {
    let info = e.info();
    coded_err(e, info)
}

fn to_js<T: Serialize>(v: &T) -> Result<JsValue, JsValue> {
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(js_err)
}

fn from_js<T: serde::de::DeserializeOwned>(v: JsValue, what: &str) -> Result<T, JsValue> {
    serde_wasm_bindgen::from_value(v).map_err(|e| js_err(format!("{what}: {e}")))
}

/// A state, criterion or criteria from JS with every field name checked
/// first. serde_wasm_bindgen reads a struct's declared fields only, so
/// `deny_unknown_fields` never sees a typo such as `answr` there: the value
/// goes through JSON, where `core::fixture`'s check names the nearest field.
fn fixture_from_js<T: serde::de::DeserializeOwned>(v: JsValue, what: &str) -> Result<T, JsValue> {
    use crate::core::fixture::{check_criterion, check_fields};
    let mut value: serde_json::Value = from_js(v, what)?;
    drop_nulls(&mut value);
    match (what, &value) {
        ("state", _) => check_fields(&value),
        ("criteria", serde_json::Value::Array(cs)) => cs
            .iter()
            .enumerate()
            .try_for_each(|(i, c)| check_criterion(c, &format!("criteria[{i}]"))),
        _ => check_criterion(&value, what),
    }
    .map_err(core_err)?;
    serde_json::from_value(value).map_err(|e| js_err(format!("{what}: {e}")))
}

/// A field set to `undefined` or `null` in JS counts as absent, as it did
/// when serde_wasm_bindgen read the struct directly.
fn drop_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

struct Shared {
    /// `None` once the engine is disposed.
    engine: Mutex<Option<WebEngine>>,
    report: LoadReport,
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
        let engine = guard
            .as_mut()
            .ok_or_else(|| js_err("engine: disposed (load a new one)"))?;
        let r = f(engine).await.map_err(engine_err);
        self.read_back.set(engine.bytes_read_back());
        r
    }
}

/// A loaded model with its proven conventions.
#[wasm_bindgen]
pub struct Engine {
    shared: Rc<Shared>,
}

fn load_options(v: &JsValue) -> Result<(LoadOptions, Option<Function>), JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok((
            LoadOptions {
                backend: Requested::Auto,
                ort_base: None,
                threads: None,
                profiling: false,
                ort_device: false,
                pack_branches: None,
            },
            None,
        ));
    }
    options_object(v, "options", "{ backend: \"wasm\" }")?;
    let backend = match get(v, "backend").as_string() {
        None => Requested::Auto,
        Some(s) => Requested::parse(&s).map_err(js_err)?,
    };
    let threads = match get(v, "threads").as_f64() {
        None => None,
        Some(n) if (1.0..=64.0).contains(&n) && n.fract() == 0.0 => Some(n as u32),
        Some(n) => {
            return Err(js_err(format!(
                "threads: {n} is not a whole number from 1 to 64"
            )))
        }
    };
    let progress = match get(v, "onProgress") {
        p if p.is_undefined() || p.is_null() => None,
        p => Some(
            p.dyn_into::<Function>()
                .map_err(|_| js_err("onProgress: must be a function"))?,
        ),
    };
    let ort_device = match get(v, "device").as_string().as_deref() {
        None | Some("shared") => false,
        Some("onnxruntime") => true,
        Some(other) => {
            return Err(js_err(format!(
                "device: {other:?} is not \"shared\" or \"onnxruntime\""
            )))
        }
    };
    let pack = get(v, "packBranches");
    let pack_branches = match pack.as_bool() {
        Some(b) => Some(b),
        None if pack.is_undefined() || pack.is_null() => None,
        None => return Err(js_err("packBranches: must be true or false")),
    };
    Ok((
        LoadOptions {
            backend,
            pack_branches,
            ort_base: get(v, "ortBase").as_string(),
            threads,
            profiling: get(v, "profiling").is_truthy(),
            ort_device,
        },
        progress,
    ))
}

fn now() -> f64 {
    let perf = get(&js_sys::global(), "performance");
    get(&perf, "now")
        .dyn_into::<Function>()
        .ok()
        .and_then(|f| f.call0(&perf).ok())
        .and_then(|v| v.as_f64())
        .unwrap_or_else(js_sys::Date::now)
}

/// The options as given; an unset field means the engine's default (the
/// models.json entry's readout; `allowedMass`: when the head is unpruned),
/// which only the engine knows.
#[derive(Default)]
struct JsScoreOptions {
    debias: Option<Debias>,
    allowed_mass: Option<bool>,
    mode: Option<Mode>,
    cloze_score: Option<ClozeScore>,
    calibration: Option<Calibration>,
}

const SCORE_OPTION_FIELDS: &[&str] =
    &["debias", "allowedMass", "mode", "clozeScore", "calibration"];
const PREFILL_OPTION_FIELDS: &[&str] = &["prompt", "mode"];

/// A string option parsed by the engine type's own names; anything else is
/// refused naming the field and the values it takes.
fn enum_field<T: serde::de::DeserializeOwned>(
    v: &JsValue,
    field: &str,
    allowed: &str,
) -> Result<Option<T>, JsValue> {
    let x = get(v, field);
    if x.is_undefined() || x.is_null() {
        return Ok(None);
    }
    let refuse = |got: String| {
        coded_err(
            format!("{field}: {got} is not one of {allowed}"),
            crate::core::ErrorInfo::new("invalid_option").field(field),
        )
    };
    let s = x.as_string().ok_or_else(|| {
        refuse(format!(
            "a {}",
            x.js_typeof().as_string().unwrap_or_default()
        ))
    })?;
    serde_json::from_value(serde_json::Value::String(s.clone()))
        .map(Some)
        .map_err(|_| refuse(format!("{s:?}")))
}

/// Refuses an options key the call does not take (a typo would otherwise
/// run silently with the default), naming the nearest known one.
fn known_keys(v: &JsValue, argument: &str, known: &'static [&'static str]) -> Result<(), JsValue> {
    let value: serde_json::Value = serde_wasm_bindgen::from_value(v.clone()).map_err(js_err)?;
    crate::core::fixture::check_object(&value, argument, known).map_err(core_err)
}

/// An options argument must be a plain object (or absent): reading fields
/// off a string such as `"cyclic"` finds none and would silently run with
/// the defaults.
fn options_object(v: &JsValue, argument: &str, example: &str) -> Result<(), JsValue> {
    if v.is_object() && !js_sys::Array::is_array(v) && !v.is_function() {
        return Ok(());
    }
    let got = if js_sys::Array::is_array(v) {
        "an array".to_string()
    } else {
        format!("a {}", v.js_typeof().as_string().unwrap_or_default())
    };
    Err(coded_err(
        format!("{argument}: must be an object such as {example} (or left out), not {got}"),
        crate::core::ErrorInfo::new("invalid_option").field(argument),
    ))
}

impl JsScoreOptions {
    fn parse(v: &JsValue) -> Result<Self, JsValue> {
        if v.is_undefined() || v.is_null() {
            return Ok(Self::default());
        }
        options_object(v, "options", "{ mode: \"cloze\" }")?;
        known_keys(v, "options", SCORE_OPTION_FIELDS)?;
        let am = get(v, "allowedMass");
        Ok(Self {
            debias: enum_field(v, "debias", "\"none\", \"cyclic\"")?,
            allowed_mass: (!am.is_undefined()).then(|| am.is_truthy()),
            mode: enum_field(v, "mode", "\"letters\", \"cloze\"")?,
            cloze_score: enum_field(v, "clozeScore", "\"sum\", \"mean\"")?,
            calibration: enum_field(v, "calibration", "\"none\", \"content-free\"")?,
        })
    }

    fn for_engine(&self, e: &WebEngine) -> ScoreOptions {
        let d = e.readout_defaults();
        ScoreOptions {
            debias: self.debias.unwrap_or_default(),
            allowed_mass: self.allowed_mass.unwrap_or(!e.is_pruned()),
            mode: self.mode.unwrap_or(d.mode),
            cloze_score: self.cloze_score.unwrap_or(d.cloze_score),
            calibration: self.calibration.unwrap_or(d.calibration),
        }
    }
}

/// `{ prompt }` for a prefill; `None`: the engine's default.
/// The prefill's options: what was given of the prompt style and the mode.
fn prefill_options(v: &JsValue) -> Result<(Option<PromptStyle>, Option<Mode>), JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok((None, None));
    }
    options_object(v, "options", "{ prompt: \"chat\", mode: \"cloze\" }")?;
    known_keys(v, "options", PREFILL_OPTION_FIELDS)?;
    Ok((
        enum_field(v, "prompt", "\"plain\", \"chat\"")?,
        enum_field(v, "mode", "\"letters\", \"cloze\"")?,
    ))
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
            js_err("source: must be a string (\"models.json#id\" or a model directory URL)")
        })?;
        let (opts, progress) = load_options(&options)?;
        let report = |file: &str, loaded: f64, total: f64| {
            if let Some(f) = &progress {
                let o = js_sys::Object::new();
                crate::runtime::web::ort::set(&o, "file", &file.into());
                crate::runtime::web::ort::set(&o, "loaded", &loaded.into());
                crate::runtime::web::ort::set(&o, "total", &total.into());
                let _ = f.call1(&JsValue::NULL, &o);
            }
        };
        let loaded = load::load(&source, opts, &report, &now)
            .await
            .map_err(js_err)?;
        let info = loaded.engine.info();
        let lost = loaded.engine.runtime().onnx().and_then(|r| r.lost_flag());
        // What the load-time proofs read back counts from the start, so a
        // caller's before/after difference around a call is that call's.
        let read_back = Cell::new(loaded.engine.bytes_read_back());
        Ok(Engine {
            shared: Rc::new(Shared {
                engine: Mutex::new(Some(loaded.engine)),
                report: loaded.report,
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
            let (prompt, mode) = prefill_options(&options)?;
            let (id, tokens) = shared
                .with(async |e| {
                    let d = e.readout_defaults();
                    let style = HeadStyle {
                        prompt: prompt.unwrap_or(d.prompt),
                        mode: mode.unwrap_or(d.mode),
                    };
                    let id = e.prefill_with(&spec, style).await?;
                    Ok((id, e.head_tokens(id)?))
                })
                .await?;
            Ok(State { shared, id, tokens }.into())
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
        let run_limit = engine.as_ref().map(|i| i.proof.run_limit);
        let device_lost = self.shared.lost.as_ref().and_then(|l| l.borrow().clone());
        to_js(&Info {
            engine: &engine,
            load: &self.shared.report,
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

/// A prefilled state: criteria are scored against its cached KV.
#[wasm_bindgen]
pub struct State {
    shared: Rc<Shared>,
    id: StateId,
    tokens: usize,
}

#[wasm_bindgen]
impl State {
    /// Tokens of the prefilled head (instruction + evidence).
    #[wasm_bindgen(getter)]
    pub fn tokens(&self) -> usize {
        self.tokens
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
            let o = JsScoreOptions::parse(&options)?;
            let d = shared
                .with(async |e| e.score(id, &c, &o.for_engine(e)).await)
                .await?;
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
            let o = JsScoreOptions::parse(&options)?;
            let d = shared
                .with(async |e| e.score_all(id, &cs, &o.for_engine(e)).await)
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
