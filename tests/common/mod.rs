#![allow(dead_code)]
//! Shared helpers for the native integration tests. The tiny models are built
//! by `modelgen/build_models.py tiny` (the test command does it first); a
//! missing model is a failure with that instruction, never a skip.

use std::path::{Path, PathBuf};

use readout::open_engine;
use readout::runtime::native::{NativeOptions, NativeRuntime};
use readout::Engine;
use readout::{Criterion, OptionSpec, StateSpec};

pub const Q4: &str = "qwen3-tiny-random-q4";
pub const Q4F16: &str = "qwen3-tiny-random-q4f16";
/// Gemma 3's conventions at tiny size: two of its three layers attend
/// through a sliding window of 8 tokens, which every test text exceeds.
pub const GEMMA_Q4: &str = "gemma3-tiny-random-q4";
pub const GEMMA_Q4F16: &str = "gemma3-tiny-random-q4f16";

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn model_path(id: &str) -> PathBuf {
    let p = root().join("models").join(id);
    assert!(p.join("model.onnx").is_file(), "{} is not built: run `bash scripts/test.sh` or `.venv/bin/python modelgen/build_models.py tiny`", p.display());
    p
}

pub fn engine(id: &str) -> Engine<NativeRuntime> {
    open_engine(&model_path(id), &opts()).unwrap_or_else(|e| panic!("{id}: {e}"))
}

pub fn opts() -> NativeOptions {
    NativeOptions { intra_threads: 2 }
}

pub fn criterion(id: &str, question: &str, options: &[&str]) -> Criterion {
    Criterion {
        id: id.into(),
        family: "test".into(),
        question: question.into(),
        options: options
            .iter()
            .enumerate()
            .map(|(i, d)| OptionSpec {
                id: format!("o{i}"),
                description: d.to_string(),
            })
            .collect(),
        answer: None,
    }
}

pub fn state(evidence: &str) -> StateSpec {
    StateSpec {
        id: "s".into(),
        instruction: None,
        evidence: evidence.into(),
        criteria: vec![],
    }
}

pub fn fixture() -> Vec<StateSpec> {
    let text = std::fs::read_to_string(root().join("tests/fixtures/authored.jsonl"))
        .expect("tests/fixtures/authored.jsonl");
    readout::core::input::criteria::parse_jsonl(&text).expect("fixture parses")
}

/// Copies a model directory (graph, data, config, tokenizer) to a fresh temp dir.
pub fn copy_model(id: &str, dest: &Path) {
    std::fs::create_dir_all(dest).unwrap();
    for f in [
        "model.onnx",
        "model.onnx.data",
        "config.json",
        "tokenizer.json",
    ] {
        std::fs::copy(model_path(id).join(f), dest.join(f)).unwrap();
    }
}

/// A scratch directory that is removed when dropped, so a passing suite leaves
/// nothing behind (the copies of models add up on a small disk). A failing test
/// keeps its directory when run with READOUT_KEEP_TEMP=1, to look at.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("READOUT_KEEP_TEMP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn temp_dir(name: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("readout-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// Asserts that `r` is an error whose message contains `needle`.
pub fn check<T>(r: Result<T, readout::EngineError>, needle: &str) {
    let msg = r
        .err()
        .unwrap_or_else(|| panic!("expected an error containing {needle:?}"))
        .to_string();
    assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
}

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    pollster::block_on(f)
}

/// A trimmed and a trimmed+pruned cut of the tiny q4 model, made here: the
/// test command builds only the stock tiny models before `cargo test`.
pub fn cuts(tmp: &Path) -> [PathBuf; 2] {
    use readout::surgery::commands::{run, Op};
    let trimmed = tmp.join(format!("{Q4}-trimmed"));
    let pruned = tmp.join(format!("{Q4}-trimmed-pruned"));
    run(&model_path(Q4), &trimmed, &Op::Trim).unwrap();
    let prune = Op::Prune {
        letters: "ABCD".into(),
        tokenizer: None,
    };
    run(&trimmed, &pruned, &prune).unwrap();
    [trimmed, pruned]
}

/// The real models are built by `scripts/main.sh` (SmolLM2) and
/// `modelgen/build_models.py gemma3`, not by the test command (CI runs the
/// tiny models only): where one is absent the test says so and skips it.
pub fn built_model(id: &str) -> Option<PathBuf> {
    let dir = root().join("models").join(id);
    if dir.join("model.onnx").is_file() {
        Some(dir)
    } else {
        let how = if id.starts_with("gemma3") {
            ".venv/bin/python modelgen/build_models.py gemma3"
        } else {
            "bash scripts/main.sh"
        };
        eprintln!(
            "SKIPPED {id}: {} is not built ({how} builds it)",
            dir.display()
        );
        None
    }
}

