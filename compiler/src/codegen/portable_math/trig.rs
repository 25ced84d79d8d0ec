//! The trigonometric and hyperbolic functions and their inverses (sin,
//! cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh) and fmod,
//! as instruction sequences in f64 on [`super`]'s exp and log, for
//! portable mode.
//!
//! * sin, cos, tan: `x = n π/2 + r`, `|r| <= π/4`, with `π/2` in four
//!   parts (three of 26 bits, so that `n` times each is exact for `|n| <=
//!   2^27`, and the rest), then the Taylor series of sin and cos in `r` to
//!   degree 21 and 20 (truncation below 1e-19 relative), picked and signed
//!   by `n mod 4`; tan is their quotient. The reduction is exact only up to
//!   `|x| = 2^27 π/2` (about 2.1e8): past it the results are not libm's
//!   (no model feeds angles that large; an f32 there is a multiple of 16).
//! * atan: `1/|x|` for `|x| > 1` (then `π/2` minus the result), halved
//!   twice by `t / (1 + sqrt(1 + t^2))` (the tangent of half the angle) to
//!   `|t| <= tan(π/16)`, where its odd series to `t^25` truncates below
//!   1e-18; asin is `atan(x / sqrt((1 - x)(1 + x)))` and acos `2 atan(
//!   sqrt((1 - x) / (1 + x)))`, whose differences near `±1` are exact.
//! * sinh: `(t + t / (t + 1)) / 2` for `t = expm1(|x|)`, which does not
//!   cancel near 0; cosh `(e + 1/e) / 2` for `e = exp(|x|)`; past `|x| =
//!   700` both are `(exp(|x|/2) / 2) exp(|x|/2)`, which overflows only
//!   where the result does.
//! * asinh: `log1p(a + a^2 / (1 + sqrt(1 + a^2)))` for `a = |x|`, past
//!   `2^28` `ln a + ln 2`; acosh: `log1p(t + sqrt(2t + t^2))` for `t = x -
//!   1`, past `2^28` `ln x + ln 2`, NaN below 1; atanh: `log1p(2a / (1 -
//!   a)) / 2`. The odd functions keep the sign of `x` (and of a zero).
//! * fmod: `x - trunc(x / y) y`, moved by one `y` where the quotient's
//!   rounding crossed an integer, with the sign of `x`; exact for f32
//!   arguments whose quotient is below 2^29 (the product is then exact in
//!   f64); `fmod(x, ±inf) = x` for a finite `x`.
//!
//! Special values are libm's: NaN propagates, sin, cos and tan of `±inf`
//! are NaN, the inverses are NaN outside their domains, `atanh(±1) =
//! ±inf`. Their error bounds, measured against libm as [`super`]'s are,
//! are in the table of [`super`]'s module doc.

use super::{exp, expm1, f, horner, log, log1p};
use crate::codegen::{types, FloatCC, FunctionBuilder, InstBuilder, Value};

/// Applies `name` (one of the functions of the module doc but fmod) to
/// the f64 `x`; `None` for other names.
pub(super) fn apply(b: &mut FunctionBuilder, name: &str, x: Value) -> Option<Value> {
    Some(match name {
        "sin" => sine(b, x, 0),
        "cos" => sine(b, x, 1),
        "tan" => tan(b, x),
        "asin" => asin(b, x),
        "acos" => acos(b, x),
        "atan" => atan(b, x),
        "sinh" => sinh(b, x),
        "cosh" => cosh(b, x),
        "asinh" => asinh(b, x),
        "acosh" => acosh(b, x),
        "atanh" => atanh(b, x),
        _ => return None,
    })
}

/// `π/2` as three 26-bit parts and the rest.
const PIO2: [f64; 4] =
    [1.570_796_310_901_641_8, 1.589_325_471_229_585_7e-8, 6.123_233_932_053_594e-17, 6.368_317_163_510_95e-25];

/// `π/2` rounded, and what rounding left out.
const PIO2_HI: f64 = std::f64::consts::FRAC_PI_2;
const PIO2_LO: f64 = 6.123_233_995_736_766e-17;

