//! exp and log (and tanh, expm1, log1p, pow built on them) and erf as
//! Cranelift instruction sequences, for portable mode, where the kernel
//! library's libm wrappers are not linked. Softmax, LogSoftmax, Sigmoid,
//! Tanh, the other exp/log activations, Pow and Gelu need them; [`trig`]
//! builds the trigonometric and hyperbolic functions and fmod on them.
//!
//! All compute in f64 whatever the element type (an f32 argument is
//! widened, the result rounded back):
//! * exp: `x = n ln2 + r` with `|r| <= ln2/2`, `e^r - 1` by its Taylor
//!   series to degree 13 (truncation below 1e-17 relative), plus 1, times
//!   `2^n` built from exponent bits in two halves so that results near
//!   the overflow and underflow ends (subnormals included) scale without
//!   an intermediate overflow.
//! * expm1: the same `e^r - 1`, scaled so that nothing cancels near 0.
//! * log: `x = m 2^e` with `m` in `[sqrt(1/2), sqrt(2)]`, `ln m =
//!   2 atanh(s)`, `s = (m-1)/(m+1)`, `|s| < 0.172`, by its odd series to
//!   `s^21` (truncation below 1e-17), summed as a correction to the exact
//!   `m - 1`, plus `e ln2` in two parts; subnormals are scaled by 2^54
//!   first.
//! * log1p: that series on `x` itself where `1 + x` is in log's interval
//!   for `m`, else log of `1 + x`.
//! * tanh: `-t / (2 + t)` for `t = expm1(-2|x|)`, with the sign of `x`.
//! * pow: for an integer `|y| <= 64` binary powering (exact wherever the
//!   result is, e.g. `(-2)^3`), else `e^(y ln|x|)`, whose error grows with
//!   `|y ln x|` (rounding `ln|x|` and the product), to about that many f64
//!   ulps, far below an f32 ulp; C99's signs and special values.
//! * erf: odd; for `|x| < 2` the series `(2/sqrt(pi)) x e^(-x^2) sum
//!   (2x^2)^n / (2n+1)!!` to 33 terms (positive terms: nothing cancels),
//!   else `1 - erfc` by erfc's continued fraction 40 levels deep, `|x|`
//!   clamped to 6 (erf is 1 past it); `e^(-x^2)` splits `x` so that the
//!   square is exact, as its rounding would cost `2x^2` ulps.
//!
//! Special values are libm's: NaN propagates (Cranelift's fmin/fmax return
//! NaN); `exp(-inf) = 0`, `exp(inf) = inf`; `log(±0) = -inf`,
//! `log(x < 0) = NaN`, `log(inf) = inf`; `tanh(±inf) = ±1`,
//! `expm1(-inf) = -1`, `log1p(-1) = -inf`, `erf(±inf) = ±1`; tanh, expm1,
//! log1p and erf keep the sign of a zero.
//!
//! Largest error found, in ulps of the correctly rounded result, by
//! `tests` in a one-off run over every f32 argument and 2^27 random f64
//! ones, besides the 4096 values of each type either side of each point
//! where some function changes behaviour that it always measures. Every
//! f32 result was correctly rounded. The f64 results are measured against
//! libm's (themselves off by up to about an ulp), so their figures include
//! libm's error:
//!
//! | function | f32      | f64 | worst f64 at |
//! |----------|----------|-----|--------------|
//! | exp      | <= 0.5   | 2   | 3.82         |
//! | log      | <= 0.5   | 2   | 0.706        |
//! | tanh     | <= 0.5   | 4   | -0.185       |
//! | expm1    | <= 0.5   | 2   | 0.358        |
//! | log1p    | <= 0.5   | 3   | -0.331       |
//! | erf      | <= 0.5   | 7   | -1.84        |
//!
//! | sin      | <= 0.5   | 2   | 531.4        |
//! | cos      | <= 0.5   | 2   | 1.05         |
//! | tan      | <= 0.5   | 3   | 379.4        |
//! | asin     | <= 0.5   | 6   | -2.97e-5     |
//! | acos     | <= 0.5   | 4   | -1.62e-7     |
//! | atan     | <= 0.5   | 5   | -7.21e-6     |
//! | sinh     | <= 0.5   | 3   | -0.247       |
//! | cosh     | <= 0.5   | 2   | -1.96        |
//! | asinh    | <= 0.5   | 2   | -0.450       |
//! | acosh    | <= 0.5   | 2   | 1.067        |
//! | atanh    | <= 0.5   | 4   | -0.223       |
//!
//! (erf's row and those from sin on, the functions of [`trig`], are from
//! the regular sample: every 127th f32, 2^22 f64; sin, cos and tan only
//! below `|x| = 2.1e8`, where their reduction is exact. fmod is exact for
//! every f32 pair the sample and its divisors give, as [`trig`] says.)
//!
//! pow is measured at the fixed exponents of `tests::POW_EXPONENTS` (the
//! regular sample only): f32 within 0.5000002 ulps (double rounding
//! through f64 can exceed a half by a hair), f64 within 4 ulps for the
//! integer exponents and up to 1140 ulps for the others (at `x^-2.5` near
//! 1e120, where `|y ln x|` is near 700).

