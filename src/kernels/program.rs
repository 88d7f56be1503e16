//! A decoder graph compiled for the interpreter: every node checked at load
//! (operator, attributes, constant weights), int4 tables wrapped once and
//! shared, constant sub-expressions folded; at run, only the nodes the asked
//! outputs need are computed, and each value is dropped after its last use.

use std::collections::HashMap;
use std::sync::Arc;

use prost::Message;

use super::attention::{Gqa, Pack};
use super::load::{attr_f, attr_i, attr_t, node_name, tensor_value, External};
use super::ops::{self, Binary};
use super::par::Pool;
use super::q4::{Precision, Q4Matrix};
use super::tensor::{Data, Value};
use super::KernelError;
use crate::onnx_pb::{dtype, ModelProto, NodeProto};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ref {
    Absent,
    Const(usize),
    Input(usize),
    Var(usize),
}

enum Op {
    Binary(Binary),
    Sigmoid,
    Cast(i32),
    Shape,
    Gather(i64),
    Reshape,
    Split(i64),
    Slice,
    /// `Slice(x, [-1], [end], [1])`: the last position (what trim and
    /// expose-hidden insert before the head). In a packed run it takes the
    /// pack's read rows instead.
    LastRow,
    ReduceSum(bool),
    Identity,
    Norm(f32),
    SkipNorm(f32),
    MatMulQ4 {
        w: Arc<Q4Matrix>,
        bias: Option<Vec<f32>>,
    },
    GatherQ4(Arc<Q4Matrix>),
    Attention(Box<Gqa>),
}

struct Node {
    name: String,
    op_type: String,
    op: Op,
    inputs: Vec<Ref>,
    outputs: Vec<Option<usize>>,
    /// In a packed run, input 0 is cut to the pack's read rows first: set on
    /// a head that reads every position, so it computes only the rows read.
    pack_rows: bool,
}

pub struct Program {
    consts: Vec<Value>,
    nodes: Vec<Node>,
    vars: usize,
    inputs: Vec<String>,
    outputs: Vec<(String, Ref)>,
    /// The graph's float inputs/outputs are float16 (computed in float32 here).
    pub float16_io: bool,
    pub weight_bytes: usize,
    /// Whether a packed run can read rows: the `logits` output comes from a
    /// head fed row by row (see `mark_head`).
    packs: bool,
}

fn unsupported(n: &NodeProto, reason: impl Into<String>) -> KernelError {
    KernelError::Unsupported {
        node: node_name(n),
        op: n.op_type.clone().unwrap_or_default(),
        reason: reason.into(),
    }
}

