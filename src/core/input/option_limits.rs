//! The option limits of a criterion, apart from the types they bound, so
//! that the error type can name them without importing the criteria.

/// Letters: one option per answer letter (`prompt::LETTERS`).
pub const MIN_OPTIONS: usize = 2;
pub const MAX_OPTIONS: usize = 20;
/// Cloze reads the options' text, not letters: one run per option bounds it.
pub const MAX_CLOZE_OPTIONS: usize = 64;
