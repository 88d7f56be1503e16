//! A decoder graph's I/O, as read from the session (never assumed).

use serde::Serialize;

use super::{RuntimeError, Step};

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

impl KvPair {
    /// The builder's names for layer `layer`.
    pub fn for_layer(layer: usize) -> Self {
        Self {
            past_key: format!("past_key_values.{layer}.key"),
            past_value: format!("past_key_values.{layer}.value"),
            present_key: format!("present.{layer}.key"),
            present_value: format!("present.{layer}.value"),
        }
    }
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

    /// The past's dims as a session declares them (`[batch, kv_heads, past,
    /// head_dim]`, symbolic dims negative) with kv_heads and head_dim taken
    /// from config.json where symbolic; where the graph fixes one it must
    /// agree. Every runtime resolves the shape here, so all refuse alike.
    pub fn resolve_kv_shape(
        mut declared: Vec<i64>,
        kv_dims: [usize; 2],
    ) -> Result<Vec<i64>, RuntimeError> {
        if declared.len() != 4 {
            return Err(RuntimeError::Signature(format!(
                "past_key_values.0.key has dims {declared:?}; [batch, kv_heads, past, head_dim] expected"
            )));
        }
        for (axis, want) in [(1, kv_dims[0]), (3, kv_dims[1])] {
            match declared[axis] {
                d if d < 0 => declared[axis] = want as i64,
                d if d as usize == want => {}
                d => {
                    return Err(RuntimeError::Signature(format!(
                        "past_key_values.0.key dim {axis} is {d} but config.json says {want}"
                    )))
                }
            }
        }
        Ok(declared)
    }

    /// `[1, kv_heads, 0, head_dim]`: the zero-length past a state's first
    /// run is fed.
    pub fn empty_past_dims(&self) -> [usize; 4] {
        let s = &self.kv_shape;
        [1, s[1].max(0) as usize, 0, s[3].max(0) as usize]
    }

    /// Refuses a step whose optional inputs differ from what the graph
    /// takes (the engine derives them from this signature, so a mismatch is
    /// a bug caught before any runtime builds a feed).
    pub fn check_step(&self, step: &Step) -> Result<(), RuntimeError> {
        for (name, given, takes) in [
            (
                "attention_mask",
                step.attention_mask.is_some(),
                self.has_attention_mask,
            ),
            (
                "position_ids",
                step.position_ids.is_some(),
                self.has_position_ids,
            ),
        ] {
            if given != takes {
                return Err(RuntimeError::Run(format!(
                    "{name} given: {given}, graph takes it: {takes}"
                )));
            }
        }
        Ok(())
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
            let pair = KvPair::for_layer(layer);
            if !has(&inputs, &pair.past_key) {
                break;
            }
            if !has(&inputs, &pair.past_value) {
                return Err(RuntimeError::Signature(format!(
                    "input {} is missing",
                    pair.past_value
                )));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder(mask: bool) -> Signature {
        let mut inputs = vec!["input_ids".to_string()];
        if mask {
            inputs.push("attention_mask".into());
        }
        inputs.extend([
            "past_key_values.0.key".into(),
            "past_key_values.0.value".into(),
        ]);
        let outputs = ["logits", "present.0.key", "present.0.value"]
            .map(String::from)
            .to_vec();
        let shape = Signature::resolve_kv_shape(vec![-1, -1, -1, 64], [3, 64]).unwrap();
        Signature::from_io(inputs, outputs, Dtype::F32, shape, Dtype::F32).unwrap()
    }

    #[test]
    fn kv_shape_fills_symbolic_dims_and_refuses_a_fixed_one_that_disagrees() {
        let s = decoder(true);
        assert_eq!(s.kv_shape, [-1, 3, -1, 64]);
        assert_eq!(s.empty_past_dims(), [1, 3, 0, 64]);
        let e = Signature::resolve_kv_shape(vec![-1, 4, -1, 64], [3, 64]).unwrap_err();
        assert!(
            e.to_string().contains("dim 1 is 4 but config.json says 3"),
            "{e}"
        );
        let e = Signature::resolve_kv_shape(vec![-1, 3, 64], [3, 64]).unwrap_err();
        assert!(
            e.to_string()
                .contains("[batch, kv_heads, past, head_dim] expected"),
            "{e}"
        );
    }

    #[test]
    fn a_step_must_feed_exactly_the_optional_inputs_the_graph_takes() {
        let step = |mask: bool, pos: bool| Step {
            input_ids: vec![1, 2],
            attention_mask: mask.then(|| vec![1, 1]),
            position_ids: pos.then(|| vec![0, 1]),
        };
        let with_mask = decoder(true);
        assert!(with_mask.check_step(&step(true, false)).is_ok());
        for (m, p, needle) in [
            (
                false,
                false,
                "attention_mask given: false, graph takes it: true",
            ),
            (
                true,
                true,
                "position_ids given: true, graph takes it: false",
            ),
        ] {
            let e = with_mask.check_step(&step(m, p)).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        let e = decoder(false).check_step(&step(true, false)).unwrap_err();
        assert!(e
            .to_string()
            .contains("attention_mask given: true, graph takes it: false"));
    }
}
