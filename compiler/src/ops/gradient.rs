//! Gradient (ai.onnx.preview.training, opset 1): the derivatives of one
//! value `y` of the graph with respect to the values `xs`, by reverse-mode
//! differentiation of the nodes between them, as if `y`'s gradient were
//! all ones.
//!
//! Nothing here lowers to code: like If, Gradient is expanded during
//! inference ([`expand`]), once the forward nodes and their shapes are
//! known, into the ordinary nodes of its backward pass: for each forward
//! node from `y` back to the `xs`, its inputs' gradients (Add, Sub, Mul,
//! Div, Neg, Identity), reduced back over the dims broadcasting added
//! (ReduceSum + Reshape), summed where a value feeds several nodes. An
//! `x` that `y` does not depend on gets a zero gradient. Any other forward
//! operator on the path is reported by name.

use super::elementwise::{Elementwise, Func};
use super::reduce::{Reduce, ReduceKind};
use super::shape_ops::{Reshape, ViewKind};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;
use crate::infer::expand::{Expansion, Failure};
use crate::ir::{DType, Node, Tensor, ValueId};
use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug)]
pub struct Gradient {
    pub xs: Vec<ValueId>,
    pub y: ValueId,
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let named = |cx: &NodeImport, name: &str, attr: &str| {
        cx.value_named(name).ok_or_else(|| format!("attribute \"{attr}\" names \"{name}\", which is not defined here"))
    };
    let xs_names = cx.attrs.strings("xs")?.ok_or("attribute \"xs\" is required")?;
    let y_name = cx.attrs.string("y")?.ok_or("attribute \"y\" is required")?;
    if xs_names.len() != cx.output_count {
        return Err(format!("{} outputs for {} values in \"xs\"", cx.output_count, xs_names.len()));
    }
    let xs = xs_names.iter().map(|n| named(cx, n, "xs")).collect::<Result<Vec<_>, _>>()?;
    let y = named(cx, &y_name, "y")?;
    Ok(Op::Gradient(Gradient { xs, y }))
}

impl Operator for Gradient {
    fn name(&self) -> &'static str {
        "Gradient"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("Gradient is expanded before inference".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("Gradient is expanded before code generation".into())
    }
}

/// Writes the backward pass of `op` (see the module docs).
pub(crate) fn expand(x: &mut Expansion, node: &Node, op: &Gradient) -> Result<(), Failure> {
    // The forward nodes that depend on an x, in schedule order, and of
    // those the ones `y` depends on.
    let mut depends: HashSet<ValueId> = op.xs.iter().copied().collect();
    let mut forward: Vec<Node> = Vec::new();
    for n in x.kept.iter() {
        if n.inputs.iter().flatten().any(|v| depends.contains(v)) {
            depends.extend(n.outputs.iter().copied());
            forward.push(n.clone());
        }
    }
    let mut needed: HashSet<ValueId> = HashSet::from([op.y]);
    let mut path: Vec<Node> = Vec::new();
    for n in forward.into_iter().rev() {
        if n.outputs.iter().any(|v| needed.contains(v)) {
            needed.extend(n.inputs.iter().flatten().filter(|v| depends.contains(v)));
            path.push(n);
        }
    }
    let (dtype, y_shape) = x.graph.concrete(op.y).ok_or(Failure::Message("\"y\" has no known shape".into()))?;
    let ones = ones(dtype, y_shape)?;
    let mut grads: HashMap<ValueId, ValueId> = HashMap::from([(op.y, x.constant(&node.name, ones))]);
    for n in &path {
        let Some(&g) = n.outputs.first().and_then(|o| grads.get(o)) else { continue };
        let func = match &n.op {
            Op::Elementwise(e) => e.func,
            other => return Err(unsupported(n, other)),
        };
        let input = |i: usize| n.inputs.get(i).copied().flatten();
        let (a, b) = (input(0), input(1));
        let mut contributions: Vec<(ValueId, ValueId)> = Vec::new();
        let name = format!("{}/d_{}", node.name, n.name);
        match (func, a, b) {
            (Func::Identity, Some(a), _) => contributions.push((a, g)),
            (Func::Neg, Some(a), _) => contributions.push((a, apply(x, &name, NEG, &[g])?)),
            (Func::Add, Some(a), Some(b)) => contributions.extend([(a, g), (b, g)]),
            (Func::Sub, Some(a), Some(b)) => contributions.extend([(a, g), (b, apply(x, &name, NEG, &[g])?)]),
            (Func::Mul, Some(a), Some(b)) => {
                contributions.push((a, apply(x, &format!("{name}/a"), MUL, &[g, b])?));
                contributions.push((b, apply(x, &format!("{name}/b"), MUL, &[g, a])?));
            }
            (Func::Div, Some(a), Some(b)) => {
                // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b.
                contributions.push((a, apply(x, &format!("{name}/a"), DIV, &[g, b])?));
                let quotient = n.outputs[0];
                let over_b = apply(x, &format!("{name}/q"), DIV, &[quotient, b])?;
                let scaled = apply(x, &format!("{name}/b"), MUL, &[g, over_b])?;
                contributions.push((b, apply(x, &format!("{name}/b"), NEG, &[scaled])?));
            }
            _ => return Err(unsupported(n, &n.op)),
        }
        for (v, contribution) in contributions {
            if !depends.contains(&v) {
                continue;
            }
            let fitted = unbroadcast(x, &name, contribution, v)?;
            let total = match grads.get(&v) {
                Some(&earlier) => apply(x, &format!("{name}/sum"), ADD, &[earlier, fitted])?,
                None => fitted,
            };
            grads.insert(v, total);
        }
    }
    let mut results = Vec::with_capacity(op.xs.len());
    for (k, &v) in op.xs.iter().enumerate() {
        results.push(match grads.get(&v) {
            Some(&g) => g,
            None => {
                let (dtype, shape) =
                    x.graph.concrete(v).ok_or_else(|| Failure::Message(format!("xs[{k}] has no known shape")))?;
                let zeros = Tensor::zeros(dtype, shape).ok_or(Failure::Message(format!("xs[{k}] is too large")))?;
                x.constant(&node.name, zeros)
            }
        });
    }
    x.forward(&node.name, &results, &node.outputs)
}

