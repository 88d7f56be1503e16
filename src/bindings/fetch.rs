//! Downloads with progress and integrity: every model file is streamed,
//! counted against the size models.json measured, and hashed (sha256) as it
//! arrives. The only hosts contacted are the ones the caller's URLs name.

use js_sys::{Function, Promise, Reflect, Uint8Array};
use sha2::{Digest, Sha256};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use super::error::{FetchProblem, LoadError};
use crate::platform::js::{get, JsFailure};

/// Progress of one file: `(file, loaded, total, source)`; total is 0 when unknown.
pub type Progress<'a> = &'a dyn Fn(&str, f64, f64, Source);

/// Where a file's bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Network,
    Storage,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Network => "network",
            Source::Storage => "storage",
        }
    }
}

pub(super) fn call(obj: &JsValue, method: &str, args: &[JsValue]) -> Result<JsValue, JsFailure> {
    let f: Function = get(obj, method)
        .dyn_into()
        .map_err(|_| JsFailure(format!("{method} is not a function")))?;
    let arr: js_sys::Array = args.iter().collect();
    f.apply(obj, &arr).map_err(|e| JsFailure::from_js(&e))
}

/// `call`, for the page's own functions a load cannot do without.
fn call_page(obj: &JsValue, method: &str, args: &[JsValue]) -> Result<JsValue, LoadError> {
    call(obj, method, args).map_err(|failure| LoadError::Browser {
        what: method.to_string(),
        failure,
    })
}

pub(super) async fn await_js(v: JsValue) -> Result<JsValue, JsFailure> {
    JsFuture::from(Promise::resolve(&v))
        .await
        .map_err(|e| JsFailure::from_js(&e))
}

/// A resolved absolute URL (`base` is a URL or empty for the page's).
pub fn resolve(url: &str, base: &str) -> Result<String, LoadError> {
    let ctor = get(&js_sys::global(), "URL");
    let ctor: Function = ctor.dyn_into().map_err(|_| LoadError::Browser {
        what: "URL".into(),
        failure: JsFailure("not available".into()),
    })?;
    // A page resolves against its own address; Deno and Node have no
    // `location` (unless Deno is given `--location`), so there a URL must be
    // absolute (`file://`, `http://`), and the refusal says so.
    let page = if base.is_empty() {
        get(&get(&js_sys::global(), "location"), "href")
    } else {
        JsValue::UNDEFINED
    };
    let no_page = base.is_empty() && page.is_undefined();
    let args: js_sys::Array = if base.is_empty() {
        if no_page {
            [JsValue::from_str(url)].iter().collect()
        } else {
            [JsValue::from_str(url), page].iter().collect()
        }
    } else {
        [JsValue::from_str(url), JsValue::from_str(base)]
            .iter()
            .collect()
    };
    let u = Reflect::construct(&ctor, &args).map_err(|e| LoadError::Url {
        url: url.to_string(),
        failure: if no_page {
            JsFailure(format!(
                "{}; with no page location to resolve against (Deno, Node), a URL must be absolute (file://, http://, https://)",
                JsFailure::from_js(&e)
            ))
        } else {
            JsFailure::from_js(&e)
        },
    })?;
    get(&u, "href").as_string().ok_or_else(|| LoadError::Url {
        url: url.to_string(),
        failure: JsFailure("no href".into()),
    })
}

pub struct Fetched {
    pub bytes: Uint8Array,
    pub sha256: String,
    /// Time spent hashing, in ms (what checking a stored file costs).
    pub hash_ms: f64,
}

/// Where a download's chunks are also written as they arrive (a file being
/// kept, `kept.rs`): a JS writer with `write(chunk)` and `abort()`. A write
/// that fails aborts the writer, leaves `failed` saying why, and the
/// download goes on without it.
pub struct Sink {
    pub writer: Option<JsValue>,
    pub failed: Option<String>,
}

impl Sink {
    async fn write(&mut self, chunk: &Uint8Array) {
        let Some(w) = &self.writer else { return };
        let r = match call(w, "write", &[chunk.into()]) {
            Ok(p) => await_js(p).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            self.abort().await;
            self.failed = Some(format!("writing to storage failed: {e}"));
        }
    }

    /// Drops what was written (the temporary file goes).
    pub async fn abort(&mut self) {
        if let Some(w) = self.writer.take() {
            if let Ok(p) = call(&w, "abort", &[]) {
                let _ = await_js(p).await;
            }
        }
    }
}

/// Refuses a download by its size: called with the response's
/// `content-length` before the body is read, then with the running total
/// after each chunk, so a file over its limit is refused before its
/// download (or, from a server that sends no length, as soon as it passes).
pub type SizeCheck<'a> = &'a dyn Fn(u64) -> Result<(), LoadError>;

