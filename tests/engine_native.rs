//! The engine on real decoders (the tiny random Qwen3, q4 and q4f16), natively.

mod common;

use common::*;
use readout::core::read::slots::{read_slots, HeadColumns};
use readout::engine::convention::Convention;
use readout::Debias;
use readout::ReadoutRequest;
use readout::Runtime;

const EVIDENCE: &str = "Order 4471 was placed on Tuesday by Dana Whitfield. It contains two blue kettles and one \
toaster, ships from the Leeds warehouse, and was paid by card. The customer asked for delivery after 5 pm.";

fn crits() -> Vec<readout::Criterion> {
    vec![
        criterion(
            "who",
            "Who placed the order?",
            &["Dana Whitfield", "The Leeds warehouse", "A courier"],
        ),
        criterion(
            "kettles",
            "How many kettles are in the order?",
            &["One", "Two", "Three", "Four"],
        ),
        criterion("card", "Was the order paid by card?", &["Yes", "No"]),
        criterion(
            "day",
            "On which day was it placed?",
            &[
                "Monday",
                "Tuesday",
                "Wednesday",
                "Thursday",
                "Friday",
                "Saturday",
            ],
        ),
    ]
}

fn max_dp(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// spec §6.2: the cached prefix must equal one uncached forward of the same ids.
fn cached_equals_uncached(model: &str, tol: f64) {
    let mut e = engine(model);
    let mut worst: f64 = 0.0;
    block_on(async {
        for (k, s) in fixture().iter().take(4).enumerate() {
            let id = e.prefill(s).await.unwrap();
            let debias = if k == 0 { Debias::Cyclic } else { Debias::None };
            let opts = ReadoutRequest {
                debias: Some(debias),
                allowed_mass: Some(true),
                ..ReadoutRequest::default()
            };
            for c in &s.criteria {
                let cached = e.score(id, c, &opts).await.unwrap();
                let fresh = e.score_uncached(id, c, &opts).await.unwrap();
                assert_eq!(
                    cached.answer, fresh.answer,
                    "{model} {}: argmax changed",
                    c.id
                );
                worst = worst.max(max_dp(&cached.p(), &fresh.p()));
                let am = cached
                    .allowed_mass
                    .expect("unpruned model reports allowed_mass");
                assert!(am > 0.0 && am < 1.0, "allowed_mass {am}");
                assert_eq!(cached.order_unstable.is_some(), debias == Debias::Cyclic);
            }
            e.dispose(id).unwrap();
        }
    });
    assert!(worst <= tol, "{model}: max |Δp| {worst:e} > {tol:e}");
    eprintln!("{model}: cached vs uncached max |Δp| = {worst:e}");
}

#[test]
fn q4_cached_prefix_equals_uncached_forward() {
    cached_equals_uncached(Q4, 1e-5);
}

#[test]
fn q4f16_cached_prefix_equals_uncached_forward() {
    cached_equals_uncached(Q4F16, 2e-3);
}

#[test]
fn exactly_one_convention_agrees_and_the_other_is_measured_to_disagree() {
    for model in [Q4, Q4F16] {
        let e = engine(model);
        let p = e.proof();
        assert!(
            p.probe_head_tokens >= 64 && p.probe_suffix_tokens >= 40,
            "{p:?}"
        );
        assert_eq!(p.convention, Convention::MaskPastAndSuffix, "{model}");
        assert_eq!(p.candidates.len(), 2);
        let winner = p.candidates.iter().find(|c| c.agrees).unwrap();
        assert!(winner.max_dp.unwrap() <= p.tolerance);
        let loser = p.candidates.iter().find(|c| !c.agrees).unwrap();
        assert_eq!(loser.convention, Convention::MaskSuffixOnly);
        match (loser.max_dp, &loser.error) {
            (Some(dp), None) => assert!(
                dp > 10.0 * p.tolerance,
                "{model}: wrong convention only {dp:e} away"
            ),
            (None, Some(_)) => {}
            other => panic!("{other:?}"),
        }
        assert!(p.all_positions, "stock graphs return every position");
        assert_eq!(p.uncached_dims[2], 151936);
    }
}

#[test]
fn readslots_agrees_on_full_last_and_pruned_views_of_real_logits() {
    let e = engine(Q4);
    let letters = e.info().letters.letter_ids;
    let ids = e
        .tokenizer()
        .encode("The answer to the question is")
        .unwrap();
    let mut rt = readout::runtime::native::NativeRuntime::load(
        &model_path(Q4).join("model.onnx"),
        &opts(),
        [2, 16],
    )
    .unwrap();
    let sig = rt.signature().clone();
    let step = readout::engine::convention::derive(Convention::MaskPastAndSuffix, &sig, 0, &ids);
    let full = block_on(rt.run(&step, None, false)).unwrap().logits;
    let (s, v) = (full.dims[1], full.dims[2]);
    assert_eq!(s, ids.len());
    let last_row = full.row_f32(s - 1);
    let last = readout::core::read::logits::Logits::f32(vec![1, 1, v], last_row.clone());
    let k = 5;
    let cols: Vec<usize> = letters[..k].iter().map(|&i| i as usize).collect();
    let pruned = readout::core::read::logits::Logits::f32(
        vec![1, 1, k],
        cols.iter().map(|&c| last_row[c]).collect(),
    );
    let a = read_slots(&full, &HeadColumns::Vocab { vocab: v }, &cols, true).unwrap();
    let b = read_slots(&last, &HeadColumns::Vocab { vocab: v }, &cols, true).unwrap();
    let c = read_slots(
        &pruned,
        &HeadColumns::Pruned { rows: k },
        &(0..k).collect::<Vec<_>>(),
        false,
    )
    .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.probs, c.probs);
    assert_eq!(a.logits, c.logits);
}

