//! The runtime seam: load a decoder graph, run a step after a past, return
//! logits and (optionally) the grown KV. Two implementations share one ONNX
//! Runtime release (the `ort` crate natively, onnxruntime-web in the
//! browser); the third, `own`, is our interpreter and int4 kernels.
//!
//! The runtime never derives an input: the engine hands it the exact
//! `attention_mask` and `position_ids` of every step (spec §6).

pub mod any;
mod error;
pub mod kv_image;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
pub mod own;
mod signature;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use error::RuntimeError;
pub use kv_image::{KvImage, KvView};

use serde::Serialize;
pub use signature::{Dtype, KvPair, Signature, HIDDEN_OUTPUT};

use crate::core::read::cloze_math::row_log_prob;
use crate::core::read::logits::Logits;
use crate::core::read::slots::{read_slots, HeadColumns, SlotReadout};

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

/// What a readout run asks for: the letters' columns at the last row of the
/// returned logits, and whether the whole row's log-sum-exp is wanted.
#[derive(Debug, Clone, Copy)]
pub struct ReadSpec<'a> {
    pub head: &'a HeadColumns,
    pub columns: &'a [usize],
    pub allowed_mass: bool,
}

/// A readout run's result: the slots, the dims of the logits tensor the graph
/// produced, and the exposed hidden state when the graph has one.
#[derive(Debug, Clone)]
pub struct RowRead {
    pub slots: SlotReadout,
    pub dims: Vec<usize>,
    pub hidden: Option<Logits>,
}

/// What a `log_probs_at` run returns: log p(token) at each asked row, the
/// dims of the logits tensor the graph produced, and the grown past when it
/// was asked for.
pub struct Gathered<K> {
    pub log_probs: Vec<f64>,
    pub dims: Vec<usize>,
    pub present: Option<K>,
}

/// One branch of a packed pass: its tokens after the shared past, and the
/// rows (0-based within the branch, ascending) whose logits come back.
#[derive(Debug, Clone, Copy)]
pub struct Branch<'a> {
    pub ids: &'a [u32],
    pub rows: &'a [usize],
}

/// How much one packed pass may hold. Memory grows with the tokens (every
/// layer's activations, attention scores) and with the rows read (a full
/// vocabulary row each); the engine splits a call's branches into passes
/// under both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PackBudget {
    pub tokens: usize,
    pub rows: usize,
}

/// A loaded decoder. Methods are async because onnxruntime-web's are; the
/// native implementation completes them immediately.
#[allow(async_fn_in_trait)]
pub trait Runtime {
    /// A past: the KV tensors of every layer, wherever they live.
    type Kv;

    fn signature(&self) -> &Signature;

    /// Runs `step` after `past` (`None`: an empty past). With `keep_present`
    /// the grown KV comes back; otherwise only `logits` is fetched.
    async fn run(
        &mut self,
        step: &Step,
        past: Option<&Self::Kv>,
        keep_present: bool,
    ) -> Result<RunOutput<Self::Kv>, RuntimeError>;

    /// Runs `step` after `past` and keeps only the grown past: no logits come
    /// back (a prefill, or one chunk of a long run).
    async fn extend(
        &mut self,
        step: &Step,
        past: Option<&Self::Kv>,
    ) -> Result<Self::Kv, RuntimeError> {
        self.run(step, past, true)
            .await?
            .present
            .ok_or_else(|| RuntimeError::Run("the run returned no present.*".into()))
    }

    /// Runs `step` after `past` and reads `spec` at the last row of the
    /// returned logits. By default the logits come to the host and the CPU
    /// readout reads them; a runtime that can read them where they lie (the
    /// GPU kernel of spec §8) overrides this so only the slots come back.
    async fn read(
        &mut self,
        step: &Step,
        past: Option<&Self::Kv>,
        spec: &ReadSpec<'_>,
    ) -> Result<RowRead, RuntimeError> {
        read_on_host(self, step, past, spec).await
    }

    /// Runs `step` after `past` and returns, for each `(row, token)` of `at`,
    /// the log-softmax of the full logits row `row` at `token` (cloze
    /// scoring). By default the logits come to the host; a runtime that can
    /// reduce them where they lie (the GPU kernel of spec §8) overrides this
    /// so only a few floats per pair come back.
    async fn log_probs_at(
        &mut self,
        step: &Step,
        past: Option<&Self::Kv>,
        keep_present: bool,
        at: &[(usize, u32)],
    ) -> Result<Gathered<Self::Kv>, RuntimeError> {
        log_probs_on_host(self, step, past, keep_present, at).await
    }

