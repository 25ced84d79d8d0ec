//! f32 exp, log, tanh, sigmoid, erf and the activations built from them,
//! written once over [`MathLanes`] and compiled for each vector width:
//! zmm and ymm in `crate::x86_64::math_lanes`, one lane ([`Scalar`]) here.
//!
//! A libm call per element costs tens of nanoseconds; these run 8 or 16
//! elements in a few dozen vector instructions. Each function is a range
//! reduction and a polynomial fitted (near-minimax, Chebyshev) for that
//! range, tanh a rational function, evaluated with fused multiply-adds.
//! Against libm's f64 functions, over the whole f32 range (every 997th bit
//! pattern of either sign, subnormals to infinities, and NaN) and densely
//! where they vary, the worst errors are: exp 1.02 ulp, exp_m1 1.56, log
//! 1.76, sigmoid 2.11, erf 2.30, softplus 2.80, tanh 5.17 (`tests` hold
//! tanh within 5.5, the others within 3).
//! Every implementation of [`MathLanes`] performs the same IEEE
//! operations in the same order, so a value gets the same bits in
//! every lane width: a kernel may process a row's tail one lane at a time,
//! or run on a machine without AVX-512, and still agree with itself.
//!
//! NaN in gives NaN out; infinities and zeros give the limits
//! (`exp(-inf) = 0`, `log(0) = -inf`, `tanh(inf) = 1`, ...).

/// One vector of f32 lanes and the operations the functions need. Every
/// operation is exact or correctly rounded IEEE arithmetic, so all
/// implementations agree bit for bit.
pub trait MathLanes: Copy {
    /// Lanes per vector.
    const LANES: usize;
    /// A set of lanes.
    type Mask: Copy;

    unsafe fn splat(v: f32) -> Self;
    /// `LANES` floats from `p`.
    unsafe fn load(p: *const f32) -> Self;
    /// Stores all lanes at `p`.
    unsafe fn store(p: *mut f32, v: Self);
    unsafe fn add(a: Self, b: Self) -> Self;
    unsafe fn sub(a: Self, b: Self) -> Self;
    unsafe fn mul(a: Self, b: Self) -> Self;
    unsafe fn div(a: Self, b: Self) -> Self;
    /// `a * b + c`, rounded once.
    unsafe fn mul_add(a: Self, b: Self, c: Self) -> Self;
    /// `a > b ? a : b` per lane, so `b` when either is NaN (`vmaxps`).
    unsafe fn max(a: Self, b: Self) -> Self;
    /// `a < b ? a : b` per lane, so `b` when either is NaN (`vminps`).
    unsafe fn min(a: Self, b: Self) -> Self;
    unsafe fn sqrt(a: Self) -> Self;
    unsafe fn abs(a: Self) -> Self;
    /// `magnitude`'s absolute value with `sign`'s sign bit.
    unsafe fn copy_sign(magnitude: Self, sign: Self) -> Self;
    /// To the nearest integer, ties to even.
    unsafe fn round(a: Self) -> Self;
    /// To the integer below.
    unsafe fn floor(a: Self) -> Self;
    /// The lanes where `a < b` (false where either is NaN).
    unsafe fn less(a: Self, b: Self) -> Self::Mask;
    /// The lanes holding NaN.
    unsafe fn is_nan(a: Self) -> Self::Mask;
    /// `if_in` in the lanes of `mask`, `other` elsewhere.
    unsafe fn select(mask: Self::Mask, if_in: Self, other: Self) -> Self;
    /// `2^n` for integral `n` in `-126..=127`.
    unsafe fn pow2(n: Self) -> Self;
    /// `2^(b - 127)` from a sum `k = ROUNDER + b` (see [`ROUNDER`]) with
    /// integral `b` in `1..=254`: `k`'s low significand bits are `b`, and
    /// shifted by 23 they are the exponent field of the result.
    unsafe fn pow2_of_rounded(k: Self) -> Self;
    /// Whether any lane of `mask` is in the set.
    unsafe fn any(mask: Self::Mask) -> bool;
    /// `p * 2^n` rounded once, for `p` in `[0.5, 2]` and integral `n` in
    /// `-152..=128`: by default in two exact-then-rounded halves.
    #[inline(always)]
    unsafe fn scale(p: Self, n: Self) -> Self {
        let half = Self::floor(Self::mul(n, Self::splat(0.5)));
        Self::mul(Self::mul(p, Self::pow2(half)), Self::pow2(Self::sub(n, half)))
    }
    /// For a normal positive `x`: its significand in `[1, 2)` and its
    /// exponent, as floats.
    unsafe fn split_exponent(x: Self) -> (Self, Self);
    /// [`exp`]'s last step, from [`reduce`]'s parts with shift 1 (`p =
    /// e^r - 1`, `pow2 = 2^(n-1)`): `(2 + 2p) 2^(n-1)`, exact where the
    /// result is normal; where some lane's is subnormal, [`MathLanes::scale`]
    /// rounds `(1 + p) 2^n` once instead. A vector whose `scale` is one
    /// instruction takes it for every lane: the same bits (`2 + 2p` is
    /// `1 + p` doubled, exactly), without the test and the branch.
    #[inline(always)]
    unsafe fn exp_scaled(p: Self, n: Self, pow2: Self) -> Self {
        if Self::any(Self::less(n, Self::splat(-125.0))) {
            return Self::scale(Self::add(p, Self::splat(1.0)), n);
        }
        scaled(Reduced { n, scale: pow2, p })
    }
}

