//! Symbolic dims as a new user meets them: an input dim declared `-1`
//! (taken as an anonymous symbol, with a warning), a graph output declared
//! with a type but no shape (its shape inferred), `--dim` bounds, and what
//! `onnxc info` says of the symbols and of the outputs' shapes as
//! expressions of them (symbolic inference) — through the CLI.

use crate::common::{onnxc_in, succeeded, write_model};
use crate::models::{floats, int64s, int_attr, ints_attr, model, node, value};
use onnx_proto::tensor_shape_proto::{dimension, Dimension};
use onnx_proto::*;
use prost::Message;
use std::path::Path;

/// A tensor value of element type `elem_type` whose dims are written as
/// given: negative values stay `dim_value`s (what some exporters write
/// for "unknown"), `None` declares no shape at all.
fn raw_value(name: &str, elem_type: i32, dims: Option<&[i64]>) -> ValueInfoProto {
    let shape = dims.map(|d| TensorShapeProto {
        dim: d.iter().map(|&n| Dimension { value: Some(dimension::Value::DimValue(n)), denotation: None }).collect(),
    });
    let tensor = type_proto::Tensor { elem_type: Some(elem_type), shape };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto { value: Some(type_proto::Value::TensorType(tensor)), denotation: None }),
        ..Default::default()
    }
}

/// `y = Relu(x)`, `x` declared `[-1, 3]` and `y` without a shape.
fn relu_of_unknown_rows() -> ModelProto {
    model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![raw_value("x", 1, Some(&[-1, 3]))],
        vec![raw_value("y", 1, None)],
    )
}

fn write_input(dir: &Path, file: &str, t: &TensorProto) {
    std::fs::write(dir.join(file), t.encode_to_vec()).expect("write input");
}

fn read_output(path: &Path) -> TensorProto {
    TensorProto::decode(std::fs::read(path).expect("output").as_slice()).expect("a TensorProto")
}

#[test]
fn a_negative_dim_is_an_unknown_dim_bound_from_the_input() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &relu_of_unknown_rows());
    write_input(dir.path(), "x.pb", &floats("x", &[2, 3], &[-1.0, 2.0, -3.0, 4.0, -5.0, 6.0]));

    let out = onnxc_in(dir.path(), &["run", "model.onnx", "x.pb", "-o", "out"]);
    assert!(succeeded(&out), "{}", out.stderr);
    let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 1, "one warning for the one dim: {}", out.stderr);
    assert!(warnings[0].contains("\"x\" dim 0") && warnings[0].contains("\"x_dim0\""), "{}", warnings[0]);
    let y = read_output(&dir.path().join("out/output_0.pb"));
    assert_eq!(y.dims, vec![2, 3]);

    let compiled = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o", "--dim", "x_dim0=4"]);
    assert!(succeeded(&compiled), "{}", compiled.stderr);
    let unbound = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o"]);
    assert!(!succeeded(&unbound));
    assert!(unbound.stderr.contains("--dim x_dim0=N"), "{}", unbound.stderr);
}

#[test]
fn a_negative_dim_takes_a_name_no_other_dim_has() {
    let x = raw_value("x", 1, Some(&[-1, 3]));
    let y = value("y", Some(&[2, 3]));
    // `a` names its dim "x_dim0" already: the unknown dim of `x` must not
    // be bound together with it.
    let mut a = value("a", Some(&[-1, 3]));
    if let Some(type_proto::Value::TensorType(t)) = a.r#type.as_mut().and_then(|t| t.value.as_mut()) {
        t.shape.as_mut().expect("a shape").dim[0].value = Some(dimension::Value::DimParam("x_dim0".into()));
    }
    let m = model(vec![node("Add", "add", &["x", "a"], &["y"])], vec![x, a], vec![y]);
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o", "--dim", "x_dim0=2"]);
    assert!(!succeeded(&out));
    assert!(out.stderr.contains("\"x_dim0_\""), "{}", out.stderr);
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o", "--dim", "x_dim0=2", "--dim", "x_dim0_=2"]);
    assert!(succeeded(&out), "{}", out.stderr);
}