    /// Several independent steps against the same past; one after another by default.
    async fn run_many(
        &mut self,
        steps: &[Step],
        past: Option<&Self::Kv>,
    ) -> Result<Vec<Logits>, RuntimeError> {
        let mut out = Vec::with_capacity(steps.len());
        for s in steps {
            out.push(self.run(s, past, false).await?.logits);
        }
        Ok(out)
    }

    /// What a packed pass may hold, when this runtime packs branches
    /// (`run_branches`); `None`: the engine runs them one by one.
    fn branch_budget(&self) -> Option<PackBudget> {
        None
    }

    /// Every branch after `past` in one block-causal forward: a branch sees
    /// the past and its own earlier tokens, never another branch, and its
    /// positions start where the past ends. Returns each branch's logits at
    /// its `rows` (`[1, rows, width]`); the past is not changed and the
    /// branches' keys and values are discarded.
    async fn run_branches(
        &mut self,
        past: &Self::Kv,
        branches: &[Branch<'_>],
    ) -> Result<Vec<Logits>, RuntimeError> {
        let _ = (past, branches);
        Err(RuntimeError::Run(
            "this runtime does not pack branches (branch_budget is None)".into(),
        ))
    }

    /// Tokens held by a past.
    fn kv_len(&self, kv: &Self::Kv) -> usize;

    /// The dtype this runtime holds a past in (what `export_kv` gives and
    /// `import_kv` takes).
    fn kv_dtype(&self) -> Dtype {
        self.signature().kv_dtype
    }

    /// What computed a past, as a kept prefix records it: another runtime,
    /// or one whose settings change the bits, computes another past.
    fn kv_origin(&self) -> String {
        self.describe()
    }

    /// Copies a past to the host (a kept prefix's bytes).
    async fn export_kv(&mut self, kv: &Self::Kv) -> Result<KvImage, RuntimeError>;

    /// A past from host bytes, equal bit for bit to the one exported.
    async fn import_kv(&mut self, view: &KvView<'_>) -> Result<Self::Kv, RuntimeError>;

    /// Tensors held by a past (what a live-tensor count counts).
    fn kv_tensors(&self, kv: &Self::Kv) -> usize {
        let _ = kv;
        self.signature().past.len() * 2
    }

    /// Frees a past (GPU buffers in the browser; memory natively).
    fn release(&mut self, kv: Self::Kv) {
        drop(kv);
    }

    /// The runtime's clock and readback count.
    fn meter(&self) -> &Meter;

    /// Bytes copied out of the runtime's tensors so far (logits, hidden):
    /// what a readback costs, counted rather than estimated.
    fn bytes_read_back(&self) -> u64 {
        self.meter().read_back
    }

    /// Milliseconds from an arbitrary origin, for the decisions' `ms`.
    fn now_ms(&self) -> f64 {
        self.meter().clock.ms()
    }

    /// The runtime's own description (library, version, backend).
    fn describe(&self) -> String;
}

/// What every runtime keeps for the engine's counters: the one clock
/// (`platform::Clock`) and the bytes it has copied out of its tensors.
pub struct Meter {
    pub clock: crate::platform::Clock,
    pub read_back: u64,
}

impl Meter {
    pub fn new() -> Self {
        Self {
            clock: crate::platform::Clock::new(),
            read_back: 0,
        }
    }
}

impl Default for Meter {
    fn default() -> Self {
        Self::new()
    }
}

/// `read` with the logits brought to the host: the default, and the WASM
/// path of a runtime that reads on the GPU where it can.
pub(crate) async fn read_on_host<R: Runtime + ?Sized>(
    rt: &mut R,
    step: &Step,
    past: Option<&R::Kv>,
    spec: &ReadSpec<'_>,
) -> Result<RowRead, RuntimeError> {
    let out = rt.run(step, past, false).await?;
    let slots = read_slots(&out.logits, spec.head, spec.columns, spec.allowed_mass)?;
    Ok(RowRead {
        slots,
        dims: out.logits.dims,
        hidden: out.hidden,
    })
}

/// `log_probs_at` with the logits brought to the host: the default, and the
/// fallback of a runtime whose kernel cannot take a run.
pub(crate) async fn log_probs_on_host<R: Runtime + ?Sized>(
    rt: &mut R,
    step: &Step,
    past: Option<&R::Kv>,
    keep_present: bool,
    at: &[(usize, u32)],
) -> Result<Gathered<R::Kv>, RuntimeError> {
    let out = rt.run(step, past, keep_present).await?;
    let lp: Result<Vec<f64>, _> = at
        .iter()
        .map(|&(row, token)| row_log_prob(&out.logits, row, token))
        .collect();
    match lp {
        Ok(log_probs) => Ok(Gathered {
            log_probs,
            dims: out.logits.dims,
            present: out.present,
        }),
        Err(e) => {
            if let Some(p) = out.present {
                rt.release(p);
            }
            Err(e.into())
        }
    }
}
