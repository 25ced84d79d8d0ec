//! Malformed models, each built here in code, must make `onnxc check` (and
//! `onnxc compile`) exit with status 1 and a message naming the culprit —
//! never a panic or a crash.

use crate::common::{onnxc, run_with_timeout};
use crate::models::{node, value};
use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::tensor_proto::DataLocation;
use onnx_proto::*;
use prost::Message;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// `y = Relu(x)` with x, y: f32[2]; cases mutate it.
fn valid() -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto {
            name: Some("main".into()),
            node: vec![node("Relu", "relu", &["x"], &["y"])],
            input: vec![value("x", Some(&[2]))],
            output: vec![value("y", Some(&[2]))],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn graph(m: &mut ModelProto) -> &mut GraphProto {
    m.graph.as_mut().expect("the valid model has a graph")
}

fn weight(name: &str, dims: &[i64], raw: Vec<u8>) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(1),
        raw_data: Some(raw),
        ..Default::default()
    }
}

/// Adds `y2 = Add(y, w)` so that the initializer `w` is used.
fn with_weight(w: TensorProto) -> ModelProto {
    let mut m = valid();
    let g = graph(&mut m);
    g.node.push(node("Add", "add", &["y", "w"], &["z"]));
    g.output = vec![value("z", Some(&[2]))];
    g.initializer.push(w);
    m
}

fn external(location: &str, offset: Option<&str>, length: Option<&str>) -> ModelProto {
    let entry = |k: &str, v: &str| StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) };
    let mut t = weight("w", &[2], Vec::new());
    t.raw_data = None;
    t.data_location = Some(DataLocation::External as i32);
    t.external_data.push(entry("location", location));
    if let Some(o) = offset {
        t.external_data.push(entry("offset", o));
    }
    if let Some(l) = length {
        t.external_data.push(entry("length", l));
    }
    with_weight(t)
}

/// Writes `bytes` as `model.onnx` in `dir`, runs `onnxc <cmd>` on it, and
/// checks exit code 1 and that stderr mentions every `expected` fragment.
fn rejects(dir: &Path, bytes: &[u8], cmd: &str, expected: &[&str]) {
    let path = dir.join("model.onnx");
    std::fs::write(&path, bytes).expect("write model");
    let mut c = Command::new(onnxc());
    c.arg(cmd).arg(&path);
    if cmd == "compile" {
        c.arg("-o").arg(dir.join("out.o"));
    }
    let out = run_with_timeout(c, Duration::from_secs(60)).expect("run onnxc");
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(1),
        "onnxc {cmd} should exit 1 ({}); stderr:\n{}",
        out.describe_status(),
        out.stderr
    );
    for e in expected {
        assert!(out.stderr.contains(e), "onnxc {cmd}: stderr lacks {e:?}:\n{}", out.stderr);
    }
}

fn case_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary folder")
}

#[test]
fn the_valid_model_passes_check() {
    let dir = case_dir();
    let path = dir.path().join("model.onnx");
    std::fs::write(&path, valid().encode_to_vec()).expect("write");
    let out = run_with_timeout(
        {
            let mut c = Command::new(onnxc());
            c.arg("check").arg(&path);
            c
        },
        Duration::from_secs(60),
    )
    .expect("run");
    assert!(out.status.is_some_and(|s| s.success()), "{}", out.stderr);
}

#[test]
fn garbage_and_truncated_files() {
    let dir = case_dir();
    rejects(dir.path(), b"\xff\xff\xff\xffnot a model", "check", &["model.onnx", "not a valid ONNX model"]);
    let bytes = valid().encode_to_vec();
    rejects(dir.path(), &bytes[..bytes.len() / 2], "check", &["not a valid ONNX model"]);
}

#[test]
fn ir_version_and_opsets() {
    let dir = case_dir();
    let mut m = valid();
    m.ir_version = Some(2);
    rejects(dir.path(), &m.encode_to_vec(), "check", &["ir_version 2 is not supported"]);
    let mut m = valid();
    m.opset_import.clear();
    rejects(dir.path(), &m.encode_to_vec(), "check", &["opset_import is empty"]);
    let mut m = valid();
    graph(&mut m).node[0].domain = Some("com.example".into());
    rejects(dir.path(), &m.encode_to_vec(), "check", &["no entry for domain \"com.example\"", "relu"]);
}

