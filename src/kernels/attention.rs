//! `GroupQueryAttention` (com.microsoft) as the builder emits it: rotary
//! inside (non-interleaved, from the graph's own cos/sin caches), a causal
//! mask over past + new tokens, grouped key/value heads, float32 throughout.

use super::exp::exp;
use super::par::Pool;
use super::simd::dot4::{dot4, scores16, KB};
#[cfg(target_arch = "x86_64")]
use super::simd::dot4::{dot4_avx2, scores16_avx2, scores16_avx512};
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::simd::dot4::{dot4_simd128, scores16_simd128};
use super::tensor::Value;
use super::OpError;
use std::ops::Range;
use std::sync::Arc;

/// Rotary caches `(cos, sin, half)`, shared between layers.
pub type Rotary = (Arc<[f32]>, Arc<[f32]>, usize);

pub struct Gqa {
    pub heads: usize,
    pub kv_heads: usize,
    /// 0: 1/√head_dim.
    pub scale: f32,
    /// `(cos, sin)`, each `[max_pos, half]`; `None`: keys and queries come
    /// rotated already. Shared by every layer that reads the same caches
    /// (each is `max_pos · half` floats: 60 MB over SmolLM2's 30 layers,
    /// 590 MB over the Qwen3-0.6B shape's 28, when each layer held a copy).
    pub rotary: Option<Rotary>,
    /// `local_window_size` (sliding-window layers): a row at position `pos`
    /// sees the `w` keys at positions `pos + 1 - w ..= pos`, as Gemma's
    /// sliding window is defined and as ONNX Runtime 1.30 computes it
    /// (measured: keeping `w + 1` moves a tiny Gemma 3's probabilities by
    /// 1.4e-4, keeping `w` by 3e-10); `None`: every earlier key.
    pub window: Option<usize>,
}

/// Several branches packed into one run after a shared past (block-causal):
/// row `i` belongs to the branch whose first row is `first[i]`; it sees the
/// whole past and its own branch's rows `first[i]..=i`, never another
/// branch's, and sits at position `past + i - first[i]`, as if its branch
/// had run alone. The layout (tokens concatenated, one first-row index per
/// row, rows to read) is what a GPU kernel would take unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pack {
    pub first: Vec<usize>,
    /// The rows whose head outputs a packed run returns, ascending.
    pub rows: Vec<usize>,
}

/// What one call computes: the output rows and, when asked, the grown past.
pub struct GqaOut {
    pub out: Vec<f32>,
    pub present: Option<(Value, Value)>,
}

impl Gqa {
    fn rotate(&self, x: &mut [f32], pos: usize, d: usize) -> Result<(), OpError> {
        let Some((cos, sin, half)) = &self.rotary else {
            return Ok(());
        };
        if 2 * half != d {
            return Err(OpError::Input(format!(
                "rotary caches are {half} wide but the head dim is {d} (partial rotary is not computed)"
            )));
        }
        let max_pos = cos.len() / half;
        if pos >= max_pos {
            return Err(OpError::Input(format!(
                "position {pos} is beyond the rotary cache's {max_pos}"
            )));
        }
        let (c, s) = (
            &cos[pos * half..(pos + 1) * half],
            &sin[pos * half..(pos + 1) * half],
        );
        for j in 0..*half {
            let (a, b) = (x[j], x[j + half]);
            x[j] = a * c[j] - b * s[j];
            x[j + half] = b * c[j] + a * s[j];
        }
        Ok(())
    }