/// The polynomial with coefficients `c` (lowest degree first) at `x`.
#[inline(always)]
unsafe fn horner<V: MathLanes>(c: &[f32], x: V) -> V {
    let mut acc = V::splat(c[c.len() - 1]);
    for &k in c[..c.len() - 1].iter().rev() {
        acc = V::mul_add(acc, x, V::splat(k));
    }
    acc
}

/// `ln 2` split so that `n * LN2_HI` is exact for the `n` of [`exp`].
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

/// `1.5 * 2^23`: a float `t` with `|t| < 2^22` added to it rounds to the
/// integer nearest `t` (ties to even), and the sum's low significand bits
/// hold that integer (plus `2^22`), so one addition rounds `x / ln 2` and
/// gives the bits of `2^n` ([`MathLanes::pow2_of_rounded`]).
pub const ROUNDER: f32 = 12_582_912.0;

/// `(e^r - 1 - r) / r²` on `[-ln2/2, ln2/2]`.
const EXP: [f32; 5] = [0.5, 0.166_665_77, 0.041_666_555, 0.008_363_173, 0.001_392_617_6];

/// `x` as `n ln2 + r`, `n` integral: `n`, `2^(n - shift)` and `e^r - 1`.
struct Reduced<V> {
    n: V,
    scale: V,
    p: V,
}

/// The range reduction of the exponentials, for an `x` its caller has
/// bounded (NaN gives NaN parts): `n` is `x / ln 2` rounded to an integer
/// by one fused `x * log2(e) + ROUNDER + 127 - shift`, whose bits give
/// `2^(n - shift)` where `n - shift` is in `-126..=127` (`shift` is 0 or 1).
#[inline(always)]
unsafe fn reduce<V: MathLanes>(x: V, shift: f32) -> Reduced<V> {
    let biased = ROUNDER + 127.0 - shift;
    let k = V::mul_add(x, V::splat(core::f32::consts::LOG2_E), V::splat(biased));
    let n = V::sub(k, V::splat(biased));
    let r = V::mul_add(n, V::splat(-LN2_HI), x);
    let r = V::mul_add(n, V::splat(-LN2_LO), r);
    let p = V::mul_add(horner(&EXP, r), V::mul(r, r), r);
    Reduced { n, scale: V::pow2_of_rounded(k), p }
}

/// `x` clamped to `[lo, hi]`. The bounds come first in `max` and `min`,
/// which return their second operand on NaN, so NaN passes.
#[inline(always)]
unsafe fn clamp<V: MathLanes>(x: V, lo: f32, hi: f32) -> V {
    V::min(V::splat(hi), V::max(V::splat(lo), x))
}

/// `e^x` from [`reduce`] with shift 1 where the result is normal or
/// overflows: `2 e^r` times `2^(n-1)`, one exact product.
#[inline(always)]
unsafe fn scaled<V: MathLanes>(e: Reduced<V>) -> V {
    V::mul(V::mul_add(e.p, V::splat(2.0), V::splat(2.0)), e.scale)
}

/// `e^x` for `x` in `[-86, 88]`, where it is normal: [`exp`]'s bits
/// without its clamp and the subnormal scaling.
#[inline(always)]
unsafe fn exp_normal<V: MathLanes>(x: V) -> V {
    scaled(reduce(x, 1.0))
}

