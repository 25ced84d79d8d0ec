//! Control flow expanded during inference: If whose condition is known at
//! compile time becomes its branch, If on a run-time condition becomes both
//! branches in guarded ranges (`Guard` … `EndGuard`; only the taken one
//! runs) merged by Where; Loop whose trip count is known and
//! whose condition folds to a constant after each iteration, and Scan
//! (whose length is a static dim), are unrolled — one copy of the body per
//! iteration, each inferred (and constant-folded) before the next is made,
//! so a condition computed by the body can stop the loop. Loop-carried
//! values thread from one copy to the next; scan outputs are stacked with
//! Unsqueeze + Concat. Any other Loop becomes `LoopStart` … one copy of the
//! body … `LoopEnd`, a range the code repeats, with its state in buffers
//! that live across iterations. SequenceMap becomes one body copy per
//! element of its compile-time sequence. The result is ordinary nodes and
//! range markers, so no later stage sees a subgraph; the price of
//! unrolling is code size, bounded by [`MAX_UNROLLED_NODES`].
//!
//! The same entry point resolves the operators that work on compile-time
//! lists of values ([`crate::ir::Composite`]): the Sequence*/Optional*
//! operators, and ai.onnx.ml's ZipMap, DictVectorizer and CastMap
//! (`ops::ml::maps`); and it hands FlexAttention and Gradient to their
//! family files' `expand`, which inline their subgraphs or build the
//! backward pass out of ordinary nodes.
//!
//! What cannot be compiled this way (a position, split, loop condition or
//! `sequence_lens` known only at run time, a run-time Loop with sequence
//! state or data-dependent values in its body) is reported with the graph
//! inputs it depends on, so that `run`/`test`, which know the inputs, can
//! specialise them into constants (`driver::finish_mir_for_inputs`).

use crate::infer::{input_ancestors, InferError, InferState};
use crate::ir::{Composite, DType, Graph, Node, Tensor, ValueDef, ValueId};
use crate::ops::control::{EndGuard, Guard, If, Loop, LoopEnd, LoopStart, Scan, SequenceMap, Subgraph};
use crate::ops::elementwise::{Elementwise, Func};
use crate::ops::gather::Gather;
use crate::ops::sequence::SequenceOp;
use crate::ops::shape_ops::{Concat, Reshape, ViewKind};
use crate::ops::Op;
use std::collections::HashMap;

/// Most nodes all unrolled loop bodies of one model may add.
pub const MAX_UNROLLED_NODES: usize = 50_000;

/// Infers a list of nodes (appending what remains to `kept`): inference's
/// own entry point, which expansion calls for the nodes it makes.
pub type InferNodes = fn(&mut Graph, Vec<Node>, &mut Vec<Node>, &mut InferState) -> Result<(), InferError>;

/// The state of one expansion: the graph, the inferred nodes so far,
/// inference's state (limits, budgets, nodes unrolled), and inference itself.
pub struct Expansion<'a, 'l> {
    pub graph: &'a mut Graph,
    pub kept: &'a mut Vec<Node>,
    pub state: &'a mut InferState<'l>,
    pub infer: InferNodes,
}

impl Expansion<'_, '_> {
    /// Expands control-flow `node`.
    pub fn expand(&mut self, node: Node) -> Result<(), InferError> {
        let label = node.label();
        let result = match &node.op {
            Op::If(op) => self.expand_if(&node, op),
            Op::Loop(op) => self.expand_loop(&node, op),
            Op::Scan(op) => self.expand_scan(&node, op),
            Op::SequenceMap(op) => self.expand_sequence_map(&node, op),
            Op::Sequence(op) => self.expand_sequence(&node, op),
            Op::Elementwise(_) => self.alias_composite(&node),
            Op::FlexAttention(op) => crate::ops::flex_attention::expand(self, &node, op),
            Op::Gradient(op) => crate::ops::gradient::expand(self, &node, op),
            Op::ZipMap(op) => crate::ops::ml::maps::expand(self, &node, op),
            Op::DictVectorizer(op) => crate::ops::ml::maps::expand_dict_vectorizer(self, &node, op),
            Op::CastMap(op) => crate::ops::ml::maps::expand_cast_map(self, &node, op),
            _ => Err(Failure::Message("not a control-flow operator".into())),
        };
        result.map_err(|f| match f {
            Failure::Infer(e) => e,
            Failure::Message(m) => InferError { messages: vec![format!("{label}: {m}")], ..InferError::default() },
            Failure::RunTime(m, values) => InferError {
                messages: vec![format!("{label}: {m}")],
                wanted_inputs: input_ancestors(self.graph, self.kept, &values),
                ..InferError::default()
            },
        })
    }

