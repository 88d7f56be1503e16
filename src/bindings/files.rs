//! The files a load needs, fetched with progress: those a models.json entry
//! lists (each checked against its size and sha256), or the fixed names of a
//! model directory (nothing to check them against).

use super::error::{FetchProblem, LoadError};
use super::fetch::{resolve, Progress, Source};
use super::kept::Keeper;
use crate::core::model::backend_choice::{Choice, Chosen, Gpu};
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
    /// "network" or "storage" (a models.json entry's file kept from an earlier load).
    pub source: Source,
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
    pub(super) readout: Option<crate::core::input::mode::ReadoutChoice>,
    pub(super) listed: Vec<LoadedFile>,
    /// The catalog's sha256 of every file, hashed together: what a kept
    /// prefix is keyed by (`None` for a folder, whose files have no hashes).
    pub(super) model_key: Option<String>,
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
            model_key: None,
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

/// A downloaded graph, read in place by the wire walk: copying it into the
/// module's memory first would cost what the check is there to avoid.
struct JsBytes<'a>(&'a js_sys::Uint8Array);

impl crate::onnx_pb::WireBytes for JsBytes<'_> {
    fn len(&self) -> usize {
        self.0.length() as usize
    }
    fn byte(&self, at: usize) -> Option<u8> {
        let at = u32::try_from(at).ok()?;
        (at < self.0.length()).then(|| self.0.get_index(at))
    }
}

/// Refuses a graph with more nodes or initializers than any real model,
/// counted on the wire before anything decodes it: our runtime's loader,
/// the `auto` policy's look at its operators, or onnxruntime-web's session.
fn check_graph(graph: &js_sys::Uint8Array) -> Result<(), LoadError> {
    use crate::onnx_pb::{graph_over_limit_in, MAX_GRAPH_ENTRIES};
    match graph_over_limit_in(&JsBytes(graph), MAX_GRAPH_ENTRIES) {
        Some((what, count)) => Err(crate::core::CoreError::TooLarge {
            field: format!("model.onnx ({what})"),
            size: count,
            limit: MAX_GRAPH_ENTRIES,
            unit: what,
            hint: "counted on the wire up to the limit; real models hold under 10,000",
        }
        .into()),
        None => Ok(()),
    }
}

