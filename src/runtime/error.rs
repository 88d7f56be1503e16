use thiserror::Error;

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
}
