//! FlexAttention (ai.onnx.preview, opset 1): scaled dot-product attention
//! whose scores and probabilities pass through user subgraphs.
//!
//! `Y = (prob_mod(softmax(score_mod(Q·√s · (K·√s)ᵀ))) · V`, with `Q`, `K`,
//! `V` rank 4 (`[B, H, L|S, E]`), `s` the `scale` attribute or `1/√E`, and
//! `K`/`V` heads repeated when `Q` has a multiple of their head count
//! (grouped-query attention). The softmax runs in `softmax_precision` (f32
//! for f16/bf16 inputs by default); the result is cast back to `V`'s type.
//!
//! Nothing here lowers to code: like If, FlexAttention is expanded during
//! inference ([`expand`]) into MatMul, Transpose, Softmax, Mul, Cast and
//! the two subgraphs' nodes inlined on the scores and probabilities — each
//! then compiled as usual.

use super::control::{ControlFlow, Subgraph};
use super::elementwise::{Elementwise, Func};
use super::linalg::MatMul;
use super::shape_ops::{Expand, Reshape, Transpose, ViewKind};
use super::softmax::{Softmax, SoftmaxKind};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::infer::expand::{Expansion, Failure};
use crate::ir::attributes::Attribute;
use crate::ir::{DType, Node, Tensor, ValueId};
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct FlexAttention {
    pub scale: Option<f32>,
    /// The softmax's element type, when the model sets it.
    pub softmax_precision: Option<DType>,
    /// One input and one output each: the scores (then probabilities)
    /// `[B, H, L, S]`.
    pub score_mod: Option<Subgraph>,
    pub prob_mod: Option<Subgraph>,
}

impl ControlFlow for FlexAttention {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph> {
        self.score_mod.iter_mut().chain(self.prob_mod.iter_mut()).collect()
    }
    fn subgraphs(&self) -> Vec<(&'static str, &Subgraph)> {
        let score = self.score_mod.iter().map(|g| ("score_mod", g));
        score.chain(self.prob_mod.iter().map(|g| ("prob_mod", g))).collect()
    }
}

impl Operator for FlexAttention {
    fn name(&self) -> &'static str {
        "FlexAttention"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("FlexAttention is expanded before inference".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("FlexAttention is expanded before code generation".into())
    }
    fn attributes(&self) -> Vec<Attribute> {
        self.attributes_besides_subgraphs()
    }
}

/// `[B, H, L|S, E]` of input `i`.
fn dims4(x: &Expansion, node: &Node, i: usize) -> Result<(ValueId, DType, [usize; 4]), Failure> {
    let v = node.inputs.get(i).copied().flatten().ok_or_else(|| Failure::Message(format!("input {i} is required")))?;
    let (dtype, shape) =
        x.graph.concrete(v).ok_or_else(|| Failure::Message(format!("input {i} has no known shape")))?;
    let dims: [usize; 4] = shape
        .try_into()
        .map_err(|s: Vec<usize>| Failure::Message(format!("input {i} has rank {}, expected 4", s.len())))?;
    Ok((v, dtype, dims))
}

/// Nodes made for one FlexAttention, run through inference in batches.
struct Steps<'n> {
    name: &'n str,
    nodes: Vec<Node>,
}

impl Steps<'_> {
    /// Adds a node computing a fresh value from `inputs`; returns the value.
    fn add(&mut self, x: &mut Expansion, step: &str, op: Op, inputs: Vec<ValueId>) -> ValueId {
        let label = format!("{}/{step}", self.name);
        let out = x.fresh(&label);
        self.nodes.push(Node { name: label, op, inputs: inputs.into_iter().map(Some).collect(), outputs: vec![out] });
        out
    }

    /// Infers (and so folds) the nodes added so far.
    fn run(&mut self, x: &mut Expansion) -> Result<(), Failure> {
        x.run(std::mem::take(&mut self.nodes))
    }
}

fn elementwise(op_type: &'static str, func: Func) -> Op {
    Op::Elementwise(Elementwise { op_type, func })
}

fn reshape() -> Op {
    Op::Reshape(Reshape { kind: ViewKind::Reshape { allowzero: false } })
}

