//! `Gemm` or `MatMul` by a matrix whose elements are all one value `v`,
//! computed as one column and then broadcast.
//!
//! Every column of `A @ B` is then the same, `s[m] = sum_k A[m, k] * v`:
//! the product needs `M·K` multiply-adds, not `M·K·N`, and `B` is never
//! made. Such matrices come from `ConstantOfShape` (the onnx wheel's light
//! models store every weight that way: VGG-19's first fully connected layer
//! would otherwise fill and read a 411 MB matrix at every call) or from a
//! constant whose elements are all equal.
//!
//! The rewrite is two Gemms on small constants: `s = Gemm(A, [v; K x 1])`
//! with the original `alpha` and `transA` (the same products as every
//! column of the original, summed in the kernel's order), then
//! `Y = Gemm(s, [1; 1 x N], C)` with the original `beta`, a depth-1 product
//! that copies `s` across each row and adds `beta * C` as the original
//! does. Applies to f32 matrices with `K` and `N` at least 2 (below that
//! the two Gemms are no less work than the original).

use crate::ir::{DType, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::linalg::Gemm;
use crate::ops::Op;
use std::collections::HashMap;

pub fn gemm_by_splat(graph: &mut Graph) {
    let filled: HashMap<ValueId, f32> = graph
        .nodes
        .iter()
        .filter_map(|n| match (&n.op, n.outputs.as_slice()) {
            (Op::ConstantOfShape(c), &[out]) if c.value.dtype == DType::F32 => Some((out, c.value.get_f64(0) as f32)),
            _ => None,
        })
        .collect();
    let mut rewritten = Vec::with_capacity(graph.nodes.len());
    for node in std::mem::take(&mut graph.nodes) {
        match split(graph, &filled, &node) {
            Some([column, broadcast]) => rewritten.extend([column, broadcast]),
            None => rewritten.push(node),
        }
    }
    graph.nodes = rewritten;
}

/// The value every element of `b` holds, when `b` is a splat: made by a
/// `ConstantOfShape` (`filled` maps their outputs to their values) or a
/// constant of equal elements.
fn splat_value(graph: &Graph, filled: &HashMap<ValueId, f32>, b: ValueId) -> Option<f32> {
    let Some(t) = graph.const_value(b) else { return filled.get(&b).copied() };
    let values = t.to_f32s()?;
    let first = *values.first()?;
    values.iter().all(|v| v.to_bits() == first.to_bits()).then_some(first)
}

/// The two Gemms that replace `node`, when it multiplies by a splat.
fn split(graph: &mut Graph, filled: &HashMap<ValueId, f32>, node: &Node) -> Option<[Node; 2]> {
    let (gemm, c) = match (&node.op, node.inputs.as_slice()) {
        (Op::Gemm(g), [_, _]) => (g.clone(), None),
        (Op::Gemm(g), [_, _, c]) => (g.clone(), *c),
        (Op::MatMul(_), [_, _]) => {
            (Gemm { alpha: 1.0, beta: 0.0, trans_a: false, trans_b: false, packed_b: None }, None)
        }
        _ => return None,
    };
    let (Some(a), Some(b)) = (node.inputs[0], node.inputs[1]) else { return None };
    let y = *node.outputs.first()?;
    let (DType::F32, a_shape) = graph.concrete(a)? else { return None };
    let (DType::F32, b_shape) = graph.concrete(b)? else { return None };
    let (&[a0, a1], &[b0, b1]) = (a_shape.as_slice(), b_shape.as_slice()) else { return None };
    let (m, k) = if gemm.trans_a { (a1, a0) } else { (a0, a1) };
    let n = if gemm.trans_b { b0 } else { b1 };
    let (DType::F32, y_shape) = graph.concrete(y)? else { return None };
    if k < 2 || n < 2 || y_shape != [m, n] {
        return None;
    }
    let v = splat_value(graph, filled, b)?;
    let constant = |graph: &mut Graph, name: String, shape: [usize; 2], value: f32| {
        let tensor = Tensor::from_f32s(shape.to_vec(), &vec![value; shape[0] * shape[1]]);
        graph.add_value(name, Some(TensorType::known(DType::F32, &shape)), ValueDef::Const(tensor))
    };
    let y_name = graph.value(y).name.clone();
    let column_of_v = constant(graph, format!("{y_name}.splat_column"), [k, 1], v);
    let row_of_ones = constant(graph, format!("{y_name}.ones_row"), [1, n], 1.0);
    let s =
        graph.add_value(format!("{y_name}.column"), Some(TensorType::known(DType::F32, &[m, 1])), ValueDef::Computed);
    let column = Node {
        name: format!("{}.column", node.name),
        op: Op::Gemm(Gemm { alpha: gemm.alpha, beta: 0.0, trans_a: gemm.trans_a, trans_b: false, packed_b: None }),
        inputs: vec![Some(a), Some(column_of_v)],
        outputs: vec![s],
    };
    let mut inputs = vec![Some(s), Some(row_of_ones)];
    inputs.extend(c.map(Some));
    let broadcast = Node {
        name: format!("{}.broadcast", node.name),
        op: Op::Gemm(Gemm { alpha: 1.0, beta: gemm.beta, trans_a: false, trans_b: false, packed_b: None }),
        inputs,
        outputs: node.outputs.clone(),
    };
    Some([column, broadcast])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::linalg::MatMul;
    use crate::ops::shape_ops::ConstantOfShape;
    use crate::passes::test_graph::{assert_all_close, constant, floats, push, run_bytes, value};

    /// `y = Gemm(x[3,5], B, bias[4])` with `B` = ConstantOfShape([4,5]) of
    /// 0.25 (transB), or `y = MatMul(x[3,5], B[5,4] of equal constants)`.
    fn graph(matmul: bool) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[3, 5], ValueDef::Input(0));
        let y = value(&mut g, "y", &[3, 4], ValueDef::Computed);
        if matmul {
            let w = constant(&mut g, "w", &[5, 4], &[-1.5; 20]);
            push(&mut g, "mm", MatMul::default(), &[x, w], y);
        } else {
            let dims = Tensor::from_i64s(vec![2], &[4, 5]);
            let shape = g.add_value("shape", Some(TensorType::known(DType::I64, &[2])), ValueDef::Const(dims));
            let w = value(&mut g, "w", &[4, 5], ValueDef::Computed);
            push(&mut g, "fill", ConstantOfShape { value: Tensor::from_f32s(vec![1], &[0.25]) }, &[shape], w);
            let bias = constant(&mut g, "bias", &[4], &[1.0, -2.0, 3.0, 0.5]);
            let gemm = Gemm { alpha: 2.0, beta: 0.5, trans_a: false, trans_b: true, packed_b: None };
            push(&mut g, "fc", gemm, &[x, w, bias], y);
        }
        g.inputs = vec![x];
        g.outputs = vec![y];
        g
    }

    #[test]
    fn a_product_by_a_splat_becomes_a_column_and_a_broadcast_with_the_same_results() {
        for matmul in [false, true] {
            let g = graph(matmul);
            let mut after = g.clone();
            gemm_by_splat(&mut after);
            crate::passes::eliminate_dead_nodes(&mut after);
            assert_eq!(crate::passes::verify(&after), Ok(()));
            let ops: Vec<_> = after.nodes.iter().map(|n| n.op.name()).collect();
            assert_eq!(ops, ["Gemm", "Gemm"], "matmul {matmul}: the splat is no longer made");
            let s = after.nodes[0].outputs[0];
            assert_eq!(after.concrete(s), Some((DType::F32, vec![3, 1])));
            let x: Vec<f32> = (0..15).map(|i| (i as f32 * 0.71).cos() * 3.0).collect();
            let inputs = [Tensor::from_f32s(vec![3, 5], &x)];
            for portable in [false, true] {
                let want = floats(&run_bytes(&g, &inputs, portable)[0]);
                let got = floats(&run_bytes(&after, &inputs, portable)[0]);
                assert_eq!(got.len(), 12);
                assert_all_close(&got, &want, 1e-5, &format!("matmul {matmul}"));
            }
        }
    }

    #[test]
    fn a_matrix_of_unequal_values_or_a_single_column_is_left_alone() {
        let mut g = graph(true);
        let w = g.nodes[0].inputs[1].unwrap();
        g.value_mut(w).def = ValueDef::Const(Tensor::from_f32s(vec![5, 4], &[[-1.5; 19].as_slice(), &[2.0]].concat()));
        gemm_by_splat(&mut g);
        assert_eq!(g.nodes.len(), 1);
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[3, 5], ValueDef::Input(0));
        let w = constant(&mut g, "w", &[5, 1], &[2.0; 5]);
        let y = value(&mut g, "y", &[3, 1], ValueDef::Computed);
        push(&mut g, "mm", MatMul::default(), &[x, w], y);
        gemm_by_splat(&mut g);
        assert_eq!(g.nodes.len(), 1);
    }
}
