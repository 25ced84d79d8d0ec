//! exp and log (and tanh, expm1, log1p built on them) as Cranelift
//! instruction sequences, for portable mode, where the kernel library's
//! libm wrappers are not linked. Softmax, LogSoftmax, Sigmoid, Tanh and
//! the other exp/log activations need them.
//!
//! Both compute in f64 whatever the element type (an f32 argument is
//! widened, the result rounded back), which leaves the f32 results
//! essentially correctly rounded and the f64 ones within a few ulps:
//! * exp: `x = n ln2 + r` with `|r| <= ln2/2`, `e^r` by its Taylor series
//!   to degree 13 (truncation below 1e-16 relative), times `2^n` built
//!   from exponent bits in two halves so that results near the overflow
//!   and underflow ends scale without an intermediate overflow.
//! * log: `x = m 2^e` with `m` in `[sqrt(1/2), sqrt(2))`, `ln m =
//!   2 atanh(s)`, `s = (m-1)/(m+1)`, `|s| < 0.172`, by its odd series to
//!   `s^21` (truncation below 1e-17); subnormals are scaled by 2^54 first.
//!   `log(0) = -inf`, `log(x < 0) = NaN`, `log(inf) = inf`.
//!
//! NaN propagates through both (Cranelift's fmin/fmax return NaN).

use crate::codegen::{types, FloatCC, InstBuilder, Lower, Value};
use crate::ir::DType;

/// Applies the libm-style function `name` (`exp`, `log`, `tanh`, `expm1`,
/// `log1p`) to `x` of compute type `dtype`; `None` for other functions.
pub fn apply(cx: &mut Lower, name: &str, dtype: DType, x: Value) -> Option<Value> {
    let wide = if dtype == DType::F64 { x } else { cx.ins().fpromote(types::F64, x) };
    let y = match name {
        "exp" => exp(cx, wide),
        "log" => log(cx, wide),
        "tanh" => tanh(cx, wide),
        "expm1" => expm1(cx, wide),
        "log1p" => log1p(cx, wide),
        _ => return None,
    };
    Some(if dtype == DType::F64 { y } else { cx.ins().fdemote(types::F32, y) })
}

fn f(cx: &mut Lower, v: f64) -> Value {
    cx.ins().f64const(v)
}

/// `c[0] + x (c[1] + x (c[2] + ...))`.
fn horner(cx: &mut Lower, x: Value, c: &[f64]) -> Value {
    let mut acc = f(cx, *c.last().unwrap_or(&0.0));
    for &k in c.iter().rev().skip(1) {
        let m = cx.ins().fmul(acc, x);
        let k = f(cx, k);
        acc = cx.ins().fadd(m, k);
    }
    acc
}

/// `2^n` for an i64 `n` in `[-1022, 1023]`.
fn pow2(cx: &mut Lower, n: Value) -> Value {
    let biased = cx.ins().iadd_imm_s(n, 1023);
    let bits = cx.ins().ishl_imm_u(biased, 52);
    cx.ins().bitcast(types::F64, crate::codegen::MemFlagsData::new(), bits)
}

pub fn exp(cx: &mut Lower, x: Value) -> Value {
    // Past these bounds the result is inf or 0 anyway.
    let (lo, hi) = (f(cx, -746.0), f(cx, 710.0));
    let x = cx.ins().fmax(x, lo);
    let x = cx.ins().fmin(x, hi);
    let log2e = f(cx, std::f64::consts::LOG2_E);
    let scaled = cx.ins().fmul(x, log2e);
    // Rounded by truncating `scaled ± 0.5`: `nearest` would be a libm call
    // on x86-64 without SSE4.1.
    let half = f(cx, 0.5);
    let half = cx.ins().fcopysign(half, scaled);
    let biased = cx.ins().fadd(scaled, half);
    let n_int = cx.ins().fcvt_to_sint_sat(types::I64, biased);
    let n = cx.ins().fcvt_from_sint(types::F64, n_int);
    // ln 2 split so that n * LN2_HI is exact.
    let (ln2_hi, ln2_lo) = (f(cx, 6.931_471_803_691_238e-1), f(cx, 1.908_214_929_270_587_7e-10));
    let a = cx.ins().fmul(n, ln2_hi);
    let r = cx.ins().fsub(x, a);
    let b = cx.ins().fmul(n, ln2_lo);
    let r = cx.ins().fsub(r, b);
    let mut coefficients = [1.0f64; 14];
    for k in 1..coefficients.len() {
        coefficients[k] = coefficients[k - 1] / k as f64;
    }
    let p = horner(cx, r, &coefficients);
    let first = cx.ins().sshr_imm_u(n_int, 1);
    let rest = cx.ins().isub(n_int, first);
    let (s1, s2) = (pow2(cx, first), pow2(cx, rest));
    let y = cx.ins().fmul(p, s1);
    cx.ins().fmul(y, s2)
}

