use thiserror::Error;

/// Every refusal of the pure layer. Messages name the field and the limit.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    #[error("criterion {criterion:?}: options has {count} entries; at least 2 are required")]
    TooFewOptions { criterion: String, count: usize },
    #[error("criterion {criterion:?}: options has {count} entries; at most {limit} are allowed in {mode} mode{}", if *limit == 20 { " (letters A-T; cloze mode takes up to 64)" } else { "" })]
    TooManyOptions {
        criterion: String,
        count: usize,
        limit: usize,
        mode: &'static str,
    },
    #[error("criterion {criterion:?}: option id {id:?} appears more than once in options")]
    DuplicateOptionId { criterion: String, id: String },
    #[error("criterion {criterion:?}: {field} is empty")]
    EmptyField {
        criterion: String,
        field: &'static str,
    },
    #[error("criterion {criterion:?}: answer {answer:?} is not one of the option ids")]
    UnknownAnswer { criterion: String, answer: String },
    #[error("{field}: {tokens} tokens exceed the model's context of {limit} positions")]
    ContextOverflow {
        field: &'static str,
        tokens: usize,
        limit: usize,
    },
    #[error("{field}: {given} is not a whole number from 1 to {max} (4 per core, at most 64)")]
    Threads {
        field: String,
        given: f64,
        max: usize,
    },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("tokenizer: letter {letter:?} with separator {separator:?} is {count} tokens {ids:?}; the readout needs exactly one")]
    LetterNotOneToken {
        letter: char,
        separator: String,
        count: usize,
        ids: Vec<u32>,
    },
    #[error("tokenizer: letters {a:?} and {b:?} map to the same token {id}")]
    LettersCollide { a: char, b: char, id: u32 },
    #[error("slot_map.json: {0}")]
    SlotMap(String),
    #[error("config.json: {0}")]
    Config(String),
    #[error("state {state:?}: evidence is empty")]
    EmptyEvidence { state: String },
    #[error("state {state:?}: criteria[{index}].id is empty")]
    EmptyCriterionId { state: String, index: usize },
    #[error("state {state:?}: criterion id {id:?} appears more than once (decisions are reported by id)")]
    DuplicateCriterionId { state: String, id: String },
    #[error("{path}: unknown field {field:?}; did you mean {nearest:?}? (known: {})", known.join(", "))]
    UnknownField {
        path: String,
        field: String,
        nearest: &'static str,
        known: &'static [&'static str],
    },
    #[error("state file line {line} column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("fixture line {line}: {message}")]
    Fixture { line: usize, message: String },
    #[error("logits: dims {dims:?} do not fit; {expected}")]
    LogitsLayout { dims: Vec<usize>, expected: String },
    #[error("logits: value at position {position}, column {column} is {value} (not finite)")]
    NonFiniteLogit {
        position: usize,
        column: usize,
        value: f32,
    },
    #[error("chat template {template}: {message}")]
    ChatTemplate { template: String, message: String },
    #[error("chat template {template}: the head/suffix split is not a token boundary: {reason}")]
    TemplateSplit { template: String, reason: String },
    #[error("prompt \"chat\": model {model} has no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json)")]
    NoChatTemplate { model: String },
    #[error("metrics: {0}")]
    Metrics(String),
    #[error("models.json: {0}")]
    Catalog(String),
    #[error("models.json has no model {id:?} (it lists {})", known.join(", "))]
    UnknownModel { id: String, known: Vec<String> },
    #[error("{field}: {value:?} is not one of {allowed}")]
    InvalidOption {
        field: &'static str,
        value: String,
        allowed: &'static str,
    },
    /// Two options that do not go together (`input::request`).
    #[error("{field} {value:?}: {reason}")]
    OptionConflict {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    /// A file or input over a bound (`input::input_limits`), refused before it is parsed.
    #[error("{field}: {size} {unit} exceed the limit of {limit} {unit}; {hint}")]
    TooLarge {
        field: String,
        size: u64,
        limit: u64,
        unit: &'static str,
        hint: &'static str,
    },
    /// Evidence refused from a count of its first pieces, before the rest
    /// of it is tokenised.
    #[error("{field}: {bytes} bytes exceed the model's context of {limit} positions (its first {counted_bytes} bytes alone are {tokens} tokens)")]
    ContextOverflowEarly {
        field: &'static str,
        bytes: usize,
        counted_bytes: usize,
        tokens: usize,
        limit: usize,
    },
    /// A catalog entry's file URL that would leave the catalog's folder or origin.
    #[error("models.json: model {id:?}: file url {url:?} {reason}")]
    CatalogUrl {
        id: String,
        url: String,
        reason: String,
    },
    #[error("backend {backend:?} was asked for but {reason}")]
    BackendUnavailable {
        backend: &'static str,
        reason: String,
    },
}

