//! The bitwise operators on integers (BitwiseNot, BitwiseAnd, BitwiseOr,
//! BitwiseXor, BitShift), whose And, Or and Xor are also the logical ones
//! on bool.

use super::{Func, Operands};
use crate::codegen::{clif_type, InstBuilder, IntCC, Lower, Value};

pub fn not(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().bnot(o.x()))
}

pub fn and(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().band(o.x(), o.y()?))
}

pub fn or(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().bor(o.x(), o.y()?))
}

pub fn xor(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(cx.ins().bxor(o.x(), o.y()?))
}

/// BitShift: shifting by the width or more gives 0 (numpy), not a masked
/// shift; a signed right shift is arithmetic, so past the width only the
/// sign remains.
pub fn shift(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::BitShift { left } = func else { return Err(format!("{func:?} is not BitShift")) };
    let (t, x, amount) = (o.dtype, o.x(), o.y()?);
    let bits = (t.size() * 8) as i64;
    let too_far = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, amount, bits);
    if !left && t.is_signed_int() {
        let max = cx.ins().iconst(clif_type(t), bits - 1);
        let clamped = cx.ins().select(too_far, max, amount);
        return Ok(cx.ins().sshr(x, clamped));
    }
    let shifted = if left { cx.ins().ishl(x, amount) } else { cx.ins().ushr(x, amount) };
    let zero = cx.ins().iconst(clif_type(t), 0);
    Ok(cx.ins().select(too_far, zero, shifted))
}
