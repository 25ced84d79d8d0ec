//! RMS normalisation written out in elementwise operators, rewritten as
//! one RMSNormalization (`Normalize`, kind `Rms`).
//!
//! Exporters of models older than opset 23 spell `x / sqrt(mean(x^2) +
//! eps) * scale` as `Pow(x, 2)` (or `Mul(x, x)`), `ReduceMean` over the
//! trailing axes with `keepdims`, `Add` of a scalar epsilon, `Sqrt`, then
//! `Div(x, r)` or `Mul(x, Reciprocal(r))`, then `Mul` by the scale: five
//! passes over the tensor, one of them a `powf` per element. The kernel
//! takes one pass for the statistics and one for the result, with the
//! mean of squares in f64 (the same values up to rounding). Applies when
//! every intermediate is read by the next step alone, the squared and the
//! divided tensor are the same `x` (a float type) and the scale broadcasts
//! to `x` without widening it ([`super::pattern`] says where the
//! Normalize goes).

use super::pattern::{fuse_matches, Match, Matcher};
use crate::ir::{DType, Graph, ValueId};
use crate::ops::elementwise::Func;
use crate::ops::norm::{NormKind, Normalize};
use crate::ops::Op;

pub fn fuse_rms_norm(graph: &mut Graph) {
    fuse_matches(graph, rms_norm);
}

/// The pattern ending at node `last`, `Mul(normalised, scale)`.
fn rms_norm(m: &Matcher, last: usize) -> Option<Match> {
    m.affine(last, Func::Mul).into_iter().find_map(|(normalised, scale)| {
        let (x, axis, epsilon, mut nodes) = normalised_by_rms(m, m.single_use(normalised)?)?;
        (m.graph.concrete(x) == m.output_type(last)).then_some(())?;
        nodes.insert(0, last);
        let kind = NormKind::Rms { axis: axis as i64 };
        let norm = Normalize { op_type: "RMSNormalization", kind, epsilon, stat_dtype: DType::F32 };
        Some(Match { nodes, op: Op::Normalize(norm), inputs: vec![x, scale] })
    })
}