    /// `q`: `[S, heads·D]`, `k`/`v`: `[S, kv_heads·D]`; `past_*`: `[1,
    /// kv_heads, P, D]`; `total`: P + S as the graph computed it from the
    /// mask; `pack`: the branches of a packed run (no present comes back).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        mut q: Vec<f32>,
        mut k: Vec<f32>,
        v: &[f32],
        s: usize,
        past_k: &Value,
        past_v: &Value,
        total: usize,
        want_present: bool,
        pack: Option<&Pack>,
        pool: &Pool,
    ) -> Result<GqaOut, OpError> {
        let (hq, hk) = (self.heads, self.kv_heads);
        if s == 0 || !q.len().is_multiple_of(s * hq) {
            return Err(OpError::Input(format!(
                "query of {} values for {s} rows and {hq} heads",
                q.len()
            )));
        }
        if hk == 0 || !hq.is_multiple_of(hk) {
            return Err(OpError::Input(format!(
                "{hq} query heads over {hk} key/value heads: a whole number of query heads a key/value head is computed"
            )));
        }
        let d = q.len() / (s * hq);
        if k.len() != s * hk * d || v.len() != s * hk * d {
            return Err(OpError::Input(format!(
                "key/value of {}/{} values; {s} rows × {hk} heads × {d} expected",
                k.len(),
                v.len()
            )));
        }
        let (pk, pv) = match (past_k.as_f32(), past_v.as_f32()) {
            (Some(a), Some(b)) => (a, b),
            _ => return Err(OpError::Input("the past is not float32".into())),
        };
        if past_k.shape.len() != 4
            || past_k.shape[1] != hk
            || past_k.shape[3] != d
            || past_v.shape != past_k.shape
        {
            return Err(OpError::Input(format!(
                "past of shape {:?}/{:?}; [1, {hk}, P, {d}] expected",
                past_k.shape, past_v.shape
            )));
        }
        let p = past_k.shape[2];
        if total != p + s {
            return Err(OpError::Input(format!(
                "the attention mask covers {total} tokens but past + new is {}: padding is not computed",
                p + s
            )));
        }
        if let Some(pk) = pack {
            if want_present {
                return Err(OpError::Input(
                    "a packed run returns no present: its branches are discarded".into(),
                ));
            }
            if pk.first.len() != s || pk.first.iter().enumerate().any(|(i, &f)| f > i) {
                return Err(OpError::Input(format!(
                    "a pack of {} first-row indices for {s} rows (each at or before its row)",
                    pk.first.len()
                )));
            }
        }
        let first = |i: usize| pack.map_or(0, |pk| pk.first[i]);
        for i in 0..s {
            let pos = p + i - first(i);
            for h in 0..hq {
                self.rotate(&mut q[(i * hq + h) * d..(i * hq + h + 1) * d], pos, d)?;
            }
            for h in 0..hk {
                self.rotate(&mut k[(i * hk + h) * d..(i * hk + h + 1) * d], pos, d)?;
            }
        }
        let scale = if self.scale == 0.0 {
            1.0 / (d as f32).sqrt()
        } else {
            self.scale
        };
        // Each key/value head's keys transposed, once for all its query
        // heads, where enough query rows read them to pay for it (a
        // 1-token run reads each key once per query head).
        let kt =
            (s * (hq / hk) >= TRANSPOSE_FROM_QUERIES).then(|| transpose_keys(pk, &k, p, s, hk, d));
        let heads = Heads {
            q: &q,
            kt: kt.as_deref(),
            k: &k,
            v,
            pk,
            pv,
            p,
            s,
            d,
            hq,
            hk,
            scale,
            window: self.window,
            first: pack.map(|pk| pk.first.as_slice()),
        };
        // A task is one key/value head's query heads (`g` of them, which
        // read the same keys and values) over a run of rows; output
        // `[kv_heads][runs · rows_per_run][g][D]`, so each task owns a
        // piece. Several runs a thread, since later rows see more keys.
        // With too few rows for that (a token, a short suffix), a task is
        // one query head, as 3 key/value heads on 2 threads would leave
        // one thread twice the other's work. Everything on the caller
        // where the work is too small to hand over.
        let g = hq / hk;
        let split = pool.worth_splitting(2 * hq * s * (p + s) * d);
        let wanted = 4 * pool.threads();
        let hpt = if split && s < wanted.div_ceil(hk) {
            1
        } else {
            g
        };
        let rows_per_run = if split {
            // Runs a head group: at least `wanted` tasks in all, and a
            // multiple of the threads, so tasks of equal cost end together.
            let groups = hq / hpt;
            let mut r = wanted.div_ceil(groups);
            while (groups * r) % pool.threads() != 0 {
                r += 1;
            }
            s.div_ceil(r).max(1)
        } else {
            s
        };
        let runs = s.div_ceil(rows_per_run);
        let chunks = g / hpt;
        let unit = rows_per_run * hpt * d;
        let mut per_run = vec![0f32; hq / hpt * runs * unit];
        let piece = if split { unit } else { per_run.len() };
        pool.chunks_mut(&mut per_run, piece, |t, out| {
            for (u, o) in out.chunks_mut(unit).enumerate() {
                let n = t * (piece / unit) + u;
                let (kh, c, r) = (n / (chunks * runs), n / runs % chunks, n % runs);
                let rows = r * rows_per_run..((r + 1) * rows_per_run).min(s);
                heads.run(kh, c * hpt..(c + 1) * hpt, rows, o);
            }
        })?;
        let mut out = vec![0f32; s * hq * d];
        for task_heads in 0..hq / hpt {
            for i in 0..s {
                let from = (task_heads * runs * rows_per_run + i) * hpt * d;
                let h = task_heads * hpt;
                out[(i * hq + h) * d..(i * hq + h + hpt) * d]
                    .copy_from_slice(&per_run[from..from + hpt * d]);
            }
        }
        let present = want_present.then(|| {
            let grow = |past: &[f32], new: &[f32]| {
                let mut g = Vec::with_capacity(hk * (p + s) * d);
                for h in 0..hk {
                    g.extend_from_slice(&past[h * p * d..(h + 1) * p * d]);
                    for i in 0..s {
                        g.extend_from_slice(&new[(i * hk + h) * d..(i * hk + h + 1) * d]);
                    }
                }
                Value::f32(vec![1, hk, p + s, d], g)
            };
            (grow(pk, &k), grow(pv, v))
        });
        Ok(GqaOut { out, present })
    }
}

