//! A thin wrapper over Hugging Face `tokenizers` that builds for wasm32 too.

use super::prompt::{letter, LETTERS};
use super::CoreError;

pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
}

/// The answer letters as single token ids, and the separator that produced them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LetterIds {
    /// `" "` or `""`: what precedes the letter in the answer token.
    pub separator: String,
    /// `ids[i]` is the token of letter `i` (A, B, ...).
    pub ids: Vec<u32>,
}

impl TextTokenizer {
    pub fn from_json(bytes: &[u8]) -> Result<Self, CoreError> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| CoreError::Tokenizer(e.to_string()))?;
        Ok(Self { inner })
    }

    /// Ids of `text` with no special tokens added: head and suffix are
    /// tokenised separately and concatenated, so neither may gain a BOS.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, CoreError> {
        let enc = self.inner.encode(text, false).map_err(|e| CoreError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The ids of all 20 letters with `separator`, each required to be one token.
    pub fn letter_ids(&self, separator: &str) -> Result<LetterIds, CoreError> {
        let mut ids = Vec::with_capacity(LETTERS.len());
        for (i, l) in LETTERS.chars().enumerate() {
            let got = self.encode(&format!("{separator}{l}"))?;
            if got.len() != 1 {
                return Err(CoreError::LetterNotOneToken {
                    letter: l,
                    separator: separator.to_string(),
                    count: got.len(),
                    ids: got,
                });
            }
            if let Some(j) = ids.iter().position(|&x| x == got[0]) {
                return Err(CoreError::LettersCollide { a: letter(j), b: letter(i), id: got[0] });
            }
            ids.push(got[0]);
        }
        Ok(LetterIds { separator: separator.to_string(), ids })
    }

    /// The suffix ends with `"Answer:"`, so the natural answer is `" A"`; a
    /// tokenizer that cannot make that one token falls back to `"A"`.
    pub fn probe_letter_ids(&self) -> Result<LetterIds, CoreError> {
        self.letter_ids(" ").or_else(|first| self.letter_ids("").map_err(|_| first))
    }
}
