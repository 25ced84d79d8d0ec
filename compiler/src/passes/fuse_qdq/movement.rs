//! Data movement in the integer domain: `QuantizeLinear(op(
//! DequantizeLinear(x)...))` for op Reshape (Flatten, Squeeze,
//! Unsqueeze), Transpose, Concat, Slice, Split or MaxPool becomes `op(x...)`
//! on the bytes when every DequantizeLinear and QuantizeLinear around it
//! has the same per-tensor scale (positive, bit for bit) and zero point.
//!
//! Why: `quantize_static` quantizes these operators' outputs with their
//! inputs' parameters (a detector's Concat, Split and MaxPool), so run
//! literally they convert the bytes to f32 and back for nothing.
//!
//! **Exact:** such a QuantizeLinear of a DequantizeLinear gives back the
//! byte: `(q - z) · s / s` lies within two ulps of the integer `q - z`
//! (at most 255 in magnitude), which rounds back to it; and a maximum of
//! dequantized values is the dequantized maximum, the dequantization
//! being increasing for a positive scale. So the output is the group's
//! bit for bit (`tests`).

use super::super::{producers, regions, use_counts};
use super::{is_byte, linear, linear_node, Quantized};
use crate::ir::{Graph, ValueId};
use crate::ops::pool::{Pool, PoolKind};
use crate::ops::Op;
use std::collections::HashMap;

/// Whether `op` only moves, copies or selects its f32 inputs' elements.
fn moves_data(op: &Op) -> bool {
    let pool_max = |op: &Op| matches!(op, Op::Pool(Pool { kind: PoolKind::Max { .. }, blocked: false, .. }));
    matches!(op, Op::Reshape(_) | Op::Transpose(_) | Op::Concat(_) | Op::Slice(_) | Op::Split(_)) || pool_max(op)
}

/// A per-tensor scale and zero point: the scale's bits and the zero
/// point's type and value (absent: `None`).
type Parameters = (u32, Option<(crate::ir::DType, i64)>);

/// The parameters of a DequantizeLinear/QuantizeLinear with a positive
/// finite per-tensor scale and a per-tensor zero point.
fn parameters(graph: &Graph, side: &Quantized) -> Option<Parameters> {
    let scale = graph.const_value(side.scale)?;
    let s = (scale.dtype == crate::ir::DType::F32 && scale.len() == 1).then(|| scale.get_f64(0) as f32)?;
    (s > 0.0 && s.is_finite()).then_some(())?;
    let zero = match side.zero {
        Some(z) => {
            let t = graph.const_value(z)?;
            (is_byte(t.dtype) && t.len() == 1).then(|| (t.dtype, t.to_i64s()[0]))?.into()
        }
        None => None,
    };
    Some((s.to_bits(), zero))
}

