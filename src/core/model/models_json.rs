//! `models.json` (spec §4) as data: parsed by the native loader and the
//! browser loader alike; built by `readout catalog` (src/export/catalog.rs).

use crate::core::CoreError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    pub role: String,
    /// Relative to models.json.
    pub url: String,
    pub bytes: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub hidden_size: usize,
    pub vocab_size: usize,
    pub max_positions: usize,
    /// Rows of the head: the vocabulary, or the kept letters.
    pub head_rows: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    pub base: String,
    pub family: String,
    pub dtype: String,
    pub trimmed: bool,
    pub pruned: bool,
    pub tied: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub letters: Option<String>,
    /// The entry the WASM backend loads in this one's place (same base,
    /// trim and prune; a weight format the WASM backend runs well).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm_variant: Option<String>,
    /// The readout served when a call does not choose one (measured per
    /// model by `bench/decisions.sh`); absent: letters, plain prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readout: Option<crate::core::spec::mode::ReadoutChoice>,
    pub files: Vec<FileEntry>,
    pub shape: Shape,
}

impl Entry {
    pub fn file(&self, role: &str) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.role == role)
    }

    /// Whether WebGPU needs the `shader-f16` feature to run this entry.
    pub fn needs_f16(&self) -> bool {
        matches!(self.dtype.as_str(), "q4f16" | "fp16")
    }

    /// An int4 graph (MatMulNBits weights), which our own runtime computes.
    pub fn int4(&self) -> bool {
        matches!(self.dtype.as_str(), "q4" | "q4f16")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub version: u32,
    pub models: Vec<Entry>,
}

impl Catalog {
    pub fn parse(json: &str) -> Result<Self, CoreError> {
        serde_json::from_str(json).map_err(|e| CoreError::Catalog(e.to_string()))
    }

    pub fn find(&self, id: &str) -> Result<&Entry, CoreError> {
        self.models
            .iter()
            .find(|m| m.id == id)
            .ok_or_else(|| CoreError::UnknownModel {
                id: id.to_string(),
                known: self.models.iter().map(|m| m.id.clone()).collect(),
            })
    }

    /// Links each entry to its WASM variant: the entry with the same base,
    /// trim and prune whose dtype the WASM backend runs best (float weights
    /// first: onnxruntime-web's WASM backend has no int4 kernel), else itself
    /// when its own dtype is a float-activation one.
    pub fn link_wasm_variants(&mut self) {
        const ORDER: [&str; 2] = ["fp32", "q4"];
        let keys: Vec<(String, String, bool, bool, String)> = self
            .models
            .iter()
            .map(|m| {
                (
                    m.id.clone(),
                    m.base.clone(),
                    m.trimmed,
                    m.pruned,
                    m.dtype.clone(),
                )
            })
            .collect();
        for m in &mut self.models {
            let pick = ORDER.iter().find_map(|d| {
                keys.iter()
                    .find(|(_, base, t, p, dt)| {
                        *base == m.base && *t == m.trimmed && *p == m.pruned && dt == d
                    })
                    .map(|k| k.0.clone())
            });
            m.wasm_variant = pick;
        }
    }
}
