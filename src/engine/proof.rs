//! Load-time proofs (DESIGN §6): the logits layout and the position
//! convention, measured against one uncached forward of the same ids.

use serde::Serialize;

use super::convention::{candidates, derive, Convention};
use super::head::LetterPlan;
use super::EngineError;
use crate::core::debias::argmax;
use crate::core::fixture::{Criterion, OptionSpec};
use crate::core::head_rows::HeadRows;
use crate::core::logits::Logits;
use crate::core::prompt::{render_head, render_suffix};
use crate::core::readout::{readout_offset, softmax};
use crate::core::tokenizer::TextTokenizer;
use crate::runtime::{Dtype, Runtime};

/// fp32: max |Δp| ≤ 1e-5; fp16: ≤ 2e-3 (DESIGN §6.2).
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
    let opt = |id: &str, d: &str| OptionSpec { id: id.into(), description: d.into() };
    Criterion {
        id: "probe".into(),
        family: "probe".into(),
        question: "Which ship carried a refrigerated cargo of fruit into the harbour that morning?".into(),
        options: vec![
            opt("marguerite", "The Marguerite, the grain carrier that came from Odessa"),
            opt("halcyon", "The Halcyon, which was delayed by fog before unloading"),
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
    /// DESIGN §6.4, when the graph exposes `last_hidden`: max |hidden · row −
    /// logit| over the letter rows, on the uncached and the cached probe.
    pub extraction_max_abs_diff: Option<f64>,
}

/// Max |Δ| allowed between `hidden · rows` and the returned logits. The int4
/// head multiplies an activation quantised to int8 (accuracy_level 4) or in
/// float16, so a float32 product differs in the last digits, while the hidden
/// state of a wrong position misses by whole units.
pub const EXTRACTION_TOLERANCE: f64 = 0.05;

fn compare(conv: Convention, p: &[f64], reference: &[f64], tol: f64) -> CandidateResult {
    let dp = p.iter().zip(reference).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    let same = argmax(p) == argmax(reference);
    CandidateResult { convention: conv, max_dp: Some(dp), argmax_same: Some(same), error: None, agrees: same && dp <= tol }
}

/// How far `hidden · rows` lands from the logits at the rows' columns.
pub fn extraction_miss(rows: &HeadRows, hidden: Option<&Logits>, logits: &Logits, what: &str) -> Result<f64, EngineError> {
    let h = hidden.ok_or_else(|| EngineError::Proof(format!("{what}: the graph exposes last_hidden but returned none")))?;
    let hv = h.to_f32_vec();
    let last = logits.dims[1] - 1;
    let mut worst: f64 = 0.0;
    for (c, v) in rows.columns.iter().zip(rows.project(&hv)) {
        let l = logits.get(last * logits.dims[2] + c) as f64;
        worst = worst.max((l - v).abs());
    }
    if worst > EXTRACTION_TOLERANCE {
        return Err(EngineError::Proof(format!(
            "{what}: last_hidden · head rows misses the returned logits by {worst:.3e} (> {EXTRACTION_TOLERANCE}): the engine would gather the wrong token's state"
        )));
    }
    Ok(worst)
}

/// The letter distribution at the readout offset of `logits`.
fn letter_probs(logits: &Logits, plan: &LetterPlan) -> Result<Vec<f64>, EngineError> {
    let offset = readout_offset(logits, &plan.head)?;
    let w = plan.head.width();
    let vals: Vec<f64> = plan.all_columns().iter().map(|&c| logits.get(offset * w + c) as f64).collect();
    if let Some(v) = vals.iter().find(|v| !v.is_finite()) {
        return Err(EngineError::Proof(format!("probe logits are not finite ({v})")));
    }
    Ok(softmax(&vals))
}

fn check_dims(logits: &Logits, plan: &LetterPlan, new_tokens: usize, what: &str) -> Result<bool, EngineError> {
    readout_offset(logits, &plan.head)?;
    match logits.dims[1] {
        1 => Ok(false),
        s if s == new_tokens => Ok(true),
        s => Err(EngineError::Proof(format!(
            "{what}: logits dims {:?}: dims[1] is {s}, neither 1 (trimmed) nor the {new_tokens} tokens fed",
            logits.dims
        ))),
    }
}

/// Runs the probe under every candidate and freezes the one convention that
/// matches the uncached forward. Anything else is a hard error.
pub async fn prove<R: Runtime>(rt: &mut R, tok: &TextTokenizer, plan: &LetterPlan, head_rows: Option<&HeadRows>) -> Result<ProofReport, EngineError> {
    let sig = rt.signature().clone();
    let (head, suffix) = probe_ids(tok)?;
    let mut full = head.clone();
    full.extend_from_slice(&suffix);

    let first = candidates(&sig)[0];
    let uncached_out = rt.run(&derive(first, &sig, 0, &full), None, false).await?;
    let uncached = uncached_out.logits;
    let all_positions = check_dims(&uncached, plan, full.len(), "uncached forward")?;
    let reference = letter_probs(&uncached, plan)?;
    let tol = tolerance(sig.logits_dtype);

    let prefix = rt.run(&derive(first, &sig, 0, &head), None, true).await?;
    let kv = prefix.present.ok_or_else(|| EngineError::Proof("prefill returned no present.*".into()))?;
    let past_len = rt.kv_len(&kv);
    if past_len != head.len() {
        rt.release(kv);
        return Err(EngineError::Proof(format!("prefill of {} tokens returned a past of {past_len}", head.len())));
    }

    let mut results = Vec::new();
    let mut hidden_checks = Vec::new();
    for conv in candidates(&sig) {
        let step = derive(conv, &sig, past_len, &suffix);
        let r = match rt.run(&step, Some(&kv), false).await {
            Err(e) => CandidateResult { convention: conv, max_dp: None, argmax_same: None, error: Some(e.to_string()), agrees: false },
            Ok(out) => match check_dims(&out.logits, plan, suffix.len(), "cached suffix").and_then(|_| letter_probs(&out.logits, plan)) {
                Ok(p) if head_rows.is_some() => {
                    hidden_checks.push((conv, out.hidden.clone(), out.logits.clone()));
                    compare(conv, &p, &reference, tol)
                }
                Err(e) => CandidateResult { convention: conv, max_dp: None, argmax_same: None, error: Some(e.to_string()), agrees: false },
                Ok(p) => compare(conv, &p, &reference, tol),
            },
        };
        results.push(r);
    }
    rt.release(kv);

    let agreeing: Vec<Convention> = results.iter().filter(|r| r.agrees).map(|r| r.convention).collect();
    let report = |conv| ProofReport {
        probe_head_tokens: head.len(),
        probe_suffix_tokens: suffix.len(),
        uncached_dims: uncached.dims.clone(),
        all_positions,
        logits_dtype: sig.logits_dtype,
        tolerance: tol,
        candidates: results.clone(),
        convention: conv,
        extraction_max_abs_diff: None,
    };
    match agreeing.as_slice() {
        [one] => {
            let mut r = report(*one);
            if let Some(rows) = head_rows {
                let mut worst = extraction_miss(rows, uncached_out.hidden.as_ref(), &uncached, "uncached forward")?;
                for (conv, hidden, logits) in &hidden_checks {
                    if conv == one {
                        worst = worst.max(extraction_miss(rows, hidden.as_ref(), logits, "cached suffix")?);
                    }
                }
                r.extraction_max_abs_diff = Some(worst);
            }
            Ok(r)
        }
        _ => Err(EngineError::Proof(format!(
            "{} of {} position conventions agree with the uncached forward (tolerance {tol:e}); exactly one must. Measured: {}",
            agreeing.len(),
            results.len(),
            describe(&results)
        ))),
    }
}

pub fn describe(results: &[CandidateResult]) -> String {
    results
        .iter()
        .map(|r| match (&r.error, r.max_dp, r.argmax_same) {
            (Some(e), _, _) => format!("{:?}: refused ({e})", r.convention),
            (None, Some(dp), Some(same)) => format!("{:?}: max|Δp| {dp:.3e}, argmax {}", r.convention, if same { "same" } else { "differs" }),
            _ => format!("{:?}: not measured", r.convention),
        })
        .collect::<Vec<_>>()
        .join("; ")
}
