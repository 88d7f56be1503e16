//! `head_rows.json`: the letter rows of a head as float32, written beside a
//! graph that exposes its hidden state, so the engine can prove (DESIGN §6.4)
//! that `hidden · row + bias` reproduces the logits it was handed.

use serde::{Deserialize, Serialize};

use super::CoreError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadRows {
    pub version: u32,
    /// Logits column of each row (a vocabulary id, or a pruned head's row).
    pub columns: Vec<usize>,
    pub rows: Vec<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<Vec<f32>>,
}

impl HeadRows {
    pub fn parse(json: &str) -> Result<Self, CoreError> {
        let r: Self = serde_json::from_str(json).map_err(|e| CoreError::Config(format!("head_rows.json: {e}")))?;
        if r.version != 1 || r.columns.len() != r.rows.len() || r.bias.as_ref().is_some_and(|b| b.len() != r.rows.len()) {
            return Err(CoreError::Config("head_rows.json: version must be 1 and columns, rows, bias the same length".into()));
        }
        Ok(r)
    }

    /// `hidden · row_i + bias_i` for every row.
    pub fn project(&self, hidden: &[f32]) -> Vec<f64> {
        self.rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let dot: f64 = row.iter().zip(hidden).map(|(a, b)| *a as f64 * *b as f64).sum();
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
        let r = HeadRows { version: 1, columns: vec![5, 9], rows: vec![vec![1.0, 2.0], vec![0.5, -1.0]], bias: Some(vec![0.25, 0.0]) };
        assert_eq!(r.project(&[2.0, 1.0]), vec![4.25, 0.0]);
        assert_eq!(HeadRows::parse(&serde_json::to_string(&r).unwrap()).unwrap(), r);
        assert!(HeadRows::parse(r#"{"version":1,"columns":[1],"rows":[]}"#).is_err());
    }
}