    /// Identity (or inference-mode Dropout) of a sequence or optional: the
    /// output is the same composite.
    fn alias_composite(&mut self, node: &Node) -> Result<(), Failure> {
        let input = node.inputs.first().copied().flatten().ok_or(Failure::Message("input 0 is required".into()))?;
        let composite = self.graph.composites.get(&input).cloned().ok_or(Failure::Message("not a sequence".into()))?;
        self.graph.composites.insert(node.outputs[0], composite);
        Ok(())
    }

    /// A sequence or optional operator, resolved on the composites.
    fn expand_sequence(&mut self, node: &Node, op: &SequenceOp) -> Result<(), Failure> {
        let input = |i: usize| node.inputs.get(i).copied().flatten();
        let out = *node.outputs.first().ok_or(Failure::Message("the node has no output".into()))?;
        match op {
            SequenceOp::Construct => {
                let items = required(&node.inputs)?;
                self.graph.composites.insert(out, Composite::Sequence(items));
            }
            SequenceOp::Empty => {
                self.graph.composites.insert(out, Composite::Sequence(Vec::new()));
            }
            SequenceOp::Insert => {
                let mut items = self.sequence_input(node, 0)?;
                let value = input(1).ok_or(Failure::Message("input 1 (tensor) is required".into()))?;
                let at = self.position(node, 2, items.len(), items.len(), true)?;
                items.insert(at, value);
                self.graph.composites.insert(out, Composite::Sequence(items));
            }
            SequenceOp::Erase => {
                let mut items = self.sequence_input(node, 0)?;
                let last =
                    items.len().checked_sub(1).ok_or(Failure::Message("erasing from an empty sequence".into()))?;
                let at = self.position(node, 1, items.len(), last, false)?;
                items.remove(at);
                self.graph.composites.insert(out, Composite::Sequence(items));
            }
            SequenceOp::At => {
                let items = self.sequence_input(node, 0)?;
                let at = self.position(node, 1, items.len(), usize::MAX, false)?;
                self.forward(&node.name, &[items[at]], &[out])?;
            }
            SequenceOp::Length => {
                let len = self.sequence_input(node, 0)?.len() as i64;
                self.set_constant(out, Tensor::from_i64s(vec![], &[len]));
            }
            SequenceOp::ConcatFrom { axis, new_axis } => self.concat_from_sequence(node, *axis, *new_axis, out)?,
            SequenceOp::SplitTo { axis, keepdims } => {
                let x = input(0).ok_or(Failure::Message("input 0 is required".into()))?;
                let items = self.split(&node.name, x, input(1), *axis, *keepdims)?;
                self.graph.composites.insert(out, Composite::Sequence(items));
            }
            SequenceOp::MakeOptional => {
                self.graph.composites.insert(out, Composite::Optional(input(0)));
            }
            SequenceOp::HasElement => {
                let has = match input(0) {
                    None => false,
                    Some(v) => !matches!(self.graph.composites.get(&v), Some(Composite::Optional(None))),
                };
                self.set_constant(out, Tensor::from_bytes(DType::Bool, vec![], vec![has as u8]).expect("one bool"));
            }
            SequenceOp::GetElement => {
                let v = input(0).ok_or(Failure::Message("input 0 is required".into()))?;
                let inner = match self.graph.composites.get(&v) {
                    Some(Composite::Optional(Some(inner))) => *inner,
                    Some(Composite::Optional(None)) => return Err(Failure::Message("the optional is empty".into())),
                    _ => v,
                };
                self.forward(&node.name, &[inner], &[out])?;
            }
        }
        Ok(())
    }