/// `(-1)^k / (2k+1)!` for `k` in `0..=10`: sin's series in `r^2`, over `r`.
const SIN_SERIES: [f64; 11] = {
    let mut c = [1.0; 11];
    let mut k = 1;
    while k < c.len() {
        c[k] = -c[k - 1] / ((2 * k) * (2 * k + 1)) as f64;
        k += 1;
    }
    c
};

/// `(-1)^k / (2k)!` for `k` in `0..=10`: cos's series in `r^2`.
const COS_SERIES: [f64; 11] = {
    let mut c = [1.0; 11];
    let mut k = 1;
    while k < c.len() {
        c[k] = -c[k - 1] / ((2 * k - 1) * (2 * k)) as f64;
        k += 1;
    }
    c
};

/// `(-1)^k / (2k+1)` for `k` in `0..=12`: atan's series in `t^2`, over `t`.
const ATAN_SERIES: [f64; 13] = {
    let mut c = [1.0; 13];
    let mut k = 1;
    while k < c.len() {
        c[k] = if k % 2 == 0 { 1.0 } else { -1.0 } / (2 * k + 1) as f64;
        k += 1;
    }
    c
};

/// `x = n π/2 + r`: returns `r` and `n` (an i64).
fn reduce_quadrant(b: &mut FunctionBuilder, x: Value) -> (Value, Value) {
    let two_over_pi = f(b, std::f64::consts::FRAC_2_PI);
    let scaled = b.ins().fmul(x, two_over_pi);
    // Rounded by truncating `scaled ± 0.5`, as exp's reduction is.
    let half = f(b, 0.5);
    let half = b.ins().fcopysign(half, scaled);
    let biased = b.ins().fadd(scaled, half);
    let n_int = b.ins().fcvt_to_sint_sat(types::I64, biased);
    let n = b.ins().fcvt_from_sint(types::F64, n_int);
    let mut r = x;
    for part in PIO2 {
        let part = f(b, part);
        let step = b.ins().fmul(n, part);
        r = b.ins().fsub(r, step);
    }
    // An infinite x has no angle: NaN, not the series at infinity.
    let (magnitude, inf, nan) = (b.ins().fabs(x), f(b, f64::INFINITY), f(b, f64::NAN));
    let finite = b.ins().fcmp(FloatCC::LessThan, magnitude, inf);
    (b.ins().select(finite, r, nan), n_int)
}

/// `sin r` and `cos r` for `|r| <= π/4`.
fn sin_cos(b: &mut FunctionBuilder, r: Value) -> (Value, Value) {
    let r2 = b.ins().fmul(r, r);
    let s = horner(b, r2, &SIN_SERIES);
    let s = b.ins().fmul(r, s);
    (s, horner(b, r2, &COS_SERIES))
}

/// `sin(x + shift π/2)`: sin for `shift` 0, cos for 1.
fn sine(b: &mut FunctionBuilder, x: Value, shift: i64) -> Value {
    let (r, n) = reduce_quadrant(b, x);
    let (s, c) = sin_cos(b, r);
    let quadrant = b.ins().iadd_imm_s(n, shift);
    let odd = b.ins().band_imm_u(quadrant, 1);
    let v = b.ins().select(odd, c, s);
    let negative = b.ins().band_imm_u(quadrant, 2);
    let minus = b.ins().fneg(v);
    b.ins().select(negative, minus, v)
}

/// `tan x`: `sin r / cos r`, or `-cos r / sin r` in the odd quadrants.
fn tan(b: &mut FunctionBuilder, x: Value) -> Value {
    let (r, n) = reduce_quadrant(b, x);
    let (s, c) = sin_cos(b, r);
    let even = b.ins().fdiv(s, c);
    let minus_c = b.ins().fneg(c);
    let odd_value = b.ins().fdiv(minus_c, s);
    let odd = b.ins().band_imm_u(n, 1);
    b.ins().select(odd, odd_value, even)
}

/// `tan(θ/2)` from `t = tan θ` (`t >= 0`): `t / (1 + sqrt(1 + t^2))`.
fn half_angle(b: &mut FunctionBuilder, t: Value) -> Value {
    let one = f(b, 1.0);
    let t2 = b.ins().fmul(t, t);
    let s = b.ins().fadd(one, t2);
    let root = b.ins().sqrt(s);
    let den = b.ins().fadd(one, root);
    b.ins().fdiv(t, den)
}

