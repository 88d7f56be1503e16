//! Converting between JS values and the engine's types: coded `Error`s,
//! serde both ways, and fixture input with every field name checked.

use serde::Serialize;
use wasm_bindgen::prelude::*;

pub(super) fn js_err(msg: impl std::fmt::Display) -> JsValue {
    js_sys::Error::new(&msg.to_string()).into()
}

/// An `Error` whose message says it in words and whose `code`, `field` and
/// `limit` properties say it to code that branches on them.
pub(super) fn coded_err(msg: impl std::fmt::Display, info: crate::core::ErrorInfo) -> JsValue {
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

pub(super) fn engine_err(e: crate::engine::EngineError) -> JsValue {
    let info = e.info();
    coded_err(e, info)
}

pub(super) fn core_err(e: crate::core::CoreError) -> JsValue {
    let info = e.info();
    coded_err(e, info)
}

pub(super) fn to_js<T: Serialize>(v: &T) -> Result<JsValue, JsValue> {
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(js_err)
}

pub(super) fn from_js<T: serde::de::DeserializeOwned>(
    v: JsValue,
    what: &str,
) -> Result<T, JsValue> {
    serde_wasm_bindgen::from_value(v).map_err(|e| js_err(format!("{what}: {e}")))
}

/// A state, criterion or criteria from JS with every field name checked
/// first. serde_wasm_bindgen reads a struct's declared fields only, so
/// `deny_unknown_fields` never sees a typo such as `answr` there: the value
/// goes through JSON, where `core::fixture`'s check names the nearest field.
pub(super) fn fixture_from_js<T: serde::de::DeserializeOwned>(
    v: JsValue,
    what: &str,
) -> Result<T, JsValue> {
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
pub(super) fn drop_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}
