//! One decoder layer's int4 products on fixed pseudo-random data, for the
//! benchmarks that time the product kernel alone: natively
//! (`benches/q4_matmul.rs`) and in the browser (the diagnostics build's
//! `KernelBench`), so that both time the same work.

use std::sync::Arc;

use super::q4::{Precision, Q4Matrix};
use super::simd::lcg;
use super::{OpError, Pool};

/// SmolLM2-135M's four matrix shapes, `(n, k)`: q and o, k and v, the
/// MLP's gate and up, its down.
pub const SMOLLM2_LAYER: [(usize, usize); 4] = [(576, 576), (192, 576), (1536, 576), (576, 1536)];

pub struct RandomLayer {
    shapes: Vec<(usize, usize)>,
    mats: Vec<Q4Matrix>,
}

impl RandomLayer {
    /// Int4 weights and scales for each `(n, k)` shape, `k` a multiple of
    /// 32, and random zero points when `zero_points` (without, every zero
    /// point is 8, as in the builder's files).
    pub fn new(
        shapes: &[(usize, usize)],
        zero_points: bool,
        seed: &mut u64,
    ) -> Result<Self, OpError> {
        let mats = shapes
            .iter()
            .map(|&(n, k)| {
                let q = (0..n * k / 2).map(|_| lcg(seed) as u8).collect();
                let scales = (0..n * k / 32)
                    .map(|_| (lcg(seed) % 100) as f32 * 1e-4 + 1e-3)
                    .collect();
                let zps: Option<Vec<u8>> = zero_points.then(|| {
                    (0..n * (k / 32).div_ceil(2))
                        .map(|_| lcg(seed) as u8)
                        .collect()
                });
                Q4Matrix::new(n, k, Arc::new(q), scales, zps.as_deref())
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            shapes: shapes.to_vec(),
            mats,
        })
    }

    /// `rows` activation rows in [-1, 1) for each matrix.
    pub fn activations(&self, rows: usize, seed: &mut u64) -> Vec<Vec<f32>> {
        self.shapes
            .iter()
            .map(|&(_, k)| {
                (0..rows * k)
                    .map(|_| (lcg(seed) % 2000) as f32 / 1000.0 - 1.0)
                    .collect()
            })
            .collect()
    }

    /// Multiply-adds of one `run` over `rows` rows.
    pub fn macs(&self, rows: usize) -> usize {
        self.shapes.iter().map(|&(n, k)| n * k * rows).sum()
    }

    /// Every product once over `acts` (from `activations(rows, …)`); the
    /// outputs go through `black_box` so that none is optimised away.
    pub fn run(
        &self,
        acts: &[Vec<f32>],
        rows: usize,
        precision: Precision,
        pool: &Pool,
    ) -> Result<(), OpError> {
        for (w, a) in self.mats.iter().zip(acts) {
            std::hint::black_box(w.matmul(a, rows, precision, pool)?);
        }
        Ok(())
    }
}