/// (kv heads, head dim) from a model directory's config.json.
pub fn kv_dims(dir: &Path) -> [usize; 2] {
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let c = readout::core::model::config::ModelConfig::parse(&text).unwrap();
    c.kv_dims()
}

/// A copy of model `id` (graph, data, config, tokenizer) with every
/// MatMulNBits set to `accuracy_level` 1: ONNX Runtime then computes in
/// float32 what the file as built asks it to approximate with int8
/// activations (SmolLM2's files ask for level 4).
pub fn float32_copy(src: &Path) -> TempDir {
    use prost::Message;
    use readout::onnx_pb::ModelProto;
    let id = src.file_name().unwrap().to_string_lossy().into_owned();
    let tmp = temp_dir(&format!("own-level1-{id}"));
    std::fs::create_dir_all(&*tmp).unwrap();
    // Everything but the graph, as it is (ONNX Runtime refuses external
    // data through a symlink, so copies).
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() && p.file_name().is_some_and(|n| n != "model.onnx") {
            std::fs::copy(&p, tmp.join(p.file_name().unwrap())).unwrap();
        }
    }
    let bytes = std::fs::read(src.join("model.onnx")).unwrap();
    let mut m = ModelProto::decode(bytes.as_slice()).unwrap();
    let mut set = 0;
    for n in &mut m.graph.as_mut().unwrap().node {
        if n.op_type.as_deref() == Some("MatMulNBits") {
            for a in &mut n.attribute {
                if a.name.as_deref() == Some("accuracy_level") {
                    a.i = Some(1);
                    set += 1;
                }
            }
        }
    }
    assert!(set > 0);
    std::fs::write(tmp.join("model.onnx"), m.encode_to_vec()).unwrap();
    tmp
}

/// The entry `id` of a parsed `models.json`, to edit in a test's own copy.
pub fn entry_mut<'a>(catalog: &'a mut serde_json::Value, id: &str) -> &'a mut serde_json::Value {
    catalog["models"]
        .as_array_mut()
        .expect("a models array")
        .iter_mut()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no entry {id} in the catalog"))
}

/// An engine on either runtime over `dir`, 2 threads.
pub fn host(
    dir: &std::path::Path,
    runtime: readout::RuntimeKind,
    precision: readout::Precision,
) -> readout::HostEngine {
    readout::open_host_engine(
        dir,
        &readout::HostOptions {
            runtime,
            threads: 2,
            precision,
            pack: true,
        },
    )
    .unwrap_or_else(|e| panic!("{} on {runtime:?}: {e}", dir.display()))
}

pub struct FixtureDiff {
    pub criteria: usize,
    pub max_dp: f64,
    pub changed: usize,
    /// Changed decisions where the reference's margin was below 0.01.
    pub close: usize,
}

/// The authored fixture's criteria (the first `states` states) scored by
/// two engines: max |Δp| over the options and the decisions that change.
pub fn fixture_diff(
    a: &mut readout::HostEngine,
    b: &mut readout::HostEngine,
    states: usize,
) -> FixtureDiff {
    let mut d = FixtureDiff {
        criteria: 0,
        max_dp: 0.0,
        changed: 0,
        close: 0,
    };
    let opts = readout::ReadoutRequest::default();
    for state in fixture().into_iter().take(states) {
        let (sa, sb) = (
            pollster::block_on(a.prefill(&state)).unwrap(),
            pollster::block_on(b.prefill(&state)).unwrap(),
        );
        let da = pollster::block_on(a.score_all(sa, &state.criteria, &opts)).unwrap();
        let db = pollster::block_on(b.score_all(sb, &state.criteria, &opts)).unwrap();
        for (x, y) in da.iter().zip(&db) {
            d.criteria += 1;
            for (p, q) in x.probs.iter().zip(&y.probs) {
                d.max_dp = d.max_dp.max((p.p - q.p).abs());
            }
            if x.answer != y.answer {
                d.changed += 1;
                d.close += usize::from(y.margin < 0.01);
            }
        }
        a.dispose(sa).unwrap();
        b.dispose(sb).unwrap();
    }
    d
}
