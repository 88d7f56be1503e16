//! Attention's per-CPU code: one query's dot products with four keys at a
//! time (`dot4`), or with a block of 16 transposed keys (`scores16`), in
//! plain loops, in AVX2, AVX-512 and SIMD128 registers, all with the same
//! products, lanes and order of additions, so the same bits
//! (`attention::self_test`).

/// Keys in a block of attention's transposed keys: `[D][KB]`, row `j`
/// holding lane `j` of 16 consecutive keys.
pub(crate) const KB: usize = 16;

/// `dot(q, key t) · scale` for the block's 16 keys (`block`: `[D][KB]`).
/// `dot` keeps 8 lanes a key, lane `l` summing the products of `j ≡ l (mod
/// 8)` in the order of `j`, then a serial tail, then folds the lanes as
/// `(l0 + l4) + (l1 + l5) + (l2 + l6) + (l3 + l7) + tail`. Here lane `l`
/// of all 16 keys is one register (`acc[l]`), so every step, the fold
/// included, is a vertical operation, the same ones in the same order.
/// Each query of `qs` into `out`'s row of the same index.
#[inline(always)]
pub(crate) fn scores16(qs: &[&[f32]], block: &[[f32; KB]], scale: f32, out: &mut [[f32; KB]]) {
    for (q, o) in qs.iter().zip(out) {
        *o = scores16_one(q, block, scale);
    }
}

#[inline(always)]
fn scores16_one(q: &[f32], block: &[[f32; KB]], scale: f32) -> [f32; KB] {
    let (q8, qt) = q.as_chunks::<8>();
    let (k8, kt) = block.as_chunks::<8>();
    let mut acc = [[0f32; KB]; 8];
    for (qc, kc) in q8.iter().zip(k8) {
        for l in 0..8 {
            for t in 0..KB {
                acc[l][t] += qc[l] * kc[l][t];
            }
        }
    }
    let mut tail = [0f32; KB];
    for (qj, kj) in qt.iter().zip(kt) {
        for t in 0..KB {
            tail[t] += qj * kj[t];
        }
    }
    std::array::from_fn(|t| {
        let a = |l: usize| acc[l][t];
        ((a(0) + a(4)) + (a(1) + a(5)) + (a(2) + a(6)) + (a(3) + a(7)) + tail[t]) * scale
    })
}

