//! Cloze readout and calibration on the tiny models (spec §7): the cached
//! child past equals one uncached forward, baselines are cached per
//! instruction and criterion, chat templates split on a token boundary, and
//! every refusal names its cause and leaves the engine scoring.

mod common;

use common::*;
use readout::core::read::cloze_math::cloze_probs;
use readout::Criterion;
use readout::Debias;
use readout::{Calibration, ClozeScore, Mode, PromptStyle};
use readout::{EngineError, ReadoutRequest};

const EVIDENCE: &str = "The invoice was paid in full on 3 March. The customer asked for a refund on the shipping fee, which was granted.";

fn crits() -> Vec<Criterion> {
    vec![
        criterion(
            "paid",
            "Was the invoice paid?",
            &["yes, in full", "partly", "not at all"],
        ),
        criterion(
            "refund",
            "What was refunded?",
            &["the shipping fee", "the whole order"],
        ),
    ]
}

fn cloze(calibration: Calibration) -> ReadoutRequest {
    ReadoutRequest {
        mode: Some(Mode::Cloze),
        calibration: Some(calibration),
        ..ReadoutRequest::default()
    }
}

/// The chat prompt, letters' default instruction.
fn chat() -> ReadoutRequest {
    ReadoutRequest {
        prompt: Some(PromptStyle::Chat),
        mode: Some(Mode::Letters),
        ..ReadoutRequest::default()
    }
}

fn max_abs(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).map(|(p, q)| (p - q).abs())
        })
        .fold(0.0, f64::max)
}

/// Per option token, the cached child past against head + question + option
/// run as one uncached forward: float32 logits, so ≤ 1e-5 in log-probability.
fn cached_equals_uncached(model: &str, prompt: PromptStyle) {
    cached_equals_uncached_in(&model_path(model), prompt, 1e-5)
}

fn cached_equals_uncached_in(dir: &std::path::Path, prompt: PromptStyle, bound: f64) {
    let model = dir.display().to_string();
    let mut e = readout::open_engine(dir, &opts()).unwrap_or_else(|e| panic!("{model}: {e}"));
    block_on(async {
        let style = ReadoutRequest {
            prompt: Some(prompt),
            mode: Some(Mode::Cloze),
            ..ReadoutRequest::default()
        };
        let id = e.prefill_with(&state(EVIDENCE), &style).await.unwrap();
        for c in crits() {
            let cached = e.cloze_log_probs(id, &c, false).await.unwrap();
            let reference = e.cloze_log_probs(id, &c, true).await.unwrap();
            let d = max_abs(&cached, &reference);
            println!(
                "{model} {prompt:?} {}: max |Δ log p| {d:.2e} over {:?} tokens",
                c.id,
                cached.iter().map(Vec::len).collect::<Vec<_>>()
            );
            assert!(d <= bound, "{model} {}: {d}", c.id);
            // Every option token was read, and each is a log-probability.
            assert!(cached.iter().flatten().all(|&x| x <= 0.0 && x.is_finite()));
            // The decision is the softmax of these sums.
            let dec = e.score(id, &c, &cloze(Calibration::None)).await.unwrap();
            let want = cloze_probs(&cached, None, ClozeScore::Sum);
            for (a, b) in dec.p().iter().zip(&want) {
                assert!((a - b).abs() < 1e-12);
            }
        }
    });
}

#[test]
fn q4_cloze_through_the_child_past_equals_one_uncached_forward() {
    cached_equals_uncached(Q4, PromptStyle::Plain);
}

#[test]
fn fp32_cloze_through_the_child_past_equals_one_uncached_forward() {
    cached_equals_uncached("qwen3-tiny-random-fp32", PromptStyle::Plain);
}

#[test]
fn chat_prompt_cloze_equals_one_uncached_forward() {
    cached_equals_uncached(Q4, PromptStyle::Chat);
}

