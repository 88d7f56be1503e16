//! What the benchmark page (`bench/`) needs beyond the product API: the
//! sweep's ids and statistics from `core::eval::logit_cost` (the same code the native
//! `readout sweep` runs), and the readout alone on a resident logits buffer.
//! Converts only; the timing is the page's.

use crate::platform::js;
use js_sys::{Array, Uint32Array};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::convert::{js_err, to_js};
use crate::core::read::logits::Logits;
use crate::core::read::slots::{read_slots, HeadColumns};

/// `ms = fixed + perToken × n` by least squares: `{fixedMs, perTokenMs, r2}`, or `undefined` on fewer than two distinct lengths.
#[wasm_bindgen(js_name = linearFit)]
pub fn linear_fit(xs: Vec<f64>, ys: Vec<f64>) -> Result<JsValue, JsValue> {
    match crate::core::eval::logit_cost::fit(&xs, &ys) {
        Some(f) => to_js(&f),
        None => Ok(JsValue::UNDEFINED),
    }
}

#[wasm_bindgen]
pub fn median(xs: Vec<f64>) -> f64 {
    crate::core::eval::logit_cost::median(&xs)
}

pub(super) fn ids_to_js(prefix: &[u32], suffixes: &[Vec<u32>]) -> JsValue {
    let o = js_sys::Object::new();
    js::set(&o, "prefix", &Uint32Array::from(prefix).into());
    let s: Array = suffixes
        .iter()
        .map(|v| JsValue::from(Uint32Array::from(v.as_slice())))
        .collect();
    js::set(&o, "suffixes", &s.into());
    o.into()
}

#[derive(Serialize)]
struct BenchRead {
    logits: Vec<f32>,
    log_sum_exp: f64,
    allowed_mass: f64,
}

enum Where {
    Gpu {
        gpu: Box<crate::gpu::GpuReadout>,
        buf: wgpu::Buffer,
    },
    Cpu(Logits),
}

/// The engine's readout alone, on one resident `[1, 1, width]` float16 row:
/// the WGSL kernel on a buffer already on the GPU (`"gpu"`), or the core's
/// readSlots in this module's memory (`"cpu"`). Each `run()` reads the
/// letters' logits and the full-vocabulary log-sum-exp.
#[wasm_bindgen]
pub struct ReadoutBench {
    at: Where,
    width: usize,
    columns: Vec<u32>,
}

#[wasm_bindgen]
impl ReadoutBench {
    pub async fn create(
        #[wasm_bindgen(unchecked_param_type = "Uint16Array")] f16_bits: JsValue,
        columns: Vec<u32>,
        #[wasm_bindgen(unchecked_param_type = "\"gpu\" | \"cpu\"")] place: String,
    ) -> Result<ReadoutBench, JsValue> {
        let bits: Vec<u16> = f16_bits
            .dyn_into::<js_sys::Uint16Array>()
            .map_err(|_| js_err("values: a Uint16Array of float16 bits"))?
            .to_vec();
        let width = bits.len();
        if width == 0 {
            return Err(js_err("values: empty"));
        }
        if let Some(c) = columns.iter().find(|&&c| c as usize >= width) {
            return Err(js_err(format!(
                "columns: {c} is outside the {width} values"
            )));
        }
        let at = match place.as_str() {
            "gpu" => {
                let (gpu, _) = fresh_gpu_readout().await?;
                let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
                let buf = gpu.upload(&bytes);
                Where::Gpu {
                    gpu: Box::new(gpu),
                    buf,
                }
            }
            "cpu" => Where::Cpu(Logits::f16(
                vec![1, 1, width],
                bits.iter().map(|&b| half::f16::from_bits(b)).collect(),
            )),
            other => {
                return Err(js_err(format!(
                    "place: {other:?} is not \"gpu\" or \"cpu\""
                )))
            }
        };
        Ok(ReadoutBench { at, width, columns })
    }

    pub async fn run(&self) -> Result<JsValue, JsValue> {
        let (logits, lse) = match &self.at {
            Where::Gpu { gpu, buf } => {
                let g = gpu
                    .read(buf, [1, 1, self.width], true, &self.columns)
                    .await
                    .map_err(js_err)?;
                (g.logits, g.log_sum_exp)
            }
            Where::Cpu(l) => {
                let cols: Vec<usize> = self.columns.iter().map(|&c| c as usize).collect();
                // The engine's own WASM-side readout, allowedMass included.
                let r = read_slots(l, &HeadColumns::Vocab { vocab: self.width }, &cols, true)
                    .map_err(js_err)?;
                let mass = r.allowed_mass.unwrap_or(f64::NAN);
                let letters =
                    crate::core::read::slots::log_sum_exp(r.logits.iter().map(|&v| v as f64));
                return to_js(&BenchRead {
                    log_sum_exp: letters - mass.ln(),
                    logits: r.logits,
                    allowed_mass: mass,
                });
            }
        };
        let allowed_mass = logits.iter().map(|&v| (v as f64 - lse).exp()).sum();
        to_js(&BenchRead {
            logits,
            log_sum_exp: lse,
            allowed_mass,
        })
    }
}

/// The readout kernel on a fresh WebGPU device (not an engine's), and the
/// adapter's name: the diagnostics that measure or test the kernel alone.
pub(super) async fn fresh_gpu_readout() -> Result<(crate::gpu::GpuReadout, String), JsValue> {
    let dev = crate::gpu::web::request_shared_device()
        .await
        .map_err(js_err)?;
    let gpu = crate::gpu::GpuReadout::new(dev.device, dev.queue)
        .await
        .map_err(js_err)?;
    Ok((gpu, dev.adapter))
}

