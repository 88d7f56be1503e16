//! The product's inputs: a state and its criteria (the JSONL fixture format
//! too), and how a criterion is read.

pub mod criteria;
pub mod limits;
pub mod mode;
pub mod threads;
