//! The `readout` binary end to end on the tiny model.

mod common;

use std::process::Command;

use common::*;

fn readout() -> Command {
    Command::new(env!("CARGO_BIN_EXE_readout"))
}

#[test]
fn score_with_check_matches_the_uncached_forward() {
    let dir = temp_dir("cli-score");
    let state = &fixture()[0];
    let path = dir.join("state.json");
    std::fs::write(&path, serde_json::to_string(state).unwrap()).unwrap();
    let out = readout()
        .args(["--threads", "2", "score", "--check", "--model"])
        .arg(model_path(Q4))
        .arg("--state")
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let decisions = v["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), state.criteria.len());
    for (d, c) in decisions.iter().zip(&state.criteria) {
        assert_eq!(d["id"], c.id.as_str());
        assert_eq!(d["probs"].as_array().unwrap().len(), c.options.len());
        let sum: f64 = d["probs"].as_array().unwrap().iter().map(|p| p["p"].as_f64().unwrap()).sum();
        assert!((sum - 1.0).abs() < 1e-9);
        assert!(d["allowed_mass"].as_f64().is_some());
        assert!(d["ms"].as_f64().unwrap() >= 0.0);
    }
    assert!(v["check"]["max_abs_dp"].as_f64().unwrap() <= 1e-5, "{}", v["check"]);
    assert_eq!(v["check"]["argmax_changed"].as_array().unwrap().len(), 0);
}

#[test]
fn evaluate_writes_a_report_with_every_metric() {
    let dir = temp_dir("cli-eval");
    let fixture_path = dir.join("small.jsonl");
    let lines: Vec<String> = fixture().iter().take(3).map(|s| serde_json::to_string(s).unwrap()).collect();
    std::fs::write(&fixture_path, lines.join("\n")).unwrap();
    let report = dir.join("report.json");
    let out = readout()
        .args(["--threads", "2", "evaluate"])
        .arg(&fixture_path)
        .arg("--model")
        .arg(model_path(Q4))
        .args(["--debias", "cyclic", "--out"])
        .arg(&report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("overall") && table.contains("mean family balanced accuracy"), "{table}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let n: usize = fixture().iter().take(3).map(|s| s.criteria.len()).sum();
    assert_eq!(v["criteria"], n);
    assert_eq!(v["rows"].as_array().unwrap().len(), n);
    let overall = &v["report"]["overall"];
    for k in ["accuracy", "balanced_accuracy", "ece", "brier", "nll", "order_unstable"] {
        assert!(overall[k].is_number(), "{k} missing from {overall}");
    }
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(v["debias"], "cyclic");
    assert!(v["rows"][0]["decision"]["order_unstable"].is_boolean());
}

#[test]
fn bad_state_file_and_missing_model_fail_with_a_named_error() {
    let dir = temp_dir("cli-bad");
    let path = dir.join("state.json");
    std::fs::write(&path, r#"{"id":"s","evidence":"e","criteria":[{"id":"c","question":"Q?","options":[{"id":"a","description":"x"}]}]}"#).unwrap();
    let out = readout().args(["score", "--model"]).arg(model_path(Q4)).arg("--state").arg(&path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at least 2"), "{err}");
    let good = dir.join("good.json");
    std::fs::write(&good, serde_json::to_string(&fixture()[0]).unwrap()).unwrap();
    let out = readout().args(["score", "--model"]).arg(dir.join("nowhere")).arg("--state").arg(&good).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nowhere"));
}