use crate::codegen::{types, FloatCC, FunctionBuilder, InstBuilder, IntCC, Value};
use crate::ir::DType;

/// Applies the libm-style function `name` (`exp`, `log`, `tanh`, `expm1`,
/// `log1p`, `erf`, and [`trig`]'s) to `x` of compute type `dtype`; `None`
/// for other functions.
pub fn apply(b: &mut FunctionBuilder, name: &str, dtype: DType, x: Value) -> Option<Value> {
    let wide = widen(b, dtype, x);
    let y = match name {
        "exp" => exp(b, wide),
        "log" => log(b, wide),
        "tanh" => tanh(b, wide),
        "expm1" => expm1(b, wide),
        "log1p" => log1p(b, wide),
        "erf" => erf(b, wide),
        _ => trig::apply(b, name, wide)?,
    };
    Some(narrow(b, dtype, y))
}

/// Applies the libm-style function `name` of two arguments (`pow`, `fmod`) to `x`
/// and `y` of compute type `dtype`; `None` for other functions.
pub fn apply_binary(b: &mut FunctionBuilder, name: &str, dtype: DType, x: Value, y: Value) -> Option<Value> {
    let (x, y) = (widen(b, dtype, x), widen(b, dtype, y));
    let z = match name {
        "pow" => pow(b, x, y),
        "fmod" => trig::fmod(b, x, y),
        _ => return None,
    };
    Some(narrow(b, dtype, z))
}

/// `x` of compute type `dtype` as the f64 every function computes in.
fn widen(b: &mut FunctionBuilder, dtype: DType, x: Value) -> Value {
    if dtype == DType::F64 {
        x
    } else {
        b.ins().fpromote(types::F64, x)
    }
}

/// An f64 result rounded to compute type `dtype`.
fn narrow(b: &mut FunctionBuilder, dtype: DType, y: Value) -> Value {
    if dtype == DType::F64 {
        y
    } else {
        b.ins().fdemote(types::F32, y)
    }
}

fn f(b: &mut FunctionBuilder, v: f64) -> Value {
    b.ins().f64const(v)
}

/// `c[0] + x (c[1] + x (c[2] + ...))`.
fn horner(b: &mut FunctionBuilder, x: Value, c: &[f64]) -> Value {
    let mut acc = f(b, *c.last().unwrap_or(&0.0));
    for &k in c.iter().rev().skip(1) {
        let m = b.ins().fmul(acc, x);
        let k = f(b, k);
        acc = b.ins().fadd(m, k);
    }
    acc
}

