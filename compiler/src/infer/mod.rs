//! Stage 4: element types and shapes.
//!
//! Symbolic dims of graph inputs are bound first (from `--dim`/`--shape` or
//! the actual inputs); then every node, in schedule order, infers its
//! outputs from its inputs. Operators whose inputs are all known at compile
//! time are evaluated right here through the JIT — the same code path that
//! runs them at run time — so shape-computing subgraphs (Shape → Gather →
//! Concat → Reshape) become constants and later stages see static shapes.
//! After this stage no dim is symbolic: each is known, or data-dependent
//! (`Dim::Dynamic`, its producer allocating at run time); a graph compiled
//! over `--dim` ranges keeps its symbolic dims in `Graph::symbolic`
//! ([`dynamic`]), its types holding their upper bounds.
//!
//! A sequence, optional or map graph input is bound to a compile-time list
//! of tensors (`Graph::composites`, one `ValueDef::InputElement` each,
//! sizes from `--shape xs=2x3,4` or the actual input), which the code
//! checks on entry (`codegen::composite`); a sequence or optional graph
//! output (a sequence of maps included) gets a `WriteComposite` node
//! appended that writes it to the caller's descriptor. Control flow and
//! the operators on such lists are expanded here ([`expand`]).
//!
//! [`Limits`] bound what a model can make this stage do: no value may be
//! larger than `max_tensor_bytes`; folding materialises at most
//! `max_fold_bytes` per constant and `max_fold_total_bytes` in all (past
//! that, foldable nodes run at run time); the compile clock is checked at
//! every node.

pub mod dynamic;
pub mod expand;

use crate::ir::dim_expr::{DimExpr, SymbolFacts};
use crate::ir::{Composite, DType, Dim, Graph, Node, TensorType, ValueDef, ValueId};
use crate::limits::Limits;
use crate::ops::{InferCx, Inferred, InputExprs, InputInfo};
use std::collections::{HashMap, HashSet};

/// Largest graph input (in elements) that `run`/`test` turn into a
/// compile-time constant when a shape depends on its value.
pub const MAX_SPECIALISED_ELEMENTS: usize = 4096;

/// Sizes for symbolic dims and whole input shapes.
#[derive(Clone, Debug, Default)]
pub struct Bindings {
    /// `--dim SYM=N`
    pub dims: HashMap<String, usize>,
    /// `--dim SYM=LO..HI`: the bounds of dims left symbolic, for which
    /// the code is compiled once over the range ([`dynamic`]).
    pub facts: SymbolFacts,
    /// Symbolic inference: dims `dims` and `shapes` leave unbound stay
    /// symbols and shapes become expressions of them, through the
    /// operators that infer over expressions
    /// ([`crate::ops::Operator::infers_symbolically`]); the others refuse
    /// a symbolic dim. For `info`: nothing is compiled from such a graph.
    pub symbolic: bool,
    /// `--shape NAME=AxBxC`
    pub shapes: HashMap<String, Vec<usize>>,
    /// Sequence and optional inputs: their element shapes (and, for an
    /// optional, presence), which the compiled code is specialised to.
    pub composites: HashMap<String, CompositeShape>,
}

/// What a sequence or optional input holds, fixed at compile time (from
/// `--shape` or the actual input); the code checks the caller's
/// descriptor against it.
#[derive(Clone, Debug, PartialEq)]
pub enum CompositeShape {
    /// An empty optional.
    Absent,
    /// An optional tensor holding a value of this shape.
    Tensor(Vec<usize>),
    /// A sequence, or an optional holding one: one shape per element.
    Sequence(Vec<Vec<usize>>),
}

#[derive(Debug, Default, thiserror::Error)]
#[error("{}", .messages.join("\n"))]
pub struct InferError {
    pub messages: Vec<String>,
    /// Graph inputs whose values a node needed at compile time (e.g. a
    /// Reshape's shape given as an input). Callers that know the input
    /// values (`run`, `test`) may specialise on them and infer again.
    pub wanted_inputs: Vec<crate::ir::ValueId>,
    /// Graph inputs that lack the binding their type needs (`--dim` for a
    /// symbolic dim, `--shape` for a sequence's element shapes or a map's
    /// entry count). When not empty, every message is about one of them:
    /// the model itself may be fine.
    pub unbound_inputs: Vec<crate::ir::ValueId>,
}