/// `atan a` for `a >= 0` (infinity included).
fn atan_positive(b: &mut FunctionBuilder, a: Value) -> Value {
    let one = f(b, 1.0);
    let large = b.ins().fcmp(FloatCC::GreaterThan, a, one);
    let inverse = b.ins().fdiv(one, a);
    let t = b.ins().select(large, inverse, a);
    let t = half_angle(b, t);
    let t = half_angle(b, t);
    let t2 = b.ins().fmul(t, t);
    let series = horner(b, t2, &ATAN_SERIES);
    let quarter = b.ins().fmul(t, series);
    let four = f(b, 4.0);
    let angle = b.ins().fmul(quarter, four);
    let (hi, lo) = (f(b, PIO2_HI), f(b, PIO2_LO));
    let rest = b.ins().fsub(hi, angle);
    let complement = b.ins().fadd(rest, lo);
    b.ins().select(large, complement, angle)
}

fn atan(b: &mut FunctionBuilder, x: Value) -> Value {
    let a = b.ins().fabs(x);
    let y = atan_positive(b, a);
    b.ins().fcopysign(y, x)
}

/// `sqrt((1 - a)(1 + a))`: the differences are exact where they cancel.
fn cosine_of_asin(b: &mut FunctionBuilder, a: Value) -> Value {
    let one = f(b, 1.0);
    let below = b.ins().fsub(one, a);
    let above = b.ins().fadd(one, a);
    let product = b.ins().fmul(below, above);
    b.ins().sqrt(product)
}

fn asin(b: &mut FunctionBuilder, x: Value) -> Value {
    let a = b.ins().fabs(x);
    let c = cosine_of_asin(b, a);
    let t = b.ins().fdiv(a, c);
    let y = atan_positive(b, t);
    b.ins().fcopysign(y, x)
}

fn acos(b: &mut FunctionBuilder, x: Value) -> Value {
    let one = f(b, 1.0);
    let below = b.ins().fsub(one, x);
    let above = b.ins().fadd(one, x);
    let ratio = b.ins().fdiv(below, above);
    let t = b.ins().sqrt(ratio);
    let half = atan_positive(b, t);
    b.ins().fadd(half, half)
}

/// `(exp(a/2) / 2) exp(a/2)`, for `a` past 700.
fn half_exp_squared(b: &mut FunctionBuilder, a: Value) -> Value {
    let half = f(b, 0.5);
    let h = b.ins().fmul(a, half);
    let e = exp(b, h);
    let halved = b.ins().fmul(e, half);
    b.ins().fmul(halved, e)
}

/// Whether `a` is past 700, where sinh and cosh switch to [`half_exp_squared`].
fn past_700(b: &mut FunctionBuilder, a: Value) -> Value {
    let limit = f(b, 700.0);
    b.ins().fcmp(FloatCC::GreaterThan, a, limit)
}

fn sinh(b: &mut FunctionBuilder, x: Value) -> Value {
    let a = b.ins().fabs(x);
    let t = expm1(b, a);
    let one = f(b, 1.0);
    let t1 = b.ins().fadd(t, one);
    let ratio = b.ins().fdiv(t, t1);
    let sum = b.ins().fadd(t, ratio);
    let half = f(b, 0.5);
    let moderate = b.ins().fmul(sum, half);
    let large = half_exp_squared(b, a);
    let past = past_700(b, a);
    let y = b.ins().select(past, large, moderate);
    b.ins().fcopysign(y, x)
}

fn cosh(b: &mut FunctionBuilder, x: Value) -> Value {
    let a = b.ins().fabs(x);
    let e = exp(b, a);
    let one = f(b, 1.0);
    let inverse = b.ins().fdiv(one, e);
    let sum = b.ins().fadd(e, inverse);
    let half = f(b, 0.5);
    let moderate = b.ins().fmul(sum, half);
    let large = half_exp_squared(b, a);
    let past = past_700(b, a);
    b.ins().select(past, large, moderate)
}

