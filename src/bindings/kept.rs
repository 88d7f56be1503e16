//! Model files kept across visits: a models.json entry's files are read
//! from the browser's storage when a stored copy matches the catalog, and
//! written there as they download otherwise. `js/store.js` moves the bytes
//! (the origin private file system); what to keep, what to trust and what to
//! say about it is decided here.
//!
//! - Only files the catalog gives a size and sha256 for are kept: a stored
//!   copy is trusted only when its recorded size and hash are the catalog's
//!   and its bytes hash to them again on this read.
//! - A download is written under a temporary name while it is hashed, and
//!   moved under its real name only once its hash is the catalog's; one that
//!   fails the check leaves nothing and fails the load as it always did.
//! - Storage that refuses (none in this runtime, a quota, a private window)
//!   never fails a load: the load goes on from the network, and `info()`
//!   says why.

use std::cell::RefCell;

use js_sys::Promise;
use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::error::{FetchProblem, LoadError};
use super::fetch::{
    await_js, call, open, open_if, read_body, Body, Fetched, Opened, Progress, Sink, SizeCheck,
    Source, Validators,
};
use crate::platform::js::{get, JsFailure};

#[wasm_bindgen(module = "/js/store.js")]
extern "C" {
    #[wasm_bindgen(js_name = storeRead, catch)]
    fn store_read(entry: &str, file: &str) -> Result<Promise, JsValue>;
    #[wasm_bindgen(js_name = storeBegin, catch)]
    fn store_begin(entry: &str, file: &str) -> Result<Promise, JsValue>;
    #[wasm_bindgen(js_name = storeRemove, catch)]
    fn store_remove(entry: &str, file: &str) -> Result<Promise, JsValue>;
    #[wasm_bindgen(js_name = storePersist)]
    fn store_persist() -> Promise;
}

/// What a stored file's metadata records (written once its bytes are checked).
#[derive(Serialize, serde::Deserialize)]
struct Meta {
    bytes: u64,
    sha256: String,
    url: String,
    /// ms since the epoch.
    #[serde(rename = "storedAt")]
    stored_at: f64,
    /// A folder's file: the server's validators when it was stored.
    #[serde(flatten)]
    validators: Validators,
}

/// A stored file thrown away and downloaded again, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Refetched {
    pub file: String,
    pub why: String,
}

/// What storage did for one load, as `info().storage` says it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StorageReport {
    /// Whether this load could use storage (read or write).
    pub used: bool,
    /// Why it could not, or stopped writing: unavailable here, a quota, turned off.
    pub why_not: Option<String>,
    pub bytes_downloaded: u64,
    pub bytes_from_storage: u64,
    /// Files read from storage whose bytes or record no longer matched.
    pub refetched: Vec<Refetched>,
    /// Time spent hashing the files read from storage (each is hashed on every read).
    pub hash_ms: f64,
    /// Whether persistent storage was asked for (once per page; `persist: false` turns it off).
    pub persist_asked: bool,
}

/// The storage of one load: a models.json entry's key, and its report.
pub struct Keeper {
    entry: Option<String>,
    report: RefCell<StorageReport>,
}

/// A call into `js/store.js` (it may throw, or return a promise that
/// rejects), awaited; an error is its message.
pub(super) async fn settle(call: Result<Promise, JsValue>) -> Result<JsValue, String> {
    let p = call.map_err(|e| JsFailure::from_js(&e).to_string())?;
    await_js(p.into()).await.map_err(|e| e.to_string())
}

impl Keeper {
    /// Storage off for this load, with the reason `info()` gives.
    pub fn off(why: &str) -> Self {
        Keeper {
            entry: None,
            report: RefCell::new(StorageReport {
                why_not: Some(why.to_string()),
                ..StorageReport::default()
            }),
        }
    }

    /// The files of the model folder at `base`, kept on the caller's request
    /// (`keepFolderFiles`): keyed by URL, current while the server answers
    /// 304 to the stored copy's ETag or Last-Modified.
    pub fn for_folder(base: &str, persist: bool) -> Self {
        Self::for_entry(&format!("folder {base}"), persist)
    }

    /// The files of models.json entry `entry`, kept; asks for persistent storage once when `persist`.
    pub fn for_entry(entry: &str, persist: bool) -> Self {
        if persist {
            // Not awaited: a browser may ask its user, and a load does not wait on that.
            let _ = store_persist();
        }
        Keeper {
            entry: Some(entry.to_string()),
            report: RefCell::new(StorageReport {
                used: true,
                persist_asked: persist,
                ..StorageReport::default()
            }),
        }
    }

    pub fn report(&self) -> StorageReport {
        self.report.borrow().clone()
    }

    /// Storage stops being used for this load, for `why` (the first reason is kept).
    fn stop(&self, why: String) {
        let mut r = self.report.borrow_mut();
        r.used = false;
        r.why_not.get_or_insert(why);
    }