/// `Div(x, r)` or `Mul(x, Reciprocal(r))` at node `i`, `r` the RMS of
/// `x`: `x`, the first reduced axis, epsilon and the nodes.
fn normalised_by_rms(m: &Matcher, i: usize) -> Option<(ValueId, usize, f32, Vec<usize>)> {
    let (x, r, mut nodes) = match m.elementwise(i, Func::Div) {
        Some([x, r]) => (x, r, vec![i]),
        None => {
            let [a, b] = m.elementwise(i, Func::Mul)?;
            let inverse = |x, inv| {
                let j = m.single_use(inv)?;
                let [r] = m.elementwise(j, Func::Reciprocal)?;
                Some((x, r, vec![i, j]))
            };
            inverse(a, b).or_else(|| inverse(b, a))?
        }
    };
    let (mean, epsilon, sqrt_add) = m.sqrt_plus_epsilon(r)?;
    let reduce = m.single_use(mean)?;
    let (axis, squares) = m.trailing_mean(reduce)?;
    let square = m.single_use(squares)?;
    m.squares(square, x).then_some(())?;
    nodes.extend(sqrt_add.into_iter().chain([reduce, square]));
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

    /// How the pattern squares and divides.
    #[derive(Clone, Copy, Debug)]
    enum Spelling {
        PowDiv,
        MulReciprocal,
    }

    /// The pattern over `x [2, 3, 8]`, reducing `axes`.
    fn graph(spelling: Spelling, axes: &[i64]) -> Graph {
        let shape = [2, 3, 8];
        let kept: Vec<usize> = (0..3).map(|d| if axes.contains(&(d as i64 - 3)) { 1 } else { shape[d] }).collect();
        let mut g = Graph::default();
        let x = value(&mut g, "x", &shape, ValueDef::Input(0));
        let scale_values: Vec<f32> = (0..8).map(|i| 0.5 + i as f32 * 0.25).collect();
        let scale = constant(&mut g, "scale", &[8], &scale_values);
        let axes_ty = TensorType::known(DType::I64, &[axes.len()]);
        let axes = g.add_value("axes", Some(axes_ty), ValueDef::Const(Tensor::from_i64s(vec![axes.len()], axes)));
        let [two, eps] = [("two", 2.0), ("eps", 1e-5)].map(|(name, v)| constant(&mut g, name, &[], &[v]));
        let [sq, y] = ["sq", "y"].map(|name| value(&mut g, name, &shape, ValueDef::Computed));
        let [ms, sum, r] = ["ms", "sum", "r"].map(|name| value(&mut g, name, &kept, ValueDef::Computed));
        let ew = |op_type, func| Elementwise { op_type, func };
        match spelling {
            Spelling::PowDiv => push(&mut g, "pow", ew("Pow", Func::Pow), &[x, two], sq),
            Spelling::MulReciprocal => push(&mut g, "square", ew("Mul", Func::Mul), &[x, x], sq),
        }
        let mean =
            Reduce { op_type: "ReduceMean", kind: ReduceKind::Mean, keepdims: true, noop_with_empty_axes: false };
        push(&mut g, "mean", Op::Reduce(mean), &[sq, axes], ms);
        push(&mut g, "add", ew("Add", Func::Add), &[eps, ms], sum);
        push(&mut g, "sqrt", ew("Sqrt", Func::Sqrt), &[sum], r);
        let n = value(&mut g, "n", &shape, ValueDef::Computed);
        match spelling {
            Spelling::PowDiv => push(&mut g, "div", ew("Div", Func::Div), &[x, r], n),
            Spelling::MulReciprocal => {
                let inv = value(&mut g, "inv", &kept, ValueDef::Computed);
                push(&mut g, "reciprocal", ew("Reciprocal", Func::Reciprocal), &[r], inv);
                push(&mut g, "times", ew("Mul", Func::Mul), &[inv, x], n);
            }
        }
        push(&mut g, "scale", ew("Mul", Func::Mul), &[n, scale], y);
        g.inputs = vec![x];
        g.outputs = vec![y];
        g
    }

    #[test]
    fn the_written_out_pattern_becomes_one_rms_normalization() {
        let x: Vec<f32> = (0..48).map(|i| (i as f32 * 0.37).sin() * 2.0 + 0.3).collect();
        let inputs = [Tensor::from_f32s(vec![2, 3, 8], &x)];
        for (spelling, axes) in [(Spelling::PowDiv, &[-1][..]), (Spelling::MulReciprocal, &[-1, -2])] {
            let g = graph(spelling, axes);
            let mut after = g.clone();
            fuse_rms_norm(&mut after);
            assert_eq!(crate::passes::verify(&after), Ok(()));
            assert_eq!(after.nodes.len(), 1, "{spelling:?}");
            let Op::Normalize(norm) = &after.nodes[0].op else { panic!("not a Normalize: {:?}", after.nodes[0].op) };
            assert!(matches!(norm.kind, NormKind::Rms { axis } if axis == 3 - axes.len() as i64));
            assert_eq!(norm.epsilon, 1e-5);
            let want = floats(&run_bytes(&g, &inputs, false)[0]);
            let got = floats(&run_bytes(&after, &inputs, false)[0]);
            assert_all_close(&got, &want, 1e-5, &format!("{spelling:?}"));
        }
    }

    /// A mean read elsewhere, or over an axis that is not trailing, stays.
    #[test]
    fn shared_intermediates_and_other_axes_are_left_alone() {
        let mut g = graph(Spelling::PowDiv, &[-1]);
        let mean = g.nodes[1].outputs[0];
        g.outputs.push(mean);
        fuse_rms_norm(&mut g);
        assert_eq!(g.nodes.len(), 6);
        let mut g = graph(Spelling::PowDiv, &[-2]);
        fuse_rms_norm(&mut g);
        assert_eq!(g.nodes.len(), 6);
    }
}
