//! One type over two runtimes: an ONNX Runtime (`O`: native or web) or our
//! own, chosen at load. The engine stays generic over one `Runtime`; every
//! call forwards to the runtime chosen, so the overrides each has (the GPU
//! readout on the web) still apply.

use super::own::{OwnKv, OwnRuntime};
use super::{
    Branch, Dtype, Gathered, KvImage, KvView, PackBudget, ReadSpec, RowRead, RunOutput, Runtime,
    RuntimeError, Signature, Step,
};
use crate::core::read::logits::Logits;

pub enum AnyRuntime<O> {
    Onnx(O),
    Own(Box<OwnRuntime>),
}

pub enum AnyKv<K> {
    Onnx(K),
    Own(OwnKv),
}

fn foreign() -> RuntimeError {
    RuntimeError::Run("a past made by the other runtime".into())
}

fn map_out<K>(o: RunOutput<K>, f: impl FnOnce(K) -> AnyKv<K>) -> RunOutput<AnyKv<K>> {
    RunOutput {
        logits: o.logits,
        present: o.present.map(f),
        hidden: o.hidden,
    }
}

impl<O: Runtime> AnyRuntime<O> {
    /// Our runtime, when it is the one chosen.
    pub fn own(&self) -> Option<&OwnRuntime> {
        match self {
            Self::Own(r) => Some(r),
            Self::Onnx(_) => None,
        }
    }

    /// The ONNX Runtime, when it is the one chosen (its own diagnostics).
    pub fn onnx(&self) -> Option<&O> {
        match self {
            Self::Onnx(r) => Some(r),
            Self::Own(_) => None,
        }
    }
}

impl<O: Runtime> Runtime for AnyRuntime<O> {
    type Kv = AnyKv<O::Kv>;

    fn signature(&self) -> &Signature {
        match self {
            Self::Onnx(r) => r.signature(),
            Self::Own(r) => r.signature(),
        }
    }

    async fn run(
        &mut self,
        step: &Step,
        past: Option<&Self::Kv>,
        keep_present: bool,
    ) -> Result<RunOutput<Self::Kv>, RuntimeError> {
        match (self, past) {
            (Self::Onnx(r), None) => {
                Ok(map_out(r.run(step, None, keep_present).await?, AnyKv::Onnx))
            }
            (Self::Onnx(r), Some(AnyKv::Onnx(k))) => Ok(map_out(
                r.run(step, Some(k), keep_present).await?,
                AnyKv::Onnx,
            )),
            (Self::Own(r), None) => {
                let o = r.run(step, None, keep_present).await?;
                Ok(RunOutput {
                    logits: o.logits,
                    present: o.present.map(AnyKv::Own),
                    hidden: o.hidden,
                })
            }
            (Self::Own(r), Some(AnyKv::Own(k))) => {
                let o = r.run(step, Some(k), keep_present).await?;
                Ok(RunOutput {
                    logits: o.logits,
                    present: o.present.map(AnyKv::Own),
                    hidden: o.hidden,
                })
            }
            _ => Err(foreign()),
        }
    }

    async fn extend(
        &mut self,
        step: &Step,
        past: Option<&Self::Kv>,
    ) -> Result<Self::Kv, RuntimeError> {
        match (self, past) {
            (Self::Onnx(r), None) => Ok(AnyKv::Onnx(r.extend(step, None).await?)),
            (Self::Onnx(r), Some(AnyKv::Onnx(k))) => {
                Ok(AnyKv::Onnx(r.extend(step, Some(k)).await?))
            }
            (Self::Own(r), None) => Ok(AnyKv::Own(r.extend(step, None).await?)),
            (Self::Own(r), Some(AnyKv::Own(k))) => Ok(AnyKv::Own(r.extend(step, Some(k)).await?)),
            _ => Err(foreign()),
        }
    }

    async fn read(
        &mut self,
        step: &Step,
        past: Option<&Self::Kv>,
        spec: &ReadSpec<'_>,
    ) -> Result<RowRead, RuntimeError> {
        match (self, past) {
            (Self::Onnx(r), None) => r.read(step, None, spec).await,
            (Self::Onnx(r), Some(AnyKv::Onnx(k))) => r.read(step, Some(k), spec).await,
            (Self::Own(r), None) => r.read(step, None, spec).await,
            (Self::Own(r), Some(AnyKv::Own(k))) => r.read(step, Some(k), spec).await,
            _ => Err(foreign()),
        }
    }