#[test]
fn bad_input_is_named_and_the_engine_stays_usable() {
    let mut e = engine(Q4);
    let ok = crits()[0].clone();
    let opts = ReadoutRequest::default();
    block_on(async {
        let id = e.prefill(&state(EVIDENCE)).await.unwrap();
        let baseline = e.score(id, &ok, &opts).await.unwrap();
        check(
            e.score(id, &criterion("one", "Q?", &["only"]), &opts).await,
            "at least 2",
        );
        let many: Vec<String> = (0..21).map(|i| format!("option {i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        check(
            e.score(id, &criterion("many", "Q?", &many), &opts).await,
            "at most 20",
        );
        let mut dup = ok.clone();
        dup.options[1].id = dup.options[0].id.clone();
        check(e.score(id, &dup, &opts).await, "appears more than once");
        let mut empty = ok.clone();
        empty.question = " ".into();
        check(e.score(id, &empty, &opts).await, "question is empty");
        check(e.prefill(&state(" \n ")).await, "evidence is empty");
        check(
            e.score_all(id, &[ok.clone(), ok.clone()], &opts).await,
            "appears more than once (decisions are reported by id)",
        );
        // 1,024 positions is the tiny model's context.
        let long = "word ".repeat(1500);
        check(
            e.prefill(&state(&long)).await,
            "exceed the model's context of 1024",
        );
        let nearly = "word ".repeat(990);
        let tight = e.prefill(&state(&nearly)).await.unwrap();
        check(e.score(tight, &ok, &opts).await, "evidence + criterion");
        e.dispose(tight).unwrap();
        check(e.score(tight, &ok, &opts).await, "no such state");
        check(e.dispose(tight), "no such state");
        // A stock graph has no hidden output to extract: named by its code, not as a proof.
        let no_hidden = e.extract(id, std::slice::from_ref(&ok)).await.unwrap_err();
        assert_eq!(no_hidden.info().code, "no_hidden_output");
        assert!(no_hidden.to_string().contains("readout expose-hidden"));
        // After every refusal, the same call on the same engine still gives the same decision.
        let again = e.score(id, &ok, &opts).await.unwrap();
        assert_eq!(again.p(), baseline.p());
        // 20 options is the limit, not an error.
        let twenty: Vec<String> = (0..20).map(|i| format!("option {i}")).collect();
        let twenty: Vec<&str> = twenty.iter().map(String::as_str).collect();
        let d = e
            .score(id, &criterion("twenty", "Q?", &twenty), &opts)
            .await
            .unwrap();
        assert_eq!(d.probs.len(), 20);
        assert!((d.p().iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert_eq!(d.probs[19].letter, "T");
    });
}

#[test]
fn disposal_returns_the_live_tensor_count() {
    let mut e = engine(Q4);
    assert_eq!(e.live_kv_tensors(), 0);
    block_on(async {
        let mut ids = Vec::new();
        for i in 0..10 {
            ids.push(
                e.prefill(&state(&format!("{EVIDENCE} Note {i}.")))
                    .await
                    .unwrap(),
            );
        }
        assert_eq!(
            e.live_kv_tensors(),
            10 * 2 * 2,
            "2 layers × key/value per state"
        );
        for id in ids {
            e.dispose(id).unwrap();
        }
    });
    assert_eq!(e.live_kv_tensors(), 0);
    assert_eq!(e.live_states(), 0);
}

#[test]
fn debias_scores_every_rotation_and_reports_stability() {
    let mut e = engine(Q4);
    block_on(async {
        let id = e.prefill(&state(EVIDENCE)).await.unwrap();
        for c in crits() {
            let plain = e.score(id, &c, &ReadoutRequest::default()).await.unwrap();
            let deb = e
                .score(
                    id,
                    &c,
                    &ReadoutRequest {
                        debias: Some(Debias::Cyclic),
                        allowed_mass: Some(true),
                        ..ReadoutRequest::default()
                    },
                )
                .await
                .unwrap();
            assert!(plain.order_unstable.is_none());
            assert!(deb.order_unstable.is_some());
            assert!((deb.p().iter().sum::<f64>() - 1.0).abs() < 1e-9);
            // Rotation 0 is the plain order, so a debiased result differs
            // from it unless the model is perfectly position-invariant.
            assert_ne!(plain.p(), deb.p(), "{}", c.id);
            // The margin is the top probability over the runner-up.
            let mut p = deb.p();
            p.sort_by(|a, b| b.total_cmp(a));
            assert!(
                (deb.margin - (p[0] - p[1])).abs() < 1e-12,
                "{} vs {p:?}",
                deb.margin
            );
        }
    });
}