/// `e^x`: `x = n ln2 + r`, `e^r` by polynomial, then scaled by `2^n`
/// rounding once ([`MathLanes::exp_scaled`]).
#[inline(always)]
pub unsafe fn exp<V: MathLanes>(x: V) -> V {
    let e = reduce(clamp(x, -104.0, 89.0), 1.0);
    V::exp_scaled(e.p, e.n, e.scale)
}

/// `(ln((1+s)/(1-s)) - 2s) / s³` as a polynomial in `s²`, for `|s| <=
/// (√2-1)/(√2+1)`.
const LOG: [f32; 4] = [0.666_666_7, 0.400_001_2, 0.285_508_2, 0.233_304_67];

/// `ln x`: `x = m 2^e` with `m` in `[√½, √2)`, and `ln m = 2 atanh(s)`
/// with `s = (m-1)/(m+1)`.
#[inline(always)]
pub unsafe fn log<V: MathLanes>(x: V) -> V {
    let subnormal = V::less(x, V::splat(f32::MIN_POSITIVE));
    let scaled = V::select(subnormal, V::mul(x, V::splat(8_388_608.0)), x);
    let (m, e) = V::split_exponent(scaled);
    let e = V::sub(e, V::select(subnormal, V::splat(23.0), V::splat(0.0)));
    let high = V::less(V::splat(core::f32::consts::SQRT_2), m);
    let m = V::select(high, V::mul(m, V::splat(0.5)), m);
    let e = V::select(high, V::add(e, V::splat(1.0)), e);
    let ln_m = ln_1p_near_zero(V::sub(m, V::splat(1.0)));
    let y = V::mul_add(e, V::splat(LN2_HI), V::mul_add(e, V::splat(LN2_LO), ln_m));
    let y = V::select(V::less(V::splat(f32::MAX), x), x, y);
    let not_positive = V::select(V::less(x, V::splat(0.0)), V::splat(f32::NAN), V::splat(f32::NEG_INFINITY));
    let y = V::select(V::less(x, V::splat(f32::from_bits(1))), not_positive, y);
    V::select(V::is_nan(x), x, y)
}

/// `ln(1 + f)` for `f` in `[√½ - 1, √2 - 1]`, as `2 atanh(s)` with `s = f /
/// (f + 2)`.
#[inline(always)]
unsafe fn ln_1p_near_zero<V: MathLanes>(f: V) -> V {
    let s = V::div(f, V::add(f, V::splat(2.0)));
    let s2 = V::mul(s, s);
    V::mul_add(horner(&LOG, s2), V::mul(s2, s), V::add(s, s))
}

/// `tanh(x) / x` as `P(x²) / Q(x²)` on `[-9, 9]`, fitted by `tests/scripts/fit_tanh.py`
/// (weighted least squares toward minimax relative error, 7e-9 in f64,
/// coefficients rounded to f32). At 8.5 the quotient rounds to 1, and
/// beyond it tanh is within 1.4 ulp of 1.
const TANH_P: [f32; 7] =
    [1.0, 0.130_859_51, 0.003_106_088, 1.117_561_8e-5, -2.030_585_5e-8, 5.313_71e-11, -8.573_094e-14];
const TANH_Q: [f32; 4] = [1.0, 0.464_192_8, 0.024_503_766, 2.549_190_8e-4];

/// `tanh x` as `x P(x²) / Q(x²)` with `x` clamped to `[-8.5, 8.5]`: eleven
/// fused operations and one division, about half of what a tanh from
/// `e^{2|x|} - 1` costs, for the quotient's rounding near 1 (5 ulp at
/// worst). NaN passes the clamp and the rest; `-0` and tiny `x` come out
/// as themselves (`P(0) = Q(0) = 1`).
#[inline(always)]
pub unsafe fn tanh<V: MathLanes>(x: V) -> V {
    let x = clamp(x, -8.5, 8.5);
    let s = V::mul(x, x);
    V::div(V::mul(x, horner(&TANH_P, s)), horner(&TANH_Q, s))
}

/// `1 / (1 + e^-x)`, as `e^x / (1 + e^x)` below zero so that it keeps its
/// precision down to the subnormals.
#[inline(always)]
pub unsafe fn sigmoid<V: MathLanes>(x: V) -> V {
    let e = exp(V::sub(V::splat(0.0), V::abs(x)));
    let numerator = V::select(V::less(x, V::splat(0.0)), e, V::splat(1.0));
    V::div(numerator, V::add(V::splat(1.0), e))
}

