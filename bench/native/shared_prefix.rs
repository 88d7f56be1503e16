//! Native benchmark (a program, not a test): states that share a rubric,
//! prefilled whole against built on one shared prefix (spec §14).
//!
//!   cargo bench --bench shared_prefix -- [--states 100] [--prefix-tokens 400]
//!       [--evidence-tokens 200] [--threads 2] [MODEL_DIR]
//!
//! The prefix is an instruction of about `--prefix-tokens` tokens; each
//! state's evidence about `--evidence-tokens`, different for every state.
//! On each runtime (ONNX Runtime, ours), in one run and alternating by
//! state: every state prefilled whole, and every state built on the prefix
//! (the prefix's own prefill counted once). The decisions of each pair on
//! one criterion are compared, so the speed is of the same computation.
//! Writes bench/results/native-shared-prefix/<date>-native-shared-prefix.json, and the texts it
//! used to target/shared-prefix-texts.json, which the Chromium runner
//! (bench/runners/shared_prefix.mjs) reads so both measure the same states
//! (not under `--profile`, whose few states would replace them).
//!
//! `--order blocks`: every state whole first, then every state on the
//! prefix (as a corpus on one rubric runs), instead of alternating; the
//! result is written as `...-native-shared-prefix-blocks.json`.
//! `--runtime ort|own`: that runtime only.
//! `--texts-only`: write the texts and stop (what the browser runners read:
//! bench/runners/shared_prefix.mjs, prefix_restore.mjs).
//!
//! `--profile whole|prefix`: our runtime only, one of the two paths only,
//! and no result file: a run to put under `perf record`, so each path's
//! profile is its own.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use readout::{HostOptions, Mode, PrefixSpec, PromptStyle, ReadoutRequest, RuntimeKind, StateSpec};
use serde_json::json;

use common::Args;

/// Sentences cycled into text until the tokenizer counts `tokens`.
fn text_of(
    tokens: usize,
    seed: usize,
    sentences: &[&str],
    count: &dyn Fn(&str) -> usize,
) -> String {
    let mut s = String::new();
    let mut i = seed;
    while count(&s) < tokens {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(&sentences[i % sentences.len()].replace("{n}", &(i * 7 % 97).to_string()));
        i += 1;
    }
    s
}

const RUBRIC: &[&str] = &[
    "A ticket is urgent when the customer cannot use the product at all, or loses money because of it.",
    "Billing questions cover invoices, refunds, charges and payment methods; technical ones cover errors and outages.",
    "Read the whole ticket before deciding; a polite tone does not make a serious problem less urgent.",
    "When a ticket mentions an amount, take the amount the customer says they were charged, in whole units.",
    "Rule {n}: a ticket that repeats an earlier complaint counts as one ticket, not two.",
];
const TICKET: &[&str] = &[
    "I was charged {n} euros twice for the same order and nobody answers my emails.",
    "The app crashes every time I open the settings page after the update of last week.",
    "My invoice number {n} shows the wrong address and I need it corrected for my accountant.",
    "Since this morning the dashboard will not load and my whole team is blocked.",
    "Could you tell me whether the annual plan can be paid by bank transfer? Order {n}.",
];