#[test]
fn smollm2_cloze_through_the_child_past_equals_one_uncached_forward() {
    // Built by the main job, not by the test command (which builds only the
    // tiny models): skipped, and said so, where it is absent.
    let Some(src) = built_model("smollm2-135m-instruct-q4") else {
        return;
    };
    // Its files ask ONNX Runtime for int8 activations (accuracy_level 4),
    // whose kernels differ between one row and many (1.6e-2 measured): the
    // float32 bound holds on a copy set to level 1, where it computes float32.
    // Its 30 layers in float32 sum in a different order for one row than
    // for many (ONNX Runtime's kernels choose by row count): 1.20e-5 measured
    // on an AMD EPYC with AVX-512 (it stayed under 1e-5 on earlier hosts); a
    // wrong past or position moves log-probabilities by far more than 2e-5.
    let level1 = float32_copy(&src);
    cached_equals_uncached_in(&level1, PromptStyle::Plain, 2e-5);
    cached_equals_uncached_in(&level1, PromptStyle::Chat, 2e-5);
}

#[test]
fn a_reference_longer_than_the_run_limit_reads_option_rows_across_runs() {
    // The uncached reference of a long head runs in chunks of the proven run
    // limit; as the evidence grows word by word, the chunk boundary moves
    // through the long option's rows, so some runs read target rows in two
    // chunks (and earlier chunks only grow the past).
    let mut e = engine(Q4);
    let limit = e.proof().run_limit;
    let long = "a refund of the shipping fee that the customer had asked for in writing on the third of March";
    let c = criterion("long", "What happened?", &[long, "nothing"]);
    block_on(async {
        let mut straddled = 0;
        for words in (limit - 80..limit - 30).step_by(2) {
            let id = e.prefill(&state(&"paid ".repeat(words))).await.unwrap();
            let cached = e.cloze_log_probs(id, &c, false).await.unwrap();
            let reference = e.cloze_log_probs(id, &c, true).await.unwrap();
            assert!(max_abs(&cached, &reference) <= 1e-5, "{words} words");
            let head = e.head_tokens(id).unwrap();
            let end = head + 8 + cached[0].len();
            if end > limit && end - cached[0].len() < limit {
                straddled += 1;
            }
            e.dispose(id).unwrap();
        }
        assert!(
            straddled > 0,
            "no evidence length put the run boundary inside the option"
        );
    });
}

#[test]
fn a_second_state_with_the_same_criteria_runs_no_baseline() {
    let mut e = engine(Q4);
    block_on(async {
        let a = e.prefill(&state(EVIDENCE)).await.unwrap();
        let b = e
            .prefill(&state("Nothing was paid and nothing was refunded."))
            .await
            .unwrap();
        for (mode, per_criterion) in [(Mode::Cloze, 1u64), (Mode::Letters, 1)] {
            let opts = ReadoutRequest {
                mode: Some(mode),
                calibration: Some(Calibration::ContentFree),
                ..ReadoutRequest::default()
            };
            let before = e.baselines_computed();
            let first = e.score_all(a, &crits(), &opts).await.unwrap();
            assert_eq!(
                e.baselines_computed() - before,
                per_criterion * crits().len() as u64,
                "{mode:?}"
            );
            let second = e.score_all(b, &crits(), &opts).await.unwrap();
            assert_eq!(
                e.baselines_computed() - before,
                per_criterion * crits().len() as u64,
                "{mode:?}: the second state ran a baseline"
            );
            // The same state scored again gives the same decision from the cache.
            let again = e.score_all(a, &crits(), &opts).await.unwrap();
            for (x, y) in first.iter().zip(&again) {
                assert_eq!(x.p(), y.p());
                assert_eq!(x.readout.mode, mode);
                assert_eq!(x.readout.calibration, Calibration::ContentFree);
            }
            assert_ne!(
                first[0].p(),
                second[0].p(),
                "{mode:?}: the evidence must still matter"
            );
        }
        // Cyclic letters need a baseline per rotation: 3 + 2 more, once.
        let cyc = ReadoutRequest {
            calibration: Some(Calibration::ContentFree),
            debias: Some(Debias::Cyclic),
            ..ReadoutRequest::default()
        };
        let before = e.baselines_computed();
        e.score_all(a, &crits(), &cyc).await.unwrap();
        e.score_all(b, &crits(), &cyc).await.unwrap();
        // Rotation 0 is the order already cached by the plain letters run.
        assert_eq!(e.baselines_computed() - before, 2 + 1);
        // Another instruction is another baseline.
        let mut other = state(EVIDENCE);
        other.instruction = Some("Judge the evidence.".into());
        let c = e.prefill(&other).await.unwrap();
        let before = e.baselines_computed();
        e.score_all(c, &crits(), &cloze(Calibration::ContentFree))
            .await
            .unwrap();
        assert_eq!(e.baselines_computed() - before, 2);
    });
}

