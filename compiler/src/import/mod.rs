//! Stage 3: ONNX proto → mid-IR.
//!
//! Constants (initializers, Constant nodes) become constant values; each
//! node goes through its importer in [`crate::ops::REGISTRY`] (default
//! domain) or [`crate::ops::DOMAIN_REGISTRY`],
//! which parses attributes into a typed struct and normalises opset-version
//! differences; calls to model-local functions are inlined with
//! `ref_attr_name` substitution. Every problem is collected and reported
//! together. No proto type exists past this stage.

pub mod attrs;
pub mod sparse;
pub mod tensor;

use crate::ir::dim_expr::DimExpr;
use crate::ir::{DType, Dim, Graph, Node, TensorType, ValueDef, ValueId};
use crate::limits::Limits;
use crate::ops::control::Subgraph;
use crate::ops::Op;
use attrs::Attrs;
use onnx_proto::{AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, ValueInfoProto};
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct ImportError(pub Vec<String>);

/// What an importer sees of the node it builds an [`crate::ops::Op`] for.
pub struct NodeImport<'a> {
    pub op_type: &'a str,
    /// The opset version of the node's domain in force for this node.
    pub opset: i64,
    pub attrs: Attrs<'a>,
    /// The node's inputs; importers may rewrite them (e.g. turn an
    /// attribute of an old opset into a constant input).
    pub inputs: Vec<Option<ValueId>>,
    pub output_count: usize,
    /// `Limits::max_tensor_bytes`, for operators whose outputs' sizes are
    /// only known at run time and are checked against it there.
    pub max_tensor_bytes: u64,
    graph: &'a mut Graph,
    scope: &'a Scope,
}

impl NodeImport<'_> {
    /// Adds a constant value (e.g. an attribute turned into an input).
    pub fn add_const(&mut self, name: &str, t: crate::ir::Tensor) -> ValueId {
        let ty = TensorType::known(t.dtype, &t.shape);
        self.graph.add_value(name, Some(ty), ValueDef::Const(t))
    }

    /// The compile-time value of input `i`, if it is a constant.
    pub fn const_input(&self, i: usize) -> Option<&crate::ir::Tensor> {
        self.inputs.get(i).copied().flatten().and_then(|v| self.graph.const_value(v))
    }

    /// The value `name` refers to where the node stands (for operators whose
    /// attributes name values, like Gradient's `y`).
    pub fn value_named(&self, name: &str) -> Option<ValueId> {
        self.scope.get(name).copied()
    }

    /// The index this node gets among the imported graph's nodes: an
    /// identity that depends only on the model (random operators derive
    /// their unseeded streams from it).
    pub fn position(&self) -> usize {
        self.graph.nodes.len()
    }
}

type Scope = HashMap<String, ValueId>;

struct Importer<'m> {
    graph: Graph,
    functions: HashMap<(&'m str, &'m str), &'m FunctionProto>,
    errors: Vec<String>,
    unnamed: usize,
    limits: &'m Limits,
    /// Set when a limit stopped the import: nothing more is imported.
    stopped: bool,
}