#[test]
fn an_output_without_a_shape_takes_the_inferred_one_through_test() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let case = dir.path().join("test_relu_unknown");
    std::fs::create_dir_all(case.join("test_data_set_0")).expect("case folder");
    write_model(&case, "model.onnx", &relu_of_unknown_rows());
    write_input(&case, "test_data_set_0/input_0.pb", &floats("x", &[1, 3], &[-1.0, 0.5, 2.0]));
    write_input(&case, "test_data_set_0/output_0.pb", &floats("y", &[1, 3], &[0.0, 0.5, 2.0]));
    let out = onnxc_in(dir.path(), &["test", "test_relu_unknown"]);
    assert!(succeeded(&out), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("1 passed, 0 failed"), "{}", out.stdout);
}

#[test]
fn an_output_of_another_element_type_is_still_an_error() {
    let m = model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![value("x", Some(&[2, 3]))],
        vec![raw_value("y", 7, None)],
    );
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "m.o"]);
    assert!(!succeeded(&out));
    assert!(out.stderr.contains("graph output \"y\" is declared i64, but the graph computes f32"), "{}", out.stderr);
}

/// `x` is `[b, s, 8]` (`b`, `s` symbolic): a projection, then the
/// attention-style reshape through a shape computed from `Shape(x)`:
/// `[b, s, 2, 4]` transposed to `[b, 2, s, 4]`, a softmax, and `tail`
/// (nodes after it, which may use the result).
fn heads_model(tail: Vec<NodeProto>, output: &str) -> ModelProto {
    let mut nodes = vec![
        node("MatMul", "proj", &["x", "w"], &["p"]),
        node("Add", "bias", &["p", "bias_v"], &["q"]),
        node("Shape", "shape", &["q"], &["dims"]),
        node("Gather", "batch", &["dims", "zero"], &["b"]),
        node("Gather", "seq", &["dims", "one"], &["s"]),
        node("Unsqueeze", "b1", &["b", "axes0"], &["b_1"]),
        node("Unsqueeze", "s1", &["s", "axes0"], &["s_1"]),
        node("Concat", "target", &["b_1", "s_1", "heads", "minus1"], &["new_shape"]),
        node("Reshape", "split", &["q", "new_shape"], &["split_q"]),
        node("Transpose", "t", &["split_q"], &["t_q"]),
        node("Softmax", "sm", &["t_q"], &["y"]),
    ];
    nodes[7].attribute.push(int_attr("axis", 0));
    nodes[9].attribute.push(ints_attr("perm", &[0, 2, 1, 3]));
    nodes.extend(tail);
    let mut m = model(nodes, vec![value("x", Some(&[-1, -1, 8]))], vec![raw_value(output, 1, None)]);
    let g = m.graph.as_mut().expect("a graph");
    g.initializer = vec![
        floats("w", &[8, 8], &[0.5; 64]),
        floats("bias_v", &[8], &[0.0; 8]),
        int64s("zero", &[], &[0]),
        int64s("one", &[], &[1]),
        int64s("axes0", &[1], &[0]),
        int64s("heads", &[1], &[2]),
        int64s("minus1", &[1], &[-1]),
    ];
    m
}

fn info(m: &ModelProto, args: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", m);
    let out = onnxc_in(dir.path(), &[&["info", "model.onnx"], args].concat());
    assert!(succeeded(&out), "{}", out.stderr);
    out.stdout
}

#[test]
fn info_gives_output_shapes_as_expressions_of_the_symbols() {
    let m = heads_model(Vec::new(), "y");
    let out = info(&m, &["--dim", "d1=..512"]);
    assert!(out.contains("symbol: d0, used by x axis 0; unbounded"), "{out}");
    assert!(out.contains("symbol: d1, used by x axis 1; 1..512"), "{out}");
    assert!(out.contains("symbolic output: y f32[d0,2,d1,4]"), "{out}");
    // Binding one symbol leaves the other an expression.
    let out = info(&m, &["--dim", "d0=3"]);
    assert!(out.contains("symbolic output: y f32[3,2,d1,4]"), "{out}");
    // Bound, the static path runs as ever.
    let out = info(&m, &["--dim", "d0=3", "--dim", "d1=5"]);
    assert!(!out.contains("symbolic output") && out.contains("workspace bytes:"), "{out}");
}

#[test]
fn info_names_the_node_that_refuses_a_symbolic_dim() {
    let mut d2s = node("DepthToSpace", "d2s", &["y"], &["total"]);
    d2s.attribute.push(int_attr("blocksize", 1));
    let out = info(&heads_model(vec![d2s], "total"), &[]);
    assert!(out.contains("\"d2s\" (DepthToSpace): DepthToSpace cannot take a symbolic dim yet"), "{out}");
    assert!(out.contains("give --dim d0=N --dim d1=N"), "{out}");
}

