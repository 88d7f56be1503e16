//! Our own CPU runtime's kernels: int4 × int8 products per instruction set
//! (with a float32 scalar reference), attention, `exp`, and the work pool
//! they split over. The ONNX interpreter that calls them lives in
//! `runtime::own::interp`; nothing here reads a graph (no `onnx_pb`).

pub mod attention;
mod error;
pub mod exp;
pub mod par;
pub mod q4;
pub mod random_attention;
pub mod random_layer;
pub mod simd;
pub mod tensor;
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub mod workers;

pub use attention::{self_test as attention_self_test, Pack};
pub use error::{KernelError, OpError};
pub use par::{Pool, BUILD};
pub use q4::Precision;
pub use tensor::{Data, Value};
