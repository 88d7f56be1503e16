//! `readout evaluate`: a fixture through the engine, metrics per family.

use crate::platform::Clock;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::cli::readout_args::ReadoutArgs;
use crate::cli::CliError;
use crate::core::eval::metrics::{calibrate, report, Calibration, Report, Scored};
use crate::core::input::criteria::parse_states;
use crate::core::input::mode::PromptStyle;
use crate::core::input::mode::{ReadoutChoice, DEFAULTS_BY_RULE};
use crate::core::input::prefix::PrefixSpec;
use crate::core::input::request::Readout;
use crate::core::read::decision::Decision;
use crate::model_dir::open_model;
use crate::model_dir::HostOptions;

#[derive(Serialize)]
struct Row {
    state: String,
    family: String,
    gold: Option<String>,
    decision: Decision,
}

#[derive(Serialize)]
struct EvalReport {
    model: String,
    runtime: String,
    /// Why that runtime (`--runtime auto` chooses by the graph).
    #[serde(skip_serializing_if = "Option::is_none")]
    runtime_reason: Option<String>,
    fixture: String,
    options: Readout,
    prompt: PromptStyle,
    /// What a readout flag left out took, and where that came from.
    readout_defaults: ReadoutChoice,
    readout_defaults_from: String,
    states: usize,
    /// Scoring time (prefills excluded, baselines included) per criterion.
    ms_per_criterion: f64,
    /// Content-free baselines computed in this run.
    baselines_computed: u64,
    criteria: usize,
    seconds: f64,
    load_seconds: f64,
    report: Report,
    calibration: Option<Calibration>,
    /// The shared prefix every state was built on, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    prefix: Option<PrefixSpec>,
    rows: Vec<Row>,
}

/// The fixture's opening `{"prefix": {...}}` line, if it has one, and the
/// text of its states after it.
fn fixture_prefix(text: &str) -> Result<(Option<PrefixSpec>, &str), String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Block {
        prefix: PrefixSpec,
    }
    let trimmed = text.trim_start();
    let (first, rest) = trimmed.split_once('\n').unwrap_or((trimmed, ""));
    if !first.contains("\"prefix\"") {
        return Ok((None, text));
    }
    match serde_json::from_str::<Block>(first) {
        Ok(b) => Ok((Some(b.prefix), rest)),
        Err(e) => Err(format!("line 1, the fixture's prefix block: {e}")),
    }
}

