//! From logits to a decision: readSlots over the letters, cloze over the
//! options' own text, the content-free baseline, cyclic debiasing.

pub mod cloze_math;
pub mod debias;
pub mod decision;
pub mod logits;
pub mod slots;
