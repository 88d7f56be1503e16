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
    /// An int4 graph (MatMulNBits), which our own runtime computes; `None`
    /// for a folder whose graph has not been fetched yet.
    pub int4: Option<bool>,
}

/// One backend a load may run on, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Choice {
    pub backend: Chosen,
    /// The model id to load (the WASM variant when falling back).
    pub model: String,
    pub reason: String,
    /// Taken only when the graph proves int4 (a folder's, known once fetched).
    #[serde(skip)]
    pub only_int4: bool,
}

/// Whose runtime computes a graph on a CPU: ours, or ONNX Runtime's (the
/// browser's WASM backend, natively the `ort` library).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuRuntime {
    Ours,
    OnnxRuntime,
}

/// The one rule for a CPU, the same in the browser and natively: an int4
/// graph runs on our runtime, and ONNX Runtime runs it instead when ours
/// refuses one of its operators; a float graph runs on ONNX Runtime. With
/// `int4` unknown, ours comes first, taken only if the graph proves int4.
/// Why ours first: its cached path equals one uncached forward bit for bit,
/// while ONNX Runtime's MatMulNBits quantises activations in a way that
/// depends on the batch's shape (docs/readout-modes.md).
pub fn cpu_order(int4: Option<bool>) -> Vec<(CpuRuntime, bool)> {
    match int4 {
        Some(true) => vec![(CpuRuntime::Ours, false), (CpuRuntime::OnnxRuntime, false)],
        None => vec![(CpuRuntime::Ours, true), (CpuRuntime::OnnxRuntime, false)],
        Some(false) => vec![(CpuRuntime::OnnxRuntime, false)],
    }
}

/// The reason a load gives when the candidate it tried first refused the
/// graph (`graph_unsupported`) and `next` runs it instead.
pub fn fell_back(first_reason: &str, first: &str, error: &str, next: &str) -> String {
    format!("{first_reason}; {first} does not compute this graph ({error}), so {next} runs it")
}

