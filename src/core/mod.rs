//! Pure functions of the readout: no I/O, no async, no platform code, so
//! every piece here is tested natively and compiles unchanged for wasm32.
//! Grouped by what a reader looks for:
//! - `input`: the product's inputs (states, criteria, reading modes);
//! - `text`: prompt rendering, chat templates, tokenisation;
//! - `read`: from logits to a decision (readSlots, cloze, debiasing);
//! - `model`: the files beside a model (catalog, config, slot map, head rows)
//!   and which backend runs it;
//! - `eval`: evaluation statistics and the `logit_cost` sweep.

pub mod eval;
pub mod input;
pub mod model;
pub mod read;
pub mod text;

mod error;

pub use error::{CoreError, ErrorInfo};
