//! Sizes a model declares that the compiler must not trust: constants of
//! 64 GiB from a few bytes (ConstantOfShape, Expand, Tile, Range, Pad...),
//! attributes inconsistent with the tensors they describe, and window
//! attributes (strides, pads, dilations, kernel shapes) near `i64::MAX`
//! whose arithmetic must not overflow.

use super::{check, graph_model, Case};
use crate::models::{int64s, int_attr, ints_attr, node, raw_tensor, typed_value, value};
use onnx_proto::*;

pub fn cases() -> Vec<Case> {
    let mut cases = huge();
    cases.extend(inconsistent());
    cases.extend(windows());
    cases
}

/// 2^17 × 2^17 f32: 64 GiB.
const HUGE: [i64; 2] = [1 << 17, 1 << 17];

fn scalar_f32(name: &str, v: f32) -> TensorProto {
    raw_tensor(name, 1, &[], v.to_le_bytes().to_vec())
}

/// One node reading initializers `inits`, writing `y` of rank `rank`.
fn one_node(n: NodeProto, inits: Vec<TensorProto>, rank: usize) -> Vec<u8> {
    let dims = vec![-1; rank];
    graph_model(vec![n], vec![], inits, vec![value("y", Some(&dims))])
}

/// `y = op(x, …)` with x: f32 `x_dims` and initializers.
fn on_input(n: NodeProto, x_dims: &[i64], inits: Vec<TensorProto>, rank: usize) -> Vec<u8> {
    let dims = vec![-1; rank];
    graph_model(vec![n], vec![value("x", Some(x_dims))], inits, vec![value("y", Some(&dims))])
}

fn with(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute.extend(attrs);
    n
}

const OVER: &str = "more than the limit of 4294967296 (--max-tensor-bytes)";

fn huge() -> Vec<Case> {
    vec![
        check(
            "ConstantOfShape of 64 GiB",
            &["node \"cos\" (ConstantOfShape)", "output \"y\" would be f32[131072,131072]", OVER],
            |_| one_node(node("ConstantOfShape", "cos", &["s"], &["y"]), vec![int64s("s", &[2], &HUGE)], 2),
        ),
        check("Expand to 64 GiB", &["node \"expand\" (Expand)", OVER], |_| {
            let n = node("Expand", "expand", &["one", "s"], &["y"]);
            one_node(n, vec![raw_tensor("one", 1, &[1, 1], vec![0; 4]), int64s("s", &[2], &HUGE)], 2)
        }),
        check("Tile to 64 GiB", &["node \"tile\" (Tile)", OVER], |_| {
            let n = node("Tile", "tile", &["one", "r"], &["y"]);
            one_node(n, vec![raw_tensor("one", 1, &[1, 1], vec![0; 4]), int64s("r", &[2], &HUGE)], 2)
        }),
        check("Range of 64 GiB", &["node \"range\" (Range)", "f32[17179869184]", OVER], |_| {
            let n = node("Range", "range", &["a", "b", "d"], &["y"]);
            one_node(n, vec![scalar_f32("a", 0.0), scalar_f32("b", (1u64 << 34) as f32), scalar_f32("d", 1.0)], 1)
        }),
        check("Range over all of i64", &["node \"range\" (Range)", "more than the address space"], |_| {
            let n = node("Range", "range", &["a", "b", "d"], &["y"]);
            let s = |name: &str, v: i64| int64s(name, &[], &[v]);
            one_node(n, vec![s("a", i64::MIN), s("b", i64::MAX), s("d", 1)], 1)
        }),
        check("ConstantOfShape whose count overflows", &["node \"cos\" (ConstantOfShape)", "overflows"], |_| {
            one_node(node("ConstantOfShape", "cos", &["s"], &["y"]), vec![int64s("s", &[2], &[1 << 62, 1 << 62])], 2)
        }),
        check(
            "ConstantOfShape with a negative dim",
            &["node \"cos\" (ConstantOfShape)", "shape[1] -3 is negative"],
            |_| one_node(node("ConstantOfShape", "cos", &["s"], &["y"]), vec![int64s("s", &[2], &[2, -3])], 2),
        ),
        check(
            "ConstantOfShape over --max-tensor-bytes",
            &["node \"cos\"", "4096 bytes, more than the limit of 1024"],
            |_| one_node(node("ConstantOfShape", "cos", &["s"], &["y"]), vec![int64s("s", &[1], &[1024])], 1),
        )
        .with_args(&["--max-tensor-bytes", "1K"]),
        check(
            "shape left unfolded by --max-fold-total",
            &[
                "node \"reshape\" (Reshape)",
                "must be a compile-time constant",
                "stopped at its --max-fold-total budget",
            ],
            |_| {
                let cat = with(node("Concat", "cat", &["a", "b"], &["s"]), vec![int_attr("axis", 0)]);
                let n = node("Reshape", "reshape", &["x", "s"], &["y"]);
                let inits = vec![int64s("a", &[1], &[3]), int64s("b", &[1], &[2])];
                graph_model(vec![cat, n], vec![value("x", Some(&[2, 3]))], inits, vec![value("y", Some(&[-1, -1]))])
            },
        )
        .with_args(&["--max-fold-total", "0"]),
        check("Pad to 64 GiB", &["node \"pad\" (Pad)", OVER], |_| {
            let n = node("Pad", "pad", &["x", "p"], &["y"]);
            on_input(n, &[1, 1], vec![int64s("p", &[4], &[0, 0, HUGE[0] - 1, HUGE[1] - 1])], 2)
        }),
        check("Resize by a huge scale", &["node \"resize\" (Resize)", OVER], |_| {
            let n = node("Resize", "resize", &["x", "", "sc"], &["y"]);
            let scales = [1.0f32, 1e9].iter().flat_map(|v| v.to_le_bytes()).collect();
            on_input(n, &[2, 2], vec![raw_tensor("sc", 1, &[2], scales)], 2)
        }),
        check("declared input of 16 GiB", &["node \"relu\" (Relu)", OVER], |_| {
            graph_model(
                vec![node("Relu", "relu", &["x"], &["y"])],
                vec![value("x", Some(&[1 << 16, 1 << 16]))],
                vec![],
                vec![value("y", Some(&[1 << 16, 1 << 16]))],
            )
        }),
    ]
}

