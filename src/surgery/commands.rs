//! trim / prune / expose-hidden as whole commands: read a model directory,
//! edit, write to a temporary directory beside the output, verify against the
//! input on a probe (and by the engine's own load-time proofs), and only then
//! move it into place. On any failure nothing is left behind.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::graph::OnnxModel;
use super::output::{check_output, replace, write_marker, TempDir};
use super::passes::{expose_hidden, prune, trim};
use super::verify::{compare_logits, embeddings_untouched, forward, probe, Verification};
use super::SurgeryError;
use crate::core::input::criteria::{MAX_OPTIONS, MIN_OPTIONS};
use crate::core::model::config::ModelConfig;
use crate::core::model::head_rows::HeadRows;
use crate::core::model::slot_map::SlotMap;
use crate::core::text::prompt::LETTERS;
use crate::core::text::tokenizer::TextTokenizer;
use crate::model_dir::ModelDir;
use crate::runtime::native::NativeOptions;
use crate::surgery::head_weights::{head_rows, int8_input_block};

#[derive(Debug, Clone)]
pub enum Op {
    Trim,
    Prune {
        letters: String,
        tokenizer: Option<PathBuf>,
    },
    ExposeHidden,
}

#[derive(Debug, Clone, Serialize)]
pub struct SurgeryReport {
    pub command: String,
    pub input: String,
    pub output: String,
    pub verification: Verification,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot_map: Option<SlotMap>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added_bytes: Option<usize>,
    pub files: Vec<(String, u64)>,
}

/// Files copied unchanged from the input directory when present.
const SIDECARS: [&str; 5] = [
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "genai_config.json",
    "chat_template.jinja",
];

/// Runs `op` on `input` into the new directory `out`; see [`run_forced`].
pub fn run(input: &Path, out: &Path, op: &Op) -> Result<SurgeryReport, SurgeryError> {
    run_forced(input, out, op, false)
}

/// Runs `op` on `input` into `out`. An existing `out` is replaced only when
/// it is a model directory readout wrote and `force` is set (see
/// [`super::output::check_output`]); that is checked before any work, and
/// again just before the verified output is moved into place.
pub fn run_forced(
    input: &Path,
    out: &Path,
    op: &Op,
    force: bool,
) -> Result<SurgeryReport, SurgeryError> {
    check_output(input, out, force)?;
    if let Op::Prune { letters, .. } = op {
        check_letters(letters)?;
    }
    let dir = ModelDir::open(input)?;
    let config = dir.read_config()?;
    let tok = match op {
        Op::Prune {
            tokenizer: Some(t), ..
        } => TextTokenizer::from_json(&std::fs::read(t).map_err(|e| SurgeryError::file(t, e))?)?,
        _ => dir.read_tokenizer()?,
    };
    let in_slot = dir
        .slot_map
        .as_ref()
        .map(|p| std::fs::read_to_string(p).map_err(|e| SurgeryError::file(p, e)))
        .transpose()?;
    let in_slot = in_slot.as_deref().map(SlotMap::parse).transpose()?;

    let mut model = OnnxModel::load(&dir.graph)?;
    let mut slot_map = in_slot.clone();
    let (mut removed, mut added) = (None, None);
    let (command, keep) = match op {
        Op::Trim => {
            trim(&mut model)?;
            ("trim", None)
        }
        Op::ExposeHidden => {
            expose_hidden(&mut model)?;
            ("expose-hidden", None)
        }
        Op::Prune { letters, .. } => {
            if in_slot.is_some() {
                return Err(SurgeryError::Unsupported(
                    "the input is already pruned (it has slot_map.json)".into(),
                ));
            }
            let ids = tok.probe_letter_ids()?;
            let mut keep = Vec::new();
            for l in letters.chars() {
                let bad = || SurgeryError::BadLetter {
                    letters: letters.clone(),
                    letter: l,
                };
                keep.push(
                    *LETTERS
                        .find(l)
                        .and_then(|i| ids.ids.get(i))
                        .ok_or_else(bad)?,
                );
            }
            let map = SlotMap::new(
                &dir.model_id,
                Some(&ids.separator),
                letters,
                keep.clone(),
                config.vocab_size,
            )?;
            let stats = prune(&mut model, &keep)?;
            removed = Some(stats.removed_bytes);
            added = Some(stats.added_bytes);
            slot_map = Some(map);
            ("prune", Some(keep))
        }
    };

    let src = Source {
        command,
        dir: &dir,
        config: &config,
        tok: &tok,
        slot_map: slot_map.as_ref(),
        keep: keep.as_deref(),
    };
    let verification = finish(&model, out, &src, force)?;
    let mut files: Vec<(String, u64)> = std::fs::read_dir(out)
        .map_err(|e| SurgeryError::file(out, e))?
        .filter_map(|e| e.ok())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().map(|m| m.len()).unwrap_or(0),
            )
        })
        .collect();
    files.sort();
    Ok(SurgeryReport {
        command: command.into(),
        input: dir.graph.display().to_string(),
        output: out.display().to_string(),
        verification,
        slot_map,
        removed_bytes: removed,
        added_bytes: added,
        files,
    })
}

