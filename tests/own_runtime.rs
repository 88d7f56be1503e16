//! Our own runtime (`runtime::own`) against ONNX Runtime on the same files:
//! the float32 reference path within 1e-4 in probability, the int8 kernels
//! within 5e-3, a cached prefix equal to one uncached forward, and the
//! graphs it cannot compute refused by name.

mod common;

use common::*;
use pollster::block_on;
use readout::core::read::logits::Logits;
use readout::engine::convention::{derive, Convention};
use readout::runtime::native::NativeRuntime;
use readout::runtime::own::{load_file, OwnOptions, OwnRuntime};
use readout::KernelError;
use readout::Precision;

use readout::RuntimeKind;
use readout::{Runtime, RuntimeError};
use std::path::Path;

fn own(dir: &Path, precision: Precision) -> OwnRuntime {
    load_file(
        &dir.join("model.onnx"),
        &OwnOptions {
            threads: 2,
            precision,
            pack: true,
        },
        kv_dims(dir),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

fn ort(dir: &Path) -> NativeRuntime {
    NativeRuntime::load(&dir.join("model.onnx"), &opts(), kv_dims(dir)).unwrap()
}

fn softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let e: Vec<f64> = row.iter().map(|&x| (x as f64 - max).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|x| x / s).collect()
}

/// max |Δp| over every row's full softmax, and how many rows' argmax differ.
fn compare(a: &Logits, b: &Logits) -> (f64, usize) {
    assert_eq!(a.dims, b.dims);
    let mut worst = 0f64;
    let mut flips = 0;
    for r in 0..a.dims[1] {
        let (pa, pb) = (softmax(&a.row_f32(r)), softmax(&b.row_f32(r)));
        let arg = |p: &[f64]| (0..p.len()).max_by(|&i, &j| p[i].total_cmp(&p[j])).unwrap();
        if arg(&pa) != arg(&pb) {
            flips += 1;
        }
        for (x, y) in pa.iter().zip(&pb) {
            worst = worst.max((x - y).abs());
        }
    }
    (worst, flips)
}

fn ids(dir: &Path, text: &str) -> Vec<u32> {
    let t = std::fs::read_to_string(dir.join("tokenizer.json")).unwrap();
    readout::core::text::tokenizer::TextTokenizer::from_json(t.as_bytes())
        .unwrap()
        .encode(text)
        .unwrap()
}

const TEXT: &str = "Evidence: the customer asked for a refund of 240 dollars on the annual plan, \
and the agent said it would be processed within five days. Question: was a refund promised?";

fn uncached<R: Runtime>(rt: &mut R, ids: &[u32]) -> Logits {
    let step = derive(Convention::MaskPastAndSuffix, rt.signature(), 0, ids);
    block_on(rt.run(&step, None, false)).unwrap().logits
}

/// ONNX Runtime's own margin (top1 − top2 probability) at each row.
fn margins(l: &Logits) -> Vec<f64> {
    (0..l.dims[1])
        .map(|r| {
            let mut p = softmax(&l.row_f32(r));
            p.sort_by(|a, b| b.total_cmp(a));
            p[0] - p[1]
        })
        .collect()
}

/// Rows whose argmax differs between `a` and the reference `b`.
fn flipped_rows(a: &Logits, b: &Logits) -> Vec<usize> {
    let arg = |l: &Logits, r: usize| {
        let row = l.row_f32(r);
        (0..row.len())
            .max_by(|&i, &j| row[i].total_cmp(&row[j]))
            .unwrap()
    };
    (0..a.dims[1]).filter(|&r| arg(a, r) != arg(b, r)).collect()
}

/// The bar: the reference within 1e-4 of ONNX Runtime, the int8
/// kernels within 5e-3 (over a full vocabulary), and an argmax change only
/// where ONNX Runtime's own margin is below 0.01.
fn agrees_with_onnx_runtime(dir: &Path) {
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let t = ids(dir, TEXT);
    let want = uncached(&mut ort(dir), &t);
    let m = margins(&want);
    // A pruned head keeps only the letters: its softmax is over a few
    // columns, the options' renormalised probabilities, where the int8
    // kernels' error shows unshrunk by the vocabulary's mass; those get the
    // bound the engine's option probabilities get (2e-2, as in the fixture
    // comparison below).
    let int8_bound = if want.dims[2] <= 64 { 2e-2 } else { 5e-3 };
    for (precision, bound) in [(Precision::F32, 1e-4), (Precision::Int8, int8_bound)] {
        let got = uncached(&mut own(dir, precision), &t);
        let (dp, flips) = compare(&got, &want);
        let rows = flipped_rows(&got, &want);
        println!(
            "{id} {precision:?}: max|Δp| {dp:.3e} over {} rows, {flips} argmax changes (ONNX Runtime margins there: {:?})",
            want.dims[1],
            rows.iter().map(|&r| format!("{:.1e}", m[r])).collect::<Vec<_>>()
        );
        assert!(
            dp <= bound,
            "{id} {precision:?}: max|Δp| {dp:e} > {bound:e}"
        );
        for r in rows {
            assert!(
                m[r] < 0.01,
                "{id} {precision:?}: argmax changed at row {r} where the margin is {}",
                m[r]
            );
        }
    }
}

#[test]
fn the_tiny_models_agree_with_onnx_runtime() {
    let tmp = temp_dir("own-cuts");
    let [trimmed, pruned] = cuts(&tmp);
    for dir in [model_path(Q4), model_path(Q4F16), trimmed, pruned] {
        agrees_with_onnx_runtime(&dir);
    }
}

/// Gemma 3's graph: gelu-tanh MLP, scaled embedding, q/k norms, two rotary
/// bases, and sliding-window layers whose window (8) the text exceeds many
/// times over, so a wrong window shows in every row after the eighth.
#[test]
fn tiny_gemma3_with_sliding_windows_agrees_with_onnx_runtime() {
    for id in [GEMMA_Q4, GEMMA_Q4F16] {
        let dir = model_path(id);
        assert!(
            ids(&dir, TEXT).len() > 4 * 8,
            "the text must exceed the window"
        );
        agrees_with_onnx_runtime(&dir);
    }
}

/// On SmolLM2 the reference agrees with ONNX Runtime's float32 path to
/// 1e-4; the int8 kernels are held to twice the distance of ONNX Runtime's
/// own int8 path (the file as built) from the same float32 (measured in the
/// same run: both are approximations of it, neither is the truth).
#[test]
fn smollm2_agrees_with_onnx_runtime_in_float32() {
    real_model_agrees_with_onnx_runtime_in_float32("smollm2-135m-instruct-q4");
}

/// Gemma 3 270M (where built): the same bars on a second family, whose
/// activations are large enough that ONNX Runtime's own int8 path moves
/// its probabilities by a few hundredths.
#[test]
fn gemma3_agrees_with_onnx_runtime_in_float32() {
    real_model_agrees_with_onnx_runtime_in_float32("gemma3-270m-q4");
}

fn real_model_agrees_with_onnx_runtime_in_float32(id: &str) {
    let Some(src) = built_model(id) else { return };
    let tmp = float32_copy(&src);
    let graph = tmp.join("model.onnx");
    let dims = kv_dims(&src);
    let t = ids(&src, TEXT);
    let want = uncached(&mut NativeRuntime::load(&graph, &opts(), dims).unwrap(), &t);
    let m = margins(&want);
    let (ort_dp, ort_flips) = compare(&uncached(&mut ort(&src), &t), &want);
    println!("{id}: ONNX Runtime's int8 path (level 4) against its float32 (level 1): max|Δp| {ort_dp:.3e}, {ort_flips} argmax changes");
    for precision in [Precision::F32, Precision::Int8] {
        let mut rt = load_file(
            &graph,
            &OwnOptions {
                threads: 2,
                precision,
                pack: true,
            },
            dims,
        )
        .unwrap();
        let got = uncached(&mut rt, &t);
        let (dp, flips) = compare(&got, &want);
        let rows = flipped_rows(&got, &want);
        println!(
            "{id} against level 1, ours {precision:?}: max|Δp| {dp:.3e} over {} rows, {flips} argmax changes (margins there: {:?})",
            want.dims[1],
            rows.iter().map(|&r| format!("{:.1e}", m[r])).collect::<Vec<_>>()
        );
        match precision {
            Precision::F32 => {
                assert!(dp <= 1e-4, "reference: max|Δp| {dp:e}");
                assert_eq!(flips, 0);
            }
            Precision::Int8 => assert!(
                dp <= 2.0 * ort_dp,
                "int8: max|Δp| {dp:e} against ONNX Runtime's own {ort_dp:e}"
            ),
        }
    }
}

/// A prefix extended, then the suffix run on its past, equals one uncached
/// forward of the whole: rows are computed one by one and keys and values
/// are the same numbers either way, so the match is exact.
#[test]
fn a_cached_prefix_equals_one_uncached_forward() {
    // Gemma's sliding window must drop the same keys from a past as from
    // the rows of one forward.
    for (model, precision) in [
        (Q4, Precision::F32),
        (Q4, Precision::Int8),
        (GEMMA_Q4, Precision::F32),
        (GEMMA_Q4, Precision::Int8),
    ] {
        let mut rt = own(&model_path(model), precision);
        let t = ids(&model_path(model), TEXT);
        let (head, tail) = t.split_at(t.len() / 2);
        let sig = rt.signature().clone();
        let past = block_on(rt.extend(&derive(Convention::MaskPastAndSuffix, &sig, 0, head), None))
            .unwrap();
        assert_eq!(rt.kv_len(&past), head.len());
        let step = derive(Convention::MaskPastAndSuffix, &sig, head.len(), tail);
        let cached = block_on(rt.run(&step, Some(&past), false)).unwrap().logits;
        let whole = uncached(&mut rt, &t);
        let v = whole.dims[2];
        for r in 0..tail.len() {
            let a = cached.row_f32(r);
            let b = whole.row_f32(head.len() + r);
            let d = a
                .iter()
                .zip(&b)
                .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            assert_eq!(
                d, 0.0,
                "{model} {precision:?}: row {r} of {v} logits differs by {d}"
            );
        }
        // The past is not changed by a run after it.
        let again = block_on(rt.run(&step, Some(&past), false)).unwrap().logits;
        assert_eq!(again, cached);
    }
}

/// How many fixture states a test scores: all of them with
/// READOUT_FULL_FIXTURE=1 (what the docs' numbers come from), else enough
/// to cover every family in CI's time.
fn fixture_states() -> usize {
    if std::env::var_os("READOUT_FULL_FIXTURE").is_some() {
        usize::MAX
    } else {
        3
    }
}

/// The engine on our runtime passes its load-time proofs unchanged and
/// scores the authored fixture like the engine on ONNX Runtime: the
/// reference to 1e-4 with no decision changed; the int8 kernels within
/// twice ONNX Runtime's own int8 distance (SmolLM2), and on the random tiny
/// model a decision changes only where the margin is below 0.01.
#[test]
fn the_engine_on_our_runtime_scores_the_authored_fixture_like_onnx_runtime() {
    let states = fixture_states();
    let tiny = model_path(Q4);
    let mut ort_tiny = host(&tiny, RuntimeKind::Ort, Precision::F32);
    for precision in [Precision::F32, Precision::Int8] {
        let mut e = host(&tiny, RuntimeKind::Own, precision);
        assert!(
            e.info().runtime.starts_with("readout kernels"),
            "{}",
            e.info().runtime
        );
        let d = fixture_diff(&mut e, &mut ort_tiny, states);
        println!("{Q4} {precision:?}: {} criteria, max|Δp| {:.3e}, {} decisions changed ({} where the margin < 0.01)", d.criteria, d.max_dp, d.changed, d.close);
        let bound = if precision == Precision::F32 {
            1e-4
        } else {
            2e-2
        };
        assert!(d.max_dp <= bound, "{precision:?}: {:e}", d.max_dp);
        assert_eq!(d.changed, d.close);
    }
    let id = "smollm2-135m-instruct-q4";
    let Some(src) = built_model(id) else { return };
    let level1 = float32_copy(&src);
    let mut truth = host(&level1, RuntimeKind::Ort, Precision::F32);
    let mut as_built = host(&src, RuntimeKind::Ort, Precision::F32);
    let o = fixture_diff(&mut as_built, &mut truth, states);
    println!("{id}: ONNX Runtime int8 (as built) against its float32: {} criteria, max|Δp| {:.3e}, {} decisions changed", o.criteria, o.max_dp, o.changed);
    for precision in [Precision::F32, Precision::Int8] {
        let mut e = host(&level1, RuntimeKind::Own, precision);
        let d = fixture_diff(&mut e, &mut truth, states);
        println!("{id} ours {precision:?} against ONNX Runtime float32: {} criteria, max|Δp| {:.3e}, {} decisions changed ({} where the margin < 0.01)", d.criteria, d.max_dp, d.changed, d.close);
        match precision {
            Precision::F32 => {
                assert!(d.max_dp <= 1e-4, "{:e}", d.max_dp);
                assert_eq!(d.changed, 0);
            }
            Precision::Int8 => assert!(
                d.max_dp <= 2.0 * o.max_dp.max(1e-3),
                "{:e} against {:e}",
                d.max_dp,
                o.max_dp
            ),
        }
    }
}

fn load_err(graph: &[u8], dir: &std::path::Path, limit: u64) -> KernelError {
    let data = std::fs::read(dir.join("model.onnx.data")).unwrap();
    let ext = |loc: &str| (loc == "model.onnx.data").then_some(data.as_slice());
    match readout::runtime::own::interp::Program::load(graph, &ext, limit) {
        Ok(_) => panic!("loaded"),
        Err(e) => e,
    }
}

#[test]
fn graphs_it_cannot_compute_are_refused_by_name() {
    use prost::Message;
    use readout::onnx_pb::ModelProto;
    // A float32 graph: named as such, with the way out.
    let fp32 = model_path("qwen3-tiny-random-fp32");
    let err = load_file(&fp32.join("model.onnx"), &OwnOptions::default(), [2, 16])
        .err()
        .expect("refused");
    let text = err.to_string();
    assert!(text.contains("MatMul") && text.contains("q4"), "{text}");
    match &err {
        RuntimeError::Kernels(KernelError::Unsupported { node, op, .. }) => {
            assert_eq!(op, "MatMul");
            assert!(!node.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.info().code, "graph_unsupported");

    // An operator it does not know, and an attribute value it does not compute.
    let dir = model_path(Q4);
    let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
    let mut m = ModelProto::decode(bytes.as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    let i = g
        .node
        .iter()
        .position(|n| n.op_type.as_deref() == Some("Sigmoid"))
        .unwrap();
    g.node[i].op_type = Some("Tanh".into());
    let name = g.node[i].name.clone().unwrap();
    match load_err(&m.encode_to_vec(), &dir, u64::MAX) {
        KernelError::Unsupported { node, op, reason } => {
            assert_eq!((node.as_str(), op.as_str()), (name.as_str(), "Tanh"));
            assert!(reason.contains("Tanh"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // The first attention node changed by `f`, the graph re-encoded.
    let with_gqa = |f: &dyn Fn(&mut readout::onnx_pb::NodeProto)| {
        let mut m = ModelProto::decode(bytes.as_slice()).unwrap();
        let g = m.graph.as_mut().unwrap();
        f(g.node
            .iter_mut()
            .find(|n| n.op_type.as_deref() == Some("GroupQueryAttention"))
            .unwrap());
        m.encode_to_vec()
    };
    // (A local window is computed since Gemma 3; interleaved rotary is not.)
    let interleaved = with_gqa(&|gqa| {
        gqa.attribute
            .iter_mut()
            .find(|a| a.name.as_deref() == Some("rotary_interleaved"))
            .unwrap()
            .i = Some(1)
    });
    match load_err(&interleaved, &dir, u64::MAX) {
        KernelError::Unsupported { reason, .. } => {
            assert!(reason.contains("rotary_interleaved = 1"), "{reason}")
        }
        other => panic!("{other:?}"),
    }

    // A sliding layer whose past is a window-sized ring buffer (what the
    // builder makes for its CPU target unless told otherwise): named.
    let ring = with_gqa(&|gqa| {
        gqa.attribute.push(readout::onnx_pb::AttributeProto {
            name: Some("sliding_window_cache".into()),
            i: Some(1),
            ..Default::default()
        })
    });
    match load_err(&ring, &dir, u64::MAX) {
        KernelError::Unsupported { reason, .. } => {
            assert!(reason.contains("sliding_window_cache"), "{reason}")
        }
        other => panic!("{other:?}"),
    }

    // Gemma's activation: Gelu with approximate = "tanh" is computed; the
    // exact (erf) form is a different function and is refused by name.
    let gemma = model_path(GEMMA_Q4);
    let gbytes = std::fs::read(gemma.join("model.onnx")).unwrap();
    let mut m = ModelProto::decode(gbytes.as_slice()).unwrap();
    let gelu = m
        .graph
        .as_mut()
        .unwrap()
        .node
        .iter_mut()
        .find(|n| n.op_type.as_deref() == Some("Gelu"))
        .unwrap();
    let gelu_name = gelu.name.clone().unwrap();
    gelu.attribute
        .iter_mut()
        .find(|a| a.name.as_deref() == Some("approximate"))
        .unwrap()
        .s = Some(b"none".to_vec());
    match load_err(&m.encode_to_vec(), &gemma, u64::MAX) {
        KernelError::Unsupported { node, op, reason } => {
            assert_eq!((node.as_str(), op.as_str()), (gelu_name.as_str(), "Gelu"));
            assert!(reason.contains("approximate = \"none\""), "{reason}");
        }
        other => panic!("{other:?}"),
    }

    // Too large for the build: refused before a weight is copied, with the sizes.
    match load_err(&bytes, &dir, 1 << 20) {
        e @ KernelError::TooLarge { needed, limit, .. } => {
            assert!(needed > limit && limit == 1 << 20);
            assert_eq!(e.info().code, "model_too_large");
        }
        other => panic!("{other:?}"),
    }

    // Files a load could not hold: refused from their sizes alone (the
    // browser checks before copying them into wasm memory).
    let per = readout::runtime::own::LOAD_BYTES_PER_FILE_BYTE;
    let limit = per << 20;
    assert!(readout::runtime::own::check_files_fit(1 << 20, limit).is_ok());
    match readout::runtime::own::check_files_fit((1 << 20) + 1, limit) {
        Err(readout::RuntimeError::Kernels(
            e @ KernelError::TooLarge {
                needed, limit: l, ..
            },
        )) => {
            assert_eq!((needed, l), (per * ((1 << 20) + 1), limit));
            assert_eq!(e.info().code, "model_too_large");
            assert!(e.to_string().contains("to load"), "{e}");
        }
        other => panic!("{other:?}"),
    }

    // Truncated external data: the initializer and the file's length are named.
    let data = std::fs::read(dir.join("model.onnx.data")).unwrap();
    let short = &data[..data.len() / 2];
    let ext = |loc: &str| (loc == "model.onnx.data").then_some(short);
    match readout::runtime::own::interp::Program::load(&bytes, &ext, u64::MAX) {
        Err(KernelError::Initializer { name, reason }) => {
            assert!(!name.is_empty());
            assert!(reason.contains("truncated"), "{reason}");
        }
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("loaded a truncated file"),
    }
    // Not ONNX at all.
    assert!(matches!(
        load_err(b"not a model", &dir, u64::MAX),
        KernelError::Decode(_)
    ));
}

/// A run the graph refuses (a mask with padding) leaves the runtime usable.
#[test]
fn a_refused_run_leaves_the_runtime_usable() {
    let mut rt = own(&model_path(Q4), Precision::Int8);
    let t = ids(&model_path(Q4), TEXT);
    let sig = rt.signature().clone();
    let mut step = derive(Convention::MaskPastAndSuffix, &sig, 0, &t);
    let good = block_on(rt.run(&step, None, false)).unwrap().logits;
    if let Some(m) = step.attention_mask.as_mut() {
        m[0] = 0;
    }
    let err = block_on(rt.run(&step, None, false))
        .err()
        .expect("padding refused");
    assert!(err.to_string().contains("padding"), "{err}");
    let mut bad = derive(Convention::MaskPastAndSuffix, &sig, 0, &t);
    bad.input_ids[0] = 10_000_000;
    let err = block_on(rt.run(&bad, None, false))
        .err()
        .expect("id refused");
    assert!(err.to_string().contains("outside the vocabulary"), "{err}");
    let step = derive(Convention::MaskPastAndSuffix, &sig, 0, &t);
    assert_eq!(block_on(rt.run(&step, None, false)).unwrap().logits, good);
}
