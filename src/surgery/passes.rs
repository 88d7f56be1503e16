//! The graph edits: trim (head on the last position only), prune (a K-row
//! head of the kept letters), expose-hidden (the head's input as an output).
//! Each edits the model in memory; `commands` writes and verifies.

use super::graph::{
    elem_type_of, graph_err, int64_tensor, raw_tensor, set_attr_i, set_dim, OnnxModel,
};
use super::onnx_pb::{
    dtype_size, Dimension, NodeProto, TensorShapeProto, TypeProto, TypeTensor, ValueInfoProto,
};
use super::SurgeryError;
use crate::surgery::find_head::{find_head, HeadOp, HIDDEN_OUTPUT, TRIM_SLICE};

fn slice_last(
    name: &str,
    input: &str,
    output: &str,
) -> (NodeProto, Vec<super::onnx_pb::TensorProto>) {
    let p = |s: &str| format!("{name}/{s}");
    let inits = vec![
        int64_tensor(&p("starts"), &[-1]),
        int64_tensor(&p("ends"), &[i64::MAX]),
        int64_tensor(&p("axes"), &[1]),
    ];
    let node = NodeProto {
        name: Some(name.to_string()),
        op_type: Some("Slice".into()),
        input: vec![input.into(), p("starts"), p("ends"), p("axes")],
        output: vec![output.into()],
        ..Default::default()
    };
    (node, inits)
}

/// The head computes the last position only: its input is sliced, not its output.
pub fn trim(m: &mut OnnxModel) -> Result<(), SurgeryError> {
    let head = find_head(m)?;
    if head.trimmed {
        return Err(graph_err(
            "already trimmed: the head's input is this tool's last-position slice",
        ));
    }
    let sliced = "/readout/trim/last_hidden";
    let (node, inits) = slice_last(TRIM_SLICE, &head.input, sliced);
    let g = m.graph_mut();
    g.initializer.extend(inits);
    g.node[head.node].input[0] = sliced.into();
    g.node.insert(head.node, node);
    let out = m
        .output_mut("logits")
        .ok_or_else(|| graph_err("no logits output"))?;
    set_dim(out, 1, 1);
    Ok(())
}

/// Gathers `rows` of a `[N, ...]` tensor's bytes (`row_bytes` each).
fn take_rows(bytes: &[u8], row_bytes: usize, rows: &[u32]) -> Result<Vec<u8>, SurgeryError> {
    let mut out = Vec::with_capacity(row_bytes * rows.len());
    for &r in rows {
        let s = r as usize * row_bytes;
        out.extend_from_slice(
            bytes
                .get(s..s + row_bytes)
                .ok_or_else(|| graph_err(format!("row {r} outside the table")))?,
        );
    }
    Ok(out)
}

/// Gathers columns `cols` of a row-major `[r, c]` matrix of `size`-byte elements.
fn take_cols(
    bytes: &[u8],
    r: usize,
    c: usize,
    size: usize,
    cols: &[u32],
) -> Result<Vec<u8>, SurgeryError> {
    if bytes.len() != r * c * size {
        return Err(graph_err(format!(
            "matrix of {} bytes is not {r}×{c}×{size}",
            bytes.len()
        )));
    }
    let mut out = Vec::with_capacity(r * cols.len() * size);
    for i in 0..r {
        for &j in cols {
            let s = (i * c + j as usize) * size;
            out.extend_from_slice(&bytes[s..s + size]);
        }
    }
    Ok(out)
}

pub struct PruneStats {
    /// Initializers no longer read by anything, dropped from the file.
    pub dropped: Vec<String>,
    pub removed_bytes: usize,
    pub added_bytes: usize,
}

