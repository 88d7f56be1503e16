//! The benchmark's and the tests' entry points, built only with the
//! `diagnostics` feature (`scripts/build_pkg.sh` writes that build to
//! `pkg-diagnostics/`, which the bench page and the browser tests load): the
//! npm package in `pkg/` exports the product alone.

use js_sys::Promise;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;

use super::convert::{fixture_from_js, js_err, to_js};
use super::{bench, Engine, State};
use crate::core::input::criteria::Criterion;

#[wasm_bindgen]
impl Engine {
    /// The benchmark's ids (`core::eval::logit_cost`, shared with `readout sweep`): a
    /// `prefix`-token prefix and one suffix per length, from this model's tokenizer.
    #[wasm_bindgen(js_name = sweepIds, unchecked_return_type = "Promise<{ prefix: Uint32Array; suffixes: Uint32Array[] }>")]
    pub fn sweep_ids(&self, prefix: usize, lengths: Vec<usize>) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            if prefix == 0 || lengths.is_empty() || lengths.contains(&0) {
                return Err(js_err(
                    "lengths: the prefix and every suffix length must be at least 1",
                ));
            }
            let (p, s) = shared
                .with(async |e| {
                    Ok(crate::core::eval::logit_cost::sweep_ids(
                        e.tokenizer(),
                        prefix,
                        &lengths,
                    )?)
                })
                .await?;
            Ok(bench::ids_to_js(&p, &s))
        })
    }

    /// Prefills raw token ids (no prompt around them): the benchmark's fixed prefix.
    #[wasm_bindgen(js_name = prefillIds, unchecked_return_type = "Promise<State>")]
    pub fn prefill_ids(&self, ids: Vec<u32>) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let (id, tokens) = shared
                .with(async |e| {
                    let id = e.prefill_ids(&ids).await?;
                    Ok((id, e.head_tokens(id)?))
                })
                .await?;
            Ok(State::new(shared, id, tokens).into())
        })
    }

    /// Ends onnxruntime-web's profiler (enabled with `profiling: true`); the report goes to the console.
    #[wasm_bindgen(js_name = endProfiling, unchecked_return_type = "Promise<void>")]
    pub fn end_profiling(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            shared
                .with(async |e| {
                    if let Some(r) = e.runtime().onnx() {
                        r.end_profiling();
                    }
                    Ok(())
                })
                .await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Destroys the shared WebGPU device, as a driver reset would lose it: a
    /// diagnostic for spec §12 (every later run is refused, naming the loss).
    #[wasm_bindgen(js_name = loseGpuDevice, unchecked_return_type = "Promise<void>")]
    pub fn lose_gpu_device(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            shared
                .with(async |e| match e.runtime().onnx() {
                    Some(r) => Ok(r.lose_device().await?),
                    None => Ok(()),
                })
                .await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Arms a loss in flight: the shared WebGPU device is destroyed right
    /// after the `n`th run from now (1: the next) has been handed to
    /// onnxruntime-web, so the call that made it is mid-way (spec §12: it
    /// rejects with `device_lost`, and no promise is left pending).
    #[wasm_bindgen(js_name = loseGpuDeviceDuringRun, unchecked_return_type = "Promise<void>")]
    pub fn lose_gpu_device_during_run(&self, n: u32) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            shared
                .with(async |e| match e.runtime().onnx() {
                    Some(r) => Ok(r.lose_device_during_run(n)?),
                    None => Ok(()),
                })
                .await?;
            Ok(JsValue::UNDEFINED)
        })
    }
}

#[wasm_bindgen]
impl State {
    /// The readout of the first `options` letters after this state and raw
    /// `ids`: the run a criterion of that many suffix tokens costs, on the
    /// same path. `{probs, logits, allowedMass?}`.
    #[wasm_bindgen(js_name = readIds, unchecked_return_type = "Promise<{ probs: number[]; logits: number[]; allowedMass?: number }>")]
    pub fn read_ids(&self, ids: Vec<u32>, options: usize, allowed_mass: bool) -> Promise {
        let (shared, id) = (self.shared.clone(), self.id);
        future_to_promise(async move {
            let r = shared
                .with(async |e| e.read_ids(id, &ids, options, allowed_mass).await)
                .await?;
            to_js(&r)
        })
    }

