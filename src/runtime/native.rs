//! The native runtime: the `ort` crate over a dynamically loaded ONNX Runtime
//! 1.30 (the `libonnxruntime.so.1` that the onnxruntime-node npm package
//! ships), the same release onnxruntime-web is built from.

use std::path::{Path, PathBuf};

use half::f16;
use ort::session::{OutputSelector, RunOptions, Session, SessionInputValue};
use ort::value::{DynValue, Tensor, ValueType};

use super::{Dtype, RunOutput, Runtime, RuntimeError, Signature, Step};
use crate::core::read::logits::Logits;

mod library;
mod tensors;

use self::library::environment;
pub use self::library::find_library;
use self::tensors::{dtype_of, i64_tensor, take_logits};
use super::kv_image::{f32_from_le, f32_to_le, u16_from_le, u16_to_le};
use super::{KvImage, KvView};

/// A past natively: one tensor per `past_key_values.*` input, in signature order.
pub struct NativeKv {
    values: Vec<DynValue>,
    len: usize,
}

pub struct NativeRuntime {
    session: Session,
    signature: Signature,
    meter: super::Meter,
    path: PathBuf,
    /// The ONNX Runtime library loaded (`library::find_library`).
    library: PathBuf,
}

#[derive(Debug, Clone)]
pub struct NativeOptions {
    pub intra_threads: usize,
}

impl Default for NativeOptions {
    fn default() -> Self {
        Self {
            intra_threads: crate::core::input::thread_policy::default_threads(
                crate::core::input::thread_policy::Host::Native,
                crate::platform::cores(),
                true,
            ),
        }
    }
}

fn run_err(e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Run(e.to_string())
}

