//! Portable f32 MatMul and Gemm (`gemm_tiles`, and the scalar nest a
//! transposed B keeps) against a product computed here in f64: every
//! size around the tiles' edges (1, 3, 4, 5, 7, 8, 9, 17, 33 rows,
//! columns and depth), both transpositions, alpha and beta, every shape of
//! C and broadcast batches, each buffer against guard pages so a tile
//! reading or writing past a row's end faults; and pointwise Conv, which
//! runs the same tiles per image and group, with its bias, residual and
//! activation.

use super::portable_loops_tests::{data, one_node, portable_guarded, value};
use crate::ir::shape::{broadcast, broadcast_strides};
use crate::ir::{DType, Graph, Tensor, ValueDef};
use crate::ops::conv::{AutoPad, Conv, Fused, InputSlot, Layout, Window};
use crate::ops::elementwise::{Activation, Func};
use crate::ops::linalg::{Gemm, MatMul};
use crate::ops::Op;
use crate::passes::test_graph::assert_all_close;

/// Sizes on either side of the tiles' 4 rows and 4 and 8 columns.
const EDGES: [usize; 9] = [1, 3, 4, 5, 7, 8, 9, 17, 33];

/// The f32 values of `t`.
fn values(t: &Tensor) -> Vec<f32> {
    t.to_f32s().expect("f32 data")
}

/// `f(i, j)` over an `m x n` matrix, row-major.
fn matrix(m: usize, n: usize, f: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).map(|(i, j)| f(i, j)).collect()
}

/// The graph `y = op(inputs)` of f32 inputs of `shapes` (`None`: absent)
/// and its inputs' data.
fn graph(op: Op, shapes: &[Option<&[usize]>], out: &[usize]) -> (Graph, Vec<Tensor>) {
    let mut g = Graph::default();
    let mut given = 0;
    let mut input = |g: &mut Graph, shape: &[usize]| {
        given += 1;
        value(g, &format!("in{given}"), DType::F32, shape, ValueDef::Input(given - 1))
    };
    let inputs: Vec<_> = shapes.iter().map(|s| s.map(|s| input(&mut g, s))).collect();
    let y = value(&mut g, "y", DType::F32, out, ValueDef::Computed);
    one_node(&mut g, op, inputs, y);
    (g, shapes.iter().flatten().map(|s| data(s)).collect())
}

/// Runs the graph `y = op(inputs)` in portable mode against guard pages.
fn run(op: Op, shapes: &[&[usize]], out: &[usize]) -> (Vec<Tensor>, Vec<f32>) {
    let shapes: Vec<Option<&[usize]>> = shapes.iter().map(|&s| Some(s)).collect();
    let (g, tensors) = graph(op, &shapes, out);
    let got = portable_guarded(&g, &tensors, false).expect("portable run");
    assert_eq!(got.shape, out);
    let got = values(&got);
    (tensors, got)
}

/// Agreement with the f64 product: an index off by one is off by units.
fn check(got: &[f32], want: &[f64], what: &str) {
    let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    assert_all_close(got, &want, 1e-4, what);
}

/// numpy's `matmul` in f64: batch dims broadcast, 1-D operands promoted.
fn matmul_reference(a: &[f32], a_shape: &[usize], b: &[f32], b_shape: &[usize]) -> Vec<f64> {
    let a2 = if a_shape.len() == 1 { vec![1, a_shape[0]] } else { a_shape.to_vec() };
    let b2 = if b_shape.len() == 1 { vec![b_shape[0], 1] } else { b_shape.to_vec() };
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    let (a_batch, b_batch) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch = broadcast(a_batch, b_batch).expect("batch dims broadcast");
    let (sa, sb) = (broadcast_strides(a_batch, &batch), broadcast_strides(b_batch, &batch));
    let mut out = Vec::new();
    for flat in 0..batch.iter().product::<usize>() {
        let (mut rest, mut a_at, mut b_at) = (flat, 0, 0);
        for d in (0..batch.len()).rev() {
            let i = (rest % batch[d]) as i64;
            rest /= batch[d];
            a_at += i * sa[d] * (m * k) as i64;
            b_at += i * sb[d] * (k * n) as i64;
        }
        let (a, b) = (&a[a_at as usize..], &b[b_at as usize..]);
        out.extend(matrix(m, n, |i, j| (0..k).map(|t| a[i * k + t] as f64 * b[t * n + j] as f64).sum()));
    }
    out
}

