//! The prompt contract (spec §3). Head and suffix are rendered and tokenised
//! separately; any full-prompt reference concatenates the two id lists.

use crate::core::input::criteria::{Criterion, MAX_OPTIONS};
use crate::core::input::mode::Mode;

/// Answer letters, in the order options are shown.
pub const LETTERS: &str = "ABCDEFGHIJKLMNOPQRST";
// One letter per option a letters criterion may have.
const _: () = assert!(LETTERS.len() == MAX_OPTIONS);

/// The evidence of the content-free baseline: says nothing, so what the model
/// prefers after it is its prior over the options (calibration divides it out).
pub const CONTENT_FREE_EVIDENCE: &str = "N/A";

/// Works with base and instruct models alike: plain text, no chat markup.
pub const DEFAULT_INSTRUCTION: &str = "Read the evidence below. Then answer each criterion \
by choosing the one option the evidence supports, and reply with that option's letter.";

/// The default instruction of a head prefilled for cloze. Measured on
/// SmolLM2-135M-Instruct over the authored fixture (cloze, sum, content-free,
/// plain): the letters instruction above gives accuracy 0.584; this one,
/// which does not ask for a letter the readout never reads, 0.674.
pub const CLOZE_INSTRUCTION: &str =
    "Read the evidence below. Then answer each question from the evidence.";

/// The instruction a head carries when its state gives none.
pub fn default_instruction(mode: Mode) -> &'static str {
    match mode {
        Mode::Letters => DEFAULT_INSTRUCTION,
        Mode::Cloze => CLOZE_INSTRUCTION,
    }
}

pub fn letter(index: usize) -> char {
    LETTERS.as_bytes()[index] as char
}

/// `INSTRUCTION + evidence`: prefilled once per state.
pub fn render_head(instruction: Option<&str>, evidence: &str) -> String {
    head_after(&render_before(instruction, ""), evidence)
}

/// What a head holds before its evidence: the instruction, then any worked
/// examples (`render_examples`), then the evidence's label. A shared prefix
/// is exactly this text.
pub fn render_before(instruction: Option<&str>, examples: &str) -> String {
    let instruction = instruction.unwrap_or(DEFAULT_INSTRUCTION);
    format!("{instruction}\n\n{examples}Evidence:\n")
}

/// A head: the text before the evidence, then the evidence and its newline.
pub fn head_after(before: &str, evidence: &str) -> String {
    format!("{before}{evidence}\n")
}

/// One worked example in `mode`'s own format: its evidence, its criterion
/// as the readout shows it, and the answer the readout would read (the
/// letter after `Answer:`, or the option's text for cloze), then a blank line.
pub fn render_example(mode: Mode, evidence: &str, criterion: &Criterion, answer: usize) -> String {
    let read = match mode {
        Mode::Letters => {
            let order: Vec<usize> = (0..criterion.options.len()).collect();
            format!("{} {}", render_suffix(criterion, &order), letter(answer))
        }
        Mode::Cloze => format!(
            "{}{}",
            render_question(criterion),
            render_option(&criterion.options[answer].description)
        ),
    };
    format!("Evidence:\n{evidence}\n{read}\n\n")
}

/// The suffix for one criterion, with its options shown in `order`
/// (`order[i]` is the index of the option shown under letter `i`).
pub fn render_suffix(criterion: &Criterion, order: &[usize]) -> String {
    let mut s = format!("\nCriterion: {}\nOptions:\n", criterion.question);
    for (slot, &opt) in order.iter().enumerate() {
        s.push(letter(slot));
        s.push_str(". ");
        s.push_str(&criterion.options[opt].description);
        s.push('\n');
    }
    s.push_str("Answer:");
    s
}

/// Cloze: the question part, run once per criterion against the state's past.
pub fn render_question(criterion: &Criterion) -> String {
    format!("\nQuestion: {}\nAnswer:", criterion.question)
}

/// Cloze: an option's text as the answer's continuation, with the leading
/// space BPE tokenizers fold into a word's first token.
pub fn render_option(description: &str) -> String {
    format!(" {}", description.trim())
}

/// A label for option `index`: its letter up to T, then its 1-based number
/// (cloze takes more options than there are letters).
pub fn label(index: usize) -> String {
    LETTERS
        .as_bytes()
        .get(index)
        .map(|&b| (b as char).to_string())
        .unwrap_or_else(|| (index + 1).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::input::criteria::{Criterion, OptionSpec};

    fn crit() -> Criterion {
        Criterion {
            id: "c".into(),
            family: "lookup".into(),
            question: "Which colour?".into(),
            options: vec![
                OptionSpec {
                    id: "r".into(),
                    description: "red".into(),
                },
                OptionSpec {
                    id: "g".into(),
                    description: "green".into(),
                },
            ],
            answer: None,
        }
    }

    #[test]
    fn suffix_matches_the_contract_exactly() {
        assert_eq!(
            render_suffix(&crit(), &[0, 1]),
            "\nCriterion: Which colour?\nOptions:\nA. red\nB. green\nAnswer:"
        );
        assert_eq!(
            render_suffix(&crit(), &[1, 0]),
            "\nCriterion: Which colour?\nOptions:\nA. green\nB. red\nAnswer:"
        );
    }

    #[test]
    fn cloze_parts_match_the_contract_exactly() {
        assert_eq!(
            render_question(&crit()),
            "\nQuestion: Which colour?\nAnswer:"
        );
        assert_eq!(render_option("  red "), " red");
        assert_eq!(label(0), "A");
        assert_eq!(label(19), "T");
        assert_eq!(label(20), "21");
    }

    #[test]
    fn head_uses_default_instruction_unless_overridden() {
        assert!(render_head(None, "x").starts_with(DEFAULT_INSTRUCTION));
        assert_eq!(render_head(Some("Judge."), "e"), "Judge.\n\nEvidence:\ne\n");
    }
}
