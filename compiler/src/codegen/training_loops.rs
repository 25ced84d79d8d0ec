//! Portable optimizer steps (Adagrad, Momentum, Nesterov, Adam): one loop
//! over each optimized tensor, for portable mode, where
//! `onnxc_optimizer_step_{f32,f64}` are not linked.
//!
//! The rules are the kernel's (`runtime-support/src/generic/training.rs`):
//! the scalar factors derived from the learning rate `R` and the update
//! count `T` (Adagrad's decayed rate, Momentum's first-step beta, Adam's
//! bias-corrected rate, with `pow` from [`portable_math`]) in f64 before the
//! loop, rounded once to the tensor's type; the elementwise work in the
//! tensor's type (f32 or f64). Every input element is read before its
//! outputs are written, as each output may alias its own input.

use super::nest::Level;
use super::{portable_math, types, InstBuilder, IntCC, Lower, MemFlagsData, Type, Value};
use crate::ir::DType;
use onnxc_runtime::abi::training::{OptimizerParams, OPTIMIZER_ADAGRAD, OPTIMIZER_ADAM, OPTIMIZER_NESTEROV};

/// One optimized tensor's buffers: `X`, `G`, the states (Adam's second
/// unused otherwise), and the outputs `X'` and the new states.
pub struct StepBuffers {
    pub inputs: [Value; 4],
    pub outputs: [Value; 3],
}

/// An f64 constant of `ty` (f32 or f64), rounded once.
fn constant(cx: &mut Lower, ty: Type, v: f64) -> Value {
    if ty == types::F64 {
        cx.ins().f64const(v)
    } else {
        cx.ins().f32const(v as f32)
    }
}

/// An f64 value as `ty`.
fn rounded(cx: &mut Lower, ty: Type, v: Value) -> Value {
    if ty == types::F64 {
        v
    } else {
        cx.ins().fdemote(types::F32, v)
    }
}

/// The learning rate factor of every element, in f64: Adagrad's
/// `R / (1 + T decay)`, Adam's `R sqrt(1 - beta^T) / (1 - alpha^T)` for
/// `T > 0`, else `R`.
fn rate_factor(cx: &mut Lower, p: &OptimizerParams, r: Value, t: Value) -> Result<Value, String> {
    let steps = cx.ins().fcvt_from_sint(types::F64, t);
    let one = cx.ins().f64const(1.0);
    match p.kind {
        OPTIMIZER_ADAGRAD => {
            let decay = cx.ins().f64const(p.decay_factor);
            let decayed = cx.ins().fmul(steps, decay);
            let divisor = cx.ins().fadd(one, decayed);
            Ok(cx.ins().fdiv(r, divisor))
        }
        OPTIMIZER_ADAM => {
            let power = |cx: &mut Lower, base: f64| {
                let base = cx.ins().f64const(base);
                let raised = portable_math::apply_binary(cx.b, "pow", DType::F64, base, steps)
                    .ok_or("pow has no portable lowering")?;
                Ok::<_, String>(cx.ins().fsub(one, raised))
            };
            let (beta_part, alpha_part) = (power(cx, p.beta)?, power(cx, p.alpha)?);
            let root = cx.ins().sqrt(beta_part);
            let scaled = cx.ins().fmul(r, root);
            let corrected = cx.ins().fdiv(scaled, alpha_part);
            let started = cx.ins().icmp_imm_s(IntCC::SignedGreaterThan, t, 0);
            Ok(cx.ins().select(started, corrected, r))
        }
        _ => Ok(r),
    }
}