/// `y`'s gradient: ones of its type and shape (float or double).
fn ones(dtype: DType, shape: Vec<usize>) -> Result<Tensor, Failure> {
    let count = crate::ir::shape::element_count(&shape).ok_or(Failure::Message("\"y\" is too large".into()))?;
    let data = match dtype {
        DType::F32 => 1f32.to_le_bytes().repeat(count),
        DType::F64 => 1f64.to_le_bytes().repeat(count),
        other => {
            return Err(Failure::Message(format!(
                "\"y\" is {other:?}; Gradient differentiates float and double values"
            )))
        }
    };
    Tensor::from_bytes(dtype, shape, data).ok_or(Failure::Message("\"y\" is too large".into()))
}

fn unsupported(n: &Node, op: &Op) -> Failure {
    Failure::Message(format!(
        "no derivative for node \"{}\" ({}) on the path to \"y\"; Gradient differentiates Add, Sub, Mul, Div, Neg and Identity",
        n.name,
        op.name()
    ))
}

const ADD: Elementwise = Elementwise { op_type: "Add", func: Func::Add };
const MUL: Elementwise = Elementwise { op_type: "Mul", func: Func::Mul };
const DIV: Elementwise = Elementwise { op_type: "Div", func: Func::Div };
const NEG: Elementwise = Elementwise { op_type: "Neg", func: Func::Neg };

/// A new node `op(inputs)`; returns its output.
fn apply(x: &mut Expansion, name: &str, op: Elementwise, inputs: &[ValueId]) -> Result<ValueId, Failure> {
    let out = x.fresh(name);
    let inputs = inputs.iter().map(|&v| Some(v)).collect();
    x.run(vec![Node { name: name.into(), op: Op::Elementwise(op), inputs, outputs: vec![out] }])?;
    Ok(out)
}

/// `g` (a gradient with the broadcast shape) summed back to `v`'s shape.
fn unbroadcast(x: &mut Expansion, name: &str, g: ValueId, v: ValueId) -> Result<ValueId, Failure> {
    let shape_of = |x: &Expansion, v: ValueId| {
        x.graph
            .concrete(v)
            .map(|(_, s)| s)
            .ok_or_else(|| Failure::Message("a value on the path has no known shape".into()))
    };
    let (wide, narrow) = (shape_of(x, g)?, shape_of(x, v)?);
    if wide == narrow {
        return Ok(g);
    }
    let lead = wide.len().saturating_sub(narrow.len());
    let axes: Vec<i64> =
        (0..wide.len()).filter(|&d| d < lead || (narrow[d - lead] == 1 && wide[d] != 1)).map(|d| d as i64).collect();
    let axes_value = x.constant(name, Tensor::from_i64s(vec![axes.len()], &axes));
    let summed = x.fresh(&format!("{name}/reduced"));
    let reduce = Reduce { op_type: "ReduceSum", kind: ReduceKind::Sum, keepdims: true, noop_with_empty_axes: false };
    x.run(vec![Node {
        name: format!("{name}/reduce"),
        op: Op::Reduce(reduce),
        inputs: vec![Some(g), Some(axes_value)],
        outputs: vec![summed],
    }])?;
    let dims: Vec<i64> = narrow.iter().map(|&d| d as i64).collect();
    let target = x.constant(name, Tensor::from_i64s(vec![dims.len()], &dims));
    let out = x.fresh(&format!("{name}/fitted"));
    x.run(vec![Node {
        name: format!("{name}/reshape"),
        op: Op::Reshape(Reshape { kind: ViewKind::Reshape { allowzero: false } }),
        inputs: vec![Some(summed), Some(target)],
        outputs: vec![out],
    }])?;
    Ok(out)
}
