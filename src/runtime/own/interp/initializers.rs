//! From ONNX bytes to values: initializers (inline or in the external-data
//! file) and `Constant` attributes, converted to the interpreter's types.

use std::sync::Arc;

use half::f16;

use crate::kernels::tensor::{Data, Value};
use crate::kernels::KernelError;
use crate::onnx_pb::{dtype, NodeProto, TensorProto};

/// Where a tensor's external bytes live: the location named in the graph →
/// that file's bytes.
pub type External<'a> = dyn Fn(&str) -> Option<&'a [u8]> + 'a;

fn init_err(name: &str, reason: impl Into<String>) -> KernelError {
    KernelError::Initializer {
        name: name.to_string(),
        reason: reason.into(),
    }
}

fn ext_value<'t>(t: &'t TensorProto, key: &str) -> Option<&'t str> {
    t.external_data
        .iter()
        .find(|e| e.key.as_deref() == Some(key))
        .and_then(|e| e.value.as_deref())
}

/// A tensor's raw little-endian bytes, wherever they live.
fn raw_bytes<'t>(
    t: &'t TensorProto,
    external: &External<'_>,
) -> Result<std::borrow::Cow<'t, [u8]>, KernelError> {
    let name = t.name.as_deref().unwrap_or("");
    if t.data_location == Some(1) {
        let loc = ext_value(t, "location")
            .ok_or_else(|| init_err(name, "external, without a location"))?;
        let file = external(loc)
            .ok_or_else(|| init_err(name, format!("its external file {loc} was not given")))?;
        let parse = |key: &str| -> Result<Option<u64>, KernelError> {
            ext_value(t, key)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|e| init_err(name, format!("{key} {v:?}: {e}")))
                })
                .transpose()
        };
        let offset = parse("offset")?.unwrap_or(0);
        let length = parse("length")?.unwrap_or((file.len() as u64).saturating_sub(offset));
        let end = offset
            .checked_add(length)
            .filter(|&e| e <= file.len() as u64)
            .ok_or_else(|| {
                init_err(
                    name,
                    format!(
                        "bytes {offset}..{} beyond {loc}'s {} (truncated?)",
                        offset.saturating_add(length),
                        file.len()
                    ),
                )
            })?;
        return Ok(std::borrow::Cow::Owned(
            file[offset as usize..end as usize].to_vec(),
        ));
    }
    if let Some(raw) = &t.raw_data {
        return Ok(std::borrow::Cow::Borrowed(raw));
    }
    match crate::onnx_pb::inline_bytes(t) {
        Some(r) => r
            .map(std::borrow::Cow::Owned)
            .map_err(|e| init_err(name, e.to_string())),
        None => Err(init_err(name, "external tensor read as inline")),
    }
}

/// An initializer or constant as an interpreter value.
pub fn tensor_value(t: &TensorProto, external: &External<'_>) -> Result<Value, KernelError> {
    let name = t.name.as_deref().unwrap_or("");
    let shape: Vec<usize> = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| init_err(name, format!("dim {d}"))))
        .collect::<Result<_, _>>()?;
    // The file's dims, checked before their product is taken: an empty
    // tensor may claim any dims, and ops would allocate by them.
    if !crate::kernels::tensor::shape_in_bounds(&shape) {
        return Err(init_err(
            name,
            format!("dims {shape:?} span more than 2^31 elements"),
        ));
    }
    let n: usize = shape.iter().product();
    let raw = raw_bytes(t, external)?;
    let dt = t.data_type.unwrap_or(0);
    let size = crate::onnx_pb::dtype_size(dt).ok_or_else(|| {
        init_err(
            name,
            format!(
                "data type {} is not computed here",
                crate::onnx_pb::dtype_name(dt)
            ),
        )
    })?;
    if raw.len() != n * size {
        return Err(init_err(
            name,
            format!(
                "{} bytes for shape {shape:?} of {}",
                raw.len(),
                crate::onnx_pb::dtype_name(dt)
            ),
        ));
    }
    let data = match dt {
        dtype::FLOAT => Data::F32(
            raw.as_chunks::<4>()
                .0
                .iter()
                .map(|&c| f32::from_le_bytes(c))
                .collect(),
        ),
        dtype::FLOAT16 => Data::F32(
            raw.as_chunks::<2>()
                .0
                .iter()
                .map(|&c| f16::from_le_bytes(c).to_f32())
                .collect(),
        ),
        dtype::INT64 => Data::I64(
            raw.as_chunks::<8>()
                .0
                .iter()
                .map(|&c| i64::from_le_bytes(c))
                .collect(),
        ),
        dtype::INT32 => Data::I64(
            raw.as_chunks::<4>()
                .0
                .iter()
                .map(|&c| i32::from_le_bytes(c) as i64)
                .collect(),
        ),
        dtype::UINT8 => Data::U8(Arc::new(raw.into_owned())),
        other => {
            return Err(init_err(
                name,
                format!(
                    "data type {} is not computed here",
                    crate::onnx_pb::dtype_name(other)
                ),
            ))
        }
    };
    Ok(Value { shape, data })
}

pub fn node_name(n: &NodeProto) -> String {
    n.name
        .clone()
        .unwrap_or_else(|| n.output.first().cloned().unwrap_or_default())
}

pub use crate::onnx_pb::{attr_f, attr_i, attr_s, attr_t};