/// `2^n` for an i64 `n` in `[-1022, 1023]`.
fn pow2(b: &mut FunctionBuilder, n: Value) -> Value {
    let biased = b.ins().iadd_imm_s(n, 1023);
    let bits = b.ins().ishl_imm_u(biased, 52);
    b.ins().bitcast(types::F64, crate::codegen::MemFlagsData::new(), bits)
}

/// ln 2 split in two, the first with enough trailing zero bits that its
/// product with any exponent an f64 has is exact.
const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;

/// `1/k!` for `k` in `0..=13`: `e^r`'s Taylor series, truncated below
/// 1e-17 relative for `|r| <= ln2/2`.
const EXP_SERIES: [f64; 14] = {
    let mut c = [1.0; 14];
    let mut k = 1;
    while k < c.len() {
        c[k] = c[k - 1] / k as f64;
        k += 1;
    }
    c
};

/// What exp and expm1 share: `x = n ln2 + r` with `|r| <= ln2/2`; returns
/// `e^r - 1` (without the cancellation of subtracting 1 from `e^r`) and
/// `2^n` as two factors `2^(n - n/2)` and `2^(n/2)` (each a valid exponent
/// for every `n` an f64 result needs, so the overflow and underflow ends
/// scale without an intermediate overflow). `x` is first clamped to
/// `[-746, 710]`, past which the results are their limits anyway.
fn reduce(b: &mut FunctionBuilder, x: Value) -> (Value, Value, Value) {
    let (lo, hi) = (f(b, -746.0), f(b, 710.0));
    let x = b.ins().fmax(x, lo);
    let x = b.ins().fmin(x, hi);
    let log2e = f(b, std::f64::consts::LOG2_E);
    let scaled = b.ins().fmul(x, log2e);
    // Rounded by truncating `scaled ± 0.5`: `nearest` would be a libm call
    // on x86-64 without SSE4.1.
    let half = f(b, 0.5);
    let half = b.ins().fcopysign(half, scaled);
    let biased = b.ins().fadd(scaled, half);
    let n_int = b.ins().fcvt_to_sint_sat(types::I64, biased);
    let n = b.ins().fcvt_from_sint(types::F64, n_int);
    let (ln2_hi, ln2_lo) = (f(b, LN2_HI), f(b, LN2_LO));
    let a = b.ins().fmul(n, ln2_hi);
    let r = b.ins().fsub(x, a);
    let c = b.ins().fmul(n, ln2_lo);
    let r = b.ins().fsub(r, c);
    let q = horner(b, r, &EXP_SERIES[1..]);
    let p = b.ins().fmul(r, q);
    let half_n = b.ins().sshr_imm_u(n_int, 1);
    let rest = b.ins().isub(n_int, half_n);
    (p, pow2(b, rest), pow2(b, half_n))
}

/// `e^x`.
pub fn exp(b: &mut FunctionBuilder, x: Value) -> Value {
    let (p, s1, s2) = reduce(b, x);
    let one = f(b, 1.0);
    let e_r = b.ins().fadd(p, one);
    let y = b.ins().fmul(e_r, s1);
    b.ins().fmul(y, s2)
}

/// `e^x - 1 = 2^n (e^r - 1) + 2^n - 1`, as `((e^r - 1) s1 - (1/s2 - s1)) s2`
/// for `2^n = s1 s2`: no cancellation near 0 (where `n = 0` and the result
/// is the series' `e^r - 1` itself, `-0` kept), and no intermediate
/// overflow at either end.
pub fn expm1(b: &mut FunctionBuilder, x: Value) -> Value {
    let (p, s1, s2) = reduce(b, x);
    let one = f(b, 1.0);
    let inverse = b.ins().fdiv(one, s2);
    let scaled = b.ins().fmul(p, s1);
    let offset = b.ins().fsub(inverse, s1);
    let y = b.ins().fsub(scaled, offset);
    b.ins().fmul(y, s2)
}

/// `1/(2k + 1)` for `k` in `1..=10`: `atanh(s) / s - 1` in powers of `s^2`.
const ATANH_SERIES: [f64; 10] = {
    let mut c = [0.0; 10];
    let mut k = 0;
    while k < c.len() {
        c[k] = 1.0 / (2 * k + 3) as f64;
        k += 1;
    }
    c
};

