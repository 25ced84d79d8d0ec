//! `onnxc test` judges for real: an expected infinity is met only by the
//! same infinity and an expected NaN only by a NaN, and a NaN never passes
//! for a number. Each case is a one-node model in the backend-test layout
//! whose expected output was written by hand.

use crate::common::{onnxc_in, succeeded};
use crate::models::{floats, model, node, value};
use prost::Message;
use std::path::Path;

/// Writes the case `name`: `op(x)` with `x = input`, expecting `want`.
fn write_case(root: &Path, name: &str, op: &str, input: &[f32], want: &[f32]) {
    let dir = root.join(name);
    let data = dir.join("test_data_set_0");
    std::fs::create_dir_all(&data).expect("a case folder");
    let dims = [input.len() as i64];
    let m =
        model(vec![node(op, "the_node", &["x"], &["y"])], vec![value("x", Some(&dims))], vec![value("y", Some(&dims))]);
    std::fs::write(dir.join("model.onnx"), m.encode_to_vec()).expect("model.onnx");
    std::fs::write(data.join("input_0.pb"), floats("x", &dims, input).encode_to_vec()).expect("input_0.pb");
    std::fs::write(data.join("output_0.pb"), floats("y", &dims, want).encode_to_vec()).expect("output_0.pb");
}

/// One hand-made case: `op(input)` expected to give `want`; whether
/// `onnxc test` must pass it.
struct Case {
    name: &'static str,
    op: &'static str,
    input: &'static [f32],
    want: &'static [f32],
    passes: bool,
}

const INF: f32 = f32::INFINITY;

const CASES: [Case; 6] = [
    Case { name: "finite_for_inf", op: "Identity", input: &[1.0, 2.0], want: &[INF, 2.0], passes: false },
    Case { name: "finite_for_minus_inf", op: "Identity", input: &[3.4e38], want: &[-INF], passes: false },
    Case { name: "inf_for_minus_inf", op: "Identity", input: &[INF], want: &[-INF], passes: false },
    Case { name: "nan_for_finite", op: "Sqrt", input: &[-1.0, 4.0], want: &[1.0, 2.0], passes: false },
    Case { name: "finite_for_nan", op: "Identity", input: &[1.0], want: &[f32::NAN], passes: false },
    // Log(0) = -inf, Log(-1) = NaN, Log(inf) = inf: the same specials pass.
    Case {
        name: "specials_for_specials",
        op: "Log",
        input: &[0.0, -1.0, INF, 1.0],
        want: &[-INF, f32::NAN, INF, 0.0],
        passes: true,
    },
];

#[test]
fn infinities_and_nan_match_only_themselves() {
    let root = tempfile::tempdir().expect("temporary folder");
    for c in &CASES {
        write_case(root.path(), c.name, c.op, c.input, c.want);
    }
    let out = onnxc_in(root.path(), &["test", "."]);
    let stdout = &out.stdout;
    for c in &CASES {
        let verdict = if c.passes { "PASS" } else { "FAIL" };
        let name = c.name;
        let said =
            stdout.lines().any(|l| l == format!("{verdict} {name}") || l.starts_with(&format!("{verdict} {name}:")));
        assert!(said, "{name} should be {verdict}:\n{stdout}");
    }
    assert!(stdout.lines().last() == Some("1 passed, 5 failed"), "{stdout}");
    assert!(!succeeded(&out), "onnxc test exited 0 with failures");
}
