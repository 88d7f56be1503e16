//! The wasm32 SIMD128 kernels (the build enables simd128 for every browser it
//! targets), and the relaxed-SIMD dot product where the build enables it.

use super::{Act, ActSums, Group, BLOCK, BLOCK_BYTES, ROWS};
use core::arch::wasm32::*;

/// Step `j` of block `b` of an interleaved group: 8 rows × 4 bytes in two
/// vectors, as nibbles `[lo0, hi0, lo1, hi1]`.
///
/// # Safety
/// `w` holds block `b`'s 4 steps of 32 bytes.
#[inline(always)]
unsafe fn weight_step(w: &[u8], b: usize, j: usize) -> [v128; 4] {
    let mask = u8x16_splat(15);
    // SAFETY: per the contract.
    let (w0, w1) = unsafe {
        let p = w.as_ptr().add((b * 4 + j) * 32);
        (
            v128_load(p as *const v128),
            v128_load(p.add(16) as *const v128),
        )
    };
    [
        v128_and(w0, mask),
        v128_and(u16x8_shr(w0, 4), mask),
        v128_and(w1, mask),
        v128_and(u16x8_shr(w1, 4), mask),
    ]
}

/// The activations step `j` of block `b` pairs with, 4 bytes each splat
/// across a vector: (the low nibbles' partner, the high nibbles').
///
/// # Safety
/// `a` holds block `b` (32 values in nibble order).
#[inline(always)]
unsafe fn act_step(a: &[i8], b: usize, j: usize) -> (v128, v128) {
    // SAFETY: per the contract.
    unsafe {
        let p = a.as_ptr().add(b * BLOCK + 4 * j);
        (
            i32x4_splat((p as *const i32).read_unaligned()),
            i32x4_splat((p.add(BLOCK_BYTES) as *const i32).read_unaligned()),
        )
    }
}

/// Block `b`'s 8 row scales and 8 zero points, as two vectors each.
///
/// # Safety
/// `scales` and `zps` hold 8 values for each block up to `b`.
#[inline(always)]
unsafe fn block_params(scales: &[f32], zps: &[f32], b: usize) -> ([v128; 2], [v128; 2]) {
    // SAFETY: per the contract.
    unsafe {
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
    }
}

/// An activation row's block-`b` scale and, unless `EIGHT` (every zero
/// point is 8, whose share the integer sums already hold), its sum as a
/// float, each splat across a vector straight from memory: a scalar
/// convert and splat, and the slices' bounds checks, cost the hot loop
/// vector-port time per row and block.
///
/// # Safety
/// `a.d` and `a.sum` hold at least `b + 1` values.
#[inline(always)]
unsafe fn act_block<const EIGHT: bool>(a: &ActSums<'_>, b: usize) -> (v128, v128) {
    // SAFETY: per the contract.
    unsafe {
        let d = v128_load32_splat(a.d.as_ptr().add(b) as *const u32);
        if EIGHT {
            // The second is not read: the sums hold the share already.
            (d, d)
        } else {
            let s = v128_load32_splat(a.sum.as_ptr().add(b) as *const u32);
            (d, f32x4_convert_i32x4(s))
        }
    }
}

/// An activation row's block-`b` share of zero points that are all 8
/// (`ActSums::share8`), splat: where that block's integer sums start.
///
/// # Safety
/// `a.share8` holds at least `b + 1` values.
#[inline(always)]
unsafe fn share8(a: &ActSums<'_>, b: usize) -> v128 {
    // SAFETY: per the contract.
    unsafe { v128_load32_splat(a.share8.as_ptr().add(b) as *const u32) }
}

