//! The integer products with every input given three ways, as a graph
//! input, as a constant, or produced by another node, checked against the
//! definition computed here. The pattern of issue #31 is
//! `DynamicQuantizeLinear(x) -> MatMulInteger(xq, W, xz, wz)` with a constant
//! int8 `W` and a constant zero point 0 (what ORT's `quantize_dynamic`
//! writes), which was reported to give wrong products while a zero point
//! given as a graph input did not; `tests/scripts/make_quant_pattern_cases.py`
//! writes the same patterns for ConvInteger and QLinearConv too, with ONNX
//! Runtime's references.

use crate::common::run_model;
use crate::models::{model, node, raw_tensor, typed_value};
use onnx_proto::*;

const F32: i32 = 1;
const U8: i32 = 2;
const I8: i32 = 3;
const I32: i32 = 6;

/// How an input of the product reaches it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Given {
    Input,
    Constant,
    /// An Identity of a constant: a node's output the compiler cannot see
    /// through before inference folds it.
    Produced,
}

/// A model under construction and the values fed to its inputs.
#[derive(Default)]
struct Builder {
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    feeds: Vec<TensorProto>,
    constants: Vec<TensorProto>,
}

impl Builder {
    /// `raw` (of ONNX type `dtype`, shape `dims`) under `name`, as `how`
    /// says.
    fn given(&mut self, how: Given, name: &str, dtype: i32, dims: &[i64], raw: Vec<u8>) -> String {
        match how {
            Given::Input => {
                self.inputs.push(typed_value(name, dtype, Some(dims)));
                self.feeds.push(raw_tensor(name, dtype, dims, raw));
            }
            Given::Constant => self.constants.push(raw_tensor(name, dtype, dims, raw)),
            Given::Produced => {
                let source = format!("{name}_source");
                self.constants.push(raw_tensor(&source, dtype, dims, raw));
                self.nodes.push(node("Identity", &format!("{name}_identity"), &[&source], &[name]));
            }
        }
        name.to_string()
    }

    /// Runs the model with `product` (output `y` of type `y_dtype`, shape
    /// `y_dims`) last; the output's bytes.
    fn run(mut self, product: NodeProto, y_dtype: i32, y_dims: &[i64]) -> Vec<u8> {
        self.nodes.push(product);
        let mut m = model(self.nodes, self.inputs, vec![typed_value("y", y_dtype, Some(y_dims))]);
        m.opset_import[0].version = Some(13);
        m.graph.as_mut().expect("graph").initializer = self.constants;
        let out = run_model(&m, &self.feeds).unwrap_or_else(|o| panic!("onnxc run failed: {}", o.stderr_tail(10)));
        out[0].raw_data.clone().expect("raw output data")
    }
}

/// Deterministic bytes (a 32-bit LCG's high bytes).
fn bytes(len: usize, seed: u32) -> Vec<u8> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(12_345);
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 24) as u8
        })
        .collect()
}

/// Floats in about [-1.3, 2.7): mostly positive, so DynamicQuantizeLinear's
/// zero point is neither 0 nor 255.
fn floats(len: usize, seed: u32) -> Vec<f32> {
    bytes(len, seed).iter().map(|&b| (b as f32 - 83.0) / 64.0).collect()
}

