//! Arithmetic: Abs, Neg, Sqrt, Reciprocal, the roundings, Sign, the four
//! operations, Mod, the variadic Max/Min/Sum/Mean and Clip, on floats and
//! (where ONNX allows) integers. Integer division and remainder leave the
//! model with a status on a zero divisor instead of trapping.

use super::transcendental::{binary, libm};
use super::{fconst, Func, Operands};
use crate::codegen::{clif_type, FloatCC, InstBuilder, IntCC, Lower, Value};
use crate::ir::DType;

pub fn abs(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(match (o.dtype.is_float(), o.dtype.is_signed_int()) {
        (true, _) => cx.ins().fabs(o.x()),
        (_, true) => cx.ins().iabs(o.x()),
        _ => o.x(),
    })
}

pub fn neg(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(if o.dtype.is_float() { cx.ins().fneg(o.x()) } else { cx.ins().ineg(o.x()) })
}

pub fn sqrt(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().sqrt(o.x()))
}

pub fn reciprocal(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let one = fconst(cx, o.dtype, 1.0);
    Ok(cx.ins().fdiv(one, o.x()))
}

pub fn round(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().nearest(o.x()))
}

pub fn floor(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().floor(o.x()))
}

pub fn ceil(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().ceil(o.x()))
}

/// -1, 0 or 1 in the input's type; a float NaN stays NaN.
pub fn sign(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (t, x) = (o.dtype, o.x());
    if t.is_float() {
        let (zero, one, minus) = (fconst(cx, t, 0.0), fconst(cx, t, 1.0), fconst(cx, t, -1.0));
        let pos = cx.ins().fcmp(FloatCC::GreaterThan, x, zero);
        let neg = cx.ins().fcmp(FloatCC::LessThan, x, zero);
        let s = cx.ins().select(neg, minus, zero);
        let s = cx.ins().select(pos, one, s);
        let nan = cx.ins().fcmp(FloatCC::Unordered, x, x);
        return Ok(cx.ins().select(nan, x, s));
    }
    let signed = t.is_signed_int();
    let ty = clif_type(t);
    let (zero, one, minus) = (cx.ins().iconst(ty, 0), cx.ins().iconst(ty, 1), cx.ins().iconst(ty, -1));
    let pos = cx.ins().icmp_imm_u(if signed { IntCC::SignedGreaterThan } else { IntCC::UnsignedGreaterThan }, x, 0);
    let neg = cx.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
    let s = if signed { cx.ins().select(neg, minus, zero) } else { zero };
    Ok(cx.ins().select(pos, one, s))
}

pub fn add(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (x, y) = (o.x(), o.y()?);
    Ok(if o.dtype.is_float() { cx.ins().fadd(x, y) } else { cx.ins().iadd(x, y) })
}

pub fn sub(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (x, y) = (o.x(), o.y()?);
    Ok(if o.dtype.is_float() { cx.ins().fsub(x, y) } else { cx.ins().isub(x, y) })
}

pub fn mul(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (x, y) = (o.x(), o.y()?);
    Ok(if o.dtype.is_float() { cx.ins().fmul(x, y) } else { cx.ins().imul(x, y) })
}

/// Float division, or integer division truncating toward zero: a zero
/// divisor leaves the model with a status, and MIN / -1 wraps instead of
/// trapping.
pub fn div(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (x, y) = (o.x(), o.y()?);
    if o.dtype.is_float() {
        return Ok(cx.ins().fdiv(x, y));
    }
    let zero = cx.ins().icmp_imm_u(IntCC::Equal, y, 0);
    cx.fail_if(zero, crate::codegen::status::DIVISION_BY_ZERO);
    if !o.dtype.is_signed_int() {
        return Ok(cx.ins().udiv(x, y));
    }
    let ty = cx.b.func.dfg.value_type(y);
    let minus_one = cx.ins().icmp_imm_s(IntCC::Equal, y, -1);
    let one = cx.ins().iconst(ty, 1);
    let safe = cx.ins().select(minus_one, one, y);
    let q = cx.ins().sdiv(x, safe);
    let negated = cx.ins().ineg(x);
    Ok(cx.ins().select(minus_one, negated, q))
}

