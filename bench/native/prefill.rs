//! Native benchmark (a program, not a test): a prefill that fetches only the
//! grown past (`Runtime::extend`, what the engine does) against one that also
//! fetches every row's logits (`Runtime::run` keeping the past, what the
//! native runtime did before), interleaved in one run on the same ids.
//!
//!   cargo bench --bench prefill -- [--tokens 256] [--rounds 7] [--threads 2] [MODEL_DIR ...]
//!
//! Checks that both pasts give bit-identical logits on a next token, and
//! writes bench/results/native-prefill/<date>-native-prefill.json.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use readout::core::eval::logit_cost::{median, sweep_ids};
use readout::engine::convention::{candidates, derive};
use readout::runtime::native::{NativeOptions, NativeRuntime};
use readout::ModelDir;
use readout::Runtime;
use serde_json::json;

use common::Args;

fn main() {
    let mut args = Args::from_env();
    let out = common::result_path("native-prefill", "native-prefill", args.text("--out"));
    let tokens = args.number("--tokens", 256);
    let rounds = args.number("--rounds", 7);
    let threads = args.number("--threads", 2);
    let args = args.rest();
    let dirs: Vec<PathBuf> = if args.is_empty() {
        [
            "models/smollm2-135m-instruct-q4",
            "models/smollm2-135m-instruct-q4f16",
            "models/qwen3-0.6b-shape-q4",
        ]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .collect()
    } else {
        args.iter().map(PathBuf::from).collect()
    };
    assert!(!dirs.is_empty(), "no model directory given or built");
    let mut results = Vec::new();
    for dir in &dirs {
        let md = ModelDir::open(dir).expect("model directory");
        let config = md.read_config().expect("config.json");
        let tok = md.read_tokenizer().expect("tokenizer.json");
        let (prefix, _) = sweep_ids(&tok, tokens, &[1]).expect("sweep ids");
        let mut rt = NativeRuntime::load(
            &md.graph,
            &NativeOptions {
                intra_threads: threads,
            },
            config.kv_dims(),
        )
        .expect("load");
        let sig = rt.signature().clone();
        let conv = candidates(&sig)[0];
        let step = derive(conv, &sig, 0, &prefix);
        // Warm-up of both paths, then the same next token on both pasts.
        let with_logits = pollster::block_on(rt.run(&step, None, true))
            .expect("run")
            .present
            .expect("present");
        let only_past = pollster::block_on(rt.extend(&step, None)).expect("extend");
        let next = derive(conv, &sig, prefix.len(), &prefix[..1]);
        let a = pollster::block_on(rt.run(&next, Some(&with_logits), false))
            .expect("next")
            .logits;
        let b = pollster::block_on(rt.run(&next, Some(&only_past), false))
            .expect("next")
            .logits;
        let max_abs_diff = a
            .to_f32_vec()
            .iter()
            .zip(b.to_f32_vec())
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        rt.release(with_logits);
        rt.release(only_past);

        let (mut old, mut new) = (Vec::new(), Vec::new());
        let (mut old_bytes, mut new_bytes) = (0, 0);
        for _ in 0..rounds {
            let before = rt.bytes_read_back();
            let t = Instant::now();
            let kv = pollster::block_on(rt.run(&step, None, true))
                .expect("run")
                .present
                .expect("present");
            old.push(t.elapsed().as_secs_f64() * 1e3);
            old_bytes = rt.bytes_read_back() - before;
            rt.release(kv);
            let before = rt.bytes_read_back();
            let t = Instant::now();
            let kv = pollster::block_on(rt.extend(&step, None)).expect("extend");
            new.push(t.elapsed().as_secs_f64() * 1e3);
            new_bytes = rt.bytes_read_back() - before;
            rt.release(kv);
        }
        let (mo, mn) = (median(&old), median(&new));
        eprintln!(
            "[prefill] {}: {} tokens, logits fetched {mo:.1} ms ({old_bytes} bytes), past only {mn:.1} ms ({new_bytes} bytes): {:.2}x; next-token |Δ| {max_abs_diff:e}",
            dir.display(),
            prefix.len(),
            mo / mn
        );
        results.push(json!({
            "model": dir.display().to_string(), "tokens": prefix.len(), "rounds": rounds, "threads": threads,
            "with_logits_ms": old, "past_only_ms": new, "median_with_logits_ms": mo, "median_past_only_ms": mn,
            "bytes_read_back_with_logits": old_bytes, "bytes_read_back_past_only": new_bytes,
            "speedup": mo / mn, "next_token_max_abs_diff": max_abs_diff,
        }));
    }
    let doc = json!({
        "what": "a prefill fetching only present.* (Runtime::extend) against one also fetching every row's logits (Runtime::run keeping the past), interleaved",
        "results": results,
    });
    common::write_result("native-prefill", &out, doc, "prefill");
}
