//! One ONNX node checked against what the interpreter computes and turned
//! into an `Op`; anything else is refused by name.

use crate::kernels::attention::{Gqa, Rotary};
use crate::kernels::q4::Q4Matrix;
use crate::kernels::tensor::{Data, Value};
use crate::kernels::KernelError;
use crate::onnx_pb::NodeProto;
use crate::runtime::own::interp::initializers::{attr_f, attr_i, attr_s, node_name};
use crate::runtime::own::interp::ops::{self, Binary};
use crate::runtime::own::interp::{Op, Program, Ref};
use std::collections::HashMap;
use std::sync::Arc;

pub(super) fn unsupported(n: &NodeProto, reason: impl Into<String>) -> KernelError {
    KernelError::Unsupported {
        node: node_name(n),
        op: n.op_type.clone().unwrap_or_default(),
        reason: reason.into(),
    }
}

/// The attributes a node may carry, each with the values computed here
/// (`None`: any value). Anything else is refused by name.
pub(super) fn check_attrs(
    n: &NodeProto,
    allowed: &[(&str, Option<&[i64]>)],
) -> Result<(), KernelError> {
    for a in &n.attribute {
        let key = a.name.as_deref().unwrap_or("");
        match allowed.iter().find(|(k, _)| *k == key) {
            None => return Err(unsupported(n, format!("attribute {key} is not computed"))),
            Some((_, Some(vals))) => {
                let v = a.i.unwrap_or(0);
                if !vals.contains(&v) {
                    return Err(unsupported(n, format!("{key} = {v} (computed: {vals:?})")));
                }
            }
            Some((_, None)) => {}
        }
    }
    Ok(())
}