impl NativeRuntime {
    /// `kv_dims` (kv heads, head dim, from config.json) fill the past's
    /// symbolic dims; where the graph fixes a dim it must agree.
    pub fn load(
        path: &Path,
        opts: &NativeOptions,
        kv_dims: [usize; 2],
    ) -> Result<Self, RuntimeError> {
        let (env, library) = environment()?;
        let load_err = |e: &dyn std::fmt::Display| RuntimeError::Load {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let mut builder = Session::builder(&env).map_err(|e| load_err(&e))?;
        builder = builder
            .with_intra_threads(opts.intra_threads)
            .map_err(|e| load_err(&e))?;
        let session = builder.commit_from_file(path).map_err(|e| load_err(&e))?;
        let inputs: Vec<String> = session
            .inputs()
            .iter()
            .map(|o| o.name().to_string())
            .collect();
        let outputs: Vec<String> = session
            .outputs()
            .iter()
            .map(|o| o.name().to_string())
            .collect();
        let past0 = session
            .inputs()
            .iter()
            .find(|o| o.name() == "past_key_values.0.key")
            .ok_or_else(|| {
                RuntimeError::Signature(format!(
                    "no past_key_values.0.key input (inputs: {inputs:?})"
                ))
            })?;
        let (kv_dtype, declared) = dtype_of(past0.dtype(), past0.name())?;
        let kv_shape = Signature::resolve_kv_shape(declared, kv_dims)?;
        let logits = session
            .outputs()
            .iter()
            .find(|o| o.name() == "logits")
            .ok_or_else(|| {
                RuntimeError::Signature(format!("no logits output (outputs: {outputs:?})"))
            })?;
        let (logits_dtype, _) = dtype_of(logits.dtype(), "logits")?;
        let signature = Signature::from_io(inputs, outputs, kv_dtype, kv_shape, logits_dtype)?;
        Ok(Self {
            session,
            signature,
            meter: super::Meter::new(),
            path: path.to_path_buf(),
            library,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A zero-length past: shape `[1, kv_heads, 0, head_dim]`.
    fn empty_past(&self) -> Result<Vec<DynValue>, RuntimeError> {
        let shape = self.signature.empty_past_dims();
        let mut v = Vec::with_capacity(self.signature.past.len() * 2);
        for _ in 0..self.signature.past.len() * 2 {
            let t: DynValue = match self.signature.kv_dtype {
                Dtype::F32 => Tensor::<f32>::from_array((shape, Vec::<f32>::new()))
                    .map_err(run_err)?
                    .into_dyn(),
                Dtype::F16 => Tensor::<f16>::from_array((shape, Vec::<f16>::new()))
                    .map_err(run_err)?
                    .into_dyn(),
            };
            v.push(t);
        }
        Ok(v)
    }
}

/// Which outputs a step fetches.
#[derive(Debug, Clone, Copy)]
struct Fetch {
    logits: bool,
    present: bool,
}

struct Fetched {
    logits: Option<Logits>,
    present: Option<NativeKv>,
    hidden: Option<Logits>,
}

impl NativeRuntime {
    /// One step, fetching only what is asked for: ONNX Runtime then runs only
    /// the nodes those outputs need, so a prefill without logits skips the
    /// head's matmul over every row as well as the copy of `[1, S, V]`.
    fn forward(
        &mut self,
        step: &Step,
        past: Option<&NativeKv>,
        fetch: Fetch,
    ) -> Result<Fetched, RuntimeError> {
        let Fetch {
            logits: want_logits,
            present: keep_present,
        } = fetch;
        let sig = &self.signature;
        let empty;
        let past_values: &[DynValue] = match past {
            Some(kv) => &kv.values,
            None => {
                empty = self.empty_past()?;
                &empty
            }
        };
        let mut feed: Vec<(String, SessionInputValue<'_>)> =
            Vec::with_capacity(3 + past_values.len());
        sig.check_step(step)?;
        feed.push(("input_ids".into(), i64_tensor(&step.input_ids)?.into()));
        if let Some(m) = &step.attention_mask {
            feed.push(("attention_mask".into(), i64_tensor(m)?.into()));
        }
        if let Some(p) = &step.position_ids {
            feed.push(("position_ids".into(), i64_tensor(p)?.into()));
        }
        for (i, pair) in sig.past.iter().enumerate() {
            feed.push((pair.past_key.clone(), (&past_values[2 * i]).into()));
            feed.push((pair.past_value.clone(), (&past_values[2 * i + 1]).into()));
        }
        let mut selector = OutputSelector::no_default();
        if want_logits {
            selector = selector.with("logits");
        }
        let want_hidden = want_logits && sig.exposes_hidden();
        if want_hidden {
            selector = selector.with(super::HIDDEN_OUTPUT);
        }
        if keep_present {
            for pair in &sig.past {
                selector = selector
                    .with(pair.present_key.clone())
                    .with(pair.present_value.clone());
            }
        }
        let options = RunOptions::new().map_err(run_err)?.with_outputs(selector);
        let present_names: Vec<(String, String)> = sig
            .past
            .iter()
            .map(|p| (p.present_key.clone(), p.present_value.clone()))
            .collect();
        let mut out = self
            .session
            .run_with_options(feed, &options)
            .map_err(run_err)?;
        let logits = if want_logits {
            Some(take_logits(out.get("logits").ok_or_else(|| {
                RuntimeError::Run("no logits in the outputs".into())
            })?)?)
        } else {
            None
        };
        let hidden = if want_hidden {
            Some(take_logits(out.get(super::HIDDEN_OUTPUT).ok_or_else(
                || RuntimeError::Run("no last_hidden in the outputs".into()),
            )?)?)
        } else {
            None
        };
        let present = if keep_present {
            let mut values = Vec::with_capacity(present_names.len() * 2);
            for (k, v) in &present_names {
                for name in [k, v] {
                    values.push(out.remove(name).ok_or_else(|| {
                        RuntimeError::Run(format!("{name} missing from the outputs"))
                    })?);
                }
            }
            let len = match values[0].dtype() {
                ValueType::Tensor { shape, .. } if shape.len() == 4 => shape[2] as usize,
                other => {
                    return Err(RuntimeError::Run(format!(
                        "present.0.key came back as {other:?}"
                    )))
                }
            };
            Some(NativeKv { values, len })
        } else {
            None
        };
        self.meter.read_back += (logits.as_ref().map_or(0, |l| l.byte_len())
            + hidden.as_ref().map_or(0, |h| h.byte_len())) as u64;
        Ok(Fetched {
            logits,
            present,
            hidden,
        })
    }
}

impl Runtime for NativeRuntime {
    type Kv = NativeKv;

    fn signature(&self) -> &Signature {
        &self.signature
    }

    async fn run(
        &mut self,
        step: &Step,
        past: Option<&NativeKv>,
        keep_present: bool,
    ) -> Result<RunOutput<NativeKv>, RuntimeError> {
        let f = self.forward(
            step,
            past,
            Fetch {
                logits: true,
                present: keep_present,
            },
        )?;
        let logits = f
            .logits
            .ok_or_else(|| RuntimeError::Run("no logits in the outputs".into()))?;
        Ok(RunOutput {
            logits,
            present: f.present,
            hidden: f.hidden,
        })
    }

    /// A prefill or chunk: only `present.*` is fetched (see `forward`).
    async fn extend(
        &mut self,
        step: &Step,
        past: Option<&NativeKv>,
    ) -> Result<NativeKv, RuntimeError> {
        self.forward(
            step,
            past,
            Fetch {
                logits: false,
                present: true,
            },
        )?
        .present
        .ok_or_else(|| RuntimeError::Run("the run returned no present.*".into()))
    }

    fn kv_len(&self, kv: &NativeKv) -> usize {
        kv.len
    }

    fn kv_tensors(&self, kv: &NativeKv) -> usize {
        kv.values.len()
    }

    fn kv_origin(&self) -> String {
        // The library file names its release (a past from another release
        // is another computation).
        let file = self.library.file_name().unwrap_or_default();
        format!("onnxruntime (native, CPU; {})", file.to_string_lossy())
    }

    async fn export_kv(&mut self, kv: &NativeKv) -> Result<KvImage, RuntimeError> {
        let dtype = self.signature.kv_dtype;
        let tensors = kv
            .values
            .iter()
            .map(|v| match dtype {
                Dtype::F32 => Ok(f32_to_le(v.try_extract_tensor::<f32>().map_err(run_err)?.1)),
                Dtype::F16 => {
                    let (_, d) = v.try_extract_tensor::<f16>().map_err(run_err)?;
                    Ok(u16_to_le(
                        &d.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    ))
                }
            })
            .collect::<Result<_, RuntimeError>>()?;
        Ok(KvImage {
            dtype,
            len: kv.len,
            tensors,
        })
    }

    async fn import_kv(&mut self, view: &KvView<'_>) -> Result<NativeKv, RuntimeError> {
        let dtype = self.signature.kv_dtype;
        let dims = view.check(&self.signature, dtype)?;
        let values = view
            .tensors
            .iter()
            .map(|b| {
                Ok(match dtype {
                    Dtype::F32 => Tensor::<f32>::from_array((dims, f32_from_le(b)))
                        .map_err(run_err)?
                        .into_dyn(),
                    Dtype::F16 => {
                        let bits = u16_from_le(b)
                            .into_iter()
                            .map(f16::from_bits)
                            .collect::<Vec<_>>();
                        Tensor::<f16>::from_array((dims, bits))
                            .map_err(run_err)?
                            .into_dyn()
                    }
                })
            })
            .collect::<Result<_, RuntimeError>>()?;
        Ok(NativeKv {
            values,
            len: view.len,
        })
    }

    fn meter(&self) -> &super::Meter {
        &self.meter
    }

    fn describe(&self) -> String {
        format!(
            "onnxruntime (native, CPU; {}), {}",
            self.library.display(),
            self.path.display()
        )
    }
}