fn main() {
    let mut args = Args::from_env();
    let states = args.number("--states", 100);
    let prefix_tokens = args.number("--prefix-tokens", 400);
    let evidence_tokens = args.number("--evidence-tokens", 200);
    let threads = args.number("--threads", 2);
    let profile = args.text("--profile");
    let texts_only = args.flag("--texts-only");
    let order = args.text("--order").unwrap_or_else(|| "alternate".into());
    assert!(
        order == "alternate" || order == "blocks",
        "--order {order}: alternate or blocks"
    );
    let only = args.text("--runtime");
    if let Some(p) = profile
        .as_deref()
        .filter(|p| !["whole", "prefix"].contains(p))
    {
        panic!("--profile {p}: whole or prefix");
    }
    let rest = args.rest();
    let dir = rest.first().map_or_else(
        || PathBuf::from("models/smollm2-135m-instruct-q4"),
        PathBuf::from,
    );
    let md = readout::ModelDir::open(&dir).expect("model directory");
    let tok = md.read_tokenizer().expect("tokenizer.json");
    let count = |s: &str| tok.encode(s).map_or(0, |ids| ids.len());
    let instruction = text_of(prefix_tokens, 0, RUBRIC, &count);
    let docs: Vec<StateSpec> = (0..states)
        .map(|i| StateSpec {
            id: format!("t{i}"),
            instruction: None,
            evidence: format!(
                "Ticket {i}. {}",
                text_of(evidence_tokens, i, TICKET, &count)
            ),
            criteria: vec![],
        })
        .collect();
    let criterion = common::criterion(
        "urgent",
        "yes_no",
        "Is this ticket urgent?".into(),
        &["Yes", "No"],
    );
    // A profiling run (`--profile`, a few states) leaves the texts of the
    // last full run alone: the Chromium runner measures those.
    if profile.is_none() {
        std::fs::create_dir_all("target").expect("target/");
        let texts = json!({
            "model": dir.display().to_string(),
            "instruction": instruction,
            "evidence": docs.iter().map(|d| d.evidence.clone()).collect::<Vec<_>>(),
        });
        std::fs::write("target/shared-prefix-texts.json", texts.to_string()).expect("write texts");
    }
    if texts_only {
        return;
    }
    // Refused before the run when taken; a profile run writes no result.
    let tail = if order == "blocks" { "-blocks" } else { "" };
    let out = profile.is_none().then(|| {
        common::result_path(
            "native-shared-prefix",
            &format!("native-shared-prefix{tail}"),
            None,
        )
    });
    let style = &ReadoutRequest {
        mode: Some(Mode::Letters),
        prompt: Some(PromptStyle::Plain),
        ..ReadoutRequest::default()
    };
    let so = ReadoutRequest::default();
    let mut results = Vec::new();
    let runtimes = match (profile.is_some(), only.as_deref()) {
        (true, _) | (false, Some("own")) => vec![RuntimeKind::Own],
        (false, Some("ort")) => vec![RuntimeKind::Ort],
        (false, Some(r)) => panic!("--runtime {r}: ort or own"),
        (false, None) => vec![RuntimeKind::Ort, RuntimeKind::Own],
    };
    let (run_whole, run_on) = match profile.as_deref() {
        Some("whole") => (true, false),
        Some(_) => (false, true),
        None => (true, true),
    };
    for runtime in runtimes {
        let opts = HostOptions {
            runtime,
            threads,
            precision: readout::Precision::Int8,
            pack: true,
        };
        let mut e = readout::open_host_engine(&dir, &opts).expect("load");
        let spec = PrefixSpec {
            instruction: Some(instruction.clone()),
            examples: vec![],
        };
        let (mut whole_ms, mut on_ms) = (0.0, 0.0);
        let mut max_dp: f64 = 0.0;
        let (mut whole_tokens, mut prefix_len) = (0, 0);
        pollster::block_on(async {
            // Warm-up: one of each, not counted.
            let w = e
                .prefill_with(
                    &StateSpec {
                        instruction: Some(instruction.clone()),
                        ..docs[0].clone()
                    },
                    style,
                )
                .await
                .expect("warm-up");
            e.dispose(w).expect("dispose");
            let t = Instant::now();
            let p = e.prefix(&spec, style).await.expect("prefix");
            on_ms += t.elapsed().as_secs_f64() * 1e3;
            prefix_len = e.prefix_tokens(p).expect("prefix tokens");
            if order == "blocks" {
                let mut first = Vec::new();
                for (i, d) in docs.iter().enumerate() {
                    let whole_spec = StateSpec {
                        instruction: Some(instruction.clone()),
                        ..d.clone()
                    };
                    let t = Instant::now();
                    let a = e.prefill_with(&whole_spec, style).await.expect("whole");
                    whole_ms += t.elapsed().as_secs_f64() * 1e3;
                    whole_tokens += e.head_tokens(a).expect("tokens");
                    if i < 5 {
                        first.push(e.score(a, &criterion, &so).await.expect("score").p());
                    }
                    e.dispose(a).expect("dispose");
                }
                for (i, d) in docs.iter().enumerate() {
                    let t = Instant::now();
                    let b = e.prefill_on(p, d).await.expect("on the prefix");
                    on_ms += t.elapsed().as_secs_f64() * 1e3;
                    if let Some(pa) = first.get(i) {
                        let db = e.score(b, &criterion, &so).await.expect("score");
                        for (x, y) in pa.iter().zip(db.p()) {
                            max_dp = max_dp.max((x - y).abs());
                        }
                    }
                    e.dispose(b).expect("dispose");
                }
                e.dispose_prefix(p).expect("dispose prefix");
                return;
            }
            for (i, d) in docs.iter().enumerate() {
                let whole_spec = StateSpec {
                    instruction: Some(instruction.clone()),
                    ..d.clone()
                };
                if !(run_whole && run_on) {
                    let t = Instant::now();
                    let a = if run_whole {
                        e.prefill_with(&whole_spec, style).await.expect("whole")
                    } else {
                        e.prefill_on(p, d).await.expect("on the prefix")
                    };
                    whole_ms += t.elapsed().as_secs_f64() * 1e3;
                    whole_tokens += e.head_tokens(a).expect("tokens");
                    e.dispose(a).expect("dispose");
                    continue;
                }
                let t = Instant::now();
                let a = e.prefill_with(&whole_spec, style).await.expect("whole");
                whole_ms += t.elapsed().as_secs_f64() * 1e3;
                let t = Instant::now();
                let b = e.prefill_on(p, d).await.expect("on the prefix");
                on_ms += t.elapsed().as_secs_f64() * 1e3;
                whole_tokens += e.head_tokens(a).expect("tokens");
                if i < 5 {
                    let da = e.score(a, &criterion, &so).await.expect("score");
                    let db = e.score(b, &criterion, &so).await.expect("score");
                    for (x, y) in da.p().iter().zip(db.p()) {
                        max_dp = max_dp.max((x - y).abs());
                    }
                }
                e.dispose(a).expect("dispose");
                e.dispose(b).expect("dispose");
                if i % 20 == 19 {
                    eprintln!(
                        "[shared-prefix] {runtime:?}: {} states, whole {whole_ms:.0} ms, on the prefix {on_ms:.0} ms",
                        i + 1
                    );
                }
            }
            e.dispose_prefix(p).expect("dispose prefix");
        });
        if let Some(path) = &profile {
            eprintln!(
                "[shared-prefix] profile {path}: {states} states of {} tokens, {whole_ms:.0} ms",
                whole_tokens / states.max(1)
            );
            return;
        }
        let speedup = whole_ms / on_ms;
        eprintln!(
            "[shared-prefix] {runtime:?}: {states} states of {} tokens on a {prefix_len}-token prefix: whole {whole_ms:.0} ms, on the prefix {on_ms:.0} ms (its own prefill included): {speedup:.2}x; max |Δp| {max_dp:.1e}",
            whole_tokens / states
        );
        results.push(json!({
            "runtime": format!("{runtime:?}").to_lowercase(),
            "states": states, "prefix_tokens": prefix_len, "mean_state_tokens": whole_tokens as f64 / states as f64,
            "whole_ms": whole_ms, "on_prefix_ms": on_ms, "speedup": speedup,
            "ideal_speedup": whole_tokens as f64 / (prefix_len as f64 + (whole_tokens - states * prefix_len) as f64),
            "max_abs_dp_first_5_states": max_dp,
        }));
    }
    let doc = json!({
        "what": format!("states sharing an instruction, prefilled whole against built on one shared prefix (whose prefill is counted once), {} in one run; goal: ≥ 2.5x", if order == "blocks" { "every state whole, then every state on the prefix," } else { "alternating by state" }),
        "order": order,
        "model": dir.display().to_string(),
        "threads": threads,
        "results": results,
    });
    if let Some(out) = out {
        common::write_result("native-shared-prefix", &out, doc, "shared_prefix");
    }
}