    /// The items of `node`'s input `i`, a sequence known at compile time.
    fn sequence_input(&self, node: &Node, i: usize) -> Result<Vec<ValueId>, Failure> {
        match node.inputs.get(i).copied().flatten().and_then(|v| self.graph.composites.get(&v)) {
            Some(Composite::Sequence(items)) => Ok(items.clone()),
            _ => Err(Failure::Message(format!("input {i} is not a sequence known at compile time"))),
        }
    }

    /// The position `node`'s input `i` gives in a sequence of `len` items
    /// (negative from the end; `len` itself allowed when `inclusive`), or
    /// `default` when the input is omitted.
    fn position(&self, node: &Node, i: usize, len: usize, default: usize, inclusive: bool) -> Result<usize, Failure> {
        let Some(v) = node.inputs.get(i).copied().flatten() else { return Ok(default) };
        let t = self.graph.const_value(v).ok_or_else(|| run_time("the position", v))?;
        let p = t.get_i64(0);
        let at = if p < 0 { p + len as i64 } else { p };
        let end = len as i64 + inclusive as i64;
        usize::try_from(at)
            .ok()
            .filter(|&a| (a as i64) < end)
            .ok_or(Failure::Message(format!("position {p} is out of range for a sequence of {len}")))
    }

    /// ConcatFromSequence: the items stacked along a new axis, or one
    /// Concat of them.
    fn concat_from_sequence(&mut self, node: &Node, axis: i64, new_axis: bool, out: ValueId) -> Result<(), Failure> {
        let items = self.sequence_input(node, 0)?;
        if new_axis {
            return self.stack(&node.name, &items, axis, out);
        }
        let concat = Node {
            name: node.name.clone(),
            op: Op::Concat(Concat { axis }),
            inputs: items.into_iter().map(Some).collect(),
            outputs: vec![out],
        };
        self.run(vec![concat])
    }

    /// SplitToSequence's pieces of `x` along `axis`: `split` sizes (a
    /// scalar chunk size or a list), or single entries without it.
    fn split(
        &mut self,
        name: &str,
        x: ValueId,
        split: Option<ValueId>,
        axis: i64,
        keepdims: bool,
    ) -> Result<Vec<ValueId>, Failure> {
        let (_, shape) = self.graph.concrete(x).ok_or(Failure::Message("input 0 has no known shape".into()))?;
        let axis = crate::ir::shape::normalize_axis(axis, shape.len())
            .ok_or(Failure::Message(format!("axis {axis} is out of range")))?;
        let len = shape[axis];
        let sizes: Vec<usize> = match split {
            None => vec![1; len],
            Some(s) => {
                let t = self.graph.const_value(s).ok_or_else(|| run_time("split", s))?;
                let values: Vec<i64> = (0..t.len()).map(|i| t.get_i64(i)).collect();
                match (t.shape.is_empty(), values.as_slice()) {
                    (true, &[chunk]) if chunk > 0 => {
                        (0..len).step_by(chunk as usize).map(|s| (chunk as usize).min(len - s)).collect()
                    }
                    (false, sizes) if sizes.iter().all(|&v| v >= 0) && sizes.iter().sum::<i64>() == len as i64 => {
                        sizes.iter().map(|&v| v as usize).collect()
                    }
                    _ => return Err(Failure::Message(format!("split {values:?} does not divide a length of {len}"))),
                }
            }
        };
        let squeeze = split.is_none() && !keepdims;
        let mut start = 0;
        let mut items = Vec::with_capacity(sizes.len());
        for (k, size) in sizes.into_iter().enumerate() {
            let indices: Vec<i64> = (start..start + size).map(|i| i as i64).collect();
            let index = if squeeze {
                self.constant(name, Tensor::from_i64s(vec![], &indices))
            } else {
                self.constant(name, Tensor::from_i64s(vec![size], &indices))
            };
            let piece = self.fresh(&format!("{name}/piece{k}"));
            let gather = Node {
                name: format!("{name}/piece{k}"),
                op: Op::Gather(Gather { axis: axis as i64, feature_extractor: false }),
                inputs: vec![Some(x), Some(index)],
                outputs: vec![piece],
            };
            self.run(vec![gather])?;
            items.push(piece);
            start += size;
        }
        Ok(items)
    }

