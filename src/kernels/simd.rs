//! The int8 × int4 block dot products, one per instruction set, all with
//! the same contract as `scalar`: for each activation row, Σ over blocks of
//! (Σ (w − zp) · a) · scale_w · scale_a, the inner sum in integers.

/// Weights a block of `MatMulNBits` holds (its `block_size`; the only one
/// the builder writes and these kernels compute).
pub const BLOCK: usize = 32;
/// Bytes of one block of 32 int4 weights.
pub const BLOCK_BYTES: usize = BLOCK / 2;

/// Activation rows one weight row is multiplied with at a time: the
/// weight block is unpacked once for all of them.
pub const ROWS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    Scalar,
    Avx2,
    /// AVX-512 VNNI's `vpdpbusd` (with AVX-512VL, on 256-bit registers).
    #[serde(rename = "avx512-vnni")]
    Avx512Vnni,
    Simd128,
    /// SIMD128 with relaxed SIMD's integer dot product (the threaded build,
    /// and the single-thread build with the `relaxed-simd` feature).
    #[serde(rename = "relaxed-simd")]
    RelaxedSimd,
}

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Self::Scalar => "scalar",
            Self::Avx2 => "avx2",
            Self::Avx512Vnni => "avx512-vnni",
            Self::Simd128 => "simd128",
            Self::RelaxedSimd => "relaxed-simd",
        }
    }
}

/// The fastest kernel this CPU runs. Natively `READOUT_KERNEL` names a
/// slower one to compare against (`scalar`, the reference, or `avx2` on an
/// AVX-512 machine); a name this CPU cannot run is ignored. Detected once
/// per process: the kernels ask for it in their inner loops.
pub fn detect() -> Kernel {
    static KERNEL: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
    *KERNEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let asked = std::env::var("READOUT_KERNEL").unwrap_or_default();
            if asked == "scalar" {
                return Kernel::Scalar;
            }
            let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
            let vnni = avx2
                && is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512vnni");
            if vnni && asked != "avx2" {
                return Kernel::Avx512Vnni;
            }
            if avx2 {
                return Kernel::Avx2;
            }
        }
        // wasm cannot test for an instruction set at run time (a module
        // that uses one fails to validate without it), so the build says.
        #[cfg(all(
            target_arch = "wasm32",
            any(target_feature = "relaxed-simd", feature = "relaxed-simd")
        ))]
        {
            return Kernel::RelaxedSimd;
        }
        #[cfg(all(
            target_arch = "wasm32",
            target_feature = "simd128",
            not(any(target_feature = "relaxed-simd", feature = "relaxed-simd"))
        ))]
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
        // SAFETY: `detect` returned Avx2 or Avx512Vnni only where avx2 and
        // fma are present (the row kernel is used only without the
        // interleaved copy, so it has no VNNI twin).
        Kernel::Avx2 | Kernel::Avx512Vnni => unsafe { avx2::dot_rows(w, scales, zps, acts) },
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Kernel::Simd128 | Kernel::RelaxedSimd => wasm::dot_rows(w, scales, zps, acts),
        _ => scalar(w, scales, zps, acts),
    }
}

/// One activation row as the interleaved kernels read it (`QuantRows`).
#[derive(Clone, Copy)]
pub struct ActSums<'a> {
    /// 32 int8 values a block, in nibble order.
    pub q: &'a [i8],
    /// Per block: the scale.
    pub d: &'a [f32],
    /// Per block: the sum of its values (for a zero point's share).
    pub sum: &'a [i32],
    /// Per block: −8 × `sum`, the share of zero points that are all 8
    /// (`Group::eights`). The wasm kernels start a block's integer sums
    /// from it, which saves a shift and two subtractions per row and block
    /// in a loop bound by its vector instructions (docs/measurements.md).
    pub share8: &'a [i32],
}

/// `ActSums::share8` of a row's block sums: −8 × each, exact (a block's
/// sum is at most 32 · 127 in magnitude).
pub fn share8_of(sum: &[i32]) -> Vec<i32> {
    sum.iter().map(|s| -8 * s).collect()
}

impl ActSums<'_> {
    /// No row: the filler of a fixed array of `ROWS`.
    pub const NONE: ActSums<'static> = ActSums {
        q: &[],
        d: &[],
        sum: &[],
        share8: &[],
    };
}