/// No limit beyond the one the runtime applies.
pub const ANY_SIZE: SizeCheck<'static> = &|_| Ok(());

/// Fetches `url`; `Ok(None)` on 404 when `optional`.
pub async fn fetch(
    url: &str,
    label: &str,
    expect_bytes: Option<u64>,
    optional: bool,
    size_check: SizeCheck<'_>,
    progress: Progress<'_>,
) -> Result<Option<Fetched>, LoadError> {
    let Some(body) = open(url, label, optional, size_check).await? else {
        return Ok(None);
    };
    let total = expect_bytes
        .map(|b| b as f64)
        .or(body.length)
        .unwrap_or(0.0);
    read_body(
        &body.stream,
        label,
        url,
        total,
        expect_bytes,
        size_check,
        progress,
        Source::Network,
        None,
    )
    .await
    .map(Some)
}

/// A response's body, not yet read, its `content-length`, and the
/// validators a kept copy is checked against later.
pub struct Body {
    pub stream: JsValue,
    pub length: Option<f64>,
    pub validators: Validators,
}

/// A response's `ETag` and `Last-Modified` (a cross-origin server must
/// expose them with `Access-Control-Expose-Headers`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Validators {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(
        default,
        rename = "lastModified",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_modified: Option<String>,
}

impl Validators {
    pub fn any(&self) -> bool {
        self.etag.is_some() || self.last_modified.is_some()
    }
}

/// What a request found.
pub enum Opened {
    /// 404, for an optional file.
    Missing,
    /// 304: the copy whose validators were sent is current.
    NotModified,
    Body(Body),
}

/// Requests `url` and checks the status and the announced length;
/// `Ok(None)` on 404 when `optional`.
pub async fn open(
    url: &str,
    label: &str,
    optional: bool,
    size_check: SizeCheck<'_>,
) -> Result<Option<Body>, LoadError> {
    match open_if(url, label, optional, size_check, None).await? {
        Opened::Body(b) => Ok(Some(b)),
        // Without validators a server has nothing to answer 304 to.
        Opened::Missing | Opened::NotModified => Ok(None),
    }
}

/// `open`, sending `since`'s validators (`If-None-Match`, else
/// `If-Modified-Since`) so that a server answers 304 when a kept copy is current.
pub async fn open_if(
    url: &str,
    label: &str,
    optional: bool,
    size_check: SizeCheck<'_>,
    since: Option<&Validators>,
) -> Result<Opened, LoadError> {
    let refuse = |problem: FetchProblem| LoadError::Fetch {
        file: label.to_string(),
        url: url.to_string(),
        problem,
    };
    let mut args = vec![JsValue::from_str(url)];
    let condition = since.and_then(|v| {
        v.etag
            .as_ref()
            .map(|e| ("If-None-Match", e))
            .or(v.last_modified.as_ref().map(|m| ("If-Modified-Since", m)))
    });
    if let Some((name, value)) = condition {
        let headers = js_sys::Object::new();
        let _ = Reflect::set(&headers, &name.into(), &value.as_str().into());
        let init = js_sys::Object::new();
        let _ = Reflect::set(&init, &"headers".into(), &headers);
        args.push(init.into());
    }
    let resp = match await_js(call_page(&js_sys::global(), "fetch", &args)?).await {
        Ok(r) => r,
        // Deno answers a missing `file:` URL by rejecting ("No such file or
        // directory (os error 2)"), where a server answers 404: the same
        // absence, so an optional file is skipped the same way.
        Err(m) if url.starts_with("file:") && m.0.contains("(os error 2)") => {
            if optional {
                return Ok(Opened::Missing);
            }
            return Err(refuse(FetchProblem::Http(404)));
        }
        Err(m) => return Err(refuse(FetchProblem::Failed(m))),
    };
    let status = get(&resp, "status").as_f64().unwrap_or(0.0) as u32;
    if status == 404 && optional {
        return Ok(Opened::Missing);
    }
    if status == 304 && since.is_some() {
        return Ok(Opened::NotModified);
    }
    if !get(&resp, "ok").is_truthy() {
        return Err(refuse(FetchProblem::Http(status)));
    }
    let headers = get(&resp, "headers");
    let header = |name: &str| {
        call(&headers, "get", &[JsValue::from_str(name)])
            .ok()
            .and_then(|v| v.as_string())
    };
    let length = header("content-length").and_then(|s| s.parse::<f64>().ok());
    let body = get(&resp, "body");
    if let Some(h) = length {
        if let Err(e) = size_check(h as u64) {
            // Tell the server to stop sending; nothing was read.
            let _ = call(&body, "cancel", &[]);
            return Err(e);
        }
    }
    Ok(Opened::Body(Body {
        stream: body,
        length,
        validators: Validators {
            etag: header("etag"),
            last_modified: header("last-modified"),
        },
    }))
}

