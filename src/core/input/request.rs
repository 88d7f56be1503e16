//! The one readout request every caller parses into (the CLI's flags, the
//! browser's options objects, Python's JSON), and the one function that
//! resolves it: the caller's fields over the model's defaults, the graph's
//! pruning, and the rules on which fields go together. Nothing else merges.

use serde::{Deserialize, Serialize};

use crate::core::input::mode::{
    Calibration, ClozeScore, Debias, HeadStyle, Mode, PromptStyle, ReadoutChoice,
};
use crate::core::CoreError;

/// What a call asks for. A field left out takes the model's default (its
/// models.json entry's readout, else the rule's: `ReadoutChoice::default`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadoutRequest {
    pub mode: Option<Mode>,
    pub cloze_score: Option<ClozeScore>,
    pub calibration: Option<Calibration>,
    /// Fixed per state at prefill; a score call's is not read.
    pub prompt: Option<PromptStyle>,
    pub debias: Option<Debias>,
    /// The letters' share of the full softmax; only an unpruned head has it,
    /// so it is off on a pruned one whatever was asked.
    pub allowed_mass: Option<bool>,
}

/// A request resolved: every field decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Readout {
    pub mode: Mode,
    pub cloze_score: ClozeScore,
    pub calibration: Calibration,
    pub prompt: PromptStyle,
    pub debias: Debias,
    pub allowed_mass: bool,
}

impl ReadoutRequest {
    /// The one place a request meets the model's defaults: each field given
    /// wins, the rest are `defaults`'; `allowed_mass` is on unless refused or
    /// the head is `pruned`. Cyclic debiasing with cloze is refused: rotations
    /// move options between letters, and cloze shows none.
    pub fn resolve(&self, defaults: ReadoutChoice, pruned: bool) -> Result<Readout, CoreError> {
        let r = Readout {
            mode: self.mode.unwrap_or(defaults.mode),
            cloze_score: self.cloze_score.unwrap_or(defaults.cloze_score),
            calibration: self.calibration.unwrap_or(defaults.calibration),
            prompt: self.prompt.unwrap_or(defaults.prompt),
            debias: self.debias.unwrap_or_default(),
            allowed_mass: self.allowed_mass.unwrap_or(true) && !pruned,
        };
        if r.mode == Mode::Cloze && r.debias != Debias::None {
            return Err(CoreError::OptionConflict {
                field: "debias",
                value: "cyclic".into(),
                reason: "rotations move options between letters; cloze shows no letters (use debias none)",
            });
        }
        Ok(r)
    }
}

impl Readout {
    /// How a state is prefilled for it: the prompt, and the mode whose
    /// default instruction the head carries.
    pub fn head_style(&self) -> HeadStyle {
        HeadStyle {
            prompt: self.prompt,
            mode: self.mode,
        }
    }

    /// The choice it makes, with the prompt `prompt` (a state's, fixed at
    /// prefill): what a decision reports it ran.
    pub fn choice(&self, prompt: PromptStyle) -> ReadoutChoice {
        ReadoutChoice {
            mode: self.mode,
            cloze_score: self.cloze_score,
            calibration: self.calibration,
            prompt,
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

#[cfg(test)]
mod tests {
    use super::*;

    const CLOZE_CHAT: ReadoutChoice = ReadoutChoice {
        mode: Mode::Cloze,
        cloze_score: ClozeScore::Mean,
        calibration: Calibration::ContentFree,
        prompt: PromptStyle::Chat,
    };

    #[test]
    fn a_field_given_wins_and_the_rest_are_the_defaults() {
        let r = ReadoutRequest {
            calibration: Some(Calibration::None),
            ..Default::default()
        }
        .resolve(CLOZE_CHAT, false)
        .unwrap();
        assert_eq!(r.mode, Mode::Cloze);
        assert_eq!(r.cloze_score, ClozeScore::Mean);
        assert_eq!(r.calibration, Calibration::None);
        assert_eq!(r.prompt, PromptStyle::Chat);
        assert_eq!(r.debias, Debias::None);
        assert_eq!(r.tag(), "cloze-mean-chat");
        let letters = ReadoutRequest {
            mode: Some(Mode::Letters),
            debias: Some(Debias::Cyclic),
            ..Default::default()
        }
        .resolve(CLOZE_CHAT, false)
        .unwrap();
        assert_eq!(letters.tag(), "letters-cf-chat-cyclic");
    }

    #[test]
    fn allowed_mass_is_on_unless_refused_and_never_on_a_pruned_head() {
        let d = ReadoutChoice::default();
        let ask = |a| ReadoutRequest {
            allowed_mass: a,
            ..Default::default()
        };
        assert!(ask(None).resolve(d, false).unwrap().allowed_mass);
        assert!(!ask(Some(false)).resolve(d, false).unwrap().allowed_mass);
        assert!(!ask(None).resolve(d, true).unwrap().allowed_mass);
        assert!(!ask(Some(true)).resolve(d, true).unwrap().allowed_mass);
    }

    #[test]
    fn cyclic_with_cloze_is_refused_whether_cloze_was_asked_or_the_default() {
        let cyclic = ReadoutRequest {
            debias: Some(Debias::Cyclic),
            ..Default::default()
        };
        let e = cyclic.resolve(CLOZE_CHAT, false).unwrap_err();
        assert_eq!(e.info().code, "invalid_option");
        assert_eq!(e.info().field.as_deref(), Some("debias"));
        assert!(e.to_string().contains("rotations move options"), "{e}");
        assert!(cyclic.resolve(ReadoutChoice::default(), false).is_ok());
    }
}
