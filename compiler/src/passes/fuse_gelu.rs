//! GELU written out in elementwise operators, rewritten as one `Gelu`.
//!
//! PyTorch before opset 20 exports `gelu(x)` as `x / √2` (or `x · 1/√2`),
//! `Erf`, `+ 1`, and two `Mul`s by `x` and by 0.5 in some order: five steps
//! of the fused elementwise program, of which the four cheap ones cost
//! 40 % as much as the erf (measured on `[1, 128, 3072]`); its tanh form
//! (GPT-2's) takes nine, the cube as `Mul`s or a `Pow`. As one `Gelu` the
//! program computes `x/2 · erf(x/√2) + x/2` (or the tanh form) in one
//! step, the same function up to rounding. Applies when each intermediate
//! is read by the next step alone, the constants are √2 (or its inverse),
//! √(2/π), 0.044715, 1 and 0.5 to f32 precision, and `x` has the output's
//! float type and shape.

use super::pattern::{fuse_matches, Match, Matcher};
use crate::ir::{DType, Graph, ValueId};
use crate::ops::elementwise::{Elementwise, Func};
use crate::ops::Op;

pub fn fuse_gelu(graph: &mut Graph) {
    fuse_matches(graph, gelu);
}

/// The pattern ending at node `last`: the product of `x`, 0.5 and
/// `Erf(x/√2) + 1` or `Tanh(√(2/π) (x + 0.044715 x³)) + 1`.
fn gelu(m: &Matcher, last: usize) -> Option<Match> {
    let (factors, mut nodes) = m.factors(last)?;
    let [a, b, c] = factors[..] else { return None };
    let orders = [[a, b, c], [b, c, a], [c, a, b], [a, c, b], [b, a, c], [c, b, a]];
    let (x, tanh, parts) = orders.into_iter().find_map(|[half, x, shifted]| {
        (m.scalar(half) == Some(0.5)).then_some(())?;
        let (func, argument, mut parts) = one_plus(m, shifted)?;
        let argument = m.single_use(argument)?;
        let tanh = func == Func::Tanh;
        parts.extend(match tanh {
            true => tanh_argument(m, argument, x)?,
            false => vec![erf_argument(m, argument, x)?],
        });
        Some((x, tanh, parts))
    })?;
    let dtype = m.output_type(last)?;
    (m.graph.concrete(x) == Some(dtype.clone()) && matches!(dtype.0, DType::F32 | DType::F64)).then_some(())?;
    nodes.extend(parts);
    let op = Op::Elementwise(Elementwise { op_type: "Gelu", func: Func::Gelu { tanh } });
    Some(Match { nodes, op, inputs: vec![x] })
}

/// `Erf(t) + 1` or `Tanh(t) + 1` computing `v`: the function, `t` and the
/// two nodes.
fn one_plus(m: &Matcher, v: ValueId) -> Option<(Func, ValueId, Vec<usize>)> {
    let add = m.single_use(v)?;
    let [p, q] = m.elementwise(add, Func::Add)?;
    let f_out = [(p, q), (q, p)].into_iter().find_map(|(f, one)| (m.scalar(one) == Some(1.0)).then_some(f))?;
    let f = m.single_use(f_out)?;
    [Func::Erf, Func::Tanh].into_iter().find_map(|func| Some((func, m.elementwise::<1>(f, func)?[0], vec![add, f])))
}

/// Whether `v` is `want` to f32 precision.
fn near(m: &Matcher, v: ValueId, want: f32) -> bool {
    m.scalar(v).is_some_and(|v| (v - want).abs() <= want * 1e-6)
}

/// The operand of node `i`, a binary `func`, that the other (a constant
/// near `c`) scales.
fn scaled(m: &Matcher, i: usize, func: Func, c: f32) -> Option<ValueId> {
    let [p, q] = m.elementwise(i, func)?;
    let orders = if func == Func::Mul { vec![(p, q), (q, p)] } else { vec![(p, q)] };
    orders.into_iter().find_map(|(v, k)| near(m, k, c).then_some(v))
}

/// Node `i` if it is `x / √2` or `x · (1/√2)`.
fn erf_argument(m: &Matcher, i: usize, x: ValueId) -> Option<usize> {
    let v = scaled(m, i, Func::Div, core::f32::consts::SQRT_2)
        .or_else(|| scaled(m, i, Func::Mul, core::f32::consts::FRAC_1_SQRT_2))?;
    (v == x).then_some(i)
}

