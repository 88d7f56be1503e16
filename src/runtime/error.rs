use thiserror::Error;

use crate::core::CoreError;

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error("ONNX Runtime library: {0}")]
    Library(String),
    #[error("model file {path}: {message}")]
    Load { path: String, message: String },
    #[error("graph signature: {0}")]
    Signature(String),
    #[error("run: {0}")]
    Run(String),
    #[error(transparent)]
    Readout(#[from] CoreError),
    #[error("GPU: {0}")]
    Gpu(String),
    #[error(transparent)]
    Kernels(#[from] crate::kernels::KernelError),
    #[error("branch {branch} of a packed pass has no tokens")]
    EmptyBranch { branch: usize },
    #[error("branch {branch} asks for row {row}, but it has {len} tokens (rows ascending, each inside the branch)")]
    BranchRow {
        branch: usize,
        row: usize,
        len: usize,
    },
    #[error("GPU device lost ({0}): every state's KV was on it; load the engine again")]
    DeviceLost(String),
}

impl RuntimeError {
    pub fn info(&self) -> crate::core::ErrorInfo {
        use crate::core::ErrorInfo as I;
        match self {
            Self::Library(_) => I::new("runtime_library"),
            Self::Load { .. } => I::new("model_file"),
            Self::Signature(_) => I::new("graph_signature"),
            Self::Run(_) => I::new("run"),
            Self::Readout(e) => e.info(),
            Self::Gpu(_) => I::new("gpu"),
            Self::DeviceLost(_) => I::new("device_lost"),
            Self::EmptyBranch { .. } => I::new("empty_branch").field("branches[].ids"),
            Self::BranchRow { len, .. } => {
                I::new("branch_row").field("branches[].rows").limit(*len)
            }
            Self::Kernels(e) => e.info(),
        }
    }
}
