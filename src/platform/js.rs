//! The one module of JS interop helpers: property access, a JS error's
//! message, and the failure type every layer wraps in its own error. The
//! browser runtime, the GPU device, the bindings and the thread pool use
//! these, and nothing else reaches into `Reflect` directly.

use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;

/// What a JS call threw or rejected with, as its message: the callers
/// decide what it means (a load, a run, a GPU buffer) and wrap it in their
/// own error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct JsFailure(pub String);

impl JsFailure {
    pub fn from_js(e: &JsValue) -> Self {
        Self(message(e))
    }
}

/// A JS error's message (or its string form).
pub fn message(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

pub fn set(obj: &Object, key: &str, value: &JsValue) {
    // Reflect.set on a plain object cannot fail.
    let _ = Reflect::set(obj, &JsValue::from_str(key), value);
}

pub fn get(obj: &JsValue, key: &str) -> JsValue {
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}
