//! `Add(MatMul(A, B), C)` rewritten as `Gemm(A, B, C)`.
//!
//! Exporters write a fully connected layer as MatMul then Add of the bias;
//! separately, the Add is one more pass over the product. Gemm adds `C`
//! while it stores each block of the product (`beta = 1`, `alpha = 1`: the
//! same values up to the order of the final additions, which the kernel
//! may do per depth slice). Applies to f32/f64 MatMul of a matrix `B` whose
//! product is read by the Add alone, when the Add's other operand
//! broadcasts to the product as Gemm's `C` may (rank at most 2) and the
//! Add's result keeps the product's shape. The Gemm takes the Add's place
//! in the schedule (`C` may be computed after the MatMul), never across a
//! guarded or repeated range's marker.
//!
//! An `A` of rank above 2 (a Linear over a sequence `[1, 197, 192]` or an
//! NHWC map `[1, 56, 56, 96]`) is a matrix of all its leading dims as rows:
//! the Gemm reads it through a Flatten view and its product is reshaped
//! back, both views (no copies). Its `C` must then be the same for every
//! row (`[N]`, `[1, N]` or a scalar), since the rows of Gemm's `C` would
//! otherwise not line up with the flattened rows.

use crate::ir::shape::broadcast;
use crate::ir::{DType, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::elementwise::Func;
use crate::ops::linalg::Gemm;
use crate::ops::shape_ops::{Reshape, ViewKind};
use crate::ops::Op;
use std::collections::HashMap;

/// One fusable pair: the MatMul's node, its operands and the bias.
struct Fusion {
    matmul: usize,
    x: ValueId,
    w: ValueId,
    bias: ValueId,
}

pub fn fuse_matmul_add(graph: &mut Graph) {
    let uses = super::use_counts(graph);
    let producer = super::producers(graph);
    let region = super::regions(graph);
    let mut removed = vec![false; graph.nodes.len()];
    let mut replaced: HashMap<usize, Vec<Node>> = HashMap::new();
    for add_index in 0..graph.nodes.len() {
        let add = &graph.nodes[add_index];
        let Op::Elementwise(e) = &add.op else { continue };
        let (Func::Add | Func::Sum, [Some(a), Some(b)]) = (&e.func, add.inputs.as_slice()) else { continue };
        let fusable = |product: ValueId, bias: ValueId| {
            let matmul = *producer.get(&product)?;
            let mm = &graph.nodes[matmul];
            let (Op::MatMul(_), [Some(x), Some(w)]) = (&mm.op, mm.inputs.as_slice()) else { return None };
            let (dtype, shape) = graph.concrete(product)?;
            let (x_dtype, x_shape) = graph.concrete(*x)?;
            let (w_dtype, w_shape) = graph.concrete(*w)?;
            let (bias_dtype, bias_shape) = graph.concrete(bias)?;
            let ok = matches!(dtype, DType::F32 | DType::F64)
                && x_dtype == dtype
                && w_dtype == dtype
                && w_shape.len() == 2
                && x_shape.len() >= 2
                && bias_dtype == dtype
                && bias_fits(&bias_shape, &shape)
                && graph.concrete(add.outputs[0]) == Some((dtype, shape))
                && uses.get(&product) == Some(&1)
                && bias != product
                && region[matmul] == region[add_index]
                && !removed[matmul];
            ok.then_some(Fusion { matmul, x: *x, w: *w, bias })
        };
        let Some(fusion) = fusable(*a, *b).or_else(|| fusable(*b, *a)) else { continue };
        removed[fusion.matmul] = true;
        replaced.insert(add_index, gemm_nodes(graph, add_index, &fusion));
    }
    let nodes = std::mem::take(&mut graph.nodes);
    for (index, node) in nodes.into_iter().enumerate() {
        match replaced.remove(&index) {
            Some(gemm) => graph.nodes.extend(gemm),
            None if !removed[index] => graph.nodes.push(node),
            None => {}
        }
    }
}

/// Whether `bias` can be the `C` of the Gemm computing a product of
/// `shape`: rank at most 2, broadcasting to it without widening it, and
/// for a product of rank above 2 the same for every row.
fn bias_fits(bias: &[usize], shape: &[usize]) -> bool {
    let n = shape[shape.len() - 1];
    let broadcasts = bias.len() <= 2 && broadcast(bias, shape).as_deref() == Some(shape);
    let per_row = bias.iter().rev().skip(1).all(|&d| d == 1) && bias.last().is_none_or(|&d| d == 1 || d == n);
    broadcasts && (shape.len() == 2 || per_row)
}

/// The nodes replacing the Add at `add_index`: the Gemm, with an `A` of
/// rank above 2 flattened before it and the product reshaped after it.
fn gemm_nodes(graph: &mut Graph, add_index: usize, f: &Fusion) -> Vec<Node> {
    let gemm = Op::Gemm(Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false, packed_b: None });
    let name = format!("{}+{}", graph.nodes[f.matmul].name, graph.nodes[add_index].name);
    let y = graph.nodes[add_index].outputs[0];
    let (dtype, x_shape) = graph.concrete(f.x).expect("checked by fusable");
    let (_, shape) = graph.concrete(y).expect("checked by fusable");
    let gemm_inputs = |x: ValueId| vec![Some(x), Some(f.w), Some(f.bias)];
    if x_shape.len() == 2 {
        return vec![Node { name, op: gemm, inputs: gemm_inputs(f.x), outputs: vec![y] }];
    }
    let (k, n) = (x_shape[x_shape.len() - 1], shape[shape.len() - 1]);
    let rows = x_shape[..x_shape.len() - 1].iter().product::<usize>();
    let matrix = |graph: &mut Graph, suffix: &str, cols: usize| {
        let ty = TensorType::known(dtype, &[rows, cols]);
        graph.add_value(format!("{name}.{suffix}"), Some(ty), ValueDef::Computed)
    };
    let (x_rows, product) = (matrix(graph, "rows", k), matrix(graph, "product", n));
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let target = Tensor::from_i64s(vec![dims.len()], &dims);
    let target_ty = TensorType::known(DType::I64, &[dims.len()]);
    let target = graph.add_value(format!("{name}.shape"), Some(target_ty), ValueDef::Const(target));
    let axis = x_shape.len() as i64 - 1;
    vec![
        Node {
            name: format!("{name}.flatten"),
            op: Op::Reshape(Reshape { kind: ViewKind::Flatten { axis } }),
            inputs: vec![Some(f.x)],
            outputs: vec![x_rows],
        },
        Node { name: name.clone(), op: gemm, inputs: gemm_inputs(x_rows), outputs: vec![product] },
        Node {
            name: format!("{name}.reshape"),
            op: Op::Reshape(Reshape { kind: ViewKind::Reshape { allowzero: false } }),
            inputs: vec![Some(product), Some(target)],
            outputs: vec![y],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, ValueDef};
    use crate::ops::elementwise::Elementwise;
    use crate::ops::linalg::MatMul;
    use crate::passes::test_graph::{assert_all_close, constant, floats, push, run_bytes, value};

    /// `y = Add(bias, MatMul(x[3,5], w[5,4]))`, with the bias shaped `bias_shape`.
    fn graph(bias_shape: &[usize]) -> Graph {
        graph_of(&[3], bias_shape)
    }

    /// `y = Add(bias, MatMul(x[rows.., 5], w[5, 4]))`.
    fn graph_of(rows: &[usize], bias_shape: &[usize]) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[rows, &[5]].concat(), ValueDef::Input(0));
        let wv: Vec<f32> = (0..20).map(|i| (i as f32 * 0.37).sin()).collect();
        let w = constant(&mut g, "w", &[5, 4], &wv);
        let count: usize = bias_shape.iter().product();
        let bv: Vec<f32> = (0..count).map(|i| i as f32 * 0.5 - 1.0).collect();
        let bias = constant(&mut g, "bias", bias_shape, &bv);
        let p = value(&mut g, "p", &[rows, &[4]].concat(), ValueDef::Computed);
        let y = value(&mut g, "y", &[rows, &[4]].concat(), ValueDef::Computed);
        push(&mut g, "mm", MatMul::default(), &[x, w], p);
        push(&mut g, "add", Elementwise { op_type: "Add", func: Func::Add }, &[bias, p], y);
        g.inputs = vec![x];
        g.outputs = vec![y];
        g
    }

    /// Runs `g` and `after` on the same input, with and without kernels.
    fn assert_same_results(g: &Graph, after: &Graph, rows: &[usize], context: &str) {
        let count = rows.iter().product::<usize>() * 5;
        let x: Vec<f32> = (0..count).map(|i| (i as f32 * 0.71).cos() * 3.0).collect();
        let inputs = [Tensor::from_f32s([rows, &[5]].concat(), &x)];
        for portable in [false, true] {
            let want = floats(&run_bytes(g, &inputs, portable)[0]);
            let got = floats(&run_bytes(after, &inputs, portable)[0]);
            assert_all_close(&got, &want, 1e-6, context);
        }
    }

    #[test]
    fn matmul_then_add_becomes_one_gemm_with_the_same_results() {
        for bias_shape in [&[4][..], &[1, 4], &[3, 1], &[3, 4], &[]] {
            let g = graph(bias_shape);
            let mut after = g.clone();
            fuse_matmul_add(&mut after);
            assert_eq!(crate::passes::verify(&after), Ok(()));
            assert_eq!(after.nodes.len(), 1, "{bias_shape:?}");
            assert_eq!(after.nodes[0].name, "mm+add");
            let Op::Gemm(gemm) = &after.nodes[0].op else { panic!("not a Gemm: {:?}", after.nodes[0].op) };
            assert_eq!((gemm.alpha, gemm.beta, gemm.trans_a, gemm.trans_b), (1.0, 1.0, false, false));
            assert_same_results(&g, &after, &[3], &format!("{bias_shape:?}"));
        }
    }

    /// A Linear over a sequence or a map: the Gemm reads the rows through
    /// a Flatten view and its product is reshaped back.
    #[test]
    fn a_higher_rank_a_is_flattened_into_rows() {
        for (rows, bias_shape) in [(&[1, 3][..], &[4][..]), (&[2, 3, 2], &[1, 4]), (&[2, 3], &[])] {
            let g = graph_of(rows, bias_shape);
            let mut after = g.clone();
            fuse_matmul_add(&mut after);
            assert_eq!(crate::passes::verify(&after), Ok(()));
            let ops: Vec<&str> = after.nodes.iter().map(|n| n.op.name()).collect();
            assert_eq!(ops, ["Flatten", "Gemm", "Reshape"], "{rows:?} {bias_shape:?}");
            assert_eq!(after.outputs, g.outputs);
            assert_same_results(&g, &after, rows, &format!("{rows:?} {bias_shape:?}"));
        }
    }

    /// A bias that differs between rows of a higher-rank product does not
    /// line up with the flattened rows: left alone.
    #[test]
    fn a_per_row_bias_of_a_higher_rank_product_is_left_alone() {
        let mut g = graph_of(&[2, 3], &[3, 4]);
        fuse_matmul_add(&mut g);
        assert_eq!(g.nodes.len(), 2);
    }

    #[test]
    fn a_bias_that_widens_the_product_or_a_shared_product_is_left_alone() {
        // [2, 3, 4] would make the result 3-D: not a Gemm's C.
        let mut g = graph(&[2, 3, 4]);
        let y = g.outputs[0];
        g.value_mut(y).ty = Some(crate::ir::TensorType::known(DType::F32, &[2, 3, 4]));
        fuse_matmul_add(&mut g);
        assert_eq!(g.nodes.len(), 2);
        let mut g = graph(&[4]);
        let p = g.nodes[0].outputs[0];
        g.outputs.push(p);
        fuse_matmul_add(&mut g);
        assert_eq!(g.nodes.len(), 2);
    }
}
