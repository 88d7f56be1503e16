//! From what the caller names (`models.json#id` or a model directory URL)
//! to a proven engine, in three steps: choose (probe the adapter; the policy
//! is the core's), resolve (the entry, the backend, every file downloaded
//! with progress and integrity checks), build (the runtime on the chosen
//! backend), then the engine's load-time proofs.

use std::cell::Cell;
use std::rc::Rc;

use serde::Serialize;

use super::build::build;
use super::choose::{graph_is_int4, probe_gpu};
use super::error::LoadError;
use super::fetch::Progress;
use super::files::LoadedFile;
use super::kept::StorageReport;
use super::options::LoadOptions;
use super::resolve::resolve;
use crate::core::model::backend_choice::{fell_back, Chosen};
use crate::core::model::config::ModelConfig;
use crate::engine::Engine;
use crate::runtime::any::AnyRuntime;
use crate::runtime::web::WebRuntime;

/// The engine the bindings hold: onnxruntime-web (WebGPU or WASM) or our
/// own runtime.
pub type WebEngine = Engine<AnyRuntime<WebRuntime>>;

/// What `engine.info()` adds to the engine's own report.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub source: String,
    pub backend: Chosen,
    pub backend_reason: String,
    pub model: String,
    pub files: Vec<LoadedFile>,
    /// What the browser's storage gave and kept (`kept.rs`).
    pub storage: StorageReport,
    pub readout: String,
    pub threads: Option<f64>,
    pub cross_origin_isolated: bool,
    pub load_ms: f64,
}

pub struct Loaded {
    pub engine: WebEngine,
    pub report: LoadReport,
    pub live: Rc<Cell<usize>>,
}

pub async fn load(
    source: &str,
    opts: LoadOptions,
    progress: Progress<'_>,
    now: &dyn Fn() -> f64,
) -> Result<Loaded, LoadError> {
    let t0 = now();
    let (gpu, device) = probe_gpu(opts.backend).await;
    let keep = super::resolve::Keep {
        files: opts.keep_files,
        persist: opts.persist,
        folders: opts.keep_folder_files,
    };
    let (candidates, files, keeper) = resolve(
        source,
        opts.backend,
        opts.allow_absolute_urls,
        &gpu,
        keep,
        progress,
    )
    .await?;
    let config = ModelConfig::parse(&files.config)?;
    let live = Rc::new(Cell::new(0));
    let int4 = candidates.iter().any(|c| c.only_int4) && graph_is_int4(&files);
    let mut device = device;
    // The candidates in the core's order: an `only_int4` one is passed over
    // when the graph is float (the next one's reason says so), and one whose
    // runtime refuses an operator (onnx-community's exports spell attention
    // out in ops ours lacks) gives way to the next, which runs every op.
    let mut refused: Option<(String, LoadError)> = None;
    let mut tried = candidates
        .into_iter()
        .filter(|c| !c.only_int4 || int4)
        .peekable();
    let (choice, built) = loop {
        let Some(mut choice) = tried.next() else {
            // The core never gives an empty list, and the last candidate
            // is never `only_int4`.
            return Err(crate::core::CoreError::BackendUnavailable {
                backend: "auto",
                reason: "the choice gave no backend to try".into(),
            }
            .into());
        };
        if let Some((reason, e)) = refused.take() {
            choice.reason = fell_back(
                &reason,
                "the cpu backend",
                &e.to_string(),
                "the WASM backend",
            );
        }
        let r = build(
            choice.backend,
            &choice.model,
            &files,
            &config,
            &opts,
            device.take(),
            live.clone(),
        )
        .await;
        match r {
            Err(e) if tried.peek().is_some() && e.info().code == "graph_unsupported" => {
                refused = Some((choice.reason, e));
            }
            r => break (choice, r?),
        }
    };
    let mut engine = Engine::new(built.runtime, files.assets(&choice.model)).await?;
    if let Some(key) = &files.model_key {
        engine.set_model_key(key.clone());
    }
    if let Some(d) = files.readout {
        engine
            .set_readout_defaults(
                d,
                crate::core::input::mode::defaults_from_entry(&choice.model),
            )
            .map_err(|source| LoadError::EntryReadout {
                id: choice.model.clone(),
                source,
            })?;
    }
    let report = LoadReport {
        source: source.to_string(),
        backend: choice.backend,
        backend_reason: choice.reason,
        model: choice.model,
        files: files.listed,
        storage: keeper.report(),
        readout: built.readout,
        threads: built.threads,
        cross_origin_isolated: crate::platform::js::get(&js_sys::global(), "crossOriginIsolated")
            .is_truthy(),
        load_ms: now() - t0,
    };
    Ok(Loaded {
        engine,
        report,
        live,
    })
}