/// `x` is `[d0, 3, d2, d3]`: a CNN's operators, each inferred over the
/// symbolic batch, height and width — Conv (stride 2), BatchNormalization,
/// MaxPool (ceil_mode), ArgMax, GlobalAveragePool, Flatten, Gemm.
fn cnn_model() -> ModelProto {
    let mut nodes = vec![
        node("Conv", "conv", &["x", "w", "b"], &["c"]),
        node("BatchNormalization", "bn", &["c", "gamma", "beta", "mean", "var"], &["n"]),
        node("MaxPool", "pool", &["n"], &["p"]),
        node("ArgMax", "arg", &["p"], &["where"]),
        node("GlobalAveragePool", "gap", &["p"], &["g"]),
        node("Flatten", "flat", &["g"], &["f"]),
        node("Gemm", "fc", &["f", "fc_w", "fc_b"], &["y"]),
    ];
    nodes[0].attribute.extend([ints_attr("strides", &[2, 2]), ints_attr("pads", &[1, 1, 1, 1])]);
    nodes[2].attribute.extend([ints_attr("kernel_shape", &[3, 3]), ints_attr("strides", &[2, 2])]);
    nodes[2].attribute.push(int_attr("ceil_mode", 1));
    nodes[3].attribute.push(int_attr("axis", 1));
    nodes[6].attribute.push(int_attr("transB", 1));
    let outputs = ["p", "where", "y"].map(|o| raw_value(o, if o == "where" { 7 } else { 1 }, None));
    let mut m = model(nodes, vec![value("x", Some(&[-1, 3, -1, -1]))], outputs.to_vec());
    let g = m.graph.as_mut().expect("a graph");
    let stat = |name: &str| floats(name, &[4], &[1.0; 4]);
    g.initializer = vec![
        floats("w", &[4, 3, 3, 3], &[0.1; 108]),
        floats("b", &[4], &[0.0; 4]),
        stat("gamma"),
        stat("beta"),
        stat("mean"),
        stat("var"),
        floats("fc_w", &[10, 4], &[0.1; 40]),
        floats("fc_b", &[10], &[0.0; 10]),
    ];
    m
}

#[test]
fn info_gives_a_cnns_outputs_as_floor_and_ceil_divisions_of_the_image_size() {
    let out = info(&cnn_model(), &[]);
    // Conv: (h + 2 - 3) / 2 + 1 = (h+1)/2; MaxPool with ceil_mode:
    // ceil(((h+1)/2 - 3) / 2) + 1 = (h+1)/4, capped at ceil(((h+1)/2) / 2)
    // (always the larger, which interval arithmetic does not see).
    let pooled = |d: &str| format!("min(({d}+1)/4,(({d}+1)/2+1)/2)");
    let (h, w) = (pooled("d2"), pooled("d3"));
    assert!(out.contains(&format!("symbolic output: p f32[d0,4,{h},{w}]")), "{out}");
    assert!(out.contains(&format!("symbolic output: where i64[d0,1,{h},{w}]")), "{out}");
    assert!(out.contains("symbolic output: y f32[d0,10]"), "{out}");
    // Bound, the same shapes are numbers: 15 → 8 → 4.
    let out = info(&cnn_model(), &["--dim", "d0=2", "--dim", "d2=15", "--dim", "d3=16"]);
    assert!(!out.contains("symbolic output") && out.contains("workspace bytes:"), "{out}");
}

