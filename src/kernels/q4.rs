//! int4 weight matrices as `MatMulNBits` stores them, and the products with
//! them.
//!
//! Layout (the builder's, kept as is): row `n` of `N` holds `K / 32` blocks
//! of 16 bytes; byte `j` of a block holds element `2j` in its low nibble and
//! `2j + 1` in its high nibble; each block has one scale and a zero point
//! (8 when the graph gives none). w = (q − zp) · scale.
//!
//! Two precisions for the activations:
//! - `F32`: the reference. Each weight is dequantised and multiplied in
//!   float32, block sums scaled once per block.
//! - `Int8`: each activation row is quantised per 32-block to int8 with its
//!   own scale (so the added error stays well below int4's own), blocks
//!   are multiplied in integers and accumulated in float32. The activations
//!   are stored in nibble order (even elements, then odd) so a block's
//!   weight bytes unpack to low nibbles then high nibbles and line up with
//!   them without a shuffle.

use std::sync::{Arc, OnceLock};

use super::par::{Disjoint, Pool};
use super::simd;
use super::OpError;

// The block layout is the kernels' (`simd`), which this file builds on.
pub use super::simd::{BLOCK, BLOCK_BYTES};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// float32 activations, scalar code: the reference.
    F32,
    /// int8 activations, the fastest kernel this CPU has.
    Int8,
}

pub struct Q4Matrix {
    pub n: usize,
    pub k: usize,
    blocks: usize,
    /// Shared with the graph's initializer (and the embedding, when tied).
    q: Arc<Vec<u8>>,
    scales: Vec<f32>,
    /// One zero point per block, unpacked; `None`: 8 everywhere.
    zero_points: Option<Vec<u8>>,
    /// The same weights interleaved 8 rows at a time for the AVX2 and
    /// SIMD128 kernels (`simd::group_rows`, a `simd::Group` at a time),
    /// made by the first int8 product where one runs: not at load, when the model's files are still held
    /// (a load's peak memory would carry both), and never for a matrix
    /// only gathered from (an untied embedding) or only computed in float32.
    packed: OnceLock<Option<Packed8>>,
}

/// 8 weight rows interleaved per block: step `j` (0..4) of block `b` holds
/// bytes `4j..4j+4` of each of the 8 rows (32 bytes), so one 32-byte load
/// feeds 8 output lanes, one per row, and the activations are broadcast 4
/// bytes at a time. Rows past `n` are zeros with scale 0.
pub struct Packed8 {
    pub groups: usize,
    /// `groups * blocks * 128` bytes.
    pub q: Vec<u8>,
    /// `groups * blocks * 8`: the rows' scales per block.
    pub scales: Vec<f32>,
    /// `groups * blocks * 8`: the rows' zero points per block, as floats.
    pub zero_points: Vec<f32>,
    /// Every zero point is 8 (the file has none): `simd::Group::eights`.
    pub eights: bool,
}

impl Packed8 {
    /// Blocks of 32 a weight row holds.
    pub fn blocks(&self) -> usize {
        self.scales.len() / (self.groups * 8).max(1)
    }

    /// Group `g` (weight rows `8g..8g + 8`).
    pub fn group(&self, g: usize) -> simd::Group<'_> {
        let blocks = self.blocks();
        simd::Group {
            w: &self.q[g * blocks * 128..(g + 1) * blocks * 128],
            scales: &self.scales[g * blocks * 8..(g + 1) * blocks * 8],
            zps: &self.zero_points[g * blocks * 8..(g + 1) * blocks * 8],
            eights: self.eights,
        }
    }
}

/// Activation rows quantised for the int8 kernels.
pub struct QuantRows {
    pub m: usize,
    pub blocks: usize,
    /// `m * blocks * 32`, each block in nibble order.
    pub q: Vec<i8>,
    /// Per block: the scale.
    pub d: Vec<f32>,
    /// Per block: the sum of its int8 values (for a zero point's share).
    pub sum: Vec<i32>,
    /// Per block: −8 × `sum` (`simd::ActSums::share8`), exact: a block's
    /// sum is at most 32 · 127 in magnitude.
    pub share8: Vec<i32>,
}

impl QuantRows {
    /// Below this many values the rows are quantised on the caller: a
    /// row or a few cost less than handing them to the pool (a criterion's
    /// last row, the head's).
    const SERIAL_BELOW: usize = 8192;