/// Expands `node` into ordinary operators (module comment).
pub(crate) fn expand(x: &mut Expansion, node: &Node, op: &FlexAttention) -> Result<(), Failure> {
    let (q, dtype, [b, heads, _, e]) = dims4(x, node, 0)?;
    let (k, k_type, [_, kv_heads, s, k_e]) = dims4(x, node, 1)?;
    let (v, v_type, [_, v_heads, v_s, v_e]) = dims4(x, node, 2)?;
    if !dtype.is_float() || k_type != dtype || v_type != dtype {
        return Err(Failure::Message(format!("Q, K, V are {dtype}, {k_type}, {v_type}: expected one float type")));
    }
    if k_e != e || v_heads != kv_heads || v_s != s {
        return Err(Failure::Message("K must match Q's head size, and V K's heads and sequence length".into()));
    }
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(Failure::Message(format!("Q has {heads} heads, not a multiple of K's {kv_heads}")));
    }
    let name = node.name.as_str();
    let mut steps = Steps { name, nodes: Vec::new() };
    let cast = |to: DType| elementwise("Cast", Func::cast_to(to));

    // Q and K each take √scale, computed in f32 and cast to their type.
    let scale = op.scale.unwrap_or(1.0 / (e as f32).sqrt());
    let root = x.constant(&format!("{name}/sqrt_scale"), Tensor::from_f32s(vec![], &[scale.sqrt()]));
    let root = if dtype == DType::F32 { root } else { steps.add(x, "sqrt_scale_cast", cast(dtype), vec![root]) };
    let q = steps.add(x, "q_scaled", elementwise("Mul", Func::Mul), vec![q, root]);
    let mut k = steps.add(x, "k_scaled", elementwise("Mul", Func::Mul), vec![k, root]);
    let mut v = v;
    if heads != kv_heads {
        // Each K/V head repeated heads/kv_heads times, next to itself.
        let repeat = heads / kv_heads;
        let shape = |x: &mut Expansion, dims: &[usize]| {
            let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            x.constant(&format!("{name}/shape"), Tensor::from_i64s(vec![dims.len()], &dims))
        };
        for (t, last) in [(&mut k, e), (&mut v, v_e)] {
            let split = shape(x, &[b, kv_heads, 1, s, last]);
            let wide = shape(x, &[b, kv_heads, repeat, s, last]);
            let merged = shape(x, &[b, heads, s, last]);
            let five = steps.add(x, "kv_split", reshape(), vec![*t, split]);
            let repeated = steps.add(x, "kv_repeat", Op::Expand(Expand), vec![five, wide]);
            *t = steps.add(x, "kv_heads", reshape(), vec![repeated, merged]);
        }
    }
    let kt = steps.add(x, "k_t", Op::Transpose(Transpose { perm: Some(vec![0, 1, 3, 2]) }), vec![k]);
    let mut scores = steps.add(x, "scores", Op::MatMul(MatMul::default()), vec![q, kt]);
    let compute = op.softmax_precision.unwrap_or(if dtype.size() < 4 { DType::F32 } else { dtype });
    if compute != dtype {
        scores = steps.add(x, "scores_cast", cast(compute), vec![scores]);
    }
    steps.run(x)?;
    if let Some(g) = &op.score_mod {
        scores = inline(x, g, scores, &format!("{name}/score_mod/"))?;
    }
    let softmax = Softmax { kind: SoftmaxKind::Softmax, axis: -1, coerce_2d: false };
    let mut probs = steps.add(x, "probs", Op::Softmax(softmax), vec![scores]);
    steps.run(x)?;
    if let Some(g) = &op.prob_mod {
        probs = inline(x, g, probs, &format!("{name}/prob_mod/"))?;
    }
    if compute != dtype {
        v = steps.add(x, "v_cast", cast(compute), vec![v]);
    }
    let mut y = steps.add(x, "y", Op::MatMul(MatMul::default()), vec![probs, v]);
    if compute != dtype {
        y = steps.add(x, "y_cast", cast(dtype), vec![y]);
    }
    steps.run(x)?;
    x.forward(name, &[y], &node.outputs)
}

/// A one-input, one-output subgraph applied to `value`.
fn inline(x: &mut Expansion, g: &Subgraph, value: ValueId, prefix: &str) -> Result<ValueId, Failure> {
    let ([input], [_]) = (g.inputs.as_slice(), g.outputs.as_slice()) else {
        return Err(Failure::Message(format!(
            "a score or probability subgraph has {} inputs and {} outputs, expected 1 and 1",
            g.inputs.len(),
            g.outputs.len()
        )));
    };
    let outputs = x.iterate(g, HashMap::from([(*input, value)]), prefix)?;
    Ok(outputs[0])
}
