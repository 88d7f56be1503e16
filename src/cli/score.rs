//! `readout score`: one state, every criterion, decisions as JSON.

use std::path::Path;

use serde::Serialize;

use super::CliError;
use crate::core::debias::Debias;
use crate::core::decision::Decision;
use crate::core::fixture::{parse_jsonl, StateSpec};
use crate::engine::ScoreOptions;
use crate::model_dir::open_engine;
use crate::runtime::native::NativeOptions;

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
    convention: crate::engine::convention::Convention,
    decisions: Vec<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    check: Option<Check>,
}

pub fn read_state(path: &Path) -> Result<StateSpec, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError::file(path, e))?;
    if let Ok(s) = serde_json::from_str::<StateSpec>(&text) {
        for c in &s.criteria {
            c.validate().map_err(|e| CliError::file(path, e))?;
        }
        return Ok(s);
    }
    let mut states = parse_jsonl(&text).map_err(|e| CliError::file(path, e))?;
    if states.is_empty() {
        return Err(CliError::file(path, "holds no state"));
    }
    Ok(states.swap_remove(0))
}

pub fn run(model: &Path, state_path: &Path, debias: Debias, check: bool, opts: &NativeOptions) -> Result<(), CliError> {
    let state = read_state(state_path)?;
    let mut engine = open_engine(&crate::model_dir::resolve(model)?, opts)?;
    let so = ScoreOptions { debias, allowed_mass: true };
    pollster::block_on(async {
        let id = engine.prefill(&state).await?;
        let decisions = engine.score_all(id, &state.criteria, &so).await?;
        let check = if check {
            let mut max_abs_dp: f64 = 0.0;
            let mut argmax_changed = Vec::new();
            for (c, d) in state.criteria.iter().zip(&decisions) {
                let r = engine.score_uncached(id, c, &so).await?;
                for (a, b) in d.p().iter().zip(r.p()) {
                    max_abs_dp = max_abs_dp.max((a - b).abs());
                }
                if r.answer != d.answer {
                    argmax_changed.push(c.id.clone());
                }
            }
            Some(Check { max_abs_dp, argmax_changed })
        } else {
            None
        };
        let out = Output {
            model: &engine.info().model_id,
            state: &state.id,
            head_tokens: engine.head_tokens(id)?,
            convention: engine.convention(),
            decisions,
            check,
        };
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        engine.dispose(id)?;
        Ok(())
    })
}
