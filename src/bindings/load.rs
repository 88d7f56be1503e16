//! From what the caller names (`models.json#id` or a model directory URL)
//! to a proven engine: resolve the entry, choose the backend (and say why),
//! download every file with progress and integrity checks, create the
//! session on the shared device.

use std::cell::Cell;
use std::rc::Rc;

use serde::Serialize;
use wasm_bindgen::JsValue;

use super::error::LoadError;
use super::fetch::{fetch_text, resolve, Progress};
use super::files::{dir_files, entry_files, Files};
use crate::core::backend::{choose, Choice, Chosen, Gpu, Model, Requested};
use crate::core::catalog::Catalog;
use crate::core::config::ModelConfig;
use crate::engine::{Engine, ModelAssets};
use crate::gpu::web::{request_shared_device, SharedDevice};
use crate::runtime::any::AnyRuntime;
use crate::runtime::own::{OwnOptions, OwnRuntime};
use crate::runtime::web::ort::{self, Ort};
use crate::runtime::web::{Backend, WebModel, WebOptions, WebRuntime};

/// The engine the bindings hold: onnxruntime-web (WebGPU or WASM) or our
/// own runtime.
pub type WebEngine = Engine<AnyRuntime<WebRuntime>>;

pub struct LoadOptions {
    pub backend: Requested,
    /// Where onnxruntime-web's `.wasm`/`.mjs` files are served (a URL prefix).
    pub ort_base: Option<String>,
    pub threads: Option<u32>,
    pub profiling: bool,
    /// WebGPU only: let onnxruntime-web create its own device instead of
    /// sharing the engine's (no GPU readout then; a diagnostic).
    pub ort_device: bool,
    /// cpu only: pack a call's branches into one pass (default on; off is
    /// the serial path a benchmark compares against).
    pub pack_branches: Option<bool>,
}

/// What `engine.info()` adds to the engine's own report.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub source: String,
    pub backend: Chosen,
    pub backend_reason: String,
    pub model: String,
    pub files: Vec<LoadedFile>,
    pub readout: String,
    pub threads: Option<f64>,
    pub cross_origin_isolated: bool,
    pub load_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadedFile {
    pub role: String,
    pub url: String,
    pub bytes: u64,
    /// Checked against models.json (directory loads have nothing to check against).
    pub sha256_checked: bool,
}

/// `defaultThreads` for this page (a window or a worker).
#[cfg_attr(not(target_feature = "atomics"), allow(dead_code))]
fn page_threads() -> u32 {
    let global = js_sys::global();
    let cores = ort::get(&ort::get(&global, "navigator"), "hardwareConcurrency")
        .as_f64()
        .unwrap_or(1.0);
    let isolated = ort::get(&global, "crossOriginIsolated").is_truthy();
    super::limits::default_threads(cores, isolated)
}

fn configure_ort(ort: &Ort, opts: &LoadOptions) {
    let wasm = ort::get(&ort.env(), "wasm");
    if let Some(base) = &opts.ort_base {
        let base = if base.ends_with('/') {
            base.clone()
        } else {
            format!("{base}/")
        };
        ort::set(wasm.unchecked_ref(), "wasmPaths", &JsValue::from_str(&base));
    }
    if let Some(n) = opts.threads {
        ort::set(
            wasm.unchecked_ref(),
            "numThreads",
            &JsValue::from_f64(n as f64),
        );
    }
}

use wasm_bindgen::JsCast;

