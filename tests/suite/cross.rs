//! Cross targets: an MLP and a bidirectional LSTM (built here) and the
//! example CNN are compiled for
//! aarch64-unknown-linux-gnu and riscv64gc-unknown-linux-gnu (portable mode,
//! automatic off the host), linked with Debian's cross gcc (`-static`)
//! against `examples/c/main.c`, run under qemu-user, and compared with the
//! outputs of the host build (with its kernel library) within main.c's
//! tolerance (1e-4 + 1e-3 |expected|). The objects must reference no symbol
//! beyond memcpy/memset.
//!
//! The tools come from `tests/scripts/install_cross_tools.sh` (which
//! `tests/run.sh` runs); without them the test fails saying so.

use crate::common::{data_dir, onnxc, repo_root, run_model, run_ok as run, write_model};
use crate::models::{f32_bytes, f32s, floats, int_attr, model, node, value};
use object::{Object, ObjectSymbol};
use onnx_proto::{attribute_proto, AttributeProto, ModelProto, TensorProto};
use prost::Message;
use std::path::Path;
use std::process::Command;

/// (target triple, gcc and qemu prefix, ELF machine).
const TARGETS: &[(&str, &str, object::Architecture)] = &[
    ("aarch64-unknown-linux-gnu", "aarch64", object::Architecture::Aarch64),
    ("riscv64gc-unknown-linux-gnu", "riscv64", object::Architecture::Riscv64),
];

/// Deterministic values in [-scale, scale) (a 64-bit LCG).
fn pseudo_random(count: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// 64-32-10: Gemm, Relu, MatMul + Add, Softmax.
fn mlp() -> ModelProto {
    let mut m = model(
        vec![
            {
                let mut n = node("Gemm", "fc1", &["x", "w1", "b1"], &["h"]);
                n.attribute.push(int_attr("transB", 1));
                n
            },
            node("Relu", "relu", &["h"], &["r"]),
            node("MatMul", "fc2", &["r", "w2"], &["m"]),
            node("Add", "bias2", &["m", "b2"], &["logits"]),
            {
                let mut n = node("Softmax", "softmax", &["logits"], &["probs"]);
                n.attribute.push(int_attr("axis", -1));
                n
            },
        ],
        vec![value("x", Some(&[1, 64]))],
        vec![value("probs", Some(&[1, 10]))],
    );
    let graph = m.graph.as_mut().expect("a graph");
    graph.initializer = vec![
        floats("w1", &[32, 64], &pseudo_random(32 * 64, 1, 0.25)),
        floats("b1", &[32], &pseudo_random(32, 2, 0.1)),
        floats("w2", &[32, 10], &pseudo_random(32 * 10, 3, 0.5)),
        floats("b2", &[10], &pseudo_random(10, 4, 0.1)),
    ];
    m
}

/// A bidirectional LSTM (8 inputs, 6 units, 5 steps) with biases, as
/// sequence models run it: the layer of `rnn_loops` on every target.
fn lstm() -> ModelProto {
    let mut n = node("LSTM", "lstm", &["x", "w", "r", "b"], &["y"]);
    n.attribute.push(int_attr("hidden_size", 6));
    n.attribute.push(AttributeProto {
        name: Some("direction".into()),
        r#type: Some(attribute_proto::AttributeType::String as i32),
        s: Some(b"bidirectional".to_vec()),
        ..Default::default()
    });
    let mut m = model(vec![n], vec![value("x", Some(&[5, 1, 8]))], vec![value("y", Some(&[5, 2, 1, 6]))]);
    m.graph.as_mut().expect("a graph").initializer = vec![
        floats("w", &[2, 24, 8], &pseudo_random(2 * 24 * 8, 6, 0.4)),
        floats("r", &[2, 24, 6], &pseudo_random(2 * 24 * 6, 7, 0.4)),
        floats("b", &[2, 48], &pseudo_random(2 * 48, 8, 0.2)),
    ];
    m
}

/// The tool `name`, or a failure naming the script that installs it.
fn tool(name: &str) -> String {
    let found =
        Command::new("sh").arg("-c").arg(format!("command -v {name}")).output().is_ok_and(|o| o.status.success());
    assert!(found, "{name} is not installed: run `bash tests/scripts/install_cross_tools.sh` (tests/run.sh does)");
    name.to_string()
}

/// Compiles `model.onnx` in `dir` for every target, links and runs it under
/// qemu on `input.bin`, expecting `expected.bin` (the host's outputs).
fn cross_compile_and_run(dir: &Path, what: &str) {
    for &(triple, prefix, arch) in TARGETS {
        let out = dir.join(prefix);
        std::fs::create_dir_all(&out).expect("a folder per target");
        let mut compile = Command::new(onnxc());
        compile.arg("compile").arg(dir.join("model.onnx")).arg("-o").arg(out.join("model.o"));
        compile.args(["--target", triple]);
        run(compile, &format!("onnxc compile --target {triple} ({what})"));

        let bytes = std::fs::read(out.join("model.o")).expect("the object");
        let obj = object::read::File::parse(bytes.as_slice()).expect("an object file");
        assert_eq!(obj.architecture(), arch, "{what}: the object for {triple} is for {:?}", obj.architecture());
        let undefined: Vec<String> = obj
            .symbols()
            .filter(|s| s.is_undefined() && !s.name().unwrap_or("").is_empty())
            .map(|s| s.name().unwrap_or("?").to_string())
            .filter(|n| n != "memcpy" && n != "memset")
            .collect();
        assert!(undefined.is_empty(), "{what}: the {triple} object references {undefined:?}");

        let exe = out.join("model");
        let mut cc = Command::new(tool(&format!("{prefix}-linux-gnu-gcc")));
        cc.args(["-std=c11", "-O2", "-static", "-I"]).arg(&out);
        cc.arg(repo_root().join("examples/c/main.c")).arg(out.join("model.o")).arg("-lm").arg("-o").arg(&exe);
        run(cc, &format!("{prefix}-linux-gnu-gcc ({what})"));

        let mut qemu = Command::new(tool(&format!("qemu-{prefix}")));
        qemu.arg(&exe).arg(dir.join("input.bin")).arg(dir.join("expected.bin"));
        let stdout = run(qemu, &format!("qemu-{prefix} ({what})"));
        assert!(stdout.contains(" 0 of "), "{what} on {triple}: outputs differ from the host's: {stdout}");
    }
}

/// Writes `model`, its input and the host's outputs (`onnxc run`, kernels
/// included) into `dir`.
fn prepare(dir: &Path, m: &ModelProto, input: &TensorProto) {
    write_model(dir, "model.onnx", m);
    let outputs = run_model(m, std::slice::from_ref(input)).unwrap_or_else(|o| panic!("host run: {}", o.stderr));
    let first = outputs.first().expect("one output");
    std::fs::write(dir.join("input.bin"), f32_bytes(&f32s(input))).expect("input.bin");
    std::fs::write(dir.join("expected.bin"), f32_bytes(&f32s(first))).expect("expected.bin");
}

#[test]
fn mlp_runs_on_aarch64_and_riscv64_like_on_the_host() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let input = floats("x", &[1, 64], &pseudo_random(64, 5, 1.0));
    prepare(dir.path(), &mlp(), &input);
    cross_compile_and_run(dir.path(), "MLP");
}

