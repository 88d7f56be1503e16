//! One compiled node run on its inputs.

use crate::kernels::attention::Pack;
use crate::kernels::par::Pool;
use crate::kernels::q4::Precision;
use crate::kernels::tensor::Value;
use crate::kernels::{KernelError, OpError};
use crate::runtime::own::interp::ops::{self, Binary};
use crate::runtime::own::interp::{Node, Op, Program};

impl Program {
    pub(super) fn exec(
        &self,
        node: &Node,
        ins: &[Option<&Value>],
        out_needed: &[bool],
        precision: Precision,
        pack: Option<&Pack>,
        pool: &Pool,
    ) -> Result<Vec<Option<Value>>, KernelError> {
        let err = |reason: OpError| KernelError::Run {
            node: node.name.clone(),
            op: node.op_type.clone(),
            reason: Box::new(reason),
        };
        // A refusal particular to this node's inputs, said in words.
        let say = |reason: String| err(OpError::Input(reason));
        let input = |i: usize| -> Result<&Value, KernelError> {
            ins.get(i)
                .copied()
                .flatten()
                .ok_or_else(|| say(format!("input {i} is missing")))
        };
        let one = |v: Result<Value, OpError>| v.map(|v| vec![Some(v)]).map_err(err);
        match &node.op {
            Op::Binary(b) => one(ops::binary(*b, input(0)?, input(1)?, pool)),
            Op::Sigmoid => one(ops::sigmoid(input(0)?, pool)),
            Op::GeluTanh => one(ops::gelu_tanh(input(0)?, pool)),
            Op::Cast(to) => one(ops::cast(input(0)?, *to)),
            Op::Shape => Ok(vec![Some(ops::shape_of(input(0)?))]),
            Op::Gather(axis) => one(ops::gather(input(0)?, input(1)?, *axis)),
            Op::Reshape => one(ops::reshape(input(0)?, input(1)?)),
            Op::Identity => Ok(vec![Some(input(0)?.clone())]),
            Op::Split(axis) => {
                let x = input(0)?;
                let ax = ops::axis(*axis, x.shape.len()).map_err(err)?;
                let sizes: Vec<usize> = match ins.get(1).copied().flatten() {
                    Some(s) => ops::ints(s, "split")
                        .map_err(err)?
                        .iter()
                        .map(|&v| v.max(0) as usize)
                        .collect(),
                    None => {
                        let parts = node.outputs.len();
                        vec![x.shape[ax] / parts; parts]
                    }
                };
                let parts = ops::split(x, *axis, &sizes).map_err(err)?;
                Ok(parts.into_iter().map(Some).collect())
            }
            Op::LastRow if pack.is_some() => {
                let rows = pack.map(|p| p.rows.as_slice()).unwrap_or(&[]);
                one(ops::take_rows(input(0)?, rows))
            }
            Op::Slice | Op::LastRow => {
                let list = |i: usize| -> Result<Option<Vec<i64>>, KernelError> {
                    ins.get(i)
                        .copied()
                        .flatten()
                        .map(|v| ops::ints(v, "slice bounds").map_err(err))
                        .transpose()
                };
                let starts = list(1)?.ok_or_else(|| say("no starts".into()))?;
                let ends = list(2)?.ok_or_else(|| say("no ends".into()))?;
                one(ops::slice(
                    input(0)?,
                    &starts,
                    &ends,
                    list(3)?.as_deref(),
                    list(4)?.as_deref(),
                ))
            }
            Op::ReduceSum(keepdims) => {
                let axes = match ins.get(1).copied().flatten() {
                    Some(a) => ops::ints(a, "axes").map_err(err)?,
                    None => Vec::new(),
                };
                one(ops::reduce_sum(input(0)?, &axes, *keepdims))
            }
            Op::Norm(eps) => {
                if out_needed.iter().skip(1).any(|&w| w) {
                    return Err(say("only the normalised output is computed".into()));
                }
                let x = input(0)?;
                let w = ops::floats(input(1)?, "scale").map_err(err)?;
                let y = ops::rms_norm(ops::floats(x, "input").map_err(err)?, w, *eps, pool)
                    .map_err(err)?;
                Ok(vec![Some(Value::f32(x.shape.clone(), y))])
            }
            Op::SkipNorm(eps) => {
                if out_needed.get(1).copied().unwrap_or(false)
                    || out_needed.get(2).copied().unwrap_or(false)
                {
                    return Err(say("mean and inverse-std outputs are not computed".into()));
                }
                let x = input(0)?;
                let mut sum = ops::binary(Binary::Add, x, input(1)?, pool).map_err(err)?;
                if let Some(b) = ins.get(3).copied().flatten() {
                    sum = ops::binary(Binary::Add, &sum, b, pool).map_err(err)?;
                }
                let w = ops::floats(input(2)?, "gamma").map_err(err)?;
                let y = ops::rms_norm(ops::floats(&sum, "sum").map_err(err)?, w, *eps, pool)
                    .map_err(err)?;
                let y = Value::f32(sum.shape.clone(), y);
                Ok(vec![
                    Some(y),
                    None,
                    None,
                    out_needed.get(3).copied().unwrap_or(false).then_some(sum),
                ])
            }
            Op::MatMulQ4 { w, bias } => {
                let x = input(0)?;
                let a = ops::floats(x, "input").map_err(err)?;
                if x.shape.last() != Some(&w.k) {
                    return Err(say(format!(
                        "input of shape {:?}; last dim {} expected",
                        x.shape, w.k
                    )));
                }
                let m = a.len() / w.k;
                let mut y = w.matmul(a, m, precision, pool).map_err(err)?;
                if let Some(b) = bias {
                    for row in y.chunks_mut(w.n) {
                        row.iter_mut().zip(b).for_each(|(o, bi)| *o += bi);
                    }
                }
                let mut shape = x.shape.clone();
                *shape.last_mut().unwrap_or(&mut 0) = w.n;
                Ok(vec![Some(Value::f32(shape, y))])
            }
            Op::GatherQ4(w) => {
                let idx = input(1)?;
                let ids = ops::ints(idx, "indices").map_err(err)?;
                let mut out = vec![0f32; ids.len() * w.k];
                for (t, o) in ids.iter().zip(out.chunks_mut(w.k)) {
                    let row = usize::try_from(*t)
                        .ok()
                        .filter(|&r| r < w.n)
                        .ok_or_else(|| {
                            say(format!("token id {t} outside the vocabulary of {}", w.n))
                        })?;
                    w.dequant_row(row, o);
                }
                let mut shape = idx.shape.clone();
                shape.push(w.k);
                Ok(vec![Some(Value::f32(shape, out))])
            }
            Op::Attention(gqa) => {
                let q = input(0)?;
                let s = q
                    .shape
                    .get(1)
                    .copied()
                    .ok_or_else(|| say(format!("query of shape {:?}", q.shape)))?;
                if q.shape.first() != Some(&1) {
                    return Err(say(format!(
                        "query of shape {:?}: batch 1 is computed",
                        q.shape
                    )));
                }
                let qv = ops::floats(q, "query").map_err(err)?.to_vec();
                let (qv, kv, vv) =
                    match (ins.get(1).copied().flatten(), ins.get(2).copied().flatten()) {
                        (Some(k), Some(v)) => (
                            qv,
                            ops::floats(k, "key").map_err(err)?.to_vec(),
                            ops::floats(v, "value").map_err(err)?.to_vec(),
                        ),
                        (None, None) => {
                            // Packed: each row is q (heads·D), then k, then v (kv_heads·D each).
                            let width = q.shape.get(2).copied().unwrap_or(0);
                            let parts = gqa.heads + 2 * gqa.kv_heads;
                            if width == 0 || width % parts != 0 {
                                return Err(say(format!(
                                    "packed query of width {width} for {parts} heads"
                                )));
                            }
                            let d = width / parts;
                            let (wq, wk) = (gqa.heads * d, gqa.kv_heads * d);
                            let (mut a, mut b, mut c) = (
                                Vec::with_capacity(s * wq),
                                Vec::with_capacity(s * wk),
                                Vec::with_capacity(s * wk),
                            );
                            for row in qv.chunks(width) {
                                a.extend_from_slice(&row[..wq]);
                                b.extend_from_slice(&row[wq..wq + wk]);
                                c.extend_from_slice(&row[wq + wk..]);
                            }
                            (a, b, c)
                        }
                        _ => {
                            return Err(say(
                                "a key without a value, or a value without a key".into()
                            ))
                        }
                    };
                let seqlens = ops::ints(input(5)?, "seqlens_k").map_err(err)?;
                let total = ops::ints(input(6)?, "total_sequence_length").map_err(err)?;
                let (Some(&sl), Some(&tot)) = (seqlens.first(), total.first()) else {
                    return Err(say("empty seqlens_k or total_sequence_length".into()));
                };
                if sl + 1 != tot {
                    return Err(say(format!(
                        "the attention mask sums to {} of {tot} tokens: padding is not computed",
                        sl + 1
                    )));
                }
                let want_present = out_needed.get(1).copied().unwrap_or(false)
                    || out_needed.get(2).copied().unwrap_or(false);
                let r = gqa
                    .run(
                        qv,
                        kv,
                        &vv,
                        s,
                        input(3)?,
                        input(4)?,
                        tot as usize,
                        want_present,
                        pack,
                        pool,
                    )
                    .map_err(err)?;
                let width = r.out.len() / s;
                let out = Value::f32(vec![1, s, width], r.out);
                let (pk, pv) = match r.present {
                    Some((k, v)) => (Some(k), Some(v)),
                    None => (None, None),
                };
                Ok(vec![Some(out), pk, pv])
            }
        }
    }
}