impl Program {
    pub(super) fn compile(
        &self,
        n: &NodeProto,
        inputs: &[Ref],
        q4_cache: &mut HashMap<(usize, usize), Arc<Q4Matrix>>,
        rotary_cache: &mut HashMap<(usize, usize), Rotary>,
    ) -> Result<Op, KernelError> {
        let op_type = n.op_type.as_deref().unwrap_or("");
        let domain = n.domain.as_deref().unwrap_or("");
        let ms = domain == "com.microsoft";
        let const_in = |i: usize, what: &str| -> Result<&Value, KernelError> {
            inputs.get(i).and_then(|r| self.konst(*r)).ok_or_else(|| {
                unsupported(
                    n,
                    format!("its {what} (input {i}) is not a constant initializer"),
                )
            })
        };
        Ok(match (op_type, ms) {
            ("Add", false) => Op::Binary(Binary::Add),
            ("Sub", false) => Op::Binary(Binary::Sub),
            ("Mul", false) => Op::Binary(Binary::Mul),
            ("Sigmoid", false) => Op::Sigmoid,
            ("Gelu", false) => {
                check_attrs(n, &[("approximate", None)])?;
                match attr_s(n, "approximate") {
                    Some(b"tanh") => Op::GeluTanh,
                    other => {
                        let got = other
                            .map_or("none".into(), |s| String::from_utf8_lossy(s).into_owned());
                        return Err(unsupported(
                            n,
                            format!("approximate = {got:?} (computed: \"tanh\")"),
                        ));
                    }
                }
            }
            ("Identity", false) => Op::Identity,
            ("Cast", false) => {
                check_attrs(n, &[("to", Some(&[1, 6, 7, 10])), ("saturate", None)])?;
                Op::Cast(attr_i(n, "to").unwrap_or(0) as i32)
            }
            ("Shape", false) => {
                check_attrs(n, &[])?;
                Op::Shape
            }
            ("Gather", false) => {
                check_attrs(n, &[("axis", None)])?;
                Op::Gather(attr_i(n, "axis").unwrap_or(0))
            }
            ("Reshape", false) => {
                check_attrs(n, &[("allowzero", Some(&[0]))])?;
                Op::Reshape
            }
            ("Split", false) => {
                check_attrs(n, &[("axis", None)])?;
                Op::Split(attr_i(n, "axis").unwrap_or(0))
            }
            ("Slice", false) => Op::Slice,
            ("ReduceSum", false) => {
                check_attrs(
                    n,
                    &[("keepdims", None), ("noop_with_empty_axes", Some(&[0]))],
                )?;
                Op::ReduceSum(attr_i(n, "keepdims").unwrap_or(1) != 0)
            }
            ("SimplifiedLayerNormalization", false) => {
                check_attrs(
                    n,
                    &[
                        ("epsilon", None),
                        ("axis", Some(&[-1])),
                        ("stash_type", Some(&[1])),
                    ],
                )?;
                const_in(1, "scale")?;
                Op::Norm(attr_f(n, "epsilon").unwrap_or(1e-5))
            }
            ("SkipSimplifiedLayerNormalization", true) => {
                check_attrs(n, &[("epsilon", None)])?;
                const_in(2, "gamma")?;
                Op::SkipNorm(attr_f(n, "epsilon").unwrap_or(1e-12))
            }
            ("MatMulNBits", true) => {
                check_attrs(
                    n,
                    &[
                        ("K", None),
                        ("N", None),
                        ("bits", Some(&[4])),
                        ("block_size", Some(&[32])),
                        ("accuracy_level", None),
                    ],
                )?;
                if inputs.get(4).is_some_and(|r| *r != Ref::Absent) {
                    return Err(unsupported(n, "a g_idx input (act-order) is not computed"));
                }
                let k = attr_i(n, "K").unwrap_or(0) as usize;
                let nn = attr_i(n, "N").unwrap_or(0) as usize;
                let w = self.q4(n, inputs, 1, 2, 3, nn, k, q4_cache)?;
                let bias = match inputs.get(5) {
                    Some(Ref::Absent) | None => None,
                    Some(_) => Some(
                        ops::floats(const_in(5, "bias")?, "bias")
                            .map_err(|e| unsupported(n, e.to_string()))?
                            .to_vec(),
                    ),
                };
                Op::MatMulQ4 { w, bias }
            }
            ("GatherBlockQuantized", true) => {
                check_attrs(
                    n,
                    &[
                        ("bits", Some(&[4])),
                        ("block_size", Some(&[32])),
                        ("gather_axis", Some(&[0])),
                        ("quantize_axis", Some(&[1, -1])),
                    ],
                )?;
                let data = const_in(0, "table")?;
                if data.shape.len() != 2 {
                    return Err(unsupported(
                        n,
                        format!("a table of shape {:?}; [rows, bytes] expected", data.shape),
                    ));
                }
                let (rows, k) = (data.shape[0], data.shape[1] * 2);
                let w = self.q4(n, inputs, 0, 2, 3, rows, k, q4_cache)?;
                Op::GatherQ4(w)
            }
            ("GroupQueryAttention", true) => {
                check_attrs(
                    n,
                    &[
                        ("num_heads", None),
                        ("kv_num_heads", None),
                        ("scale", None),
                        ("local_window_size", None),
                        ("softcap", None),
                        ("do_rotary", Some(&[0, 1])),
                        ("rotary_interleaved", Some(&[0])),
                        ("smooth_softmax", Some(&[0])),
                        ("qk_output", Some(&[0])),
                    ],
                )?;
                if attr_f(n, "softcap").unwrap_or(0.0) != 0.0 {
                    return Err(unsupported(n, "softcap is not computed"));
                }
                for (i, what) in [
                    (9, "position_ids"),
                    (10, "attention_bias"),
                    (11, "head_sink"),
                ] {
                    if inputs.get(i).is_some_and(|r| *r != Ref::Absent) {
                        return Err(unsupported(n, format!("a {what} input is not computed")));
                    }
                }
                let window = match attr_i(n, "local_window_size").unwrap_or(-1) {
                    -1 => None,
                    w if w > 0 => Some(w as usize),
                    w => {
                        return Err(unsupported(
                            n,
                            format!("local_window_size = {w} (computed: -1 or above 0)"),
                        ))
                    }
                };
                let heads = attr_i(n, "num_heads").unwrap_or(0) as usize;
                let kv_heads = attr_i(n, "kv_num_heads").unwrap_or(0) as usize;
                if heads == 0 || kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
                    return Err(unsupported(
                        n,
                        format!("{heads} heads over {kv_heads} key/value heads"),
                    ));
                }
                let rotary = if attr_i(n, "do_rotary").unwrap_or(0) == 1 {
                    let cos = const_in(7, "cos cache")?;
                    let sin = const_in(8, "sin cache")?;
                    if cos.shape.len() != 2 || cos.shape != sin.shape {
                        return Err(unsupported(
                            n,
                            format!("rotary caches of shapes {:?}/{:?}", cos.shape, sin.shape),
                        ));
                    }
                    let key = (inputs[7].const_index(), inputs[8].const_index());
                    match rotary_cache.get(&key) {
                        Some(r) => Some(r.clone()),
                        None => {
                            let f = |v: &Value| {
                                ops::floats(v, "rotary cache")
                                    .map(Arc::<[f32]>::from)
                                    .map_err(|e| unsupported(n, e.to_string()))
                            };
                            let r: Rotary = (f(cos)?, f(sin)?, cos.shape[1]);
                            rotary_cache.insert(key, r.clone());
                            Some(r)
                        }
                    }
                } else {
                    None
                };
                Op::Attention(Box::new(Gqa {
                    heads,
                    kv_heads,
                    scale: attr_f(n, "scale").unwrap_or(0.0),
                    rotary,
                    window,
                }))
            }
            _ => {
                return Err(unsupported(
                    n,
                    format!(
                        "operator {}{op_type} is not one this runtime computes",
                        if ms { "com.microsoft." } else { "" }
                    ),
                ))
            }
        })
    }

    /// The int4 matrix behind inputs (`data`, `scales`, `zero_points`), shared
    /// with any other node that reads the same bytes and scales.
    #[allow(clippy::too_many_arguments)]
    fn q4(
        &self,
        n: &NodeProto,
        inputs: &[Ref],
        data: usize,
        scales: usize,
        zp: usize,
        rows: usize,
        k: usize,
        cache: &mut HashMap<(usize, usize), Arc<Q4Matrix>>,
    ) -> Result<Arc<Q4Matrix>, KernelError> {
        let get = |i: usize| inputs.get(i).and_then(|r| self.konst(*r));
        let (Some(q), Some(s)) = (get(data), get(scales)) else {
            return Err(unsupported(
                n,
                "its weights or scales are not constant initializers",
            ));
        };
        let Data::U8(bytes) = &q.data else {
            return Err(unsupported(
                n,
                format!("weights of {}; uint8 int4 pairs expected", q.kind()),
            ));
        };
        let Some(scale_vals) = s.as_f32() else {
            return Err(unsupported(n, format!("scales of {}", s.kind())));
        };
        let key = (Arc::as_ptr(bytes) as usize, inputs[scales].const_index());
        if let Some(m) = cache.get(&key) {
            if m.n == rows && m.k == k {
                return Ok(m.clone());
            }
        }
        let zero_points = match get(zp) {
            None if inputs.get(zp).is_some_and(|r| *r != Ref::Absent) => {
                return Err(unsupported(
                    n,
                    "zero points that are not a constant initializer",
                ))
            }
            None => None,
            Some(z) => match &z.data {
                Data::U8(b) => Some(b.as_slice()),
                _ => {
                    return Err(unsupported(
                        n,
                        format!("zero points of {}; packed uint8 expected", z.kind()),
                    ))
                }
            },
        };
        let m = Q4Matrix::new(rows, k, bytes.clone(), scale_vals.to_vec(), zero_points)
            .map_err(|e| unsupported(n, e.to_string()))?;
        let m = Arc::new(m);
        cache.insert(key, m.clone());
        Ok(m)
    }
}
