//! `exp` for float32 in plain arithmetic, so a loop over it vectorises:
//! `f32::exp` is a libm call per value (glibc natively, a software port in
//! wasm): 4–5 % of a readout run natively in `perf` (attention's softmax,
//! the sigmoid), plus the registers spilled around each call. Cephes'
//! `expf` polynomial: 8e-8 relative from f64 at worst over the range used
//! (tested ≤ 2.4e-7).

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split in two, so `n · ln 2` is subtracted without losing bits.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 · 2²³: adding and subtracting it rounds to the nearest integer
/// (`f32::round` is a libm call too, on x86_64 without SSE4.1).
const ROUNDER: f32 = 12_582_912.0;

#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Below -87 the result would leave the normal range (and 2^n below);
    // softmax's inputs there round to 0 against a sum of at least 1 anyway.
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * LOG2E + ROUNDER;
    let n = shifted - ROUNDER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_2e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // 2^n from `shifted`'s bits: it is 1.5 · 2^23 + n exactly, where a
    // float's step is 1, so its bits are those of 1.5 · 2^23 plus n. `n as
    // i32` gives the same integer, but Rust's cast saturates (NaN to 0),
    // and the compiler did that lane by lane, a fifth of attention's time
    // on AVX-512. A NaN `x` gives NaN either way, through `y`.
    let biased = shifted
        .to_bits()
        .wrapping_sub(ROUNDER_BITS)
        .wrapping_add(127);
    y * f32::from_bits(biased << 23)
}

/// `ROUNDER`'s bits.
const ROUNDER_BITS: u32 = 0x4B40_0000;

#[cfg(test)]
mod tests {
    use super::*;

    /// Against f64's exp on a dense sweep of softmax's and the sigmoid's
    /// inputs: relative error within 2 float32 ulps (2.4e-7).
    #[test]
    fn exp_is_within_two_ulps_of_f64() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x <= 88.0 {
            let want = (x as f64).exp();
            let got = exp(x) as f64;
            worst = worst.max((got - want).abs() / want);
            x += 0.000_37;
        }
        for x in [0.0f32, -0.0, 1e-8, -1e-8, 1.0, -1.0, 0.5, -0.5] {
            let want = (x as f64).exp();
            worst = worst.max((exp(x) as f64 - want).abs() / want);
        }
        println!("worst relative error {worst:e}");
        assert!(worst < 2.4e-7, "{worst}");
        // Far below the range: 0-ish, never NaN or negative.
        assert!(exp(-1e4) >= 0.0 && exp(-1e4) < 1e-37);
        assert_eq!(exp(f32::NEG_INFINITY), exp(-87.0));
        assert!(exp(f32::NAN).is_nan());
    }

    /// The power of two taken from the rounded value's bits is the one
    /// the saturating cast gave, over every input the clamp lets through
    /// (a dense sweep and the ends), so `exp` kept its bits.
    #[test]
    fn the_power_of_two_from_the_bits_equals_the_cast() {
        assert_eq!(ROUNDER.to_bits(), ROUNDER_BITS);
        let mut x = -87.0f32;
        while x <= 88.0 {
            let shifted = x * LOG2E + ROUNDER;
            let n = shifted - ROUNDER;
            let cast = ((n as i32 + 127) as u32) << 23;
            let bits = shifted
                .to_bits()
                .wrapping_sub(ROUNDER_BITS)
                .wrapping_add(127)
                << 23;
            assert_eq!(bits, cast, "x = {x}");
            x = if x < 88.0 {
                (x + 0.013).min(88.0)
            } else {
                89.0
            };
        }
    }
}
