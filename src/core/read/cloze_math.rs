//! Cloze readout (scoring the options' own text) and the content-free
//! baseline both modes can divide out. Pure: the engine runs the model and
//! hands the logits here.

use std::collections::{HashMap, VecDeque};

use crate::core::input::mode::ClozeScore;
use crate::core::read::logits::Logits;
use crate::core::read::slots::{log_sum_exp, softmax};
use crate::core::CoreError;

/// log p(`token`) at `row` of a `[1, S, V]` tensor: the full row's
/// log-softmax, in f64 so a sum over a long option keeps its digits.
pub fn row_log_prob(logits: &Logits, row: usize, token: u32) -> Result<f64, CoreError> {
    let d = &logits.dims;
    if d.len() != 3 || d[0] != 1 || row >= d[1] || logits.len() != d[1] * d[2] {
        return Err(CoreError::LogitsLayout {
            dims: d.clone(),
            expected: format!("expected [1, S > {row}, V] with S*V values"),
        });
    }
    let width = d[2];
    let column = token as usize;
    if column >= width {
        return Err(CoreError::LogitsLayout {
            dims: d.clone(),
            expected: format!("token {token} needs a vocabulary wider than {width}"),
        });
    }
    let start = row * width;
    let mut values = Vec::with_capacity(width);
    for c in 0..width {
        let v = logits.get(start + c);
        if !v.is_finite() {
            return Err(CoreError::NonFiniteLogit {
                position: row,
                column: c,
                value: v,
            });
        }
        values.push(v as f64);
    }
    Ok(values[column] - log_sum_exp(values.iter().copied()))
}

/// One option's score from its tokens' log-probabilities.
pub fn option_score(token_log_probs: &[f64], score: ClozeScore) -> f64 {
    let sum: f64 = token_log_probs.iter().sum();
    match score {
        ClozeScore::Sum => sum,
        ClozeScore::Mean => sum / token_log_probs.len().max(1) as f64,
    }
}

/// Probabilities over the options: the softmax of each option's score, less
/// the same option's score after the content-free evidence when given
/// (domain-conditional PMI).
pub fn cloze_probs(
    options: &[Vec<f64>],
    baseline: Option<&[Vec<f64>]>,
    score: ClozeScore,
) -> Vec<f64> {
    let scores: Vec<f64> = options
        .iter()
        .enumerate()
        .map(|(i, lp)| {
            let s = option_score(lp, score);
            match baseline.and_then(|b| b.get(i)) {
                Some(b) => s - option_score(b, score),
                None => s,
            }
        })
        .collect();
    softmax(&scores)
}

/// Contextual calibration: each letter's probability divided by its
/// probability after the content-free evidence, renormalised.
pub fn calibrate_letters(probs: &[f64], baseline: &[f64]) -> Vec<f64> {
    // Work in logs so a letter the baseline all but rules out cannot overflow.
    let logs: Vec<f64> = probs
        .iter()
        .zip(baseline)
        .map(|(p, b)| p.max(f64::MIN_POSITIVE).ln() - b.max(f64::MIN_POSITIVE).ln())
        .collect();
    softmax(&logs)
}

/// What a content-free run measured for one criterion.
#[derive(Debug, Clone, PartialEq)]
pub enum Baseline {
    /// Letter probabilities by slot, for one display order.
    Letters(Vec<f64>),
    /// Token log-probabilities per option, in the criterion's order.
    Cloze(Vec<Vec<f64>>),
}

/// Baselines by key, oldest evicted first once `capacity` is reached. The key
/// holds everything the baseline depends on (model, prompt, instruction,
/// question, options, order) and nothing of the evidence.
#[derive(Debug)]
pub struct BaselineCache {
    capacity: usize,
    map: HashMap<String, Baseline>,
    order: VecDeque<String>,
}

/// Enough for every criterion of a large rubric; a baseline is a few floats per option.
pub const BASELINE_CACHE_CAPACITY: usize = 4096;

impl BaselineCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Baseline> {
        self.map.get(key)
    }

    pub fn insert(&mut self, key: String, value: Baseline) {
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_log_prob_is_the_log_softmax_at_the_token() {
        let l = Logits::f32(vec![1, 2, 3], vec![0.0, 0.0, 0.0, 1.0, 2.0, 3.0]);
        let p = row_log_prob(&l, 0, 1).unwrap();
        assert!((p - (1.0f64 / 3.0).ln()).abs() < 1e-12);
        let z: f64 = [1.0f64, 2.0, 3.0].iter().map(|x| x.exp()).sum();
        let p = row_log_prob(&l, 1, 2).unwrap();
        assert!((p - (3.0f64.exp() / z).ln()).abs() < 1e-12);
        assert!(matches!(
            row_log_prob(&l, 2, 0),
            Err(CoreError::LogitsLayout { .. })
        ));
        assert!(matches!(
            row_log_prob(&l, 0, 3),
            Err(CoreError::LogitsLayout { .. })
        ));
        let bad = Logits::f32(vec![1, 1, 2], vec![0.0, f32::NAN]);
        assert!(matches!(
            row_log_prob(&bad, 0, 0),
            Err(CoreError::NonFiniteLogit { column: 1, .. })
        ));
    }

    #[test]
    fn scores_sum_mean_and_subtract_the_baseline() {
        let opts = vec![vec![-1.0, -1.0], vec![-1.5]];
        // Sum prefers the one-token option, mean the two-token one.
        let sum = cloze_probs(&opts, None, ClozeScore::Sum);
        assert!(sum[1] > sum[0]);
        let mean = cloze_probs(&opts, None, ClozeScore::Mean);
        assert!(mean[0] > mean[1]);
        // A baseline that makes option 0 a priori likely turns the decision.
        let base = vec![vec![-0.1, -0.1], vec![-3.0]];
        let cal = cloze_probs(&opts, Some(&base), ClozeScore::Sum);
        assert!(cal[0] < cal[1]);
        let expect = softmax(&[-2.0 + 0.2, -1.5 + 3.0]);
        assert!((cal[0] - expect[0]).abs() < 1e-12);
    }

    #[test]
    fn letter_calibration_removes_a_pure_position_bias() {
        // The evidence adds nothing: the calibrated answer is uniform.
        let p = calibrate_letters(&[0.7, 0.2, 0.1], &[0.7, 0.2, 0.1]);
        for x in p {
            assert!((x - 1.0 / 3.0).abs() < 1e-12);
        }
        let p = calibrate_letters(&[0.6, 0.4], &[0.8, 0.2]);
        assert!(p[1] > p[0]);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn cache_is_bounded_oldest_first() {
        let mut c = BaselineCache::new(2);
        c.insert("a".into(), Baseline::Letters(vec![1.0]));
        c.insert("b".into(), Baseline::Letters(vec![2.0]));
        c.insert("a".into(), Baseline::Letters(vec![3.0]));
        assert_eq!(c.len(), 2);
        c.insert("c".into(), Baseline::Letters(vec![4.0]));
        assert_eq!(c.len(), 2);
        assert!(c.get("a").is_none());
        assert_eq!(c.get("b"), Some(&Baseline::Letters(vec![2.0])));
        assert_eq!(c.get("c"), Some(&Baseline::Letters(vec![4.0])));
    }
}