/// Replaces the head with one whose row `i` is the old row `keep[i]`. New
/// tables are new initializers: a table the embedding shares is never touched.
pub fn prune(m: &mut OnnxModel, keep: &[u32]) -> Result<PruneStats, SurgeryError> {
    let head = find_head(m)?;
    if let Some(&bad) = keep.iter().find(|&&k| k as usize >= head.rows) {
        return Err(graph_err(format!(
            "keep id {bad} is outside the head's {} rows",
            head.rows
        )));
    }
    let k = keep.len() as i64;
    let before: usize = m
        .graph()
        .initializer
        .iter()
        .map(|t| OnnxModel::tensor_len(t).unwrap_or(0))
        .sum();
    let mut new_inits = Vec::new();
    let mut rewire: Vec<(usize, String)> = Vec::new();
    let suffix = ".readout_pruned";
    let rows_of = |m: &OnnxModel,
                   name: &str|
     -> Result<(Vec<u8>, usize, super::onnx_pb::TensorProto), SurgeryError> {
        let t = m
            .initializer(name)
            .ok_or_else(|| graph_err(format!("{name} missing")))?
            .clone();
        let bytes = m.tensor_bytes(&t)?;
        if bytes.len() % head.rows != 0 {
            return Err(graph_err(format!(
                "{name}: {} bytes do not split into {} rows",
                bytes.len(),
                head.rows
            )));
        }
        let row = bytes.len() / head.rows;
        Ok((bytes, row, t))
    };
    match &head.op {
        HeadOp::MatMulNBits {
            weight,
            scales,
            zero_points,
            bias,
            ..
        } => {
            for (slot, name) in [
                (1usize, Some(weight)),
                (2, Some(scales)),
                (3, zero_points.as_ref()),
                (5, bias.as_ref()),
            ] {
                let Some(name) = name else { continue };
                let (bytes, row, t) = rows_of(m, name)?;
                let mut dims = t.dims.clone();
                if dims.is_empty() || dims[0] % head.rows as i64 != 0 {
                    return Err(graph_err(format!(
                        "{name}: dims {dims:?} do not start with the head's {} rows",
                        head.rows
                    )));
                }
                if dims.len() == 1 {
                    dims[0] = dims[0] / head.rows as i64 * k;
                } else {
                    dims[0] = k;
                }
                let new = format!("{name}{suffix}");
                new_inits.push(raw_tensor(
                    &new,
                    t.data_type.unwrap_or(0),
                    dims,
                    take_rows(&bytes, row, keep)?,
                ));
                rewire.push((slot, new));
            }
        }
        HeadOp::MatMul {
            weight,
            transposed_from,
        } => {
            let (src, rows_major) = match transposed_from {
                Some(e) => (e, true),
                None => (weight, false),
            };
            let t = m
                .initializer(src)
                .ok_or_else(|| graph_err(format!("{src} missing")))?
                .clone();
            let size = dtype_size(t.data_type.unwrap_or(0))
                .ok_or_else(|| graph_err(format!("{src}: unsupported dtype")))?;
            let bytes = m.tensor_bytes(&t)?;
            let h = head.hidden;
            // Always produce W' = [H, K] for MatMul(hidden, W').
            let raw = if rows_major {
                let picked = take_rows(&bytes, h * size, keep)?; // [K, H]
                transpose(&picked, keep.len(), h, size)
            } else {
                take_cols(&bytes, h, head.rows, size, keep)?
            };
            let new = format!("{src}{suffix}");
            new_inits.push(raw_tensor(
                &new,
                t.data_type.unwrap_or(0),
                vec![h as i64, k],
                raw,
            ));
            rewire.push((1, new));
        }
        HeadOp::Gemm {
            weight,
            trans_b,
            bias,
        } => {
            let t = m
                .initializer(weight)
                .ok_or_else(|| graph_err(format!("{weight} missing")))?
                .clone();
            let size = dtype_size(t.data_type.unwrap_or(0))
                .ok_or_else(|| graph_err(format!("{weight}: unsupported dtype")))?;
            let bytes = m.tensor_bytes(&t)?;
            let h = head.hidden;
            let (raw, dims) = if *trans_b {
                (take_rows(&bytes, h * size, keep)?, vec![k, h as i64])
            } else {
                (
                    take_cols(&bytes, h, head.rows, size, keep)?,
                    vec![h as i64, k],
                )
            };
            let new = format!("{weight}{suffix}");
            new_inits.push(raw_tensor(&new, t.data_type.unwrap_or(0), dims, raw));
            rewire.push((1, new));
            if let Some(b) = bias {
                let (bytes, row, t) = rows_of(m, b)?;
                let new = format!("{b}{suffix}");
                new_inits.push(raw_tensor(
                    &new,
                    t.data_type.unwrap_or(0),
                    vec![k],
                    take_rows(&bytes, row, keep)?,
                ));
                rewire.push((2, new));
            }
        }
    }
    let added_bytes = new_inits
        .iter()
        .map(|t| t.raw_data.as_ref().map_or(0, Vec::len))
        .sum();
    let g = m.graph_mut();
    g.initializer.extend(new_inits);
    let node = &mut g.node[head.node];
    for (slot, name) in rewire {
        let input = node
            .input
            .get_mut(slot)
            .ok_or_else(|| graph_err(format!("head node has no input {slot} to re-point")))?;
        *input = name;
    }
    if matches!(head.op, HeadOp::MatMulNBits { .. }) {
        set_attr_i(node, "N", k);
    }
    let out = m
        .output_mut("logits")
        .ok_or_else(|| graph_err("no logits output"))?;
    set_dim(out, 2, k);
    let dropped = m.drop_unused_initializers();
    // Sizes come from each tensor's dims, which a malformed graph need not
    // match with its bytes: saturate rather than underflow (found by fuzzing).
    let after_without_new: usize = m
        .graph()
        .initializer
        .iter()
        .map(|t| OnnxModel::tensor_len(t).unwrap_or(0))
        .sum::<usize>()
        .saturating_sub(added_bytes);
    Ok(PruneStats {
        dropped,
        removed_bytes: before.saturating_sub(after_without_new),
        added_bytes,
    })
}

