//! Entry points shared by the cargo-fuzz targets (`fuzz/`) and the corpus
//! replay test (`tests/fuzz_corpus.rs`): each takes arbitrary bytes and must
//! return without panicking, whatever it is given. Errors are the expected
//! outcome for most inputs and are ignored.

use std::path::Path;

/// A state file or fixture (`readout score --state`, `readout evaluate`).
pub fn state(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(states) = crate::core::spec::criteria::parse_states(text) {
        for s in &states {
            // Whatever parsed must validate, serialise and parse back the same.
            let line = serde_json::to_string(s).unwrap_or_default();
            let again = crate::core::spec::criteria::parse_jsonl(&line);
            assert!(
                matches!(&again, Ok(v) if v.len() == 1 && &v[0] == s),
                "round trip of {line}: {again:?}"
            );
        }
    }
}

/// `slot_map.json` of a pruned model.
pub fn slot_map(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(m) = crate::core::model::slot_map::SlotMap::parse(text) {
        let _ = m.row_of_letter('A');
        assert_eq!(
            crate::core::model::slot_map::SlotMap::parse(&m.to_json()),
            Ok(m.clone())
        );
    }
}

/// `models.json`.
pub fn models_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(mut c) = crate::core::model::models_json::Catalog::parse(text) {
        c.link_wasm_variants();
        for m in &c.models {
            let _ = m.needs_f16();
            let _ = c.find(&m.id);
        }
        let _ = c.find("");
    }
}

/// An ONNX graph as `inspect`, `trim` and `prune` read it. External data is
/// looked up beside a path that does not exist, so only in-graph tensors
/// are ever read.
pub fn onnx(data: &[u8]) {
    use crate::export::graph::OnnxModel;
    let path = Path::new("/nonexistent/readout-fuzz/model.onnx");
    let Ok(m) = OnnxModel::decode(data, path) else {
        return;
    };
    let _ = crate::export::inspect::inspect(&m, 4);
    let _ = crate::export::head_weights::head_rows(&m, &[0, 1]);
    let _ = crate::export::head_weights::int8_input_block(&m);
    if let Ok(mut t) = OnnxModel::decode(data, path) {
        let _ = crate::export::passes::trim(&mut t);
        let _ = crate::export::passes::expose_hidden(&mut t);
    }
    if let Ok(mut p) = OnnxModel::decode(data, path) {
        let _ = crate::export::passes::prune(&mut p, &[0, 1]);
    }
}
