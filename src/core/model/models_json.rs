//! `models.json` (spec §4) as data: parsed by the native loader and the
//! browser loader alike; built by `readout catalog` (src/surgery/catalog.rs).

use crate::core::CoreError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    pub role: String,
    /// Relative to models.json.
    pub url: String,
    pub bytes: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub hidden_size: usize,
    pub vocab_size: usize,
    pub max_positions: usize,
    /// Rows of the head: the vocabulary, or the kept letters.
    pub head_rows: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    pub base: String,
    pub family: String,
    pub dtype: String,
    pub trimmed: bool,
    pub pruned: bool,
    pub tied: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub letters: Option<String>,
    /// The entry the WASM backend loads in this one's place (same base,
    /// trim and prune; a weight format the WASM backend runs well).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm_variant: Option<String>,
    /// The readout served when a call does not choose one (measured per
    /// model by `bench/runners/decisions.sh`, named to `readout catalog` by `scripts/catalog.sh`); absent: letters, plain prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readout: Option<crate::core::input::mode::ReadoutChoice>,
    pub files: Vec<FileEntry>,
    pub shape: Shape,
}

impl Entry {
    pub fn file(&self, role: &str) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.role == role)
    }

    /// Whether WebGPU needs the `shader-f16` feature to run this entry.
    pub fn needs_f16(&self) -> bool {
        matches!(self.dtype.as_str(), "q4f16" | "fp16")
    }

    /// An int4 graph (MatMulNBits weights), which our own runtime computes.
    pub fn int4(&self) -> bool {
        matches!(self.dtype.as_str(), "q4" | "q4f16")
    }
}

/// Where a catalog file URL points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlPlace {
    /// Below the catalog's folder.
    Relative,
    /// An `http(s)://` URL, wherever it points.
    Absolute,
}

/// Classifies `url`, or says why it is neither a plain relative path below
/// the catalog's folder nor an absolute `http(s)` URL.
pub fn url_place(url: &str) -> Result<UrlPlace, String> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        return Ok(UrlPlace::Absolute);
    }
    if url.is_empty() {
        return Err("is empty".into());
    }
    if url.contains('\\') {
        return Err("holds a backslash".into());
    }
    if url.contains(['?', '#']) {
        return Err("holds a query or fragment".into());
    }
    if url.starts_with('/') {
        return Err("is rooted; it must be relative to models.json".into());
    }
    let first = url.split('/').next().unwrap_or("");
    if first.contains(':') {
        return Err("names a scheme other than http(s)".into());
    }
    for seg in url.split('/') {
        let decoded = seg.to_ascii_lowercase().replace("%2e", ".");
        if seg.is_empty() {
            return Err("has an empty path segment (//)".into());
        }
        if decoded == "." || decoded == ".." {
            return Err(format!(
                "has a {seg:?} segment; files stay in the catalog's folder"
            ));
        }
        if decoded.contains("%2f") || decoded.contains("%5c") {
            return Err("holds an encoded slash".into());
        }
    }
    Ok(UrlPlace::Relative)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub version: u32,
    pub models: Vec<Entry>,
}

impl Catalog {
    pub fn parse(json: &str) -> Result<Self, CoreError> {
        serde_json::from_str(json).map_err(|e| CoreError::Catalog(e.to_string()))
    }

    pub fn find(&self, id: &str) -> Result<&Entry, CoreError> {
        self.models
            .iter()
            .find(|m| m.id == id)
            .ok_or_else(|| CoreError::UnknownModel {
                id: id.to_string(),
                known: self.models.iter().map(|m| m.id.clone()).collect(),
            })
    }