/// One optimizer step over the `len` elements of `dtype` of `buffers`,
/// with `R` (of `rate_dtype`) at `rate` and `T` at `count`.
pub fn optimizer_step(
    cx: &mut Lower,
    p: &OptimizerParams,
    dtype: DType,
    (rate_dtype, rate, count): (DType, Value, Value),
    buffers: &StepBuffers,
) -> Result<(), String> {
    let ty = match dtype {
        DType::F32 => types::F32,
        DType::F64 => types::F64,
        other => return Err(format!("an optimizer step of {other} has no portable lowering (f32 and f64 do)")),
    };
    let flags = MemFlagsData::trusted();
    let r = cx.ins().load(super::clif_type(rate_dtype), flags, rate, 0);
    let r = if rate_dtype == DType::F64 { r } else { cx.ins().fpromote(types::F64, r) };
    let t = cx.ins().load(types::I64, flags, count, 0);
    let factor = rate_factor(cx, p, r, t)?;
    let rate = rounded(cx, ty, factor);
    // Momentum's beta is 1 at the first step.
    let started = cx.ins().icmp_imm_s(IntCC::SignedGreaterThan, t, 0);
    let beta = constant(cx, ty, p.beta);
    let one = constant(cx, ty, 1.0);
    let momentum_beta = cx.ins().select(started, beta, one);
    let eb = dtype.size() as i64;
    let ptrs: Vec<Value> = buffers.inputs.iter().chain(&buffers.outputs).copied().collect();
    let all = [Level::new(p.len as usize, vec![eb; ptrs.len()])];
    let adam = p.kind == OPTIMIZER_ADAM;
    cx.nest(&all, &ptrs, &mut |cx, _, at| {
        let load = |cx: &mut Lower, i: usize| cx.ins().load(ty, flags, at[i], 0);
        let (x, g, s1) = (load(cx, 0), load(cx, 1), load(cx, 2));
        let s2 = if adam { Some(load(cx, 3)) } else { None };
        let norm = constant(cx, ty, p.norm_coefficient);
        let scaled = cx.ins().fmul(norm, x);
        let g = cx.ins().fadd(scaled, g);
        let [x_out, s1_out, s2_out] = [at[4], at[5], at[6]];
        match (p.kind, s2) {
            (OPTIMIZER_ADAGRAD, _) => {
                let square = cx.ins().fmul(g, g);
                let h = cx.ins().fadd(s1, square);
                cx.ins().store(flags, h, s1_out, 0);
                let step = cx.ins().fmul(rate, g);
                let root = cx.ins().sqrt(h);
                let epsilon = constant(cx, ty, p.epsilon);
                let divisor = cx.ins().fadd(root, epsilon);
                let step = cx.ins().fdiv(step, divisor);
                let x = cx.ins().fsub(x, step);
                cx.ins().store(flags, x, x_out, 0);
            }
            (_, Some(s2)) => {
                let v = blend(cx, ty, p.alpha, s1, (g, None));
                let h = blend(cx, ty, p.beta, s2, (g, Some(g)));
                cx.ins().store(flags, v, s1_out, 0);
                cx.ins().store(flags, h, s2_out, 0);
                let root = cx.ins().sqrt(h);
                let epsilon = constant(cx, ty, p.epsilon);
                let divisor = cx.ins().fadd(root, epsilon);
                let ratio = cx.ins().fdiv(v, divisor);
                let step = cx.ins().fmul(rate, ratio);
                let moved = cx.ins().fsub(x, step);
                let keep = constant(cx, ty, 1.0 - p.norm_coefficient_post);
                let x = cx.ins().fmul(keep, moved);
                cx.ins().store(flags, x, x_out, 0);
            }
            _ => {
                let alpha = constant(cx, ty, p.alpha);
                let kept = cx.ins().fmul(alpha, s1);
                let added = cx.ins().fmul(momentum_beta, g);
                let v = cx.ins().fadd(kept, added);
                cx.ins().store(flags, v, s1_out, 0);
                let direction = if p.kind == OPTIMIZER_NESTEROV {
                    let ahead = cx.ins().fmul(alpha, v);
                    cx.ins().fadd(g, ahead)
                } else {
                    v
                };
                let step = cx.ins().fmul(rate, direction);
                let x = cx.ins().fsub(x, step);
                cx.ins().store(flags, x, x_out, 0);
            }
        }
        Ok(())
    })
}

/// `a s + (1 - a) v` (or `(1 - a) v w` for a second factor `w`, in that
/// order) in `ty`, the constants rounded once: Adam's moments.
fn blend(cx: &mut Lower, ty: Type, a: f64, s: Value, (v, w): (Value, Option<Value>)) -> Value {
    let (keep, take) = (constant(cx, ty, a), constant(cx, ty, 1.0 - a));
    let kept = cx.ins().fmul(keep, s);
    let mut taken = cx.ins().fmul(take, v);
    if let Some(w) = w {
        taken = cx.ins().fmul(taken, w);
    }
    cx.ins().fadd(kept, taken)
}
