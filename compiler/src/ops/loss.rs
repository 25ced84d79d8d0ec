//! Loss functions: NegativeLogLikelihoodLoss (opsets 12, 13, 22) and
//! SoftmaxCrossEntropyLoss (opsets 12, 13).
//!
//! Type constraints: `T` (input, weight, outputs) is a float type, `Tind`
//! (target) is i32 or i64. onnxc compiles f32 and f64 `T`, and f16/bf16 on
//! staged f32 copies ([`crate::codegen::staging`]). The input is `[N, C, d1..dk]`, the target
//! `[N, d1..dk]`, the optional weight `[C]`; the loss is the target's shape
//! (`reduction = "none"`) or a scalar (`"sum"`, `"mean"`, the default).
//! SoftmaxCrossEntropyLoss has an optional second output, the log-softmax of
//! the input along C.
//!
//! The opset versions differ only in the types they admit, so the importer
//! reads the same attributes (`reduction`, `ignore_index`) for all of them.
//! Both operators lower to the kernel `onnxc_nll_loss_{f32,f64}` over the
//! `[N, C, D]` view of the input (`D = d1 * .. * dk`); SoftmaxCrossEntropyLoss
//! first writes the log-softmax (`onnxc_softmax_*`) into its second output
//! or, when that is absent, into scratch. A target outside `[0, C)` that is
//! not `ignore_index` stops the model with `INDEX_OUT_OF_RANGE`.

use super::elementwise::compute_type;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::Lower;
use crate::import::NodeImport;
use crate::ir::DType;
use onnxc_runtime::abi::loss::{NllLossParams, REDUCTION_MEAN, REDUCTION_NONE, REDUCTION_SUM};
use onnxc_runtime::abi::softmax::{SoftmaxParams, LOG_SOFTMAX};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossKind {
    NegativeLogLikelihood,
    SoftmaxCrossEntropy,
}

#[derive(Clone, Debug)]
pub struct Loss {
    pub kind: LossKind,
    /// `REDUCTION_NONE`, `REDUCTION_SUM` or `REDUCTION_MEAN`.
    pub reduction: i64,
    pub ignore_index: Option<i64>,
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let kind = match cx.op_type {
        "NegativeLogLikelihoodLoss" => LossKind::NegativeLogLikelihood,
        "SoftmaxCrossEntropyLoss" => LossKind::SoftmaxCrossEntropy,
        other => return Err(format!("{other} is not a loss operator")),
    };
    let reduction = match cx.attrs.string_or("reduction", "mean")?.as_str() {
        "none" => REDUCTION_NONE,
        "sum" => REDUCTION_SUM,
        "mean" => REDUCTION_MEAN,
        other => return Err(format!("attribute \"reduction\" is \"{other}\", expected none, sum or mean")),
    };
    let ignore_index = cx.attrs.int("ignore_index")?;
    Ok(Op::Loss(Loss { kind, reduction, ignore_index }))
}

/// `(N, C, D)` of the input after checking the target and weight against it.
fn dims(x: &[usize], target: &[usize], weight: Option<&[usize]>) -> Result<(usize, usize, usize), String> {
    let [n, c, rest @ ..] = x else {
        return Err(format!("input 0 has rank {}, expected at least 2 ([N, C, ...])", x.len()));
    };
    let want: Vec<usize> = std::iter::once(*n).chain(rest.iter().copied()).collect();
    if target != want.as_slice() {
        return Err(format!("input 1 (target) has shape {target:?}, expected {want:?} (input 0 without dim 1)"));
    }
    if let Some(w) = weight {
        if w != [*c] {
            return Err(format!("input 2 (weight) has shape {w:?}, expected [{c}]"));
        }
    }
    Ok((*n, *c, rest.iter().product()))
}

impl Operator for Loss {
    fn name(&self) -> &'static str {
        match self.kind {
            LossKind::NegativeLogLikelihood => "NegativeLogLikelihoodLoss",
            LossKind::SoftmaxCrossEntropy => "SoftmaxCrossEntropyLoss",
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        let target = cx.input(1)?;
        let weight = cx.opt_input(2);
        if !x.dtype.is_float() {
            return Err(format!("input 0 is {}, expected a float type", x.dtype));
        }
        if !matches!(target.dtype, DType::I32 | DType::I64) {
            return Err(format!("input 1 (target) is {}, expected i32 or i64", target.dtype));
        }
        if let Some(w) = weight {
            if w.dtype != x.dtype {
                return Err(format!("input 2 (weight) is {}, expected {} like input 0", w.dtype, x.dtype));
            }
        }
        dims(x.shape, target.shape, weight.map(|w| w.shape))?;
        let loss_shape = if self.reduction == REDUCTION_NONE { target.shape.to_vec() } else { vec![] };
        let mut out = vec![Inferred::new(x.dtype, loss_shape)];
        if self.kind == LossKind::SoftmaxCrossEntropy && cx.output_count > 1 {
            out.push(Inferred::new(x.dtype, x.shape.to_vec()));
        }
        Ok(out)
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        match (self.kind, cx.input(0)) {
            (LossKind::SoftmaxCrossEntropy, Ok(x)) => x.shape.iter().product::<usize>() * compute_type(x.dtype).size(),
            _ => 0,
        }
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, x_shape) = cx.input_type(0)?;
        let (target_type, target_shape) = cx.input_type(1)?;
        let weight_shape = if cx.has_input(2) { Some(cx.input_type(2)?.1) } else { None };
        let (n, c, d) = dims(&x_shape, &target_shape, weight_shape.as_deref())?;
        let mut x = cx.input_ptr(0)?;
        if self.kind == LossKind::SoftmaxCrossEntropy {
            let log_prob = if cx.has_output(1) { cx.output_ptr(1)? } else { cx.scratch_ptr()? };
            let p = SoftmaxParams { outer: n as i64, axis_len: c as i64, inner: d as i64, kind: LOG_SOFTMAX };
            let params = cx.params(&p)?;
            cx.call_checked(
                kernels::by_dtype(kernels::onnxc_softmax_f32, kernels::onnxc_softmax_f64, dtype),
                (params, Ptr(x), Ptr(log_prob)),
            )?;
            x = log_prob;
        }
        let p = NllLossParams {
            n: n as i64,
            c: c as i64,
            d: d as i64,
            reduction: self.reduction,
            has_ignore: self.ignore_index.is_some() as i64,
            ignore_index: self.ignore_index.unwrap_or(0),
            target_i32: (target_type == DType::I32) as i64,
        };
        let params = cx.params(&p)?;
        let target = cx.input_ptr(1)?;
        let weight = cx.opt_input_ptr(2);
        let loss = cx.output_ptr(0)?;
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_nll_loss_f32, kernels::onnxc_nll_loss_f64, dtype),
            (params, Ptr(x), Ptr(target), Ptr(weight), Ptr(loss)),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}
