//! Native benchmark (a program, not a test): per-criterion time of a 45-token
//! suffix after a 256-token prefix, stock vs trimmed vs pruned+trimmed,
//! interleaved in one run, on ONNX Runtime, on our own runtime, or on both
//! (six engines, every one timed in every round).
//!
//!   cargo bench --bench variants -- [--rounds 10] [--threads 2]
//!       [--runtime ort|own|both] [--tag NAME] [MODEL_ID ...]
//!
//! Builds the `-trimmed` and `-trimmed-pruned` variants with the export
//! commands when missing (each verified against the stock model), and writes
//! bench/results/native-variants/<date>-native-variants-<model>[-<tag>].json; it refuses to
//! overwrite a file that is already there (pass another `--tag`).

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use readout::core::eval::logit_cost::median;
use readout::core::text::prompt::{render_head, render_suffix};
use readout::core::text::tokenizer::TextTokenizer;
use readout::surgery::commands::{run, Op};
use readout::Precision;
use readout::ReadoutRequest;
use readout::{open_host_engine, HostEngine, HostOptions, RuntimeKind};
use readout::{Criterion, StateSpec};
use serde_json::json;

use common::Args;

const WORDS: &str = "the harbour office keeps a ledger of every ship that docks and on each morning the clerk writes \
the name of the vessel the port it came from the cargo it carries the weight in tonnes and the time it tied up at the quay \
while the pilots report the weather the tide and any delay so that the harbour master can plan the berths for the day";

/// Evidence whose head is as close to `target` tokens as words allow (never over).
fn evidence_for(tok: &TextTokenizer, target: usize) -> (String, usize) {
    let words: Vec<&str> = WORDS.split(' ').collect();
    let mut best = (String::new(), 0);
    for n in 1..4096 {
        let ev: Vec<&str> = (0..n).map(|i| words[i % words.len()]).collect();
        let ev = ev.join(" ");
        let len = tok.encode(&render_head(None, &ev)).unwrap().len();
        if len > target {
            break;
        }
        best = (ev, len);
        if len == target {
            break;
        }
    }
    best
}

/// A four-option criterion whose suffix is as close to `target` tokens as words allow.
fn criterion_for(tok: &TextTokenizer, target: usize) -> (Criterion, usize) {
    let words: Vec<&str> = WORDS.split(' ').collect();
    let opts = ["The Marguerite", "The Halcyon", "The Tern", "None of them"];
    let mut best = None;
    for n in 1..200 {
        let q: Vec<&str> = (0..n).map(|i| words[i % words.len()]).collect();
        let c = common::criterion(
            "bench",
            "bench",
            format!("Which ship, given that {}?", q.join(" ")),
            &opts,
        );
        let len = tok.encode(&render_suffix(&c, &[0, 1, 2, 3])).unwrap().len();
        if len > target {
            break;
        }
        best = Some((c, len));
        if len == target {
            break;
        }
    }
    best.expect("a criterion fits")
}

struct Variant {
    id: String,
    runtime: RuntimeKind,
    engine: HostEngine,
    load_ms: f64,
    prefill_ms: f64,
    samples: Vec<f64>,
    bytes_per_criterion: u64,
    probs: Vec<f64>,
}

fn ensure(models: &Path, base: &str) -> Vec<PathBuf> {
    let stock = models.join(base);
    let trimmed = models.join(format!("{base}-trimmed"));
    let pruned = models.join(format!("{base}-trimmed-pruned"));
    if !trimmed.join("model.onnx").is_file() {
        eprintln!("bench: building {}", trimmed.display());
        run(&stock, &trimmed, &Op::Trim).unwrap_or_else(|e| panic!("trim {base}: {e}"));
    }
    if !pruned.join("model.onnx").is_file() {
        eprintln!("bench: building {}", pruned.display());
        run(
            &trimmed,
            &pruned,
            &Op::Prune {
                letters: "ABCDEFGHIJKLMNOPQRST".into(),
                tokenizer: None,
            },
        )
        .unwrap_or_else(|e| panic!("prune {base}: {e}"));
    }
    vec![stock, trimmed, pruned]
}

