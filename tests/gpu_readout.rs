//! The WGSL readout kernel (spec §8) under wgpu natively (Vulkan on
//! lavapipe here) against the CPU readSlots on the same logits.

mod common;

use common::*;
use half::f16;
use readout::core::read::logits::Logits;
use readout::core::read::slots::{from_gathered, read_slots, HeadColumns};
use readout::gpu::{request_device, GpuReadout};

fn gpu() -> GpuReadout {
    let (device, queue, info) = block_on(request_device())
        .unwrap_or_else(|e| panic!("{e}: the kernel tests need a Vulkan driver (scripts/setup.sh installs mesa-vulkan-drivers)"));
    eprintln!("adapter: {} ({:?})", info.name, info.backend);
    block_on(GpuReadout::new(device, queue)).unwrap()
}

/// Deterministic logits with a spread like a real head's.
fn synthetic(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) as f64 / (1u64 << 31) as f64 * 16.0 - 8.0) as f32
        })
        .collect()
}

fn bytes_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_f16(v: &[f16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// GPU and CPU agree on the letters' probabilities and allowed mass.
fn agree(g: &GpuReadout, logits: &Logits, head: HeadColumns, columns: &[u32]) {
    let bytes = match &logits.data {
        readout::core::read::logits::LogitsData::F32(v) => bytes_f32(v),
        readout::core::read::logits::LogitsData::F16(v) => bytes_f16(v),
    };
    let buf = g.upload(&bytes);
    let dims = [logits.dims[0], logits.dims[1], logits.dims[2]];
    let slots = block_on(g.read(&buf, dims, logits.is_f16(), columns)).unwrap();
    assert_eq!(slots.bytes_read_back, (columns.len() + 3) * 4);
    let cols: Vec<usize> = columns.iter().map(|&c| c as usize).collect();
    let cpu = read_slots(logits, &head, &cols, true).unwrap();
    assert_eq!(
        slots.logits, cpu.logits,
        "gathered logits are copied, not computed"
    );
    let full = matches!(head, HeadColumns::Vocab { .. });
    let gpu = from_gathered(slots.logits.clone(), full.then_some(slots.log_sum_exp));
    let dp = gpu
        .probs
        .iter()
        .zip(&cpu.probs)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(dp <= 1e-12, "probs differ by {dp:e}");
    if full {
        let (a, b) = (gpu.allowed_mass.unwrap(), cpu.allowed_mass.unwrap());
        assert!(((a - b) / b).abs() < 1e-5, "allowed_mass {a:e} vs {b:e}");
    }
}

#[test]
fn kernel_equals_cpu_readslots_on_synthetic_logits() {
    let g = gpu();
    let v = 151936;
    let letters: Vec<u32> = vec![
        362, 425, 356, 422, 468, 434, 479, 472, 358, 619, 730, 444, 386, 451, 506, 393, 1207, 431,
        328, 350,
    ];
    let data = synthetic(7 * v, 1);
    agree(
        &g,
        &Logits::f32(vec![1, 7, v], data.clone()),
        HeadColumns::Vocab { vocab: v },
        &letters[..4],
    );
    agree(
        &g,
        &Logits::f32(vec![1, 7, v], data),
        HeadColumns::Vocab { vocab: v },
        &letters,
    );
    // float16, an odd element count (padded to whole words), a smaller vocabulary.
    let w = 49153;
    let data: Vec<f16> = synthetic(3 * w, 2).into_iter().map(f16::from_f32).collect();
    agree(
        &g,
        &Logits::f16(vec![1, 3, w], data),
        HeadColumns::Vocab { vocab: w },
        &[330, 49152, 0, 7],
    );
    // A trimmed, pruned head: [1, 1, K].
    let data = synthetic(20, 3);
    agree(
        &g,
        &Logits::f32(vec![1, 1, 20], data),
        HeadColumns::Pruned { rows: 20 },
        &[0, 1, 2, 3, 4],
    );
}

#[test]
fn kernel_equals_cpu_readslots_on_real_model_logits() {
    use readout::engine::convention::{candidates, derive};
    use readout::Runtime;
    let g = gpu();
    for model in [Q4, Q4F16] {
        let e = engine(model);
        let letters: Vec<u32> = e.info().letters.letter_ids;
        let ids = e
            .tokenizer()
            .encode("Criterion: Which option?\nOptions:\nA. one\nB. two\nAnswer:")
            .unwrap();
        let mut rt = readout::runtime::native::NativeRuntime::load(
            &model_path(model).join("model.onnx"),
            &opts(),
            [2, 16],
        )
        .unwrap();
        let sig = rt.signature().clone();
        let logits = block_on(rt.run(&derive(candidates(&sig)[0], &sig, 0, &ids), None, false))
            .unwrap()
            .logits;
        assert_eq!(logits.is_f16(), model == Q4F16);
        agree(
            &g,
            &logits,
            HeadColumns::Vocab { vocab: 151936 },
            &letters[..6],
        );
    }
}

#[test]
fn kernel_refuses_non_finite_rows_and_bad_requests() {
    let g = gpu();
    let w = 1000;
    let mut data = synthetic(2 * w, 4);
    data[5] = f32::NAN; // row 0: not read
    let buf = g.upload(&bytes_f32(&data));
    block_on(g.read(&buf, [1, 2, w], false, &[1, 2])).unwrap();
    data[w + 999] = f32::INFINITY; // row 1, outside the letters
    let buf = g.upload(&bytes_f32(&data));
    let err = block_on(g.read(&buf, [1, 2, w], false, &[1, 2]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not finite"), "{err}");
    assert!(block_on(g.read(&buf, [1, 2, w], false, &[1000]))
        .unwrap_err()
        .to_string()
        .contains("outside"));
    assert!(block_on(g.read(&buf, [1, 3, w], false, &[1]))
        .unwrap_err()
        .to_string()
        .contains("need"));
    let many: Vec<u32> = (0..21).collect();
    assert!(block_on(g.read(&buf, [1, 2, w], false, &many))
        .unwrap_err()
        .to_string()
        .contains("1 to 20"));
    // Still usable afterwards.
    let ok = g.upload(&bytes_f32(&synthetic(w, 5)));
    block_on(g.read(&ok, [1, 1, w], false, &[1, 2])).unwrap();
}

/// The cloze gather: log p(token) at many rows of one tensor, in one
/// dispatch, against the CPU log-softmax of the same rows, both as row tasks
/// (logit, max, sum back) and folded on the GPU (one float back per pair);
/// and the scratch buffers are made once, not per call.
#[test]
fn row_tasks_equal_cpu_log_softmax_and_reuse_their_buffers() {
    use readout::core::read::cloze_math::row_log_prob;
    use readout::gpu::RowTask;
    let g = gpu();
    for f16 in [false, true] {
        let (s, w) = (9, 49153);
        let raw = synthetic(s * w, 7 + f16 as u64);
        let logits = if f16 {
            Logits::f16(
                vec![1, s, w],
                raw.iter().map(|&x| f16::from_f32(x)).collect(),
            )
        } else {
            Logits::f32(vec![1, s, w], raw)
        };
        let buf = g.upload(&match &logits.data {
            readout::core::read::logits::LogitsData::F32(v) => bytes_f32(v),
            readout::core::read::logits::LogitsData::F16(v) => bytes_f16(v),
        });
        // Rows out of order, one repeated, the last column of the row.
        let cols: Vec<[u32; 1]> = vec![[17], [49152], [0], [300], [17]];
        let rows = [3usize, 8, 0, 5, 3];
        let tasks: Vec<RowTask> = rows
            .iter()
            .zip(&cols)
            .map(|(&row, c)| RowTask { row, columns: c })
            .collect();
        let before = g.allocations();
        let mut max_d = 0.0f64;
        let mut max_fold = 0.0f64;
        for _ in 0..3 {
            let got = block_on(g.read_rows(&buf, [1, s, w], f16, &tasks)).unwrap();
            assert_eq!(got.len(), tasks.len());
            for (t, slot) in tasks.iter().zip(&got) {
                assert_eq!(slot.bytes_read_back, 16);
                let gpu_lp = slot.logits[0] as f64 - slot.log_sum_exp;
                let cpu_lp = row_log_prob(&logits, t.row, t.columns[0]).unwrap();
                max_d = max_d.max((gpu_lp - cpu_lp).abs());
            }
            let pairs: Vec<(usize, u32)> = tasks.iter().map(|t| (t.row, t.columns[0])).collect();
            let (folded, bytes) = block_on(g.read_log_probs(&buf, [1, s, w], f16, &pairs)).unwrap();
            assert_eq!(bytes, 4 * pairs.len(), "one float per pair");
            for (&(row, tok), lp) in pairs.iter().zip(&folded) {
                let cpu_lp = row_log_prob(&logits, row, tok).unwrap();
                max_fold = max_fold.max((lp - cpu_lp).abs());
            }
        }
        assert!(
            max_fold < 2e-5,
            "f16 {f16}: folded log p differ by {max_fold:e}"
        );
        eprintln!("folded, f16 {f16}: max |Δ log p| {max_fold:e}");
        assert!(
            max_d < 2e-5,
            "f16 {f16}: GPU vs CPU log p differ by {max_d:e}"
        );
        eprintln!("row tasks, f16 {f16}: max |Δ log p| {max_d:e}");
        // At most one set of scratch buffers for the three calls (none when
        // an earlier call already made them big enough).
        assert!(
            g.allocations() - before <= 5,
            "{} buffers made",
            g.allocations() - before
        );
        let settled = g.allocations();
        block_on(g.read(&buf, [1, s, w], f16, &[1, 2, 3])).unwrap();
        assert_eq!(
            g.allocations(),
            settled,
            "a smaller request reuses the scratch"
        );
    }
    // A row outside the tensor is refused, and the readout stays usable.
    let buf = g.upload(&bytes_f32(&synthetic(2 * 100, 9)));
    let c = [1u32];
    let err = block_on(g.read_rows(
        &buf,
        [1, 2, 100],
        false,
        &[RowTask {
            row: 2,
            columns: &c,
        }],
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("row 2 outside"), "{err}");
    block_on(g.read_rows(
        &buf,
        [1, 2, 100],
        false,
        &[RowTask {
            row: 1,
            columns: &c,
        }],
    ))
    .unwrap();
    // A non-finite value in a folded row is refused by name, not returned as NaN.
    let mut data = synthetic(2 * 100, 10);
    data[150] = f32::NEG_INFINITY;
    let buf = g.upload(&bytes_f32(&data));
    let err = block_on(g.read_log_probs(&buf, [1, 2, 100], false, &[(0, 3), (1, 3)]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("row 1 is not finite"), "{err}");
    let (ok, _) = block_on(g.read_log_probs(&buf, [1, 2, 100], false, &[(0, 3)])).unwrap();
    assert!(ok[0] < 0.0 && ok[0].is_finite());
}
