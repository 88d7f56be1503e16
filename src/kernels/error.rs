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
        /// Boxed: the error travels up through every layer's enum, which
        /// stays small.
        #[source]
        reason: Box<OpError>,
    },
    /// The kernels' thread pool could not be started.
    #[error("{threads} kernel threads: {reason}")]
    Threads { threads: usize, reason: String },
    /// The model would not fit the address space (wasm32: 4 GiB): its
    /// declared weights, or what a load of its files holds at its peak.
    /// A graph holding more nodes or initializers than any real model,
    /// counted on the wire before it is decoded.
    #[error(
        "the graph holds {count} {what}; at most {limit} are read (real models hold under 10,000)"
    )]
    GraphTooLarge {
        what: &'static str,
        count: u64,
        limit: u64,
    },
    #[error("the model needs {needed} bytes {what}; this build holds at most {limit}")]
    TooLarge {
        needed: u64,
        limit: u64,
        what: &'static str,
    },
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
            Self::Threads { threads, .. } => I::new("threads").limit(*threads),
            Self::GraphTooLarge { what, limit, .. } => I::new("too_large")
                .field(format!("model.onnx ({what})"))
                .limit(usize::try_from(*limit).unwrap_or(usize::MAX)),
            Self::TooLarge { limit, .. } => {
                I::new("model_too_large").limit(usize::try_from(*limit).unwrap_or(usize::MAX))
            }
        }
    }
}

/// Why an operator cannot compute the values it was given. The operators
/// do not know their node: the interpreter wraps this in
/// [`KernelError::Run`], which names it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OpError {
    #[error("{what} is {found}; {expected} expected")]
    Kind {
        what: &'static str,
        found: &'static str,
        expected: &'static str,
    },
    #[error("axis {axis} outside rank {rank}")]
    Axis { axis: i64, rank: usize },
    #[error("shapes {a:?} and {b:?} do not broadcast")]
    Broadcast { a: Vec<usize>, b: Vec<usize> },
    #[error("{a} and {b} operands")]
    Operands { a: &'static str, b: &'static str },
    #[error("cast of {from} to data type {to}")]
    Cast { from: &'static str, to: i32 },
    #[error("{shape:?} cannot take shape {spec:?}")]
    Reshape { shape: Vec<usize>, spec: Vec<i64> },
    #[error("index {index} outside 0..{dim}")]
    Index { index: i64, dim: usize },
    #[error("{op} over uint8 data")]
    Uint8 { op: &'static str },
    /// A shape beyond `tensor::MAX_NOMINAL_ELEMENTS` (zero dims counted as one).
    #[error("shape {shape:?} spans more than 2^31 elements")]
    Nominal { shape: Vec<u64> },
    #[error("split {sizes:?} of a dim of {dim}")]
    Split { sizes: Vec<usize>, dim: usize },
    #[error("steps {steps:?}: only 1 is computed")]
    Steps { steps: Vec<i64> },
    #[error("{what}: a {kind} tensor of shape {shape:?}; {expected} expected")]
    Shape {
        what: &'static str,
        kind: &'static str,
        shape: Vec<usize>,
        expected: &'static str,
    },
    #[error("row {row} of {rows}")]
    Row { row: usize, rows: usize },
    #[error("{len} values do not split into rows of {width}")]
    Rows { len: usize, width: usize },
    /// A `MatMulNBits` weight whose parts do not match its N and K.
    #[error("{found} {what} for N = {n}, K = {k} (expected {expected})")]
    Q4Layout {
        what: &'static str,
        found: usize,
        expected: usize,
        n: usize,
        k: usize,
    },
    /// The threaded browser build: a kernel worker stopped inside its share
    /// of the operation (a panic, a bug), so the output is incomplete. The
    /// other workers carry on, so the next call runs.
    #[error("a kernel worker stopped inside its share of this operation (a panic; the worker's console has it)")]
    WorkerDied,
    /// The threaded browser build: no chunk of the operation finished
    /// within the stall deadline (a worker terminated, or hung), so the
    /// workers holding the missing ones were terminated. The rest carry
    /// on, so the next call runs on fewer threads.
    #[error(
        "{workers} kernel worker{s} stopped answering inside this operation ({ms} ms without \
         progress; terminated, or hung): given up on and terminated, so the next call runs \
         without {them}",
        s = if *workers == 1 { "" } else { "s" },
        them = if *workers == 1 { "it" } else { "them" }
    )]
    WorkerLost { workers: usize, ms: u64 },
    /// What one operator's inputs or attributes get wrong beyond the cases
    /// above (a missing input, a past longer than the run allows), in words.
    #[error("{0}")]
    Input(String),
}