/// Everything one head's task reads; `run` computes its rows.
struct Heads<'a> {
    q: &'a [f32],
    /// `transpose_keys`' layout, or `None`: every score from `k` and `pk`.
    kt: Option<&'a [[f32; KB]]>,
    k: &'a [f32],
    v: &'a [f32],
    pk: &'a [f32],
    pv: &'a [f32],
    p: usize,
    s: usize,
    d: usize,
    hq: usize,
    hk: usize,
    scale: f32,
    window: Option<usize>,
    first: Option<&'a [usize]>,
}

impl Heads<'_> {
    /// Key/value head `kh`'s query heads `heads` (of its `g`) over `rows`,
    /// into `out` as `[rows][heads][D]`. Natively the same code is also compiled for AVX2
    /// and AVX-512 and taken where the CPU has them: the results are the
    /// same bits (`dot` fixes its 8 lanes and every other loop is
    /// elementwise, and Rust never fuses a multiply and an add), only wider.
    fn run(&self, kh: usize, heads: Range<usize>, rows: Range<usize>, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: avx512f (and so avx2) was detected.
            return unsafe { self.run_avx512(kh, heads, rows, out) };
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            // SAFETY: avx2 was detected.
            return unsafe { self.run_avx2(kh, heads, rows, out) };
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return self.rows(kh, heads, rows, out, 3, dot4_simd128, scores16_simd128);
        #[allow(unreachable_code)]
        self.rows(kh, heads, rows, out, 1, dot4, scores16)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&self, kh: usize, heads: Range<usize>, rows: Range<usize>, out: &mut [f32]) {
        // A closure in a `target_feature` function has its features, so
        // it calls `dot4_avx2` safely.
        self.rows(
            kh,
            heads,
            rows,
            out,
            1,
            |a, b| dot4_avx2(a, b),
            |q, k, s, o| scores16_avx2(q, k, s, o),
        )
    }

    /// A block of 16 keys in one register a lane (`scores16_avx512`), for
    /// up to 3 query heads at once: 24 of the 32 registers hold their
    /// lanes, and each block and value row read serves all three.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,avx512f")]
    unsafe fn run_avx512(
        &self,
        kh: usize,
        heads: Range<usize>,
        rows: Range<usize>,
        out: &mut [f32],
    ) {
        self.rows(
            kh,
            heads,
            rows,
            out,
            3,
            |a, b| dot4_avx2(a, b),
            |q, k, s, o| scores16_avx512(q, k, s, o),
        )
    }

    /// `group`: how many query heads one pass takes: each key block and
    /// value row is read once for all of them (natively as many as the
    /// registers score at once; SIMD128 scores them one after the other
    /// on a block in the first-level cache); `dot4`: four keys' scores
    /// from their rows; `score16`: a block of `transpose_keys`' layout,
    /// for up to `group` queries.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn rows(
        &self,
        kh: usize,
        heads: Range<usize>,
        rows: Range<usize>,
        out: &mut [f32],
        group: usize,
        dot4: impl Fn(&[f32], [&[f32]; 4]) -> [f32; 4],
        score16: impl Fn(&[&[f32]], &[[f32; KB]], f32, &mut [[f32; KB]]),
    ) {
        let (p, d, hk) = (self.p, self.d, self.hk);
        let g = self.hq / hk;
        let past_k = &self.pk[kh * p * d..(kh + 1) * p * d];
        let past_v = &self.pv[kh * p * d..(kh + 1) * p * d];
        // Row `r` of this run's keys or values, this head's slice.
        fn new_row(x: &[f32], r: usize, hk: usize, kh: usize, d: usize) -> &[f32] {
            &x[(r * hk + kh) * d..(r * hk + kh + 1) * d]
        }
        let width = p + self.s;
        let blocks = width.div_ceil(KB);
        let mut scores = vec![0f32; group * width];
        let mut by_key = if self.kt.is_some() {
            vec![0f32; group * blocks * KB]
        } else {
            Vec::new()
        };
        let mut block_out = [[0f32; KB]; 3];
        for (i, o) in rows.zip(out.chunks_exact_mut(heads.len() * d)) {
            // The past, then this row's branch up to itself: the same
            // tokens in the same order as the branch run alone. A window
            // drops the keys before position `lo`, in the past and in the
            // branch (whose rows sit at positions p..=pos).
            let first = self.first.map_or(0, |f| f[i]);
            let pos = p + i - first;
            let lo = self.window.map_or(0, |w| (pos + 1).saturating_sub(w));
            let (past_lo, branch_lo) = (lo.min(p), first + lo.saturating_sub(p));
            let np = p - past_lo;
            let n = np + i + 1 - branch_lo;
            let (past, branch) = (past_lo..p, p + branch_lo..p + i + 1);
            for (j0, o) in heads.clone().step_by(group).zip(o.chunks_mut(group * d)) {
                let pass = j0..(j0 + group).min(heads.end);
                let r = pass.len();
                // At most 3 heads a pass (`group`): slots on the stack, as
                // this runs once a row and pass.
                let mut qs: [&[f32]; 3] = [&[]; 3];
                for (slot, j) in qs.iter_mut().zip(pass) {
                    let h = kh * g + j;
                    *slot = &self.q[(i * self.hq + h) * d..(i * self.hq + h + 1) * d];
                }
                let qs = &qs[..r];
                if let Some(kt) = self.kt {
                    // Whole blocks into `by_key` (indexed by key), then
                    // this row's keys out of it.
                    let kt = &kt[kh * blocks * d..(kh + 1) * blocks * d];
                    // One range where the branch starts at the past's end
                    // (no window, no pack), so the block holding both ends
                    // is scored once.
                    let ranges = if past.end == branch.start {
                        [past.start..branch.end, 0..0]
                    } else {
                        [past.clone(), branch.clone()]
                    };
                    for range in ranges.iter().filter(|r| !r.is_empty()) {
                        for b in range.start / KB..range.end.div_ceil(KB) {
                            let bo = &mut block_out[..r];
                            score16(qs, &kt[b * d..(b + 1) * d], self.scale, bo);
                            for (x, by) in bo.iter().zip(by_key.chunks_exact_mut(blocks * KB)) {
                                by[b * KB..(b + 1) * KB].copy_from_slice(x);
                            }
                        }
                    }
                    for (sc, by) in scores
                        .chunks_exact_mut(width)
                        .zip(by_key.chunks_exact(blocks * KB))
                        .take(r)
                    {
                        sc[..np].copy_from_slice(&by[past.clone()]);
                        sc[np..n].copy_from_slice(&by[branch.clone()]);
                    }
                } else {
                    for (sc, qi) in scores.chunks_exact_mut(width).zip(qs) {
                        let (sp, sb) = sc[..n].split_at_mut(np);
                        scores_into(
                            sp,
                            qi,
                            self.scale,
                            past_k[past_lo * d..].chunks_exact(d),
                            &dot4,
                        );
                        let branch = (branch_lo..).map(|r| new_row(self.k, r, hk, kh, d));
                        scores_into(sb, qi, self.scale, branch, &dot4);
                    }
                }
                for sc in scores.chunks_exact_mut(width).take(r) {
                    softmax(&mut sc[..n]);
                }
                o.fill(0.0);
                let (mut wp, mut wb): ([&[f32]; 3], [&[f32]; 3]) = ([&[]; 3], [&[]; 3]);
                for ((p, b), sc) in wp.iter_mut().zip(&mut wb).zip(scores.chunks_exact(width)) {
                    (*p, *b) = sc[..n].split_at(np);
                }
                add_weighted(o, &wp[..r], past_v[past_lo * d..].chunks_exact(d));
                let branch_v = (branch_lo..).map(|r| new_row(self.v, r, hk, kh, d));
                add_weighted(o, &wb[..r], branch_v);
            }
        }
    }
}

