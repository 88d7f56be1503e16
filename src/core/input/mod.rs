//! The product's inputs: a state and its criteria (the JSONL fixture format
//! too), and how a criterion is read.

pub mod criteria;
pub mod input_limits;
pub mod mode;
pub mod option_limits;
pub mod prefix;
pub mod request;
pub mod thread_policy;