/// `ln a + ln 2`, the inverse hyperbolic functions past `a = 2^28`, and
/// whether `a` is past it.
fn log_of_double(b: &mut FunctionBuilder, a: Value) -> (Value, Value) {
    let l = log(b, a);
    let ln2 = f(b, std::f64::consts::LN_2);
    let limit = f(b, (1u64 << 28) as f64);
    let past = b.ins().fcmp(FloatCC::GreaterThan, a, limit);
    (b.ins().fadd(l, ln2), past)
}

fn asinh(b: &mut FunctionBuilder, x: Value) -> Value {
    let a = b.ins().fabs(x);
    let one = f(b, 1.0);
    let a2 = b.ins().fmul(a, a);
    let s = b.ins().fadd(one, a2);
    let root = b.ins().sqrt(s);
    let den = b.ins().fadd(one, root);
    let ratio = b.ins().fdiv(a2, den);
    let arg = b.ins().fadd(a, ratio);
    let moderate = log1p(b, arg);
    let (large, past) = log_of_double(b, a);
    let y = b.ins().select(past, large, moderate);
    b.ins().fcopysign(y, x)
}

fn acosh(b: &mut FunctionBuilder, x: Value) -> Value {
    let one = f(b, 1.0);
    let t = b.ins().fsub(x, one);
    let two = f(b, 2.0);
    let twice = b.ins().fmul(t, two);
    let t2 = b.ins().fmul(t, t);
    let s = b.ins().fadd(twice, t2);
    let root = b.ins().sqrt(s);
    let arg = b.ins().fadd(t, root);
    let moderate = log1p(b, arg);
    let (large, past) = log_of_double(b, x);
    let y = b.ins().select(past, large, moderate);
    let below = b.ins().fcmp(FloatCC::LessThan, x, one);
    let nan = f(b, f64::NAN);
    b.ins().select(below, nan, y)
}

fn atanh(b: &mut FunctionBuilder, x: Value) -> Value {
    let a = b.ins().fabs(x);
    let one = f(b, 1.0);
    let twice = b.ins().fadd(a, a);
    let rest = b.ins().fsub(one, a);
    let ratio = b.ins().fdiv(twice, rest);
    let l = log1p(b, ratio);
    let half = f(b, 0.5);
    let y = b.ins().fmul(l, half);
    b.ins().fcopysign(y, x)
}

/// `fmod(x, y)` (see the module doc).
pub(super) fn fmod(b: &mut FunctionBuilder, x: Value, y: Value) -> Value {
    let quotient = b.ins().fdiv(x, y);
    let q = b.ins().trunc(quotient);
    let product = b.ins().fmul(q, y);
    let r = b.ins().fsub(x, product);
    let toward_x = b.ins().fcopysign(y, x);
    // A remainder of the other sign than x: the quotient rounded up.
    let zero = f(b, 0.0);
    let r_negative = b.ins().fcmp(FloatCC::LessThan, r, zero);
    let x_negative = b.ins().fcmp(FloatCC::LessThan, x, zero);
    let crossed = b.ins().bxor(r_negative, x_negative);
    let nonzero = b.ins().fcmp(FloatCC::NotEqual, r, zero);
    let crossed = b.ins().band(crossed, nonzero);
    let raised = b.ins().fadd(r, toward_x);
    let r = b.ins().select(crossed, raised, r);
    // A remainder as large as y: the quotient rounded down.
    let (ar, ay) = (b.ins().fabs(r), b.ins().fabs(y));
    let whole = b.ins().fcmp(FloatCC::GreaterThanOrEqual, ar, ay);
    let lowered = b.ins().fsub(r, toward_x);
    let r = b.ins().select(whole, lowered, r);
    let r = b.ins().fcopysign(r, x);
    // fmod(x, ±inf) is x for a finite x (the product above is NaN).
    let inf = f(b, f64::INFINITY);
    let y_infinite = b.ins().fcmp(FloatCC::Equal, ay, inf);
    let ax = b.ins().fabs(x);
    let x_finite = b.ins().fcmp(FloatCC::LessThan, ax, inf);
    let keep = b.ins().band(y_infinite, x_finite);
    b.ins().select(keep, x, r)
}
