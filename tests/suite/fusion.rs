//! Fusions in the compiler's passes, seen through the CLI: the rewritten
//! graph (`--emit mir`) and the numbers it computes.

use crate::common::run_model;
use crate::models::{f32s, float_attr, floats, model, node, raw_tensor, typed_value, value};
use crate::snapshot::{assert_snapshot, compiled_mir};
use onnx_proto::*;

/// A 1x1 convolution (weights 1 and -2 for two output channels, bias 0.5)
/// followed by `activation`.
fn conv_then(activation: NodeProto) -> ModelProto {
    let mut m = model(
        vec![node("Conv", "conv", &["x", "w", "b"], &["c"]), activation],
        vec![value("x", Some(&[1, 1, 2, 2]))],
        vec![value("y", Some(&[1, 2, 2, 2]))],
    );
    let g = m.graph.as_mut().expect("graph");
    g.initializer.extend([floats("w", &[2, 1, 1, 1], &[1.0, -2.0]), floats("b", &[2], &[0.5, 0.5])]);
    m
}

/// An activation node, the snapshot of the graph with it fused, and its
/// reference.
type Case = (NodeProto, &'static str, fn(f32) -> f32);

#[test]
fn activations_after_a_conv_run_in_its_epilogue() {
    let x = [-3.0f32, -0.5, 0.25, 2.0];
    let conv: Vec<f32> = x.iter().map(|v| v + 0.5).chain(x.iter().map(|v| -2.0 * v + 0.5)).collect();
    let mut leaky = node("LeakyRelu", "act", &["c"], &["y"]);
    leaky.attribute.push(float_attr("alpha", 0.1));
    let mut clip = node("Clip", "act", &["c"], &["y"]);
    clip.attribute.extend([float_attr("min", -1.0), float_attr("max", 1.0)]);
    let cases: [Case; 3] = [
        (node("Relu", "act", &["c"], &["y"]), "conv_relu", |v| if v < 0.0 { 0.0 } else { v }),
        (leaky, "conv_leaky_relu", |v| if v < 0.0 { v * 0.1 } else { v }),
        (clip, "conv_clip", |v| v.clamp(-1.0, 1.0)),
    ];
    for (act, fused, reference) in cases {
        let mut m = conv_then(act);
        // Opset 6 keeps Clip's bounds as attributes.
        m.opset_import[0].version = Some(6);
        assert_snapshot(fused, &compiled_mir(&m, &[]));

        let outputs = run_model(&m, &[floats("x", &[1, 1, 2, 2], &x)])
            .unwrap_or_else(|e| panic!("{fused}: onnxc run failed: {}", e.stderr));
        let want: Vec<f32> = conv.iter().map(|&v| reference(v)).collect();
        assert_eq!(f32s(&outputs[0]), want, "{fused}");
    }
}

/// `Relu(Add(Conv(x), s))`, a residual block's tail, with the shortcut `s`
/// a second input: the Add and then the Relu move into the convolution.
#[test]
fn a_residual_add_and_relu_run_in_the_conv_epilogue() {
    let mut m = conv_then(node("Add", "add", &["c", "s"], &["a"]));
    let g = m.graph.as_mut().expect("graph");
    g.node.push(node("Relu", "act", &["a"], &["y"]));
    g.input.push(value("s", Some(&[1, 2, 2, 2])));
    assert_snapshot("conv_add_relu", &compiled_mir(&m, &[]));

    let x = [-3.0f32, -0.5, 0.25, 2.0];
    let s = [1.0f32, 2.0, -4.0, 0.5, 3.0, -1.0, 0.0, -0.25];
    let conv: Vec<f32> = x.iter().map(|v| v + 0.5).chain(x.iter().map(|v| -2.0 * v + 0.5)).collect();
    let want: Vec<f32> = conv.iter().zip(&s).map(|(c, s)| (c + s).max(0.0)).collect();
    let outputs = run_model(&m, &[floats("x", &[1, 1, 2, 2], &x), floats("s", &[1, 2, 2, 2], &s)])
        .unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    assert_eq!(f32s(&outputs[0]), want);
}

/// DenseNet's pre-convolution chain `Relu(Add(Mul(BatchNormalization(x),
/// m), k))` with per-channel `m`, `k`: one fused node, and the numbers of
/// the separate operators (the kernel's BatchNormalization formula, then
/// each operator rounding in turn) to the bit.
#[test]
fn an_elementwise_chain_runs_as_one_node_with_the_same_numbers() {
    let mut m = model(
        vec![
            node("BatchNormalization", "bn", &["x", "scale", "bias", "mean", "var"], &["n"]),
            node("Mul", "mul", &["n", "m"], &["p"]),
            node("Add", "add", &["p", "k"], &["s"]),
            node("Relu", "relu", &["s"], &["y"]),
        ],
        vec![value("x", Some(&[1, 2, 3, 3]))],
        vec![value("y", Some(&[1, 2, 3, 3]))],
    );
    let (scale, bias, mean, var) = ([1.5f32, -0.5], [0.25f32, -1.0], [0.2f32, -0.1], [0.9f32, 1.1]);
    let (mul, add) = ([0.7f32, -1.3], [0.1f32, 0.2]);
    let g = m.graph.as_mut().expect("graph");
    g.initializer.extend([
        floats("scale", &[2], &scale),
        floats("bias", &[2], &bias),
        floats("mean", &[2], &mean),
        floats("var", &[2], &var),
        floats("m", &[2, 1, 1], &mul),
        floats("k", &[2, 1, 1], &add),
    ]);
    assert_snapshot("batchnorm_mul_add_relu", &compiled_mir(&m, &[]));

    let x: Vec<f32> = (0..18).map(|i| (i as f32 * 0.61).sin() * 3.0).collect();
    let outputs =
        run_model(&m, &[floats("x", &[1, 2, 3, 3], &x)]).unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    let want: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = i / 9;
            let a = scale[c] / (var[c] + 1e-5).sqrt();
            let b = bias[c] - mean[c] * a;
            let s = (v * a + b) * mul[c] + add[c];
            if s > 0.0 {
                s
            } else {
                0.0
            }
        })
        .collect();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&f32s(&outputs[0])), bits(&want));
}

