//! A decoder graph's I/O, as read from the session (never assumed).

use serde::Serialize;

use super::RuntimeError;

/// The output `readout expose-hidden` adds: the head's input at the last position.
pub const HIDDEN_OUTPUT: &str = "last_hidden";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    F16,
}

/// Input and output names of one layer's past and present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KvPair {
    pub past_key: String,
    pub past_value: String,
    pub present_key: String,
    pub present_value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signature {
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub has_attention_mask: bool,
    pub has_position_ids: bool,
    /// Layer order (past_key_values.0 ...).
    pub past: Vec<KvPair>,
    pub kv_dtype: Dtype,
    /// `[batch, kv_heads, past, head_dim]`; batch and past are -1 (symbolic).
    pub kv_shape: Vec<i64>,
    pub logits_dtype: Dtype,
    /// Extra outputs beyond logits and present.* (e.g. an exposed hidden state).
    pub extra_outputs: Vec<String>,
}

impl Signature {
    pub fn exposes_hidden(&self) -> bool {
        self.extra_outputs.iter().any(|o| o == HIDDEN_OUTPUT)
    }

    /// Builds a signature from named inputs/outputs; refuses a graph that is not
    /// a decoder with a KV cache.
    pub fn from_io(
        inputs: Vec<String>,
        outputs: Vec<String>,
        kv_dtype: Dtype,
        kv_shape: Vec<i64>,
        logits_dtype: Dtype,
    ) -> Result<Self, RuntimeError> {
        let has = |list: &[String], n: &str| list.iter().any(|x| x == n);
        if !has(&inputs, "input_ids") {
            return Err(RuntimeError::Signature(format!(
                "no input_ids input (inputs: {inputs:?})"
            )));
        }
        if !has(&outputs, "logits") {
            return Err(RuntimeError::Signature(format!(
                "no logits output (outputs: {outputs:?})"
            )));
        }
        let mut past = Vec::new();
        for layer in 0.. {
            let pk = format!("past_key_values.{layer}.key");
            if !has(&inputs, &pk) {
                break;
            }
            let pair = KvPair {
                past_key: pk,
                past_value: format!("past_key_values.{layer}.value"),
                present_key: format!("present.{layer}.key"),
                present_value: format!("present.{layer}.value"),
            };
            for n in [&pair.past_value] {
                if !has(&inputs, n) {
                    return Err(RuntimeError::Signature(format!("input {n} is missing")));
                }
            }
            for n in [&pair.present_key, &pair.present_value] {
                if !has(&outputs, n) {
                    return Err(RuntimeError::Signature(format!("output {n} is missing")));
                }
            }
            past.push(pair);
        }
        if past.is_empty() {
            return Err(RuntimeError::Signature(
                "no past_key_values.N.key inputs: not a decoder with a KV cache".into(),
            ));
        }
        let extra_outputs = outputs
            .iter()
            .filter(|o| *o != "logits" && !o.starts_with("present."))
            .cloned()
            .collect();
        Ok(Self {
            has_attention_mask: has(&inputs, "attention_mask"),
            has_position_ids: has(&inputs, "position_ids"),
            inputs,
            outputs,
            past,
            kv_dtype,
            kv_shape,
            logits_dtype,
            extra_outputs,
        })
    }
}
