//! `readout inspect`: what a decoder graph holds and what surgery would change.

use serde::Serialize;

use super::graph::{dims_of, elem_type_of, OnnxModel};
use super::onnx_pb::dtype_name;
use super::SurgeryError;
use crate::surgery::find_head::{find_embeddings, find_head, sharing, Embedding, Head, Sharing};

#[derive(Debug, Clone, Serialize)]
pub struct Io {
    pub name: String,
    pub dtype: String,
    pub dims: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub name: String,
    pub dtype: String,
    pub dims: Vec<i64>,
    pub bytes: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct PruneEstimate {
    pub rows: usize,
    /// Bytes the file loses: the old head tables, unless the embedding shares them.
    pub removes_bytes: usize,
    /// Bytes of the new K-row head.
    pub adds_bytes: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct InspectReport {
    pub path: String,
    pub inputs: Vec<Io>,
    pub outputs: Vec<Io>,
    pub kv_layers: usize,
    pub kv_dims: Vec<String>,
    pub kv_dtype: String,
    pub head: Head,
    pub head_tables: Vec<Table>,
    pub head_bytes: usize,
    pub embeddings: Vec<Embedding>,
    pub sharing: Sharing,
    pub prune: PruneEstimate,
    pub graph_bytes: u64,
    pub initializer_bytes: usize,
}

fn io(v: &super::onnx_pb::ValueInfoProto) -> Io {
    Io {
        name: v.name.clone().unwrap_or_default(),
        dtype: dtype_name(elem_type_of(v)).into(),
        dims: dims_of(v),
    }
}

pub fn inspect(m: &OnnxModel, prune_rows: usize) -> Result<InspectReport, SurgeryError> {
    let g = m.graph();
    let head = find_head(m)?;
    let embeddings = find_embeddings(m);
    let share = sharing(m, &head, &embeddings)?;
    let head_tables: Vec<Table> = head
        .tables()
        .iter()
        .filter_map(|n| m.initializer(n))
        .map(|t| Table {
            name: t.name.clone().unwrap_or_default(),
            dtype: dtype_name(t.data_type.unwrap_or(0)).into(),
            dims: t.dims.clone(),
            bytes: OnnxModel::tensor_len(t).unwrap_or(0),
        })
        .collect();
    let head_bytes: usize = head_tables.iter().map(|t| t.bytes).sum();
    let adds_bytes = head_bytes / head.rows.max(1) * prune_rows;
    let removes_bytes = if share == Sharing::Shared {
        0
    } else {
        head_bytes
    };
    let past: Vec<&super::onnx_pb::ValueInfoProto> = g
        .input
        .iter()
        .filter(|i| {
            i.name
                .as_deref()
                .is_some_and(|n| n.starts_with("past_key_values."))
        })
        .collect();
    Ok(InspectReport {
        path: m.path.display().to_string(),
        inputs: g.input.iter().map(io).collect(),
        outputs: g.output.iter().map(io).collect(),
        kv_layers: past.len() / 2,
        kv_dims: past.first().map(|p| dims_of(p)).unwrap_or_default(),
        kv_dtype: past
            .first()
            .map(|p| dtype_name(elem_type_of(p)).to_string())
            .unwrap_or_default(),
        head,
        head_tables,
        head_bytes,
        embeddings,
        sharing: share,
        prune: PruneEstimate {
            rows: prune_rows,
            removes_bytes,
            adds_bytes,
        },
        graph_bytes: std::fs::metadata(&m.path).map(|x| x.len()).unwrap_or(0),
        initializer_bytes: g
            .initializer
            .iter()
            .map(|t| OnnxModel::tensor_len(t).unwrap_or(0))
            .sum(),
    })
}

/// The human-readable form the CLI prints.
pub fn render(r: &InspectReport) -> String {
    let mut s = format!("{}\n", r.path);
    let list = |v: &[Io]| {
        v.iter()
            .filter(|x| !x.name.starts_with("past_key_values.") && !x.name.starts_with("present."))
            .map(|x| format!("  {} {} [{}]\n", x.name, x.dtype, x.dims.join(", ")))
            .collect::<String>()
    };
    s += &format!("inputs:\n{}", list(&r.inputs));
    s += &format!("outputs:\n{}", list(&r.outputs));
    s += &format!(
        "kv: {} layers of past_key_values.N.key|value, {} [{}] (present.* the same)\n",
        r.kv_layers,
        r.kv_dtype,
        r.kv_dims.join(", ")
    );
    let op = match &r.head.op {
        crate::surgery::find_head::HeadOp::MatMulNBits {
            bits, block_size, ..
        } => format!("MatMulNBits ({bits}-bit, block {block_size})"),
        crate::surgery::find_head::HeadOp::MatMul {
            transposed_from: Some(t),
            ..
        } => format!("MatMul over Transpose({t})"),
        crate::surgery::find_head::HeadOp::MatMul { .. } => "MatMul".into(),
        crate::surgery::find_head::HeadOp::Gemm { trans_b, .. } => {
            format!("Gemm (transB={})", *trans_b as u8)
        }
    };
    s += &format!(
        "head: {} `{}`, {} rows × hidden {}, {} bytes, reads {}{}\n",
        op,
        r.head.node_name,
        r.head.rows,
        r.head.hidden,
        r.head_bytes,
        r.head_tables
            .iter()
            .map(|t| format!("{} {} {:?}", t.name, t.dtype, t.dims))
            .collect::<Vec<_>>()
            .join(", "),
        if r.head.trimmed {
            "; trimmed to the last position"
        } else {
            "; every position"
        }
    );
    for e in &r.embeddings {
        s += &format!(
            "embedding: {} `{}` reads {}\n",
            e.op,
            e.node_name,
            e.tables.join(", ")
        );
    }
    s += &match r.sharing {
        Sharing::Shared => "sharing: one table is read by both the embedding and the head (tied); pruning removes no bytes from the file\n".to_string(),
        Sharing::Duplicated => "sharing: the head holds its own copy of the embedding's table; pruning removes that copy\n".to_string(),
        Sharing::Separate => "sharing: the head and the embedding have separate tables (untied)\n".to_string(),
    };
    s += &format!(
        "prune to {} rows: removes {} bytes, adds a {}-row head of {} bytes (net {:+} bytes)\n",
        r.prune.rows,
        r.prune.removes_bytes,
        r.prune.rows,
        r.prune.adds_bytes,
        r.prune.adds_bytes as i64 - r.prune.removes_bytes as i64
    );
    s += &format!(
        "file: graph {} bytes, initializers {} bytes\n",
        r.graph_bytes, r.initializer_bytes
    );
    s
}
