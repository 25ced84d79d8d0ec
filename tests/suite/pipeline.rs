//! The pipeline's promises, seen through the CLI on models built here:
//! model-local functions are inlined with `ref_attr_name` substitution,
//! unbound symbolic dims are all listed, shape subgraphs fold to constants,
//! f16 tensors of an f32-only kernel are staged (empty ones too), `info` and
//! `bench` print the lines the README's CLI tour shows, packed int4 tensors move through
//! views, cast, and are size-checked.

use crate::common::{onnxc_in, succeeded, write_model};
use crate::models::{float_attr, int64s, int_attr, model, node, typed_value, value};
use crate::snapshot::{assert_snapshot, compiled_mir};
use onnx_proto::*;
use prost::Message;

#[test]
fn functions_are_inlined_with_attribute_references() {
    // local.ScaledLeaky(x) = LeakyRelu(x, alpha = @alpha), called twice.
    let mut leaky = node("LeakyRelu", "leaky", &["x"], &["y"]);
    leaky.attribute.push(AttributeProto {
        name: Some("alpha".into()),
        ref_attr_name: Some("alpha".into()),
        r#type: Some(attribute_proto::AttributeType::Float as i32),
        ..Default::default()
    });
    let function = FunctionProto {
        name: Some("ScaledLeaky".into()),
        domain: Some("local".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        attribute: vec!["alpha".into()],
        node: vec![leaky],
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        ..Default::default()
    };
    let call = |name: &str, x: &str, y: &str, alpha: f32| {
        let mut n = node("ScaledLeaky", name, &[x], &[y]);
        n.domain = Some("local".into());
        n.attribute.push(float_attr("alpha", alpha));
        n
    };
    let mut m = model(
        vec![call("first", "x", "a", 0.5), call("second", "a", "y", 0.1)],
        vec![value("x", Some(&[2]))],
        vec![value("y", Some(&[2]))],
    );
    m.functions.push(function);
    m.opset_import.push(OperatorSetIdProto { domain: Some("local".into()), version: Some(1) });

    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let x = TensorProto {
        name: Some("x".into()),
        dims: vec![2],
        data_type: Some(1),
        float_data: vec![-4.0, 2.0],
        ..Default::default()
    };
    std::fs::write(dir.path().join("x.pb"), x.encode_to_vec()).expect("write input");
    let out = onnxc_in(dir.path(), &["run", "model.onnx", "x.pb", "-o", "out"]);
    assert!(succeeded(&out), "onnxc run failed: {}", out.stderr);
    let y = TensorProto::decode(std::fs::read(dir.path().join("out/output_0.pb")).expect("output").as_slice())
        .expect("a TensorProto");
    let raw = y.raw_data.expect("raw data");
    let got: Vec<f32> = raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    // -4 → -2 (alpha 0.5) → -0.2 (alpha 0.1); 2 stays 2.
    assert!((got[0] + 0.2).abs() < 1e-6 && got[1] == 2.0, "got {got:?}");
}

#[test]
fn every_unbound_dim_is_listed_and_dims_can_be_bound() {
    let m = model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![value("x", Some(&[-1, -1]))],
        vec![value("y", Some(&[-1, -1]))],
    );
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o"]);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    for dim in ["\"d0\"", "\"d1\""] {
        assert!(out.stderr.contains(dim), "{dim} not listed:\n{}", out.stderr);
    }
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o", "--dim", "d0=2", "--dim", "d1=3"]);
    assert!(succeeded(&out), "{}", out.stderr);
    let header = std::fs::read_to_string(dir.path().join("m.h")).expect("header");
    assert!(header.contains("#define MODEL_INPUT0_ELEMENTS 6u"), "{header}");
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "s.o", "--shape", "x=4x5"]);
    assert!(succeeded(&out), "{}", out.stderr);
}

#[test]
fn shape_subgraphs_fold_to_constants() {
    // y = Reshape(x, Concat([-1], Gather(Shape(x), [1]))) with x: [d0, 3]
    let mut m = model(
        vec![
            node("Shape", "shape", &["x"], &["s"]),
            node("Gather", "gather", &["s", "one"], &["c"]),
            node("Concat", "concat", &["minus_one", "c"], &["target"]),
            node("Reshape", "reshape", &["x", "target"], &["r"]),
            node("Relu", "relu", &["r"], &["y"]),
        ],
        vec![value("x", Some(&[-1, 3]))],
        vec![value("y", Some(&[-1, 3]))],
    );
    let g = m.graph.as_mut().expect("graph");
    g.initializer.push(int64s("one", &[1], &[1]));
    g.initializer.push(int64s("minus_one", &[1], &[-1]));
    g.node[2].attribute.push(int_attr("axis", 0));
    assert_snapshot("shape_folded", &compiled_mir(&m, &["--dim", "d0=2"]));
}