/// Scores into weights, in place.
#[inline(always)]
fn softmax(sc: &mut [f32]) {
    // A comparison, not `f32::max`: wasm's `f32.max` propagates NaN where
    // Rust's skips it, so in wasm `f32::max` was a call to libm's `fmaxf`
    // per score (and per lane), never vectorised. A NaN score is skipped
    // here too (the running maximum starts at -inf and a NaN never
    // compares greater), so the result is the same.
    let max = lanes(sc, f32::NEG_INFINITY, |a, b| if b > a { b } else { a });
    for x in sc.iter_mut() {
        *x = exp(*x - max);
    }
    let sum = lanes(sc, 0.0, |a, b| a + b);
    for x in sc.iter_mut() {
        *x /= sum;
    }
}

/// Transposing the keys pays from this many query rows per key/value head
/// (rows × query heads sharing it).
const TRANSPOSE_FROM_QUERIES: usize = 8;

/// Keys as `[kv_heads][blocks][D][KB]`: block `b` of a head holds keys
/// `b·KB..(b+1)·KB` (the past's `0..P`, then this run's `P..P+S`, then 0),
/// one row per lane of the head dim, so a register loaded from a row holds
/// that lane of consecutive keys, and a block is read front to back.
fn transpose_keys(
    pk: &[f32],
    k: &[f32],
    p: usize,
    s: usize,
    hk: usize,
    d: usize,
) -> Vec<[f32; KB]> {
    let blocks = (p + s).div_ceil(KB);
    let mut kt = vec![[0f32; KB]; hk * blocks * d];
    for (h, kh) in kt.chunks_exact_mut(blocks * d).enumerate() {
        let keys = pk[h * p * d..(h + 1) * p * d]
            .chunks_exact(d)
            .chain((0..s).map(|r| &k[(r * hk + h) * d..(r * hk + h + 1) * d]));
        for (c, key) in keys.enumerate() {
            let block = &mut kh[c / KB * d..(c / KB + 1) * d];
            for (row, &x) in block.iter_mut().zip(key) {
                row[c % KB] = x;
            }
        }
    }
    kt
}