/// The backends a browser load tries, in order, each with its reason: the
/// load takes the first that builds, passing over an `only_int4` one when
/// the graph is float and over any but the last when its runtime refuses
/// the graph's operators. An explicit request that cannot run is refused
/// here, before any download.
pub fn choose(
    requested: Requested,
    gpu: &Gpu,
    model: &Model<'_>,
) -> Result<Vec<Choice>, CoreError> {
    let one = |backend, model: &str, reason: String| Choice {
        backend,
        model: model.to_string(),
        reason,
        only_int4: false,
    };
    let wasm_model = model.wasm_variant.unwrap_or(model.id);
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
        (Requested::Cpu, _) => Ok(vec![one(
            Chosen::Cpu,
            model.id,
            "the cpu backend (readout's own kernels over the entry's own file) was asked for"
                .into(),
        )]),
        (Requested::Wasm, _) => Ok(vec![one(
            Chosen::Wasm,
            wasm_model,
            "the WASM backend was asked for".into(),
        )]),
        (Requested::WebGpu, Some(p)) => Err(CoreError::BackendUnavailable {
            backend: "webgpu",
            reason: p,
        }),
        // Our runtime reads the entry's own int4 file (SmolLM2's q4f16 file
        // is a seventh of the float32 variant's download); onnxruntime-web's
        // WASM backend runs the same bytes when ours lacks an operator, and
        // a float graph's WASM variant.
        (Requested::Auto, Some(p)) => Ok(cpu_order(model.int4)
            .into_iter()
            .map(|(runtime, only_int4)| match runtime {
                CpuRuntime::Ours => Choice {
                    only_int4,
                    ..one(
                        Chosen::Cpu,
                        model.id,
                        format!("{p}; falling back to the cpu backend (readout's own kernels over the entry's own int4 file)"),
                    )
                },
                CpuRuntime::OnnxRuntime if model.int4 == Some(true) => one(
                    Chosen::Wasm,
                    model.id,
                    format!("{p}; falling back to the WASM backend"),
                ),
                CpuRuntime::OnnxRuntime => one(
                    Chosen::Wasm,
                    wasm_model,
                    format!("{p}; falling back to the WASM backend (a float graph: the cpu backend computes int4 graphs)"),
                ),
            })
            .collect()),
        (_, None) => {
            let Gpu::Available { adapter, f16 } = gpu else {
                unreachable!("no problem means available")
            };
            let how = if requested == Requested::Auto {
                "auto: a WebGPU adapter exists"
            } else {
                "the WebGPU backend was asked for"
            };
            let f16 = if *f16 {
                ", shader-f16"
            } else {
                ", no shader-f16"
            };
            Ok(vec![one(
                Chosen::WebGpu,
                model.id,
                format!("{how} ({adapter}{f16})"),
            )])
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
        int4: Some(true),
    };
    const Q4: Model = Model {
        id: "m-q4",
        needs_f16: false,
        wasm_variant: Some("m-fp32"),
        int4: Some(true),
    };
    const FP16: Model = Model {
        id: "m-fp16",
        needs_f16: true,
        wasm_variant: Some("m-fp32"),
        int4: Some(false),
    };

    fn gpu(f16: bool) -> Gpu {
        Gpu::Available {
            adapter: "google / swiftshader".into(),
            f16,
        }
    }

    #[test]
    fn auto_prefers_webgpu_when_the_dtype_runs() {
        let c = choose(Requested::Auto, &gpu(true), &Q4F16)
            .unwrap()
            .remove(0);
        assert_eq!((c.backend, c.model.as_str()), (Chosen::WebGpu, "m-q4f16"));
        let c = choose(Requested::Auto, &gpu(false), &Q4).unwrap().remove(0);
        assert_eq!(c.backend, Chosen::WebGpu);
    }

    #[test]
    fn auto_falls_back_to_our_runtime_on_the_entrys_own_file_with_the_reason() {
        let c = choose(Requested::Auto, &gpu(false), &Q4F16)
            .unwrap()
            .remove(0);
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Cpu, "m-q4f16"));
        assert!(c.reason.contains("lacks shader-f16"), "{}", c.reason);
        assert!(c.reason.contains("cpu backend"), "{}", c.reason);
        let c = choose(
            Requested::Auto,
            &Gpu::Unavailable("navigator.gpu is undefined".into()),
            &Q4,
        )
        .unwrap()
        .remove(0);
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Cpu, "m-q4"));
        assert!(
            c.reason.contains("navigator.gpu is undefined"),
            "{}",
            c.reason
        );
    }

    #[test]
    fn auto_takes_the_wasm_variant_for_a_float_graph() {
        let c = choose(Requested::Auto, &gpu(false), &FP16)
            .unwrap()
            .remove(0);
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Wasm, "m-fp32"));
        assert!(c.reason.contains("a float graph"), "{}", c.reason);
        // With a device that runs it, WebGPU still comes first.
        let c = choose(Requested::Auto, &gpu(true), &FP16)
            .unwrap()
            .remove(0);
        assert_eq!((c.backend, c.model.as_str()), (Chosen::WebGpu, "m-fp16"));
    }

    #[test]
    fn without_webgpu_an_int4_graph_has_the_wasm_backend_behind_our_runtime_and_a_float_one_only_wasm(
    ) {
        let none = Gpu::Unavailable("navigator.gpu is undefined".into());
        let order = |m: &Model| -> Vec<(Chosen, String, bool)> {
            choose(Requested::Auto, &none, m)
                .unwrap()
                .into_iter()
                .map(|c| (c.backend, c.model, c.only_int4))
                .collect()
        };
        // The same file behind ours: the WASM backend runs every operator.
        assert_eq!(
            order(&Q4),
            [
                (Chosen::Cpu, "m-q4".into(), false),
                (Chosen::Wasm, "m-q4".into(), false)
            ]
        );
        assert_eq!(order(&FP16), [(Chosen::Wasm, "m-fp32".into(), false)]);
        // A folder not yet fetched: ours only if its graph proves int4.
        let folder = Model {
            id: "https://host/m/",
            needs_f16: false,
            wasm_variant: None,
            int4: None,
        };
        assert_eq!(
            order(&folder),
            [
                (Chosen::Cpu, "https://host/m/".into(), true),
                (Chosen::Wasm, "https://host/m/".into(), false)
            ]
        );
        // An explicit request is one candidate; WebGPU that runs is one too.
        assert_eq!(choose(Requested::Cpu, &none, &Q4).unwrap().len(), 1);
        assert_eq!(choose(Requested::Auto, &gpu(true), &Q4).unwrap().len(), 1);
        assert_eq!(
            cpu_order(Some(true)),
            [(CpuRuntime::Ours, false), (CpuRuntime::OnnxRuntime, false)]
        );
        assert_eq!(cpu_order(Some(false)), [(CpuRuntime::OnnxRuntime, false)]);
    }

    #[test]
    fn explicit_requests() {
        let e = choose(Requested::WebGpu, &gpu(false), &Q4F16).unwrap_err();
        assert!(e.to_string().contains("shader-f16"), "{e}");
        assert_eq!(e.info().code, "backend_unavailable");
        let c = choose(Requested::Wasm, &gpu(true), &Q4F16)
            .unwrap()
            .remove(0);
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Wasm, "m-fp32"));
        let e = Requested::parse("cuda").unwrap_err();
        assert_eq!(e.info().code, "invalid_option");
        assert_eq!(e.info().field.as_deref(), Some("backend"));
        assert!(e.to_string().contains("\"cuda\""), "{e}");
        // Our own runtime reads the entry's own int4 file, never the float32 variant.
        let c = choose(Requested::parse("cpu").unwrap(), &gpu(false), &Q4F16)
            .unwrap()
            .remove(0);
        assert_eq!((c.backend, c.model.as_str()), (Chosen::Cpu, "m-q4f16"));
    }
}