/// ONNX Mod: with `fmod` the remainder takes the dividend's sign (C fmod);
/// without it (integers only) the divisor's sign (Python `%`). An integer
/// zero divisor leaves the model with a status.
pub fn modulo(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::Mod { fmod } = func else { return Err(format!("{func:?} is not Mod")) };
    let (t, x, y) = (o.dtype, o.x(), o.y()?);
    if t.is_float() {
        let r = binary(cx, libm::fmod, t, x, y)?;
        return Ok(if fmod { r } else { with_divisor_sign(cx, t, r, y) });
    }
    let zero = cx.ins().icmp_imm_u(IntCC::Equal, y, 0);
    cx.fail_if(zero, crate::codegen::status::DIVISION_BY_ZERO);
    if !t.is_signed_int() {
        return Ok(cx.ins().urem(x, y));
    }
    // srem traps on MIN % -1, whose remainder is 0 anyway.
    let ty = clif_type(t);
    let minus_one = cx.ins().icmp_imm_s(IntCC::Equal, y, -1);
    let one = cx.ins().iconst(ty, 1);
    let safe = cx.ins().select(minus_one, one, y);
    let r = cx.ins().srem(x, safe);
    if fmod {
        return Ok(r);
    }
    // Python: if r != 0 and sign(r) != sign(y): r += y
    let r_nonzero = cx.ins().icmp_imm_u(IntCC::NotEqual, r, 0);
    let signs = cx.ins().bxor(r, y);
    let differ = cx.ins().icmp_imm_s(IntCC::SignedLessThan, signs, 0);
    let fix = cx.ins().band(r_nonzero, differ);
    let adjusted = cx.ins().iadd(r, safe);
    Ok(cx.ins().select(fix, adjusted, r))
}

/// A float remainder `r` of a division by `y` moved to `y`'s sign, as
/// Python's `%` gives it: a nonzero remainder of the other sign gains `y`.
fn with_divisor_sign(cx: &mut Lower, t: DType, r: Value, y: Value) -> Value {
    let zero = fconst(cx, t, 0.0);
    let r_neg = cx.ins().fcmp(FloatCC::LessThan, r, zero);
    let y_neg = cx.ins().fcmp(FloatCC::LessThan, y, zero);
    let r_nonzero = cx.ins().fcmp(FloatCC::NotEqual, r, zero);
    let differ = cx.ins().bxor(r_neg, y_neg);
    let fix = cx.ins().band(differ, r_nonzero);
    let adjusted = cx.ins().fadd(r, y);
    cx.ins().select(fix, adjusted, r)
}

/// Max, Min, Sum and Mean of any number of operands, folded left to right.
pub fn variadic(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let (float, signed) = (o.dtype.is_float(), o.dtype.is_signed_int());
    let mut acc = o.x();
    for &(v, _) in &o.args[1..] {
        acc = match (func, float) {
            (Func::Max, true) => cx.ins().fmax(acc, v),
            (Func::Min, true) => cx.ins().fmin(acc, v),
            (Func::Max, false) if signed => cx.ins().smax(acc, v),
            (Func::Max, false) => cx.ins().umax(acc, v),
            (Func::Min, false) if signed => cx.ins().smin(acc, v),
            (Func::Min, false) => cx.ins().umin(acc, v),
            (_, true) => cx.ins().fadd(acc, v),
            (_, false) => cx.ins().iadd(acc, v),
        };
    }
    if func == Func::Mean {
        let n = fconst(cx, o.dtype, o.args.len() as f64);
        acc = cx.ins().fdiv(acc, n);
    }
    Ok(acc)
}

/// Clip between its present bounds (input 1 the lower, input 2 the upper).
pub fn clip(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (float, signed) = (o.dtype.is_float(), o.dtype.is_signed_int());
    let mut v = o.x();
    for (&input, &(bound, _)) in o.present.iter().zip(o.args).skip(1) {
        let lower = input == 1;
        v = match (lower, float) {
            (true, true) => cx.ins().fmax(v, bound),
            (false, true) => cx.ins().fmin(v, bound),
            (true, false) if signed => cx.ins().smax(v, bound),
            (true, false) => cx.ins().umax(v, bound),
            (false, false) if signed => cx.ins().smin(v, bound),
            (false, false) => cx.ins().umin(v, bound),
        };
    }
    Ok(v)
}