/// `out[t] = dot(q, keys[t]) · scale`, four keys at a time: each key's
/// sum is the one `dot` computes, but four independent chains of additions
/// keep the adder busy where one key's chain would wait on itself.
#[inline(always)]
fn scores_into<'a>(
    out: &mut [f32],
    q: &[f32],
    scale: f32,
    keys: impl Iterator<Item = &'a [f32]>,
    dot4: impl Fn(&[f32], [&[f32]; 4]) -> [f32; 4],
) {
    let mut it = out.iter_mut().zip(keys);
    loop {
        match (it.next(), it.next(), it.next(), it.next()) {
            (Some((o0, k0)), Some((o1, k1)), Some((o2, k2)), Some((o3, k3))) => {
                let [a, b, c, e] = dot4(q, [k0, k1, k2, k3]);
                (*o0, *o1, *o2, *o3) = (a * scale, b * scale, c * scale, e * scale);
            }
            (r0, r1, r2, _) => {
                for (o, k) in [r0, r1, r2].into_iter().flatten() {
                    *o = dot(q, k) * scale;
                }
                return;
            }
        }
    }
}

/// `x` folded with `f` in 8 independent lanes, then across them: one
/// running max or sum over a row's hundreds of scores is a chain of
/// dependent operations, each waiting on the last (as slow as the scores'
/// dot products themselves, measured).
#[inline(always)]
fn lanes(x: &[f32], init: f32, f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; 8];
    let (chunks, rest) = x.as_chunks::<8>();
    let tail = rest.iter().fold(init, |a, &b| f(a, b));
    for c in chunks {
        for l in 0..8 {
            acc[l] = f(acc[l], c[l]);
        }
    }
    let half = [
        f(acc[0], acc[4]),
        f(acc[1], acc[5]),
        f(acc[2], acc[6]),
        f(acc[3], acc[7]),
    ];
    f(f(f(half[0], half[1]), f(half[2], half[3])), tail)
}

