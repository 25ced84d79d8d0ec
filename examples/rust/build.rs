//! Writes the example's perceptron as an ONNX file with `onnx-proto`'s
//! types, then compiles it with `onnxc::Build`: the archive and the typed
//! module `mlp.rs` land in OUT_DIR, and the printed `cargo:` lines link it.
//! A crate with a model file on disk needs only the last statement.

#[path = "mlp_spec.rs"]
mod mlp_spec;

use onnx_proto::tensor_shape_proto::{dimension, Dimension};
use onnx_proto::type_proto::{Tensor as TensorType, Value as TypeValue};
use onnx_proto::*;
use prost::Message;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=mlp_spec.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let path = out.join("mlp.onnx");
    std::fs::write(&path, model().encode_to_vec())?;
    onnxc::Build::new(&path).dim("batch", 1).name("mlp").max_ram(4096).compile()?;
    Ok(())
}

fn model() -> ModelProto {
    let [l1, l2] = mlp_spec::layers();
    let mut initializer = Vec::new();
    for (k, l) in [l1, l2].into_iter().enumerate() {
        initializer.push(floats(&format!("w{}", k + 1), &[l.outputs, l.inputs], l.weights));
        initializer.push(floats(&format!("b{}", k + 1), &[l.outputs], l.bias));
    }
    let [features, _, classes] = mlp_spec::SIZES;
    let transposed = |name: &str, inputs: &[&str], output: &str| {
        let mut n = node("Gemm", name, inputs, output);
        n.attribute.push(AttributeProto {
            name: Some("transB".into()),
            r#type: Some(attribute_proto::AttributeType::Int as i32),
            i: Some(1),
            ..Default::default()
        });
        n
    };
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto {
            name: Some("mlp".into()),
            node: vec![
                transposed("fc1", &["image", "w1", "b1"], "h"),
                node("Relu", "relu", &["h"], "a"),
                transposed("fc2", &["a", "w2", "b2"], "logits"),
                node("Softmax", "softmax", &["logits"], "probs"),
            ],
            initializer,
            input: vec![value("image", features)],
            output: vec![value("probs", classes)],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, name: &str, inputs: &[&str], output: &str) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        ..Default::default()
    }
}

fn floats(name: &str, dims: &[usize], data: Vec<f32>) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: Some(tensor_proto::DataType::Float as i32),
        float_data: data,
        ..Default::default()
    }
}

/// A float tensor `[batch, width]`, `batch` a symbolic dim bound by `.dim`.
fn value(name: &str, width: usize) -> ValueInfoProto {
    let dim = |value| Dimension { value: Some(value), denotation: None };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(TensorType {
                elem_type: Some(tensor_proto::DataType::Float as i32),
                shape: Some(TensorShapeProto {
                    dim: vec![
                        dim(dimension::Value::DimParam("batch".into())),
                        dim(dimension::Value::DimValue(width as i64)),
                    ],
                }),
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}
