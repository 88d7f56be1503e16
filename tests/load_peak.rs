//! What a load of our own runtime and its first run hold at their peak,
//! counted by the allocator, against `LOAD_BYTES_PER_FILE_BYTE` × the
//! model's files: the bound the browser uses to refuse a model before
//! copying it into the wasm32 heap. Natively the load is the same code over
//! the same bytes (the files read whole, as the browser copies them), and
//! the SIMD kernels' interleaved copies are made here as there (by the
//! first run, so it is counted).

mod common;

use common::{built_model, kv_dims, model_path, GEMMA_Q4, GEMMA_Q4F16, Q4, Q4F16};
use readout::engine::convention::{derive, Convention};
use readout::runtime::own::{load_file, OwnOptions, LOAD_BYTES_PER_FILE_BYTE};
use readout::Precision;
use readout::Runtime;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; the counters
// only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), SeqCst) + l.size();
            PEAK.fetch_max(now, SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), SeqCst);
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The counters are process-wide: one measurement at a time.
static ONE: Mutex<()> = Mutex::new(());

/// Heap bytes above the start: the peak during the load, and what the
/// runtime holds after a first run of 16 tokens (its interleaved copies
/// made, the run's own activations freed: those are budgeted apart, in
/// what `WEIGHT_LIMIT` leaves of the address space); and the files' bytes.
fn load_and_held(dir: &Path) -> (usize, usize, u64) {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let files: u64 = ["model.onnx", "model.onnx.data"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    let dims = kv_dims(dir);
    let start = LIVE.load(SeqCst);
    PEAK.store(start, SeqCst);
    let mut rt = load_file(
        &dir.join("model.onnx"),
        &OwnOptions {
            threads: 1,
            precision: Precision::Int8,
            pack: true,
        },
        dims,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let load = PEAK.load(SeqCst) - start;
    let ids: Vec<u32> = (1..=16).collect();
    let step = derive(Convention::MaskPastAndSuffix, rt.signature(), 0, &ids);
    drop(
        pollster::block_on(rt.run(&step, None, false))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display())),
    );
    let held = LIVE.load(SeqCst) - start;
    // What the runtime says it holds in weights is what the count sees,
    // less the rest it keeps (norms, rotary caches, the graph's plan).
    let said = rt.info().weight_bytes;
    assert!(
        said <= held && said as f64 >= 0.8 * held as f64,
        "{}: info() says {said} bytes of weights, the count {held}",
        dir.display()
    );
    drop(rt);
    (load, held, files)
}

fn holds(dir: &Path) {
    let (load, held, files) = load_and_held(dir);
    let per = |b: usize| b as f64 / files as f64;
    println!(
        "{}: files {files} bytes; the load's peak {load} ({:.2} per file byte), held after a first run {held} ({:.2}); bound {LOAD_BYTES_PER_FILE_BYTE}",
        dir.display(),
        per(load),
        per(held),
    );
    assert!(
        load.max(held) as u64 <= LOAD_BYTES_PER_FILE_BYTE * files,
        "{}: {:.2} bytes per file byte",
        dir.display(),
        per(load.max(held))
    );
    // The load holds at least the files' own copy: the count sees the load.
    assert!(
        load as u64 >= files,
        "{}: peak {load} < files {files}",
        dir.display()
    );
}

#[test]
fn a_load_holds_at_most_the_bound_per_file_byte() {
    for id in [Q4, Q4F16, GEMMA_Q4, GEMMA_Q4F16] {
        holds(&model_path(id));
    }
    for id in [
        "smollm2-135m-instruct-q4f16",
        "smollm2-135m-instruct-q4",
        "qwen3-0.6b-shape-q4f16",
        "gemma3-270m-q4f16",
    ] {
        if let Some(dir) = built_model(id) {
            holds(&dir);
        }
    }
}
