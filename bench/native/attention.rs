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
//! Writes bench/results/<date>-attention.json unless --out says.

mod common;

use std::sync::Arc;
use std::time::Instant;

use readout::core::eval::logit_cost::median;
use readout::host::{machine, today};
use readout::kernels::attention::Gqa;
use readout::kernels::simd::lcg;
use readout::kernels::tensor::Value;
use readout::kernels::Pool;
use serde_json::json;

use common::Args;

const HEADS: usize = 9;
const KV_HEADS: usize = 3;
const D: usize = 64;

fn main() {
    let mut args = Args::from_env();
    let rounds = args.number("--rounds", 15);
    let threads: Vec<usize> = args
        .text("--threads")
        .unwrap_or_else(|| "1,2".into())
        .split(',')
        .map(|x| x.parse().expect("--threads: whole numbers"))
        .collect();
    let out_path = args.text("--out");
    let pools: Vec<Pool> = threads
        .iter()
        .map(|&t| Pool::new(t).expect("thread pool"))
        .collect();
    let mut seed = 9u64;
    let mut draw = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| lcg(&mut seed) as f32 / (1u64 << 32) as f32 - 0.5)
            .collect()
    };
    // SmolLM2's rotary caches: 8,192 positions, half of D each.
    let (max_pos, half) = (8192, D / 2);
    let angle = |p: usize, j: usize| p as f32 / 10000f32.powf(j as f32 / half as f32);
    let cos: Arc<[f32]> = (0..max_pos * half)
        .map(|i| angle(i / half, i % half).cos())
        .collect();
    let sin: Arc<[f32]> = (0..max_pos * half)
        .map(|i| angle(i / half, i % half).sin())
        .collect();
    let gqa = Gqa {
        heads: HEADS,
        kv_heads: KV_HEADS,
        scale: 0.0,
        rotary: Some((cos, sin, half)),
        window: None,
    };
    let mut shapes = Vec::new();
    for (name, p, s) in [
        ("whole prefill", 0usize, 634usize),
        ("evidence on a prefix", 416, 218),
        ("one token", 634, 1),
    ] {
        let q = draw(s * HEADS * D);
        let k = draw(s * KV_HEADS * D);
        let v = draw(s * KV_HEADS * D);
        let past_k = Value::f32(vec![1, KV_HEADS, p, D], draw(KV_HEADS * p * D));
        let past_v = Value::f32(vec![1, KV_HEADS, p, D], draw(KV_HEADS * p * D));
        // Keys seen: each row sees the past and the rows up to itself.
        let seen: usize = (0..s).map(|i| p + i + 1).sum();
        let macs = 2 * HEADS * seen * D;
        let mut times = vec![Vec::new(); pools.len()];
        for _ in 0..rounds {
            for (pool, times) in pools.iter().zip(&mut times) {
                let t0 = Instant::now();
                let out = gqa
                    .run(
                        q.clone(),
                        k.clone(),
                        &v,
                        s,
                        &past_k,
                        &past_v,
                        p + s,
                        true,
                        None,
                        pool,
                    )
                    .expect("attention");
                times.push(t0.elapsed().as_secs_f64());
                std::hint::black_box(out.out);
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
        "date": today(),
        "machine": machine(),
        "command": format!("cargo bench --bench attention -- --threads {} --rounds {rounds}",
            threads.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",")),
        "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": D,
        "results": shapes,
    });
    let path = out_path.unwrap_or_else(|| format!("bench/results/{}-attention.json", today()));
    std::fs::write(&path, serde_json::to_string_pretty(&out).expect("json")).expect("write");
    eprintln!("[attention] wrote {path}");
}
