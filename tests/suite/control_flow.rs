//! If, Loop and Scan through the CLI: a loop with a known trip count and a
//! nested If is unrolled and compiled without specialisation; an If on a
//! run-time condition compiles and runs only its taken branch; an absurd
//! trip count is refused by the unrolling budget; a schedule long enough to
//! be generated as several functions hands guarded ranges and run-time
//! allocations from one to the next.

use crate::common::{onnxc_in, run_model, succeeded, write_model};
use crate::models::{f32s, floats, i64s, int64s, model, node, typed_value, value};
use crate::snapshot::{assert_snapshot, compiled_mir};
use onnx_proto::*;

fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Graph as i32),
        g: Some(g),
        ..Default::default()
    }
}

fn graph(nodes: Vec<NodeProto>, inputs: Vec<ValueInfoProto>, outputs: Vec<ValueInfoProto>, name: &str) -> GraphProto {
    GraphProto { name: Some(name.into()), node: nodes, input: inputs, output: outputs, ..Default::default() }
}

/// Where a loop's trip count comes from.
enum Trip {
    /// An initializer with this value.
    Constant(i64),
    /// The graph input `m` (int64 scalar), after `x`.
    Input,
}

/// `y = x; for i in 0..m { y = if i is even { y + x } else { y * x } }`,
/// with `scan` also stacking every `y` as a scan output.
fn loop_model(trip: Trip, scan: bool) -> ModelProto {
    let even = node("Mod", "parity", &["i", "two"], &["rest"]);
    let is_even = node("Equal", "is_even", &["rest", "zero"], &["even"]);
    let mut branch = node("If", "branch", &["even"], &["next"]);
    branch.attribute.push(graph_attr(
        "then_branch",
        graph(vec![node("Add", "add", &["y_in", "x"], &["sum"])], vec![], vec![value("sum", None)], "then"),
    ));
    branch.attribute.push(graph_attr(
        "else_branch",
        graph(vec![node("Mul", "mul", &["y_in", "x"], &["product"])], vec![], vec![value("product", None)], "else"),
    ));
    let keep = node("Identity", "keep", &["cond_in"], &["cond_out"]);
    let copy = node("Identity", "copy", &["next"], &["scanned"]);
    let mut body_outputs = vec![typed_value("cond_out", 9, Some(&[])), value("next", None)];
    let mut outputs = vec![value("y", Some(&[2]))];
    let mut loop_outputs = vec!["y"];
    if scan {
        body_outputs.push(value("scanned", None));
        outputs.push(value("ys", Some(&[-1, 2])));
        loop_outputs.push("ys");
    }
    let body = graph(
        vec![even, is_even, branch, keep, copy],
        vec![typed_value("i", 7, Some(&[])), typed_value("cond_in", 9, Some(&[])), value("y_in", None)],
        body_outputs,
        "body",
    );
    let mut lp = node("Loop", "loop", &["m", "", "x"], &loop_outputs);
    lp.attribute.push(graph_attr("body", body));
    let mut inputs = vec![value("x", Some(&[2]))];
    if let Trip::Input = trip {
        inputs.push(typed_value("m", 7, Some(&[])));
    }
    let mut md = model(vec![lp], inputs, outputs);
    let g = md.graph.as_mut().expect("graph");
    g.initializer.extend([int64s("two", &[], &[2]), int64s("zero", &[], &[0])]);
    if let Trip::Constant(m) = trip {
        g.initializer.push(int64s("m", &[], &[m]));
    }
    md
}

#[test]
fn a_loop_with_a_known_trip_count_and_a_nested_if_is_unrolled() {
    // Unrolled: no Loop or If is left after inference.
    assert_snapshot("loop_unrolled", &compiled_mir(&loop_model(Trip::Constant(3), true), &[]));

    let outputs = run_model(&loop_model(Trip::Constant(3), true), &[floats("x", &[2], &[2.0, 3.0])])
        .unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    // y: x=2 → (2+2)=4 → 4*2=8 → 8+2=10; x=3 → 6 → 18 → 21.
    assert_eq!(f32s(&outputs[0]), [10.0, 21.0]);
    assert_eq!(outputs[1].dims, [3, 2]);
    assert_eq!(f32s(&outputs[1]), [4.0, 6.0, 8.0, 18.0, 10.0, 21.0]);
}

