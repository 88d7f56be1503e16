//! The engine against an independent reference: Python `tokenizers` and the
//! PyPI onnxruntime (another release), with the prompt contract implemented
//! again in `modelgen/reference_score.py`. The test command installs the venv.

mod common;

use std::process::Command;

use common::*;
use readout::ReadoutRequest;

#[test]
fn engine_matches_python_onnxruntime_on_the_fixture() {
    let python = root().join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} missing: run scripts/setup.sh --python",
        python.display()
    );
    let dir = temp_dir("python-ref");
    // float32 activations agree to rounding (3e-8 measured), which pins the
    // tokenisation, the prompt and the readout; float16 kernels differ
    // between ONNX Runtime 1.30 and the PyPI release (3.8e-3 measured).
    for (model, tol) in [(Q4, 1e-6), (Q4F16, 1e-2)] {
        let mut e = engine(model);
        let mut worst: f64 = 0.0;
        for (k, s) in fixture().iter().take(3).enumerate() {
            let mut s = s.clone();
            s.instruction =
                Some("Answer each criterion about the evidence with one letter.".into());
            let path = dir.join(format!("{model}-{k}.json"));
            std::fs::write(&path, serde_json::to_string(&s).unwrap()).unwrap();
            let out = Command::new(&python)
                .arg(root().join("modelgen/reference_score.py"))
                .arg(model_path(model))
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let reference: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let decisions = block_on(async {
                let id = e.prefill(&s).await.unwrap();
                let d = e
                    .score_all(id, &s.criteria, &ReadoutRequest::default())
                    .await
                    .unwrap();
                e.dispose(id).unwrap();
                d
            });
            for (d, r) in decisions.iter().zip(reference.as_array().unwrap()) {
                assert_eq!(d.id, r["id"].as_str().unwrap());
                let rp: Vec<f64> = r["probs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .collect();
                for (a, b) in d.p().iter().zip(&rp) {
                    worst = worst.max((a - b).abs());
                }
                let best = rp
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .unwrap()
                    .0;
                assert_eq!(
                    d.letter,
                    readout::core::text::prompt::letter(best).to_string(),
                    "{model} {}: argmax differs",
                    d.id
                );
            }
        }
        eprintln!("{model}: engine vs Python onnxruntime max |Δp| = {worst:e}");
        assert!(
            worst <= tol,
            "{model}: engine and the Python reference differ by {worst:e} (> {tol:e})"
        );
    }
}
