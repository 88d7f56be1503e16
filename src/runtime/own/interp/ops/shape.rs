//! The operators that move values rather than compute them: casts,
//! shapes, gathers, splits, slices, the packed run's row pick, and sums.

use crate::kernels::tensor::{Data, Value};
use crate::kernels::OpError;
use crate::runtime::own::interp::ops::{axis, floats, ints, OpResult};

/// `to`: an ONNX data type. Floats of either width are held as float32 here.
pub fn cast(x: &Value, to: i32) -> OpResult {
    use crate::onnx_pb::dtype;
    let shape = x.shape.clone();
    match (to, &x.data) {
        (dtype::FLOAT | dtype::FLOAT16, Data::F32(v)) => Ok(Value::f32(shape, v.clone())),
        (dtype::FLOAT | dtype::FLOAT16, Data::I64(v)) => {
            Ok(Value::f32(shape, v.iter().map(|&t| t as f32).collect()))
        }
        (dtype::INT32 | dtype::INT64, Data::I64(v)) => Ok(Value::i64(shape, v.clone())),
        (dtype::INT32 | dtype::INT64, Data::F32(v)) => {
            Ok(Value::i64(shape, v.iter().map(|&t| t as i64).collect()))
        }
        _ => Err(OpError::Cast { from: x.kind(), to }),
    }
}

pub fn shape_of(x: &Value) -> Value {
    Value::i64(
        vec![x.shape.len()],
        x.shape.iter().map(|&d| d as i64).collect(),
    )
}

pub fn reshape(x: &Value, spec: &Value) -> OpResult {
    let spec = ints(spec, "shape")?;
    // A 0 that copies a dim the input lacks, a second -1 or a negative dim
    // is a spec no input can take.
    let refuse = || OpError::Reshape {
        shape: x.shape.clone(),
        spec: spec.clone(),
    };
    let mut shape = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            0 => shape.push(*x.shape.get(i).ok_or_else(refuse)?),
            -1 if infer.is_none() => {
                infer = Some(i);
                shape.push(1);
            }
            d if d > 0 => shape.push(usize::try_from(d).map_err(|_| refuse())?),
            _ => return Err(refuse()),
        }
    }
    // Checked before any product: a spec's dims are the file's numbers.
    if !crate::kernels::tensor::shape_in_bounds(&shape) {
        return Err(OpError::Nominal {
            shape: spec.iter().map(|&d| d as u64).collect(),
        });
    }
    let known: usize = shape.iter().product();
    if let Some(i) = infer {
        if known == 0 || !x.len().is_multiple_of(known) {
            return Err(refuse());
        }
        shape[i] = x.len() / known;
    }
    if shape.iter().product::<usize>() != x.len() {
        return Err(refuse());
    }
    Ok(x.reshaped(shape))
}

/// `Gather` along `axis` (float or int data; negative indices count back).
pub fn gather(data: &Value, idx: &Value, ax: i64) -> OpResult {
    let ax = axis(ax, data.shape.len())?;
    let indices = ints(idx, "indices")?;
    let dim = data.shape[ax];
    let outer: usize = data.shape[..ax].iter().product();
    let inner: usize = data.shape[ax + 1..].iter().product();
    let mut shape = data.shape[..ax].to_vec();
    shape.extend_from_slice(&idx.shape);
    shape.extend_from_slice(&data.shape[ax + 1..]);
    if !crate::kernels::tensor::shape_in_bounds(&shape) {
        return Err(OpError::Nominal {
            shape: shape.iter().map(|&d| d as u64).collect(),
        });
    }
    let pick = |i: i64| -> Result<usize, OpError> {
        let j = if i < 0 { i + dim as i64 } else { i };
        if j < 0 || j >= dim as i64 {
            return Err(OpError::Index { index: i, dim });
        }
        Ok(j as usize)
    };
    macro_rules! take {
        ($v:expr, $ctor:path) => {{
            let mut out = Vec::with_capacity(outer * indices.len() * inner);
            for o in 0..outer {
                for &i in &indices {
                    let j = pick(i)?;
                    out.extend_from_slice(&$v[(o * dim + j) * inner..(o * dim + j + 1) * inner]);
                }
            }
            Ok($ctor(shape, out))
        }};
    }
    match &data.data {
        Data::F32(v) => take!(v, Value::f32),
        Data::I64(v) => take!(v, Value::i64),
        Data::U8(_) => Err(OpError::Uint8 { op: "gather" }),
    }
}

