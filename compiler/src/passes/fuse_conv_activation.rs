//! Relu, LeakyRelu, Clip, Sigmoid, HardSigmoid, HardSwish and Tanh folded
//! into the convolution that feeds them.
//!
//! The kernel applies the activation to each output block right after its
//! GEMM, while it is still in cache, instead of a separate pass over the
//! whole tensor. Applies to f32/f64 Conv whose result is read by the
//! activation alone (not a graph output) and, for Clip, whose bounds are
//! constants; the kernel compares exactly as the separate operators do,
//! and computes the others with their arithmetic and libm functions.

use crate::ir::{DType, Graph, ValueId};
use crate::ops::elementwise::{Activation, Func};
use crate::ops::Op;

pub fn fuse_conv_activation(graph: &mut Graph) {
    let uses = super::use_counts(graph);
    let producer = super::producers(graph);
    let mut removed = vec![false; graph.nodes.len()];
    for act_index in 0..graph.nodes.len() {
        let act = &graph.nodes[act_index];
        let Some(Some(conv_out)) = act.inputs.first().copied() else { continue };
        let Some(&conv_index) = producer.get(&conv_out) else { continue };
        let float = graph.concrete(conv_out).is_some_and(|(d, _)| matches!(d, DType::F32 | DType::F64));
        let Op::Conv(conv) = &graph.nodes[conv_index].op else { continue };
        if !float || conv.fused.activation.is_some() || uses.get(&conv_out) != Some(&1) || removed[conv_index] {
            continue;
        }
        let Some(activation) = activation_of(graph, &act.op, &act.inputs) else { continue };
        let y = act.outputs[0];
        let conv = &mut graph.nodes[conv_index];
        if let Op::Conv(c) = &mut conv.op {
            c.fused.activation = Some(activation);
        }
        conv.outputs = vec![y];
        removed[act_index] = true;
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
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
    use crate::passes::test_graph::{assert_same_f32s, conv_1x1, run_bytes, value};

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
}
