//! Finding the head (the node that makes `logits`) and the input embedding,
//! and how they share tables.

use serde::Serialize;

use crate::surgery::graph::{attr_i, attr_ints, graph_err, node_name, OnnxModel};
use crate::surgery::onnx_pb::dtype_name;
use crate::surgery::SurgeryError;

/// Names the trim and expose-hidden passes give the nodes they add.
pub const TRIM_SLICE: &str = "/readout/trim/Slice";
pub use crate::runtime::HIDDEN_OUTPUT;

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "op")]
pub enum HeadOp {
    /// `MatMulNBits(hidden, B[N, blocks, blob], scales, zero_points?, g_idx?, bias?)`.
    MatMulNBits {
        weight: String,
        scales: String,
        zero_points: Option<String>,
        bias: Option<String>,
        bits: i64,
        block_size: i64,
    },
    /// `MatMul(hidden, W[H, V])`; `transposed_from` names an initializer `[V, H]`
    /// when W is `Transpose(that)`.
    MatMul {
        weight: String,
        transposed_from: Option<String>,
    },
    /// `Gemm(hidden, W, bias?)` with `transB`.
    Gemm {
        weight: String,
        trans_b: bool,
        bias: Option<String>,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct Head {
    pub node: usize,
    pub node_name: String,
    pub op: HeadOp,
    /// The value fed to the head (the final normalised hidden state, or its trimmed slice).
    pub input: String,
    /// Rows of the head (vocabulary, or kept letters).
    pub rows: usize,
    pub hidden: usize,
    /// The head's input is this tool's last-position slice.
    pub trimmed: bool,
}

impl Head {
    /// Initializers the head reads (weights, scales, zero points, bias).
    pub fn tables(&self) -> Vec<String> {
        match &self.op {
            HeadOp::MatMulNBits {
                weight,
                scales,
                zero_points,
                bias,
                ..
            } => {
                let mut v = vec![weight.clone(), scales.clone()];
                v.extend(zero_points.clone());
                v.extend(bias.clone());
                v
            }
            HeadOp::MatMul {
                weight,
                transposed_from,
            } => vec![transposed_from.clone().unwrap_or_else(|| weight.clone())],
            HeadOp::Gemm { weight, bias, .. } => {
                let mut v = vec![weight.clone()];
                v.extend(bias.clone());
                v
            }
        }
    }
}

fn input_at(n: &crate::surgery::onnx_pb::NodeProto, i: usize) -> Option<String> {
    n.input.get(i).filter(|s| !s.is_empty()).cloned()
}

pub fn find_head(m: &OnnxModel) -> Result<Head, SurgeryError> {
    let node = m
        .node_index_producing("logits")
        .ok_or_else(|| graph_err("no node produces `logits`"))?;
    let n = &m.graph().node[node];
    let op_type = n.op_type.clone().unwrap_or_default();
    let input = input_at(n, 0).ok_or_else(|| graph_err("head has no input"))?;
    let need_init = |name: Option<String>, what: &str| -> Result<String, SurgeryError> {
        let name = name.ok_or_else(|| graph_err(format!("{}: no {what} input", node_name(n))))?;
        m.initializer(&name).ok_or_else(|| {
            SurgeryError::Unsupported(format!(
                "{}: {what} {name} is not an initializer",
                node_name(n)
            ))
        })?;
        Ok(name)
    };
    let (op, rows, hidden) = match op_type.as_str() {
        "MatMulNBits" => {
            let rows = attr_i(n, "N").ok_or_else(|| graph_err("MatMulNBits without N"))? as usize;
            let hidden = attr_i(n, "K").ok_or_else(|| graph_err("MatMulNBits without K"))? as usize;
            let op = HeadOp::MatMulNBits {
                weight: need_init(input_at(n, 1), "weight")?,
                scales: need_init(input_at(n, 2), "scales")?,
                zero_points: input_at(n, 3)
                    .map(|z| need_init(Some(z), "zero_points"))
                    .transpose()?,
                bias: input_at(n, 5)
                    .map(|b| need_init(Some(b), "bias"))
                    .transpose()?,
                bits: attr_i(n, "bits").unwrap_or(4),
                block_size: attr_i(n, "block_size")
                    .ok_or_else(|| graph_err("MatMulNBits without block_size"))?,
            };
            if input_at(n, 4).is_some() {
                return Err(SurgeryError::Unsupported(
                    "MatMulNBits head with g_idx".into(),
                ));
            }
            // The layout every row operation below relies on.
            if let HeadOp::MatMulNBits {
                weight,
                scales,
                bits,
                block_size,
                ..
            } = &op
            {
                let blocks = hidden.div_ceil((*block_size).max(1) as usize);
                let blob = (*block_size * *bits / 8) as usize;
                let wd = m
                    .initializer(weight)
                    .map(|t| t.dims.clone())
                    .unwrap_or_default();
                let sn: i64 = m
                    .initializer(scales)
                    .map(|t| t.dims.iter().product())
                    .unwrap_or(0);
                if wd != [rows as i64, blocks as i64, blob as i64] || sn != (rows * blocks) as i64 {
                    return Err(SurgeryError::Unsupported(format!(
                        "MatMulNBits head: weight dims {wd:?} and {sn} scales do not fit N={rows}, K={hidden}, block {block_size}, {bits} bits"
                    )));
                }
            }
            (op, rows, hidden)
        }
        "MatMul" => {
            let b = input_at(n, 1).ok_or_else(|| graph_err("MatMul head without B"))?;
            if let Some(t) = m.initializer(&b) {
                let d = &t.dims;
                if d.len() != 2 {
                    return Err(SurgeryError::Unsupported(format!(
                        "MatMul head weight {b} has dims {d:?}"
                    )));
                }
                (
                    HeadOp::MatMul {
                        weight: b,
                        transposed_from: None,
                    },
                    d[1] as usize,
                    d[0] as usize,
                )
            } else {
                let p = m.node_index_producing(&b).map(|i| &m.graph().node[i]);
                match p {
                    Some(t)
                        if t.op_type.as_deref() == Some("Transpose")
                            && attr_ints(t, "perm").is_none_or(|p| p == vec![1, 0]) =>
                    {
                        let src = need_init(input_at(t, 0), "transposed table")?;
                        let d = m
                            .initializer(&src)
                            .map(|t| t.dims.clone())
                            .unwrap_or_default();
                        if d.len() != 2 {
                            return Err(SurgeryError::Unsupported(format!(
                                "transposed head table {src} has dims {d:?}"
                            )));
                        }
                        (
                            HeadOp::MatMul {
                                weight: b,
                                transposed_from: Some(src),
                            },
                            d[0] as usize,
                            d[1] as usize,
                        )
                    }
                    _ => {
                        return Err(SurgeryError::Unsupported(format!(
                        "MatMul head reads {b}, neither an initializer nor Transpose(initializer)"
                    )))
                    }
                }
            }
        }
        "Gemm" => {
            let w = need_init(input_at(n, 1), "weight")?;
            let trans_b = attr_i(n, "transB").unwrap_or(0) == 1;
            let d = m
                .initializer(&w)
                .map(|t| t.dims.clone())
                .unwrap_or_default();
            if d.len() != 2 {
                return Err(SurgeryError::Unsupported(format!(
                    "Gemm head weight {w} has dims {d:?}"
                )));
            }
            let (rows, hidden) = if trans_b { (d[0], d[1]) } else { (d[1], d[0]) };
            (
                HeadOp::Gemm {
                    weight: w,
                    trans_b,
                    bias: input_at(n, 2),
                },
                rows as usize,
                hidden as usize,
            )
        }
        other => {
            return Err(SurgeryError::Unsupported(format!(
                "head op {other} (node {})",
                node_name(n)
            )))
        }
    };
    if rows == 0 || hidden == 0 {
        return Err(graph_err(format!(
            "head {} has {rows} rows of width {hidden}",
            node_name(&m.graph().node[node])
        )));
    }
    let trimmed = m
        .node_index_producing(&input)
        .is_some_and(|i| m.graph().node[i].name.as_deref() == Some(TRIM_SLICE));
    Ok(Head {
        node,
        node_name: node_name(n),
        op,
        input,
        rows,
        hidden,
        trimmed,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct Embedding {
    pub node_name: String,
    pub op: String,
    /// Initializers the embedding reads (resolved through Reshape/Transpose).
    pub tables: Vec<String>,
}

/// Gather/GatherBlockQuantized nodes that index with `input_ids`.
pub fn find_embeddings(m: &OnnxModel) -> Vec<Embedding> {
    m.graph()
        .node
        .iter()
        .filter(|n| {
            matches!(
                n.op_type.as_deref(),
                Some("Gather" | "GatherBlockQuantized")
            ) && n.input.get(1).map(String::as_str) == Some("input_ids")
        })
        .map(|n| {
            let mut tables: Vec<String> = n
                .input
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != 1)
                .filter_map(|(_, v)| m.resolve_initializer(v))
                .collect();
            tables.dedup();
            Embedding {
                node_name: node_name(n),
                op: n.op_type.clone().unwrap_or_default(),
                tables,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharing {
    /// One initializer feeds both the embedding and the head.
    Shared,
    /// The head has its own copy of the embedding's bytes.
    Duplicated,
    /// Separate tables with different contents (an untied model).
    Separate,
}

pub fn sharing(m: &OnnxModel, head: &Head, emb: &[Embedding]) -> Result<Sharing, SurgeryError> {
    let head_tables = head.tables();
    let emb_tables: Vec<&String> = emb.iter().flat_map(|e| e.tables.iter()).collect();
    if head_tables.iter().any(|h| emb_tables.contains(&h)) {
        return Ok(Sharing::Shared);
    }
    let main = &head_tables[0];
    let ht = m
        .initializer(main)
        .ok_or_else(|| graph_err(format!("{main} missing")))?;
    for e in &emb_tables {
        let et = m
            .initializer(e)
            .ok_or_else(|| graph_err(format!("{e} missing")))?;
        if et.data_type == ht.data_type && OnnxModel::tensor_len(et)? == OnnxModel::tensor_len(ht)?
        {
            let (a, b) = (m.tensor_bytes(et)?, m.tensor_bytes(ht)?);
            if a == b || transposed_equal(&a, &b, &et.dims, &ht.dims, et.data_type.unwrap_or(0)) {
                return Ok(Sharing::Duplicated);
            }
        }
    }
    Ok(Sharing::Separate)
}

/// `a` ([r, c]) equals `b` ([c, r]) transposed, element by element.
fn transposed_equal(a: &[u8], b: &[u8], da: &[i64], db: &[i64], dt: i32) -> bool {
    let Some(size) = crate::surgery::onnx_pb::dtype_size(dt) else {
        return false;
    };
    if da.len() != 2 || db.len() != 2 || da[0] != db[1] || da[1] != db[0] {
        return false;
    }
    let (r, c) = (da[0] as usize, da[1] as usize);
    (0..r).all(|i| {
        (0..c).all(|j| {
            a[(i * c + j) * size..(i * c + j + 1) * size]
                == b[(j * r + i) * size..(j * r + i + 1) * size]
        })
    })
}

pub fn describe_tensor(m: &OnnxModel, name: &str) -> String {
    match m.initializer(name) {
        Some(t) => format!(
            "{name} {} {:?} ({} bytes)",
            dtype_name(t.data_type.unwrap_or(0)),
            t.dims,
            OnnxModel::tensor_len(t).unwrap_or(0)
        ),
        None => format!("{name} (not an initializer)"),
    }
}