#[test]
fn calibrated_scores_are_the_baseline_subtracted() {
    let mut e = engine(Q4);
    block_on(async {
        let id = e.prefill(&state(EVIDENCE)).await.unwrap();
        let cf = e
            .prefill(&state(readout::core::text::prompt::CONTENT_FREE_EVIDENCE))
            .await
            .unwrap();
        for c in crits() {
            let lp = e.cloze_log_probs(id, &c, false).await.unwrap();
            let base = e.cloze_log_probs(cf, &c, false).await.unwrap();
            for score in [ClozeScore::Sum, ClozeScore::Mean] {
                let opts = ReadoutRequest {
                    cloze_score: Some(score),
                    ..cloze(Calibration::ContentFree)
                };
                let d = e.score(id, &c, &opts).await.unwrap();
                let want = cloze_probs(&lp, Some(&base), score);
                for (a, b) in d.p().iter().zip(&want) {
                    assert!((a - b).abs() < 1e-9, "{score:?}: {a} vs {b}");
                }
            }
            // Letters: p / p_baseline, renormalised.
            let plain = e.score(id, &c, &ReadoutRequest::default()).await.unwrap();
            let lb = e.score(cf, &c, &ReadoutRequest::default()).await.unwrap();
            let cal = e
                .score(
                    id,
                    &c,
                    &ReadoutRequest {
                        calibration: Some(Calibration::ContentFree),
                        ..ReadoutRequest::default()
                    },
                )
                .await
                .unwrap();
            let want = readout::core::read::cloze_math::calibrate_letters(&plain.p(), &lb.p());
            for (a, b) in cal.p().iter().zip(&want) {
                assert!((a - b).abs() < 1e-9);
            }
        }
    });
}

#[test]
fn refusals_are_named_and_the_engine_scores_after_each() {
    let opts = cloze(Calibration::ContentFree);
    // A trimmed and a pruned graph return only the last row's letters. Cut
    // here: the test command builds only the stock tiny models before
    // `cargo test`.
    use readout::surgery::commands::{run, Op};
    let cuts = temp_dir("cloze-cuts");
    let trimmed = cuts.join(format!("{Q4}-trimmed"));
    let pruned = cuts.join(format!("{Q4}-trimmed-pruned"));
    run(&model_path(Q4), &trimmed, &Op::Trim).unwrap();
    let prune = Op::Prune {
        letters: "ABCD".into(),
        tokenizer: None,
    };
    run(&trimmed, &pruned, &prune).unwrap();
    for (dir, graph) in [(&trimmed, "trimmed"), (&pruned, "pruned")] {
        let model = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut e = readout::open_engine(dir, &common::opts()).unwrap();
        block_on(async {
            let id = e.prefill(&state(EVIDENCE)).await.unwrap();
            check(e.score(id, &crits()[0], &opts).await, &format!("mode cloze reads a log-probability at every option token's row, and model {model} is a {graph} graph"));
            e.score(id, &crits()[0], &ReadoutRequest::default())
                .await
                .unwrap();
        });
    }
    let mut e = engine(Q4);
    block_on(async {
        let id = e.prefill(&state(EVIDENCE)).await.unwrap();
        let before = e.score(id, &crits()[0], &opts).await.unwrap();
        let names: Vec<String> = (0..65).map(|i| format!("option {i}")).collect();
        let many: Vec<&str> = names.iter().map(String::as_str).collect();
        let r = e.score(id, &criterion("many", "Q?", &many), &opts).await;
        let info = r.as_ref().err().map(EngineError::info);
        assert_eq!(
            info.as_ref().map(|i| (i.code, i.field.as_deref(), i.limit)),
            Some(("too_many_options", Some("options"), Some(64)))
        );
        check(
            r,
            "options has 65 entries; at most 64 are allowed in cloze mode",
        );
        check(
            e.score(
                id,
                &criterion("many", "Q?", &many[..21]),
                &ReadoutRequest::default(),
            )
            .await,
            "at most 20 are allowed in letters mode (letters A-T; cloze mode takes up to 64)",
        );
        // 64 options is the limit, not an error; labels go past T.
        let d = e
            .score(
                id,
                &criterion("sixty-four", "Q?", &many[..64]),
                &cloze(Calibration::None),
            )
            .await
            .unwrap();
        assert_eq!(d.probs.len(), 64);
        assert_eq!(d.probs[63].letter, "64");
        check(
            e.score(
                id,
                &crits()[0],
                &ReadoutRequest {
                    debias: Some(Debias::Cyclic),
                    ..opts
                },
            )
            .await,
            "debias \"cyclic\": rotations move options between letters",
        );
        let after = e.score(id, &crits()[0], &opts).await.unwrap();
        assert_eq!(before.p(), after.p());
    });
}

