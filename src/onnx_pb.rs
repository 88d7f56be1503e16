//! The ONNX protobuf messages the surgery reads and rewrites and our own
//! runtime loads, declared with
//! prost's derive (field numbers from the ONNX IR spec, `onnx.proto`).
//! Messages the surgery never looks inside (functions, training info, sparse
//! tensors, sub-graphs, non-tensor types) are kept as opaque bytes, so they
//! survive a rewrite unchanged.

#![allow(clippy::derive_partial_eq_without_eq)]

#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    #[prost(int64, optional, tag = "1")]
    pub ir_version: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub producer_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub producer_version: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub domain: Option<String>,
    #[prost(int64, optional, tag = "5")]
    pub model_version: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub doc_string: Option<String>,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: Vec<StringStringEntryProto>,
    #[prost(bytes = "vec", repeated, tag = "20")]
    pub training_info: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "25")]
    pub functions: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "26")]
    pub configuration: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    #[prost(string, optional, tag = "1")]
    pub domain: Option<String>,
    #[prost(int64, optional, tag = "2")]
    pub version: Option<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StringStringEntryProto {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(string, optional, tag = "10")]
    pub doc_string: Option<String>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
    #[prost(bytes = "vec", repeated, tag = "14")]
    pub quantization_annotation: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "15")]
    pub sparse_initializer: Vec<Vec<u8>>,
    #[prost(message, repeated, tag = "16")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub op_type: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    #[prost(string, optional, tag = "6")]
    pub doc_string: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub domain: Option<String>,
    #[prost(string, optional, tag = "8")]
    pub overload: Option<String>,
    #[prost(message, repeated, tag = "9")]
    pub metadata_props: Vec<StringStringEntryProto>,
    #[prost(bytes = "vec", repeated, tag = "10")]
    pub device_configurations: Vec<Vec<u8>>,
}

/// `AttributeProto.AttributeType`.
pub mod attr_type {
    pub const FLOAT: i32 = 1;
    pub const INT: i32 = 2;
    pub const STRING: i32 = 3;
    pub const TENSOR: i32 = 4;
    pub const INTS: i32 = 7;
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(float, optional, tag = "2")]
    pub f: Option<f32>,
    #[prost(int64, optional, tag = "3")]
    pub i: Option<i64>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub s: Option<Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    #[prost(bytes = "vec", optional, tag = "6")]
    pub g: Option<Vec<u8>>,
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    #[prost(message, repeated, tag = "10")]
    pub tensors: Vec<TensorProto>,
    #[prost(bytes = "vec", repeated, tag = "11")]
    pub graphs: Vec<Vec<u8>>,
    #[prost(string, optional, tag = "13")]
    pub doc_string: Option<String>,
    #[prost(bytes = "vec", optional, tag = "14")]
    pub tp: Option<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "15")]
    pub type_protos: Vec<Vec<u8>>,
    #[prost(int32, optional, tag = "20")]
    pub r#type: Option<i32>,
    #[prost(string, optional, tag = "21")]
    pub ref_attr_name: Option<String>,
    #[prost(bytes = "vec", optional, tag = "22")]
    pub sparse_tensor: Option<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "23")]
    pub sparse_tensors: Vec<Vec<u8>>,
}

/// `TensorProto.DataType`.
pub mod dtype {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const FLOAT16: i32 = 10;
    pub const BFLOAT16: i32 = 16;
}

/// Bytes per element of the dtypes a head or embedding table can have.
pub fn dtype_size(dt: i32) -> Option<usize> {
    match dt {
        dtype::UINT8 | dtype::INT8 => Some(1),
        dtype::FLOAT16 | dtype::BFLOAT16 => Some(2),
        dtype::FLOAT | dtype::INT32 => Some(4),
        dtype::INT64 => Some(8),
        _ => None,
    }
}

/// A tensor whose data type's typed fields [`inline_bytes`] does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("data type {0} not readable here")]
pub struct UnreadableDtype(pub i32);

/// The little-endian bytes of a tensor stored in the model itself
/// (`raw_data`, or the typed fields), for the surgery and our runtime alike;
/// `None` when it is external.
pub fn inline_bytes(t: &TensorProto) -> Option<Result<Vec<u8>, UnreadableDtype>> {
    if t.data_location == Some(1) {
        return None;
    }
    if let Some(raw) = &t.raw_data {
        return Some(Ok(raw.clone()));
    }
    let mut out = Vec::new();
    match t.data_type.unwrap_or(0) {
        dtype::FLOAT => t
            .float_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        dtype::INT64 => t
            .int64_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        dtype::INT32 => t
            .int32_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        // uint8/int8/float16 in int32_data: one element per entry.
        dtype::UINT8 | dtype::INT8 => t.int32_data.iter().for_each(|v| out.push(*v as u8)),
        dtype::FLOAT16 | dtype::BFLOAT16 => t
            .int32_data
            .iter()
            .for_each(|v| out.extend_from_slice(&(*v as u16).to_le_bytes())),
        dt => return Some(Err(UnreadableDtype(dt))),
    }
    Some(Ok(out))
}

