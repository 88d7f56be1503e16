//! A decoder graph compiled for the interpreter: every node checked at load
//! (operator, attributes, constant weights), int4 tables wrapped once and
//! shared, constant sub-expressions folded; at run, only the nodes the asked
//! outputs need are computed, and each value is dropped after its last use.

use self::ops::Binary;
use crate::kernels::attention::{Gqa, Pack};
use crate::kernels::par::Pool;
use crate::kernels::q4::{Precision, Q4Matrix};
use crate::kernels::tensor::Value;
use crate::kernels::KernelError;
use std::sync::Arc;

mod compile;
mod exec;
mod initializers;
mod load_graph;
pub mod ops;

pub use initializers::External;

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
    /// Gelu with the tanh approximation (Gemma's MLP).
    GeluTanh,
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

impl Program {
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
                        reason: Box::new(reason),
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
}

impl Ref {
    fn const_index(self) -> usize {
        match self {
            Ref::Const(c) => c,
            _ => usize::MAX,
        }
    }
}
