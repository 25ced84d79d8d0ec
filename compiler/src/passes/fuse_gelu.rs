//! GELU written out in elementwise operators, rewritten as one `Gelu`.
//!
//! PyTorch before opset 20 exports `gelu(x)` as `x / √2` (or `x · 1/√2`),
//! `Erf`, `+ 1`, and two `Mul`s by `x` and by 0.5 in some order: five steps
//! of the fused elementwise program, of which the four cheap ones cost
//! 40 % as much as the erf (measured on `[1, 128, 3072]`). As one `Gelu`
//! the program computes `x/2 · erf(x/√2) + x/2` in one step, the same
//! function up to rounding. Applies when each intermediate is read by the
//! next step alone, the constants are √2 (or its inverse), 1 and 0.5 to
//! f32 precision, and `x` has the output's float type and shape.

use super::pattern::{fuse_matches, Match, Matcher};
use crate::ir::{DType, Graph, ValueId};
use crate::ops::elementwise::{Elementwise, Func};
use crate::ops::Op;

pub fn fuse_gelu(graph: &mut Graph) {
    fuse_matches(graph, gelu);
}

/// The pattern ending at node `last`: the product of `x`, 0.5 and
/// `Erf(x/√2) + 1`.
fn gelu(m: &Matcher, last: usize) -> Option<Match> {
    let (factors, mut nodes) = m.factors(last)?;
    let [a, b, c] = factors[..] else { return None };
    let orders = [[a, b, c], [b, c, a], [c, a, b], [a, c, b], [b, a, c], [c, b, a]];
    let (x, parts) = orders.into_iter().find_map(|[half, x, shifted]| {
        (m.scalar(half) == Some(0.5)).then_some(())?;
        let (erf_input, [add, erf]) = erf_plus_one(m, shifted)?;
        let scaled = m.single_use(erf_input)?;
        (scaled_by_inverse_sqrt2(m, scaled)? == x).then_some((x, [add, erf, scaled]))
    })?;
    let dtype = m.output_type(last)?;
    (m.graph.concrete(x) == Some(dtype.clone()) && matches!(dtype.0, DType::F32 | DType::F64)).then_some(())?;
    nodes.extend(parts);
    let op = Op::Elementwise(Elementwise { op_type: "Gelu", func: Func::Gelu { tanh: false } });
    Some(Match { nodes, op, inputs: vec![x] })
}

/// `Erf(t) + 1` computing `v`: `t` and the two nodes.
fn erf_plus_one(m: &Matcher, v: ValueId) -> Option<(ValueId, [usize; 2])> {
    let add = m.single_use(v)?;
    let [p, q] = m.elementwise(add, Func::Add)?;
    let erf_out = [(p, q), (q, p)].into_iter().find_map(|(e, one)| (m.scalar(one) == Some(1.0)).then_some(e))?;
    let erf = m.single_use(erf_out)?;
    let [t] = m.elementwise(erf, Func::Erf)?;
    Some((t, [add, erf]))
}

/// The `x` of node `i` if it is `x / √2` or `x · (1/√2)`.
fn scaled_by_inverse_sqrt2(m: &Matcher, i: usize) -> Option<ValueId> {
    let near = |v: Option<f32>, want: f32| v.is_some_and(|v| (v - want).abs() <= want * 1e-6);
    if let Some([x, c]) = m.elementwise(i, Func::Div) {
        return near(m.scalar(c), core::f32::consts::SQRT_2).then_some(x);
    }
    let [p, q] = m.elementwise(i, Func::Mul)?;
    [(p, q), (q, p)].into_iter().find_map(|(x, c)| near(m.scalar(c), core::f32::consts::FRAC_1_SQRT_2).then_some(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, ValueDef};
    use crate::passes::test_graph::{assert_all_close, constant, floats, push, run_bytes, value};

    const SHAPE: [usize; 2] = [3, 37];

    /// `x * (erf(x / √2) + 1) * 0.5` in torch's order, or with the half
    /// first and the scale as a product; `extra_use` also makes the erf's
    /// output a graph output.
    fn graph(half_first: bool, multiply: bool, extra_use: bool) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &SHAPE, ValueDef::Input(0));
        let v = |g: &mut Graph, name: &str| value(g, name, &SHAPE, ValueDef::Computed);
        let (c, scale) = match multiply {
            true => (constant(&mut g, "c", &[], &[core::f32::consts::FRAC_1_SQRT_2]), ("Mul", Func::Mul)),
            false => (constant(&mut g, "c", &[], &[core::f32::consts::SQRT_2]), ("Div", Func::Div)),
        };
        let (one, half) = (constant(&mut g, "one", &[], &[1.0]), constant(&mut g, "half", &[], &[0.5]));
        let [t, e, a, m, y] = ["t", "e", "a", "m", "y"].map(|n| v(&mut g, n));
        push(&mut g, "scale", Elementwise { op_type: scale.0, func: scale.1 }, &[x, c], t);
        push(&mut g, "erf", Elementwise { op_type: "Erf", func: Func::Erf }, &[t], e);
        push(&mut g, "add", Elementwise { op_type: "Add", func: Func::Add }, &[one, e], a);
        let mul = || Elementwise { op_type: "Mul", func: Func::Mul };
        match half_first {
            true => {
                push(&mut g, "half", mul(), &[x, half], m);
                push(&mut g, "mul", mul(), &[m, a], y);
            }
            false => {
                push(&mut g, "mul", mul(), &[x, a], m);
                push(&mut g, "half", mul(), &[m, half], y);
            }
        }
        g.inputs.push(x);
        g.outputs.push(y);
        if extra_use {
            g.outputs.push(e);
        }
        g
    }

    fn gelus(g: &Graph) -> usize {
        g.nodes.iter().filter(|n| matches!(&n.op, Op::Elementwise(e) if e.func == Func::Gelu { tanh: false })).count()
    }

    #[test]
    fn the_written_out_forms_become_one_gelu_with_the_same_values() {
        let xs: Vec<f32> = (0..SHAPE[0] * SHAPE[1]).map(|i| (i as f32 - 55.0) * 0.09).collect();
        let x = Tensor::from_f32s(SHAPE.to_vec(), &xs);
        for (half_first, multiply) in [(false, false), (true, false), (false, true), (true, true)] {
            let reference = graph(half_first, multiply, false);
            let mut fused = reference.clone();
            fuse_gelu(&mut fused);
            assert_eq!(crate::passes::verify(&fused), Ok(()));
            assert_eq!((fused.nodes.len(), gelus(&fused)), (1, 1), "half first {half_first}, multiply {multiply}");
            let run = |g: &Graph| floats(&run_bytes(g, std::slice::from_ref(&x), false)[0]);
            assert_all_close(&run(&fused), &run(&reference), 1e-6, "fused vs written out");
        }
    }

    #[test]
    fn an_intermediate_read_elsewhere_or_another_constant_keeps_the_nodes() {
        let mut g = graph(false, false, true);
        fuse_gelu(&mut g);
        assert_eq!((g.nodes.len(), gelus(&g)), (5, 0));
        let mut g = graph(false, false, false);
        let half = g.nodes[4].inputs[1].expect("half");
        g.value_mut(half).def = ValueDef::Const(Tensor::from_f32s(vec![], &[0.25]));
        fuse_gelu(&mut g);
        assert_eq!(gelus(&g), 0);
    }
}