impl InferError {
    fn new(messages: Vec<String>) -> InferError {
        InferError { messages, ..InferError::default() }
    }
}

pub fn infer(graph: &mut Graph, bindings: &Bindings, limits: &Limits) -> Result<(), InferError> {
    let ranged = bind_inputs(graph, bindings)?;
    let nodes = std::mem::take(&mut graph.nodes);
    let mut kept = Vec::with_capacity(nodes.len());
    let mut state = InferState {
        limits,
        symbolic: (bindings.symbolic || ranged).then_some(&bindings.facts),
        info_only: bindings.symbolic,
        folding: FoldBudget { per_constant: limits.max_fold_bytes, left: limits.max_fold_total_bytes },
        unrolled: 0,
        expanding: 0,
    };
    infer_nodes(graph, nodes, &mut kept, &mut state)?;
    graph.nodes = kept;
    let checks = |&v: &ValueId| check_output(graph, v).and_then(|()| check_output_dtype(graph, v)).err();
    let errors: Vec<String> = graph.outputs.iter().filter_map(checks).collect();
    if !errors.is_empty() {
        return Err(InferError::new(errors));
    }
    write_composite_outputs(graph);
    if ranged && !bindings.symbolic {
        dynamic::settle(graph, &bindings.facts)?;
    }
    Ok(())
}

/// Gives every sequence or optional graph output a
/// [`WriteComposite`](crate::ops::sequence::WriteComposite) node that
/// writes its tensors to the caller's descriptor; the node's output (with
/// the same composite and declared type) becomes the graph output.
fn write_composite_outputs(graph: &mut Graph) {
    for k in 0..graph.outputs.len() {
        let v = graph.outputs[k];
        let (Some(composite), Some(ty)) = (graph.composites.get(&v).cloned(), graph.port_types.get(&v).cloned()) else {
            continue;
        };
        let name = graph.value(v).name.clone();
        let out = graph.add_value(name.clone(), None, ValueDef::Computed);
        let op = crate::ops::sequence::WriteComposite {
            optional: ty.optional,
            sequence: ty.sequence,
            empty: composite == Composite::Optional(None),
            maps: matches!(composite, Composite::MapRows { .. }),
        };
        let inputs = graph.composite_tensors(v).into_iter().map(Some).collect();
        graph.composites.insert(out, composite);
        graph.port_types.insert(out, ty);
        graph.nodes.push(Node { name: format!("{name}/write"), op: op.into(), inputs, outputs: vec![out] });
        graph.outputs[k] = out;
    }
}

/// A graph output declared a tensor has the element type it declares (its
/// shape, declared or not, is what inference gives).
fn check_output_dtype(graph: &Graph, v: ValueId) -> Result<(), String> {
    let value = graph.value(v);
    match (graph.output_dtypes.get(&v), &value.ty) {
        (Some(&declared), Some(ty)) if ty.dtype != declared => {
            Err(format!("graph output \"{}\" is declared {declared}, but the graph computes {}", value.name, ty.dtype))
        }
        _ => Ok(()),
    }
}