/// One group of 8 interleaved weight rows (`q4::Packed8::group`), as every
/// kernel's `group_rows` reads it: one value passed down the dispatch
/// layer instead of its four parts repeated in each signature.
#[derive(Clone, Copy)]
pub struct Group<'a> {
    /// `blocks * 128` bytes: step `j` (0..4) of block `b` holds bytes
    /// `4j..4j+4` of each of the 8 rows.
    pub w: &'a [u8],
    /// `blocks * 8`: the rows' scales per block.
    pub scales: &'a [f32],
    /// `blocks * 8`: the rows' zero points per block, as floats.
    pub zps: &'a [f32],
    /// Every value of `zps` is 8 (the builder's files without zero
    /// points), which the wasm kernels use to remove the zero points' share
    /// in integers, with the same result. The native kernels read the 8s
    /// from `zps`.
    pub eights: bool,
}

impl Group<'_> {
    pub fn blocks(&self) -> usize {
        self.scales.len() / 8
    }

    /// Every slice the kernels read holds `blocks()` blocks, and `acts`
    /// at most `ROWS` rows: what the wasm kernels, which read without
    /// bounds checks, need of a call.
    pub fn fits(&self, acts: &[ActSums<'_>]) -> bool {
        let b = self.blocks();
        self.w.len() >= b * 128
            && self.zps.len() >= b * 8
            && acts.len() <= ROWS
            && acts.iter().all(|a| {
                a.q.len() >= b * BLOCK && a.d.len() >= b && a.sum.len() >= b && a.share8.len() >= b
            })
    }
}

/// A group's 8 weight rows against up to `ROWS` activation rows:
/// `out[row][lane]`, lane = weight row in the group.
///
/// # Safety
/// `g.fits(acts)`. The wasm kernels read without bounds checks, and a
/// check on every call cost them a third of their speed (an A/B in
/// docs/measurements.md), so a caller checks once for many calls.
pub unsafe fn group_rows(g: Group<'_>, acts: &[ActSums<'_>]) -> [[f32; 8]; ROWS] {
    debug_assert!(g.fits(acts));
    // SAFETY: per the contract.
    unsafe { group_rows_on(detect(), g, acts) }
}

/// `group_rows` on a given kernel, which must be `detect()` or one it
/// implies (the self-test runs each kernel this CPU has).
///
/// # Safety
/// `g.fits(acts)`.
unsafe fn group_rows_on(kernel: Kernel, g: Group<'_>, acts: &[ActSums<'_>]) -> [[f32; 8]; ROWS] {
    #[cfg(target_arch = "x86_64")]
    match kernel {
        // SAFETY: avx2 and fma were detected.
        Kernel::Avx2 => return unsafe { avx2::group_rows(g, acts) },
        // SAFETY: avx2, fma, avx512f, avx512vl and avx512vnni were detected.
        Kernel::Avx512Vnni => return unsafe { avx512::group_rows(g, acts) },
        _ => {}
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        // One kernel per wasm build: `kernel` names it.
        let _ = kernel;
        // SAFETY: per the contract.
        return unsafe { wasm::group_rows(g, acts) };
    }
    #[allow(unreachable_code)]
    group_rows_scalar(g, acts)
}