pub(super) async fn entry_files(
    entry: &Entry,
    catalog_url: &str,
    keeper: &Keeper,
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
        crate::core::input::input_limits::check_file(&file.role, file.bytes)?;
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
        // Checked against the catalog's size and sha256 wherever it comes from.
        let (got, source) = keeper
            .fetch(
                &url,
                &file.url,
                &file.role,
                file.bytes,
                &file.sha256,
                &over,
                progress,
            )
            .await?;
        f.listed.push(LoadedFile {
            role: file.role.clone(),
            url: url.clone(),
            bytes: file.bytes,
            sha256_checked: true,
            source,
        });
        match file.role.as_str() {
            "graph" => {
                check_graph(&got.bytes)?;
                f.graph = got.bytes
            }
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
    f.model_key =
        Some(model_key(entry.files.iter().map(|file| {
            (file.role.as_str(), file.bytes, file.sha256.as_str())
        })));
    Ok(f)
}

/// Every file's role, size and sha256, hashed together: what a kept prefix
/// is keyed by. The same files give the same key wherever they are served
/// from; a folder's are the hashes of what was fetched.
fn model_key<'a>(files: impl Iterator<Item = (&'a str, u64, &'a str)>) -> String {
    use sha2::{Digest, Sha256};
    // In one order whatever the listing's: a catalog entry and a folder of the same files agree.
    let mut files: Vec<_> = files.collect();
    files.sort_unstable();
    let mut h = Sha256::new();
    for (role, bytes, sha256) in files {
        h.update(format!("{role}\0{bytes}\0{sha256}\n").as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A directory's files. It has no catalog to give sizes first, so each
/// file's `content-length` (or its running size) is checked as it comes: a
/// side file against its role's limit, and with `cpu` (our runtime will
/// hold the weights) the graph and external data against what a load can
/// hold, before the body is downloaded.
///
/// The graph is `graph` when the caller named it; otherwise the folder's
/// `model.onnx`, or else the first of onnx-community's `onnx/model_*.onnx`
/// that exists (int4 with float32 scales first, unless the chosen backend
/// computes float16). Its external data is looked for under both the
/// builder's and Optimum's names.
pub(super) async fn dir_files(
    base: &str,
    graph: Option<&str>,
    first: &Choice,
    gpu: &Gpu,
    keeper: &Keeper,
    progress: Progress<'_>,
) -> Result<Files, LoadError> {
    use crate::core::model::layout::{external_data_names, onnx_community_graphs, TOP_GRAPH};
    let cpu = first.backend == Chosen::Cpu;
    let f16 = first.backend == Chosen::WebGpu && matches!(gpu, Gpu::Available { f16: true, .. });
    let mut f = Files::empty();
    // Each file's role, size and sha256 as fetched: the folder's model key.
    let mut hashes: Vec<(String, u64, String)> = Vec::new();
    let candidates: Vec<String> = match graph {
        Some(g) => vec![g.to_string()],
        None => std::iter::once(TOP_GRAPH.to_string())
            .chain(
                onnx_community_graphs(f16)
                    .iter()
                    .map(|n| format!("onnx/{n}")),
            )
            .collect(),
    };
    let mut graph_name = None;
    for name in &candidates {
        let url = resolve(name, base)?;
        let check = |n: u64| -> Result<(), LoadError> {
            if cpu {
                crate::runtime::own::check_files_fit(n, crate::runtime::own::WEIGHT_LIMIT)?;
            }
            Ok(())
        };
        // Each is optional but the caller's own; a 404 moves to the next.
        let optional = graph.is_none();
        if let Some((got, source)) = keeper
            .fetch_folder(&url, name, "graph", optional, &check, progress)
            .await?
        {
            check_graph(&got.bytes)?;
            hashes.push((
                "graph".to_string(),
                got.bytes.length() as u64,
                got.sha256.clone(),
            ));
            f.listed.push(LoadedFile {
                role: "graph".into(),
                url,
                bytes: got.bytes.length() as u64,
                sha256_checked: false,
                source,
            });
            f.graph = got.bytes;
            graph_name = Some(name.clone());
            break;
        }
    }
    let Some(graph_name) = graph_name else {
        return Err(LoadError::Fetch {
            file: "graph".into(),
            url: resolve(TOP_GRAPH, base)?,
            problem: FetchProblem::Http(404),
        });
    };
    let externals = external_data_names(&graph_name);
    let mut names: Vec<(&str, &str, bool)> = externals
        .iter()
        .map(|n| ("external_data", n.as_str(), true))
        .collect();
    names.extend([
        ("config", "config.json", false),
        ("tokenizer", "tokenizer.json", false),
        ("slot_map", "slot_map.json", true),
        ("head_rows", "head_rows.json", true),
        ("chat_template", "chat_template.jinja", true),
        ("tokenizer_config", "tokenizer_config.json", true),
    ]);
    for (role, name, optional) in names {
        let url = resolve(name, base)?;
        let graph_bytes = u64::from(f.graph.length());
        let check = |n: u64| -> Result<(), LoadError> {
            crate::core::input::input_limits::check_file(name, n)?;
            if cpu && matches!(role, "graph" | "external_data") {
                crate::runtime::own::check_files_fit(
                    graph_bytes.saturating_add(n),
                    crate::runtime::own::WEIGHT_LIMIT,
                )?;
            }
            Ok(())
        };
        let Some((got, source)) = keeper
            .fetch_folder(&url, name, role, optional, &check, progress)
            .await?
        else {
            continue;
        };
        hashes.push((
            role.to_string(),
            got.bytes.length() as u64,
            got.sha256.clone(),
        ));
        f.listed.push(LoadedFile {
            role: role.into(),
            url,
            bytes: got.bytes.length() as u64,
            sha256_checked: false,
            source,
        });
        match role {
            "external_data" => f.external.push((file_name(name), got.bytes)),
            "config" => f.config = utf8(&got.bytes, "config.json")?,
            "tokenizer" => f.tokenizer = got.bytes.to_vec(),
            "slot_map" => f.slot_map = Some(utf8(&got.bytes, name)?),
            "head_rows" => f.head_rows = Some(utf8(&got.bytes, name)?),
            "chat_template" => f.chat_template = Some(utf8(&got.bytes, name)?),
            _ => f.tokenizer_config = Some(utf8(&got.bytes, name)?),
        }
    }
    f.model_key = Some(model_key(
        hashes.iter().map(|(r, b, h)| (r.as_str(), *b, h.as_str())),
    ));
    Ok(f)
}