pub(super) fn fuse_data_movement(graph: &mut Graph) {
    let (uses, producer, region) = (use_counts(graph), producers(graph), regions(graph));
    let mut reader: HashMap<ValueId, usize> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for v in node.inputs.iter().flatten() {
            reader.insert(*v, i);
        }
    }
    let mut removed = vec![false; graph.nodes.len()];
    for index in 0..graph.nodes.len() {
        let node = &graph.nodes[index];
        if !moves_data(&node.op) {
            continue;
        }
        // Each output read by one QuantizeLinear alone, in the region,
        // all of the same parameters.
        let quantizes: Option<Vec<(usize, Parameters)>> = node
            .outputs
            .iter()
            .map(|v| {
                let q = *reader.get(v).filter(|_| uses.get(v) == Some(&1))?;
                let quantized = linear_node(&graph.nodes[q], true)?;
                let byte_output = graph.concrete(graph.nodes[q].outputs[0]).is_some_and(|t| is_byte(t.0));
                (quantized.q == *v && region[q] == region[index] && byte_output).then_some(())?;
                Some((q, parameters(graph, &quantized)?))
            })
            .collect();
        let Some(quantizes) = quantizes.filter(|q| !q.is_empty()) else { continue };
        let want = quantizes[0].1;
        if quantizes.iter().any(|q| q.1 != want) {
            continue;
        }
        let quantizes: Vec<usize> = quantizes.into_iter().map(|q| q.0).collect();
        // Each f32 input dequantized with the same parameters, from bytes
        // of the output's type.
        let y_dtype = graph.concrete(graph.nodes[quantizes[0]].outputs[0]).map(|t| t.0);
        let mut inputs = node.inputs.clone();
        let mut fits = true;
        for input in inputs.iter_mut().flatten() {
            if graph.concrete(*input).is_none_or(|t| t.0 != crate::ir::DType::F32) {
                continue;
            }
            let dq = linear(graph, &producer, *input, false).filter(|d| {
                let same_type = graph.concrete(d.q).map(|t| t.0) == y_dtype;
                same_type && parameters(graph, d) == Some(want) && region[producer[input]] == region[index]
            });
            match dq {
                Some(d) => *input = d.q,
                None => fits = false,
            }
        }
        if !fits {
            continue;
        }
        let outputs = quantizes.iter().map(|&q| graph.nodes[q].outputs[0]).collect();
        let node = &mut graph.nodes[index];
        (node.inputs, node.outputs) = (inputs, outputs);
        quantizes.iter().for_each(|&q| removed[q] = true);
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

#[cfg(test)]
mod tests {
    use super::super::elementwise::tests::{linear, Builder};
    use crate::import::attrs::Attrs;
    use crate::ir::DType;
    use crate::ops::conv::Window;
    use crate::ops::pool::{Pool, PoolKind};
    use crate::ops::shape_ops::{Concat, Split, Transpose};
    use crate::passes::test_graph::push;

    const Q: (f32, DType, u8) = (0.037, DType::U8, 121);

    fn max_pool() -> Pool {
        let mut window = Window::parse(&Attrs::new(&[])).expect("defaults");
        (window.kernel_shape, window.pads, window.strides) = (vec![3, 3], vec![1; 4], vec![2, 2]);
        Pool { op_type: "MaxPool", kind: PoolKind::Max { column_major: false }, global: false, window, blocked: false }
    }

    #[test]
    fn movement_between_equal_quantizations_stays_on_the_bytes() {
        let mut b = Builder::new();
        let x = b.dequantized_input(DType::U8, &[1, 3, 6, 5], Q.0, Q.2);
        let r = b.dequantized_input(DType::U8, &[1, 2, 6, 5], Q.0, Q.2);
        b.quantized_by(Concat { axis: 1 }, &[x, r], &[1, 5, 6, 5], Q);
        b.quantized_by(Transpose { perm: Some(vec![0, 2, 3, 1]) }, &[x], &[1, 6, 5, 3], Q);
        b.quantized_by(max_pool(), &[x], &[1, 3, 3, 3], Q);
        // A Split's two outputs, each quantized alike.
        let halves = [b.computed(DType::F32, &[1, 3, 3, 5]), b.computed(DType::F32, &[1, 3, 3, 5])];
        let split = Split { axis: 2, num_outputs: Some(2) };
        b.g.nodes.push(crate::ir::Node {
            name: "split".into(),
            op: split.into(),
            inputs: vec![Some(x)],
            outputs: halves.to_vec(),
        });
        let (s, z) = b.scale_zero(Q.0, Q.1, Q.2);
        for half in halves {
            let q = b.computed(DType::U8, &[1, 3, 3, 5]);
            push(&mut b.g, "q", linear(true), &[half, s, z], q);
            b.g.outputs.push(q);
        }
        b.fuses_exactly(&["Concat", "Transpose", "MaxPool", "Split"]);
    }

    #[test]
    fn movement_between_other_quantizations_stays_as_it_is() {
        let mut b = Builder::new();
        let x = b.dequantized_input(DType::U8, &[1, 3, 6, 5], Q.0, Q.2);
        let r = b.dequantized_input(DType::U8, &[1, 2, 6, 5], Q.0 * 2.0, Q.2);
        b.quantized_by(Concat { axis: 1 }, &[x, r], &[1, 5, 6, 5], Q);
        b.quantized_by(Transpose { perm: None }, &[x], &[5, 6, 3, 1], (Q.0, Q.1, Q.2 + 1));
        b.fuses_exactly(&[
            "DequantizeLinear",
            "DequantizeLinear",
            "Concat",
            "QuantizeLinear",
            "Transpose",
            "QuantizeLinear",
        ]);
    }
}
