//! Attention alone (`Gqa`) on SmolLM2-135M's head shapes with fixed
//! pseudo-random inputs, for the benchmarks that time it: natively
//! (`cargo bench --bench attention`) and in the browser (the diagnostics
//! build's `AttentionBench`, timed by `bench/runners/dot_peak.mjs`), so that
//! both time the same work.

use std::sync::Arc;

use super::attention::Gqa;
use super::simd::lcg;
use super::tensor::Value;
use super::{OpError, Pool};

/// SmolLM2-135M: 9 query heads over 3 key/value heads of 64.
pub const HEADS: usize = 9;
pub const KV_HEADS: usize = 3;
pub const D: usize = 64;
/// Positions SmolLM2's rotary caches hold: a past and its rows fit in it.
pub const MAX_POSITIONS: usize = 8192;

/// The shapes that cost most in the shared-prefix bench, as (name, past,
/// rows): a whole 634-token prefill, the 218 tokens of evidence after a
/// 416-token prefix, and one token after 634.
pub const SHAPES: [(&str, usize, usize); 3] = [
    ("whole prefill", 0, 634),
    ("evidence on a prefix", 416, 218),
    ("one token", 634, 1),
];

pub struct RandomAttention {
    gqa: Gqa,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    past_k: Value,
    past_v: Value,
    past: usize,
    rows: usize,
}

impl RandomAttention {
    /// `rows` new rows after a past of `past`, values in [-0.5, 0.5), with
    /// SmolLM2's rotary caches (`MAX_POSITIONS`).
    pub fn new(past: usize, rows: usize, seed: &mut u64) -> Self {
        let mut draw = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| lcg(seed) as f32 / (1u64 << 32) as f32 - 0.5)
                .collect()
        };
        let (max_pos, half) = (MAX_POSITIONS, D / 2);
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
        Self {
            gqa,
            q: draw(rows * HEADS * D),
            k: draw(rows * KV_HEADS * D),
            v: draw(rows * KV_HEADS * D),
            past_k: Value::f32(vec![1, KV_HEADS, past, D], draw(KV_HEADS * past * D)),
            past_v: Value::f32(vec![1, KV_HEADS, past, D], draw(KV_HEADS * past * D)),
            past,
            rows,
        }
    }

    /// Multiply-adds of one `run`: scores and weighted sums, `2 · heads ·
    /// keys seen · D`, each row seeing the past and the rows up to itself.
    pub fn macs(&self) -> usize {
        let seen: usize = (0..self.rows).map(|i| self.past + i + 1).sum();
        2 * HEADS * seen * D
    }

    /// One layer's attention with its present; the output goes through
    /// `black_box` so that none of it is optimised away.
    pub fn run(&self, pool: &Pool) -> Result<(), OpError> {
        let out = self.gqa.run(
            self.q.clone(),
            self.k.clone(),
            &self.v,
            self.rows,
            &self.past_k,
            &self.past_v,
            self.past + self.rows,
            true,
            None,
            pool,
        )?;
        std::hint::black_box(out.out);
        Ok(())
    }
}