/// Scores four keys at a time, and blocks of 16 transposed keys for one
/// to four queries, as this CPU or build computes them (and, natively, the
/// plain forms too), against `dot` one key at a time, on
/// fixed pseudo-random data, head dims with and without a tail: how many
/// scores differ in any bit (0: the packed and single-row paths, and the
/// two browser builds, cannot drift apart here). Runs in `cargo test` and
/// in the browser's kernel self-test.
pub fn self_test() -> usize {
    let mut seed = 5u64;
    let mut draw = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| super::simd::lcg(&mut seed) as f32 / (1u64 << 31) as f32 - 1.0)
            .collect()
    };
    let mut differ = 0;
    for d in [3, 8, 64, 72, 128] {
        let q = draw(d);
        let keys: Vec<Vec<f32>> = (0..4).map(|_| draw(d)).collect();
        let ks = [&keys[0][..], &keys[1][..], &keys[2][..], &keys[3][..]];
        let mut ways: Vec<[f32; 4]> = vec![dot4(&q, ks)];
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            // SAFETY: avx2 was detected.
            ways.push(unsafe { dot4_avx2(&q, ks) });
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        ways.push(dot4_simd128(&q, ks));
        for way in ways {
            for (got, k) in way.iter().zip(ks) {
                differ += usize::from(got.to_bits() != dot(&q, k).to_bits());
            }
        }
        // A block of 16 transposed keys, for 1 to 4 queries at once (the
        // AVX-512 form takes 3 a pass).
        let keys: Vec<Vec<f32>> = (0..KB).map(|_| draw(d)).collect();
        let block: Vec<[f32; KB]> = (0..d)
            .map(|j| std::array::from_fn(|t| keys[t][j]))
            .collect();
        let scale = 0.125f32;
        for r in 1..=4 {
            let qv: Vec<Vec<f32>> = (0..r).map(|_| draw(d)).collect();
            let qs: Vec<&[f32]> = qv.iter().map(|q| &q[..]).collect();
            let mut ways = Vec::new();
            let mut o = vec![[0f32; KB]; r];
            scores16(&qs, &block, scale, &mut o);
            ways.push(o.clone());
            #[cfg(target_arch = "x86_64")]
            if is_x86_feature_detected!("avx2") {
                // SAFETY: avx2 was detected.
                unsafe { scores16_avx2(&qs, &block, scale, &mut o) };
                ways.push(o.clone());
            }
            #[cfg(target_arch = "x86_64")]
            if is_x86_feature_detected!("avx512f") {
                // SAFETY: avx512f was detected.
                unsafe { scores16_avx512(&qs, &block, scale, &mut o) };
                ways.push(o.clone());
            }
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            {
                scores16_simd128(&qs, &block, scale, &mut o);
                ways.push(o.clone());
            }
            for way in ways {
                for (got, q) in way.iter().zip(&qv) {
                    for (g, k) in got.iter().zip(&keys) {
                        differ += usize::from(g.to_bits() != (dot(q, k) * scale).to_bits());
                    }
                }
            }
        }
    }
    differ
}

/// `o[h] += Σ w[h][t] · rows[t]` for each of up to 3 heads `h` (`o`:
/// `[heads][D]`), adding in the order of `t` for each element. A chunk of
/// each head's output is held in registers across every row, loaded and
/// stored once, and each row's chunk, read once, serves every head (the
/// rows come from the second-level cache: one pass per head read them
/// once each). Each element's sum is the same, added in the same order,
/// so the chunk's width and the heads' number change no bit.
#[inline(always)]
fn add_weighted<'a>(o: &mut [f32], w: &[&[f32]], rows: impl Iterator<Item = &'a [f32]> + Clone) {
    match w.len() {
        1 => add_weighted_n::<1, { weighted_chunk(1) }>(o, w, rows),
        2 => add_weighted_n::<2, { weighted_chunk(2) }>(o, w, rows),
        _ => add_weighted_n::<3, { weighted_chunk(3) }>(o, w, rows),
    }
}

/// `add_weighted`'s chunk for `r` heads. wasm has 16 vector registers of
/// 4 lanes: 8 accumulators a pass, however many heads share it.
const fn weighted_chunk(r: usize) -> usize {
    if !cfg!(target_arch = "wasm32") {
        64
    } else if r == 1 {
        32
    } else if r == 2 {
        16
    } else {
        8
    }
}

#[inline(always)]
fn add_weighted_n<'a, const R: usize, const CH: usize>(
    o: &mut [f32],
    w: &[&[f32]],
    rows: impl Iterator<Item = &'a [f32]> + Clone,
) {
    let d = o.len() / R;
    let w: [&[f32]; R] = std::array::from_fn(|h| w[h]);
    let full = d / CH;
    for c in 0..full {
        let mut acc = [[0f32; CH]; R];
        for (h, acc) in acc.iter_mut().enumerate() {
            acc.copy_from_slice(&o[h * d + c * CH..h * d + (c + 1) * CH]);
        }
        for (t, r) in rows.clone().enumerate().take(w[0].len()) {
            let rc = &r.as_chunks::<CH>().0[c];
            for h in 0..R {
                let wt = w[h][t];
                for (a, v) in acc[h].iter_mut().zip(rc) {
                    *a += wt * v;
                }
            }
        }
        for (h, acc) in acc.iter().enumerate() {
            o[h * d + c * CH..h * d + (c + 1) * CH].copy_from_slice(acc);
        }
    }
    let base = full * CH;
    if base < d {
        for (t, r) in rows.enumerate().take(w[0].len()) {
            for h in 0..R {
                let wt = w[h][t];
                for (x, v) in o[h * d + base..(h + 1) * d].iter_mut().zip(&r[base..]) {
                    *x += wt * v;
                }
            }
        }
    }
}