/// `v` with element type `elem` (an ONNX data-type number).
/// Runs `y = a @ b` on f16 tensors of dims `[a, b, y]` through `onnxc run`;
/// returns y widened to f32.
fn f16_matmul(dims: [&[i64]; 3], a: &[f32], b: &[f32]) -> Vec<f32> {
    let f16_tensor = |name: &str, dims: &[i64], values: &[f32]| TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(10),
        raw_data: Some(values.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect()),
        ..Default::default()
    };
    let m = model(
        vec![node("MatMul", "matmul", &["a", "b"], &["y"])],
        vec![typed_value("a", 10, Some(dims[0])), typed_value("b", 10, Some(dims[1]))],
        vec![typed_value("y", 10, Some(dims[2]))],
    );
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    for (file, t) in [("a.pb", f16_tensor("a", dims[0], a)), ("b.pb", f16_tensor("b", dims[1], b))] {
        std::fs::write(dir.path().join(file), t.encode_to_vec()).expect("write input");
    }
    let out = onnxc_in(dir.path(), &["run", "model.onnx", "a.pb", "b.pb", "-o", "out"]);
    assert!(succeeded(&out), "onnxc run failed for {dims:?}: {}", out.stderr);
    let y = TensorProto::decode(std::fs::read(dir.path().join("out/output_0.pb")).expect("output").as_slice())
        .expect("a TensorProto");
    assert_eq!(y.data_type, Some(10));
    y.raw_data.unwrap_or_default().chunks_exact(2).map(|h| half::f16::from_le_bytes([h[0], h[1]]).to_f32()).collect()
}

#[test]
fn half_tensors_are_staged_through_f32_kernels() {
    // Exact in f16: [[1, 2, 3], [4, 5, 6]] @ [[1, 0], [0, 1], [1, 1]].
    let y = f16_matmul([&[2, 3], &[3, 2], &[2, 2]], &[1., 2., 3., 4., 5., 6.], &[1., 0., 0., 1., 1., 1.]);
    assert_eq!(y, [4., 5., 10., 11.]);
    // Every tensor empty: nothing to stage, no scratch at all.
    assert!(f16_matmul([&[0, 3], &[3, 0], &[0, 0]], &[], &[]).is_empty());
}

#[test]
fn info_and_bench_report_what_the_cli_contract_says() {
    let m = model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![value("x", Some(&[1, 8]))],
        vec![value("y", Some(&[1, 8]))],
    );
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let out = onnxc_in(dir.path(), &["info", "model.onnx"]);
    assert!(succeeded(&out), "{}", out.stderr);
    for line in ["ir_version: 8", "input: x f32[1,8]", "Relu: 1", "workspace bytes:"] {
        assert!(out.stdout.contains(line), "info lacks {line:?}:\n{}", out.stdout);
    }
    let out = onnxc_in(dir.path(), &["bench", "model.onnx", "--iters", "5"]);
    assert!(succeeded(&out), "{}", out.stderr);
    let line = out.stdout.lines().last().unwrap_or("");
    assert!(
        line.starts_with("median ") && line.contains(" ms (5 runs), first call ") && line.ends_with(" ms"),
        "{line}"
    );
    // `--isa` times a level every CPU has, and names the levels when the
    // one asked for does not exist.
    let out = onnxc_in(dir.path(), &["bench", "model.onnx", "--iters", "2", "--isa", "generic"]);
    assert!(succeeded(&out) && out.stdout.contains(" ms (2 runs)"), "{}", out.stderr);
    let out = onnxc_in(dir.path(), &["bench", "model.onnx", "--isa", "sse9"]);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("--isa sse9: expected one of generic, avx2-fma, avx512f"), "{}", out.stderr);
}

#[test]
fn bench_runs_on_input_files_that_bind_the_shapes() {
    // y = Gather(table, ids) with ids of unknown length: no shape to time
    // until a file gives the ids.
    let mut m = model(
        vec![node("Gather", "gather", &["table", "ids"], &["y"])],
        vec![typed_value("ids", 7, Some(&[-1]))],
        vec![value("y", Some(&[-1, 2]))],
    );
    m.graph.as_mut().expect("graph").initializer.push(crate::models::floats("table", &[4, 2], &[0.; 8]));
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let out = onnxc_in(dir.path(), &["bench", "model.onnx", "--iters", "2"]);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    let ids = int64s("ids", &[3], &[3, 1, 2]);
    std::fs::write(dir.path().join("ids.pb"), ids.encode_to_vec()).expect("write input");
    let out = onnxc_in(dir.path(), &["bench", "model.onnx", "ids.pb", "--iters", "2"]);
    assert!(succeeded(&out), "{}", out.stderr);
    assert!(out.stdout.contains(" ms (2 runs), first call "), "{}", out.stdout);
}