/// 2 to 20 distinct answer letters, checked before any model is read.
fn check_letters(letters: &str) -> Result<(), SurgeryError> {
    let count = letters.chars().count();
    if !(MIN_OPTIONS..=MAX_OPTIONS).contains(&count) {
        return Err(SurgeryError::LetterCount {
            letters: letters.into(),
            count,
            min: MIN_OPTIONS,
            max: MAX_OPTIONS,
        });
    }
    for (n, l) in letters.chars().enumerate() {
        if !LETTERS.contains(l) || letters.chars().take(n).any(|x| x == l) {
            return Err(SurgeryError::BadLetter {
                letters: letters.into(),
                letter: l,
            });
        }
    }
    Ok(())
}

/// Allowed |Δ| between an output head's logits and the stock head's, in
/// units in the last place of the logits' dtype at the row's largest |logit|.
///
/// Neither trim nor prune changes a weight: each kept logit is the same
/// K-long dot product of the same hidden state with the same row. What
/// changes is the shape of the head's product: trim runs it on one row
/// instead of S, prune on N = letters columns instead of the vocabulary,
/// and ONNX Runtime's kernels (MatMulNBits' int4 GEMM above all) pick their
/// tiling and tail paths by M and N, which reorders the float additions of
/// the K products and of the per-block partial sums. A reordered sum
/// differs by a few units in the last place of its magnitude, which the
/// row's peak bounds. Measured: trim 1.1e-6 on the tiny q4 (peak ~10),
/// 9.8e-4 q4f16, 0 fp32; prune of SmolLM2 q4 to 2 or 3 letters 9.5e-7
/// (below one ulp of its peak). A wrong row, a wrong position or a wrong
/// column misses by the difference between two logits: whole units.
const HEAD_ULPS: f64 = 8.0;

/// What a surgery's output is written with and checked against.
pub struct Source<'a> {
    /// The command, recorded in the output's marker file.
    pub command: &'a str,
    /// The input model's directory (its graph is the reference).
    pub dir: &'a ModelDir,
    pub config: &'a ModelConfig,
    pub tok: &'a TextTokenizer,
    /// The slot map the output carries, if pruned.
    pub slot_map: Option<&'a SlotMap>,
    /// Output row `i` must equal input column `keep[i]` (a fresh prune).
    pub keep: Option<&'a [u32]>,
}

/// Writes `model` to a temporary directory beside `out`, verifies it against
/// the source, and moves it to `out` only if every check passes. The
/// temporary directory is removed on every failure (a guard removes it on
/// drop); an existing `out` is replaced only as [`check_output`] allows.
pub fn finish(
    model: &OnnxModel,
    out: &Path,
    src: &Source,
    force: bool,
) -> Result<Verification, SurgeryError> {
    check_output(&src.dir.root, out, force)?;
    let tmp = TempDir::beside(out)?;
    // The marker goes in first, so that a run killed at any later point
    // leaves a directory the next run recognises as its own to remove.
    write_marker(tmp.path(), src.command, &src.dir.root)?;
    let verification = write_and_verify(model, tmp.path(), src)?;
    // Verification takes a while: whatever appeared at `out` meanwhile is
    // judged again before anything there is touched.
    check_output(&src.dir.root, out, force)?;
    replace(tmp, out)?;
    Ok(verification)
}

/// The letter columns of the output logits: vocabulary ids, or pruned rows.
fn letter_columns(
    tok: &TextTokenizer,
    slot_map: Option<&SlotMap>,
) -> Result<Vec<usize>, SurgeryError> {
    Ok(match slot_map {
        Some(m) => (0..m.rows).collect(),
        None => tok
            .probe_letter_ids()?
            .ids
            .iter()
            .map(|&i| i as usize)
            .collect(),
    })
}

