//! From the fetched files to a runtime on the chosen backend: our own
//! runtime (the bytes copied into wasm memory once, the same loader as the
//! native CLI's) or onnxruntime-web on the shared WebGPU device or WASM.

use crate::platform::js;
use std::cell::Cell;
use std::rc::Rc;

use wasm_bindgen::{JsCast, JsValue};

use super::error::LoadError;
use super::files::Files;
use super::options::LoadOptions;
use crate::core::model::backend_choice::Chosen;
use crate::core::model::config::ModelConfig;
use crate::engine::ModelAssets;
use crate::gpu::web::SharedDevice;
use crate::runtime::any::AnyRuntime;
use crate::runtime::own::{OwnOptions, OwnRuntime};
use crate::runtime::web::ort::Ort;
use crate::runtime::web::{Backend, WebModel, WebOptions, WebRuntime};

/// A runtime, what it reads logits with, and the threads it runs on.
pub(super) struct Built {
    pub runtime: AnyRuntime<WebRuntime>,
    pub readout: String,
    pub threads: Option<f64>,
}

fn configure_ort(ort: &Ort, opts: &LoadOptions) {
    let wasm = js::get(&ort.env(), "wasm");
    if let Some(base) = &opts.ort_base {
        let base = if base.ends_with('/') {
            base.clone()
        } else {
            format!("{base}/")
        };
        js::set(wasm.unchecked_ref(), "wasmPaths", &JsValue::from_str(&base));
    }
    if let Some(n) = opts.threads {
        js::set(
            wasm.unchecked_ref(),
            "numThreads",
            &JsValue::from_f64(n as f64),
        );
    }
}

/// The thread policy's default for this page (a window or a worker).
#[cfg_attr(not(target_feature = "atomics"), allow(dead_code))]
fn page_threads() -> usize {
    crate::core::input::thread_policy::default_threads(
        crate::core::input::thread_policy::Host::Page,
        crate::platform::cores(),
        crate::platform::can_thread(),
    )
}

pub(super) async fn build(
    backend: Chosen,
    model_id: &str,
    files: &Files,
    config: &ModelConfig,
    opts: &LoadOptions,
    device: Option<SharedDevice>,
    live: Rc<Cell<usize>>,
) -> Result<Built, LoadError> {
    match backend {
        Chosen::Cpu => {
            // onnxruntime-web is never imported on this path. The threaded
            // build defaults to the page's cores (up to four), as the WASM
            // backend does; the single-thread build runs one.
            let threads = opts.threads.map_or_else(
                || {
                    if cfg!(target_feature = "atomics") {
                        page_threads()
                    } else {
                        1
                    }
                },
                |t| t as usize,
            );
            #[cfg(target_feature = "atomics")]
            super::threads::ensure(threads).await?;
            let graph = files.graph.to_vec();
            let external: Vec<(String, Vec<u8>)> = files
                .external
                .iter()
                .map(|(n, b)| (n.clone(), b.to_vec()))
                .collect();
            let rt = OwnRuntime::from_bytes(
                &graph,
                &external,
                &OwnOptions {
                    threads,
                    precision: crate::kernels::Precision::Int8,
                    pack: opts.pack_branches.unwrap_or(true),
                },
                config.kv_dims(),
                model_id,
            )?;
            let threads = rt.info().threads as f64;
            Ok(Built {
                runtime: AnyRuntime::Own(Box::new(rt)),
                readout: "cpu: readout's own kernels".to_string(),
                threads: Some(threads),
            })
        }
        Chosen::WebGpu | Chosen::Wasm => {
            let backend = if backend == Chosen::WebGpu {
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
            let ort = Ort::import(
                if backend == Backend::WebGpu {
                    "webgpu"
                } else {
                    "wasm"
                },
                opts.ort_base.as_deref(),
            )
            .await
            .map_err(LoadError::OnnxRuntimeWeb)?;
            configure_ort(&ort, opts);
            let runtime = WebRuntime::load(
                model,
                WebOptions {
                    backend,
                    ort: ort.clone(),
                    device,
                    profiling: opts.profiling,
                },
                live,
            )
            .await?;
            let readout = runtime.readout_path();
            let threads = js::get(&js::get(&ort.env(), "wasm"), "numThreads").as_f64();
            Ok(Built {
                runtime: AnyRuntime::Onnx(runtime),
                readout,
                threads,
            })
        }
    }
}

impl Files {
    /// The engine's assets from what was fetched.
    pub(super) fn assets(&self, model_id: &str) -> ModelAssets {
        ModelAssets {
            model_id: model_id.to_string(),
            config_json: self.config.clone(),
            tokenizer_json: self.tokenizer.clone(),
            slot_map_json: self.slot_map.clone(),
            head_rows_json: self.head_rows.clone(),
            chat_template: self.chat_template.clone(),
            tokenizer_config_json: self.tokenizer_config.clone(),
        }
    }
}
