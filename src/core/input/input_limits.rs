//! How big a model's side files and a call's inputs may be, checked before
//! anything is parsed or allocated from them. Each bound is far above what a
//! real model or state needs (noted beside it), so it only ever refuses a
//! file or call that would otherwise exhaust a browser tab's memory or time.

use crate::core::CoreError;

/// `tokenizer.json`: the largest real ones (Gemma's 256k vocabulary) are
/// about 33 MB.
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;
/// `config.json`, `tokenizer_config.json`, `slot_map.json`,
/// `head_rows.json`, `models.json`: a few kB to a few hundred kB in practice.
pub const MAX_JSON_BYTES: u64 = 16 << 20;
/// A chat template's source: real ones are 1 to 10 kB.
pub const MAX_TEMPLATE_BYTES: u64 = 256 << 10;
/// Instructions one rendering may execute: the templates of the models this
/// project ships spend under 2,000 on a state (measured in the tests), so
/// this leaves 500x headroom and still ends a loop in milliseconds.
pub const TEMPLATE_FUEL: u64 = 1_000_000;
/// Nested calls (macros, includes) one rendering may make.
pub const TEMPLATE_RECURSION: usize = 64;
/// Criteria one scoring call may carry: each is at least one run, so a
/// larger call is better split into several, which also shows progress.
pub const MAX_CRITERIA_PER_CALL: usize = 10_000;
/// Evidence is counted in pieces of this many bytes when it may exceed the
/// context, so that an oversized one is refused after tokenising only about
/// the context's worth of it.
pub const COUNT_PIECE_BYTES: usize = 16 << 10;
/// Tokens a cut between two pieces may add to their summed count over the
/// whole text's (a cut at whitespace adds none for the byte-level BPE
/// tokenizers here; this covers a pre-tokenizer that merges across spaces).
pub const TOKENS_PER_CUT: usize = 8;

/// Refuses `size` units of `field` over `limit`.
pub fn check_size(
    field: &str,
    size: u64,
    limit: u64,
    unit: &'static str,
    hint: &'static str,
) -> Result<(), CoreError> {
    if size > limit {
        return Err(CoreError::TooLarge {
            field: field.to_string(),
            size,
            limit,
            unit,
            hint,
        });
    }
    Ok(())
}

/// The byte limit of a model's file by its role (as `models.json` names
/// roles, or its file name): `None` for graphs and weights, which the
/// runtimes bound by their own memory limits.
pub fn file_limit(role: &str) -> Option<u64> {
    let name = role.rsplit('/').next().unwrap_or(role);
    match name {
        "tokenizer" | "tokenizer.json" => Some(MAX_TOKENIZER_BYTES),
        "chat_template" | "chat_template.jinja" => Some(MAX_TEMPLATE_BYTES),
        "config"
        | "config.json"
        | "tokenizer_config"
        | "tokenizer_config.json"
        | "slot_map"
        | "slot_map.json"
        | "head_rows"
        | "head_rows.json"
        | "models.json" => Some(MAX_JSON_BYTES),
        _ => None,
    }
}

/// Refuses a model file of `bytes` over its role's limit, before it is read.
pub fn check_file(role: &str, bytes: u64) -> Result<(), CoreError> {
    match file_limit(role) {
        Some(limit) => check_size(
            role,
            bytes,
            limit,
            "bytes",
            "real model files of this kind are far smaller; is it the right file?",
        ),
        None => Ok(()),
    }
}

/// Refuses a scoring call of more than [`MAX_CRITERIA_PER_CALL`] criteria.
pub fn check_criteria(count: usize) -> Result<(), CoreError> {
    check_size(
        "criteria",
        count as u64,
        MAX_CRITERIA_PER_CALL as u64,
        "criteria",
        "split the call into several; each returns its decisions",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_has_its_limit_and_graphs_have_none() {
        assert_eq!(file_limit("tokenizer"), Some(MAX_TOKENIZER_BYTES));
        assert_eq!(
            file_limit("models/x/tokenizer.json"),
            Some(MAX_TOKENIZER_BYTES)
        );
        assert_eq!(file_limit("chat_template.jinja"), Some(MAX_TEMPLATE_BYTES));
        assert_eq!(file_limit("slot_map"), Some(MAX_JSON_BYTES));
        assert_eq!(file_limit("graph"), None);
        assert_eq!(file_limit("model.onnx.data"), None);
    }

    #[test]
    fn a_gigabyte_tokenizer_is_refused_with_its_code_field_and_limit() {
        let e = check_file("tokenizer.json", 1 << 30).unwrap_err();
        let info = e.info();
        assert_eq!(info.code, "too_large");
        assert_eq!(info.field.as_deref(), Some("tokenizer.json"));
        assert_eq!(info.limit, Some(MAX_TOKENIZER_BYTES as usize));
        assert!(e.to_string().contains("1073741824 bytes"), "{e}");
        assert!(check_file("tokenizer.json", MAX_TOKENIZER_BYTES).is_ok());
    }

    #[test]
    fn criteria_per_call_are_bounded() {
        assert!(check_criteria(MAX_CRITERIA_PER_CALL).is_ok());
        let e = check_criteria(100_000).unwrap_err();
        assert_eq!(e.info().code, "too_large");
        assert_eq!(e.info().field.as_deref(), Some("criteria"));
    }
}
