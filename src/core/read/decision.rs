//! What `score` returns per criterion (spec §4).

use serde::{Deserialize, Serialize};

use crate::core::input::criteria::Criterion;
use crate::core::input::mode::ReadoutChoice;
use crate::core::read::debias::argmax;
use crate::core::text::prompt::label;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionProb {
    pub id: String,
    pub letter: String,
    pub p: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub id: String,
    /// The winning option's id.
    pub answer: String,
    /// The winning option's letter in the criterion's own order (its
    /// 1-based number past T, which only cloze allows).
    pub letter: String,
    pub probs: Vec<OptionProb>,
    /// top1 − top2.
    pub margin: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_mass: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_unstable: Option<bool>,
    pub ms: f64,
    /// What was run: mode, cloze score, calibration, and the state's prompt.
    pub readout: ReadoutChoice,
}

impl Decision {
    /// `probs[i]` belongs to `criterion.options[i]`.
    pub fn new(
        criterion: &Criterion,
        probs: &[f64],
        allowed_mass: Option<f64>,
        order_unstable: Option<bool>,
        ms: f64,
        readout: ReadoutChoice,
    ) -> Self {
        let best = argmax(probs);
        let mut sorted = probs.to_vec();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let margin = sorted[0] - sorted.get(1).copied().unwrap_or(0.0);
        Self {
            id: criterion.id.clone(),
            answer: criterion.options[best].id.clone(),
            letter: label(best),
            probs: criterion
                .options
                .iter()
                .zip(probs)
                .enumerate()
                .map(|(i, (o, &p))| OptionProb {
                    id: o.id.clone(),
                    letter: label(i),
                    p,
                })
                .collect(),
            margin,
            allowed_mass,
            order_unstable,
            ms,
            readout,
        }
    }

    pub fn p(&self) -> Vec<f64> {
        self.probs.iter().map(|o| o.p).collect()
    }
}