    pub fn new(a: &[f32], m: usize, k: usize, pool: &Pool) -> Result<Self, OpError> {
        let blocks = k / BLOCK;
        let mut q = vec![0i8; m * k];
        let mut d = vec![0f32; m * blocks];
        let mut sum = vec![0i32; m * blocks];
        if m * k < Self::SERIAL_BELOW || pool.threads() == 1 || blocks == 0 {
            simd::quantise(a, &mut q, &mut d, &mut sum);
        } else {
            // Whole rows per task, one task per thread: blocks are
            // independent, so the bytes are the same however rows split
            // (serial, it was 4 % of a criterion at one thread in Chromium,
            // and the only serial part of a product).
            let per_task = m.div_ceil(pool.threads());
            let (dd, ss) = (Disjoint::new(&mut d), Disjoint::new(&mut sum));
            pool.chunks_mut(&mut q, per_task * k, |t, qc| {
                let (r0, r1) = (t * per_task, t * per_task + qc.len() / k);
                // SAFETY: rows r0..r1 are this task's alone.
                let (dt, st) = unsafe {
                    (
                        dd.range(r0 * blocks, r1 * blocks),
                        ss.range(r0 * blocks, r1 * blocks),
                    )
                };
                let src = &a[(r0 * k).min(a.len())..(r1 * k).min(a.len())];
                simd::quantise(src, qc, dt, st);
            })?;
        }
        let share8 = simd::share8_of(&sum);
        Ok(Self {
            m,
            blocks,
            q,
            d,
            sum,
            share8,
        })
    }

    fn row_with_sums(&self, r: usize) -> simd::ActSums<'_> {
        let k = self.blocks * BLOCK;
        let b = r * self.blocks..(r + 1) * self.blocks;
        simd::ActSums {
            q: &self.q[r * k..(r + 1) * k],
            d: &self.d[b.clone()],
            sum: &self.sum[b.clone()],
            share8: &self.share8[b],
        }
    }

    fn row(&self, r: usize) -> (&[i8], &[f32]) {
        let k = self.blocks * BLOCK;
        (
            &self.q[r * k..(r + 1) * k],
            &self.d[r * self.blocks..(r + 1) * self.blocks],
        )
    }
}

/// The base of an output that tasks write in disjoint column ranges.
struct Columns(*mut f32);

// SAFETY: tasks sharing it write disjoint elements (their own columns), and
// the pool returns only after every task is done, while `out` still lives.
unsafe impl Sync for Columns {}
unsafe impl Send for Columns {}

impl Columns {
    /// # Safety
    /// `at .. at + width` lies inside the output, and no other task writes
    /// it; `width` <= 8.
    unsafe fn write(&self, at: usize, v: &[f32; 8], width: usize) {
        // SAFETY: per the contract.
        unsafe {
            if width == 8 {
                // One 32-byte store, where a copy of a length known only at
                // run time is a call.
                self.0.add(at).cast::<[f32; 8]>().write_unaligned(*v);
            } else {
                std::ptr::copy_nonoverlapping(v.as_ptr(), self.0.add(at), width);
            }
        }
    }
}

impl Q4Matrix {
    /// `q`: `N * K/32 * 16` bytes; `scales`: `N * K/32`; `zero_points`:
    /// `N * ceil(K/32 / 2)` bytes, two 4-bit points per byte, low nibble first.
    pub fn new(
        n: usize,
        k: usize,
        q: Arc<Vec<u8>>,
        scales: Vec<f32>,
        zero_points: Option<&[u8]>,
    ) -> Result<Self, OpError> {
        if k == 0 || !k.is_multiple_of(BLOCK) {
            return Err(OpError::Input(format!(
                "K = {k} is not a positive multiple of {BLOCK}"
            )));
        }
        let blocks = k / BLOCK;
        let layout = |what, found, expected| OpError::Q4Layout {
            what,
            found,
            expected,
            n,
            k,
        };
        if q.len() != n * blocks * BLOCK_BYTES {
            return Err(layout("weight bytes", q.len(), n * blocks * BLOCK_BYTES));
        }
        if scales.len() != n * blocks {
            return Err(layout("scales", scales.len(), n * blocks));
        }
        let zero_points = match zero_points {
            None => None,
            Some(z) => {
                let per_row = blocks.div_ceil(2);
                if z.len() != n * per_row {
                    return Err(layout("zero-point bytes", z.len(), n * per_row));
                }
                let mut out = Vec::with_capacity(n * blocks);
                for row in 0..n {
                    for b in 0..blocks {
                        let byte = z[row * per_row + b / 2];
                        out.push(if b % 2 == 0 { byte & 15 } else { byte >> 4 });
                    }
                }
                Some(out)
            }
        };
        let m = Self {
            n,
            k,
            blocks,
            q,
            scales,
            zero_points,
            packed: OnceLock::new(),
        };
        Ok(m)
    }

