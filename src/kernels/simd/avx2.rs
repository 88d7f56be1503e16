//! The x86_64 kernels (AVX2 with FMA), detected at run time.

use super::{Act, ActSums, Group, BLOCK, BLOCK_BYTES, ROWS};
use std::arch::x86_64::*;

/// See `super::group_rows`. Per block: 4 steps of one 32-byte weight
/// load (8 rows × 4 bytes), unpacked to low and high nibbles, each
/// multiplied with 4 broadcast activation bytes; the 16-bit sums of the
/// 4 steps stay below 4 · 2 · 2 · 15 · 127 = 30,480, so they are widened
/// once per block.
///
/// # Safety
/// The CPU has avx2 and fma, and `g.fits(acts)`.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn group_rows(g: Group<'_>, acts: &[ActSums<'_>]) -> [[f32; 8]; ROWS] {
    let ones = _mm256_set1_epi16(1);
    // SAFETY: the caller's CPU has avx2 and fma.
    unsafe {
        group_rows_by(
            g,
            acts,
            |sum, lo, hi, alo, ahi| {
                let step =
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi));
                _mm256_add_epi16(sum, step)
            },
            |sum| _mm256_madd_epi16(sum, ones),
        )
    }
}

/// The interleaved product's frame, shared by the AVX2 and AVX-512 VNNI
/// kernels: `step(sum, lo, hi, a_lo, a_hi)` adds one step's products of
/// the low and high nibbles with their 4 broadcast activation bytes into a
/// block's integer sum, `widen` makes that sum 8 × i32; the loads, the zero
/// points' share and the float accumulation are the same for both.
///
/// # Safety
/// The CPU has avx2 and fma; inlined into a `target_feature` function that
/// says so (and whatever `step` needs).
#[inline(always)]
pub(super) unsafe fn group_rows_by(
    g: Group<'_>,
    acts: &[ActSums<'_>],
    step: impl Fn(__m256i, __m256i, __m256i, __m256i, __m256i) -> __m256i,
    widen: impl Fn(__m256i) -> __m256i,
) -> [[f32; 8]; ROWS] {
    let Group { w, scales, zps, .. } = g;
    let n = acts.len();
    let blocks = g.blocks();
    // SAFETY: every intrinsic below needs at most avx2 and fma (the
    // contract); every load is in bounds as each comment says.
    unsafe {
        let mask = _mm256_set1_epi8(15);
        let mut acc = [_mm256_setzero_ps(); ROWS];
        for b in 0..blocks {
            let mut isum = [_mm256_setzero_si256(); ROWS];
            for j in 0..4 {
                // `w` holds `blocks` blocks of 4 steps of 32 bytes.
                let wv = _mm256_loadu_si256(w.as_ptr().add((b * 4 + j) * 32) as *const __m256i);
                let lo = _mm256_and_si256(wv, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), mask);
                for r in 0..n {
                    // Each activation row holds `blocks` blocks of 32.
                    let p = acts[r].q.as_ptr().add(b * BLOCK + 4 * j);
                    let alo = _mm256_set1_epi32((p as *const i32).read_unaligned());
                    let ahi =
                        _mm256_set1_epi32((p.add(BLOCK_BYTES) as *const i32).read_unaligned());
                    isum[r] = step(isum[r], lo, hi, alo, ahi);
                }
            }
            // 8 scales and 8 zero points per block.
            let sv = _mm256_loadu_ps(scales.as_ptr().add(b * 8));
            let zv = _mm256_loadu_ps(zps.as_ptr().add(b * 8));
            for r in 0..n {
                let ActSums {
                    d: ad, sum: asum, ..
                } = acts[r];
                let f = _mm256_cvtepi32_ps(widen(isum[r]));
                // Exact either way (integers below 2^24), so fused.
                let exact = _mm256_fnmadd_ps(zv, _mm256_set1_ps(asum[b] as f32), f);
                // Not fused: a multiply and an add round as the wasm
                // builds' and the plain loops' do, so every build gives
                // the same bits (the self-test holds them to it).
                let scaled = _mm256_mul_ps(exact, _mm256_mul_ps(sv, _mm256_set1_ps(ad[b])));
                acc[r] = _mm256_add_ps(acc[r], scaled);
            }
        }
        let mut out = [[0f32; 8]; ROWS];
        for r in 0..n {
            _mm256_storeu_ps(out[r].as_mut_ptr(), acc[r]);
        }
        out
    }
}