    /// Runs the criteria's suffixes as one batch against this state's past
    /// and resolves to the logits dims, or rejects with onnxruntime-web's
    /// refusal (its GroupQueryAttention takes batch 1 with a past and several
    /// new tokens). A diagnostic: scoring never batches.
    #[wasm_bindgen(js_name = runBatched, unchecked_return_type = "Promise<number[][]>")]
    pub fn run_batched(
        &self,
        #[wasm_bindgen(unchecked_param_type = "CriterionInput[]")] criteria: JsValue,
    ) -> Promise {
        let (shared, id) = (self.shared.clone(), self.id);
        future_to_promise(async move {
            let cs: Vec<Criterion> = fixture_from_js(criteria, "criteria")?;
            let dims = shared
                .with(async |e| e.run_many_suffixes(id, &cs).await)
                .await?;
            to_js(&dims)
        })
    }
}

/// Our int4 kernels as this build runs them (SIMD128 in the browser)
/// against the scalar reference on fixed data: `{ kernel, worst,
/// attentionDiffers }`, the largest relative difference
/// (`kernels::simd::self_test`) and how many attention scores computed
/// four keys at a time differ from one at a time in any bit
/// (`kernels::attention_self_test`, 0 expected).
#[wasm_bindgen(js_name = kernelSelfTest)]
pub fn kernel_self_test() -> Result<JsValue, JsValue> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Report {
        kernel: crate::kernels::simd::Kernel,
        worst: f32,
        attention_differs: usize,
    }
    let (kernel, worst) = crate::kernels::simd::self_test();
    let attention_differs = crate::kernels::attention_self_test();
    to_js(&Report {
        kernel,
        worst,
        attention_differs,
    })
}

/// A pool over the kernel workers already running (up to `threads`), or
/// why there is none.
#[cfg(target_feature = "atomics")]
fn running_pool(threads: usize) -> Result<crate::kernels::Pool, JsValue> {
    let pool = crate::kernels::Pool::new(threads).map_err(|e| JsValue::from_str(&e.to_string()))?;
    if pool.threads() < 2 {
        return Err(JsValue::from_str(
            "no kernel worker is running: load an engine with threads >= 2 first",
        ));
    }
    Ok(pool)
}

/// The threaded build's pool when a worker's piece of a job panics (a
/// bug's path, made on purpose): a job of 64 pieces over the running
/// kernel workers (load an engine with `threads` ≥ 2 first) whose pieces
/// panic on a worker, then the same job with no panic. `{ broken, second,
/// done }`: the first job's error, the second's (null expected), and how
/// many of its 64 pieces the second completed.
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = poolFaultTest)]
pub fn pool_fault_test() -> Result<JsValue, JsValue> {
    use crate::kernels::workers;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    static FAULT: AtomicBool = AtomicBool::new(false);
    static TAKEN: AtomicBool = AtomicBool::new(false);
    #[derive(serde::Serialize)]
    struct Report {
        broken: Option<String>,
        second: Option<String>,
        done: usize,
    }
    let pool = running_pool(2)?;
    let piece = |_: usize, c: &mut [u8]| {
        if workers::on_worker() {
            TAKEN.store(true, SeqCst);
            if FAULT.load(SeqCst) {
                panic!("poolFaultTest: a kernel worker's piece panics on purpose");
            }
        } else if FAULT.load(SeqCst) {
            // The caller waits (2 s at most) until a worker has taken a
            // piece, so that one does, however the pieces race.
            let t0 = js_sys::Date::now();
            while !TAKEN.load(SeqCst) && js_sys::Date::now() - t0 < 2000.0 {
                std::hint::spin_loop();
            }
        }
        c[0] = 1;
    };
    FAULT.store(true, SeqCst);
    TAKEN.store(false, SeqCst);
    let mut first = vec![0u8; 64];
    let broken = pool.chunks_mut(&mut first, 1, piece).err();
    FAULT.store(false, SeqCst);
    let mut again = vec![0u8; 64];
    let second = pool.chunks_mut(&mut again, 1, piece).err();
    let report = Report {
        broken: broken.map(|e| e.to_string()),
        second: second.map(|e| e.to_string()),
        done: again.iter().filter(|&&x| x == 1).count(),
    };
    to_js(&report)
}

/// The threaded build's pool when a worker stops inside its piece without
/// trapping (as a terminated or hung worker does): a job of 64 pieces over
/// the running kernel workers (load an engine with `threads` ≥ 2 first)
/// whose first piece a worker takes never returns, then the same job with
/// no hang. `{ lost, lostMs, second, done }`: the first job's error and how
/// long it took, the second job's error (null expected) and how many of its
/// pieces it did. `poolHangTicks()` then tells whether the hung piece still
/// runs (its count moves), once the page has yielded to its event loop,
/// where the browser carries out the worker's termination.
#[cfg(target_feature = "atomics")]
static HANG_TICKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// How often `poolHangTest`'s hung piece has looped so far.
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = poolHangTicks)]
pub fn pool_hang_ticks() -> u32 {
    HANG_TICKS.load(std::sync::atomic::Ordering::SeqCst)
}

