//! Control flow expanded during inference: If whose condition is known at
//! compile time becomes its branch, If on a run-time condition becomes both
//! branches in guarded ranges (only the taken one runs) merged by Where;
//! Loop whose trip count is known and
//! whose condition folds to a constant after each iteration, and Scan
//! (whose length is a static dim), are unrolled — one copy of the body per
//! iteration, each inferred (and constant-folded) before the next is made,
//! so a condition computed by the body can stop the loop. Loop-carried
//! values thread from one copy to the next; scan outputs are stacked with
//! Unsqueeze + Concat. The result is ordinary nodes, so every later stage
//! sees no control flow; the price is code size, bounded by
//! [`MAX_UNROLLED_NODES`]. Control flow that depends on run-time data is
//! reported (with the inputs it depends on, so `run`/`test` can specialise).

use crate::infer::{input_ancestors, InferError};
use crate::ir::{DType, Graph, Node, Tensor, ValueDef, ValueId};
use crate::ops::control::{EndGuard, Guard, If, Loop, Scan, Subgraph};
use crate::ops::elementwise::{Elementwise, Func};
use crate::ops::gather::Gather;
use crate::ops::shape_ops::{Concat, Reshape, ViewKind};
use crate::ops::Op;
use std::collections::HashMap;

/// Most nodes all unrolled loop bodies of one model may add.
pub const MAX_UNROLLED_NODES: usize = 50_000;

/// Infers a list of nodes (appending what remains to `kept`): inference's
/// own entry point, which expansion calls for the nodes it makes.
pub type InferNodes = fn(&mut Graph, Vec<Node>, &mut Vec<Node>, &mut usize) -> Result<(), InferError>;

/// The state of one expansion: the graph, the inferred nodes so far, the
/// unrolling budget used, and inference itself.
pub struct Expansion<'a> {
    pub graph: &'a mut Graph,
    pub kept: &'a mut Vec<Node>,
    pub unrolled: &'a mut usize,
    pub infer: InferNodes,
}

