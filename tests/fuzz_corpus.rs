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
