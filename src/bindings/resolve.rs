//! From what the caller names (`models.json#id` or a model directory URL)
//! to the backend chosen and the files fetched, with progress and integrity
//! checks.

use super::error::LoadError;
use super::fetch::{fetch_text, resolve as resolve_url, Progress};
use super::files::{dir_files, entry_files, Files};
use super::kept::Keeper;
use crate::core::model::backend_choice::{choose, Choice, Chosen, Gpu, Model, Requested};
use crate::core::model::models_json::Catalog;

/// What the caller asked storage to do (load options `keepFiles`,
/// `persist`, `keepFolderFiles`).
#[derive(Clone, Copy)]
pub struct Keep {
    pub files: bool,
    pub persist: bool,
    pub folders: bool,
}

/// The entry (or directory) `source` names, the backend it runs on, and its
/// files, downloaded.
pub(super) async fn resolve(
    source: &str,
    requested: Requested,
    allow_absolute_urls: bool,
    gpu: &Gpu,
    keep: Keep,
    progress: Progress<'_>,
) -> Result<(Vec<Choice>, Files, Keeper), LoadError> {
    match source.split_once('#') {
        Some((cat, id)) => {
            let cat_url = resolve_url(cat, "")?;
            let text = fetch_text(&cat_url, "models.json", false)
                .await?
                .unwrap_or_default();
            crate::core::input::input_limits::check_file("models.json", text.len() as u64)?;
            let catalog = Catalog::parse(&text)?;
            // Before any file it names is fetched.
            catalog.check_urls(allow_absolute_urls)?;
            let entry = catalog.find(id)?;
            let candidates = choose(
                requested,
                gpu,
                &Model {
                    id: &entry.id,
                    needs_f16: entry.needs_f16(),
                    wasm_variant: entry.wasm_variant.as_deref(),
                    int4: Some(entry.int4()),
                },
            )?;
            // Every candidate of one load reads the same model's files.
            let chosen = catalog.find(&candidates[0].model)?;
            if candidates[0].backend == Chosen::Cpu {
                // The catalog says how large the graph is: a model our
                // runtime could not hold is refused before its download.
                let bytes = chosen
                    .files
                    .iter()
                    .filter(|f| matches!(f.role.as_str(), "graph" | "external_data"))
                    .map(|f| f.bytes)
                    .sum();
                crate::runtime::own::check_files_fit(bytes, crate::runtime::own::WEIGHT_LIMIT)?;
            }
            let keeper = if keep.files {
                Keeper::for_entry(&chosen.id, keep.persist)
            } else {
                Keeper::off("keepFiles: false")
            };
            let mut files = entry_files(chosen, &cat_url, &keeper, progress).await?;
            files.readout = chosen.readout;
            Ok((candidates, files, keeper))
        }
        None => {
            use crate::core::model::layout::{names_graph, split_graph_path};
            // A graph's URL names its folder's model (the folder above it
            // when the graph sits in `onnx/`, as onnx-community's do).
            let (folder, graph) = if names_graph(source) {
                let path = source.split(['?', '#']).next().unwrap_or(source);
                let (root, graph) = split_graph_path(path);
                (root.to_string(), Some(graph))
            } else if source.ends_with('/') {
                (source.to_string(), None)
            } else {
                (format!("{source}/"), None)
            };
            let base = resolve_url(&folder, "")?;
            // Before any download, so an explicit request that cannot run
            // fails first; whether the graph is int4 is known once fetched.
            let candidates = choose(
                requested,
                gpu,
                &Model {
                    id: source,
                    needs_f16: false,
                    wasm_variant: None,
                    int4: None,
                },
            )?;
            // A folder gives no sizes or hashes to check a stored copy
            // against: kept only when asked, and checked by the server's
            // validators and the hash recorded when it was stored.
            let keeper = if keep.folders && keep.files {
                Keeper::for_folder(&base, keep.persist)
            } else {
                Keeper::off("a model folder's files are kept only with keepFolderFiles: true (they are checked by the server's ETag or Last-Modified, not a catalog's sha256)")
            };
            let files = dir_files(&base, graph, &candidates[0], gpu, &keeper, progress).await?;
            Ok((candidates, files, keeper))
        }
    }
}
