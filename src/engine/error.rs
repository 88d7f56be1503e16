use thiserror::Error;

use crate::core::CoreError;
use crate::runtime::RuntimeError;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("model file {file}: {message}")]
    ModelFile { file: String, message: String },
    #[error("load-time proof failed: {0}")]
    Proof(String),
    #[error("state {0}: no such state (it was disposed, or never prefilled on this engine)")]
    UnknownState(u64),
    #[error("criterion {criterion:?}: option {letter} needs a letter the pruned head does not keep (it keeps {kept:?})")]
    LetterNotKept {
        criterion: String,
        letter: char,
        kept: String,
    },
}
