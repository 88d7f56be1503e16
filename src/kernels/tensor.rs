//! The values the interpreter passes between nodes: float32 activations,
//! int64 shapes and ids, and uint8 bytes (int4 tables, shared, never copied).

use std::sync::Arc;

#[derive(Debug, Clone)]
pub enum Data {
    F32(Vec<f32>),
    I64(Vec<i64>),
    U8(Arc<Vec<u8>>),
}

#[derive(Debug, Clone)]
pub struct Value {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Value {
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        Self {
            shape,
            data: Data::F32(data),
        }
    }

    pub fn i64(shape: Vec<usize>, data: Vec<i64>) -> Self {
        Self {
            shape,
            data: Data::I64(data),
        }
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            Data::F32(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            Data::I64(v) => Some(v),
            _ => None,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self.data {
            Data::F32(_) => "float32",
            Data::I64(_) => "int64",
            Data::U8(_) => "uint8",
        }
    }

    /// The same data under another shape (element counts must agree).
    pub fn reshaped(&self, shape: Vec<usize>) -> Self {
        Self {
            shape,
            data: self.data.clone(),
        }
    }
}

/// The most elements a shape may span, its zero dims counted as one. A file
/// or a reshape can give an empty tensor a dim of 2^40; an op that keeps the
/// other dims (a reduction, a broadcast) would then allocate by them, so
/// every shape taken from a file or a spec is held to this. Real models'
/// largest tensors (a 256k vocabulary by 4k) are under 2^31.
pub const MAX_NOMINAL_ELEMENTS: u64 = 1 << 31;

/// Whether `shape` spans at most [`MAX_NOMINAL_ELEMENTS`] (zeros as ones);
/// overflow-checked, so no shape can wrap to a small count.
pub fn shape_in_bounds(shape: &[usize]) -> bool {
    shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul((d as u64).max(1)))
        .is_some_and(|n| n <= MAX_NOMINAL_ELEMENTS)
}
