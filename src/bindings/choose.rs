//! What the backend choice needs to know about the page: whether a WebGPU
//! device (with `shader-f16`) can be had, and, for a model directory under
//! `auto`, whether its graph is int4 (the policy itself is
//! `core::model::backend_choice`).

use super::error::LoadError;
use super::files::Files;
use crate::core::model::backend_choice::{choose, Choice, Chosen, Gpu, Model, Requested};
use crate::gpu::web::{request_shared_device, SharedDevice};

/// The adapter, probed once per load unless a CPU backend was asked for.
pub(super) async fn probe_gpu(requested: Requested) -> (Gpu, Option<SharedDevice>) {
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

/// A directory's one graph, as the policy sees it.
fn dir_model(source: &str, int4: bool) -> Model<'_> {
    Model {
        id: source,
        needs_f16: false,
        wasm_variant: None,
        int4,
    }
}

/// Before fetching a directory: an explicit request that cannot run fails
/// here, before any download.
pub(super) fn for_dir(source: &str, requested: Requested, gpu: &Gpu) -> Result<Choice, LoadError> {
    Ok(choose(
        requested,
        gpu,
        &dir_model(source, requested == Requested::Auto),
    )?)
}

/// After fetching a directory under `auto`: only the fallback to our runtime
/// depends on whether the graph is int4, so then its node list is decoded
/// (an unreadable graph is refused by the loader that follows).
pub(super) fn for_fetched_dir(
    source: &str,
    requested: Requested,
    gpu: &Gpu,
    first: Choice,
    files: &Files,
) -> Result<Choice, LoadError> {
    if requested != Requested::Auto || first.backend != Chosen::Cpu {
        return Ok(first);
    }
    let int4 = crate::onnx_pb::op_types(&files.graph.to_vec())
        .is_ok_and(|ops| ops.iter().any(|o| o == "MatMulNBits"));
    if int4 {
        Ok(first)
    } else {
        Ok(choose(requested, gpu, &dir_model(source, false))?)
    }
}
