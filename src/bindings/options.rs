//! The options objects of `Engine.load`, `prefill` and `score`, read
//! field by field so that a misspelt or mistyped field is refused by name.

use super::convert::{coded_err, refuse};
use super::*;
use crate::core::input::request::ReadoutRequest;

/// What `Engine.load` was asked for, read from its options object.
pub struct LoadOptions {
    pub backend: Requested,
    /// Where onnxruntime-web's `.wasm`/`.mjs` files are served (a URL prefix).
    pub ort_base: Option<String>,
    pub threads: Option<u32>,
    pub profiling: bool,
    /// WebGPU only: let onnxruntime-web create its own device instead of
    /// sharing the engine's (no GPU readout then; a diagnostic).
    pub ort_device: bool,
    /// cpu only: pack a call's branches into one pass (default on; off is
    /// the serial path a benchmark compares against).
    pub pack_branches: Option<bool>,
    /// A `models.json` may name files by absolute `http(s)` URL (another
    /// origin, such as a CDN); by default its files stay in its own folder.
    pub allow_absolute_urls: bool,
    /// Keep a models.json entry's files in the browser's storage and read
    /// them from there on later loads (default on).
    pub keep_files: bool,
    /// Ask the browser once for persistent storage when files are kept (default on).
    pub persist: bool,
    /// Keep a model folder's files too, checked by the server's ETag or
    /// Last-Modified (default off: a folder has no catalog hashes).
    pub keep_folder_files: bool,
}

pub(super) fn load_options(v: &JsValue) -> Result<(LoadOptions, Option<Function>), JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok((
            LoadOptions {
                backend: Requested::Auto,
                ort_base: None,
                threads: None,
                profiling: false,
                ort_device: false,
                pack_branches: None,
                allow_absolute_urls: false,
                keep_files: true,
                persist: true,
                keep_folder_files: false,
            },
            None,
        ));
    }
    options_object(v, "options", "{ backend: \"wasm\" }")?;
    let backend = match get(v, "backend").as_string() {
        None => Requested::Auto,
        Some(s) => Requested::parse(&s).map_err(core_err)?,
    };
    let threads = match get(v, "threads").as_f64() {
        None => None,
        Some(n) => Some(
            crate::core::input::thread_policy::check_threads(n, crate::platform::cores(), "threads")
                .map_err(core_err)? as u32,
        ),
    };
    let progress = match get(v, "onProgress") {
        p if p.is_undefined() || p.is_null() => None,
        p => Some(p.dyn_into::<Function>().map_err(|_| {
            refuse(
                "onProgress: must be a function",
                "invalid_option",
                "onProgress",
            )
        })?),
    };
    let ort_device = match get(v, "device").as_string().as_deref() {
        None | Some("shared") => false,
        Some("onnxruntime") => true,
        Some(other) => {
            return Err(refuse(
                format!("device: {other:?} is not \"shared\" or \"onnxruntime\""),
                "invalid_option",
                "device",
            ))
        }
    };
    let pack = get(v, "packBranches");
    let pack_branches = match pack.as_bool() {
        Some(b) => Some(b),
        None if pack.is_undefined() || pack.is_null() => None,
        None => {
            return Err(refuse(
                "packBranches: must be true or false",
                "invalid_option",
                "packBranches",
            ))
        }
    };
    let allow = get(v, "allowAbsoluteUrls");
    let allow_absolute_urls = match allow.as_bool() {
        Some(b) => b,
        None if allow.is_undefined() || allow.is_null() => false,
        None => {
            return Err(refuse(
                "allowAbsoluteUrls: must be true or false",
                "invalid_option",
                "allowAbsoluteUrls",
            ))
        }
    };
    let flag = |name: &str| -> Result<bool, JsValue> {
        let v = get(v, name);
        match v.as_bool() {
            Some(b) => Ok(b),
            None if v.is_undefined() || v.is_null() => Ok(true),
            None => Err(refuse(
                format!("{name}: must be true or false"),
                "invalid_option",
                name,
            )),
        }
    };
    let keep_files = flag("keepFiles")?;
    let persist = flag("persist")?;
    // Off unless asked.
    let folders = get(v, "keepFolderFiles");
    let keep_folder_files =
        !(folders.is_undefined() || folders.is_null()) && flag("keepFolderFiles")?;
    Ok((
        LoadOptions {
            backend,
            pack_branches,
            allow_absolute_urls,
            keep_files,
            persist,
            keep_folder_files,
            ort_base: get(v, "ortBase").as_string(),
            threads,
            profiling: get(v, "profiling").is_truthy(),
            ort_device,
        },
        progress,
    ))
}

