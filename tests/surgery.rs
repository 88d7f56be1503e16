//! Graph surgery on the tiny models: each command's own verification, the
//! engine on its outputs, a corrupted head refused, tied and duplicated
//! tables, and models.json.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use readout::surgery::commands::{finish, run, Op, Source};
use readout::surgery::find_head::{find_embeddings, find_head, Sharing};
use readout::surgery::graph::OnnxModel;
use readout::surgery::inspect::inspect;
use readout::surgery::passes::{prune, trim};
use readout::ReadoutRequest;
use readout::StateSpec;
use readout::{open_engine, ModelDir};

const FP32: &str = "qwen3-tiny-random-fp32";

fn prune_op(letters: &str) -> Op {
    Op::Prune {
        letters: letters.into(),
        tokenizer: None,
    }
}

/// Decisions on the first fixture states.
fn decisions(dir: &Path, states: &[StateSpec]) -> Vec<Vec<f64>> {
    let mut e = open_engine(dir, &opts()).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
    block_on(async {
        let mut out = Vec::new();
        for s in states {
            let id = e.prefill(s).await.unwrap();
            for c in &s.criteria {
                let d = e.score(id, c, &ReadoutRequest::default()).await.unwrap();
                let fresh = e
                    .score_uncached(id, c, &ReadoutRequest::default())
                    .await
                    .unwrap();
                assert_eq!(
                    d.p(),
                    fresh.p(),
                    "{}: cached vs uncached on {}",
                    dir.display(),
                    c.id
                );
                out.push(d.p());
            }
            e.dispose(id).unwrap();
        }
        out
    })
}

