//! Gradient (ai.onnx.preview.training) through the CLI: reverse-mode over
//! Sub, Div, Neg and Add with broadcasting reduced back to each input's
//! shape, a zero gradient for an input `y` does not depend on, and an
//! operator without a derivative named in the error. A model carrying a
//! TrainingInfoProto (an Adagrad step as its algorithm) checks and runs
//! its inference graph; the training graphs are validated by `load`, not
//! compiled.

use crate::common::{onnxc_in, run_model, succeeded, write_model};
use crate::models::{f32s, floats, model, node, value};
use onnx_proto::*;

fn strings_attr(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Strings as i32),
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    }
}

fn string_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

/// `y = (a - b) / s + (-a)` (or `exp(a)` with `exp`), and the gradient of
/// `y` with respect to `a`, `b`, `s` and the unused `u`.
fn gradient_model(exp: bool) -> ModelProto {
    let mut nodes = vec![
        node("Sub", "sub", &["a", "b"], &["t"]),
        node("Div", "div", &["t", "s"], &["q"]),
        node(if exp { "Exp" } else { "Neg" }, "neg", &["a"], &["n"]),
        node("Add", "add", &["q", "n"], &["y"]),
    ];
    let mut gradient = node("Gradient", "grad", &["a", "b", "s", "u"], &["da", "db", "ds", "du"]);
    gradient.domain = Some("ai.onnx.preview.training".into());
    gradient.attribute = vec![strings_attr("xs", &["a", "b", "s", "u"]), string_attr("y", "y")];
    nodes.push(gradient);
    let mut m = model(
        nodes,
        vec![value("a", Some(&[2, 3])), value("b", Some(&[3])), value("s", Some(&[])), value("u", Some(&[2]))],
        vec![
            value("y", Some(&[2, 3])),
            value("da", Some(&[2, 3])),
            value("db", Some(&[3])),
            value("ds", Some(&[])),
            value("du", Some(&[2])),
        ],
    );
    m.opset_import.push(OperatorSetIdProto { domain: Some("ai.onnx.preview.training".into()), version: Some(1) });
    m
}

fn inputs() -> Vec<TensorProto> {
    vec![
        floats("a", &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        floats("b", &[3], &[1.0, 1.0, 1.0]),
        floats("s", &[], &[2.0]),
        floats("u", &[2], &[7.0, 8.0]),
    ]
}

#[test]
fn gradients_reduce_broadcasts_and_zero_unused_inputs() {
    let out = run_model(&gradient_model(false), &inputs()).unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    // dy/da = 1/s - 1; dy/db = -(1/s) summed over the 2 broadcast rows;
    // dy/ds = -Σ(q)/s with q = (a - b)/s summing to 7.5; u is unused.
    assert_eq!(f32s(&out[1]), [-0.5; 6]);
    assert_eq!(f32s(&out[2]), [-1.0; 3]);
    assert_eq!(f32s(&out[3]), [-3.75]);
    assert_eq!(f32s(&out[4]), [0.0, 0.0]);
}

#[test]
fn an_operator_without_a_derivative_is_named() {
    let failed = run_model(&gradient_model(true), &inputs()).expect_err("Exp has no derivative here");
    assert!(failed.stderr.contains("\"neg\" (Exp)") && failed.stderr.contains("no derivative"), "{}", failed.stderr);
}

#[test]
fn a_model_with_training_info_runs_its_inference_graph() {
    let mut m = gradient_model(false);
    let mut adagrad = node("Adagrad", "step", &["r", "t", "a0", "da0", "h0"], &["a1", "h1"]);
    adagrad.domain = Some("ai.onnx.preview.training".into());
    let algorithm = GraphProto {
        name: Some("train".into()),
        node: vec![adagrad],
        initializer: vec![floats("r", &[], &[0.1]), crate::models::int64s("t", &[], &[0])],
        input: vec![value("a0", Some(&[2, 3])), value("da0", Some(&[2, 3])), value("h0", Some(&[2, 3]))],
        output: vec![value("a1", Some(&[2, 3])), value("h1", Some(&[2, 3]))],
        ..Default::default()
    };
    m.training_info.push(TrainingInfoProto { algorithm: Some(algorithm), ..Default::default() });
    let out = run_model(&m, &inputs()).unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    assert_eq!(f32s(&out[1]), [-0.5; 6]);
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let check = onnxc_in(dir.path(), &["check", "model.onnx"]);
    assert!(succeeded(&check), "{}", check.stderr);
}
