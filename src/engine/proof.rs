//! Load-time proofs (spec §6): the logits layout and the position
//! convention, measured against one uncached forward of the same ids.

use serde::Serialize;

use super::chunk;
use super::convention::{candidates, Convention};
use super::EngineError;
use crate::core::input::criteria::{Criterion, OptionSpec};
use crate::core::model::head_rows::HeadRows;
use crate::core::read::debias::argmax;
use crate::core::read::logits::Logits;
use crate::core::text::prompt::{render_head, render_suffix};
use crate::core::text::tokenizer::TextTokenizer;
use crate::engine::letter_ids::LetterPlan;
use crate::runtime::{Dtype, ReadSpec, RowRead, Runtime};

mod trials;

pub use self::trials::prove;

/// fp32: max |Δp| ≤ 1e-5; fp16: ≤ 2e-3 (spec §6.2).
pub fn tolerance(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => 1e-5,
        Dtype::F16 => 2e-3,
    }
}

/// Long enough (≥ 64 head tokens, ≥ 40 suffix tokens) that a device fault
/// on long runs shows in the proof rather than in a user's decision.
const PROBE_EVIDENCE: &str = "The harbour office at Port Ellery keeps a ledger of every ship that docks. \
On the morning of 14 March the ledger lists three arrivals: the Marguerite, a grain carrier from Odessa \
carrying 4,200 tonnes of wheat; the Halcyon, a refrigerated ship with bananas from Guayaquil; and the \
Tern, a small ferry that runs twice a day to the islands. The harbour master noted that the Halcyon \
was delayed by fog and that its cargo was inspected before unloading.";

pub fn probe_criterion() -> Criterion {
    let opt = |id: &str, d: &str| OptionSpec {
        id: id.into(),
        description: d.into(),
    };
    Criterion {
        id: "probe".into(),
        family: "probe".into(),
        question: "Which ship carried a refrigerated cargo of fruit into the harbour that morning?"
            .into(),
        options: vec![
            opt(
                "marguerite",
                "The Marguerite, the grain carrier that came from Odessa",
            ),
            opt(
                "halcyon",
                "The Halcyon, which was delayed by fog before unloading",
            ),
            opt("tern", "The Tern, the small ferry that runs to the islands"),
            opt("none", "None of the ships listed in the harbour ledger"),
        ],
        answer: Some("halcyon".into()),
    }
}

/// The probe's head and suffix ids, tokenised separately.
pub fn probe_ids(tok: &TextTokenizer) -> Result<(Vec<u32>, Vec<u32>), EngineError> {
    let head = tok.encode(&render_head(None, PROBE_EVIDENCE))?;
    let suffix = tok.encode(&render_suffix(&probe_criterion(), &[0, 1, 2, 3]))?;
    Ok((head, suffix))
}

#[derive(Debug, Clone, Serialize)]
pub struct CandidateResult {
    pub convention: Convention,
    /// max |Δp| over the letter distribution against the uncached forward.
    pub max_dp: Option<f64>,
    pub argmax_same: Option<bool>,
    /// The runtime's refusal, if the candidate could not run at all.
    pub error: Option<String>,
    pub agrees: bool,
}