/// Adds one block's exact integer sums for 8 rows to `acc`: the zero
/// points' share removed, then scaled by the weights' and the activations'
/// scales (`act`: the activation block's scale and sum, from `act_block`).
/// With `EIGHT` the sums already hold the share, −8 × the activations'
/// sum, as their start (`share8`): no operation here, where the float way
/// takes a multiply and a subtraction, and the same bits, because both
/// ways are exact. A block's sum of products is at most 32 · 15 · 127 and
/// 8 × its activations' sum at most 8 · 32 · 127 in magnitude, far below
/// 2^24, so every integer here and their difference convert to float
/// without rounding.
#[inline(always)]
fn add_block<const EIGHT: bool>(
    acc: &mut [v128; 2],
    ints: [v128; 2],
    params: &([v128; 2], [v128; 2]),
    act: (v128, v128),
) {
    let (sv, zv) = params;
    let (d, sum) = act;
    for h in 0..2 {
        let exact = if EIGHT {
            f32x4_convert_i32x4(ints[h])
        } else {
            f32x4_sub(f32x4_convert_i32x4(ints[h]), f32x4_mul(zv[h], sum))
        };
        acc[h] = f32x4_add(acc[h], f32x4_mul(exact, f32x4_mul(sv[h], d)));
    }
}

/// The first `n` rows' accumulators as plain floats.
#[inline(always)]
fn lanes(acc: &[[v128; 2]; ROWS], n: usize) -> [[f32; 8]; ROWS] {
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

/// See `super::group_rows`: this build's `rows`, compiled once for files
/// whose zero points are all 8 and once for the rest.
///
/// # Safety
/// `g.fits(acts)`: `rows` reads without bounds checks.
pub unsafe fn group_rows(g: Group<'_>, acts: &[ActSums<'_>]) -> [[f32; 8]; ROWS] {
    if g.eights {
        rows::<true>(g, acts)
    } else {
        rows::<false>(g, acts)
    }
}

/// The single-thread build's `rows`. SIMD128 has no byte dot product, so both
/// sides are widened to 16 bits and `i32x4.dot_i16x8_s` (one `pmaddwd` on
/// x86) multiplies and adds pairs: a 16-byte weight vector holds 4 rows × 4
/// bytes, widened in two halves of 2 rows each, once per step for all the
/// activation rows; the activations' 4 bytes are splat across a vector, and
/// its low half widened is the same 4 values twice, as the 2 rows need.
/// Each lane sums 2 products for one row, as `extadd_pairwise` of 16-bit
/// products did before (two `extmul`s, an add and the widening per pair of
/// rows: 2.8× the relaxed dot product's cost per criterion in Chromium).
/// Integer sums are exact either way, so the result is the same.
#[cfg(not(any(target_feature = "relaxed-simd", feature = "relaxed-simd")))]
#[inline(always)]
fn rows<const EIGHT: bool>(g: Group<'_>, acts: &[ActSums<'_>]) -> [[f32; 8]; ROWS] {
    let Group { w, scales, zps, .. } = g;
    let n = acts.len();
    let blocks = g.blocks();
    let zero = i32x4_splat(0);
    let mut acc = [[f32x4_splat(0.0); 2]; ROWS];
    for b in 0..blocks {
        // Per activation row: [rows 0-1, rows 2-3, rows 4-5, rows 6-7],
        // each lane a partial sum of one row.
        let mut is = [[zero; 4]; ROWS];
        for j in 0..4 {
            // SAFETY: `w` holds `blocks` blocks of 4 steps of 32 bytes.
            let [lo0, hi0, lo1, hi1] = unsafe { weight_step(w, b, j) };
            let wide = |x: v128| (u16x8_extend_low_u8x16(x), u16x8_extend_high_u8x16(x));
            let ((lo0a, lo0b), (hi0a, hi0b)) = (wide(lo0), wide(hi0));
            let ((lo1a, lo1b), (hi1a, hi1b)) = (wide(lo1), wide(hi1));
            for r in 0..n {
                // SAFETY: each activation row holds `blocks` blocks of 32.
                let (alo, ahi) = unsafe { act_step(acts[r].q, b, j) };
                let (alo, ahi) = (i16x8_extend_low_i8x16(alo), i16x8_extend_low_i8x16(ahi));
                let pair =
                    |l: v128, h: v128| i32x4_add(i32x4_dot_i16x8(l, alo), i32x4_dot_i16x8(h, ahi));
                let s = &mut is[r];
                s[0] = i32x4_add(s[0], pair(lo0a, hi0a));
                s[1] = i32x4_add(s[1], pair(lo0b, hi0b));
                s[2] = i32x4_add(s[2], pair(lo1a, hi1a));
                s[3] = i32x4_add(s[3], pair(lo1b, hi1b));
            }
        }
        // SAFETY: 8 scales and 8 zero points per block.
        let params = unsafe { block_params(scales, zps, b) };
        for r in 0..n {
            let p = is[r];
            // [r0a, r0b, r1a, r1b] and [r2a, r2b, r3a, r3b] → [r0, r1, r2, r3].
            let rows = |x: v128, y: v128| {
                i32x4_add(
                    i32x4_shuffle::<0, 2, 4, 6>(x, y),
                    i32x4_shuffle::<1, 3, 5, 7>(x, y),
                )
            };
            let mut ints = [rows(p[0], p[1]), rows(p[2], p[3])];
            if EIGHT {
                // SAFETY: each activation row holds `blocks` blocks.
                let share = unsafe { share8(&acts[r], b) };
                ints = ints.map(|x| i32x4_add(x, share));
            }
            // SAFETY: each activation row holds `blocks` blocks.
            add_block::<EIGHT>(&mut acc[r], ints, &params, unsafe {
                act_block::<EIGHT>(&acts[r], b)
            });
        }
    }
    lanes(&acc, n)
}

