//! Stage 4: element types and shapes.
//!
//! Symbolic dims of graph inputs are bound first (from `--dim`/`--shape` or
//! the actual inputs); then every node, in schedule order, infers its
//! outputs from its inputs. Operators whose inputs are all known at compile
//! time are evaluated right here through the JIT — the same code path that
//! runs them at run time — so shape-computing subgraphs (Shape → Gather →
//! Concat → Reshape) become constants and later stages see static shapes.
//!
//! [`Limits`] bound what a model can make this stage do: no value may be
//! larger than `max_tensor_bytes`; folding materialises at most
//! `max_fold_bytes` per constant and `max_fold_total_bytes` in all (past
//! that, foldable nodes run at run time); the compile clock is checked at
//! every node.

use crate::ir::{Dim, Graph, Node, TensorType, ValueDef, ValueId};
use crate::limits::Limits;
use crate::ops::{InferCx, InputInfo};
use std::collections::{HashMap, HashSet};

/// Largest graph input (in elements) that `run`/`test` turn into a
/// compile-time constant when a shape depends on its value.
pub const MAX_SPECIALISED_ELEMENTS: usize = 4096;

/// Sizes for symbolic dims and whole input shapes.
#[derive(Clone, Debug, Default)]
pub struct Bindings {
    /// `--dim SYM=N`
    pub dims: HashMap<String, usize>,
    /// `--shape NAME=AxBxC`
    pub shapes: HashMap<String, Vec<usize>>,
}

#[derive(Debug, thiserror::Error)]
#[error("{}", .messages.join("\n"))]
pub struct InferError {
    pub messages: Vec<String>,
    /// Graph inputs whose values a node needed at compile time (e.g. a
    /// Reshape's shape given as an input). Callers that know the input
    /// values (`run`, `test`) may specialise on them and infer again.
    pub wanted_inputs: Vec<crate::ir::ValueId>,
}

impl InferError {
    fn new(messages: Vec<String>) -> InferError {
        InferError { messages, wanted_inputs: Vec::new() }
    }
}

pub fn infer(graph: &mut Graph, bindings: &Bindings, limits: &Limits) -> Result<(), InferError> {
    bind_inputs(graph, bindings)?;
    let nodes = std::mem::take(&mut graph.nodes);
    let mut kept = Vec::with_capacity(nodes.len());
    let mut state = InferState {
        limits,
        folding: FoldBudget { per_constant: limits.max_fold_bytes, left: limits.max_fold_total_bytes },
        unrolled: 0,
    };
    infer_nodes(graph, nodes, &mut kept, &mut state)?;
    graph.nodes = kept;
    let composite: Vec<String> = graph
        .outputs
        .iter()
        .filter(|v| graph.composites.contains_key(v))
        .map(|&v| graph.value(v).name.clone())
        .collect();
    if !composite.is_empty() {
        return Err(InferError::new(vec![format!(
            "graph outputs {composite:?} are sequences or optionals, which are not compiled as outputs yet"
        )]));
    }
    Ok(())
}

/// What inference carries from node to node: the limits, the folding
/// budget left, and how many nodes unrolling added.
pub struct InferState<'l> {
    limits: &'l Limits,
    folding: FoldBudget,
    pub unrolled: usize,
}

