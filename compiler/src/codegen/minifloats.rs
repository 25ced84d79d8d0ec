//! float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0) and float4 E2M1 to and
//! from f32 as Cranelift instruction sequences, for portable mode, where
//! the kernel library's `onnxc_minifloat_to_f32` and
//! `onnxc_f{32,64}_to_minifloat` are not linked: Cast, elementwise code on
//! float8 and the packing of float4 tensors use them.
//!
//! Each format's fields come from the kernel library itself
//! (`onnxc_runtime::minifloat_format`), and each sequence gives the
//! kernel's bits exactly (the tests compare every code, and a sweep of f32
//! and f64 patterns in every mode, with the kernels):
//! * widening moves the magnitude bits into an f32's place, which reads as
//!   the value `2^(127 - bias)` times too small for normals and subnormals
//!   alike, so one exact multiplication rebiases both; each format's
//!   infinity and NaN codes are then picked out (E8M0 is a bare exponent).
//! * narrowing works on the f64 bits (an f32 widens exactly first, so a
//!   double rounds once): the significand is shifted right to the format's
//!   mantissa, by more below its smallest normal, and rounded to nearest
//!   even; a carry out of the mantissa steps the exponent, as the addition
//!   of the exponent field encodes. Overflow, NaN and FNUZ's zero follow
//!   Cast's `saturate` tables; E8M0 rounds its exponent by `round_mode`.

