//! The fixture format (DESIGN §4): one state per JSONL line.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::prompt::{MAX_OPTIONS, MIN_OPTIONS};
use super::CoreError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionSpec {
    pub id: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    pub id: String,
    #[serde(default)]
    pub family: String,
    pub question: String,
    pub options: Vec<OptionSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateSpec {
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    pub evidence: String,
    #[serde(default)]
    pub criteria: Vec<Criterion>,
}

impl Criterion {
    /// Checks everything about a criterion that does not need a model.
    pub fn validate(&self) -> Result<(), CoreError> {
        let criterion = self.id.clone();
        if self.question.trim().is_empty() {
            return Err(CoreError::EmptyField { criterion, field: "question" });
        }
        let count = self.options.len();
        if count < MIN_OPTIONS {
            return Err(CoreError::TooFewOptions { criterion, count });
        }
        if count > MAX_OPTIONS {
            return Err(CoreError::TooManyOptions { criterion, count });
        }
        let mut seen = HashSet::new();
        for o in &self.options {
            if o.id.is_empty() {
                return Err(CoreError::EmptyField { criterion, field: "options[].id" });
            }
            if o.description.trim().is_empty() {
                return Err(CoreError::EmptyField { criterion, field: "options[].description" });
            }
            if !seen.insert(o.id.as_str()) {
                return Err(CoreError::DuplicateOptionId { criterion, id: o.id.clone() });
            }
        }
        if let Some(a) = &self.answer {
            if !seen.contains(a.as_str()) {
                return Err(CoreError::UnknownAnswer { criterion, answer: a.clone() });
            }
        }
        Ok(())
    }

    /// Index of the gold option, when the criterion has one.
    pub fn answer_index(&self) -> Option<usize> {
        let a = self.answer.as_ref()?;
        self.options.iter().position(|o| &o.id == a)
    }
}

/// Parses a JSONL fixture; blank lines are skipped, line numbers are 1-based.
pub fn parse_jsonl(text: &str) -> Result<Vec<StateSpec>, CoreError> {
    let mut states = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let state: StateSpec = serde_json::from_str(line)
            .map_err(|e| CoreError::Fixture { line: i + 1, message: e.to_string() })?;
        for c in &state.criteria {
            c.validate().map_err(|e| CoreError::Fixture { line: i + 1, message: e.to_string() })?;
        }
        states.push(state);
    }
    Ok(states)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crit(n: usize) -> Criterion {
        Criterion {
            id: "q1".into(),
            family: "f".into(),
            question: "Q?".into(),
            options: (0..n).map(|i| OptionSpec { id: format!("o{i}"), description: format!("d{i}") }).collect(),
            answer: None,
        }
    }

    #[test]
    fn option_count_limits_are_named() {
        let e = crit(1).validate().unwrap_err();
        assert!(matches!(e, CoreError::TooFewOptions { count: 1, .. }));
        assert!(e.to_string().contains("at least 2"));
        let e = crit(21).validate().unwrap_err();
        assert!(e.to_string().contains("at most 20"), "{e}");
        assert!(crit(2).validate().is_ok());
        assert!(crit(20).validate().is_ok());
    }

    #[test]
    fn duplicates_empty_question_and_unknown_answer_are_refused() {
        let mut c = crit(3);
        c.options[2].id = "o0".into();
        assert!(matches!(c.validate(), Err(CoreError::DuplicateOptionId { .. })));
        let mut c = crit(3);
        c.question = "  ".into();
        assert!(c.validate().unwrap_err().to_string().contains("question is empty"));
        let mut c = crit(3);
        c.answer = Some("zz".into());
        assert!(matches!(c.validate(), Err(CoreError::UnknownAnswer { .. })));
    }

    #[test]
    fn jsonl_reports_the_line() {
        let good = r#"{"id":"s","evidence":"e","criteria":[]}"#;
        let text = format!("{good}\n\n{{bad\n");
        let e = parse_jsonl(&text).unwrap_err();
        assert!(matches!(e, CoreError::Fixture { line: 3, .. }), "{e}");
    }
}