/// A graph output is a tensor, or a sequence or optional of the kinds the
/// ABI carries (`CompositeType`): its tensors are what the code writes.
fn check_output(graph: &Graph, v: ValueId) -> Result<(), String> {
    let name = &graph.value(v).name;
    let tensors = |items: &[ValueId]| items.iter().all(|i| !graph.composites.contains_key(i));
    let fits = match graph.composites.get(&v) {
        None => return Ok(()),
        Some(Composite::MapRows { keys, .. }) => {
            let key = graph.value(*keys).ty.as_ref().map(|t| t.dtype);
            return match graph.port_types.get(&v) {
                Some(d) if d.sequence && d.map_key.is_some() && d.map_key == key && d.dtype == DType::F32 => Ok(()),
                Some(d) => {
                    Err(format!("graph output \"{name}\" is declared {d}, but the graph computes a sequence of maps"))
                }
                None => Err(format!("graph output \"{name}\" is a sequence of maps but is declared a tensor")),
            };
        }
        Some(Composite::Sequence(items)) => tensors(items),
        Some(Composite::Optional(None)) => true,
        Some(Composite::Optional(Some(inner))) => match graph.composites.get(inner) {
            None => true,
            Some(Composite::Sequence(items)) => tensors(items),
            Some(Composite::Optional(_) | Composite::MapRows { .. }) => false,
        },
    };
    if !fits {
        return Err(format!("graph output \"{name}\" nests sequences or optionals, which are not compiled yet"));
    }
    let declared = graph.port_types.get(&v);
    let is_sequence = |c: Option<&Composite>| matches!(c, Some(Composite::Sequence(_)));
    let computed_sequence = match graph.composites.get(&v) {
        Some(Composite::Optional(Some(inner))) => is_sequence(graph.composites.get(inner)),
        Some(Composite::Optional(None)) => declared.is_some_and(|d| d.sequence),
        c => is_sequence(c),
    };
    let computed_optional = matches!(graph.composites.get(&v), Some(Composite::Optional(_)));
    match declared {
        Some(d) if d.map_key.is_none() && d.optional == computed_optional && d.sequence == computed_sequence => Ok(()),
        Some(d) => Err(format!("graph output \"{name}\" is declared {d}, but the graph computes another kind")),
        None => Err(format!("graph output \"{name}\" is a sequence or optional but is declared a tensor")),
    }
}

/// What inference carries from node to node: the limits, the folding
/// budget left, how many nodes unrolling added, and how deep in expanded
/// control flow the current node is (a node there may never run, so what
/// it would fail on is no compile error: [`crate::ops::Operator::fails_on_constants`]).
pub struct InferState<'l> {
    limits: &'l Limits,
    /// Symbolic inference, with the facts about the symbols.
    symbolic: Option<&'l SymbolFacts>,
    /// Symbolic inference for `info`, which compiles nothing.
    info_only: bool,
    folding: FoldBudget,
    pub unrolled: usize,
    expanding: usize,
}

/// Infers `nodes` in order, folding what is constant and appending the
/// rest to `kept`; control flow and sequences are expanded into ordinary
/// nodes first (`crate::infer::expand`).
fn infer_nodes(
    graph: &mut Graph,
    nodes: Vec<Node>,
    kept: &mut Vec<Node>,
    state: &mut InferState,
) -> Result<(), InferError> {
    for node in nodes {
        state.limits.check_time(&node.label()).map_err(|e| InferError::new(vec![e]))?;
        if node.op.is_control_flow() || crate::infer::expand::is_composite_identity(graph, &node) {
            state.expanding += 1;
            let expanded = crate::infer::expand::Expansion { graph, kept, state, infer: infer_nodes }.expand(node);
            state.expanding -= 1;
            expanded?;
            continue;
        }
        infer_node(graph, node, kept, state)?;
    }
    Ok(())
}

/// Types `node`'s outputs, then makes them constants (known from shapes,
/// or folded through the JIT) or appends `node` to `kept`.
fn infer_node(graph: &mut Graph, node: Node, kept: &mut Vec<Node>, state: &mut InferState) -> Result<(), InferError> {
    let results = infer_outputs(graph, &node, kept, state)?;
    let folding = &mut state.folding;
    check_sizes(graph, &node, &results, state.limits.max_tensor_bytes)?;
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
        if let Some(elements) = &r.elements {
            graph.dim_values.insert(out, elements.clone());
        }
        let value = graph.value_mut(out);
        value.ty = Some(r.tensor_type());
        match &r.value {
            Some(t) => value.def = ValueDef::Const(t.clone()),
            None => all_known = false,
        }
    }
    if all_known {
        return Ok(());
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
        return Ok(());
    }
    kept.push(node);
    Ok(())
}

