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
//! divided tensor are the same `x` (a float type), the scale broadcasts to
//! `x` without widening it, and the nodes share one guarded or repeated
//! range; the Normalize takes the final `Mul`'s place in the schedule.

use super::{producers, regions, use_counts};
use crate::ir::shape::broadcast;
use crate::ir::{DType, Graph, ValueId};
use crate::ops::elementwise::Func;
use crate::ops::norm::{NormKind, Normalize};
use crate::ops::Op;
use std::collections::HashMap;

pub fn fuse_rms_norm(graph: &mut Graph) {
    let matcher = Matcher { graph, uses: use_counts(graph), producer: producers(graph) };
    let region = regions(graph);
    let mut fused = Vec::new();
    let mut removed = vec![false; graph.nodes.len()];
    for last in 0..graph.nodes.len() {
        let Some(found) = matcher.rms_norm(last) else { continue };
        if found.nodes.iter().any(|&i| removed[i] || region[i] != region[last]) {
            continue;
        }
        found.nodes.iter().filter(|&&i| i != last).for_each(|&i| removed[i] = true);
        fused.push((last, found));
    }
    for (last, mut found) in fused {
        found.nodes.sort_unstable();
        let name = found.nodes.iter().map(|&i| graph.nodes[i].name.as_str()).collect::<Vec<_>>().join("+");
        let node = &mut graph.nodes[last];
        let kind = NormKind::Rms { axis: found.axis as i64 };
        node.op = Op::Normalize(Normalize {
            op_type: "RMSNormalization",
            kind,
            epsilon: found.epsilon,
            stat_dtype: DType::F32,
        });
        node.inputs = vec![Some(found.x), Some(found.scale)];
        node.name = name;
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

/// One match: the normalised input, the scale, the first reduced axis,
/// epsilon, and the indices of the nodes it replaces.
struct RmsNorm {
    x: ValueId,
    scale: ValueId,
    axis: usize,
    epsilon: f32,
    nodes: Vec<usize>,
}

/// The graph with the uses and producer of each value.
struct Matcher<'a> {
    graph: &'a Graph,
    uses: HashMap<ValueId, usize>,
    producer: HashMap<ValueId, usize>,
}

impl Matcher<'_> {
    /// The pattern ending at node `last`, `Mul(normalised, scale)`.
    fn rms_norm(&self, last: usize) -> Option<RmsNorm> {
        let [a, b] = self.elementwise(last, Func::Mul)?;
        let out_type = self.graph.concrete(self.graph.nodes[last].outputs[0])?;
        if !matches!(out_type.0, DType::F16 | DType::BF16 | DType::F32 | DType::F64) {
            return None;
        }
        [(a, b), (b, a)].into_iter().find_map(|(normalised, scale)| {
            let (dtype, scale_shape) = self.graph.concrete(scale)?;
            let fits = dtype == out_type.0 && broadcast(&scale_shape, &out_type.1).as_ref() == Some(&out_type.1);
            let mut found = self.normalised(self.single_use(normalised)?).filter(|_| fits)?;
            (self.graph.concrete(found.x)? == out_type).then_some(())?;
            found.scale = scale;
            found.nodes.push(last);
            Some(found)
        })
    }

    /// `Div(x, r)` or `Mul(x, Reciprocal(r))` at node `i`, `r` the RMS of
    /// `x` (the scale still to be filled in).
    fn normalised(&self, i: usize) -> Option<RmsNorm> {
        let (x, r, mut nodes) = match self.elementwise(i, Func::Div) {
            Some([x, r]) => (x, r, vec![i]),
            None => {
                let [a, b] = self.elementwise(i, Func::Mul)?;
                let inverse = |x, inv| {
                    let j = self.single_use(inv)?;
                    let [r] = self.elementwise(j, Func::Reciprocal)?;
                    Some((x, r, vec![j, i]))
                };
                inverse(a, b).or_else(|| inverse(b, a))?
            }
        };
        let (axis, epsilon, rms_nodes) = self.root_mean_square(r, x)?;
        nodes.extend(rms_nodes);
        Some(RmsNorm { x, scale: x, axis, epsilon, nodes })
    }

    /// `Sqrt(Add(ReduceMean(x^2), eps))` computing `r`: the first reduced
    /// axis, epsilon and the nodes.
    fn root_mean_square(&self, r: ValueId, x: ValueId) -> Option<(usize, f32, Vec<usize>)> {
        let sqrt = self.single_use(r)?;
        let [sum] = self.elementwise(sqrt, Func::Sqrt)?;
        let add = self.single_use(sum)?;
        let [a, b] = self.elementwise(add, Func::Add)?;
        let scalar = |v: ValueId| self.graph.const_value(v).filter(|t| t.len() == 1).map(|t| t.get_f64(0) as f32);
        let (mean, epsilon) = [(a, b), (b, a)].into_iter().find_map(|(m, e)| Some((m, scalar(e)?)))?;
        let reduce = self.single_use(mean)?;
        let (axis, squares) = self.trailing_mean(reduce)?;
        let square = self.single_use(squares)?;
        let squared = match (self.elementwise(square, Func::Pow), self.elementwise(square, Func::Mul)) {
            (Some([base, two]), _) => base == x && scalar(two) == Some(2.0),
            (_, Some([p, q])) => p == x && q == x,
            _ => false,
        };
        squared.then(|| (axis, epsilon, vec![sqrt, add, reduce, square]))
    }

    /// Node `i` as a ReduceMean over the trailing axes from `axis` on,
    /// keeping them: `axis` and the reduced value.
    fn trailing_mean(&self, i: usize) -> Option<(usize, ValueId)> {
        let node = &self.graph.nodes[i];
        let Op::Reduce(reduce) = &node.op else { return None };
        let [Some(input), Some(axes)] = node.inputs[..] else { return None };
        let rank = self.graph.concrete(input)?.1.len();
        let keeps = reduce.kind == crate::ops::reduce::ReduceKind::Mean && reduce.keepdims;
        let mut axes: Vec<usize> = self
            .graph
            .const_value(axes)?
            .to_i64s()
            .iter()
            .map(|&a| a.rem_euclid(rank.max(1) as i64) as usize)
            .collect();
        axes.sort_unstable();
        let first = *axes.first()?;
        (keeps && axes.iter().copied().eq(first..rank)).then_some((first, input))
    }

    /// The two or one inputs of elementwise node `i` if it computes `func`.
    fn elementwise<const N: usize>(&self, i: usize, func: Func) -> Option<[ValueId; N]> {
        let node = &self.graph.nodes[i];
        let Op::Elementwise(e) = &node.op else { return None };
        if e.func != func || node.inputs.len() != N {
            return None;
        }
        let mut inputs = [node.inputs[0]?; N];
        for (k, input) in node.inputs.iter().enumerate() {
            inputs[k] = (*input)?;
        }
        Some(inputs)
    }

    /// The node computing `v` if nothing else reads it.
    fn single_use(&self, v: ValueId) -> Option<usize> {
        (self.uses.get(&v) == Some(&1)).then(|| self.producer.get(&v).copied())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, TensorType, ValueDef};
    use crate::ops::elementwise::Elementwise;
    use crate::ops::reduce::{Reduce, ReduceKind};
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
