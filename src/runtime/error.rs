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
    #[error("GPU device lost ({0}): every state's KV was on it; load the engine again")]
    DeviceLost(String),
}
