//! How a criterion is read: by its letters or by its options' own text, with
//! or without a content-free baseline, in plain text or the model's chat
//! template. Plain enums so the CLI, the JS surface and reports share names.

use serde::{Deserialize, Serialize};

/// What is scored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The next token's log-probabilities over the option letters (one run).
    #[default]
    Letters,
    /// Each option's text as the continuation of the question (one run per option).
    Cloze,
}

/// How a cloze option's token log-probabilities become its score.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClozeScore {
    /// Σ log p over the option's tokens.
    #[default]
    Sum,
    /// Σ log p / tokens: long options are not penalised for their length.
    Mean,
}

/// Whether a content-free baseline is divided out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Calibration {
    #[default]
    None,
    /// The same prompt with the evidence replaced by a content-free string:
    /// letters are divided by its letter probabilities and renormalised
    /// (contextual calibration); cloze subtracts its log-probabilities
    /// (domain-conditional PMI).
    ContentFree,
}

/// Whether letters are read in every rotation of the options (`core::read::debias`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Debias {
    #[default]
    None,
    /// Score every rotation of the options and average per option.
    Cyclic,
}

/// How the prompt is wrapped. Fixed per state: the head is prefilled in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptStyle {
    /// The plain-text contract of `core::text::prompt`.
    #[default]
    Plain,
    /// The same text as one user message of the model's own chat template,
    /// followed by the assistant's turn.
    Chat,
}

/// Where the defaults of a model without a catalog entry come from, as
/// `info()` and the CLI's JSON report it.
pub const DEFAULTS_BY_RULE: &str =
    "the rule for a model no models.json entry gives a readout: letters, plain prompt";

/// Where the defaults of a model with a catalog entry come from.
pub fn defaults_from_entry(id: &str) -> String {
    format!("models.json entry {id}")
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Self::Letters => "letters",
            Self::Cloze => "cloze",
        }
    }
}

impl PromptStyle {
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Chat => "chat",
        }
    }
}

/// How a state's head is written: the prompt style, and the readout mode
/// whose default instruction it carries when the state gives none (a letters
/// head asks for a letter; a cloze head asks for the answer itself).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeadStyle {
    pub prompt: PromptStyle,
    pub mode: Mode,
}

/// A whole readout choice: what a model serves when a call does not say, and
/// what a decision reports it ran. The defaults follow one rule, the same in
/// the browser and the CLI: the model's models.json entry when it has one
/// (the best measured combination for that graph), else [`ReadoutChoice::default`]
/// (letters in the plain prompt), which [`DEFAULTS_BY_RULE`] names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadoutChoice {
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub cloze_score: ClozeScore,
    #[serde(default)]
    pub calibration: Calibration,
    #[serde(default)]
    pub prompt: PromptStyle,
}

impl ReadoutChoice {
    /// This choice with each field a caller gave (a CLI flag, a call
    /// option) in its place: how the CLI, the browser and Python put a
    /// call's readout over the model's defaults.
    pub fn with(
        self,
        mode: Option<Mode>,
        cloze_score: Option<ClozeScore>,
        calibration: Option<Calibration>,
        prompt: Option<PromptStyle>,
    ) -> Self {
        Self {
            mode: mode.unwrap_or(self.mode),
            cloze_score: cloze_score.unwrap_or(self.cloze_score),
            calibration: calibration.unwrap_or(self.calibration),
            prompt: prompt.unwrap_or(self.prompt),
        }
    }

    /// The head a state is prefilled for: `prompt` and `mode` where the
    /// caller set them, this choice's otherwise.
    pub fn head_style(&self, prompt: Option<PromptStyle>, mode: Option<Mode>) -> HeadStyle {
        HeadStyle {
            prompt: prompt.unwrap_or(self.prompt),
            mode: mode.unwrap_or(self.mode),
        }
    }
}
