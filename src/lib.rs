//! readout: a typed-readout engine. A decoder reads a state once, keeps its KV
//! cache, and answers multiple-choice criteria from the answer letters'
//! next-token logits. See ARCHITECTURE.md.

// The threaded browser build (nightly, `-Z build-std`) parks its workers
// with `memory.atomic.wait32`, which core exposes behind this feature.
#![cfg_attr(
    all(target_arch = "wasm32", target_feature = "atomics"),
    feature(stdarch_wasm_atomic_wait)
)]

pub mod core;
pub mod engine;
pub mod gpu;
pub mod kernels;
pub mod onnx_pb;
pub mod runtime;

#[cfg(target_arch = "wasm32")]
pub mod bindings;

#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
#[cfg(not(target_arch = "wasm32"))]
pub mod export;
#[cfg(not(target_arch = "wasm32"))]
#[doc(hidden)]
pub mod fuzz;
/// Facts about the machine, for the JSON a benchmark writes (the CLI's
/// `sweep` and the cargo benches share them).
#[cfg(not(target_arch = "wasm32"))]
pub mod host;
#[cfg(not(target_arch = "wasm32"))]
pub mod model_dir;