fn max_diff(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn trim_prune_in_either_order_keep_decisions() {
    let base = temp_dir("variants");
    let states: Vec<StateSpec> = fixture().into_iter().take(2).collect();
    // Gemma 3's graph: a scaled embedding reading the tied table, a final
    // norm with (1 + w) weights before the head, sliding-window layers.
    for (model, tol) in [(Q4, 1e-5), (Q4F16, 2e-3), (GEMMA_Q4, 1e-5)] {
        let stock = model_path(model);
        let t = base.join(format!("{model}-trimmed"));
        let tp = base.join(format!("{model}-trimmed-pruned"));
        let p = base.join(format!("{model}-pruned"));
        let pt = base.join(format!("{model}-pruned-trimmed"));
        let r = run(&stock, &t, &Op::Trim).unwrap();
        assert_eq!(r.verification.output_dims, vec![1, 1, 151936]);
        assert!(
            run(&t, &tp, &prune_op("ABCDEFGHIJKLMNOPQRST"))
                .unwrap()
                .verification
                .max_abs_diff
                == 0.0
        );
        let r = run(&stock, &p, &prune_op("ABCDEFGHIJKLMNOPQRST")).unwrap();
        assert_eq!(
            r.verification.output_dims,
            vec![1, r.verification.input_dims[1], 20]
        );
        assert_eq!(
            r.verification.max_abs_diff, 0.0,
            "pruned logits equal the stock ones at keep, exactly"
        );
        assert_eq!(
            r.removed_bytes,
            Some(0),
            "the builder's table is shared with the embedding"
        );
        run(&p, &pt, &Op::Trim).unwrap();

        // keep stays in letter order (" A" = 362, " B" = 425, " C" = 356 for
        // Qwen3's tokenizer, which the tiny Gemma reads too).
        let map = r.slot_map.unwrap();
        assert_eq!(&map.keep[..4], &[362, 425, 356, 422]);
        let slot = |d: &Path| {
            readout::core::model::slot_map::SlotMap::parse(
                &std::fs::read_to_string(d.join("slot_map.json")).unwrap(),
            )
            .unwrap()
        };
        assert_eq!(slot(&tp).keep, slot(&p).keep);
        assert_eq!(
            slot(&pt),
            slot(&p),
            "trim carries the slot map over unchanged"
        );

        let reference = decisions(&stock, &states);
        for v in [&t, &tp, &p, &pt] {
            let e = open_engine(v, &opts()).unwrap();
            let proof = e.proof();
            assert_eq!(
                proof.all_positions,
                !v.to_string_lossy().contains("trimmed"),
                "{}",
                v.display()
            );
            assert_eq!(e.is_pruned(), v.to_string_lossy().contains("pruned"));
            assert_eq!(e.info().letters.pruned_letters.is_some(), e.is_pruned());
            let d = decisions(v, &states);
            let diff = max_diff(&reference, &d);
            assert!(diff <= tol, "{}: decisions moved by {diff:e}", v.display());
        }
        // A pruned engine has no full softmax, so no allowed_mass.
        let mut e = open_engine(&tp, &opts()).unwrap();
        block_on(async {
            let id = e.prefill(&states[0]).await.unwrap();
            let d = e
                .score(id, &states[0].criteria[0], &ReadoutRequest::default())
                .await
                .unwrap();
            assert!(d.allowed_mass.is_none());
        });
        assert!(run(&t, &base.join("twice"), &Op::Trim)
            .unwrap_err()
            .to_string()
            .contains("already trimmed"));
        assert!(run(&p, &base.join("twice"), &prune_op("AB"))
            .unwrap_err()
            .to_string()
            .contains("already pruned"));
    }
}

#[test]
fn a_head_sliced_in_sorted_order_is_refused_and_nothing_is_written() {
    let base = temp_dir("corrupt");
    let dir = ModelDir::open(&model_path(Q4)).unwrap();
    let (tok, config) = (dir.read_tokenizer().unwrap(), dir.read_config().unwrap());
    let ids = tok.probe_letter_ids().unwrap();
    let keep: Vec<u32> = ids.ids[..4].to_vec();
    let mut sorted = keep.clone();
    sorted.sort();
    assert_ne!(sorted, keep, "the classic fault needs an unsorted keep");
    let mut m = OnnxModel::load(&dir.graph).unwrap();
    prune(&mut m, &sorted).unwrap();
    let map = readout::core::model::slot_map::SlotMap::new(
        "m",
        Some(" "),
        "ABCD",
        keep.clone(),
        config.vocab_size,
    )
    .unwrap();
    let out = base.join("bad");
    let src = Source {
        command: "prune",
        dir: &dir,
        config: &config,
        tok: &tok,
        slot_map: Some(&map),
        keep: Some(&keep),
    };
    let err = finish(&m, &out, &src, false).unwrap_err().to_string();
    assert!(
        err.contains("verification failed") && err.contains("differ"),
        "{err}"
    );
    assert!(!out.exists(), "nothing may be written on failure");
    assert_eq!(
        std::fs::read_dir(&base).unwrap().count(),
        0,
        "no temporary directory left behind"
    );
    // The same head in letter order passes.
    let mut m = OnnxModel::load(&dir.graph).unwrap();
    prune(&mut m, &keep).unwrap();
    finish(&m, &out, &src, false).unwrap();
    assert!(out.join("slot_map.json").is_file());
}

#[test]
fn a_trim_that_slices_the_wrong_position_is_refused() {
    let base = temp_dir("bad-trim");
    let dir = ModelDir::open(&model_path(Q4)).unwrap();
    let (tok, config) = (dir.read_tokenizer().unwrap(), dir.read_config().unwrap());
    let mut m = OnnxModel::load(&dir.graph).unwrap();
    trim(&mut m).unwrap();
    // Point the slice at the first position instead of the last.
    let g = m.graph_mut();
    let starts = g
        .initializer
        .iter_mut()
        .find(|t| t.name.as_deref() == Some("/readout/trim/Slice/starts"))
        .unwrap();
    starts.raw_data = Some(0i64.to_le_bytes().to_vec());
    let ends = g
        .initializer
        .iter_mut()
        .find(|t| t.name.as_deref() == Some("/readout/trim/Slice/ends"))
        .unwrap();
    ends.raw_data = Some(1i64.to_le_bytes().to_vec());
    let out = base.join("bad");
    let src = Source {
        command: "trim",
        dir: &dir,
        config: &config,
        tok: &tok,
        slot_map: None,
        keep: None,
    };
    let err = finish(&m, &out, &src, false).unwrap_err().to_string();
    assert!(err.contains("differ"), "{err}");
    assert!(!out.exists());
}

/// The builder's fp32 graph reads one [hidden, vocab] table from the head's
/// MatMul and, through a Transpose, from the embedding's Gather.
#[test]
fn a_tied_float_graph_is_pruned_without_touching_the_embedding() {
    let base = temp_dir("tied-float");
    let src = OnnxModel::load(&model_path(FP32).join("model.onnx")).unwrap();
    let r = inspect(&src, 20).unwrap();
    assert_eq!(r.sharing, Sharing::Shared);
    assert_eq!(r.prune.removes_bytes, 0);
    assert_eq!(r.prune.adds_bytes, 20 * 64 * 4);
    let out = base.join("pruned");
    let rep = run(&model_path(FP32), &out, &prune_op("ABCD")).unwrap();
    assert_eq!(rep.verification.max_abs_diff, 0.0);
    assert_eq!(
        rep.verification.embedding_tables_untouched,
        vec!["lm_head.MatMul.weight".to_string()]
    );
    let pruned = OnnxModel::load(&out.join("model.onnx")).unwrap();
    let table = |m: &OnnxModel| {
        m.tensor_bytes(m.initializer("lm_head.MatMul.weight").unwrap())
            .unwrap()
    };
    assert_eq!(
        table(&src),
        table(&pruned),
        "the shared table is byte-identical"
    );
    let head = find_head(&pruned).unwrap();
    assert_eq!(head.rows, 4);
    assert_eq!(
        find_embeddings(&pruned)[0].tables,
        vec!["lm_head.MatMul.weight".to_string()]
    );
}

/// Writes a copy of the fp32 tiny model whose embedding reads its own
/// [vocab, hidden] table; `perturb` makes the copy differ (untied).
fn untied_copy(dest: &Path, perturb: bool) -> PathBuf {
    use readout::surgery::graph::raw_tensor;
    let mut m = OnnxModel::load(&model_path(FP32).join("model.onnx")).unwrap();
    let w = m.initializer("lm_head.MatMul.weight").unwrap().clone();
    let bytes = m.tensor_bytes(&w).unwrap();
    let (h, v) = (w.dims[0] as usize, w.dims[1] as usize);
    let mut t = vec![0u8; bytes.len()];
    for i in 0..h {
        for j in 0..v {
            let (s, d) = ((i * v + j) * 4, (j * h + i) * 4);
            t[d..d + 4].copy_from_slice(&bytes[s..s + 4]);
        }
    }
    if perturb {
        t[0] ^= 0x40;
    }
    let g = m.graph_mut();
    g.initializer.push(raw_tensor(
        "embed.weight",
        w.data_type.unwrap(),
        vec![v as i64, h as i64],
        t,
    ));
    let gather = g
        .node
        .iter_mut()
        .find(|n| {
            n.op_type.as_deref() == Some("Gather")
                && n.input.get(1).map(String::as_str) == Some("input_ids")
        })
        .unwrap();
    gather.input[0] = "embed.weight".into();
    std::fs::create_dir_all(dest).unwrap();
    m.save(dest, "model.onnx").unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(model_path(FP32).join(f), dest.join(f)).unwrap();
    }
    dest.to_path_buf()
}