/// MatMul of `a` and `b` (their output shape `out`) against the reference.
fn check_matmul(a: &[usize], b: &[usize], out: &[usize], alpha: f64) {
    let (t, got) = run(Op::MatMul(MatMul { packed_b: None, alpha }), &[a, b], out);
    let want: Vec<f64> = matmul_reference(&values(&t[0]), a, &values(&t[1]), b).iter().map(|v| v * alpha).collect();
    check(&got, &want, &format!("MatMul {a:?} @ {b:?} alpha {alpha}"));
}

#[test]
fn matmul_agrees_at_every_tile_edge() {
    for m in EDGES {
        for n in EDGES {
            for k in EDGES {
                check_matmul(&[m, k], &[k, n], &[m, n], 1.0);
            }
        }
    }
}

#[test]
fn batched_and_vector_matmuls_agree() {
    check_matmul(&[2, 1, 5, 7], &[3, 7, 9], &[2, 3, 5, 9], 1.0);
    check_matmul(&[5, 7], &[2, 7, 9], &[2, 5, 9], 1.0);
    check_matmul(&[2, 3, 5, 4], &[4, 17], &[2, 3, 5, 17], 1.0);
    check_matmul(&[3, 1, 9, 8], &[1, 2, 8, 3], &[3, 2, 9, 3], 1.0);
    check_matmul(&[7], &[7, 9], &[9], 1.0);
    check_matmul(&[9, 7], &[7], &[9], 1.0);
    check_matmul(&[2, 5, 7], &[7, 13], &[2, 5, 13], 0.375);
}

/// The shapes C may have against an `m x n` Y.
fn c_shapes(m: usize, n: usize) -> [Option<Vec<usize>>; 5] {
    [None, Some(vec![1]), Some(vec![n]), Some(vec![m, 1]), Some(vec![m, n])]
}

/// Gemm on `m x k` by `k x n` (transposed as `trans`) against the reference.
fn check_gemm(m: usize, n: usize, k: usize, trans: [bool; 2], c: Option<&[usize]>, [alpha, beta]: [f32; 2]) {
    let a_shape = if trans[0] { [k, m] } else { [m, k] };
    let b_shape = if trans[1] { [n, k] } else { [k, n] };
    let mut shapes: Vec<&[usize]> = vec![&a_shape, &b_shape];
    shapes.extend(c);
    let op = Op::Gemm(Gemm { alpha, beta, trans_a: trans[0], trans_b: trans[1], packed_b: None });
    let (t, got) = run(op, &shapes, &[m, n]);
    let (a, b) = (values(&t[0]), values(&t[1]));
    let a_at = |i: usize, t: usize| if trans[0] { a[t * m + i] } else { a[i * k + t] } as f64;
    let b_at = |t: usize, j: usize| if trans[1] { b[j * k + t] } else { b[t * n + j] } as f64;
    let bias = |i: usize, j: usize| match c {
        Some(shape) => {
            let s = broadcast_strides(shape, &[m, n]);
            values(&t[2])[(i as i64 * s[0] + j as i64 * s[1]) as usize] as f64
        }
        None => 0.0,
    };
    let want = matrix(m, n, |i, j| {
        alpha as f64 * (0..k).map(|t| a_at(i, t) * b_at(t, j)).sum::<f64>() + beta as f64 * bias(i, j)
    });
    check(&got, &want, &format!("Gemm {m}x{k} by {k}x{n} trans {trans:?} C {c:?} alpha {alpha} beta {beta}"));
}

