//! Attention's per-CPU code: one query's dot products with four keys at a
//! time, in plain loops (which the compiler vectorises along the lanes), in
//! AVX2 registers and in SIMD128 registers, all with the same products,
//! lanes and order of additions, so the same bits (`attention::self_test`).

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