/// One proof attempt with runs of at most `tokens` new tokens.
#[derive(Debug, Clone, Serialize)]
pub struct LimitTrial {
    pub tokens: usize,
    /// Conventions that agreed with the uncached forward at this run length.
    pub agreeing: usize,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProofReport {
    pub probe_head_tokens: usize,
    pub probe_suffix_tokens: usize,
    /// `[1, S, W]` dims of the uncached forward's logits.
    pub uncached_dims: Vec<usize>,
    /// Whether the graph returns every position (stock) or only the last (trimmed).
    pub all_positions: bool,
    pub logits_dtype: Dtype,
    pub tolerance: f64,
    pub candidates: Vec<CandidateResult>,
    pub convention: Convention,
    /// spec §6.4, when the graph exposes `last_hidden`: max |hidden · row −
    /// logit| over the letter rows, on the uncached and the cached probe.
    pub extraction_max_abs_diff: Option<f64>,
    /// The longest run (new tokens fed at once) proven exact on this device;
    /// longer prefills and suffixes are run in chunks of at most this many.
    /// When the unchunked probe passes this is the probe's whole length.
    pub run_limit: usize,
    /// Every run length tried, in order, when the unchunked probe failed.
    pub run_limit_trials: Vec<LimitTrial>,
}

/// A miss the tiny test models' heads stay well under. Not the check itself:
/// each row is held to the bound its kernel implies (`HeadRows::miss_bound`).
pub const EXTRACTION_TOLERANCE: f64 = 0.05;

/// Run lengths tried, longest first, after the unchunked probe fails. Not 1:
/// its reference (runs of half the length) would be the same runs.
const LIMIT_LADDER: [usize; 6] = [64, 32, 16, 8, 4, 2];

fn compare(conv: Convention, p: &[f64], reference: &[f64], tol: f64) -> CandidateResult {
    let dp = p
        .iter()
        .zip(reference)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let same = argmax(p) == argmax(reference);
    CandidateResult {
        convention: conv,
        max_dp: Some(dp),
        argmax_same: Some(same),
        error: None,
        agrees: same && dp <= tol,
    }
}

/// How far `hidden · rows` lands from the logits gathered at `columns`.
pub fn extraction_miss(
    rows: &HeadRows,
    hidden: Option<&Logits>,
    columns: &[usize],
    gathered: &[f32],
    what: &str,
) -> Result<f64, EngineError> {
    Ok(extraction_check(rows, hidden, columns, gathered, what)?.0)
}

/// [`extraction_miss`], with the bound of the row that missed by most.
pub fn extraction_check(
    rows: &HeadRows,
    hidden: Option<&Logits>,
    columns: &[usize],
    gathered: &[f32],
    what: &str,
) -> Result<(f64, f64), EngineError> {
    let h = hidden.ok_or_else(|| {
        EngineError::Proof(format!(
            "{what}: the graph exposes last_hidden but returned none"
        ))
    })?;
    let hv = h.to_f32_vec();
    let (mut worst, mut worst_bound) = (0f64, 0f64);
    for (i, (c, v)) in rows.columns.iter().zip(rows.project(&hv)).enumerate() {
        let at = columns.iter().position(|x| x == c).ok_or_else(|| {
            EngineError::Proof(format!(
                "{what}: head_rows.json column {c} is not a letter column"
            ))
        })?;
        let returned = gathered.get(at).copied().unwrap_or(f32::NAN) as f64;
        let miss = (returned - v).abs();
        // Each row gets the bound its own kernel's rounding implies (see
        // HeadRows::miss_bound), not one constant: the int8 input rounding
        // of SmolLM2's head alone moves a logit by 0.1, while a float
        // kernel's misses are 1e-6.
        let bound = rows.miss_bound(i, &hv, v, h.is_f16());
        // A NaN miss must fail too.
        if miss.is_nan() || miss > bound {
            return Err(EngineError::Proof(format!(
                "{what}: last_hidden · head_rows.json row {i} (+ bias) misses the returned logits at column {c} by {miss:.3e} \
                 ({v:.6} computed, {returned:.6} returned), beyond the {bound:.3e} the head's rounding allows ({}): \
                 the rows or the hidden state are not what the head computes with",
                if rows.int8_input_block.is_some() { "int8 input blocks, float accumulation" } else { "float accumulation" }
            )));
        }
        if miss >= worst {
            (worst, worst_bound) = (miss, bound);
        }
    }
    Ok((worst, worst_bound))
}

fn finite(read: &RowRead) -> Result<(), EngineError> {
    if let Some(v) = read.slots.logits.iter().find(|v| !v.is_finite()) {
        return Err(EngineError::Proof(format!(
            "probe logits are not finite ({v})"
        )));
    }
    Ok(())
}

/// Refuses a probe whose letter logits are all one value: a graph that
/// computes nothing (every logit 0) makes every position convention agree
/// with the uncached forward, and the real cause would be reported as an
/// ambiguous graph. Measured: Hugging Face's float16 conversion of
/// SmolLM2-135M computes RMSNorm's mean of squares in float16, hidden
/// values reach 4,215 (squares past float16's 65,504), and on WebGPU, which
/// computes float16 natively, every logit came out exactly 0.
fn varies(read: &RowRead) -> Result<(), EngineError> {
    let l = &read.slots.logits;
    if let Some(&first) = l.first() {
        if l.len() > 1 && l.iter().all(|&v| v == first) {
            return Err(EngineError::ProofDegenerate(format!(
                "the uncached forward's {} probe logits are all {first}: the graph computes \
                 nothing on this device (a float16 overflow, e.g. a norm's mean of squares \
                 past 65,504, zeroes every logit)",
                l.len()
            )));
        }
    }
    Ok(())
}

fn check_dims(dims: &[usize], fed: usize, what: &str) -> Result<bool, EngineError> {
    match dims.get(1) {
        Some(1) => Ok(false),
        Some(&s) if s == fed => Ok(true),
        _ => Err(EngineError::Proof(format!(
            "{what}: logits dims {dims:?}: dims[1] is neither 1 (trimmed) nor the {fed} tokens fed"
        ))),
    }
}

pub fn describe(results: &[CandidateResult]) -> String {
    results
        .iter()
        .map(|r| match (&r.error, r.max_dp, r.argmax_same) {
            (Some(e), _, _) => format!("{:?}: refused ({e})", r.convention),
            (None, Some(dp), Some(same)) => format!(
                "{:?}: max|Δp| {dp:.3e}, argmax {}",
                r.convention,
                if same { "same" } else { "differs" }
            ),
            _ => format!("{:?}: not measured", r.convention),
        })
        .collect::<Vec<_>>()
        .join("; ")
}