#[test]
fn gemm_agrees_for_every_transposition_and_bias() {
    let scales = [[1.0, 1.0], [0.5, -2.0], [-1.25, 0.0]];
    for (e, (m, n)) in EDGES.iter().flat_map(|&m| EDGES.map(|n| (m, n))).enumerate() {
        for (t, trans) in [[false, false], [true, false], [false, true], [true, true]].into_iter().enumerate() {
            let k = EDGES[(e + t) % EDGES.len()];
            let c = &c_shapes(m, n)[(e + t) % 5];
            check_gemm(m, n, k, trans, c.as_deref(), scales[(e + t) % scales.len()]);
        }
    }
}

/// A pointwise Conv of `channels` [in, out] in `group`s over `spatial`
/// (two images), with or without a bias, a residual and an activation
/// (Relu or SiLU), against the f64 reference.
fn check_pointwise_conv(channels: [usize; 2], group: usize, spatial: &[usize], bias: bool, fused: Fused) {
    let [c, m] = channels;
    let x: Vec<usize> = [&[2, c][..], spatial].concat();
    let w: Vec<usize> = [&[m, c / group][..], &vec![1; spatial.len()]].concat();
    let y: Vec<usize> = [&[2, m][..], spatial].concat();
    let window = Window {
        auto_pad: AutoPad::NotSet,
        kernel_shape: vec![1; spatial.len()],
        strides: vec![],
        dilations: vec![],
        pads: vec![],
        ceil_mode: false,
    };
    let op = Op::Conv(Conv { window, group, fused, layout: Layout::Plain });
    let bias_shape = [m];
    let residual = fused.residual.is_some().then_some(y.as_slice());
    let (g, inputs) = graph(op, &[Some(&x), Some(&w), bias.then_some(&bias_shape[..]), residual], &y);
    let got = portable_guarded(&g, &inputs, false).expect("portable run");
    let data: Vec<Vec<f64>> = inputs.iter().map(|t| values(t).iter().map(|&v| v as f64).collect()).collect();
    let (xs, ws) = (&data[0], &data[1]);
    let (size, in_group, out_group) = (spatial.iter().product::<usize>(), c / group, m / group);
    let mut want = Vec::new();
    for n in 0..2 {
        for o in 0..m {
            let first = o / out_group * in_group;
            let sum = |s: usize| -> f64 {
                (0..in_group).map(|i| xs[(n * c + first + i) * size + s] * ws[o * in_group + i]).sum()
            };
            want.extend((0..size).map(|s| {
                let v = sum(s) + if bias { data[2][o] } else { 0.0 };
                let v = v + if residual.is_some() { data[data.len() - 1][(n * m + o) * size + s] } else { 0.0 };
                match fused.activation {
                    Some(a) if a.gated => v / (1.0 + (-v).exp()),
                    Some(_) => v.max(0.0),
                    None => v,
                }
            }));
        }
    }
    check(
        &values(&got),
        &want,
        &format!("pointwise Conv {c} -> {m}, group {group}, {spatial:?}, bias {bias}, {fused:?}"),
    );
}

#[test]
fn pointwise_conv_agrees_with_the_reference() {
    let plain = Fused::default();
    let relu = Fused { activation: Activation::new(Func::Relu, None), ..plain };
    let silu_residual = Fused { activation: Some(Activation::SILU), residual: Some(InputSlot(3)), prologue: None };
    for (i, &c) in EDGES.iter().enumerate() {
        let m = EDGES[(i + 4) % EDGES.len()];
        for spatial in [&[1, 1][..], &[3, 5], &[2, 9], &[17]] {
            check_pointwise_conv([c, m], 1, spatial, i % 2 == 0, plain);
            check_pointwise_conv([c, m], 1, spatial, true, if i % 2 == 0 { relu } else { silu_residual });
        }
    }
    check_pointwise_conv([6, 9], 3, &[5, 7], true, relu);
    check_pointwise_conv([8, 4], 2, &[3, 3], false, silu_residual);
}
