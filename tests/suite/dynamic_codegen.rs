//! Code compiled once over `--dim` ranges: one compilation of a model
//! with symbolic batch and sequence dims runs data sets of several sizes
//! (`onnxc test --dynamic`) and gives, bit for bit, what the code
//! specialised to each size gives (`onnxc run`); inputs outside the
//! ranges are refused naming the input and dim; what the dynamic path
//! does not generate yet is refused naming the node.

use crate::common::{onnxc_in, succeeded, write_model};
use crate::models::{floats, int_attr, ints_attr, model, node, value};
use onnx_proto::*;
use prost::Message;
use std::path::Path;

/// Deterministic values in [-2, 2), never all alike.
fn pseudo_random(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 8) as f32 / (1u32 << 22) as f32 - 2.0
        })
        .collect()
}

/// `x: [b, s, 8]` (`b` and `s` symbolic) through a projection, a bias, a
/// Relu, a second projection and a product with a broadcast row:
/// `y: [b, s, 4]`.
fn projection_model(extra: Vec<NodeProto>, output: &str) -> ModelProto {
    let mut nodes = vec![
        node("MatMul", "proj", &["x", "w1"], &["p"]),
        node("Add", "bias", &["p", "b1"], &["q"]),
        node("Relu", "relu", &["q"], &["r"]),
        node("MatMul", "out", &["r", "w2"], &["o"]),
        node("Mul", "scale", &["o", "row"], &["y"]),
    ];
    nodes.extend(extra);
    let mut x = value("x", Some(&[-1, -1, 8]));
    let mut y = value(output, Some(&[-1, -1, 4]));
    for v in [&mut x, &mut y] {
        name_dims(v, &["b", "s"]);
    }
    let mut m = model(nodes, vec![x], vec![y]);
    let g = m.graph.as_mut().expect("a graph");
    g.initializer = vec![
        floats("w1", &[8, 16], &pseudo_random(128, 1)),
        floats("b1", &[16], &pseudo_random(16, 2)),
        floats("w2", &[16, 4], &pseudo_random(64, 3)),
        floats("row", &[1, 4], &pseudo_random(4, 4)),
    ];
    m
}

/// Renames the symbolic dims of `v`, in order.
fn name_dims(v: &mut ValueInfoProto, names: &[&str]) {
    use onnx_proto::tensor_shape_proto::dimension::Value as D;
    let Some(type_proto::Value::TensorType(t)) = v.r#type.as_mut().and_then(|t| t.value.as_mut()) else { return };
    let dims = t.shape.as_mut().map(|s| s.dim.iter_mut()).into_iter().flatten();
    let symbolic = dims.filter(|d| matches!(d.value, Some(D::DimParam(_))));
    for (d, n) in symbolic.zip(names) {
        d.value = Some(D::DimParam(n.to_string()));
    }
}

fn write_tensor(path: &Path, t: &TensorProto) {
    std::fs::write(path, t.encode_to_vec()).expect("write a tensor");
}

/// A case folder `case` for `m`, one data set per `(b, s)` size, each
/// with the output of the code specialised to that size (`onnxc run`).
fn case_with_static_outputs(dir: &Path, m: &ModelProto, sizes: &[(i64, i64)]) {
    let case = dir.join("case");
    std::fs::create_dir_all(&case).expect("a case folder");
    write_model(&case, "model.onnx", m);
    for (k, &(b, s)) in sizes.iter().enumerate() {
        let set = case.join(format!("test_data_set_{k}"));
        std::fs::create_dir_all(&set).expect("a data set folder");
        let x = floats("x", &[b, s, 8], &pseudo_random((b * s * 8) as usize, 10 + k as u32));
        write_tensor(&set.join("input_0.pb"), &x);
        let out =
            onnxc_in(dir, &["run", "case/model.onnx", &format!("case/test_data_set_{k}/input_0.pb"), "-o", "out"]);
        assert!(succeeded(&out), "{}", out.stderr);
        std::fs::rename(dir.join("out/output_0.pb"), set.join("output_0.pb")).expect("move the output");
    }
}

/// `onnxc test --dynamic` on the case, every value compared exactly.
fn test_dynamic(dir: &Path, dims: &[&str], guard_pages: bool) -> crate::common::Output {
    let mut args = vec!["test", "--dynamic", "--rtol", "0", "--atol", "0", "case"];
    if guard_pages {
        args.push("--guard-pages");
    }
    for d in dims {
        args.extend(["--dim", d]);
    }
    onnxc_in(dir, &args)
}

#[test]
fn one_compilation_runs_every_size_with_the_bits_of_the_specialised_code() {
    let dir = tempfile::tempdir().expect("temporary folder");
    case_with_static_outputs(dir.path(), &projection_model(Vec::new(), "y"), &[(1, 3), (2, 5), (3, 16)]);
    for guard_pages in [false, true] {
        let out = test_dynamic(dir.path(), &["b=1..4", "s=1..16"], guard_pages);
        assert!(succeeded(&out) && out.stdout.contains("1 passed, 0 failed"), "{}{}", out.stdout, out.stderr);
    }
}

