//! Shape facts read from a Hugging Face `config.json`.

use serde::Deserialize;

use crate::core::CoreError;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelConfig {
    pub model_type: String,
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub hidden_size: usize,
    pub vocab_size: usize,
    pub max_positions: usize,
    pub tied: bool,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    model_type: String,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    hidden_size: Option<usize>,
    vocab_size: Option<usize>,
    max_position_embeddings: Option<usize>,
    #[serde(default)]
    tie_word_embeddings: Option<bool>,
}

impl ModelConfig {
    pub fn parse(json: &str) -> Result<Self, CoreError> {
        let raw: Raw = serde_json::from_str(json).map_err(|e| CoreError::Config(e.to_string()))?;
        let need = |v: Option<usize>, field: &str| {
            v.filter(|&x| x > 0)
                .ok_or_else(|| CoreError::Config(format!("{field} is missing or zero")))
        };
        let heads = need(raw.num_attention_heads, "num_attention_heads")?;
        let hidden_size = need(raw.hidden_size, "hidden_size")?;
        let head_dim =
            match raw.head_dim {
                Some(d) if d > 0 => d,
                _ if hidden_size % heads == 0 => hidden_size / heads,
                _ => return Err(CoreError::Config(
                    "head_dim is missing and hidden_size is not a multiple of num_attention_heads"
                        .into(),
                )),
            };
        Ok(Self {
            model_type: raw.model_type,
            layers: need(raw.num_hidden_layers, "num_hidden_layers")?,
            kv_heads: raw.num_key_value_heads.unwrap_or(heads),
            head_dim,
            hidden_size,
            vocab_size: need(raw.vocab_size, "vocab_size")?,
            max_positions: need(raw.max_position_embeddings, "max_position_embeddings")?,
            tied: raw.tie_word_embeddings.unwrap_or(true),
        })
    }

    /// (kv heads, head dim): the past's per-layer dims a runtime resolves
    /// the graph's symbolic ones to.
    pub fn kv_dims(&self) -> [usize; 2] {
        [self.kv_heads, self.head_dim]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_head_dim_and_names_missing_fields() {
        let c = ModelConfig::parse(
            r#"{"model_type":"llama","num_hidden_layers":30,"num_attention_heads":9,"num_key_value_heads":3,
                "hidden_size":576,"vocab_size":49152,"max_position_embeddings":8192,"tie_word_embeddings":true}"#,
        )
        .unwrap();
        assert_eq!((c.head_dim, c.kv_heads, c.layers), (64, 3, 30));
        let e = ModelConfig::parse(r#"{"num_attention_heads":2,"hidden_size":8}"#).unwrap_err();
        assert!(e.to_string().contains("num_hidden_layers"), "{e}");
    }
}
