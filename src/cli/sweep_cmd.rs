//! `readout sweep`: the `logit_cost` study on native ONNX Runtime, the
//! counterpart of the benchmark page (`bench/`). Same ids (core::eval::logit_cost), same
//! statistics, same JSON shape per variant, so the runner can put the browser
//! and native numbers of one run side by side.

use crate::platform::Clock;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::cli::CliError;
use crate::core::eval::logit_cost::{fit, median, sweep_ids};
use crate::host::{machine, today};
use crate::model_dir::HostOptions;
use crate::model_dir::{open_host_engine, resolve};

pub struct SweepArgs {
    pub models: Vec<PathBuf>,
    pub prefix: usize,
    pub lengths: Vec<usize>,
    pub runs: usize,
    pub warmup: usize,
    pub options: usize,
    pub out: Option<PathBuf>,
}

/// One variant: loaded, prefilled once, each length warmed up then timed.
fn sweep_one(model: &Path, a: &SweepArgs, opts: &HostOptions) -> Result<Value, CliError> {
    let dir = resolve(model)?;
    let t = Clock::new();
    let mut engine = open_host_engine(&dir, opts)?;
    let load_ms = t.ms();
    let (prefix, suffixes) = sweep_ids(engine.tokenizer(), a.prefix, &a.lengths)
        .map_err(crate::engine::EngineError::from)?;
    let t = Clock::new();
    let state = pollster::block_on(engine.prefill_ids(&prefix))?;
    let prefill_ms = t.ms();
    let mut samples = serde_json::Map::new();
    let (mut medians, mut probs, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
    for (n, ids) in a.lengths.iter().zip(&suffixes) {
        for _ in 0..a.warmup {
            pollster::block_on(engine.read_ids(state, ids, a.options, false))?;
        }
        let mut s = Vec::with_capacity(a.runs);
        let mut last = None;
        let mut read_back = 0;
        for _ in 0..a.runs {
            let before = engine.bytes_read_back();
            let t = Clock::new();
            let r = pollster::block_on(engine.read_ids(state, ids, a.options, false))?;
            s.push(t.ms());
            read_back = engine.bytes_read_back() - before;
            last = Some(r.probs);
        }
        bytes.push(read_back);
        eprintln!("sweep {}: n={n} median {:.1} ms", dir.display(), median(&s));
        medians.push(median(&s));
        probs.push(last.unwrap_or_default());
        samples.insert(n.to_string(), json!(s));
    }
    let xs: Vec<f64> = a.lengths.iter().map(|&n| n as f64).collect();
    let id = dir
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(json!({
        "id": id,
        "runtime": engine.info().runtime,
        "run_limit": engine.proof().run_limit,
        "load_ms": load_ms,
        "prefill_ms": prefill_ms,
        "samples_ms": samples,
        "median_ms": medians,
        "fit": fit(&xs, &medians),
        "bytes_read_back": bytes,
        "probs": probs,
    }))
}

pub fn run(a: &SweepArgs, opts: &HostOptions) -> Result<(), CliError> {
    if a.models.is_empty() {
        return Err(CliError::Usage(
            "--model: at least one model is required".into(),
        ));
    }
    if a.runs == 0 {
        return Err(CliError::Usage("--runs: must be at least 1".into()));
    }
    if a.lengths.is_empty() || a.lengths.contains(&0) {
        return Err(CliError::Usage(
            "--lengths: one or more suffix lengths, each at least 1".into(),
        ));
    }
    let variants = a
        .models
        .iter()
        .map(|m| sweep_one(m, a, opts))
        .collect::<Result<Vec<_>, _>>()?;
    let result = json!({
        "benchmark": "logit_cost",
        "date": today(),
        "machine": machine(),
        "runtime": "native",
        "onnxruntime": match opts.runtime {
            crate::model_dir::RuntimeKind::Ort => "1.30 (onnxruntime-node's libonnxruntime.so.1), CPU execution provider",
            crate::model_dir::RuntimeKind::Own => "none: readout's own interpreter and int4 kernels",
            crate::model_dir::RuntimeKind::Auto => "per variant (auto: an int4 graph on readout's own runtime, a float one on ONNX Runtime 1.30); each variant's runtime names it",
        },
        "threads": opts.threads,
        "prefix_tokens": a.prefix,
        "lengths": a.lengths,
        "runs": a.runs,
        "warmup": a.warmup,
        "options": a.options,
        "variants": variants,
    });
    let text = serde_json::to_string_pretty(&result).unwrap_or_default();
    match &a.out {
        Some(p) => {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| CliError::file(dir, e))?;
            }
            std::fs::write(p, text + "\n").map_err(|e| CliError::file(p, e))?;
            eprintln!("sweep: wrote {}", p.display());
        }
        None => println!("{text}"),
    }
    Ok(())
}