fn inconsistent() -> Vec<Case> {
    let w = || raw_tensor("w", 1, &[1, 1, 3, 3], vec![0; 36]);
    vec![
        check(
            "Conv kernel_shape unlike the weights",
            &["node \"conv\" (Conv)", "\"kernel_shape\" is [2, 2]"],
            move |_| {
                let n = with(node("Conv", "conv", &["x", "w"], &["y"]), vec![ints_attr("kernel_shape", &[2, 2])]);
                on_input(n, &[1, 1, 8, 8], vec![w()], 4)
            },
        ),
        check(
            "Conv pads of the wrong length",
            &["node \"conv\" (Conv)", "\"pads\" has 3 values, expected 4"],
            move |_| {
                let n = with(node("Conv", "conv", &["x", "w"], &["y"]), vec![ints_attr("pads", &[1, 1, 1])]);
                on_input(n, &[1, 1, 8, 8], vec![w()], 4)
            },
        ),
        check("Conv group not dividing the channels", &["node \"conv\" (Conv)", "group"], move |_| {
            let n = with(node("Conv", "conv", &["x", "w"], &["y"]), vec![int_attr("group", 3)]);
            on_input(n, &[1, 1, 8, 8], vec![w()], 4)
        }),
        check("Conv weights of another channel count", &["node \"conv\" (Conv)"], |_| {
            let n = node("Conv", "conv", &["x", "w"], &["y"]);
            on_input(n, &[1, 2, 8, 8], vec![raw_tensor("w", 1, &[1, 3, 3, 3], vec![0; 108])], 4)
        }),
        check("Gather at a constant index out of range", &["node \"g\" (Gather)", "constant index 3"], |_| {
            let n = node("Gather", "g", &["x", "i"], &["y"]);
            on_input(n, &[3, 2], vec![int64s("i", &[2], &[0, 3])], 2)
        }),
        check("integer Div by a constant zero", &["node \"d\" (Div)", "division by zero"], |_| {
            let n = node("Div", "d", &["x", "z"], &["y"]);
            let x = vec![typed_value("x", 7, Some(&[2]))];
            graph_model(vec![n], x, vec![int64s("z", &[2], &[2, 0])], vec![typed_value("y", 7, Some(&[2]))])
        }),
        check("Conv on an input of rank 2", &["node \"conv\" (Conv)"], |_| {
            let n = node("Conv", "conv", &["x", "w"], &["y"]);
            on_input(n, &[8, 8], vec![raw_tensor("w", 1, &[1, 1, 3, 3], vec![0; 36])], 4)
        }),
        check("Transpose perm of the wrong length", &["node \"t\" (Transpose)", "perm"], |_| {
            let n = with(node("Transpose", "t", &["x"], &["y"]), vec![ints_attr("perm", &[0, 1, 2])]);
            on_input(n, &[2, 3], vec![], 2)
        }),
        check("Transpose perm repeating an axis", &["node \"t\" (Transpose)", "perm"], |_| {
            let n = with(node("Transpose", "t", &["x"], &["y"]), vec![ints_attr("perm", &[1, 1])]);
            on_input(n, &[2, 3], vec![], 2)
        }),
        check("Gather axis out of range", &["node \"g\" (Gather)", "axis"], |_| {
            let n = with(node("Gather", "g", &["x", "i"], &["y"]), vec![int_attr("axis", 5)]);
            on_input(n, &[2, 3], vec![int64s("i", &[1], &[0])], 2)
        }),
        check("Concat axis out of range", &["node \"c\" (Concat)", "axis"], |_| {
            let n = with(node("Concat", "c", &["x", "x"], &["y"]), vec![int_attr("axis", -3)]);
            on_input(n, &[2, 3], vec![], 2)
        }),
        check("Split sizes not summing to the dim", &["node \"s\" (Split)"], |_| {
            let n = node("Split", "s", &["x", "sizes"], &["y", "z"]);
            graph_model(
                vec![n],
                vec![value("x", Some(&[6]))],
                vec![int64s("sizes", &[2], &[2, 2])],
                vec![value("y", Some(&[-1])), value("z", Some(&[-1]))],
            )
        }),
        check("Reshape to another element count", &["node \"r\" (Reshape)"], |_| {
            let n = node("Reshape", "r", &["x", "s"], &["y"]);
            on_input(n, &[2, 3], vec![int64s("s", &[2], &[4, 4])], 2)
        }),
        check("Squeeze of a dim that is not 1", &["node \"sq\" (Squeeze)"], |_| {
            let n = node("Squeeze", "sq", &["x", "a"], &["y"]);
            on_input(n, &[2, 3], vec![int64s("a", &[1], &[0])], 1)
        }),
        check(
            "ConstantOfShape value of two elements",
            &["node \"cos\" (ConstantOfShape)", "attribute \"value\" must hold one element"],
            |_| {
                let mut n = node("ConstantOfShape", "cos", &["s"], &["y"]);
                n.attribute.push(AttributeProto {
                    name: Some("value".into()),
                    r#type: Some(attribute_proto::AttributeType::Tensor as i32),
                    t: Some(raw_tensor("v", 1, &[2], vec![0; 8])),
                    ..Default::default()
                });
                one_node(n, vec![int64s("s", &[1], &[4])], 1)
            },
        ),
        check("MatMul of mismatched inner dims", &["node \"mm\" (MatMul)"], |_| {
            let n = node("MatMul", "mm", &["x", "w"], &["y"]);
            on_input(n, &[2, 3], vec![raw_tensor("w", 1, &[4, 2], vec![0; 32])], 2)
        }),
        check("Cast to an element type onnxc lacks", &["node \"cast\" (Cast)", "attribute \"to\""], |_| {
            // COMPLEX64 (14): strings (8), the old example here, are supported now.
            let n = with(node("Cast", "cast", &["x"], &["y"]), vec![int_attr("to", 14)]);
            let dims = [-1];
            graph_model(vec![n], vec![value("x", Some(&[2]))], vec![], vec![typed_value("y", 14, Some(&dims))])
        }),
    ]
}