    async fn log_probs_at(
        &mut self,
        step: &Step,
        past: Option<&Self::Kv>,
        keep_present: bool,
        at: &[(usize, u32)],
    ) -> Result<Gathered<Self::Kv>, RuntimeError> {
        let onnx = |g: Gathered<O::Kv>| Gathered {
            log_probs: g.log_probs,
            dims: g.dims,
            present: g.present.map(AnyKv::Onnx),
        };
        let own = |g: Gathered<OwnKv>| Gathered {
            log_probs: g.log_probs,
            dims: g.dims,
            present: g.present.map(AnyKv::Own),
        };
        match (self, past) {
            (Self::Onnx(r), None) => Ok(onnx(r.log_probs_at(step, None, keep_present, at).await?)),
            (Self::Onnx(r), Some(AnyKv::Onnx(k))) => {
                Ok(onnx(r.log_probs_at(step, Some(k), keep_present, at).await?))
            }
            (Self::Own(r), None) => Ok(own(r.log_probs_at(step, None, keep_present, at).await?)),
            (Self::Own(r), Some(AnyKv::Own(k))) => {
                Ok(own(r.log_probs_at(step, Some(k), keep_present, at).await?))
            }
            _ => Err(foreign()),
        }
    }

    async fn run_many(
        &mut self,
        steps: &[Step],
        past: Option<&Self::Kv>,
    ) -> Result<Vec<Logits>, RuntimeError> {
        match (self, past) {
            (Self::Onnx(r), None) => r.run_many(steps, None).await,
            (Self::Onnx(r), Some(AnyKv::Onnx(k))) => r.run_many(steps, Some(k)).await,
            (Self::Own(r), None) => r.run_many(steps, None).await,
            (Self::Own(r), Some(AnyKv::Own(k))) => r.run_many(steps, Some(k)).await,
            _ => Err(foreign()),
        }
    }

    fn branch_budget(&self) -> Option<PackBudget> {
        match self {
            Self::Onnx(r) => r.branch_budget(),
            Self::Own(r) => r.branch_budget(),
        }
    }

    async fn run_branches(
        &mut self,
        past: &Self::Kv,
        branches: &[Branch<'_>],
    ) -> Result<Vec<Logits>, RuntimeError> {
        match (self, past) {
            (Self::Onnx(r), AnyKv::Onnx(k)) => r.run_branches(k, branches).await,
            (Self::Own(r), AnyKv::Own(k)) => r.run_branches(k, branches).await,
            _ => Err(foreign()),
        }
    }

    fn kv_len(&self, kv: &Self::Kv) -> usize {
        match (self, kv) {
            (Self::Onnx(r), AnyKv::Onnx(k)) => r.kv_len(k),
            (Self::Own(r), AnyKv::Own(k)) => r.kv_len(k),
            _ => 0,
        }
    }

    fn kv_origin(&self) -> String {
        match self {
            Self::Onnx(r) => r.kv_origin(),
            Self::Own(r) => r.kv_origin(),
        }
    }

    fn kv_dtype(&self) -> Dtype {
        match self {
            Self::Onnx(r) => r.kv_dtype(),
            Self::Own(r) => r.kv_dtype(),
        }
    }

    async fn export_kv(&mut self, kv: &Self::Kv) -> Result<KvImage, RuntimeError> {
        match (self, kv) {
            (Self::Onnx(r), AnyKv::Onnx(k)) => r.export_kv(k).await,
            (Self::Own(r), AnyKv::Own(k)) => r.export_kv(k).await,
            _ => Err(foreign()),
        }
    }

    async fn import_kv(&mut self, view: &KvView<'_>) -> Result<Self::Kv, RuntimeError> {
        match self {
            Self::Onnx(r) => Ok(AnyKv::Onnx(r.import_kv(view).await?)),
            Self::Own(r) => Ok(AnyKv::Own(r.import_kv(view).await?)),
        }
    }

    fn kv_tensors(&self, kv: &Self::Kv) -> usize {
        match (self, kv) {
            (Self::Onnx(r), AnyKv::Onnx(k)) => r.kv_tensors(k),
            (Self::Own(r), AnyKv::Own(k)) => r.kv_tensors(k),
            _ => 0,
        }
    }

    fn release(&mut self, kv: Self::Kv) {
        match (self, kv) {
            (Self::Onnx(r), AnyKv::Onnx(k)) => r.release(k),
            (Self::Own(r), AnyKv::Own(k)) => r.release(k),
            _ => {}
        }
    }

    fn meter(&self) -> &super::Meter {
        match self {
            Self::Onnx(r) => r.meter(),
            Self::Own(r) => r.meter(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Onnx(r) => r.describe(),
            Self::Own(r) => r.describe(),
        }
    }
}
