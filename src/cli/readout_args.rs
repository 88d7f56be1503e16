//! The readout flags `score` and `evaluate` share, parsed by the engine
//! types' serialised names so the CLI, the JS API and the reports spell them
//! the same. They only parse: the engine resolves the request against the
//! model's defaults (`ReadoutRequest::resolve`).

use serde::de::DeserializeOwned;

use crate::core::input::mode::{Calibration, ClozeScore, Mode, PromptStyle};
use crate::core::input::request::ReadoutRequest;
use crate::core::read::debias::Debias;

fn parse<T: DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|e| format!("{s:?}: {e}"))
}

/// Each flag sets one field of the request; a flag left out takes the
/// model's default (its models.json entry's, else the rule's:
/// `model_dir::entry_readout`), the ones the browser serves too.
#[derive(Debug, Clone, clap::Args)]
pub struct ReadoutArgs {
    /// letters: the option letter's log-probability (one run; any graph).
    /// cloze: each option's own text as the answer (one run per option; stock graphs only).
    /// Default: the model's models.json entry, else letters.
    #[arg(long, value_parser = parse::<Mode>)]
    pub mode: Option<Mode>,
    /// cloze: how an option's token log-probabilities add up (sum or mean).
    /// Default: the model's models.json entry, else sum.
    #[arg(long, value_parser = parse::<ClozeScore>)]
    pub cloze_score: Option<ClozeScore>,
    /// none, or content-free: divide out what the model prefers after evidence "N/A"
    /// (computed once per instruction and criterion, then cached).
    /// Default: the model's models.json entry, else none.
    #[arg(long, value_parser = parse::<Calibration>)]
    pub calibration: Option<Calibration>,
    /// plain: the project's text prompt. chat: the model's own chat template.
    /// Default: the model's models.json entry, else plain.
    #[arg(long, value_parser = parse::<PromptStyle>)]
    pub prompt: Option<PromptStyle>,
    /// letters: none, or cyclic (score every rotation of the options and average).
    /// Default: none.
    #[arg(long, value_parser = parse::<Debias>)]
    pub debias: Option<Debias>,
}

impl ReadoutArgs {
    /// The flags as a request.
    pub fn request(&self) -> ReadoutRequest {
        ReadoutRequest {
            mode: self.mode,
            cloze_score: self.cloze_score,
            calibration: self.calibration,
            prompt: self.prompt,
            debias: self.debias,
            allowed_mass: None,
        }
    }
}
