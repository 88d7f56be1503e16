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
pub mod platform;
pub mod runtime;

#[cfg(target_arch = "wasm32")]
pub mod bindings;

#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
#[cfg(not(target_arch = "wasm32"))]
#[doc(hidden)]
pub mod fuzz;
/// Facts about the machine, for the JSON a benchmark writes (the CLI's
/// `sweep` and the cargo benches share them).
#[cfg(not(target_arch = "wasm32"))]
pub mod host;
#[cfg(not(target_arch = "wasm32"))]
pub mod model_dir;
#[cfg(not(target_arch = "wasm32"))]
pub mod surgery;

// The product, re-exported where a user looks first: the engine and its
// assets and options, a state and its criteria, a decision, and every
// layer's error. Tests and benches name these through this facade; the
// modules stay public for the tools and tests of each layer's internals.
pub use crate::core::input::criteria::{Criterion, OptionSpec, StateSpec};
pub use crate::core::input::mode::{
    Calibration, ClozeScore, HeadStyle, Mode, PromptStyle, ReadoutChoice,
};
pub use crate::core::input::prefix::{Example, PrefixSpec};
pub use crate::core::input::request::{Readout, ReadoutRequest};
pub use crate::core::read::debias::Debias;
pub use crate::core::read::decision::{Decision, OptionProb};
pub use crate::core::{CoreError, ErrorInfo};
pub use crate::engine::{Engine, EngineError, EngineInfo, ModelAssets, PrefixId, StateId};
pub use crate::gpu::GpuError;
pub use crate::kernels::{KernelError, OpError, Precision};
#[cfg(not(target_arch = "wasm32"))]
pub use crate::model_dir::{
    open_engine, open_host_engine, HostEngine, HostOptions, ModelDir, RuntimeKind,
};
pub use crate::runtime::{Runtime, RuntimeError};
#[cfg(not(target_arch = "wasm32"))]
pub use crate::surgery::SurgeryError;
