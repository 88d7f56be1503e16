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
/// reference, natively, for comparisons). Detected once per process: the
/// kernels ask for it in their inner loops.
pub fn detect() -> Kernel {
    static KERNEL: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
    *KERNEL.get_or_init(|| {
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
    })
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

/// One activation row with its per-block sums (for the zero points' share).
pub type ActSums<'a> = (&'a [i8], &'a [f32], &'a [i32]);

/// 8 interleaved weight rows (`q4::Packed8`, one group) against up to
/// `ROWS` activation rows: `out[row][lane]`, lane = weight row in the group.
pub fn group_rows(w: &[u8], scales: &[f32], zps: &[f32], acts: &[ActSums<'_>]) -> [[f32; 8]; ROWS] {
    #[cfg(target_arch = "x86_64")]
    if detect() == Kernel::Avx2 {
        // SAFETY: avx2 and fma were detected.
        return unsafe { avx2::group_rows(w, scales, zps, acts) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        return wasm::group_rows(w, scales, zps, acts);
    }
    #[allow(unreachable_code)]
    group_rows_scalar(w, scales, zps, acts)
}

/// The same product in plain code, from the same interleaved layout.
pub fn group_rows_scalar(
    w: &[u8],
    scales: &[f32],
    zps: &[f32],
    acts: &[ActSums<'_>],
) -> [[f32; 8]; ROWS] {
    let mut out = [[0f32; 8]; ROWS];
    let blocks = scales.len() / 8;
    for (o, (aq, ad, asum)) in out.iter_mut().zip(acts) {
        for (lane, ol) in o.iter_mut().enumerate() {
            let mut total = 0f32;
            for b in 0..blocks {
                let mut acc = 0i32;
                for j in 0..4 {
                    for t in 0..4 {
                        let byte = w[((b * 4 + j) * 32) + lane * 4 + t];
                        acc += (byte & 15) as i32 * aq[b * BLOCK + 4 * j + t] as i32;
                        acc += (byte >> 4) as i32 * aq[b * BLOCK + BLOCK_BYTES + 4 * j + t] as i32;
                    }
                }
                let exact = acc as f32 - zps[b * 8 + lane] * asum[b] as f32;
                total += exact * (scales[b * 8 + lane] * ad[b]);
            }
            *ol = total;
        }
    }
    out
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
        let n = acts.len();
        let blocks = scales.len() / 8;
        let mask = _mm256_set1_epi8(15);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); ROWS];
        for b in 0..blocks {
            let mut isum = [_mm256_setzero_si256(); ROWS];
            for j in 0..4 {
                // SAFETY: `w` holds `blocks` blocks of 4 steps of 32 bytes.
                let wv = unsafe {
                    _mm256_loadu_si256(w.as_ptr().add((b * 4 + j) * 32) as *const __m256i)
                };
                let lo = _mm256_and_si256(wv, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), mask);
                for r in 0..n {
                    let aq = acts[r].0;
                    // SAFETY: each activation row holds `blocks` blocks of 32.
                    let (alo, ahi) = unsafe {
                        let p = aq.as_ptr().add(b * BLOCK + 4 * j);
                        (
                            _mm256_set1_epi32((p as *const i32).read_unaligned()),
                            _mm256_set1_epi32((p.add(BLOCK_BYTES) as *const i32).read_unaligned()),
                        )
                    };
                    let step = _mm256_add_epi16(
                        _mm256_maddubs_epi16(lo, alo),
                        _mm256_maddubs_epi16(hi, ahi),
                    );
                    isum[r] = _mm256_add_epi16(isum[r], step);
                }
            }
            // SAFETY: 8 scales and 8 zero points per block.
            let (sv, zv) = unsafe {
                (
                    _mm256_loadu_ps(scales.as_ptr().add(b * 8)),
                    _mm256_loadu_ps(zps.as_ptr().add(b * 8)),
                )
            };
            for r in 0..n {
                let (_, ad, asum) = acts[r];
                let f = _mm256_cvtepi32_ps(_mm256_madd_epi16(isum[r], ones));
                let exact = _mm256_fnmadd_ps(zv, _mm256_set1_ps(asum[b] as f32), f);
                acc[r] = _mm256_fmadd_ps(exact, _mm256_mul_ps(sv, _mm256_set1_ps(ad[b])), acc[r]);
            }
        }
        let mut out = [[0f32; 8]; ROWS];
        for r in 0..n {
            // SAFETY: 8 floats.
            unsafe { _mm256_storeu_ps(out[r].as_mut_ptr(), acc[r]) };
        }
        out
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
    use super::{Act, ActSums, BLOCK, BLOCK_BYTES, ROWS};
    use core::arch::wasm32::*;

    /// See `super::group_rows`. SIMD128 has no unsigned × signed byte
    /// product, but the nibbles (0..15) are valid signed bytes, so
    /// `extmul` multiplies them with the activations directly: a 16-byte
    /// weight vector holds 4 rows × 4 bytes, the activations' 4 bytes are
    /// splat across it, and the 16-bit sums of a block stay below
    /// 4 · 2 · 15 · 127 = 15,240.
    pub fn group_rows(
        w: &[u8],
        scales: &[f32],
        zps: &[f32],
        acts: &[ActSums<'_>],
    ) -> [[f32; 8]; ROWS] {
        let n = acts.len();
        let blocks = scales.len() / 8;
        let mask = u8x16_splat(15);
        let zero16 = i16x8_splat(0);
        let mut acc = [[f32x4_splat(0.0); 2]; ROWS];
        for b in 0..blocks {
            let mut is = [[zero16; 4]; ROWS];
            for j in 0..4 {
                // SAFETY: `w` holds `blocks` blocks of 4 steps of 32 bytes.
                let (w0, w1) = unsafe {
                    let p = w.as_ptr().add((b * 4 + j) * 32);
                    (
                        v128_load(p as *const v128),
                        v128_load(p.add(16) as *const v128),
                    )
                };
                let (lo0, hi0) = (v128_and(w0, mask), u8x16_shr(w0, 4));
                let (lo1, hi1) = (v128_and(w1, mask), u8x16_shr(w1, 4));
                for r in 0..n {
                    // SAFETY: each activation row holds `blocks` blocks of 32.
                    let (alo, ahi) = unsafe {
                        let p = acts[r].0.as_ptr().add(b * BLOCK + 4 * j);
                        (
                            i32x4_splat((p as *const i32).read_unaligned()),
                            i32x4_splat((p.add(BLOCK_BYTES) as *const i32).read_unaligned()),
                        )
                    };
                    let s = &mut is[r];
                    s[0] = i16x8_add(
                        s[0],
                        i16x8_add(
                            i16x8_extmul_low_i8x16(lo0, alo),
                            i16x8_extmul_low_i8x16(hi0, ahi),
                        ),
                    );
                    s[1] = i16x8_add(
                        s[1],
                        i16x8_add(
                            i16x8_extmul_high_i8x16(lo0, alo),
                            i16x8_extmul_high_i8x16(hi0, ahi),
                        ),
                    );
                    s[2] = i16x8_add(
                        s[2],
                        i16x8_add(
                            i16x8_extmul_low_i8x16(lo1, alo),
                            i16x8_extmul_low_i8x16(hi1, ahi),
                        ),
                    );
                    s[3] = i16x8_add(
                        s[3],
                        i16x8_add(
                            i16x8_extmul_high_i8x16(lo1, alo),
                            i16x8_extmul_high_i8x16(hi1, ahi),
                        ),
                    );
                }
            }
            // SAFETY: 8 scales and 8 zero points per block.
            let (sv, zv) = unsafe {
                let (s, z) = (scales.as_ptr().add(b * 8), zps.as_ptr().add(b * 8));
                (
                    [
                        v128_load(s as *const v128),
                        v128_load(s.add(4) as *const v128),
                    ],
                    [
                        v128_load(z as *const v128),
                        v128_load(z.add(4) as *const v128),
                    ],
                )
            };
            for r in 0..n {
                let (_, ad, asum) = acts[r];
                let p: [v128; 4] = is[r].map(|x| i32x4_extadd_pairwise_i16x8(x));
                // [r0a, r0b, r1a, r1b] and [r2a, r2b, r3a, r3b] → [r0, r1, r2, r3].
                let rows = |x: v128, y: v128| {
                    i32x4_add(
                        i32x4_shuffle::<0, 2, 4, 6>(x, y),
                        i32x4_shuffle::<1, 3, 5, 7>(x, y),
                    )
                };
                let ints = [rows(p[0], p[1]), rows(p[2], p[3])];
                let sum = f32x4_splat(asum[b] as f32);
                let d = f32x4_splat(ad[b]);
                for h in 0..2 {
                    let exact = f32x4_sub(f32x4_convert_i32x4(ints[h]), f32x4_mul(zv[h], sum));
                    acc[r][h] = f32x4_add(acc[r][h], f32x4_mul(exact, f32x4_mul(sv[h], d)));
                }
            }
        }
        let mut out = [[0f32; 8]; ROWS];
        for r in 0..n {
            for h in 0..2 {
                let v = acc[r][h];
                out[r][4 * h] = f32x4_extract_lane::<0>(v);
                out[r][4 * h + 1] = f32x4_extract_lane::<1>(v);
                out[r][4 * h + 2] = f32x4_extract_lane::<2>(v);
                out[r][4 * h + 3] = f32x4_extract_lane::<3>(v);
            }
        }
        out
    }

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

/// A fixed pseudo-random stream (no dependency for a self-test).
pub(crate) fn lcg(seed: &mut u64) -> u32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 33) as u32
}