/// What a caller (or JS) can branch on without parsing the message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ErrorInfo {
    /// A stable snake_case name of the refusal.
    pub code: &'static str,
    /// The input field concerned, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The limit that was exceeded, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

impl ErrorInfo {
    pub fn new(code: &'static str) -> Self {
        Self {
            code,
            field: None,
            limit: None,
        }
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }
}

impl CoreError {
    pub fn info(&self) -> ErrorInfo {
        use CoreError::*;
        let i = ErrorInfo::new;
        match self {
            TooFewOptions { .. } => i("too_few_options")
                .field("options")
                .limit(crate::core::input::option_limits::MIN_OPTIONS),
            TooManyOptions { limit, .. } => i("too_many_options").field("options").limit(*limit),
            DuplicateOptionId { .. } => i("duplicate_option_id").field("options[].id"),
            EmptyField { field, .. } => i("empty_field").field(*field),
            UnknownAnswer { .. } => i("unknown_answer").field("answer"),
            ContextOverflow { field, limit, .. } => {
                i("context_overflow").field(*field).limit(*limit)
            }
            Threads { field, max, .. } => i("invalid_option").field(field.clone()).limit(*max),
            Tokenizer(_) => i("tokenizer"),
            LetterNotOneToken { .. } => i("letter_not_one_token"),
            LettersCollide { .. } => i("letters_collide"),
            SlotMap(_) => i("slot_map").field("slot_map.json"),
            Config(_) => i("config").field("config.json"),
            EmptyEvidence { .. } => i("empty_evidence").field("evidence"),
            EmptyCriterionId { index, .. } => {
                i("empty_field").field(format!("criteria[{index}].id"))
            }
            DuplicateCriterionId { .. } => i("duplicate_criterion_id").field("criteria[].id"),
            UnknownField { path, field, .. } => i("unknown_field").field(format!("{path}.{field}")),
            Json { .. } => i("json"),
            Fixture { .. } => i("fixture"),
            LogitsLayout { .. } => i("logits_layout"),
            NonFiniteLogit { .. } => i("non_finite_logit"),
            ChatTemplate { .. } => i("chat_template").field("prompt"),
            TemplateSplit { .. } => i("template_split").field("prompt"),
            NoChatTemplate { .. } => i("no_chat_template").field("prompt"),
            Metrics(_) => i("metrics"),
            Catalog(_) => i("catalog").field("models.json"),
            UnknownModel { .. } => i("unknown_model").field("source"),
            InvalidOption { field, .. } | OptionConflict { field, .. } => {
                i("invalid_option").field(*field)
            }
            BackendUnavailable { .. } => i("backend_unavailable").field("backend"),
            TooLarge { field, limit, .. } => i("too_large")
                .field(field.clone())
                .limit(usize::try_from(*limit).unwrap_or(usize::MAX)),
            ContextOverflowEarly { field, limit, .. } => {
                i("context_overflow").field(*field).limit(*limit)
            }
            CatalogUrl { .. } => i("outside_root").field("models.json"),
        }
    }
}
