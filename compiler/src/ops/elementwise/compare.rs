//! Comparisons (Equal, Less, Greater and their -OrEqual forms, IsNaN,
//! IsInf), Not on bool and Where (bool And, Or and Xor are `bits.rs`'s).
//! Integers compare signed or unsigned by their type; a float comparison
//! with NaN is false.

use super::{fconst, Func, Operands};
use crate::codegen::{types, FloatCC, InstBuilder, IntCC, Lower, Value};

pub fn is_nan(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().fcmp(FloatCC::Unordered, o.x(), o.x()))
}

/// Whether x is an infinity of a sign `detect_positive`/`detect_negative` ask for.
pub fn is_inf(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::IsInf { positive, negative } = func else { return Err(format!("{func:?} is not IsInf")) };
    let (t, x) = (o.dtype, o.x());
    let (pinf, ninf) = (fconst(cx, t, f64::INFINITY), fconst(cx, t, f64::NEG_INFINITY));
    let is_pos = cx.ins().fcmp(FloatCC::Equal, x, pinf);
    let is_neg = cx.ins().fcmp(FloatCC::Equal, x, ninf);
    Ok(match (positive, negative) {
        (true, true) => cx.ins().bor(is_pos, is_neg),
        (true, false) => is_pos,
        (false, true) => is_neg,
        (false, false) => cx.ins().iconst(types::I8, 0),
    })
}

/// Equal, Less, Greater, LessOrEqual, GreaterOrEqual.
pub fn compare(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let (x, y) = (o.x(), o.y()?);
    if o.dtype.is_float() {
        let cc = match func {
            Func::Equal => FloatCC::Equal,
            Func::Less => FloatCC::LessThan,
            Func::Greater => FloatCC::GreaterThan,
            Func::LessOrEqual => FloatCC::LessThanOrEqual,
            _ => FloatCC::GreaterThanOrEqual,
        };
        return Ok(cx.ins().fcmp(cc, x, y));
    }
    let cc = match (func, o.dtype.is_signed_int()) {
        (Func::Equal, _) => IntCC::Equal,
        (Func::Less, true) => IntCC::SignedLessThan,
        (Func::Less, false) => IntCC::UnsignedLessThan,
        (Func::Greater, true) => IntCC::SignedGreaterThan,
        (Func::Greater, false) => IntCC::UnsignedGreaterThan,
        (Func::LessOrEqual, true) => IntCC::SignedLessThanOrEqual,
        (Func::LessOrEqual, false) => IntCC::UnsignedLessThanOrEqual,
        (_, true) => IntCC::SignedGreaterThanOrEqual,
        (_, false) => IntCC::UnsignedGreaterThanOrEqual,
    };
    Ok(cx.ins().icmp(cc, x, y))
}

pub fn not(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().bxor_imm_u(o.x(), 1))
}

/// Where: the second operand where the condition holds, else the third.
pub fn select(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (a, b) = (o.y()?, o.args.get(2).map(|a| a.0).ok_or("missing operand")?);
    if cx.b.func.dfg.value_type(a).is_vector() {
        // f32 lanes: the condition is a lane mask (all ones where true).
        return Ok(cx.ins().bitselect(o.x(), a, b));
    }
    Ok(cx.ins().select(o.x(), a, b))
}