#[test]
fn lstm_runs_on_aarch64_and_riscv64_like_on_the_host() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let input = floats("x", &[5, 1, 8], &pseudo_random(40, 9, 1.0));
    prepare(dir.path(), &lstm(), &input);
    cross_compile_and_run(dir.path(), "LSTM");
}

#[test]
fn cnn_runs_on_aarch64_and_riscv64_like_on_the_host() {
    let case = data_dir().join("examples/cnn");
    let m = ModelProto::decode(std::fs::read(case.join("model.onnx")).expect("the CNN").as_slice()).expect("a model");
    let input = std::fs::read(case.join("test_data_set_0/input_0.pb")).expect("the CNN's input");
    let input = TensorProto::decode(input.as_slice()).expect("a tensor");
    let dir = tempfile::tempdir().expect("temporary folder");
    prepare(dir.path(), &m, &input);
    cross_compile_and_run(dir.path(), "CNN");
}

#[test]
fn unsupported_targets_and_kernel_only_operators_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &mlp());
    let compile = |target: &str| {
        let mut c = Command::new(onnxc());
        c.current_dir(dir.path()).args(["compile", "model.onnx", "-o", "m.o", "--target", target]);
        c.output().expect("run onnxc")
    };
    for (target, says) in [("s390x-unknown-linux-gnu", "is not supported"), ("nonsense-triple", "--target nonsense")] {
        let out = compile(target);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "--target {target}: {stderr}");
    }

    // RandomUniformLike has no portable lowering: a compile error naming the node.
    let mut m = mlp();
    let nodes = &mut m.graph.as_mut().expect("a graph").node;
    let last = nodes.last_mut().expect("a node");
    (last.op_type, last.attribute) = (Some("RandomUniformLike".into()), Vec::new());
    write_model(dir.path(), "model.onnx", &m);
    let out = compile("aarch64-unknown-linux-gnu");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("\"softmax\"")
            && stderr.contains("RandomUniformLike has no portable lowering"),
        "{stderr}"
    );
}