pub(super) const SCORE_OPTION_FIELDS: &[&str] =
    &["debias", "allowedMass", "mode", "clozeScore", "calibration"];
pub(super) const PREFILL_OPTION_FIELDS: &[&str] = &["prompt", "mode"];
pub(super) const PREFIX_OPTION_FIELDS: &[&str] = &["prompt", "mode", "keep"];

/// A string option parsed by the engine type's own names; anything else is
/// refused naming the field and the values it takes.
pub(super) fn enum_field<T: serde::de::DeserializeOwned>(
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
pub(super) fn known_keys(
    v: &JsValue,
    argument: &str,
    known: &'static [&'static str],
) -> Result<(), JsValue> {
    let value: serde_json::Value = serde_wasm_bindgen::from_value(v.clone())
        .map_err(|e| refuse(format!("{argument}: {e}"), "invalid_option", argument))?;
    crate::core::input::criteria::check_object(&value, argument, known).map_err(core_err)
}

/// An options argument must be a plain object (or absent): reading fields
/// off a string such as `"cyclic"` finds none and would silently run with
/// the defaults.
pub(super) fn options_object(v: &JsValue, argument: &str, example: &str) -> Result<(), JsValue> {
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

/// A score call's options as a request; a field left out is the engine's
/// to decide (`ReadoutRequest::resolve`).
pub(super) fn score_options(v: &JsValue) -> Result<ReadoutRequest, JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok(ReadoutRequest::default());
    }
    options_object(v, "options", "{ mode: \"cloze\" }")?;
    known_keys(v, "options", SCORE_OPTION_FIELDS)?;
    let am = get(v, "allowedMass");
    Ok(ReadoutRequest {
        debias: enum_field(v, "debias", "\"none\", \"cyclic\"")?,
        allowed_mass: (!am.is_undefined()).then(|| am.is_truthy()),
        mode: enum_field(v, "mode", "\"letters\", \"cloze\"")?,
        cloze_score: enum_field(v, "clozeScore", "\"sum\", \"mean\"")?,
        calibration: enum_field(v, "calibration", "\"none\", \"content-free\"")?,
        prompt: None,
    })
}

/// `engine.prefix`'s options: a prefill's, and `keep` (store it across
/// visits and restore it from there; off unless asked).
pub(super) fn prefix_options(v: &JsValue) -> Result<(ReadoutRequest, bool), JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok((ReadoutRequest::default(), false));
    }
    options_object(v, "options", "{ mode: \"letters\", keep: true }")?;
    known_keys(v, "options", PREFIX_OPTION_FIELDS)?;
    let keep = get(v, "keep");
    let keep = match keep.as_bool() {
        Some(b) => b,
        None if keep.is_undefined() || keep.is_null() => false,
        None => {
            return Err(refuse(
                "keep: must be true or false",
                "invalid_option",
                "keep",
            ))
        }
    };
    Ok((head_request(v)?, keep))
}

/// A prefill's options: what was given of the prompt style and the mode.
pub(super) fn prefill_options(v: &JsValue) -> Result<ReadoutRequest, JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok(ReadoutRequest::default());
    }
    options_object(v, "options", "{ prompt: \"chat\", mode: \"cloze\" }")?;
    known_keys(v, "options", PREFILL_OPTION_FIELDS)?;
    head_request(v)
}

/// The fields a head is written in, as a request.
fn head_request(v: &JsValue) -> Result<ReadoutRequest, JsValue> {
    Ok(ReadoutRequest {
        prompt: enum_field(v, "prompt", "\"plain\", \"chat\"")?,
        mode: enum_field(v, "mode", "\"letters\", \"cloze\"")?,
        ..ReadoutRequest::default()
    })
}