#[test]
fn graph_rules() {
    let dir = case_dir();
    let mut m = valid();
    graph(&mut m).node[0].input = vec!["nope".into()];
    rejects(dir.path(), &m.encode_to_vec(), "check", &["node \"relu\" (Relu)", "\"nope\" is undefined"]);

    let mut m = valid();
    graph(&mut m).node.push(node("Relu", "again", &["x"], &["y"]));
    rejects(dir.path(), &m.encode_to_vec(), "check", &["\"y\" is defined twice"]);

    let mut m = valid();
    let g = graph(&mut m);
    g.node.insert(0, node("Relu", "early", &["y"], &["z"]));
    g.output.push(value("z", Some(&[2])));
    rejects(dir.path(), &m.encode_to_vec(), "check", &["node \"early\"", "out of order"]);

    let mut m = valid();
    graph(&mut m).input[0].r#type = None;
    rejects(dir.path(), &m.encode_to_vec(), "check", &["input \"x\" has no type"]);

    let mut m = valid();
    graph(&mut m).output[0] = value("y", None);
    rejects(dir.path(), &m.encode_to_vec(), "check", &["output \"y\" has no shape"]);

    let mut m = valid();
    let attr = AttributeProto {
        name: Some("alpha".into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(1.0),
        ..Default::default()
    };
    graph(&mut m).node[0].attribute = vec![attr.clone(), attr];
    rejects(dir.path(), &m.encode_to_vec(), "check", &["attribute \"alpha\"", "more than once"]);
}

#[test]
fn all_problems_are_reported_together() {
    let dir = case_dir();
    let mut m = valid();
    m.ir_version = Some(99);
    let g = graph(&mut m);
    g.node[0].input = vec!["nope".into()];
    g.input[0].r#type = None;
    rejects(
        dir.path(),
        &m.encode_to_vec(),
        "check",
        &["ir_version 99", "\"nope\" is undefined", "input \"x\" has no type"],
    );
}

#[test]
fn tensor_data_must_match_dims() {
    let dir = case_dir();
    let m = with_weight(weight("w", &[2], vec![0; 4]));
    rejects(dir.path(), &m.encode_to_vec(), "check", &["initializer \"w\"", "raw_data has 4 bytes"]);
    let m = with_weight(weight("w", &[-2], vec![0; 8]));
    rejects(dir.path(), &m.encode_to_vec(), "check", &["initializer \"w\"", "negative"]);
    let m = with_weight(weight("w", &[i64::MAX, i64::MAX], vec![0; 8]));
    rejects(dir.path(), &m.encode_to_vec(), "check", &["initializer \"w\"", "overflows"]);
}

#[test]
fn external_data_stays_inside_the_model_folder() {
    let root = case_dir();
    let dir = root.path().join("model");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(root.path().join("secret.bin"), [0u8; 8]).expect("write");
    std::fs::write(dir.join("w.bin"), [0u8; 8]).expect("write");

    rejects(
        &dir,
        &external("../secret.bin", None, None).encode_to_vec(),
        "check",
        &["\"../secret.bin\"", "leaves the model's folder"],
    );
    let abs = root.path().join("secret.bin");
    rejects(&dir, &external(&abs.to_string_lossy(), None, None).encode_to_vec(), "check", &["is an absolute path"]);
    std::os::unix::fs::symlink(root.path().join("secret.bin"), dir.join("link.bin")).expect("symlink");
    rejects(&dir, &external("link.bin", None, None).encode_to_vec(), "check", &["\"link.bin\"", "through a symlink"]);
    rejects(&dir, &external("w.bin", Some("4"), Some("8")).encode_to_vec(), "check", &["beyond the end of the file"]);
    rejects(&dir, &external("w.bin", Some("18446744073709551615"), Some("8")).encode_to_vec(), "check", &["\"w.bin\""]);
}

#[test]
fn unsupported_operators_are_listed_at_once() {
    let dir = case_dir();
    let mut m = valid();
    let g = graph(&mut m);
    g.node = vec![node("NoSuchOp", "first", &["x"], &["t"]), node("AlsoMissing", "second", &["t"], &["y"])];
    let bytes = m.encode_to_vec();
    let expected = [
        "node \"first\" (NoSuchOp): unsupported operator NoSuchOp (domain \"\", opset 17)",
        "node \"second\" (AlsoMissing)",
    ];
    rejects(dir.path(), &bytes, "check", &expected);
    rejects(dir.path(), &bytes, "compile", &expected);
}