/// The kernel this build runs, checked against the scalar reference on
/// fixed pseudo-random data: the row kernel (`dot_rows`) and the
/// interleaved one (`group_rows`, on weights interleaved here by hand),
/// with zero points, for 1 to `ROWS` activation rows. Returns the kernel and
/// the largest difference relative to the reference's magnitude: only the
/// float accumulation order may differ, since block sums are integers. It
/// runs natively in `cargo test` and in the browser (diagnostics build),
/// where SIMD128 is the kernel under test.
pub fn self_test() -> (Kernel, f32) {
    let kernel = detect();
    let mut seed = 11;
    let blocks = 18;
    let rows: Vec<Vec<u8>> = (0..8)
        .map(|_| {
            (0..blocks * BLOCK_BYTES)
                .map(|_| lcg(&mut seed) as u8)
                .collect()
        })
        .collect();
    let sc: Vec<Vec<f32>> = (0..8)
        .map(|_| {
            (0..blocks)
                .map(|_| (lcg(&mut seed) % 1000) as f32 * 1e-4 + 1e-3)
                .collect()
        })
        .collect();
    let zp: Vec<Vec<u8>> = (0..8)
        .map(|_| (0..blocks).map(|_| (lcg(&mut seed) % 16) as u8).collect())
        .collect();
    let mut w = vec![0u8; blocks * 128];
    let (mut s8, mut z8) = (vec![0f32; blocks * 8], vec![0f32; blocks * 8]);
    for r in 0..8 {
        for b in 0..blocks {
            for j in 0..4 {
                for t in 0..4 {
                    w[(b * 4 + j) * 32 + r * 4 + t] = rows[r][b * BLOCK_BYTES + 4 * j + t];
                }
            }
            s8[b * 8 + r] = sc[r][b];
            z8[b * 8 + r] = zp[r][b] as f32;
        }
    }
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
    let sums: Vec<Vec<i32>> = q
        .iter()
        .map(|row| {
            row.chunks(BLOCK)
                .map(|b| b.iter().map(|&v| v as i32).sum())
                .collect()
        })
        .collect();
    let mut worst = 0f32;
    let mut check =
        |fast: f32, slow: f32| worst = worst.max((fast - slow).abs() / slow.abs().max(1.0));
    for n in 1..=ROWS {
        let plain: Vec<Act<'_>> = (0..n).map(|r| (q[r].as_slice(), d[r].as_slice())).collect();
        let with_sums: Vec<ActSums<'_>> = (0..n)
            .map(|r| (q[r].as_slice(), d[r].as_slice(), sums[r].as_slice()))
            .collect();
        let grouped = group_rows(&w, &s8, &z8, &with_sums);
        let twin = group_rows_scalar(&w, &s8, &z8, &with_sums);
        for lane in 0..8 {
            for zps in [None, Some(zp[lane].as_slice())] {
                let fast = dot_rows(kernel, &rows[lane], &sc[lane], zps, &plain);
                let slow = scalar(&rows[lane], &sc[lane], zps, &plain);
                for r in 0..n {
                    check(fast[r], slow[r]);
                    if zps.is_some() {
                        check(grouped[r][lane], slow[r]);
                        check(twin[r][lane], slow[r]);
                    }
                }
            }
        }
    }
    (kernel, worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instruction-set kernels equal the scalar reference up to the
    /// order of float additions; a wrong nibble, lane or zero point would be
    /// off by whole units.
    #[test]
    fn the_fast_kernels_equal_the_scalar_reference() {
        let (kernel, worst) = self_test();
        println!("kernel {kernel:?}: worst relative difference {worst:e}");
        assert!(worst <= 1e-5, "{kernel:?}: {worst}");
    }
}
