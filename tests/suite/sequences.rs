//! Sequence and optional graph inputs and outputs: specialised to the
//! element count and shapes given (`--shape NAME=2x3,4`, or the actual
//! input in `run`), read and written as SequenceProto/OptionalProto by the
//! CLI, and passed through the C ABI's descriptors by a C caller that
//! also sees a mismatching descriptor refused with status 7.

use crate::common::{onnxc_in, run_c_program, succeeded, write_model};
use crate::models::{f32s, floats, int_attr, model, node, value};
use onnx_proto::*;
use prost::Message;

/// A graph input or output of type seq(float[?]) or optional(float[?]).
fn composite_value(name: &str, optional: bool) -> ValueInfoProto {
    let tensor = TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(1),
            shape: Some(TensorShapeProto {
                dim: vec![tensor_shape_proto::Dimension {
                    value: Some(tensor_shape_proto::dimension::Value::DimParam("n".into())),
                    ..Default::default()
                }],
            }),
        })),
        ..Default::default()
    };
    let ty = if optional {
        type_proto::Value::OptionalType(Box::new(type_proto::Optional { elem_type: Some(Box::new(tensor)) }))
    } else {
        type_proto::Value::SequenceType(Box::new(type_proto::Sequence { elem_type: Some(Box::new(tensor)) }))
    };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto { value: Some(ty), ..Default::default() }),
        ..Default::default()
    }
}

/// xs: seq(float[?]), t: float[2] -> ys = SequenceInsert(xs, t),
/// cat = ConcatFromSequence(ys, axis 0).
fn insert_model() -> ModelProto {
    let mut concat = node("ConcatFromSequence", "cat", &["ys"], &["cat"]);
    concat.attribute.push(int_attr("axis", 0));
    model(
        vec![node("SequenceInsert", "insert", &["xs", "t"], &["ys"]), concat],
        vec![composite_value("xs", false), value("t", Some(&[2]))],
        vec![composite_value("ys", false), value("cat", Some(&[-1]))],
    )
}

fn sequence(name: &str, items: Vec<TensorProto>) -> SequenceProto {
    SequenceProto { name: Some(name.into()), elem_type: Some(1), tensor_values: items, ..Default::default() }
}

#[test]
fn run_reads_and_writes_sequences() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &insert_model());
    let xs = sequence("xs", vec![floats("", &[3], &[1.0, 2.0, 3.0]), floats("", &[1], &[4.0])]);
    std::fs::write(dir.path().join("xs.pb"), xs.encode_to_vec()).expect("write");
    std::fs::write(dir.path().join("t.pb"), floats("t", &[2], &[5.0, 6.0]).encode_to_vec()).expect("write");
    let out = onnxc_in(dir.path(), &["run", "model.onnx", "xs.pb", "t.pb", "-o", "out"]);
    assert!(succeeded(&out), "{}", out.stderr);
    let ys = SequenceProto::decode(std::fs::read(dir.path().join("out/output_0.pb")).expect("ys").as_slice())
        .expect("a SequenceProto");
    let got: Vec<(Vec<i64>, Vec<f32>)> = ys.tensor_values.iter().map(|t| (t.dims.clone(), f32s(t))).collect();
    let want = vec![(vec![3], vec![1.0, 2.0, 3.0]), (vec![1], vec![4.0]), (vec![2], vec![5.0, 6.0])];
    assert_eq!(got, want);
    let cat = TensorProto::decode(std::fs::read(dir.path().join("out/output_1.pb")).expect("cat").as_slice())
        .expect("a TensorProto");
    assert_eq!(f32s(&cat), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn compile_needs_the_element_shapes_and_the_rust_api_points_to_c() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &insert_model());
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o"]);
    assert!(!succeeded(&out) && out.stderr.contains("--shape xs="), "{}", out.stderr);
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o", "--shape", "xs=3,2", "--emit", "rust"]);
    assert!(!succeeded(&out) && out.stderr.contains("onnxc_sequence"), "{}", out.stderr);
}

#[test]
fn an_optional_input_is_specialised_to_its_presence() {
    // y = OptionalHasElement(x): folded to a constant for each presence.
    let m = model(
        vec![node("OptionalHasElement", "has", &["x"], &["y"])],
        vec![composite_value("x", true)],
        vec![crate::models::typed_value("y", 9, Some(&[]))],
    );
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    for (given, want) in [(None, 0u8), (Some(floats("", &[2], &[1.0, 2.0])), 1)] {
        let optional = OptionalProto {
            name: Some("x".into()),
            elem_type: Some(if given.is_some() { 1 } else { 0 }),
            tensor_value: given,
            ..Default::default()
        };
        std::fs::write(dir.path().join("x.pb"), optional.encode_to_vec()).expect("write");
        let out = onnxc_in(dir.path(), &["run", "model.onnx", "x.pb", "-o", "out"]);
        assert!(succeeded(&out), "{}", out.stderr);
        let y = TensorProto::decode(std::fs::read(dir.path().join("out/output_0.pb")).expect("y").as_slice())
            .expect("a TensorProto");
        assert_eq!(
            y.raw_data.unwrap_or_default().first().copied().or(y.int32_data.first().map(|&v| v as u8)),
            Some(want)
        );
    }
}

#[test]
fn c_callers_pass_and_receive_sequences() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &insert_model());
    let args = ["compile", "model.onnx", "-o", "model.o", "--emit", "header,archive", "--shape", "xs=3,2"];
    let compiled = onnxc_in(dir.path(), &args);
    assert!(succeeded(&compiled), "{}", compiled.stderr);
    let header = std::fs::read_to_string(dir.path().join("model.h")).expect("header");
    assert!(header.contains("#define MODEL_INPUT0_SEQUENCE 1") && header.contains("typedef struct onnxc_sequence"));
    run_c_program(dir.path(), "sequences", &["model.a"]);
}
