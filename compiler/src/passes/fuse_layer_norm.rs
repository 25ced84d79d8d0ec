//! Layer normalisation written out in elementwise operators, rewritten as
//! one LayerNormalization (`Normalize`, kind `Layer`).
//!
//! Exporters for opsets before 17 spell it `d = Sub(x, ReduceMean(x))`,
//! `Pow(d, 2)` (or `Mul(d, d)`), `ReduceMean` of that, `Add` of a scalar
//! epsilon, `Sqrt`, `Div(d, ...)`, `Mul` by the scale and `Add` of the
//! bias, both means over the same trailing axes with `keepdims`: eight
//! passes over the tensor, one of them a `powf` per element. The kernel
//! takes three, with the statistics totalled in f64 (the same values up to
//! rounding). Applies when every intermediate is read by the next steps
//! alone (`d` by the square and the division), `x` has a float type and
//! the scale and bias broadcast to it without widening it
//! ([`super::pattern`] says where the Normalize goes).

use super::pattern::{fuse_matches, Match, Matcher};
use crate::ir::{DType, Graph, ValueId};
use crate::ops::elementwise::Func;
use crate::ops::norm::{NormKind, Normalize};
use crate::ops::Op;

pub fn fuse_layer_norm(graph: &mut Graph) {
    fuse_matches(graph, layer_norm);
}

/// The pattern ending at node `last`, `Add(Mul(normalised, scale), bias)`.
fn layer_norm(m: &Matcher, last: usize) -> Option<Match> {
    m.affine(last, Func::Add).into_iter().find_map(|(scaled, bias)| {
        let mul = m.single_use(scaled)?;
        m.affine(mul, Func::Mul).into_iter().find_map(|(normalised, scale)| {
            let (x, axis, epsilon, mut nodes) = standardised(m, m.single_use(normalised)?)?;
            (m.graph.concrete(x) == m.output_type(last)).then_some(())?;
            nodes.splice(0..0, [last, mul]);
            let kind = NormKind::Layer { axis: axis as i64 };
            let norm = Normalize { op_type: "LayerNormalization", kind, epsilon, stat_dtype: DType::F32 };
            Some(Match { nodes, op: Op::Normalize(norm), inputs: vec![x, scale, bias] })
        })
    })
}

