//! The head's rows as float32 vectors, dequantised where needed: what
//! `hidden · row` must reproduce (spec §6.4).

use half::f16;

use crate::surgery::find_head::{find_head, HeadOp};
use crate::surgery::graph::{attr_i, graph_err, OnnxModel};
use crate::surgery::onnx_pb::dtype;
use crate::surgery::SurgeryError;

fn floats(bytes: &[u8], dt: i32) -> Result<Vec<f32>, SurgeryError> {
    match dt {
        dtype::FLOAT => Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()),
        dtype::FLOAT16 => Ok(bytes
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect()),
        other => Err(graph_err(format!("float table of dtype {other}"))),
    }
}

/// `v[i]`, or an error naming the table that is shorter than its dims say
/// (a graph is user data: its dims and bytes need not agree).
fn at<T: Copy>(v: &[T], i: usize, what: &str) -> Result<T, SurgeryError> {
    v.get(i).copied().ok_or_else(|| {
        graph_err(format!(
            "{what}: element {i} is beyond its {} elements",
            v.len()
        ))
    })
}

/// `v[start..start + len]`, or the same error.
fn span<'a, T>(v: &'a [T], start: usize, len: usize, what: &str) -> Result<&'a [T], SurgeryError> {
    start
        .checked_add(len)
        .and_then(|end| v.get(start..end))
        .ok_or_else(|| {
            graph_err(format!(
                "{what}: elements {start}..+{len} are beyond its {} elements",
                v.len()
            ))
        })
}

fn table(m: &OnnxModel, name: &str) -> Result<(Vec<u8>, i32, Vec<i64>), SurgeryError> {
    let t = m
        .initializer(name)
        .ok_or_else(|| graph_err(format!("{name} missing")))?;
    Ok((m.tensor_bytes(t)?, t.data_type.unwrap_or(0), t.dims.clone()))
}

/// Rows of the head, each `hidden` floats, and the head's bias at those rows.
pub type RowsAndBias = (Vec<Vec<f32>>, Option<Vec<f32>>);

/// Row `r` of the head as `hidden` floats, and its bias.
pub fn head_rows(m: &OnnxModel, rows: &[usize]) -> Result<RowsAndBias, SurgeryError> {
    let head = find_head(m)?;
    let h = head.hidden;
    let mut out = Vec::with_capacity(rows.len());
    let bias_of = |name: &Option<String>| -> Result<Option<Vec<f32>>, SurgeryError> {
        name.as_ref()
            .map(|b| {
                let (bytes, dt, _) = table(m, b)?;
                let all = floats(&bytes, dt)?;
                rows.iter()
                    .map(|&r| at(&all, r, b))
                    .collect::<Result<Vec<f32>, SurgeryError>>()
            })
            .transpose()
    };
    let bias = match &head.op {
        HeadOp::MatMulNBits {
            weight,
            scales,
            zero_points,
            bias,
            bits,
            block_size,
        } => {
            if *bits != 4 {
                return Err(SurgeryError::Unsupported(format!(
                    "MatMulNBits with {bits} bits"
                )));
            }
            let (wb, _, wd) = table(m, weight)?;
            let (sb, sdt, _) = table(m, scales)?;
            let sc = floats(&sb, sdt)?;
            let zp = zero_points.as_ref().map(|z| table(m, z)).transpose()?;
            let dim = |i: usize| {
                wd.get(i)
                    .map(|&d| d as usize)
                    .ok_or_else(|| graph_err(format!("{weight}: dims {wd:?}")))
            };
            let (blocks, blob) = (dim(1)?, dim(2)?);
            let bs = *block_size as usize;
            let zp_row = zp.as_ref().map(|(b, _, _)| b.len() / head.rows.max(1));
            for &r in rows {
                let mut v = Vec::with_capacity(h);
                for blk in 0..blocks {
                    let scale = at(&sc, r * blocks + blk, scales)?;
                    let z = match (&zp, zp_row) {
                        (Some((b, _, _)), Some(row)) => {
                            let byte = at(b, r * row + blk / 2, "zero points")?;
                            (if blk % 2 == 0 { byte & 0x0f } else { byte >> 4 }) as f32
                        }
                        _ => 8.0,
                    };
                    for j in 0..bs.min(h.saturating_sub(blk * bs)) {
                        let byte = at(&wb, (r * blocks + blk) * blob + j / 2, weight)?;
                        let q = if j % 2 == 0 { byte & 0x0f } else { byte >> 4 };
                        v.push((q as f32 - z) * scale);
                    }
                }
                out.push(v);
            }
            bias_of(bias)?
        }
        HeadOp::MatMul {
            weight,
            transposed_from,
        } => {
            match transposed_from {
                Some(e) => {
                    let (b, dt, _) = table(m, e)?;
                    let all = floats(&b, dt)?;
                    for &r in rows {
                        out.push(span(&all, r * h, h, e)?.to_vec());
                    }
                }
                None => {
                    let (b, dt, _) = table(m, weight)?;
                    let all = floats(&b, dt)?;
                    for &r in rows {
                        out.push(
                            (0..h)
                                .map(|i| at(&all, i * head.rows + r, weight))
                                .collect::<Result<_, _>>()?,
                        );
                    }
                }
            }
            None
        }
        HeadOp::Gemm {
            weight,
            trans_b,
            bias,
        } => {
            let (b, dt, _) = table(m, weight)?;
            let all = floats(&b, dt)?;
            for &r in rows {
                if *trans_b {
                    out.push(span(&all, r * h, h, weight)?.to_vec());
                } else {
                    out.push(
                        (0..h)
                            .map(|i| at(&all, i * head.rows + r, weight))
                            .collect::<Result<_, _>>()?,
                    );
                }
            }
            bias_of(bias)?
        }
    };
    Ok((out, bias))
}

/// The block size in which the head's kernel rounds its input to int8, if it
/// does: ONNX Runtime's MatMulNBits at accuracy_level 4 (CompInt8, the CPU
/// default the builder writes) quantises each block of `block_size` inputs
/// with its own scale max|x| / 127. Other levels and other heads compute in
/// float.
pub fn int8_input_block(m: &OnnxModel) -> Result<Option<usize>, SurgeryError> {
    let head = find_head(m)?;
    Ok(match &head.op {
        HeadOp::MatMulNBits { block_size, .. } => {
            let node = m
                .graph()
                .node
                .get(head.node)
                .ok_or_else(|| graph_err("head node index out of range"))?;
            (attr_i(node, "accuracy_level") == Some(4)).then_some(*block_size as usize)
        }
        _ => None,
    })
}