pub fn log(cx: &mut Lower, x: Value) -> Value {
    let tiny = f(cx, f64::MIN_POSITIVE);
    let subnormal = cx.ins().fcmp(FloatCC::LessThan, x, tiny);
    let two54 = f(cx, 2f64.powi(54));
    let scaled = cx.ins().fmul(x, two54);
    let v = cx.ins().select(subnormal, scaled, x);
    let bits = cx.ins().bitcast(types::I64, crate::codegen::MemFlagsData::new(), v);
    let exponent = cx.ins().ushr_imm_u(bits, 52);
    let exponent = cx.ins().band_imm_u(exponent, 0x7ff);
    let (minus54, zero) = (cx.ins().iconst(types::I64, -54 - 1023), cx.ins().iconst(types::I64, -1023));
    let bias = cx.ins().select(subnormal, minus54, zero);
    let e = cx.ins().iadd(exponent, bias);
    let mantissa = cx.ins().band_imm_u(bits, 0x000f_ffff_ffff_ffff);
    let mantissa = cx.ins().bor_imm_u(mantissa, 0x3ff0_0000_0000_0000);
    let m = cx.ins().bitcast(types::F64, crate::codegen::MemFlagsData::new(), mantissa);
    // m in [1, 2): fold the upper part down to [sqrt(1/2), 1).
    let sqrt2 = f(cx, std::f64::consts::SQRT_2);
    let high = cx.ins().fcmp(FloatCC::GreaterThan, m, sqrt2);
    let half = f(cx, 0.5);
    let m_half = cx.ins().fmul(m, half);
    let m = cx.ins().select(high, m_half, m);
    let e_up = cx.ins().iadd_imm_s(e, 1);
    let e = cx.ins().select(high, e_up, e);
    let one = f(cx, 1.0);
    let num = cx.ins().fsub(m, one);
    let den = cx.ins().fadd(m, one);
    let s = cx.ins().fdiv(num, den);
    let z = cx.ins().fmul(s, s);
    let series: Vec<f64> = (0..11).map(|k| 1.0 / (2 * k + 1) as f64).collect();
    let p = horner(cx, z, &series);
    let two_s = cx.ins().fadd(s, s);
    let ln_m = cx.ins().fmul(two_s, p);
    let e = cx.ins().fcvt_from_sint(types::F64, e);
    let ln2 = f(cx, std::f64::consts::LN_2);
    let e_ln2 = cx.ins().fmul(e, ln2);
    let y = cx.ins().fadd(e_ln2, ln_m);
    // Special values.
    let (zero, inf, neg_inf, nan) = (f(cx, 0.0), f(cx, f64::INFINITY), f(cx, f64::NEG_INFINITY), f(cx, f64::NAN));
    let is_zero = cx.ins().fcmp(FloatCC::Equal, x, zero);
    let y = cx.ins().select(is_zero, neg_inf, y);
    let negative = cx.ins().fcmp(FloatCC::LessThan, x, zero);
    let y = cx.ins().select(negative, nan, y);
    let is_inf = cx.ins().fcmp(FloatCC::Equal, x, inf);
    let y = cx.ins().select(is_inf, inf, y);
    let is_nan = cx.ins().fcmp(FloatCC::Unordered, x, x);
    cx.ins().select(is_nan, x, y)
}

/// `(1 - e^-2|x|) / (1 + e^-2|x|)` with the sign of `x`.
fn tanh(cx: &mut Lower, x: Value) -> Value {
    let ax = cx.ins().fabs(x);
    let m2 = f(cx, -2.0);
    let arg = cx.ins().fmul(ax, m2);
    let t = exp(cx, arg);
    let one = f(cx, 1.0);
    let num = cx.ins().fsub(one, t);
    let den = cx.ins().fadd(one, t);
    let y = cx.ins().fdiv(num, den);
    cx.ins().fcopysign(y, x)
}

/// `e^x - 1`, by its Taylor series near 0 where the difference cancels.
fn expm1(cx: &mut Lower, x: Value) -> Value {
    let e = exp(cx, x);
    let one = f(cx, 1.0);
    let far = cx.ins().fsub(e, one);
    let near = horner(cx, x, &[0.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0]);
    small_select(cx, x, 1e-3, near, far)
}

/// `ln(1 + x)`, by its series near 0 where `1 + x` rounds.
fn log1p(cx: &mut Lower, x: Value) -> Value {
    let one = f(cx, 1.0);
    let sum = cx.ins().fadd(one, x);
    let far = log(cx, sum);
    let near = horner(cx, x, &[0.0, 1.0, -0.5, 1.0 / 3.0, -0.25, 0.2, -1.0 / 6.0]);
    small_select(cx, x, 1e-4, near, far)
}

/// `near` when `|x| < bound`, else `far`.
fn small_select(cx: &mut Lower, x: Value, bound: f64, near: Value, far: Value) -> Value {
    let ax = cx.ins().fabs(x);
    let b = f(cx, bound);
    let small = cx.ins().fcmp(FloatCC::LessThan, ax, b);
    cx.ins().select(small, near, far)
}
