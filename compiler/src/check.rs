//! Stage 2: the ONNX IR spec's structural rules on a loaded [`ModelProto`].
//!
//! Every violation is collected; [`check_model`] returns them all together.
//! Each error carries a `place` (`model`, `graph "main": node "conv_3" (Conv)`,
//! `function "com.foo::F"`, nested places for subgraphs) and a kind.
//!
//! Rules:
//! - model: `ir_version` set and in 3..=14; `opset_import` non-empty, each
//!   domain once (`""` and `"ai.onnx"` are the same; an exact repeat is
//!   accepted), each entry has a
//!   version; every node's domain is imported (functions use their own
//!   `opset_import`, or the model's when theirs is empty), unless the node
//!   calls a model-local function.
//! - graphs (main graph, subgraphs in `g`/`graphs` attributes, function
//!   bodies): names defined exactly once (inputs, initializers — which may
//!   repeat a graph input's name —, node outputs); subgraphs see the values
//!   defined before their node in enclosing graphs but may not redefine them;
//!   every non-empty node input defined before use; graph outputs defined.
//! - nodes: no duplicate attribute names; an attribute's `type`, when set,
//!   matches its payload (without `type` at most one payload is set);
//!   `ref_attr_name` only inside function bodies.
//! - main-graph inputs (except initializer-backed ones) and outputs have a
//!   type; tensor types have an element type, and inputs' a shape (an
//!   output's shape, when not declared, is what inference gives).
//! - functions: unique (domain, name, overload); no direct or indirect
//!   recursion.
//! - subgraphs nest at most `Limits::max_subgraph_depth` deep (deeper ones
//!   are reported and not walked).

use std::collections::{HashMap, HashSet};
use std::fmt;

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::tensor_proto::DataType;
use onnx_proto::type_proto;
use onnx_proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, ValueInfoProto,
};
use thiserror::Error;

use crate::limits::Limits;

/// Supported `ir_version` range.
pub const IR_VERSIONS: std::ops::RangeInclusive<i64> = 3..=14;

/// One rule violation: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckError {
    /// E.g. `model`, `graph "main": node "conv_3" (Conv)`, `function "F"`.
    pub place: String,
    pub kind: CheckErrorKind,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.kind)
    }
}

impl std::error::Error for CheckError {}

/// All violations found in a model, in discovery order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckErrors(pub Vec<CheckError>);

impl fmt::Display for CheckErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CheckErrors {}

