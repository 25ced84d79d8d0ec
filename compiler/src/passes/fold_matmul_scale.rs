//! `Mul(MatMul(A, B), c)` and `Div(MatMul(A, B), c)`, `c` a constant
//! scalar, computed as one MatMul whose kernel scales the product
//! (`alpha`, as Gemm's).
//!
//! Attention scales its scores by `1 / sqrt(d)` after `Q Kᵀ`: written as a
//! separate Div, that is a pass over the largest tensor of the layer
//! (Whisper's `6 x 1500 x 1500` scores took 5.3 of its 180 ms), where the
//! product's stores can scale each element on the way. A Div becomes a
//! product by `1 / c`: the same value where `c` is a power of two (as
//! `sqrt(64)` is), within a rounding of it otherwise. Applies to f32 and
//! f64 MatMul whose product the Mul or Div alone reads, when the scalar
//! does not widen the product's shape; the MatMul takes the Mul's place.
//! Runs after the rewrites that make Gemm of a MatMul, which look for an
//! unscaled one.

use super::pattern::{fuse_matches, Match, Matcher};
use crate::ir::{DType, Graph};
use crate::ops::elementwise::Func;
use crate::ops::Op;

pub fn fold_matmul_scale(graph: &mut Graph) {
    fuse_matches(graph, |m, i| scaled_product(m, i, Func::Mul).or_else(|| scaled_product(m, i, Func::Div)));
}

/// The MatMul computing node `i`, a `func` (Mul or Div) of a product by a
/// constant scalar.
fn scaled_product(m: &Matcher, i: usize, func: Func) -> Option<Match> {
    let divides = func == Func::Div;
    let numerator = m.graph.nodes[i].inputs.first().copied().flatten();
    let (product, factor) = m
        .affine(i, func)
        .into_iter()
        .filter(|&(value, _)| !divides || Some(value) == numerator)
        .find_map(|(value, operand)| Some((value, m.scalar(operand)?)))?;
    let matmul = m.single_use(product)?;
    let node = &m.graph.nodes[matmul];
    let (Op::MatMul(mm), Some((DType::F32 | DType::F64, _))) = (&node.op, m.output_type(matmul)) else {
        return None;
    };
    let factor = if divides { 1.0 / factor as f64 } else { factor as f64 };
    let op = Op::MatMul(crate::ops::linalg::MatMul { alpha: mm.alpha * factor, ..mm.clone() });
    Some(Match { nodes: vec![i, matmul], op, inputs: node.inputs.iter().copied().collect::<Option<Vec<_>>>()? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, ValueDef};
    use crate::ops::elementwise::Elementwise;
    use crate::ops::linalg::MatMul;
    use crate::passes::test_graph::{assert_all_close, push, run_bytes, value};

    /// `y = op(MatMul(a[2,3,5], b[2,5,4]), 8)` (attention's scores scaled).
    fn graph(op_type: &'static str, func: Func) -> Graph {
        let mut g = Graph::default();
        let a = value(&mut g, "a", &[2, 3, 5], ValueDef::Input(0));
        let b = value(&mut g, "b", &[2, 5, 4], ValueDef::Input(1));
        let c = value(&mut g, "c", &[], ValueDef::Const(Tensor::from_f32s(vec![], &[8.0])));
        let p = value(&mut g, "p", &[2, 3, 4], ValueDef::Computed);
        let y = value(&mut g, "y", &[2, 3, 4], ValueDef::Computed);
        push(&mut g, "mm", MatMul::default(), &[a, b], p);
        push(&mut g, "scale", Elementwise { op_type, func }, &[p, c], y);
        g.inputs.extend([a, b]);
        g.outputs.push(y);
        g
    }

    fn floats(shape: &[usize], scale: f32) -> Tensor {
        let values: Vec<f32> = (0..shape.iter().product()).map(|i| (i as f32 * scale).sin()).collect();
        Tensor::from_f32s(shape.to_vec(), &values)
    }

    #[test]
    fn a_scalar_scale_becomes_the_products_alpha() {
        for (op_type, func, alpha) in [("Div", Func::Div, 0.125), ("Mul", Func::Mul, 8.0)] {
            let reference = graph(op_type, func);
            let mut folded = reference.clone();
            fold_matmul_scale(&mut folded);
            assert_eq!(crate::passes::verify(&folded), Ok(()));
            assert_eq!(folded.nodes.len(), 1, "{op_type}");
            let Op::MatMul(mm) = &folded.nodes[0].op else { panic!("not a MatMul") };
            assert_eq!(mm.alpha, alpha);
            let inputs = [floats(&[2, 3, 5], 0.37), floats(&[2, 5, 4], 0.71)];
            let f32s = |bytes: Vec<u8>| -> Vec<f32> {
                bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
            };
            let want = f32s(run_bytes(&reference, &inputs, false).remove(0));
            let got = f32s(run_bytes(&folded, &inputs, false).remove(0));
            assert_all_close(&got, &want, 0.0, op_type);
        }
    }

    /// A divisor that is the product, and a product read twice, stay.
    #[test]
    fn other_quotients_and_shared_products_stay() {
        let mut g = graph("Div", Func::Div);
        g.nodes[1].inputs.reverse();
        let before = g.nodes.len();
        fold_matmul_scale(&mut g);
        assert_eq!(g.nodes.len(), before, "c / product");
        let mut g = graph("Mul", Func::Mul);
        let p = g.nodes[0].outputs[0];
        g.outputs.push(p);
        fold_matmul_scale(&mut g);
        assert_eq!(g.nodes.len(), 2, "product read twice");
    }
}