/// Infers `nodes` in order, folding what is constant and appending the
/// rest to `kept`; control flow and sequences are expanded into ordinary
/// nodes first (`crate::expand`).
fn infer_nodes(
    graph: &mut Graph,
    nodes: Vec<Node>,
    kept: &mut Vec<Node>,
    state: &mut InferState,
) -> Result<(), InferError> {
    let limits = state.limits;
    for node in nodes {
        limits.check_time(&node.label()).map_err(|e| InferError::new(vec![e]))?;
        if node.op.is_control_flow() || crate::expand::is_composite_identity(graph, &node) {
            crate::expand::Expansion { graph, kept, state, infer: infer_nodes }.expand(node)?;
            continue;
        }
        let folding = &mut state.folding;
        let results = {
            let mut inputs = Vec::with_capacity(node.inputs.len());
            for (i, input) in node.inputs.iter().enumerate() {
                inputs.push(match input {
                    None => None,
                    Some(v) => {
                        let value = graph.value(*v);
                        if value.ty.as_ref().is_some_and(TensorType::is_dynamic) {
                            // Specialising on the inputs it comes from makes it static.
                            return Err(InferError {
                                messages: vec![format!(
                                    "{}: input {i} \"{}\" has a data-dependent shape ({}), which {} cannot take yet",
                                    node.label(),
                                    value.name,
                                    value.ty.as_ref().map(ToString::to_string).unwrap_or_default(),
                                    node.op.name()
                                )],
                                wanted_inputs: input_ancestors(graph, kept, &[*v]),
                            });
                        }
                        let Some((dtype, shape)) =
                            value.ty.as_ref().and_then(|t| t.known_shape().map(|s| (t.dtype, s)))
                        else {
                            return Err(InferError::new(vec![format!(
                                "{}: input {i} \"{}\" has no known shape",
                                node.label(),
                                value.name
                            )]));
                        };
                        Some((dtype, shape, *v))
                    }
                });
            }
            let shapes: Vec<Option<(crate::ir::DType, Vec<usize>, crate::ir::ValueId)>> = inputs;
            let cx = InferCx {
                inputs: shapes
                    .iter()
                    .map(|i| {
                        i.as_ref().map(|(dtype, shape, v)| InputInfo {
                            dtype: *dtype,
                            shape: shape.as_slice(),
                            value: graph.const_value(*v),
                        })
                    })
                    .collect(),
                output_count: node.outputs.len(),
                missing_values: Default::default(),
                max_fold_bytes: folding.limit(),
            };
            node.op.infer(&cx).map_err(|e| {
                let missing: Vec<ValueId> =
                    cx.missing_values.borrow().iter().filter_map(|&i| node.inputs.get(i).copied().flatten()).collect();
                let wanted_inputs = input_ancestors(graph, kept, &missing);
                InferError { messages: vec![format!("{}: {e}{}", node.label(), folding.note())], wanted_inputs }
            })?
        };
        check_sizes(graph, &node, &results, limits.max_tensor_bytes)?;
        folding.spend(results.iter().filter_map(|r| r.value.as_ref()).map(|t| t.byte_size()));
        if results.len() < node.outputs.len() {
            return Err(InferError::new(vec![format!(
                "{}: has {} outputs, the operator produces {}",
                node.label(),
                node.outputs.len(),
                results.len()
            )]));
        }
        let mut all_known = true;
        for (&out, r) in node.outputs.iter().zip(&results) {
            let value = graph.value_mut(out);
            value.ty = Some(r.tensor_type());
            match &r.value {
                Some(t) => value.def = ValueDef::Const(t.clone()),
                None => all_known = false,
            }
        }
        if all_known {
            continue;
        }
        if should_fold(graph, &node, &results, folding) {
            let outputs = crate::jit::eval_node(graph, &node)
                .map_err(|e| InferError::new(vec![format!("{}: constant folding failed: {e}", node.label())]))?;
            folding.spend(outputs.iter().map(|t| t.byte_size()));
            for (&out, t) in node.outputs.iter().zip(outputs) {
                let value = graph.value_mut(out);
                value.ty = Some(TensorType::known(t.dtype, &t.shape));
                value.def = ValueDef::Const(t);
            }
            continue;
        }
        kept.push(node);
    }
    Ok(())
}

/// The shape-like graph inputs that `values` are computed from (through the
/// nodes scheduled so far): specialising on them makes `values` constants.
pub(crate) fn input_ancestors(graph: &Graph, scheduled: &[Node], values: &[ValueId]) -> Vec<ValueId> {
    let producer: HashMap<ValueId, &Node> =
        scheduled.iter().flat_map(|n| n.outputs.iter().map(move |&o| (o, n))).collect();
    let mut seen: HashSet<ValueId> = HashSet::new();
    let mut stack = values.to_vec();
    let mut inputs = Vec::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        match (&graph.value(v).def, producer.get(&v)) {
            // Shapes, axes, sizes, scales and bounds are small tensors.
            (ValueDef::Input(_), _) if is_shape_like(graph, v) => inputs.push(v),
            (ValueDef::Computed, Some(n)) => stack.extend(n.inputs.iter().flatten().copied()),
            _ => {}
        }
    }
    inputs
}

