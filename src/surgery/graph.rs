//! An ONNX model in memory with its external data on disk: read tensors,
//! follow producers and consumers, and write the model back with a fresh
//! external-data file.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use prost::Message;

use super::onnx_pb::{
    dtype, dtype_size, Dimension, GraphProto, ModelProto, NodeProto, StringStringEntryProto,
    TensorProto, ValueInfoProto,
};
use super::SurgeryError;

/// Tensors at least this large go to the external-data file when saving.
const EXTERNAL_MIN_BYTES: usize = 1024;

pub struct OnnxModel {
    pub proto: ModelProto,
    /// Directory external-data locations are relative to.
    pub dir: PathBuf,
    pub path: PathBuf,
}

pub fn graph_err(msg: impl Into<String>) -> SurgeryError {
    SurgeryError::Graph(msg.into())
}

fn ext_value<'a>(t: &'a TensorProto, key: &str) -> Option<&'a str> {
    t.external_data
        .iter()
        .find(|e| e.key.as_deref() == Some(key))
        .and_then(|e| e.value.as_deref())
}

impl OnnxModel {
    pub fn load(path: &Path) -> Result<Self, SurgeryError> {
        let bytes = std::fs::read(path).map_err(|e| SurgeryError::file(path, e))?;
        Self::decode(&bytes, path)
    }

    /// A model from its bytes, as if read from `path` (external data is
    /// looked up beside it).
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Self, SurgeryError> {
        // Counted on the wire first: a file of millions of empty nodes would
        // otherwise be decoded into gigabytes before anything looked at it.
        if let Some((what, count)) = crate::onnx_pb::graph_over_limit(bytes) {
            return Err(SurgeryError::file(
                path,
                format!(
                    "the graph holds {count} {what}; at most {} are read",
                    crate::onnx_pb::MAX_GRAPH_ENTRIES
                ),
            ));
        }
        let proto = ModelProto::decode(bytes)
            .map_err(|e| SurgeryError::file(path, format!("not an ONNX model: {e}")))?;
        if proto.graph.is_none() {
            return Err(SurgeryError::file(path, "model has no graph"));
        }
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        Ok(Self {
            proto,
            dir,
            path: path.to_path_buf(),
        })
    }

    pub fn graph(&self) -> &GraphProto {
        self.proto.graph.as_ref().expect("checked at load")
    }

    pub fn graph_mut(&mut self) -> &mut GraphProto {
        self.proto.graph.as_mut().expect("checked at load")
    }

    pub fn initializer(&self, name: &str) -> Option<&TensorProto> {
        self.graph()
            .initializer
            .iter()
            .find(|t| t.name.as_deref() == Some(name))
    }

    pub fn node_index_producing(&self, value: &str) -> Option<usize> {
        self.graph()
            .node
            .iter()
            .position(|n| n.output.iter().any(|o| o == value))
    }

    /// Nodes that read `value` (by index), and whether a graph output is it.
    pub fn consumers(&self, value: &str) -> Vec<usize> {
        self.graph()
            .node
            .iter()
            .enumerate()
            .filter(|(_, n)| n.input.iter().any(|i| i == value))
            .map(|(i, _)| i)
            .collect()
    }

    pub fn output(&self, name: &str) -> Option<&ValueInfoProto> {
        self.graph()
            .output
            .iter()
            .find(|o| o.name.as_deref() == Some(name))
    }

    pub fn output_mut(&mut self, name: &str) -> Option<&mut ValueInfoProto> {
        self.graph_mut()
            .output
            .iter_mut()
            .find(|o| o.name.as_deref() == Some(name))
    }

    /// The bytes of a tensor in its little-endian element layout, wherever they live.
    pub fn tensor_bytes(&self, t: &TensorProto) -> Result<Vec<u8>, SurgeryError> {
        let name = t.name.clone().unwrap_or_default();
        if t.data_location == Some(1) {
            let loc = ext_value(t, "location")
                .ok_or_else(|| graph_err(format!("{name}: external tensor without a location")))?;
            let offset: u64 = ext_value(t, "offset")
                .map(str::parse)
                .transpose()
                .map_err(|e| graph_err(format!("{name}: offset: {e}")))?
                .unwrap_or(0);
            let length: Option<usize> = ext_value(t, "length")
                .map(str::parse)
                .transpose()
                .map_err(|e| graph_err(format!("{name}: length: {e}")))?;
            // The location is the file's own claim: it stays beside the graph.
            if !crate::model_dir::confine::plain_relative(loc) {
                return Err(graph_err(format!(
                    "{name}: external data location {loc:?} leaves the model's folder"
                )));
            }
            let path = self.dir.join(loc);
            let mut f = File::open(&path).map_err(|e| SurgeryError::file(&path, e))?;
            let file_len = f
                .metadata()
                .map_err(|e| SurgeryError::file(&path, e))?
                .len();
            let length = match length {
                Some(l) => l,
                None => (file_len.saturating_sub(offset)) as usize,
            };
            // Offset and length are the file's numbers: checked before they index memory.
            let end = offset.checked_add(length as u64).filter(|&e| e <= file_len);
            if end.is_none() {
                return Err(SurgeryError::file(
                    &path,
                    format!(
                        "{name}: bytes {offset}..{} beyond the file's {file_len} (truncated?)",
                        offset.saturating_add(length as u64)
                    ),
                ));
            }
            f.seek(SeekFrom::Start(offset))
                .map_err(|e| SurgeryError::file(&path, e))?;
            let mut buf = vec![0u8; length];
            f.read_exact(&mut buf)
                .map_err(|e| SurgeryError::file(&path, e))?;
            return Ok(buf);
        }
        match crate::onnx_pb::inline_bytes(t) {
            Some(r) => r.map_err(|e| graph_err(format!("{name}: {e}"))),
            None => Err(graph_err(format!("{name}: external tensor read as inline"))),
        }
    }