/// A fully connected layer written as `Add(MatMul(x, w), b)` becomes one
/// Gemm adding `b` as its C.
#[test]
fn matmul_then_add_becomes_a_gemm() {
    let mut m = model(
        vec![node("MatMul", "mm", &["x", "w"], &["p"]), node("Add", "add", &["p", "b"], &["y"])],
        vec![value("x", Some(&[2, 3]))],
        vec![value("y", Some(&[2, 2]))],
    );
    let w = [1.0f32, -2.0, 0.5, 0.25, -1.5, 3.0];
    let b = [0.5f32, -0.75];
    let g = m.graph.as_mut().expect("graph");
    g.initializer.extend([floats("w", &[3, 2], &w), floats("b", &[2], &b)]);
    assert_snapshot("matmul_add", &compiled_mir(&m, &[]));

    let x = [0.5f32, -1.0, 2.0, 3.0, 0.25, -0.5];
    let outputs =
        run_model(&m, &[floats("x", &[2, 3], &x)]).unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    let want: Vec<f32> =
        (0..4).map(|ij| (0..3).map(|l| x[ij / 2 * 3 + l] * w[l * 2 + ij % 2]).sum::<f32>() + b[ij % 2]).collect();
    let got = f32s(&outputs[0]);
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    let close = got.iter().zip(&want).all(|(&g, &w)| onnxc_runtime::tolerance::close(g.into(), w.into(), 1e-6, 1e-6));
    assert!(close, "{got:?} vs {want:?}");
}