/// `y = op(x)` for x f32[1,1,8,8] with `attrs`; Conv gets 3×3 weights.
fn window_case(op: &str, attrs: Vec<AttributeProto>) -> Vec<u8> {
    let name = op.to_lowercase();
    if op == "Conv" || op == "ConvTranspose" {
        let n = with(node(op, &name, &["x", "w"], &["y"]), attrs);
        return on_input(n, &[1, 1, 8, 8], vec![raw_tensor("w", 1, &[1, 1, 3, 3], vec![0; 36])], 4);
    }
    on_input(with(node(op, &name, &["x"], &["y"]), attrs), &[1, 1, 8, 8], vec![], 4)
}

fn same_upper() -> AttributeProto {
    AttributeProto {
        name: Some("auto_pad".into()),
        r#type: Some(attribute_proto::AttributeType::String as i32),
        s: Some(b"SAME_UPPER".to_vec()),
        ..Default::default()
    }
}

fn kernel() -> AttributeProto {
    ints_attr("kernel_shape", &[3, 3])
}

const MAX: i64 = i64::MAX;

fn windows() -> Vec<Case> {
    vec![
        check("Conv dilations of i64::MAX", &["node \"conv\" (Conv)", "dilations"], |_| {
            window_case("Conv", vec![ints_attr("dilations", &[MAX, 1])])
        }),
        check("Conv pads of i64::MAX", &["node \"conv\" (Conv)", "pads"], |_| {
            window_case("Conv", vec![ints_attr("pads", &[MAX, MAX, MAX, MAX])])
        }),
        check("Conv pads negative", &["node \"conv\" (Conv)", "\"pads\" has -1"], |_| {
            window_case("Conv", vec![ints_attr("pads", &[-1, 0, 0, 0])])
        }),
        check(
            "Conv SAME padding with a huge dilation",
            &["node \"conv\" (Conv)", "window of 9223372036854775807"],
            |_| window_case("Conv", vec![same_upper(), ints_attr("dilations", &[MAX / 2, 1])]),
        ),
        check("MaxPool kernel of i64::MAX", &["node \"maxpool\" (MaxPool)", "window of 9223372036854775807"], |_| {
            window_case("MaxPool", vec![ints_attr("kernel_shape", &[MAX, MAX])])
        }),
        check("MaxPool with ceil_mode and huge pads", &["node \"maxpool\" (MaxPool)", "pads"], |_| {
            window_case(
                "MaxPool",
                vec![kernel(), int_attr("ceil_mode", 1), ints_attr("pads", &[MAX / 2, 0, MAX / 2, 0])],
            )
        }),
        check("MaxPool dilations of i64::MAX", &["node \"maxpool\" (MaxPool)", "dilations"], |_| {
            window_case("MaxPool", vec![kernel(), ints_attr("dilations", &[MAX, MAX])])
        }),
        check("ConvTranspose strides of i64::MAX", &["node \"convtranspose\" (ConvTranspose)"], |_| {
            window_case("ConvTranspose", vec![ints_attr("strides", &[MAX, MAX])])
        }),
        check(
            "ConvTranspose output_padding of i64::MAX",
            &["node \"convtranspose\" (ConvTranspose)", "output_padding"],
            |_| {
                window_case(
                    "ConvTranspose",
                    vec![ints_attr("strides", &[2, 2]), ints_attr("output_padding", &[MAX, 0])],
                )
            },
        ),
        check("ConvTranspose output_shape of i64::MAX", &["node \"convtranspose\" (ConvTranspose)"], |_| {
            window_case("ConvTranspose", vec![ints_attr("output_shape", &[MAX, MAX])])
        }),
        check("LpPool kernel of i64::MAX", &["node \"lppool\" (LpPool)"], |_| {
            window_case("LpPool", vec![ints_attr("kernel_shape", &[MAX, 1])])
        }),
    ]
}