fn main() {
    let mut args = Args::from_env();
    let rounds = args.number("--rounds", 10);
    let threads = args.number(
        "--threads",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    );
    let prefix_target = args.number("--prefix", 256);
    let suffix_target = args.number("--suffix", 45);
    let runtimes = match args.text("--runtime").as_deref() {
        None | Some("ort") => vec![RuntimeKind::Ort],
        Some("own") => vec![RuntimeKind::Own],
        Some("both") => vec![RuntimeKind::Ort, RuntimeKind::Own],
        Some(other) => panic!("--runtime {other}: expected ort, own or both"),
    };
    let tag = args
        .text("--tag")
        .map(|t| format!("-{t}"))
        .unwrap_or_default();
    let args = args.rest();
    let bases = if args.is_empty() {
        vec![
            "qwen3-0.6b-shape-q4f16".to_string(),
            "qwen3-0.6b-shape-q4".to_string(),
        ]
    } else {
        args
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let models = root.join("models");
    let name = |k: RuntimeKind| match k {
        RuntimeKind::Ort => "onnxruntime",
        RuntimeKind::Own => "own",
        RuntimeKind::Auto => "auto",
    };

    for base in &bases {
        // Refused when taken: pass --tag NAME to write beside it.
        let path = common::result_path(
            "native-variants",
            &format!("native-variants-{base}{tag}"),
            None,
        );
        assert!(models.join(base).join("model.onnx").is_file(), "models/{base} is not built: run scripts/main.sh (or modelgen/build_models.py qwen3-0.6b)");
        let dirs = ensure(&models, base);
        let mut vs: Vec<Variant> = runtimes
            .iter()
            .flat_map(|&k| dirs.iter().map(move |d| (k, d)))
            .map(|(runtime, d)| {
                let t = Instant::now();
                let opts = HostOptions {
                    runtime,
                    threads,
                    precision: Precision::Int8,
                    pack: true,
                };
                let engine =
                    open_host_engine(d, &opts).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
                eprintln!("bench: loaded {} on {}", d.display(), name(runtime));
                Variant {
                    id: d.file_name().unwrap().to_string_lossy().into_owned(),
                    runtime,
                    engine,
                    load_ms: t.elapsed().as_secs_f64() * 1e3,
                    prefill_ms: 0.0,
                    samples: vec![],
                    bytes_per_criterion: 0,
                    probs: vec![],
                }
            })
            .collect();
        let tok = vs[0].engine.tokenizer();
        let (evidence, prefix_tokens) = evidence_for(tok, prefix_target);
        let (crit, suffix_tokens) = criterion_for(tok, suffix_target);
        let state = StateSpec {
            id: "bench".into(),
            instruction: None,
            evidence,
            criteria: vec![],
        };
        eprintln!("bench {base}: prefix {prefix_tokens} tokens, suffix {suffix_tokens} tokens, {rounds} rounds, {threads} threads");
        let so = ReadoutRequest {
            allowed_mass: Some(false),
            ..Default::default()
        };
        let mut ids = Vec::new();
        for v in vs.iter_mut() {
            let t = Instant::now();
            let id = pollster::block_on(v.engine.prefill(&state)).unwrap();
            v.prefill_ms = t.elapsed().as_secs_f64() * 1e3;
            for _ in 0..2 {
                pollster::block_on(v.engine.score(id, &crit, &so)).unwrap();
            }
            ids.push(id);
        }
        for r in 0..rounds {
            // Rotate the order each round so no variant always runs first.
            for k in 0..vs.len() {
                let i = (k + r) % vs.len();
                let v = &mut vs[i];
                let before = v.engine.bytes_read_back();
                let t = Instant::now();
                let d = pollster::block_on(v.engine.score(ids[i], &crit, &so)).unwrap();
                v.samples.push(t.elapsed().as_secs_f64() * 1e3);
                v.bytes_per_criterion = v.engine.bytes_read_back() - before;
                v.probs = d.p();
            }
            eprint!("\rbench {base}: round {}/{rounds}", r + 1);
        }
        eprintln!();
        // Each runtime's cuts against its own stock graph; the same graph on
        // the two runtimes against each other (ONNX Runtime is the reference).
        let stock = |k: RuntimeKind| vs.iter().find(|v| v.runtime == k).expect("a stock engine");
        let same_graph =
            |v: &Variant, k: RuntimeKind| vs.iter().find(|w| w.runtime == k && w.id == v.id);
        let max_dp = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max)
        };
        let variants: Vec<serde_json::Value> = vs
            .iter()
            .map(|v| {
                let m = median(&v.samples);
                let s = stock(v.runtime);
                let mut o = json!({
                    "id": v.id, "runtime": name(v.runtime), "runtime_info": v.engine.info().runtime,
                    "median_ms": m, "samples_ms": v.samples, "speedup_vs_stock": median(&s.samples) / m,
                    "bytes_read_back_per_criterion": v.bytes_per_criterion, "load_ms": v.load_ms, "prefill_ms": v.prefill_ms,
                    "max_abs_dp_vs_stock": max_dp(&v.probs, &s.probs),
                });
                if let (RuntimeKind::Own, Some(r)) = (v.runtime, same_graph(v, RuntimeKind::Ort)) {
                    o["onnxruntime_over_own"] = json!(median(&r.samples) / m);
                    o["max_abs_dp_vs_onnxruntime"] = json!(max_dp(&v.probs, &r.probs));
                }
                o
            })
            .collect();
        println!("{base} (prefix {prefix_tokens}, suffix {suffix_tokens}, {rounds} rounds)");
        println!(
            "{:<40} {:>12} {:>10} {:>9} {:>14}",
            "variant", "runtime", "median ms", "speedup", "bytes back"
        );
        for v in &variants {
            println!(
                "{:<40} {:>12} {:>10.1} {:>8.2}x {:>14}",
                v["id"].as_str().unwrap(),
                v["runtime"].as_str().unwrap(),
                v["median_ms"].as_f64().unwrap(),
                v["speedup_vs_stock"].as_f64().unwrap(),
                v["bytes_read_back_per_criterion"]
            );
        }
        let result = json!({
            "runtimes": runtimes.iter().map(|&k| name(k)).collect::<Vec<_>>(),
            "onnxruntime": "1.30 (onnxruntime-node's libonnxruntime.so.1), CPU execution provider",
            "threads": threads,
            "model": base,
            "prefix_tokens": prefix_tokens,
            "suffix_tokens": suffix_tokens,
            "warmup_runs": 2,
            "rounds": rounds,
            "interleaved": true,
            "timed": "Engine::score wall time: suffix tokenisation, one run against the cached prefix, readout",
            "variants": variants,
            "comparison": "speedup_vs_stock: the stock median over the variant's, on the same runtime; onnxruntime_over_own: ONNX Runtime's median over ours on the same graph; all measured in this run",
        });
        common::write_result("native-variants", &path, result, "variants");
    }
}