#[test]
fn chat_without_a_template_or_with_a_bad_split_is_refused_by_name() {
    // A copy of the tiny model without its template files.
    let dir = temp_dir("no-template");
    copy_model(Q4, &dir);
    let mut e = readout::open_engine(&dir, &opts()).unwrap();
    block_on(async {
        check(
            e.prefill_with(&state(EVIDENCE), &chat()).await,
            "has no chat template",
        );
        let id = e.prefill(&state(EVIDENCE)).await.unwrap();
        e.score(id, &crits()[0], &ReadoutRequest::default())
            .await
            .unwrap();
    });
    // A template that rewrites text across the cut: the head renders
    // verbatim alone, but in the full prompt its last newline is replaced, so
    // its ids are no prefix of the full prompt's.
    let dir = temp_dir("bad-split");
    copy_model(Q4, &dir);
    std::fs::write(
        dir.join("chat_template.jinja"),
        "{{ messages[0]['content'] | replace('\\nQuestion', ' Question') }}",
    )
    .unwrap();
    let mut e = readout::open_engine(&dir, &opts()).unwrap();
    block_on(async {
        let s = state(EVIDENCE);
        let id = e.prefill_with(&s, &chat()).await.unwrap();
        let c = criterion("q", "d?", &["yes", "no"]);
        let r = e.score(id, &c, &cloze(Calibration::None)).await;
        let msg = r.err().map(|x| x.to_string()).unwrap_or_default();
        assert!(
            msg.contains(
                "chat template chat_template.jinja: the head/suffix split is not a token boundary"
            ),
            "{msg:?}"
        );
        // Letters' suffix ("Criterion: ...") is untouched by this template.
        e.score(id, &c, &ReadoutRequest::default()).await.unwrap();
        let plain = e.prefill(&s).await.unwrap();
        e.score(plain, &c, &cloze(Calibration::None)).await.unwrap();
    });
}

/// A state without an instruction prefilled for cloze carries the cloze
/// instruction: it decides exactly as the same state given that instruction
/// outright, and not as the letters head does.
#[test]
fn a_head_prefilled_for_cloze_carries_the_cloze_instruction() {
    use readout::core::text::prompt::{CLOZE_INSTRUCTION, DEFAULT_INSTRUCTION};
    assert_ne!(CLOZE_INSTRUCTION, DEFAULT_INSTRUCTION);
    let mut e = engine(Q4);
    block_on(async {
        let bare = state(EVIDENCE);
        let given = readout::StateSpec {
            instruction: Some(CLOZE_INSTRUCTION.to_string()),
            ..state(EVIDENCE)
        };
        let for_cloze = ReadoutRequest {
            prompt: Some(PromptStyle::Plain),
            mode: Some(Mode::Cloze),
            ..ReadoutRequest::default()
        };
        let a = e.prefill_with(&bare, &for_cloze).await.unwrap();
        let b = e.prefill(&given).await.unwrap();
        let letters = e.prefill(&bare).await.unwrap();
        assert_eq!(e.head_tokens(a).unwrap(), e.head_tokens(b).unwrap());
        assert_ne!(e.head_tokens(a).unwrap(), e.head_tokens(letters).unwrap());
        for c in crits() {
            let o = cloze(Calibration::ContentFree);
            let (da, db, dl) = (
                e.score(a, &c, &o).await.unwrap(),
                e.score(b, &c, &o).await.unwrap(),
                e.score(letters, &c, &o).await.unwrap(),
            );
            assert_eq!(da.p(), db.p(), "{}: same head, same decision", c.id);
            let moved = da
                .p()
                .iter()
                .zip(dl.p())
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max);
            assert!(
                moved > 1e-9,
                "{}: the letters head decided the same ({moved:e})",
                c.id
            );
        }
    });
}