/// `ln(1 + x)` for `x` in `[sqrt(1/2) - 1, sqrt 2 - 1]`: `2 atanh(s)` for
/// `s = x / (2 + x)`, `|s| < 0.172`, by its odd series to `s^21`
/// (truncated below 1e-17 relative), summed as
/// `x - s (x - 2 s^2 (1/3 + s^2/5 + ...))` (as `2s = x - s x`) so that the
/// rounding errors are in a correction small beside the exact `x`.
fn ln_1p_small(b: &mut FunctionBuilder, x: Value) -> Value {
    let two = f(b, 2.0);
    let den = b.ins().fadd(two, x);
    let s = b.ins().fdiv(x, den);
    let z = b.ins().fmul(s, s);
    let r = horner(b, z, &ATANH_SERIES);
    let zr = b.ins().fmul(z, r);
    let two_zr = b.ins().fadd(zr, zr);
    let inner = b.ins().fsub(x, two_zr);
    let correction = b.ins().fmul(s, inner);
    b.ins().fsub(x, correction)
}

/// `ln x`.
pub fn log(b: &mut FunctionBuilder, x: Value) -> Value {
    let tiny = f(b, f64::MIN_POSITIVE);
    let subnormal = b.ins().fcmp(FloatCC::LessThan, x, tiny);
    let two54 = f(b, 2f64.powi(54));
    let scaled = b.ins().fmul(x, two54);
    let v = b.ins().select(subnormal, scaled, x);
    let bits = b.ins().bitcast(types::I64, crate::codegen::MemFlagsData::new(), v);
    let exponent = b.ins().ushr_imm_u(bits, 52);
    let exponent = b.ins().band_imm_u(exponent, 0x7ff);
    let (minus54, zero) = (b.ins().iconst(types::I64, -54 - 1023), b.ins().iconst(types::I64, -1023));
    let bias = b.ins().select(subnormal, minus54, zero);
    let e = b.ins().iadd(exponent, bias);
    let mantissa = b.ins().band_imm_u(bits, 0x000f_ffff_ffff_ffff);
    let mantissa = b.ins().bor_imm_u(mantissa, 0x3ff0_0000_0000_0000);
    let m = b.ins().bitcast(types::F64, crate::codegen::MemFlagsData::new(), mantissa);
    // m in [1, 2): fold the upper part down to [sqrt(1/2), 1).
    let sqrt2 = f(b, std::f64::consts::SQRT_2);
    let high = b.ins().fcmp(FloatCC::GreaterThan, m, sqrt2);
    let half = f(b, 0.5);
    let m_half = b.ins().fmul(m, half);
    let m = b.ins().select(high, m_half, m);
    let e_up = b.ins().iadd_imm_s(e, 1);
    let e = b.ins().select(high, e_up, e);
    let one = f(b, 1.0);
    let m_1 = b.ins().fsub(m, one);
    let ln_m = ln_1p_small(b, m_1);
    // e ln2 with ln 2 split so that e * LN2_HI is exact.
    let e = b.ins().fcvt_from_sint(types::F64, e);
    let (ln2_hi, ln2_lo) = (f(b, LN2_HI), f(b, LN2_LO));
    let e_lo = b.ins().fmul(e, ln2_lo);
    let low = b.ins().fadd(ln_m, e_lo);
    let e_hi = b.ins().fmul(e, ln2_hi);
    let y = b.ins().fadd(e_hi, low);
    // Special values.
    let (zero, inf, neg_inf, nan) = (f(b, 0.0), f(b, f64::INFINITY), f(b, f64::NEG_INFINITY), f(b, f64::NAN));
    let is_zero = b.ins().fcmp(FloatCC::Equal, x, zero);
    let y = b.ins().select(is_zero, neg_inf, y);
    let negative = b.ins().fcmp(FloatCC::LessThan, x, zero);
    let y = b.ins().select(negative, nan, y);
    let is_inf = b.ins().fcmp(FloatCC::Equal, x, inf);
    let y = b.ins().select(is_inf, inf, y);
    let is_nan = b.ins().fcmp(FloatCC::Unordered, x, x);
    b.ins().select(is_nan, x, y)
}