/// The relaxed-SIMD builds' `rows`: the threaded build (every browser with
/// wasm threads in Chromium's line has relaxed SIMD since 114), where the
/// whole module is compiled for it, and the single-thread build with the
/// `relaxed-simd` feature, where only this function is (so it cannot be
/// inlined: `inline(always)` and `target_feature` exclude each other). One
/// `i32x4.relaxed_dot_i8x16_i7x16_add` multiplies 4 rows × 4 bytes with the
/// activations' 4 bytes and adds each row's four products into its i32 lane,
/// where SIMD128 needs two extmuls, adds and a pairwise widening. The nibbles
/// (0..15) are valid 7-bit operands, and a pair's sum (at most 2 · 15 · 128)
/// fits the 16 bits an implementation may keep in between, so the result is
/// exact on every implementation the proposal allows.
#[cfg(any(target_feature = "relaxed-simd", feature = "relaxed-simd"))]
#[cfg_attr(target_feature = "relaxed-simd", inline(always))]
#[cfg_attr(
    not(target_feature = "relaxed-simd"),
    target_feature(enable = "relaxed-simd")
)]
fn rows<const EIGHT: bool>(g: Group<'_>, acts: &[ActSums<'_>]) -> [[f32; 8]; ROWS] {
    let Group { w, scales, zps, .. } = g;
    let n = acts.len();
    let blocks = g.blocks();
    let zero = i32x4_splat(0);
    let mut acc = [[f32x4_splat(0.0); 2]; ROWS];
    for b in 0..blocks {
        let mut ints = [[zero; 2]; ROWS];
        if EIGHT {
            // The zero points' share as the start: the shift and the two
            // subtractions it saves per row and block were about a tenth
            // of the vector instructions this loop issues, which bound it.
            for r in 0..n {
                // SAFETY: each activation row holds `blocks` blocks.
                let share = unsafe { share8(&acts[r], b) };
                ints[r] = [share, share];
            }
        }
        for j in 0..4 {
            // SAFETY: `w` holds `blocks` blocks of 4 steps of 32 bytes.
            let [lo0, hi0, lo1, hi1] = unsafe { weight_step(w, b, j) };
            for r in 0..n {
                // SAFETY: each activation row holds `blocks` blocks of 32.
                let (alo, ahi) = unsafe { act_step(acts[r].q, b, j) };
                let s = &mut ints[r];
                s[0] = i32x4_relaxed_dot_i8x16_i7x16_add(alo, lo0, s[0]);
                s[0] = i32x4_relaxed_dot_i8x16_i7x16_add(ahi, hi0, s[0]);
                s[1] = i32x4_relaxed_dot_i8x16_i7x16_add(alo, lo1, s[1]);
                s[1] = i32x4_relaxed_dot_i8x16_i7x16_add(ahi, hi1, s[1]);
            }
        }
        // SAFETY: 8 scales and 8 zero points per block.
        let params = unsafe { block_params(scales, zps, b) };
        for r in 0..n {
            // SAFETY: each activation row holds `blocks` blocks.
            add_block::<EIGHT>(&mut acc[r], ints[r], &params, unsafe {
                act_block::<EIGHT>(&acts[r], b)
            });
        }
    }
    lanes(&acc, n)
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

/// See `super::quantise`: per block, 8 loads of 4, the largest magnitude
/// (`pmax` keeps its first operand against a NaN, as `f32::max` skips it),
/// then each value scaled, rounded half away from zero and truncated with
/// saturation (NaN to 0, as `as i8`), narrowed to bytes in element order
/// and split into even and odd elements by one shuffle each.
pub fn quantise(a: &[f32], q: &mut [i8], d: &mut [f32], sum: &mut [i32]) {
    let blocks = super::quantised_blocks(a, q, d, sum);
    let sign = f32x4_splat(-0.0);
    let half = f32x4_splat(0.5);
    for b in 0..blocks {
        let src = &a[b * BLOCK..(b + 1) * BLOCK];
        // SAFETY: `src` holds 32 values.
        let v: [v128; 8] =
            std::array::from_fn(|i| unsafe { v128_load(src.as_ptr().add(4 * i) as *const v128) });
        let mut m = f32x4_splat(0.0);
        for x in v {
            m = f32x4_pmax(m, f32x4_abs(x));
        }
        let amax = f32x4_extract_lane::<0>(m)
            .max(f32x4_extract_lane::<1>(m))
            .max(f32x4_extract_lane::<2>(m))
            .max(f32x4_extract_lane::<3>(m));
        let scale = amax / 127.0;
        let inv = f32x4_splat(if scale > 0.0 { 1.0 / scale } else { 0.0 });
        let t: [v128; 8] = v.map(|x| {
            let x = f32x4_mul(x, inv);
            i32x4_trunc_sat_f32x4(f32x4_add(x, v128_or(v128_and(x, sign), half)))
        });
        let mut s4 = t[0];
        for x in &t[1..] {
            s4 = i32x4_add(s4, *x);
        }
        let s = i32x4_extract_lane::<0>(s4)
            + i32x4_extract_lane::<1>(s4)
            + i32x4_extract_lane::<2>(s4)
            + i32x4_extract_lane::<3>(s4);
        let bytes = |i: usize| {
            i8x16_narrow_i16x8(
                i16x8_narrow_i32x4(t[i], t[i + 1]),
                i16x8_narrow_i32x4(t[i + 2], t[i + 3]),
            )
        };
        let (first, second) = (bytes(0), bytes(4));
        let even = i8x16_shuffle::<0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30>(
            first, second,
        );
        let odd = i8x16_shuffle::<1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31>(
            first, second,
        );
        let dst = &mut q[b * BLOCK..(b + 1) * BLOCK];
        // SAFETY: `dst` holds 32 bytes.
        unsafe {
            v128_store(dst.as_mut_ptr() as *mut v128, even);
            v128_store(dst.as_mut_ptr().add(BLOCK_BYTES) as *mut v128, odd);
        }
        d[b] = scale;
        sum[b] = s;
    }
}
