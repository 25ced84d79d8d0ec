//! f16 and bf16 to and from f32 as Cranelift instruction sequences, for
//! portable mode, where the kernel library's `onnxc_f16_to_f32` and its
//! three siblings are not linked: Cast, elementwise code on 16-bit floats
//! and the staging of 16-bit tensors for f32 lowerings
//! ([`crate::codegen::staging`]) use them.
//!
//! Each gives the kernel's bits exactly (the tests compare every f16 and
//! bf16 pattern, and a sweep of f32 ones, with the kernels):
//! * f16 to f32: the f16's magnitude bits moved into an f32's place (13 up)
//!   read as an f32 `2^-112` times too small, so one exact multiplication
//!   by `2^112` rebiases normals and normalises subnormals alike; infinity
//!   and NaN (exponent 31) take the f32 maximum exponent instead.
//! * f32 to f16, to nearest even: normals rebias and round their 13 low
//!   bits away (`+ 0xfff` plus the kept low bit); below 2^-14 `|x| + 0.5`
//!   leaves the hardware's own rounding of `|x|` to a multiple of 2^-24 in
//!   its low bits; 65520 and above become infinity; NaN stays a quiet NaN
//!   with the payload's top bits.
//! * bf16 is an f32's upper half: widening shifts, narrowing rounds the
//!   lower half to nearest even, NaN quietened.

use super::{types, FloatCC, FunctionBuilder, InstBuilder, IntCC, MemFlagsData, Value};
use crate::ir::DType;

fn bits_of(b: &mut FunctionBuilder, x: Value) -> Value {
    b.ins().bitcast(types::I32, MemFlagsData::new(), x)
}

fn float_of(b: &mut FunctionBuilder, bits: Value) -> Value {
    b.ins().bitcast(types::F32, MemFlagsData::new(), bits)
}

/// The f16 or bf16 (`dtype`) whose bits are the low 16 of the i32 `h`, as an f32.
pub fn widen(b: &mut FunctionBuilder, dtype: DType, h: Value) -> Value {
    if dtype == DType::BF16 {
        bf16_to_f32(b, h)
    } else {
        f16_to_f32(b, h)
    }
}

/// `x` as f16 or bf16 (`dtype`) bits in the low 16 of an i32, to nearest even.
pub fn narrow(b: &mut FunctionBuilder, dtype: DType, x: Value) -> Value {
    if dtype == DType::BF16 {
        f32_to_bf16(b, x)
    } else {
        f32_to_f16(b, x)
    }
}

/// The f16 whose bits are the low 16 of the i32 `h`, as an f32.
pub fn f16_to_f32(b: &mut FunctionBuilder, h: Value) -> Value {
    let magnitude = b.ins().band_imm_u(h, 0x7fff);
    let moved = b.ins().ishl_imm_u(magnitude, 13);
    let small = float_of(b, moved);
    let rebias = b.ins().f32const(2f32.powi(112));
    let finite = b.ins().fmul(small, rebias);
    let finite = bits_of(b, finite);
    let special = b.ins().bor_imm_u(moved, 0x7f80_0000);
    let exponent = b.ins().band_imm_u(h, 0x7c00);
    let is_special = b.ins().icmp_imm_u(IntCC::Equal, exponent, 0x7c00);
    let unsigned = b.ins().select(is_special, special, finite);
    let sign = b.ins().band_imm_u(h, 0x8000);
    let sign = b.ins().ishl_imm_u(sign, 16);
    let bits = b.ins().bor(unsigned, sign);
    float_of(b, bits)
}

