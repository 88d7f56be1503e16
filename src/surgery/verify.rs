//! Every command checks its own output against its input on a probe before
//! anything is written (spec §9): the native runtime runs both graphs.

use std::path::Path;

use serde::Serialize;

use super::graph::OnnxModel;
use super::SurgeryError;
use crate::core::model::config::ModelConfig;
use crate::core::read::logits::Logits;
use crate::core::text::tokenizer::TextTokenizer;
use crate::engine::convention::{candidates, derive};
use crate::engine::proof::probe_ids;
use crate::runtime::native::{NativeOptions, NativeRuntime};
use crate::runtime::Runtime;
use crate::surgery::find_head::find_embeddings;

/// One uncached forward of `ids` (with an empty past every convention agrees).
pub fn forward(
    graph: &Path,
    config: &ModelConfig,
    ids: &[u32],
) -> Result<(Logits, Option<Logits>), SurgeryError> {
    let mut rt = NativeRuntime::load(graph, &NativeOptions::default(), config.kv_dims())?;
    let sig = rt.signature().clone();
    let step = derive(candidates(&sig)[0], &sig, 0, ids);
    let out = pollster::block_on(rt.run(&step, None, false))?;
    Ok((out.logits, out.hidden))
}

pub fn probe(tok: &TextTokenizer) -> Result<Vec<u32>, SurgeryError> {
    let (mut head, suffix) = probe_ids(tok)?;
    head.extend(suffix);
    Ok(head)
}

#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub probe_tokens: usize,
    pub input_dims: Vec<usize>,
    pub output_dims: Vec<usize>,
    /// max |output − input at the corresponding column| over every compared logit.
    pub max_abs_diff: f64,
    /// What was allowed where the difference came closest to its allowance
    /// (units in the last place at that row's peak; see commands::HEAD_ULPS).
    pub allowed_abs_diff: f64,
    pub compared: usize,
    /// Embedding tables compared byte for byte between input and output.
    pub embedding_tables_untouched: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden_max_abs_diff: Option<f64>,
    /// The bound (HeadRows::miss_bound) of the row that missed by most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden_allowed: Option<f64>,
}

/// The largest difference found by [`compare_logits`] relative to what it allows.
#[derive(Debug, Clone, Copy)]
pub struct Worst {
    /// Input position and vocabulary column.
    pub position: usize,
    pub column: usize,
    pub diff: f64,
    pub allowed: f64,
    /// max |logit| of the input row the allowance was taken from.
    pub peak: f64,
}

/// Compares `out` with `input` where output row `i` must equal input column
/// `columns[i]` (identity for a full head), at every position both have.
/// At each position the allowed |Δ| is `ulps` units in the last place of the
/// logits' dtype at that input row's largest |logit| (at least 1).
/// Returns the max |Δ|, the count compared, and the position that came
/// closest to (or furthest past) its allowance.
pub fn compare_logits(
    input: &Logits,
    out: &Logits,
    columns: &[usize],
    ulps: f64,
) -> Result<(f64, usize, Option<Worst>), SurgeryError> {
    let (si, so) = (input.dims[1], out.dims[1]);
    if out.dims[2] != columns.len() {
        return Err(SurgeryError::Verify(format!(
            "output logits dims {:?}: last axis should be {}",
            out.dims,
            columns.len()
        )));
    }
    if so != si && so != 1 {
        return Err(SurgeryError::Verify(format!(
            "output logits dims {:?} against input {:?}",
            out.dims, input.dims
        )));
    }
    let eps = if input.is_f16() {
        2f64.powi(-10)
    } else {
        2f64.powi(-23)
    };
    let mut max_abs: f64 = 0.0;
    let mut worst: Option<Worst> = None;
    let mut n = 0;
    for p in 0..so {
        let ip = if so == 1 { si - 1 } else { p };
        let peak = input.row_f32(ip).iter().fold(1.0f32, |m, v| m.max(v.abs())) as f64;
        let allowed = ulps * eps * peak;
        for (i, &c) in columns.iter().enumerate() {
            let a = input.get(ip * input.dims[2] + c) as f64;
            let b = out.get(p * out.dims[2] + i) as f64;
            if !(a.is_finite() && b.is_finite()) {
                return Err(SurgeryError::Verify(format!(
                    "non-finite logit at position {p}, column {c}"
                )));
            }
            let diff = (a - b).abs();
            max_abs = max_abs.max(diff);
            let ratio = |w: &Worst| {
                if w.allowed > 0.0 {
                    w.diff / w.allowed
                } else if w.diff > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                }
            };
            let here = Worst {
                position: ip,
                column: c,
                diff,
                allowed,
                peak,
            };
            if worst.as_ref().is_none_or(|w| ratio(&here) > ratio(w)) {
                worst = Some(here);
            }
            n += 1;
        }
    }
    Ok((max_abs, n, worst))
}

/// The embedding tables of `input` must be in `output` with the same bytes.
pub fn embeddings_untouched(
    input: &OnnxModel,
    output: &OnnxModel,
) -> Result<Vec<String>, SurgeryError> {
    let mut names = Vec::new();
    for e in find_embeddings(input) {
        for t in &e.tables {
            let a = input.tensor_bytes(input.initializer(t).expect("resolved"))?;
            let b = output
                .initializer(t)
                .ok_or_else(|| {
                    SurgeryError::Verify(format!("embedding table {t} is gone from the output"))
                })
                .and_then(|x| output.tensor_bytes(x))?;
            if a != b {
                return Err(SurgeryError::Verify(format!("embedding table {t} changed")));
            }
            names.push(t.clone());
        }
    }
    if names.is_empty() {
        return Err(SurgeryError::Verify(
            "no input embedding found to compare".into(),
        ));
    }
    Ok(names)
}