/// The operator's inference on `node`'s input types, and in code that runs
/// whenever the model does, its compile-time failure on constant inputs.
fn infer_outputs(graph: &Graph, node: &Node, kept: &[Node], state: &InferState) -> Result<Vec<Inferred>, InferError> {
    let inputs = input_types(graph, node, kept, state.symbolic.is_some())?;
    let exprs = match state.symbolic {
        Some(_) => symbolic_inputs(graph, node, &inputs)?,
        None => Vec::new(),
    };
    let cx = InferCx {
        inputs: inputs
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
        max_fold_bytes: state.folding.limit(),
        exprs,
        facts: state.symbolic,
    };
    let outputs = node.op.infer(&cx).map_err(|e| {
        let missing: Vec<ValueId> =
            cx.missing_values.borrow().iter().filter_map(|&i| node.inputs.get(i).copied().flatten()).collect();
        let wanted_inputs = input_ancestors(graph, kept, &missing);
        let messages = vec![format!("{}: {e}{}", node.label(), state.folding.note())];
        InferError { messages, wanted_inputs, ..InferError::default() }
    })?;
    // Inference for `info` compiles nothing: no run fails; a node of
    // symbolic shape is seen with its static inputs' shapes only.
    let static_inputs = inputs.iter().flatten().all(|(_, _, v)| graph.concrete(*v).is_some());
    if state.expanding == 0 && !state.info_only && static_inputs {
        node.op.fails_on_constants(&cx).map_err(|e| InferError::new(vec![format!("{}: {e}", node.label())]))?;
    }
    Ok(outputs)
}

/// An input's element type, static shape (empty when some dim is
/// symbolic) and value id.
type InputType = (DType, Vec<usize>, ValueId);

/// Each present input's [`InputType`]; an error for an input of
/// data-dependent or unknown shape (symbolic unless inference is).
fn input_types(
    graph: &Graph,
    node: &Node,
    kept: &[Node],
    symbolic: bool,
) -> Result<Vec<Option<InputType>>, InferError> {
    let mut inputs = Vec::with_capacity(node.inputs.len());
    for (i, input) in node.inputs.iter().enumerate() {
        let Some(v) = input else {
            inputs.push(None);
            continue;
        };
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
                ..InferError::default()
            });
        }
        let typed = value.ty.as_ref().and_then(|t| match t.known_shape() {
            Some(shape) => Some((t.dtype, shape)),
            None => symbolic.then(|| (t.dtype, Vec::new())),
        });
        let Some((dtype, shape)) = typed else {
            return Err(InferError::new(vec![format!(
                "{}: input {i} \"{}\" has no known shape",
                node.label(),
                value.name
            )]));
        };
        inputs.push(Some((dtype, shape, *v)));
    }
    Ok(inputs)
}

/// Symbolic inference: each present input's dims and symbolic elements;
/// an error naming the node when an operator that cannot infer over
/// expressions would get a symbolic dim or element.
fn symbolic_inputs(
    graph: &Graph,
    node: &Node,
    inputs: &[Option<InputType>],
) -> Result<Vec<Option<InputExprs>>, InferError> {
    let mut exprs = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let Some((_, _, v)) = input else {
            exprs.push(None);
            continue;
        };
        let value = graph.value(*v);
        let dims: Vec<_> = value.ty.iter().flat_map(|t| t.shape.iter()).filter_map(Dim::expr).collect();
        let elements = graph.dim_values.get(v).cloned();
        let mut symbols: Vec<String> = dims.iter().chain(elements.iter().flatten()).flat_map(|d| d.symbols()).collect();
        symbols.sort();
        symbols.dedup();
        if !symbols.is_empty() && !node.op.infers_symbolically() {
            let names = symbols.iter().map(|s| format!("--dim {s}=N")).collect::<Vec<_>>().join(" ");
            return Err(InferError::new(vec![format!(
                "{}: {} cannot take a symbolic dim yet (input {i} \"{}\" is {}{}): give {names}",
                node.label(),
                node.op.name(),
                value.name,
                value.ty.as_ref().map(ToString::to_string).unwrap_or_default(),
                elements.as_ref().map(|e| format!(" holding {}", list(e))).unwrap_or_default(),
            )]));
        }
        exprs.push(Some(InputExprs { dims, elements }));
    }
    Ok(exprs)
}

