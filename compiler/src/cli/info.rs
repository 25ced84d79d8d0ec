//! `onnxc check` and `onnxc info`.

use crate::{LimitArgs, ShapeArgs};
use onnxc::driver;
use onnxc::infer::Bindings;
use onnxc::limits::Limits;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

/// Validates the model as `compile` would, up to shape inference, and
/// lists every problem it finds (every unsupported operator at once).
/// Symbolic dims that `--dim`/`--shape` leave unbound are checked at 1 (or
/// the least size of their `--dim` range), and said so; shapes that need a binding `check` cannot guess (a sequence
/// input's element shapes, a map's entry count) or an input's value (a
/// Reshape whose shape is a graph input) are left unchecked, and said so:
/// none of these is an error in the model.
pub fn check(model_path: &Path, shapes: &ShapeArgs, limits: &LimitArgs) -> Result<ExitCode, String> {
    let limits = super::limits(limits)?;
    let mut bindings = super::bindings(shapes)?;
    let checked = driver::load(model_path, &limits).and_then(|model| driver::import(model_path, &model, &limits));
    let graph = match checked {
        Ok(graph) => graph,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let defaulted: Vec<(String, i64)> =
        free_dims(&graph, &bindings).into_iter().map(|s| (s.clone(), bindings.facts.get(&s).min)).collect();
    for (sym, least) in &defaulted {
        bindings.dims.insert(sym.clone(), usize::try_from(*least).unwrap_or(1));
    }
    let notes: Vec<String> = match driver::finish_mir(model_path, graph, &bindings, &limits, false) {
        Ok(_) => defaulted
            .iter()
            .map(|(s, least)| format!("dim \"{s}\" is unbound: checked at {s}={least} (give --dim {s}=N)"))
            .collect(),
        Err(driver::Error::Infer { errors, .. }) if !errors.unbound_inputs.is_empty() => {
            errors.messages.iter().map(|m| format!("{m}; shapes not checked")).collect()
        }
        Err(driver::Error::Infer { errors, .. }) if !errors.wanted_inputs.is_empty() => {
            vec![format!("shapes past this point depend on input values, not checked: {}", errors.messages.join("; "))]
        }
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    println!("{}: ok", model_path.display());
    for note in notes {
        println!("note: {note}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The symbolic dims of the graph's inputs that `bindings` leaves unbound.
fn free_dims(graph: &onnxc::ir::Graph, bindings: &Bindings) -> BTreeSet<String> {
    let unshaped = graph.inputs.iter().map(|&v| graph.value(v)).filter(|v| !bindings.shapes.contains_key(&v.name));
    let dims = unshaped.filter_map(|v| v.ty.as_ref()).flat_map(|ty| ty.shape.iter());
    dims.filter_map(|d| d.symbol().filter(|s| !bindings.dims.contains_key(*s)).map(str::to_string)).collect()
}

pub fn info(model_path: &Path, shapes: &ShapeArgs, limits: &LimitArgs) -> Result<ExitCode, String> {
    let limits = super::limits(limits)?;
    let model = driver::load(model_path, &limits).map_err(|e| e.to_string())?;
    println!("model: {}", model_path.display());
    println!("ir_version: {}", model.ir_version());
    for o in &model.opset_import {
        let d = if o.domain().is_empty() { "ai.onnx" } else { o.domain() };
        println!("opset: {d} {}", o.version());
    }
    if let Some(g) = &model.graph {
        let inits: std::collections::HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
        for i in g.input.iter().filter(|i| !inits.contains(i.name())) {
            println!("input: {}", describe(i));
        }
        for o in &g.output {
            println!("output: {}", describe(o));
        }
        let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
        for n in &g.node {
            *histogram.entry(n.op_type()).or_default() += 1;
        }
        println!("nodes: {}", g.node.len());
        for (op, n) in histogram {
            println!("  {op}: {n}");
        }
        let params: i64 = g.initializer.iter().map(|t| t.dims.iter().product::<i64>()).sum();
        println!("parameters (initializer elements): {params}");
    }
    let bindings = super::bindings(shapes)?;
    let graph = driver::import(model_path, &model, &limits).map_err(|e| e.to_string())?;
    for line in symbol_lines(&graph, &bindings) {
        println!("{line}");
    }
    if !free_dims(&graph, &bindings).is_empty() {
        for line in symbolic_outputs(graph.clone(), &bindings, &limits) {
            println!("{line}");
        }
    }
    match driver::finish_mir(model_path, graph, &bindings, &limits, false) {
        Ok(graph) => {
            println!("macs: {}", macs(&graph));
            match driver::plan(model_path, &graph) {
                Ok(plan) => {
                    match (plan.has_dynamic_values(), plan.sufficient_workspace_bytes()) {
                        (false, _) => println!("workspace bytes: {}", plan.workspace_bytes),
                        (true, Some(n)) => println!(
                            "workspace bytes: {n} ({} planned + up to {} for data-dependent values)",
                            plan.workspace_bytes,
                            n - plan.workspace_bytes
                        ),
                        (true, None) => println!(
                            "workspace bytes: {} + unbounded data-dependent values (give an alloc hook or more)",
                            plan.workspace_bytes
                        ),
                    }
                    footprint(&graph, &plan, &limits);
                }
                Err(e) => println!("workspace bytes: unknown ({e})"),
            }
        }
        Err(e) => println!("macs: unknown ({})", e.to_string().lines().next().unwrap_or("")),
    }
    Ok(ExitCode::SUCCESS)
}

/// Code and read-only data of the object for this machine, per op kind.
fn footprint(graph: &onnxc::ir::Graph, plan: &onnxc::plan::Plan, limits: &Limits) {
    let triple = target_lexicon::Triple::host();
    let f = match onnxc::emit::object(graph, plan, &triple, "model", false, limits) {
        Ok(object) => object.footprint,
        Err(e) => return println!("object: unknown ({e})"),
    };
    println!(
        "object ({triple}, kernels excluded): code {} bytes, read-only data {} bytes",
        f.code_bytes(),
        f.data_bytes()
    );
    let mut kinds: BTreeMap<&str, (usize, usize, usize, BTreeSet<&str>)> = BTreeMap::new();
    for (node, cost) in graph.nodes.iter().zip(&f.nodes) {
        let k = kinds.entry(node.op.name()).or_default();
        k.0 += 1;
        k.1 += cost.code;
        k.2 += cost.data;
        k.3.extend(&cost.kernels);
    }
    for (op, (n, code, data, kernels)) in kinds {
        let calls =
            if kernels.is_empty() { String::new() } else { format!(", calls {}", Vec::from_iter(kernels).join(" ")) };
        println!("  {op}: {n} nodes, code {code} bytes, data {data} bytes{calls}");
    }
    println!("  (entry, output copies, exit): code {} bytes, data {} bytes", f.other_code, f.other_data);
}

/// One line per symbolic dim of the graph's inputs: the axes that use
/// it and what `--dim` says of it (`symbol: seq, used by ids axis 1,
/// mask axis 1; 1..512`).
fn symbol_lines(graph: &onnxc::ir::Graph, bindings: &Bindings) -> Vec<String> {
    let mut uses: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for v in graph.inputs.iter().map(|&v| graph.value(v)) {
        for (axis, d) in v.ty.iter().flat_map(|t| t.shape.iter()).enumerate() {
            if let Some(s) = d.symbol() {
                uses.entry(s).or_default().push(format!("{} axis {axis}", v.name));
            }
        }
    }
    uses.into_iter()
        .map(|(s, axes)| {
            let fact = bindings.facts.get(s);
            let bound = match (bindings.dims.get(s), fact.max) {
                (Some(n), _) => format!("{n} (--dim)"),
                (None, Some(max)) if fact.multiple_of > 1 => format!("{}..{max}%{}", fact.min, fact.multiple_of),
                (None, Some(max)) => format!("{}..{max}", fact.min),
                (None, None) => "unbounded".to_string(),
            };
            format!("symbol: {s}, used by {}; {bound}", axes.join(", "))
        })
        .collect()
}

/// With symbols left unbound: each graph output's shape as expressions of
/// them (symbolic inference), or the node that first refused.
fn symbolic_outputs(mut graph: onnxc::ir::Graph, bindings: &Bindings, limits: &Limits) -> Vec<String> {
    let symbolic = Bindings { symbolic: true, ..bindings.clone() };
    match onnxc::infer::infer(&mut graph, &symbolic, limits) {
        Ok(()) => graph
            .outputs
            .iter()
            .map(|&v| {
                let value = graph.value(v);
                let ty = value.ty.as_ref().map_or("(no tensor type)".to_string(), ToString::to_string);
                format!("symbolic output: {} {ty}", value.name)
            })
            .collect(),
        Err(e) => vec![format!("symbolic outputs: unknown, {}", e.messages.first().map_or("", String::as_str))],
    }
}

fn describe(v: &onnx_proto::ValueInfoProto) -> String {
    match onnxc::import::port_type(v) {
        Ok(onnxc::import::Port::Tensor(t)) => format!("{} {t}", v.name()),
        Ok(onnxc::import::Port::Composite(t)) => format!("{} {t}", v.name()),
        Err(e) => e,
    }
}

/// Multiply-accumulates of the matrix and convolution nodes of the compiled
/// graph (after the rewrites: what the code computes).
fn macs(graph: &onnxc::ir::Graph) -> u64 {
    use onnxc::ops::Op;
    graph
        .nodes
        .iter()
        .map(|n| {
            let out = n.outputs.first().and_then(|&o| graph.concrete(o)).map(|(_, s)| s).unwrap_or_default();
            let w =
                n.inputs.get(1).copied().flatten().and_then(|v| graph.concrete(v)).map(|(_, s)| s).unwrap_or_default();
            let out_elems: u64 = out.iter().product::<usize>() as u64;
            match &n.op {
                // Each output element sums over one filter: C/group × kernel
                // (the logical shape when the weights were packed).
                Op::Conv(c) => {
                    out_elems * c.layout.packed_weights().unwrap_or(&w).iter().skip(1).product::<usize>() as u64
                }
                // K = weight elements / N for both [K,N] and [N,K] layouts.
                Op::MatMul(_) | Op::Gemm(_) => {
                    let n_cols = out.last().copied().unwrap_or(1).max(1) as u64;
                    out_elems * (w.iter().product::<usize>() as u64 / n_cols)
                }
                _ => 0,
            }
        })
        .sum()
}
