//! The `Runtime` trait over our own interpreter: runs, prefills, packed
//! branches and the bookkeeping the engine reads.

use super::*;
use crate::kernels::tensor::Data;
use crate::runtime::kv_image::{f32_from_le, f32_to_le};
use crate::runtime::{KvImage, KvView};

impl Runtime for OwnRuntime {
    type Kv = OwnKv;

    fn signature(&self) -> &Signature {
        &self.signature
    }

    async fn run(
        &mut self,
        step: &Step,
        past: Option<&OwnKv>,
        keep_present: bool,
    ) -> Result<RunOutput<OwnKv>, RuntimeError> {
        let f = self.forward(step, past, true, keep_present, None)?;
        Ok(RunOutput {
            logits: f
                .logits
                .ok_or_else(|| RuntimeError::Run("no logits".into()))?,
            present: f.present,
            hidden: f.hidden,
        })
    }

    async fn extend(&mut self, step: &Step, past: Option<&OwnKv>) -> Result<OwnKv, RuntimeError> {
        self.forward(step, past, false, true, None)?
            .present
            .ok_or_else(|| RuntimeError::Run("the run returned no present.*".into()))
    }

    fn branch_budget(&self) -> Option<PackBudget> {
        (self.pack && self.program.packs()).then_some(PACK_BUDGET)
    }

    async fn run_branches(
        &mut self,
        past: &OwnKv,
        branches: &[Branch<'_>],
    ) -> Result<Vec<Logits>, RuntimeError> {
        if !self.program.packs() {
            return Err(RuntimeError::Run(
                "this graph's head was not found at load, so its rows cannot be packed".into(),
            ));
        }
        let total: usize = branches.iter().map(|b| b.ids.len()).sum();
        let mut ids = Vec::with_capacity(total);
        let mut pack = Pack {
            first: Vec::with_capacity(total),
            rows: Vec::new(),
        };
        for (i, b) in branches.iter().enumerate() {
            if b.ids.is_empty() {
                return Err(RuntimeError::EmptyBranch { branch: i });
            }
            let start = ids.len();
            let mut prev = None;
            for &r in b.rows {
                if r >= b.ids.len() || prev.is_some_and(|p| r <= p) {
                    return Err(RuntimeError::BranchRow {
                        branch: i,
                        row: r,
                        len: b.ids.len(),
                    });
                }
                prev = Some(r);
                pack.rows.push(start + r);
            }
            ids.extend(b.ids.iter().map(|&t| i64::from(t)));
            pack.first.extend(std::iter::repeat_n(start, b.ids.len()));
        }
        if branches.is_empty() {
            return Ok(Vec::new());
        }
        // Every row is real: the mask covers past + all packed tokens, which
        // is what the graph's total length and key count are derived from;
        // who sees whom is the pack's.
        let step = Step {
            attention_mask: self.slots.mask.map(|_| vec![1; past.len + total]),
            input_ids: ids,
            position_ids: None,
        };
        let f = self.forward(&step, Some(past), true, false, Some(&pack))?;
        let lg = f
            .logits
            .ok_or_else(|| RuntimeError::Run("no logits".into()))?;
        let width = *lg.dims.last().unwrap_or(&0);
        let data = match lg.data {
            crate::core::read::logits::LogitsData::F32(d) => d,
            _ => return Err(RuntimeError::Run("packed logits are not float32".into())),
        };
        if lg.dims != [1, pack.rows.len(), width] {
            return Err(RuntimeError::Run(format!(
                "packed logits of dims {:?}; [1, {}, width] expected",
                lg.dims,
                pack.rows.len()
            )));
        }
        let mut out = Vec::with_capacity(branches.len());
        let mut at = 0;
        for b in branches {
            let n = b.rows.len();
            out.push(Logits::f32(
                vec![1, n, width],
                data[at * width..(at + n) * width].to_vec(),
            ));
            at += n;
        }
        Ok(out)
    }

    fn kv_len(&self, kv: &OwnKv) -> usize {
        kv.len
    }

    fn kv_tensors(&self, kv: &OwnKv) -> usize {
        kv.values.len()
    }

    /// Float32 whatever the graph's past dtype: the interpreter computes
    /// attention in float32 and keeps what it computed.
    fn kv_dtype(&self) -> Dtype {
        Dtype::F32
    }

    /// The wasm32 builds give the same bits whatever their SIMD level and
    /// thread count (the browser tests hold the builds to each other); the
    /// native kernels (AVX2, AVX-512) are held to them within a bound, not
    /// bit for bit, and the activations' precision changes the bits too.
    fn kv_origin(&self) -> String {
        format!(
            "readout kernels ({}), {} activations",
            if cfg!(target_arch = "wasm32") {
                "wasm32"
            } else {
                "native"
            },
            match self.info().precision {
                Precision::F32 => "float32",
                Precision::Int8 => "int8",
            }
        )
    }

    async fn export_kv(&mut self, kv: &OwnKv) -> Result<KvImage, RuntimeError> {
        let tensors = kv
            .values
            .iter()
            .map(|v| match &v.data {
                Data::F32(d) => Ok(f32_to_le(d)),
                _ => Err(RuntimeError::Run(
                    "a past tensor that is not float32".into(),
                )),
            })
            .collect::<Result<_, _>>()?;
        Ok(KvImage {
            dtype: Dtype::F32,
            len: kv.len,
            tensors,
        })
    }

    async fn import_kv(&mut self, view: &KvView<'_>) -> Result<OwnKv, RuntimeError> {
        let dims = view.check(&self.signature, Dtype::F32)?;
        let values = view
            .tensors
            .iter()
            .map(|b| Value::f32(dims.to_vec(), f32_from_le(b)))
            .collect();
        Ok(OwnKv {
            values,
            len: view.len,
        })
    }

    fn meter(&self) -> &crate::runtime::Meter {
        &self.meter
    }

    fn describe(&self) -> String {
        let i = self.info();
        format!(
            "readout kernels ({} activations, {} kernel, {} thread{}), {}; {} build, {}",
            match i.precision {
                Precision::F32 => "float32",
                Precision::Int8 => "int8",
            },
            i.kernel.name(),
            i.threads,
            if i.threads == 1 { "" } else { "s" },
            self.label,
            i.build,
            i.threads_why
        )
    }
}