    pub fn tensor_len(t: &TensorProto) -> Result<usize, SurgeryError> {
        let n: i64 = t.dims.iter().product();
        let size = dtype_size(t.data_type.unwrap_or(0))
            .ok_or_else(|| graph_err(format!("{:?}: unsupported dtype", t.name)))?;
        Ok(n as usize * size)
    }

    /// Whether any node carries a sub-graph: then value references inside it
    /// are opaque here and no initializer may be dropped.
    fn has_subgraphs(&self) -> bool {
        self.graph().node.iter().any(|n| {
            n.attribute
                .iter()
                .any(|a| a.g.is_some() || !a.graphs.is_empty())
        })
    }

    /// Drops nodes none of whose outputs is read or is a graph output, until none is left.
    fn drop_dead_nodes(&mut self) {
        loop {
            let g = self.graph();
            let mut read: HashSet<&str> = g
                .node
                .iter()
                .flat_map(|n| n.input.iter().map(String::as_str))
                .collect();
            read.extend(g.output.iter().filter_map(|o| o.name.as_deref()));
            let keep: Vec<NodeProto> = g
                .node
                .iter()
                .filter(|n| n.output.iter().any(|o| read.contains(o.as_str())))
                .cloned()
                .collect();
            if keep.len() == g.node.len() {
                return;
            }
            self.graph_mut().node = keep;
        }
    }

    /// Drops dead nodes, then initializers nothing reads any more; returns their names.
    pub fn drop_unused_initializers(&mut self) -> Vec<String> {
        if self.has_subgraphs() {
            return vec![];
        }
        self.drop_dead_nodes();
        let g = self.graph();
        let mut used: HashSet<&str> = g
            .node
            .iter()
            .flat_map(|n| n.input.iter().map(String::as_str))
            .collect();
        used.extend(g.output.iter().filter_map(|o| o.name.as_deref()));
        let dropped: Vec<String> = g
            .initializer
            .iter()
            .filter_map(|t| t.name.clone())
            .filter(|n| !used.contains(n.as_str()))
            .collect();
        let set: HashSet<&String> = dropped.iter().collect();
        let keep: Vec<TensorProto> = self
            .graph()
            .initializer
            .iter()
            .filter(|t| !t.name.as_ref().is_some_and(|n| set.contains(n)))
            .cloned()
            .collect();
        self.graph_mut().initializer = keep;
        dropped
    }

    /// Writes `dir/graph_name` and `dir/graph_name.data` (every large tensor,
    /// copied byte for byte from wherever it was).
    pub fn save(&self, dir: &Path, graph_name: &str) -> Result<Vec<PathBuf>, SurgeryError> {
        let data_name = format!("{graph_name}.data");
        let data_path = dir.join(&data_name);
        let mut data = BufWriter::new(
            File::create(&data_path).map_err(|e| SurgeryError::file(&data_path, e))?,
        );
        let mut proto = self.proto.clone();
        let mut offset: u64 = 0;
        let g = proto.graph.as_mut().expect("checked at load");
        for t in g.initializer.iter_mut() {
            let external = t.data_location == Some(1);
            let len = Self::tensor_len(t).unwrap_or(0);
            if !external && len < EXTERNAL_MIN_BYTES {
                continue;
            }
            let bytes = self.tensor_bytes(t)?;
            data.write_all(&bytes)
                .map_err(|e| SurgeryError::file(&data_path, e))?;
            let entry = |k: &str, v: String| StringStringEntryProto {
                key: Some(k.into()),
                value: Some(v),
            };
            t.external_data = vec![
                entry("location", data_name.clone()),
                entry("offset", offset.to_string()),
                entry("length", bytes.len().to_string()),
            ];
            t.data_location = Some(1);
            t.raw_data = None;
            t.float_data.clear();
            t.int32_data.clear();
            t.int64_data.clear();
            offset += bytes.len() as u64;
        }
        data.flush()
            .map_err(|e| SurgeryError::file(&data_path, e))?;
        let graph_path = dir.join(graph_name);
        std::fs::write(&graph_path, proto.encode_to_vec())
            .map_err(|e| SurgeryError::file(&graph_path, e))?;
        Ok(vec![graph_path, data_path])
    }

