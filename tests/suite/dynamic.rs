//! Data-dependent output shapes (NonZero, TopK with a run-time K, Range
//! with run-time bounds): compiled without knowing the data, memory from the
//! default workspace allocator or a caller's hook, the actual shape
//! reported, and running out of room a status naming the node — through the
//! CLI and through the C ABI of the real object file.

use crate::common::{onnxc_in, run_c_program, succeeded, write_model};
use crate::models::{floats, model, node, typed_value, value};
use onnx_proto::*;
use prost::Message;
use std::path::Path;

fn write_tensor(dir: &Path, file: &str, t: TensorProto) {
    std::fs::write(dir.join(file), t.encode_to_vec()).expect("write input");
}

fn scalar_i64(name: &str, v: i64) -> TensorProto {
    TensorProto { name: Some(name.into()), data_type: Some(7), int64_data: vec![v], ..Default::default() }
}

/// Dims and i64 values of an output `onnxc run` wrote.
fn read_i64s(path: &Path) -> (Vec<i64>, Vec<i64>) {
    let t = TensorProto::decode(std::fs::read(path).expect("output").as_slice()).expect("a TensorProto");
    let raw = t.raw_data.unwrap_or_default();
    (t.dims, raw.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect())
}

fn nonzero_model() -> ModelProto {
    model(
        vec![node("NonZero", "nz", &["x"], &["y"])],
        vec![value("x", Some(&[2, 3]))],
        vec![typed_value("y", 7, Some(&[2, -1]))],
    )
}

#[test]
fn nonzero_reports_its_shape_and_the_workspace_bounds_it() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &nonzero_model());
    write_tensor(dir.path(), "x.pb", floats("x", &[2, 3], &[0.0, 2.0, 0.0, 3.0, 0.0, 4.0]));

    let info = onnxc_in(dir.path(), &["info", "model.onnx"]);
    assert!(succeeded(&info), "{}", info.stderr);
    assert!(info.stdout.contains("up to") && info.stdout.contains("data-dependent"), "{}", info.stdout);

    let out = onnxc_in(dir.path(), &["run", "model.onnx", "x.pb", "-o", "out"]);
    assert!(succeeded(&out), "{}", out.stderr);
    assert_eq!(read_i64s(&dir.path().join("out/output_0.pb")), (vec![2, 3], vec![0, 1, 1, 1, 0, 2]));

    // No room past the (empty) arena and no hook: a status naming the node.
    let out = onnxc_in(dir.path(), &["run", "model.onnx", "x.pb", "-o", "out", "--workspace", "0"]);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("\"nz\"") && out.stderr.contains("out of memory"), "{}", out.stderr);
    // 64 bytes hold the six indices (48 bytes).
    let out = onnxc_in(dir.path(), &["run", "model.onnx", "x.pb", "-o", "out64", "--workspace", "64"]);
    assert!(succeeded(&out), "{}", out.stderr);
    assert_eq!(read_i64s(&dir.path().join("out64/output_0.pb")), (vec![2, 3], vec![0, 1, 1, 1, 0, 2]));
}

#[test]
fn topk_with_a_run_time_k_allocates_k_entries_and_checks_k() {
    let m = model(
        vec![node("TopK", "top", &["x", "k"], &["values", "indices"])],
        vec![value("x", Some(&[5])), typed_value("k", 7, Some(&[1]))],
        vec![value("values", Some(&[-1])), typed_value("indices", 7, Some(&[-1]))],
    );
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let compiled = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o"]);
    assert!(succeeded(&compiled), "K as a graph input must compile: {}", compiled.stderr);
    let header = std::fs::read_to_string(dir.path().join("m.h")).expect("header");
    assert!(header.contains("#define MODEL_OUTPUT1_DYNAMIC 1"), "{header}");

    write_tensor(dir.path(), "x.pb", floats("x", &[5], &[1.0, 5.0, 3.0, 4.0, 2.0]));
    let mut k = scalar_i64("k", 2);
    k.dims = vec![1];
    write_tensor(dir.path(), "k.pb", k.clone());
    let out = onnxc_in(dir.path(), &["run", "model.onnx", "x.pb", "k.pb", "-o", "out"]);
    assert!(succeeded(&out), "{}", out.stderr);
    assert_eq!(read_i64s(&dir.path().join("out/output_1.pb")), (vec![2], vec![1, 3]));

    k.int64_data = vec![6];
    write_tensor(dir.path(), "k.pb", k);
    let out = onnxc_in(dir.path(), &["run", "model.onnx", "x.pb", "k.pb", "-o", "out"]);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("\"top\"") && out.stderr.contains("index out of range"), "{}", out.stderr);
}

