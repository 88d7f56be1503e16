//! Shared prefixes and growing states (spec §14), natively, against the
//! same states prefilled whole: ONNX Runtime in float32 within 1e-5, our
//! runtime exactly; worked examples against one uncached forward of the
//! same ids; and the refusals, each followed by a score.

mod common;

use common::{criterion, fixture, model_path};
use readout::{
    Calibration, Example, HostOptions, Mode, PrefixSpec, PromptStyle, ReadoutRequest, RuntimeKind,
    StateSpec,
};

fn host(runtime: RuntimeKind) -> HostOptions {
    HostOptions {
        runtime,
        threads: 2,
        precision: readout::Precision::Int8,
        pack: true,
    }
}

fn style(mode: Mode) -> ReadoutRequest {
    ReadoutRequest {
        mode: Some(mode),
        prompt: Some(PromptStyle::Plain),
        ..ReadoutRequest::default()
    }
}

fn opts(mode: Mode, calibration: Calibration) -> ReadoutRequest {
    ReadoutRequest {
        mode: Some(mode),
        calibration: Some(calibration),
        ..ReadoutRequest::default()
    }
}

fn probs(ds: &[readout::Decision]) -> Vec<f64> {
    ds.iter()
        .flat_map(|d| d.probs.iter().map(|p| p.p))
        .collect()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn bare(s: &StateSpec) -> StateSpec {
    StateSpec {
        criteria: vec![],
        ..s.clone()
    }
}

/// Whole prefills against prefix + evidence and against a state grown by
/// `extend`, for both modes (cloze calibrated: its baseline uses the prefix
/// too), on `model`; returns the largest |Δp|.
fn built_on_a_prefix_equals_whole(model: &str, runtime: RuntimeKind) -> f64 {
    let mut e = readout::open_host_engine(&model_path(model), &host(runtime)).unwrap();
    let states = fixture();
    let mut worst = 0f64;
    pollster::block_on(async {
        for (mode, cal) in [
            (Mode::Letters, Calibration::None),
            (Mode::Cloze, Calibration::ContentFree),
        ] {
            let p = e
                .prefix(&PrefixSpec::default(), &style(mode))
                .await
                .unwrap();
            for s in states.iter().take(3) {
                let o = opts(mode, cal);
                let whole = e.prefill_with(&bare(s), &style(mode)).await.unwrap();
                let a = probs(&e.score_all(whole, &s.criteria, &o).await.unwrap());
                let on = e.prefill_on(p, &bare(s)).await.unwrap();
                assert_eq!(e.head_tokens(on).unwrap(), e.head_tokens(whole).unwrap());
                let b = probs(&e.score_all(on, &s.criteria, &o).await.unwrap());
                worst = worst.max(max_diff(&a, &b));
                // Grown by a line: equal to the state prefilled whole with it.
                let line = "A later note: the customer asked for a refund by email.";
                e.extend(on, line).await.unwrap();
                let mut longer = bare(s);
                longer.evidence = format!("{}\n{line}", s.evidence);
                let whole2 = e.prefill_with(&longer, &style(mode)).await.unwrap();
                assert_eq!(e.head_tokens(on).unwrap(), e.head_tokens(whole2).unwrap());
                let c = probs(&e.score_all(whole2, &s.criteria, &o).await.unwrap());
                let d = probs(&e.score_all(on, &s.criteria, &o).await.unwrap());
                worst = worst.max(max_diff(&c, &d));
                for id in [whole, on, whole2] {
                    e.dispose(id).unwrap();
                }
            }
            e.dispose_prefix(p).unwrap();
        }
    });
    worst
}

#[test]
fn a_state_on_a_prefix_or_grown_equals_the_whole_prefill_in_float32() {
    let d = built_on_a_prefix_equals_whole("qwen3-tiny-random-fp32", RuntimeKind::Ort);
    eprintln!("# ONNX Runtime float32: max |Δp| {d:.2e}");
    assert!(d <= 1e-5, "{d}");
}

#[test]
fn a_state_on_a_prefix_or_grown_equals_the_whole_prefill_exactly_on_our_runtime() {
    let d = built_on_a_prefix_equals_whole(common::Q4, RuntimeKind::Own);
    assert_eq!(d, 0.0);
}

fn examples() -> Vec<Example> {
    let c = |id: &str, q: &str, opts: &[&str]| criterion(id, q, opts);
    vec![
        Example {
            evidence: "The invoice of 3 May was paid twice by the same card.".into(),
            criterion: c("ex1", "Was the customer charged twice?", &["Yes", "No"]),
            answer: "o0".into(),
        },
        Example {
            evidence: "The lamp arrived on time and works as described.".into(),
            criterion: c(
                "ex2",
                "How does the customer feel?",
                &["Angry", "Satisfied", "Confused"],
            ),
            answer: "o1".into(),
        },
    ]
}

#[test]
fn worked_examples_in_a_prefix_score_as_one_uncached_forward_of_the_same_ids() {
    for rt in [RuntimeKind::Ort, RuntimeKind::Own] {
        let mut e = readout::open_host_engine(&model_path(common::Q4), &host(rt)).unwrap();
        let s = &fixture()[0];
        pollster::block_on(async {
            for mode in [Mode::Letters, Mode::Cloze] {
                let spec = PrefixSpec {
                    instruction: Some("Judge the evidence.".into()),
                    examples: examples(),
                };
                let p = e.prefix(&spec, &style(mode)).await.unwrap();
                let bare_p = e
                    .prefix(
                        &PrefixSpec {
                            examples: vec![],
                            ..spec.clone()
                        },
                        &style(mode),
                    )
                    .await
                    .unwrap();
                assert!(e.prefix_tokens(p).unwrap() > e.prefix_tokens(bare_p).unwrap() + 20);
                let on = e.prefill_on(p, &bare(s)).await.unwrap();
                let o = opts(mode, Calibration::None);
                for c in &s.criteria {
                    let a = e.score(on, c, &o).await.unwrap();
                    let b = e.score_uncached(on, c, &o).await.unwrap();
                    let d = max_diff(&probs(&[a]), &probs(&[b]));
                    assert!(d <= 1e-3, "{rt:?} {mode:?} {}: {d}", c.id);
                }
                e.dispose(on).unwrap();
                e.dispose_prefix(p).unwrap();
                e.dispose_prefix(bare_p).unwrap();
            }
        });
    }
}

/// A state on `p` prefills and scores (after a refusal).
async fn still(e: &mut readout::HostEngine, p: readout::PrefixId, c: &readout::Criterion) {
    let s = e
        .prefill_on(p, &common::state("The parcel arrived two days late."))
        .await
        .unwrap();
    let d = e.score(s, c, &ReadoutRequest::default()).await.unwrap();
    assert_eq!(d.probs.len(), 2);
    e.dispose(s).unwrap();
}

#[test]
fn bad_prefixes_and_extensions_are_refused_by_name_and_the_engine_scores_after_each() {
    let mut e =
        readout::open_host_engine(&model_path(common::Q4), &host(RuntimeKind::Own)).unwrap();
    let c = criterion("late", "Did the parcel arrive late?", &["Yes", "No"]);
    let o = ReadoutRequest::default();
    pollster::block_on(async {
        let p = e
            .prefix(&PrefixSpec::default(), &style(Mode::Letters))
            .await
            .unwrap();
        // Evidence whose first characters merge with the prefix's last token.
        let err = e
            .prefill_on(p, &common::state("\n\n\nThe parcel arrived late."))
            .await
            .unwrap_err();
        assert_eq!(err.info().code, "token_boundary", "{err}");
        assert_eq!(err.info().field.as_deref(), Some("prefix"));
        still(&mut e, p, &c).await;
        // A state given its own instruction on a prefix.
        let mut own = common::state("The parcel arrived late.");
        own.instruction = Some("Other.".into());
        assert_eq!(
            e.prefill_on(p, &own).await.unwrap_err().info().code,
            "invalid_option"
        );
        // Extending a disposed state.
        let s = e
            .prefill_on(p, &common::state("The parcel arrived late."))
            .await
            .unwrap();
        e.dispose(s).unwrap();
        let err = e.extend(s, "More.").await.unwrap_err();
        assert_eq!(err.info().code, "unknown_state", "{err}");
        still(&mut e, p, &c).await;
        // Prefix and evidence together longer than the context (1024 here).
        let long = "The parcel arrived late again. ".repeat(200);
        let err = e.prefill_on(p, &common::state(&long)).await.unwrap_err();
        assert_eq!(err.info().code, "context_overflow", "{err}");
        let s = e
            .prefill_on(p, &common::state("The parcel arrived late."))
            .await
            .unwrap();
        let err = e.extend(s, &long).await.unwrap_err();
        assert_eq!(err.info().code, "context_overflow", "{err}");
        // The refused extension left the state as it was.
        assert_eq!(e.score(s, &c, &o).await.unwrap().probs.len(), 2);
        // A parent before its children.
        let err = e.dispose_prefix(p).unwrap_err();
        assert_eq!(err.info().code, "prefix_in_use", "{err}");
        assert_eq!(err.info().limit, Some(1));
        e.dispose(s).unwrap();
        still(&mut e, p, &c).await;
        e.dispose_prefix(p).unwrap();
        let err = e.prefill_on(p, &common::state("x y z")).await.unwrap_err();
        assert_eq!(err.info().code, "unknown_prefix", "{err}");
    });
}

fn keyed(model: &str, runtime: RuntimeKind, key: &str) -> readout::HostEngine {
    let mut e = readout::open_host_engine(&model_path(model), &host(runtime)).unwrap();
    e.set_model_key(key.into());
    e
}

fn rubric() -> PrefixSpec {
    PrefixSpec {
        instruction: None,
        examples: examples(),
    }
}

#[test]
fn a_prefix_kept_and_restored_by_a_new_engine_decides_bit_for_bit() {
    // Our runtime keeps float32 pasts; ONNX Runtime's q4f16 graph float16 ones.
    for (model, rt) in [
        (common::Q4, RuntimeKind::Own),
        (common::Q4F16, RuntimeKind::Ort),
    ] {
        let mut a = keyed(model, rt, "files-1");
        pollster::block_on(async {
            for mode in [Mode::Letters, Mode::Cloze] {
                let p = a.prefix(&rubric(), &style(mode)).await.unwrap();
                let bytes = a.export_prefix(p).await.unwrap();
                // A later visit: another engine on the same files.
                let mut b = keyed(model, rt, "files-1");
                assert_eq!(
                    a.prefix_key(&rubric(), &style(mode)).unwrap(),
                    b.prefix_key(&rubric(), &style(mode)).unwrap()
                );
                let q = b
                    .restore_prefix(&bytes, Some((&rubric(), &style(mode))))
                    .await
                    .unwrap();
                assert_eq!(b.prefix_tokens(q).unwrap(), a.prefix_tokens(p).unwrap());
                let o = opts(mode, Calibration::None);
                for s in fixture().iter().take(2) {
                    let sa = a.prefill_on(p, &bare(s)).await.unwrap();
                    let sb = b.prefill_on(q, &bare(s)).await.unwrap();
                    let da = probs(&a.score_all(sa, &s.criteria, &o).await.unwrap());
                    let db = probs(&b.score_all(sb, &s.criteria, &o).await.unwrap());
                    assert_eq!(da, db, "{model} {rt:?} {mode:?}: restored ≠ prefilled");
                    a.dispose(sa).unwrap();
                    b.dispose(sb).unwrap();
                }
                // Restored, it writes the same bytes again.
                assert_eq!(b.export_prefix(q).await.unwrap(), bytes);
                a.dispose_prefix(p).unwrap();
            }
        });
    }
}

#[test]
fn a_kept_prefix_from_elsewhere_or_damaged_is_refused_by_field_and_the_engine_scores_after() {
    let c = criterion("late", "Did the parcel arrive late?", &["Yes", "No"]);
    let mut a = keyed(common::Q4, RuntimeKind::Own, "files-1");
    pollster::block_on(async {
        let p = a.prefix(&rubric(), &style(Mode::Letters)).await.unwrap();
        let bytes = a.export_prefix(p).await.unwrap();
        let mut b = keyed(common::Q4, RuntimeKind::Own, "files-1");
        let field = |r: Result<readout::PrefixId, readout::EngineError>| match r {
            Err(e) => {
                assert_eq!(e.info().code, "stale_prefix", "{e}");
                e.info().field.unwrap()
            }
            Ok(_) => "accepted".into(),
        };
        let letters = Some((&rubric(), &style(Mode::Letters)));
        // Another model's files.
        let mut other = keyed(common::Q4, RuntimeKind::Own, "files-2");
        assert_eq!(field(other.restore_prefix(&bytes, letters).await), "model");
        let fresh = other
            .prefix(&rubric(), &style(Mode::Letters))
            .await
            .unwrap();
        still(&mut other, fresh, &c).await;
        // Another runtime (ONNX Runtime computes other bits).
        let mut ort = keyed(common::Q4, RuntimeKind::Ort, "files-1");
        assert_eq!(field(ort.restore_prefix(&bytes, letters).await), "runtime");
        // Another engine version, written into the header.
        let version = format!("\"engine\":\"{}\"", env!("CARGO_PKG_VERSION"));
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let at = text.find(&version).unwrap();
        let mut older = bytes.clone();
        older[at + 10] = b'9';
        assert_eq!(field(b.restore_prefix(&older, letters).await), "engine");
        // Another prompt, another mode, another instruction.
        let chat = ReadoutRequest {
            mode: Some(Mode::Letters),
            prompt: Some(PromptStyle::Chat),
            ..ReadoutRequest::default()
        };
        assert_eq!(
            field(b.restore_prefix(&bytes, Some((&rubric(), &chat))).await),
            "prompt"
        );
        let cloze = Some((&rubric(), &style(Mode::Cloze)));
        assert_eq!(field(b.restore_prefix(&bytes, cloze).await), "mode");
        let told = PrefixSpec {
            instruction: Some("Answer with care.".into()),
            examples: examples(),
        };
        let other_text = Some((&told, &style(Mode::Letters)));
        assert_eq!(field(b.restore_prefix(&bytes, other_text).await), "ids");
        // Truncated: refused by its size before anything is allocated.
        let err = b
            .restore_prefix(&bytes[..bytes.len() - 100], letters)
            .await
            .unwrap_err();
        assert_eq!(err.info().field.as_deref(), Some("bytes"), "{err}");
        assert_eq!(err.info().limit, Some(bytes.len()));
        // One byte of the past changed.
        let mut altered = bytes.clone();
        let mid = bytes.len() - 1000;
        altered[mid] ^= 1;
        assert_eq!(field(b.restore_prefix(&altered, letters).await), "checksum");
        // Not a kept prefix at all.
        assert_eq!(field(b.restore_prefix(b"{}", letters).await), "format");
        // After every refusal the engine restores the good bytes and scores.
        let q = b.restore_prefix(&bytes, letters).await.unwrap();
        still(&mut b, q, &c).await;
        // An engine loaded without file hashes keeps nothing.
        let mut bare_engine =
            readout::open_host_engine(&model_path(common::Q4), &host(RuntimeKind::Own)).unwrap();
        let err = bare_engine.export_prefix(p).await.unwrap_err();
        assert_eq!(err.info().code, "prefix_unkeyed", "{err}");
    });
}
