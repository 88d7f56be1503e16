//! Where each answer letter is read from: a vocabulary id of a full head, or a
//! row of a pruned head (through the slot map). Proven against the tokenizer
//! at load (spec §6.3).

use serde::Serialize;

use crate::core::model::config::ModelConfig;
use crate::core::model::slot_map::SlotMap;
use crate::core::read::slots::HeadColumns;
use crate::core::text::prompt::{letter, LETTERS};
use crate::core::text::tokenizer::TextTokenizer;
use crate::engine::EngineError;

#[derive(Debug, Clone, Serialize)]
pub struct LetterPlan {
    pub separator: String,
    /// Token id of each letter A..T.
    pub letter_ids: Vec<u32>,
    /// Column of each letter A..T in the returned logits; `None` where a
    /// pruned head does not keep the letter.
    pub columns: Vec<Option<usize>>,
    #[serde(skip)]
    pub head: HeadColumns,
    pub pruned_letters: Option<String>,
}

impl LetterPlan {
    pub fn new(
        tok: &TextTokenizer,
        config: &ModelConfig,
        slot_map: Option<&SlotMap>,
    ) -> Result<Self, EngineError> {
        match slot_map {
            None => {
                let ids = tok.probe_letter_ids()?;
                if let Some(&bad) = ids.ids.iter().find(|&&id| id as usize >= config.vocab_size) {
                    return Err(EngineError::Proof(format!(
                        "letter token {bad} is outside vocab_size {}",
                        config.vocab_size
                    )));
                }
                Ok(Self {
                    separator: ids.separator,
                    columns: ids.ids.iter().map(|&id| Some(id as usize)).collect(),
                    letter_ids: ids.ids,
                    head: HeadColumns::Vocab {
                        vocab: config.vocab_size,
                    },
                    pruned_letters: None,
                })
            }
            Some(map) => {
                map.check_against(tok)?;
                if map.original_vocab_size != config.vocab_size {
                    return Err(EngineError::Proof(format!(
                        "slot_map.json original_vocab_size {} but config.json vocab_size {}",
                        map.original_vocab_size, config.vocab_size
                    )));
                }
                let sep = map.separator.clone().unwrap_or_default();
                let ids = tok.letter_ids(&sep)?;
                Ok(Self {
                    separator: sep,
                    letter_ids: ids.ids,
                    columns: LETTERS.chars().map(|l| map.row_of_letter(l)).collect(),
                    head: HeadColumns::Pruned { rows: map.rows },
                    pruned_letters: Some(map.letters.clone()),
                })
            }
        }
    }

    /// Columns of the first `n` letters, for an `n`-option criterion.
    pub fn columns_for(&self, criterion: &str, n: usize) -> Result<Vec<usize>, EngineError> {
        (0..n)
            .map(|i| {
                self.columns[i].ok_or_else(|| EngineError::LetterNotKept {
                    criterion: criterion.to_string(),
                    letter: letter(i),
                    kept: self.pruned_letters.clone().unwrap_or_default(),
                })
            })
            .collect()
    }

    /// Every letter column the head has (what the load-time probe compares).
    pub fn all_columns(&self) -> Vec<usize> {
        self.columns.iter().flatten().copied().collect()
    }
}
