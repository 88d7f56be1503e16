//! Entry points shared by the cargo-fuzz targets (`fuzz/`) and the corpus
//! replay test (`tests/fuzz_corpus.rs`): each takes arbitrary bytes and must
//! return without panicking, whatever it is given. Errors are the expected
//! outcome for most inputs and are ignored.

use std::path::Path;
use std::sync::OnceLock;

/// A state file or fixture (`readout score --state`, `readout evaluate`).
pub fn state(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(states) = crate::core::input::criteria::parse_states(text) {
        for s in &states {
            // Whatever parsed must validate, serialise and parse back the same.
            let line = serde_json::to_string(s).unwrap_or_default();
            let again = crate::core::input::criteria::parse_jsonl(&line);
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
    use crate::surgery::graph::OnnxModel;
    let path = Path::new("/nonexistent/readout-fuzz/model.onnx");
    let Ok(m) = OnnxModel::decode(data, path) else {
        return;
    };
    let _ = crate::surgery::inspect::inspect(&m, 4);
    let _ = crate::surgery::head_weights::head_rows(&m, &[0, 1]);
    let _ = crate::surgery::head_weights::int8_input_block(&m);
    if let Ok(mut t) = OnnxModel::decode(data, path) {
        let _ = crate::surgery::passes::trim(&mut t);
        let _ = crate::surgery::passes::expose_hidden(&mut t);
    }
    if let Ok(mut p) = OnnxModel::decode(data, path) {
        let _ = crate::surgery::passes::prune(&mut p, &[0, 1]);
    }
}

/// The zeros an `own_graph` input's external-data tensors read: enough for
/// the tiny models' weights (about 6.3 MB), so a seed taken from one of
/// their graphs loads in full and mutations reach the program builder.
const EXTERNAL_ZEROS: usize = 8 << 20;

/// Our runtime's ONNX loader and program builder (`Program::load`): every
/// initializer read, every node compiled, constants folded. External data of
/// any location is served from zeros; the weight limit (64 MiB) stands in for
/// the wasm32 heap's, so a graph claiming more is refused before a copy.
pub fn own_graph(data: &[u8]) {
    own_graph_loads(data);
}

/// `own_graph`'s work; true when the graph loaded (the replay test checks
/// that the seeds reach the program builder, not just the decoder).
pub fn own_graph_loads(data: &[u8]) -> bool {
    static ZEROS: OnceLock<Vec<u8>> = OnceLock::new();
    let zeros = ZEROS.get_or_init(|| vec![0u8; EXTERNAL_ZEROS]).as_slice();
    let external = |_: &str| Some(zeros);
    let _ = crate::runtime::own::interp::Program::external_locations(data);
    if let Ok(p) = crate::runtime::own::interp::Program::load(data, &external, 64 << 20) {
        let _ = p.inputs();
        let _ = p.outputs().count();
        return true;
    }
    false
}

/// A chat template's source, as `chat_template.jinja` holds it: compiled
/// under the project's limits, then asked for a state's head and its full
/// rendering. Fuel and the recursion limit must end whatever it does.
pub fn chat_template(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    use crate::core::text::chat_template::ChatTemplate;
    let Ok(t) = ChatTemplate::new(
        "chat_template.jinja",
        source.to_string(),
        "<s>".into(),
        "</s>".into(),
    ) else {
        return;
    };
    let _ = t.head_text("Instruction.\n\nEvidence: the invoice was paid twice.");
    let _ = t.render_user("Question? A) yes B) no");
}