fn f32_raw(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// DynamicQuantizeLinear by its definition: `(y, scale, zero point)`.
fn dynamic_quantize(x: &[f32]) -> (Vec<u8>, f32, u8) {
    let hi = x.iter().fold(0.0f32, |m, &v| m.max(v));
    let lo = x.iter().fold(0.0f32, |m, &v| m.min(v));
    let scale = (hi - lo) / 255.0;
    let zero = (-lo / scale).clamp(0.0, 255.0).round_ties_even();
    let y = x.iter().map(|&v| ((v / scale).round_ties_even() + zero).clamp(0.0, 255.0) as u8).collect();
    (y, scale, zero as u8)
}

/// `(A - za) · (B - zb)` for `a` `m x k` u8 and `b` `k x n` of `b_signed`
/// bytes.
fn integer_matmul(a: &[u8], za: i32, b: &[u8], b_signed: bool, zb: i32, [m, k, n]: [usize; 3]) -> Vec<i32> {
    let bv = |i: usize| if b_signed { b[i] as i8 as i32 } else { b[i] as i32 };
    (0..m * n).map(|i| (0..k).map(|q| (a[i / n * k + q] as i32 - za) * (bv(q * n + i % n) - zb)).sum()).collect()
}

/// The activation of a product: `(A, its zero point's name, A's bytes, the
/// zero point)`, A `dims` u8 from DynamicQuantizeLinear of a float input
/// (`how: None`) or given with its zero point as `how` says.
fn activation(g: &mut Builder, how: Option<Given>, dims: &[i64], seed: u32) -> (String, String, Vec<u8>, u8) {
    let len = dims.iter().product::<i64>() as usize;
    match how {
        None => {
            let x = floats(len, seed);
            g.given(Given::Input, "x", F32, dims, f32_raw(&x));
            g.nodes.push(node("DynamicQuantizeLinear", "dql", &["x"], &["xq", "x_scale", "xz"]));
            let (xq, _, zero) = dynamic_quantize(&x);
            ("xq".into(), "xz".into(), xq, zero)
        }
        Some(how) => {
            let a = bytes(len, seed);
            let zero = bytes(1, seed + 1)[0];
            g.given(Given::Input, "a", U8, dims, a.clone());
            let zp = g.given(how, "az", U8, &[], vec![zero]);
            ("a".into(), zp, a, zero)
        }
    }
}

/// A weight's zero point: absent, 0 as a constant (`quantize_dynamic`'s),
/// or `zero` given as `how` says.
#[derive(Clone, Copy, Debug)]
enum WeightZero {
    Absent,
    ConstantZero,
    Given(Given),
}

const WEIGHT_ZEROS: [WeightZero; 5] = [
    WeightZero::Absent,
    WeightZero::ConstantZero,
    WeightZero::Given(Given::Constant),
    WeightZero::Given(Given::Input),
    WeightZero::Given(Given::Produced),
];

const GIVEN: [Given; 3] = [Given::Input, Given::Constant, Given::Produced];

/// `[A, B, a_zp, b_zp]`, the optional ones left out at the end.
fn product_inputs(a: &str, b: &str, a_zp: &str, b_zp: Option<&str>) -> Vec<String> {
    let mut inputs = vec![a.to_string(), b.to_string(), a_zp.to_string()];
    inputs.extend(b_zp.map(str::to_string));
    inputs
}

/// MatMulInteger of `a_dims` by `[k, n]` with A from DynamicQuantizeLinear
/// or given (`x`), W of `w_dtype` given as `w`, and the weight zero point
/// `wz`; checks every product exactly.
fn check_matmul_integer(a_dims: &[i64], n: usize, x: Option<Given>, w_dtype: i32, w: Given, wz: WeightZero) {
    let (m, k) = (a_dims[..a_dims.len() - 1].iter().product::<i64>() as usize, a_dims[a_dims.len() - 1] as usize);
    let mut g = Builder::default();
    let (a, a_zp, a_bytes, za) = activation(&mut g, x, a_dims, (m * k + n) as u32);
    let w_bytes = bytes(k * n, 7 + n as u32);
    g.given(w, "w", w_dtype, &[k as i64, n as i64], w_bytes.clone());
    let zero = bytes(1, 99)[0] / 4;
    let (b_zp, zb) = match wz {
        WeightZero::Absent => (None, 0),
        WeightZero::ConstantZero => (Some(g.given(Given::Constant, "wz", w_dtype, &[], vec![0])), 0),
        WeightZero::Given(how) => (Some(g.given(how, "wz", w_dtype, &[], vec![zero])), zero as i32),
    };
    let inputs = product_inputs(&a, "w", &a_zp, b_zp.as_deref());
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let mut y_dims = a_dims.to_vec();
    *y_dims.last_mut().expect("rank >= 2") = n as i64;
    let raw = g.run(node("MatMulInteger", "product", &refs, &["y"]), I32, &y_dims);
    let got: Vec<i32> = raw.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
    let want = integer_matmul(&a_bytes, za as i32, &w_bytes, w_dtype == I8, zb, [m, k, n]);
    let wrong = got.iter().zip(&want).filter(|(g, w)| g != w).count();
    assert_eq!(wrong, 0, "{a_dims:?} x [{k}, {n}], A {x:?}, W {w_dtype} {w:?}, zero point {wz:?}: {wrong} wrong");
}

#[test]
fn dynamic_quantize_then_matmul_integer_with_a_constant_weight_and_zero_point() {
    // The two shapes of the report, exactly as quantize_dynamic writes them.
    for (dims, n) in [(&[1i64, 4, 16][..], 8), (&[1, 197, 192], 576)] {
        check_matmul_integer(dims, n, None, I8, Given::Constant, WeightZero::ConstantZero);
    }
}

#[test]
fn matmul_integer_inputs_given_every_way() {
    for (dims, x, w_dtype, w, wz) in [&[4i64, 16][..], &[1, 5, 16]]
        .into_iter()
        .flat_map(|d| [None, Some(Given::Input), Some(Given::Constant), Some(Given::Produced)].map(|x| (d, x)))
        .flat_map(|(d, x)| [I8, U8].map(|t| (d, x, t)))
        .flat_map(|(d, x, t)| GIVEN.map(|w| (d, x, t, w)))
        .flat_map(|(d, x, t, w)| WEIGHT_ZEROS.map(|z| (d, x, t, w, z)))
    {
        check_matmul_integer(dims, 9, x, w_dtype, w, wz);
    }
}

/// QLinearMatMul's requantization by its definition, in f64: within one
/// quantum of any float order of operations.
fn requantize(acc: &[i32], combined_scale: impl Fn(usize) -> f64, zero: u8) -> Vec<u8> {
    acc.iter()
        .enumerate()
        .map(|(i, &v)| (v as f64 * combined_scale(i) + zero as f64).round().clamp(0.0, 255.0) as u8)
        .collect()
}

/// QLinearMatMul of `[m, k]` (from DynamicQuantizeLinear, its scale and
/// zero point included, or given as `a`) by an int8 `[k, n]` weight given
/// with its scale and zero point as `w`, per tensor or `per_column`.
fn check_qlinear_matmul(a: Option<Given>, w: Given, per_column: bool) {
    let (m, k, n) = (6usize, 20usize, 11usize);
    let mut g = Builder::default();
    let (a_name, a_zp, a_bytes, za) = activation(&mut g, a, &[m as i64, k as i64], 5);
    let a_scale_value = match a {
        None => dynamic_quantize(&floats(m * k, 5)).1,
        Some(_) => 0.02,
    };
    let a_scale = match a {
        None => "x_scale".to_string(),
        Some(how) => g.given(how, "a_scale", F32, &[], f32_raw(&[a_scale_value])),
    };
    let w_bytes = bytes(k * n, 3);
    g.given(w, "w", I8, &[k as i64, n as i64], w_bytes.clone());
    let scales: Vec<f32> = (0..if per_column { n } else { 1 }).map(|j| 0.003 + j as f32 * 0.0007).collect();
    let dims: &[i64] = if per_column { &[n as i64] } else { &[] };
    g.given(w, "w_scale", F32, dims, f32_raw(&scales));
    g.given(w, "w_zp", I8, dims, vec![0; scales.len()]);
    g.given(Given::Constant, "y_scale", F32, &[], f32_raw(&[0.05]));
    g.given(Given::Constant, "y_zp", U8, &[], vec![120]);
    let inputs = [a_name.as_str(), &a_scale, &a_zp, "w", "w_scale", "w_zp", "y_scale", "y_zp"];
    let got = g.run(node("QLinearMatMul", "product", &inputs, &["y"]), U8, &[m as i64, n as i64]);
    let acc = integer_matmul(&a_bytes, za as i32, &w_bytes, true, 0, [m, k, n]);
    let scale = |i: usize| a_scale_value as f64 * scales[if per_column { i % n } else { 0 }] as f64 / 0.05;
    let want = requantize(&acc, scale, 120);
    let far = got.iter().zip(&want).filter(|(g, w)| g.abs_diff(**w) > 1).count();
    assert_eq!(far, 0, "A {a:?}, W {w:?}, per column {per_column}: {far} values off by more than one quantum");
}

#[test]
fn qlinear_matmul_inputs_given_every_way() {
    for a in [None, Some(Given::Input), Some(Given::Constant), Some(Given::Produced)] {
        for w in GIVEN {
            for per_column in [false, true] {
                check_qlinear_matmul(a, w, per_column);
            }
        }
    }
}
