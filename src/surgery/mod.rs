//! Graph surgery behind `readout inspect|trim|prune|expose-hidden|variants` (spec §9),
//! on float and already-quantised ONNX decoders with external data. Native only.

pub mod catalog;
pub mod commands;
mod error;
pub mod find_head;
pub mod graph;
pub mod inspect;
pub use crate::onnx_pb;
pub mod head_weights;
pub mod output;
pub mod passes;
mod refusal;
pub mod variants;
pub mod verify;

pub use error::SurgeryError;