#[derive(Serialize)]
struct EmptyPast {
    names: Vec<String>,
    dims: [usize; 4],
}

/// The zero-length past a first run is fed, as the engine derives it from
/// config.json's text (its own parser: head dim, kv heads, layers): every
/// `past_key_values.*` name and the dims `[1, kvHeads, 0, headDim]`. For the
/// studies that drive onnxruntime-web or transformers.js directly.
#[wasm_bindgen(
    js_name = emptyPast,
    unchecked_return_type = "{ names: string[]; dims: number[] }"
)]
pub fn empty_past(config_json: &str) -> Result<JsValue, JsValue> {
    use crate::runtime::KvPair;
    let c = crate::core::model::config::ModelConfig::parse(config_json)
        .map_err(super::convert::core_err)?;
    let [kv_heads, head_dim] = c.kv_dims();
    to_js(&EmptyPast {
        names: (0..c.layers)
            .map(KvPair::for_layer)
            .flat_map(|p| [p.past_key, p.past_value])
            .collect(),
        dims: [1, kv_heads, 0, head_dim],
    })
}

/// One decoder layer's int4 products alone (`kernels::random_layer`,
/// SmolLM2-135M's shapes), as `cargo bench --bench q4_matmul` times them
/// natively, so that `bench/dot_peak.mjs` can set the kernel beside the
/// instructions' own peak in this browser. `create(rows, threads,
/// zeroPoints)` starts the kernel workers the threaded build needs;
/// `zeroPoints` false gives the builder's layout (no zero points: every one
/// is 8), true random ones as `q4_matmul` uses. Each `run()` computes the
/// four products once over `rows` rows; the page times it.
#[wasm_bindgen]
pub struct KernelBench {
    layer: crate::kernels::random_layer::RandomLayer,
    acts: Vec<Vec<f32>>,
    rows: usize,
    pool: crate::kernels::Pool,
}

#[wasm_bindgen]
impl KernelBench {
    pub async fn create(
        rows: usize,
        threads: usize,
        #[wasm_bindgen(js_name = zeroPoints)] zero_points: bool,
    ) -> Result<KernelBench, JsValue> {
        use crate::kernels::random_layer::{RandomLayer, SMOLLM2_LAYER};
        if rows == 0 {
            return Err(js_err("rows: at least 1"));
        }
        let pool = bench_pool(threads).await?;
        let mut seed = 5u64;
        let layer = RandomLayer::new(&SMOLLM2_LAYER, zero_points, &mut seed).map_err(js_err)?;
        let acts = layer.activations(rows, &mut seed);
        Ok(KernelBench {
            layer,
            acts,
            rows,
            pool,
        })
    }

    pub fn run(&self) -> Result<(), JsValue> {
        self.layer
            .run(
                &self.acts,
                self.rows,
                crate::kernels::Precision::Int8,
                &self.pool,
            )
            .map_err(js_err)
    }

    /// Multiply-adds of one `run()`.
    #[wasm_bindgen(getter)]
    pub fn macs(&self) -> f64 {
        self.layer.macs(self.rows) as f64
    }

    /// Threads the pool runs on (the single-thread build: 1).
    #[wasm_bindgen(getter)]
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// The int8 kernel this build runs.
    #[wasm_bindgen(getter)]
    pub fn kernel(&self) -> String {
        crate::kernels::simd::detect().name().to_string()
    }
}

/// The pool a bench runs on: the threaded build's workers started first.
async fn bench_pool(threads: usize) -> Result<crate::kernels::Pool, JsValue> {
    #[cfg(target_feature = "atomics")]
    super::threads::ensure(threads)
        .await
        .map_err(super::convert::load_err)?;
    crate::kernels::Pool::new(threads).map_err(js_err)
}

/// Attention alone (`kernels::random_attention`, the layer `cargo bench
/// --bench attention` times natively) on SmolLM2's head shapes, so that
/// `bench/runners/dot_peak.mjs` can set it beside the float
/// instructions' own peak in this browser. `create(past, rows, threads)`
/// starts the workers the threaded build needs; each `run()` computes one
/// layer's attention for `rows` new rows after `past`; the page times it.
#[wasm_bindgen]
pub struct AttentionBench {
    layer: crate::kernels::random_attention::RandomAttention,
    pool: crate::kernels::Pool,
}

#[wasm_bindgen]
impl AttentionBench {
    pub async fn create(
        past: usize,
        rows: usize,
        threads: usize,
    ) -> Result<AttentionBench, JsValue> {
        use crate::kernels::random_attention::RandomAttention;
        use crate::kernels::random_attention::MAX_POSITIONS;
        // A bound on the inputs drawn (the rotary caches' positions), so a
        // typo cannot ask for gigabytes.
        if rows == 0 || past.checked_add(rows).is_none_or(|n| n > MAX_POSITIONS) {
            return Err(js_err(format!(
                "past + rows: 1 to {MAX_POSITIONS} rows in all, got past {past} and rows {rows}"
            )));
        }
        let pool = bench_pool(threads).await?;
        let mut seed = 9u64;
        Ok(AttentionBench {
            layer: RandomAttention::new(past, rows, &mut seed),
            pool,
        })
    }

    pub fn run(&self) -> Result<(), JsValue> {
        self.layer.run(&self.pool).map_err(js_err)
    }

    /// Multiply-adds of one `run()` (scores and weighted sums).
    #[wasm_bindgen(getter)]
    pub fn macs(&self) -> f64 {
        self.layer.macs() as f64
    }

    /// Threads the pool runs on (the single-thread build: 1).
    #[wasm_bindgen(getter)]
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }
}