    fn entry(&self) -> Option<&str> {
        if self.report.borrow().used {
            self.entry.as_deref()
        } else {
            None
        }
    }

    /// `file` (its catalog path, the key under the entry) from storage when
    /// a checked copy is there, else downloaded from `url` and kept.
    #[allow(clippy::too_many_arguments)]
    pub async fn fetch(
        &self,
        url: &str,
        file: &str,
        label: &str,
        bytes: u64,
        sha256: &str,
        size_check: SizeCheck<'_>,
        progress: Progress<'_>,
    ) -> Result<(Fetched, Source), LoadError> {
        if let Some(got) = self
            .read(url, file, label, bytes, sha256, size_check, progress)
            .await
        {
            let mut r = self.report.borrow_mut();
            r.bytes_from_storage += bytes;
            r.hash_ms += got.hash_ms;
            return Ok((got, Source::Storage));
        }
        let body = open(url, label, false, size_check)
            .await?
            .ok_or_else(|| LoadError::Fetch {
                file: label.to_string(),
                url: url.to_string(),
                problem: FetchProblem::Http(404),
            })?;
        let got = self
            .download(
                url,
                file,
                label,
                body,
                Some(bytes),
                Some(sha256),
                size_check,
                progress,
            )
            .await?;
        Ok((got, Source::Network))
    }

    /// A model folder's file `file` (its path in the folder): the stored
    /// copy when the server answers 304 to its validators and its bytes
    /// hash to what was recorded, else downloaded and kept (when the server
    /// sends an ETag or Last-Modified). `Ok(None)`: an optional file the
    /// server does not have.
    pub async fn fetch_folder(
        &self,
        url: &str,
        file: &str,
        label: &str,
        optional: bool,
        size_check: SizeCheck<'_>,
        progress: Progress<'_>,
    ) -> Result<Option<(Fetched, Source)>, LoadError> {
        let stored = match self.entry() {
            Some(entry) => self.stored_meta(entry, file).await,
            None => None,
        };
        let since = stored.as_ref().map(|m| m.validators.clone());
        let body = match open_if(url, label, optional, size_check, since.as_ref()).await? {
            Opened::Missing => {
                if let (Some(entry), Some(_)) = (self.entry(), &stored) {
                    let _ = settle(store_remove(entry, file)).await;
                }
                return Ok(None);
            }
            Opened::NotModified => {
                let m = stored.as_ref().map(|m| (m.bytes, m.sha256.clone()));
                if let Some((bytes, sha256)) = m {
                    if let Some(got) = self
                        .read(url, file, label, bytes, &sha256, size_check, progress)
                        .await
                    {
                        let mut r = self.report.borrow_mut();
                        r.bytes_from_storage += bytes;
                        r.hash_ms += got.hash_ms;
                        return Ok(Some((got, Source::Storage)));
                    }
                }
                // The stored copy failed its check (and is gone): download it.
                open(url, label, optional, size_check)
                    .await?
                    .ok_or_else(|| LoadError::Fetch {
                        file: label.to_string(),
                        url: url.to_string(),
                        problem: FetchProblem::Http(404),
                    })?
            }
            Opened::Body(b) => {
                if let (Some(entry), Some(m)) = (self.entry(), &stored) {
                    let why = format!(
                        "the server's validators changed (stored {}, now {})",
                        describe(&m.validators),
                        describe(&b.validators)
                    );
                    self.refetch(entry, file, label, why).await;
                }
                b
            }
        };
        let got = self
            .download(url, file, label, body, None, None, size_check, progress)
            .await?;
        Ok(Some((got, Source::Network)))
    }

    /// The record of a stored file, when there is a readable one.
    async fn stored_meta(&self, entry: &str, file: &str) -> Option<Meta> {
        match settle(store_read(entry, file)).await {
            Ok(s) if s.is_null() || s.is_undefined() => None,
            Ok(s) => {
                let body = get(&s, "body");
                if !body.is_null() && !body.is_undefined() {
                    let _ = call(&body, "cancel", &[]);
                }
                get(&s, "meta")
                    .as_string()
                    .and_then(|m| serde_json::from_str(&m).ok())
            }
            Err(why) => {
                self.stop(why);
                None
            }
        }
    }