/// `[a,b,c]`, for messages.
fn list(items: &[crate::ir::dim_expr::DimExpr]) -> String {
    format!("[{}]", items.iter().map(ToString::to_string).collect::<Vec<_>>().join(","))
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

/// Binds the graph inputs' symbolic dims; true when some stays symbolic
/// for code compiled over its `--dim` range.
fn bind_inputs(graph: &mut Graph, bindings: &Bindings) -> Result<bool, InferError> {
    let mut ranged = false;
    let mut errors = Vec::new();
    // Inputs that lack a binding, and the messages about them.
    let (mut unbound, mut missing) = (Vec::new(), Vec::new());
    for (k, &input) in graph.inputs.clone().iter().enumerate() {
        if let Err(e) = bind_composite_input(graph, k, input, bindings) {
            let name = &graph.value(input).name;
            if bindings.shapes.contains_key(name) || bindings.composites.contains_key(name) {
                errors.push(e);
            } else {
                unbound.push(input);
                missing.push(e);
            }
        }
    }
    for name in bindings.shapes.keys().chain(bindings.composites.keys()) {
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
            let Some(s) = d.symbol().map(str::to_string) else { continue };
            let binding = bind_symbol(bindings, &value.name, i, &s);
            ranged |= matches!(binding, SymbolBinding::Ranged);
            match binding {
                SymbolBinding::Size(n) => *d = Dim::Known(n),
                SymbolBinding::Kept | SymbolBinding::Ranged => match DimExpr::symbol_with_facts(&s, &bindings.facts)
                    .and_then(Dim::from_expr)
                {
                    Some(e) => *d = e,
                    None => errors.push(format!("input \"{}\" dim {i} \"{s}\": its divisor is too large", value.name)),
                },
                SymbolBinding::Refused(message) => errors.push(message),
                SymbolBinding::Unbound(message) => {
                    unbound.push(input);
                    missing.push(message);
                }
            }
        }
    }
    match (errors.is_empty(), missing.is_empty()) {
        (true, true) => Ok(ranged),
        (true, false) => Err(InferError { messages: missing, unbound_inputs: unbound, ..InferError::default() }),
        (false, _) => Err(InferError::new(errors.into_iter().chain(missing).collect())),
    }
}

/// What binding does with one symbolic dim of a graph input.
enum SymbolBinding {
    /// `--dim SYM=N` (or the actual input) gives its size.
    Size(usize),
    /// Symbolic inference keeps it.
    Kept,
    /// `--dim SYM=LO..HI`: the code is compiled for every size in the range.
    Ranged,
    /// A range without an upper bound, which the workspace needs.
    Refused(String),
    Unbound(String),
}

/// How symbol `sym`, dim `axis` of graph input `input`, is bound.
fn bind_symbol(bindings: &Bindings, input: &str, axis: usize, sym: &str) -> SymbolBinding {
    if let Some(&n) = bindings.dims.get(sym) {
        return SymbolBinding::Size(n);
    }
    if bindings.symbolic {
        return SymbolBinding::Kept;
    }
    if bindings.facts.is_declared(sym) {
        let bound = bindings.facts.get(sym);
        return match bound.max {
            Some(_) => SymbolBinding::Ranged,
            None => SymbolBinding::Refused(format!(
                "input \"{input}\" dim {axis} \"{sym}\" has no upper bound, which the workspace needs: give \
                 --dim {sym}={}..HI",
                bound.min
            )),
        };
    }
    SymbolBinding::Unbound(format!(
        "input \"{input}\" dim {axis} \"{sym}\" is unbound: give --dim {sym}=N (one size), --dim {sym}=LO..HI \
         (every size in a range) or --shape {input}=..."
    ))
}

/// Makes map input `k` (`map(key, value)`, not in a sequence) a
/// [`Composite::MapRows`] of two `ValueDef::InputElement` tensors, its
/// keys and values, with the entry count its binding gives (`--shape m=5`
/// or the actual input); the code checks the caller's `onnxc_map` against it.
fn bind_map_input(
    graph: &mut Graph,
    k: usize,
    input: ValueId,
    key: DType,
    ty: &crate::ir::CompositeType,
    bindings: &Bindings,
) -> Result<(), String> {
    let name = graph.value(input).name.clone();
    if ty.sequence {
        return Err(format!("input \"{name}\" is {ty}: sequences of maps are compiled as graph outputs only"));
    }
    let given = bindings
        .composites
        .get(&name)
        .cloned()
        .or_else(|| bindings.shapes.get(&name).cloned().map(CompositeShape::Tensor));
    let Some(CompositeShape::Tensor(dims)) = given else {
        return Err(format!("input \"{name}\" is {ty}: give its entry count, e.g. --shape {name}=5"));
    };
    let [entries] = dims[..] else {
        return Err(format!("input \"{name}\" is {ty}: its binding must be one entry count, got {dims:?}"));
    };
    let mut part = |label: &str, element: usize, dtype: DType| {
        let def = ValueDef::InputElement { input: k, element: Some(element) };
        graph.add_value(format!("{name}.{label}"), Some(TensorType::known(dtype, &[entries])), def)
    };
    let keys = part("keys", 0, key);
    let values = part("values", 1, ty.dtype);
    graph.composites.insert(input, Composite::MapRows { keys, values });
    Ok(())
}

