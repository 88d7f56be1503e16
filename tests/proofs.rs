//! The load-time proof refuses when no candidate convention agrees (a faulty
//! runtime) and when more than one does (an ambiguous graph), and finds the
//! longest exact run length on a runtime that faults on long runs.

mod common;

use common::*;
use readout::core::read::logits::LogitsData;
use readout::runtime::native::{NativeKv, NativeRuntime};
use readout::runtime::{KvImage, KvView, RunOutput, Runtime, RuntimeError, Signature, Step};
use readout::surgery::graph::OnnxModel;
use readout::surgery::onnx_pb::{
    dtype, Dimension, TensorShapeProto, TypeProto, TypeTensor, ValueInfoProto,
};
use readout::{open_engine, ModelDir};
use readout::{Engine, ModelAssets, ReadoutRequest};

/// The fault a runtime shows.
#[derive(Clone, Copy)]
enum Fault {
    /// Every run against a past is off, by an amount that depends on the
    /// past's length (so no chunking makes two paths agree).
    CachedRuns,
    /// Runs feeding this many new tokens or more are off (what onnxruntime-web
    /// on SwiftShader was measured to do at 32).
    LongRuns(usize),
    /// Every logit of every run is 0 (what Hugging Face's float16 SmolLM2
    /// gave on WebGPU, its norms overflowing).
    ZeroLogits,
}

struct Faulty(NativeRuntime, Fault);

