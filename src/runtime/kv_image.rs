//! A past copied to the host and back: what a kept prefix stores. The
//! tensors are in signature order (key, value per layer), each
//! `[1, kv_heads, len, head_dim]` in the dtype the runtime holds its past
//! in, little-endian. The engine checks sizes before anything is allocated
//! (`engine/prefix_image.rs`); a runtime checks them again as it builds.

use super::{Dtype, RuntimeError, Signature};

/// A past on the host, as `export_kv` returns it.
pub struct KvImage {
    pub dtype: Dtype,
    pub len: usize,
    pub tensors: Vec<Vec<u8>>,
}

/// A past's bytes to import, borrowed from a stored image.
pub struct KvView<'a> {
    pub dtype: Dtype,
    pub len: usize,
    pub tensors: Vec<&'a [u8]>,
}

impl Dtype {
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F16 => "float16",
        }
    }
}

impl Signature {
    /// `(kv_heads, head_dim)` of every past tensor; an error when the graph
    /// leaves them symbolic (a past could not be sized from its tokens).
    pub fn kv_head_dims(&self) -> Result<(usize, usize), RuntimeError> {
        let dim = |i: usize| {
            self.kv_shape
                .get(i)
                .copied()
                .filter(|&d| d > 0)
                .map(|d| d as usize)
        };
        match (dim(1), dim(3)) {
            (Some(h), Some(d)) => Ok((h, d)),
            _ => Err(RuntimeError::Signature(format!(
                "past shape {:?} has symbolic heads or head size",
                self.kv_shape
            ))),
        }
    }

    /// The dims of one past tensor holding `len` tokens.
    pub fn kv_dims(&self, len: usize) -> Result<[usize; 4], RuntimeError> {
        let (h, d) = self.kv_head_dims()?;
        Ok([1, h, len, d])
    }
}

impl KvView<'_> {
    /// Checks the view against what `sig` and `dtype` make of `len` tokens.
    pub fn check(&self, sig: &Signature, dtype: Dtype) -> Result<[usize; 4], RuntimeError> {
        let dims = sig.kv_dims(self.len)?;
        let want = dims.iter().product::<usize>() * dtype.bytes();
        if self.dtype != dtype {
            return Err(RuntimeError::Run(format!(
                "a past of {} given to a runtime that holds {}",
                self.dtype.name(),
                dtype.name()
            )));
        }
        if self.tensors.len() != sig.past.len() * 2 {
            return Err(RuntimeError::Run(format!(
                "a past of {} tensors given to a graph of {}",
                self.tensors.len(),
                sig.past.len() * 2
            )));
        }
        if let Some(t) = self.tensors.iter().find(|t| t.len() != want) {
            return Err(RuntimeError::Run(format!(
                "a past tensor of {} bytes where {len} tokens take {want}",
                t.len(),
                len = self.len
            )));
        }
        Ok(dims)
    }
}

/// Little-endian float32 bytes as floats.
pub fn f32_from_le(b: &[u8]) -> Vec<f32> {
    b.as_chunks::<4>()
        .0
        .iter()
        .map(|c| f32::from_le_bytes(*c))
        .collect()
}

/// Floats as little-endian float32 bytes.
pub fn f32_to_le(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Little-endian 16-bit words as bits (float16 tensors).
pub fn u16_from_le(b: &[u8]) -> Vec<u16> {
    b.as_chunks::<2>()
        .0
        .iter()
        .map(|c| u16::from_le_bytes(*c))
        .collect()
}

/// Bits as little-endian 16-bit words.
pub fn u16_to_le(v: &[u16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 2);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}