/// Makes sequence or optional input `k` the compile-time composite its
/// binding describes: one `ValueDef::InputElement` value per tensor it
/// holds. Without a binding a sequence is refused (its length is never
/// declared) and an optional tensor with static declared dims is taken
/// to hold a value.
fn bind_composite_input(graph: &mut Graph, k: usize, input: ValueId, bindings: &Bindings) -> Result<(), String> {
    let Some(ty) = graph.port_types.get(&input).cloned() else { return Ok(()) };
    let name = graph.value(input).name.clone();
    if let Some(key) = ty.map_key {
        return bind_map_input(graph, k, input, key, &ty, bindings);
    }
    let declared_static =
        ty.shape.as_ref().and_then(|s| TensorType { dtype: ty.dtype, shape: s.clone() }.known_shape());
    let single = bindings.shapes.get(&name).map(|s| match ty.sequence {
        true => CompositeShape::Sequence(vec![s.clone()]),
        false => CompositeShape::Tensor(s.clone()),
    });
    let shape = match (bindings.composites.get(&name).cloned().or(single), declared_static) {
        (Some(s), _) => s,
        (None, Some(s)) if !ty.sequence => CompositeShape::Tensor(s),
        (None, _) if ty.optional && !ty.sequence => {
            return Err(format!(
                "input \"{name}\" is {ty}: give what it holds, e.g. --shape {name}=2x3 (a tensor) or \
                 --shape {name}=none (nothing)"
            ))
        }
        (None, _) if ty.optional => {
            return Err(format!(
                "input \"{name}\" is {ty}: give what it holds, e.g. --shape {name}=2x3,4 (a sequence of two \
                 tensors), --shape {name}=[] (an empty sequence) or --shape {name}=none (nothing)"
            ))
        }
        (None, _) => {
            return Err(format!(
                "input \"{name}\" is {ty}: give the shapes of its elements, e.g. --shape {name}=2x3,4 \
                 (two tensors) or --shape {name}=[] (none)"
            ))
        }
    };
    let element = |graph: &mut Graph, at: Option<usize>, dims: &[usize]| -> Result<ValueId, String> {
        if let Some(declared) = &ty.shape {
            let fits = declared.len() == dims.len()
                && declared.iter().zip(dims).all(|(d, &n)| !matches!(d, Dim::Known(k) if *k != n));
            if !fits {
                return Err(format!("input \"{name}\" is {ty}, but an element of shape {dims:?} was given"));
            }
        }
        let label = at.map_or(format!("{name}.value"), |i| format!("{name}[{i}]"));
        let def = ValueDef::InputElement { input: k, element: at };
        Ok(graph.add_value(label, Some(TensorType::known(ty.dtype, dims)), def))
    };
    let composite = match (shape, ty.optional, ty.sequence) {
        (CompositeShape::Absent, true, _) => Composite::Optional(None),
        (CompositeShape::Tensor(dims), true, false) => Composite::Optional(Some(element(graph, None, &dims)?)),
        (CompositeShape::Sequence(shapes), optional, true) => {
            let items = shapes
                .iter()
                .enumerate()
                .map(|(i, dims)| element(graph, Some(i), dims))
                .collect::<Result<Vec<_>, _>>()?;
            if optional {
                let inner = graph.add_value(format!("{name}.value"), None, ValueDef::Computed);
                graph.composites.insert(inner, Composite::Sequence(items));
                Composite::Optional(Some(inner))
            } else {
                Composite::Sequence(items)
            }
        }
        (given, ..) => return Err(format!("input \"{name}\" is {ty}, which {given:?} does not describe")),
    };
    graph.composites.insert(input, composite);
    Ok(())
}
