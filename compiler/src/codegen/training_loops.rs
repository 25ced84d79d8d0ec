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
//!
//! Dropout in training mode ([`dropout`]) is `onnxc_dropout`'s: the ratio
//! (0 outside training) checked to lie in `[0, 1)`, then element `i` kept
//! when the ratio is 0 or the kernel's SplitMix64 stream gives `u_i >=
//! ratio`, `y = x · keep / (1 - ratio)` in f64, rounded to the type.

use super::nest::Level;
use super::{half_floats, portable_math, status, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Type, Value};
use crate::ir::DType;
use onnxc_runtime::abi::random::DropoutParams;
use onnxc_runtime::abi::training::{OptimizerParams, OPTIMIZER_ADAGRAD, OPTIMIZER_ADAM, OPTIMIZER_NESTEROV};
use onnxc_runtime::generic::random::GOLDEN;

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

/// A float element of `dtype` at `at`, widened to f64 as the kernels'
/// `load_float` does (16-bit floats through f32).
fn load_float(cx: &mut Lower, dtype: DType, at: Value) -> Result<Value, String> {
    let flags = MemFlagsData::trusted();
    let v = match dtype {
        DType::F64 => return Ok(cx.ins().load(types::F64, flags, at, 0)),
        DType::F32 => cx.ins().load(types::F32, flags, at, 0),
        DType::F16 | DType::BF16 => {
            let bits = cx.ins().uload16(types::I32, flags, at, 0);
            half_floats::widen(cx.b, dtype, bits)
        }
        other => return Err(format!("Dropout of {other} has no portable lowering")),
    };
    Ok(cx.ins().fpromote(types::F64, v))
}

/// Stores the f64 `v` as `dtype` at `at`, as the kernels' `store_float`
/// does (16-bit floats through f32).
fn store_float(cx: &mut Lower, dtype: DType, v: Value, at: Value) {
    let flags = MemFlagsData::trusted();
    if dtype == DType::F64 {
        cx.ins().store(flags, v, at, 0);
        return;
    }
    let single = cx.ins().fdemote(types::F32, v);
    if dtype == DType::F32 {
        cx.ins().store(flags, single, at, 0);
    } else {
        let bits = half_floats::narrow(cx.b, dtype, single);
        cx.ins().istore16(flags, bits, at, 0);
    }
}

/// The kernel's SplitMix64 output function of the i64 `z`.
fn mix(cx: &mut Lower, z: Value) -> Value {
    let mut z = z;
    for (shift, multiplier) in [(30, 0xbf58_476d_1ce4_e5b9u64), (27, 0x94d0_49bb_1331_11eb)] {
        let high = cx.ins().ushr_imm_u(z, shift);
        let mixed = cx.ins().bxor(z, high);
        z = cx.ins().imul_imm_s(mixed, multiplier as i64);
    }
    let high = cx.ins().ushr_imm_u(z, 31);
    cx.ins().bxor(z, high)
}

/// Element `i` (pointer-sized) of the stream `key`, uniform on `[0, 1)`.
fn uniform(cx: &mut Lower, key: i64, i: Value) -> Value {
    let i = super::gather_loops::widened(cx, i);
    let next = cx.ins().iadd_imm_s(i, 1);
    let step = cx.ins().imul_imm_s(next, GOLDEN as i64);
    let z = cx.ins().iadd_imm_s(step, key);
    let bits = mix(cx, z);
    let top = cx.ins().ushr_imm_u(bits, 11);
    let v = cx.ins().fcvt_from_uint(types::F64, top);
    let unit = cx.ins().f64const(1.0 / (1u64 << 53) as f64);
    cx.ins().fmul(v, unit)
}

/// Dropout's run-time operands: `x` and `y` of `dtype`, the optional ratio
/// (and its type), the bool training flag, and the optional mask.
pub struct DropoutTensors {
    pub dtype: DType,
    pub x: Value,
    pub ratio: Option<(Value, DType)>,
    pub training: Value,
    pub y: Value,
    pub mask: Option<Value>,
}

/// Training-mode Dropout of the `p.count` elements (see the module doc);
/// a ratio outside `[0, 1)` leaves with [`status::INVALID_PARAMS`].
pub fn dropout(cx: &mut Lower, p: &DropoutParams, t: &DropoutTensors) -> Result<(), String> {
    let flags = MemFlagsData::trusted();
    let flag = cx.ins().uload8(types::I32, flags, t.training, 0);
    let training = cx.ins().icmp_imm_u(IntCC::NotEqual, flag, 0);
    let given = match t.ratio {
        Some((at, dtype)) => load_float(cx, dtype, at)?,
        None => cx.ins().f64const(p.ratio),
    };
    let (zero, one) = (cx.ins().f64const(0.0), cx.ins().f64const(1.0));
    let r = cx.ins().select(training, given, zero);
    let low = cx.ins().fcmp(FloatCC::GreaterThanOrEqual, r, zero);
    let high = cx.ins().fcmp(FloatCC::LessThan, r, one);
    let inside = cx.ins().band(low, high);
    let outside = cx.ins().icmp_imm_u(IntCC::Equal, inside, 0);
    cx.fail_if(outside, status::INVALID_PARAMS);
    let keep_all = cx.ins().fcmp(FloatCC::Equal, r, zero);
    let divisor = cx.ins().fsub(one, r);
    let eb = t.dtype.size() as i64;
    let mask_step = if t.mask.is_some() { 1 } else { 0 };
    let none = cx.iconst(0);
    let every = [Level::new(p.count.max(0) as usize, vec![eb, eb, mask_step])];
    cx.nest(&every, &[t.x, t.y, t.mask.unwrap_or(none)], &mut |cx, i, at| {
        let u = uniform(cx, p.key, i[0]);
        let drawn = cx.ins().fcmp(FloatCC::GreaterThanOrEqual, u, r);
        let keep = cx.ins().bor(keep_all, drawn);
        let v = load_float(cx, t.dtype, at[0])?;
        let (kept, dropped) = (cx.ins().f64const(1.0), cx.ins().f64const(0.0));
        let factor = cx.ins().select(keep, kept, dropped);
        let v = cx.ins().fmul(v, factor);
        let v = cx.ins().fdiv(v, divisor);
        store_float(cx, t.dtype, v, at[1]);
        if t.mask.is_some() {
            cx.ins().store(flags, keep, at[2], 0);
        }
        Ok(())
    })
}
