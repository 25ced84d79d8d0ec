//! `Conv(Relu(affine(x)))` with a pointwise window: a per-channel affine
//! map and Relu applied as the convolution packs its input.
//!
//! Pre-activation networks (DenseNet, ResNet v2) normalise and rectify the
//! input of each convolution: apart, that is one more pass over a tensor
//! as large as the convolution's input (in DenseNet the growing
//! concatenation of every earlier layer's features). A pointwise
//! convolution on packed weights reads each input element once, to pack
//! it; `onnxc_conv_prologue_f32` computes `max(x * scale[c] + shift[c], 0)`
//! there (the Conv's `Fused::prologue` input), per input channel `c`.
//!
//! `affine` is any chain of per-channel affine maps ([`super::affine`]),
//! composed into one `scale` and `shift` — the same values up to
//! rounding, as in `fold_affine`.
//!
//! Applies when the Conv is f32, pointwise (1x1, stride 1, no padding)
//! with packed weights (so it runs after `pack_conv_weights`), and each
//! intermediate has the input's shape and is read only by the next node,
//! all in one guarded or repeated range.

use super::affine::{affine_step, compose};
use crate::ir::{DType, Graph, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::conv::{InputSlot, Layout};
use crate::ops::elementwise::Func;
use crate::ops::Op;
use onnxc_runtime::conv_takes_prologue;
use std::collections::HashMap;

pub fn fuse_conv_prologue(graph: &mut Graph) {
    let uses = super::use_counts(graph);
    let producer = super::producers(graph);
    let region = super::regions(graph);
    let mut removed = vec![false; graph.nodes.len()];
    for conv_index in 0..graph.nodes.len() {
        let conv_node = &graph.nodes[conv_index];
        let Op::Conv(conv) = &conv_node.op else { continue };
        let Some(Some(rectified)) = conv_node.inputs.first().copied() else { continue };
        let Some((DType::F32, shape)) = graph.concrete(rectified) else { continue };
        let Layout::Packed { weights } = &conv.layout else { continue };
        let Ok(p) = conv.params(&shape, weights) else { continue };
        if conv.fused.prologue.is_some() || !conv_takes_prologue(&p) {
            continue;
        }
        // Walk up from the conv: the Relu, then the affine nodes.
        let fusable = |v: ValueId, i: usize| {
            uses.get(&v) == Some(&1)
                && !graph.outputs.contains(&v)
                && region[i] == region[conv_index]
                && !removed[i]
                && graph.concrete(v).as_ref().map(|(d, s)| (*d, s.as_slice())) == Some((DType::F32, shape.as_slice()))
        };
        let Some((relu_index, mut x)) = rectifier(graph, &uses, &producer, &region, conv_index) else { continue };
        if !fusable(rectified, relu_index) {
            continue;
        }
        let channels = shape[1];
        let mut chain = vec![relu_index];
        // Applied to the input in reverse order of `steps`.
        let mut steps = Vec::new();
        while let Some(&i) = producer.get(&x) {
            let Some((input, step)) = affine_step(graph, &graph.nodes[i], shape.len(), channels) else { break };
            if !fusable(x, i) {
                break;
            }
            chain.push(i);
            steps.push(step);
            x = input;
        }
        let (scale, shift) = compose(steps.iter().rev(), channels);
        let prologue = Tensor::from_f32s(vec![2 * channels], &[scale, shift].concat());
        let name = format!("{}.prologue", graph.nodes[conv_index].name);
        let ty = TensorType::known(DType::F32, &prologue.shape);
        let prologue_id = graph.add_value(name, Some(ty), ValueDef::Const(prologue));
        let conv_node = &mut graph.nodes[conv_index];
        conv_node.inputs[0] = Some(x);
        let slot = InputSlot::append(&mut conv_node.inputs, prologue_id);
        if let Op::Conv(conv) = &mut conv_node.op {
            conv.fused.prologue = Some(slot);
        }
        chain.into_iter().for_each(|i| removed[i] = true);
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

/// The Relu node whose output is Conv `conv_index`'s input, read by the
/// Conv alone in its guarded or repeated range, and the Relu's input:
/// where a prologue would start.
pub(super) fn rectifier(
    graph: &Graph,
    uses: &HashMap<ValueId, usize>,
    producer: &HashMap<ValueId, usize>,
    region: &[usize],
    conv_index: usize,
) -> Option<(usize, ValueId)> {
    let rectified = graph.nodes[conv_index].inputs.first().copied()??;
    if uses.get(&rectified) != Some(&1) || graph.outputs.contains(&rectified) {
        return None;
    }
    let relu_index = *producer.get(&rectified)?;
    let relu = &graph.nodes[relu_index];
    match (&relu.op, relu.inputs.as_slice()) {
        (Op::Elementwise(e), [Some(x)]) if e.func == Func::Relu && region[relu_index] == region[conv_index] => {
            Some((relu_index, *x))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::Elementwise;
    use crate::ops::norm::BatchNorm;
    use crate::passes::test_graph::{assert_all_close, constant, floats, push, push_conv, run_bytes, value};

    /// x[1,3,4,5] -> BatchNormalization (-> Mul by [3,1,1] -> Add of
    /// [1,3,1,1] when `caffe2`) -> Relu -> Conv(W[2,3,1,1]) -> y, with the
    /// weights packed as the pipeline would.
    fn graph(caffe2: bool) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 3, 4, 5], ValueDef::Input(0));
        let stats = [[1.5, -0.5, 2.0], [0.1, 0.2, -0.3], [0.05, -0.4, 0.3], [0.9, 0.25, 1.7]];
        let ids: Vec<ValueId> =
            stats.iter().enumerate().map(|(i, s)| constant(&mut g, &format!("s{i}"), &[3], s)).collect();
        let n = value(&mut g, "n", &[1, 3, 4, 5], ValueDef::Computed);
        let r = value(&mut g, "r", &[1, 3, 4, 5], ValueDef::Computed);
        let y = value(&mut g, "y", &[1, 2, 4, 5], ValueDef::Computed);
        let norm = BatchNorm { epsilon: 1e-5, spatial: true, training: None };
        let inputs = [x, ids[0], ids[1], ids[2], ids[3]];
        push(&mut g, "bn", norm, &inputs, n);
        let n = if caffe2 {
            let m = constant(&mut g, "m", &[3, 1, 1], &[2.0, -0.5, 0.75]);
            let a = constant(&mut g, "a", &[1, 3, 1, 1], &[0.3, 0.1, -0.2]);
            let (scaled, shifted) = (
                value(&mut g, "scaled", &[1, 3, 4, 5], ValueDef::Computed),
                value(&mut g, "shifted", &[1, 3, 4, 5], ValueDef::Computed),
            );
            push(&mut g, "mul", Elementwise { op_type: "Mul", func: Func::Mul }, &[m, n], scaled);
            push(&mut g, "add", Elementwise { op_type: "Add", func: Func::Add }, &[scaled, a], shifted);
            shifted
        } else {
            n
        };
        push(&mut g, "relu", Elementwise { op_type: "Relu", func: Func::Relu }, &[n], r);
        let w = constant(&mut g, "w", &[2, 3, 1, 1], &[0.5, -1.0, 2.0, 1.5, 0.25, -0.75]);
        push_conv(&mut g, &[0; 4], 1, r, w, y);
        g.inputs = vec![x];
        g.outputs = vec![y];
        crate::passes::pack_conv_weights(&mut g);
        g
    }

    #[test]
    fn normalisation_and_relu_move_into_the_convolution_with_the_same_results() {
        for caffe2 in [false, true] {
            let g = graph(caffe2);
            let mut after = g.clone();
            fuse_conv_prologue(&mut after);
            assert_eq!(crate::passes::verify(&after), Ok(()));
            assert_eq!(after.nodes.len(), 1, "caffe2 {caffe2}");
            let Op::Conv(conv) = &after.nodes[0].op else { panic!("not a Conv") };
            assert_eq!(conv.fused.prologue, Some(InputSlot(3)));
            assert_eq!(after.nodes[0].inputs[0], Some(g.inputs[0]));
            let x: Vec<f32> = (0..60).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
            let inputs = [Tensor::from_f32s(vec![1, 3, 4, 5], &x)];
            let want = floats(&run_bytes(&g, &inputs, false)[0]);
            let got = floats(&run_bytes(&after, &inputs, false)[0]);
            assert_eq!(got.len(), 40);
            assert!(want.iter().any(|&w| w != 0.0));
            assert_all_close(&got, &want, 1e-5, &format!("caffe2 {caffe2}"));
        }
    }

    #[test]
    fn a_shared_activation_or_a_padded_window_is_left_alone() {
        let mut g = graph(false);
        let r = g.nodes[1].outputs[0];
        g.outputs.push(r);
        fuse_conv_prologue(&mut g);
        assert_eq!(g.nodes.len(), 3);
        let mut g = graph(false);
        if let Op::Conv(conv) = &mut g.nodes[2].op {
            conv.window.pads = vec![1, 1, 1, 1];
        }
        fuse_conv_prologue(&mut g);
        assert_eq!(g.nodes.len(), 3);
    }
}