use super::{types, FloatCC, FunctionBuilder, InstBuilder, IntCC, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::{
    minifloat_format, Format, Specials, MINIFLOAT_ROUND_DOWN, MINIFLOAT_ROUND_NEAREST, MINIFLOAT_SATURATE,
};

/// The f32 quiet NaN the kernels return.
const NAN_BITS: i64 = 0x7fc0_0000;

/// The f64 mantissa width.
const F64_MAN_BITS: i64 = 52;

/// The element of format `dtype` whose code is the low bits of the i32
/// `bits`, as an f32.
pub fn widen(b: &mut FunctionBuilder, dtype: DType, bits: Value) -> Result<Value, String> {
    let elem = dtype.onnx_code() as i64;
    let unsigned = match minifloat_format(elem) {
        Some(f) => widen_magnitude(b, &f, bits),
        None if dtype == DType::F8E8M0 => widen_e8m0(b, bits),
        None => return Err(format!("{dtype} is not a float8 or float4 type")),
    };
    Ok(b.ins().bitcast(types::F32, MemFlagsData::new(), unsigned))
}

/// The f32 bits of a code of format `f`, sign included.
fn widen_magnitude(b: &mut FunctionBuilder, f: &Format, bits: Value) -> Value {
    let sign = f.sign as i64;
    let code = b.ins().band_imm_u(bits, sign | (sign - 1));
    let magnitude = b.ins().band_imm_u(code, sign - 1);
    let moved = b.ins().ishl_imm_u(magnitude, 23 - f.man_bits as i64);
    let small = b.ins().bitcast(types::F32, MemFlagsData::new(), moved);
    let rebias = b.ins().f32const(2f32.powi(127 - f.bias));
    let finite = b.ins().fmul(small, rebias);
    let finite = b.ins().bitcast(types::I32, MemFlagsData::new(), finite);
    let nan = b.ins().iconst(types::I32, NAN_BITS);
    let unsigned = match f.specials {
        Specials::None => finite,
        Specials::NanOnly => {
            let is_nan = b.ins().icmp_imm_u(IntCC::Equal, magnitude, sign - 1);
            b.ins().select(is_nan, nan, finite)
        }
        Specials::Fnuz => {
            let is_nan = b.ins().icmp_imm_u(IntCC::Equal, code, sign);
            b.ins().select(is_nan, nan, finite)
        }
        Specials::Ieee => {
            let top = (sign - 1) >> f.man_bits << f.man_bits;
            let exponent = b.ins().band_imm_u(magnitude, top);
            let is_special = b.ins().icmp_imm_u(IntCC::Equal, exponent, top);
            let mantissa = b.ins().band_imm_u(magnitude, (1 << f.man_bits) - 1);
            let is_infinite = b.ins().icmp_imm_u(IntCC::Equal, mantissa, 0);
            let infinity = b.ins().iconst(types::I32, 0x7f80_0000);
            let special = b.ins().select(is_infinite, infinity, nan);
            b.ins().select(is_special, special, finite)
        }
    };
    let sign_bit = b.ins().band_imm_u(code, sign);
    let sign_bit = b.ins().ishl_imm_u(sign_bit, 31 - sign.trailing_zeros() as i64);
    b.ins().bor(unsigned, sign_bit)
}

/// The f32 bits of an E8M0 code: `2^(code - 127)`, 2^-127 an f32
/// subnormal, 0xff NaN.
fn widen_e8m0(b: &mut FunctionBuilder, bits: Value) -> Value {
    let code = b.ins().band_imm_u(bits, 0xff);
    let power = b.ins().ishl_imm_u(code, 23);
    let tiny = b.ins().iconst(types::I32, 1 << 22);
    let is_zero = b.ins().icmp_imm_u(IntCC::Equal, code, 0);
    let power = b.ins().select(is_zero, tiny, power);
    let nan = b.ins().iconst(types::I32, NAN_BITS);
    let is_nan = b.ins().icmp_imm_u(IntCC::Equal, code, 0xff);
    b.ins().select(is_nan, nan, power)
}

/// `x` (f32 or f64) as a code of format `dtype` in the low bits of an i32,
/// narrowed by `mode` (`onnxc_runtime::MINIFLOAT_*`: saturation, and
/// E8M0's rounding).
pub fn narrow(b: &mut FunctionBuilder, dtype: DType, x: Value, mode: i64) -> Result<Value, String> {
    let x = if b.func.dfg.value_type(x) == types::F32 { b.ins().fpromote(types::F64, x) } else { x };
    let bits = b.ins().bitcast(types::I64, MemFlagsData::new(), x);
    let abs = b.ins().band_imm_u(bits, i64::MAX);
    let biased = b.ins().ushr_imm_u(abs, F64_MAN_BITS);
    let saturate = mode & MINIFLOAT_SATURATE != 0;
    let (code, nan) = match minifloat_format(dtype.onnx_code() as i64) {
        Some(f) => narrow_to_format(b, &f, saturate, bits, abs, biased),
        None if dtype == DType::F8E8M0 => {
            let code = narrow_to_e8m0(b, saturate, mode & !MINIFLOAT_SATURATE, abs, biased);
            (code, b.ins().iconst(types::I32, 0xff))
        }
        None => return Err(format!("{dtype} is not a float8 or float4 type")),
    };
    let is_nan = b.ins().fcmp(FloatCC::Unordered, x, x);
    Ok(b.ins().select(is_nan, nan, code))
}

/// The code of format `f` nearest to the f64 whose bits are `bits`
/// (`abs` without the sign, `biased` its exponent field), and the code of
/// NaN (with the value's sign where the format has one); the caller picks.
fn narrow_to_format(
    b: &mut FunctionBuilder,
    f: &Format,
    saturate: bool,
    bits: Value,
    abs: Value,
    biased: Value,
) -> (Value, Value) {
    let man_bits = f.man_bits as i64;
    let fraction = b.ins().band_imm_u(abs, (1 << F64_MAN_BITS) - 1);
    let significand = b.ins().bor_imm_u(fraction, 1 << F64_MAN_BITS);
    // How far the exponent lies above the format's smallest normal one.
    let above = b.ins().iadd_imm_s(biased, -(1024 - f.bias as i64));
    let zero = b.ins().iconst(types::I64, 0);
    let below = b.ins().isub(zero, above);
    let below = b.ins().smax(below, zero);
    let shift = b.ins().iadd_imm_s(below, F64_MAN_BITS - man_bits);
    let max_shift = b.ins().iconst(types::I64, 63);
    let shift = b.ins().umin(shift, max_shift);
    let rounded = round_shifted(b, significand, shift);
    let exponent = b.ins().smax(above, zero);
    let exponent = b.ins().ishl_imm_u(exponent, man_bits);
    let magnitude = b.ins().iadd(exponent, rounded);
    let negative = b.ins().ushr_imm_u(bits, 63);
    let negative = b.ins().ireduce(types::I32, negative);
    let sign = b.ins().ishl_imm_u(negative, f.sign.trailing_zeros() as i64);
    let nan = match f.specials {
        Specials::Fnuz => b.ins().iconst(types::I32, 0x80),
        Specials::None => b.ins().iconst(types::I32, 0),
        Specials::NanOnly | Specials::Ieee => b.ins().bor_imm_u(sign, 0x7f),
    };
    let overflow = if saturate || f.specials == Specials::None {
        b.ins().bor_imm_u(sign, f.max as i64)
    } else if f.specials == Specials::Ieee {
        b.ins().bor_imm_u(sign, 0x7c)
    } else {
        nan
    };
    let small = b.ins().ireduce(types::I32, magnitude);
    let signed = b.ins().bor(sign, small);
    let code = if f.specials == Specials::Fnuz {
        // No negative zero: a value rounding to zero is +0.
        let is_zero = b.ins().icmp_imm_u(IntCC::Equal, magnitude, 0);
        let plus_zero = b.ins().iconst(types::I32, 0);
        b.ins().select(is_zero, plus_zero, signed)
    } else {
        signed
    };
    let overflows = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, magnitude, f.max as i64);
    (b.ins().select(overflows, overflow, code), nan)
}

