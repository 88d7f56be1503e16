//! The native `readout` command line.

mod evaluate_cmd;
mod readout_args;
mod score_cmd;
mod surgery_cmd;
mod sweep_cmd;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::engine::EngineError;
use crate::model_dir::{HostOptions, RuntimeKind};

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Export(#[from] crate::surgery::SurgeryError),
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("{0}")]
    Usage(String),
    #[error("{path}: holds {count} states; pass --index N (0 to {}) to score one", count - 1)]
    ManyStates { path: String, count: usize },
    #[error("--index {index}: {path} holds {count} states (0 to {})", count.saturating_sub(1))]
    StateIndex {
        path: String,
        index: usize,
        count: usize,
    },
    #[error("--threads {given}: must be 1 to {max} (4 per available core on this machine)")]
    Threads { given: usize, max: usize },
    #[error("{path}: no criterion has an answer, so there is nothing to measure; add \"answer\" (a gold option id) to the criteria")]
    NoAnswers { path: String },
    #[error("--out {path}: cannot be written ({message}); checked before the run")]
    OutUnwritable { path: String, message: String },
}

impl CliError {
    pub(crate) fn file(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        Self::File {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "readout",
    version,
    about = "Typed readout: answer multiple-choice criteria from next-token logits over a cached state"
)]
struct Cli {
    /// Threads the runtime computes on (default: every core; at most 4 per core).
    #[arg(long, global = true)]
    threads: Option<usize>,
    /// `auto`: an int4 graph on our runtime (ONNX Runtime when ours lacks
    /// one of its operators), a float graph on ONNX Runtime, as the browser
    /// chooses; `ort`: ONNX Runtime, the reference; `own`: our interpreter
    /// and int4 kernels over the same file (int4 graphs only).
    #[arg(long, global = true, value_enum, default_value_t = RuntimeArg::Auto)]
    runtime: RuntimeArg,
    /// Our runtime's activations: `int8` (the fast kernels) or `f32` (the
    /// scalar reference they are tested against).
    #[arg(long, global = true, value_enum, default_value_t = PrecisionArg::Int8)]
    precision: PrecisionArg,
    /// Our runtime: `on` packs a call's branches (criteria, debias
    /// rotations, cloze options) into one block-causal pass; `off` runs one
    /// after another (the serial path packing is measured against).
    #[arg(long, global = true, value_enum, default_value_t = PackArg::On)]
    pack: PackArg,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PackArg {
    On,
    Off,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum RuntimeArg {
    Auto,
    Ort,
    Own,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PrecisionArg {
    Int8,
    F32,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Score every criterion of one state and print the decisions as JSON.
    Score {
        /// Model directory (models/<id>/ or an onnx-community layout) or a .onnx file.
        #[arg(long)]
        model: PathBuf,
        /// A state in the fixture format: one JSON object (pretty-printed or
        /// not), or a JSONL file with one state per line.
        #[arg(long)]
        state: PathBuf,
        /// Which state of a JSONL file to score (0-based); required when it holds several.
        #[arg(long)]
        index: Option<usize>,
        #[command(flatten)]
        readout: readout_args::ReadoutArgs,
        /// Also score each criterion by one uncached forward of the same ids and report max |Δp|.
        #[arg(long)]
        check: bool,
        /// A shared prefix (JSON: `instruction`, `examples`): prefilled once,
        /// the state's evidence run on its past. The state then gives no
        /// instruction of its own.
        #[arg(long)]
        prefix: Option<PathBuf>,
    },
    /// Evaluate a JSONL fixture: per-family balanced accuracy, ECE, Brier, NLL, order-unstable count.
    Evaluate {
        fixture: PathBuf,
        #[arg(long)]
        model: PathBuf,
        #[command(flatten)]
        readout: readout_args::ReadoutArgs,
        /// Where to write the JSON report (default: reports/evaluate-<model>-<fixture>-<mode...>.json).
        #[arg(long)]
        out: Option<PathBuf>,
        /// A shared prefix (JSON: `instruction`, `examples`) every state is
        /// built on; a fixture may instead open with a `{"prefix": ...}` line.
        #[arg(long)]
        prefix: Option<PathBuf>,
    },
    /// Load a model, run its load-time proofs and print what the engine found.
    Info {
        #[arg(long)]
        model: PathBuf,
    },
    /// Inputs, outputs, KV layout, the head and what pruning would change.
    Inspect {
        /// A model directory or .onnx file.
        model: PathBuf,
        /// Rows a pruned head would keep (for the size estimate).
        #[arg(long, default_value_t = 20)]
        rows: usize,
        #[arg(long)]
        json: bool,
    },
    /// Make the head compute the last position only (slices its input, not its output).
    Trim {
        model: PathBuf,
        #[arg(short, long)]
        out: PathBuf,
        /// Replace OUT when it is a model directory readout wrote earlier
        /// (it holds a .readout-surgery marker and nothing else). Never the
        /// input, its ancestors, the current directory or a root.
        #[arg(long)]
        force: bool,
    },
    /// Replace the head with the rows of the answer letters; writes slot_map.json.
    Prune {
        model: PathBuf,
        /// Letters to keep, in order (a prefix of ABCDEFGHIJKLMNOPQRST serves criteria with that many options).
        #[arg(long, default_value = "ABCDEFGHIJKLMNOPQRST")]
        letters: String,
        /// tokenizer.json to find the letter ids with (default: the model's own).
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        #[arg(short, long)]
        out: PathBuf,
        /// Replace OUT when it is a model directory readout wrote earlier
        /// (it holds a .readout-surgery marker and nothing else). Never the
        /// input, its ancestors, the current directory or a root.
        #[arg(long)]
        force: bool,
    },
    /// Add an output `last_hidden`: the head's input at the last position (and head_rows.json).
    ExposeHidden {
        model: PathBuf,
        #[arg(short, long)]
        out: PathBuf,
        /// Replace OUT when it is a model directory readout wrote earlier
        /// (it holds a .readout-surgery marker and nothing else). Never the
        /// input, its ancestors, the current directory or a root.
        #[arg(long)]
        force: bool,
    },
    /// The cuts the catalog serves beside each model: MODEL-trimmed and
    /// MODEL-trimmed-pruned (all 20 letters), each verified as trim and prune
    /// verify; a cut readout already wrote is kept, anything else there is refused.
    Variants {
        #[arg(required = true)]
        models: Vec<PathBuf>,
    },
    /// The logit_cost sweep on native ONNX Runtime: one fixed prefix, then suffixes of each
    /// length (spec §11).
    Sweep {
        /// Model directories (or models.json#id), swept one after another.
        #[arg(long, required = true)]
        model: Vec<PathBuf>,
        #[arg(long, default_value_t = crate::core::eval::logit_cost::PREFIX_TOKENS)]
        prefix: usize,
        #[arg(long, value_delimiter = ',', default_value = "1,8,16,32,64,96")]
        lengths: Vec<usize>,
        #[arg(long, default_value_t = 5)]
        runs: usize,
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// Letters read per run (an n-option criterion).
        #[arg(long, default_value_t = 4)]
        options: usize,
        /// Where to write the JSON (default: stdout).
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
    /// Write models.json from the built model directories (sizes and sha256 measured from disk).
    Catalog {
        #[arg(long, default_value = "models")]
        models: PathBuf,
        #[arg(short, long, default_value = "models.json")]
        out: PathBuf,
        /// A decisions summary whose best readout becomes its model's default
        /// (stock graphs of that base); repeat for several, a later file wins
        /// for the same model. None: every entry serves the rule (letters, plain).
        #[arg(long = "decisions", value_name = "FILE")]
        decisions: Vec<PathBuf>,
    },
}

pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let mut opts = HostOptions {
        runtime: match cli.runtime {
            RuntimeArg::Auto => RuntimeKind::Auto,
            RuntimeArg::Ort => RuntimeKind::Ort,
            RuntimeArg::Own => RuntimeKind::Own,
        },
        precision: match cli.precision {
            PrecisionArg::Int8 => crate::kernels::Precision::Int8,
            PrecisionArg::F32 => crate::kernels::Precision::F32,
        },
        pack: matches!(cli.pack, PackArg::On),
        ..HostOptions::default()
    };
    if let Some(t) = cli.threads {
        match check_threads(t) {
            Ok(t) => opts.threads = t,
            Err(e) => {
                eprintln!("readout: error: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let result = match cli.command {
        Command::Score {
            model,
            state,
            index,
            readout,
            check,
            prefix,
        } => score_cmd::run(
            &model,
            &state,
            index,
            &readout,
            check,
            prefix.as_deref(),
            &opts,
        ),
        Command::Evaluate {
            fixture,
            model,
            readout,
            out,
            prefix,
        } => evaluate_cmd::run(&fixture, &model, &readout, out, prefix.as_deref(), &opts),
        Command::Info { model } => info(&model, &opts),
        Command::Inspect { model, rows, json } => surgery_cmd::inspect(&model, rows, json),
        Command::Trim { model, out, force } => {
            surgery_cmd::apply(&model, &out, crate::surgery::commands::Op::Trim, force)
        }
        Command::Prune {
            model,
            letters,
            tokenizer,
            out,
            force,
        } => surgery_cmd::apply(
            &model,
            &out,
            crate::surgery::commands::Op::Prune { letters, tokenizer },
            force,
        ),
        Command::ExposeHidden { model, out, force } => surgery_cmd::apply(
            &model,
            &out,
            crate::surgery::commands::Op::ExposeHidden,
            force,
        ),
        Command::Catalog {
            models,
            out,
            decisions,
        } => surgery_cmd::catalog(&models, &out, &decisions),
        Command::Variants { models } => surgery_cmd::variants(&models),
        Command::Sweep {
            model,
            prefix,
            lengths,
            runs,
            warmup,
            options,
            out,
        } => sweep_cmd::run(
            &sweep_cmd::SweepArgs {
                models: model,
                prefix,
                lengths,
                runs,
                warmup,
                options,
                out,
            },
            &opts,
        ),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("readout: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The thread policy's bound (`core::input::thread_policy`) on this machine.
fn check_threads(given: usize) -> Result<usize, CliError> {
    let max = crate::core::input::thread_policy::max_threads(crate::platform::cores());
    if given == 0 || given > max {
        return Err(CliError::Threads { given, max });
    }
    Ok(given)
}

fn info(model: &std::path::Path, opts: &HostOptions) -> Result<(), CliError> {
    let entry = crate::model_dir::entry_readout(model)?;
    let engine = crate::model_dir::open_model(model, opts, entry)?;
    println!(
        "{}",
        serde_json::to_string_pretty(&engine.info()).unwrap_or_default()
    );
    Ok(())
}
