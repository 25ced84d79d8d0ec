//! The random operators through `onnxc run`: the ONNX node suite cannot
//! check their values, so these tests check what can be checked — output
//! shape and type, the range of every value, the moments of large samples
//! (tolerances of at least five standard errors), that a seed fixes the
//! values across runs and compilations while different seeds and unseeded
//! nodes differ, and Dropout's scaling and mask in training mode.

use crate::common::{onnxc_in, run_model, succeeded, write_model};
use crate::models::{float_attr, int_attr, ints_attr, model, node, raw_tensor, typed_value};
use crate::snapshot::{assert_snapshot, compiled_mir};
use onnx_proto::{AttributeProto, ModelProto, NodeProto, TensorProto};
use prost::Message;

const F32: i32 = 1;
const I32: i32 = 6;
const I64: i32 = 7;
const BOOL: i32 = 9;
const F16: i32 = 10;
const F64: i32 = 11;
const BF16: i32 = 16;

/// A model of one node at opset 22 (bf16 random outputs need it).
fn one_node(n: NodeProto, inputs: &[(&str, i32, &[i64])], outputs: &[(&str, i32, &[i64])]) -> ModelProto {
    let values =
        |list: &[(&str, i32, &[i64])]| list.iter().map(|&(name, t, dims)| typed_value(name, t, Some(dims))).collect();
    let mut m = model(vec![n], values(inputs), values(outputs));
    m.opset_import[0].version = Some(22);
    m
}

fn with_attrs(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute.extend(attrs);
    n
}

/// The values of a tensor written by `onnxc run` (raw little-endian data), as f64.
fn values(t: &TensorProto) -> Vec<f64> {
    let raw = t.raw_data.as_deref().expect("raw data");
    let width = match t.data_type() {
        BOOL => 1,
        F16 | BF16 => 2,
        F32 | I32 => 4,
        _ => 8,
    };
    raw.chunks_exact(width)
        .map(|b| match t.data_type() {
            BOOL => b[0] as f64,
            F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            BF16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            I64 => i64::from_le_bytes(b.try_into().expect("8 bytes")) as f64,
            F64 => f64::from_le_bytes(b.try_into().expect("8 bytes")),
            other => panic!("unexpected element type {other}"),
        })
        .collect()
}