/// An int4 tensor of dims `dims` holding `packed` (ONNX packing).
fn int4_tensor(name: &str, dims: &[i64], packed: &[u8]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(22),
        raw_data: Some(packed.to_vec()),
        ..Default::default()
    }
}

#[test]
fn packed_int4_tensors_move_cast_and_are_checked() {
    // x: int4[3] = [-1, 2, -8], packed low nibble first, the last byte
    // padded: 0x2f, 0x08. y = Reshape(x, [3, 1]) keeps the bytes; z =
    // Cast(x, INT8) unpacks them.
    let mut m = model(
        vec![node("Reshape", "reshape", &["x", "shape"], &["y"]), node("Cast", "cast", &["x"], &["z"])],
        vec![typed_value("x", 22, Some(&[3]))],
        vec![typed_value("y", 22, Some(&[3, 1])), typed_value("z", 3, Some(&[3]))],
    );
    m.graph.as_mut().expect("graph").initializer.push(int64s("shape", &[2], &[3, 1]));
    m.graph.as_mut().expect("graph").node[1].attribute.push(int_attr("to", 3));
    let outs = crate::common::run_model(&m, &[int4_tensor("x", &[3], &[0x2f, 0x08])])
        .unwrap_or_else(|o| panic!("onnxc run failed: {}", o.stderr));
    assert_eq!((outs[0].data_type, outs[0].raw_data.as_deref()), (Some(22), Some(&[0x2f, 0x08][..])));
    assert_eq!(outs[1].raw_data.as_deref(), Some(&[0xff, 0x02, 0xf8][..]));

    // Three int4 need two bytes: one is a clear error, not a short read.
    let err = crate::common::run_model(&m, &[int4_tensor("x", &[3], &[0x2f])]).expect_err("short data fails");
    assert!(err.stderr.contains("holds 1 bytes") && err.stderr.contains("need 2"), "{}", err.stderr);

    // An operator that cannot address packed elements says so.
    let t = model(
        vec![node("Transpose", "transpose", &["x"], &["y"])],
        vec![typed_value("x", 22, Some(&[2, 2]))],
        vec![typed_value("y", 22, Some(&[2, 2]))],
    );
    let err = crate::common::run_model(&t, &[int4_tensor("x", &[2, 2], &[0x21, 0x43])]).expect_err("rejected");
    assert!(err.stderr.contains("Transpose on INT4 tensors is not supported yet"), "{}", err.stderr);
}

#[test]
fn a_reader_that_stops_early_ends_onnxc_quietly() {
    // `onnxc info model.onnx | head -c 1`: the pipe closes after the first
    // line, while info still compiles the model to print the rest; that
    // must not be a panic.
    let densenet = crate::common::data_dir().join("light/densenet121/model.onnx");
    let mut child = std::process::Command::new(crate::common::onnxc())
        .args(["info".as_ref(), densenet.as_os_str()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start onnxc");
    let mut first = [0u8; 1];
    std::io::Read::read_exact(child.stdout.as_mut().expect("stdout"), &mut first).expect("some output");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("onnxc ends");
    // Quietly: nothing on stderr, and ended by SIGPIPE as `cat` would be
    // (or done, if everything was written before the pipe closed).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "onnxc said something: {stderr}");
    use std::os::unix::process::ExitStatusExt;
    let sigpipe = out.status.signal() == Some(libc::SIGPIPE);
    assert!(out.status.success() || sigpipe, "onnxc ended with {:?}", out.status);
}

#[test]
fn info_counts_macs_of_convolutions_with_packed_weights() {
    // The multiply-adds of the compiled graph: ResNet-50's convolutions
    // (4,087,136,256), counted from the logical weight shapes that the Conv
    // keeps when its weights are packed at compile time, and its classifier.
    // The light model's classifier weight is a ConstantOfShape splat, which
    // `gemm_by_splat` computes as a 2048-deep column and a 1000-wide
    // broadcast (3,048) instead of a 2048 x 1000 product.
    let resnet = crate::common::data_dir().join("light/resnet50");
    let out = onnxc_in(&resnet, &["info", "model.onnx"]);
    assert!(succeeded(&out), "{}", out.stderr);
    assert!(out.stdout.contains("macs: 4087139304\n"), "{}", out.stdout);
}
