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
}
