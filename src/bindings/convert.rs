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
    use crate::platform::js::set;
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

/// A refusal of the caller's input that no lower layer made: `code` and
/// the `field` it concerns, as `coded_err` carries them.
pub(super) fn refuse(msg: impl std::fmt::Display, code: &'static str, field: &str) -> JsValue {
    coded_err(msg, crate::core::ErrorInfo::new(code).field(field))
}

pub(super) fn engine_err(e: crate::engine::EngineError) -> JsValue {
    let info = e.info();
    coded_err(e, info)
}

pub(super) fn core_err(e: crate::core::CoreError) -> JsValue {
    let info = e.info();
    coded_err(e, info)
}

pub(super) fn load_err(e: super::error::LoadError) -> JsValue {
    let info = e.info();
    coded_err(e, info)
}

/// A Rust value as JS, its field names in JS's casing. The engine's types
/// serialise in snake_case, as the native CLI's JSON files keep them; JS
/// reads and writes camelCase, so the surface renames every object key on
/// the way out (`allowed_mass` → `allowedMass`). Nothing that crosses here is
/// a map keyed by data (ids, tensor names), whose keys must not change.
pub(super) fn to_js<T: Serialize>(v: &T) -> Result<JsValue, JsValue> {
    let mut value = serde_json::to_value(v).map_err(js_err)?;
    camel_keys(&mut value);
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(js_err)
}

fn camel_keys(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            let old = std::mem::take(m);
            for (k, mut x) in old {
                camel_keys(&mut x);
                m.insert(camel(&k), x);
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(camel_keys),
        _ => {}
    }
}

/// `snake_case` → `snakeCase`; a key without an underscore is returned as is.
fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' && !out.is_empty() {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn from_js<T: serde::de::DeserializeOwned>(
    v: JsValue,
    what: &str,
) -> Result<T, JsValue> {
    serde_wasm_bindgen::from_value(v)
        .map_err(|e| refuse(format!("{what}: {e}"), "invalid_input", what))
}

/// A state, criterion or criteria from JS with every field name checked
/// first. serde_wasm_bindgen reads a struct's declared fields only, so
/// `deny_unknown_fields` never sees a typo such as `answr` there: the value
/// goes through JSON, where `core::input::criteria`'s check names the nearest field.
pub(super) fn fixture_from_js<T: serde::de::DeserializeOwned>(
    v: JsValue,
    what: &str,
) -> Result<T, JsValue> {
    use crate::core::input::criteria::{check_criterion, check_fields};
    let mut value: serde_json::Value = from_js(v, what)?;
    drop_nulls(&mut value);
    match (what, &value) {
        ("state", _) => check_fields(&value),
        // A prefix's worked examples each carry a criterion: checked as one.
        ("prefix", _) => value
            .get("examples")
            .and_then(serde_json::Value::as_array)
            .map_or(Ok(()), |xs| {
                xs.iter().enumerate().try_for_each(|(i, x)| {
                    x.get("criterion").map_or(Ok(()), |c| {
                        check_criterion(c, &format!("examples[{i}].criterion"))
                    })
                })
            }),
        ("criteria", serde_json::Value::Array(cs)) => cs
            .iter()
            .enumerate()
            .try_for_each(|(i, c)| check_criterion(c, &format!("criteria[{i}]"))),
        _ => check_criterion(&value, what),
    }
    .map_err(core_err)?;
    serde_json::from_value(value).map_err(|e| refuse(format!("{what}: {e}"), "invalid_input", what))
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
