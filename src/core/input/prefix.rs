//! A shared prefix (a rubric): the instruction and worked examples that many
//! documents share, prefilled once; each document's state continues its past.

use serde::{Deserialize, Serialize};

use crate::core::input::criteria::Criterion;
use crate::core::input::mode::Mode;
use crate::core::CoreError;

/// A worked example: a criterion answered over its own evidence, rendered
/// in the mode's own format before the documents' evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    pub evidence: String,
    pub criterion: Criterion,
    /// The id of the option that answers it.
    pub answer: String,
}

/// What a prefix holds: the instruction (the mode's default when absent)
/// and the worked examples, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefixSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Example>,
}

impl Example {
    /// The index of the answering option, checked with the criterion for `mode`.
    pub fn answer_index(&self, mode: Mode) -> Result<usize, CoreError> {
        self.criterion.validate_for(mode)?;
        if self.evidence.trim().is_empty() {
            return Err(CoreError::EmptyField {
                criterion: self.criterion.id.clone(),
                field: "example evidence",
            });
        }
        self.criterion
            .options
            .iter()
            .position(|o| o.id == self.answer)
            .ok_or_else(|| CoreError::UnknownAnswer {
                criterion: self.criterion.id.clone(),
                answer: self.answer.clone(),
            })
    }
}

impl PrefixSpec {
    /// A prefix as a JSON object (`--prefix FILE`, a fixture's `prefix`).
    pub fn parse(text: &str) -> Result<Self, CoreError> {
        serde_json::from_str(text).map_err(|e| CoreError::Json {
            line: e.line(),
            column: e.column(),
            message: format!("prefix: {e}"),
        })
    }
}