pub fn run(
    fixture: &Path,
    model: &Path,
    readout: &ReadoutArgs,
    out: Option<PathBuf>,
    prefix: Option<&Path>,
    opts: &HostOptions,
) -> Result<(), CliError> {
    let text = std::fs::read_to_string(fixture).map_err(|e| CliError::file(fixture, e))?;
    // A fixture may open with its rubric: `{"prefix": {...}}` on the first
    // line, shared by every state (`--prefix FILE` gives one instead).
    let (block, rest) = fixture_prefix(&text).map_err(|e| CliError::file(fixture, e))?;
    let prefix = match (prefix, block) {
        (Some(_), Some(_)) => {
            return Err(CliError::Usage(format!(
                "{}: the fixture opens with a prefix and --prefix gives another; give one",
                fixture.display()
            )))
        }
        (Some(p), None) => Some(super::score_cmd::read_prefix(p)?),
        (None, b) => b,
    };
    let states = parse_states(rest).map_err(|e| CliError::file(fixture, e))?;
    let total: usize = states.iter().map(|s| s.criteria.len()).sum();
    if total == 0 {
        return Err(CliError::Usage(format!(
            "{}: no criteria to evaluate",
            fixture.display()
        )));
    }
    // Without a gold answer every metric is 0.000, which reads like a result.
    if !states
        .iter()
        .flat_map(|s| &s.criteria)
        .any(|c| c.answer.is_some())
    {
        return Err(CliError::NoAnswers {
            path: fixture.display().to_string(),
        });
    }
    let model_dir = crate::model_dir::resolve(model)?;
    // The flags over the model's defaults, resolved before the load by the
    // engine's own rule so the report's default name can carry them.
    let req = readout.request();
    let entry = crate::model_dir::entry_readout(model)?;
    let (defaults, defaults_from) = match &entry {
        Some((d, from)) => (*d, from.clone()),
        None => (ReadoutChoice::default(), DEFAULTS_BY_RULE.to_string()),
    };
    let named = req
        .resolve(defaults, false)
        .map_err(|e| CliError::Engine(e.into()))?;
    let out = match out {
        Some(o) => o,
        None => {
            let id = crate::model_dir::ModelDir::open(&model_dir)?.model_id;
            let stem = fixture
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let tag = named.tag();
            PathBuf::from("reports").join(format!("evaluate-{id}-{stem}-{tag}.json"))
        }
    };
    check_writable(&out)?;
    let t_load = Clock::new();
    let mut engine = open_model(model, opts, entry)?;
    let load_seconds = t_load.ms() / 1e3;
    let info = engine.info();
    eprintln!(
        "readout: {} loaded in {load_seconds:.1}s; convention {:?} proven",
        info.model_id, info.proof.convention
    );

    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} criteria  eta {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let readout = engine.readout(&req)?;
    let t0 = Clock::new();
    let mut rows = Vec::with_capacity(total);
    let mut scored = Vec::new();
    let mut score_ms = 0.0;
    pollster::block_on(async {
        let shared = match &prefix {
            Some(p) => Some(engine.prefix(p, &req).await?),
            None => None,
        };
        for s in &states {
            bar.set_message(s.id.clone());
            let id = match shared {
                Some(p) => engine.prefill_on(p, s).await?,
                None => engine.prefill_with(s, &req).await?,
            };
            // A state's criteria go together, so a runtime that packs
            // branches runs them (and their rotations) in one pass.
            let decisions = engine.score_all(id, &s.criteria, &req).await?;
            for (c, d) in s.criteria.iter().zip(decisions) {
                score_ms += d.ms;
                if let Some(gold) = c.answer_index() {
                    scored.push(Scored {
                        family: c.family.clone(),
                        gold,
                        gold_class: c.options[gold].id.clone(),
                        probs: d.p(),
                        order_unstable: d.order_unstable.unwrap_or(false),
                    });
                }
                rows.push(Row {
                    state: s.id.clone(),
                    family: c.family.clone(),
                    gold: c.answer.clone(),
                    decision: d,
                });
                bar.inc(1);
            }
            engine.dispose(id)?;
        }
        if let Some(p) = shared {
            engine.dispose_prefix(p)?;
        }
        Ok::<(), CliError>(())
    })?;
    bar.finish_and_clear();
    let seconds = t0.ms() / 1e3;
    let rep = report(&scored);
    print_table(&rep, &readout.tag(), seconds, scored.len());

    let r = EvalReport {
        model: info.model_id.clone(),
        runtime: info.runtime.clone(),
        runtime_reason: info.runtime_reason.clone(),
        fixture: fixture.display().to_string(),
        options: readout,
        prompt: readout.prompt,
        readout_defaults: defaults,
        readout_defaults_from: defaults_from,
        states: states.len(),
        ms_per_criterion: score_ms / total as f64,
        baselines_computed: engine.baselines_computed(),
        criteria: total,
        seconds,
        load_seconds,
        calibration: calibrate(&scored),
        report: rep,
        prefix,
        rows,
    };
    let json = serde_json::to_string_pretty(&r).map_err(|e| CliError::file(&out, e))?;
    std::fs::write(&out, json).map_err(|e| CliError::file(&out, e))?;
    eprintln!("readout: report written to {}", out.display());
    Ok(())
}

/// Fails now, not after the whole run, when the report cannot be written:
/// its directory is created and the file opened for writing (an existing
/// report without truncating it; a new one is removed again).
fn check_writable(out: &Path) -> Result<(), CliError> {
    let refuse = |message: String| CliError::OutUnwritable {
        path: out.display().to_string(),
        message,
    };
    if out.is_dir() {
        return Err(refuse("is a directory".into()));
    }
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| refuse(format!("{}: {e}", dir.display())))?;
    }
    let existed = out.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(out)
        .map_err(|e| refuse(e.to_string()))?;
    if !existed {
        std::fs::remove_file(out).map_err(|e| refuse(e.to_string()))?;
    }
    Ok(())
}

fn print_table(r: &Report, tag: &str, seconds: f64, scored: usize) {
    println!(
        "{:<12} {:>4} {:>8} {:>8} {:>7} {:>7} {:>7} {:>9}",
        "family", "n", "acc", "bal.acc", "ECE", "Brier", "NLL", "unstable"
    );
    let line = |name: &str, s: &crate::core::eval::metrics::Summary| {
        println!(
            "{:<12} {:>4} {:>8.3} {:>8.3} {:>7.3} {:>7.3} {:>7.3} {:>9}",
            name, s.n, s.accuracy, s.balanced_accuracy, s.ece, s.brier, s.nll, s.order_unstable
        )
    };
    for (f, s) in &r.families {
        line(f, s);
    }
    line("overall", &r.overall);
    println!("mean family balanced accuracy {:.3}  ({scored} criteria with answers, {tag}, {seconds:.1}s)", r.mean_family_balanced_accuracy);
    let share = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "picked by position {}  gold {}  max picked/gold {}",
        share(&r.positions.picked),
        share(&r.positions.gold),
        r.positions
            .max_pick_over_gold
            .map_or("unbounded".to_string(), |x| format!("{x:.2}"))
    );
}
