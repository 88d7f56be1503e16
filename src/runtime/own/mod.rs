//! Our own runtime: the graph interpreter (`interp`) and the int4 kernels of
//! `crate::kernels`, over the same ONNX files ONNX Runtime loads. It runs
//! natively and on wasm32 (the browser's CPU path), with no ONNX Runtime
//! underneath; ONNX Runtime stays the reference it is tested against.

use serde::Serialize;

use crate::core::read::logits::Logits;
use crate::kernels::{simd, Pack, Pool, Precision, Value};
use crate::runtime::{
    Branch, Dtype, PackBudget, RunOutput, Runtime, RuntimeError, Signature, Step, HIDDEN_OUTPUT,
};

pub mod interp;
mod runtime_impl;

use self::interp::{External, Program};

/// A past: one float32 tensor `[1, kv_heads, P, head_dim]` per
/// `past_key_values.*` input, in signature order (key, value per layer).
pub struct OwnKv {
    values: Vec<Value>,
    len: usize,
}

#[derive(Debug, Clone)]
pub struct OwnOptions {
    pub threads: usize,
    pub precision: Precision,
    /// Pack a call's branches into one block-causal pass (off: one run per
    /// branch, the serial path the packed one is measured against).
    pub pack: bool,
}

/// One packed pass's budget. 512 tokens: a pass's activations are a few
/// tokens × intermediate-width float32 tensors (SmolLM2: 512 × 1536 × 4 B
/// = 3 MB each) and its attention scores are per head and row, so this
/// stays small beside the weights while 8 criteria × 2 rotations × 30
/// tokens fit in one pass. 64 rows: each read row is a full vocabulary of
/// float32 logits (SmolLM2 196 KB, Qwen3 608 KB), so 64 bound them to
/// 13–39 MB, within a wasm32 heap beside the weights.
pub const PACK_BUDGET: PackBudget = PackBudget {
    tokens: 512,
    rows: 64,
};

impl Default for OwnOptions {
    fn default() -> Self {
        // The page's default is the bindings' to set (the single-thread
        // build runs one); natively the thread policy's.
        #[cfg(not(target_arch = "wasm32"))]
        let threads = crate::core::input::thread_policy::default_threads(
            crate::core::input::thread_policy::Host::Native,
            crate::platform::cores(),
            true,
        );
        #[cfg(target_arch = "wasm32")]
        let threads = 1;
        Self {
            threads,
            precision: Precision::Int8,
            pack: true,
        }
    }
}

/// What `describe` and `engine.info()` say about this runtime.
#[derive(Debug, Clone, Serialize)]
pub struct OwnInfo {
    pub kernel: simd::Kernel,
    pub precision: Precision,
    pub threads: usize,
    /// How this build splits work: `native`, `threaded` or `single-thread`.
    pub build: &'static str,
    /// Why `threads` is what it is (what was asked, what started).
    pub threads_why: String,
    pub weight_bytes: usize,
    /// A packed pass's budget, when this graph and these options pack.
    pub pack: Option<PackBudget>,
    /// Forwards run since load (a packed pass is one).
    pub forwards: u64,
}

/// What one forward fetched: logits, the exposed hidden state, the grown past.
struct Fetched {
    logits: Option<Logits>,
    hidden: Option<Logits>,
    present: Option<OwnKv>,
}

/// Where each graph input and output sits in the program's order.
struct Slots {
    ids: usize,
    mask: Option<usize>,
    /// Signature order: key, value per layer.
    past: Vec<usize>,
    logits: usize,
    hidden: Option<usize>,
    present: Vec<usize>,
}

pub struct OwnRuntime {
    program: Program,
    pool: Pool,
    precision: Precision,
    pack: bool,
    signature: Signature,
    slots: Slots,
    meter: super::Meter,
    forwards: u64,
    label: String,
}

/// The most bytes of weights a build can hold: wasm32 addresses 4 GiB, and
/// the page, the tokenizer and the activations need some of it.
pub const WEIGHT_LIMIT: u64 = if cfg!(target_arch = "wasm32") {
    3 << 30
} else {
    u64::MAX
};

/// What a load holds at its peak, per byte of the model's files: the
/// files' own copy beside the weights read out of it (float16 scales
/// widened to float32), then, from the first run, the weights beside the
/// SIMD kernels' interleaved copy of every int4 product's matrix. Counted
/// by the allocator in `tests/load_peak.rs`: 2.2–2.5 on every model built
/// here (the tiny ones, SmolLM2-135M, the Qwen3-0.6B shape); 3 keeps a
/// margin.
pub const LOAD_BYTES_PER_FILE_BYTE: u64 = 3;