/// `value >> shift` (i64, `shift` in 1..=63) rounded to nearest even on
/// the dropped bits: the kept low bit plus half a step less one carries
/// into the kept part exactly when the dropped bits round up.
fn round_shifted(b: &mut FunctionBuilder, value: Value, shift: Value) -> Value {
    let kept = b.ins().ushr(value, shift);
    let kept_low = b.ins().band_imm_u(kept, 1);
    let one = b.ins().iconst(types::I64, 1);
    let step = b.ins().ishl(one, shift);
    let mask = b.ins().iadd_imm_s(step, -1);
    let dropped = b.ins().band(value, mask);
    let half = b.ins().ushr_imm_u(step, 1);
    let bump = b.ins().iadd_imm_s(half, -1);
    let bump = b.ins().iadd(bump, kept_low);
    let sum = b.ins().iadd(dropped, bump);
    let carry = b.ins().ushr(sum, shift);
    b.ins().iadd(kept, carry)
}

/// The E8M0 code of `|x|` (`abs` its bits, `biased` its exponent field),
/// its exponent rounded by `round` (`MINIFLOAT_ROUND_*`); NaN is the
/// caller's.
fn narrow_to_e8m0(b: &mut FunctionBuilder, saturate: bool, round: i64, abs: Value, biased: Value) -> Value {
    let fraction = b.ins().band_imm_u(abs, (1 << F64_MAN_BITS) - 1);
    let up = match round {
        MINIFLOAT_ROUND_DOWN => b.ins().iconst(types::I8, 0),
        MINIFLOAT_ROUND_NEAREST => {
            b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, fraction, 1 << (F64_MAN_BITS - 1))
        }
        _ => b.ins().icmp_imm_u(IntCC::NotEqual, fraction, 0),
    };
    let up = b.ins().uextend(types::I64, up);
    // code = exponent + 127 = biased - 1023 + 127, plus the rounding.
    let code = b.ins().iadd_imm_s(biased, 127 - 1023);
    let code = b.ins().iadd(code, up);
    let nan = b.ins().iconst(types::I64, 0xff);
    let (largest, smallest) =
        if saturate { (b.ins().iconst(types::I64, 0xfe), b.ins().iconst(types::I64, 0)) } else { (nan, nan) };
    let over = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, code, 0xfe);
    let code = b.ins().select(over, largest, code);
    let under = b.ins().icmp_imm_s(IntCC::SignedLessThan, code, 0);
    let code = b.ins().select(under, smallest, code);
    b.ins().ireduce(types::I32, code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::ScalarFn;
    use onnxc_runtime::{onnxc_f32_to_minifloat, onnxc_f64_to_minifloat, onnxc_minifloat_to_f32, MINIFLOAT_ROUND_UP};

    const FORMATS: [DType; 6] =
        [DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ, DType::F8E8M0, DType::F4E2M1];

    #[test]
    fn every_code_widens_as_the_kernel_does() {
        for dtype in FORMATS {
            let f = ScalarFn::compile(|b, x| {
                let code = b.ins().fcvt_to_uint(types::I32, x);
                let y = widen(b, dtype, code).expect("a minifloat");
                let y = b.ins().bitcast(types::I32, MemFlagsData::new(), y);
                b.ins().fcvt_from_uint(types::F64, y)
            })
            .expect("compiles");
            for code in 0..256 {
                let want = onnxc_minifloat_to_f32(code, dtype.onnx_code() as i64).to_bits();
                assert_eq!(f.call(code as f64) as u32, want, "{dtype} code {code:#x}");
            }
        }
    }

    /// `narrow` of a double whose bits (the argument's integer value, as
    /// two halves) are reassembled inside, so any pattern goes in exactly.
    fn compile_narrow(dtype: DType, mode: i64, from_f32: bool) -> ScalarFn {
        ScalarFn::compile(|b, x| {
            let pattern = b.ins().fcvt_to_uint(types::I64, x);
            let x = if from_f32 {
                let low = b.ins().ireduce(types::I32, pattern);
                b.ins().bitcast(types::F32, MemFlagsData::new(), low)
            } else {
                b.ins().bitcast(types::F64, MemFlagsData::new(), pattern)
            };
            let code = narrow(b, dtype, x, mode).expect("a minifloat");
            b.ins().fcvt_from_uint(types::F64, code)
        })
        .expect("compiles")
    }

    #[test]
    fn f32_and_f64_narrow_as_the_kernel_does() {
        let modes = [
            MINIFLOAT_SATURATE | MINIFLOAT_ROUND_UP,
            0,
            MINIFLOAT_ROUND_DOWN,
            MINIFLOAT_SATURATE | MINIFLOAT_ROUND_NEAREST,
        ];
        // Every 4099th f32 pattern, and f64 patterns whose top bits sweep
        // every exponent with a few mantissas (f64 patterns only go in
        // below 2^53 through the f64 argument, so the f64 sweep keeps its
        // low bits zero and rebuilds the pattern from the top ones).
        let f32_sweep: Vec<u32> = (0..=u32::MAX / 4099).map(|k| k * 4099).collect();
        for dtype in FORMATS {
            let elem = dtype.onnx_code() as i64;
            for mode in modes {
                let narrow32 = compile_narrow(dtype, mode, true);
                for &bits in &f32_sweep {
                    let x = f32::from_bits(bits);
                    let want = onnxc_f32_to_minifloat(x, elem, mode);
                    assert_eq!(narrow32.call(bits as f64) as i32, want, "{dtype} mode {mode}: {x:e} ({bits:#x})");
                }
                let narrow64 = compile_narrow(dtype, mode, false);
                for top in (0..1u64 << 20).step_by(7) {
                    let bits = top << 44;
                    let x = f64::from_bits(bits);
                    let want = onnxc_f64_to_minifloat(x, elem, mode);
                    let got = narrow64.call(bits as f64) as i32;
                    assert_eq!(got, want, "{dtype} mode {mode}: {x:e} ({bits:#x})");
                }
            }
        }
    }
}
