//! Relu, LeakyRelu, Clip, Sigmoid, HardSigmoid, HardSwish, Tanh and SiLU
//! folded into the convolution that feeds them.
//!
//! The kernel applies the activation to each output block right after its
//! GEMM, while it is still in cache, instead of a separate pass over the
//! whole tensor. Applies to f32/f64 Conv whose result is read by the
//! activation alone (not a graph output) and, for Clip, whose bounds are
//! constants; the kernel compares exactly as the separate operators do,
//! and computes the others with their arithmetic and libm functions.
//!
//! SiLU is two nodes, `Mul(c, Sigmoid(c))` (either operand order; how
//! PyTorch exports EfficientNet's and YOLO's activation): the conv output
//! `c` then has exactly those two readers and the sigmoid the Mul alone.
//! Unfused, the conv's output was written, read back for the elementwise
//! program and written again.

use crate::ir::{DType, Graph, ValueId};
use crate::ops::elementwise::{Activation, Func};
use crate::ops::Op;
use std::collections::HashMap;

pub fn fuse_conv_activation(graph: &mut Graph) {
    let uses = super::use_counts(graph);
    let producer = super::producers(graph);
    let mut removed = vec![false; graph.nodes.len()];
    for last in 0..graph.nodes.len() {
        let Some(found) = silu_at(graph, last, &uses, &producer).or_else(|| single_at(graph, last)) else { continue };
        let Some(&conv_index) = producer.get(&found.conv_out) else { continue };
        let float = graph.concrete(found.conv_out).is_some_and(|(d, _)| matches!(d, DType::F32 | DType::F64));
        let Op::Conv(conv) = &graph.nodes[conv_index].op else { continue };
        let readers = 1 + usize::from(found.sigmoid.is_some());
        if !float
            || conv.fused.activation.is_some()
            || uses.get(&found.conv_out) != Some(&readers)
            || removed[conv_index]
        {
            continue;
        }
        let y = graph.nodes[last].outputs[0];
        let conv = &mut graph.nodes[conv_index];
        if let Op::Conv(c) = &mut conv.op {
            c.fused.activation = Some(found.activation);
        }
        conv.outputs = vec![y];
        removed[last] = true;
        if let Some(sigmoid) = found.sigmoid {
            removed[sigmoid] = true;
        }
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

/// An activation ending at a node: what it reads, its epilogue form, and
/// the node before it that it replaces too (SiLU's Sigmoid).
struct Found {
    conv_out: ValueId,
    activation: Activation,
    sigmoid: Option<usize>,
}

/// Node `index` as a one-node activation of its first input.
fn single_at(graph: &Graph, index: usize) -> Option<Found> {
    let node = &graph.nodes[index];
    let conv_out = node.inputs.first().copied().flatten()?;
    let activation = activation_of(graph, &node.op, &node.inputs)?;
    Some(Found { conv_out, activation, sigmoid: None })
}

/// Node `index` as the Mul of SiLU, `Mul(c, Sigmoid(c))` or
/// `Mul(Sigmoid(c), c)`, its Sigmoid read by the Mul alone.
fn silu_at(
    graph: &Graph,
    index: usize,
    uses: &HashMap<ValueId, usize>,
    producer: &HashMap<ValueId, usize>,
) -> Option<Found> {
    let node = &graph.nodes[index];
    let Op::Elementwise(e) = &node.op else { return None };
    let [Some(a), Some(b)] = node.inputs[..] else { return None };
    if e.func != Func::Mul {
        return None;
    }
    [(a, b), (b, a)].into_iter().find_map(|(conv_out, gate)| {
        let sigmoid = *producer.get(&gate)?;
        let sig = &graph.nodes[sigmoid];
        let is_sigmoid = matches!(&sig.op, Op::Elementwise(s) if s.func == Func::Sigmoid);
        let sigmoid_of_conv = is_sigmoid && sig.inputs[..] == [Some(conv_out)] && uses.get(&gate) == Some(&1);
        sigmoid_of_conv.then_some(Found { conv_out, activation: Activation::SILU, sigmoid: Some(sigmoid) })
    })
}

/// The epilogue form of an activation node, if kernels have one (Clip's
/// only with constant bounds).
fn activation_of(graph: &Graph, op: &Op, inputs: &[Option<ValueId>]) -> Option<Activation> {
    let Op::Elementwise(e) = op else { return None };
    let bounds = if e.func == Func::Clip {
        let bound = |i: usize, default: f64| match inputs.get(i).copied().flatten() {
            None => Some(default),
            Some(v) => graph.const_value(v).filter(|t| t.len() == 1).map(|t| t.get_f64(0)),
        };
        Some((bound(1, f64::NEG_INFINITY)?, bound(2, f64::INFINITY)?))
    } else {
        None
    };
    Activation::new(e.func, bounds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, Tensor, ValueDef};
    use crate::ops::elementwise::Elementwise;
    use crate::passes::test_graph::{assert_same_f32s, conv_1x1, push, run_bytes, value};

    /// x → Conv → Relu → y, plus a second reader of the conv output when `shared`.
    fn graph(shared: bool) -> Graph {
        graph_with(shared, Func::Relu)
    }

    /// x → Conv → `func` → y, plus a second reader of the conv output when `shared`.
    fn graph_with(shared: bool, func: Func) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 1, 2, 2], ValueDef::Input(0));
        let c = conv_1x1(&mut g, x, 1.5);
        let y = value(&mut g, "y", &[1, 1, 2, 2], ValueDef::Computed);
        let act = Elementwise { op_type: "Activation", func };
        g.nodes.push(Node { name: "act".into(), op: Op::Elementwise(act), inputs: vec![Some(c)], outputs: vec![y] });
        g.inputs.push(x);
        g.outputs.push(y);
        if shared {
            g.outputs.push(c);
        }
        g
    }

    #[test]
    fn relu_after_conv_moves_into_its_epilogue() {
        let mut g = graph(false);
        fuse_conv_activation(&mut g);
        assert_eq!(g.nodes.len(), 1);
        let Op::Conv(conv) = &g.nodes[0].op else { panic!("not a conv: {:?}", g.nodes[0].op) };
        assert_eq!(conv.fused.activation, Activation::new(Func::Relu, None));
        assert_eq!(g.nodes[0].outputs, g.outputs);
    }

    #[test]
    fn sigmoid_hard_sigmoid_hard_swish_and_tanh_run_in_the_epilogue_with_the_same_bits() {
        let cases = [Func::Sigmoid, Func::HardSigmoid { alpha: 0.3, beta: 0.4 }, Func::HardSwish, Func::Tanh];
        for func in cases {
            let g = graph_with(false, func);
            let mut fused = g.clone();
            fuse_conv_activation(&mut fused);
            assert_eq!(fused.nodes.len(), 1, "{func:?}");
            let Op::Conv(conv) = &fused.nodes[0].op else { panic!("not a conv: {:?}", fused.nodes[0].op) };
            assert_eq!(conv.fused.activation.map(|a| a.func), Some(func));
            for x in [[-3.7f32, -0.4, 0.9, 2.6], [-1.9, 0.0, 1.3, f32::NAN]] {
                let inputs = [Tensor::from_f32s(vec![1, 1, 2, 2], &x)];
                for portable in [false, true] {
                    let (want, got) = (run_bytes(&g, &inputs, portable), run_bytes(&fused, &inputs, portable));
                    assert_same_f32s(&got, &want, &format!("{func:?}, portable: {portable}"));
                }
            }
        }
    }

    #[test]
    fn a_conv_output_read_elsewhere_is_left_alone() {
        let mut g = graph(true);
        fuse_conv_activation(&mut g);
        assert_eq!(g.nodes.len(), 2);
    }

    /// How a SiLU-like graph differs from `Mul(c, Sigmoid(c))`.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Silu {
        /// `Mul(c, s)` (`swapped`: `Mul(s, c)`), nothing else reading.
        Exact { swapped: bool },
        /// The conv output `c` is a graph output too.
        ConvShared,
        /// The sigmoid `s` is a graph output too.
        SigmoidShared,
        /// `Mul(x, Sigmoid(c))`: the gate of another value.
        OtherFactor,
    }

    /// x → Conv → c; s = Sigmoid(c); y = Mul(c, s) with `variant`'s change.
    fn silu_graph(variant: Silu) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 1, 2, 2], ValueDef::Input(0));
        let c = conv_1x1(&mut g, x, 1.5);
        let (s, y) = (
            value(&mut g, "s", &[1, 1, 2, 2], ValueDef::Computed),
            value(&mut g, "y", &[1, 1, 2, 2], ValueDef::Computed),
        );
        push(&mut g, "sigmoid", Elementwise { op_type: "Sigmoid", func: Func::Sigmoid }, &[c], s);
        let factors = match variant {
            Silu::Exact { swapped: true } => [s, c],
            Silu::OtherFactor => [x, s],
            _ => [c, s],
        };
        push(&mut g, "mul", Elementwise { op_type: "Mul", func: Func::Mul }, &factors, y);
        g.inputs.push(x);
        g.outputs.push(y);
        match variant {
            Silu::ConvShared => g.outputs.push(c),
            Silu::SigmoidShared => g.outputs.push(s),
            _ => {}
        }
        g
    }

    #[test]
    fn silu_after_conv_runs_in_the_epilogue_with_the_same_bits() {
        for swapped in [false, true] {
            let g = silu_graph(Silu::Exact { swapped });
            let mut fused = g.clone();
            fuse_conv_activation(&mut fused);
            assert_eq!(fused.nodes.len(), 1, "swapped: {swapped}");
            let Op::Conv(conv) = &fused.nodes[0].op else { panic!("not a conv: {:?}", fused.nodes[0].op) };
            assert_eq!(conv.fused.activation, Some(Activation::SILU));
            assert_eq!(fused.nodes[0].outputs, fused.outputs);
            for x in [
                [-70.0f32, -3.7, -0.4, 0.9],
                [2.6, -0.0, 60.0, f32::NAN],
                [f32::INFINITY, f32::NEG_INFINITY, 1e-30, -9.0],
            ] {
                let inputs = [Tensor::from_f32s(vec![1, 1, 2, 2], &x)];
                for portable in [false, true] {
                    let (want, got) = (run_bytes(&g, &inputs, portable), run_bytes(&fused, &inputs, portable));
                    assert_same_f32s(&got, &want, &format!("swapped: {swapped}, portable: {portable}"));
                }
            }
        }
    }

    /// (Gating another value, the Sigmoid alone still fuses.)
    #[test]
    fn a_silu_whose_parts_are_read_elsewhere_or_gate_another_value_is_left_alone() {
        for variant in [Silu::ConvShared, Silu::SigmoidShared, Silu::OtherFactor] {
            let mut g = silu_graph(variant);
            fuse_conv_activation(&mut g);
            let Op::Conv(conv) = &g.nodes[0].op else { panic!("not a conv: {:?}", g.nodes[0].op) };
            let sigmoid = Activation::new(Func::Sigmoid, None);
            let want = if variant == Silu::OtherFactor { (2, sigmoid) } else { (3, None) };
            assert_eq!((g.nodes.len(), conv.fused.activation), want, "{variant:?}");
            assert!(matches!(&g.nodes.last().unwrap().op, Op::Elementwise(e) if e.func == Func::Mul), "{variant:?}");
        }
    }
}