/// The same product in plain code, from the same interleaved layout.
pub fn group_rows_scalar(g: Group<'_>, acts: &[ActSums<'_>]) -> [[f32; 8]; ROWS] {
    let Group { w, scales, zps, .. } = g;
    let mut out = [[0f32; 8]; ROWS];
    let blocks = g.blocks();
    for (o, a) in out.iter_mut().zip(acts) {
        let (aq, ad, asum) = (a.q, a.d, a.sum);
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

/// Each 32-block of `a` quantised to int8 (`q`, in nibble order: even
/// elements, then odd), with its scale (`d`: the block's largest magnitude
/// / 127) and the sum of its values (`sum`). The instruction-set versions
/// give `quantise_scalar`'s bits exactly, NaN and infinities included.
pub fn quantise(a: &[f32], q: &mut [i8], d: &mut [f32], sum: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if matches!(detect(), Kernel::Avx2 | Kernel::Avx512Vnni) {
        // SAFETY: avx2 and fma were detected.
        return unsafe { avx2::quantise(a, q, d, sum) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        return wasm::quantise(a, q, d, sum);
    }
    #[allow(unreachable_code)]
    quantise_scalar(a, q, d, sum)
}

/// The whole blocks that every one of `quantise`'s slices has room for:
/// each version quantises exactly these.
fn quantised_blocks(a: &[f32], q: &[i8], d: &[f32], sum: &[i32]) -> usize {
    d.len()
        .min(sum.len())
        .min(a.len() / BLOCK)
        .min(q.len() / BLOCK)
}

/// `quantise` in plain code: the reference.
pub fn quantise_scalar(a: &[f32], q: &mut [i8], d: &mut [f32], sum: &mut [i32]) {
    let blocks = quantised_blocks(a, q, d, sum);
    for (b, (db, sb)) in d.iter_mut().zip(sum.iter_mut()).take(blocks).enumerate() {
        let src = &a[b * BLOCK..(b + 1) * BLOCK];
        // `max` skips NaN, so a NaN value quantises to 0.
        let amax = src.iter().fold(0f32, |x, v| x.max(v.abs()));
        let scale = amax / 127.0;
        let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
        let dst = &mut q[b * BLOCK..(b + 1) * BLOCK];
        let mut s = 0i32;
        // Half away from zero, written out: `f32::round` is a libm call on
        // baseline x86-64 (no SSE4.1).
        let round = |v: f32| (v + 0.5f32.copysign(v)) as i8;
        for j in 0..BLOCK_BYTES {
            let lo = round(src[2 * j] * inv);
            let hi = round(src[2 * j + 1] * inv);
            dst[j] = lo;
            dst[BLOCK_BYTES + j] = hi;
            s += lo as i32 + hi as i32;
        }
        *db = scale;
        *sb = s;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
/// Attention's four-key dot products, per CPU.
pub mod dot4;

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm;

/// A fixed pseudo-random stream (no dependency for a self-test or a
/// benchmark).
pub fn lcg(seed: &mut u64) -> u32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 33) as u32
}

/// Every kernel this CPU runs, fastest first: natively AVX-512 VNNI
/// implies AVX2, so both are tested there; in wasm the build's one.
pub fn available() -> Vec<Kernel> {
    let best = detect();
    match best {
        Kernel::Avx512Vnni => vec![best, Kernel::Avx2],
        _ => vec![best],
    }
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
    (kernel, self_test_on(kernel))
}

/// `self_test` for one kernel (one of `available()`).
pub fn self_test_on(kernel: Kernel) -> f32 {
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
    let eights = vec![8f32; blocks * 8];
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
    let share8: Vec<Vec<i32>> = sums.iter().map(|row| share8_of(row)).collect();
    // The activations' quantisation must give the reference's bits: any
    // difference counts as a whole unit.
    let mut worst = if quantise_differs(&mut seed) {
        1.0f32
    } else {
        0.0
    };
    let mut eights_differ = false;
    let mut grouped_differ = false;
    let mut check =
        |fast: f32, slow: f32| worst = worst.max((fast - slow).abs() / slow.abs().max(1.0));
    for n in 1..=ROWS {
        let plain: Vec<Act<'_>> = (0..n).map(|r| (q[r].as_slice(), d[r].as_slice())).collect();
        let with_sums: Vec<ActSums<'_>> = (0..n)
            .map(|r| ActSums {
                q: &q[r],
                d: &d[r],
                sum: &sums[r],
                share8: &share8[r],
            })
            .collect();
        let group = |zps, eights| Group {
            w: &w,
            scales: &s8,
            zps,
            eights,
        };
        assert!(group(&z8, false).fits(&with_sums));
        // SAFETY: the group and the rows hold `blocks` blocks (asserted).
        let grouped = unsafe { group_rows_on(kernel, group(&z8, false), &with_sums) };
        let twin = group_rows_scalar(group(&z8, false), &with_sums);
        // Every zero point 8: told so, the kernel must give the bits it
        // gives when not told; either way it is held to the reference.
        // SAFETY: as above (the same slices).
        let (told, untold) = unsafe {
            (
                group_rows_on(kernel, group(&eights, true), &with_sums),
                group_rows_on(kernel, group(&eights, false), &with_sums),
            )
        };
        eights_differ |=
            (0..n).any(|r| (0..8).any(|l| told[r][l].to_bits() != untold[r][l].to_bits()));
        // Every build's group kernel multiplies and adds as the plain loops
        // do, unfused, in the same order (ARCHITECTURE: no fused
        // multiply-add that makes builds disagree), so the bits are equal.
        grouped_differ |=
            (0..n).any(|r| (0..8).any(|l| grouped[r][l].to_bits() != twin[r][l].to_bits()));
        for lane in 0..8 {
            for zps in [None, Some(zp[lane].as_slice())] {
                let fast = dot_rows(kernel, &rows[lane], &sc[lane], zps, &plain);
                let slow = scalar(&rows[lane], &sc[lane], zps, &plain);
                for r in 0..n {
                    check(fast[r], slow[r]);
                    if zps.is_some() {
                        check(grouped[r][lane], slow[r]);
                        check(twin[r][lane], slow[r]);
                    } else {
                        check(told[r][lane], slow[r]);
                    }
                }
            }
        }
    }
    // Told that every zero point is 8, a kernel must give the bits it
    // gives untold, and a group kernel the plain loops' bits: any
    // difference counts as a whole unit.
    if eights_differ || grouped_differ {
        worst = 1.0;
    }
    worst
}

/// Whether `quantise` differs from `quantise_scalar` anywhere on blocks of
/// pseudo-random values over six orders of magnitude, with halves to round,
/// and blocks holding zeros only, a NaN, an infinity and negative zeros.
fn quantise_differs(seed: &mut u64) -> bool {
    let blocks = 40;
    let mut a: Vec<f32> = (0..blocks * BLOCK)
        .map(|i| {
            let mag = 10f32.powi((i / BLOCK % 7) as i32 - 3);
            ((lcg(seed) % 20001) as f32 / 10000.0 - 1.0) * mag
        })
        .collect();
    // A block whose largest value is 127: its others are exact halves.
    for (j, v) in a[0..BLOCK].iter_mut().enumerate() {
        *v = if j == 0 { 127.0 } else { j as f32 - 15.5 };
    }
    a[BLOCK..2 * BLOCK].fill(0.0);
    a[2 * BLOCK + 3] = f32::NAN;
    a[3 * BLOCK + 7] = f32::INFINITY;
    a[4 * BLOCK..5 * BLOCK].fill(-0.0);
    let (mut q, mut d, mut sum) = (vec![0i8; a.len()], vec![0f32; blocks], vec![0i32; blocks]);
    let (mut q0, mut d0, mut sum0) = (q.clone(), d.clone(), sum.clone());
    quantise(&a, &mut q, &mut d, &mut sum);
    quantise_scalar(&a, &mut q0, &mut d0, &mut sum0);
    q != q0
        || sum != sum0
        || d.iter()
            .map(|v| v.to_bits())
            .ne(d0.iter().map(|v| v.to_bits()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_quantisation_gives_the_references_bits() {
        let mut seed = 3;
        assert!(!quantise_differs(&mut seed));
    }

    /// The instruction-set kernels equal the scalar reference up to the
    /// order of float additions; a wrong nibble, lane or zero point would be
    /// off by whole units.
    #[test]
    fn the_fast_kernels_equal_the_scalar_reference() {
        for kernel in available() {
            let worst = self_test_on(kernel);
            println!("kernel {kernel:?}: worst relative difference {worst:e}");
            assert!(worst <= 1e-5, "{kernel:?}: {worst}");
        }
    }

    /// The unchecked wasm kernels run only on calls whose every slice holds
    /// the group's blocks: one short slice, or a row too many, is caught.
    #[test]
    fn a_call_fits_only_when_every_slice_holds_the_blocks() {
        let blocks = 2;
        let (w, s8) = (vec![0u8; blocks * 128], vec![1f32; blocks * 8]);
        let (q, d, sums) = (
            vec![0i8; blocks * BLOCK],
            vec![1f32; blocks],
            vec![0i32; blocks],
        );
        let g = Group {
            w: &w,
            scales: &s8,
            zps: &s8,
            eights: true,
        };
        let row = ActSums {
            q: &q,
            d: &d,
            sum: &sums,
            share8: &sums,
        };
        assert!(g.fits(&[row; ROWS]));
        let short = [
            ActSums { q: &q[1..], ..row },
            ActSums { d: &d[1..], ..row },
            ActSums {
                sum: &sums[1..],
                ..row
            },
            ActSums {
                share8: &sums[1..],
                ..row
            },
        ];
        for bad in short {
            assert!(!g.fits(&[row, bad]));
        }
        assert!(!g.fits(&[row; ROWS + 1]));
        assert!(!Group { w: &w[1..], ..g }.fits(&[row]));
        assert!(!Group { zps: &s8[1..], ..g }.fits(&[row]));
    }
}
