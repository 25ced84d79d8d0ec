//! `Add(MatMul(A, B), C)` rewritten as `Gemm(A, B, C)`.
//!
//! Exporters write a fully connected layer as MatMul then Add of the bias;
//! separately, the Add is one more pass over the product. Gemm adds `C`
//! while it stores each block of the product (`beta = 1`, `alpha = 1`: the
//! same values up to the order of the final additions, which the kernel
//! may do per depth slice). Applies to f32/f64 MatMul of two matrices
//! whose product is read by the Add alone, when the Add's other operand
//! broadcasts to the product's `[M, N]` as Gemm's `C` may (rank at most
//! 2) and the Add's result keeps `[M, N]`. The Gemm takes the Add's place
//! in the schedule (`C` may be computed after the MatMul), never across a
//! guarded or repeated range's marker.

use crate::ir::shape::broadcast;
use crate::ir::{DType, Graph, ValueId};
use crate::ops::elementwise::Func;
use crate::ops::linalg::Gemm;
use crate::ops::Op;

pub fn fuse_matmul_add(graph: &mut Graph) {
    let uses = super::use_counts(graph);
    let producer = super::producers(graph);
    let region = super::regions(graph);
    let mut removed = vec![false; graph.nodes.len()];
    for add_index in 0..graph.nodes.len() {
        let add = &graph.nodes[add_index];
        let Op::Elementwise(e) = &add.op else { continue };
        let (Func::Add | Func::Sum, [Some(a), Some(b)]) = (&e.func, add.inputs.as_slice()) else { continue };
        let fusable = |product: ValueId, bias: ValueId| {
            let mm_index = *producer.get(&product)?;
            let mm = &graph.nodes[mm_index];
            let (Op::MatMul(_), [Some(x), Some(w)]) = (&mm.op, mm.inputs.as_slice()) else { return None };
            let (dtype, shape) = graph.concrete(product)?;
            let matrices = [*x, *w].iter().all(|&v| graph.concrete(v).is_some_and(|(d, s)| d == dtype && s.len() == 2));
            let (bias_dtype, bias_shape) = graph.concrete(bias)?;
            let ok = matches!(dtype, DType::F32 | DType::F64)
                && matrices
                && bias_dtype == dtype
                && bias_shape.len() <= 2
                && broadcast(&bias_shape, &shape).as_ref() == Some(&shape)
                && graph.concrete(add.outputs[0]) == Some((dtype, shape))
                && uses.get(&product) == Some(&1)
                && bias != product
                && region[mm_index] == region[add_index]
                && !removed[mm_index];
            ok.then_some((mm_index, [*x, *w], bias))
        };
        let Some((mm_index, [x, w], bias)) = fusable(*a, *b).or_else(|| fusable(*b, *a)) else { continue };
        let gemm = Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false };
        let name = format!("{}+{}", graph.nodes[mm_index].name, graph.nodes[add_index].name);
        let add = &mut graph.nodes[add_index];
        add.op = Op::Gemm(gemm);
        add.inputs = vec![Some(x), Some(w), Some(bias)];
        add.name = name;
        removed[mm_index] = true;
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
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
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[3, 5], ValueDef::Input(0));
        let wv: Vec<f32> = (0..20).map(|i| (i as f32 * 0.37).sin()).collect();
        let w = constant(&mut g, "w", &[5, 4], &wv);
        let count: usize = bias_shape.iter().product();
        let bv: Vec<f32> = (0..count).map(|i| i as f32 * 0.5 - 1.0).collect();
        let bias = constant(&mut g, "bias", bias_shape, &bv);
        let p = value(&mut g, "p", &[3, 4], ValueDef::Computed);
        let y = value(&mut g, "y", &[3, 4], ValueDef::Computed);
        push(&mut g, "mm", MatMul, &[x, w], p);
        push(&mut g, "add", Elementwise { op_type: "Add", func: Func::Add }, &[bias, p], y);
        g.inputs = vec![x];
        g.outputs = vec![y];
        g
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
            let x: Vec<f32> = (0..15).map(|i| (i as f32 * 0.71).cos() * 3.0).collect();
            let inputs = [Tensor::from_f32s(vec![3, 5], &x)];
            for portable in [false, true] {
                let want = floats(&run_bytes(&g, &inputs, portable)[0]);
                let got = floats(&run_bytes(&after, &inputs, portable)[0]);
                assert_all_close(&got, &want, 1e-6, &format!("{bias_shape:?}"));
            }
        }
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
