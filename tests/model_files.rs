//! A model directory with a missing or truncated file is refused with a
//! message naming the file; the loader works again on an intact copy.

mod common;

use std::fs::OpenOptions;
use std::path::Path;

use common::*;
use readout::open_engine;

fn truncate(path: &Path, keep: f64) {
    let len = std::fs::metadata(path).unwrap().len();
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.set_len((len as f64 * keep) as u64).unwrap();
}

fn refused(dir: &Path, needle: &str) -> String {
    let msg = match open_engine(dir, &opts()) {
        Ok(_) => panic!(
            "{} loaded; expected an error naming {needle:?}",
            dir.display()
        ),
        Err(e) => e.to_string(),
    };
    assert!(msg.contains(needle), "{msg:?} does not name {needle:?}");
    msg
}

#[test]
fn missing_and_truncated_files_are_named() {
    let base = temp_dir("files");
    let fresh = |name: &str| {
        let d = base.join(name);
        copy_model(Q4, &d);
        d
    };

    let d = fresh("no-config");
    std::fs::remove_file(d.join("config.json")).unwrap();
    refused(&d, "config.json");

    let d = fresh("no-tokenizer");
    std::fs::remove_file(d.join("tokenizer.json")).unwrap();
    refused(&d, "tokenizer.json");

    let d = fresh("no-graph");
    std::fs::remove_file(d.join("model.onnx")).unwrap();
    refused(&d, "model.onnx");

    let d = fresh("no-data");
    std::fs::remove_file(d.join("model.onnx.data")).unwrap();
    refused(&d, "model.onnx");

    let d = fresh("short-tokenizer");
    truncate(&d.join("tokenizer.json"), 0.5);
    refused(&d, "tokenizer.json");

    let d = fresh("short-graph");
    truncate(&d.join("model.onnx"), 0.5);
    refused(&d, "model.onnx");

    let d = fresh("short-data");
    truncate(&d.join("model.onnx.data"), 0.5);
    let msg = refused(&d, "model.onnx");
    eprintln!("truncated external data: {msg}");

    let d = fresh("empty-config");
    truncate(&d.join("config.json"), 0.0);
    refused(&d, "config.json");

    // The loader is still usable: an intact copy loads and proves.
    let e = open_engine(&fresh("intact"), &opts()).unwrap();
    assert_eq!(e.proof().candidates.iter().filter(|c| c.agrees).count(), 1);
}

#[test]
fn onnx_community_layout_loads_unchanged() {
    let d = temp_dir("community");
    std::fs::create_dir_all(d.join("onnx")).unwrap();
    let src = model_path(Q4F16);
    std::fs::copy(src.join("model.onnx"), d.join("onnx/model_q4f16.onnx")).unwrap();
    // The graph names its external data file; it lives beside the graph.
    std::fs::copy(src.join("model.onnx.data"), d.join("onnx/model.onnx.data")).unwrap();
    std::fs::copy(src.join("config.json"), d.join("config.json")).unwrap();
    std::fs::copy(src.join("tokenizer.json"), d.join("tokenizer.json")).unwrap();
    let e = open_engine(&d, &opts()).unwrap();
    assert!(e.info().runtime.contains("model_q4f16.onnx"));
    let e2 = open_engine(&d.join("onnx/model_q4f16.onnx"), &opts()).unwrap();
    assert_eq!(e2.info().model_id, e.info().model_id);
}

#[test]
fn a_slot_map_that_the_tokenizer_does_not_reproduce_is_refused() {
    use readout::core::model::slot_map::SlotMap;
    let d = temp_dir("slotmap");
    copy_model(Q4, &d);
    // " A".." D" are 362, 425, 356, 422 for Qwen3; swap two rows.
    let wrong = SlotMap::new("m", Some(" "), "ABCD", vec![425, 362, 356, 422], 151936).unwrap();
    std::fs::write(d.join("slot_map.json"), wrong.to_json()).unwrap();
    refused(&d, "keep[0] = 425");
    // A right map on a stock (unpruned) graph: the layout proof refuses the
    // vocabulary-wide logits, since dims[2] must be the slot map's rows.
    let right = SlotMap::new("m", Some(" "), "ABCD", vec![362, 425, 356, 422], 151936).unwrap();
    std::fs::write(d.join("slot_map.json"), right.to_json()).unwrap();
    refused(&d, "151936");
}

/// `auto` asks a model directory's graph whether it is int4 before choosing
/// who runs it: the node list alone, initializers skipped.
#[test]
fn a_graphs_operator_types_tell_int4_from_float() {
    let int4 = |id: &str| {
        let bytes = std::fs::read(model_path(id).join("model.onnx")).unwrap();
        let ops = readout::onnx_pb::op_types(&bytes).unwrap();
        assert!(
            ops.iter().any(|o| o == "GroupQueryAttention"),
            "{id}: {ops:?}"
        );
        ops.iter().any(|o| o == "MatMulNBits")
    };
    assert!(int4(Q4));
    assert!(int4(Q4F16));
    assert!(!int4("qwen3-tiny-random-fp32"));
    assert!(readout::onnx_pb::op_types(b"\x3a\xff\xff\xff").is_err());
}
