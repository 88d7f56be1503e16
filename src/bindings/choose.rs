//! What the backend choice needs to know about the page: whether a WebGPU
//! device (with `shader-f16`) can be had, and, for a model folder, whether
//! its graph is int4 once fetched (the policy itself is
//! `core::model::backend_choice`).

use super::files::Files;
use crate::core::model::backend_choice::{Gpu, Requested};
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

/// Whether the fetched graph is int4 (MatMulNBits): what a folder's
/// `only_int4` candidate waits for. An unreadable graph counts as float;
/// the loader that follows refuses it by name.
pub(super) fn graph_is_int4(files: &Files) -> bool {
    crate::onnx_pb::op_types(&files.graph.to_vec())
        .is_ok_and(|ops| ops.iter().any(|o| o == "MatMulNBits"))
}