/// `erf(t) / t` as a polynomial in `t²`, for `|t| < 0.921875`.
const ERF: [f32; 7] = [
    core::f32::consts::FRAC_2_SQRT_PI,
    -0.376_126_34,
    0.112_837,
    -0.026_859_592,
    0.005_201_467,
    -8.147_202e-4,
    8.387_591e-5,
];
/// `ln erfc(t)` for `t` in `[0.921875, 3.925]`.
const LN_ERFC: [f32; 10] = [
    3.508_907e-4,
    -1.130_388_8,
    -0.631_493_9,
    -0.110_475_9,
    0.026_711_63,
    -0.004_896_169,
    6.380_596e-4,
    -5.380_118e-5,
    2.458_867e-6,
    -3.766_172e-8,
];

/// `erf x`: a polynomial below 0.921875 and `1 - e^{p(|x|)}` above, with
/// `|x|` capped at 3.925, where `1 - erfc` already rounds to 1. The cap
/// puts the bound first in `min`, so NaN passes it and the rest.
#[inline(always)]
pub unsafe fn erf<V: MathLanes>(x: V) -> V {
    let a = V::abs(x);
    let small = V::mul(horner(&ERF, V::mul(a, a)), a);
    let middle = V::sub(V::splat(1.0), exp_normal(horner(&LN_ERFC, V::min(V::splat(3.925), a))));
    V::copy_sign(V::select(V::less(a, V::splat(0.921_875)), small, middle), x)
}

/// `ln(1 + t)` for `t >= 0`: without forming `1 + t` where `t` is small.
#[inline(always)]
unsafe fn ln_1p<V: MathLanes>(t: V) -> V {
    let small = V::less(t, V::splat(core::f32::consts::SQRT_2 - 1.0));
    V::select(small, ln_1p_near_zero(t), log(V::add(V::splat(1.0), t)))
}

/// `e^x - 1`: with `x = n ln2 + r` as in [`exp`], `2^n (e^r - 1) + (2^n - 1)`
/// in one rounding; above 80 the 1 is below `e^x`'s last place.
#[inline(always)]
pub unsafe fn exp_m1<V: MathLanes>(x: V) -> V {
    let e = reduce(clamp(x, -20.0, 80.0), 0.0);
    let y = V::mul_add(e.scale, e.p, V::sub(e.scale, V::splat(1.0)));
    V::select(V::less(V::splat(80.0), x), exp(x), y)
}

/// `ln(1 + e^x)`, as `max(x, 0) + ln(1 + e^-|x|)`.
#[inline(always)]
pub unsafe fn softplus<V: MathLanes>(x: V) -> V {
    let tail = ln_1p(exp(V::sub(V::splat(0.0), V::abs(x))));
    let y = V::add(V::max(x, V::splat(0.0)), tail);
    V::select(V::is_nan(x), x, y)
}

/// `x tanh(softplus(x))`.
#[inline(always)]
pub unsafe fn mish<V: MathLanes>(x: V) -> V {
    V::mul(x, tanh(softplus(x)))
}

/// `x Φ(x) = x/2 (1 + erf(x / √2))`.
#[inline(always)]
pub unsafe fn gelu<V: MathLanes>(x: V) -> V {
    let half = V::mul(x, V::splat(0.5));
    V::mul_add(half, erf(V::mul(x, V::splat(core::f32::consts::FRAC_1_SQRT_2))), half)
}

/// GELU's tanh form: `x/2 (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
#[inline(always)]
pub unsafe fn gelu_tanh<V: MathLanes>(x: V) -> V {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let half = V::mul(x, V::splat(0.5));
    let cubic = V::mul_add(V::mul(x, x), V::splat(0.044_715 * SQRT_2_OVER_PI), V::splat(SQRT_2_OVER_PI));
    V::mul_add(half, tanh(V::mul(x, cubic)), half)
}

