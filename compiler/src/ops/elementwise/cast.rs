//! Cast, CastLike and the functions that pass their data through
//! (Identity, Dropout, BitCast), and the conversions every elementwise
//! loop makes: f16, bf16 and float8 widened to f32 on load ([`widen`]) and
//! rounded on store ([`narrow`]); in portable mode f16 and bf16 by
//! [`crate::codegen::half_floats`], float8 by [`crate::codegen::minifloats`].

use super::{Func, Operands};
use crate::codegen::kernels::{self, F32, F64, I32, I64};
use crate::codegen::{clif_type, half_floats, minifloats, types, FloatCC, InstBuilder, IntCC, Lower, Value};
use crate::ir::DType;

/// Identity, Dropout, BitCast: the operand itself.
pub fn pass_through(_: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    Ok(o.x())
}

/// Cast to its (scalar) target type.
pub fn cast_to(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::Cast { to, .. } = func else { return Err(format!("{func:?} is not Cast")) };
    cast(cx, o.x(), o.dtype, to)
}

/// CastLike: to the type of its second operand.
pub fn cast_like(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let to = o.args.get(1).map(|a| a.1).ok_or("missing target operand")?;
    cast(cx, o.x(), o.dtype, to)
}

/// The type arithmetic on `dtype` is done in: f16 and bf16 widen to f32.
pub fn compute_type(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// The type elementwise arithmetic on `dtype` is done in: [`compute_type`],
/// and f32 for the float8 bit patterns too ([`widen`], [`narrow`]).
pub fn scalar_type(dtype: DType) -> DType {
    if dtype.is_minifloat() {
        DType::F32
    } else {
        compute_type(dtype)
    }
}

/// A loaded element of `dtype` in its scalar type.
pub fn widen(cx: &mut Lower, raw: Value, dtype: DType) -> Result<Value, String> {
    if dtype.is_minifloat() {
        let bits = I32(cx.ins().uextend(types::I32, raw));
        if cx.portable() {
            return minifloats::widen(cx.b, dtype, bits.0);
        }
        let elem = I64(cx.ins().iconst(types::I64, dtype.onnx_code() as i64));
        return cx.call(kernels::onnxc_minifloat_to_f32, (bits, elem));
    }
    let kernel = match dtype {
        DType::F16 => kernels::onnxc_f16_to_f32,
        DType::BF16 => kernels::onnxc_bf16_to_f32,
        _ => return Ok(raw),
    };
    let bits = cx.ins().uextend(types::I32, raw);
    if cx.portable() {
        return Ok(half_floats::widen(cx.b, dtype, bits));
    }
    cx.call(kernel, (I32(bits),))
}

/// A computed value (in the scalar type; f64 too for float8) as stored for
/// `dtype`; float8 narrows by `mode` (`onnxc_runtime::MINIFLOAT_*`).
pub fn narrow(cx: &mut Lower, value: Value, dtype: DType, mode: i64) -> Result<Value, String> {
    if dtype.is_minifloat() {
        let double = cx.b.func.dfg.value_type(value) == types::F64;
        if cx.portable() {
            let bits = minifloats::narrow(cx.b, dtype, value, mode)?;
            return Ok(cx.ins().ireduce(types::I8, bits));
        }
        let elem = I64(cx.ins().iconst(types::I64, dtype.onnx_code() as i64));
        let mode = I64(cx.ins().iconst(types::I64, mode));
        let bits = if double {
            cx.call(kernels::onnxc_f64_to_minifloat, (F64(value), elem, mode))?
        } else {
            cx.call(kernels::onnxc_f32_to_minifloat, (F32(value), elem, mode))?
        };
        return Ok(cx.ins().ireduce(types::I8, bits));
    }
    let kernel = match dtype {
        DType::F16 => kernels::onnxc_f32_to_f16,
        DType::BF16 => kernels::onnxc_f32_to_bf16,
        _ => return Ok(value),
    };
    let bits = if cx.portable() { half_floats::narrow(cx.b, dtype, value) } else { cx.call(kernel, (F32(value),))? };
    Ok(cx.ins().ireduce(types::I16, bits))
}

/// Converts a scalar between element types (Cast semantics: float → int
/// truncates and saturates, anything → bool is `!= 0`).
pub fn cast(cx: &mut Lower, x: Value, from: DType, to: DType) -> Result<Value, String> {
    if from == to {
        return Ok(x);
    }
    for t in [from, to] {
        if matches!(t, DType::F16 | DType::BF16) {
            return Err(format!("Cast involving {t} is not supported yet"));
        }
    }
    let (fty, tty) = (clif_type(from), clif_type(to));
    let ins = cx.b.ins();
    Ok(match (from.is_float(), to.is_float()) {
        _ if to == DType::Bool => {
            if from.is_float() {
                let zero = if from == DType::F64 { cx.b.ins().f64const(0.0) } else { cx.b.ins().f32const(0.0) };
                cx.b.ins().fcmp(FloatCC::NotEqual, x, zero)
            } else {
                ins.icmp_imm_u(IntCC::NotEqual, x, 0)
            }
        }
        (true, true) if to == DType::F64 => ins.fpromote(tty, x),
        (true, true) => ins.fdemote(tty, x),
        (false, true) if from.is_signed_int() => ins.fcvt_from_sint(tty, x),
        (false, true) => ins.fcvt_from_uint(tty, x),
        (true, false) => {
            let wide = if tty.bits() < 32 { types::I32 } else { tty };
            let v = if to.is_signed_int() || tty.bits() < 32 {
                cx.b.ins().fcvt_to_sint_sat(wide, x)
            } else {
                cx.b.ins().fcvt_to_uint_sat(wide, x)
            };
            if wide == tty {
                v
            } else {
                cx.b.ins().ireduce(tty, v)
            }
        }
        (false, false) => {
            if tty.bits() == fty.bits() {
                x
            } else if tty.bits() < fty.bits() {
                ins.ireduce(tty, x)
            } else if from.is_signed_int() {
                ins.sextend(tty, x)
            } else {
                ins.uextend(tty, x)
            }
        }
    })
}
