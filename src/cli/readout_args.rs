//! The readout flags `score` and `evaluate` share: the engine's own option
//! types, parsed by their serialised names so the CLI, the JS API and the
//! reports spell them the same.

use serde::de::DeserializeOwned;

use crate::core::read::debias::Debias;
use crate::core::spec::mode::{Calibration, ClozeScore, HeadStyle, Mode, PromptStyle};
use crate::engine::ScoreOptions;

fn parse<T: DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|e| format!("{s:?}: {e}"))
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReadoutArgs {
    /// letters: the option letter's log-probability (one run; any graph).
    /// cloze: each option's own text as the answer (one run per option; stock graphs only).
    #[arg(long, default_value = "letters", value_parser = parse::<Mode>)]
    pub mode: Mode,
    /// cloze: how an option's token log-probabilities add up (sum or mean).
    #[arg(long, default_value = "sum", value_parser = parse::<ClozeScore>)]
    pub cloze_score: ClozeScore,
    /// none, or content-free: divide out what the model prefers after evidence "N/A"
    /// (computed once per instruction and criterion, then cached).
    #[arg(long, default_value = "none", value_parser = parse::<Calibration>)]
    pub calibration: Calibration,
    /// plain: the project's text prompt. chat: the model's own chat template.
    #[arg(long, default_value = "plain", value_parser = parse::<PromptStyle>)]
    pub prompt: PromptStyle,
    /// letters: none, or cyclic (score every rotation of the options and average).
    #[arg(long, default_value = "none", value_parser = parse::<Debias>)]
    pub debias: Debias,
}

impl ReadoutArgs {
    /// The head a state is prefilled in: this prompt, and this mode's default instruction.
    pub fn head_style(&self) -> HeadStyle {
        HeadStyle {
            prompt: self.prompt,
            mode: self.mode,
        }
    }

    pub fn score_options(&self) -> ScoreOptions {
        ScoreOptions {
            debias: self.debias,
            allowed_mass: true,
            mode: self.mode,
            cloze_score: self.cloze_score,
            calibration: self.calibration,
        }
    }

    /// A short tag for report file names: `cloze-sum-cf-chat`.
    pub fn tag(&self) -> String {
        let mut t = self.mode.name().to_string();
        if self.mode == Mode::Cloze {
            t.push_str(if self.cloze_score == ClozeScore::Mean {
                "-mean"
            } else {
                "-sum"
            });
        }
        if self.calibration == Calibration::ContentFree {
            t.push_str("-cf");
        }
        t.push('-');
        t.push_str(self.prompt.name());
        if self.debias == Debias::Cyclic {
            t.push_str("-cyclic");
        }
        t
    }
}
