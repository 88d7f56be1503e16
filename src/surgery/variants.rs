//! `readout variants`: the two cuts the catalog serves beside a stock model,
//! `<model>-trimmed` and `<model>-trimmed-pruned` (every letter kept), made
//! by the same verified surgery as `trim` and `prune`. A cut readout already
//! wrote is kept, so the set-up scripts can call this on every run; any other
//! directory at that path is refused by the surgery's own output rules.

use std::path::{Path, PathBuf};

use super::commands::{run, Op, SurgeryReport};
use super::output::MARKER;
use super::SurgeryError;
use crate::core::text::prompt::LETTERS;

/// What happened to one cut.
#[derive(Debug)]
pub enum Outcome {
    /// readout wrote it earlier (its marker names the same command).
    Kept,
    Written(Box<SurgeryReport>),
}

/// `<model>-trimmed` and `<model>-trimmed-pruned`, beside `model`.
pub fn variant_paths(model: &Path) -> Result<[PathBuf; 2], SurgeryError> {
    let name = model
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
        .ok_or_else(|| {
            SurgeryError::file(
                model,
                "a model directory with a name is needed (its cuts are named after it)",
            )
        })?;
    let at = |suffix: &str| model.with_file_name(format!("{name}{suffix}"));
    Ok([at("-trimmed"), at("-trimmed-pruned")])
}

/// Whether `dir` is a complete cut readout wrote with `command`: the move
/// into place is the surgery's last step, so a marker beside `model.onnx`
/// means every file is there.
fn written_by(dir: &Path, command: &str) -> bool {
    let first = std::fs::read_to_string(dir.join(MARKER))
        .ok()
        .and_then(|t| t.lines().next().map(|l| l.trim().to_string()));
    first.as_deref() == Some(&format!("readout {command}")) && dir.join("model.onnx").is_file()
}

/// Makes (or keeps) both cuts of `model`, trimmed first since the pruned cut
/// is cut from it. `each` hears of every cut as it is settled, so a caller
/// can show progress on the minutes a real model's verification takes.
pub fn make_variants(
    model: &Path,
    mut each: impl FnMut(&Path, &Outcome),
) -> Result<(), SurgeryError> {
    let [trimmed, pruned] = variant_paths(model)?;
    let steps = [
        (model, trimmed.as_path(), "trim", Op::Trim),
        (
            trimmed.as_path(),
            pruned.as_path(),
            "prune",
            Op::Prune {
                letters: LETTERS.into(),
                tokenizer: None,
            },
        ),
    ];
    for (input, out, command, op) in steps {
        let outcome = if written_by(out, command) {
            Outcome::Kept
        } else {
            Outcome::Written(Box::new(run(input, out, &op)?))
        };
        each(out, &outcome);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_are_named_after_the_model_and_a_nameless_path_is_refused() {
        let [t, p] = variant_paths(Path::new("models/m-q4/")).unwrap();
        assert_eq!(t, Path::new("models/m-q4-trimmed"));
        assert_eq!(p, Path::new("models/m-q4-trimmed-pruned"));
        for bad in ["/", ".", "models/.."] {
            let e = variant_paths(Path::new(bad)).unwrap_err().to_string();
            assert!(e.contains("a model directory with a name"), "{bad}: {e}");
        }
    }

    #[test]
    fn only_a_complete_cut_with_the_same_command_counts_as_written() {
        let d = std::env::temp_dir().join(format!("readout-variants-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        assert!(!written_by(&d, "trim"), "empty");
        std::fs::write(d.join(MARKER), "readout trim\ninput: x\n").unwrap();
        assert!(!written_by(&d, "trim"), "no model.onnx yet");
        std::fs::write(d.join("model.onnx"), b"").unwrap();
        assert!(written_by(&d, "trim"));
        assert!(!written_by(&d, "prune"), "another command's output");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