/// `Div(d, sqrt(mean(d^2) + eps))` at node `i` with `d = x - mean(x)`:
/// `x`, the first reduced axis, epsilon and the nodes.
fn standardised(m: &Matcher, i: usize) -> Option<(ValueId, usize, f32, Vec<usize>)> {
    let [d, r] = m.elementwise(i, Func::Div)?;
    let (variance, epsilon, sqrt_add) = m.sqrt_plus_epsilon(r)?;
    let reduce_squares = m.single_use(variance)?;
    let (axis, squares) = m.trailing_mean(reduce_squares)?;
    let square = m.single_use(squares)?;
    m.squares(square, d).then_some(())?;
    let square_reads = m.graph.nodes[square].inputs.iter().filter(|&&v| v == Some(d)).count();
    let sub = m.producer_used(d, 1 + square_reads)?;
    let [x, mean] = m.elementwise(sub, Func::Sub)?;
    let reduce_x = m.single_use(mean)?;
    (m.trailing_mean(reduce_x)? == (axis, x)).then_some(())?;
    let nodes = [i].into_iter().chain(sqrt_add).chain([reduce_squares, square, sub, reduce_x]).collect();
    Some((x, axis, epsilon, nodes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, TensorType, ValueDef};
    use crate::ops::elementwise::Elementwise;
    use crate::ops::reduce::{Reduce, ReduceKind};
    use crate::ops::Op;
    use crate::passes::test_graph::{assert_all_close, constant, floats, push, run_bytes, value};

    /// The pattern over `x [2, 3, 8]` reducing `axes`, squaring by `Pow`
    /// or `Mul`.
    fn graph(pow: bool, axes: &[i64]) -> Graph {
        let shape = [2, 3, 8];
        let kept: Vec<usize> = (0..3).map(|d| if axes.contains(&(d as i64 - 3)) { 1 } else { shape[d] }).collect();
        let mut g = Graph::default();
        let x = value(&mut g, "x", &shape, ValueDef::Input(0));
        let ramp = |from: f32| (0..8).map(|i| from + i as f32 * 0.25).collect::<Vec<f32>>();
        let (scale, bias) = (constant(&mut g, "scale", &[8], &ramp(0.5)), constant(&mut g, "bias", &[8], &ramp(-1.0)));
        let axes_ty = TensorType::known(DType::I64, &[axes.len()]);
        let axes = g.add_value("axes", Some(axes_ty), ValueDef::Const(Tensor::from_i64s(vec![axes.len()], axes)));
        let [two, eps] = [("two", 2.0), ("eps", 1e-5)].map(|(name, v)| constant(&mut g, name, &[], &[v]));
        let [d, sq, n, scaled, y] =
            ["d", "sq", "n", "scaled", "y"].map(|v| value(&mut g, v, &shape, ValueDef::Computed));
        let [mean, var, sum, r] = ["mean", "var", "sum", "r"].map(|v| value(&mut g, v, &kept, ValueDef::Computed));
        let ew = |op_type, func| Elementwise { op_type, func };
        let reduce_mean =
            || Reduce { op_type: "ReduceMean", kind: ReduceKind::Mean, keepdims: true, noop_with_empty_axes: false };
        push(&mut g, "mean", Op::Reduce(reduce_mean()), &[x, axes], mean);
        push(&mut g, "sub", ew("Sub", Func::Sub), &[x, mean], d);
        match pow {
            true => push(&mut g, "pow", ew("Pow", Func::Pow), &[d, two], sq),
            false => push(&mut g, "square", ew("Mul", Func::Mul), &[d, d], sq),
        }
        push(&mut g, "var", Op::Reduce(reduce_mean()), &[sq, axes], var);
        push(&mut g, "add_eps", ew("Add", Func::Add), &[var, eps], sum);
        push(&mut g, "sqrt", ew("Sqrt", Func::Sqrt), &[sum], r);
        push(&mut g, "div", ew("Div", Func::Div), &[d, r], n);
        push(&mut g, "scale", ew("Mul", Func::Mul), &[scale, n], scaled);
        push(&mut g, "bias", ew("Add", Func::Add), &[scaled, bias], y);
        g.inputs = vec![x];
        g.outputs = vec![y];
        g
    }

    #[test]
    fn the_written_out_pattern_becomes_one_layer_normalization() {
        let x: Vec<f32> = (0..48).map(|i| (i as f32 * 0.37).sin() * 2.0 + 5.0).collect();
        let inputs = [Tensor::from_f32s(vec![2, 3, 8], &x)];
        for (pow, axes) in [(true, &[-1][..]), (false, &[-2, -1])] {
            let g = graph(pow, axes);
            let mut after = g.clone();
            fuse_layer_norm(&mut after);
            assert_eq!(crate::passes::verify(&after), Ok(()));
            assert_eq!(after.nodes.len(), 1, "pow {pow}");
            let Op::Normalize(norm) = &after.nodes[0].op else { panic!("not a Normalize: {:?}", after.nodes[0].op) };
            assert!(matches!(norm.kind, NormKind::Layer { axis } if axis == 3 - axes.len() as i64));
            let want = floats(&run_bytes(&g, &inputs, false)[0]);
            let got = floats(&run_bytes(&after, &inputs, false)[0]);
            assert_all_close(&got, &want, 1e-5, &format!("pow {pow}"));
        }
    }

    /// A deviation read elsewhere, or a variance over other axes than the
    /// mean, stays.
    #[test]
    fn shared_intermediates_and_mismatched_axes_are_left_alone() {
        let mut g = graph(true, &[-1]);
        let d = g.nodes[1].outputs[0];
        g.outputs.push(d);
        fuse_layer_norm(&mut g);
        assert_eq!(g.nodes.len(), 9);
        let mut g = graph(false, &[-1]);
        let other_axes = g.add_value("axes2", None, ValueDef::Const(Tensor::from_i64s(vec![2], &[-2, -1])));
        g.nodes[3].inputs[1] = Some(other_axes);
        fuse_layer_norm(&mut g);
        assert_eq!(g.nodes.len(), 9);
    }
}