fn transpose(bytes: &[u8], r: usize, c: usize, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; bytes.len()];
    for i in 0..r {
        for j in 0..c {
            let (s, d) = ((i * c + j) * size, (j * r + i) * size);
            out[d..d + size].copy_from_slice(&bytes[s..s + size]);
        }
    }
    out
}

/// Adds the output `last_hidden` `[batch, 1, hidden]`: the head's input at the last position.
pub fn expose_hidden(m: &mut OnnxModel) -> Result<(), SurgeryError> {
    if m.output(HIDDEN_OUTPUT).is_some() {
        return Err(graph_err(format!("already exposes {HIDDEN_OUTPUT}")));
    }
    let head = find_head(m)?;
    let elem = elem_type_of(
        m.output("logits")
            .ok_or_else(|| graph_err("no logits output"))?,
    );
    let node = if head.trimmed {
        NodeProto {
            name: Some("/readout/hidden/Identity".into()),
            op_type: Some("Identity".into()),
            input: vec![head.input.clone()],
            output: vec![HIDDEN_OUTPUT.into()],
            ..Default::default()
        }
    } else {
        let (node, inits) = slice_last("/readout/hidden/Slice", &head.input, HIDDEN_OUTPUT);
        m.graph_mut().initializer.extend(inits);
        node
    };
    let dim = |p: Option<&str>, v: Option<i64>| Dimension {
        dim_param: p.map(Into::into),
        dim_value: v,
        denotation: None,
    };
    let info = ValueInfoProto {
        name: Some(HIDDEN_OUTPUT.into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeTensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto {
                    dim: vec![
                        dim(Some("batch_size"), None),
                        dim(None, Some(1)),
                        dim(None, Some(head.hidden as i64)),
                    ],
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let g = m.graph_mut();
    g.node.insert(head.node + 1, node);
    g.output.push(info);
    Ok(())
}
