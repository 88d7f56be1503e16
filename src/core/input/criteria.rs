//! The fixture format (spec §4): one state per JSONL line.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::input::mode::Mode;
use crate::core::CoreError;

pub use crate::core::input::option_limits::{MAX_CLOZE_OPTIONS, MAX_OPTIONS, MIN_OPTIONS};

// Unknown fields are refused (deny_unknown_fields, and before it
// `check_fields`, which names the nearest known field): a typo such as
// `answr` would otherwise drop the gold answer without a word.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionSpec {
    pub id: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
    /// Checks the shape for letters mode (at most 20 options).
    pub fn validate(&self) -> Result<(), CoreError> {
        self.validate_for(Mode::Letters)
    }

    /// Checks the shape for `mode`: letters take up to 20 options, cloze up to 64.
    pub fn validate_for(&self, mode: Mode) -> Result<(), CoreError> {
        let criterion = self.id.clone();
        if self.id.trim().is_empty() {
            return Err(CoreError::EmptyField {
                criterion,
                field: "id",
            });
        }
        if self.question.trim().is_empty() {
            return Err(CoreError::EmptyField {
                criterion,
                field: "question",
            });
        }
        let count = self.options.len();
        if count < MIN_OPTIONS {
            return Err(CoreError::TooFewOptions { criterion, count });
        }
        let limit = match mode {
            Mode::Letters => MAX_OPTIONS,
            Mode::Cloze => MAX_CLOZE_OPTIONS,
        };
        if count > limit {
            return Err(CoreError::TooManyOptions {
                criterion,
                count,
                limit,
                mode: mode.name(),
            });
        }
        let mut seen = HashSet::new();
        for o in &self.options {
            if o.id.is_empty() {
                return Err(CoreError::EmptyField {
                    criterion,
                    field: "options[].id",
                });
            }
            if o.description.trim().is_empty() {
                return Err(CoreError::EmptyField {
                    criterion,
                    field: "options[].description",
                });
            }
            if !seen.insert(o.id.as_str()) {
                return Err(CoreError::DuplicateOptionId {
                    criterion,
                    id: o.id.clone(),
                });
            }
        }
        if let Some(a) = &self.answer {
            if !seen.contains(a.as_str()) {
                return Err(CoreError::UnknownAnswer {
                    criterion,
                    answer: a.clone(),
                });
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

impl StateSpec {
    /// Checks a state without a model: evidence present, criterion ids
    /// present and distinct (decisions are reported by id, so two criteria
    /// called `team` could not be told apart), every criterion valid.
    pub fn validate(&self) -> Result<(), CoreError> {
        if self.evidence.trim().is_empty() {
            return Err(CoreError::EmptyEvidence {
                state: self.id.clone(),
            });
        }
        let mut seen = HashSet::new();
        for (index, c) in self.criteria.iter().enumerate() {
            if c.id.trim().is_empty() {
                return Err(CoreError::EmptyCriterionId {
                    state: self.id.clone(),
                    index,
                });
            }
            if !seen.insert(c.id.as_str()) {
                return Err(CoreError::DuplicateCriterionId {
                    state: self.id.clone(),
                    id: c.id.clone(),
                });
            }
            // The widest limit of any mode: the engine holds each call to its own.
            c.validate_for(Mode::Cloze)?;
        }
        Ok(())
    }
}

const STATE_FIELDS: &[&str] = &["id", "instruction", "evidence", "criteria"];
const CRITERION_FIELDS: &[&str] = &["id", "family", "question", "options", "answer"];
const OPTION_FIELDS: &[&str] = &["id", "description"];

/// Edit distance (insertions, deletions, substitutions) between two names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Refuses a key of object `v` not in `known`, naming the nearest known one.
pub fn check_object(
    v: &Value,
    path: &str,
    known: &'static [&'static str],
) -> Result<(), CoreError> {
    let Some(map) = v.as_object() else {
        return Ok(());
    };
    for key in map.keys() {
        if !known.contains(&key.as_str()) {
            let nearest = known
                .iter()
                .min_by_key(|k| distance(key, k))
                .copied()
                .unwrap_or("");
            return Err(CoreError::UnknownField {
                path: path.to_string(),
                field: key.clone(),
                nearest,
                known,
            });
        }
    }
    Ok(())
}

/// Refuses the first field the fixture format does not have, naming where
/// it is and the nearest known field. Values of the wrong shape are left to
/// the typed parse, which reports them.
pub fn check_fields(state: &Value) -> Result<(), CoreError> {
    check_object(state, "state", STATE_FIELDS)?;
    let criteria = state
        .get("criteria")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (i, c) in criteria.iter().enumerate() {
        check_criterion(c, &format!("criteria[{i}]"))?;
    }
    Ok(())
}

/// [`check_fields`] for one criterion (the JS surface takes them alone).
pub fn check_criterion(c: &Value, path: &str) -> Result<(), CoreError> {
    check_object(c, path, CRITERION_FIELDS)?;
    let options = c
        .get("options")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (j, o) in options.iter().enumerate() {
        check_object(o, &format!("{path}.options[{j}]"), OPTION_FIELDS)?;
    }
    Ok(())
}

/// Why one state's text was refused: JSON (located by serde) or content.
enum StateError {
    Json(serde_json::Error),
    Core(CoreError),
}

/// One state from JSON text: fields checked by name first, then parsed
/// typed (so a missing field or a wrong type is serde's own message), then
/// validated.
fn parse_state(text: &str) -> Result<StateSpec, StateError> {
    let value: Value = serde_json::from_str(text).map_err(StateError::Json)?;
    check_fields(&value).map_err(StateError::Core)?;
    let state: StateSpec = serde_json::from_str(text).map_err(StateError::Json)?;
    state.validate().map_err(StateError::Core)?;
    Ok(state)
}

/// serde_json's message without the " at line L column C" it appends, which
/// the error variants carry as fields.
fn json_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    let tail = format!(" at line {} column {}", e.line(), e.column());
    s.strip_suffix(&tail).map(str::to_string).unwrap_or(s)
}

/// Parses a JSONL fixture; blank lines are skipped, line numbers are 1-based.
pub fn parse_jsonl(text: &str) -> Result<Vec<StateSpec>, CoreError> {
    let mut states = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let state = parse_state(line).map_err(|e| match e {
            StateError::Json(e) => CoreError::Fixture {
                line: i + 1,
                message: format!("{} (column {})", json_message(&e), e.column()),
            },
            StateError::Core(e) => CoreError::Fixture {
                line: i + 1,
                message: e.to_string(),
            },
        })?;
        states.push(state);
    }
    Ok(states)
}

