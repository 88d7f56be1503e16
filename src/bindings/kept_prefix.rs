//! Prefixes kept across visits in the browser's storage: `engine.prefix`
//! with `keep: true` looks for a stored prefix under its key (the model's
//! file hashes, the engine, the runtime, the prompt settings, the ids),
//! restores it when the engine accepts it, and otherwise prefills and
//! stores what it computed. A stored copy the engine refuses is thrown away
//! and said why; storage that refuses never fails the call.

use js_sys::{Promise, Uint8Array};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::fetch::{await_js, call};
use super::kept::settle;
use super::Shared;
use crate::core::input::prefix::PrefixSpec;
use crate::core::input::request::ReadoutRequest;
use crate::engine::PrefixId;
use crate::platform::js::get;
use std::rc::Rc;

#[wasm_bindgen(module = "/js/store.js")]
extern "C" {
    #[wasm_bindgen(js_name = storeReadBytes, catch)]
    fn store_read_bytes(entry: &str, file: &str, max_bytes: f64) -> Result<Promise, JsValue>;
    #[wasm_bindgen(js_name = storeBegin, catch)]
    fn store_begin(entry: &str, file: &str) -> Result<Promise, JsValue>;
    #[wasm_bindgen(js_name = storeRemove, catch)]
    fn store_remove(entry: &str, file: &str) -> Result<Promise, JsValue>;
}

/// Where a kept prefix came from, as `prefix.storage` says it.
#[derive(Debug, Clone, Serialize)]
pub struct PrefixStorage {
    /// `"storage"` (restored, no prefill) or `"prefill"`.
    pub from: &'static str,
    /// Whether it is in storage now (restored from it, or stored after the prefill).
    pub kept: bool,
    /// Why it was not restored, or not stored: no stored copy, a refused
    /// one (its `stale_prefix` field and reason), storage unavailable.
    pub why: Option<String>,
    /// The stored bytes.
    pub bytes: usize,
    /// Time to restore it (read, check, import), or to prefill it.
    pub ms: f64,
    /// The key it is stored under in the model's entry.
    pub file: Option<String>,
}

/// What a stored prefix's metadata records.
#[derive(Serialize)]
struct Meta {
    bytes: usize,
    tokens: usize,
    /// ms since the epoch.
    #[serde(rename = "storedAt")]
    stored_at: f64,
}

/// `spec` as `req` asks from `entry`'s storage when a stored copy is accepted,
/// else prefilled and stored. Returns the prefix, its tokens and the report.
pub async fn kept_prefix(
    shared: &Rc<Shared>,
    entry: &str,
    spec: &PrefixSpec,
    req: &ReadoutRequest,
    now: &dyn Fn() -> f64,
) -> Result<(PrefixId, usize, PrefixStorage), JsValue> {
    let keyed = shared
        .with(async |e| Ok((e.prefix_key(spec, req), e.prefix_bytes_bound())))
        .await?;
    let (file, bound) = match keyed {
        (Ok(k), Ok(b)) => (format!("prefix-{k}"), b),
        (Err(e), _) | (_, Err(e)) => return prefill(shared, spec, req, now, e.to_string()).await,
    };
    let t0 = now();
    let why = match settle(store_read_bytes(entry, &file, bound as f64)).await {
        Err(e) => {
            return prefill(shared, spec, req, now, format!("storage unavailable: {e}")).await
        }
        Ok(v) if v.is_null() || v.is_undefined() => "no stored copy".to_string(),
        Ok(v) => {
            let bytes = get(&v, "bytes");
            let refused = if bytes.is_null() || bytes.is_undefined() {
                let size = get(&v, "size").as_f64().unwrap_or(-1.0);
                format!("stale_prefix at bytes: {size} bytes stored, over the {bound} a prefix of this model can take, or gone")
            } else {
                let bytes = bytes.unchecked_into::<Uint8Array>().to_vec();
                let n = bytes.len();
                match shared
                    .with(async |e| {
                        let id = e.restore_prefix(&bytes, Some((spec, req))).await?;
                        Ok((id, e.prefix_tokens(id)?))
                    })
                    .await
                {
                    Ok((id, tokens)) => {
                        return Ok((
                            id,
                            tokens,
                            PrefixStorage {
                                from: "storage",
                                kept: true,
                                why: None,
                                bytes: n,
                                ms: now() - t0,
                                file: Some(file),
                            },
                        ))
                    }
                    Err(e) => js_message(&e),
                }
            };
            // A refused copy is never used again.
            let removed = settle(store_remove(entry, &file)).await;
            match removed {
                Ok(_) => format!("the stored copy was refused and removed: {refused}"),
                Err(r) => {
                    format!("the stored copy was refused ({refused}); removing it failed: {r}")
                }
            }
        }
    };
    let (id, tokens, mut report) = prefill(shared, spec, req, now, why).await?;
    let bytes = shared.with(async |e| e.export_prefix(id).await).await;
    let stored = match bytes {
        Ok(b) => store(entry, &file, &b, tokens).await.map(|_| b.len()),
        Err(e) => Err(js_message(&e)),
    };
    match stored {
        Ok(n) => {
            report.kept = true;
            report.bytes = n;
            report.file = Some(file);
        }
        Err(e) => {
            let before = report.why.take().unwrap_or_default();
            report.why = Some(format!("{before}; storing it failed: {e}"));
        }
    }
    Ok((id, tokens, report))
}

async fn prefill(
    shared: &Rc<Shared>,
    spec: &PrefixSpec,
    req: &ReadoutRequest,
    now: &dyn Fn() -> f64,
    why: String,
) -> Result<(PrefixId, usize, PrefixStorage), JsValue> {
    let t0 = now();
    let (id, tokens) = shared
        .with(async |e| {
            let id = e.prefix(spec, req).await?;
            Ok((id, e.prefix_tokens(id)?))
        })
        .await?;
    Ok((
        id,
        tokens,
        PrefixStorage {
            from: "prefill",
            kept: false,
            why: Some(why),
            bytes: 0,
            ms: now() - t0,
            file: None,
        },
    ))
}

/// Writes `bytes` under a temporary name and moves it under `file`;
/// nothing is left behind when a step fails.
async fn store(entry: &str, file: &str, bytes: &[u8], tokens: usize) -> Result<(), String> {
    let w = settle(store_begin(entry, file)).await?;
    let chunk = Uint8Array::from(bytes);
    let meta = serde_json::to_string(&Meta {
        bytes: bytes.len(),
        tokens,
        stored_at: js_sys::Date::now(),
    })
    .unwrap_or_default();
    let mut done = Ok(JsValue::UNDEFINED);
    for (method, arg) in [("write", JsValue::from(chunk)), ("commit", meta.into())] {
        done = match call(&w, method, &[arg]) {
            Ok(p) => await_js(p).await,
            Err(e) => Err(e),
        };
        if done.is_err() {
            break;
        }
    }
    if let Err(e) = done {
        if let Ok(p) = call(&w, "abort", &[]) {
            let _ = await_js(p).await;
        }
        return Err(e.to_string());
    }
    Ok(())
}

/// A refusal's message as the page would read it.
fn js_message(e: &JsValue) -> String {
    let code = get(e, "code").as_string();
    let field = get(e, "field").as_string();
    let message = get(e, "message")
        .as_string()
        .unwrap_or_else(|| format!("{e:?}"));
    match (code, field) {
        (Some(c), Some(f)) => format!("{c} at {f}: {message}"),
        (Some(c), None) => format!("{c}: {message}"),
        _ => message,
    }
}
