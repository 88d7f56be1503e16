//! Logits as a runtime returns them: `[1, S|1, V|K]`, float32 or float16.

use half::f16;

#[derive(Debug, Clone, PartialEq)]
pub enum LogitsData {
    F32(Vec<f32>),
    F16(Vec<f16>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Logits {
    /// The dims of the tensor actually returned; the readout offset comes from here.
    pub dims: Vec<usize>,
    pub data: LogitsData,
}

impl Logits {
    pub fn f32(dims: Vec<usize>, data: Vec<f32>) -> Self {
        Self {
            dims,
            data: LogitsData::F32(data),
        }
    }

    pub fn f16(dims: Vec<usize>, data: Vec<f16>) -> Self {
        Self {
            dims,
            data: LogitsData::F16(data),
        }
    }

    pub fn len(&self) -> usize {
        match &self.data {
            LogitsData::F32(v) => v.len(),
            LogitsData::F16(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_f16(&self) -> bool {
        matches!(self.data, LogitsData::F16(_))
    }

    /// Bytes this tensor occupies (what a readback of it costs).
    pub fn byte_len(&self) -> usize {
        self.len() * if self.is_f16() { 2 } else { 4 }
    }

    pub fn get(&self, flat: usize) -> f32 {
        match &self.data {
            LogitsData::F32(v) => v[flat],
            LogitsData::F16(v) => v[flat].to_f32(),
        }
    }

    /// Every value widened to f32.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }

    /// The row at `position` of a `[1, S, W]` tensor, widened to f32.
    pub fn row_f32(&self, position: usize) -> Vec<f32> {
        let w = self.dims[2];
        (position * w..(position + 1) * w)
            .map(|i| self.get(i))
            .collect()
    }
}