    /// Reads `body` from the network and keeps it under `file` as it
    /// arrives: checked against `sha256` when the catalog gives one (a
    /// mismatch fails the load and leaves nothing), kept only when a
    /// folder's server gives validators to check it against later.
    #[allow(clippy::too_many_arguments)]
    async fn download(
        &self,
        url: &str,
        file: &str,
        label: &str,
        body: Body,
        bytes: Option<u64>,
        sha256: Option<&str>,
        size_check: SizeCheck<'_>,
        progress: Progress<'_>,
    ) -> Result<Fetched, LoadError> {
        let refuse = |problem: FetchProblem| LoadError::Fetch {
            file: label.to_string(),
            url: url.to_string(),
            problem,
        };
        let mut sink = Sink {
            writer: None,
            failed: None,
        };
        let keepable = sha256.is_some() || body.validators.any();
        if let Some(entry) = self.entry() {
            if !keepable {
                self.stop(format!(
                    "{label}: the server sends no ETag or Last-Modified to check a stored copy against, so this folder is not kept"
                ));
            } else {
                match self.begin(entry, file).await {
                    Ok(w) => sink.writer = Some(w),
                    Err(why) => self.stop(why),
                }
            }
        }
        let total = bytes.map(|b| b as f64).or(body.length).unwrap_or(0.0);
        let got = read_body(
            &body.stream,
            label,
            url,
            total,
            bytes,
            size_check,
            progress,
            Source::Network,
            Some(&mut sink),
        )
        .await;
        let got = match (got, sha256) {
            (Ok(g), Some(want)) if g.sha256 != want => {
                sink.abort().await;
                return Err(refuse(FetchProblem::Sha256 {
                    got: g.sha256,
                    want: want.to_string(),
                }));
            }
            (Ok(g), _) => g,
            (Err(e), _) => {
                sink.abort().await;
                return Err(e);
            }
        };
        let n = u64::from(got.bytes.length());
        self.report.borrow_mut().bytes_downloaded += n;
        if let Some(why) = sink.failed.take() {
            self.stop(format!("{label}: {why}"));
        } else if let Some(w) = sink.writer.take() {
            let meta = Meta {
                bytes: n,
                sha256: got.sha256.clone(),
                url: url.to_string(),
                stored_at: js_sys::Date::now(),
                validators: body.validators.clone(),
            };
            let meta = serde_json::to_string(&meta).unwrap_or_default();
            let done = match call(&w, "commit", &[JsValue::from_str(&meta)]) {
                Ok(p) => await_js(p).await.map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = done {
                self.stop(format!("{label}: keeping it failed: {e}"));
            }
        }
        Ok(got)
    }

    async fn begin(&self, entry: &str, file: &str) -> Result<JsValue, String> {
        settle(store_begin(entry, file)).await
    }

    /// A stored copy that matches the catalog, read and hashed again; `None`
    /// (after throwing a mismatched copy away and saying why) otherwise.
    #[allow(clippy::too_many_arguments)]
    async fn read(
        &self,
        url: &str,
        file: &str,
        label: &str,
        bytes: u64,
        sha256: &str,
        size_check: SizeCheck<'_>,
        progress: Progress<'_>,
    ) -> Option<Fetched> {
        let entry = self.entry()?;
        let stored = match settle(store_read(entry, file)).await {
            Ok(s) if s.is_null() || s.is_undefined() => return None,
            Ok(s) => s,
            Err(why) => {
                self.stop(why);
                return None;
            }
        };
        let meta: Option<Meta> = get(&stored, "meta")
            .as_string()
            .and_then(|m| serde_json::from_str(&m).ok());
        let size = get(&stored, "size").as_f64().unwrap_or(-1.0);
        let why = match &meta {
            None => Some("its record is unreadable".to_string()),
            Some(m) if m.sha256 != sha256 => Some(format!(
                "models.json now gives sha256 {sha256}, the stored copy {}",
                m.sha256
            )),
            Some(m) if m.bytes != bytes => Some(format!(
                "models.json now gives {bytes} bytes, the stored copy {}",
                m.bytes
            )),
            Some(_) if size != bytes as f64 => Some(format!(
                "{size} bytes are stored, {bytes} recorded (truncated or grown)"
            )),
            Some(_) => None,
        };
        if why.is_none() {
            let body = get(&stored, "body");
            match read_body(
                &body,
                label,
                url,
                bytes as f64,
                Some(bytes),
                size_check,
                progress,
                Source::Storage,
                None,
            )
            .await
            {
                Ok(got) if got.sha256 == sha256 => return Some(got),
                Ok(got) => {
                    self.refetch(
                        entry,
                        file,
                        label,
                        format!(
                            "its bytes hash to {}, not the recorded {sha256} (altered)",
                            got.sha256
                        ),
                    )
                    .await
                }
                Err(e) => {
                    self.refetch(entry, file, label, format!("reading it failed: {e}"))
                        .await
                }
            }
        } else if let Some(why) = why {
            self.refetch(entry, file, label, why).await;
        }
        None
    }

    async fn refetch(&self, entry: &str, file: &str, label: &str, why: String) {
        if let Err(e) = settle(store_remove(entry, file)).await {
            self.stop(format!("removing the stored {label} failed: {e}"));
        }
        self.report.borrow_mut().refetched.push(Refetched {
            file: file.to_string(),
            why,
        });
    }
}

/// A server's validators in words.
fn describe(v: &Validators) -> String {
    match (&v.etag, &v.last_modified) {
        (Some(e), _) => format!("ETag {e}"),
        (None, Some(m)) => format!("Last-Modified {m}"),
        (None, None) => "none".into(),
    }
}
