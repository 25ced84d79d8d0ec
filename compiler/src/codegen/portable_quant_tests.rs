//! The portable lowerings of `quant_loops` (QuantizeLinear,
//! DequantizeLinear) and of the losses against the kernels they replace,
//! with `portable_loops_tests`' helpers: one-node graphs run through the
//! JIT with and without the kernel library. Quantized codes must be the
//! same bytes (packed and float8 types included: the element rules are
//! exact); dequantized and loss values agree within the conformance
//! tolerance; a bad target stops both with the same status.

use super::portable_loops_tests::{both, data, one_node, value};
use crate::ir::{DType, Graph, Tensor, ValueDef};
use crate::ops::loss::{Loss, LossKind};
use crate::ops::quant::Linear;
use crate::ops::Op;
use crate::passes::test_graph::{assert_all_close, floats};
use onnxc_runtime::abi::loss::REDUCTION_MEAN;

/// `QuantizeLinear(x [4, 6], scale, zero point)` to `to` per tensor, per
/// axis 1, or in blocks of 4 along axis 1, with the scales `scale_shape`.
fn quantize_graph(to: DType, scale_shape: &[usize], block_size: i64) -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, &[4, 6], ValueDef::Input(0));
    let s = value(&mut g, "s", DType::F32, scale_shape, ValueDef::Input(1));
    let z = value(&mut g, "z", to, scale_shape, ValueDef::Input(2));
    let y = value(&mut g, "y", to, &[4, 6], ValueDef::Computed);
    let op = Linear { quantize: true, axis: 1, block_size, output_dtype: None, saturate: true };
    one_node(&mut g, Op::Linear(op), vec![Some(x), Some(s), Some(z)], y);
    g
}

/// A tensor of `dtype` (any width, packed too) holding the raw codes `codes`.
fn codes(dtype: DType, shape: &[usize], codes: impl Fn(usize) -> u8) -> Tensor {
    let n: usize = shape.iter().product();
    let bytes = dtype.bytes_for(n).expect("small");
    let per_byte = 8 / dtype.bits().min(8);
    let data = (0..bytes)
        .map(|b| {
            if per_byte == 1 {
                return codes(b);
            }
            let bits = dtype.bits();
            (0..per_byte)
                .filter(|j| b * per_byte + j < n)
                .fold(0u8, |byte, j| byte | (codes(b * per_byte + j) & ((1 << bits) - 1) as u8) << (j * bits))
        })
        .collect();
    Tensor::from_bytes(dtype, shape.to_vec(), data).expect("tensor")
}

#[test]
fn quantize_linear_gives_the_kernels_codes() {
    let types = [DType::U8, DType::I8, DType::I16, DType::I4, DType::U2, DType::F8E4M3FN, DType::F8E5M2FNUZ];
    let layouts: [(&[usize], i64); 3] = [(&[], 0), (&[6], 0), (&[4, 2], 4)];
    for to in types {
        for (scale_shape, block) in layouts {
            let g = quantize_graph(to, scale_shape, block);
            let scales: Vec<f32> = (0..scale_shape.iter().product()).map(|k| 0.05 + 0.37 * k as f32).collect();
            let zero = codes(to, scale_shape, |k| (k * 3 + 1) as u8 & 0x31);
            let inputs = [data(&[4, 6]), Tensor::from_f32s(scale_shape.to_vec(), &scales), zero];
            let [kernel, portable] = both(&g, &inputs);
            let context = format!("{to} scales {scale_shape:?} block {block}");
            assert_eq!(portable.expect(&context), kernel.expect(&context), "{context}");
        }
    }
}

#[test]
fn dequantize_linear_matches_the_kernel() {
    for from in [DType::U8, DType::I4, DType::I2, DType::F8E4M3FN, DType::F8E5M2, DType::F4E2M1] {
        let mut g = Graph::default();
        let x = value(&mut g, "x", from, &[3, 5], ValueDef::Input(0));
        let s = value(&mut g, "s", DType::F32, &[5], ValueDef::Input(1));
        let z = value(&mut g, "z", from, &[5], ValueDef::Input(2));
        let y = value(&mut g, "y", DType::F32, &[3, 5], ValueDef::Computed);
        let op = Linear { quantize: false, axis: 1, block_size: 0, output_dtype: None, saturate: true };
        one_node(&mut g, Op::Linear(op), vec![Some(x), Some(s), Some(z)], y);
        let scales: Vec<f32> = (0..5).map(|k| 0.5 - 0.21 * k as f32).collect();
        let inputs = [
            codes(from, &[3, 5], |k| (k * 37 + 11) as u8),
            Tensor::from_f32s(vec![5], &scales),
            codes(from, &[5], |k| k as u8),
        ];
        let [kernel, portable] = both(&g, &inputs);
        let (kernel, portable) = (kernel.expect("kernel"), portable.expect("portable"));
        assert_all_close(&floats(&portable), &floats(&kernel), 1e-6, &format!("{from}"));
    }
}

/// `NegativeLogLikelihoodLoss` or `SoftmaxCrossEntropyLoss` of `[3, 4, 2]`
/// scores and the targets `targets` (`[3, 2]`), class 2 ignored.
fn loss_graph(kind: LossKind) -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, &[3, 4, 2], ValueDef::Input(0));
    let t = value(&mut g, "t", DType::I64, &[3, 2], ValueDef::Input(1));
    let w = value(&mut g, "w", DType::F32, &[4], ValueDef::Input(2));
    let y = value(&mut g, "y", DType::F32, &[], ValueDef::Computed);
    let op = Loss { kind, reduction: REDUCTION_MEAN, ignore_index: Some(2) };
    one_node(&mut g, Op::Loss(op), vec![Some(x), Some(t), Some(w)], y);
    g
}

#[test]
fn losses_match_the_kernel_and_refuse_the_same_targets() {
    for kind in [LossKind::NegativeLogLikelihood, LossKind::SoftmaxCrossEntropy] {
        let g = loss_graph(kind);
        let weights = Tensor::from_f32s(vec![4], &[0.5, 1.5, 2.0, 0.75]);
        let good = Tensor::from_i64s(vec![3, 2], &[0, 3, 2, 1, 3, 2]);
        let [kernel, portable] = both(&g, &[data(&[3, 4, 2]), good, weights.clone()]);
        let (kernel, portable) = (kernel.expect("kernel"), portable.expect("portable"));
        assert_all_close(&floats(&portable), &floats(&kernel), 1e-5, &format!("{kind:?}"));
        for bad in [4, -1] {
            let targets = Tensor::from_i64s(vec![3, 2], &[0, 3, bad, 1, 3, 2]);
            let [kernel, portable] = both(&g, &[data(&[3, 4, 2]), targets, weights.clone()]);
            let kernel = kernel.expect_err("the kernel refuses the target");
            assert_eq!(portable.expect_err("portable code refuses the target"), kernel, "{kind:?} target {bad}");
        }
    }
}
