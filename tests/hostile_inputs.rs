//! Inputs sized to exhaust memory or time are refused by name, from bounded
//! work, and the engine stays usable after each (issue: hostile files).

mod common;

use common::{criterion, engine, state, Q4};
use readout::ReadoutRequest;

#[test]
fn ten_megabytes_of_evidence_are_refused_from_their_first_pieces_and_the_engine_goes_on() {
    let mut e = engine(Q4);
    let opts = ReadoutRequest::default();
    let c = criterion("late", "Did the parcel arrive late?", &["Yes", "No"]);
    pollster::block_on(async {
        let id = e
            .prefill(&state("The parcel arrived two days late."))
            .await
            .unwrap();
        let before = e.score(id, &c, &opts).await.unwrap();
        // About 10 MB: tokenised whole it is some two million tokens.
        let huge = "The parcel arrived two days late and nobody called. ".repeat(200_000);
        let err = e.prefill(&state(&huge)).await.unwrap_err();
        let info = err.info();
        assert_eq!(info.code, "context_overflow", "{err}");
        assert_eq!(info.field.as_deref(), Some("evidence"));
        assert_eq!(info.limit, Some(1024));
        // Bounded work: the message says how much was tokenised, a few pieces, not 10 MB.
        let msg = err.to_string();
        let counted: usize = msg
            .split("its first ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {msg}"));
        assert!(
            counted <= 64 << 10,
            "{counted} bytes tokenised before the refusal: {msg}"
        );
        assert!(msg.contains(&format!("{} bytes", huge.len())), "{msg}");
        // A state just inside the context is still tokenised whole and exactly.
        let fits = "word ".repeat(900);
        let ok = e.prefill(&state(&fits)).await.unwrap();
        e.dispose(ok).unwrap();
        let after = e.score(id, &c, &opts).await.unwrap();
        assert_eq!(after.p(), before.p());
    });
}

#[test]
fn a_call_of_a_hundred_thousand_criteria_is_refused_with_its_limit_before_any_run() {
    let mut e = engine(Q4);
    let opts = ReadoutRequest::default();
    pollster::block_on(async {
        let id = e
            .prefill(&state("The parcel arrived two days late."))
            .await
            .unwrap();
        let many: Vec<_> = (0..100_000)
            .map(|i| {
                criterion(
                    &format!("c{i}"),
                    "Did the parcel arrive late?",
                    &["Yes", "No"],
                )
            })
            .collect();
        let err = e.score_all(id, &many, &opts).await.unwrap_err();
        let info = err.info();
        assert_eq!(info.code, "too_large", "{err}");
        assert_eq!(info.field.as_deref(), Some("criteria"));
        assert_eq!(info.limit, Some(10_000));
        let some = e.score_all(id, &many[..3], &opts).await.unwrap();
        assert_eq!(some.len(), 3);
    });
}