    fn set_constant(&mut self, v: ValueId, t: Tensor) {
        let value = self.graph.value_mut(v);
        value.ty = Some(crate::ir::TensorType::known(t.dtype, &t.shape));
        value.def = ValueDef::Const(t);
    }

    pub(crate) fn run(&mut self, nodes: Vec<Node>) -> Result<(), Failure> {
        (self.infer)(self.graph, nodes, self.kept, self.state).map_err(Failure::Infer)
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
            (self.infer)(self.graph, branch.nodes.clone(), &mut inferred, self.state).map_err(Failure::Infer)?;
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
        let composite = merged.iter().flatten().any(|v| self.graph.composites.contains_key(v));
        if composite {
            return Err(run_time("the condition of an If with sequence or optional outputs", cond));
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

    /// Unrolls the loop when its trip count and every condition it will
    /// test are known at compile time and the copies fit the budget;
    /// otherwise it runs at run time (`repeat_loop`).
    fn expand_loop(&mut self, node: &Node, op: &Loop) -> Result<(), Failure> {
        let input = |i: usize| node.inputs.get(i).copied().flatten();
        let trip_count = input(0).map(|m| self.graph.const_value(m).map(|t| t.get_i64(0).max(0) as usize));
        let cond = input(1).map(|c| self.constant_bool(c));
        let unrollable = match (trip_count, cond) {
            (Some(None), _) | (_, Some(None)) => false,
            (m, _) => {
                let copies = m.flatten().unwrap_or(usize::MAX).saturating_mul(op.body.nodes.len().max(1));
                self.condition_folds(op) && self.state.unrolled.saturating_add(copies) <= MAX_UNROLLED_NODES
            }
        };
        if unrollable {
            self.unroll_loop(node, op, trip_count.flatten(), cond.flatten().unwrap_or(true))
        } else {
            self.repeat_loop(node, op)
        }
    }

    /// True when the body's condition output can only depend on the
    /// iteration number, the incoming condition and constants, so it folds
    /// in every unrolled copy.
    fn condition_folds(&self, op: &Loop) -> bool {
        let body = &op.body;
        let mut known: std::collections::HashSet<ValueId> = body.inputs.iter().take(2).copied().collect();
        for n in &body.nodes {
            let inputs_known =
                n.inputs.iter().flatten().all(|v| known.contains(v) || self.graph.const_value(*v).is_some());
            if inputs_known && n.op.foldable() && !n.op.is_control_flow() {
                known.extend(n.outputs.iter().copied());
            }
        }
        body.outputs.first().is_some_and(|c| known.contains(c) || self.graph.const_value(*c).is_some())
    }

    fn unroll_loop(&mut self, node: &Node, op: &Loop, trip_count: Option<usize>, cond: bool) -> Result<(), Failure> {
        let mut cond = cond;
        let mut carried = required(&node.inputs[node.inputs.len().min(2)..])?;
        let body = &op.body;
        let n = carried.len();
        check_loop_signature(node, body, n)?;
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

    /// A loop that runs at run time: LoopStart, one copy of the body, and
    /// LoopEnd, which the code repeats. Loop-carried values must keep one
    /// static type; scan outputs need the trip count at compile time and a
    /// loop that cannot stop early; the body may not make data-dependent
    /// values (their memory would grow every iteration). Otherwise the loop
    /// is reported as depending on run-time data, naming what it depends on.
    fn repeat_loop(&mut self, node: &Node, op: &Loop) -> Result<(), Failure> {
        let input = |i: usize| node.inputs.get(i).copied().flatten();
        let blame: Vec<ValueId> = [input(0), input(1)].into_iter().flatten().collect();
        let unsupported = |why: &str| {
            Failure::RunTime(
                format!("the loop runs a number of times known only at run time, and {why}"),
                blame.clone(),
            )
        };
        let carried = required(&node.inputs[node.inputs.len().min(2)..])?;
        let body = &op.body;
        let n = carried.len();
        check_loop_signature(node, body, n)?;
        if carried.iter().any(|v| self.graph.composites.contains_key(v)) {
            return Err(unsupported("sequences or optionals as loop-carried values are only compiled unrolled"));
        }
        let scans = body.outputs.len() - 1 - n;
        let trip_count = match input(0) {
            Some(m) => self.graph.const_value(m).map(|t| t.get_i64(0).max(0) as usize),
            None => None,
        };
        let prefix = format!("{}/", node.name);
        let state: Vec<ValueId> = (0..n + 2).map(|k| self.fresh(&format!("{prefix}state{k}"))).collect();
        self.run(vec![Node {
            name: format!("{}/loop_start", node.name),
            op: Op::LoopStart(LoopStart),
            inputs: [input(0), input(1)].into_iter().chain(carried.iter().map(|&v| Some(v))).collect(),
            outputs: state.clone(),
        }])?;
        let first_body_node = self.kept.len();
        let map: HashMap<ValueId, ValueId> = body.inputs.iter().copied().zip(state.iter().copied()).collect();
        let outputs = self.iterate(body, map, &prefix)?;
        let made = &self.kept[first_body_node..];
        if made.iter().any(|n| {
            n.op.allocates_at_run_time()
                || n.outputs.iter().any(|&v| self.graph.value(v).ty.as_ref().is_some_and(|t| t.is_dynamic()))
        }) {
            return Err(unsupported("its body makes values whose size depends on data"));
        }
        let trip_count = match (scans, trip_count) {
            (0, _) => 0,
            (_, Some(m))
                if input(1).is_none_or(|c| self.constant_bool(c) == Some(true))
                    && self.never_false(outputs[0], state[1]) =>
            {
                m
            }
            _ => return Err(unsupported("it has scan outputs whose length would be known only at run time")),
        };
        self.run(vec![Node {
            name: format!("{}/loop_end", node.name),
            op: Op::LoopEnd(LoopEnd { carried: n, trip_count }),
            inputs: state.iter().chain(&outputs).map(|&v| Some(v)).collect(),
            outputs: node.outputs.clone(),
        }])
        .map_err(|e| match e {
            Failure::Infer(e) => unsupported(&e.messages.join("; ")),
            other => other,
        })
    }

    /// True when `cond` is always true in a loop that starts with a true
    /// condition: a true constant, the incoming condition `incoming`, or an
    /// Identity of either.
    fn never_false(&self, cond: ValueId, incoming: ValueId) -> bool {
        if cond == incoming || self.constant_bool(cond) == Some(true) {
            return true;
        }
        self.kept.iter().rev().find(|n| n.outputs.contains(&cond)).is_some_and(|n| {
            matches!(&n.op, Op::Elementwise(e) if matches!(e.func, Func::Identity))
                && n.inputs.first().copied().flatten().is_some_and(|v| self.never_false(v, incoming))
        })
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

    /// SequenceMap: one copy of the body per element of the input
    /// sequence (its length is known at compile time), binding each
    /// additional sequence's element at the same position, or the
    /// additional tensor itself; each output collects one body value per
    /// copy.
    fn expand_sequence_map(&mut self, node: &Node, op: &SequenceMap) -> Result<(), Failure> {
        let inputs = required(&node.inputs)?;
        let (body, outputs) = (&op.body, &node.outputs);
        if body.inputs.len() != inputs.len() || body.outputs.len() != outputs.len() {
            return Err(Failure::Message("the body's inputs or outputs do not match the node's".into()));
        }
        let per_input: Vec<Option<Vec<ValueId>>> = inputs
            .iter()
            .map(|v| match self.graph.composites.get(v) {
                Some(Composite::Sequence(items)) => Ok(Some(items.clone())),
                Some(Composite::Optional(_)) => Err(Failure::Message("an input is an optional".into())),
                Some(Composite::MapRows { .. }) => Err(Failure::Message("an input is a sequence of maps".into())),
                None => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        let length = match per_input.first() {
            Some(Some(items)) => items.len(),
            _ => return Err(Failure::Message("input 0 is not a sequence known at compile time".into())),
        };
        if per_input.iter().flatten().any(|items| items.len() != length) {
            return Err(Failure::Message("the input sequences have different lengths".into()));
        }
        let mut collected: Vec<Vec<ValueId>> = vec![Vec::with_capacity(length); outputs.len()];
        for i in 0..length {
            let map = body
                .inputs
                .iter()
                .zip(inputs.iter().zip(&per_input))
                .map(|(&formal, (&actual, items))| (formal, items.as_ref().map_or(actual, |items| items[i])))
                .collect();
            let results = self.iterate(body, map, &format!("{}/{i}/", node.name))?;
            for (values, r) in collected.iter_mut().zip(results) {
                values.push(r);
            }
        }
        for (&out, items) in outputs.iter().zip(collected) {
            self.graph.composites.insert(out, Composite::Sequence(items));
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
            op: Op::Gather(Gather { axis: axis as i64, feature_extractor: false }),
            inputs: vec![Some(x), Some(index)],
            outputs: vec![slice],
        };
        self.run(vec![gather])?;
        Ok(slice)
    }

    /// One copy of `body` with its formal inputs bound by `map`, inferred;
    /// returns the values its outputs became.
    pub(crate) fn iterate(
        &mut self,
        body: &Subgraph,
        mut map: HashMap<ValueId, ValueId>,
        prefix: &str,
    ) -> Result<Vec<ValueId>, Failure> {
        self.state.unrolled += body.nodes.len();
        if self.state.unrolled > MAX_UNROLLED_NODES {
            return Err(Failure::Message(format!(
                "unrolling would add more than {MAX_UNROLLED_NODES} nodes (loops whose length is only known at run time are not compiled yet)"
            )));
        }
        let nodes = clone_nodes(self.graph, &body.nodes, &mut map, prefix);
        self.run(nodes)?;
        Ok(body.outputs.iter().map(|v| map.get(v).copied().unwrap_or(*v)).collect())
    }

    /// Identity nodes making `to[k]` the value `from[k]` (for sequences
    /// and optionals, the same composite).
    pub(crate) fn forward(&mut self, name: &str, from: &[ValueId], to: &[ValueId]) -> Result<(), Failure> {
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

    pub(crate) fn constant(&mut self, prefix: &str, t: Tensor) -> ValueId {
        let ty = crate::ir::TensorType::known(t.dtype, &t.shape);
        self.graph.add_value(format!("{prefix}const"), Some(ty), ValueDef::Const(t))
    }

    pub(crate) fn fresh(&mut self, name: &str) -> ValueId {
        self.graph.add_value(name, None, ValueDef::Computed)
    }
}

/// True for an Identity (or Dropout) whose input is a sequence or optional.
pub fn is_composite_identity(graph: &Graph, node: &Node) -> bool {
    matches!(&node.op, Op::Elementwise(e) if matches!(e.func, Func::Identity | Func::Dropout { .. }))
        && node.inputs.first().copied().flatten().is_some_and(|v| graph.composites.contains_key(&v))
}

/// Why an expansion failed.
pub(crate) enum Failure {
    Infer(InferError),
    Message(String),
    /// Something (named) that would have to be known at compile time
    /// depends on run-time data through these values.
    RunTime(String, Vec<ValueId>),
}

/// Fails unless Loop `node`'s body takes `(iteration, cond, v...)` and
/// returns `(cond, v..., scan...)` for its `n` loop-carried values and
/// the node has one output per body output after the condition.
fn check_loop_signature(node: &Node, body: &Subgraph, n: usize) -> Result<(), Failure> {
    if body.inputs.len() != n + 2 || body.outputs.len() < n + 1 || node.outputs.len() != body.outputs.len() - 1 {
        return Err(Failure::Message(format!(
            "the body takes {} inputs and returns {}, the node has {} loop-carried values and {} outputs",
            body.inputs.len(),
            body.outputs.len(),
            n,
            node.outputs.len()
        )));
    }
    Ok(())
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
