//! From what the caller names (`models.json#id` or a model directory URL)
//! to a proven engine, in three steps: choose (probe the adapter; the policy
//! is the core's), resolve (the entry, the backend, every file downloaded
//! with progress and integrity checks), build (the runtime on the chosen
//! backend), then the engine's load-time proofs.

use std::cell::Cell;
use std::rc::Rc;

use serde::Serialize;

use super::build::build;
use super::choose::probe_gpu;
use super::error::LoadError;
use super::fetch::Progress;
use super::files::LoadedFile;
use super::kept::StorageReport;
use super::options::LoadOptions;
use super::resolve::resolve;
use crate::core::model::backend_choice::{Chosen, Requested};
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
    let (mut choice, files, keeper) = resolve(
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
    let built = match build(
        choice.backend,
        &choice.model,
        &files,
        &config,
        &opts,
        device,
        live.clone(),
    )
    .await
    {
        // `auto` chose our runtime for an int4 graph it turns out not to
        // compute (onnx-community's exports spell attention out in ops it
        // lacks): onnxruntime-web's WASM backend runs every op, so it runs
        // the same bytes instead, and the reason says so.
        Err(e)
            if opts.backend == Requested::Auto
                && choice.backend == Chosen::Cpu
                && e.info().code == "graph_unsupported" =>
        {
            choice.reason = format!(
                "{}; the cpu backend does not compute this graph ({e}), so the WASM backend runs it",
                choice.reason
            );
            choice.backend = Chosen::Wasm;
            build(
                Chosen::Wasm,
                &choice.model,
                &files,
                &config,
                &opts,
                None,
                live.clone(),
            )
            .await?
        }
        r => r?,
    };
    let mut engine = Engine::new(built.runtime, files.assets(&choice.model)).await?;
    if let Some(key) = &files.model_key {
        engine.set_model_key(key.clone());
    }
    if let Some(d) = files.readout {
        engine
            .set_readout_defaults(
                d,
                crate::core::spec::mode::defaults_from_entry(&choice.model),
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
