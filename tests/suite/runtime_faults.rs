//! Faults that only the input values reveal end `onnxc run` with a nonzero
//! exit and a message naming the node: the generated code's status (see
//! `compiler/src/codegen/status.rs`) carries the failing node's index.

use crate::common::run_model;
use crate::models::{model, node, raw_tensor, typed_value};
use onnx_proto::ModelProto;

const I32: i32 = 6;
const I64: i32 = 7;

fn int_tensor(name: &str, data_type: i32, values: &[i64]) -> onnx_proto::TensorProto {
    let width = if data_type == I32 { 4 } else { 8 };
    let raw = values.iter().flat_map(|v| v.to_le_bytes()[..width].to_vec()).collect();
    raw_tensor(name, data_type, &[values.len() as i64], raw)
}

/// `y = op(a, b)` over 1-D tensors.
fn binary(op: &str, name: &str, a: (i32, usize), b: (i32, usize), y: (i32, usize)) -> ModelProto {
    let v = |n: &str, (t, len): (i32, usize)| typed_value(n, t, Some(&[len as i64]));
    model(vec![node(op, name, &["a", "b"], &["y"])], vec![v("a", a), v("b", b)], vec![v("y", y)])
}

/// Runs `m`, which must fail with `what` reported for node `name`.
fn fails_in_node(m: &ModelProto, inputs: &[onnx_proto::TensorProto], label: &str, what: &str) {
    let out = run_model(m, inputs).map(|_| ()).expect_err("the run should fail");
    assert!(
        out.status.is_some_and(|s| s.code().is_some_and(|c| c != 0)),
        "onnxc run {}:\n{}",
        out.describe_status(),
        out.stderr
    );
    assert!(out.stderr.contains(label) && out.stderr.contains(what), "{}", out.stderr);
}

#[test]
fn an_out_of_range_gather_index_names_its_node() {
    let m = binary("Gather", "pick", (I64, 4), (I64, 2), (I64, 2));
    let inputs = [int_tensor("a", I64, &[10, 20, 30, 40]), int_tensor("b", I64, &[1, 7])];
    fails_in_node(&m, &inputs, "node \"pick\" (Gather)", "index out of range");
}

#[test]
fn an_integer_division_by_zero_names_its_node() {
    let m = binary("Div", "share", (I32, 3), (I32, 3), (I32, 3));
    let inputs = [int_tensor("a", I32, &[6, 7, 8]), int_tensor("b", I32, &[2, 0, 4])];
    fails_in_node(&m, &inputs, "node \"share\" (Div)", "division by zero");
}