/// `x` is `[d0, d1, 8]`: a transformer's shape arithmetic — position
/// embeddings sliced to the sequence length (Shape → Gather → Unsqueeze →
/// Slice), LayerNormalization, a mask made by ConstantOfShape and
/// broadcast by Expand, a Split into two heads and a ReduceMean.
fn encoder_model() -> ModelProto {
    let mut nodes = vec![
        node("Shape", "shape", &["x"], &["dims"]),
        node("Gather", "seq", &["dims", "one"], &["s"]),
        node("Unsqueeze", "s1", &["s", "axes0"], &["s_1"]),
        node("Slice", "positions", &["table", "zero_1", "s_1", "axes0"], &["pos"]),
        node("Add", "embed", &["x", "pos"], &["e"]),
        node("LayerNormalization", "norm", &["e", "gamma", "beta"], &["n"]),
        node("Slice", "batch_seq", &["dims", "zero_1", "two_1"], &["bs"]),
        node("ConstantOfShape", "mask", &["bs"], &["m"]),
        node("Unsqueeze", "m1", &["m", "axes2"], &["m_1"]),
        node("Expand", "wide", &["m_1", "dims"], &["mask"]),
        node("Mul", "masked", &["n", "mask"], &["h"]),
        node("Split", "heads", &["h"], &["h0", "h1"]),
        node("ReduceMean", "mean", &["h1"], &["r"]),
    ];
    nodes[5].attribute.push(int_attr("axis", -1));
    nodes[11].attribute.push(int_attr("axis", -1));
    nodes[12].attribute.extend([ints_attr("axes", &[2]), int_attr("keepdims", 0)]);
    let outputs = ["h0", "r"].map(|o| raw_value(o, 1, None));
    let mut m = model(nodes, vec![value("x", Some(&[-1, -1, 8]))], outputs.to_vec());
    let g = m.graph.as_mut().expect("a graph");
    let table: Vec<f32> = (0..128).map(|i| i as f32 / 128.0).collect();
    g.initializer = vec![
        floats("table", &[16, 8], &table),
        floats("gamma", &[8], &[1.0; 8]),
        floats("beta", &[8], &[0.0; 8]),
        int64s("one", &[], &[1]),
        int64s("zero_1", &[1], &[0]),
        int64s("two_1", &[1], &[2]),
        int64s("axes0", &[1], &[0]),
        int64s("axes2", &[1], &[2]),
    ];
    m
}

#[test]
fn info_follows_a_transformers_shape_arithmetic() {
    // The table has 16 positions: a sequence bounded by 16 slices it to
    // the sequence length.
    let out = info(&encoder_model(), &["--dim", "d1=..16"]);
    assert!(out.contains("symbolic output: h0 f32[d0,d1,4]"), "{out}");
    assert!(out.contains("symbolic output: r f32[d0,d1]"), "{out}");
    // Unbounded, the slice is as long as the shorter of the two, and the
    // sum with `x` is `max(d1, min(16, d1))` long, which is `d1`.
    let out = info(&encoder_model(), &[]);
    assert!(out.contains("symbolic output: h0 f32[d0,d1,4]") && !out.contains("min("), "{out}");
}

/// `x` is `[d0, d1, 4]` (steps, batch): an LSTM whose initial state is
/// made, as exporters do, by ConstantOfShape from the batch size read off
/// `Shape(x)`.
fn lstm_model() -> ModelProto {
    let mut nodes = vec![
        node("Shape", "shape", &["x"], &["dims"]),
        node("Gather", "batch", &["dims", "one"], &["b"]),
        node("Unsqueeze", "b1", &["b", "axes0"], &["b_1"]),
        node("Concat", "state_dims", &["one_1", "b_1", "hidden"], &["sd"]),
        node("ConstantOfShape", "zeros", &["sd"], &["h0"]),
        node("LSTM", "lstm", &["x", "w", "r", "", "", "h0", "h0"], &["y", "h"]),
    ];
    nodes[3].attribute.push(int_attr("axis", 0));
    nodes[5].attribute.push(int_attr("hidden_size", 4));
    let outputs = ["y", "h"].map(|o| raw_value(o, 1, None));
    let mut m = model(nodes, vec![value("x", Some(&[-1, -1, 4]))], outputs.to_vec());
    let g = m.graph.as_mut().expect("a graph");
    g.initializer = vec![
        floats("w", &[1, 16, 4], &[0.1; 64]),
        floats("r", &[1, 16, 4], &[0.1; 64]),
        int64s("one", &[], &[1]),
        int64s("one_1", &[1], &[1]),
        int64s("hidden", &[1], &[4]),
        int64s("axes0", &[1], &[0]),
    ];
    m
}

#[test]
fn info_gives_an_rnns_outputs_over_its_steps_and_batch() {
    let out = info(&lstm_model(), &[]);
    assert!(out.contains("symbolic output: y f32[d0,1,d1,4]"), "{out}");
    assert!(out.contains("symbolic output: h f32[1,d1,4]"), "{out}");
}

