//! Constant f32 MatMul and Gemm weights packed at compile time.
//!
//! The gemm kernel packs its B operand into panels on every call, and for
//! a weight matrix larger than L2 it reads each depth step of a panel from
//! a row far from the last, which no prefetcher follows. Packed here, once,
//! into the kernel library's CPU-independent strips
//! (`onnxc_runtime::pack_b_strips`), B is read as contiguous runs instead.
//! The packed constant replaces input 1 and the node keeps B's logical
//! shape in `packed_b`.
//!
//! Applies to f32 MatMul with a constant matrix B (rank 2, so one packed
//! matrix serves every batch) and f32 Gemm with a constant B, when the
//! product has more rows than the few-rows path takes (that path reads B
//! once, in place, in either layout) and the code calls kernels at all.
//! Runs after the rewrites that make a Gemm of a MatMul.

use crate::ir::{Graph, Tensor};
use crate::ops::Op;
use onnxc_runtime::generic::gemv::FEW_ROWS;
use onnxc_runtime::{b_strips_len, pack_b_strips, MatRef};

pub fn pack_gemm_weights(graph: &mut Graph) {
    for index in 0..graph.nodes.len() {
        let Some((x_shape, weights)) = super::f32_input_and_weights(graph, index) else { continue };
        let Some((k, n, transposed)) = packable(&graph.nodes[index].op, &x_shape, &weights.shape) else { continue };
        let Some(packed) = packed(weights, k, n, transposed) else { continue };
        let logical = weights.shape.clone();
        super::swap_in_packed(graph, index, 1, "strips", &packed);
        match &mut graph.nodes[index].op {
            Op::MatMul(matmul) => matmul.packed_b = Some(logical),
            Op::Gemm(gemm) => gemm.packed_b = Some(logical),
            _ => {}
        }
    }
}

/// `(k, n, transposed)` of the product's B when `op` with an A of shape
/// `a` and constant B of shape `b` takes packed weights.
fn packable(op: &Op, a: &[usize], b: &[usize]) -> Option<(usize, usize, bool)> {
    let (rows, transposed) = match op {
        Op::MatMul(m) if m.packed_b.is_none() && a.len() >= 2 => (a[..a.len() - 1].iter().product(), false),
        Op::Gemm(g) if g.packed_b.is_none() && a.len() == 2 => (if g.trans_a { a[1] } else { a[0] }, g.trans_b),
        _ => return None,
    };
    let &[b0, b1] = b else { return None };
    let (k, n) = if transposed { (b1, b0) } else { (b0, b1) };
    (rows > FEW_ROWS && k > 0 && n > 0).then_some((k, n, transposed))
}

/// `weights` (`k x n`, or `n x k` when `transposed`) packed into strips.
fn packed(weights: &Tensor, k: usize, n: usize, transposed: bool) -> Option<Vec<f32>> {
    let values = weights.to_f32s()?;
    let (rs, cs) = if transposed { (1, k as isize) } else { (n as isize, 1) };
    let mut strips = vec![0.0f32; b_strips_len(k, n)];
    // SAFETY: `values` holds the `k x n` matrix that the strides address,
    // `strips` the packed length for it.
    unsafe { pack_b_strips(k, n, MatRef { ptr: values.as_ptr(), rs, cs }, strips.as_mut_ptr()) };
    Some(strips)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ValueDef, ValueId};
    use crate::ops::linalg::{Gemm, MatMul};
    use crate::passes::test_graph::{assert_all_close, push, run_bytes, value};

    fn floats(len: usize, scale: f32) -> Vec<f32> {
        (0..len).map(|i| (i as f32 * scale).sin()).collect()
    }

    /// `y = op(x[x_shape], w[w_shape])` with a constant `w`.
    fn graph(op: Op, x_shape: &[usize], w_shape: &[usize], y_shape: &[usize]) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", x_shape, ValueDef::Input(0));
        let len = w_shape.iter().product();
        let w = value(&mut g, "w", w_shape, ValueDef::Const(Tensor::from_f32s(w_shape.to_vec(), &floats(len, 0.37))));
        let y = value(&mut g, "y", y_shape, ValueDef::Computed);
        push(&mut g, "product", op, &[x, w], y);
        g.inputs.push(x);
        g.outputs.push(y);
        g
    }

    fn packed_input(g: &Graph) -> ValueId {
        g.nodes[0].inputs[1].expect("weights")
    }

    /// Packs `reference`, checks the node took strips, and that the
    /// results agree with the unpacked graph's.
    fn check(reference: Graph, x_shape: &[usize], strips_len: usize) {
        let mut packed = reference.clone();
        pack_gemm_weights(&mut packed);
        assert_eq!(crate::passes::verify(&packed), Ok(()));
        let w = packed_input(&packed);
        assert_ne!(w, packed_input(&reference), "not packed");
        assert_eq!(packed.const_value(w).map(|t| t.shape.clone()), Some(vec![strips_len]));
        let x = Tensor::from_f32s(x_shape.to_vec(), &floats(x_shape.iter().product(), 0.71));
        let bits = |g: &Graph| run_bytes(g, std::slice::from_ref(&x), false).remove(0);
        let floats = |bytes: Vec<u8>| bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let (want, got): (Vec<f32>, Vec<f32>) = (floats(bits(&reference)), floats(bits(&packed)));
        assert_all_close(&got, &want, 1e-5, "packed vs reference");
    }

    /// A sequence times a weight matrix whose 21 columns end in a partial
    /// strip and a partial tile.
    #[test]
    fn matmul_weights_are_packed_and_the_result_kept() {
        let reference = graph(Op::MatMul(MatMul::default()), &[1, 7, 30], &[30, 21], &[1, 7, 21]);
        let mut packed = reference.clone();
        pack_gemm_weights(&mut packed);
        let Op::MatMul(m) = &packed.nodes[0].op else { panic!("not a MatMul") };
        assert_eq!(m.packed_b, Some(vec![30, 21]));
        check(reference, &[1, 7, 30], 24 * 30);
    }

    /// Gemm with transB (a Linear layer's `[N, K]` weights) and alpha.
    #[test]
    fn transposed_gemm_weights_are_packed_and_the_result_kept() {
        let op = Op::Gemm(Gemm { alpha: 0.5, beta: 1.0, trans_a: false, trans_b: true, packed_b: None });
        check(graph(op, &[5, 40], &[33, 40], &[5, 33]), &[5, 40], 40 * 40);
    }

    /// One or two rows keep B as it is, as does a batched B.
    #[test]
    fn few_rows_and_batched_weights_stay() {
        for (x, w, y) in
            [(&[2usize, 30][..], &[30usize, 21][..], &[2usize, 21][..]), (&[3, 7, 30], &[3, 30, 21], &[3, 7, 21])]
        {
            let reference = graph(Op::MatMul(MatMul::default()), x, w, y);
            let mut packed = reference.clone();
            pack_gemm_weights(&mut packed);
            assert_eq!(packed_input(&packed), packed_input(&reference), "{x:?} x {w:?}");
        }
    }
}
