//! readSlots (spec §7.3): gather the option letters' logits at the last
//! position of the tensor actually returned and softmax over them.

use crate::core::read::logits::Logits;
use crate::core::CoreError;

/// Where the letters live in the returned tensor's last axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadColumns {
    /// A full-vocabulary head: `dims[2]` must be `vocab`; `allowed_mass` is defined.
    Vocab { vocab: usize },
    /// A pruned head of `rows` rows (slot map); no full softmax exists.
    Pruned { rows: usize },
}

impl HeadColumns {
    pub fn width(&self) -> usize {
        match self {
            Self::Vocab { vocab } => *vocab,
            Self::Pruned { rows } => *rows,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SlotReadout {
    /// The gathered logits, in the order of `columns`.
    pub logits: Vec<f32>,
    /// Softmax over the gathered logits.
    pub probs: Vec<f64>,
    /// The letters' share of the full-vocabulary softmax (unpruned only).
    pub allowed_mass: Option<f64>,
}

/// Checks `[1, S, W]` against the head and returns the readout offset, `dims[1] - 1`.
pub fn readout_offset(logits: &Logits, head: &HeadColumns) -> Result<usize, CoreError> {
    let d = &logits.dims;
    let expected = || {
        format!(
            "expected [1, S >= 1, {}] with {} values",
            head.width(),
            "S*W"
        )
    };
    if d.len() != 3 || d[0] != 1 || d[1] == 0 || d[2] != head.width() || logits.len() != d[1] * d[2]
    {
        return Err(CoreError::LogitsLayout {
            dims: d.clone(),
            expected: expected(),
        });
    }
    Ok(d[1] - 1)
}

/// Numerically stable log-sum-exp in f64.
pub fn log_sum_exp(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = values.clone().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    max + values.map(|v| (v - max).exp()).sum::<f64>().ln()
}

pub fn softmax(logits: &[f64]) -> Vec<f64> {
    let lse = log_sum_exp(logits.iter().copied());
    logits.iter().map(|l| (l - lse).exp()).collect()
}

/// Reads `columns` (vocabulary ids or pruned rows) at the last position.
pub fn read_slots(
    logits: &Logits,
    head: &HeadColumns,
    columns: &[usize],
    want_allowed_mass: bool,
) -> Result<SlotReadout, CoreError> {
    let offset = readout_offset(logits, head)?;
    let width = head.width();
    let base = offset * width;
    let mut gathered = Vec::with_capacity(columns.len());
    for &c in columns {
        if c >= width {
            return Err(CoreError::LogitsLayout {
                dims: logits.dims.clone(),
                expected: format!("column {c} inside a last axis of {width}"),
            });
        }
        let v = logits.get(base + c);
        if !v.is_finite() {
            return Err(CoreError::NonFiniteLogit {
                position: offset,
                column: c,
                value: v,
            });
        }
        gathered.push(v);
    }
    let lse_all = match head {
        HeadColumns::Vocab { .. } if want_allowed_mass => {
            let row = (base..base + width).map(|i| logits.get(i));
            if let Some((i, v)) = row.clone().enumerate().find(|(_, v)| !v.is_finite()) {
                return Err(CoreError::NonFiniteLogit {
                    position: offset,
                    column: i,
                    value: v,
                });
            }
            Some(log_sum_exp(row.map(|v| v as f64)))
        }
        _ => None,
    };
    Ok(from_gathered(gathered, lse_all))
}

/// The readout from the letters' logits and, for a full head, the row's
/// log-sum-exp: shared by the CPU path above and the GPU kernel's result.
pub fn from_gathered(gathered: Vec<f32>, row_log_sum_exp: Option<f64>) -> SlotReadout {
    let wide: Vec<f64> = gathered.iter().map(|&v| v as f64).collect();
    let probs = softmax(&wide);
    let allowed_mass = row_log_sum_exp.map(|all| (log_sum_exp(wide.iter().copied()) - all).exp());
    SlotReadout {
        logits: gathered,
        probs,
        allowed_mass,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// A deterministic [1, S, V] tensor with structure in every row.
    fn full(s: usize, v: usize) -> Vec<f32> {
        (0..s * v)
            .map(|i| ((i * 7919 % 1000) as f32 / 100.0) - 5.0)
            .collect()
    }

    #[test]
    fn same_answer_on_full_last_and_pruned_views() {
        let (s, v) = (6, 50);
        let data = full(s, v);
        let cols = [17usize, 3, 42, 8];
        let stock = Logits::f32(vec![1, s, v], data.clone());
        let last = Logits::f32(vec![1, 1, v], data[(s - 1) * v..].to_vec());
        let pruned_rows: Vec<f32> = cols.iter().map(|&c| data[(s - 1) * v + c]).collect();
        let pruned = Logits::f32(vec![1, 1, 4], pruned_rows);
        let a = read_slots(&stock, &HeadColumns::Vocab { vocab: v }, &cols, true).unwrap();
        let b = read_slots(&last, &HeadColumns::Vocab { vocab: v }, &cols, true).unwrap();
        let c = read_slots(
            &pruned,
            &HeadColumns::Pruned { rows: 4 },
            &[0, 1, 2, 3],
            true,
        )
        .unwrap();
        assert_eq!(a.probs, b.probs);
        assert_eq!(a.probs, c.probs);
        assert_eq!(a.allowed_mass, b.allowed_mass);
        assert!(a.allowed_mass.unwrap() > 0.0 && a.allowed_mass.unwrap() < 1.0);
        assert_eq!(c.allowed_mass, None);
        // The offset is the returned tensor's, not the suffix length: a view
        // that reads position 0 of the stock tensor would differ.
        let first = Logits::f32(vec![1, 1, v], data[..v].to_vec());
        let d = read_slots(&first, &HeadColumns::Vocab { vocab: v }, &cols, true).unwrap();
        assert_ne!(a.probs, d.probs);
    }

    #[test]
    fn softmax_and_allowed_mass_by_hand() {
        let l = Logits::f32(vec![1, 1, 4], vec![0.0, (2.0f32).ln(), 0.0, 0.0]);
        let r = read_slots(&l, &HeadColumns::Vocab { vocab: 4 }, &[0, 1], true).unwrap();
        // ln 2 rounds in f32, hence 1e-7 rather than exact equality.
        assert!((r.probs[0] - 1.0 / 3.0).abs() < 1e-7 && (r.probs[1] - 2.0 / 3.0).abs() < 1e-7);
        assert!((r.allowed_mass.unwrap() - 3.0 / 5.0).abs() < 1e-7);
    }

    #[test]
    fn f16_view_reads_the_same() {
        let vals = [1.5f32, -2.0, 0.25, 3.0];
        let a = Logits::f32(vec![1, 1, 4], vals.to_vec());
        let b = Logits::f16(
            vec![1, 1, 4],
            vals.iter().map(|&x| f16::from_f32(x)).collect(),
        );
        let h = HeadColumns::Vocab { vocab: 4 };
        assert_eq!(
            read_slots(&a, &h, &[3, 0], true).unwrap(),
            read_slots(&b, &h, &[3, 0], true).unwrap()
        );
    }

    #[test]
    fn wrong_width_and_non_finite_are_errors() {
        let l = Logits::f32(vec![1, 2, 3], vec![0.0; 6]);
        assert!(matches!(
            read_slots(&l, &HeadColumns::Vocab { vocab: 4 }, &[0], false),
            Err(CoreError::LogitsLayout { .. })
        ));
        let l = Logits::f32(vec![1, 1, 3], vec![0.0, f32::NAN, 1.0]);
        assert!(matches!(
            read_slots(&l, &HeadColumns::Pruned { rows: 3 }, &[0, 1], false),
            Err(CoreError::NonFiniteLogit { column: 1, .. })
        ));
        // A non-finite logit outside the letters still poisons allowed_mass.
        let l = Logits::f32(vec![1, 1, 3], vec![0.0, 1.0, f32::INFINITY]);
        assert!(read_slots(&l, &HeadColumns::Vocab { vocab: 3 }, &[0, 1], true).is_err());
        assert!(read_slots(&l, &HeadColumns::Vocab { vocab: 3 }, &[0, 1], false).is_ok());
    }
}
