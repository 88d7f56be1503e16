//! The small operators of a decoder graph: shapes, casts, element-wise
//! arithmetic and the RMS norms. Each takes values and returns one, or why
//! it cannot (the caller names the node).

use crate::kernels::exp::exp;
use crate::kernels::par::Pool;
use crate::kernels::tensor::{Data, Value};
use crate::kernels::OpError;

mod shape;

pub use crate::runtime::own::interp::ops::shape::{
    cast, gather, reduce_sum, reshape, shape_of, slice, split, take_rows,
};

pub type OpResult = Result<Value, OpError>;

pub fn ints(v: &Value, what: &'static str) -> Result<Vec<i64>, OpError> {
    v.as_i64()
        .map(<[i64]>::to_vec)
        .ok_or_else(|| OpError::Kind {
            what,
            found: v.kind(),
            expected: "int64",
        })
}

pub fn floats<'a>(v: &'a Value, what: &'static str) -> Result<&'a [f32], OpError> {
    v.as_f32().ok_or_else(|| OpError::Kind {
        what,
        found: v.kind(),
        expected: "float",
    })
}

/// An axis in `-rank..rank` made positive.
pub fn axis(a: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(OpError::Axis { axis: a, rank });
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// numpy broadcasting of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, OpError> {
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
            _ => {
                return Err(OpError::Broadcast {
                    a: a.to_vec(),
                    b: b.to_vec(),
                })
            }
        };
    }
    if !crate::kernels::tensor::shape_in_bounds(&out) {
        return Err(OpError::Nominal {
            shape: out.iter().map(|&d| d as u64).collect(),
        });
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

pub fn binary(op: Binary, a: &Value, b: &Value, pool: &Pool) -> OpResult {
    let shape = broadcast(&a.shape, &b.shape)?;
    // Floats of one shape (the MLP's products, residual sums): split over
    // the pool. The same operation per element, so the same bits.
    if let (Data::F32(x), Data::F32(y), true) = (&a.data, &b.data, a.shape == b.shape) {
        macro_rules! zip {
            ($f:expr) => {
                pool.fill(x.len(), 1, |at, out| {
                    for ((o, &p), &q) in out.iter_mut().zip(&x[at..]).zip(&y[at..]) {
                        *o = $f(p, q);
                    }
                })?
            };
        }
        let data = match op {
            Binary::Add => zip!(|p: f32, q: f32| p + q),
            Binary::Sub => zip!(|p: f32, q: f32| p - q),
            Binary::Mul => zip!(|p: f32, q: f32| p * q),
        };
        return Ok(Value::f32(shape, data));
    }
    // The operator is chosen once, outside the loop: matched per element,
    // the loop did not vectorise (3.7 % of a criterion in Chromium).
    macro_rules! apply {
        ($x:expr, $y:expr, $ctor:path) => {{
            let (x, y, shape) = ($x.as_slice(), $y.as_slice(), &shape);
            let data = match op {
                Binary::Add => combine(x, y, &a.shape, &b.shape, shape, |p, q| p + q),
                Binary::Sub => combine(x, y, &a.shape, &b.shape, shape, |p, q| p - q),
                Binary::Mul => combine(x, y, &a.shape, &b.shape, shape, |p, q| p * q),
            };
            Ok($ctor(shape.clone(), data))
        }};
    }
    match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => apply!(x, y, Value::f32),
        (Data::I64(x), Data::I64(y)) => apply!(x, y, Value::i64),
        _ => Err(OpError::Operands {
            a: a.kind(),
            b: b.kind(),
        }),
    }
}

/// `f` over two operands already known to broadcast to `shape`. One
/// element against many (a scale, a constant) keeps the many's order, so
/// it needs no index tables; other shapes map each output index back.
#[inline(always)]
fn combine<T: Copy>(
    x: &[T],
    y: &[T],
    sx: &[usize],
    sy: &[usize],
    shape: &[usize],
    f: impl Fn(T, T) -> T,
) -> Vec<T> {
    if sx == sy {
        x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect()
    } else if y.len() == 1 {
        x.iter().map(|&p| f(p, y[0])).collect()
    } else if x.len() == 1 {
        y.iter().map(|&q| f(x[0], q)).collect()
    } else {
        let (ix, iy) = (source_index(shape, sx), source_index(shape, sy));
        ix.iter().zip(&iy).map(|(&i, &j)| f(x[i], y[j])).collect()
    }
}

/// `f` of every float of `x`, split over the pool.
fn unary(x: &Value, pool: &Pool, f: impl Fn(f32) -> f32 + Sync + Send) -> OpResult {
    let v = floats(x, "input")?;
    let data = pool.fill(v.len(), 1, |at, out| {
        for (o, &t) in out.iter_mut().zip(&v[at..]) {
            *o = f(t);
        }
    })?;
    Ok(Value::f32(x.shape.clone(), data))
}

