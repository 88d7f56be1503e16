//! One pass for every branch of a state on our own runtime: packed branches
//! against the same branches run one by one on the same runtime (letters,
//! cyclic debias with content-free baselines, cloze; stock, trimmed and
//! pruned graphs), the isolation of a branch from the others, and the
//! refusals of a malformed branch set.

mod common;

use common::*;
use readout::core::read::logits::Logits;
use readout::engine::convention::{derive, Convention};
use readout::runtime::own::{load_file, OwnOptions, OwnRuntime};
use readout::runtime::{Branch, Runtime, RuntimeError};
use readout::Debias;
use readout::Decision;
use readout::Precision;
use readout::ReadoutRequest;
use readout::{open_host_engine, HostEngine, HostOptions, RuntimeKind};
use readout::{Calibration, Mode, PromptStyle};
use std::path::Path;

fn engine(dir: &Path, precision: Precision, pack: bool) -> HostEngine {
    open_host_engine(
        dir,
        &HostOptions {
            runtime: RuntimeKind::Own,
            threads: 2,
            precision,
            pack,
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// What a readout mode asks: the head style and the score options.
fn modes(stock: bool) -> Vec<(&'static str, ReadoutRequest, ReadoutRequest)> {
    let plain = |mode| ReadoutRequest {
        prompt: Some(PromptStyle::Plain),
        mode: Some(mode),
        ..ReadoutRequest::default()
    };
    let mut m = vec![
        ("letters", plain(Mode::Letters), ReadoutRequest::default()),
        (
            "letters cyclic content-free",
            plain(Mode::Letters),
            ReadoutRequest {
                debias: Some(Debias::Cyclic),
                calibration: Some(Calibration::ContentFree),
                ..ReadoutRequest::default()
            },
        ),
    ];
    if stock {
        m.push((
            "cloze content-free",
            plain(Mode::Cloze),
            ReadoutRequest {
                mode: Some(Mode::Cloze),
                calibration: Some(Calibration::ContentFree),
                ..ReadoutRequest::default()
            },
        ));
    }
    m
}

#[derive(Default, Debug)]
struct Diff {
    decisions: usize,
    max_dp: f64,
    changed: usize,
}

fn compare(a: &[Decision], b: &[Decision], d: &mut Diff) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        d.decisions += 1;
        for (p, q) in x.probs.iter().zip(&y.probs) {
            d.max_dp = d.max_dp.max((p.p - q.p).abs());
        }
        d.changed += usize::from(x.answer != y.answer);
    }
}

/// Forwards our runtime has run since the engine's load.
fn forwards(e: &HostEngine) -> u64 {
    e.runtime().own().expect("our runtime").info().forwards
}

/// Every fixture state (the first `fixture_states()`) under every mode, on
/// an engine that packs and one that runs each branch alone.
fn packed_vs_separate(dir: &Path, precision: Precision, stock: bool) -> Diff {
    let mut packed = engine(dir, precision, true);
    let mut serial = engine(dir, precision, false);
    assert!(
        packed.pack_budget().is_some(),
        "{}: no packing",
        dir.display()
    );
    assert!(serial.pack_budget().is_none());
    let mut d = Diff::default();
    for (name, style, opts) in modes(stock) {
        let before = d.decisions;
        for state in fixture().into_iter().take(fixture_states()) {
            let a = block_on(packed.prefill_with(&state, &style)).unwrap();
            let b = block_on(serial.prefill_with(&state, &style)).unwrap();
            let da = block_on(packed.score_all(a, &state.criteria, &opts)).unwrap();
            let db = block_on(serial.score_all(b, &state.criteria, &opts)).unwrap();
            compare(&da, &db, &mut d);
            packed.dispose(a).unwrap();
            serial.dispose(b).unwrap();
        }
        assert!(d.decisions > before, "{name}: nothing scored");
    }
    let (fp, fs) = (forwards(&packed), forwards(&serial));
    println!(
        "{} {precision:?}: packed against separate, {} decisions, max|Δp| {:.3e}, {} changed; {fp} forwards against {fs}",
        dir.display(),
        d.decisions,
        d.max_dp,
        d.changed
    );
    // The loads' proofs run the same forwards on both; packing saves the rest.
    assert!(fp < fs, "packing ran {fp} forwards, the serial path {fs}");
    d
}

/// All of the fixture with READOUT_FULL_FIXTURE=1, else 3 states (every
/// family, in CI's time).
fn fixture_states() -> usize {
    if std::env::var_os("READOUT_FULL_FIXTURE").is_some() {
        usize::MAX
    } else {
        3
    }
}

fn assert_equal(d: &Diff) {
    assert!(d.max_dp <= 1e-5, "max|Δp| {:e}", d.max_dp);
    assert_eq!(d.changed, 0);
}

#[test]
fn packed_branches_equal_separate_runs_on_the_tiny_models() {
    // Gemma's sliding window: a packed row must drop the past's and its
    // own branch's keys exactly as its separate run does.
    for id in [Q4, Q4F16, GEMMA_Q4] {
        for precision in [Precision::F32, Precision::Int8] {
            assert_equal(&packed_vs_separate(&model_path(id), precision, true));
        }
    }
    // The trimmed head reads its rows through the last-position slice; the
    // pruned one through the same slice into a four-row head.
    let tmp = temp_dir("own-pack-cuts");
    for cut in cuts(&tmp) {
        for precision in [Precision::F32, Precision::Int8] {
            assert_equal(&packed_vs_separate(&cut, precision, false));
        }
    }
}

#[test]
fn smollm2_packed_equals_separate() {
    for id in ["smollm2-135m-instruct-q4f16", "smollm2-135m-instruct-q4"] {
        let Some(dir) = built_model(id) else { continue };
        // Attention is float32 on either precision; the int8 products are
        // the ones the engine runs (the scalar reference would take an
        // hour here, and packing does not touch the products).
        assert_equal(&packed_vs_separate(&dir, Precision::Int8, true));
    }
}

/// More branches than one pass holds: split into passes, never refused,
/// and the same decisions as one run each.
#[test]
fn a_branch_set_over_the_budget_is_split_into_passes() {
    let dir = model_path(Q4);
    let mut packed = engine(&dir, Precision::F32, true);
    let mut serial = engine(&dir, Precision::F32, false);
    let budget = packed.pack_budget().unwrap();
    let options = ["alpha", "beta", "gamma", "delta"];
    let criteria: Vec<_> = (0..40)
        .map(|i| {
            criterion(
                &format!("c{i}"),
                &format!("Is claim number {i} supported by the evidence?"),
                &options,
            )
        })
        .collect();
    let state = state("The shipment left the warehouse on Monday and arrived on Thursday.");
    let opts = ReadoutRequest {
        debias: Some(Debias::Cyclic),
        ..ReadoutRequest::default()
    };
    let a = block_on(packed.prefill(&state)).unwrap();
    let b = block_on(serial.prefill(&state)).unwrap();
    let da = block_on(packed.score_all(a, &criteria, &opts)).unwrap();
    let db = block_on(serial.score_all(b, &criteria, &opts)).unwrap();
    let mut d = Diff::default();
    compare(&da, &db, &mut d);
    // 40 criteria × 4 rotations: more rows than a pass holds.
    assert!(40 * 4 > budget.rows, "{budget:?}");
    println!(
        "160 branches over a budget of {budget:?}: max|Δp| {:.3e}",
        d.max_dp
    );
    assert_equal(&d);
}

fn own(dir: &Path) -> OwnRuntime {
    load_file(
        &dir.join("model.onnx"),
        &OwnOptions {
            threads: 2,
            precision: Precision::F32,
            pack: true,
        },
        kv_dims(dir),
    )
    .unwrap()
}

/// A past of `ids` on `rt`.
fn past(rt: &mut OwnRuntime, ids: &[u32]) -> <OwnRuntime as Runtime>::Kv {
    let step = derive(Convention::MaskPastAndSuffix, rt.signature(), 0, ids);
    block_on(rt.extend(&step, None)).unwrap()
}

fn bits(l: &Logits) -> Vec<u32> {
    l.to_f32_vec().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn changing_one_branch_leaves_every_other_bit_identical() {
    let dir = model_path(Q4);
    let mut rt = own(&dir);
    let kv = past(&mut rt, &[11, 12, 13, 14, 15, 16, 17]);
    let (a, c) = (vec![21, 22, 23], vec![41, 42, 43, 44, 45]);
    let rows_all = |n: usize| (0..n).collect::<Vec<_>>();
    let run = |rt: &mut OwnRuntime, b: &[u32]| {
        let (ra, rb, rc) = (rows_all(a.len()), rows_all(b.len()), rows_all(c.len()));
        block_on(rt.run_branches(
            &kv,
            &[
                Branch { ids: &a, rows: &ra },
                Branch { ids: b, rows: &rb },
                Branch { ids: &c, rows: &rc },
            ],
        ))
        .unwrap()
    };
    let first = run(&mut rt, &[31, 32, 33, 34]);
    let second = run(&mut rt, &[35, 36]);
    assert_eq!(bits(&first[0]), bits(&second[0]));
    assert_eq!(bits(&first[2]), bits(&second[2]));
    assert_ne!(bits(&first[1]), bits(&second[1]));
    // And each branch equals its own run after the same past.
    for (ids, got) in [(&a, &first[0]), (&c, &first[2])] {
        let step = derive(
            Convention::MaskPastAndSuffix,
            rt.signature(),
            rt.kv_len(&kv),
            ids,
        );
        let alone = block_on(rt.run(&step, Some(&kv), false)).unwrap().logits;
        assert_eq!(alone.dims, got.dims);
        let worst = alone
            .to_f32_vec()
            .iter()
            .zip(got.to_f32_vec())
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-5, "a branch alone against packed: {worst:e}");
    }
    // The past is unchanged by the passes.
    assert_eq!(rt.kv_len(&kv), 7);
    rt.release(kv);
}

#[test]
fn a_malformed_branch_set_is_refused_by_name_and_the_runtime_stays_usable() {
    let dir = model_path(Q4);
    let mut rt = own(&dir);
    let kv = past(&mut rt, &[11, 12, 13]);
    let one = [0usize];
    let e = block_on(rt.run_branches(
        &kv,
        &[
            Branch {
                ids: &[5, 6],
                rows: &one,
            },
            Branch {
                ids: &[],
                rows: &[],
            },
        ],
    ))
    .expect_err("an empty branch is refused");
    assert!(matches!(e, RuntimeError::EmptyBranch { branch: 1 }), "{e}");
    assert_eq!(e.info().code, "empty_branch");
    let e = block_on(rt.run_branches(
        &kv,
        &[Branch {
            ids: &[5, 6],
            rows: &[2],
        }],
    ))
    .expect_err("a row outside its branch is refused");
    assert!(
        matches!(
            e,
            RuntimeError::BranchRow {
                branch: 0,
                row: 2,
                len: 2
            }
        ),
        "{e}"
    );
    assert_eq!(e.info().code, "branch_row");
    let e = block_on(rt.run_branches(
        &kv,
        &[Branch {
            ids: &[5, 6],
            rows: &[1, 0],
        }],
    ))
    .expect_err("rows out of order are refused");
    assert!(matches!(e, RuntimeError::BranchRow { row: 0, .. }), "{e}");
    // Still usable: a good set runs, and an empty set is no work.
    let out = block_on(rt.run_branches(
        &kv,
        &[Branch {
            ids: &[5, 6],
            rows: &one,
        }],
    ))
    .unwrap();
    assert_eq!(out[0].dims[..2], [1, 1]);
    assert!(block_on(rt.run_branches(&kv, &[])).unwrap().is_empty());
    rt.release(kv);
}
