//! Cyclic debiasing (spec §7.4): score every rotation of the options,
//! average per option, and flag criteria whose answer moves with the order.

// The option itself is declared with the other readout options.
pub use crate::core::input::mode::Debias;

/// The display orders to score: `order[slot]` is the option shown at letter `slot`.
pub fn orders(debias: Debias, n: usize) -> Vec<Vec<usize>> {
    match debias {
        Debias::None => vec![(0..n).collect()],
        Debias::Cyclic => (0..n)
            .map(|r| (0..n).map(|i| (i + r) % n).collect())
            .collect(),
    }
}

/// Probabilities per option (original order) averaged over the runs, and
/// whether the argmax changed between runs.
pub fn combine(n: usize, runs: &[(Vec<usize>, Vec<f64>)]) -> (Vec<f64>, bool) {
    let mut sum = vec![0.0; n];
    let mut winners = Vec::with_capacity(runs.len());
    for (order, by_slot) in runs {
        let mut by_option = vec![0.0; n];
        for (slot, &opt) in order.iter().enumerate() {
            by_option[opt] = by_slot[slot];
        }
        winners.push(argmax(&by_option));
        for (s, p) in sum.iter_mut().zip(&by_option) {
            *s += p;
        }
    }
    let k = runs.len().max(1) as f64;
    let unstable = winners.windows(2).any(|w| w[0] != w[1]);
    (sum.into_iter().map(|s| s / k).collect(), unstable)
}

/// Index of the largest value; the first one on ties.
pub fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotations_cover_every_slot() {
        let o = orders(Debias::Cyclic, 3);
        assert_eq!(o, vec![vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1]]);
        assert_eq!(orders(Debias::None, 2), vec![vec![0, 1]]);
    }

    #[test]
    fn combine_maps_slots_back_to_options() {
        // A model that always says "A": every option wins once, so unstable,
        // and the average is flat.
        let runs: Vec<_> = orders(Debias::Cyclic, 3)
            .into_iter()
            .map(|o| (o, vec![0.8, 0.1, 0.1]))
            .collect();
        let (p, unstable) = combine(3, &runs);
        assert!(unstable);
        for x in p {
            assert!((x - 1.0 / 3.0).abs() < 1e-12);
        }
        // A model that tracks option 2 wherever it is shown: stable.
        let runs: Vec<_> = orders(Debias::Cyclic, 3)
            .into_iter()
            .map(|o| {
                let probs = o
                    .iter()
                    .map(|&opt| if opt == 2 { 0.9 } else { 0.05 })
                    .collect();
                (o, probs)
            })
            .collect();
        let (p, unstable) = combine(3, &runs);
        assert!(!unstable);
        assert!((p[2] - 0.9).abs() < 1e-12);
    }
}
