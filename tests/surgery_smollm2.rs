//! prune and expose-hidden on the real SmolLM2-135M q4 and q4f16 graphs,
//! whose int4 head (accuracy_level 4: int8 activations) is where fixed
//! tolerances set on the tiny models failed: pruning to 2 or 3 letters moved
//! logits by 9.5e-7 against an allowed 0, and the exposed hidden state
//! missed the logits by 0.11 against an allowed 0.05.
//!
//! The models are built by `scripts/main.sh` (`build_models.py smollm2`),
//! not by the test command; where they are absent this test says so and
//! passes without running.

mod common;

use common::*;
use readout::surgery::commands::{run, Op};

const MODELS: [&str; 2] = ["smollm2-135m-instruct-q4", "smollm2-135m-instruct-q4f16"];

#[test]
fn prune_at_2_3_4_and_20_letters_and_expose_hidden_verify_on_smollm2() {
    let base = temp_dir("smollm2");
    for id in MODELS {
        let dir = root().join("models").join(id);
        if !dir.join("model.onnx").is_file() {
            eprintln!(
                "SKIPPED {id}: {} is not built (bash scripts/main.sh builds it)",
                dir.display()
            );
            continue;
        }
        for letters in ["AB", "ABC", "ABCD", "ABCDEFGHIJKLMNOPQRST"] {
            let out = base.join(format!("{id}-pruned-{}", letters.len()));
            let r = run(
                &dir,
                &out,
                &Op::Prune {
                    letters: letters.into(),
                    tokenizer: None,
                },
            )
            .unwrap_or_else(|e| panic!("{id} prune {letters}: {e}"));
            let v = &r.verification;
            eprintln!(
                "{id} prune {:>2} letters: max |Δ| {:e}, allowed {:e} ({} values)",
                letters.len(),
                v.max_abs_diff,
                v.allowed_abs_diff,
                v.compared
            );
            assert!(v.max_abs_diff <= v.allowed_abs_diff);
            std::fs::remove_dir_all(&out).unwrap();
        }
        let out = base.join(format!("{id}-hidden"));
        let r = run(&dir, &out, &Op::ExposeHidden)
            .unwrap_or_else(|e| panic!("{id} expose-hidden: {e}"));
        let v = &r.verification;
        let (miss, allowed) = (v.hidden_max_abs_diff.unwrap(), v.hidden_allowed.unwrap());
        eprintln!(
            "{id} expose-hidden: last_hidden · rows misses by {miss:.3e}, allowed {allowed:.3e}"
        );
        assert!(miss <= allowed);
        let e = readout::open_engine(&out, &opts()).unwrap();
        eprintln!(
            "{id} expose-hidden: engine load-time extraction miss {:.3e}",
            e.proof().extraction_max_abs_diff.unwrap()
        );
        // Rows of other tokens are still refused under the derived bound.
        let path = out.join("head_rows.json");
        let mut hr = readout::core::model::head_rows::HeadRows::parse(
            &std::fs::read_to_string(&path).unwrap(),
        )
        .unwrap();
        hr.rows.rotate_left(1);
        std::fs::write(&path, serde_json::to_string(&hr).unwrap()).unwrap();
        drop(e);
        let err = readout::open_engine(&out, &opts())
            .err()
            .expect("wrong rows must be refused")
            .to_string();
        assert!(err.contains("misses the returned logits"), "{err}");
        std::fs::remove_dir_all(&out).unwrap();
    }
}