#[test]
fn a_64_gib_constant_is_rejected_fast() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join("model.onnx");
    let bytes = one_node(node("ConstantOfShape", "cos", &["s"], &["y"]), vec![int64s("s", &[2], &HUGE)], 2);
    assert!(bytes.len() < 1024, "the model has {} bytes", bytes.len());
    std::fs::write(&path, &bytes).expect("write");
    let mut c = std::process::Command::new(crate::common::onnxc());
    c.arg("compile").arg(&path).arg("-o").arg(dir.path().join("out.o"));
    let out = crate::common::run_with_timeout(c, std::time::Duration::from_secs(60)).expect("run onnxc");
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stderr);
    assert!(out.stderr.contains(OVER), "{}", out.stderr);
    // Loose: the point is milliseconds, not the minutes or the memory
    // materialising 64 GiB would take.
    assert!(out.elapsed.as_secs() < 10, "rejecting took {:?}", out.elapsed);
    eprintln!("a {}-byte model asking for 64 GiB rejected in {:?}", bytes.len(), out.elapsed);
}

/// Strides past the input are legal: one window, at the start. Such models
/// must compile and compute that window, not overflow.
#[test]
fn strides_of_i64_max_give_one_window() {
    let x: Vec<f32> = (0..64).map(|v| v as f32).collect();
    let input = raw_tensor("x", 1, &[1, 1, 8, 8], x.iter().flat_map(|v| v.to_le_bytes()).collect());
    let huge = || ints_attr("strides", &[MAX, MAX]);
    let ones = raw_tensor("w", 1, &[1, 1, 3, 3], [1.0f32; 9].iter().flat_map(|v| v.to_le_bytes()).collect());
    // The top-left 3×3 window sums to 0+1+2+8+9+10+16+17+18.
    let cases: Vec<(&str, Vec<AttributeProto>, f32)> = vec![
        ("Conv", vec![huge()], 81.0),
        ("Conv", vec![huge(), same_upper()], 81.0),
        ("MaxPool", vec![kernel(), huge()], 18.0),
        // Window rows/cols -1..=1 with ceil_mode; the valid taps are 0, 1, 8, 9.
        ("AveragePool", vec![kernel(), huge(), int_attr("ceil_mode", 1), ints_attr("pads", &[1, 1, 1, 1])], 4.5),
    ];
    for (op, attrs, want) in cases {
        let name = op.to_lowercase();
        let mut n = with(node(op, &name, &["x", "w"], &["y"]), attrs);
        let mut inits = vec![];
        if op == "Conv" {
            inits.push(ones.clone());
        } else {
            n.input.truncate(1);
        }
        let mut m = crate::models::model(
            vec![n],
            vec![value("x", Some(&[1, 1, 8, 8]))],
            vec![value("y", Some(&[-1, -1, -1, -1]))],
        );
        m.graph.as_mut().expect("graph").initializer = inits;
        let out =
            crate::common::run_model(&m, std::slice::from_ref(&input)).unwrap_or_else(|o| panic!("{op}: {}", o.stderr));
        let y = &out[0];
        assert_eq!(y.dims, [1, 1, 1, 1], "{op}");
        let got = f32::from_le_bytes(y.raw_data()[..4].try_into().expect("4 bytes"));
        assert_eq!(got, want, "{op}");
    }
}

/// Found by fuzzing: a SAME-padded pool whose kernel_shape is 2^62 - 1
/// compiled fine and then looped over every tap. Windows now visit only
/// the taps inside the input.
#[test]
fn a_pool_window_of_2_pow_62_taps_runs_at_once() {
    let input = raw_tensor("x", 1, &[1, 1, 1], 5.0f32.to_le_bytes().to_vec());
    for op in ["MaxPool", "AveragePool", "LpPool"] {
        let attrs = vec![ints_attr("kernel_shape", &[(1 << 62) - 1]), ints_attr("strides", &[3]), same_upper()];
        let n = with(node(op, "pool", &["x"], &["y"]), attrs);
        let m =
            crate::models::model(vec![n], vec![value("x", Some(&[1, 1, 1]))], vec![value("y", Some(&[-1, -1, -1]))]);
        let out =
            crate::common::run_model(&m, std::slice::from_ref(&input)).unwrap_or_else(|o| panic!("{op}: {}", o.stderr));
        let got = f32::from_le_bytes(out[0].raw_data()[..4].try_into().expect("4 bytes"));
        assert_eq!(got, 5.0, "{op}");
    }
}
