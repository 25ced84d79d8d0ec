//! Activations: the rectifiers (Relu, LeakyRelu, PRelu, ThresholdedRelu),
//! the exponential units (Elu, Selu, Celu), the sigmoids (Sigmoid,
//! HardSigmoid, Swish, HardSwish, Softsign), Shrink and Binarizer. The ones
//! marked lane-safe in the table are written with [`fconst_like`] and
//! [`choose`] so that the same code computes f32 lanes.

use super::cast::cast;
use super::transcendental::{libm, unary};
use super::{fconst, fconst_like, Func, Operands};
use crate::codegen::{clif_type, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;

/// max(x, 0); unsigned integers are returned as they are.
pub fn relu(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (t, x) = (o.dtype, o.x());
    if t.is_float() {
        let zero = fconst_like(cx, x, 0.0);
        return Ok(cx.ins().fmax(x, zero));
    }
    let zero = cx.ins().iconst(clif_type(t), 0);
    Ok(if t.is_signed_int() { cx.ins().smax(x, zero) } else { x })
}

pub fn leaky_relu(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::LeakyRelu { alpha } = func else { return Err(format!("{func:?} is not LeakyRelu")) };
    let x = o.x();
    let a = fconst_like(cx, x, alpha as f64);
    let scaled = cx.ins().fmul(x, a);
    let zero = fconst_like(cx, x, 0.0);
    let neg = cx.ins().fcmp(FloatCC::LessThan, x, zero);
    Ok(choose(cx, neg, scaled, x))
}

/// x below zero times the slope (the second operand); unsigned integers
/// are returned as they are.
pub fn prelu(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (t, x, slope) = (o.dtype, o.x(), o.y()?);
    if t.is_float() {
        let scaled = cx.ins().fmul(x, slope);
        let zero = fconst(cx, t, 0.0);
        let neg = cx.ins().fcmp(FloatCC::LessThan, x, zero);
        return Ok(cx.ins().select(neg, scaled, x));
    }
    let scaled = cx.ins().imul(x, slope);
    let neg = cx.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
    Ok(if t.is_signed_int() { cx.ins().select(neg, scaled, x) } else { x })
}

pub fn thresholded_relu(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::ThresholdedRelu { alpha } = func else { return Err(format!("{func:?} is not ThresholdedRelu")) };
    let (t, x) = (o.dtype, o.x());
    let (a, zero) = (fconst(cx, t, alpha as f64), fconst(cx, t, 0.0));
    let above = cx.ins().fcmp(FloatCC::GreaterThan, x, a);
    Ok(cx.ins().select(above, x, zero))
}

/// x < 0 ? alpha (exp(x) - 1) : x.
pub fn elu(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::Elu { alpha } = func else { return Err(format!("{func:?} is not Elu")) };
    let (t, x) = (o.dtype, o.x());
    let e = unary(cx, libm::expm1, t, x)?;
    let a = fconst(cx, t, alpha as f64);
    let scaled = cx.ins().fmul(e, a);
    let zero = fconst(cx, t, 0.0);
    let neg = cx.ins().fcmp(FloatCC::LessThan, x, zero);
    Ok(cx.ins().select(neg, scaled, x))
}

/// gamma (x > 0 ? x : alpha (exp(x) - 1)).
pub fn selu(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::Selu { alpha, gamma } = func else { return Err(format!("{func:?} is not Selu")) };
    let (t, x) = (o.dtype, o.x());
    let e = unary(cx, libm::expm1, t, x)?;
    let (a, g, zero) = (fconst(cx, t, alpha as f64), fconst(cx, t, gamma as f64), fconst(cx, t, 0.0));
    let neg = cx.ins().fmul(e, a);
    let pos = cx.ins().fcmp(FloatCC::GreaterThan, x, zero);
    let v = cx.ins().select(pos, x, neg);
    Ok(cx.ins().fmul(v, g))
}

/// max(0, x) + min(0, alpha (exp(x / alpha) - 1)).
pub fn celu(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::Celu { alpha } = func else { return Err(format!("{func:?} is not Celu")) };
    let (t, x) = (o.dtype, o.x());
    let (a, zero) = (fconst(cx, t, alpha as f64), fconst(cx, t, 0.0));
    let scaled = cx.ins().fdiv(x, a);
    let e = unary(cx, libm::expm1, t, scaled)?;
    let neg = cx.ins().fmul(e, a);
    let neg = cx.ins().fmin(neg, zero);
    let pos = cx.ins().fmax(x, zero);
    Ok(cx.ins().fadd(pos, neg))
}

/// 1 / (1 + exp(-x)).
pub fn sigmoid(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (t, x) = (o.dtype, o.x());
    let neg = cx.ins().fneg(x);
    let e = unary(cx, libm::exp, t, neg)?;
    let one = fconst(cx, t, 1.0);
    let d = cx.ins().fadd(one, e);
    Ok(cx.ins().fdiv(one, d))
}

/// clamp(alpha x + beta, 0, 1).
pub fn hard_sigmoid(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::HardSigmoid { alpha, beta } = func else { return Err(format!("{func:?} is not HardSigmoid")) };
    let x = o.x();
    let (a, b) = (fconst_like(cx, x, alpha as f64), fconst_like(cx, x, beta as f64));
    let v = cx.ins().fmul(x, a);
    let v = cx.ins().fadd(v, b);
    Ok(clamp01(cx, v))
}

/// x / (1 + exp(-alpha x)).
pub fn swish(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::Swish { alpha } = func else { return Err(format!("{func:?} is not Swish")) };
    let (t, x) = (o.dtype, o.x());
    let a = fconst(cx, t, alpha as f64);
    let ax = cx.ins().fmul(x, a);
    let neg = cx.ins().fneg(ax);
    let e = unary(cx, libm::exp, t, neg)?;
    let one = fconst(cx, t, 1.0);
    let d = cx.ins().fadd(one, e);
    Ok(cx.ins().fdiv(x, d))
}

/// x clamp(x / 6 + 1/2, 0, 1).
pub fn hard_swish(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let x = o.x();
    let (a, b) = (fconst_like(cx, x, 1.0 / 6.0), fconst_like(cx, x, 0.5));
    let v = cx.ins().fmul(x, a);
    let v = cx.ins().fadd(v, b);
    let v = clamp01(cx, v);
    Ok(cx.ins().fmul(x, v))
}

/// x / (1 + |x|).
pub fn softsign(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (t, x) = (o.dtype, o.x());
    let one = fconst(cx, t, 1.0);
    let ax = cx.ins().fabs(x);
    let d = cx.ins().fadd(one, ax);
    Ok(cx.ins().fdiv(x, d))
}

/// x < -lambd ? x + bias : x > lambd ? x - bias : 0, in the input's type.
pub fn shrink(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::Shrink { lambd, bias } = func else { return Err(format!("{func:?} is not Shrink")) };
    let (t, x) = (o.dtype, o.x());
    let as_t = |cx: &mut Lower, v: f64| -> Result<Value, String> {
        let f = fconst(cx, DType::F64, v);
        cast(cx, f, DType::F64, t)
    };
    let (lo, hi, b) = (as_t(cx, -(lambd as f64))?, as_t(cx, lambd as f64)?, as_t(cx, bias as f64)?);
    let zero = as_t(cx, 0.0)?;
    let (below, above, plus, minus) = if t.is_float() {
        (
            cx.ins().fcmp(FloatCC::LessThan, x, lo),
            cx.ins().fcmp(FloatCC::GreaterThan, x, hi),
            cx.ins().fadd(x, b),
            cx.ins().fsub(x, b),
        )
    } else {
        let (lt, gt) = if t.is_signed_int() {
            (IntCC::SignedLessThan, IntCC::SignedGreaterThan)
        } else {
            (IntCC::UnsignedLessThan, IntCC::UnsignedGreaterThan)
        };
        (cx.ins().icmp(lt, x, lo), cx.ins().icmp(gt, x, hi), cx.ins().iadd(x, b), cx.ins().isub(x, b))
    };
    let v = cx.ins().select(above, minus, zero);
    Ok(cx.ins().select(below, plus, v))
}

/// 1 where x > threshold, else 0, compared in f64 as the reference
/// compares integers with a float.
pub fn binarizer(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::Binarizer { threshold } = func else { return Err(format!("{func:?} is not Binarizer")) };
    let t = o.dtype;
    let wide = cast(cx, o.x(), t, DType::F64)?;
    let limit = fconst(cx, DType::F64, threshold as f64);
    let above = cx.ins().fcmp(FloatCC::GreaterThan, wide, limit);
    let (one, zero) = (fconst(cx, DType::F64, 1.0), fconst(cx, DType::F64, 0.0));
    let bit = cx.ins().select(above, one, zero);
    cast(cx, bit, DType::F64, t)
}

/// min(max(v, 0), 1) in `v`'s float type (lanes too).
fn clamp01(cx: &mut Lower, v: Value) -> Value {
    let (zero, one) = (fconst_like(cx, v, 0.0), fconst_like(cx, v, 1.0));
    let v = cx.ins().fmax(v, zero);
    cx.ins().fmin(v, one)
}

/// `cond ? a : b` for a scalar condition, or lane by lane for the mask a
/// vector comparison gives (all ones or all zeros per lane).
fn choose(cx: &mut Lower, cond: Value, a: Value, b: Value) -> Value {
    let ty = cx.b.func.dfg.value_type(a);
    if ty.is_vector() {
        let mask = cx.ins().bitcast(ty, MemFlagsData::new(), cond);
        cx.ins().bitselect(mask, a, b)
    } else {
        cx.ins().select(cond, a, b)
    }
}
