//! Fusions in the compiler's passes, seen through the CLI: the rewritten
//! graph (`--emit mir`) and the numbers it computes.

use crate::common::{onnxc_in, run_model, succeeded, write_model};
use crate::models::{f32s, float_attr, floats, model, node, value};
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

/// An activation node, how `--emit mir` shows it fused, and its reference.
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
        (node("Relu", "act", &["c"], &["y"]), "Relu", |v| if v < 0.0 { 0.0 } else { v }),
        (leaky, "LeakyRelu(0.1)", |v| if v < 0.0 { v * 0.1 } else { v }),
        (clip, "Clip(-1.0, 1.0)", |v| v.clamp(-1.0, 1.0)),
    ];
    for (act, fused, reference) in cases {
        let mut m = conv_then(act);
        // Opset 6 keeps Clip's bounds as attributes.
        m.opset_import[0].version = Some(6);
        let dir = tempfile::tempdir().expect("temporary folder");
        write_model(dir.path(), "model.onnx", &m);
        let out = onnxc_in(dir.path(), &["compile", "model.onnx", "--emit", "mir", "-o", "model.mir"]);
        assert!(succeeded(&out), "{fused}: {}", out.stderr);
        let mir = std::fs::read_to_string(dir.path().join("model.mir")).expect("mir");
        assert!(mir.contains(&format!("activation: {fused}")), "{fused} not fused:\n{mir}");
        for op in ["Relu(%", "LeakyRelu(%", "Clip(%"] {
            assert!(!mir.contains(op), "the activation node is still there:\n{mir}");
        }

        let outputs = run_model(&m, &[floats("x", &[1, 1, 2, 2], &x)])
            .unwrap_or_else(|e| panic!("{fused}: onnxc run failed: {}", e.stderr));
        let want: Vec<f32> = conv.iter().map(|&v| reference(v)).collect();
        assert_eq!(f32s(&outputs[0]), want, "{fused}");
    }
}
