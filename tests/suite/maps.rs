//! Maps (ai.onnx.ml): ZipMap's sequences of maps as graph outputs and
//! DictVectorizer's and CastMap's map inputs, compared with ONNX Runtime through the CLI
//! (tests/data/maps, made by tests/scripts/make_map_cases.py), passed
//! through the `onnxc_sequence`/`onnxc_map` descriptors by a C caller
//! (which also sees a mismatching map refused with status 7), and refused
//! where they are not compiled (a mismatching declared type, the Rust API,
//! a map input without an entry count).

use crate::common::{data_dir, onnxc, onnxc_in, run_c_program, succeeded, write_model};
use crate::models::{ints_attr, model, node, value};
use onnx_proto::*;
use std::process::Command;

/// x: float[2, 3] -> maps = ZipMap(x) with string labels ("a", "bb",
/// "ccc") or int64 labels (5, 6, 7), declared seq(map(key_type, float)).
fn zipmap_model(string_labels: bool, declared_key: i32) -> ModelProto {
    let mut zip = node("ZipMap", "zip", &["x"], &["maps"]);
    zip.domain = Some("ai.onnx.ml".into());
    zip.attribute.push(if string_labels {
        AttributeProto {
            name: Some("classlabels_strings".into()),
            r#type: Some(attribute_proto::AttributeType::Strings as i32),
            strings: vec![b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()],
            ..Default::default()
        }
    } else {
        ints_attr("classlabels_int64s", &[5, 6, 7])
    });
    let float = TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor { elem_type: Some(1), shape: None })),
        ..Default::default()
    };
    let map = TypeProto {
        value: Some(type_proto::Value::MapType(Box::new(type_proto::Map {
            key_type: Some(declared_key),
            value_type: Some(Box::new(float)),
        }))),
        ..Default::default()
    };
    let maps = ValueInfoProto {
        name: Some("maps".into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::SequenceType(Box::new(type_proto::Sequence {
                elem_type: Some(Box::new(map)),
            }))),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut m = model(vec![zip], vec![value("x", Some(&[2, 3]))], vec![maps]);
    m.opset_import.push(OperatorSetIdProto { domain: Some("ai.onnx.ml".into()), version: Some(3) });
    m
}

/// m: map(int64, float) -> y = DictVectorizer(m), vocabulary (3, 1, 9).
fn dict_vectorizer_model() -> ModelProto {
    let mut vectorize = node("DictVectorizer", "vectorize", &["m"], &["y"]);
    vectorize.domain = Some("ai.onnx.ml".into());
    vectorize.attribute.push(ints_attr("int64_vocabulary", &[3, 1, 9]));
    let float = TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor { elem_type: Some(1), shape: None })),
        ..Default::default()
    };
    let map = ValueInfoProto {
        name: Some("m".into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::MapType(Box::new(type_proto::Map {
                key_type: Some(7),
                value_type: Some(Box::new(float)),
            }))),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut m = model(vec![vectorize], vec![map], vec![value("y", Some(&[1, 3]))]);
    m.opset_import.push(OperatorSetIdProto { domain: Some("ai.onnx.ml".into()), version: Some(3) });
    m
}

#[test]
fn zipmap_matches_onnx_runtime_through_jit_and_object() {
    let cases = data_dir().join("maps");
    for via in ["jit", "object"] {
        let out = Command::new(onnxc())
            .args(["test", "--guard-pages", "--via", via])
            .arg(&cases)
            .output()
            .expect("run onnxc test");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        assert!(out.status.success() && last.ends_with(" passed, 0 failed") && !last.starts_with("0 "), "{stdout}");
    }
}

#[test]
fn castmap_sparse_refuses_a_negative_key_at_run_time() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let scalar = |v: f32| crate::models::floats("", &[], &[v]);
    let map = MapProto {
        name: Some("m".into()),
        key_type: Some(7),
        keys: vec![3, -2],
        values: Some(SequenceProto {
            elem_type: Some(1),
            tensor_values: vec![scalar(1.0), scalar(2.0)],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(dir.path().join("m.pb"), prost::Message::encode_to_vec(&map)).expect("write");
    let model = data_dir().join("maps/castmap_sparse_int64/model.onnx");
    let model = model.to_str().expect("a UTF-8 path");
    let out = onnxc_in(dir.path(), &["run", model, "m.pb", "-o", "out"]);
    assert!(!succeeded(&out) && out.stderr.contains("(CastMap): index out of range"), "{}", out.stderr);
}

#[test]
fn mismatching_or_unbound_maps_are_refused_and_rust_points_to_c() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &zipmap_model(true, 7));
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o"]);
    assert!(!succeeded(&out) && out.stderr.contains("sequence of maps"), "{}", out.stderr);
    write_model(dir.path(), "model.onnx", &zipmap_model(true, 8));
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o", "--emit", "rust"]);
    assert!(!succeeded(&out) && out.stderr.contains("onnxc_map"), "{}", out.stderr);
    write_model(dir.path(), "model.onnx", &dict_vectorizer_model());
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o"]);
    assert!(!succeeded(&out) && out.stderr.contains("--shape m="), "{}", out.stderr);
}

#[test]
fn c_callers_pass_and_read_maps() {
    let dir = tempfile::tempdir().expect("temporary folder");
    for (labels, name) in [(true, "strings"), (false, "ints")] {
        write_model(dir.path(), &format!("{name}.onnx"), &zipmap_model(labels, if labels { 8 } else { 7 }));
        let args = [
            "compile",
            &format!("{name}.onnx"),
            "-o",
            &format!("{name}.o"),
            "--name",
            name,
            "--emit",
            "header,archive",
        ];
        let compiled = onnxc_in(dir.path(), &args);
        assert!(succeeded(&compiled), "{}", compiled.stderr);
    }
    write_model(dir.path(), "vectorize.onnx", &dict_vectorizer_model());
    let args = ["compile", "vectorize.onnx", "-o", "vectorize.o", "--name", "vectorize", "--emit", "header,archive"];
    let compiled = onnxc_in(dir.path(), &[&args[..], &["--shape", "m=2"]].concat());
    assert!(succeeded(&compiled), "{}", compiled.stderr);
    let header = std::fs::read_to_string(dir.path().join("strings.h")).expect("header");
    assert!(header.contains("#define STRINGS_OUTPUT0_MAPS 1") && header.contains("typedef struct onnxc_map"));
    run_c_program(dir.path(), "maps", &["strings.a", "ints.a", "vectorize.a"]);
}
