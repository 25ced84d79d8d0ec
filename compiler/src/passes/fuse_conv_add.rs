//! A residual Add folded into the convolution that feeds it.
//!
//! ResNet-style blocks end in `Add(Conv(...), shortcut)` (then Relu): a
//! separate Add reads two whole tensors and writes a third. Fused, the
//! kernel adds the shortcut to each output block right after its GEMM,
//! while the block is in cache (`y = conv + shortcut`, the same single
//! rounding as the Add), and `fuse_conv_activation`, which runs after this
//! pass, can then fold the Relu in too.
//!
//! Applies to an f32/f64 Add (or two-input Sum) whose operand is a Conv without a fused
//! activation, read by the Add alone, and whose other operand has exactly
//! the conv output's type (no broadcasting). The fused Conv takes the Add's
//! place in the schedule, since the shortcut may be computed after the conv,
//! and so the two must lie in one guarded or repeated range: moved across a
//! marker, the conv would run under another condition or trip count.

use crate::ir::{DType, Graph, ValueId};
use crate::ops::conv::InputSlot;
use crate::ops::elementwise::Func;
use crate::ops::Op;

pub fn fuse_conv_add(graph: &mut Graph) {
    let uses = super::use_counts(graph);
    let producer = super::producers(graph);
    let region = super::regions(graph);
    let mut removed = vec![false; graph.nodes.len()];
    for add_index in 0..graph.nodes.len() {
        let add = &graph.nodes[add_index];
        let Op::Elementwise(e) = &add.op else { continue };
        let (Func::Add | Func::Sum, [Some(a), Some(b)]) = (&e.func, add.inputs.as_slice()) else { continue };
        let fusable = |conv_out: ValueId, other: ValueId| {
            let conv_index = *producer.get(&conv_out)?;
            let Op::Conv(conv) = &graph.nodes[conv_index].op else { return None };
            let ty = graph.concrete(conv_out)?;
            let ok = matches!(ty.0, DType::F32 | DType::F64)
                && conv.fused.activation.is_none()
                && conv.fused.residual.is_none()
                && !removed[conv_index]
                && region[conv_index] == region[add_index]
                && uses.get(&conv_out) == Some(&1)
                && other != conv_out
                && graph.concrete(other) == Some(ty.clone())
                && graph.concrete(add.outputs[0]) == Some(ty);
            ok.then_some((conv_index, other))
        };
        let Some((conv_index, shortcut)) = fusable(*a, *b).or_else(|| fusable(*b, *a)) else { continue };
        let y = add.outputs[0];
        let mut conv = graph.nodes[conv_index].clone();
        let slot = InputSlot::append(&mut conv.inputs, shortcut);
        if let Op::Conv(c) = &mut conv.op {
            c.fused.residual = Some(slot);
        }
        conv.outputs = vec![y];
        graph.nodes[add_index] = conv;
        removed[conv_index] = true;
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, ValueDef};
    use crate::ops::control::Guard;
    use crate::ops::elementwise::Elementwise;
    use crate::passes::test_graph::{conv_1x1, value};

    /// `y = Add(s, Conv(x))` (or `Sum`) with the shortcut `s = Relu(x)`
    /// computed after the conv, and the shortcut shaped `shortcut_shape`.
    fn graph(shortcut_shape: &[usize], func: Func) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 1, 2, 2], ValueDef::Input(0));
        let c = conv_1x1(&mut g, x, 2.0);
        let s = value(&mut g, "s", shortcut_shape, ValueDef::Computed);
        let y = value(&mut g, "y", &[1, 1, 2, 2], ValueDef::Computed);
        let relu = Elementwise { op_type: "Relu", func: Func::Relu };
        g.nodes.push(Node { name: "relu".into(), op: Op::Elementwise(relu), inputs: vec![Some(x)], outputs: vec![s] });
        let add = Elementwise { op_type: "Add", func };
        g.nodes.push(Node {
            name: "add".into(),
            op: Op::Elementwise(add),
            inputs: vec![Some(s), Some(c)],
            outputs: vec![y],
        });
        g.inputs.push(x);
        g.outputs.push(y);
        g
    }

    #[test]
    fn add_after_conv_moves_into_it_at_the_add() {
        for func in [Func::Add, Func::Sum] {
            let mut g = graph(&[1, 1, 2, 2], func);
            fuse_conv_add(&mut g);
            check_fused(&g);
        }
    }

    fn check_fused(g: &Graph) {
        assert_eq!(g.nodes.len(), 2);
        assert_eq!(g.nodes[0].name, "relu");
        let Op::Conv(conv) = &g.nodes[1].op else { panic!("not a conv: {:?}", g.nodes[1].op) };
        assert_eq!(conv.fused.residual, Some(InputSlot(3)));
        let s = g.nodes[0].outputs[0];
        assert_eq!(g.nodes[1].inputs[2..], [None, Some(s)]);
        assert_eq!(g.nodes[1].outputs, g.outputs);
        assert_eq!(super::super::verify(g), Ok(()));
    }

    /// A Guard between the conv and the Add (the Add in a branch of a
    /// run-time If): the conv must not move into the guarded range.
    #[test]
    fn a_conv_never_moves_across_a_range_marker() {
        let mut g = graph(&[1, 1, 2, 2], Func::Add);
        let when = value(&mut g, "when", &[], ValueDef::Input(1));
        g.inputs.push(when);
        let guard = Node {
            name: "guard".into(),
            op: Op::Guard(Guard { when: true }),
            inputs: vec![Some(when)],
            outputs: vec![],
        };
        g.nodes.insert(1, guard);
        fuse_conv_add(&mut g);
        assert_eq!(g.nodes.len(), 4, "{:?}", g.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>());
    }

    #[test]
    fn a_broadcasting_add_is_left_alone() {
        let mut g = graph(&[1, 1, 1, 2], Func::Add);
        fuse_conv_add(&mut g);
        assert_eq!(g.nodes.len(), 3);
    }
}