/// A state file: one JSON document (pretty-printed or not) or JSONL, told
/// apart by shape. If the first JSON value in the text spans several lines
/// the file is one document, and any error is reported at its line and
/// column in the file; if it fits on the first line, the file is JSONL and
/// errors name the line. (Falling back from one to the other would report
/// the wrong parser's error: a pretty-printed object with a missing field
/// used to read "line 1: EOF while parsing an object".)
pub fn parse_states(text: &str) -> Result<Vec<StateSpec>, CoreError> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match values.next() {
        None => Ok(Vec::new()),
        Some(Err(e)) => Err(CoreError::Json {
            line: e.line(),
            column: e.column(),
            message: json_message(&e),
        }),
        Some(Ok(_)) => {
            let first = &text[..values.byte_offset()];
            if first.trim().contains('\n') {
                let state = parse_state(text).map_err(|e| match e {
                    StateError::Json(e) => CoreError::Json {
                        line: e.line(),
                        column: e.column(),
                        message: json_message(&e),
                    },
                    StateError::Core(e) => e,
                })?;
                Ok(vec![state])
            } else {
                parse_jsonl(text)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crit(n: usize) -> Criterion {
        Criterion {
            id: "q1".into(),
            family: "f".into(),
            question: "Q?".into(),
            options: (0..n)
                .map(|i| OptionSpec {
                    id: format!("o{i}"),
                    description: format!("d{i}"),
                })
                .collect(),
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
        assert!(matches!(
            c.validate(),
            Err(CoreError::DuplicateOptionId { .. })
        ));
        let mut c = crit(3);
        c.question = "  ".into();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("question is empty"));
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

    const PRETTY: &str = "{\n  \"id\": \"s\",\n  \"evidence\": \"e\",\n  \"criteria\": [\n    {\"id\": \"c\", \"question\": \"Q?\",\n     \"options\": [{\"id\": \"a\", \"description\": \"A\"}, {\"id\": \"b\", \"description\": \"B\"}]}\n  ]\n}\n";

    #[test]
    fn a_pretty_printed_state_is_one_document_and_its_errors_keep_line_and_column() {
        let states = parse_states(PRETTY).unwrap();
        assert_eq!(states.len(), 1);
        assert_eq!(states[0].criteria[0].options.len(), 2);
        let example =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/state.json"))
                .unwrap();
        assert_eq!(parse_states(&example).unwrap().len(), 1);
        // A wrong type on line 5: serde's own message, at its line.
        let bad = PRETTY.replace("\"question\": \"Q?\"", "\"question\": 7");
        let e = parse_states(&bad).unwrap_err();
        assert!(matches!(&e, CoreError::Json { line: 5, .. }), "{e}");
        assert!(e.to_string().contains("invalid type: integer `7`"), "{e}");
        // A missing field: reported where the object ends, not "line 1: EOF".
        let bad = PRETTY.replace("  \"evidence\": \"e\",\n", "");
        let e = parse_states(&bad).unwrap_err();
        assert!(
            matches!(&e, CoreError::Json { line, .. } if *line > 1),
            "{e}"
        );
        assert!(e.to_string().contains("missing field `evidence`"), "{e}");
        // A syntax error inside the document.
        let e = parse_states(&PRETTY.replace("\"criteria\": [", "\"criteria\" [")).unwrap_err();
        assert!(
            matches!(
                &e,
                CoreError::Json {
                    line: 4,
                    column: 14,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn jsonl_is_told_apart_by_shape() {
        let one = serde_json::to_string(&parse_states(PRETTY).unwrap()[0]).unwrap();
        let text = format!("{one}\n{}\n", one.replace("\"id\":\"s\"", "\"id\":\"t\""));
        let states = parse_states(&text).unwrap();
        assert_eq!(
            states.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["s", "t"]
        );
        let e = parse_states(&format!("{one}\n{{\"evidence\": 3}}\n")).unwrap_err();
        assert!(matches!(&e, CoreError::Fixture { line: 2, .. }), "{e}");
        assert!(parse_states("  \n").unwrap().is_empty());
    }

    #[test]
    fn unknown_fields_are_refused_with_the_nearest_known_one() {
        let e = parse_states(&PRETTY.replace("\"question\"", "\"answr\": \"a\", \"question\""))
            .unwrap_err();
        assert_eq!(
            e,
            CoreError::UnknownField {
                path: "criteria[0]".into(),
                field: "answr".into(),
                nearest: "answer",
                known: CRITERION_FIELDS
            }
        );
        assert!(e.to_string().contains("did you mean \"answer\""), "{e}");
        let e = parse_states(&PRETTY.replace("\"evidence\"", "\"evidense\": \"x\", \"evidence\""))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("state: unknown field \"evidense\"; did you mean \"evidence\""),
            "{e}"
        );
        let e = parse_states(&PRETTY.replace(
            "\"description\": \"B\"",
            "\"description\": \"B\", \"desc\": 1",
        ))
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("criteria[0].options[1]: unknown field \"desc\""),
            "{e}"
        );
        // The typed parse refuses them too (the JS surface has no text to walk).
        assert!(
            serde_json::from_str::<OptionSpec>(r#"{"id":"a","description":"d","x":1}"#).is_err()
        );
    }

    #[test]
    fn empty_or_duplicate_criterion_ids_and_empty_evidence_are_refused() {
        let dup = PRETTY.replace("\"id\": \"c\"", "\"id\": \"team\"");
        let mut s = parse_states(&dup).unwrap().remove(0);
        s.criteria.push(s.criteria[0].clone());
        assert_eq!(
            s.validate().unwrap_err(),
            CoreError::DuplicateCriterionId {
                state: "s".into(),
                id: "team".into()
            }
        );
        let line = serde_json::to_string(&s).unwrap();
        assert!(parse_jsonl(&line)
            .unwrap_err()
            .to_string()
            .contains("criterion id \"team\" appears more than once"));
        let e = parse_states(&PRETTY.replace("\"id\": \"c\"", "\"id\": \" \"")).unwrap_err();
        assert_eq!(
            e,
            CoreError::EmptyCriterionId {
                state: "s".into(),
                index: 0
            }
        );
        let e = parse_states(&PRETTY.replace("\"evidence\": \"e\"", "\"evidence\": \"  \\n\""))
            .unwrap_err();
        assert_eq!(e, CoreError::EmptyEvidence { state: "s".into() });
    }
}