async fn probe_gpu(requested: Requested) -> (Gpu, Option<SharedDevice>) {
    if matches!(requested, Requested::Wasm | Requested::Cpu) {
        return (
            Gpu::Unavailable("not probed: a CPU backend was asked for".into()),
            None,
        );
    }
    match request_shared_device().await {
        Ok(d) => (
            Gpu::Available {
                adapter: d.adapter.clone(),
                f16: d.f16,
            },
            Some(d),
        ),
        Err(e) => (Gpu::Unavailable(e.to_string()), None),
    }
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
    let (choice, files): (Choice, Files) = match source.split_once('#') {
        Some((cat, id)) => {
            let cat_url = resolve(cat, "")?;
            let text = fetch_text(&cat_url, "models.json", false)
                .await?
                .unwrap_or_default();
            let catalog = Catalog::parse(&text)?;
            let entry = catalog.find(id)?;
            let choice = choose(
                opts.backend,
                &gpu,
                &Model {
                    id: &entry.id,
                    needs_f16: entry.needs_f16(),
                    wasm_variant: entry.wasm_variant.as_deref(),
                    int4: entry.int4(),
                },
            )?;
            let chosen = catalog.find(&choice.model)?;
            if choice.backend == Chosen::Cpu {
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
            let mut files = entry_files(chosen, &cat_url, progress).await?;
            files.readout = chosen.readout;
            (choice, files)
        }
        None => {
            let base = resolve(
                &if source.ends_with('/') {
                    source.to_string()
                } else {
                    format!("{source}/")
                },
                "",
            )?;
            let model = |int4| Model {
                id: source,
                needs_f16: false,
                wasm_variant: None,
                int4,
            };
            if opts.backend == Requested::Auto {
                // A directory has one graph, whoever runs it, so auto fetches
                // it first. Only the fallback to our runtime depends on
                // whether it is int4; then its node list is decoded (an
                // unreadable graph is refused by the loader that follows).
                let files = dir_files(&base, progress).await?;
                let mut choice = choose(opts.backend, &gpu, &model(true))?;
                if choice.backend == Chosen::Cpu {
                    let int4 = crate::onnx_pb::op_types(&files.graph.to_vec())
                        .is_ok_and(|ops| ops.iter().any(|o| o == "MatMulNBits"));
                    if !int4 {
                        choice = choose(opts.backend, &gpu, &model(false))?;
                    }
                }
                (choice, files)
            } else {
                // An explicit request that cannot run fails before fetching.
                let choice = choose(opts.backend, &gpu, &model(false))?;
                (choice, dir_files(&base, progress).await?)
            }
        }
    };
    let config = ModelConfig::parse(&files.config)?;
    let live = Rc::new(Cell::new(0));
    let (runtime, readout, threads) = match choice.backend {
        Chosen::Cpu => {
            // The bytes are copied into wasm memory once; onnxruntime-web is
            // never imported on this path. A model the heap could not hold
            // is refused before that copy, which would otherwise abort.
            let file_bytes = u64::from(files.graph.length())
                + files
                    .external
                    .iter()
                    .map(|(_, b)| u64::from(b.length()))
                    .sum::<u64>();
            crate::runtime::own::check_files_fit(file_bytes, crate::runtime::own::WEIGHT_LIMIT)?;
            let graph = files.graph.to_vec();
            let external: Vec<(String, Vec<u8>)> = files
                .external
                .iter()
                .map(|(n, b)| (n.clone(), b.to_vec()))
                .collect();
            let lookup = |loc: &str| {
                external
                    .iter()
                    .find(|(n, _)| n == loc)
                    .map(|(_, b)| b.as_slice())
            };
            // The threaded build defaults to the page's cores (up to four),
            // as the WASM backend does; the single-thread build runs one.
            let threads = opts.threads.map_or_else(
                || {
                    if cfg!(target_feature = "atomics") {
                        page_threads() as usize
                    } else {
                        1
                    }
                },
                |t| t as usize,
            );
            #[cfg(target_feature = "atomics")]
            super::threads::ensure(threads).await?;
            let rt = OwnRuntime::load(
                &graph,
                &lookup,
                &OwnOptions {
                    threads,
                    precision: crate::kernels::Precision::Int8,
                    pack: opts.pack_branches.unwrap_or(true),
                },
                config.kv_dims(),
                &choice.model,
            )?;
            let threads = rt.info().threads as f64;
            (
                AnyRuntime::Own(Box::new(rt)),
                "cpu: readout's own kernels".to_string(),
                Some(threads),
            )
        }
        Chosen::WebGpu | Chosen::Wasm => {
            let backend = if choice.backend == Chosen::WebGpu {
                Backend::WebGpu
            } else {
                Backend::Wasm
            };
            let model = WebModel {
                graph: files.graph.clone(),
                external: files.external.clone(),
                kv_dims: config.kv_dims(),
            };
            let device = if backend == Backend::WebGpu && !opts.ort_device {
                device
            } else {
                None
            };
            let ort = Ort::import(if backend == Backend::WebGpu {
                "webgpu"
            } else {
                "wasm"
            })
            .await
            .map_err(LoadError::OnnxRuntimeWeb)?;
            configure_ort(&ort, &opts);
            let runtime = WebRuntime::load(
                model,
                WebOptions {
                    backend,
                    ort: ort.clone(),
                    device,
                    profiling: opts.profiling,
                },
                live.clone(),
            )
            .await?;
            let readout = runtime.readout_path();
            let threads = ort::get(&ort::get(&ort.env(), "wasm"), "numThreads").as_f64();
            (AnyRuntime::Onnx(runtime), readout, threads)
        }
    };
    let assets = ModelAssets {
        model_id: choice.model.clone(),
        config_json: files.config.clone(),
        tokenizer_json: files.tokenizer.clone(),
        slot_map_json: files.slot_map.clone(),
        head_rows_json: files.head_rows.clone(),
        chat_template: files.chat_template.clone(),
        tokenizer_config_json: files.tokenizer_config.clone(),
    };
    let mut engine = Engine::new(runtime, assets).await?;
    if let Some(d) = files.readout {
        engine
            .set_readout_defaults(d)
            .map_err(|source| LoadError::EntryReadout {
                id: choice.model.clone(),
                source,
            })?;
    }
    let global = js_sys::global();
    let report = LoadReport {
        source: source.to_string(),
        backend: choice.backend,
        backend_reason: choice.reason,
        model: choice.model,
        files: files.listed,
        readout,
        threads,
        cross_origin_isolated: ort::get(&global, "crossOriginIsolated").is_truthy(),
        load_ms: now() - t0,
    };
    Ok(Loaded {
        engine,
        report,
        live,
    })
}
