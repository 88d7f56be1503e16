//! The native `readout` command line.

mod evaluate;
mod score;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::core::debias::Debias;
use crate::engine::EngineError;
use crate::runtime::native::NativeOptions;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("{0}")]
    Usage(String),
}

impl CliError {
    pub(crate) fn file(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        Self::File { path: path.display().to_string(), message: e.to_string() }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DebiasArg {
    None,
    Cyclic,
}

impl From<DebiasArg> for Debias {
    fn from(d: DebiasArg) -> Self {
        match d {
            DebiasArg::None => Debias::None,
            DebiasArg::Cyclic => Debias::Cyclic,
        }
    }
}

#[derive(Debug, Parser)]
#[command(name = "readout", version, about = "Typed readout: answer multiple-choice criteria from next-token logits over a cached state")]
struct Cli {
    /// ONNX Runtime intra-op threads (default: every core).
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Score every criterion of one state and print the decisions as JSON.
    Score {
        /// Model directory (models/<id>/ or an onnx-community layout) or a .onnx file.
        #[arg(long)]
        model: PathBuf,
        /// One state in the fixture format (a JSON object, or a JSONL file's first line).
        #[arg(long)]
        state: PathBuf,
        #[arg(long, value_enum, default_value = "none")]
        debias: DebiasArg,
        /// Also score each criterion by one uncached forward of the same ids and report max |Δp|.
        #[arg(long)]
        check: bool,
    },
    /// Evaluate a JSONL fixture: per-family balanced accuracy, ECE, Brier, NLL, order-unstable count.
    Evaluate {
        fixture: PathBuf,
        #[arg(long)]
        model: PathBuf,
        #[arg(long, value_enum, default_value = "none")]
        debias: DebiasArg,
        /// Where to write the JSON report (default: reports/evaluate-<model>-<fixture>[-cyclic].json).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Load a model, run its load-time proofs and print what the engine found.
    Info {
        #[arg(long)]
        model: PathBuf,
    },
}

pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let mut opts = NativeOptions::default();
    if let Some(t) = cli.threads {
        opts.intra_threads = t.max(1);
    }
    let result = match cli.command {
        Command::Score { model, state, debias, check } => score::run(&model, &state, debias.into(), check, &opts),
        Command::Evaluate { fixture, model, debias, out } => evaluate::run(&fixture, &model, debias.into(), out, &opts),
        Command::Info { model } => info(&model, &opts),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("readout: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn info(model: &std::path::Path, opts: &NativeOptions) -> Result<(), CliError> {
    let engine = crate::model_dir::open_engine(model, opts)?;
    println!("{}", serde_json::to_string_pretty(&engine.info()).unwrap_or_default());
    Ok(())
}