#[test]
fn duplicated_and_untied_tables_report_and_lose_the_head_bytes() {
    let base = temp_dir("untied");
    let head_bytes = 64 * 151936 * 4;
    for (name, perturb, want) in [
        ("dup", false, Sharing::Duplicated),
        ("untied", true, Sharing::Separate),
    ] {
        let dir = untied_copy(&base.join(name), perturb);
        let m = OnnxModel::load(&dir.join("model.onnx")).unwrap();
        let r = inspect(&m, 4).unwrap();
        assert_eq!(r.sharing, want);
        assert_eq!(r.prune.removes_bytes, head_bytes);
        assert_eq!(r.prune.adds_bytes, 4 * 64 * 4);
        let out = base.join(format!("{name}-pruned"));
        let rep = run(&dir, &out, &prune_op("ABCD")).unwrap();
        assert_eq!(rep.removed_bytes, Some(head_bytes));
        assert_eq!(
            rep.verification.embedding_tables_untouched,
            vec!["embed.weight".to_string()]
        );
        let size = |d: &Path| std::fs::metadata(d.join("model.onnx.data")).unwrap().len() as i64;
        assert_eq!(
            size(&dir) - size(&out),
            head_bytes as i64 - 4 * 64 * 4,
            "the file shrinks by the head table"
        );
    }
}

#[test]
fn exposed_hidden_state_reproduces_the_logits_and_a_wrong_row_is_caught() {
    let base = temp_dir("hidden");
    for model in [Q4, Q4F16, FP32] {
        let out = base.join(model);
        let r = run(&model_path(model), &out, &Op::ExposeHidden).unwrap();
        assert!(
            r.verification.hidden_max_abs_diff.unwrap()
                < readout::engine::proof::EXTRACTION_TOLERANCE
        );
        let mut e = open_engine(&out, &opts()).unwrap();
        let miss = e
            .proof()
            .extraction_max_abs_diff
            .expect("extraction proven at load");
        assert!(
            miss < readout::engine::proof::EXTRACTION_TOLERANCE,
            "{model}: {miss}"
        );
        let s = &fixture()[0];
        let hidden = block_on(async {
            let id = e.prefill(s).await.unwrap();
            e.extract(id, &s.criteria[..2]).await.unwrap()
        });
        assert_eq!(hidden.len(), 2);
        assert_eq!(hidden[0].len(), 64);
        assert_ne!(hidden[0], hidden[1]);

        // Rows that belong to other tokens: the load-time proof must refuse.
        let path = out.join("head_rows.json");
        let mut hr = readout::core::model::head_rows::HeadRows::parse(
            &std::fs::read_to_string(&path).unwrap(),
        )
        .unwrap();
        hr.rows.rotate_left(1);
        std::fs::write(&path, serde_json::to_string(&hr).unwrap()).unwrap();
        let err = open_engine(&out, &opts())
            .err()
            .expect("wrong rows must be refused")
            .to_string();
        assert!(err.contains("misses the returned logits"), "{err}");
        std::fs::remove_file(&path).unwrap();
        let err = open_engine(&out, &opts())
            .err()
            .expect("missing rows must be refused")
            .to_string();
        assert!(err.contains("head_rows.json is missing"), "{err}");
    }
    // Trimmed + exposed also holds.
    let t = base.join("t");
    run(&model_path(Q4), &t, &Op::Trim).unwrap();
    run(&t, &base.join("th"), &Op::ExposeHidden).unwrap();
    assert!(open_engine(&base.join("th"), &opts())
        .unwrap()
        .proof()
        .extraction_max_abs_diff
        .is_some());
}