#[test]
fn a_loop_too_long_to_unroll_runs_at_run_time_and_sizes_its_scan_outputs() {
    // 30 000 iterations of a 5-node body exceed the unrolling budget.
    let outputs = run_model(&loop_model(Trip::Constant(30_000), true), &[floats("x", &[2], &[1.0, -1.0])])
        .unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    // x = 1: +1, *1, +1, ... gives 1 + 15 000; x = -1 cycles -2, 2, 1, -1.
    assert_eq!(f32s(&outputs[0]), [15_001.0, -1.0]);
    assert_eq!(outputs[1].dims, [30_000, 2]);
    let ys = f32s(&outputs[1]);
    assert_eq!(ys[..8], [2.0, -2.0, 2.0, 2.0, 3.0, 1.0, 3.0, -1.0]);
    assert_eq!(ys[ys.len() - 2..], [15_001.0, -1.0]);
}

#[test]
fn an_absurd_scan_output_is_refused_by_the_tensor_limit() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &loop_model(Trip::Constant(1 << 40), true));
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "model.o"]);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("\"loop") && out.stderr.contains("max-tensor-bytes"), "{}", out.stderr);
}

#[test]
fn a_loop_with_a_run_time_trip_count_compiles_once_and_runs_any_count() {
    let m = loop_model(Trip::Input, false);
    // The loop stays a loop: a LoopStart … LoopEnd range.
    assert_snapshot("loop_at_run_time", &compiled_mir(&m, &[]));
    let x = floats("x", &[2], &[2.0, 3.0]);
    for (count, want) in [(0, [2.0, 3.0]), (1, [4.0, 6.0]), (3, [10.0, 21.0]), (4, [20.0, 63.0]), (-5, [2.0, 3.0])] {
        let outputs = run_model(&m, &[x.clone(), int64s("m", &[], &[count])])
            .unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
        assert_eq!(f32s(&outputs[0]), want, "M = {count}");
    }
}

/// `y = x; while y < limit { y = y * 2 }` with the condition computed by the
/// body, capped at `m` iterations when `m` is given.
fn doubling_model(m: Option<i64>) -> ModelProto {
    let body = graph(
        vec![
            node("Add", "double", &["y_in", "y_in"], &["y_out"]),
            node("Less", "below", &["y_out", "limit"], &["more"]),
        ],
        vec![typed_value("i", 7, Some(&[])), typed_value("cond_in", 9, Some(&[])), value("y_in", None)],
        vec![typed_value("more", 9, Some(&[])), value("y_out", None)],
        "body",
    );
    let mut lp = node("Loop", "while", &[if m.is_some() { "m" } else { "" }, "start", "x"], &["y"]);
    lp.attribute.push(graph_attr("body", body));
    let mut md = model(
        vec![node("Less", "first_test", &["x", "limit"], &["start"]), lp],
        vec![value("x", Some(&[])), value("limit", Some(&[]))],
        vec![value("y", Some(&[]))],
    );
    if let Some(m) = m {
        md.graph.as_mut().expect("graph").initializer.push(int64s("m", &[], &[m]));
    }
    md
}

#[test]
fn a_while_loop_stops_on_the_condition_its_body_computes() {
    for (m, x, limit, want) in [(None, 1.0, 100.0, 128.0), (None, 500.0, 100.0, 500.0), (Some(3), 1.0, 100.0, 8.0)] {
        let outputs = run_model(&doubling_model(m), &[floats("x", &[], &[x]), floats("limit", &[], &[limit])])
            .unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
        assert_eq!(f32s(&outputs[0]), [want], "m = {m:?}, x = {x}, limit = {limit}");
    }
}