/// `(1 - e^-2|x|) / (1 + e^-2|x|) = -t / (2 + t)` for `t = expm1(-2|x|)`,
/// with the sign of `x`: `t` keeps the small `|x|` that `1 - e^-2|x|`
/// would cancel away.
pub fn tanh(b: &mut FunctionBuilder, x: Value) -> Value {
    let ax = b.ins().fabs(x);
    let m2 = f(b, -2.0);
    let arg = b.ins().fmul(ax, m2);
    let t = expm1(b, arg);
    let two = f(b, 2.0);
    let num = b.ins().fneg(t);
    let den = b.ins().fadd(two, t);
    let y = b.ins().fdiv(num, den);
    b.ins().fcopysign(y, x)
}

/// `ln(1 + x)`. Where `1 + x` is in `[sqrt(1/2), sqrt 2)` (log's interval
/// before scaling), [`ln_1p_small`] of `x` itself, which keeps the bits of a
/// small `x` that `1 + x` would round away; elsewhere `log(1 + x)`,
/// where `|ln(1 + x)| > 0.34` is large enough for that rounding to cost at
/// most 1.5 ulps.
pub fn log1p(b: &mut FunctionBuilder, x: Value) -> Value {
    let one = f(b, 1.0);
    let sum = b.ins().fadd(one, x);
    let far = log(b, sum);
    let near = ln_1p_small(b, x);
    let (lo, hi) = (f(b, std::f64::consts::FRAC_1_SQRT_2), f(b, std::f64::consts::SQRT_2));
    let above = b.ins().fcmp(FloatCC::GreaterThanOrEqual, sum, lo);
    let below = b.ins().fcmp(FloatCC::LessThan, sum, hi);
    let inside = b.ins().band(above, below);
    b.ins().select(inside, near, far)
}

/// The largest `|y|` for which an integer power is taken by
/// multiplications ([`integer_power`]) rather than through exp and log.
const POWER_BY_PRODUCTS: i64 = 64;

/// `x^n` for the integer `n = y`, `|n| <= POWER_BY_PRODUCTS`, by binary
/// powering of `x` (of `1/x` for a negative `n`): a few roundings, none
/// for a result that is exact (`(-2)^3 = -8`), and the signs and zeros
/// follow from the products.
fn integer_power(b: &mut FunctionBuilder, x: Value, n: Value, negative: Value) -> Value {
    let one = f(b, 1.0);
    let inverse = b.ins().fdiv(one, x);
    let mut square = b.ins().select(negative, inverse, x);
    let magnitude = b.ins().iabs(n);
    let mut r = one;
    for bit in 0..=POWER_BY_PRODUCTS.ilog2() {
        let set = b.ins().band_imm_u(magnitude, 1i64 << bit);
        let product = b.ins().fmul(r, square);
        r = b.ins().select(set, product, r);
        square = b.ins().fmul(square, square);
    }
    r
}