fn write_and_verify(
    model: &OnnxModel,
    tmp: &Path,
    src: &Source,
) -> Result<Verification, SurgeryError> {
    let Source {
        dir,
        config,
        tok,
        slot_map,
        keep,
        ..
    } = *src;
    model.save(tmp, "model.onnx")?;
    for f in SIDECARS {
        let src = dir.root.join(f);
        if src.is_file() {
            std::fs::copy(&src, tmp.join(f)).map_err(|e| SurgeryError::file(&src, e))?;
        }
    }
    if let Some(m) = slot_map {
        std::fs::write(tmp.join("slot_map.json"), m.to_json())
            .map_err(|e| SurgeryError::file(tmp, e))?;
    }
    let written = OnnxModel::load(&tmp.join("model.onnx"))?;
    let exposes = written
        .output(crate::surgery::find_head::HIDDEN_OUTPUT)
        .is_some();
    if exposes {
        let columns = letter_columns(tok, slot_map)?;
        let (rows, bias) = head_rows(&written, &columns)?;
        let hr = HeadRows {
            version: 1,
            columns,
            rows,
            bias,
            int8_input_block: int8_input_block(&written)?,
        };
        std::fs::write(
            tmp.join("head_rows.json"),
            serde_json::to_string(&hr).unwrap_or_default(),
        )
        .map_err(|e| SurgeryError::file(tmp, e))?;
    }

    let ids = probe(tok)?;
    let (a, _) = forward(&dir.graph, config, &ids)?;
    let (b, hidden) = forward(&tmp.join("model.onnx"), config, &ids)?;
    // Output row i is input column columns[i]: the kept ids for a fresh prune,
    // the slot map's ids for an already-pruned input, else the identity.
    let columns: Vec<usize> = match keep {
        Some(k) => k.iter().map(|&i| i as usize).collect(),
        None => (0..a.dims[2]).collect(),
    };
    let (max_abs_diff, compared, worst) = compare_logits(&a, &b, &columns, HEAD_ULPS)?;
    if let Some(w) = worst.filter(|w| w.diff > w.allowed) {
        let what = match (keep.is_some(), a.dims[1] != b.dims[1]) {
            (true, true) => "the pruned, trimmed head's logits against the input head's at the last position and the kept columns",
            (true, false) => "the pruned head's logits against the input head's at the kept columns",
            (false, true) => "the trimmed head's logits against the input head's at the last position",
            (false, false) => "the output head's logits against the input head's",
        };
        return Err(SurgeryError::Verify(format!(
            "{what} (dims {:?} vs {:?}, {compared} values): at position {}, column {} they differ by {:e}, more than the {:e} allowed there ({HEAD_ULPS} units in the last place at that row's peak |logit| {:.3})",
            b.dims, a.dims, w.position, w.column, w.diff, w.allowed, w.peak
        )));
    }
    let untouched = embeddings_untouched(&OnnxModel::load(&dir.graph)?, &written)?;

    let extraction = if exposes {
        let hr = HeadRows::parse(
            &std::fs::read_to_string(tmp.join("head_rows.json"))
                .map_err(|e| SurgeryError::file(tmp, e))?,
        )?;
        let row = b.row_f32(b.dims[1] - 1);
        let gathered: Vec<f32> = hr
            .columns
            .iter()
            .map(|&c| row.get(c).copied().unwrap_or(f32::NAN))
            .collect();
        Some(
            crate::engine::proof::extraction_check(
                &hr,
                hidden.as_ref(),
                &hr.columns,
                &gathered,
                "expose-hidden probe",
            )
            .map_err(|e| SurgeryError::Verify(e.to_string()))?,
        )
    } else {
        None
    };

    // The engine's own load-time proofs (layout, convention, slot map,
    // extraction) must hold on the output.
    crate::model_dir::open_engine(tmp, &NativeOptions::default())?;

    Ok(Verification {
        probe_tokens: ids.len(),
        input_dims: a.dims.clone(),
        output_dims: b.dims.clone(),
        max_abs_diff,
        allowed_abs_diff: worst.map_or(0.0, |w| w.allowed),
        compared,
        embedding_tables_untouched: untouched,
        hidden_max_abs_diff: extraction.map(|h| h.0),
        hidden_allowed: extraction.map(|h| h.1),
    })
}
