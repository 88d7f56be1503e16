//! The readout flags `score` and `evaluate` share: the engine's own option
//! types, parsed by their serialised names so the CLI, the JS API and the
//! reports spell them the same.

use serde::de::DeserializeOwned;

use crate::core::read::debias::Debias;
use crate::core::spec::mode::{
    Calibration, ClozeScore, HeadStyle, Mode, PromptStyle, ReadoutChoice,
};
use crate::engine::ScoreOptions;

fn parse<T: DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|e| format!("{s:?}: {e}"))
}

/// Each flag overrides one field of the model's readout defaults (its
/// models.json entry's, else the rule's: `model_dir::entry_readout`), the
/// ones the browser serves too; a flag left out takes the default.
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
    #[arg(long, default_value = "none", value_parser = parse::<Debias>)]
    pub debias: Debias,
}

/// The readout a command runs: the flags over the model's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readout {
    pub choice: ReadoutChoice,
    pub debias: Debias,
}

impl ReadoutArgs {
    /// Each flag given replaces that field of `defaults`.
    pub fn over(&self, defaults: ReadoutChoice) -> Readout {
        Readout {
            choice: defaults.with(self.mode, self.cloze_score, self.calibration, self.prompt),
            debias: self.debias,
        }
    }
}

impl Readout {
    /// The head a state is prefilled in: this prompt, and this mode's default instruction.
    pub fn head_style(&self) -> HeadStyle {
        HeadStyle {
            prompt: self.choice.prompt,
            mode: self.choice.mode,
        }
    }

    pub fn score_options(&self) -> ScoreOptions {
        ScoreOptions::of(self.choice, self.debias, true)
    }

    /// A short tag for report file names: `cloze-sum-cf-chat`.
    pub fn tag(&self) -> String {
        let c = &self.choice;
        let mut t = c.mode.name().to_string();
        if c.mode == Mode::Cloze {
            t.push_str(if c.cloze_score == ClozeScore::Mean {
                "-mean"
            } else {
                "-sum"
            });
        }
        if c.calibration == Calibration::ContentFree {
            t.push_str("-cf");
        }
        t.push('-');
        t.push_str(c.prompt.name());
        if self.debias == Debias::Cyclic {
            t.push_str("-cyclic");
        }
        t
    }
}
