//! A thin wrapper over Hugging Face `tokenizers` that builds for wasm32 too.

use crate::core::input::input_limits::{self, COUNT_PIECE_BYTES, TOKENS_PER_CUT};
use crate::core::text::prompt::{letter, LETTERS};
use crate::core::CoreError;

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

/// The end of the piece of `text` from `at`: at most `max` bytes on, cut
/// just before a whitespace character when one lies in the piece's second
/// half, else at a character boundary.
fn piece_end(text: &str, at: usize, max: usize) -> usize {
    let target = at + max;
    if target >= text.len() {
        return text.len();
    }
    let mut end = target;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let window = &text[at..end];
    match window.rfind(char::is_whitespace) {
        Some(p) if p > max / 2 => at + p,
        _ if end > at => end,
        // A piece of at most 3 bytes cannot hold a whole 4-byte character.
        _ => at + text[at..].chars().next().map_or(1, char::len_utf8),
    }
}

impl TextTokenizer {
    pub fn from_json(bytes: &[u8]) -> Result<Self, CoreError> {
        input_limits::check_file("tokenizer.json", bytes.len() as u64)?;
        let inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| CoreError::Tokenizer(e.to_string()))?;
        Ok(Self { inner })
    }

    /// Ids of `text` with no special tokens added: head and suffix are
    /// tokenised separately and concatenated, so neither may gain a BOS.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, CoreError> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| CoreError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Whether `text` surely tokenises to more than `limit` tokens, found by
    /// encoding it in pieces cut at whitespace and stopping as soon as the
    /// pieces' count, less what the cuts may have added, passes `limit`. So
    /// an oversized text costs about `limit` tokens of work, not its length.
    /// `Some((bytes counted, tokens))` when it does; `None` when it may fit
    /// (the caller then encodes it whole and checks exactly).
    pub fn surely_exceeds(
        &self,
        text: &str,
        limit: usize,
    ) -> Result<Option<(usize, usize)>, CoreError> {
        if text.len() <= COUNT_PIECE_BYTES {
            return Ok(None);
        }
        let (mut at, mut tokens, mut cuts) = (0, 0usize, 0usize);
        while at < text.len() {
            let end = piece_end(text, at, COUNT_PIECE_BYTES);
            tokens += self.encode(&text[at..end])?.len();
            at = end;
            if at < text.len() {
                cuts += 1;
            }
            if tokens > limit.saturating_add(cuts.saturating_mul(TOKENS_PER_CUT)) {
                return Ok(Some((at, tokens)));
            }
        }
        Ok(None)
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
                return Err(CoreError::LettersCollide {
                    a: letter(j),
                    b: letter(i),
                    id: got[0],
                });
            }
            ids.push(got[0]);
        }
        Ok(LetterIds {
            separator: separator.to_string(),
            ids,
        })
    }

    /// The suffix ends with `"Answer:"`, so the natural answer is `" A"`; a
    /// tokenizer that cannot make that one token falls back to `"A"`.
    pub fn probe_letter_ids(&self) -> Result<LetterIds, CoreError> {
        self.letter_ids(" ")
            .or_else(|first| self.letter_ids("").map_err(|_| first))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_end_before_whitespace_or_at_a_character_boundary() {
        let text = "ab cd ef";
        assert_eq!(piece_end(text, 0, 6), 5);
        assert_eq!(piece_end(text, 0, 100), text.len());
        let wide = "ééééé"; // 2 bytes each, no whitespace
        assert_eq!(piece_end(wide, 0, 5), 4);
        assert_eq!(piece_end("😀x", 0, 2), 4);
    }

    #[test]
    fn oversized_text_is_found_from_its_first_pieces() {
        let t = bytes_only();
        let text = "AB CD ".repeat(200_000); // 1.2 MB, one token a byte
        let (counted, tokens) = t.surely_exceeds(&text, 20_000).unwrap().unwrap();
        assert!(
            tokens > 20_000 && counted < 3 * COUNT_PIECE_BYTES,
            "{counted} {tokens}"
        );
        assert_eq!(t.surely_exceeds(&text, 2_000_000).unwrap(), None);
        assert_eq!(
            t.surely_exceeds("AB CD", 1).unwrap(),
            None,
            "short text: encoded whole"
        );
    }

    /// A byte-level BPE with no merges: every byte is its own token.
    fn bytes_only() -> TextTokenizer {
        let mut vocab = serde_json::Map::new();
        let chars: Vec<String> = (b'A'..=b'Z')
            .map(|b| (b as char).to_string())
            .chain(["Ġ".to_string(), ":".to_string()])
            .collect();
        for (i, c) in chars.iter().enumerate() {
            vocab.insert(c.clone(), i.into());
        }
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
            "post_processor": null, "decoder": null,
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": []}
        });
        TextTokenizer::from_json(json.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn a_letter_that_is_two_tokens_is_named_and_the_bare_letter_is_tried() {
        let t = bytes_only();
        let e = t.letter_ids(" ").unwrap_err();
        assert!(
            matches!(
                e,
                CoreError::LetterNotOneToken {
                    letter: 'A',
                    count: 2,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("exactly one"));
        let ids = t.probe_letter_ids().unwrap();
        assert_eq!(ids.separator, "");
        assert_eq!(ids.ids[..3], [0, 1, 2]);
    }

    #[test]
    fn letters_that_collapse_to_one_token_are_refused() {
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "A": 1, "B": 2}, "unk_token": "[UNK]"}
        });
        let t = TextTokenizer::from_json(json.to_string().as_bytes()).unwrap();
        let e = t.probe_letter_ids().unwrap_err();
        assert!(
            matches!(
                e,
                CoreError::LettersCollide {
                    a: 'C',
                    b: 'D',
                    id: 0
                }
            ),
            "{e}"
        );
    }
}