/// `x` to the constant power `e`: products for the small integral
/// powers and a square root for 0.5, else `e^{e ln|x|}` with the sign
/// of an odd power (NaN for a negative base and a fractional power);
/// `x^0 = 1`.
#[inline(always)]
pub unsafe fn power<V: MathLanes>(x: V, e: f32) -> V {
    match e {
        0.0 => V::splat(1.0),
        1.0 => x,
        2.0 => V::mul(x, x),
        3.0 => V::mul(V::mul(x, x), x),
        -1.0 => V::div(V::splat(1.0), x),
        0.5 => V::add(V::sqrt(x), V::splat(0.0)),
        _ => {
            let magnitude = exp(V::mul(V::splat(e), log(V::abs(x))));
            let negative = V::less(x, V::splat(0.0));
            if libm::floorf(e) != e {
                V::select(negative, V::splat(f32::NAN), magnitude)
            } else if libm::fmodf(e, 2.0) != 0.0 {
                V::copy_sign(magnitude, x)
            } else {
                magnitude
            }
        }
    }
}

/// One f32: the lane width of a row's tail, and of targets without
/// vector kernels. Its operations are libm's correctly rounded ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scalar(pub f32);

impl MathLanes for Scalar {
    const LANES: usize = 1;
    type Mask = bool;

