use thiserror::Error;

/// What our own runtime refuses, at load or at run.
#[derive(Debug, Error)]
pub enum KernelError {
    #[error("not an ONNX model: {0}")]
    Decode(String),
    /// A node whose operator or attributes this runtime does not compute.
    #[error("node {node} ({op}) is not something this runtime computes: {reason}")]
    Unsupported {
        node: String,
        op: String,
        reason: String,
    },
    #[error("initializer {name}: {reason}")]
    Initializer { name: String, reason: String },
    /// A graph input or output missing, or fed with the wrong shape.
    #[error("{name}: {reason}")]
    Io { name: String, reason: String },
    #[error("node {node} ({op}): {reason}")]
    Run {
        node: String,
        op: String,
        reason: String,
    },
    /// The weights would not fit the address space (wasm32: 4 GiB).
    #[error("the model needs {needed} bytes of weights; this build holds at most {limit}")]
    TooLarge { needed: u64, limit: u64 },
}

impl KernelError {
    pub fn info(&self) -> crate::core::ErrorInfo {
        use crate::core::ErrorInfo as I;
        match self {
            Self::Decode(_) => I::new("model_file"),
            Self::Unsupported { node, .. } => I::new("graph_unsupported").field(node.clone()),
            Self::Initializer { name, .. } => I::new("model_file").field(name.clone()),
            Self::Io { name, .. } => I::new("graph_signature").field(name.clone()),
            Self::Run { node, .. } => I::new("run").field(node.clone()),
            Self::TooLarge { limit, .. } => {
                I::new("model_too_large").limit(usize::try_from(*limit).unwrap_or(usize::MAX))
            }
        }
    }
}
