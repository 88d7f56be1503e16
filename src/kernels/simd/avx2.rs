//! The x86_64 kernels (AVX2 with FMA), detected at run time.

use super::{Act, ActSums, BLOCK, BLOCK_BYTES, ROWS};
use std::arch::x86_64::*;

/// See `super::group_rows`. Per block: 4 steps of one 32-byte weight
/// load (8 rows × 4 bytes), unpacked to low and high nibbles, each
/// multiplied with 4 broadcast activation bytes; the 16-bit sums of the
/// 4 steps stay below 4 · 2 · 2 · 15 · 127 = 30,480, so they are widened
/// once per block.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn group_rows(
    w: &[u8],
    scales: &[f32],
    zps: &[f32],
    acts: &[ActSums<'_>],
) -> [[f32; 8]; ROWS] {
    let ones = _mm256_set1_epi16(1);
    // SAFETY: the caller's CPU has avx2 and fma.
    unsafe {
        group_rows_by(
            w,
            scales,
            zps,
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
    w: &[u8],
    scales: &[f32],
    zps: &[f32],
    acts: &[ActSums<'_>],
    step: impl Fn(__m256i, __m256i, __m256i, __m256i, __m256i) -> __m256i,
    widen: impl Fn(__m256i) -> __m256i,
) -> [[f32; 8]; ROWS] {
    let n = acts.len();
    let blocks = scales.len() / 8;
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
                    let p = acts[r].0.as_ptr().add(b * BLOCK + 4 * j);
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
                let (_, ad, asum) = acts[r];
                let f = _mm256_cvtepi32_ps(widen(isum[r]));
                let exact = _mm256_fnmadd_ps(zv, _mm256_set1_ps(asum[b] as f32), f);
                acc[r] = _mm256_fmadd_ps(exact, _mm256_mul_ps(sv, _mm256_set1_ps(ad[b])), acc[r]);
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