/// A dot product in 8 independent lanes: a single running sum is one long
/// chain of dependent float additions, which the compiler may not reorder,
/// so it could neither vectorise nor pipeline it (the scores were most of a
/// readout run's time before this).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let ((ca, ra), (cb, rb)) = (a.as_chunks::<8>(), b.as_chunks::<8>());
    for (x, y) in ca.iter().zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut tail = 0f32;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four keys at a time (plain, and AVX2 where the CPU has it) give
    /// `dot`'s bits exactly.
    #[test]
    fn four_keys_at_a_time_score_as_one_at_a_time() {
        assert_eq!(self_test(), 0);
    }

    /// Uniform in [-0.5, 0.5), from the kernels' own generator.
    fn lcg(seed: &mut u64) -> f32 {
        crate::kernels::simd::lcg(seed) as f32 / (1u64 << 32) as f32 - 0.5
    }

    /// Bit for bit the plain loop, element by element in the order of the
    /// rows, at widths below, at and between the register chunks; and
    /// several heads at once as each alone.
    #[test]
    fn add_weighted_adds_in_the_order_of_the_rows() {
        let mut seed = 11;
        for d in [3usize, 8, 32, 64, 75, 128, 256, 259] {
            let n = 37;
            let w: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let v: Vec<f32> = (0..n * d).map(|_| lcg(&mut seed)).collect();
            let start: Vec<f32> = (0..d).map(|_| lcg(&mut seed)).collect();
            let mut want = start.clone();
            for (t, wt) in w.iter().enumerate() {
                for j in 0..d {
                    want[j] += wt * v[t * d + j];
                }
            }
            let mut got = start.clone();
            add_weighted(&mut got, &[&w], v.chunks_exact(d));
            let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "d = {d}");
            // Two and three heads at once over the same rows: each head's
            // output is what it gets alone.
            for r in [2usize, 3] {
                let ws: Vec<Vec<f32>> = (0..r)
                    .map(|_| (0..n).map(|_| lcg(&mut seed)).collect())
                    .collect();
                let mut alone = Vec::new();
                for w in &ws {
                    let mut o = start.clone();
                    add_weighted(&mut o, &[w], v.chunks_exact(d));
                    alone.extend(o);
                }
                let mut together: Vec<f32> = (0..r).flat_map(|_| start.clone()).collect();
                let wr: Vec<&[f32]> = ws.iter().map(|w| &w[..]).collect();
                add_weighted(&mut together, &wr, v.chunks_exact(d));
                assert_eq!(bits(&together), bits(&alone), "d = {d}, {r} heads");
            }
        }
    }

    /// Many rows in one run (keys transposed, three query heads a pass,
    /// runs of rows split across two threads) equal the same rows run one
    /// at a time on the growing past (keys read in place, serial), bit for
    /// bit: how a state built on a cached past stays exact.
    #[test]
    fn a_run_of_rows_equals_its_rows_one_at_a_time() {
        // 41 rows: a task a key/value head's three query heads; 2 rows
        // after a long past: split too, a task a query head.
        for (p, s) in [(23usize, 41usize), (4000, 2)] {
            a_run_equals_its_rows(p, s);
        }
    }

    fn a_run_equals_its_rows(p: usize, s: usize) {
        let (hq, hk, d) = (9usize, 3usize, 72usize);
        let mut seed = 3;
        let mut draw = |n: usize| (0..n).map(|_| lcg(&mut seed)).collect::<Vec<f32>>();
        let (pk, pv) = (draw(hk * p * d), draw(hk * p * d));
        let (q, k, v) = (draw(s * hq * d), draw(s * hk * d), draw(s * hk * d));
        let half = d / 2;
        let positions = p + s;
        let cos: Arc<[f32]> = (0..positions * half)
            .map(|i| (i as f32 * 0.01).cos())
            .collect();
        let sin: Arc<[f32]> = (0..positions * half)
            .map(|i| (i as f32 * 0.01).sin())
            .collect();
        let gqa = Gqa {
            heads: hq,
            kv_heads: hk,
            scale: 0.0,
            rotary: Some((cos, sin, half)),
            window: None,
        };
        let past = |x: &[f32], n: usize| Value::f32(vec![1, hk, n, d], x.to_vec());
        let two = Pool::new(2).unwrap();
        let one = Pool::new(1).unwrap();
        let whole = gqa
            .run(
                q.clone(),
                k.clone(),
                &v,
                s,
                &past(&pk, p),
                &past(&pv, p),
                p + s,
                false,
                None,
                &two,
            )
            .unwrap()
            .out;
        let (mut ck, mut cv) = (past(&pk, p), past(&pv, p));
        let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for i in 0..s {
            let at = |x: &[f32], w: usize| x[i * w * d..(i + 1) * w * d].to_vec();
            let r = gqa
                .run(
                    at(&q, hq),
                    at(&k, hk),
                    &at(&v, hk),
                    1,
                    &ck,
                    &cv,
                    p + i + 1,
                    true,
                    None,
                    &one,
                )
                .unwrap();
            assert_eq!(
                bits(&r.out),
                bits(&whole[i * hq * d..(i + 1) * hq * d]),
                "past {p}, row {i}"
            );
            (ck, cv) = r.present.unwrap();
        }
    }

    /// Query heads that do not divide evenly over the key/value heads are
    /// refused by name, and the same operator then runs a valid call.
    #[test]
    fn heads_that_do_not_divide_are_refused_and_a_valid_call_still_runs() {
        let (s, d) = (2usize, 8usize);
        let mut seed = 13;
        let mut draw = |n: usize| (0..n).map(|_| lcg(&mut seed)).collect::<Vec<f32>>();
        let pool = Pool::new(2).unwrap();
        let run = |heads: usize, kv: usize, q: &[f32], k: &[f32], v: &[f32]| {
            let gqa = Gqa {
                heads,
                kv_heads: kv,
                scale: 0.0,
                rotary: None,
                window: None,
            };
            let empty = Value::f32(vec![1, kv, 0, d], Vec::new());
            gqa.run(
                q.to_vec(),
                k.to_vec(),
                v,
                s,
                &empty,
                &empty,
                s,
                false,
                None,
                &pool,
            )
        };
        let (q, k, v) = (draw(s * 9 * d), draw(s * 4 * d), draw(s * 4 * d));
        let err = run(9, 4, &q, &k, &v).err().expect("9 heads over 4 refused");
        assert!(err.to_string().contains("9 query heads over 4"), "{err}");
        let (k3, v3) = (draw(s * 3 * d), draw(s * 3 * d));
        let ok = run(9, 3, &q, &k3, &v3).expect("9 heads over 3 run");
        assert_eq!(ok.out.len(), s * 9 * d);
        assert!(ok.out.iter().all(|x| x.is_finite()));
    }

    /// One head, no rotary: a row's output is the softmax-weighted sum over
    /// exactly the `w` keys at positions `pos + 1 - w ..= pos`, written out
    /// directly.
    #[test]
    fn a_window_keeps_the_last_w_keys_in_the_past_and_in_the_run() {
        let (p, s, d, w) = (9usize, 5usize, 8usize, 6usize);
        let mut seed = 7;
        let mut draw = |n: usize| (0..n).map(|_| lcg(&mut seed)).collect::<Vec<f32>>();
        let (pk, pv) = (draw(p * d), draw(p * d));
        let (q, k, v) = (draw(s * d), draw(s * d), draw(s * d));
        let gqa = |window| Gqa {
            heads: 1,
            kv_heads: 1,
            scale: 0.0,
            rotary: None,
            window,
        };
        let past = |x: &[f32]| Value::f32(vec![1, 1, p, d], x.to_vec());
        let pool = Pool::new(1).unwrap();
        let run = |g: Gqa| {
            g.run(
                q.clone(),
                k.clone(),
                &v,
                s,
                &past(&pk),
                &past(&pv),
                p + s,
                false,
                None,
                &pool,
            )
            .unwrap()
            .out
        };
        let windowed = run(gqa(Some(w)));
        let full = run(gqa(None));
        let keys: Vec<&[f32]> = pk.chunks(d).chain(k.chunks(d)).collect();
        let vals: Vec<&[f32]> = pv.chunks(d).chain(v.chunks(d)).collect();
        for i in 0..s {
            let pos = p + i;
            let lo = (pos + 1).saturating_sub(w);
            let qi = &q[i * d..(i + 1) * d];
            let sc: Vec<f64> = (lo..=pos)
                .map(|t| {
                    qi.iter()
                        .zip(keys[t])
                        .map(|(a, b)| (a * b) as f64)
                        .sum::<f64>()
                        / (d as f64).sqrt()
                })
                .collect();
            let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = sc.iter().map(|x| (x - m).exp()).sum();
            for j in 0..d {
                let want: f64 = (lo..=pos)
                    .zip(&sc)
                    .map(|(t, x)| (x - m).exp() / z * vals[t][j] as f64)
                    .sum();
                let got = windowed[i * d + j] as f64;
                assert!(
                    (got - want).abs() < 1e-5,
                    "row {i} lane {j}: {got} vs {want}"
                );
            }
        }
        // The window is narrower than every row's context here, so it changed each row.
        for i in 0..s {
            assert_ne!(
                windowed[i * d..(i + 1) * d],
                full[i * d..(i + 1) * d],
                "row {i}"
            );
        }
    }
}