    /// Refuses any file URL that would leave the catalog's folder (`../`, a
    /// rooted path, a backslash, an encoded dot segment) or, unless
    /// `absolute_allowed`, its origin: an absolute `http(s)` URL. Run before
    /// anything is fetched or opened from the catalog.
    pub fn check_urls(&self, absolute_allowed: bool) -> Result<(), CoreError> {
        for m in &self.models {
            for f in &m.files {
                let refuse = |reason: String| CoreError::CatalogUrl {
                    id: m.id.clone(),
                    url: f.url.clone(),
                    reason,
                };
                match url_place(&f.url).map_err(refuse)? {
                    UrlPlace::Relative => {}
                    UrlPlace::Absolute if absolute_allowed => {}
                    UrlPlace::Absolute => {
                        return Err(refuse(
                            "is absolute; a catalog's files stay in its origin unless absolute URLs are allowed (allowAbsoluteUrls)".into(),
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    /// Links each entry to its WASM variant: the entry with the same base,
    /// trim and prune whose dtype the WASM backend runs best (float weights
    /// first: onnxruntime-web's WASM backend has no int4 kernel), else itself
    /// when its own dtype is a float-activation one.
    pub fn link_wasm_variants(&mut self) {
        const ORDER: [&str; 2] = ["fp32", "q4"];
        let keys: Vec<(String, String, bool, bool, String)> = self
            .models
            .iter()
            .map(|m| {
                (
                    m.id.clone(),
                    m.base.clone(),
                    m.trimmed,
                    m.pruned,
                    m.dtype.clone(),
                )
            })
            .collect();
        for m in &mut self.models {
            let pick = ORDER.iter().find_map(|d| {
                keys.iter()
                    .find(|(_, base, t, p, dt)| {
                        *base == m.base && *t == m.trimmed && *p == m.pruned && dt == d
                    })
                    .map(|k| k.0.clone())
            });
            m.wasm_variant = pick;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_relative_and_http_urls_are_placed() {
        for ok in [
            "smollm2/model.onnx",
            "a/b/c.data",
            "x.json",
            "dir.v2/m.onnx",
        ] {
            assert_eq!(url_place(ok), Ok(UrlPlace::Relative), "{ok}");
        }
        assert_eq!(url_place("https://h/x.onnx"), Ok(UrlPlace::Absolute));
        assert_eq!(url_place("HTTP://h/x.onnx"), Ok(UrlPlace::Absolute));
    }

    #[test]
    fn urls_that_leave_the_folder_are_refused_with_a_reason() {
        for (bad, why) in [
            ("../secret.onnx", "\"..\""),
            ("a/../../b", "\"..\""),
            ("a/%2e%2E/b", "segment"),
            ("./a", "\".\""),
            ("/etc/passwd", "rooted"),
            ("a\\..\\b", "backslash"),
            ("a//b", "empty path segment"),
            ("file:///etc/passwd", "scheme"),
            ("data:,x", "scheme"),
            ("a%2f..%2fb", "encoded slash"),
            ("a?x=1", "query"),
            ("", "empty"),
        ] {
            let e = url_place(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_catalog_entry_with_dotdot_is_refused_by_name_and_absolute_only_when_allowed() {
        let file = |url: &str| FileEntry {
            role: "graph".into(),
            url: url.into(),
            bytes: 1,
            sha256: String::new(),
        };
        let shape = Shape {
            layers: 1,
            kv_heads: 1,
            head_dim: 1,
            hidden_size: 1,
            vocab_size: 1,
            max_positions: 1,
            head_rows: 1,
        };
        let entry = |url: &str| Entry {
            id: "m".into(),
            base: "m".into(),
            family: "f".into(),
            dtype: "q4".into(),
            trimmed: false,
            pruned: false,
            tied: false,
            letters: None,
            wasm_variant: None,
            readout: None,
            files: vec![file(url)],
            shape: shape.clone(),
        };
        let cat = |url: &str| Catalog {
            version: 1,
            models: vec![entry(url)],
        };
        let e = cat("../../etc/model.onnx").check_urls(true).unwrap_err();
        assert_eq!(e.info().code, "outside_root");
        assert_eq!(e.info().field.as_deref(), Some("models.json"));
        assert!(e.to_string().contains("../../etc/model.onnx"), "{e}");
        assert!(cat("m/model.onnx").check_urls(false).is_ok());
        assert!(cat("https://cdn/m.onnx").check_urls(true).is_ok());
        let e = cat("https://cdn/m.onnx").check_urls(false).unwrap_err();
        assert!(e.to_string().contains("allowAbsoluteUrls"), "{e}");
    }
}
