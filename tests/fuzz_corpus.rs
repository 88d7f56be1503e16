//! Replays every file of the cargo-fuzz corpora (`fuzz/corpus/<target>/`,
//! seeds and what fuzzing kept, findings included) through the same entry
//! points the fuzz targets call, so the normal test run catches a
//! regression without nightly or libFuzzer.

use std::path::Path;

fn replay(target: &str, f: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        if std::panic::catch_unwind(|| f(&data)).is_err() {
            panic!("{target}: {} panics", p.display());
        }
        n += 1;
    }
    assert!(n > 0, "{}: empty corpus", dir.display());
}

#[test]
fn state_corpus() {
    replay("state", readout::fuzz::state);
}

#[test]
fn slot_map_corpus() {
    replay("slot_map", readout::fuzz::slot_map);
}

#[test]
fn models_json_corpus() {
    replay("models_json", readout::fuzz::models_json);
}

#[test]
fn onnx_corpus() {
    replay("onnx", readout::fuzz::onnx);
}

#[test]
fn own_graph_corpus() {
    replay("own_graph", readout::fuzz::own_graph);
    // The tiny models' graphs must load in full from the zeros the target
    // serves, or fuzzing would only ever exercise the decoder.
    for seed in [
        "qwen3-tiny-q4.onnx",
        "qwen3-tiny-q4f16.onnx",
        "gemma3-tiny-q4.onnx",
    ] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus/own_graph")
            .join(seed);
        assert!(
            readout::fuzz::own_graph_loads(&std::fs::read(&p).unwrap()),
            "{seed}"
        );
    }
}

#[test]
fn chat_template_corpus() {
    replay("chat_template", readout::fuzz::chat_template);
}