/// What rule was broken.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CheckErrorKind {
    #[error("ir_version is not set")]
    NoIrVersion,
    #[error("ir_version {0} is not supported (expected 3 to 14)")]
    IrVersion(i64),
    #[error("opset_import is empty")]
    NoOpsetImport,
    #[error("opset_import lists domain {0:?} more than once, with different versions")]
    DuplicateOpset(String),
    #[error("opset_import entry for domain {0:?} has no version")]
    OpsetNoVersion(String),
    #[error("opset_import has no entry for domain {domain:?} used by {user}{}", more_nodes(*.others))]
    MissingOpset { domain: String, user: String, others: usize },
    #[error("has no graph")]
    NoGraph,
    #[error("{0} has an empty name")]
    EmptyName(String),
    #[error("value {name:?} is defined twice ({first}, {second})")]
    DefinedTwice { name: String, first: String, second: String },
    #[error("value {name:?} ({by}) shadows the outer-scope value defined by {outer}")]
    Shadows { name: String, by: String, outer: String },
    #[error("input {0:?} is undefined")]
    Undefined(String),
    #[error("input {input:?} is out of order: it is defined later by {definer}")]
    OutOfOrder { input: String, definer: String },
    #[error("output {0:?} is not defined")]
    OutputUndefined(String),
    #[error("attribute {0:?} appears more than once")]
    DuplicateAttribute(String),
    #[error("unknown attribute type code {0}")]
    UnknownAttributeType(i32),
    #[error("has type {ty} but carries {}", .payloads.join(", "))]
    AttributeTypeMismatch { ty: &'static str, payloads: Vec<&'static str> },
    #[error("has type {ty} but no {field} value")]
    AttributeMissingValue { ty: &'static str, field: &'static str },
    #[error("carries more than one value ({})", .0.join(", "))]
    AttributeMultipleValues(Vec<&'static str>),
    #[error("ref_attr_name {0:?} is only allowed inside functions")]
    RefAttrOutsideFunction(String),
    #[error("{kind} {name:?} has no type")]
    IoNoType { kind: &'static str, name: String },
    #[error("{kind} {name:?} has no element type")]
    IoNoElemType { kind: &'static str, name: String },
    #[error("{kind} {name:?} has unknown element type code {code}")]
    IoUnknownElemType { kind: &'static str, name: String, code: i32 },
    #[error("{kind} {name:?} has no shape (rank unknown)")]
    IoNoShape { kind: &'static str, name: String },
    #[error("{0} is defined more than once")]
    DuplicateFunction(String),
    #[error("function recursion: {0}")]
    FunctionRecursion(String),
    #[error("subgraph nested {depth} deep, more than the limit of {limit} (--max-subgraph-depth)")]
    SubgraphTooDeep { depth: usize, limit: usize },
}

fn more_nodes(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => " (and 1 more node)".into(),
        n => format!(" (and {n} more nodes)"),
    }
}

/// Checks `model` against the IR rules; returns every violation found.
pub fn check_model(model: &ModelProto, limits: &Limits) -> Result<(), CheckErrors> {
    let mut c = Checker::new(model, limits.max_subgraph_depth);
    c.model(model);
    if c.errors.is_empty() {
        Ok(())
    } else {
        Err(CheckErrors(c.errors))
    }
}

/// `""` and `"ai.onnx"` are the same (default) domain.
fn norm_domain(d: &str) -> &str {
    if d == "ai.onnx" {
        ""
    } else {
        d
    }
}

fn quoted(name: &str, index: usize) -> String {
    if name.is_empty() {
        format!("#{index}")
    } else {
        format!("{name:?}")
    }
}

/// `node "conv_3" (Conv)`; `node #4 (Conv)` when unnamed.
fn node_label(n: &NodeProto, index: usize) -> String {
    format!("node {} ({})", quoted(n.name(), index), n.op_type())
}

/// `node "conv_3"`; `node #4` when unnamed.
fn node_short(n: &NodeProto, index: usize) -> String {
    format!("node {}", quoted(n.name(), index))
}

/// `function "F"`, `function "com.foo::F"`, `function "F" overload "x"`.
fn function_label(f: &FunctionProto) -> String {
    let name = if f.domain().is_empty() { f.name().to_string() } else { format!("{}::{}", f.domain(), f.name()) };
    if f.overload().is_empty() {
        format!("function {name:?}")
    } else {
        format!("function {name:?} overload {:?}", f.overload())
    }
}

type FnKey = (String, String, String);

fn function_key(f: &FunctionProto) -> FnKey {
    (norm_domain(f.domain()).to_string(), f.name().to_string(), f.overload().to_string())
}

fn call_key(n: &NodeProto) -> FnKey {
    (norm_domain(n.domain()).to_string(), n.op_type().to_string(), n.overload().to_string())
}

/// Values of one graph level.
struct Level {
    /// `graph "main"`, used when an inner graph shadows one of these values.
    graph: String,
    /// Defined so far: name → who defined it.
    defined: HashMap<String, String>,
    /// Defined anywhere in this graph by a node: name → first definer.
    by_node: HashMap<String, String>,
}

/// Which opsets the nodes being checked may use.
struct OpsetCtx<'a> {
    domains: &'a HashSet<String>,
    /// `model` or a function label: where missing imports are reported.
    owner: &'a str,
    /// Place of the top-level graph or function body; node paths in
    /// missing-opset messages are given relative to it.
    root: &'a str,
    in_function: bool,
}

struct MissingOpset {
    owner: String,
    domain: String,
    user: String,
    others: usize,
}

struct Checker {
    errors: Vec<CheckError>,
    functions: HashMap<FnKey, usize>,
    missing: Vec<MissingOpset>,
    max_subgraph_depth: usize,
}

impl Checker {
    fn new(model: &ModelProto, max_subgraph_depth: usize) -> Checker {
        let mut functions = HashMap::new();
        for (i, f) in model.functions.iter().enumerate() {
            functions.entry(function_key(f)).or_insert(i);
        }
        Checker { errors: Vec::new(), functions, missing: Vec::new(), max_subgraph_depth }
    }

    fn push(&mut self, place: impl Into<String>, kind: CheckErrorKind) {
        self.errors.push(CheckError { place: place.into(), kind });
    }

    fn model(&mut self, m: &ModelProto) {
        match m.ir_version {
            None => self.push("model", CheckErrorKind::NoIrVersion),
            Some(v) if !IR_VERSIONS.contains(&v) => self.push("model", CheckErrorKind::IrVersion(v)),
            Some(_) => {}
        }
        if m.opset_import.is_empty() {
            self.push("model", CheckErrorKind::NoOpsetImport);
        }
        let domains = self.opsets(&m.opset_import, "model");

        // Functions: unique keys.
        let mut seen: HashSet<FnKey> = HashSet::new();
        for f in &m.functions {
            if !seen.insert(function_key(f)) {
                self.push("model", CheckErrorKind::DuplicateFunction(function_label(f)));
            }
        }

        match &m.graph {
            None => self.push("model", CheckErrorKind::NoGraph),
            Some(g) => {
                let place = format!("graph {:?}", g.name());
                let ctx = OpsetCtx { domains: &domains, owner: "model", root: &place, in_function: false };
                let mut scopes = Vec::new();
                self.graph(g, &place, &mut scopes, &ctx, true);
            }
        }

        for f in &m.functions {
            self.function(f, &domains);
        }
        self.recursion(m);

        for miss in std::mem::take(&mut self.missing) {
            self.push(
                miss.owner,
                CheckErrorKind::MissingOpset { domain: miss.domain, user: miss.user, others: miss.others },
            );
        }
    }

    /// Checks an opset_import list; returns the (normalized) domains it imports.
    fn opsets(&mut self, list: &[OperatorSetIdProto], owner: &str) -> HashSet<String> {
        // An exact repeat (same domain, same version) says nothing new:
        // skl2onnx writes them and onnx's checker accepts them.
        let mut versions = HashMap::new();
        for o in list {
            let d = norm_domain(o.domain()).to_string();
            if o.version.is_none() {
                self.push(owner, CheckErrorKind::OpsetNoVersion(o.domain().to_string()));
            }
            if versions.insert(d.clone(), o.version).is_some_and(|v| v != o.version) {
                self.push(owner, CheckErrorKind::DuplicateOpset(d));
            }
        }
        versions.into_keys().collect()
    }

    fn function(&mut self, f: &FunctionProto, model_domains: &HashSet<String>) {
        let label = function_label(f);
        let own;
        let domains = if f.opset_import.is_empty() {
            model_domains
        } else {
            own = self.opsets(&f.opset_import, &label);
            &own
        };
        let ctx = OpsetCtx { domains, owner: &label, root: &label, in_function: true };
        let mut scopes = vec![Level { graph: label.clone(), defined: HashMap::new(), by_node: HashMap::new() }];
        for a in &f.attribute_proto {
            let mut none = Vec::new();
            self.attribute(a, &format!("{label}: default"), &mut none, &ctx);
        }
        for (i, name) in f.input.iter().enumerate() {
            self.define(&mut scopes, name, "function input", &label, i);
        }
        self.nodes(&f.node, &label, &mut scopes, &ctx);
        for (i, name) in f.output.iter().enumerate() {
            self.use_output(&scopes, name, &label, i);
        }
    }

    /// Defines `name` in the innermost level, reporting empties, duplicates
    /// and shadowing. `what` is e.g. `graph input`, `node "a"`.
    fn define(&mut self, scopes: &mut [Level], name: &str, what: &str, place: &str, index: usize) {
        if name.is_empty() {
            self.push(place, CheckErrorKind::EmptyName(format!("{what} #{index}")));
            return;
        }
        let Some((inner, outer)) = scopes.split_last_mut() else {
            return;
        };
        if let Some(first) = inner.defined.get(name) {
            let kind =
                CheckErrorKind::DefinedTwice { name: name.to_string(), first: first.clone(), second: what.to_string() };
            self.push(place, kind);
            return;
        }
        if let Some((lvl, who)) = outer.iter().rev().find_map(|l| l.defined.get(name).map(|w| (l, w))) {
            let kind = CheckErrorKind::Shadows {
                name: name.to_string(),
                by: what.to_string(),
                outer: format!("{who} in {}", lvl.graph),
            };
            self.push(place, kind);
        }
        inner.defined.insert(name.to_string(), what.to_string());
    }

    fn visible(scopes: &[Level], name: &str) -> bool {
        scopes.iter().any(|l| l.defined.contains_key(name))
    }

    fn use_output(&mut self, scopes: &[Level], name: &str, place: &str, index: usize) {
        if name.is_empty() {
            self.push(place, CheckErrorKind::EmptyName(format!("output #{index}")));
        } else if !Self::visible(scopes, name) {
            self.push(place, CheckErrorKind::OutputUndefined(name.to_string()));
        }
    }

    fn graph(&mut self, g: &GraphProto, place: &str, scopes: &mut Vec<Level>, ctx: &OpsetCtx, main: bool) {
        // The enclosing graphs (or function body) are the subgraph's depth.
        let depth = scopes.len();
        if depth > self.max_subgraph_depth {
            self.push(place, CheckErrorKind::SubgraphTooDeep { depth, limit: self.max_subgraph_depth });
            return;
        }
        scopes.push(Level { graph: place.to_string(), defined: HashMap::new(), by_node: HashMap::new() });
        let input_names: HashSet<&str> = g.input.iter().map(|v| v.name()).collect();
        let mut init_names: HashSet<&str> = HashSet::new();
        for (i, v) in g.input.iter().enumerate() {
            self.define(scopes, v.name(), "graph input", place, i);
        }
        let sparse_names =
            g.sparse_initializer.iter().map(|s| (s.values.as_ref().map_or("", |v| v.name()), "sparse initializer"));
        let inits = g.initializer.iter().map(|t| (t.name(), "initializer")).chain(sparse_names);
        for (i, (name, what)) in inits.enumerate() {
            let first_init = init_names.insert(name);
            // A defaulted input: an initializer named like a graph input.
            if first_init && !name.is_empty() && input_names.contains(name) {
                continue;
            }
            self.define(scopes, name, what, place, i);
        }
        if main {
            for v in &g.input {
                if !init_names.contains(v.name()) {
                    self.io_type(v, "input", place);
                }
            }
        }
        self.nodes(&g.node, place, scopes, ctx);
        for (i, v) in g.output.iter().enumerate() {
            self.use_output(scopes, v.name(), place, i);
            if main && !v.name().is_empty() {
                self.io_type(v, "output", place);
            }
        }
        scopes.pop();
    }

    fn nodes(&mut self, nodes: &[NodeProto], place: &str, scopes: &mut Vec<Level>, ctx: &OpsetCtx) {
        if let Some(level) = scopes.last_mut() {
            for (i, n) in nodes.iter().enumerate() {
                for out in n.output.iter().filter(|o| !o.is_empty()) {
                    level.by_node.entry(out.clone()).or_insert_with(|| node_short(n, i));
                }
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            let np = format!("{place}: {}", node_label(n, i));
            self.node_opset(n, i, place, ctx);
            for input in n.input.iter().filter(|s| !s.is_empty()) {
                if Self::visible(scopes, input) {
                    continue;
                }
                let later = scopes.iter().rev().find_map(|l| l.by_node.get(input));
                let kind = match later {
                    Some(definer) => CheckErrorKind::OutOfOrder { input: input.clone(), definer: definer.clone() },
                    None => CheckErrorKind::Undefined(input.clone()),
                };
                self.push(np.clone(), kind);
            }
            let mut names: HashSet<&str> = HashSet::new();
            for a in &n.attribute {
                if !names.insert(a.name()) {
                    self.push(np.clone(), CheckErrorKind::DuplicateAttribute(a.name().to_string()));
                }
                self.attribute(a, &np, scopes, ctx);
            }
            let who = node_short(n, i);
            for (k, out) in n.output.iter().enumerate() {
                if !out.is_empty() {
                    self.define(scopes, out, &who, place, k);
                }
            }
        }
    }

    fn node_opset(&mut self, n: &NodeProto, index: usize, place: &str, ctx: &OpsetCtx) {
        let domain = norm_domain(n.domain());
        if ctx.domains.contains(domain) || self.functions.contains_key(&call_key(n)) {
            return;
        }
        if let Some(m) = self.missing.iter_mut().find(|m| m.owner == ctx.owner && m.domain == domain) {
            m.others += 1;
            return;
        }
        // Named relative to the main graph or function body.
        let label = node_label(n, index);
        let user = match place.strip_prefix(ctx.root) {
            Some("") => label,
            Some(rest) => format!("{}: {label}", rest.trim_start_matches(": ")),
            None => format!("{place}: {label}"),
        };
        self.missing.push(MissingOpset { owner: ctx.owner.to_string(), domain: domain.to_string(), user, others: 0 });
    }

    fn attribute(&mut self, a: &AttributeProto, np: &str, scopes: &mut Vec<Level>, ctx: &OpsetCtx) {
        let ap = format!("{np}: attribute {:?}", a.name());
        if a.name().is_empty() {
            self.push(np, CheckErrorKind::EmptyName("attribute".into()));
        }
        if let Some(r) = &a.ref_attr_name {
            if !ctx.in_function {
                self.push(ap.clone(), CheckErrorKind::RefAttrOutsideFunction(r.clone()));
            }
        }
        let payloads = payloads(a);
        let ty = a.r#type.unwrap_or(0);
        if ty != 0 && a.ref_attr_name.is_none() {
            match AttributeType::try_from(ty) {
                Err(_) => self.push(ap.clone(), CheckErrorKind::UnknownAttributeType(ty)),
                Ok(t) => {
                    let (field, singular) = payload_of(t);
                    let others: Vec<&'static str> = payloads.iter().copied().filter(|p| *p != field).collect();
                    if !others.is_empty() {
                        self.push(
                            ap.clone(),
                            CheckErrorKind::AttributeTypeMismatch { ty: t.as_str_name(), payloads: others },
                        );
                    } else if singular && !payloads.contains(&field) {
                        self.push(ap.clone(), CheckErrorKind::AttributeMissingValue { ty: t.as_str_name(), field });
                    }
                }
            }
        } else if payloads.len() > 1 {
            self.push(ap.clone(), CheckErrorKind::AttributeMultipleValues(payloads));
        }
        if let Some(g) = &a.g {
            let gp = format!("{ap}: graph {:?}", g.name());
            self.graph(g, &gp, scopes, ctx, false);
        }
        for (i, g) in a.graphs.iter().enumerate() {
            let gp = format!("{ap}: graph {}", quoted(g.name(), i));
            self.graph(g, &gp, scopes, ctx, false);
        }
    }

    fn io_type(&mut self, v: &ValueInfoProto, kind: &'static str, place: &str) {
        let name = v.name().to_string();
        let Some(t) = &v.r#type else {
            self.push(place, CheckErrorKind::IoNoType { kind, name });
            return;
        };
        let (elem, shape) = match &t.value {
            None => {
                self.push(place, CheckErrorKind::IoNoType { kind, name });
                return;
            }
            Some(type_proto::Value::TensorType(tt)) => (tt.elem_type, tt.shape.is_some()),
            Some(type_proto::Value::SparseTensorType(tt)) => (tt.elem_type, tt.shape.is_some()),
            Some(_) => return,
        };
        match elem.unwrap_or(0) {
            0 => self.push(place, CheckErrorKind::IoNoElemType { kind, name: name.clone() }),
            code if DataType::try_from(code).is_err() => {
                self.push(place, CheckErrorKind::IoUnknownElemType { kind, name: name.clone(), code })
            }
            _ => {}
        }
        if !shape && kind == "input" {
            self.push(place, CheckErrorKind::IoNoShape { kind, name });
        }
    }

    /// Reports each cycle in the function call graph once.
    fn recursion(&mut self, m: &ModelProto) {
        let n = m.functions.len();
        let calls: Vec<Vec<usize>> = m
            .functions
            .iter()
            .map(|f| {
                let mut out = Vec::new();
                collect_calls(&f.node, &self.functions, &mut out);
                out.sort_unstable();
                out.dedup();
                out
            })
            .collect();
        // 0 = unvisited, 1 = on stack, 2 = done. Iterative DFS.
        let mut state = vec![0u8; n];
        for root in 0..n {
            if state.get(root) != Some(&0) {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            if let Some(s) = state.get_mut(root) {
                *s = 1;
            }
            while let Some(&mut (u, ref mut next)) = stack.last_mut() {
                let callee = calls.get(u).and_then(|c| c.get(*next)).copied();
                *next += 1;
                match callee {
                    None => {
                        if let Some(s) = state.get_mut(u) {
                            *s = 2;
                        }
                        stack.pop();
                    }
                    Some(v) => match state.get(v) {
                        Some(0) => {
                            if let Some(s) = state.get_mut(v) {
                                *s = 1;
                            }
                            stack.push((v, 0));
                        }
                        Some(1) => {
                            let start = stack.iter().position(|&(w, _)| w == v).unwrap_or(0);
                            let label =
                                |i: usize| m.functions.get(i).map_or_else(String::new, |f| f.name().to_string());
                            let mut path: Vec<String> = stack.iter().skip(start).map(|&(w, _)| label(w)).collect();
                            path.push(label(v));
                            let head = m.functions.get(v).map(function_label).unwrap_or_default();
                            let text = format!("{head} calls itself ({})", path.join(" -> "));
                            self.push("model", CheckErrorKind::FunctionRecursion(text));
                        }
                        _ => {}
                    },
                }
            }
        }
    }
}

/// Model-local functions called by `nodes`, including inside subgraphs.
fn collect_calls(nodes: &[NodeProto], functions: &HashMap<FnKey, usize>, out: &mut Vec<usize>) {
    for n in nodes {
        if let Some(&i) = functions.get(&call_key(n)) {
            out.push(i);
        }
        for a in &n.attribute {
            for g in a.g.iter().chain(a.graphs.iter()) {
                collect_calls(&g.node, functions, out);
            }
        }
    }
}

/// Names of the payload fields set in `a`.
fn payloads(a: &AttributeProto) -> Vec<&'static str> {
    let mut p = Vec::new();
    let mut add = |set: bool, name: &'static str| {
        if set {
            p.push(name);
        }
    };
    add(a.f.is_some(), "f");
    add(a.i.is_some(), "i");
    add(a.s.is_some(), "s");
    add(a.t.is_some(), "t");
    add(a.g.is_some(), "g");
    add(a.sparse_tensor.is_some(), "sparse_tensor");
    add(a.tp.is_some(), "tp");
    add(!a.floats.is_empty(), "floats");
    add(!a.ints.is_empty(), "ints");
    add(!a.strings.is_empty(), "strings");
    add(!a.tensors.is_empty(), "tensors");
    add(!a.graphs.is_empty(), "graphs");
    add(!a.sparse_tensors.is_empty(), "sparse_tensors");
    add(!a.type_protos.is_empty(), "type_protos");
    p
}

/// The payload field for an attribute type, and whether it must be set
/// (lists may be empty).
fn payload_of(t: AttributeType) -> (&'static str, bool) {
    use AttributeType as A;
    match t {
        A::Undefined => ("", false),
        A::Float => ("f", true),
        A::Int => ("i", true),
        A::String => ("s", true),
        A::Tensor => ("t", true),
        A::Graph => ("g", true),
        A::SparseTensor => ("sparse_tensor", true),
        A::TypeProto => ("tp", true),
        A::Floats => ("floats", false),
        A::Ints => ("ints", false),
        A::Strings => ("strings", false),
        A::Tensors => ("tensors", false),
        A::Graphs => ("graphs", false),
        A::SparseTensors => ("sparse_tensors", false),
        A::TypeProtos => ("type_protos", false),
    }
}

#[cfg(test)]
mod tests;
