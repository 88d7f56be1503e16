//! Evaluation metrics (spec §10): balanced accuracy per family, ECE, Brier,
//! NLL, order-unstable count, and a temperature fitted on one half.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::core::read::debias::argmax;
use crate::core::read::slots::softmax;

/// One scored criterion with a gold answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub family: String,
    /// The gold option's index into `probs`.
    pub gold: usize,
    /// The gold option's id: the class balanced accuracy averages over.
    pub gold_class: String,
    pub probs: Vec<f64>,
    pub order_unstable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub accuracy: f64,
    pub balanced_accuracy: f64,
    pub ece: f64,
    pub brier: f64,
    pub nll: f64,
    pub order_unstable: usize,
}

const ECE_BINS: usize = 10;
const P_FLOOR: f64 = 1e-12;

pub fn summarize(items: &[Scored]) -> Summary {
    let n = items.len();
    if n == 0 {
        return Summary {
            n,
            accuracy: 0.0,
            balanced_accuracy: 0.0,
            ece: 0.0,
            brier: 0.0,
            nll: 0.0,
            order_unstable: 0,
        };
    }
    let nf = n as f64;
    let correct: Vec<bool> = items.iter().map(|s| argmax(&s.probs) == s.gold).collect();
    let accuracy = correct.iter().filter(|&&c| c).count() as f64 / nf;

    let mut per_class: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (s, &c) in items.iter().zip(&correct) {
        let e = per_class.entry(s.gold_class.as_str()).or_default();
        e.0 += c as usize;
        e.1 += 1;
    }
    let balanced_accuracy = per_class
        .values()
        .map(|(h, t)| *h as f64 / *t as f64)
        .sum::<f64>()
        / per_class.len() as f64;

    let mut bins = [(0usize, 0.0f64, 0.0f64); ECE_BINS];
    for (s, &c) in items.iter().zip(&correct) {
        let conf = s.probs[argmax(&s.probs)];
        let b = ((conf * ECE_BINS as f64) as usize).min(ECE_BINS - 1);
        bins[b].0 += 1;
        bins[b].1 += conf;
        bins[b].2 += c as u8 as f64;
    }
    // Σ_b (n_b / N)·|acc_b − conf_b| with per-bin means = Σ_b |Σ correct − Σ conf| / N.
    let ece = bins
        .iter()
        .map(|(_, conf, acc)| (acc - conf).abs() / nf)
        .sum();

    let brier = items
        .iter()
        .map(|s| {
            s.probs
                .iter()
                .enumerate()
                .map(|(i, p)| (p - (i == s.gold) as u8 as f64).powi(2))
                .sum::<f64>()
        })
        .sum::<f64>()
        / nf;
    let nll = items
        .iter()
        .map(|s| -s.probs[s.gold].max(P_FLOOR).ln())
        .sum::<f64>()
        / nf;
    let order_unstable = items.iter().filter(|s| s.order_unstable).count();
    Summary {
        n,
        accuracy,
        balanced_accuracy,
        ece,
        brier,
        nll,
        order_unstable,
    }
}

/// Per-family summaries and the mean of the families' balanced accuracies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub families: BTreeMap<String, Summary>,
    pub overall: Summary,
    pub mean_family_balanced_accuracy: f64,
    pub positions: Positions,
}

/// How often each option position (A, B, ... in the criterion's own order)
/// is picked against how often gold puts the answer there: a readout that
/// measures position bias picks one position far more often than gold does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Positions {
    /// Share of criteria whose argmax is at each position.
    pub picked: Vec<f64>,
    /// Share of criteria whose gold answer is at each position.
    pub gold: Vec<f64>,
    /// max over positions of picked / gold; `None` when a position that is
    /// never gold was picked (an unbounded ratio).
    pub max_pick_over_gold: Option<f64>,
}

pub fn positions(items: &[Scored]) -> Positions {
    let width = items.iter().map(|s| s.probs.len()).max().unwrap_or(0);
    let n = items.len().max(1) as f64;
    let mut picked = vec![0.0; width];
    let mut gold = vec![0.0; width];
    for s in items {
        picked[argmax(&s.probs)] += 1.0 / n;
        gold[s.gold] += 1.0 / n;
    }
    let mut max_ratio = Some(0.0f64);
    for (p, g) in picked.iter().zip(&gold) {
        if *p > 0.0 {
            max_ratio = match (max_ratio, *g > 0.0) {
                (Some(m), true) => Some(m.max(p / g)),
                _ => None,
            };
        }
    }
    Positions {
        picked,
        gold,
        max_pick_over_gold: max_ratio,
    }
}

pub fn report(items: &[Scored]) -> Report {
    let mut by_family: BTreeMap<String, Vec<Scored>> = BTreeMap::new();
    for s in items {
        by_family
            .entry(s.family.clone())
            .or_default()
            .push(s.clone());
    }
    let families: BTreeMap<String, Summary> = by_family
        .into_iter()
        .map(|(f, v)| (f, summarize(&v)))
        .collect();
    let mean = if families.is_empty() {
        0.0
    } else {
        families.values().map(|s| s.balanced_accuracy).sum::<f64>() / families.len() as f64
    };
    Report {
        families,
        overall: summarize(items),
        mean_family_balanced_accuracy: mean,
        positions: positions(items),
    }
}

