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
    /// A file a model refers to whose path or real path leaves the model's root.
    #[error(
        "{role} {path}: {reason} (the model's root is {root}); a model's files stay inside it"
    )]
    OutsideRoot {
        role: String,
        path: String,
        root: String,
        reason: String,
    },
    #[error("load-time proof failed: {0}")]
    Proof(String),
    /// The probe's uncached forward computed nothing (every logit one
    /// value): refused at once, since no run length or convention can make
    /// such a graph exact.
    #[error("load-time proof failed: {0}")]
    ProofDegenerate(String),
    #[error("state {0}: no such state (it was disposed, or never prefilled on this engine)")]
    UnknownState(u64),
    #[error("prefix {0}: no such prefix (it was disposed, or never made on this engine)")]
    UnknownPrefix(u64),
    #[error("prefix {prefix}: {children} state(s) built on it are live; dispose them first")]
    PrefixInUse { prefix: u64, children: usize },
    /// The ids already computed are not a prefix of the whole rendering's.
    #[error("{what}: the text so far does not end on a token boundary (its ids and the whole rendering's part at token {at}); start the new text with a space or a newline, or prefill the state whole")]
    TokenBoundary { what: &'static str, at: usize },
    #[error("mode {mode} reads a log-probability at every option token's row, and model {model} is a {graph} graph that returns only the last row's letters; load the stock graph for {mode}, or use mode letters")]
    ModeNeedsStockGraph {
        mode: &'static str,
        model: String,
        graph: &'static str,
    },
    /// A kept prefix this engine will not use: made by another model,
    /// engine, runtime or prompt, or damaged since.
    #[error("stored prefix refused at {field}: {reason}")]
    StalePrefix {
        field: &'static str,
        reason: String,
        limit: Option<usize>,
    },
    /// A prefix is kept under its model's file hashes; this engine was given none.
    #[error("a prefix is kept under its model files' sha256s, and this engine was given none (the browser's loader hashes every file it fetches; natively, call set_model_key)")]
    PrefixUnkeyed,
    #[error("{field} {value:?}: {reason}")]
    InvalidOption {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    /// The engine asked a run for no tokens (an engine fault, not an input).
    #[error("{what} of zero tokens was asked for")]
    EmptyRun { what: &'static str },
    /// The engine asked for more target rows than tokens (an engine fault).
    #[error("{targets} targets over {tokens} tokens were asked for")]
    TargetsOverTokens { targets: usize, tokens: usize },
    /// A run came back without an output the graph's signature promised.
    #[error("the run returned no {output}")]
    MissingOutput { output: &'static str },
    #[error("this graph does not expose last_hidden (build it with `readout expose-hidden`)")]
    NoHiddenOutput,
    #[error("criterion {criterion:?}: option {letter} needs a letter the pruned head does not keep (it keeps {kept:?})")]
    LetterNotKept {
        criterion: String,
        letter: char,
        kept: String,
    },
}

impl EngineError {
    /// The refusal's code, field and limit (the message says the same in words).
    pub fn info(&self) -> crate::core::ErrorInfo {
        use crate::core::ErrorInfo as I;
        match self {
            Self::Core(e) => e.info(),
            Self::Runtime(e) => e.info(),
            Self::ModelFile { .. } => I::new("model_file"),
            Self::OutsideRoot { role, .. } => I::new("outside_root").field(role.clone()),
            Self::Proof(_) | Self::ProofDegenerate(_) => I::new("proof"),
            Self::UnknownState(_) => I::new("unknown_state").field("state"),
            Self::UnknownPrefix(_) => I::new("unknown_prefix").field("prefix"),
            Self::PrefixInUse { children, .. } => {
                I::new("prefix_in_use").field("prefix").limit(*children)
            }
            Self::TokenBoundary { what, at } => I::new("token_boundary").field(*what).limit(*at),
            Self::ModeNeedsStockGraph { .. } => I::new("mode_needs_stock_graph").field("mode"),
            Self::InvalidOption { field, .. } => I::new("invalid_option").field(*field),
            Self::StalePrefix { field, limit, .. } => {
                let i = I::new("stale_prefix").field(*field);
                match limit {
                    Some(l) => i.limit(*l),
                    None => i,
                }
            }
            Self::PrefixUnkeyed => I::new("prefix_unkeyed").field("model"),
            Self::LetterNotKept { .. } => I::new("letter_not_kept").field("options"),
            Self::EmptyRun { .. } => I::new("empty_run"),
            Self::TargetsOverTokens { tokens, .. } => I::new("targets_over_tokens").limit(*tokens),
            Self::MissingOutput { .. } => I::new("missing_output"),
            Self::NoHiddenOutput => I::new("no_hidden_output").field("model"),
        }
    }
}
