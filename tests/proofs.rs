//! The load-time proof refuses when no candidate convention agrees (a faulty
//! runtime) and when more than one does (an ambiguous graph).

mod common;

use common::*;
use readout::core::logits::LogitsData;
use readout::engine::{Engine, ModelAssets};
use readout::export::graph::OnnxModel;
use readout::export::onnx_pb::{dtype, Dimension, TensorShapeProto, TypeProto, TypeTensor, ValueInfoProto};
use readout::model_dir::{open_engine, ModelDir};
use readout::runtime::native::{NativeKv, NativeRuntime};
use readout::runtime::{RunOutput, Runtime, RuntimeError, Signature, Step};

/// A device fault: every run against a past returns its logits shifted per column.
struct Faulty(NativeRuntime);

impl Runtime for Faulty {
    type Kv = NativeKv;
    fn signature(&self) -> &Signature {
        self.0.signature()
    }
    async fn run(&mut self, step: &Step, past: Option<&NativeKv>, keep: bool) -> Result<RunOutput<NativeKv>, RuntimeError> {
        let mut out = self.0.run(step, past, keep).await?;
        if past.is_some() {
            if let LogitsData::F32(v) = &mut out.logits.data {
                for (i, x) in v.iter_mut().enumerate() {
                    *x += (i % 7) as f32 * 0.05;
                }
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
    fn bytes_read_back(&self) -> u64 {
        self.0.bytes_read_back()
    }
    fn now_ms(&self) -> f64 {
        self.0.now_ms()
    }
    fn describe(&self) -> String {
        "faulty".into()
    }
}

#[test]
fn no_agreeing_convention_is_refused_with_the_measured_differences() {
    let dir = ModelDir::open(&model_path(Q4)).unwrap();
    let assets: ModelAssets = dir.assets().unwrap();
    let rt = Faulty(NativeRuntime::load(&dir.graph, &opts(), [2, 16]).unwrap());
    let err = match block_on(Engine::new(rt, assets)) {
        Ok(_) => panic!("a runtime whose cached runs are wrong must be refused"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("0 of 2 position conventions agree"), "{err}");
    assert!(err.contains("MaskPastAndSuffix: max|Δp|") && err.contains("MaskSuffixOnly: max|Δp|"), "{err}");
    // The same graph on a sound runtime loads.
    open_engine(&model_path(Q4), &opts()).unwrap();
}

#[test]
fn a_graph_where_both_position_conventions_agree_is_refused() {
    // A position_ids input nothing reads: both candidates run the same
    // arithmetic, so the graph cannot tell which convention it follows.
    let base = temp_dir("ambiguous");
    let mut m = OnnxModel::load(&model_path(Q4).join("model.onnx")).unwrap();
    let dim = |p: &str| Dimension { dim_param: Some(p.into()), dim_value: None, denotation: None };
    m.graph_mut().input.push(ValueInfoProto {
        name: Some("position_ids".into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeTensor {
                elem_type: Some(dtype::INT64),
                shape: Some(TensorShapeProto { dim: vec![dim("batch_size"), dim("sequence_length")] }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    m.save(&base, "model.onnx").unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(model_path(Q4).join(f), base.join(f)).unwrap();
    }
    let err = open_engine(&base, &opts()).err().expect("an ambiguous graph must be refused").to_string();
    assert!(err.contains("2 of 2 position conventions agree"), "{err}");
    assert!(err.contains("PositionsFromPast: max|Δp| 0") && err.contains("PositionsFromPastMinusOne: max|Δp| 0"), "{err}");
    let _ = std::fs::remove_dir_all(&base);
}
