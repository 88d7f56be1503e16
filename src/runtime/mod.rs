//! The runtime seam: load a decoder graph, run a step after a past, return
//! logits and (optionally) the grown KV. Two implementations share one ONNX
//! Runtime release: the `ort` crate natively, onnxruntime-web in the browser.
//!
//! The runtime never derives an input: the engine hands it the exact
//! `attention_mask` and `position_ids` of every step (DESIGN §6).

mod error;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
mod signature;

pub use error::RuntimeError;
pub use signature::{Dtype, KvPair, Signature, HIDDEN_OUTPUT};

use crate::core::logits::Logits;

/// One forward step: the new tokens and the derived inputs the graph takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub input_ids: Vec<i64>,
    /// `None` when the graph has no `attention_mask` input.
    pub attention_mask: Option<Vec<i64>>,
    /// `None` when the graph has no `position_ids` input.
    pub position_ids: Option<Vec<i64>>,
}

pub struct RunOutput<K> {
    pub logits: Logits,
    /// The past grown by this step, when it was asked for.
    pub present: Option<K>,
    /// `last_hidden` `[1, 1, H]`, when the graph exposes it (always fetched: H floats).
    pub hidden: Option<Logits>,
}

/// A loaded decoder. Methods are async because onnxruntime-web's are; the
/// native implementation completes them immediately.
///
/// A backend may later score many suffixes against one past in a single pass
/// (DESIGN §13); `run_many` is where it would say so.
#[allow(async_fn_in_trait)]
pub trait Runtime {
    /// A past: the KV tensors of every layer, wherever they live.
    type Kv;

    fn signature(&self) -> &Signature;

    /// Runs `step` after `past` (`None`: an empty past). With `keep_present`
    /// the grown KV comes back; otherwise only `logits` is fetched.
    async fn run(&mut self, step: &Step, past: Option<&Self::Kv>, keep_present: bool) -> Result<RunOutput<Self::Kv>, RuntimeError>;

    /// Several independent steps against the same past; one after another by default.
    async fn run_many(&mut self, steps: &[Step], past: Option<&Self::Kv>) -> Result<Vec<Logits>, RuntimeError> {
        let mut out = Vec::with_capacity(steps.len());
        for s in steps {
            out.push(self.run(s, past, false).await?.logits);
        }
        Ok(out)
    }

    /// Tokens held by a past.
    fn kv_len(&self, kv: &Self::Kv) -> usize;

    /// Tensors held by a past (what a live-tensor count counts).
    fn kv_tensors(&self, kv: &Self::Kv) -> usize {
        let _ = kv;
        self.signature().past.len() * 2
    }

    /// Frees a past (GPU buffers in the browser; memory natively).
    fn release(&mut self, kv: Self::Kv);

    /// Bytes copied out of the runtime's tensors so far (logits, hidden):
    /// what a readback costs, counted rather than estimated.
    fn bytes_read_back(&self) -> u64;

    /// Milliseconds from an arbitrary origin, for the decisions' `ms`.
    fn now_ms(&self) -> f64;

    /// The runtime's own description (library, version, backend).
    fn describe(&self) -> String;
}