/// Functions a libm call per element used to compute (Pow by a constant,
/// Erf in a GELU chain) and Clip by constant bounds run as elementwise
/// programs in vector math: the object calls the program kernel, not libm,
/// and rows of odd length (vector body and tail) agree with the exact
/// results.
#[test]
fn transcendental_chains_run_as_vector_programs() {
    let mut m = model(
        vec![
            node("Clip", "clip", &["x", "lo", "hi"], &["y1"]),
            node("Pow", "cube", &["x", "three"], &["p"]),
            node("Sub", "one_minus", &["one", "p"], &["y2"]),
            node("Div", "scaled", &["x", "sqrt2"], &["s"]),
            node("Erf", "erf", &["s"], &["e"]),
            node("Add", "shift", &["e", "one"], &["f"]),
            node("Mul", "half", &["x", "half_c"], &["h"]),
            node("Mul", "gelu", &["h", "f"], &["y3"]),
        ],
        vec![value("x", Some(&[3, 37]))],
        vec![value("y1", Some(&[3, 37])), value("y2", Some(&[3, 37])), value("y3", Some(&[3, 37]))],
    );
    let g = m.graph.as_mut().expect("graph");
    g.initializer.extend([
        floats("lo", &[], &[-0.5]),
        floats("hi", &[], &[0.75]),
        floats("three", &[], &[3.0]),
        floats("one", &[], &[1.0]),
        floats("sqrt2", &[], &[std::f32::consts::SQRT_2]),
        floats("half_c", &[], &[0.5]),
    ]);
    let dir = tempfile::tempdir().expect("temporary folder");
    crate::common::write_model(dir.path(), "model.onnx", &m);
    let info = crate::common::onnxc_in(dir.path(), &["info", "model.onnx"]);
    let info = info.stdout;
    assert!(info.contains("onnxc_elementwise_f32"), "{info}");
    assert!(!info.contains("onnxc_powf") && !info.contains("onnxc_erff"), "{info}");

    let x: Vec<f32> = (0..111).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
    let outputs =
        run_model(&m, &[floats("x", &[3, 37], &x)]).unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    let exact: [fn(f64) -> f64; 3] =
        [|v| v.clamp(-0.5, 0.75), |v| 1.0 - v * v * v, |v| 0.5 * v * (1.0 + libm::erf(v / std::f64::consts::SQRT_2))];
    for (output, f) in outputs.iter().zip(exact) {
        for (&got, &v) in f32s(output).iter().zip(&x) {
            let want = f(v as f64);
            assert!((got as f64 - want).abs() <= 2e-6 * (1.0 + want.abs()), "{got} for {want} at x = {v}");
        }
    }
}

/// Where with an f32 result runs its innermost loop in f32x4 lanes, the
/// condition a lane mask: a mask row broadcast over the rows (four bools
/// a step, bytes other than 0 and 1 included) and a mask constant along
/// each row (one bool splat), rows of odd length so the tail runs too.
#[test]
fn where_selects_in_lanes_from_row_and_splat_masks() {
    let mut m = model(
        vec![
            node("Where", "by_column", &["columns", "x", "fill"], &["y1"]),
            node("Where", "by_row", &["rows", "x", "fill"], &["y2"]),
        ],
        vec![
            typed_value("columns", 9, Some(&[1, 37])),
            typed_value("rows", 9, Some(&[3, 1])),
            value("x", Some(&[3, 37])),
        ],
        vec![value("y1", Some(&[3, 37])), value("y2", Some(&[3, 37]))],
    );
    m.graph.as_mut().expect("graph").initializer.push(floats("fill", &[], &[-1e9]));
    let columns: Vec<u8> = (0..37).map(|j| [0u8, 1, 2, 0, 255][j % 5]).collect();
    let rows = vec![1u8, 0, 7];
    let x: Vec<f32> = (0..111).map(|i| i as f32 * 0.5 - 20.0).collect();
    let inputs = [
        raw_tensor("columns", 9, &[1, 37], columns.clone()),
        raw_tensor("rows", 9, &[3, 1], rows.clone()),
        floats("x", &[3, 37], &x),
    ];
    let outputs = run_model(&m, &inputs).unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    let (by_column, by_row) = (f32s(&outputs[0]), f32s(&outputs[1]));
    for (i, &xi) in x.iter().enumerate() {
        let pick = |mask: u8| if mask != 0 { xi } else { -1e9 };
        assert_eq!(by_column[i], pick(columns[i % 37]), "by column at {i}");
        assert_eq!(by_row[i], pick(rows[i / 37]), "by row at {i}");
    }
}
