//! Evaluation: metrics per family, and the `logit_cost` sweep's ids and
//! statistics.

pub mod logit_cost;
pub mod metrics;
