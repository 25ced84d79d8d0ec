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
//!
//! Portable mode writes the same two steps as loops: the log-softmax of
//! [`super::softmax::lower_softmax_portable`], then [`lower_nll_portable`],
//! which checks every target before it writes anything.

use super::elementwise::compute_type;
use super::softmax::{float_const, lower_softmax_portable};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{clif_type, status, types, InstBuilder, IntCC, Level, Lower, MemFlagsData, Value};
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
            if cx.portable() {
                lower_softmax_portable(cx, true, dtype, [n, c, d], [x, log_prob])?;
                x = log_prob;
            }
        }
        if cx.portable() {
            return self.lower_nll_portable(cx, dtype, target_type, [n, c, d], x);
        }
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

impl Loss {
    /// Portable NegativeLogLikelihoodLoss of the `[n, c, d]` log-probabilities
    /// at `x`: a first pass stops the model on a target outside `[0, c)`
    /// that is not ignored, a second folds the kernel's sums (in f64, each
    /// term `-w[t] * x[t]` rounded in `dtype` first) or writes each term.
    fn lower_nll_portable(
        &self,
        cx: &mut Lower,
        dtype: DType,
        target_type: DType,
        [n, c, d]: [usize; 3],
        x: Value,
    ) -> Result<(), String> {
        let (ty, size) = (clif_type(dtype), dtype.size() as i64);
        let (target_size, flags) = (target_type.size() as i64, MemFlagsData::trusted());
        let target = cx.input_ptr(1)?;
        let weight = if cx.has_input(2) { Some(cx.input_ptr(2)?) } else { None };
        let loss = cx.output_ptr(0)?;
        let none = self.reduction == REDUCTION_NONE;
        let loss_step = if none { size } else { 0 };
        let cd = (c * d) as i64;
        let levels = [
            Level::new(n, vec![target_size * d as i64, cd * size, loss_step * d as i64]),
            Level::new(d, vec![target_size, size, loss_step]),
        ];
        let load_target = |cx: &mut Lower, at: Value| {
            let t = cx.ins().load(clif_type(target_type), flags, at, 0);
            if target_type == DType::I32 {
                cx.ins().sextend(types::I64, t)
            } else {
                t
            }
        };
        let ignored = |cx: &mut Lower, t: Value| match self.ignore_index {
            Some(ignore) => cx.ins().icmp_imm_s(IntCC::Equal, t, ignore),
            None => cx.ins().iconst(types::I8, 0),
        };
        cx.nest(&levels, &[target], &mut |cx, _, at| {
            let t = load_target(cx, at[0]);
            let outside = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, t, c as i64);
            let kept = ignored(cx, t);
            let kept = cx.ins().bxor_imm_u(kept, 1);
            let bad = cx.ins().band(outside, kept);
            cx.fail_if(bad, status::INDEX_OUT_OF_RANGE);
            Ok(())
        })?;
        let zero = cx.ins().f64const(0.0);
        let sums = cx.fold_nest(&levels, &[target, x, loss], &[zero, zero], &mut |cx, _, at, acc| {
            let t = load_target(cx, at[0]);
            let skip = ignored(cx, t);
            // An ignored target reads class 0 (always there) and counts 0.
            let first = cx.ins().iconst(types::I64, 0);
            let class = cx.ins().select(skip, first, t);
            let offset = cx.ins().imul_imm_s(class, d as i64 * size);
            let at_x = cx.ins().iadd(at[1], offset);
            let log_prob = cx.ins().load(ty, flags, at_x, 0);
            let w = match weight {
                Some(weight) => {
                    let offset = cx.ins().imul_imm_s(class, size);
                    let at_w = cx.ins().iadd(weight, offset);
                    cx.ins().load(ty, flags, at_w, 0)
                }
                None => float_const(cx, dtype, 1.0),
            };
            let zero_w = float_const(cx, dtype, 0.0);
            let w = cx.ins().select(skip, zero_w, w);
            let product = cx.ins().fmul(log_prob, w);
            let term = cx.ins().fneg(product);
            let term = cx.ins().select(skip, zero_w, term);
            if none {
                cx.ins().store(flags, term, at[2], 0);
                return Ok(acc.to_vec());
            }
            let to_f64 = |cx: &mut Lower, v| if dtype == DType::F64 { v } else { cx.ins().fpromote(types::F64, v) };
            let (term, w) = (to_f64(cx, term), to_f64(cx, w));
            Ok(vec![cx.ins().fadd(acc[0], term), cx.ins().fadd(acc[1], w)])
        })?;
        if !none {
            let total = if self.reduction == REDUCTION_MEAN { cx.ins().fdiv(sums[0], sums[1]) } else { sums[0] };
            let total = if dtype == DType::F64 { total } else { cx.ins().fdemote(ty, total) };
            cx.ins().store(flags, total, loss, 0);
        }
        Ok(())
    }
}
