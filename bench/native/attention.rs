//! Native benchmark (a program, not a test) of our runtime's attention
//! alone (`GroupQueryAttention`), on SmolLM2-135M's head shapes (9 query
//! heads, 3 key/value heads, head dim 64) with random inputs: how many
//! multiply-adds a second it reaches (scores and weighted sums, counted as
//! `2 · heads · keys seen · D`), for the shapes that cost most in a shared
//! prefix's bench: a whole 634-token prefill, the 218 tokens of evidence
//! run after a 416-token prefix, and one token after 634.
//!
//!   cargo bench --bench attention -- [--threads 1,2] [--rounds 15] [--out FILE]
//!
//! Several thread counts are measured in one run, their rounds alternated.
//! Writes bench/results/attention/<date>-attention.json unless --out says.

mod common;

use std::time::Instant;

use readout::core::eval::logit_cost::median;
use readout::kernels::random_attention::{RandomAttention, D, HEADS, KV_HEADS, SHAPES};
use readout::kernels::Pool;
use serde_json::json;

use common::Args;

fn main() {
    let mut args = Args::from_env();
    let rounds = args.number("--rounds", 15);
    let threads: Vec<usize> = args
        .text("--threads")
        .unwrap_or_else(|| "1,2".into())
        .split(',')
        .map(|x| x.parse().expect("--threads: whole numbers"))
        .collect();
    let path = common::result_path("attention", "attention", args.text("--out"));
    let pools: Vec<Pool> = threads
        .iter()
        .map(|&t| Pool::new(t).expect("thread pool"))
        .collect();
    let mut seed = 9u64;
    let mut shapes = Vec::new();
    for (name, p, s) in SHAPES {
        let layer = RandomAttention::new(p, s, &mut seed);
        let macs = layer.macs();
        let mut times = vec![Vec::new(); pools.len()];
        for _ in 0..rounds {
            for (pool, times) in pools.iter().zip(&mut times) {
                let t0 = Instant::now();
                layer.run(pool).expect("attention");
                times.push(t0.elapsed().as_secs_f64());
            }
        }
        let mut by_threads = Vec::new();
        for (&t, times) in threads.iter().zip(&times) {
            let m = median(times);
            let gmacs = macs as f64 / m / 1e9;
            eprintln!(
                "[attention] {name} (past {p}, {s} rows), {t} thread(s): {:.3} ms a layer, {gmacs:.2} G multiply-adds/s",
                m * 1e3
            );
            by_threads.push(json!({ "threads": t, "ms_per_layer": m * 1e3, "gmacs": gmacs }));
        }
        shapes.push(
            json!({ "shape": name, "past": p, "rows": s, "macs": macs, "by_threads": by_threads }),
        );
    }
    let out = json!({
        "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": D,
        "results": shapes,
    });
    common::write_result("attention", &path, out, "attention");
}
