//! Position conventions (spec §6.2). Two are plausible for every graph; the
//! engine proves which one holds at load. `derive` is the only producer of
//! `attention_mask` and `position_ids` anywhere in the engine.

use serde::Serialize;

use crate::runtime::{Signature, Step};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Convention {
    /// `position_ids` of a suffix start at the past length P.
    PositionsFromPast,
    /// `position_ids` start at P − 1 (the cumulative-length ambiguity).
    PositionsFromPastMinusOne,
    /// Positions come from `attention_mask`, which spans past + suffix.
    MaskPastAndSuffix,
    /// Positions come from `attention_mask`, which spans the suffix alone.
    MaskSuffixOnly,
    /// The graph takes neither input; nothing to derive.
    Implicit,
}

/// The candidates a graph's inputs make plausible.
pub fn candidates(sig: &Signature) -> Vec<Convention> {
    if sig.has_position_ids {
        vec![
            Convention::PositionsFromPast,
            Convention::PositionsFromPastMinusOne,
        ]
    } else if sig.has_attention_mask {
        vec![Convention::MaskPastAndSuffix, Convention::MaskSuffixOnly]
    } else {
        vec![Convention::Implicit]
    }
}

/// The inputs of a step of `ids` after a past of `past_len` tokens. With an
/// empty past every candidate agrees (positions 0.., mask over the new ids).
pub fn derive(conv: Convention, sig: &Signature, past_len: usize, ids: &[u32]) -> Step {
    let n = ids.len();
    let start = match conv {
        Convention::PositionsFromPastMinusOne => past_len.saturating_sub(1),
        _ => past_len,
    };
    let mask_len = match conv {
        Convention::MaskSuffixOnly => n,
        _ => past_len + n,
    };
    Step {
        input_ids: ids.iter().map(|&i| i as i64).collect(),
        attention_mask: sig.has_attention_mask.then(|| vec![1; mask_len]),
        position_ids: sig
            .has_position_ids
            .then(|| (start..start + n).map(|p| p as i64).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Dtype;

    fn sig(mask: bool, pos: bool) -> Signature {
        let mut inputs = vec![
            "input_ids".to_string(),
            "past_key_values.0.key".into(),
            "past_key_values.0.value".into(),
        ];
        if mask {
            inputs.push("attention_mask".into());
        }
        if pos {
            inputs.push("position_ids".into());
        }
        let outputs = vec![
            "logits".to_string(),
            "present.0.key".into(),
            "present.0.value".into(),
        ];
        Signature::from_io(inputs, outputs, Dtype::F32, vec![-1, 2, -1, 4], Dtype::F32).unwrap()
    }

    #[test]
    fn candidates_follow_the_inputs() {
        assert_eq!(
            candidates(&sig(true, false)),
            vec![Convention::MaskPastAndSuffix, Convention::MaskSuffixOnly]
        );
        assert_eq!(
            candidates(&sig(true, true))[1],
            Convention::PositionsFromPastMinusOne
        );
        assert_eq!(candidates(&sig(false, false)), vec![Convention::Implicit]);
    }

    #[test]
    fn derived_inputs() {
        let s = sig(true, true);
        let a = derive(Convention::PositionsFromPast, &s, 5, &[7, 8]);
        assert_eq!(a.position_ids, Some(vec![5, 6]));
        assert_eq!(a.attention_mask, Some(vec![1; 7]));
        let b = derive(Convention::PositionsFromPastMinusOne, &s, 5, &[7, 8]);
        assert_eq!(b.position_ids, Some(vec![4, 5]));
        let g = sig(true, false);
        assert_eq!(
            derive(Convention::MaskSuffixOnly, &g, 5, &[7, 8]).attention_mask,
            Some(vec![1, 1])
        );
        assert_eq!(
            derive(Convention::MaskSuffixOnly, &g, 5, &[7, 8]).position_ids,
            None
        );
        // An empty past: every candidate derives the same step.
        assert_eq!(
            derive(Convention::PositionsFromPastMinusOne, &s, 0, &[1, 2]),
            derive(Convention::PositionsFromPast, &s, 0, &[1, 2])
        );
    }
}