pub fn sigmoid(x: &Value, pool: &Pool) -> OpResult {
    unary(x, pool, |t| 1.0 / (1.0 + exp(-t)))
}

/// Gelu's `approximate = "tanh"`: ½·x·(1 + tanh u), u = √(2/π)·(x + 0.044715·x³).
/// Computed as x / (1 + e^(−2u)), the same function (½(1 + tanh u) = σ(2u)),
/// so it runs on our `exp`, which vectorises: libm's `tanhf` (and the
/// `expm1f` under it) was 15 % of a Gemma 3 run natively in `perf`. The
/// clamp inside `exp` keeps the denominator finite for any x.
pub fn gelu_tanh(x: &Value, pool: &Pool) -> OpResult {
    unary(x, pool, gelu)
}

#[inline(always)]
fn gelu(t: f32) -> f32 {
    const C: f32 = 0.797_884_6; // √(2/π)
    let u = C * (t + 0.044715 * t * t * t);
    t / (1.0 + exp(-2.0 * u))
}

/// RMS norm over the last axis: x / √(mean(x²) + ε) · w.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, pool: &Pool) -> Result<Vec<f32>, OpError> {
    let h = w.len();
    if h == 0 || !x.len().is_multiple_of(h) {
        return Err(OpError::Rows {
            len: x.len(),
            width: h,
        });
    }
    // Whole rows per piece: a row's mean is one sum, in one order.
    pool.fill(x.len(), h, |at, out| {
        for (row, o) in x[at..].chunks(h).zip(out.chunks_mut(h)) {
            let ms = row.iter().map(|v| v * v).sum::<f32>() / h as f32;
            let inv = 1.0 / (ms + eps).sqrt();
            for ((oi, xi), wi) in o.iter_mut().zip(row).zip(w) {
                *oi = xi * inv * wi;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against f64 over Gemma's activations and far outside them, never NaN
    /// or inf. Within 1e-6 relative while |u| ≤ 4; beyond, rounding u to
    /// float32 alone moves e^(−2u) by about 2|u| ulps, so the deep negative
    /// tail (values below 3e-4 of x; the tanh form rounds them to 0) is held
    /// to 2e-5. The f64 reference is the tanh form where it has no
    /// cancellation (u > −5) and the sigmoid form below; the two are checked
    /// against each other between.
    #[test]
    fn gelu_matches_the_tanh_form() {
        let c = (2.0 / std::f64::consts::PI).sqrt();
        let u = |t: f64| c * (t + 0.044715 * t.powi(3));
        let by_tanh = |t: f64| 0.5 * t * (1.0 + u(t).tanh());
        let by_sigmoid = |t: f64| t / (1.0 + (-2.0 * u(t)).exp());
        let (mut near, mut tail) = (0f64, 0f64);
        let mut t = -60.0f32;
        while t <= 60.0 {
            let x = t as f64;
            let w = if u(x) > -5.0 {
                by_tanh(x)
            } else {
                by_sigmoid(x)
            };
            if u(x).abs() < 5.0 {
                assert!((by_tanh(x) - by_sigmoid(x)).abs() <= 1e-12 * x.abs().max(1e-12));
            }
            let g = gelu(t) as f64;
            assert!(g.is_finite(), "gelu({t}) = {g}");
            let rel = (g - w).abs() / w.abs().max(1e-30);
            if u(x).abs() <= 4.0 {
                near = near.max(rel);
            } else {
                tail = tail.max(rel);
            }
            t += 0.0007;
        }
        println!("worst relative error {near:e} (|u| <= 4), {tail:e} beyond");
        assert!(near < 1e-6 && tail < 2e-5, "{near} {tail}");
        for t in [f32::MAX, f32::MIN, 1e30, -1e30] {
            assert!(gelu(t).is_finite(), "gelu({t})");
        }
        assert_eq!(gelu(0.0), 0.0);
    }

    /// Every path of `binary` (same shapes, one element against many on
    /// either side, general broadcasting) against numpy's rule written out
    /// with explicit indices over a rank-3 output.
    #[test]
    fn binary_broadcasts_as_numpy_does() {
        let value = |shape: Vec<usize>, seed: f32| {
            let n = shape.iter().product::<usize>();
            Value::f32(shape, (0..n).map(|i| seed + i as f32 * 0.25).collect())
        };
        // Element [i][j][k] of an operand of `shape`, right-aligned to rank 3.
        let at = |v: &Value, i: usize, j: usize, k: usize| {
            let mut s = vec![1; 3 - v.shape.len()];
            s.extend(&v.shape);
            let f = |d: usize, n: usize| if s[d] == 1 { 0 } else { n };
            v.as_f32().unwrap()[(f(0, i) * s[1] + f(1, j)) * s[2] + f(2, k)]
        };
        let shapes: [(Vec<usize>, Vec<usize>); 6] = [
            (vec![2, 3, 4], vec![2, 3, 4]),
            (vec![2, 3, 4], vec![]),
            (vec![1], vec![2, 3, 4]),
            (vec![2, 3, 4], vec![1, 1, 1]),
            (vec![2, 1, 4], vec![3, 1]),
            (vec![4], vec![2, 3, 1]),
        ];
        for (sa, sb) in shapes {
            let (a, b) = (value(sa.clone(), 1.5), value(sb.clone(), -2.0));
            for (op, f) in [
                (Binary::Add, (|p, q| p + q) as fn(f32, f32) -> f32),
                (Binary::Sub, |p, q| p - q),
                (Binary::Mul, |p, q| p * q),
            ] {
                let got = binary(op, &a, &b, &Pool::new(1).unwrap()).unwrap();
                let d = got.shape.clone();
                let d3: Vec<usize> = std::iter::repeat_n(1, 3 - d.len()).chain(d).collect();
                let mut want = Vec::new();
                for i in 0..d3[0] {
                    for j in 0..d3[1] {
                        for k in 0..d3[2] {
                            want.push(f(at(&a, i, j, k), at(&b, i, j, k)));
                        }
                    }
                }
                assert_eq!(got.as_f32().unwrap(), want, "{op:?} {sa:?} {sb:?}");
            }
        }
    }

    /// Split over a pool (pieces of uneven length, the last ragged) the
    /// element-wise operators and the norm give the bits they give on the
    /// caller alone: each element, or each row, is one computation in one
    /// order wherever it runs.
    #[test]
    fn split_over_a_pool_equals_the_caller_alone() {
        let (rows, h) = (37, 577);
        assert!(rows * h >= Pool::SERIAL_BELOW);
        let x = Value::f32(
            vec![rows, h],
            (0..rows * h)
                .map(|i| ((i * 7919) % 2003) as f32 / 250.0 - 4.0)
                .collect(),
        );
        let y = Value::f32(
            vec![rows, h],
            (0..rows * h)
                .map(|i| ((i * 104_729) % 1009) as f32 / 97.0 - 5.0)
                .collect(),
        );
        let w: Vec<f32> = (0..h).map(|i| 0.5 + (i % 13) as f32 / 10.0).collect();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let run = |pool: &Pool| {
            let mut out = Vec::new();
            for op in [Binary::Add, Binary::Sub, Binary::Mul] {
                out.push(bits(binary(op, &x, &y, pool).unwrap().as_f32().unwrap()));
            }
            out.push(bits(sigmoid(&x, pool).unwrap().as_f32().unwrap()));
            out.push(bits(gelu_tanh(&x, pool).unwrap().as_f32().unwrap()));
            out.push(bits(
                &rms_norm(x.as_f32().unwrap(), &w, 1e-5, pool).unwrap(),
            ));
            out
        };
        let (alone, split) = (run(&Pool::new(1).unwrap()), run(&Pool::new(3).unwrap()));
        for (i, (a, b)) in alone.iter().zip(&split).enumerate() {
            assert_eq!(a.len(), rows * h, "operator {i}");
            assert!(a == b, "operator {i} differs when split");
        }
    }

    #[test]
    fn refusals_are_typed_and_name_what_was_wrong() {
        let x = Value::f32(vec![2, 3], vec![0.0; 6]);
        let ids = Value::i64(vec![1], vec![5]);
        assert_eq!(
            gather(&x, &ids, 0).unwrap_err(),
            OpError::Index { index: 5, dim: 2 }
        );
        assert_eq!(
            reshape(&x, &Value::i64(vec![2], vec![4, -1])).unwrap_err(),
            OpError::Reshape {
                shape: vec![2, 3],
                spec: vec![4, -1]
            }
        );
        assert_eq!(axis(2, 2).unwrap_err(), OpError::Axis { axis: 2, rank: 2 });
        assert_eq!(
            binary(
                Binary::Add,
                &x,
                &Value::f32(vec![4], vec![0.0; 4]),
                &Pool::new(1).unwrap()
            )
            .unwrap_err(),
            OpError::Broadcast {
                a: vec![2, 3],
                b: vec![4]
            }
        );
        let e = floats(&ids, "scale").unwrap_err();
        assert_eq!(e.to_string(), "scale is int64; float expected");
        // What fits is computed: -1 infers, negative indices count back.
        assert_eq!(
            reshape(&x, &Value::i64(vec![2], vec![3, -1]))
                .unwrap()
                .shape,
            [3, 2]
        );
        assert_eq!(
            gather(&x, &Value::i64(vec![1], vec![-1]), 0).unwrap().shape,
            [1, 3]
        );
    }
}