/// Imports the main graph of a model whose structure `check` accepted.
/// Function inlining stops at `limits.max_function_depth` and the graph at
/// `limits.max_nodes`; the compile clock is checked at every node.
pub fn import_model(model: &ModelProto, limits: &Limits) -> Result<Graph, ImportError> {
    let Some(g) = &model.graph else {
        return Err(ImportError(vec!["model has no graph".into()]));
    };
    let opsets = opset_map(&model.opset_import);
    let mut imp = Importer {
        graph: Graph::default(),
        functions: model.functions.iter().map(|f| ((f.domain(), f.name()), f)).collect(),
        errors: Vec::new(),
        unnamed: 0,
        limits,
        stopped: false,
    };
    let mut scope = Scope::new();
    for init in &g.initializer {
        match tensor::tensor_from_proto(init) {
            Ok(t) => {
                let id = imp.const_value(init.name(), t);
                scope.insert(init.name().to_string(), id);
            }
            Err(e) => imp.errors.push(format!("initializer {e}")),
        }
    }
    imp.sparse_initializers(g, &mut scope, "");
    let runtime_inputs: Vec<&ValueInfoProto> = g.input.iter().filter(|i| !scope.contains_key(i.name())).collect();
    let mut typed_inputs = Vec::new();
    for (k, input) in runtime_inputs.into_iter().enumerate() {
        let id = imp.graph.add_value(input.name(), None, ValueDef::Input(k));
        match port_type(input) {
            Ok(Port::Tensor(ty)) => {
                imp.graph.value_mut(id).ty = Some(ty);
                typed_inputs.push((id, input));
            }
            Ok(Port::Composite(ty)) => {
                imp.graph.port_types.insert(id, ty);
            }
            Err(e) => imp.errors.push(e),
        }
        imp.graph.inputs.push(id);
        scope.insert(input.name().to_string(), id);
    }
    imp.graph.warnings = name_unknown_dims(&mut imp.graph, &typed_inputs);
    for node in &g.node {
        imp.node(node, &mut scope, &opsets, &HashMap::new(), 0);
    }
    if imp.stopped {
        return Err(ImportError(imp.errors));
    }
    for output in &g.output {
        match scope.get(output.name()) {
            Some(&id) => {
                match port_type(output) {
                    Ok(Port::Composite(ty)) => {
                        imp.graph.port_types.insert(id, ty);
                    }
                    Ok(Port::Tensor(_)) | Err(_) => {
                        if let Some(dtype) = declared_tensor_dtype(output) {
                            imp.graph.output_dtypes.insert(id, dtype);
                        }
                    }
                }
                imp.graph.outputs.push(id)
            }
            None => imp.errors.push(format!("graph output \"{}\" is not computed", output.name())),
        }
    }
    if imp.errors.is_empty() {
        Ok(imp.graph)
    } else {
        Err(ImportError(imp.errors))
    }
}

fn opset_map(list: &[onnx_proto::OperatorSetIdProto]) -> HashMap<String, i64> {
    list.iter()
        .map(|o| {
            let d = if o.domain() == "ai.onnx" { "" } else { o.domain() };
            (d.to_string(), o.version())
        })
        .collect()
}

/// The declared type of a main-graph input or output.
pub enum Port {
    Tensor(TensorType),
    Composite(crate::ir::CompositeType),
}

/// The declared type of a main-graph input or output: a tensor, a
/// sequence of tensors, an optional tensor or an optional sequence.
pub fn port_type(v: &ValueInfoProto) -> Result<Port, String> {
    use onnx_proto::type_proto::Value as T;
    let kind = |t: &onnx_proto::TypeProto| t.value.clone();
    let unsupported = || {
        format!(
            "value \"{}\": only tensors, sequences of tensors and optional tensors or sequences are supported yet",
            v.name()
        )
    };
    if let Some(T::MapType(m)) = v.r#type.as_ref().and_then(kind) {
        return map_type(v, &m, false).map(Port::Composite);
    }
    let (optional, inner) = match v.r#type.as_ref().and_then(kind) {
        Some(T::OptionalType(o)) => (true, o.elem_type.as_deref().and_then(kind)),
        other => (false, other),
    };
    let (sequence, tensor) = match inner {
        Some(T::SequenceType(s)) => (true, s.elem_type.as_deref().and_then(kind)),
        other => (false, other),
    };
    if let (false, true, Some(T::MapType(m))) = (optional, sequence, &tensor) {
        return map_type(v, m, true).map(Port::Composite);
    }
    let Some(T::TensorType(t)) = tensor else { return Err(unsupported()) };
    if !optional && !sequence {
        return value_type(v).map(Port::Tensor);
    }
    let dtype = element_type(v, &t)?;
    let shape = t.shape.as_ref().map(|s| dims(v, s));
    Ok(Port::Composite(crate::ir::CompositeType { optional, sequence, dtype, shape, map_key: None }))
}