    /// Whether this CPU's or build's int8 kernel reads the interleaved copy.
    fn kernel_packs() -> bool {
        matches!(
            simd::detect(),
            simd::Kernel::Avx2
                | simd::Kernel::Avx512Vnni
                | simd::Kernel::Simd128
                | simd::Kernel::RelaxedSimd
        )
    }

    /// The interleaved copy, made on first use where the kernel reads it.
    fn packed(&self) -> Option<&Packed8> {
        self.packed
            .get_or_init(|| Self::kernel_packs().then(|| self.pack8()))
            .as_ref()
    }

    fn pack8(&self) -> Packed8 {
        let groups = self.n.div_ceil(8);
        let bl = self.blocks;
        let mut q = vec![0u8; groups * bl * 128];
        let mut scales = vec![0f32; groups * bl * 8];
        let mut zero_points = vec![8f32; groups * bl * 8];
        for row in 0..self.n {
            let (g, r) = (row / 8, row % 8);
            let bytes = self.row_bytes(row);
            for b in 0..bl {
                for j in 0..4 {
                    let dst = ((g * bl + b) * 4 + j) * 32 + r * 4;
                    let src = b * BLOCK_BYTES + 4 * j;
                    q[dst..dst + 4].copy_from_slice(&bytes[src..src + 4]);
                }
                scales[(g * bl + b) * 8 + r] = self.scales[row * bl + b];
                zero_points[(g * bl + b) * 8 + r] = self.zp(row, b) as f32;
            }
        }
        let eights = zero_points.iter().all(|&z| z == 8.0);
        Packed8 {
            groups,
            q,
            scales,
            zero_points,
            eights,
        }
    }

    /// The bytes this matrix holds once its products have run; `product`:
    /// whether a product reads it (then the interleaved copy is counted
    /// where the kernel makes one; a gathered-only table never gets one).
    pub fn bytes(&self, product: bool) -> usize {
        let cells = self.n.div_ceil(8) * 8 * self.blocks;
        let packed = if product && Self::kernel_packs() {
            cells * BLOCK_BYTES + cells * 8
        } else {
            0
        };
        self.q.len() + self.scales.len() * 4 + packed
    }

    fn zp(&self, row: usize, b: usize) -> u8 {
        self.zero_points
            .as_ref()
            .map_or(8, |z| z[row * self.blocks + b])
    }

    fn row_bytes(&self, row: usize) -> &[u8] {
        let w = self.blocks * BLOCK_BYTES;
        &self.q[row * w..(row + 1) * w]
    }

    /// Row `row` dequantised to float32 (an embedding lookup).
    pub fn dequant_row(&self, row: usize, out: &mut [f32]) {
        let bytes = self.row_bytes(row);
        for b in 0..self.blocks {
            let s = self.scales[row * self.blocks + b];
            let zp = self.zp(row, b) as f32;
            for j in 0..BLOCK_BYTES {
                let byte = bytes[b * BLOCK_BYTES + j];
                out[b * BLOCK + 2 * j] = ((byte & 15) as f32 - zp) * s;
                out[b * BLOCK + 2 * j + 1] = ((byte >> 4) as f32 - zp) * s;
            }
        }
    }

