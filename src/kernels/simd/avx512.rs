//! The x86_64 kernel with AVX-512 VNNI (on 256-bit registers, which
//! AVX-512VL allows): `vpdpbusd` multiplies unsigned bytes by signed bytes
//! and adds groups of 4 into 32-bit lanes in one instruction, where AVX2
//! takes `maddubs`, a 16-bit add and a widening `madd`.

use super::{ActSums, Group, ROWS};
use std::arch::x86_64::*;

/// See `super::group_rows`; `avx2::group_rows_by`'s frame (layout, loads
/// and order of float additions), with each step's nibbles, which are
/// unsigned, going straight into `vpdpbusd` against their 4 broadcast
/// activation bytes. The 32-bit sums cannot overflow (32 products of at
/// most 15 · 128 per block).
///
/// # Safety
/// The CPU has every feature this function enables, and `g.fits(acts)`.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl,avx512vnni")]
pub unsafe fn group_rows(g: Group<'_>, acts: &[ActSums<'_>]) -> [[f32; 8]; ROWS] {
    // SAFETY: the caller's CPU has every feature this function enables.
    unsafe {
        super::avx2::group_rows_by(
            g,
            acts,
            |sum, lo, hi, alo, ahi| _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(sum, lo, alo), hi, ahi),
            |sum| sum,
        )
    }
}