#[test]
fn a_catalog_whose_file_url_leaves_its_folder_is_refused_before_any_file_is_read() {
    let dir = common::root()
        .join("target")
        .join(format!("hostile-catalog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(common::root().join("models.json")).unwrap();
    let mut cat: serde_json::Value = serde_json::from_str(&text).unwrap();
    let entry = common::entry_mut(&mut cat, Q4);
    entry["files"][0]["url"] = "../../etc/passwd".into();
    let path = dir.join("models.json");
    std::fs::write(&path, serde_json::to_string(&cat).unwrap()).unwrap();
    let err = readout::model_dir::checked_dir(&path, Q4).unwrap_err();
    let info = err.info();
    assert_eq!(info.code, "outside_root", "{err}");
    assert_eq!(info.field.as_deref(), Some("models.json"));
    assert!(err.to_string().contains("../../etc/passwd"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh copy of the tiny model under target/, for a test to damage.
fn scratch_model(tag: &str) -> std::path::PathBuf {
    let dir = common::root()
        .join("target")
        .join(format!("hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    common::copy_model(Q4, &dir);
    dir
}

fn host(runtime: readout::RuntimeKind) -> readout::HostOptions {
    readout::HostOptions {
        runtime,
        threads: 2,
        precision: readout::Precision::Int8,
        pack: true,
    }
}

/// The plain tiny model still loads and scores (after a refusal).
fn still_scores(runtime: readout::RuntimeKind) {
    let mut e = readout::open_host_engine(&common::model_path(Q4), &host(runtime)).unwrap();
    let c = criterion("late", "Did the parcel arrive late?", &["Yes", "No"]);
    let d = pollster::block_on(async {
        let id = e
            .prefill(&state("The parcel arrived two days late."))
            .await?;
        e.score(id, &c, &ReadoutRequest::default()).await
    })
    .unwrap();
    assert_eq!(d.probs.len(), 2);
}

#[test]
fn a_gigabyte_tokenizer_json_is_refused_from_its_size_before_it_is_read() {
    let dir = scratch_model("tokenizer");
    // Sparse: a 1 GiB file that costs no disk; reading it would cost 1 GiB.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("tokenizer.json"))
        .unwrap();
    f.set_len(1 << 30).unwrap();
    for rt in [readout::RuntimeKind::Ort, readout::RuntimeKind::Own] {
        let err = readout::open_host_engine(&dir, &host(rt))
            .err()
            .expect("a 1 GiB tokenizer loaded");
        let info = err.info();
        assert_eq!(info.code, "too_large", "{err}");
        assert_eq!(info.field.as_deref(), Some("tokenizer.json"));
        assert_eq!(info.limit, Some(64 << 20));
        assert!(err.to_string().contains("1073741824 bytes"), "{err}");
        still_scores(rt);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_graph_nested_ten_thousand_subgraphs_deep_is_refused_without_a_crash() {
    use prost::Message;
    use readout::onnx_pb::{AttributeProto, GraphProto, ModelProto, NodeProto};
    // Each level a node whose attribute holds the next graph: decoded
    // recursively, it would exhaust the stack of a reader without a limit.
    let mut inner = GraphProto::default().encode_to_vec();
    for _ in 0..10_000 {
        inner = GraphProto {
            node: vec![NodeProto {
                op_type: Some("If".into()),
                attribute: vec![AttributeProto {
                    name: Some("then_branch".into()),
                    g: Some(inner),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
        .encode_to_vec();
    }
    let model = ModelProto {
        ir_version: Some(8),
        graph: Some(GraphProto::decode(inner.as_slice()).unwrap()),
        ..Default::default()
    };
    let dir = scratch_model("nested");
    std::fs::write(dir.join("model.onnx"), model.encode_to_vec()).unwrap();
    for rt in [readout::RuntimeKind::Ort, readout::RuntimeKind::Own] {
        let err = readout::open_host_engine(&dir, &host(rt))
            .err()
            .expect("a 10,000-deep graph loaded");
        assert!(!err.info().code.is_empty(), "{rt:?}: {err}");
        eprintln!(
            "# {rt:?}: {} ({})",
            err.info().code,
            err.to_string().chars().take(160).collect::<String>()
        );
        still_scores(rt);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_graph_of_three_hundred_thousand_nodes_is_refused_from_its_wire_count() {
    // 300,000 empty nodes: 600 kB on disk, hundreds of MB once decoded. The
    // count is read from tags and lengths, before any decoder runs.
    let mut model = Vec::new();
    let mut graph = Vec::new();
    for _ in 0..300_000 {
        graph.extend_from_slice(&[0x0a, 0x00]); // GraphProto.node (1), empty
    }
    model.push(0x3a); // ModelProto.graph (7), length-delimited
    let mut len = graph.len();
    while len >= 0x80 {
        model.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    model.push(len as u8);
    model.extend_from_slice(&graph);
    assert_eq!(
        readout::onnx_pb::graph_counts(&model).unwrap().nodes,
        300_000
    );
    let dir = scratch_model("nodes");
    std::fs::write(dir.join("model.onnx"), &model).unwrap();
    for rt in [readout::RuntimeKind::Ort, readout::RuntimeKind::Own] {
        let err = readout::open_host_engine(&dir, &host(rt))
            .err()
            .expect("a 300,000-node graph loaded");
        let info = err.info();
        assert_eq!(info.code, "too_large", "{rt:?}: {err}");
        assert_eq!(info.field.as_deref(), Some("model.onnx (nodes)"), "{err}");
        assert_eq!(info.limit, Some(250_000));
        assert!(err.to_string().contains("300000 nodes"), "{err}");
        still_scores(rt);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_wire_count_of_a_real_graph_equals_its_decoded_count() {
    use prost::Message;
    for id in [Q4, "gemma3-tiny-random-q4"] {
        let bytes = std::fs::read(common::model_path(id).join("model.onnx")).unwrap();
        let g = readout::onnx_pb::ModelProto::decode(bytes.as_slice())
            .unwrap()
            .graph
            .unwrap();
        let c = readout::onnx_pb::graph_counts(&bytes).unwrap();
        assert_eq!(
            (c.nodes, c.initializers),
            (g.node.len() as u64, g.initializer.len() as u64),
            "{id}"
        );
        assert!(c.nodes > 10 && c.initializers > 10, "{id}: {c:?}");
        // Cut short, the wire format is refused rather than miscounted.
        assert!(readout::onnx_pb::graph_counts(&bytes[..bytes.len() - 3]).is_err());
    }
}