    /// `out[m][n] = Σ_k a[m][k] · w[n][k]` for `m` rows of `a`.
    pub fn matmul(
        &self,
        a: &[f32],
        m: usize,
        precision: Precision,
        pool: &Pool,
    ) -> Result<Vec<f32>, OpError> {
        let n = self.n;
        // Columns of the output per task: a few tasks per thread so the
        // split evens out, whole and at least 16 rows of weights each.
        let per_task = n.div_ceil(pool.threads() * 4).max(16);
        let mut out_t = vec![0f32; n * m];
        match precision {
            Precision::F32 => pool.chunks_mut(&mut out_t, per_task * m, |t, chunk| {
                let first = t * per_task;
                for (i, col) in chunk.chunks_mut(m).enumerate() {
                    for (r, o) in col.iter_mut().enumerate() {
                        *o = self.dot_f32(first + i, &a[r * self.k..(r + 1) * self.k]);
                    }
                }
            })?,
            Precision::Int8 if self.packed().is_some() => {
                return self.matmul_packed(a, m, pool);
            }
            Precision::Int8 => {
                let rows = QuantRows::new(a, m, self.k, pool)?;
                let kernel = simd::detect();
                pool.chunks_mut(&mut out_t, per_task * m, |t, chunk| {
                    let first = t * per_task;
                    for (i, col) in chunk.chunks_mut(m).enumerate() {
                        self.dot_int8_rows(kernel, first + i, &rows, col);
                    }
                })?
            }
        }
        if m == 1 {
            return Ok(out_t);
        }
        let mut out = vec![0f32; m * n];
        for (c, col) in out_t.chunks(m).enumerate() {
            for (r, v) in col.iter().enumerate() {
                out[r * n + c] = *v;
            }
        }
        Ok(out)
    }

    /// The int8 product on the interleaved copy: each task owns whole
    /// groups of 8 weight rows, that is a range of output columns, and
    /// writes them straight into `[m][n]` (no per-task buffer to copy from:
    /// a tenth of a product's time went to that copy and its page faults).
    fn matmul_packed(&self, a: &[f32], m: usize, pool: &Pool) -> Result<Vec<f32>, OpError> {
        // 32 rows of activations: K int8 each plus block scales and sums,
        // 18–50 KB for SmolLM2's K of 576–1536, within L2 beside the weights.
        const ROW_TILE: usize = 32;
        let Some(p) = self.packed() else {
            return Ok(Vec::new());
        };
        let rows = QuantRows::new(a, m, self.k, pool)?;
        let n = self.n;
        // `Packed8::group` and `row_with_sums` slice with checked ranges, so
        // every group holds `p.blocks()` blocks and every row `rows.blocks`:
        // equal, they are the contract of each `group_rows` call below.
        if p.blocks() != rows.blocks {
            return Err(OpError::Q4Layout {
                what: "blocks in the interleaved copy",
                found: p.blocks(),
                expected: rows.blocks,
                n,
                k: self.k,
            });
        }
        // Natively a small product runs as one task on the caller: handing
        // it to the pool costs more than it does (`Pool::worth_splitting`).
        let groups_per_task = if pool.worth_splitting(m * n * self.k) {
            p.groups.div_ceil(pool.threads() * 4).max(2)
        } else {
            p.groups
        };
        let tasks = p.groups.div_ceil(groups_per_task);
        let mut out = vec![0f32; m * n];
        let base = Columns(out.as_mut_ptr());
        let mut task_ids = vec![0u8; tasks];
        pool.chunks_mut(&mut task_ids, 1, |t, _| {
            let g0 = t * groups_per_task;
            let g1 = (g0 + groups_per_task).min(p.groups);
            // Rows in tiles, so a tile's activations stay in cache while
            // the task's weight groups pass over them: with every row per
            // group, a pass of hundreds of rows (a prefill, packed
            // branches) streamed all activations from memory once per group.
            for tile in (0..m).step_by(ROW_TILE) {
                let tile_end = (tile + ROW_TILE).min(m);
                for g in g0..g1 {
                    let group = p.group(g);
                    // The last group may hold rows past `n` (zeros).
                    let width = 8.min(n - g * 8);
                    let mut r = tile;
                    while r < tile_end {
                        let take = (tile_end - r).min(simd::ROWS);
                        let mut acts = [simd::ActSums::NONE; simd::ROWS];
                        for (i, x) in acts.iter_mut().enumerate().take(take) {
                            *x = rows.row_with_sums(r + i);
                        }
                        // SAFETY: `take <= ROWS`, and the group and the rows
                        // hold the same blocks (checked above).
                        let res = unsafe { simd::group_rows(group, &acts[..take]) };
                        for (i, v) in res.iter().enumerate().take(take) {
                            // SAFETY: row r + i < m, columns g*8 .. g*8 +
                            // width <= n: inside `out`, and only this task
                            // writes columns of its groups.
                            unsafe { base.write((r + i) * n + g * 8, v, width) };
                        }
                        r += take;
                    }
                }
            }
        })?;
        Ok(out)
    }