/// Refuses, before their bytes are copied into this build's memory, model
/// files that a load could not hold within `limit` (`WEIGHT_LIMIT` for this
/// build): on wasm32 that copy is where an oversized model would exhaust
/// the heap and abort the module.
pub fn check_files_fit(file_bytes: u64, limit: u64) -> Result<(), RuntimeError> {
    let needed = file_bytes.saturating_mul(LOAD_BYTES_PER_FILE_BYTE);
    if needed > limit {
        return Err(crate::kernels::KernelError::TooLarge {
            needed,
            limit,
            what: "to load (3 bytes of memory per byte of its files: their copy, the weights read out of it, the kernels' interleaved copy)",
        }
        .into());
    }
    Ok(())
}

impl OwnRuntime {
    /// `graph`: the ONNX bytes; `external`: each external-data location's
    /// bytes; `kv_dims`: (kv heads, head dim) from config.json.
    pub fn load(
        graph: &[u8],
        external: &External<'_>,
        opts: &OwnOptions,
        kv_dims: [usize; 2],
        label: &str,
    ) -> Result<Self, RuntimeError> {
        let program = Program::load(graph, external, WEIGHT_LIMIT)?;
        let find = |list: &[String], name: &str| list.iter().position(|n| n == name);
        let inputs: Vec<String> = program.inputs().to_vec();
        let outputs: Vec<String> = program.outputs().map(str::to_string).collect();
        let signature = Signature::from_io(
            inputs.clone(),
            outputs.clone(),
            Dtype::F32,
            vec![-1, kv_dims[0] as i64, -1, kv_dims[1] as i64],
            Dtype::F32,
        )?;
        if signature.has_position_ids {
            return Err(RuntimeError::Signature(
                "a position_ids input: this runtime computes positions from the attention mask, as GroupQueryAttention does".into(),
            ));
        }
        let missing = |n: &str| RuntimeError::Signature(format!("{n} is missing"));
        let mut past = Vec::new();
        let mut present = Vec::new();
        for pair in &signature.past {
            for n in [&pair.past_key, &pair.past_value] {
                past.push(find(&inputs, n).ok_or_else(|| missing(n))?);
            }
            for n in [&pair.present_key, &pair.present_value] {
                present.push(find(&outputs, n).ok_or_else(|| missing(n))?);
            }
        }
        let slots = Slots {
            ids: find(&inputs, "input_ids").ok_or_else(|| missing("input_ids"))?,
            mask: find(&inputs, "attention_mask"),
            past,
            logits: find(&outputs, "logits").ok_or_else(|| missing("logits"))?,
            hidden: find(&outputs, HIDDEN_OUTPUT),
            present,
        };
        if inputs.len() != 1 + usize::from(slots.mask.is_some()) + slots.past.len() {
            return Err(RuntimeError::Signature(format!(
                "inputs {inputs:?}: only input_ids, attention_mask and the past are fed"
            )));
        }
        let pool = Pool::new(opts.threads)?;
        Ok(Self {
            program,
            pool,
            precision: opts.precision,
            pack: opts.pack,
            signature,
            slots,
            meter: super::Meter::new(),
            forwards: 0,
            label: label.to_string(),
        })
    }