/// A map (`map(int64|string, tensor(T))`, DictVectorizer's input) or a
/// sequence of them (what ZipMap makes): its key type and value type.
fn map_type(
    v: &ValueInfoProto,
    m: &onnx_proto::type_proto::Map,
    sequence: bool,
) -> Result<crate::ir::CompositeType, String> {
    use onnx_proto::type_proto::Value as T;
    let key = DType::from_onnx(m.key_type()).filter(|k| matches!(k, DType::I64 | DType::String));
    let value = match m.value_type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(T::TensorType(t)) => Some(element_type(v, t)?),
        _ => None,
    };
    let (Some(key), Some(dtype)) = (key, value) else {
        return Err(format!(
            "value \"{}\": a sequence of maps must map int64 or string keys to tensor values",
            v.name()
        ));
    };
    Ok(crate::ir::CompositeType { optional: false, sequence, dtype, shape: None, map_key: Some(key) })
}

fn element_type(v: &ValueInfoProto, t: &onnx_proto::type_proto::Tensor) -> Result<DType, String> {
    DType::from_onnx(t.elem_type()).ok_or_else(|| {
        format!("value \"{}\": element type {} is not supported yet", v.name(), DType::onnx_name(t.elem_type()))
    })
}

/// The declared type of a main-graph tensor input or output.
pub fn value_type(v: &ValueInfoProto) -> Result<TensorType, String> {
    use onnx_proto::type_proto::Value as T;
    let Some(T::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err(format!("value \"{}\": only tensor types are supported yet", v.name()));
    };
    let dtype = element_type(v, t)?;
    let shape = t.shape.as_ref().ok_or_else(|| format!("value \"{}\" has no shape (rank unknown)", v.name()))?;
    Ok(TensorType { dtype, shape: dims(v, shape) })
}

/// The element type of a value declared as a tensor, whether or not it
/// declares a shape.
fn declared_tensor_dtype(v: &ValueInfoProto) -> Option<DType> {
    use onnx_proto::type_proto::Value as T;
    match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(T::TensorType(t)) => DType::from_onnx(t.elem_type()),
        _ => None,
    }
}

fn dims(v: &ValueInfoProto, shape: &onnx_proto::TensorShapeProto) -> Vec<Dim> {
    use onnx_proto::tensor_shape_proto::dimension::Value as D;
    shape
        .dim
        .iter()
        .enumerate()
        .map(|(i, d)| match &d.value {
            Some(D::DimValue(n)) if *n >= 0 => Dim::Known(*n as usize),
            Some(D::DimValue(_)) => Dim::Sym(DimExpr::symbol(&unknown_dim_name(v.name(), i))),
            Some(D::DimParam(p)) if !p.is_empty() => Dim::Sym(DimExpr::symbol(p)),
            _ => Dim::Sym(DimExpr::symbol(&format!("{}:{i}", v.name()))),
        })
        .collect()
}

/// The symbol a dim declared negative stands for, before
/// [`name_unknown_dims`] makes it unique.
fn unknown_dim_name(value: &str, axis: usize) -> String {
    format!("{value}_dim{axis}")
}

/// Some exporters write `dim_value: -1` for "unknown" (ONNX Runtime reads
/// it so): each such dim of a graph input becomes a symbol of its own,
/// bound like any other (`--dim x_dim0=3`, or from the actual inputs),
/// named after its value and axis, with `_` appended while another dim
/// already has that name. Returns one warning per such dim.
fn name_unknown_dims(graph: &mut Graph, inputs: &[(ValueId, &ValueInfoProto)]) -> Vec<String> {
    use onnx_proto::tensor_shape_proto::dimension::Value as D;
    let declared = |v: &ValueInfoProto| match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(onnx_proto::type_proto::Value::TensorType(t)) => t.shape.as_ref().map(|s| s.dim.clone()),
        _ => None,
    };
    let mut taken: std::collections::HashSet<String> = inputs
        .iter()
        .filter_map(|(_, v)| declared(v))
        .flatten()
        .filter_map(|d| match d.value {
            Some(D::DimParam(p)) => Some(p),
            _ => None,
        })
        .collect();
    let mut warnings = Vec::new();
    for &(id, v) in inputs {
        for (i, d) in declared(v).unwrap_or_default().iter().enumerate() {
            let Some(D::DimValue(n @ ..=-1)) = d.value else { continue };
            let mut sym = unknown_dim_name(v.name(), i);
            while taken.contains(&sym) {
                sym.push('_');
            }
            if let Some(dim) = graph.value_mut(id).ty.as_mut().and_then(|t| t.shape.get_mut(i)) {
                *dim = Dim::Sym(DimExpr::symbol(&sym));
            }
            warnings.push(format!(
                "input \"{}\" dim {i} is declared {n}: taken as the unknown dim \"{sym}\" (bind it with \
                 --dim {sym}=N, or it is taken from the inputs given)",
                v.name()
            ));
            taken.insert(sym);
        }
    }
    warnings
}

