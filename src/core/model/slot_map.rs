//! `slot_map.json` v1 (spec §4): which vocabulary ids a pruned head keeps.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::core::text::prompt::LETTERS;
use crate::core::text::tokenizer::TextTokenizer;
use crate::core::CoreError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotMap {
    pub version: u32,
    pub model_id: String,
    /// `None` when the letter ids could not be reproduced by probing the tokenizer.
    pub separator: Option<String>,
    pub letters: String,
    pub rows: usize,
    pub original_vocab_size: usize,
    /// In letter order; never sorted.
    pub keep: Vec<u32>,
    pub token_to_row: BTreeMap<String, usize>,
    pub can_generate_text: bool,
}

fn bad(msg: String) -> CoreError {
    CoreError::SlotMap(msg)
}

impl SlotMap {
    pub fn new(
        model_id: &str,
        separator: Option<&str>,
        letters: &str,
        keep: Vec<u32>,
        original_vocab_size: usize,
    ) -> Result<Self, CoreError> {
        let token_to_row = keep
            .iter()
            .enumerate()
            .map(|(row, id)| (id.to_string(), row))
            .collect();
        let map = Self {
            version: 1,
            model_id: model_id.to_string(),
            separator: separator.map(str::to_string),
            letters: letters.to_string(),
            rows: keep.len(),
            original_vocab_size,
            keep,
            token_to_row,
            can_generate_text: false,
        };
        map.validate()?;
        Ok(map)
    }

    /// Parses and refuses a map whose two directions disagree.
    pub fn parse(json: &str) -> Result<Self, CoreError> {
        let map: Self = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
        map.validate()?;
        Ok(map)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a slot map always serialises")
    }

    pub fn validate(&self) -> Result<(), CoreError> {
        if self.version != 1 {
            return Err(bad(format!(
                "version is {}; only 1 is understood",
                self.version
            )));
        }
        let letters: Vec<char> = self.letters.chars().collect();
        if letters.is_empty() || letters.len() > LETTERS.len() {
            return Err(bad(format!(
                "letters has {} entries; 1 to 20 are allowed",
                letters.len()
            )));
        }
        let mut seen = HashSet::new();
        for l in &letters {
            if !LETTERS.contains(*l) || !seen.insert(*l) {
                return Err(bad(format!(
                    "letters {:?}: {l:?} is not a distinct letter of {LETTERS}",
                    self.letters
                )));
            }
        }
        if self.rows != letters.len() || self.keep.len() != letters.len() {
            return Err(bad(format!(
                "rows is {}, keep has {} ids and letters has {}; all three must agree",
                self.rows,
                self.keep.len(),
                letters.len()
            )));
        }
        if self.token_to_row.len() != self.rows {
            return Err(bad(format!(
                "token_to_row has {} entries; rows is {}",
                self.token_to_row.len(),
                self.rows
            )));
        }
        for (row, id) in self.keep.iter().enumerate() {
            if *id as usize >= self.original_vocab_size {
                return Err(bad(format!(
                    "keep[{row}] = {id} is outside original_vocab_size {}",
                    self.original_vocab_size
                )));
            }
            match self.token_to_row.get(&id.to_string()) {
                Some(&r) if r == row => {}
                Some(&r) => {
                    return Err(bad(format!(
                        "keep[{row}] = {id} but token_to_row[{id}] = {r}: the directions disagree"
                    )))
                }
                None => {
                    return Err(bad(format!(
                        "keep[{row}] = {id} is missing from token_to_row: the directions disagree"
                    )))
                }
            }
        }
        Ok(())
    }

    /// The head row that holds `letter`, if the map keeps it.
    pub fn row_of_letter(&self, letter: char) -> Option<usize> {
        self.letters.chars().position(|l| l == letter)
    }

    /// spec §6.3: each kept id must be what the tokenizer makes of its letter.
    pub fn check_against(&self, tok: &TextTokenizer) -> Result<(), CoreError> {
        let Some(sep) = &self.separator else {
            return Err(bad("separator is null: the kept ids were never reproduced by the tokenizer, so the readout cannot trust them".into()));
        };
        let ids = tok.letter_ids(sep)?;
        for (row, l) in self.letters.chars().enumerate() {
            let want = ids.ids[LETTERS.find(l).expect("validated")];
            if self.keep[row] != want {
                return Err(bad(format!(
                    "keep[{row}] = {} but the tokenizer makes {:?} into {want}",
                    self.keep[row],
                    format!("{sep}{l}")
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_order_survives_write_and_read() {
        let m = SlotMap::new("m", Some(" "), "ABCD", vec![362, 425, 356, 422], 151936).unwrap();
        let back = SlotMap::parse(&m.to_json()).unwrap();
        assert_eq!(back.keep, vec![362, 425, 356, 422]);
        assert_eq!(back, m);
    }

    #[test]
    fn disagreeing_directions_are_refused() {
        let m = SlotMap::new("m", Some(" "), "ABCD", vec![362, 425, 356, 422], 151936).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
        v["token_to_row"]["425"] = 2.into();
        v["token_to_row"]["356"] = 1.into();
        let e = SlotMap::parse(&v.to_string()).unwrap_err();
        assert!(e.to_string().contains("directions disagree"), "{e}");
        // A sorted keep with the original token_to_row is the classic fault.
        let mut v: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
        v["keep"] = serde_json::json!([356, 362, 422, 425]);
        assert!(SlotMap::parse(&v.to_string()).is_err());
    }

    #[test]
    fn counts_must_agree() {
        let mut v: serde_json::Value = serde_json::from_str(
            &SlotMap::new("m", None, "AB", vec![1, 2], 10)
                .unwrap()
                .to_json(),
        )
        .unwrap();
        v["rows"] = 3.into();
        assert!(SlotMap::parse(&v.to_string())
            .unwrap_err()
            .to_string()
            .contains("rows is 3"));
        assert!(SlotMap::new("m", None, "AB", vec![1, 20], 10).is_err());
    }
}