#[test]
fn an_if_on_a_run_time_condition_compiles_and_runs_only_the_taken_branch() {
    // The else branch also gathers at index 5 of a 2-element tensor: it
    // fails if it runs, so the then branch must run alone.
    let mut branch = node("If", "choose", &["c"], &["y"]);
    branch.attribute.push(graph_attr(
        "then_branch",
        graph(vec![node("Neg", "neg", &["x"], &["a"])], vec![], vec![value("a", Some(&[2]))], "then"),
    ));
    branch.attribute.push(graph_attr(
        "else_branch",
        graph(
            vec![node("Gather", "out_of_range", &["x", "five"], &["g"]), node("Add", "add", &["x", "g"], &["b"])],
            vec![],
            vec![value("b", Some(&[2]))],
            "else",
        ),
    ));
    let mut m = model(
        vec![branch],
        vec![typed_value("c", 9, Some(&[1])), value("x", Some(&[2]))],
        vec![value("y", Some(&[2]))],
    );
    m.graph.as_mut().expect("graph").initializer.push(int64s("five", &[], &[5]));
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "model.o"]);
    assert!(succeeded(&out), "a run-time If must compile: {}", out.stderr);

    let x = floats("x", &[2], &[1.5, -2.0]);
    let outputs =
        run_model(&m, &[condition(true), x.clone()]).unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    assert_eq!(f32s(&outputs[0]), [-1.5, 2.0]);
    let failed = run_model(&m, &[condition(false), x]).expect_err("the else branch gathers out of range");
    assert!(
        failed.stderr.contains("out_of_range") && failed.stderr.contains("index out of range"),
        "{}",
        failed.stderr
    );
}

/// The bool input `c` ([1]) of the run-time If tests.
fn condition(v: bool) -> TensorProto {
    TensorProto {
        name: Some("c".into()),
        dims: vec![1],
        data_type: Some(9),
        int32_data: vec![v as i32],
        ..Default::default()
    }
}

/// `a = x + x + ... + x` (`n` additions) in a chain of `n` nodes named
/// `prefix{i}`, ending in `out`.
fn add_chain(prefix: &str, n: usize, out: &str) -> Vec<NodeProto> {
    (0..n)
        .map(|i| {
            let from = if i == 0 { "x".to_string() } else { format!("{prefix}{}", i - 1) };
            let to = if i + 1 == n { out.to_string() } else { format!("{prefix}{i}") };
            node("Add", &format!("{prefix}_add{i}"), &[&from, "x"], &[&to])
        })
        .collect()
}

#[test]
fn a_long_schedule_runs_as_parts_that_hand_on_guards_and_allocations() {
    // Each branch is longer than one part (256 nodes), so the guarded
    // ranges cross part boundaries; the else branch ends in a Gather out of
    // range, in a later part than its Guard. Both NonZero outputs come from
    // the workspace's bump allocator, in the first part and in the last.
    let mut branch = node("If", "choose", &["c"], &["y"]);
    branch
        .attribute
        .push(graph_attr("then_branch", graph(add_chain("t", 600, "a"), vec![], vec![value("a", Some(&[4]))], "then")));
    let mut otherwise = add_chain("e", 600, "e_sum");
    otherwise.push(node("Gather", "out_of_range", &["x", "five"], &["g"]));
    otherwise.push(node("Add", "add", &["e_sum", "g"], &["b"]));
    branch.attribute.push(graph_attr("else_branch", graph(otherwise, vec![], vec![value("b", Some(&[4]))], "else")));
    let nodes = vec![
        node("NonZero", "nonzero_x", &["x"], &["nz_x"]),
        branch,
        node("Relu", "relu", &["y"], &["positive"]),
        node("NonZero", "nonzero_positive", &["positive"], &["nz_positive"]),
    ];
    let mut m = model(
        nodes,
        vec![typed_value("c", 9, Some(&[1])), value("x", Some(&[4]))],
        vec![
            value("y", Some(&[4])),
            typed_value("nz_x", 7, Some(&[1, -1])),
            typed_value("nz_positive", 7, Some(&[1, -1])),
        ],
    );
    m.graph.as_mut().expect("graph").initializer.push(int64s("five", &[], &[5]));

    let x = floats("x", &[4], &[1.0, 0.0, -2.0, 0.5]);
    let outputs =
        run_model(&m, &[condition(true), x.clone()]).unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    assert_eq!(f32s(&outputs[0]), [601.0, 0.0, -1202.0, 300.5]);
    assert_eq!(i64s(&outputs[1]), [0, 2, 3], "NonZero(x), allocated in the first part");
    assert_eq!(i64s(&outputs[2]), [0, 3], "NonZero(relu(y)), allocated in the last part");
    let failed = run_model(&m, &[condition(false), x]).expect_err("the else branch gathers out of range");
    assert!(
        failed.stderr.contains("out_of_range") && failed.stderr.contains("index out of range"),
        "{}",
        failed.stderr
    );
}