fn f32_tensor(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    raw_tensor(name, F32, dims, v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

fn run(m: &ModelProto, inputs: &[TensorProto]) -> Vec<TensorProto> {
    run_model(m, inputs).unwrap_or_else(|out| panic!("onnxc run failed ({}): {}", out.describe_status(), out.stderr))
}

/// Mean and standard deviation.
fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    (mean, (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt())
}

fn assert_near(what: &str, got: f64, want: f64, tol: f64) {
    assert!((got - want).abs() <= tol, "{what}: got {got}, want {want} ± {tol}");
}

/// RandomUniform on [-1, 3) or RandomNormal(2, 0.5) of 100 × 100 elements.
fn fill(op: &str, dtype: i32, seed: Option<f32>) -> NodeProto {
    let mut attrs = vec![int_attr("dtype", dtype.into()), ints_attr("shape", &[100, 100])];
    attrs.extend(match op {
        "RandomUniform" => [float_attr("low", -1.0), float_attr("high", 3.0)],
        _ => [float_attr("mean", 2.0), float_attr("scale", 0.5)],
    });
    attrs.extend(seed.map(|s| float_attr("seed", s)));
    with_attrs(node(op, "fill", &[], &["y"]), attrs)
}

#[test]
fn uniform_and_normal_have_their_type_shape_range_and_moments() {
    for dtype in [F16, BF16, F32, F64] {
        let uniform =
            &run(&one_node(fill("RandomUniform", dtype, Some(1.0)), &[], &[("y", dtype, &[100, 100])]), &[])[0];
        assert_eq!((uniform.data_type(), uniform.dims.as_slice()), (dtype, &[100i64, 100][..]));
        let u = values(uniform);
        assert!(u.iter().all(|v| (-1.0..3.0).contains(v)), "type {dtype}: a value outside [-1, 3)");
        // Mean 1 (standard error 0.012), standard deviation 4/sqrt(12).
        let (mean, std) = moments(&u);
        assert_near("uniform mean", mean, 1.0, 0.06);
        assert_near("uniform std", std, 4.0 / 12f64.sqrt(), 0.05);

        let normal = &run(&one_node(fill("RandomNormal", dtype, None), &[], &[("y", dtype, &[100, 100])]), &[])[0];
        assert_eq!(normal.data_type(), dtype);
        let (mean, std) = moments(&values(normal));
        // Standard errors 0.005 and 0.0035.
        assert_near("normal mean", mean, 2.0, 0.03);
        assert_near("normal std", std, 0.5, 0.03);
    }
}

#[test]
fn like_forms_take_their_inputs_shape_and_by_default_its_type() {
    let like = node("RandomUniformLike", "like", &["x"], &["y"]);
    let m = one_node(like.clone(), &[("x", F64, &[3, 4])], &[("y", F64, &[3, 4])]);
    let x = raw_tensor("x", F64, &[3, 4], vec![0; 96]);
    let y = &run(&m, &[x])[0];
    assert_eq!((y.data_type(), y.dims.as_slice()), (F64, &[3i64, 4][..]));
    assert!(values(y).iter().all(|v| (0.0..1.0).contains(v)));

    let normal =
        with_attrs(node("RandomNormalLike", "normal_like", &["x"], &["y"]), vec![int_attr("dtype", F16.into())]);
    let m = one_node(normal, &[("x", I64, &[5])], &[("y", F16, &[5])]);
    let y = &run(&m, &[raw_tensor("x", I64, &[5], vec![0; 40])])[0];
    assert_eq!((y.data_type(), y.dims.as_slice()), (F16, &[5i64][..]));

    // An integer input gives no float type to take.
    let m = one_node(like, &[("x", I64, &[5])], &[("y", I64, &[5])]);
    let out = run_model(&m, &[raw_tensor("x", I64, &[5], vec![0; 40])]).expect_err("an i64 random tensor");
    assert!(out.stderr.contains("node \"like\" (RandomUniformLike)"), "{}", out.stderr);
}

#[test]
fn bernoulli_draws_zeros_and_ones_at_the_given_rates() {
    let rates = [0.0f32, 0.2, 0.9, 1.0];
    let probs: Vec<f32> = (0..20_000).map(|i| rates[i % 4]).collect();
    for dtype in [None, Some(I32), Some(BOOL), Some(F64)] {
        let attrs = dtype.map(|t| int_attr("dtype", t.into())).into_iter().collect();
        let n = with_attrs(node("Bernoulli", "coin", &["p"], &["y"]), attrs);
        let out_type = dtype.unwrap_or(F32);
        let m = one_node(n, &[("p", F32, &[20_000])], &[("y", out_type, &[20_000])]);
        let y = &run(&m, &[f32_tensor("p", &[20_000], &probs)])[0];
        assert_eq!((y.data_type(), y.dims.as_slice()), (out_type, &[20_000i64][..]));
        let v = values(y);
        assert!(v.iter().all(|&b| b == 0.0 || b == 1.0), "type {out_type}: a value other than 0 and 1");
        for (k, &rate) in rates.iter().enumerate() {
            let hits: Vec<f64> = v.iter().skip(k).step_by(4).copied().collect();
            // 5000 draws: standard error at most 0.007.
            assert_near("hit rate", moments(&hits).0, rate.into(), 0.035);
        }
    }
}

#[test]
fn multinomial_draws_class_indices_by_probability() {
    let probs = [[0.1f32, 0.2, 0.3, 0.4], [0.5, 0.0, 0.0, 0.5]];
    let logits: Vec<f32> = probs.iter().flatten().map(|p| p.ln()).collect();
    for dtype in [None, Some(I64)] {
        let mut attrs = vec![int_attr("sample_size", 5000), float_attr("seed", 3.0)];
        attrs.extend(dtype.map(|t| int_attr("dtype", t.into())));
        let n = with_attrs(node("Multinomial", "draw", &["x"], &["y"]), attrs);
        let out_type = dtype.unwrap_or(I32);
        let m = one_node(n, &[("x", F32, &[2, 4])], &[("y", out_type, &[2, 5000])]);
        let y = &run(&m, &[f32_tensor("x", &[2, 4], &logits)])[0];
        assert_eq!((y.data_type(), y.dims.as_slice()), (out_type, &[2i64, 5000][..]));
        let v = values(y);
        for (row, draws) in v.chunks(5000).enumerate() {
            for (class, &p) in probs[row].iter().enumerate() {
                let share = draws.iter().filter(|&&c| c == class as f64).count() as f64 / 5000.0;
                // Standard error at most 0.0071; impossible classes never come up.
                assert_near("class share", share, p.into(), if p == 0.0 { 0.0 } else { 0.036 });
            }
        }
    }
}

/// The bytes of output 0 of `onnxc run` on a model of `nodes` (no inputs).
fn sample(nodes: Vec<NodeProto>, outputs: &[&str]) -> Vec<Vec<u8>> {
    let outs = outputs.iter().map(|&o| typed_value(o, F32, Some(&[100, 100]))).collect();
    let mut m = model(nodes, vec![], outs);
    m.opset_import[0].version = Some(22);
    run(&m, &[]).into_iter().map(|t| t.raw_data.expect("raw data")).collect()
}

/// `n` renamed to `name`, writing output `name`.
fn renamed(mut n: NodeProto, name: &str) -> NodeProto {
    n.output = vec![name.into()];
    n.name = Some(name.into());
    n
}

#[test]
fn seeds_fix_the_values_and_unseeded_nodes_differ() {
    let seeded = |seed: f32, out: &str| renamed(fill("RandomUniform", F32, Some(seed)), out);
    let first = sample(vec![seeded(5.0, "a"), seeded(5.0, "b"), seeded(6.0, "c")], &["a", "b", "c"]);
    assert_eq!(first[0], first[1], "the same seed gave different values");
    assert_ne!(first[0], first[2], "different seeds gave the same values");
    assert_eq!(first, sample(vec![seeded(5.0, "a"), seeded(5.0, "b"), seeded(6.0, "c")], &["a", "b", "c"]));

    let unseeded = |out: &str| renamed(fill("RandomNormal", F32, None), out);
    let first = sample(vec![unseeded("a"), unseeded("b")], &["a", "b"]);
    assert_ne!(first[0], first[1], "two unseeded nodes drew the same values");
    assert_eq!(first, sample(vec![unseeded("a"), unseeded("b")], &["a", "b"]), "an unseeded model changed");
}

#[test]
fn the_object_file_draws_what_the_jit_draws() {
    // A backend-test case whose expected output is what `onnxc run` (JIT)
    // drew; `onnxc test --via object` compiles again and must match exactly.
    let m = one_node(fill("RandomNormal", F32, None), &[], &[("y", F32, &[100, 100])]);
    let y = &run(&m, &[])[0];
    let dir = tempfile::tempdir().expect("temporary folder");
    let case = dir.path().join("random_case");
    std::fs::create_dir_all(case.join("test_data_set_0")).expect("case folder");
    write_model(&case, "model.onnx", &m);
    std::fs::write(case.join("test_data_set_0/output_0.pb"), y.encode_to_vec()).expect("write output");
    let out = onnxc_in(dir.path(), &["test", "random_case", "--via", "object", "--rtol", "0", "--atol", "0"]);
    assert!(succeeded(&out) && out.stdout.contains("1 passed, 0 failed"), "{}\n{}", out.stdout, out.stderr);
}

#[test]
fn random_nodes_are_not_constant_folded() {
    let m = one_node(fill("RandomUniform", F32, Some(1.0)), &[], &[("y", F32, &[100, 100])]);
    assert_snapshot("random_uniform", &compiled_mir(&m, &[]));
}

/// Dropout(x, ratio, training_mode) with both outputs, at opset 22.
fn dropout_model(with_ratio: bool) -> ModelProto {
    let inputs: &[&str] = if with_ratio { &["x", "r", "t"] } else { &["x", "", "t"] };
    let n = with_attrs(node("Dropout", "drop", inputs, &["y", "mask"]), vec![int_attr("seed", 7)]);
    let mut declared: Vec<(&str, i32, &[i64])> = vec![("x", F32, &[10_000])];
    if with_ratio {
        declared.push(("r", F32, &[]));
    }
    declared.push(("t", BOOL, &[]));
    one_node(n, &declared, &[("y", F32, &[10_000]), ("mask", BOOL, &[10_000])])
}

/// Dropout's data: 1, 2, ... 10000.
fn dropout_x() -> Vec<f32> {
    (1..=10_000).map(|i| i as f32).collect()
}

/// Runs a Dropout model on [`dropout_x`]; returns y and the mask.
fn dropout(with_ratio: Option<f32>, training: bool) -> Result<[Vec<f64>; 2], crate::common::Output> {
    let mut inputs = vec![f32_tensor("x", &[10_000], &dropout_x())];
    inputs.extend(with_ratio.map(|r| f32_tensor("r", &[], &[r])));
    inputs.push(raw_tensor("t", BOOL, &[], vec![training as u8]));
    let outs = run_model(&dropout_model(with_ratio.is_some()), &inputs)?;
    let [y, mask] = [values(&outs[0]), values(&outs[1])];
    assert_eq!((y.len(), mask.len()), (10_000, 10_000), "Dropout's outputs are short");
    Ok([y, mask])
}

#[test]
fn dropout_in_training_mode_scales_survivors_and_reports_the_mask() {
    for (ratio, want) in [(Some(0.3), 0.3f32), (None, 0.5)] {
        let [y, mask] = dropout(ratio, true).unwrap_or_else(|out| panic!("{}", out.stderr));
        let scale = 1.0 / (1.0 - f64::from(want));
        for (i, &x) in dropout_x().iter().enumerate() {
            let kept = if mask[i] == 1.0 { f64::from(x) * scale } else { 0.0 };
            assert!((y[i] - kept).abs() <= 1e-6 * kept, "element {i} (ratio {want}): {} for {kept}", y[i]);
        }
        // 10000 draws: standard error at most 0.005.
        assert_near("dropped share", 1.0 - moments(&mask).0, want.into(), 0.025);
    }
    // The same compiled graph passes the data through when not training.
    let [y, mask] = dropout(Some(0.3), false).unwrap_or_else(|out| panic!("{}", out.stderr));
    assert!(y.iter().zip(dropout_x()).all(|(&y, x)| y == f64::from(x)) && mask.iter().all(|&m| m == 1.0));
}

#[test]
fn dropout_rejects_a_ratio_of_one_at_run_time() {
    let out = dropout(Some(1.0), true).expect_err("ratio 1 is outside [0, 1)");
    assert!(out.stderr.contains("node \"drop\" (Dropout)"), "{}", out.stderr);
}