impl<'m> Importer<'m> {
    /// `g`'s sparse initializers, densified into constants (named by their
    /// values tensor, as the IR spec says) and added to `scope`.
    fn sparse_initializers(&mut self, g: &GraphProto, scope: &mut Scope, place: &str) {
        for s in &g.sparse_initializer {
            match sparse::densify(s, self.limits.max_tensor_bytes) {
                Ok(t) => {
                    let name = s.values.as_ref().map_or("", |v| v.name());
                    let id = self.const_value(name, t);
                    scope.insert(name.to_string(), id);
                }
                Err(e) => self.errors.push(format!("{place}sparse initializer: {e}")),
            }
        }
    }

    fn const_value(&mut self, name: &str, t: crate::ir::Tensor) -> ValueId {
        let ty = TensorType::known(t.dtype, &t.shape);
        self.graph.add_value(name, Some(ty), ValueDef::Const(t))
    }

    fn node_name(&mut self, node: &NodeProto) -> String {
        if node.name().is_empty() {
            self.unnamed += 1;
            format!("{}_{}", node.op_type(), self.unnamed)
        } else {
            node.name().to_string()
        }
    }

    /// Imports one node into `scope`. `caller_attrs` holds the attributes of
    /// the function call being inlined (empty in the main graph).
    fn node(
        &mut self,
        node: &'m NodeProto,
        scope: &mut Scope,
        opsets: &HashMap<String, i64>,
        caller_attrs: &HashMap<&str, &AttributeProto>,
        depth: usize,
    ) {
        if self.stopped {
            return;
        }
        let name = self.node_name(node);
        let label = format!("node \"{name}\" ({})", node.op_type());
        if let Err(e) = self.within_limits(&label) {
            self.errors.push(e);
            self.stopped = true;
            return;
        }
        let Some(inputs) = self.node_inputs(node, scope, &label) else {
            return;
        };
        let attributes = substitute_references(node, caller_attrs);
        let domain = if node.domain() == "ai.onnx" { "" } else { node.domain() };
        if let Some(f) = self.functions.get(&(node.domain(), node.op_type())).copied() {
            self.inline(node, f, inputs, &attributes, scope, depth, &label);
            return;
        }
        let opset = opsets.get(domain).copied().unwrap_or(if domain.is_empty() { 1 } else { 0 });
        if domain.is_empty() && node.op_type() == "Constant" {
            self.constant(node, &attributes, scope, &label);
            return;
        }
        let op = if holds_subgraphs(domain, node.op_type()) {
            self.control_flow(node, opset, scope, opsets, caller_attrs, depth).map(|op| (op, inputs))
        } else {
            self.registered(node, domain, opset, &attributes, inputs, scope)
        };
        match op {
            Ok((op, inputs)) => self.push_node(name, op, inputs, &node.output, scope),
            Err(e) => self.fail(&format!("{label}: {e}"), &node.output, scope),
        }
    }

    /// Records `message` and defines `outputs` as values of unknown type,
    /// so that later nodes report their own problems, not these.
    fn fail(&mut self, message: &str, outputs: &[String], scope: &mut Scope) {
        self.errors.push(message.to_string());
        self.define_unknown(outputs, scope);
    }

