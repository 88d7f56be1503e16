//! `readout inspect|trim|prune|expose-hidden|variants|catalog`.

use std::path::{Path, PathBuf};

use crate::cli::CliError;
use crate::model_dir::ModelDir;
use crate::surgery::commands::{run_forced, Op};
use crate::surgery::graph::OnnxModel;
use crate::surgery::inspect::{inspect as inspect_model, render};

pub fn inspect(model: &Path, rows: usize, json: bool) -> Result<(), CliError> {
    let dir = ModelDir::open(model)?;
    let r = inspect_model(&OnnxModel::load(&dir.graph)?, rows)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
    } else {
        print!("{}", render(&r));
    }
    Ok(())
}

pub fn apply(model: &Path, out: &Path, op: Op, force: bool) -> Result<(), CliError> {
    eprintln!(
        "readout: {op:?} {} -> {} (verifying before writing)",
        model.display(),
        out.display()
    );
    let r = run_forced(model, out, &op, force)?;
    let v = &r.verification;
    eprintln!(
        "readout: verified on a {}-token probe: logits {:?} vs {:?}, max |Δ| {:e} over {} values (allowed {:e}); embedding untouched ({}){}",
        v.probe_tokens,
        v.output_dims,
        v.input_dims,
        v.max_abs_diff,
        v.compared,
        v.allowed_abs_diff,
        v.embedding_tables_untouched.join(", "),
        v.hidden_max_abs_diff
            .map(|h| format!("; last_hidden · head rows within {h:.3e} of the logits (allowed {:.3e})", v.hidden_allowed.unwrap_or(0.0)))
            .unwrap_or_default()
    );
    if let (Some(rm), Some(add)) = (r.removed_bytes, r.added_bytes) {
        eprintln!("readout: prune removed {rm} bytes of tables and added {add} bytes of head");
    }
    println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
    Ok(())
}

pub fn variants(models: &[std::path::PathBuf]) -> Result<(), CliError> {
    use crate::surgery::variants::{make_variants, Outcome};
    for m in models {
        eprintln!(
            "readout: cuts of {} (trim, then prune; each verified before it is written)",
            m.display()
        );
        make_variants(m, |out, outcome| match outcome {
            Outcome::Kept => eprintln!(
                "readout:   {} kept (readout wrote it earlier)",
                out.display()
            ),
            Outcome::Written(r) => eprintln!(
                "readout:   {} written, verified: max |Δ| {:e} (allowed {:e})",
                out.display(),
                r.verification.max_abs_diff,
                r.verification.allowed_abs_diff
            ),
        })?;
    }
    Ok(())
}

pub fn catalog(models: &Path, out: &Path, decisions: &[PathBuf]) -> Result<(), CliError> {
    let c = crate::surgery::catalog::build(models, out, decisions)?;
    let json = serde_json::to_string_pretty(&c).unwrap_or_default() + "\n";
    std::fs::write(out, json).map_err(|e| CliError::file(out, e))?;
    eprintln!(
        "readout: {} models written to {}",
        c.models.len(),
        out.display()
    );
    Ok(())
}
