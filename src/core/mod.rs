//! Pure functions of the readout: prompt rendering, tokenisation, the slot map,
//! readSlots, debiasing and metrics. No I/O, no async, no platform code: every
//! piece here is tested natively and compiles unchanged for wasm32.

pub mod backend;
pub mod catalog;
pub mod chat;
pub mod cloze;
pub mod config;
pub mod debias;
pub mod decision;
mod error;
pub mod fixture;
pub mod head_rows;
pub mod logits;
pub mod metrics;
pub mod mode;
pub mod prompt;
pub mod readout;
pub mod slot_map;
pub mod sweep;
pub mod tokenizer;

pub use error::{CoreError, ErrorInfo};
