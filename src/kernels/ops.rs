//! The small operators of a decoder graph: shapes, casts, element-wise
//! arithmetic and the RMS norms. Each takes values and returns one, or a
//! reason it cannot (the caller names the node).

use super::tensor::{Data, Value};

pub type OpResult = Result<Value, String>;

pub fn ints(v: &Value, what: &str) -> Result<Vec<i64>, String> {
    v.as_i64()
        .map(<[i64]>::to_vec)
        .ok_or_else(|| format!("{what} is {}; int64 expected", v.kind()))
}

pub fn floats<'a>(v: &'a Value, what: &str) -> Result<&'a [f32], String> {
    v.as_f32()
        .ok_or_else(|| format!("{what} is {}; float expected", v.kind()))
}

/// An axis in `-rank..rank` made positive.
pub fn axis(a: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(format!("axis {a} outside rank {rank}"));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// numpy broadcasting of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        };
    }
    Ok(out)
}

/// The flat index into a broadcast operand for each output index.
fn source_index(out_shape: &[usize], shape: &[usize]) -> Vec<usize> {
    let n: usize = out_shape.iter().product();
    let rank = out_shape.len();
    let mut strides = vec![0usize; rank];
    let mut s = 1;
    for i in (0..shape.len()).rev() {
        let oi = i + rank - shape.len();
        strides[oi] = if shape[i] == 1 { 0 } else { s };
        s *= shape[i];
    }
    let mut idx = vec![0usize; n];
    for (flat, slot) in idx.iter_mut().enumerate() {
        let mut rem = flat;
        let mut src = 0;
        for d in (0..rank).rev() {
            src += (rem % out_shape[d]) * strides[d];
            rem /= out_shape[d];
        }
        *slot = src;
    }
    idx
}

#[derive(Debug, Clone, Copy)]
pub enum Binary {
    Add,
    Sub,
    Mul,
}

pub fn binary(op: Binary, a: &Value, b: &Value) -> OpResult {
    let shape = broadcast(&a.shape, &b.shape)?;
    macro_rules! apply {
        ($x:expr, $y:expr, $ctor:path) => {{
            let f = |p, q| match op {
                Binary::Add => p + q,
                Binary::Sub => p - q,
                Binary::Mul => p * q,
            };
            let data = if a.shape == b.shape {
                $x.iter().zip($y.iter()).map(|(&p, &q)| f(p, q)).collect()
            } else {
                let (ia, ib) = (
                    source_index(&shape, &a.shape),
                    source_index(&shape, &b.shape),
                );
                ia.iter().zip(&ib).map(|(&i, &j)| f($x[i], $y[j])).collect()
            };
            Ok($ctor(shape, data))
        }};
    }
    match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => apply!(x, y, Value::f32),
        (Data::I64(x), Data::I64(y)) => apply!(x, y, Value::i64),
        _ => Err(format!("{} and {} operands", a.kind(), b.kind())),
    }
}

pub fn sigmoid(x: &Value) -> OpResult {
    let v = floats(x, "input")?;
    Ok(Value::f32(
        x.shape.clone(),
        v.iter().map(|&t| 1.0 / (1.0 + (-t).exp())).collect(),
    ))
}

/// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), Gelu's `approximate = "tanh"`.
pub fn gelu_tanh(x: &Value) -> OpResult {
    let v = floats(x, "input")?;
    let c = (2.0 / std::f32::consts::PI).sqrt();
    Ok(Value::f32(
        x.shape.clone(),
        v.iter()
            .map(|&t| 0.5 * t * (1.0 + (c * (t + 0.044715 * t * t * t)).tanh()))
            .collect(),
    ))
}

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
        _ => Err(format!("cast of {} to data type {to}", x.kind())),
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
    let mut shape = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            0 => {
                shape.push(*x.shape.get(i).ok_or_else(|| {
                    format!("shape {spec:?}: dim {i} copies a dim the input lacks")
                })?)
            }
            -1 if infer.is_none() => {
                infer = Some(i);
                shape.push(1);
            }
            d if d > 0 => shape.push(d as usize),
            _ => return Err(format!("shape {spec:?} is not computable")),
        }
    }
    let known: usize = shape.iter().product();
    if let Some(i) = infer {
        if known == 0 || x.len() % known != 0 {
            return Err(format!("{:?} cannot take shape {spec:?}", x.shape));
        }
        shape[i] = x.len() / known;
    }
    if shape.iter().product::<usize>() != x.len() {
        return Err(format!("{:?} cannot take shape {spec:?}", x.shape));
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
    let pick = |i: i64| -> Result<usize, String> {
        let j = if i < 0 { i + dim as i64 } else { i };
        if j < 0 || j >= dim as i64 {
            return Err(format!("index {i} outside 0..{dim}"));
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
        Data::U8(_) => Err("gather over uint8 data".into()),
    }
}

/// `Split` into `sizes` along `axis`.
pub fn split(x: &Value, ax: i64, sizes: &[usize]) -> Result<Vec<Value>, String> {
    let ax = axis(ax, x.shape.len())?;
    if sizes.iter().sum::<usize>() != x.shape[ax] {
        return Err(format!("split {sizes:?} of a dim of {}", x.shape[ax]));
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
    if steps.is_some_and(|s| s.iter().any(|&t| t != 1)) {
        return Err(format!("steps {steps:?}: only 1 is computed"));
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
        return Err(format!(
            "rows of a {} tensor of shape {:?}; float [1, S, W] expected",
            x.kind(),
            x.shape
        ));
    };
    let mut out = Vec::with_capacity(rows.len() * w);
    for &r in rows {
        if r >= s {
            return Err(format!("row {r} of {s}"));
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
        Data::U8(_) => Err("reduce over uint8".into()),
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

/// RMS norm over the last axis: x / √(mean(x²) + ε) · w.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Result<Vec<f32>, String> {
    let h = w.len();
    if h == 0 || x.len() % h != 0 {
        return Err(format!("{} values do not split into rows of {h}", x.len()));
    }
    let mut out = vec![0f32; x.len()];
    for (row, o) in x.chunks(h).zip(out.chunks_mut(h)) {
        let ms = row.iter().map(|v| v * v).sum::<f32>() / h as f32;
        let inv = 1.0 / (ms + eps).sqrt();
        for ((oi, xi), wi) in o.iter_mut().zip(row).zip(w) {
            *oi = xi * inv * wi;
        }
    }
    Ok(out)
}