/// A node's attribute by name; the getters below read one field of it
/// (surgery and our runtime read attributes the same way).
fn attr<'n>(n: &'n NodeProto, key: &str) -> Option<&'n AttributeProto> {
    n.attribute.iter().find(|a| a.name.as_deref() == Some(key))
}

pub fn attr_i(n: &NodeProto, key: &str) -> Option<i64> {
    attr(n, key).and_then(|a| a.i)
}

pub fn attr_f(n: &NodeProto, key: &str) -> Option<f32> {
    attr(n, key).and_then(|a| a.f)
}

pub fn attr_s<'n>(n: &'n NodeProto, key: &str) -> Option<&'n [u8]> {
    attr(n, key).and_then(|a| a.s.as_deref())
}

pub fn attr_t<'n>(n: &'n NodeProto, key: &str) -> Option<&'n TensorProto> {
    attr(n, key).and_then(|a| a.t.as_ref())
}

pub fn attr_ints(n: &NodeProto, key: &str) -> Option<Vec<i64>> {
    attr(n, key).map(|a| a.ints.clone())
}

pub fn dtype_name(dt: i32) -> &'static str {
    match dt {
        dtype::FLOAT => "float32",
        dtype::UINT8 => "uint8",
        dtype::INT8 => "int8",
        dtype::INT32 => "int32",
        dtype::INT64 => "int64",
        dtype::FLOAT16 => "float16",
        dtype::BFLOAT16 => "bfloat16",
        _ => "other",
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, optional, tag = "2")]
    pub data_type: Option<i32>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub segment: Option<Vec<u8>>,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_data: Vec<Vec<u8>>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, optional, tag = "8")]
    pub name: Option<String>,
    #[prost(bytes = "vec", optional, tag = "9")]
    pub raw_data: Option<Vec<u8>>,
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    #[prost(uint64, repeated, tag = "11")]
    pub uint64_data: Vec<u64>,
    #[prost(string, optional, tag = "12")]
    pub doc_string: Option<String>,
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    /// 0 = DEFAULT (inline), 1 = EXTERNAL.
    #[prost(int32, optional, tag = "14")]
    pub data_location: Option<i32>,
    #[prost(message, repeated, tag = "16")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
    #[prost(string, optional, tag = "3")]
    pub doc_string: Option<String>,
    #[prost(message, repeated, tag = "4")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TypeTensor>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub sequence_type: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "5")]
    pub map_type: Option<Vec<u8>>,
    #[prost(string, optional, tag = "6")]
    pub denotation: Option<String>,
    #[prost(bytes = "vec", optional, tag = "7")]
    pub opaque_type: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "8")]
    pub sparse_tensor_type: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "9")]
    pub optional_type: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeTensor {
    #[prost(int32, optional, tag = "1")]
    pub elem_type: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Dimension {
    #[prost(int64, optional, tag = "1")]
    pub dim_value: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub dim_param: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub denotation: Option<String>,
}

/// The operator types of a model's graph, read without decoding anything
/// else: the initializers (the whole of a single-file model's weights) are
/// skipped, not copied. Lets a caller ask what a graph computes before
/// choosing who loads it.
pub fn op_types(model: &[u8]) -> Result<Vec<String>, prost::DecodeError> {
    #[derive(Clone, PartialEq, prost::Message)]
    struct Op {
        #[prost(string, optional, tag = "4")]
        op_type: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct Graph {
        #[prost(message, repeated, tag = "1")]
        node: Vec<Op>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct Model {
        #[prost(message, optional, tag = "7")]
        graph: Option<Graph>,
    }
    use prost::Message;
    Ok(Model::decode(model)?
        .graph
        .map(|g| g.node.into_iter().filter_map(|n| n.op_type).collect())
        .unwrap_or_default())
}

/// What a graph's top level holds, counted on the wire: nothing is decoded
/// or allocated, so a file of millions of empty nodes is refused at the cost
/// of one pass over its bytes rather than after it has been decoded into
/// gigabytes of structs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GraphCounts {
    pub nodes: u64,
    pub initializers: u64,
}

/// The most nodes, and initializers, one graph may hold. Hugging Face's
/// Optimum export of a 30-layer model has 7,426 nodes and 482 initializers
/// (onnxruntime-genai's builder: 343 and 365), so this is room for about
/// 1,000 layers of the most verbose export, and far below what would
/// exhaust a tab's memory when decoded.
pub const MAX_GRAPH_ENTRIES: u64 = 250_000;

/// Why a graph's wire format could not be counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub &'static str);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Bytes the wire walk reads: a slice, or (in the browser) a JS array read
/// in place, so that a downloaded graph is counted without first being
/// copied into the module's memory, which never shrinks.
#[allow(clippy::len_without_is_empty)] // the walk asks only for the end
pub trait WireBytes {
    fn len(&self) -> usize;
    fn byte(&self, at: usize) -> Option<u8>;
}

impl WireBytes for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn byte(&self, at: usize) -> Option<u8> {
        self.get(at).copied()
    }
}

fn varint<B: WireBytes + ?Sized>(b: &B, at: &mut usize) -> Result<u64, WireError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = b.byte(*at).ok_or(WireError("truncated varint"))?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(WireError("varint longer than 10 bytes"))
}

