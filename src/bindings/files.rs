//! The files a load needs, fetched with progress: those a models.json entry
//! lists (each checked against its size and sha256), or the fixed names of a
//! model directory (nothing to check them against).

use super::error::{FetchProblem, LoadError};
use super::fetch::{fetch, resolve, Progress};
use crate::core::model::models_json::Entry;
use serde::Serialize;

/// One file a load fetched, as `engine.info()` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct LoadedFile {
    pub role: String,
    pub url: String,
    pub bytes: u64,
    /// Checked against models.json (directory loads have nothing to check against).
    pub sha256_checked: bool,
}

pub(super) struct Files {
    pub(super) graph: js_sys::Uint8Array,
    pub(super) external: Vec<(String, js_sys::Uint8Array)>,
    pub(super) config: String,
    pub(super) tokenizer: Vec<u8>,
    pub(super) slot_map: Option<String>,
    pub(super) head_rows: Option<String>,
    pub(super) chat_template: Option<String>,
    pub(super) tokenizer_config: Option<String>,
    /// The entry's default readout (models.json), when it names one.
    pub(super) readout: Option<crate::core::spec::mode::ReadoutChoice>,
    pub(super) listed: Vec<LoadedFile>,
}

impl Files {
    /// Nothing fetched yet; each loader fills what it finds.
    fn empty() -> Self {
        Files {
            graph: js_sys::Uint8Array::new_with_length(0),
            external: vec![],
            config: String::new(),
            tokenizer: vec![],
            slot_map: None,
            head_rows: None,
            chat_template: None,
            tokenizer_config: None,
            readout: None,
            listed: vec![],
        }
    }
}

fn utf8(b: &js_sys::Uint8Array, what: &str) -> Result<String, LoadError> {
    String::from_utf8(b.to_vec()).map_err(|e| LoadError::NotUtf8 {
        file: what.to_string(),
        message: e.to_string(),
    })
}

fn file_name(url: &str) -> String {
    url.rsplit('/')
        .next()
        .unwrap_or(url)
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_string()
}

pub(super) async fn entry_files(
    entry: &Entry,
    catalog_url: &str,
    progress: Progress<'_>,
) -> Result<Files, LoadError> {
    let mut f = Files::empty();
    if entry.file("graph").is_none() {
        return Err(LoadError::Entry {
            id: entry.id.clone(),
            problem: "no graph file listed",
        });
    }
    for file in &entry.files {
        // The catalog's size is checked against the sha256 after the
        // download, so a side file over its limit is refused before it.
        crate::core::spec::input_limits::check_file(&file.role, file.bytes)?;
        let url = resolve(&file.url, catalog_url)?;
        // More bytes than the catalog says is refused as they arrive.
        let want = file.bytes;
        let label = file.role.clone();
        let url2 = url.clone();
        let over = move |n: u64| {
            if n > want {
                return Err(LoadError::Fetch {
                    file: label.clone(),
                    url: url2.clone(),
                    problem: FetchProblem::Size { got: n, want },
                });
            }
            Ok(())
        };
        let got = fetch(&url, &file.role, Some(file.bytes), false, &over, progress)
            .await?
            .ok_or_else(|| LoadError::Fetch {
                file: file.role.clone(),
                url: url.clone(),
                problem: FetchProblem::Http(404),
            })?;
        if got.sha256 != file.sha256 {
            return Err(LoadError::Fetch {
                file: file.role.clone(),
                url: url.clone(),
                problem: FetchProblem::Sha256 {
                    got: got.sha256,
                    want: file.sha256.clone(),
                },
            });
        }
        f.listed.push(LoadedFile {
            role: file.role.clone(),
            url: url.clone(),
            bytes: file.bytes,
            sha256_checked: true,
        });
        match file.role.as_str() {
            "graph" => f.graph = got.bytes,
            "external_data" => f.external.push((file_name(&file.url), got.bytes)),
            "config" => f.config = utf8(&got.bytes, "config.json")?,
            "tokenizer" => f.tokenizer = got.bytes.to_vec(),
            "slot_map" => f.slot_map = Some(utf8(&got.bytes, "slot_map.json")?),
            "head_rows" => f.head_rows = Some(utf8(&got.bytes, "head_rows.json")?),
            "chat_template" => f.chat_template = Some(utf8(&got.bytes, "chat_template.jinja")?),
            "tokenizer_config" => {
                f.tokenizer_config = Some(utf8(&got.bytes, "tokenizer_config.json")?)
            }
            _ => {}
        }
    }
    if f.config.is_empty() || f.tokenizer.is_empty() {
        return Err(LoadError::Entry {
            id: entry.id.clone(),
            problem: "config and tokenizer files are required",
        });
    }
    Ok(f)
}

/// A directory's files. It has no catalog to give sizes first, so each
/// file's `content-length` (or its running size) is checked as it comes: a
/// side file against its role's limit, and with `cpu` (our runtime will
/// hold the weights) the graph and external data against what a load can
/// hold, before the body is downloaded.
pub(super) async fn dir_files(
    base: &str,
    cpu: bool,
    progress: Progress<'_>,
) -> Result<Files, LoadError> {
    let mut f = Files::empty();
    let names = [
        ("graph", "model.onnx", false),
        ("external_data", "model.onnx.data", true),
        ("config", "config.json", false),
        ("tokenizer", "tokenizer.json", false),
        ("slot_map", "slot_map.json", true),
        ("head_rows", "head_rows.json", true),
        ("chat_template", "chat_template.jinja", true),
        ("tokenizer_config", "tokenizer_config.json", true),
    ];
    for (role, name, optional) in names {
        let url = resolve(name, base)?;
        let graph_bytes = u64::from(f.graph.length());
        let check = |n: u64| -> Result<(), LoadError> {
            crate::core::spec::input_limits::check_file(name, n)?;
            if cpu && matches!(role, "graph" | "external_data") {
                crate::runtime::own::check_files_fit(
                    graph_bytes.saturating_add(n),
                    crate::runtime::own::WEIGHT_LIMIT,
                )?;
            }
            Ok(())
        };
        let Some(got) = fetch(&url, role, None, optional, &check, progress).await? else {
            continue;
        };
        f.listed.push(LoadedFile {
            role: role.into(),
            url,
            bytes: got.bytes.length() as u64,
            sha256_checked: false,
        });
        match role {
            "graph" => f.graph = got.bytes,
            "external_data" => f.external.push((name.to_string(), got.bytes)),
            "config" => f.config = utf8(&got.bytes, "config.json")?,
            "tokenizer" => f.tokenizer = got.bytes.to_vec(),
            "slot_map" => f.slot_map = Some(utf8(&got.bytes, name)?),
            "head_rows" => f.head_rows = Some(utf8(&got.bytes, name)?),
            "chat_template" => f.chat_template = Some(utf8(&got.bytes, name)?),
            _ => f.tokenizer_config = Some(utf8(&got.bytes, name)?),
        }
    }
    Ok(f)
}
