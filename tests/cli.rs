//! The `readout` binary end to end on the tiny model.

mod common;

use std::process::Command;

use common::*;

fn readout() -> Command {
    Command::new(env!("CARGO_BIN_EXE_readout"))
}

/// Runs `cmd` and asserts it succeeded, showing its stderr if not.
fn succeed(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn score_with_check_matches_the_uncached_forward() {
    let dir = temp_dir("cli-score");
    let state = &fixture()[0];
    let path = dir.join("state.json");
    std::fs::write(&path, serde_json::to_string(state).unwrap()).unwrap();
    let t0 = std::time::Instant::now();
    let v = score_json(&model_path(Q4), &path, &["--check"]);
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    let decisions = v["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), state.criteria.len());
    // Each decision's ms is its own scoring time: together within the
    // command's wall time (a unit slip, seconds or microseconds, fails).
    let scored_ms: f64 = decisions.iter().map(|d| d["ms"].as_f64().unwrap()).sum();
    assert!(
        scored_ms > 0.0 && scored_ms < wall_ms,
        "{scored_ms} ms scored in {wall_ms} ms"
    );
    for (d, c) in decisions.iter().zip(&state.criteria) {
        assert_eq!(d["id"], c.id.as_str());
        assert_eq!(d["probs"].as_array().unwrap().len(), c.options.len());
        let sum: f64 = d["probs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["p"].as_f64().unwrap())
            .sum();
        assert!((sum - 1.0).abs() < 1e-9);
        assert!(d["allowed_mass"].as_f64().is_some());
    }
    assert!(
        v["check"]["max_abs_dp"].as_f64().unwrap() <= 1e-5,
        "{}",
        v["check"]
    );
    assert_eq!(v["check"]["argmax_changed"].as_array().unwrap().len(), 0);
}

#[test]
fn evaluate_writes_a_report_with_every_metric() {
    let dir = temp_dir("cli-eval");
    let fixture_path = first_states(&dir.join("small.jsonl"), 3);
    let report = dir.join("report.json");
    let t0 = std::time::Instant::now();
    let out = succeed(
        readout()
            .args(["--threads", "2", "evaluate"])
            .arg(&fixture_path)
            .arg("--model")
            .arg(model_path(Q4))
            .args(["--debias", "cyclic", "--out"])
            .arg(&report),
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("overall") && table.contains("mean family balanced accuracy"),
        "{table}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let n: usize = fixture().iter().take(3).map(|s| s.criteria.len()).sum();
    assert_eq!(v["criteria"], n);
    assert_eq!(v["rows"].as_array().unwrap().len(), n);
    let overall = &v["report"]["overall"];
    for k in [
        "accuracy",
        "balanced_accuracy",
        "ece",
        "brier",
        "nll",
        "order_unstable",
    ] {
        assert!(overall[k].is_number(), "{k} missing from {overall}");
    }
    // The report's times: scoring within its own total, the total within the
    // command's wall time.
    let wall_s = t0.elapsed().as_secs_f64();
    let seconds = v["seconds"].as_f64().unwrap();
    assert!(
        seconds > 0.0 && seconds < wall_s,
        "{seconds} s of {wall_s} s"
    );
    assert_eq!(v["options"]["debias"], "cyclic");
    assert_eq!(v["options"]["mode"], "letters");
    assert_eq!(v["prompt"], "plain");
    let per = v["ms_per_criterion"].as_f64().unwrap();
    assert!(
        per > 0.0 && per * n as f64 <= seconds * 1e3,
        "{per} ms × {n} criteria in {seconds} s"
    );
    let picked: f64 = v["report"]["positions"]["picked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .sum();
    assert!((picked - 1.0).abs() < 1e-9, "{picked}");
    assert!(v["rows"][0]["decision"]["order_unstable"].is_boolean());
    assert_eq!(v["rows"][0]["decision"]["readout"]["mode"], "letters");

    // Cloze with calibration: every criterion's baseline computed once, and
    // the decisions say what ran.
    succeed(
        readout()
            .args(["--threads", "2", "evaluate"])
            .arg(&fixture_path)
            .arg("--model")
            .arg(model_path(Q4))
            .args(["--mode", "cloze", "--calibration", "content-free", "--out"])
            .arg(&report),
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v["baselines_computed"], n);
    assert_eq!(
        v["rows"][0]["decision"]["readout"]["calibration"],
        "content-free"
    );

    // A misspelt mode is refused by the flag parser, naming what it takes.
    let out = readout()
        .args(["evaluate"])
        .arg(&fixture_path)
        .arg("--model")
        .arg(model_path(Q4))
        .args(["--mode", "clozee"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--mode") && err.contains("clozee") && err.contains("letters"),
        "{err}"
    );
}

#[test]
fn bad_state_file_and_missing_model_fail_with_a_named_error() {
    let dir = temp_dir("cli-bad");
    let path = dir.join("state.json");
    std::fs::write(&path, r#"{"id":"s","evidence":"e","criteria":[{"id":"c","question":"Q?","options":[{"id":"a","description":"x"}]}]}"#).unwrap();
    let out = readout()
        .args(["score", "--model"])
        .arg(model_path(Q4))
        .arg("--state")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at least 2"), "{err}");
    let good = dir.join("good.json");
    std::fs::write(&good, serde_json::to_string(&fixture()[0]).unwrap()).unwrap();
    let out = readout()
        .args(["score", "--model"])
        .arg(dir.join("nowhere"))
        .arg("--state")
        .arg(&good)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nowhere"));
}

/// Runs `readout <args>`, asserts it fails, and returns its stderr.
fn fails(args: &[&std::ffi::OsStr]) -> String {
    let t0 = std::time::Instant::now();
    let out = readout().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    // Every refusal here comes before a model is loaded or a thread started.
    assert!(
        t0.elapsed().as_secs() < 20,
        "{args:?} took {:?}",
        t0.elapsed()
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

/// The fixture's first `n` states as JSONL at `path`, which it returns.
fn first_states(path: &std::path::Path, n: usize) -> std::path::PathBuf {
    let lines: Vec<String> = fixture()
        .iter()
        .take(n)
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
    std::fs::write(path, lines.join("\n")).unwrap();
    path.to_path_buf()
}

/// The example state, pretty-printed as in examples/state.json.
fn pretty_state() -> String {
    std::fs::read_to_string(root().join("examples/state.json")).unwrap()
}

#[test]
fn a_pretty_printed_state_reports_its_real_error_with_line_and_column() {
    let dir = temp_dir("cli-pretty");
    let path = dir.join("state.json");
    // A wrong type on the line of the "refund" criterion's question.
    let text = pretty_state().replace(
        "\"question\": \"Does the customer ask for a refund?\"",
        "\"question\": 42",
    );
    let line = text
        .lines()
        .position(|l| l.contains("\"question\": 42"))
        .unwrap()
        + 1;
    std::fs::write(&path, &text).unwrap();
    let err = fails(&[
        os("score"),
        os("--model"),
        os("nowhere"),
        os("--state"),
        path.as_os_str(),
    ]);
    assert!(
        err.contains(&format!("line {line} column")) && err.contains("invalid type: integer `42`"),
        "{err}"
    );
    assert!(!err.contains("EOF"), "{err}");
    // A missing field: serde's message, not JSONL's "line 1: EOF".
    let text = pretty_state().replacen("  \"evidence\":", "  \"evidenc\":", 1);
    std::fs::write(&path, &text).unwrap();
    let err = fails(&[
        os("score"),
        os("--model"),
        os("nowhere"),
        os("--state"),
        path.as_os_str(),
    ]);
    assert!(
        err.contains("unknown field \"evidenc\"; did you mean \"evidence\""),
        "{err}"
    );
    let text = pretty_state().replacen("\"answer\": \"billing\"", "\"answr\": \"billing\"", 1);
    std::fs::write(&path, &text).unwrap();
    let err = fails(&[
        os("score"),
        os("--model"),
        os("nowhere"),
        os("--state"),
        path.as_os_str(),
    ]);
    assert!(
        err.contains("criteria[0]: unknown field \"answr\"; did you mean \"answer\""),
        "{err}"
    );
}

#[test]
fn duplicate_or_empty_ids_and_empty_evidence_are_refused_by_name() {
    let dir = temp_dir("cli-ids");
    let path = dir.join("state.json");
    let cases = [
        (
            pretty_state().replace("\"id\": \"refund\"", "\"id\": \"team\""),
            "criterion id \"team\" appears more than once",
        ),
        (
            pretty_state().replace("\"id\": \"refund\"", "\"id\": \"\""),
            "criteria[1].id is empty",
        ),
        (
            pretty_state()
                .lines()
                .map(|l| {
                    if l.starts_with("  \"evidence\":") {
                        "  \"evidence\": \" \\n \","
                    } else {
                        l
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"),
            "evidence is empty",
        ),
    ];
    for (text, needle) in cases {
        std::fs::write(&path, &text).unwrap();
        let err = fails(&[
            os("score"),
            os("--model"),
            os("nowhere"),
            os("--state"),
            path.as_os_str(),
        ]);
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
}

#[test]
fn threads_are_bounded_and_the_error_gives_the_bound() {
    let max = std::thread::available_parallelism().unwrap().get() * 4;
    for n in ["9999", "0"] {
        let err = fails(&[
            os("--threads"),
            os(n),
            os("info"),
            os("--model"),
            os("nowhere"),
        ]);
        assert!(
            err.contains(&format!("--threads {n}: must be 1 to {max}")),
            "{err}"
        );
    }
}

#[test]
fn score_refuses_a_multi_state_file_unless_given_an_index() {
    let dir = temp_dir("cli-multi");
    let path = first_states(&dir.join("states.jsonl"), 3);
    let err = fails(&[
        os("score"),
        os("--model"),
        os("nowhere"),
        os("--state"),
        path.as_os_str(),
    ]);
    assert!(
        err.contains("holds 3 states; pass --index N (0 to 2)"),
        "{err}"
    );
    let err = fails(&[
        os("score"),
        os("--model"),
        os("nowhere"),
        os("--state"),
        path.as_os_str(),
        os("--index"),
        os("3"),
    ]);
    assert!(
        err.contains("--index 3") && err.contains("holds 3 states"),
        "{err}"
    );
    // With an index in range the state is taken and the model is what fails.
    let err = fails(&[
        os("score"),
        os("--model"),
        os("nowhere"),
        os("--state"),
        path.as_os_str(),
        os("--index"),
        os("2"),
    ]);
    assert!(err.contains("nowhere"), "{err}");
}

#[test]
fn evaluate_refuses_a_fixture_without_answers_and_an_unwritable_out_before_running() {
    let dir = temp_dir("cli-eval-refusals");
    let fixture_path = dir.join("small.jsonl");
    let mut states: Vec<_> = fixture().into_iter().take(2).collect();
    let with_answers: Vec<String> = states
        .iter()
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
    std::fs::write(&fixture_path, with_answers.join("\n")).unwrap();
    // --out under a file: refused before the model is even looked at.
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, b"x").unwrap();
    let out = blocker.join("report.json");
    let err = fails(&[
        os("evaluate"),
        fixture_path.as_os_str(),
        os("--model"),
        os("nowhere"),
        os("--out"),
        out.as_os_str(),
    ]);
    assert!(
        err.contains("--out") && err.contains("checked before the run"),
        "{err}"
    );
    let err = fails(&[
        os("evaluate"),
        fixture_path.as_os_str(),
        os("--model"),
        os("nowhere"),
        os("--out"),
        dir.as_os_str(),
    ]);
    assert!(err.contains("is a directory"), "{err}");
    assert_eq!(std::fs::read(&blocker).unwrap(), b"x");

    for s in &mut states {
        for c in &mut s.criteria {
            c.answer = None;
        }
    }
    let lines: Vec<String> = states
        .iter()
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
    std::fs::write(&fixture_path, lines.join("\n")).unwrap();
    let err = fails(&[
        os("evaluate"),
        fixture_path.as_os_str(),
        os("--model"),
        os("nowhere"),
        os("--out"),
        dir.join("r.json").as_os_str(),
    ]);
    assert!(err.contains("no criterion has an answer"), "{err}");
}

#[test]
fn prune_refuses_fewer_than_two_letters_naming_the_count() {
    let dir = temp_dir("cli-letters");
    let out = dir.join("pruned");
    for (letters, needle) in [
        ("A", "\"A\": 1 letters; a pruned head must keep 2 to 20"),
        ("ABCDEFGHIJKLMNOPQRSTA", "21 letters"),
        ("ABA", "'A' is not one of"),
        ("AZ", "'Z' is not one of"),
    ] {
        let err = fails(&[
            os("prune"),
            os("nowhere"),
            os("--letters"),
            os(letters),
            os("-o"),
            out.as_os_str(),
        ]);
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    assert!(!out.exists());
}

/// Runs `readout score` on `model` with `extra` flags; its JSON.
fn score_json(
    model: &std::path::Path,
    state: &std::path::Path,
    extra: &[&str],
) -> serde_json::Value {
    let out = succeed(
        readout()
            .args(["--threads", "2", "score", "--model"])
            .arg(model)
            .arg("--state")
            .arg(state)
            .args(extra),
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn probs(v: &serde_json::Value) -> Vec<f64> {
    v["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["probs"].as_array().unwrap().iter())
        .map(|p| p["p"].as_f64().unwrap())
        .collect()
}

/// With no readout flag the CLI serves what the browser serves: the model's
/// models.json entry (named as `models.json#id`, or found beside the model's
/// folder), else the rule (letters, plain prompt). It says which applied and
/// where from; each flag overrides one field.
#[test]
fn without_flags_the_cli_takes_the_catalog_entry_or_the_rule_as_the_browser_does() {
    let dir = temp_dir("cli-defaults");
    let state = &fixture()[0];
    let state_path = dir.join("state.json");
    std::fs::write(&state_path, serde_json::to_string(state).unwrap()).unwrap();
    let models = dir.join("models");
    copy_model(Q4, &models.join(Q4));

    // No catalog anywhere near: the rule.
    let bare = score_json(&models.join(Q4), &state_path, &[]);
    assert_eq!(bare["readout_defaults"]["mode"], "letters");
    assert_eq!(bare["readout_defaults"]["calibration"], "none");
    assert!(
        bare["readout_defaults_from"]
            .as_str()
            .unwrap()
            .starts_with("the rule"),
        "{}",
        bare["readout_defaults_from"]
    );
    for d in bare["decisions"].as_array().unwrap() {
        assert_eq!(d["readout"]["mode"], "letters");
    }

    // A catalog beside `models/` whose entry names cloze with content-free
    // calibration, as bench/runners/decisions.sh does for a real model.
    write_catalog(&models, &dir.join("models.json"));
    let mut cat: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("models.json")).unwrap()).unwrap();
    let entry = common::entry_mut(&mut cat, Q4);
    entry["readout"] = serde_json::json!({"mode": "cloze", "cloze_score": "sum", "calibration": "content-free", "prompt": "plain"});
    std::fs::write(dir.join("models.json"), cat.to_string()).unwrap();

    let by_id = format!("{}#{Q4}", dir.join("models.json").display());
    let explicit = [
        "--mode",
        "cloze",
        "--cloze-score",
        "sum",
        "--calibration",
        "content-free",
        "--prompt",
        "plain",
    ];
    let flagged = score_json(&models.join(Q4), &state_path, &explicit);
    for model in [std::path::PathBuf::from(&by_id), models.join(Q4)] {
        let v = score_json(&model, &state_path, &[]);
        assert_eq!(
            v["readout_defaults"]["mode"],
            "cloze",
            "{}",
            model.display()
        );
        assert_eq!(v["readout_defaults"]["calibration"], "content-free");
        assert_eq!(
            v["readout_defaults_from"],
            format!("models.json entry {Q4}")
        );
        for d in v["decisions"].as_array().unwrap() {
            assert_eq!(d["readout"]["mode"], "cloze");
            assert_eq!(d["readout"]["calibration"], "content-free");
        }
        // The defaults are exactly the flags they stand for.
        assert_eq!(probs(&v), probs(&flagged), "{}", model.display());
    }
    // One flag overrides one field; the rest stay the entry's.
    let letters = score_json(&models.join(Q4), &state_path, &["--mode", "letters"]);
    for d in letters["decisions"].as_array().unwrap() {
        assert_eq!(d["readout"]["mode"], "letters");
        assert_eq!(d["readout"]["calibration"], "content-free");
    }
    // `info` reports the same.
    let out = succeed(readout().args(["info", "--model"]).arg(models.join(Q4)));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["readout_defaults"]["mode"], "cloze");
    assert_eq!(
        info["readout_defaults_from"],
        format!("models.json entry {Q4}")
    );
}

/// The defaults' catalog, when it is wrong: an id it does not hold is refused
/// by name, listing the ids it has; an unreadable `models.json` beside a model
/// folder only ever supplied defaults, so the rule applies and the model scores.
#[test]
fn a_missing_entry_is_named_and_an_unreadable_catalog_beside_a_model_leaves_the_rule() {
    let dir = temp_dir("cli-defaults-bad");
    let state_path = dir.join("state.json");
    std::fs::write(&state_path, serde_json::to_string(&fixture()[0]).unwrap()).unwrap();
    let models = dir.join("models");
    copy_model(Q4, &models.join(Q4));
    write_catalog(&models, &dir.join("models.json"));
    let out = readout()
        .args(["score", "--model"])
        .arg(format!("{}#nope", dir.join("models.json").display()))
        .arg("--state")
        .arg(&state_path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope") && err.contains(Q4), "{err}");

    std::fs::write(dir.join("models.json"), "{ not json").unwrap();
    let v = score_json(&models.join(Q4), &state_path, &[]);
    assert!(
        v["readout_defaults_from"]
            .as_str()
            .unwrap()
            .starts_with("the rule"),
        "{}",
        v["readout_defaults_from"]
    );
    assert_eq!(
        v["decisions"].as_array().unwrap().len(),
        fixture()[0].criteria.len()
    );
}

/// `readout catalog --decisions FILE`: a named summary's best readout
/// becomes its model's default; a file that is missing or is not a
/// decisions summary is refused by name, and nothing is written.
#[test]
fn the_catalog_takes_its_defaults_from_the_decisions_files_it_is_given() {
    let dir = temp_dir("cli-catalog-decisions");
    let models = dir.join("models");
    copy_model(Q4, &models.join(Q4));
    let summary = dir.join("summary.json");
    std::fs::write(
        &summary,
        serde_json::json!({"model": Q4, "best": {"mode": "cloze", "cloze_score": "mean", "calibration": "none", "prompt": "plain"}}).to_string(),
    )
    .unwrap();
    let out = dir.join("models.json");
    succeed(
        readout()
            .args(["catalog", "--models"])
            .arg(&models)
            .arg("-o")
            .arg(&out)
            .arg("--decisions")
            .arg(&summary),
    );
    let mut cat: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        common::entry_mut(&mut cat, Q4)["readout"]["cloze_score"],
        "mean"
    );
    std::fs::remove_file(&out).unwrap();
    for (bad, needle) in [
        (dir.join("absent.json"), "absent.json"),
        (
            models.join(Q4).join("config.json"),
            "not a decisions summary",
        ),
    ] {
        let r = readout()
            .args(["catalog", "--models"])
            .arg(&models)
            .arg("-o")
            .arg(&out)
            .arg("--decisions")
            .arg(&bad)
            .output()
            .unwrap();
        assert!(!r.status.success());
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(err.contains(needle), "{err}");
        assert!(!out.exists(), "a refused catalog was written");
    }
}

/// `readout catalog` over `models`, written to `out`.
fn write_catalog(models: &std::path::Path, out: &std::path::Path) {
    succeed(
        readout()
            .args(["catalog", "--models"])
            .arg(models)
            .arg("-o")
            .arg(out),
    );
}

/// `--prefix`: a state built on a shared prefix scores as the same state
/// prefilled whole (no examples: the same text), says the prefix's tokens,
/// and takes worked examples; `evaluate` takes the same prefix as its
/// fixture's first line. A prefix file over the JSON limit is refused from
/// its size.
#[test]
fn score_and_evaluate_take_a_shared_prefix() {
    let dir = temp_dir("cli-prefix");
    let state = &fixture()[0];
    let path = dir.join("state.json");
    std::fs::write(&path, serde_json::to_string(state).unwrap()).unwrap();
    let plain = dir.join("plain.json");
    std::fs::write(&plain, "{}").unwrap();
    let whole = score_json(&model_path(Q4), &path, &["--runtime", "own"]);
    let on = score_json(
        &model_path(Q4),
        &path,
        &["--runtime", "own", "--prefix", plain.to_str().unwrap()],
    );
    assert_eq!(probs(&on), probs(&whole));
    assert_eq!(on["head_tokens"], whole["head_tokens"]);
    let p = on["prefix_tokens"].as_u64().unwrap();
    assert!(p > 10 && p < whole["head_tokens"].as_u64().unwrap(), "{p}");
    let with_examples = serde_json::json!({
        "instruction": "Judge the evidence.",
        "examples": [{
            "evidence": "The invoice of 3 May was paid twice.",
            "criterion": {"id": "ex", "question": "Was it paid twice?",
                          "options": [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]},
            "answer": "yes"
        }]
    });
    let ex = dir.join("examples.json");
    std::fs::write(&ex, with_examples.to_string()).unwrap();
    let v = score_json(
        &model_path(Q4),
        &path,
        &["--prefix", ex.to_str().unwrap(), "--check"],
    );
    assert!(v["prefix_tokens"].as_u64().unwrap() > p);
    assert!(
        v["check"]["max_abs_dp"].as_f64().unwrap() <= 1e-5,
        "{}",
        v["check"]
    );
    // evaluate: the prefix as the fixture's first line.
    let fx = dir.join("fixture.jsonl");
    let lines: Vec<String> = fixture()
        .iter()
        .take(2)
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
    std::fs::write(
        &fx,
        format!(
            "{}\n{}\n",
            serde_json::json!({ "prefix": with_examples }),
            lines.join("\n")
        ),
    )
    .unwrap();
    let report = dir.join("report.json");
    succeed(
        readout()
            .args(["--threads", "2", "evaluate"])
            .arg(&fx)
            .arg("--model")
            .arg(model_path(Q4))
            .arg("--out")
            .arg(&report),
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["prefix"]["examples"].as_array().unwrap().len(), 1);
    assert_eq!(r["states"], 2);
    // A 17 MiB prefix file: refused from its size, named with its limit.
    let big = dir.join("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(17 << 20).unwrap();
    let err = fails(&[
        os("score"),
        os("--model"),
        model_path(Q4).as_os_str(),
        os("--state"),
        path.as_os_str(),
        os("--prefix"),
        big.as_os_str(),
    ]);
    assert!(err.contains("16777216"), "{err}");
}