    /// The values `node` reads (`None` for an omitted input), or `None`
    /// after reporting an undefined one.
    fn node_inputs(&mut self, node: &NodeProto, scope: &mut Scope, label: &str) -> Option<Vec<Option<ValueId>>> {
        let mut inputs = Vec::with_capacity(node.input.len());
        for input in &node.input {
            if input.is_empty() {
                inputs.push(None);
            } else if let Some(&id) = scope.get(input) {
                inputs.push(Some(id));
            } else {
                self.fail(&format!("{label}: input \"{input}\" is undefined"), &node.output, scope);
                return None;
            }
        }
        Some(inputs)
    }

    /// A Constant node becomes a constant value.
    fn constant(&mut self, node: &NodeProto, attributes: &[AttributeProto], scope: &mut Scope, label: &str) {
        match constant_value(&Attrs::new(attributes), self.limits.max_tensor_bytes) {
            Ok(t) => {
                let out = node.output.first().map(String::as_str).unwrap_or("");
                let id = self.const_value(out, t);
                scope.insert(out.to_string(), id);
            }
            Err(e) => self.fail(&format!("{label}: {e}"), &node.output, scope),
        }
    }

    /// The operator of a node whose importer is in the registries, with
    /// the inputs the importer may have rewritten.
    fn registered(
        &mut self,
        node: &NodeProto,
        domain: &str,
        opset: i64,
        attributes: &[AttributeProto],
        inputs: Vec<Option<ValueId>>,
        scope: &mut Scope,
    ) -> Result<(Op, Vec<Option<ValueId>>), String> {
        let Some(importer) = crate::ops::importer(domain, node.op_type()) else {
            return Err(format!("unsupported operator {} (domain \"{domain}\", opset {opset})", node.op_type()));
        };
        let mut cx = NodeImport {
            op_type: node.op_type(),
            opset,
            attrs: Attrs::new(attributes),
            inputs,
            output_count: node.output.len(),
            max_tensor_bytes: self.limits.max_tensor_bytes,
            graph: &mut self.graph,
            scope,
        };
        let op = importer(&mut cx)?;
        Ok((op, cx.inputs))
    }

    /// Adds an imported node, defining its outputs in `scope`.
    fn push_node(&mut self, name: String, op: Op, inputs: Vec<Option<ValueId>>, outputs: &[String], scope: &mut Scope) {
        let outputs = outputs
            .iter()
            .map(|o| {
                let id = self.graph.add_value(o.as_str(), None, ValueDef::Computed);
                if !o.is_empty() {
                    scope.insert(o.clone(), id);
                }
                id
            })
            .collect();
        self.graph.nodes.push(Node { name, op, inputs, outputs });
    }