fn is_shape_like(graph: &Graph, v: ValueId) -> bool {
    graph.concrete(v).is_some_and(|(_, shape)| shape.iter().product::<usize>() <= MAX_SPECIALISED_ELEMENTS)
}

/// What constant folding may materialise: per constant, and still in all.
struct FoldBudget {
    per_constant: usize,
    left: usize,
}

impl FoldBudget {
    /// The largest constant the next node may materialise.
    fn limit(&self) -> usize {
        self.per_constant.min(self.left)
    }

    fn spend(&mut self, sizes: impl Iterator<Item = usize>) {
        self.left = sizes.fold(self.left, usize::saturating_sub);
    }

    /// Appended to a node's error: once the budget is nearly spent, the
    /// node may have wanted a constant that folding no longer produced.
    fn note(&self) -> &'static str {
        if self.left < self.per_constant {
            " (constant folding stopped at its --max-fold-total budget)"
        } else {
            ""
        }
    }
}

fn should_fold(graph: &Graph, node: &crate::ir::Node, results: &[crate::ops::Inferred], budget: &FoldBudget) -> bool {
    node.op.foldable()
        && node.inputs.iter().flatten().all(|&v| graph.const_value(v).is_some())
        && results
            .iter()
            .try_fold(0usize, |total, r| r.max_bytes().filter(|&b| b <= budget.per_constant)?.checked_add(total))
            .is_some_and(|total| total <= budget.left)
}

/// Rejects outputs larger than `max_bytes` (or than the address space).
fn check_sizes(graph: &Graph, node: &Node, results: &[crate::ops::Inferred], max_bytes: u64) -> Result<(), InferError> {
    for (&out, r) in node.outputs.iter().zip(results) {
        let ty = r.tensor_type();
        let bytes = match r.max_bytes() {
            Some(b) => b as u64,
            None if r.runtime_shape.is_some() => continue,
            None => u64::MAX,
        };
        if bytes > max_bytes {
            let size =
                if bytes == u64::MAX { "more than the address space".to_string() } else { format!("{bytes} bytes") };
            return Err(InferError::new(vec![format!(
                "{}: output \"{}\" would be {ty}, {size}, more than the limit of {max_bytes} (--max-tensor-bytes)",
                node.label(),
                graph.value(out).name
            )]));
        }
    }
    Ok(())
}

fn bind_inputs(graph: &mut Graph, bindings: &Bindings) -> Result<(), InferError> {
    let mut errors = Vec::new();
    for name in bindings.shapes.keys() {
        if !graph.inputs.iter().any(|&v| &graph.value(v).name == name) {
            errors.push(format!("--shape names \"{name}\", which is not a graph input"));
        }
    }
    for &input in &graph.inputs.clone() {
        let value = graph.value_mut(input);
        let Some(ty) = value.ty.as_mut() else {
            continue;
        };
        if let Some(shape) = bindings.shapes.get(&value.name) {
            if shape.len() != ty.shape.len() {
                errors.push(format!(
                    "input \"{}\" has rank {}, but a shape of rank {} was given",
                    value.name,
                    ty.shape.len(),
                    shape.len()
                ));
                continue;
            }
            for (i, (d, &n)) in ty.shape.iter_mut().zip(shape).enumerate() {
                if let Dim::Known(k) = d {
                    if *k != n {
                        errors.push(format!("input \"{}\" dim {i} is {k}, but {n} was given", value.name));
                    }
                }
                *d = Dim::Known(n);
            }
            continue;
        }
        for (i, d) in ty.shape.iter_mut().enumerate() {
            if let Dim::Sym(s) = d {
                match bindings.dims.get(s.as_str()) {
                    Some(&n) => *d = Dim::Known(n),
                    None => errors.push(format!(
                        "input \"{}\" dim {i} \"{s}\" is unbound: give --dim {s}=N or --shape {}=...",
                        value.name, value.name
                    )),
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InferError::new(errors))
    }
}
