//! `readout score`: one state, every criterion, decisions as JSON.

use std::path::Path;

use serde::Serialize;

use crate::cli::readout_args::ReadoutArgs;
use crate::cli::CliError;
use crate::core::input::criteria::{parse_states, StateSpec};
use crate::core::input::mode::ReadoutChoice;
use crate::core::input::prefix::PrefixSpec;
use crate::core::read::decision::Decision;

use crate::model_dir::open_model;
use crate::model_dir::HostOptions;

#[derive(Serialize)]
struct Check {
    /// max |Δp| between the cached-prefix decision and one uncached forward, over every option of every criterion.
    max_abs_dp: f64,
    argmax_changed: Vec<String>,
}

#[derive(Serialize)]
struct Output<'a> {
    model: &'a str,
    state: &'a str,
    head_tokens: usize,
    /// The tokens of the shared prefix the state was built on (`--prefix`).
    #[serde(skip_serializing_if = "Option::is_none")]
    prefix_tokens: Option<usize>,
    /// The runtime that computed, and why (`--runtime auto` chooses by the graph).
    runtime: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime_reason: Option<String>,
    convention: crate::engine::convention::Convention,
    /// What a readout flag left out takes (each decision's `readout` says
    /// what ran), and where that came from: the same as the browser's
    /// `info().readoutDefaults`.
    readout_defaults: ReadoutChoice,
    readout_defaults_from: String,
    decisions: Vec<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    check: Option<Check>,
}

/// The state to score: the file's only one, or `index` of several.
pub fn read_state(path: &Path, index: Option<usize>) -> Result<StateSpec, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError::file(path, e))?;
    let mut states = parse_states(&text).map_err(|e| CliError::file(path, e))?;
    let count = states.len();
    let p = path.display().to_string();
    match index {
        _ if count == 0 => Err(CliError::file(path, "holds no state")),
        None if count == 1 => Ok(states.swap_remove(0)),
        None => Err(CliError::ManyStates { path: p, count }),
        Some(i) if i < count => Ok(states.swap_remove(i)),
        Some(index) => Err(CliError::StateIndex {
            path: p,
            index,
            count,
        }),
    }
}

/// A `--prefix` file: one JSON object, refused over the JSON size limit
/// before it is read.
pub fn read_prefix(path: &Path) -> Result<PrefixSpec, CliError> {
    let bytes = std::fs::metadata(path)
        .map_err(|e| CliError::file(path, e))?
        .len();
    crate::core::input::input_limits::check_size(
        &path.display().to_string(),
        bytes,
        crate::core::input::input_limits::MAX_JSON_BYTES,
        "bytes",
        "a prefix is an instruction and a few worked examples",
    )
    .map_err(|e| CliError::Engine(e.into()))?;
    let text = std::fs::read_to_string(path).map_err(|e| CliError::file(path, e))?;
    PrefixSpec::parse(&text).map_err(|e| CliError::file(path, e))
}

pub fn run(
    model: &Path,
    state_path: &Path,
    index: Option<usize>,
    readout: &ReadoutArgs,
    check: bool,
    prefix: Option<&Path>,
    opts: &HostOptions,
) -> Result<(), CliError> {
    let state = read_state(state_path, index)?;
    let prefix = prefix.map(read_prefix).transpose()?;
    let mut engine = open_model(model, opts, crate::model_dir::entry_readout(model)?)?;
    let defaults = engine.readout_defaults();
    let req = readout.request();
    pollster::block_on(async {
        let (id, prefix) = match &prefix {
            Some(spec) => {
                let p = engine.prefix(spec, &req).await?;
                (engine.prefill_on(p, &state).await?, Some(p))
            }
            None => (engine.prefill_with(&state, &req).await?, None),
        };
        let prefix_tokens = prefix.map(|p| engine.prefix_tokens(p)).transpose()?;
        let decisions = engine.score_all(id, &state.criteria, &req).await?;
        let check = if check {
            let mut max_abs_dp: f64 = 0.0;
            let mut argmax_changed = Vec::new();
            for (c, d) in state.criteria.iter().zip(&decisions) {
                let r = engine.score_uncached(id, c, &req).await?;
                for (a, b) in d.p().iter().zip(r.p()) {
                    max_abs_dp = max_abs_dp.max((a - b).abs());
                }
                if r.answer != d.answer {
                    argmax_changed.push(c.id.clone());
                }
            }
            Some(Check {
                max_abs_dp,
                argmax_changed,
            })
        } else {
            None
        };
        let out = Output {
            model: &engine.info().model_id,
            state: &state.id,
            head_tokens: engine.head_tokens(id)?,
            prefix_tokens,
            runtime: engine.info().runtime,
            runtime_reason: engine.info().runtime_reason,
            convention: engine.convention(),
            readout_defaults: defaults,
            readout_defaults_from: engine.readout_defaults_from().to_string(),
            decisions,
            check,
        };
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        engine.dispose(id)?;
        if let Some(p) = prefix {
            engine.dispose_prefix(p)?;
        }
        Ok(())
    })
}