#[test]
fn range_with_run_time_bounds_is_unbounded_and_uses_the_allocator() {
    let m = model(
        vec![node("Range", "range", &["start", "limit", "delta"], &["y"])],
        ["start", "limit", "delta"].iter().map(|n| typed_value(n, 7, Some(&[]))).collect(),
        vec![typed_value("y", 7, Some(&[-1]))],
    );
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let compiled = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o"]);
    assert!(succeeded(&compiled), "{}", compiled.stderr);
    let header = std::fs::read_to_string(dir.path().join("m.h")).expect("header");
    assert!(header.contains("#define MODEL_DYNAMIC_UNBOUNDED 1"), "{header}");

    for (name, v) in [("start", 10), ("limit", -2), ("delta", -3)] {
        write_tensor(dir.path(), &format!("{name}.pb"), scalar_i64(name, v));
    }
    let args = ["run", "model.onnx", "start.pb", "limit.pb", "delta.pb", "-o", "out"];
    let out = onnxc_in(dir.path(), &args);
    assert!(succeeded(&out), "{}", out.stderr);
    assert_eq!(read_i64s(&dir.path().join("out/output_0.pb")), (vec![4], vec![10, 7, 4, 1]));
    // The arena is empty and 4 i64s need 32 bytes: 31 are not enough.
    let out = onnxc_in(dir.path(), &[&args[..], &["--workspace", "31"]].concat());
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    let out = onnxc_in(dir.path(), &[&args[..], &["--workspace", "32"]].concat());
    assert!(succeeded(&out), "{}", out.stderr);

    write_tensor(dir.path(), "delta.pb", scalar_i64("delta", 0));
    let out = onnxc_in(dir.path(), &args);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("\"range\""), "{}", out.stderr);
}

#[test]
fn c_callers_get_data_dependent_outputs_from_the_workspace_or_their_hook() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &nonzero_model());
    let compiled = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "model.o", "--emit", "header,archive"]);
    assert!(succeeded(&compiled), "{}", compiled.stderr);
    run_c_program(dir.path(), "dynamic_outputs", &["model.a"]);
}

#[test]
fn operators_with_run_time_shape_arguments_compile_without_specialisation() {
    // (operator, inputs, their types, output rank)
    let cases: [(&str, Vec<&str>, Vec<ValueInfoProto>, usize); 4] = [
        ("Expand", vec!["x", "shape"], vec![value("x", Some(&[3, 1])), typed_value("shape", 7, Some(&[2]))], 2),
        ("Tile", vec!["x", "repeats"], vec![value("x", Some(&[3, 1])), typed_value("repeats", 7, Some(&[2]))], 2),
        (
            "OneHot",
            vec!["x", "depth", "values"],
            vec![typed_value("x", 7, Some(&[3, 1])), typed_value("depth", 7, Some(&[])), value("values", Some(&[2]))],
            3,
        ),
        ("Resize", vec!["x", "", "scales"], vec![value("x", Some(&[1, 1, 2, 2])), value("scales", Some(&[4]))], 4),
    ];
    for (op, inputs, values, rank) in cases {
        let dims: Vec<i64> = (0..rank).map(|_| -1).collect();
        let m = model(vec![node(op, "n", &inputs, &["y"])], values, vec![value("y", Some(&dims))]);
        let dir = tempfile::tempdir().expect("temporary folder");
        write_model(dir.path(), "model.onnx", &m);
        let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "model.o"]);
        assert!(succeeded(&out), "{op}: {}", out.stderr);
        let header = std::fs::read_to_string(dir.path().join("model.h")).expect("header");
        assert!(header.contains("#define MODEL_OUTPUT0_DYNAMIC 1"), "{op}: {header}");
    }
}