/// `x^y`: an integer `y` up to [`POWER_BY_PRODUCTS`] by [`integer_power`],
/// else `e^(y ln|x|)`, with C99's signs and special values: for a
/// negative `x` the sign of `(-1)^y` when `y` is an integer (every `|y| >=
/// 2^53` is an even one), NaN when it is not and `x` is finite; `x^0 = 1`
/// and `1^y = 1` even for a NaN, `(-1)^±inf = 1`. `ln|x|` and the
/// product round once each, so the result's relative error grows with
/// `|y ln x|`, by at most about that many f64 ulps: nothing an f32 result
/// sees.
fn pow(b: &mut FunctionBuilder, x: Value, y: Value) -> Value {
    let ax = b.ins().fabs(x);
    let ln = log(b, ax);
    let t = b.ins().fmul(y, ln);
    let magnitude = exp(b, t);
    let ay = b.ins().fabs(y);
    let two53 = f(b, 2f64.powi(53));
    let huge = b.ins().fcmp(FloatCC::GreaterThanOrEqual, ay, two53);
    let truncated = b.ins().fcvt_to_sint_sat(types::I64, y);
    let back = b.ins().fcvt_from_sint(types::F64, truncated);
    let whole = b.ins().fcmp(FloatCC::Equal, back, y);
    let integer = b.ins().bor(whole, huge);
    let low_bit = b.ins().band_imm_u(truncated, 1);
    let odd_bit = b.ins().icmp_imm_u(IntCC::NotEqual, low_bit, 0);
    let not_huge = b.ins().bxor_imm_u(huge, 1);
    let odd = b.ins().band(odd_bit, not_huge);
    let x_bits = b.ins().bitcast(types::I64, crate::codegen::MemFlagsData::new(), x);
    let sign = b.ins().icmp_imm_s(IntCC::SignedLessThan, x_bits, 0);
    let flip = b.ins().band(sign, odd);
    let negated = b.ins().fneg(magnitude);
    let r = b.ins().select(flip, negated, magnitude);
    let (zero, one, inf, nan) = (f(b, 0.0), f(b, 1.0), f(b, f64::INFINITY), f(b, f64::NAN));
    let negative = b.ins().fcmp(FloatCC::LessThan, x, zero);
    let finite = b.ins().fcmp(FloatCC::NotEqual, ax, inf);
    let fraction = b.ins().bxor_imm_u(integer, 1);
    let undefined = b.ins().band(negative, finite);
    let undefined = b.ins().band(undefined, fraction);
    let r = b.ins().select(undefined, nan, r);
    let limit = f(b, POWER_BY_PRODUCTS as f64);
    let small = b.ins().fcmp(FloatCC::LessThanOrEqual, ay, limit);
    let by_products = b.ins().band(whole, small);
    let y_negative = b.ins().fcmp(FloatCC::LessThan, y, zero);
    let product = integer_power(b, x, truncated, y_negative);
    let r = b.ins().select(by_products, product, r);
    let y_zero = b.ins().fcmp(FloatCC::Equal, y, zero);
    let x_one = b.ins().fcmp(FloatCC::Equal, x, one);
    let unit = b.ins().fcmp(FloatCC::Equal, ax, one);
    let y_inf = b.ins().fcmp(FloatCC::Equal, ay, inf);
    let unit_inf = b.ins().band(unit, y_inf);
    let is_one = b.ins().bor(y_zero, x_one);
    let is_one = b.ins().bor(is_one, unit_inf);
    b.ins().select(is_one, one, r)
}

/// How many terms of erf's series ([`erf_series`]) are summed: enough
/// below [`ERF_SERIES_END`] to truncate below 1e-17 relative.
const ERF_SERIES_TERMS: usize = 33;

/// `1 / (2n + 1)!!` for `n` in `0..ERF_SERIES_TERMS`.
const ERF_SERIES: [f64; ERF_SERIES_TERMS] = {
    let mut c = [1.0; ERF_SERIES_TERMS];
    let mut n = 1;
    while n < c.len() {
        c[n] = c[n - 1] / (2 * n + 1) as f64;
        n += 1;
    }
    c
};

/// Where erf switches from its series to its continued fraction.
const ERF_SERIES_END: f64 = 2.0;

/// Past this erf is 1 in f64 (`erfc(6) < 2^-55`): the continued fraction's
/// argument is clamped to it.
const ERF_ONE: f64 = 6.0;

/// Levels of the continued fraction for erfc, enough from [`ERF_SERIES_END`].
const ERF_FRACTION_LEVELS: usize = 40;