/// Rescales probabilities as softmax(ln p / T).
pub fn apply_temperature(items: &[Scored], t: f64) -> Vec<Scored> {
    items
        .iter()
        .map(|s| {
            let l: Vec<f64> = s.probs.iter().map(|p| p.max(P_FLOOR).ln() / t).collect();
            Scored {
                probs: softmax(&l),
                ..s.clone()
            }
        })
        .collect()
}

/// The range searched for a temperature.
pub const T_MIN: f64 = 0.02;
pub const T_MAX: f64 = 50.0;

/// The temperature minimising NLL on `items` (golden-section search on ln T).
pub fn fit_temperature(items: &[Scored]) -> f64 {
    let nll = |ln_t: f64| summarize(&apply_temperature(items, ln_t.exp())).nll;
    let (mut a, mut b) = (T_MIN.ln(), T_MAX.ln());
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let (mut c, mut d) = (b - g * (b - a), a + g * (b - a));
    let (mut fc, mut fd) = (nll(c), nll(d));
    for _ in 0..80 {
        if fc < fd {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = nll(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = nll(d);
        }
    }
    ((a + b) / 2.0).exp()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// Fitted on the first half (in fixture order), reported on the second.
    pub temperature: f64,
    /// The fit ran into the searched range's edge: at T_MAX the model's
    /// answers carry so little information that flattening them to uniform
    /// minimises NLL.
    pub at_bound: bool,
    pub fit_n: usize,
    pub held_out_before: Summary,
    pub held_out_after: Summary,
}

pub fn calibrate(items: &[Scored]) -> Option<Calibration> {
    if items.len() < 4 {
        return None;
    }
    let (fit, held) = items.split_at(items.len() / 2);
    let t = fit_temperature(fit);
    Some(Calibration {
        temperature: t,
        at_bound: !(T_MIN * 1.01..=T_MAX * 0.99).contains(&t),
        fit_n: fit.len(),
        held_out_before: summarize(held),
        held_out_after: summarize(&apply_temperature(held, t)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(gold: usize, class: &str, probs: &[f64]) -> Scored {
        Scored {
            family: "f".into(),
            gold,
            gold_class: class.into(),
            probs: probs.to_vec(),
            order_unstable: false,
        }
    }

    fn table() -> Vec<Scored> {
        vec![
            s(0, "a", &[0.7, 0.3]),
            s(1, "b", &[0.6, 0.4]),
            s(1, "b", &[0.2, 0.8]),
            s(1, "b", &[0.5, 0.25, 0.25]),
        ]
    }

    #[test]
    fn metrics_match_hand_computed_values() {
        let m = summarize(&table());
        let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        close(m.accuracy, 0.5);
        // class a: 1/1, class b: 1/3.
        close(m.balanced_accuracy, (1.0 + 1.0 / 3.0) / 2.0);
        // Brier: 0.18 + 0.72 + 0.08 + 0.875, over 4.
        close(m.brier, 1.855 / 4.0);
        close(
            m.nll,
            -(0.7f64.ln() + 0.4f64.ln() + 0.8f64.ln() + 0.25f64.ln()) / 4.0,
        );
        // One item per bin: |1-.7| + |0-.6| + |1-.8| + |0-.5|, over 4.
        close(m.ece, 1.6 / 4.0);
    }

    #[test]
    fn report_groups_by_family_and_counts_unstable() {
        let mut t = table();
        t[2].family = "g".into();
        t[3].order_unstable = true;
        let r = report(&t);
        assert_eq!(r.families.len(), 2);
        assert_eq!(r.families["g"].n, 1);
        assert_eq!(r.overall.order_unstable, 1);
        let mean = (r.families["f"].balanced_accuracy + r.families["g"].balanced_accuracy) / 2.0;
        assert!((r.mean_family_balanced_accuracy - mean).abs() < 1e-12);
    }

    #[test]
    fn temperature_fit_sharpens_underconfident_predictions() {
        // Always right but only 60% sure: the NLL-optimal temperature is < 1.
        let items: Vec<Scored> = (0..20)
            .map(|i| {
                s(
                    i % 2,
                    if i % 2 == 0 { "a" } else { "b" },
                    &if i % 2 == 0 { [0.6, 0.4] } else { [0.4, 0.6] },
                )
            })
            .collect();
        let t = fit_temperature(&items);
        assert!(t < 0.2, "{t}");
        let c = calibrate(&items).unwrap();
        assert!(c.held_out_after.nll < c.held_out_before.nll);
        assert_eq!(c.fit_n, 10);
        // T = 1 leaves probabilities unchanged.
        let same = apply_temperature(&items, 1.0);
        assert!((same[0].probs[0] - 0.6).abs() < 1e-12);
    }

    #[test]
    fn position_shares_count_argmax_and_gold() {
        let item = |gold: usize, probs: Vec<f64>| Scored {
            family: "f".into(),
            gold,
            gold_class: gold.to_string(),
            probs,
            order_unstable: false,
        };
        // Always A, gold half A half B: A is picked twice as often as gold puts it there.
        let all_a = [item(0, vec![0.9, 0.1]), item(1, vec![0.8, 0.2])];
        let p = positions(&all_a);
        assert_eq!(p.picked, vec![1.0, 0.0]);
        assert_eq!(p.gold, vec![0.5, 0.5]);
        assert_eq!(p.max_pick_over_gold, Some(2.0));
        // Picking C, which gold never uses, has no bounded ratio.
        let p = positions(&[item(0, vec![0.1, 0.1, 0.8]), item(0, vec![0.9, 0.05, 0.05])]);
        assert_eq!(p.max_pick_over_gold, None);
    }
}
