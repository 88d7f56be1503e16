//! Which backend a browser engine runs on, and why: WebGPU when it can run the
//! entry, else our own runtime on the entry's own int4 file, else (a float
//! graph) the entry's WASM variant (spec §5, §12). A pure decision over
//! what the page measured, so it is tested natively and the reason is always
//! reported, never silent.

use serde::Serialize;

use crate::core::CoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Requested {
    Auto,
    WebGpu,
    Wasm,
    /// Our own runtime over the entry's own (int4) file.
    Cpu,
}

impl Requested {
    pub fn parse(s: &str) -> Result<Self, CoreError> {
        match s {
            "auto" => Ok(Self::Auto),
            "webgpu" => Ok(Self::WebGpu),
            "wasm" => Ok(Self::Wasm),
            "cpu" => Ok(Self::Cpu),
            other => Err(CoreError::InvalidOption {
                field: "backend",
                value: other.to_string(),
                allowed: "\"auto\", \"webgpu\", \"wasm\", \"cpu\"",
            }),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Chosen {
    WebGpu,
    Wasm,
    Cpu,
}

/// What the page found when it asked for a WebGPU device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gpu {
    Unavailable(String),
    Available { adapter: String, f16: bool },
}

/// The model as the choice sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model<'a> {
    pub id: &'a str,
    pub needs_f16: bool,
    /// The catalog's WASM variant (may be the model itself).
    pub wasm_variant: Option<&'a str>,
    /// An int4 graph (MatMulNBits), which our own runtime computes.
    pub int4: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Choice {
    pub backend: Chosen,
    /// The model id to load (the WASM variant when falling back).
    pub model: String,
    pub reason: String,
}

pub fn choose(requested: Requested, gpu: &Gpu, model: &Model<'_>) -> Result<Choice, CoreError> {
    let wasm = |why: String| Choice {
        backend: Chosen::Wasm,
        model: model.wasm_variant.unwrap_or(model.id).to_string(),
        reason: why,
    };
    let gpu_problem = match gpu {
        Gpu::Unavailable(why) => Some(format!("WebGPU unavailable: {why}")),
        Gpu::Available {
            adapter,
            f16: false,
        } if model.needs_f16 => Some(format!(
            "{} is float16 and the WebGPU adapter ({adapter}) lacks shader-f16",
            model.id
        )),
        Gpu::Available { .. } => None,
    };
    match (requested, gpu_problem) {
        (Requested::Cpu, _) => Ok(Choice {
            backend: Chosen::Cpu,
            model: model.id.to_string(),
            reason:
                "the cpu backend (readout's own kernels over the entry's own file) was asked for"
                    .into(),
        }),
        (Requested::Wasm, _) => Ok(wasm("the WASM backend was asked for".into())),
        (Requested::WebGpu, Some(p)) => Err(CoreError::BackendUnavailable {
            backend: "webgpu",
            reason: p,
        }),
        // Our runtime reads the entry's own int4 file (SmolLM2's q4f16 file
        // is a seventh of the float32 variant's download) and outruns
        // onnxruntime-web's WASM backend on it; a float graph it does not
        // compute.
        (Requested::Auto, Some(p)) if model.int4 => Ok(Choice {
            backend: Chosen::Cpu,
            model: model.id.to_string(),
            reason: format!(
                "{p}; falling back to the cpu backend (readout's own kernels over the entry's own int4 file)"
            ),
        }),
        (Requested::Auto, Some(p)) => Ok(wasm(format!(
            "{p}; falling back to the WASM backend (a float graph: the cpu backend computes int4 graphs)"
        ))),
        (_, None) => {
            let Gpu::Available { adapter, f16 } = gpu else {
                unreachable!("no problem means available")
            };
            let how = if requested == Requested::Auto {
                "auto: a WebGPU adapter exists"
            } else {
                "the WebGPU backend was asked for"
            };
            Ok(Choice {
                backend: Chosen::WebGpu,
                model: model.id.to_string(),
                reason: format!(
                    "{how} ({adapter}{})",
                    if *f16 {
                        ", shader-f16"
                    } else {
                        ", no shader-f16"
                    }
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q4F16: Model = Model {
        id: "m-q4f16",
        needs_f16: true,
        wasm_variant: Some("m-fp32"),
        int4: true,
    };
    const Q4: Model = Model {
        id: "m-q4",
        needs_f16: false,
        wasm_variant: Some("m-fp32"),
        int4: true,
    };
    const FP16: Model = Model {
        id: "m-fp16",
        needs_f16: true,
        wasm_variant: Some("m-fp32"),
        int4: false,
    };

    fn gpu(f16: bool) -> Gpu {
        Gpu::Available {
            adapter: "google / swiftshader".into(),
            f16,
        }
    }

    #[test]
    fn auto_prefers_webgpu_when_the_dtype_runs() {
        let c = choose(Requested::Auto, &gpu(true), &Q4F16).unwrap();
        assert_eq!((c.backend, c.model.as_str()), (Chosen::WebGpu, "m-q4f16"));
        let c = choose(Requested::Auto, &gpu(false), &Q4).unwrap();
        assert_eq!(c.backend, Chosen::WebGpu);
    }

    #[test]
    fn auto_falls_back_to_our_runtime_on_the_entrys_own_file_with_the_reason() {
        let c = choose(Requested::Auto, &gpu(false), &Q4F16).unwrap();
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Cpu, "m-q4f16"));
        assert!(c.reason.contains("lacks shader-f16"), "{}", c.reason);
        assert!(c.reason.contains("cpu backend"), "{}", c.reason);
        let c = choose(
            Requested::Auto,
            &Gpu::Unavailable("navigator.gpu is undefined".into()),
            &Q4,
        )
        .unwrap();
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Cpu, "m-q4"));
        assert!(
            c.reason.contains("navigator.gpu is undefined"),
            "{}",
            c.reason
        );
    }

    #[test]
    fn auto_takes_the_wasm_variant_for_a_float_graph() {
        let c = choose(Requested::Auto, &gpu(false), &FP16).unwrap();
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Wasm, "m-fp32"));
        assert!(c.reason.contains("a float graph"), "{}", c.reason);
        // With a device that runs it, WebGPU still comes first.
        let c = choose(Requested::Auto, &gpu(true), &FP16).unwrap();
        assert_eq!((c.backend, c.model.as_str()), (Chosen::WebGpu, "m-fp16"));
    }

    #[test]
    fn explicit_requests() {
        let e = choose(Requested::WebGpu, &gpu(false), &Q4F16).unwrap_err();
        assert!(e.to_string().contains("shader-f16"), "{e}");
        assert_eq!(e.info().code, "backend_unavailable");
        let c = choose(Requested::Wasm, &gpu(true), &Q4F16).unwrap();
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Wasm, "m-fp32"));
        let e = Requested::parse("cuda").unwrap_err();
        assert_eq!(e.info().code, "invalid_option");
        assert_eq!(e.info().field.as_deref(), Some("backend"));
        assert!(e.to_string().contains("\"cuda\""), "{e}");
        // Our own runtime reads the entry's own int4 file, never the float32 variant.
        let c = choose(Requested::parse("cpu").unwrap(), &gpu(false), &Q4F16).unwrap();
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Cpu, "m-q4f16"));
    }
}