    /// The reference: float32 activations, weights dequantised one by one.
    pub fn dot_f32(&self, row: usize, a: &[f32]) -> f32 {
        let bytes = self.row_bytes(row);
        let mut total = 0f32;
        for b in 0..self.blocks {
            let zp = self.zp(row, b) as f32;
            let mut acc = 0f32;
            for j in 0..BLOCK_BYTES {
                let byte = bytes[b * BLOCK_BYTES + j];
                acc += ((byte & 15) as f32 - zp) * a[b * BLOCK + 2 * j];
                acc += ((byte >> 4) as f32 - zp) * a[b * BLOCK + 2 * j + 1];
            }
            total += acc * self.scales[row * self.blocks + b];
        }
        total
    }

    /// One weight row against every quantised activation row.
    fn dot_int8_rows(&self, kernel: simd::Kernel, row: usize, rows: &QuantRows, out: &mut [f32]) {
        let bytes = self.row_bytes(row);
        let scales = &self.scales[row * self.blocks..(row + 1) * self.blocks];
        let zps = self
            .zero_points
            .as_ref()
            .map(|z| &z[row * self.blocks..(row + 1) * self.blocks]);
        let mut r = 0;
        while r < rows.m {
            let take = (rows.m - r).min(simd::ROWS);
            let mut acts: [(&[i8], &[f32]); simd::ROWS] = [(&[], &[]); simd::ROWS];
            for (i, a) in acts.iter_mut().enumerate().take(take) {
                *a = rows.row(r + i);
            }
            let res = simd::dot_rows(kernel, bytes, scales, zps, &acts[..take]);
            out[r..r + take].copy_from_slice(&res[..take]);
            r += take;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `n × k` int4 matrix with zero points and `m` rows of activations
    /// in [-1, 1), drawn from a fixed seed.
    fn random(n: usize, k: usize, m: usize) -> (Q4Matrix, Vec<f32>) {
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            seed >> 8
        };
        let q: Vec<u8> = (0..n * k / 2).map(|_| next() as u8).collect();
        let scales: Vec<f32> = (0..n * k / BLOCK)
            .map(|_| (next() % 100) as f32 / 1000.0 + 0.01)
            .collect();
        let zp: Vec<u8> = (0..n * (k / BLOCK).div_ceil(2))
            .map(|_| next() as u8)
            .collect();
        let w = Q4Matrix::new(n, k, Arc::new(q), scales, Some(&zp)).unwrap();
        let a: Vec<f32> = (0..m * k)
            .map(|_| (next() % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        (w, a)
    }

    /// A product over many rows (several row tiles, a ragged last one, on
    /// 2 threads) equals the same rows one at a time, bit for bit: rows
    /// never mix, whatever the tiling. All rows together are quantised by
    /// the pool's tasks, one row alone on the caller.
    #[test]
    fn many_rows_equal_each_row_alone() {
        let (n, k, m) = (40, 128, 75);
        assert!(m * k >= QuantRows::SERIAL_BELOW && k < QuantRows::SERIAL_BELOW);
        let (w, a) = random(n, k, m);
        let pool = Pool::new(2).unwrap();
        for precision in [Precision::Int8, Precision::F32] {
            let all = w.matmul(&a, m, precision, &pool).unwrap();
            for r in 0..m {
                let one = w
                    .matmul(&a[r * k..(r + 1) * k], 1, precision, &pool)
                    .unwrap();
                assert_eq!(
                    all[r * n..(r + 1) * n]
                        .iter()
                        .map(|v| v.to_bits())
                        .collect::<Vec<_>>(),
                    one.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{precision:?} row {r}"
                );
            }
        }
    }

    /// A product large enough to split natively too equals the same product
    /// on one thread, bit for bit: a column group is one task's alone,
    /// whoever runs it.
    #[test]
    fn a_split_product_equals_one_thread() {
        let (n, k, m) = (256, 512, 40);
        let (two, one) = (Pool::new(2).unwrap(), Pool::new(1).unwrap());
        assert!(two.worth_splitting(m * n * k));
        let (w, a) = random(n, k, m);
        for precision in [Precision::Int8, Precision::F32] {
            let bits = |pool: &Pool| {
                let out = w.matmul(&a, m, precision, pool).unwrap();
                out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            let (split, alone) = (bits(&two), bits(&one));
            let first = split.iter().zip(&alone).position(|(x, y)| x != y);
            assert_eq!(first, None, "{precision:?}: the first output that differs");
        }
    }
}
