//! `head_rows.json`: the letter rows of a head as float32, written beside a
//! graph that exposes its hidden state, so the engine can prove (spec §6.4)
//! that `hidden · row + bias` reproduces the logits it was handed.

use serde::{Deserialize, Serialize};

use crate::core::CoreError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadRows {
    pub version: u32,
    /// Logits column of each row (a vocabulary id, or a pruned head's row).
    pub columns: Vec<usize>,
    pub rows: Vec<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<Vec<f32>>,
    /// Set when the head's kernel rounds its input to int8 in blocks of this
    /// many values before the dot products (MatMulNBits at accuracy_level 4,
    /// ONNX Runtime's CPU default), which the miss bound must allow for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int8_input_block: Option<usize>,
}

impl HeadRows {
    pub fn parse(json: &str) -> Result<Self, CoreError> {
        let r: Self = serde_json::from_str(json)
            .map_err(|e| CoreError::Config(format!("head_rows.json: {e}")))?;
        if r.version != 1
            || r.columns.len() != r.rows.len()
            || r.bias.as_ref().is_some_and(|b| b.len() != r.rows.len())
        {
            return Err(CoreError::Config(
                "head_rows.json: version must be 1 and columns, rows, bias the same length".into(),
            ));
        }
        Ok(r)
    }

    /// How far the graph's logit for row `i` may lie from `hidden · row_i +
    /// bias_i` computed exactly, for a kernel that computes that very product:
    ///
    /// - int8 input (`int8_input_block`): each block of the input is stored
    ///   as round(x / s) · s with s = max|x in block| / 127, so each value
    ///   moves by at most s / 2 and the dot product by Σ_blocks (s / 2) ·
    ///   Σ_block |w|. This is the whole of the 0.11 miss measured on
    ///   SmolLM2 q4 (hidden values up to tens, so s reaches 0.1 and more).
    /// - float accumulation of K products in f32: at most K · 2⁻²⁴ · Σ|w·x|
    ///   (the classic bound for a sum of K terms), taken twice over.
    /// - the result and the bias add rounded to the logits' dtype: two units
    ///   of its epsilon at |logit| + |bias| (f16 2⁻¹⁰, f32 2⁻²³).
    ///
    /// A row of another token misses by the difference between two tokens'
    /// logits, which is far outside this bound unless both logits happen to
    /// agree to within it.
    pub fn miss_bound(&self, i: usize, hidden: &[f32], logit: f64, f16_logits: bool) -> f64 {
        let row = &self.rows[i];
        let k = row.len().min(hidden.len());
        let products: f64 = row
            .iter()
            .zip(hidden)
            .map(|(w, x)| (*w as f64 * *x as f64).abs())
            .sum();
        let accumulate = 2.0 * k as f64 * 2f64.powi(-24) * products;
        let quantise = match self.int8_input_block {
            Some(block) if block > 0 => row[..k]
                .chunks(block)
                .zip(hidden[..k].chunks(block))
                .map(|(w, x)| {
                    let scale = x.iter().fold(0f64, |m, v| m.max(v.abs() as f64)) / 127.0;
                    scale / 2.0 * w.iter().map(|v| v.abs() as f64).sum::<f64>()
                })
                .sum(),
            _ => 0.0,
        };
        let bias = self.bias.as_ref().map_or(0.0, |b| (b[i] as f64).abs());
        let eps = if f16_logits {
            2f64.powi(-10)
        } else {
            2f64.powi(-23)
        };
        quantise + accumulate + 2.0 * eps * (logit.abs() + bias)
    }

    /// `hidden · row_i + bias_i` for every row.
    pub fn project(&self, hidden: &[f32]) -> Vec<f64> {
        self.rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let dot: f64 = row
                    .iter()
                    .zip(hidden)
                    .map(|(a, b)| *a as f64 * *b as f64)
                    .sum();
                dot + self.bias.as_ref().map_or(0.0, |b| b[i] as f64)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projects_with_bias_and_refuses_ragged_files() {
        let r = HeadRows {
            version: 1,
            columns: vec![5, 9],
            rows: vec![vec![1.0, 2.0], vec![0.5, -1.0]],
            bias: Some(vec![0.25, 0.0]),
            int8_input_block: None,
        };
        assert_eq!(r.project(&[2.0, 1.0]), vec![4.25, 0.0]);
        assert_eq!(
            HeadRows::parse(&serde_json::to_string(&r).unwrap()).unwrap(),
            r
        );
        assert!(HeadRows::parse(r#"{"version":1,"columns":[1],"rows":[]}"#).is_err());
    }

    #[test]
    fn the_int8_bound_covers_rounding_each_block_and_nothing_more() {
        // Block of 2: x = [1.0, 0.3] has scale 1/127; 0.3 rounds to 38/127
        // (off by 0.0008), within scale/2 = 0.0039.
        let r = HeadRows {
            version: 1,
            columns: vec![0],
            rows: vec![vec![2.0, -1.0]],
            bias: None,
            int8_input_block: Some(2),
        };
        let x = [1.0f32, 0.3];
        let exact = r.project(&x)[0];
        let q: Vec<f32> = x.iter().map(|v| (v * 127.0).round() / 127.0).collect();
        let kernel = r.project(&q)[0];
        let bound = r.miss_bound(0, &x, exact, false);
        assert!(
            (kernel - exact).abs() <= bound,
            "{} > {bound}",
            (kernel - exact).abs()
        );
        let quant_part = 1.0 / 127.0 / 2.0 * 3.0;
        assert!(bound >= quant_part && bound < quant_part * 1.01, "{bound}");
        let float = HeadRows {
            int8_input_block: None,
            ..r
        };
        assert!(float.miss_bound(0, &x, exact, false) < 1e-6);
    }
}