#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot_rows(
    w: &[u8],
    scales: &[f32],
    zps: Option<&[u8]>,
    acts: &[Act<'_>],
) -> [f32; ROWS] {
    let n = acts.len();
    let mask = _mm_set1_epi8(15);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); ROWS];
    for (b, s) in scales.iter().enumerate() {
        let zp = zps.map_or(8, |z| z[b]) as i8;
        // SAFETY: `w` holds `scales.len()` blocks of 16 bytes.
        let raw = unsafe { _mm_loadu_si128(w.as_ptr().add(b * BLOCK_BYTES) as *const __m128i) };
        let lo = _mm_and_si128(raw, mask);
        let hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
        // Low nibbles (even elements), then high (odd): the activations'
        // nibble order.
        let wv = _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(zp));
        // maddubs multiplies unsigned by signed: move w's sign onto a.
        let wabs = _mm256_sign_epi8(wv, wv);
        for r in 0..n {
            let (aq, ad) = acts[r];
            // SAFETY: each activation row holds `scales.len()` blocks of 32.
            let av = unsafe { _mm256_loadu_si256(aq.as_ptr().add(b * BLOCK) as *const __m256i) };
            let prod = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(av, wv));
            let sum = _mm256_cvtepi32_ps(_mm256_madd_epi16(prod, ones));
            acc[r] = _mm256_fmadd_ps(sum, _mm256_set1_ps(s * ad[b]), acc[r]);
        }
    }
    let mut out = [0f32; ROWS];
    for r in 0..n {
        let v = acc[r];
        let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
        out[r] = _mm_cvtss_f32(h);
    }
    out
}

/// See `super::quantise`: per block, 4 loads of 8, the largest magnitude
/// (NaN skipped, as `f32::max` does), then each value scaled, rounded half
/// away from zero, truncated (a NaN masked to 0, as `as i8` gives), narrowed
/// to bytes and put in nibble order by two shuffles.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn quantise(a: &[f32], q: &mut [i8], d: &mut [f32], sum: &mut [i32]) {
    let blocks = super::quantised_blocks(a, q, d, sum);
    let sign = _mm256_set1_ps(-0.0);
    let half = _mm256_set1_ps(0.5);
    // Dwords of the two narrowings back in element order, then per lane the
    // even bytes before the odd ones, then the lanes' evens before their odds.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let split = _mm256_setr_epi8(
        0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5,
        7, 9, 11, 13, 15,
    );
    for b in 0..blocks {
        // SAFETY: `a` and `q` hold `blocks` blocks of 32.
        let (p, o) = unsafe { (a.as_ptr().add(b * BLOCK), q.as_mut_ptr().add(b * BLOCK)) };
        let v: [__m256; 4] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(p.add(8 * i)) });
        let mut m = _mm256_setzero_ps();
        for x in v {
            // maxps returns its second operand when either is NaN.
            m = _mm256_max_ps(_mm256_andnot_ps(sign, x), m);
        }
        let m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        let amax = _mm_cvtss_f32(_mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1)));
        let scale = amax / 127.0;
        let inv = _mm256_set1_ps(if scale > 0.0 { 1.0 / scale } else { 0.0 });
        let t: [__m256i; 4] = v.map(|x| {
            let x = _mm256_mul_ps(x, inv);
            let r = _mm256_add_ps(x, _mm256_or_ps(_mm256_and_ps(x, sign), half));
            let ordered = _mm256_castps_si256(_mm256_cmp_ps(r, r, _CMP_ORD_Q));
            _mm256_and_si256(_mm256_cvttps_epi32(r), ordered)
        });
        let s8 = _mm256_add_epi32(_mm256_add_epi32(t[0], t[1]), _mm256_add_epi32(t[2], t[3]));
        let s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        let s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        let s1 = _mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1));
        let bytes = _mm256_packs_epi16(
            _mm256_packs_epi32(t[0], t[1]),
            _mm256_packs_epi32(t[2], t[3]),
        );
        let natural = _mm256_permutevar8x32_epi32(bytes, order);
        let nibbles = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(natural, split), 0b11_01_10_00);
        // SAFETY: block `b` of `q` is 32 bytes.
        unsafe { _mm256_storeu_si256(o as *mut __m256i, nibbles) };
        d[b] = scale;
        sum[b] = _mm_cvtsi128_si32(s1);
    }
}