/// `x` as f16 bits (in the low 16 of an i32), rounded to nearest even.
pub fn f32_to_f16(b: &mut FunctionBuilder, x: Value) -> Value {
    let bits = bits_of(b, x);
    let abs = b.ins().band_imm_u(bits, 0x7fff_ffff);
    // Normal halves: rebias, then round the 13 dropped bits to even.
    let rebased = b.ins().iadd_imm_s(abs, -(112 << 23));
    let kept_low = b.ins().ushr_imm_u(rebased, 13);
    let kept_low = b.ins().band_imm_u(kept_low, 1);
    let rounding = b.ins().iadd_imm_s(kept_low, 0xfff);
    let rounded = b.ins().iadd(rebased, rounding);
    let normal = b.ins().ushr_imm_u(rounded, 13);
    // Subnormal halves: the hardware rounds |x| to a multiple of 2^-24.
    let ax = b.ins().fabs(x);
    let half = b.ins().f32const(0.5);
    let shifted = b.ins().fadd(ax, half);
    let shifted = bits_of(b, shifted);
    let subnormal = b.ins().iadd_imm_s(shifted, -(0.5f32.to_bits() as i64));
    let payload = b.ins().ushr_imm_u(abs, 13);
    let payload = b.ins().band_imm_u(payload, 0x3ff);
    let nan = b.ins().bor_imm_u(payload, 0x7e00);
    let inf = b.ins().iconst(types::I32, 0x7c00);
    let is_small = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, abs, 0x3880_0000);
    let half_bits = b.ins().select(is_small, subnormal, normal);
    let is_large = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, abs, 0x477f_f000);
    let half_bits = b.ins().select(is_large, inf, half_bits);
    let is_nan = b.ins().fcmp(FloatCC::Unordered, x, x);
    let half_bits = b.ins().select(is_nan, nan, half_bits);
    let sign = b.ins().ushr_imm_u(bits, 16);
    let sign = b.ins().band_imm_u(sign, 0x8000);
    b.ins().bor(half_bits, sign)
}

/// The bf16 whose bits are the low 16 of the i32 `h`, as an f32 (exact).
pub fn bf16_to_f32(b: &mut FunctionBuilder, h: Value) -> Value {
    let bits = b.ins().ishl_imm_u(h, 16);
    float_of(b, bits)
}

/// `x` as bf16 bits (in the low 16 of an i32), rounded to nearest even.
pub fn f32_to_bf16(b: &mut FunctionBuilder, x: Value) -> Value {
    let bits = bits_of(b, x);
    let upper = b.ins().ushr_imm_u(bits, 16);
    let kept_low = b.ins().band_imm_u(upper, 1);
    let rounding = b.ins().iadd_imm_s(kept_low, 0x7fff);
    let rounded = b.ins().iadd(bits, rounding);
    let rounded = b.ins().ushr_imm_u(rounded, 16);
    let quiet = b.ins().bor_imm_u(upper, 0x40);
    let is_nan = b.ins().fcmp(FloatCC::Unordered, x, x);
    b.ins().select(is_nan, quiet, rounded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::ScalarFn;
    use onnxc_runtime::{onnxc_bf16_to_f32, onnxc_f16_to_f32, onnxc_f32_to_bf16, onnxc_f32_to_f16};

    /// `convert` as a `f64 -> f64` function: the argument's low 32 bits in,
    /// the result's 32 bits out (as f64 integers, so no float rounding).
    fn compile(convert: fn(&mut FunctionBuilder, Value) -> Value, from_float: bool, to_float: bool) -> ScalarFn {
        ScalarFn::compile(|b, x| {
            let n = b.ins().fcvt_to_uint(types::I32, x);
            let arg = if from_float { float_of(b, n) } else { n };
            let y = convert(b, arg);
            let y = if to_float { bits_of(b, y) } else { y };
            b.ins().fcvt_from_uint(types::F64, y)
        })
        .expect("compiles")
    }

    #[test]
    fn every_half_widens_as_the_kernel_does() {
        let (f16, bf16) = (compile(f16_to_f32, false, true), compile(bf16_to_f32, false, true));
        for h in 0..=0xffffu32 {
            let got = f16.call(h as f64) as u32;
            let want = onnxc_f16_to_f32(h as i32);
            assert!(got == want.to_bits() || (want.is_nan() && f32::from_bits(got).is_nan()), "f16 {h:#x}");
            assert_eq!(bf16.call(h as f64) as u32, onnxc_bf16_to_f32(h as i32).to_bits(), "bf16 {h:#x}");
        }
    }

    #[test]
    fn f32_narrows_as_the_kernel_does() {
        let (f16, bf16) = (compile(f32_to_f16, true, false), compile(f32_to_bf16, true, false));
        // Every 61st pattern, and every pattern of the f16 subnormal range
        // and both rounding boundaries' neighbourhoods.
        let sweep = (0..=u32::MAX / 61).map(|k| k * 61);
        let dense = (0x3300_0000..0x3880_1000u32).chain(0x477f_e000..0x4780_1000);
        for bits in sweep.chain(dense).flat_map(|b| [b, b | 0x8000_0000]) {
            let x = f32::from_bits(bits);
            assert_eq!(f16.call(bits as f64) as u32 & 0xffff, onnxc_f32_to_f16(x) as u32 & 0xffff, "{bits:#x}");
            assert_eq!(bf16.call(bits as f64) as u32 & 0xffff, onnxc_f32_to_bf16(x) as u32 & 0xffff, "{bits:#x}");
        }
    }
}