    /// The threads a run uses now (fewer than at load once a kernel
    /// worker died); cheap, unlike `info`.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    pub fn info(&self) -> OwnInfo {
        OwnInfo {
            kernel: match self.precision {
                Precision::F32 => simd::Kernel::Scalar,
                Precision::Int8 => simd::detect(),
            },
            precision: self.precision,
            threads: self.pool.threads(),
            build: crate::kernels::BUILD,
            threads_why: self.pool.why(),
            weight_bytes: self.program.weight_bytes,
            pack: self.branch_budget(),
            forwards: self.forwards,
        }
    }

    /// One step; `logits`/`present` say which outputs to compute (the
    /// interpreter then skips what only the others need: a prefill never
    /// runs the head).
    fn forward(
        &mut self,
        step: &Step,
        past: Option<&OwnKv>,
        logits: bool,
        present: bool,
        pack: Option<&Pack>,
    ) -> Result<Fetched, RuntimeError> {
        let s = step.input_ids.len();
        let ids = Value::i64(vec![1, s], step.input_ids.clone());
        // The signature's mask slot is the program's (load checked both).
        self.signature.check_step(step)?;
        let mask = step
            .attention_mask
            .as_ref()
            .map(|m| Value::i64(vec![1, m.len()], m.clone()));
        let empty = Value::f32(self.signature.empty_past_dims().to_vec(), Vec::new());
        let mut feeds: Vec<&Value> = vec![&empty; self.program.inputs().len()];
        feeds[self.slots.ids] = &ids;
        if let (Some(i), Some(m)) = (self.slots.mask, &mask) {
            feeds[i] = m;
        }
        if let Some(kv) = past {
            for (slot, v) in self.slots.past.iter().zip(&kv.values) {
                feeds[*slot] = v;
            }
        }
        let n_out = self.program.outputs().count();
        let mut want = vec![false; n_out];
        want[self.slots.logits] = logits;
        if let Some(h) = self.slots.hidden {
            want[h] = logits;
        }
        for p in &self.slots.present {
            want[*p] = present;
        }
        self.forwards += 1;
        let mut outs = self
            .program
            .run(&feeds, &want, self.precision, pack, &self.pool)?;
        let as_logits = |v: Value| -> Result<Logits, RuntimeError> {
            match v.data {
                crate::kernels::Data::F32(d) => Ok(Logits::f32(v.shape, d)),
                _ => Err(RuntimeError::Run(format!(
                    "an output came back as {}",
                    v.kind()
                ))),
            }
        };
        let lg = if logits {
            Some(as_logits(
                outs[self.slots.logits]
                    .take()
                    .ok_or_else(|| RuntimeError::Run("no logits".into()))?,
            )?)
        } else {
            None
        };
        let hidden = match (logits, self.slots.hidden) {
            (true, Some(h)) => outs[h].take().map(as_logits).transpose()?,
            _ => None,
        };
        let kv = if present {
            let mut values = Vec::with_capacity(self.slots.present.len());
            for p in &self.slots.present {
                values.push(
                    outs[*p]
                        .take()
                        .ok_or_else(|| RuntimeError::Run("a present.* was not computed".into()))?,
                );
            }
            let len = values
                .first()
                .and_then(|v| v.shape.get(2))
                .copied()
                .unwrap_or(0);
            Some(OwnKv { values, len })
        } else {
            None
        };
        self.meter.read_back += (lg.as_ref().map_or(0, |l| l.byte_len())
            + hidden.as_ref().map_or(0, |h| h.byte_len())) as u64;
        Ok(Fetched {
            logits: lg,
            hidden,
            present: kv,
        })
    }
}

impl OwnRuntime {
    /// From the model's bytes, however they were read (natively from disk,
    /// in the browser from its downloads): refused first if a load of them
    /// could not fit this build's memory, then loaded. `external`: each
    /// external-data location with its bytes.
    pub fn from_bytes(
        graph: &[u8],
        external: &[(String, Vec<u8>)],
        opts: &OwnOptions,
        kv_dims: [usize; 2],
        label: &str,
    ) -> Result<Self, RuntimeError> {
        let file_bytes =
            graph.len() as u64 + external.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
        check_files_fit(file_bytes, WEIGHT_LIMIT)?;
        let lookup = |loc: &str| {
            external
                .iter()
                .find(|(n, _)| n == loc)
                .map(|(_, b)| b.as_slice())
        };
        Self::load(graph, &lookup, opts, kv_dims, label)
    }
}

/// Natively: the graph at `path` and the external-data files it names
/// (relative to its directory), read whole.
#[cfg(not(target_arch = "wasm32"))]
pub fn load_file(
    path: &std::path::Path,
    opts: &OwnOptions,
    kv_dims: [usize; 2],
) -> Result<OwnRuntime, RuntimeError> {
    let load_err = |e: &dyn std::fmt::Display| RuntimeError::Load {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let graph = std::fs::read(path).map_err(|e| load_err(&e))?;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let mut external = Vec::new();
    for loc in Program::external_locations(&graph)? {
        let p = dir.join(&loc);
        if std::path::Path::new(&loc)
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(load_err(&format!(
                "external data location {loc:?} leaves the model's directory"
            )));
        }
        let bytes = std::fs::read(&p).map_err(|e| RuntimeError::Load {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        external.push((loc, bytes));
    }
    OwnRuntime::from_bytes(
        &graph,
        &external,
        opts,
        kv_dims,
        &path.display().to_string(),
    )
}