/// Calls `f(field, start, end)` for each length-delimited field of the one
/// message in `b[from..to]` and skips the others; fails on a malformed or
/// truncated one. `f` returns `false` to stop the walk early.
fn each_field<B: WireBytes + ?Sized>(
    b: &B,
    from: usize,
    to: usize,
    mut f: impl FnMut(u64, usize, usize) -> Result<bool, WireError>,
) -> Result<(), WireError> {
    let mut at = from;
    while at < to {
        let key = varint(b, &mut at)?;
        let skip = match key & 7 {
            0 => {
                varint(b, &mut at)?;
                0
            }
            1 => 8,
            5 => 4,
            2 => {
                let len = usize::try_from(varint(b, &mut at)?)
                    .map_err(|_| WireError("length beyond the address space"))?;
                let end = at
                    .checked_add(len)
                    .filter(|&e| e <= to)
                    .ok_or(WireError("a field runs past the end"))?;
                if !f(key >> 3, at, end)? {
                    return Ok(());
                }
                at = end;
                0
            }
            _ => return Err(WireError("a group or unknown wire type")),
        };
        at = at
            .checked_add(skip)
            .filter(|&e| e <= to)
            .ok_or(WireError("a field runs past the end"))?;
    }
    Ok(())
}

/// Counts the top-level graph's nodes (GraphProto field 1) and initializers
/// (field 5) of a ModelProto (graph: field 7), reading tags and lengths only.
pub fn graph_counts(model: &[u8]) -> Result<GraphCounts, WireError> {
    graph_counts_in(model, u64::MAX)
}

/// [`graph_counts`] over any [`WireBytes`], stopping once either count
/// passes `stop` (a hostile file's millions of entries are not all read).
pub fn graph_counts_in<B: WireBytes + ?Sized>(
    model: &B,
    stop: u64,
) -> Result<GraphCounts, WireError> {
    let mut c = GraphCounts::default();
    each_field(model, 0, model.len(), |field, start, end| {
        if field == 7 {
            each_field(model, start, end, |f, _, _| {
                match f {
                    1 => c.nodes += 1,
                    5 => c.initializers += 1,
                    _ => {}
                }
                Ok(c.nodes <= stop && c.initializers <= stop)
            })?;
        }
        Ok(c.nodes <= stop && c.initializers <= stop)
    })?;
    Ok(c)
}

/// The first of a graph's counts over [`MAX_GRAPH_ENTRIES`]: `(what, count)`.
/// An unreadable wire format is left for the decoder to name.
pub fn graph_over_limit(model: &[u8]) -> Option<(&'static str, u64)> {
    graph_over_limit_in(model, u64::MAX)
}

/// [`graph_over_limit`] over any [`WireBytes`], counting no further than
/// `stop` (then the count reported is `stop + 1`, a lower bound).
pub fn graph_over_limit_in<B: WireBytes + ?Sized>(
    model: &B,
    stop: u64,
) -> Option<(&'static str, u64)> {
    let c = graph_counts_in(model, stop).ok()?;
    if c.nodes > MAX_GRAPH_ENTRIES {
        Some(("nodes", c.nodes))
    } else if c.initializers > MAX_GRAPH_ENTRIES {
        Some(("initializers", c.initializers))
    } else {
        None
    }
}