impl Expansion<'_> {
    /// Expands control-flow `node`.
    pub fn expand(&mut self, node: Node) -> Result<(), InferError> {
        let label = node.label();
        let result = match &node.op {
            Op::If(op) => self.expand_if(&node, op),
            Op::Loop(op) => self.expand_loop(&node, op),
            Op::Scan(op) => self.expand_scan(&node, op),
            _ => Err(Failure::Message("not a control-flow operator".into())),
        };
        result.map_err(|f| match f {
            Failure::Infer(e) => e,
            Failure::Message(m) => InferError { messages: vec![format!("{label}: {m}")], wanted_inputs: Vec::new() },
            Failure::RunTime(m, values) => InferError {
                messages: vec![format!("{label}: {m}")],
                wanted_inputs: input_ancestors(self.graph, self.kept, &values),
            },
        })
    }

    fn run(&mut self, nodes: Vec<Node>) -> Result<(), Failure> {
        (self.infer)(self.graph, nodes, self.kept, self.unrolled).map_err(Failure::Infer)
    }

    fn expand_if(&mut self, node: &Node, op: &If) -> Result<(), Failure> {
        let cond =
            node.inputs.first().copied().flatten().ok_or(Failure::Message("input 0 (cond) is required".into()))?;
        let taken = match self.constant_bool(cond) {
            Some(true) => &op.then_branch,
            Some(false) => &op.else_branch,
            None => return self.guarded_if(node, op, cond),
        };
        if taken.outputs.len() != node.outputs.len() {
            return Err(Failure::Message(format!(
                "the branch has {} outputs, the node {}",
                taken.outputs.len(),
                node.outputs.len()
            )));
        }
        self.run(taken.nodes.clone())?;
        self.forward(&node.name, &taken.outputs, &node.outputs)
    }

    /// An If on a run-time condition: each branch, inferred on its own,
    /// in a guarded range the code runs only when the condition selects
    /// it, then one Where per output picks the taken branch's value (the
    /// other branch's buffer is never read for the result). Both branches
    /// must give their outputs the same static types.
    fn guarded_if(&mut self, node: &Node, op: &If, cond: ValueId) -> Result<(), Failure> {
        let mut merged: Vec<Vec<ValueId>> = Vec::with_capacity(2);
        for (branch, when) in [(&op.then_branch, true), (&op.else_branch, false)] {
            if branch.outputs.len() != node.outputs.len() {
                return Err(Failure::Message(format!(
                    "a branch has {} outputs, the node {}",
                    branch.outputs.len(),
                    node.outputs.len()
                )));
            }
            let mut inferred = Vec::new();
            (self.infer)(self.graph, branch.nodes.clone(), &mut inferred, self.unrolled).map_err(Failure::Infer)?;
            let guard = Op::Guard(Guard { when });
            self.kept.push(Node {
                name: format!("{}/guard_{when}", node.name),
                op: guard,
                inputs: vec![Some(cond)],
                outputs: vec![],
            });
            self.kept.append(&mut inferred);
            self.kept.push(Node {
                name: format!("{}/end_{when}", node.name),
                op: Op::EndGuard(EndGuard),
                inputs: vec![],
                outputs: vec![],
            });
            merged.push(branch.outputs.clone());
        }
        for (k, (&a, &b)) in merged[0].iter().zip(&merged[1]).enumerate() {
            let (ta, tb) = (self.graph.concrete(a), self.graph.concrete(b));
            if ta.is_none() || ta != tb {
                return Err(Failure::Message(format!(
                    "output {k} is {:?} in one branch and {:?} in the other; a run-time If needs the same static type in both",
                    ta, tb
                )));
            }
        }
        // Where broadcasts: a one-element [1] condition must not add a dim.
        let scalar = self.fresh(&format!("{}/cond", node.name));
        let no_dims = self.constant(&node.name, Tensor::from_i64s(vec![0], &[]));
        self.run(vec![Node {
            name: format!("{}/cond", node.name),
            op: Op::Reshape(Reshape { kind: ViewKind::Reshape { allowzero: false } }),
            inputs: vec![Some(cond), Some(no_dims)],
            outputs: vec![scalar],
        }])?;
        let nodes = merged[0]
            .iter()
            .zip(&merged[1])
            .zip(&node.outputs)
            .enumerate()
            .map(|(k, ((&a, &b), &out))| Node {
                name: format!("{}/select{k}", node.name),
                op: Op::Elementwise(Elementwise { op_type: "Where", func: Func::Where }),
                inputs: vec![Some(scalar), Some(a), Some(b)],
                outputs: vec![out],
            })
            .collect();
        self.run(nodes)
    }

    fn expand_loop(&mut self, node: &Node, op: &Loop) -> Result<(), Failure> {
        let input = |i: usize| node.inputs.get(i).copied().flatten();
        let trip_count = match input(0) {
            None => None,
            Some(m) => {
                let t = self.graph.const_value(m).ok_or_else(|| run_time("the trip count M", m))?;
                Some(t.get_i64(0).max(0) as usize)
            }
        };
        let mut cond = match input(1) {
            None => true,
            Some(c) => self.constant_bool(c).ok_or_else(|| run_time("the initial condition", c))?,
        };
        let mut carried = required(&node.inputs[node.inputs.len().min(2)..])?;
        let body = &op.body;
        let n = carried.len();
        if body.inputs.len() != n + 2 || body.outputs.len() < n + 1 || node.outputs.len() != body.outputs.len() - 1 {
            return Err(Failure::Message(format!(
                "the body takes {} inputs and returns {}, the node has {} loop-carried values and {} outputs",
                body.inputs.len(),
                body.outputs.len(),
                n,
                node.outputs.len()
            )));
        }
        let mut scanned: Vec<Vec<ValueId>> = vec![Vec::new(); body.outputs.len() - 1 - n];
        let mut i = 0usize;
        while cond && trip_count.is_none_or(|m| i < m) {
            let prefix = format!("{}/{i}/", node.name);
            let mut map = HashMap::new();
            map.insert(body.inputs[0], self.constant(&prefix, Tensor::from_i64s(vec![], &[i as i64])));
            map.insert(
                body.inputs[1],
                self.constant(&prefix, Tensor::from_bytes(DType::Bool, vec![], vec![1]).expect("one bool")),
            );
            for (&formal, &actual) in body.inputs[2..].iter().zip(&carried) {
                map.insert(formal, actual);
            }
            let outputs = self.iterate(body, map, &prefix)?;
            cond = self
                .constant_bool(outputs[0])
                .ok_or_else(|| run_time("the loop condition computed by the body", outputs[0]))?;
            carried = outputs[1..=n].to_vec();
            for (parts, &v) in scanned.iter_mut().zip(&outputs[n + 1..]) {
                parts.push(v);
            }
            i += 1;
        }
        self.forward(&node.name, &carried, &node.outputs[..n])?;
        for (k, parts) in scanned.iter().enumerate() {
            self.stack(&node.name, parts, 0, node.outputs[n + k])?;
        }
        Ok(())
    }

    fn expand_scan(&mut self, node: &Node, op: &Scan) -> Result<(), Failure> {
        let mut inputs: Vec<Option<ValueId>> = node.inputs.clone();
        if !op.batched {
            let (states, scanned) = self.scan(&node.name, op, &required(&inputs)?)?;
            return self.forward(&node.name, &[states, scanned].concat(), &node.outputs);
        }
        // Scan-8: input 0 is sequence_lens (all equal to the scan length
        // here), every other input has a batch axis 0; scan each batch
        // entry on its own and stack the results along axis 0.
        let lens = inputs.remove(0);
        let inputs = required(&inputs)?;
        let (_, first) = self.graph.concrete(inputs[0]).ok_or(Failure::Message("input 1 has no known shape".into()))?;
        let batch = first.first().copied().ok_or(Failure::Message("the inputs need a batch axis".into()))?;
        let mut per_output: Vec<Vec<ValueId>> = vec![Vec::new(); node.outputs.len()];
        for b in 0..batch {
            let prefix = format!("{}/batch{b}", node.name);
            let entries = inputs.iter().map(|&x| self.slice(&prefix, x, 0, b)).collect::<Result<Vec<_>, _>>()?;
            let (states, scanned) = self.scan(&prefix, op, &entries)?;
            for (parts, v) in per_output.iter_mut().zip(states.into_iter().chain(scanned)) {
                parts.push(v);
            }
        }
        if let Some(lens) = lens {
            self.check_full_lengths(lens, &inputs[inputs.len() - op.num_scan_inputs..])?;
        }
        for (parts, &out) in per_output.iter().zip(&node.outputs) {
            self.stack(&node.name, parts, 0, out)?;
        }
        Ok(())
    }

    /// Scan-8's sequence_lens must all be the full length: shorter sequences
    /// are not compiled.
    fn check_full_lengths(&mut self, lens: ValueId, scanned: &[ValueId]) -> Result<(), Failure> {
        let t = self.graph.const_value(lens).ok_or_else(|| run_time("sequence_lens", lens))?;
        let full =
            scanned.first().and_then(|&x| self.graph.concrete(x)).map_or(0, |(_, s)| s.get(1).copied().unwrap_or(0));
        if (0..t.len()).any(|i| t.get_i64(i) != full as i64) {
            return Err(Failure::Message(format!(
                "sequence_lens shorter than the scan length {full} are not compiled yet"
            )));
        }
        Ok(())
    }

    /// Scan-9 semantics over `inputs` (states, then scanned inputs): the
    /// final states and the stacked scan outputs, as fresh values.
    fn scan(&mut self, name: &str, op: &Scan, inputs: &[ValueId]) -> Result<(Vec<ValueId>, Vec<ValueId>), Failure> {
        let m = op.num_scan_inputs;
        let n =
            inputs.len().checked_sub(m).ok_or(Failure::Message(format!("num_scan_inputs {m} exceeds the inputs")))?;
        let body = &op.body;
        let k = body.outputs.len().checked_sub(n).ok_or(Failure::Message("the body returns too few values".into()))?;
        if body.inputs.len() != n + m || op.output_axes.len() != k {
            return Err(Failure::Message("the body's inputs or outputs do not match the node's".into()));
        }
        // The scan length and each scanned input's axis.
        let mut length = None;
        let mut axes = Vec::with_capacity(m);
        for (j, &x) in inputs[n..].iter().enumerate() {
            let (_, shape) =
                self.graph.concrete(x).ok_or(Failure::Message(format!("scan input {j} has no known shape")))?;
            let axis = crate::ir::shape::normalize_axis(op.input_axes[j], shape.len())
                .ok_or(Failure::Message(format!("scan_input_axes[{j}] is out of range")))?;
            if length.is_some_and(|l| l != shape[axis]) {
                return Err(Failure::Message("the scanned inputs differ in length".into()));
            }
            length = Some(shape[axis]);
            axes.push(axis);
        }
        let length = length.unwrap_or(0);
        let mut carried = inputs[..n].to_vec();
        let mut scanned: Vec<Vec<ValueId>> = vec![Vec::new(); k];
        for t in 0..length {
            let prefix = format!("{name}/{t}/");
            let mut map: HashMap<ValueId, ValueId> = body.inputs.iter().copied().zip(carried.iter().copied()).collect();
            for (j, &x) in inputs[n..].iter().enumerate() {
                let at = if op.input_reverse[j] { length - 1 - t } else { t };
                let slice = self.slice(&format!("{prefix}scan{j}"), x, axes[j], at)?;
                map.insert(body.inputs[n + j], slice);
            }
            let outputs = self.iterate(body, map, &prefix)?;
            carried = outputs[..n].to_vec();
            for (parts, &v) in scanned.iter_mut().zip(&outputs[n..]) {
                parts.push(v);
            }
        }
        let mut stacked = Vec::with_capacity(k);
        for (j, parts) in scanned.iter_mut().enumerate() {
            if op.output_reverse[j] {
                parts.reverse();
            }
            let out = self.fresh(&format!("{name}/scan_output{j}"));
            self.stack(name, parts, op.output_axes[j], out)?;
            stacked.push(out);
        }
        Ok((carried, stacked))
    }

    /// Entry `at` of `x` along `axis`, that axis removed (a Gather).
    fn slice(&mut self, name: &str, x: ValueId, axis: usize, at: usize) -> Result<ValueId, Failure> {
        let index = self.constant(name, Tensor::from_i64s(vec![], &[at as i64]));
        let slice = self.fresh(name);
        let gather = Node {
            name: name.to_string(),
            op: Op::Gather(Gather { axis: axis as i64 }),
            inputs: vec![Some(x), Some(index)],
            outputs: vec![slice],
        };
        self.run(vec![gather])?;
        Ok(slice)
    }

    /// One copy of `body` with its formal inputs bound by `map`, inferred;
    /// returns the values its outputs became.
    fn iterate(
        &mut self,
        body: &Subgraph,
        mut map: HashMap<ValueId, ValueId>,
        prefix: &str,
    ) -> Result<Vec<ValueId>, Failure> {
        *self.unrolled += body.nodes.len();
        if *self.unrolled > MAX_UNROLLED_NODES {
            return Err(Failure::Message(format!(
                "unrolling would add more than {MAX_UNROLLED_NODES} nodes (loops whose length is only known at run time are not compiled yet)"
            )));
        }
        let nodes = clone_nodes(self.graph, &body.nodes, &mut map, prefix);
        self.run(nodes)?;
        Ok(body.outputs.iter().map(|v| map.get(v).copied().unwrap_or(*v)).collect())
    }

    /// Identity nodes making `to[k]` the value `from[k]`.
    fn forward(&mut self, name: &str, from: &[ValueId], to: &[ValueId]) -> Result<(), Failure> {
        let nodes = from
            .iter()
            .zip(to)
            .enumerate()
            .map(|(k, (&f, &t))| Node {
                name: format!("{name}/out{k}"),
                op: Op::Elementwise(Elementwise { op_type: "Identity", func: Func::Identity }),
                inputs: vec![Some(f)],
                outputs: vec![t],
            })
            .collect();
        self.run(nodes)
    }

    /// `out` = `parts` stacked along a new axis `axis` (Unsqueeze + Concat).
    fn stack(&mut self, name: &str, parts: &[ValueId], axis: i64, out: ValueId) -> Result<(), Failure> {
        if parts.is_empty() {
            return Err(Failure::Message("no iteration ran, so the scan outputs' shapes are unknown".into()));
        }
        let axes = self.constant(name, Tensor::from_i64s(vec![1], &[axis]));
        let mut nodes = Vec::with_capacity(parts.len() + 1);
        let mut rows = Vec::with_capacity(parts.len());
        for (i, &p) in parts.iter().enumerate() {
            let row = self.fresh(&format!("{name}/row{i}"));
            rows.push(Some(row));
            nodes.push(Node {
                name: format!("{name}/unsqueeze{i}"),
                op: Op::Reshape(Reshape { kind: ViewKind::Unsqueeze }),
                inputs: vec![Some(p), Some(axes)],
                outputs: vec![row],
            });
        }
        nodes.push(Node {
            name: format!("{name}/stack"),
            op: Op::Concat(Concat { axis }),
            inputs: rows,
            outputs: vec![out],
        });
        self.run(nodes)
    }

    fn constant_bool(&self, v: ValueId) -> Option<bool> {
        self.graph.const_value(v).filter(|t| t.len() == 1).map(|t| t.get_i64(0) != 0)
    }

    fn constant(&mut self, prefix: &str, t: Tensor) -> ValueId {
        let ty = crate::ir::TensorType::known(t.dtype, &t.shape);
        self.graph.add_value(format!("{prefix}const"), Some(ty), ValueDef::Const(t))
    }

    fn fresh(&mut self, name: &str) -> ValueId {
        self.graph.add_value(name, None, ValueDef::Computed)
    }
}