    /// If, Loop, Scan or FlexAttention, with their subgraphs imported in a
    /// scope that sees the values around them.
    fn control_flow(
        &mut self,
        node: &'m NodeProto,
        opset: i64,
        scope: &Scope,
        opsets: &HashMap<String, i64>,
        caller_attrs: &HashMap<&str, &AttributeProto>,
        depth: usize,
    ) -> Result<Op, String> {
        use crate::ops::control::{If, Loop, Scan, SequenceMap};
        use crate::ops::flex_attention::FlexAttention;
        let mut graph = |name: &str| -> Result<Subgraph, String> {
            let g = node
                .attribute
                .iter()
                .find(|a| a.name() == name)
                .and_then(|a| a.g.as_ref())
                .ok_or_else(|| format!("attribute \"{name}\" (a graph) is required"))?;
            Ok(self.subgraph(g, scope, opsets, caller_attrs, depth))
        };
        match node.op_type() {
            "If" => Ok(Op::If(If { then_branch: graph("then_branch")?, else_branch: graph("else_branch")? })),
            "FlexAttention" => {
                let attrs = Attrs::new(&node.attribute);
                let mut optional = |name: &str| match attrs.has(name) {
                    true => graph(name).map(Some),
                    false => Ok(None),
                };
                let (score_mod, prob_mod) = (optional("score_mod")?, optional("prob_mod")?);
                Ok(Op::FlexAttention(FlexAttention {
                    scale: attrs.float("scale")?,
                    softmax_precision: attrs.dtype("softmax_precision")?,
                    score_mod,
                    prob_mod,
                }))
            }
            "Loop" => Ok(Op::Loop(Loop { body: graph("body")? })),
            "SequenceMap" => Ok(Op::SequenceMap(SequenceMap { body: graph("body")? })),
            _ => {
                let body = graph("body")?;
                let attrs = Attrs::new(&node.attribute);
                let n = attrs.int("num_scan_inputs")?.ok_or("attribute \"num_scan_inputs\" is required")?;
                let n = usize::try_from(n).map_err(|_| format!("attribute \"num_scan_inputs\" is {n}"))?;
                // Scan-8's first input is sequence_lens, not a state.
                let batched = opset < 9;
                let states = node.input.len().saturating_sub(n + batched as usize);
                let outputs = body.outputs.len().saturating_sub(states);
                let directions = if batched { "directions" } else { "scan_input_directions" };
                let list = |name: &str, len: usize| -> Result<Vec<i64>, String> {
                    let v = attrs.ints(name)?.unwrap_or_else(|| vec![0; len]);
                    if v.len() != len {
                        return Err(format!("attribute \"{name}\" has {} values, expected {len}", v.len()));
                    }
                    Ok(v)
                };
                let reverse = |v: Vec<i64>| v.iter().map(|&d| d != 0).collect();
                Ok(Op::Scan(Scan {
                    input_axes: list("scan_input_axes", n)?,
                    input_reverse: reverse(list(directions, n)?),
                    output_axes: list("scan_output_axes", outputs)?,
                    output_reverse: reverse(list("scan_output_directions", outputs)?),
                    num_scan_inputs: n,
                    batched,
                    body,
                }))
            }
        }
    }

    /// Imports a subgraph into the same value arena: its initializers and
    /// formal inputs join a copy of the outer scope, its nodes are kept
    /// apart for the control-flow operator.
    fn subgraph(
        &mut self,
        g: &'m GraphProto,
        outer: &Scope,
        opsets: &HashMap<String, i64>,
        caller_attrs: &HashMap<&str, &AttributeProto>,
        depth: usize,
    ) -> Subgraph {
        let mut scope = outer.clone();
        for init in &g.initializer {
            match tensor::tensor_from_proto(init) {
                Ok(t) => {
                    let id = self.const_value(init.name(), t);
                    scope.insert(init.name().to_string(), id);
                }
                Err(e) => self.errors.push(format!("subgraph \"{}\": initializer {e}", g.name())),
            }
        }
        self.sparse_initializers(g, &mut scope, &format!("subgraph \"{}\": ", g.name()));
        let inputs = g
            .input
            .iter()
            .map(|i| {
                let id = self.graph.add_value(i.name(), value_type(i).ok(), ValueDef::Computed);
                scope.insert(i.name().to_string(), id);
                id
            })
            .collect();
        let outer_nodes = std::mem::take(&mut self.graph.nodes);
        for n in &g.node {
            self.node(n, &mut scope, opsets, caller_attrs, depth);
        }
        let nodes = std::mem::replace(&mut self.graph.nodes, outer_nodes);
        let outputs = g
            .output
            .iter()
            .filter_map(|o| {
                let id = scope.get(o.name()).copied();
                if id.is_none() {
                    self.errors.push(format!("subgraph \"{}\": output \"{}\" is not computed", g.name(), o.name()));
                }
                id
            })
            .collect();
        Subgraph { inputs, nodes, outputs }
    }

    /// The node count and compile-clock limits, checked before each node.
    fn within_limits(&self, label: &str) -> Result<(), String> {
        let max = self.limits.max_nodes;
        if self.graph.nodes.len() >= max {
            return Err(format!(
                "{label}: the graph has more than {max} nodes once functions are inlined (raise the limit with --max-nodes)"
            ));
        }
        self.limits.check_time(label)
    }