/// The nodes of `√(2/π) (x + 0.044715 x³)` ending at node `i`.
fn tanh_argument(m: &Matcher, i: usize, x: ValueId) -> Option<Vec<usize>> {
    let sum = m.single_use(scaled(m, i, Func::Mul, 0.797_884_6)?)?;
    let [p, q] = m.elementwise(sum, Func::Add)?;
    let cubed = [(p, q), (q, p)].into_iter().find_map(|(v, t)| (v == x).then_some(t))?;
    let product = m.single_use(cubed)?;
    let cube = m.single_use(scaled(m, product, Func::Mul, 0.044_715)?)?;
    let mut nodes = vec![i, sum, product, cube];
    nodes.extend(cube_of(m, cube, x)?);
    Some(nodes)
}

/// The nodes besides `i` if node `i` computes `x³`: `Pow(x, 3)`, or `x`
/// times a `Mul(x, x)` nothing else reads.
fn cube_of(m: &Matcher, i: usize, x: ValueId) -> Option<Vec<usize>> {
    if let Some([base, three]) = m.elementwise(i, Func::Pow) {
        return (base == x && m.scalar(three) == Some(3.0)).then(Vec::new);
    }
    let [p, q] = m.elementwise(i, Func::Mul)?;
    let square = [(p, q), (q, p)].into_iter().find_map(|(v, s)| (v == x).then_some(s))?;
    let j = m.single_use(square)?;
    (m.elementwise(j, Func::Mul)? == [x, x]).then(|| vec![j])
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

    /// GPT-2's `0.5 * (x * (1 + tanh(√(2/π) * (x + 0.044715 * x³))))`, the
    /// cube as `x * (x * x)` or `Pow(x, 3)`.
    fn tanh_graph(pow: bool) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &SHAPE, ValueDef::Input(0));
        let names = ["sq", "cube", "t", "sum", "arg", "th", "a", "m", "y"];
        let [sq, cube, t, sum, arg, th, a, m, y] = names.map(|n| value(&mut g, n, &SHAPE, ValueDef::Computed));
        let k = |g: &mut Graph, name: &str, v: f32| constant(g, name, &[], &[v]);
        let (c2, c1, one, half, three) = (
            k(&mut g, "c2", 0.044_715),
            k(&mut g, "c1", 0.797_884_6),
            k(&mut g, "one", 1.0),
            k(&mut g, "half", 0.5),
            k(&mut g, "three", 3.0),
        );
        let f = |op_type, func| Elementwise { op_type, func };
        match pow {
            true => push(&mut g, "pow", f("Pow", Func::Pow), &[x, three], cube),
            false => {
                push(&mut g, "sq", f("Mul", Func::Mul), &[x, x], sq);
                push(&mut g, "cube", f("Mul", Func::Mul), &[x, sq], cube);
            }
        }
        push(&mut g, "t", f("Mul", Func::Mul), &[c2, cube], t);
        push(&mut g, "sum", f("Add", Func::Add), &[x, t], sum);
        push(&mut g, "arg", f("Mul", Func::Mul), &[c1, sum], arg);
        push(&mut g, "tanh", f("Tanh", Func::Tanh), &[arg], th);
        push(&mut g, "a", f("Add", Func::Add), &[one, th], a);
        push(&mut g, "m", f("Mul", Func::Mul), &[x, a], m);
        push(&mut g, "y", f("Mul", Func::Mul), &[half, m], y);
        g.inputs.push(x);
        g.outputs.push(y);
        g
    }

    #[test]
    fn the_tanh_form_becomes_one_gelu_with_the_same_values() {
        let xs: Vec<f32> = (0..SHAPE[0] * SHAPE[1]).map(|i| (i as f32 - 55.0) * 0.09).collect();
        let x = Tensor::from_f32s(SHAPE.to_vec(), &xs);
        for pow in [false, true] {
            let reference = tanh_graph(pow);
            let mut fused = reference.clone();
            fuse_gelu(&mut fused);
            assert_eq!(crate::passes::verify(&fused), Ok(()));
            let tanh_gelu =
                |n: &crate::ir::Node| matches!(&n.op, Op::Elementwise(e) if e.func == Func::Gelu { tanh: true });
            assert!(fused.nodes.len() == 1 && tanh_gelu(&fused.nodes[0]), "pow {pow}: {:?}", fused.nodes);
            let run = |g: &Graph| floats(&run_bytes(g, std::slice::from_ref(&x), false)[0]);
            assert_all_close(&run(&fused), &run(&reference), 1e-6, "fused vs written out");
        }
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