/// Why an expansion failed.
enum Failure {
    Infer(InferError),
    Message(String),
    /// Something (named) that would have to be known at compile time
    /// depends on run-time data through these values.
    RunTime(String, Vec<ValueId>),
}

/// The values of inputs that must all be present.
fn required(inputs: &[Option<ValueId>]) -> Result<Vec<ValueId>, Failure> {
    inputs.iter().map(|v| v.ok_or_else(|| Failure::Message("a required input is omitted".into()))).collect()
}

fn run_time(what: &str, v: ValueId) -> Failure {
    Failure::RunTime(
        format!("{what} depends on run-time data; control flow on run-time values is not compiled yet"),
        vec![v],
    )
}

/// Copies of `nodes` whose values are fresh, with `map` taking template
/// values (formal inputs, values defined inside) to their copies; values
/// from outside stay as they are. Nested subgraphs are copied too.
fn clone_nodes(graph: &mut Graph, nodes: &[Node], map: &mut HashMap<ValueId, ValueId>, prefix: &str) -> Vec<Node> {
    let fresh = |graph: &mut Graph, map: &mut HashMap<ValueId, ValueId>, v: ValueId| {
        // An omitted optional output keeps its empty name.
        let old = &graph.value(v).name;
        let name = if old.is_empty() { String::new() } else { format!("{prefix}{old}") };
        let id = graph.add_value(name, None, ValueDef::Computed);
        map.insert(v, id);
        id
    };
    nodes
        .iter()
        .map(|n| {
            let mut op = n.op.clone();
            if let Some(subgraphs) = op.subgraphs_mut() {
                for sub in subgraphs {
                    sub.inputs = sub.inputs.iter().map(|&v| fresh(graph, map, v)).collect();
                    sub.nodes = clone_nodes(graph, &sub.nodes, map, prefix);
                    sub.outputs = sub.outputs.iter().map(|v| map.get(v).copied().unwrap_or(*v)).collect();
                }
            }
            let inputs = n.inputs.iter().map(|v| v.map(|v| map.get(&v).copied().unwrap_or(v))).collect();
            let outputs = n.outputs.iter().map(|&v| fresh(graph, map, v)).collect();
            Node { name: format!("{prefix}{}", n.name), op, inputs, outputs }
        })
        .collect()
}
