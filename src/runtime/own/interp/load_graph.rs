//! Loading a graph: its initializers read, every node compiled, constant
//! sub-expressions folded, the head and a trim's last-row slice found.

use crate::kernels::attention::Rotary;
use crate::kernels::par::Pool;
use crate::kernels::q4::{Precision, Q4Matrix};
use crate::kernels::tensor::Value;
use crate::kernels::KernelError;
use crate::onnx_pb::{dtype, ModelProto, NodeProto};
use crate::runtime::own::interp::compile::unsupported;
use crate::runtime::own::interp::initializers::{attr_t, node_name, tensor_value, External};
use crate::runtime::own::interp::ops;
use crate::runtime::own::interp::{Node, Op, Program, Ref};
use prost::Message;
use std::collections::HashMap;
use std::sync::Arc;

/// Refuses a graph with more entries than any real model before it is
/// decoded (see [`crate::onnx_pb::MAX_GRAPH_ENTRIES`]).
fn check_counts(graph: &[u8]) -> Result<(), KernelError> {
    match crate::onnx_pb::graph_over_limit(graph) {
        Some((what, count)) => Err(KernelError::GraphTooLarge {
            what,
            count,
            limit: crate::onnx_pb::MAX_GRAPH_ENTRIES,
        }),
        None => Ok(()),
    }
}

impl Program {
    /// The external-data files a graph names, so a caller can read them
    /// before `load`.
    pub fn external_locations(graph: &[u8]) -> Result<Vec<String>, KernelError> {
        check_counts(graph)?;
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
        check_counts(graph)?;
        let model = ModelProto::decode(graph).map_err(|e| KernelError::Decode(e.to_string()))?;
        let g = model
            .graph
            .ok_or_else(|| KernelError::Decode("the model has no graph".into()))?;
        let needed: u64 = g
            .initializer
            .iter()
            .map(|t| {
                // The file's own dims: a product that would wrap (2^40 x 2^40)
                // saturates, and is refused below like any other too-large claim.
                let n = t
                    .dims
                    .iter()
                    .fold(1u64, |a, &d| a.saturating_mul(d.max(0) as u64));
                n.saturating_mul(
                    crate::onnx_pb::dtype_size(t.data_type.unwrap_or(0)).unwrap_or(1) as u64,
                )
            })
            .fold(0u64, u64::saturating_add);
        if needed > limit {
            return Err(KernelError::TooLarge {
                needed,
                limit,
                what: "of weights",
            });
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
        let mut rotary_cache: HashMap<(usize, usize), Rotary> = HashMap::new();
        let pool = Pool::new(1)?;
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
            let op = p.compile(n, &inputs, &mut q4_cache, &mut rotary_cache)?;
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
        let products: std::collections::HashSet<*const Q4Matrix> = p
            .nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::MatMulQ4 { w, .. } => Some(Arc::as_ptr(w)),
                _ => None,
            })
            .collect();
        p.weight_bytes = q4_cache
            .values()
            .map(|m| m.bytes(products.contains(&Arc::as_ptr(m))))
            .sum();
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx_pb::{GraphProto, TensorProto};

    #[test]
    fn an_initializer_whose_dims_overflow_is_refused_as_too_large_not_wrapped() {
        // 2^40 x 2^40 x 2^40 elements: the product wraps u64 to 0.
        let t = TensorProto {
            name: Some("huge".into()),
            dims: vec![1 << 40, 1 << 40, 1 << 40],
            data_type: Some(1),
            ..Default::default()
        };
        let graph = ModelProto {
            graph: Some(GraphProto {
                initializer: vec![t],
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec();
        let none = |_: &str| -> Option<&[u8]> { None };
        let e = Program::load(&graph, &none, 1 << 30)
            .err()
            .expect("a 2^120-element initializer loaded");
        assert!(
            matches!(
                e,
                KernelError::TooLarge {
                    needed: u64::MAX,
                    ..
                }
            ),
            "{e}"
        );
    }
}
