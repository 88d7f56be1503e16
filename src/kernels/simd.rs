//! The int8 × int4 block dot products, one per instruction set, all with
//! the same contract as `scalar`: for each activation row, Σ over blocks of
//! (Σ (w − zp) · a) · scale_w · scale_a, the inner sum in integers.

use super::q4::{BLOCK, BLOCK_BYTES};

/// Activation rows one weight row is multiplied with at a time: the
/// weight block is unpacked once for all of them.
pub const ROWS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    Scalar,
    Avx2,
    Simd128,
}

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Self::Scalar => "scalar",
            Self::Avx2 => "avx2",
            Self::Simd128 => "simd128",
        }
    }
}

/// The fastest kernel this CPU runs (`READOUT_KERNEL=scalar` forces the
/// reference, natively, for comparisons).
pub fn detect() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        if std::env::var("READOUT_KERNEL").is_ok_and(|v| v == "scalar") {
            return Kernel::Scalar;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Kernel::Avx2;
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        return Kernel::Simd128;
    }
    #[allow(unreachable_code)]
    Kernel::Scalar
}

type Act<'a> = (&'a [i8], &'a [f32]);

pub fn dot_rows(
    kernel: Kernel,
    w: &[u8],
    scales: &[f32],
    zps: Option<&[u8]>,
    acts: &[Act<'_>],
) -> [f32; ROWS] {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `detect` returned Avx2 only where avx2 and fma are present.
        Kernel::Avx2 => unsafe { avx2::dot_rows(w, scales, zps, acts) },
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 => wasm::dot_rows(w, scales, zps, acts),
        _ => scalar(w, scales, zps, acts),
    }
}

pub fn scalar(w: &[u8], scales: &[f32], zps: Option<&[u8]>, acts: &[Act<'_>]) -> [f32; ROWS] {
    let mut out = [0f32; ROWS];
    for (o, (aq, ad)) in out.iter_mut().zip(acts) {
        let mut total = 0f32;
        for (b, s) in scales.iter().enumerate() {
            let zp = zps.map_or(8, |z| z[b]) as i32;
            let wb = &w[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
            let ab = &aq[b * BLOCK..(b + 1) * BLOCK];
            let mut acc = 0i32;
            for j in 0..BLOCK_BYTES {
                acc += ((wb[j] & 15) as i32 - zp) * ab[j] as i32;
                acc += ((wb[j] >> 4) as i32 - zp) * ab[BLOCK_BYTES + j] as i32;
            }
            total += acc as f32 * (s * ad[b]);
        }
        *o = total;
    }
    out
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Act, BLOCK, BLOCK_BYTES, ROWS};
    use std::arch::x86_64::*;

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
                let av =
                    unsafe { _mm256_loadu_si256(aq.as_ptr().add(b * BLOCK) as *const __m256i) };
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
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm {
    use super::{Act, BLOCK, BLOCK_BYTES, ROWS};
    use core::arch::wasm32::*;

    pub fn dot_rows(w: &[u8], scales: &[f32], zps: Option<&[u8]>, acts: &[Act<'_>]) -> [f32; ROWS] {
        let n = acts.len();
        let mask = u8x16_splat(15);
        let mut acc = [f32x4_splat(0.0); ROWS];
        for (b, s) in scales.iter().enumerate() {
            let zp = i8x16_splat(zps.map_or(8, |z| z[b]) as i8);
            // SAFETY: `w` holds `scales.len()` blocks of 16 bytes.
            let raw = unsafe { v128_load(w.as_ptr().add(b * BLOCK_BYTES) as *const v128) };
            let lo = i8x16_sub(v128_and(raw, mask), zp);
            let hi = i8x16_sub(u8x16_shr(raw, 4), zp);
            let (lo0, lo1) = (i16x8_extend_low_i8x16(lo), i16x8_extend_high_i8x16(lo));
            let (hi0, hi1) = (i16x8_extend_low_i8x16(hi), i16x8_extend_high_i8x16(hi));
            for r in 0..n {
                let (aq, ad) = acts[r];
                // SAFETY: each activation row holds `scales.len()` blocks of 32.
                let (a0, a1) = unsafe {
                    (
                        v128_load(aq.as_ptr().add(b * BLOCK) as *const v128),
                        v128_load(aq.as_ptr().add(b * BLOCK + BLOCK_BYTES) as *const v128),
                    )
                };
                let p = i32x4_add(
                    i32x4_add(
                        i32x4_dot_i16x8(lo0, i16x8_extend_low_i8x16(a0)),
                        i32x4_dot_i16x8(lo1, i16x8_extend_high_i8x16(a0)),
                    ),
                    i32x4_add(
                        i32x4_dot_i16x8(hi0, i16x8_extend_low_i8x16(a1)),
                        i32x4_dot_i16x8(hi1, i16x8_extend_high_i8x16(a1)),
                    ),
                );
                acc[r] = f32x4_add(
                    acc[r],
                    f32x4_mul(f32x4_convert_i32x4(p), f32x4_splat(s * ad[b])),
                );
            }
        }
        let mut out = [0f32; ROWS];
        for r in 0..n {
            let v = acc[r];
            out[r] = f32x4_extract_lane::<0>(v)
                + f32x4_extract_lane::<1>(v)
                + f32x4_extract_lane::<2>(v)
                + f32x4_extract_lane::<3>(v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed pseudo-random stream (no dependency for a test).
    fn lcg(seed: &mut u64) -> u32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as u32
    }

    /// The instruction-set kernel against the scalar one it must equal: the
    /// block sums are integers either way, so only the float accumulation
    /// order differs. With and without zero points, 1 to ROWS rows.
    #[test]
    fn the_fast_kernel_equals_the_scalar_reference() {
        let kernel = detect();
        let mut seed = 7;
        let blocks = 18;
        let w: Vec<u8> = (0..blocks * BLOCK_BYTES)
            .map(|_| lcg(&mut seed) as u8)
            .collect();
        let scales: Vec<f32> = (0..blocks)
            .map(|_| (lcg(&mut seed) % 1000) as f32 * 1e-4 + 1e-3)
            .collect();
        let zps: Vec<u8> = (0..blocks).map(|_| (lcg(&mut seed) % 16) as u8).collect();
        let q: Vec<Vec<i8>> = (0..ROWS)
            .map(|_| {
                (0..blocks * BLOCK)
                    .map(|_| ((lcg(&mut seed) % 255) as i32 - 127) as i8)
                    .collect()
            })
            .collect();
        let d: Vec<Vec<f32>> = (0..ROWS)
            .map(|_| {
                (0..blocks)
                    .map(|_| (lcg(&mut seed) % 100) as f32 * 1e-3 + 1e-3)
                    .collect()
            })
            .collect();
        for zp in [None, Some(zps.as_slice())] {
            for rows in 1..=ROWS {
                let acts: Vec<Act<'_>> = (0..rows)
                    .map(|r| (q[r].as_slice(), d[r].as_slice()))
                    .collect();
                let fast = dot_rows(kernel, &w, &scales, zp, &acts);
                let slow = scalar(&w, &scales, zp, &acts);
                for r in 0..rows {
                    let tol = 1e-5 * slow[r].abs().max(1.0);
                    assert!(
                        (fast[r] - slow[r]).abs() <= tol,
                        "{kernel:?} row {r} of {rows}, zp {}: {} vs {}",
                        zp.is_some(),
                        fast[r],
                        slow[r]
                    );
                }
                assert!(slow[..rows].iter().any(|v| v.abs() > 1e-3));
            }
        }
        println!("kernel {kernel:?} checked against scalar");
    }
}