/// `e^(-x^2)` without the error of rounding `x^2`: `x = h + l` with `h`
/// of 26 significant bits, so `h^2` is exact, and `e^(-x^2) = e^(-h^2)
/// e^(-d)` for `d = (x + h) l`, tiny, by `1 - d (1 - d/2)`.
fn exp_minus_square(b: &mut FunctionBuilder, x: Value) -> Value {
    let bits = b.ins().bitcast(types::I64, crate::codegen::MemFlagsData::new(), x);
    let high_bits = b.ins().band_imm_u(bits, !((1i64 << 27) - 1));
    let h = b.ins().bitcast(types::F64, crate::codegen::MemFlagsData::new(), high_bits);
    let l = b.ins().fsub(x, h);
    let h2 = b.ins().fmul(h, h);
    let minus_h2 = b.ins().fneg(h2);
    let e = exp(b, minus_h2);
    let sum = b.ins().fadd(x, h);
    let d = b.ins().fmul(sum, l);
    let (one, half) = (f(b, 1.0), f(b, 0.5));
    let half_d = b.ins().fmul(d, half);
    let inner = b.ins().fsub(one, half_d);
    let dd = b.ins().fmul(d, inner);
    let factor = b.ins().fsub(one, dd);
    b.ins().fmul(e, factor)
}

/// erf(a) for `0 <= a < 2`: `(2/sqrt(pi)) a e^(-a^2) sum (2a^2)^n /
/// (2n+1)!!`, a series of positive terms (nothing cancels).
fn erf_series(b: &mut FunctionBuilder, a: Value) -> Value {
    let a2 = b.ins().fmul(a, a);
    let z = b.ins().fadd(a2, a2);
    let sum = horner(b, z, &ERF_SERIES);
    let e = exp_minus_square(b, a);
    let k = f(b, std::f64::consts::FRAC_2_SQRT_PI);
    let ka = b.ins().fmul(k, a);
    let kae = b.ins().fmul(ka, e);
    b.ins().fmul(kae, sum)
}

/// erf(a) for `a >= 2` (NaN kept): `1 - e^(-a^2) / (sqrt(pi) t)` with `t
/// = a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))`, evaluated from
/// [`ERF_FRACTION_LEVELS`] deep, and `a` clamped to [`ERF_ONE`].
fn erf_fraction(b: &mut FunctionBuilder, a: Value) -> Value {
    let limit = f(b, ERF_ONE);
    let a = b.ins().fmin(a, limit);
    let mut t = a;
    for k in (1..=ERF_FRACTION_LEVELS).rev() {
        let c = f(b, k as f64 / 2.0);
        let q = b.ins().fdiv(c, t);
        t = b.ins().fadd(a, q);
    }
    let e = exp_minus_square(b, a);
    let sqrt_pi = f(b, std::f64::consts::PI.sqrt());
    let den = b.ins().fmul(sqrt_pi, t);
    let erfc = b.ins().fdiv(e, den);
    let one = f(b, 1.0);
    b.ins().fsub(one, erfc)
}

/// erf, odd: [`erf_series`] or [`erf_fraction`] of `|x|` (a branch, so
/// only one is computed), with the sign of `x`.
fn erf(b: &mut FunctionBuilder, x: Value) -> Value {
    let a = b.ins().fabs(x);
    let end = f(b, ERF_SERIES_END);
    let near = b.ins().fcmp(FloatCC::LessThan, a, end);
    let (series, fraction, done) = (b.create_block(), b.create_block(), b.create_block());
    let result = b.append_block_param(done, types::F64);
    b.ins().brif(near, series, &[], fraction, &[]);
    for (block, part) in [(series, erf_series as fn(&mut FunctionBuilder, Value) -> Value), (fraction, erf_fraction)] {
        b.switch_to_block(block);
        b.seal_block(block);
        let y = part(b, a);
        b.ins().jump(done, &[y.into()]);
    }
    b.switch_to_block(done);
    b.seal_block(done);
    b.ins().fcopysign(result, x)
}

mod trig;

#[cfg(test)]
mod tests;