/// `x` is `[d0, d1, 8]`: shape arithmetic as exporters write it. `y` is a
/// class token `[1, 1, 8]` expanded to the batch through a target made by
/// `Where(Equal(t, -1), 1, t)` over `t = [d0, -1, -1]` (ViT's) and
/// concatenated before `x`; `z` is `x` reshaped to `[d0, d1*8/2, 2]`
/// through Mul and Div on the sequence length.
fn shape_arithmetic_model() -> ModelProto {
    let mut nodes = vec![
        node("Shape", "shape", &["x"], &["dims"]),
        node("Gather", "batch", &["dims", "zero"], &["b"]),
        node("Unsqueeze", "b1", &["b", "axes0"], &["b_1"]),
        node("Concat", "target", &["b_1", "minus1", "minus1"], &["t"]),
        node("Equal", "unknown", &["t", "minus1"], &["is_unknown"]),
        node("Where", "filled", &["is_unknown", "one_1", "t"], &["t_filled"]),
        node("Expand", "tokens", &["token", "t_filled"], &["tok"]),
        node("Concat", "with_token", &["tok", "x"], &["y"]),
        node("Gather", "seq", &["dims", "one"], &["s"]),
        node("Mul", "flat", &["s", "eight"], &["s8"]),
        node("Div", "half", &["s8", "two"], &["s4"]),
        node("Unsqueeze", "s1", &["s4", "axes0"], &["s4_1"]),
        node("Concat", "z_target", &["b_1", "s4_1", "two_1"], &["zt"]),
        node("Reshape", "pairs", &["x", "zt"], &["z"]),
    ];
    nodes[3].attribute.push(int_attr("axis", 0));
    nodes[7].attribute.push(int_attr("axis", 1));
    nodes[12].attribute.push(int_attr("axis", 0));
    let outputs = ["y", "z"].map(|o| raw_value(o, 1, None));
    let mut m = model(nodes, vec![value("x", Some(&[-1, -1, 8]))], outputs.to_vec());
    let g = m.graph.as_mut().expect("a graph");
    g.initializer = vec![
        floats("token", &[1, 1, 8], &[0.5; 8]),
        int64s("zero", &[], &[0]),
        int64s("one", &[], &[1]),
        int64s("two", &[], &[2]),
        int64s("eight", &[], &[8]),
        int64s("axes0", &[1], &[0]),
        int64s("minus1", &[1], &[-1]),
        int64s("one_1", &[1], &[1]),
        int64s("two_1", &[1], &[2]),
    ];
    m
}

#[test]
fn info_computes_on_shape_elements_with_arithmetic_equal_and_where() {
    let out = info(&shape_arithmetic_model(), &[]);
    assert!(out.contains("symbolic output: y f32[d0,d1+1,8]"), "{out}");
    assert!(out.contains("symbolic output: z f32[d0,4*d1,2]"), "{out}");
}

/// `x` is `[d0, 3, d2, d3]`: a detector's neck. Two stride-2 Convs, the
/// second's output upsampled by 2 and concatenated with the first's:
/// `2*ceil(ceil(h/2)/2)` against `ceil(h/2)`, equal only for even
/// `ceil(h/2)`.
fn upsample_concat_model() -> ModelProto {
    let mut nodes = vec![
        node("Conv", "down1", &["x", "w1"], &["c1"]),
        node("Conv", "down2", &["c1", "w2"], &["c2"]),
        node("Resize", "up", &["c2", "", "scales"], &["u"]),
        node("Concat", "join", &["u", "c1"], &["y"]),
    ];
    for n in &mut nodes[..2] {
        n.attribute.extend([ints_attr("strides", &[2, 2]), ints_attr("pads", &[1, 1, 1, 1])]);
    }
    nodes[3].attribute.push(int_attr("axis", 1));
    let mut m = model(nodes, vec![value("x", Some(&[-1, 3, -1, -1]))], vec![raw_value("y", 1, None)]);
    let g = m.graph.as_mut().expect("a graph");
    g.initializer = vec![
        floats("w1", &[4, 3, 3, 3], &[0.1; 108]),
        floats("w2", &[4, 4, 3, 3], &[0.1; 144]),
        floats("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
    ];
    m
}

#[test]
fn a_divisibility_fact_joins_an_upsampled_map_with_its_skip() {
    let out = info(&upsample_concat_model(), &[]);
    assert!(out.contains("incompatible") && !out.contains("symbolic output: y"), "{out}");
    let out = info(&upsample_concat_model(), &["--dim", "d2=..64%4", "--dim", "d3=..64%4"]);
    assert!(out.contains("symbol: d2, used by x axis 2; 4..64%4"), "{out}");
    assert!(out.contains("symbolic output: y f32[d0,8,2*(d2/4),2*(d3/4)]"), "{out}");
}