impl Runtime for Faulty {
    type Kv = NativeKv;
    fn signature(&self) -> &Signature {
        self.0.signature()
    }
    async fn run(
        &mut self,
        step: &Step,
        past: Option<&NativeKv>,
        keep: bool,
    ) -> Result<RunOutput<NativeKv>, RuntimeError> {
        let past_len = past.map_or(0, |p| self.0.kv_len(p));
        let mut out = self.0.run(step, past, keep).await?;
        let shift = match self.1 {
            Fault::CachedRuns if past.is_some() => Some(past_len),
            Fault::LongRuns(n) if step.input_ids.len() >= n => Some(1),
            _ => None,
        };
        if let (Fault::ZeroLogits, LogitsData::F32(v)) = (self.1, &mut out.logits.data) {
            v.fill(0.0);
        }
        if let (Some(k), LogitsData::F32(v)) = (shift, &mut out.logits.data) {
            // A hash of (past length, index): no two paths share their error.
            for (i, x) in v.iter_mut().enumerate() {
                let h = ((k as u64) << 32 ^ i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59;
                *x += h as f32 * 0.02;
            }
        }
        Ok(out)
    }
    fn kv_len(&self, kv: &NativeKv) -> usize {
        self.0.kv_len(kv)
    }
    fn release(&mut self, kv: NativeKv) {
        self.0.release(kv)
    }
    async fn export_kv(&mut self, kv: &NativeKv) -> Result<KvImage, RuntimeError> {
        self.0.export_kv(kv).await
    }
    async fn import_kv(&mut self, view: &KvView<'_>) -> Result<NativeKv, RuntimeError> {
        self.0.import_kv(view).await
    }
    fn meter(&self) -> &readout::runtime::Meter {
        self.0.meter()
    }
    fn describe(&self) -> String {
        "faulty".into()
    }
}

#[test]
fn no_agreeing_convention_is_refused_with_the_measured_differences() {
    let dir = ModelDir::open(&model_path(Q4)).unwrap();
    let assets: ModelAssets = dir.assets().unwrap();
    let rt = Faulty(
        NativeRuntime::load(&dir.graph, &opts(), [2, 16]).unwrap(),
        Fault::CachedRuns,
    );
    let err = match block_on(Engine::new(rt, assets)) {
        Ok(e) => panic!(
            "a runtime whose cached runs are wrong must be refused: {:?}",
            e.proof()
        ),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("0 of 2 position conventions agree"), "{err}");
    assert!(
        err.contains("MaskPastAndSuffix: max|Δp|") && err.contains("MaskSuffixOnly: max|Δp|"),
        "{err}"
    );
    assert!(
        err.contains("Shorter runs did not help: 64 tokens per run: 0 agree"),
        "{err}"
    );
    // The same graph on a sound runtime loads.
    open_engine(&model_path(Q4), &opts()).unwrap();
}

#[test]
fn a_graph_that_computes_nothing_is_refused_as_such_not_as_ambiguous() {
    // All-zero logits make every convention agree with the uncached
    // forward exactly; the refusal must name the constant logits instead.
    let dir = ModelDir::open(&model_path(Q4)).unwrap();
    let rt = Faulty(
        NativeRuntime::load(&dir.graph, &opts(), [2, 16]).unwrap(),
        Fault::ZeroLogits,
    );
    let err = match block_on(Engine::new(rt, dir.assets().unwrap())) {
        Ok(e) => panic!("all-zero logits must be refused: {:?}", e.proof()),
        Err(e) => e,
    };
    assert_eq!(err.info().code, "proof");
    let msg = err.to_string();
    assert!(
        msg.contains("probe logits are all 0: the graph computes nothing on this device"),
        "{msg}"
    );
    assert!(!msg.contains("position conventions agree"), "{msg}");
    // The same graph on a sound runtime loads.
    open_engine(&model_path(Q4), &opts()).unwrap();
}

#[test]
fn a_runtime_that_faults_on_long_runs_is_run_in_chunks_and_stays_exact() {
    let dir = ModelDir::open(&model_path(Q4)).unwrap();
    let rt = Faulty(
        NativeRuntime::load(&dir.graph, &opts(), [2, 16]).unwrap(),
        Fault::LongRuns(32),
    );
    let mut faulty = block_on(Engine::new(rt, dir.assets().unwrap()))
        .expect("a long-run fault is worked around, not refused");
    let report = faulty.proof().clone();
    assert_eq!(report.run_limit, 31, "{:?}", report.run_limit_trials);
    let tried: Vec<usize> = report.run_limit_trials.iter().map(|t| t.tokens).collect();
    assert_eq!(
        &tried[..3],
        &[217, 64, 32],
        "whole probe, then the ladder: {tried:?}"
    );
    assert!(
        report
            .run_limit_trials
            .iter()
            .all(|t| (t.tokens < 32) == (t.agreeing == 1)),
        "{:?}",
        report.run_limit_trials
    );
    // Decisions on the faulty runtime (prefill and suffixes chunked at 31)
    // equal a sound runtime's on the fixture's first states.
    let mut sound = open_engine(&model_path(Q4), &opts()).unwrap();
    assert_eq!(sound.proof().run_limit, 217);
    let so = ReadoutRequest::default();
    let mut worst: f64 = 0.0;
    for s in fixture().iter().take(3) {
        let (a, b) = (
            block_on(faulty.prefill(s)).unwrap(),
            block_on(sound.prefill(s)).unwrap(),
        );
        assert!(
            faulty.head_tokens(a).unwrap() > 31,
            "the state must be longer than one chunk"
        );
        for c in &s.criteria {
            let (x, y) = (
                block_on(faulty.score(a, c, &so)).unwrap(),
                block_on(sound.score(b, c, &so)).unwrap(),
            );
            assert_eq!(x.answer, y.answer, "{}", c.id);
            for (p, q) in x.p().iter().zip(y.p()) {
                worst = worst.max((p - q).abs());
            }
        }
    }
    assert!(
        worst <= 1e-5,
        "chunked decisions drift {worst:e} from whole runs"
    );
}

#[test]
fn a_graph_where_both_position_conventions_agree_is_refused() {
    // A position_ids input nothing reads: both candidates run the same
    // arithmetic, so the graph cannot tell which convention it follows.
    let base = temp_dir("ambiguous");
    let mut m = OnnxModel::load(&model_path(Q4).join("model.onnx")).unwrap();
    let dim = |p: &str| Dimension {
        dim_param: Some(p.into()),
        dim_value: None,
        denotation: None,
    };
    m.graph_mut().input.push(ValueInfoProto {
        name: Some("position_ids".into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeTensor {
                elem_type: Some(dtype::INT64),
                shape: Some(TensorShapeProto {
                    dim: vec![dim("batch_size"), dim("sequence_length")],
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    m.save(&base, "model.onnx").unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(model_path(Q4).join(f), base.join(f)).unwrap();
    }
    let err = open_engine(&base, &opts())
        .err()
        .expect("an ambiguous graph must be refused")
        .to_string();
    assert!(err.contains("2 of 2 position conventions agree"), "{err}");
    assert!(
        err.contains("PositionsFromPast: max|Δp| 0")
            && err.contains("PositionsFromPastMinusOne: max|Δp| 0"),
        "{err}"
    );
}