    /// Follows Reshape/Transpose/Cast producers back to an initializer.
    pub fn resolve_initializer(&self, value: &str) -> Option<String> {
        let mut v = value.to_string();
        for _ in 0..8 {
            if self.initializer(&v).is_some() {
                return Some(v);
            }
            let n = &self.graph().node[self.node_index_producing(&v)?];
            match n.op_type.as_deref() {
                Some("Reshape" | "Transpose" | "Cast" | "Identity") => v = n.input.first()?.clone(),
                _ => return None,
            }
        }
        None
    }
}

pub fn node_name(n: &NodeProto) -> String {
    n.name
        .clone()
        .unwrap_or_else(|| format!("<{}>", n.op_type.clone().unwrap_or_default()))
}

pub use crate::onnx_pb::{attr_i, attr_ints};

pub fn set_attr_i(n: &mut NodeProto, name: &str, v: i64) {
    if let Some(a) = n
        .attribute
        .iter_mut()
        .find(|a| a.name.as_deref() == Some(name))
    {
        a.i = Some(v);
    }
}

/// Dims of a value info as text (`batch_size`, `151936`, `?`).
pub fn dims_of(v: &ValueInfoProto) -> Vec<String> {
    v.r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .and_then(|t| t.shape.as_ref())
        .map(|s| {
            s.dim
                .iter()
                .map(|d| {
                    d.dim_param
                        .clone()
                        .or(d.dim_value.map(|x| x.to_string()))
                        .unwrap_or_else(|| "?".into())
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn elem_type_of(v: &ValueInfoProto) -> i32 {
    v.r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .and_then(|t| t.elem_type)
        .unwrap_or(0)
}

/// Sets one dim of a value info to a fixed size.
pub fn set_dim(v: &mut ValueInfoProto, axis: usize, size: i64) {
    if let Some(d) = v
        .r#type
        .as_mut()
        .and_then(|t| t.tensor_type.as_mut())
        .and_then(|t| t.shape.as_mut())
        .and_then(|s| s.dim.get_mut(axis))
    {
        *d = Dimension {
            dim_value: Some(size),
            dim_param: None,
            denotation: d.denotation.clone(),
        };
    }
}

pub fn int64_tensor(name: &str, values: &[i64]) -> TensorProto {
    TensorProto {
        dims: vec![values.len() as i64],
        data_type: Some(dtype::INT64),
        name: Some(name.into()),
        raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..Default::default()
    }
}

pub fn raw_tensor(name: &str, data_type: i32, dims: Vec<i64>, raw: Vec<u8>) -> TensorProto {
    TensorProto {
        dims,
        data_type: Some(data_type),
        name: Some(name.into()),
        raw_data: Some(raw),
        ..Default::default()
    }
}

/// Maps each value name to the number of nodes reading it.
pub fn use_counts(g: &GraphProto) -> HashMap<&str, usize> {
    let mut m = HashMap::new();
    for n in &g.node {
        for i in &n.input {
            *m.entry(i.as_str()).or_default() += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model whose one initializer is external data with `entries`,
    /// beside a 16-byte data file.
    fn external(tag: &str, entries: &[(&str, &str)]) -> (OnnxModel, PathBuf) {
        let dir = std::env::temp_dir().join(format!("readout-graph-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("w.data"), [0u8; 16]).unwrap();
        let t = TensorProto {
            name: Some("w".into()),
            data_location: Some(1),
            external_data: entries
                .iter()
                .map(|(k, v)| StringStringEntryProto {
                    key: Some((*k).into()),
                    value: Some((*v).into()),
                })
                .collect(),
            ..Default::default()
        };
        let proto = ModelProto {
            graph: Some(GraphProto {
                initializer: vec![t],
                ..Default::default()
            }),
            ..Default::default()
        };
        let m = OnnxModel::decode(&proto.encode_to_vec(), &dir.join("model.onnx")).unwrap();
        (m, dir)
    }

    #[test]
    fn an_external_offset_that_overflows_or_a_location_out_of_the_folder_is_refused() {
        let cases = [
            (
                "overflow",
                vec![
                    ("location", "w.data"),
                    ("offset", "18446744073709551615"),
                    ("length", "8"),
                ],
                "beyond the file's 16",
            ),
            (
                "past-end",
                vec![("location", "w.data"), ("offset", "12"), ("length", "8")],
                "beyond the file's 16",
            ),
            (
                "dotdot",
                vec![("location", "../w.data")],
                "leaves the model's folder",
            ),
            (
                "rooted",
                vec![("location", "/etc/passwd")],
                "leaves the model's folder",
            ),
        ];
        for (tag, entries, want) in cases {
            let (m, dir) = external(tag, &entries);
            let t = m.initializer("w").unwrap().clone();
            let e = m.tensor_bytes(&t).unwrap_err().to_string();
            assert!(e.contains(want), "{tag}: {e}");
            std::fs::remove_dir_all(dir).unwrap();
        }
        let (m, dir) = external(
            "ok",
            &[("location", "w.data"), ("offset", "8"), ("length", "8")],
        );
        let t = m.initializer("w").unwrap().clone();
        assert_eq!(m.tensor_bytes(&t).unwrap().len(), 8);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