#[test]
fn models_json_records_measured_files_and_refuses_a_changed_one() {
    use readout::model_dir::checked_dir;
    use readout::surgery::catalog::build;
    let base = temp_dir("catalog");
    let models = base.join("models");
    copy_model(Q4, &models.join(Q4));
    run(
        &models.join(Q4),
        &models.join(format!("{Q4}-trimmed-pruned")),
        &prune_op("ABCD"),
    )
    .unwrap();
    let catalog_path = base.join("models.json");
    // The best measured readout (bench/runners/decisions.sh) of a summary
    // the caller names becomes the stock graph's default; a named summary
    // that holds no usable best is refused, naming it.
    let results = base.join("results");
    std::fs::create_dir_all(&results).unwrap();
    let summary = results.join("2026-01-01-decisions-x.json");
    std::fs::write(
        &summary,
        format!(r#"{{"model": "{Q4}", "best": {{"mode": "cloze", "cloze_score": "mean", "calibration": "content-free", "prompt": "plain", "accuracy": 0.5}}}}"#),
    )
    .unwrap();
    let truncated = results.join("2026-01-02-decisions-y.json");
    std::fs::write(&truncated, "{ truncated").unwrap();
    let err = build(&models, &catalog_path, &[summary.clone(), truncated])
        .unwrap_err()
        .to_string();
    assert!(err.contains("2026-01-02-decisions-y.json"), "{err}");
    let cat = build(&models, &catalog_path, &[summary]).unwrap();
    std::fs::write(&catalog_path, serde_json::to_string_pretty(&cat).unwrap()).unwrap();
    assert_eq!(cat.models.len(), 2);
    let stock = &cat.models[0];
    assert_eq!(
        (
            stock.dtype.as_str(),
            stock.trimmed,
            stock.pruned,
            stock.tied
        ),
        ("q4", false, false, true)
    );
    assert_eq!(stock.shape.head_rows, 151936);
    use readout::{Calibration, ClozeScore, Mode, PromptStyle, ReadoutChoice};
    assert_eq!(
        stock.readout,
        Some(ReadoutChoice {
            mode: Mode::Cloze,
            cloze_score: ClozeScore::Mean,
            calibration: Calibration::ContentFree,
            prompt: PromptStyle::Plain
        })
    );
    let pruned = &cat.models[1];
    assert!(pruned.pruned && pruned.letters.as_deref() == Some("ABCD"));
    // A pruned head returns only letters: it keeps the letters default.
    assert_eq!(pruned.readout, None);
    assert_eq!(pruned.shape.head_rows, 4);
    let graph = pruned.files.iter().find(|f| f.role == "graph").unwrap();
    assert_eq!(graph.url, format!("models/{Q4}-trimmed-pruned/model.onnx"));
    assert_eq!(
        graph.bytes,
        std::fs::metadata(base.join(&graph.url)).unwrap().len()
    );
    assert_eq!(graph.sha256.len(), 64);

    // Loading through the catalog checks every file first.
    let arg = PathBuf::from(format!("{}#{Q4}", catalog_path.display()));
    let dir = readout::model_dir::resolve(&arg).unwrap();
    open_engine(&dir, &opts()).unwrap();
    let cfg = models.join(Q4).join("config.json");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text = text.replacen('{', "{ ", 1).replacen("  ", " ", 1);
    std::fs::write(&cfg, &text).unwrap();
    let err = checked_dir(&catalog_path, Q4).unwrap_err().to_string();
    assert!(
        err.contains("config.json") && err.contains("sha256"),
        "{err}"
    );
    std::fs::write(&cfg, &text[..text.len() / 2]).unwrap();
    let err = checked_dir(&catalog_path, Q4).unwrap_err().to_string();
    assert!(err.contains("bytes; models.json says"), "{err}");
    assert!(checked_dir(&catalog_path, "nope")
        .unwrap_err()
        .to_string()
        .contains("no model \"nope\""));
}