/// `scores16` in AVX-512 registers: a lane of the 16 keys is one
/// register, for up to 3 queries at once (24 accumulators), so each
/// block row loaded serves every query.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(crate) fn scores16_avx512(
    qs: &[&[f32]],
    block: &[[f32; KB]],
    scale: f32,
    out: &mut [[f32; KB]],
) {
    for (qs, out) in qs.chunks(3).zip(out.chunks_mut(3)) {
        match qs.len() {
            1 => scores16_avx512_n::<1>(qs, block, scale, out),
            2 => scores16_avx512_n::<2>(qs, block, scale, out),
            _ => scores16_avx512_n::<3>(qs, block, scale, out),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn scores16_avx512_n<const R: usize>(
    qs: &[&[f32]],
    block: &[[f32; KB]],
    scale: f32,
    out: &mut [[f32; KB]],
) {
    use std::arch::x86_64::*;
    let q: [(&[[f32; 8]], &[f32]); R] = std::array::from_fn(|h| qs[h].as_chunks::<8>());
    let (k8, kt) = block.as_chunks::<8>();
    let mut acc = [[_mm512_setzero_ps(); 8]; R];
    let mut tail = [_mm512_setzero_ps(); R];
    // SAFETY: every load is of a `[f32; 16]`; each query is as long as the
    // block (the zips stop at the shorter, and `Gqa::run` gives both D).
    unsafe {
        for (c, kc) in k8.iter().enumerate() {
            for l in 0..8 {
                let k = _mm512_loadu_ps(kc[l].as_ptr());
                for h in 0..R {
                    let x = _mm512_set1_ps(q[h].0[c][l]);
                    acc[h][l] = _mm512_add_ps(acc[h][l], _mm512_mul_ps(x, k));
                }
            }
        }
        for (j, kj) in kt.iter().enumerate() {
            let k = _mm512_loadu_ps(kj.as_ptr());
            for h in 0..R {
                tail[h] = _mm512_add_ps(tail[h], _mm512_mul_ps(_mm512_set1_ps(q[h].1[j]), k));
            }
        }
        for h in 0..R {
            let acc = &acc[h];
            let a = _mm512_add_ps(
                _mm512_add_ps(
                    _mm512_add_ps(_mm512_add_ps(acc[0], acc[4]), _mm512_add_ps(acc[1], acc[5])),
                    _mm512_add_ps(acc[2], acc[6]),
                ),
                _mm512_add_ps(acc[3], acc[7]),
            );
            let r = _mm512_mul_ps(_mm512_add_ps(a, tail[h]), _mm512_set1_ps(scale));
            _mm512_storeu_ps(out[h].as_mut_ptr(), r);
        }
    }
}

/// `scores16` in AVX2 registers: the block in two halves of 8 keys.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) fn scores16_avx2(qs: &[&[f32]], block: &[[f32; KB]], scale: f32, out: &mut [[f32; KB]]) {
    for (q, o) in qs.iter().zip(out) {
        *o = scores16_avx2_one(q, block, scale);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn scores16_avx2_one(q: &[f32], block: &[[f32; KB]], scale: f32) -> [f32; KB] {
    use std::arch::x86_64::*;
    let (q8, qt) = q.as_chunks::<8>();
    let (k8, kt) = block.as_chunks::<8>();
    let mut out = [0f32; KB];
    for half in [0, 8] {
        let mut acc = [_mm256_setzero_ps(); 8];
        let mut tail = _mm256_setzero_ps();
        // SAFETY: every load is of 8 floats at `half` (0 or 8) in a `[f32; 16]`.
        unsafe {
            for (qc, kc) in q8.iter().zip(k8) {
                for l in 0..8 {
                    let k = _mm256_loadu_ps(kc[l].as_ptr().add(half));
                    acc[l] = _mm256_add_ps(acc[l], _mm256_mul_ps(_mm256_set1_ps(qc[l]), k));
                }
            }
            for (qj, kj) in qt.iter().zip(kt) {
                let k = _mm256_loadu_ps(kj.as_ptr().add(half));
                tail = _mm256_add_ps(tail, _mm256_mul_ps(_mm256_set1_ps(*qj), k));
            }
            let a = _mm256_add_ps(
                _mm256_add_ps(
                    _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[1], acc[5])),
                    _mm256_add_ps(acc[2], acc[6]),
                ),
                _mm256_add_ps(acc[3], acc[7]),
            );
            let r = _mm256_mul_ps(_mm256_add_ps(a, tail), _mm256_set1_ps(scale));
            _mm256_storeu_ps(out.as_mut_ptr().add(half), r);
        }
    }
    out
}

/// `scores16` in SIMD128 registers: the block in four quarters of 4 keys,
/// one query at a time (a query's 8 lanes for 4 keys are 8 of the 16
/// registers; the block stays in the first-level cache between queries).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) fn scores16_simd128(
    qs: &[&[f32]],
    block: &[[f32; KB]],
    scale: f32,
    out: &mut [[f32; KB]],
) {
    for (q, o) in qs.iter().zip(out) {
        *o = scores16_simd128_one(q, block, scale);
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn scores16_simd128_one(q: &[f32], block: &[[f32; KB]], scale: f32) -> [f32; KB] {
    use std::arch::wasm32::*;
    let (q8, qt) = q.as_chunks::<8>();
    let (k8, kt) = block.as_chunks::<8>();
    let mut out = [0f32; KB];
    for quarter in [0, 4, 8, 12] {
        let mut acc = [f32x4_splat(0.0); 8];
        let mut tail = f32x4_splat(0.0);
        // SAFETY: every load is of 4 floats at `quarter` (at most 12) in a
        // `[f32; 16]`; v128 loads need no alignment.
        unsafe {
            let load = |k: &[f32; KB]| v128_load(k.as_ptr().add(quarter) as *const v128);
            for (qc, kc) in q8.iter().zip(k8) {
                for l in 0..8 {
                    acc[l] = f32x4_add(acc[l], f32x4_mul(f32x4_splat(qc[l]), load(&kc[l])));
                }
            }
            for (qj, kj) in qt.iter().zip(kt) {
                tail = f32x4_add(tail, f32x4_mul(f32x4_splat(*qj), load(kj)));
            }
            let a = f32x4_add(
                f32x4_add(
                    f32x4_add(f32x4_add(acc[0], acc[4]), f32x4_add(acc[1], acc[5])),
                    f32x4_add(acc[2], acc[6]),
                ),
                f32x4_add(acc[3], acc[7]),
            );
            let r = f32x4_mul(f32x4_add(a, tail), f32x4_splat(scale));
            v128_store(out.as_mut_ptr().add(quarter) as *mut v128, r);
        }
    }
    out
}

/// `dot` of one query with four keys, each summed exactly as `dot` does.
/// Each key has its own 8-lane accumulator, written out, so the compiler
/// vectorises along the lanes (given the four as one array of arrays, it
/// vectorised across the keys instead, with a shuffle per product).
#[inline(always)]
pub(crate) fn dot4(a: &[f32], [b0, b1, b2, b3]: [&[f32]; 4]) -> [f32; 4] {
    let (mut s0, mut s1, mut s2, mut s3) = ([0f32; 8], [0f32; 8], [0f32; 8], [0f32; 8]);
    fn eights(x: &[f32]) -> &[[f32; 8]] {
        x.as_chunks::<8>().0
    }
    let chunks = eights(a)
        .iter()
        .zip(eights(b0))
        .zip(eights(b1))
        .zip(eights(b2))
        .zip(eights(b3));
    for ((((x, y0), y1), y2), y3) in chunks {
        for l in 0..8 {
            s0[l] += x[l] * y0[l];
            s1[l] += x[l] * y1[l];
            s2[l] += x[l] * y2[l];
            s3[l] += x[l] * y3[l];
        }
    }
    let n = a.len() / 8 * 8;
    let finish = |acc: [f32; 8], y: &[f32]| {
        let mut tail = 0f32;
        for (x, y) in a[n..].iter().zip(&y[n..]) {
            tail += x * y;
        }
        (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
    };
    [
        finish(s0, b0),
        finish(s1, b1),
        finish(s2, b2),
        finish(s3, b3),
    ]
}

/// `dot4` in AVX2 registers, written out: given `dot4`'s plain loops, the
/// compiler vectorised across the four keys, with shuffles per product.
/// The same products, lanes and order of additions, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) fn dot4_avx2(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
    use std::arch::x86_64::*;
    let n = a.len() / 8 * 8;
    let b = b.map(|x| &x[..a.len()]);
    let mut acc = [_mm256_setzero_ps(); 4];
    for c in (0..n).step_by(8) {
        // SAFETY: `c + 8 <= n <= len` for `a` and every `b`.
        unsafe {
            let x = _mm256_loadu_ps(a.as_ptr().add(c));
            for (acc, y) in acc.iter_mut().zip(b) {
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(x, _mm256_loadu_ps(y.as_ptr().add(c))));
            }
        }
    }
    let mut out = [0f32; 4];
    for ((o, acc), y) in out.iter_mut().zip(acc).zip(b) {
        let mut l = [0f32; 8];
        // SAFETY: 8 floats.
        unsafe { _mm256_storeu_ps(l.as_mut_ptr(), acc) };
        let mut tail = 0f32;
        for (x, y) in a[n..].iter().zip(&y[n..]) {
            tail += x * y;
        }
        *o = (l[0] + l[4]) + (l[1] + l[5]) + (l[2] + l[6]) + (l[3] + l[7]) + tail;
    }
    out
}

/// `dot4_avx2` in SIMD128 registers: each key's 8 lanes in two.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) fn dot4_simd128(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
    use std::arch::wasm32::*;
    let n = a.len() / 8 * 8;
    let b = b.map(|x| &x[..a.len()]);
    let mut acc = [[f32x4_splat(0.0); 2]; 4];
    for c in (0..n).step_by(8) {
        // SAFETY: `c + 8 <= n <= len` for `a` and every `b`; v128 loads
        // need no alignment.
        unsafe {
            let x0 = v128_load(a.as_ptr().add(c) as *const v128);
            let x1 = v128_load(a.as_ptr().add(c + 4) as *const v128);
            for (acc, y) in acc.iter_mut().zip(b) {
                let y0 = v128_load(y.as_ptr().add(c) as *const v128);
                let y1 = v128_load(y.as_ptr().add(c + 4) as *const v128);
                acc[0] = f32x4_add(acc[0], f32x4_mul(x0, y0));
                acc[1] = f32x4_add(acc[1], f32x4_mul(x1, y1));
            }
        }
    }
    let mut out = [0f32; 4];
    for ((o, [lo, hi]), y) in out.iter_mut().zip(acc).zip(b) {
        let l = |v: v128, i: usize| match i {
            0 => f32x4_extract_lane::<0>(v),
            1 => f32x4_extract_lane::<1>(v),
            2 => f32x4_extract_lane::<2>(v),
            _ => f32x4_extract_lane::<3>(v),
        };
        let mut tail = 0f32;
        for (x, y) in a[n..].iter().zip(&y[n..]) {
            tail += x * y;
        }
        *o = (l(lo, 0) + l(hi, 0))
            + (l(lo, 1) + l(hi, 1))
            + (l(lo, 2) + l(hi, 2))
            + (l(lo, 3) + l(hi, 3))
            + tail;
    }
    out
}
