//! What `Engine.load` refuses: the download and catalog problems only the
//! browser loader meets, and the lower layers' errors carried whole so their
//! codes reach JS.

use thiserror::Error;

use crate::core::{CoreError, ErrorInfo};
use crate::engine::EngineError;
use crate::platform::js::JsFailure;
use crate::runtime::RuntimeError;

#[derive(Debug, Error)]
pub enum LoadError {
    /// The page lacks something a load needs, or a call into it threw.
    #[error("{what}: {failure}")]
    Browser { what: String, failure: JsFailure },
    #[error("URL {url:?}: {failure}")]
    Url { url: String, failure: JsFailure },
    #[error("{file} ({url}): {problem}")]
    Fetch {
        file: String,
        url: String,
        problem: FetchProblem,
    },
    #[error("{file}: not UTF-8 ({message})")]
    NotUtf8 { file: String, message: String },
    /// An entry of models.json that lists the wrong files.
    #[error("models.json entry {id}: {problem}")]
    Entry { id: String, problem: &'static str },
    #[error("models.json entry {id}: readout: {source}")]
    EntryReadout {
        id: String,
        #[source]
        source: EngineError,
    },
    #[error("{0}")]
    OnnxRuntimeWeb(JsFailure),
    /// The threaded build's kernel workers did not all start.
    #[cfg_attr(not(target_feature = "atomics"), allow(dead_code))]
    #[error("threads: {asked} asked, {started} started: {failure}")]
    Workers {
        asked: usize,
        started: usize,
        failure: JsFailure,
    },
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Why one file did not arrive as models.json describes it.
#[derive(Debug, Error)]
pub enum FetchProblem {
    #[error("fetch failed: {0}")]
    Failed(JsFailure),
    #[error("HTTP {0}: missing or not served")]
    Http(u32),
    #[error("download interrupted: {0}")]
    Interrupted(JsFailure),
    #[error("a chunk is not bytes")]
    NotBytes,
    #[error("{got} bytes arrived; models.json says {want} (truncated or replaced)")]
    Size { got: u64, want: u64 },
    #[error("sha256 {got} differs from models.json's {want}")]
    Sha256 { got: String, want: String },
}

impl LoadError {
    pub fn info(&self) -> ErrorInfo {
        let i = ErrorInfo::new;
        match self {
            Self::Browser { .. } => i("browser"),
            Self::Url { .. } => i("url").field("source"),
            Self::Fetch { file, problem, .. } => {
                let code = match problem {
                    FetchProblem::Http(404) => i("file_missing"),
                    FetchProblem::Http(_) => i("http_status"),
                    FetchProblem::Size { want, .. } => {
                        i("file_size").limit(usize::try_from(*want).unwrap_or(usize::MAX))
                    }
                    FetchProblem::Sha256 { .. } => i("sha256_mismatch"),
                    FetchProblem::Failed(_)
                    | FetchProblem::Interrupted(_)
                    | FetchProblem::NotBytes => i("download_failed"),
                };
                code.field(file.clone())
            }
            Self::NotUtf8 { file, .. } => i("model_file").field(file.clone()),
            Self::Entry { .. } => i("catalog").field("models.json"),
            Self::Workers { started, .. } => i("workers").field("threads").limit(started + 1),
            Self::EntryReadout { .. } => i("catalog").field("models.json"),
            Self::OnnxRuntimeWeb(_) => i("runtime_library"),
            Self::Core(e) => e.info(),
            Self::Runtime(e) => e.info(),
            Self::Engine(e) => e.info(),
        }
    }
}
