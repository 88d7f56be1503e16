//! Native benchmark (a program, not a test) of the int4 × int8 product
//! alone, on SmolLM2-135M's matrix shapes with random weights: how many
//! multiply-adds a second each kernel this CPU has reaches, per row count
//! (1 row: a single token; 45: a criterion; 256: a prefill or a pass of
//! packed branches). The kernel is the fastest this CPU has;
//! `READOUT_KERNEL=avx2` (or `scalar`) runs a slower one to compare.
//!
//!   cargo bench --bench q4_matmul -- [--threads 1,2] [--rounds 15]
//!                                      [--rows 1,45,256] [--out FILE]
//!
//! Several thread counts are measured in one run, their rounds alternated,
//! so their ratio sees the same machine.
//!
//! Writes bench/results/q4-matmul/<date>-q4-matmul.json unless --out says.

mod common;

use std::time::Instant;

use readout::core::eval::logit_cost::median;
use readout::kernels::random_layer::{RandomLayer, SMOLLM2_LAYER};
use readout::kernels::simd;
use readout::kernels::{Pool, Precision};
use serde_json::json;

use common::Args;

fn main() {
    let mut args = Args::from_env();
    let rounds = args.number("--rounds", 15);
    let list = |flag: &str, v: Option<String>, default: &str| -> Vec<usize> {
        v.unwrap_or_else(|| default.into())
            .split(',')
            .map(|x| {
                x.parse()
                    .unwrap_or_else(|_| panic!("{flag}: {x} is not a whole number"))
            })
            .collect()
    };
    let thread_counts = list("--threads", args.text("--threads"), "1");
    let row_counts = list("--rows", args.text("--rows"), "1,45,256");
    let path = common::result_path("q4-matmul", "q4-matmul", args.text("--out"));
    let pools: Vec<Pool> = thread_counts
        .iter()
        .map(|&t| Pool::new(t).expect("thread pool"))
        .collect();
    // SmolLM2-135M: q/o (576 × 576), k/v (192 × 576), gate/up (1536 × 576),
    // down (576 × 1536).
    let shapes = SMOLLM2_LAYER;
    let mut seed = 5u64;
    let layer = RandomLayer::new(&shapes, true, &mut seed).expect("matrices");
    let kernel = simd::detect();
    let mut rows_out = Vec::new();
    for &m in &row_counts {
        let acts = layer.activations(m, &mut seed);
        let macs = layer.macs(m);
        let mut times = vec![Vec::new(); pools.len()];
        for _ in 0..rounds {
            for (pool, times) in pools.iter().zip(&mut times) {
                let t0 = Instant::now();
                layer.run(&acts, m, Precision::Int8, pool).expect("matmul");
                times.push(t0.elapsed().as_secs_f64());
            }
        }
        let mut by_threads = Vec::new();
        for (&threads, times) in thread_counts.iter().zip(&times) {
            let t = median(times);
            let gmacs = macs as f64 / t / 1e9;
            eprintln!(
                "[q4_matmul] {} kernel, {threads} thread(s), {m} rows: {:.3} ms a layer's matrices, {gmacs:.1} G multiply-adds/s",
                kernel.name(),
                t * 1e3
            );
            by_threads.push(json!({ "threads": threads, "ms_per_layer": t * 1e3, "gmacs": gmacs }));
        }
        rows_out.push(json!({ "rows": m, "by_threads": by_threads }));
    }
    let out = json!({
        "kernel": kernel,
        "threads": thread_counts,
        "shapes_n_k": shapes,
        "results": rows_out,
    });
    common::write_result("q4-matmul", &path, out, "q4_matmul");
}