/// `Split` into `sizes` along `axis`.
pub fn split(x: &Value, ax: i64, sizes: &[usize]) -> Result<Vec<Value>, OpError> {
    let ax = axis(ax, x.shape.len())?;
    if sizes.iter().sum::<usize>() != x.shape[ax] {
        return Err(OpError::Split {
            sizes: sizes.to_vec(),
            dim: x.shape[ax],
        });
    }
    let v = floats(x, "input")?;
    let outer: usize = x.shape[..ax].iter().product();
    let inner: usize = x.shape[ax + 1..].iter().product();
    let row = x.shape[ax] * inner;
    let mut outs = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for &sz in sizes {
        let mut data = Vec::with_capacity(outer * sz * inner);
        for o in 0..outer {
            data.extend_from_slice(&v[o * row + start * inner..o * row + (start + sz) * inner]);
        }
        let mut shape = x.shape.clone();
        shape[ax] = sz;
        outs.push(Value::f32(shape, data));
        start += sz;
    }
    Ok(outs)
}

/// `Slice` with unit steps.
pub fn slice(
    x: &Value,
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> OpResult {
    if let Some(steps) = steps.filter(|s| s.iter().any(|&t| t != 1)) {
        return Err(OpError::Steps {
            steps: steps.to_vec(),
        });
    }
    let rank = x.shape.len();
    let mut lo: Vec<usize> = vec![0; rank];
    let mut hi: Vec<usize> = x.shape.clone();
    for (i, (&s, &e)) in starts.iter().zip(ends).enumerate() {
        let a = axis(axes.map_or(i as i64, |a| a[i]), rank)?;
        let dim = x.shape[a] as i64;
        let clamp = |t: i64| -> usize { (if t < 0 { t + dim } else { t }).clamp(0, dim) as usize };
        lo[a] = clamp(s);
        hi[a] = clamp(e).max(lo[a]);
    }
    let v = floats(x, "input")?;
    let shape: Vec<usize> = (0..rank).map(|a| hi[a] - lo[a]).collect();
    let mut out = Vec::with_capacity(shape.iter().product());
    let n: usize = shape.iter().product();
    let mut strides = vec![1usize; rank];
    for a in (0..rank.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * x.shape[a + 1];
    }
    for flat in 0..n {
        let mut rem = flat;
        let mut src = 0;
        for a in (0..rank).rev() {
            src += (lo[a] + rem % shape[a]) * strides[a];
            rem /= shape[a];
        }
        out.push(v[src]);
    }
    Ok(Value::f32(shape, out))
}

/// Rows `rows` of axis 1 of a float `[1, S, W]` tensor: a packed run's read rows.
pub fn take_rows(x: &Value, rows: &[usize]) -> OpResult {
    let (&[1, s, w], Some(v)) = (x.shape.as_slice(), x.as_f32()) else {
        return Err(OpError::Shape {
            what: "rows",
            kind: x.kind(),
            shape: x.shape.clone(),
            expected: "float [1, S, W]",
        });
    };
    let mut out = Vec::with_capacity(rows.len() * w);
    for &r in rows {
        if r >= s {
            return Err(OpError::Row { row: r, rows: s });
        }
        out.extend_from_slice(&v[r * w..(r + 1) * w]);
    }
    Ok(Value::f32(vec![1, rows.len(), w], out))
}

/// `ReduceSum` over int64 or float data.
pub fn reduce_sum(x: &Value, axes: &[i64], keepdims: bool) -> OpResult {
    let rank = x.shape.len();
    let axes: Vec<usize> = if axes.is_empty() {
        (0..rank).collect()
    } else {
        axes.iter()
            .map(|&a| axis(a, rank))
            .collect::<Result<_, _>>()?
    };
    let kept: Vec<usize> = (0..rank)
        .map(|a| if axes.contains(&a) { 1 } else { x.shape[a] })
        .collect();
    let n: usize = kept.iter().product();
    let idx = source_index_of_reduced(&x.shape, &kept);
    let shape: Vec<usize> = if keepdims {
        kept.clone()
    } else {
        (0..rank)
            .filter(|a| !axes.contains(a))
            .map(|a| x.shape[a])
            .collect()
    };
    match &x.data {
        Data::I64(v) => {
            let mut out = vec![0i64; n];
            for (i, &t) in v.iter().enumerate() {
                out[idx[i]] += t;
            }
            Ok(Value::i64(shape, out))
        }
        Data::F32(v) => {
            let mut out = vec![0f32; n];
            for (i, &t) in v.iter().enumerate() {
                out[idx[i]] += t;
            }
            Ok(Value::f32(shape, out))
        }
        Data::U8(_) => Err(OpError::Uint8 { op: "reduce" }),
    }
}

/// For each element of `shape`, its flat index in the reduced shape `kept`.
fn source_index_of_reduced(shape: &[usize], kept: &[usize]) -> Vec<usize> {
    let n: usize = shape.iter().product();
    let rank = shape.len();
    let mut out = vec![0; n];
    for (flat, o) in out.iter_mut().enumerate() {
        let mut rem = flat;
        let mut dst = 0;
        let mut stride = 1;
        for a in (0..rank).rev() {
            let i = rem % shape[a];
            rem /= shape[a];
            if kept[a] != 1 {
                dst += i * stride;
            }
            stride *= kept[a];
        }
        *o = dst;
    }
    out
}