    #[inline(always)]
    unsafe fn splat(v: f32) -> Scalar {
        Scalar(v)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Scalar {
        Scalar(p.read())
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Scalar) {
        p.write(v.0)
    }
    #[inline(always)]
    unsafe fn add(a: Scalar, b: Scalar) -> Scalar {
        Scalar(a.0 + b.0)
    }
    #[inline(always)]
    unsafe fn sub(a: Scalar, b: Scalar) -> Scalar {
        Scalar(a.0 - b.0)
    }
    #[inline(always)]
    unsafe fn mul(a: Scalar, b: Scalar) -> Scalar {
        Scalar(a.0 * b.0)
    }
    #[inline(always)]
    unsafe fn div(a: Scalar, b: Scalar) -> Scalar {
        Scalar(a.0 / b.0)
    }
    #[inline(always)]
    unsafe fn mul_add(a: Scalar, b: Scalar, c: Scalar) -> Scalar {
        Scalar(libm::fmaf(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn max(a: Scalar, b: Scalar) -> Scalar {
        if a.0 > b.0 {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    unsafe fn min(a: Scalar, b: Scalar) -> Scalar {
        if a.0 < b.0 {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    unsafe fn sqrt(a: Scalar) -> Scalar {
        Scalar(libm::sqrtf(a.0))
    }
    #[inline(always)]
    unsafe fn abs(a: Scalar) -> Scalar {
        Scalar(f32::from_bits(a.0.to_bits() & 0x7fff_ffff))
    }
    #[inline(always)]
    unsafe fn copy_sign(magnitude: Scalar, sign: Scalar) -> Scalar {
        Scalar(f32::from_bits(magnitude.0.to_bits() & 0x7fff_ffff | sign.0.to_bits() & 0x8000_0000))
    }
    #[inline(always)]
    unsafe fn round(a: Scalar) -> Scalar {
        Scalar(libm::rintf(a.0))
    }
    #[inline(always)]
    unsafe fn floor(a: Scalar) -> Scalar {
        Scalar(libm::floorf(a.0))
    }
    #[inline(always)]
    unsafe fn less(a: Scalar, b: Scalar) -> bool {
        a.0 < b.0
    }
    #[inline(always)]
    unsafe fn is_nan(a: Scalar) -> bool {
        a.0.is_nan()
    }
    #[inline(always)]
    unsafe fn any(mask: bool) -> bool {
        mask
    }
    #[inline(always)]
    unsafe fn select(mask: bool, if_in: Scalar, other: Scalar) -> Scalar {
        if mask {
            if_in
        } else {
            other
        }
    }
    #[inline(always)]
    unsafe fn pow2(n: Scalar) -> Scalar {
        Scalar(f32::from_bits(((n.0 as i32 + 127) as u32) << 23))
    }
    #[inline(always)]
    unsafe fn pow2_of_rounded(k: Scalar) -> Scalar {
        Scalar(f32::from_bits(k.0.to_bits() << 23))
    }
    #[inline(always)]
    unsafe fn split_exponent(x: Scalar) -> (Scalar, Scalar) {
        let bits = x.0.to_bits();
        let exponent = (bits >> 23) as i32 - 127;
        (Scalar(f32::from_bits(bits & 0x007f_ffff | 0x3f80_0000)), Scalar(exponent as f32))
    }
}

/// A function of lanes named as a type, so that one call can run it at
/// whichever width the CPU has ([`crate::isa::choose::map_in_place`]).
pub trait LaneFunction {
    /// # Safety
    /// `V`'s instructions are supported.
    unsafe fn of<V: MathLanes>(x: V) -> V;
}

/// [`sigmoid`] as a [`LaneFunction`].
pub struct Sigmoid;
/// [`tanh`] as a [`LaneFunction`].
pub struct Tanh;
/// SiLU, `x * sigmoid(x)`, as a [`LaneFunction`].
pub struct Silu;

impl LaneFunction for Sigmoid {
    #[inline(always)]
    unsafe fn of<V: MathLanes>(x: V) -> V {
        sigmoid(x)
    }
}

impl LaneFunction for Tanh {
    #[inline(always)]
    unsafe fn of<V: MathLanes>(x: V) -> V {
        tanh(x)
    }
}

impl LaneFunction for Silu {
    #[inline(always)]
    unsafe fn of<V: MathLanes>(x: V) -> V {
        V::mul(x, sigmoid(x))
    }
}

/// Lanes of the widest [`MathLanes`].
pub(crate) const MAX_LANES: usize = 16;

/// `xs[i] = F(xs[i])` in vectors `V`; the tail that fills no whole vector
/// goes through a zero-padded copy, so it gets the same instructions.
///
/// # Safety
/// `V`'s instructions are supported.
#[inline(always)]
pub unsafe fn map_in_place<V: MathLanes, F: LaneFunction>(xs: &mut [f32]) {
    const { assert!(V::LANES <= MAX_LANES) };
    let body = xs.len() / V::LANES * V::LANES;
    let p = xs.as_mut_ptr();
    for i in (0..body).step_by(V::LANES) {
        V::store(p.add(i), F::of(V::load(p.add(i))));
    }
    let tail = &mut xs[body..];
    if !tail.is_empty() {
        let mut padded = [0.0f32; MAX_LANES];
        padded[..tail.len()].copy_from_slice(tail);
        V::store(padded.as_mut_ptr(), F::of(V::load(padded.as_ptr())));
        tail.copy_from_slice(&padded[..tail.len()]);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    /// The distance from `y` to the exact `want` in units of `want`'s last
    /// place in f32.
    fn ulps(y: f32, want: f64) -> f64 {
        if y.is_nan() || want.is_nan() {
            return if y.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
        }
        if y as f64 == want || y == want as f32 {
            return 0.0;
        }
        let rounded = want as f32;
        let ulp = (f32::from_bits(rounded.abs().to_bits() + 1) - rounded.abs()) as f64;
        (y as f64 - want).abs() / ulp.max(f32::from_bits(1) as f64)
    }

    /// A function under test, and its f64 reference.
    type Approximation = unsafe fn(Scalar) -> Scalar;
    type Reference = fn(f64) -> f64;

    /// The worst error of `f` against `reference` over `count` points
    /// spread across `lo..hi` (where the function is not yet constant),
    /// over every float of either sign whose bits step by 997 (the whole
    /// range: subnormals, huge arguments, infinities), and at NaN and the
    /// edge values.
    fn worst(f: Approximation, reference: Reference, lo: f32, hi: f32) -> f64 {
        let count = 200_000;
        let points = (0..=count).map(|i| lo + (hi - lo) * (i as f32 / count as f32));
        let whole_range = (0..=0x7f80_0000u32).step_by(997).flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)]);
        let edges = [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::MIN_POSITIVE, f32::from_bits(1), 1e-30, -1e-30];
        let all = points.chain(whole_range).chain(edges).chain([f32::NAN, -f32::NAN]);
        all.map(|x| ulps(unsafe { f(Scalar(x)) }.0, reference(x as f64))).fold(0.0, f64::max)
    }

    #[test]
    fn functions_are_within_three_ulp() {
        let sigmoid_ref = |x: f64| 1.0 / (1.0 + libm::exp(-x));
        let softplus_ref = |x: f64| x.max(0.0) + libm::log1p(libm::exp(-x.abs()));
        let cases: [(&str, Approximation, Reference, f32, f32, f64); 8] = [
            ("exp", exp, libm::exp, -104.0, 89.0, 3.0),
            ("tanh", tanh, libm::tanh, -10.0, 10.0, 5.5),
            ("sigmoid", sigmoid, sigmoid_ref, -100.0, 40.0, 3.0),
            ("erf", erf, libm::erf, -5.0, 5.0, 3.0),
            ("exp_m1", exp_m1, libm::expm1, -20.0, 20.0, 3.0),
            ("softplus", softplus, softplus_ref, -80.0, 80.0, 3.0),
            ("log", log, libm::log, 0.0, 1e4, 3.0),
            ("log of small", log, libm::log, 0.0, 1e-3, 3.0),
        ];
        for (name, f, reference, lo, hi, bound) in cases {
            let error = worst(f, reference, lo, hi);
            std::println!("{name}: at most {error:.2} ulp");
            assert!(error <= bound, "{name}: {error} ulp");
        }
    }

    #[test]
    fn log_covers_the_whole_range() {
        for bits in (1..0x7f80_0000u32).step_by(4093) {
            let x = f32::from_bits(bits);
            let error = ulps(unsafe { log(Scalar(x)) }.0, libm::log(x as f64));
            assert!(error <= 2.5, "log({x:e}): {error} ulp");
        }
    }

    #[test]
    fn special_values_give_the_limits() {
        let at = |f: unsafe fn(Scalar) -> Scalar, x: f32| unsafe { f(Scalar(x)) }.0;
        assert_eq!(at(exp, f32::NEG_INFINITY), 0.0);
        assert_eq!(at(exp, f32::INFINITY), f32::INFINITY);
        assert_eq!(at(exp, 100.0), f32::INFINITY);
        assert_eq!(at(log, 0.0), f32::NEG_INFINITY);
        assert!(at(log, -1.0).is_nan());
        assert_eq!(at(log, f32::INFINITY), f32::INFINITY);
        assert_eq!(at(tanh, f32::INFINITY), 1.0);
        assert_eq!(at(tanh, -30.0), -1.0);
        assert_eq!(at(erf, f32::NEG_INFINITY), -1.0);
        assert_eq!(at(sigmoid, f32::NEG_INFINITY), 0.0);
        assert_eq!(at(softplus, f32::INFINITY), f32::INFINITY);
        let all: [unsafe fn(Scalar) -> Scalar; 10] =
            [exp, log, tanh, sigmoid, erf, exp_m1, softplus, mish, gelu, gelu_tanh];
        for f in all {
            assert!(at(f, f32::NAN).is_nan());
        }
    }

    #[test]
    fn gelu_and_mish_match_their_definitions() {
        for i in -400..=400 {
            let x = i as f32 / 40.0;
            let xd = x as f64;
            let gelu_ref = 0.5 * xd * (1.0 + libm::erf(xd / core::f64::consts::SQRT_2));
            let tanh_ref = 0.5 * xd * (1.0 + libm::tanh(0.797_884_560_802_865_4 * (xd + 0.044715 * xd * xd * xd)));
            let mish_ref = xd * libm::tanh(xd.max(0.0) + libm::log1p(libm::exp(-xd.abs())));
            for (name, y, want) in [
                ("gelu", unsafe { gelu(Scalar(x)) }.0, gelu_ref),
                ("gelu_tanh", unsafe { gelu_tanh(Scalar(x)) }.0, tanh_ref),
                ("mish", unsafe { mish(Scalar(x)) }.0, mish_ref),
            ] {
                assert!((y as f64 - want).abs() <= 1e-6 * (1.0 + want.abs()), "{name}({x}) = {y}, want {want}");
            }
        }
    }

    /// Every level gives each element one lane's bits, in the body or the
    /// tail of a slice, at any length.
    #[test]
    fn map_in_place_is_the_same_function_everywhere() {
        use crate::generic::test_util::testable_isas;
        use crate::isa::choose::map_in_place;
        let xs: [f32; 53] = core::array::from_fn(|i| (i as f32 - 26.0) * 0.45);
        let one_lane = |x: f32, f: unsafe fn(Scalar) -> Scalar| unsafe { f(Scalar(x)).0 };
        for isa in testable_isas() {
            for len in [0, 1, 7, 16, 17, 53] {
                let (mut s, mut t) = (xs, xs);
                map_in_place::<Sigmoid>(isa, &mut s[..len]);
                map_in_place::<Tanh>(isa, &mut t[..len]);
                for (i, &x) in xs[..len].iter().enumerate() {
                    assert_eq!(s[i].to_bits(), one_lane(x, sigmoid).to_bits(), "{isa:?} sigmoid({x})");
                    assert_eq!(t[i].to_bits(), one_lane(x, tanh).to_bits(), "{isa:?} tanh({x})");
                }
            }
        }
    }
}
