use thiserror::Error;

#[derive(Debug, Error)]
pub enum SurgeryError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("graph: {0}")]
    Graph(String),
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// `-o` names something a surgery must not replace.
    #[error("-o {path}: {reason}")]
    Output {
        path: String,
        reason: super::refusal::Refusal,
    },
    /// A criterion has 2 to 20 options, so a head that keeps fewer than 2
    /// letters serves none (and its one-column softmax makes every load-time
    /// proof agree trivially).
    #[error("--letters {letters:?}: {count} letters; a pruned head must keep {min} to {max}, one per option a criterion may have")]
    LetterCount {
        letters: String,
        count: usize,
        min: usize,
        max: usize,
    },
    #[error(
        "--letters {letters:?}: {letter:?} is not one of ABCDEFGHIJKLMNOPQRST, or appears twice"
    )]
    BadLetter { letters: String, letter: char },
    #[error("verification failed, nothing written: {0}")]
    Verify(String),
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    #[error(transparent)]
    Core(#[from] crate::core::CoreError),
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
}

impl SurgeryError {
    pub fn file(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        Self::File {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}
