//! Between the engine's values and ONNX Runtime's tensors.

use half::f16;
use ort::value::{DynValue, Tensor, TensorElementType, ValueType};

use super::{run_err, Dtype, RuntimeError};
use crate::core::read::logits::Logits;

pub(super) fn dtype_of(ty: &ValueType, name: &str) -> Result<(Dtype, Vec<i64>), RuntimeError> {
    match ty {
        ValueType::Tensor { ty, shape, .. } => {
            let d = match ty {
                TensorElementType::Float32 => Dtype::F32,
                TensorElementType::Float16 => Dtype::F16,
                other => {
                    return Err(RuntimeError::Signature(format!(
                        "{name} is {other:?}; float32 or float16 expected"
                    )))
                }
            };
            Ok((d, shape.iter().copied().collect()))
        }
        _ => Err(RuntimeError::Signature(format!("{name} is not a tensor"))),
    }
}

pub(super) fn i64_tensor(v: &[i64]) -> Result<DynValue, RuntimeError> {
    Ok(Tensor::<i64>::from_array(([1usize, v.len()], v.to_vec()))
        .map_err(run_err)?
        .into_dyn())
}

pub(super) fn take_logits(v: &DynValue) -> Result<Logits, RuntimeError> {
    match v.dtype() {
        ValueType::Tensor {
            ty: TensorElementType::Float32,
            ..
        } => {
            let (shape, data) = v.try_extract_tensor::<f32>().map_err(run_err)?;
            Ok(Logits::f32(
                shape.iter().map(|&d| d as usize).collect(),
                data.to_vec(),
            ))
        }
        ValueType::Tensor {
            ty: TensorElementType::Float16,
            ..
        } => {
            let (shape, data) = v.try_extract_tensor::<f16>().map_err(run_err)?;
            Ok(Logits::f16(
                shape.iter().map(|&d| d as usize).collect(),
                data.to_vec(),
            ))
        }
        other => Err(RuntimeError::Run(format!("logits came back as {other:?}"))),
    }
}