/// Reads a body (a `ReadableStream`) to its end: counted against
/// `size_check` and `expect_bytes`, hashed, reported to `progress` with
/// `source`, and each chunk also written to `sink` when there is one.
#[allow(clippy::too_many_arguments)]
pub async fn read_body(
    body: &JsValue,
    label: &str,
    url: &str,
    total: f64,
    expect_bytes: Option<u64>,
    size_check: SizeCheck<'_>,
    progress: Progress<'_>,
    source: Source,
    mut sink: Option<&mut Sink>,
) -> Result<Fetched, LoadError> {
    let refuse = |problem: FetchProblem| LoadError::Fetch {
        file: label.to_string(),
        url: url.to_string(),
        problem,
    };
    let clock = crate::platform::Clock::new();
    let mut hash_ms = 0.0;
    // Bytes from storage arrive as fast as the disk gives them, so hashing
    // them in wasm as they come is the load's cost (7-8 % of SmolLM2's,
    // bench/results/*-kept-files-*); the platform's SHA-256 over the whole
    // file is several times faster. From the network, the streaming hash
    // runs while the next chunk is awaited, and needs no WebCrypto.
    let subtle = (source == Source::Storage).then(web_crypto).flatten();
    let reader = call_page(body, "getReader", &[])?;
    let mut chunks: Vec<Uint8Array> = Vec::new();
    let mut hasher = Sha256::new();
    let mut loaded = 0f64;
    progress(label, 0.0, total, source);
    loop {
        let r = await_js(call_page(&reader, "read", &[])?)
            .await
            .map_err(|m| refuse(FetchProblem::Interrupted(m)))?;
        if get(&r, "done").is_truthy() {
            break;
        }
        let chunk: Uint8Array = get(&r, "value")
            .dyn_into()
            .map_err(|_| refuse(FetchProblem::NotBytes))?;
        loaded += chunk.length() as f64;
        if let Err(e) = size_check(loaded as u64) {
            let _ = call(&reader, "cancel", &[]);
            return Err(e);
        }
        if subtle.is_none() {
            let t = clock.ms();
            hasher.update(chunk.to_vec());
            hash_ms += clock.ms() - t;
        }
        if let Some(s) = sink.as_deref_mut() {
            s.write(&chunk).await;
        }
        chunks.push(chunk);
        progress(label, loaded, total, source);
    }
    if let Some(want) = expect_bytes {
        if loaded as u64 != want {
            return Err(refuse(FetchProblem::Size {
                got: loaded as u64,
                want,
            }));
        }
    }
    let out = Uint8Array::new_with_length(loaded as u32);
    let mut at = 0u32;
    for c in &chunks {
        out.set(c, at);
        at += c.length();
    }
    let t = clock.ms();
    let digest = match &subtle {
        Some(subtle) => {
            let p = call(
                subtle,
                "digest",
                &[JsValue::from_str("SHA-256"), out.clone().into()],
            )
            .map_err(|m| refuse(FetchProblem::Failed(m)))?;
            let buf = await_js(p)
                .await
                .map_err(|m| refuse(FetchProblem::Failed(m)))?;
            Uint8Array::new(&buf).to_vec()
        }
        None => hasher.finalize().to_vec(),
    };
    let sha256 = digest.iter().map(|b| format!("{b:02x}")).collect();
    hash_ms += clock.ms() - t;
    Ok(Fetched {
        bytes: out,
        sha256,
        hash_ms,
    })
}

/// The platform's `crypto.subtle`, where it has one with `digest` (a
/// secure context: https, localhost, Node, Deno).
fn web_crypto() -> Option<JsValue> {
    let subtle = get(&get(&js_sys::global(), "crypto"), "subtle");
    get(&subtle, "digest").is_function().then_some(subtle)
}

/// Fetches a small text file.
pub async fn fetch_text(
    url: &str,
    label: &str,
    optional: bool,
) -> Result<Option<String>, LoadError> {
    let Some(f) = fetch(url, label, None, optional, ANY_SIZE, &|_, _, _, _| {}).await? else {
        return Ok(None);
    };
    String::from_utf8(f.bytes.to_vec())
        .map(Some)
        .map_err(|e| LoadError::NotUtf8 {
            file: format!("{label} ({url})"),
            message: e.to_string(),
        })
}