    /// Defines the outputs of a node that could not be imported, so that
    /// its consumers report their own problems rather than this one again.
    fn define_unknown(&mut self, outputs: &[String], scope: &mut Scope) {
        for o in outputs.iter().filter(|o| !o.is_empty()) {
            let id = self.graph.add_value(o.as_str(), None, ValueDef::Computed);
            scope.insert(o.clone(), id);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn inline(
        &mut self,
        call: &'m NodeProto,
        f: &'m FunctionProto,
        inputs: Vec<Option<ValueId>>,
        attributes: &[AttributeProto],
        scope: &mut Scope,
        depth: usize,
        label: &str,
    ) {
        let max = self.limits.max_function_depth;
        if depth >= max {
            self.errors.push(format!(
                "{label}: model-local functions nest deeper than {max} (raise the limit with --max-function-depth)"
            ));
            self.define_unknown(&call.output, scope);
            return;
        }
        let mut inner = Scope::new();
        for (name, id) in f.input.iter().zip(inputs) {
            if let Some(id) = id {
                inner.insert(name.clone(), id);
            }
        }
        // Caller attributes override the function's declared defaults.
        let mut attrs: HashMap<&str, &AttributeProto> = f.attribute_proto.iter().map(|a| (a.name(), a)).collect();
        for a in attributes {
            attrs.insert(a.name(), a);
        }
        let opsets = opset_map(&f.opset_import);
        for node in &f.node {
            self.node(node, &mut inner, &opsets, &attrs, depth + 1);
        }
        for (out_name, call_out) in f.output.iter().zip(&call.output) {
            match inner.get(out_name) {
                Some(&id) if !call_out.is_empty() => {
                    scope.insert(call_out.clone(), id);
                }
                Some(_) => {}
                None => self.errors.push(format!("{label}: function output \"{out_name}\" is not computed")),
            }
        }
    }
}

/// The value of a Constant node, from whichever `value*` attribute it has.
fn constant_value(attrs: &Attrs, max_tensor_bytes: u64) -> Result<crate::ir::Tensor, String> {
    use crate::ir::Tensor;
    if let Some(t) = attrs.tensor("value")? {
        return Ok(t);
    }
    if let Some(v) = attrs.float("value_float")? {
        return Ok(Tensor::from_f32s(vec![], &[v]));
    }
    if let Some(v) = attrs.floats("value_floats")? {
        return Ok(Tensor::from_f32s(vec![v.len()], &v));
    }
    if let Some(v) = attrs.int("value_int")? {
        return Ok(Tensor::from_i64s(vec![], &[v]));
    }
    if let Some(v) = attrs.ints("value_ints")? {
        return Ok(Tensor::from_i64s(vec![v.len()], &v));
    }
    if let Some(v) = attrs.string("value_string")? {
        return Tensor::from_strings(vec![], vec![v.into_bytes()]).ok_or_else(|| "Constant: bad value_string".into());
    }
    if let Some(v) = attrs.strings("value_strings")? {
        let n = v.len();
        return Tensor::from_strings(vec![n], v.into_iter().map(String::into_bytes).collect())
            .ok_or_else(|| "Constant: bad value_strings".into());
    }
    if let Some(s) = attrs.sparse_tensor("sparse_value")? {
        return sparse::densify(s, max_tensor_bytes).map_err(|e| format!("attribute \"sparse_value\": {e}"));
    }
    Err("Constant: no value attribute".into())
}

/// `node`'s attributes, with references to the attributes of the function
/// call being inlined (`caller_attrs`) replaced by their values.
fn substitute_references(node: &NodeProto, caller_attrs: &HashMap<&str, &AttributeProto>) -> Vec<AttributeProto> {
    node.attribute
        .iter()
        .filter_map(|a| {
            if a.ref_attr_name().is_empty() {
                Some(a.clone())
            } else {
                caller_attrs.get(a.ref_attr_name()).map(|caller| AttributeProto {
                    name: a.name.clone(),
                    ref_attr_name: None,
                    ..(*caller).clone()
                })
            }
        })
        .collect()
}

/// Operators whose attributes hold subgraphs, imported by `control_flow`.
fn holds_subgraphs(domain: &str, op_type: &str) -> bool {
    match domain {
        "" => matches!(op_type, "If" | "Loop" | "Scan" | "SequenceMap"),
        "ai.onnx.preview" => op_type == "FlexAttention",
        _ => false,
    }
}