/// The attributes a node may carry, each with the values computed here
/// (`None`: any value). Anything else is refused by name.
fn check_attrs(n: &NodeProto, allowed: &[(&str, Option<&[i64]>)]) -> Result<(), KernelError> {
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
    /// The external-data files a graph names, so a caller can read them
    /// before `load`.
    pub fn external_locations(graph: &[u8]) -> Result<Vec<String>, KernelError> {
        let model = ModelProto::decode(graph).map_err(|e| KernelError::Decode(e.to_string()))?;
        let mut out: Vec<String> = Vec::new();
        for t in model.graph.iter().flat_map(|g| &g.initializer) {
            if t.data_location == Some(1) {
                for e in &t.external_data {
                    if let (Some("location"), Some(v)) = (e.key.as_deref(), e.value.as_deref()) {
                        if !out.iter().any(|o| o == v) {
                            out.push(v.to_string());
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Compiles `graph`; refuses it before copying any weight when its
    /// initializers exceed `limit` bytes.
    pub fn load(graph: &[u8], external: &External<'_>, limit: u64) -> Result<Self, KernelError> {
        let model = ModelProto::decode(graph).map_err(|e| KernelError::Decode(e.to_string()))?;
        let g = model
            .graph
            .ok_or_else(|| KernelError::Decode("the model has no graph".into()))?;
        let needed: u64 = g
            .initializer
            .iter()
            .map(|t| {
                let n: u64 = t.dims.iter().map(|&d| d.max(0) as u64).product();
                n.saturating_mul(
                    crate::onnx_pb::dtype_size(t.data_type.unwrap_or(0)).unwrap_or(1) as u64,
                )
            })
            .fold(0u64, u64::saturating_add);
        if needed > limit {
            return Err(KernelError::TooLarge { needed, limit });
        }
        let mut names: HashMap<String, Ref> = HashMap::new();
        let mut consts = Vec::new();
        for t in &g.initializer {
            let name = t.name.clone().unwrap_or_default();
            consts.push(tensor_value(t, external)?);
            names.insert(name, Ref::Const(consts.len() - 1));
        }
        let mut inputs = Vec::new();
        for i in &g.input {
            let name = i.name.clone().unwrap_or_default();
            if !names.contains_key(&name) {
                names.insert(name.clone(), Ref::Input(inputs.len()));
                inputs.push(name);
            }
        }
        let float16_io = g.output.iter().any(|o| {
            o.r#type
                .as_ref()
                .and_then(|t| t.tensor_type.as_ref())
                .and_then(|t| t.elem_type)
                == Some(dtype::FLOAT16)
        });
        let mut p = Self {
            consts,
            nodes: Vec::new(),
            vars: 0,
            inputs,
            outputs: Vec::new(),
            float16_io,
            weight_bytes: 0,
            packs: false,
        };
        // A float graph fails on its first unknown node (a Transpose of the
        // tied table); say what it is instead.
        let op = |n: &NodeProto| n.op_type.as_deref().unwrap_or("").to_string();
        if !g.node.iter().any(|n| op(n) == "MatMulNBits") {
            if let Some(n) = g.node.iter().find(|n| op(n) == "MatMul") {
                return Err(unsupported(
                    n,
                    "a float graph (MatMul over float weights, no MatMulNBits): this runtime computes int4 graphs; load the q4 or q4f16 variant",
                ));
            }
        }
        let mut q4_cache: HashMap<(usize, usize), Arc<Q4Matrix>> = HashMap::new();
        let pool = Pool::new(1).map_err(|e| KernelError::Decode(e.to_string()))?;
        for n in &g.node {
            let inputs: Vec<Ref> = n
                .input
                .iter()
                .map(|i| {
                    if i.is_empty() {
                        Ok(Ref::Absent)
                    } else {
                        names.get(i).copied().ok_or_else(|| {
                            unsupported(
                                n,
                                format!("input {i} is not produced before it (graph not sorted?)"),
                            )
                        })
                    }
                })
                .collect::<Result<_, _>>()?;
            let op_type = n.op_type.clone().unwrap_or_default();
            if op_type == "Constant" {
                let t = attr_t(n, "value")
                    .ok_or_else(|| unsupported(n, "a Constant without a tensor value"))?;
                p.consts.push(tensor_value(t, external)?);
                names.insert(n.output[0].clone(), Ref::Const(p.consts.len() - 1));
                continue;
            }
            let op = p.compile(n, &inputs, &mut q4_cache)?;
            let foldable = !matches!(op, Op::MatMulQ4 { .. } | Op::GatherQ4(_) | Op::Attention(_))
                && inputs
                    .iter()
                    .all(|r| matches!(r, Ref::Const(_) | Ref::Absent));
            let op = match op {
                Op::Slice if p.is_last_row(&inputs) => Op::LastRow,
                op => op,
            };
            let mut node = Node {
                name: node_name(n),
                op_type,
                op,
                inputs,
                outputs: Vec::new(),
                pack_rows: false,
            };
            if foldable {
                let want = vec![true; n.output.len()];
                let outs = {
                    let ins: Vec<Option<&Value>> = node
                        .inputs
                        .iter()
                        .map(|r| match r {
                            Ref::Const(c) => Some(&p.consts[*c]),
                            _ => None,
                        })
                        .collect();
                    p.exec(&node, &ins, &want, Precision::F32, None, &pool)?
                };
                for (name, v) in n.output.iter().zip(outs) {
                    if let (false, Some(v)) = (name.is_empty(), v) {
                        p.consts.push(v);
                        names.insert(name.clone(), Ref::Const(p.consts.len() - 1));
                    }
                }
                continue;
            }
            for o in &n.output {
                if o.is_empty() {
                    node.outputs.push(None);
                } else {
                    node.outputs.push(Some(p.vars));
                    names.insert(o.clone(), Ref::Var(p.vars));
                    p.vars += 1;
                }
            }
            p.nodes.push(node);
        }
        for o in &g.output {
            let name = o.name.clone().unwrap_or_default();
            let r = names.get(&name).copied().ok_or_else(|| KernelError::Io {
                name: name.clone(),
                reason: "a graph output no node produces".into(),
            })?;
            p.outputs.push((name, r));
        }
        p.weight_bytes = q4_cache.values().map(|m| m.bytes()).sum();
        p.mark_head();
        // Constants a node reads at run stay; those compiled into an op (int4
        // tables, scales, rotary caches) are held there, so their copies go.
        let mut read = vec![false; p.consts.len()];
        for node in &p.nodes {
            for (i, r) in node.inputs.iter().enumerate() {
                let compiled = match node.op {
                    Op::MatMulQ4 { .. } => i != 0,
                    Op::GatherQ4(_) => i != 1,
                    Op::Attention(_) => i == 7 || i == 8,
                    _ => false,
                };
                if let (Ref::Const(c), false) = (r, compiled) {
                    read[*c] = true;
                }
            }
        }
        for (_, r) in &p.outputs {
            if let Ref::Const(c) = r {
                read[*c] = true;
            }
        }
        for (v, keep) in p.consts.iter_mut().zip(read) {
            if !keep {
                *v = Value::f32(vec![0], Vec::new());
            }
        }
        Ok(p)
    }

    /// Slice inputs (starts, ends, axes[, steps]) that take the last position of axis 1.
    fn is_last_row(&self, inputs: &[Ref]) -> bool {
        let int = |i: usize| {
            inputs
                .get(i)
                .and_then(|r| self.konst(*r))
                .and_then(|v| ops::ints(v, "").ok())
        };
        let steps_one = match inputs.get(4) {
            None | Some(Ref::Absent) => true,
            Some(_) => int(4).is_some_and(|s| s == [1]),
        };
        int(1).is_some_and(|s| s == [-1])
            && int(2).is_some_and(|e| e.len() == 1 && e[0] >= i64::from(i32::MAX))
            && int(3).is_some_and(|a| a == [1])
            && steps_one
    }

    /// Finds the head: the int4 matmul whose output reaches `logits` through
    /// casts only. A packed run reads rows there: a head after a last-row
    /// slice gets them from the slice; one that reads every position is
    /// marked to cut its input to them. Without such a head, no packing.
    fn mark_head(&mut self) {
        let Some(Ref::Var(mut v)) = self
            .outputs
            .iter()
            .find(|(n, _)| n == "logits")
            .map(|(_, r)| *r)
        else {
            return;
        };
        let producer =
            |nodes: &[Node], v: usize| nodes.iter().position(|n| n.outputs.contains(&Some(v)));
        loop {
            let Some(i) = producer(&self.nodes, v) else {
                return;
            };
            match (&self.nodes[i].op, self.nodes[i].inputs.first()) {
                (Op::Cast(_) | Op::Identity, Some(Ref::Var(x))) => v = *x,
                (Op::MatMulQ4 { .. }, Some(Ref::Var(x))) => {
                    let from_last_row = producer(&self.nodes, *x)
                        .is_some_and(|j| matches!(self.nodes[j].op, Op::LastRow));
                    self.nodes[i].pack_rows = !from_last_row;
                    self.packs = true;
                    return;
                }
                _ => return,
            }
        }
    }

    /// Whether `run` can take a `Pack` (the graph's head was found).
    pub fn packs(&self) -> bool {
        self.packs
    }

    fn konst(&self, r: Ref) -> Option<&Value> {
        match r {
            Ref::Const(c) => Some(&self.consts[c]),
            _ => None,
        }
    }

    fn compile(
        &self,
        n: &NodeProto,
        inputs: &[Ref],
        q4_cache: &mut HashMap<(usize, usize), Arc<Q4Matrix>>,
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
                            .map_err(|e| unsupported(n, e))?
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
                        ("local_window_size", Some(&[-1])),
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
                let heads = attr_i(n, "num_heads").unwrap_or(0) as usize;
                let kv_heads = attr_i(n, "kv_num_heads").unwrap_or(0) as usize;
                if heads == 0 || kv_heads == 0 || heads % kv_heads != 0 {
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
                    let f = |v: &Value| {
                        ops::floats(v, "rotary cache")
                            .map(<[f32]>::to_vec)
                            .map_err(|e| unsupported(n, e))
                    };
                    Some((f(cos)?, f(sin)?, cos.shape[1]))
                } else {
                    None
                };
                Op::Attention(Box::new(Gqa {
                    heads,
                    kv_heads,
                    scale: attr_f(n, "scale").unwrap_or(0.0),
                    rotary,
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
            .map_err(|e| unsupported(n, e))?;
        let m = Arc::new(m);
        cache.insert(key, m.clone());
        Ok(m)
    }

    pub fn inputs(&self) -> &[String] {
        &self.inputs
    }

    pub fn outputs(&self) -> impl Iterator<Item = &str> {
        self.outputs.iter().map(|(n, _)| n.as_str())
    }

    /// Runs the graph on `feeds` (one per input, in `inputs()` order) and
    /// returns the outputs `want` asks for (in `outputs()` order). With
    /// `pack`, the rows are branches (see `Pack`) and the head computes the
    /// pack's read rows only.
    pub fn run(
        &self,
        feeds: &[&Value],
        want: &[bool],
        precision: Precision,
        pack: Option<&Pack>,
        pool: &Pool,
    ) -> Result<Vec<Option<Value>>, KernelError> {
        if pack.is_some() && !self.packs {
            return Err(KernelError::Io {
                name: "logits".into(),
                reason: "a packed run needs the head found at load; this graph's was not".into(),
            });
        }
        if feeds.len() != self.inputs.len() || want.len() != self.outputs.len() {
            return Err(KernelError::Io {
                name: "feeds".into(),
                reason: format!(
                    "{} inputs and {} output flags for a graph of {} and {}",
                    feeds.len(),
                    want.len(),
                    self.inputs.len(),
                    self.outputs.len()
                ),
            });
        }
        // Which nodes the asked outputs need, and each value's last reader.
        let mut needed = vec![false; self.vars];
        let mut keep = vec![false; self.vars];
        for ((_, r), w) in self.outputs.iter().zip(want) {
            if let (true, Ref::Var(v)) = (*w, r) {
                needed[*v] = true;
                keep[*v] = true;
            }
        }
        let mut last_use = vec![usize::MAX; self.vars];
        let mut runs = vec![false; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate().rev() {
            if !node.outputs.iter().any(|o| o.is_some_and(|v| needed[v])) {
                continue;
            }
            runs[i] = true;
            for r in &node.inputs {
                if let Ref::Var(v) = r {
                    needed[*v] = true;
                    if last_use[*v] == usize::MAX {
                        last_use[*v] = i;
                    }
                }
            }
        }
        let mut vals: Vec<Option<Value>> = (0..self.vars).map(|_| None).collect();
        for (i, node) in self.nodes.iter().enumerate() {
            if !runs[i] {
                continue;
            }
            let out_needed: Vec<bool> = node
                .outputs
                .iter()
                .map(|o| o.is_some_and(|v| needed[v]))
                .collect();
            let outs = {
                let mut ins: Vec<Option<&Value>> = node
                    .inputs
                    .iter()
                    .map(|r| match r {
                        Ref::Absent => None,
                        Ref::Const(c) => Some(&self.consts[*c]),
                        Ref::Input(k) => Some(feeds[*k]),
                        Ref::Var(v) => vals[*v].as_ref(),
                    })
                    .collect();
                let cut;
                if let (true, Some(pk), Some(Some(x))) = (node.pack_rows, pack, ins.first()) {
                    cut = ops::take_rows(x, &pk.rows).map_err(|reason| KernelError::Run {
                        node: node.name.clone(),
                        op: node.op_type.clone(),
                        reason,
                    })?;
                    ins[0] = Some(&cut);
                }
                self.exec(node, &ins, &out_needed, precision, pack, pool)?
            };
            for (slot, v) in node.outputs.iter().zip(outs) {
                if let (Some(s), Some(v)) = (slot, v) {
                    vals[*s] = Some(v);
                }
            }
            for r in &node.inputs {
                if let Ref::Var(v) = r {
                    if last_use[*v] == i && !keep[*v] {
                        vals[*v] = None;
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(self.outputs.len());
        for ((name, r), w) in self.outputs.iter().zip(want) {
            out.push(match (*w, r) {
                (false, _) => None,
                (true, Ref::Var(v)) => Some(vals[*v].take().ok_or_else(|| KernelError::Io {
                    name: name.clone(),
                    reason: "not computed".into(),
                })?),
                (true, Ref::Const(c)) => Some(self.consts[*c].clone()),
                (true, Ref::Input(k)) => Some(feeds[*k].clone()),
                (true, Ref::Absent) => None,
            });
        }
        Ok(out)
    }

    fn exec(
        &self,
        node: &Node,
        ins: &[Option<&Value>],
        out_needed: &[bool],
        precision: Precision,
        pack: Option<&Pack>,
        pool: &Pool,
    ) -> Result<Vec<Option<Value>>, KernelError> {
        let err = |reason: String| KernelError::Run {
            node: node.name.clone(),
            op: node.op_type.clone(),
            reason,
        };
        let input = |i: usize| -> Result<&Value, KernelError> {
            ins.get(i)
                .copied()
                .flatten()
                .ok_or_else(|| err(format!("input {i} is missing")))
        };
        let one = |v: Result<Value, String>| v.map(|v| vec![Some(v)]).map_err(err);
        match &node.op {
            Op::Binary(b) => one(ops::binary(*b, input(0)?, input(1)?)),
            Op::Sigmoid => one(ops::sigmoid(input(0)?)),
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
                let starts = list(1)?.ok_or_else(|| err("no starts".into()))?;
                let ends = list(2)?.ok_or_else(|| err("no ends".into()))?;
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
                    return Err(err("only the normalised output is computed".into()));
                }
                let x = input(0)?;
                let w = ops::floats(input(1)?, "scale").map_err(err)?;
                let y =
                    ops::rms_norm(ops::floats(x, "input").map_err(err)?, w, *eps).map_err(err)?;
                Ok(vec![Some(Value::f32(x.shape.clone(), y))])
            }
            Op::SkipNorm(eps) => {
                if out_needed.get(1).copied().unwrap_or(false)
                    || out_needed.get(2).copied().unwrap_or(false)
                {
                    return Err(err("mean and inverse-std outputs are not computed".into()));
                }
                let x = input(0)?;
                let mut sum = ops::binary(Binary::Add, x, input(1)?).map_err(err)?;
                if let Some(b) = ins.get(3).copied().flatten() {
                    sum = ops::binary(Binary::Add, &sum, b).map_err(err)?;
                }
                let w = ops::floats(input(2)?, "gamma").map_err(err)?;
                let y =
                    ops::rms_norm(ops::floats(&sum, "sum").map_err(err)?, w, *eps).map_err(err)?;
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
                    return Err(err(format!(
                        "input of shape {:?}; last dim {} expected",
                        x.shape, w.k
                    )));
                }
                let m = a.len() / w.k;
                let mut y = w.matmul(a, m, precision, pool);
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
                            err(format!("token id {t} outside the vocabulary of {}", w.n))
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
                    .ok_or_else(|| err(format!("query of shape {:?}", q.shape)))?;
                if q.shape.first() != Some(&1) {
                    return Err(err(format!(
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
                                return Err(err(format!(
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
                            return Err(err(
                                "a key without a value, or a value without a key".into()
                            ))
                        }
                    };
                let seqlens = ops::ints(input(5)?, "seqlens_k").map_err(err)?;
                let total = ops::ints(input(6)?, "total_sequence_length").map_err(err)?;
                let (Some(&sl), Some(&tot)) = (seqlens.first(), total.first()) else {
                    return Err(err("empty seqlens_k or total_sequence_length".into()));
                };
                if sl + 1 != tot {
                    return Err(err(format!(
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

impl Ref {
    fn const_index(self) -> usize {
        match self {
            Ref::Const(c) => c,
            _ => usize::MAX,
        }
    }
}