/// `x: [b, s, 8]` through LayerNormalization (scale and bias), a
/// projection and a softmax over `axis`: `y: [b, s, 4]`.
fn normalised_model(axis: i64) -> ModelProto {
    let mut norm = node("LayerNormalization", "norm", &["x", "gamma", "beta"], &["n"]);
    norm.attribute.push(int_attr("axis", -1));
    let mut softmax = node("Softmax", "softmax", &["p"], &["y"]);
    softmax.attribute.push(int_attr("axis", axis));
    let nodes = vec![norm, node("MatMul", "proj", &["n", "w"], &["p"]), softmax];
    let mut x = value("x", Some(&[-1, -1, 8]));
    let mut y = value("y", Some(&[-1, -1, 4]));
    for v in [&mut x, &mut y] {
        name_dims(v, &["b", "s"]);
    }
    let mut m = model(nodes, vec![x], vec![y]);
    let g = m.graph.as_mut().expect("a graph");
    g.initializer = vec![
        floats("gamma", &[8], &pseudo_random(8, 5)),
        floats("beta", &[8], &pseudo_random(8, 6)),
        floats("w", &[8, 4], &pseudo_random(32, 7)),
    ];
    m
}

#[test]
fn normalisation_and_softmax_over_static_columns_run_every_size() {
    let dir = tempfile::tempdir().expect("temporary folder");
    case_with_static_outputs(dir.path(), &normalised_model(-1), &[(1, 1), (2, 7), (4, 16)]);
    let out = test_dynamic(dir.path(), &["b=1..4", "s=1..16"], true);
    assert!(succeeded(&out) && out.stdout.contains("1 passed, 0 failed"), "{}{}", out.stdout, out.stderr);
}

#[test]
fn a_softmax_over_a_symbolic_dim_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("temporary folder");
    case_with_static_outputs(dir.path(), &normalised_model(1), &[(2, 3)]);
    let out = test_dynamic(dir.path(), &["b=1..4", "s=1..16"], false);
    let refusal = "node \"softmax\" (Softmax): symbolic dims: a reduction over a symbolic dim is not compiled yet";
    assert!(out.stdout.contains(refusal), "{}", out.stdout);
}

#[test]
fn the_comparison_can_fail() {
    // The expected output of one size given for another: the run must fail.
    let dir = tempfile::tempdir().expect("temporary folder");
    case_with_static_outputs(dir.path(), &projection_model(Vec::new(), "y"), &[(2, 5), (2, 5)]);
    let set = dir.path().join("case/test_data_set_1");
    let mut y =
        TensorProto::decode(std::fs::read(set.join("output_0.pb")).expect("an output").as_slice()).expect("a tensor");
    let raw = y.raw_data.as_mut().expect("raw data");
    raw[0] ^= 1;
    write_tensor(&set.join("output_0.pb"), &y);
    let out = test_dynamic(dir.path(), &["b=1..4", "s=1..16"], false);
    assert!(!succeeded(&out) && out.stdout.contains("1 of 40 values differ"), "{}", out.stdout);
}

#[test]
fn a_size_outside_the_range_is_refused_naming_the_input_and_dim() {
    let dir = tempfile::tempdir().expect("temporary folder");
    case_with_static_outputs(dir.path(), &projection_model(Vec::new(), "y"), &[(2, 5)]);
    let out = test_dynamic(dir.path(), &["b=1..4", "s=1..4"], false);
    assert!(out.stdout.contains("input \"x\" dim 1 is 5, outside what s allows (at most 4)"), "{}", out.stdout);
    // Below the range, and not a multiple: the compiled code refuses it
    // with the input's status.
    for range in ["s=6..16", "s=1..16%2"] {
        let out = test_dynamic(dir.path(), &["b=1..4", range], false);
        assert!(out.stdout.contains("FAIL case: input \"x\": an input descriptor does not match"), "{}", out.stdout);
    }
}

#[test]
fn an_operator_without_run_time_sizes_is_refused_by_name() {
    let mut swap = node("Transpose", "swap", &["y"], &["z"]);
    swap.attribute.push(ints_attr("perm", &[1, 0, 2]));
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &projection_model(vec![swap], "z"));
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o", "--dim", "b=1..4", "--dim", "s=1..16"]);
    assert!(!succeeded(&out));
    let refusal = "node \"swap\" (Transpose): Transpose is not compiled for symbolic dims yet";
    assert!(out.stderr.contains(refusal), "{}", out.stderr);
    let unbounded = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o", "--dim", "b=1..4"]);
    assert!(unbounded.stderr.contains("--dim s=LO..HI (every size in a range)"), "{}", unbounded.stderr);
}

#[test]
fn a_node_of_symbolic_shape_is_refused_for_its_operator_not_for_a_guessed_shape() {
    // Gather along the sequence: the refusal names Gather's lack of
    // run-time sizes, not a check of its attributes against a shape
    // inference left symbolic.
    let mut pick = node("Gather", "pick", &["y", "first"], &["g"]);
    pick.attribute.push(int_attr("axis", 1));
    let mut m = projection_model(vec![pick], "g");
    let g = m.graph.as_mut().expect("a graph");
    g.initializer.push(crate::models::int64s("first", &[1], &[0]));
    g.output[0] = value("g", None);
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o", "--dim", "b=1..4", "--dim", "s=1..16"]);
    let refusal = "node \"pick\" (Gather): Gather is not compiled for symbolic dims yet";
    assert!(!succeeded(&out) && out.stderr.contains(refusal), "{}", out.stderr);
}