#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = poolHangTest)]
pub fn pool_hang_test() -> Result<JsValue, JsValue> {
    use crate::kernels::workers;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    static HANG: AtomicBool = AtomicBool::new(false);
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Report {
        lost: Option<String>,
        lost_ms: f64,
        second: Option<String>,
        done: usize,
    }
    let pool = running_pool(64)?;
    let piece = |_: usize, c: &mut [u8]| {
        if workers::on_worker() && HANG.swap(false, SeqCst) {
            // Stops answering, as a terminated worker does; if it is not
            // terminated it gives up after 30 s and writes nothing.
            let t0 = js_sys::Date::now();
            while js_sys::Date::now() - t0 < 30_000.0 {
                HANG_TICKS.fetch_add(1, SeqCst);
                std::hint::spin_loop();
            }
            return;
        }
        if !workers::on_worker() {
            // The caller leaves the pieces to the workers for a moment, so
            // that one takes the hanging piece however they race.
            let t0 = js_sys::Date::now();
            while HANG.load(SeqCst) && js_sys::Date::now() - t0 < 2000.0 {
                std::hint::spin_loop();
            }
        }
        c[0] = 1;
    };
    HANG.store(true, SeqCst);
    let t0 = js_sys::Date::now();
    let mut first = vec![0u8; 64];
    let lost = pool.chunks_mut(&mut first, 1, piece).err();
    let lost_ms = js_sys::Date::now() - t0;
    HANG.store(false, SeqCst);
    let mut again = vec![0u8; 64];
    let second = pool.chunks_mut(&mut again, 1, piece).err();
    let report = Report {
        lost: lost.map(|e| e.to_string()),
        lost_ms,
        second: second.map(|e| e.to_string()),
        done: again.iter().filter(|&&x| x == 1).count(),
    };
    to_js(&report)
}

/// The WGSL readout kernel (spec §8) and the CPU readSlots on the same
/// `[1, rows, width]` logits (float32, or float16 bits when `f16`), on a
/// fresh WebGPU device: `{ gpu: {logits, logSumExp, bytesReadBack}, cpu: {logits, logSumExp} }`.
#[wasm_bindgen(js_name = gpuReadoutSelfTest)]
pub async fn gpu_readout_self_test(
    #[wasm_bindgen(unchecked_param_type = "Float32Array | Uint16Array")] values: JsValue,
    rows: usize,
    width: usize,
    columns: Vec<u32>,
    f16: bool,
) -> Result<JsValue, JsValue> {
    use crate::core::read::logits::Logits;
    use crate::core::read::slots::{read_slots, HeadColumns};
    let dims = [1, rows, width];
    let (logits, bytes): (Logits, Vec<u8>) = if f16 {
        let v: Vec<u16> = values
            .dyn_into::<js_sys::Uint16Array>()
            .map_err(|_| js_err("values: a Uint16Array of float16 bits when f16"))?
            .to_vec();
        (
            Logits::f16(
                dims.to_vec(),
                v.iter().map(|&b| half::f16::from_bits(b)).collect(),
            ),
            v.iter().flat_map(|b| b.to_le_bytes()).collect(),
        )
    } else {
        let v: Vec<f32> = values
            .dyn_into::<js_sys::Float32Array>()
            .map_err(|_| js_err("values: a Float32Array"))?
            .to_vec();
        (
            Logits::f32(dims.to_vec(), v.clone()),
            v.iter().flat_map(|b| b.to_le_bytes()).collect(),
        )
    };
    let cols: Vec<usize> = columns.iter().map(|&c| c as usize).collect();
    let cpu =
        read_slots(&logits, &HeadColumns::Vocab { vocab: width }, &cols, true).map_err(js_err)?;
    let (gpu, adapter) = bench::fresh_gpu_readout().await?;
    let buf = gpu.upload(&bytes);
    let g = gpu.read(&buf, dims, f16, &columns).await.map_err(js_err)?;
    #[derive(Serialize)]
    struct Side {
        logits: Vec<f32>,
        log_sum_exp: f64,
        bytes_read_back: Option<usize>,
    }
    #[derive(Serialize)]
    struct Out {
        gpu: Side,
        cpu: Side,
        adapter: String,
    }
    let cpu_lse =
        crate::core::read::slots::log_sum_exp(logits.row_f32(rows - 1).iter().map(|&v| v as f64));
    to_js(&Out {
        gpu: Side {
            logits: g.logits,
            log_sum_exp: g.log_sum_exp,
            bytes_read_back: Some(g.bytes_read_back),
        },
        cpu: Side {
            logits: cpu.logits,
            log_sum_exp: cpu_lse,
            bytes_read_back: None,
        },
        adapter,
    })
}
