//! Our own CPU runtime's compute: an interpreter for the decoder graphs the
//! builder writes (the int4 `MatMulNBits` files, read as they are), with
//! int4 × int8 kernels per instruction set and a float32 scalar reference.
//! No I/O: the graph and its external data come in as bytes.

mod attention;
mod error;
mod exp;
mod load;
mod ops;
mod par;
mod program;
pub mod q4;
pub mod random_layer;
pub mod simd;
mod tensor;
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub mod workers;

pub use attention::{self_test as attention_self_test, Pack};
pub use error::{KernelError, OpError};
pub use load::External;
pub use par::{Pool, BUILD};
pub use program::Program;
pub use q4::Precision;
pub use tensor::{Data, Value};
