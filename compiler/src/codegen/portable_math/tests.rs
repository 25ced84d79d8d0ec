//! Measures every function of [`apply`], in both compute types, against
//! libm: the code under test is what [`apply`] emits, JIT-compiled.
//!
//! Error is in ulps of the correctly rounded result. An f32 result is
//! compared with libm's f64 one, exact to far below an f32 ulp, so its
//! bound is against the true value; an f64 result is compared with libm's
//! f64 one, so its bound is relative to libm (itself within about an ulp).
//!
//! The bounds are the maxima of a one-off run with `F32_STRIDE = 1` (every
//! f32) and `F64_SAMPLES = 1 << 27`, about 8 minutes of a release build on
//! 2 cores; the regular sample, a few seconds, finds no more.

use super::{apply, apply_binary};
use crate::codegen::{types, FunctionBuilder, InstBuilder, Value};
use crate::ir::DType;
use crate::jit::ScalarFn;
use std::f64::consts::{FRAC_1_SQRT_2, LN_2, SQRT_2};

const INF: f64 = f64::INFINITY;
const NAN: f64 = f64::NAN;

/// A function of [`apply`], its libm reference, the most ulps it may be
/// off in f32 and in f64 (the table in `portable_math`'s module doc), and
/// the largest `|x|` it is measured at (sin, cos and tan reduce exactly
/// only below `2^27 π/2`).
struct Function {
    name: &'static str,
    reference: fn(f64) -> f64,
    f32_ulps: f64,
    f64_ulps: f64,
    domain: f64,
}

impl Function {
    const fn new(name: &'static str, reference: fn(f64) -> f64, f32_ulps: f64, f64_ulps: f64) -> Function {
        Function { name, reference, f32_ulps, f64_ulps, domain: INF }
    }

    const fn within(self, domain: f64) -> Function {
        Function { domain, ..self }
    }
}

/// libm's acosh, but NaN below 1 (the `libm` crate's is not for `x <= -2`).
fn acosh_reference(x: f64) -> f64 {
    if x < 1.0 {
        f64::NAN
    } else {
        libm::acosh(x)
    }
}

/// Where sin, cos and tan are measured: below `2^27 π/2`.
const TRIG_DOMAIN: f64 = 2.1e8;

const FUNCTIONS: [Function; 17] = [
    Function::new("exp", libm::exp, 0.5, 2.0),
    Function::new("log", libm::log, 0.5, 2.0),
    Function::new("tanh", libm::tanh, 0.5, 4.0),
    Function::new("expm1", libm::expm1, 0.5, 2.0),
    Function::new("log1p", libm::log1p, 0.5, 3.0),
    Function::new("erf", libm::erf, 0.5, 8.0),
    Function::new("sin", libm::sin, 0.5, 2.0).within(TRIG_DOMAIN),
    Function::new("cos", libm::cos, 0.5, 2.0).within(TRIG_DOMAIN),
    Function::new("tan", libm::tan, 0.5, 3.0).within(TRIG_DOMAIN),
    Function::new("asin", libm::asin, 0.5, 6.0),
    Function::new("acos", libm::acos, 0.5, 4.0),
    Function::new("atan", libm::atan, 0.5, 5.0),
    Function::new("sinh", libm::sinh, 0.5, 3.0),
    Function::new("cosh", libm::cosh, 0.5, 2.0),
    Function::new("asinh", libm::asinh, 0.5, 2.0),
    Function::new("acosh", acosh_reference, 0.5, 2.0),
    Function::new("atanh", libm::atanh, 0.5, 4.0),
];

/// A compute type: what results are rounded to and how an ulp is measured.
#[derive(Clone, Copy, Debug)]
struct Precision {
    dtype: DType,
    /// The ulp of 1.
    epsilon: f64,
    /// Exponent of the smallest normal number.
    min_exponent: i32,
}

const F32: Precision = Precision { dtype: DType::F32, epsilon: f32::EPSILON as f64, min_exponent: -126 };
const F64: Precision = Precision { dtype: DType::F64, epsilon: f64::EPSILON, min_exponent: -1022 };

impl Precision {
    fn round(self, v: f64) -> f64 {
        match self.dtype {
            DType::F32 => v as f32 as f64,
            _ => v,
        }
    }

    /// The spacing of this type's values around a finite `v`: `2^e epsilon`
    /// for `|v|` in `[2^e, 2^(e+1))`, the subnormal spacing below.
    fn ulp(self, v: f64) -> f64 {
        let e = ((v.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        f64::from_bits(((e.max(self.min_exponent) + 1023) as u64) << 52) * self.epsilon
    }

    /// The value whose bit pattern (in this type) is `k` past `v`'s.
    fn step(self, v: f64, k: i64) -> f64 {
        match self.dtype {
            DType::F32 => f32::from_bits((v as f32).to_bits().wrapping_add_signed(k as i32)) as f64,
            _ => f64::from_bits(v.to_bits().wrapping_add_signed(k)),
        }
    }

    /// `name` as [`apply`] computes it in this type. The compiled function
    /// takes and returns f64; f32 values pass through it exactly.
    fn compile(self, name: &str) -> ScalarFn {
        self.compile_with(|b, dtype, x| apply(b, name, dtype, x).expect(name))
    }

    /// `name(x, y)` as [`apply_binary`] computes it in this type, for a fixed `y`.
    fn compile_binary(self, name: &str, y: f64) -> ScalarFn {
        self.compile_with(|b, dtype, x| {
            let y = match dtype {
                DType::F32 => b.ins().f32const(y as f32),
                _ => b.ins().f64const(y),
            };
            apply_binary(b, name, dtype, x, y).expect(name)
        })
    }

    /// What `body` computes in this type, taking and returning f64.
    fn compile_with(self, body: impl FnOnce(&mut FunctionBuilder, DType, Value) -> Value) -> ScalarFn {
        ScalarFn::compile(|b, x| match self.dtype {
            DType::F32 => {
                let x = b.ins().fdemote(types::F32, x);
                let y = body(b, DType::F32, x);
                b.ins().fpromote(types::F64, y)
            }
            _ => body(b, DType::F64, x),
        })
        .expect("compiles")
    }

    /// The arguments to measure: a sample of the whole range and every
    /// value near [`POINTS`].
    fn inputs(self) -> Box<dyn Iterator<Item = f64>> {
        let near = POINTS
            .iter()
            .flat_map(|&p| [p, -p])
            .flat_map(move |p| (-NEIGHBOURHOOD..=NEIGHBOURHOOD).map(move |k| self.step(p, k)));
        match self.dtype {
            DType::F32 => {
                Box::new((0..=u32::MAX / F32_STRIDE).map(|k| f32::from_bits(k * F32_STRIDE) as f64).chain(near))
            }
            _ => Box::new(f64_sample().chain(near)),
        }
    }
}

/// The f32 bit patterns measured are every `F32_STRIDE`-th (33.8 million):
/// a prime, so every exponent and a spread of mantissas are hit.
const F32_STRIDE: u32 = 127;

/// How many random f64 bit patterns are measured (see [`f64_sample`]).
const F64_SAMPLES: usize = 1 << 22;

/// How many values of a type on each side of each of [`POINTS`] are measured.
const NEIGHBOURHOOD: i64 = 1 << 12;

/// Where some function changes behaviour in some type (each also measured
/// negated): zero, the smallest normals, log's zero and where it folds
/// its mantissa, exp's reduction switching `n`, the ends of log1p's
/// series, exp's overflow, subnormal and underflow ends (f32, f64, then
/// its clamp), tanh rounding to 1 (f32, f64), the largest finite values
/// and infinity (whose neighbours past it are NaNs), erf's switch from
/// series to continued fraction and its rounding to 1 (f32, f64).
const POINTS: [f64; 25] = [
    0.0,
    f32::MIN_POSITIVE as f64,
    f64::MIN_POSITIVE,
    1.0,
    SQRT_2,
    0.5 * LN_2,
    SQRT_2 - 1.0,
    1.0 - FRAC_1_SQRT_2,
    88.722_839_355_468_75,
    87.336_544_750_553_1,
    103.972_077_083_991_8,
    709.782_712_893_384,
    708.396_418_532_264_1,
    745.133_219_101_941_1,
    710.0,
    746.0,
    9.010_913,
    19.061_547_465_398_5,
    f32::MAX as f64,
    f64::MAX,
    INF,
    NAN,
    2.0,
    3.919_206_3,
    5.921_587_195_794_507,
];

/// [`F64_SAMPLES`] f64 bit patterns from SplitMix64 with a fixed seed (the
/// same every run): half over the whole range, half with exponents in
/// `[-64, 10)`, where exp and tanh neither round to 1 nor saturate.
fn f64_sample() -> impl Iterator<Item = f64> {
    let mut state = 0x6f6e_6e78_635f_7061u64;
    (0..F64_SAMPLES).map(move |i| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        if i % 2 == 0 {
            f64::from_bits(z)
        } else {
            let exponent = 1023 - 64 + (z >> 52) % 74;
            f64::from_bits(z & 0x800f_ffff_ffff_ffff | exponent << 52)
        }
    })
}

/// How many ulps of `p` the result `got` is from `reference`, or `None`
/// when they do not match at all: a NaN or an infinity on one side only,
/// or two different infinities.
fn ulps(p: Precision, got: f64, reference: f64) -> Option<f64> {
    let expected = p.round(reference);
    if expected.is_nan() || got.is_nan() {
        return (expected.is_nan() && got.is_nan()).then_some(0.0);
    }
    if expected.is_infinite() || got.is_infinite() {
        return (got == expected).then_some(0.0);
    }
    Some((got - reference).abs() / p.ulp(expected))
}

/// Measures `function` in `p` over [`Precision::inputs`]; fails on a
/// mismatch or an error past the bound. (`--nocapture` shows the maxima.)
fn check(function: &Function, p: Precision) {
    let bound = match p.dtype {
        DType::F32 => function.f32_ulps,
        _ => function.f64_ulps,
    };
    measure(function.name, p, &p.compile(function.name), function.reference, bound, function.domain);
}

/// Measures `compiled` against `reference` in `p` over
/// [`Precision::inputs`], except where the result is within a factor 2 of
/// overflowing (where an error inside the bound may tip it over) and past
/// `|x| = domain`; fails on a mismatch or an error past `bound`.
fn measure(name: &str, p: Precision, compiled: &ScalarFn, reference: impl Fn(f64) -> f64, bound: f64, domain: f64) {
    let largest = match p.dtype {
        DType::F32 => f32::MAX as f64,
        _ => f64::MAX,
    };
    let (mut worst, mut at) = (0.0, 0.0);
    // NaN arguments stay in.
    for x in p.inputs().filter(|x| x.is_nan() || x.abs() <= domain) {
        let (got, reference) = (compiled.call(x), reference(x));
        if reference.abs() > largest / 2.0 && reference.is_finite() {
            continue;
        }
        let error =
            ulps(p, got, reference).unwrap_or_else(|| panic!("{name} {p:?}: {got:e} at {x:e}, expected {reference:e}"));
        if error > worst {
            (worst, at) = (error, x);
        }
    }
    eprintln!("{name} {:?}: {worst:.9} ulps at {at:e}", p.dtype);
    assert!(worst <= bound, "{name} {p:?}: {worst} ulps at {at:e}, bound {bound}");
}

fn check_both(name: &str) {
    let function = FUNCTIONS.iter().find(|f| f.name == name).expect("in FUNCTIONS");
    check(function, F32);
    check(function, F64);
}

#[test]
fn exp_is_within_its_bound() {
    check_both("exp");
}

#[test]
fn log_is_within_its_bound() {
    check_both("log");
}

#[test]
fn tanh_is_within_its_bound() {
    check_both("tanh");
}

#[test]
fn expm1_is_within_its_bound() {
    check_both("expm1");
}

#[test]
fn log1p_is_within_its_bound() {
    check_both("log1p");
}

#[test]
fn erf_is_within_its_bound() {
    check_both("erf");
}

#[test]
fn trigonometric_functions_are_within_their_bounds() {
    for name in ["sin", "cos", "tan", "asin", "acos", "atan"] {
        check_both(name);
    }
}

#[test]
fn hyperbolic_functions_are_within_their_bounds() {
    for name in ["sinh", "cosh", "asinh", "acosh", "atanh"] {
        check_both(name);
    }
}

/// The exponents pow is measured at: squares and cubes, roots, reciprocals,
/// odd and fractional powers of both signs.
const POW_EXPONENTS: [f64; 9] = [2.0, 3.0, 0.5, -1.0, -2.5, 1.0 / 3.0, 7.0, 0.1, -0.75];

/// pow's bounds in ulps at [`POW_EXPONENTS`] (above the module doc's
/// figures, which the regular sample measures).
const POW_F32_ULPS: f64 = 0.501;
const POW_F64_ULPS: f64 = 2048.0;

#[test]
fn pow_is_within_its_bound() {
    for (p, bound) in [(F32, POW_F32_ULPS), (F64, POW_F64_ULPS)] {
        for y in POW_EXPONENTS {
            measure(&format!("pow(x, {y})"), p, &p.compile_binary("pow", y), |x| libm::pow(x, p.round(y)), bound, INF);
        }
    }
}

/// `(x, y, x^y)` that must be exact, sign of zero included, in both types.
const POW_SPECIAL: [(f64, f64, f64); 16] = [
    (NAN, 0.0, 1.0),
    (1.0, NAN, 1.0),
    (-1.0, INF, 1.0),
    (-1.0, -INF, 1.0),
    (NAN, 2.0, NAN),
    (2.0, NAN, NAN),
    (-2.0, 0.5, NAN),
    (-2.0, 3.0, -8.0),
    (-2.0, 2.0, 4.0),
    (-0.0, -1.0, -INF),
    (0.0, -1.0, INF),
    (-0.0, 3.0, -0.0),
    (0.0, 2.0, 0.0),
    (-INF, 0.5, INF),
    (-INF, -3.0, -0.0),
    (-2.0, 1e300, INF),
];

#[test]
fn pow_special_values_are_exact() {
    for p in [F32, F64] {
        for (x, y, want) in POW_SPECIAL {
            let got = p.compile_binary("pow", y).call(x);
            let want = p.round(want);
            let same = if want.is_nan() { got.is_nan() } else { got.to_bits() == want.to_bits() };
            assert!(same, "pow({x:e}, {y:e}) in {p:?} is {got:e}, not {want:e}");
        }
    }
}

/// Results that must be exact, sign of zero included, in both types.
const SPECIAL: [(&str, f64, f64); 41] = [
    ("exp", NAN, NAN),
    ("exp", INF, INF),
    ("exp", -INF, 0.0),
    ("exp", 0.0, 1.0),
    ("exp", -0.0, 1.0),
    ("exp", 1e3, INF),
    ("exp", -1e3, 0.0),
    ("log", NAN, NAN),
    ("log", 0.0, -INF),
    ("log", -0.0, -INF),
    ("log", -1.0, NAN),
    ("log", -INF, NAN),
    ("log", INF, INF),
    ("log", 1.0, 0.0),
    ("tanh", NAN, NAN),
    ("tanh", INF, 1.0),
    ("tanh", -INF, -1.0),
    ("tanh", 0.0, 0.0),
    ("tanh", -0.0, -0.0),
    ("tanh", 1e3, 1.0),
    ("tanh", -1e3, -1.0),
    ("expm1", NAN, NAN),
    ("expm1", INF, INF),
    ("expm1", -INF, -1.0),
    ("expm1", 0.0, 0.0),
    ("expm1", -0.0, -0.0),
    ("expm1", 1e3, INF),
    ("expm1", -1e3, -1.0),
    ("log1p", NAN, NAN),
    ("log1p", -1.0, -INF),
    ("log1p", -2.0, NAN),
    ("log1p", INF, INF),
    ("log1p", -INF, NAN),
    ("log1p", 0.0, 0.0),
    ("log1p", -0.0, -0.0),
    ("erf", NAN, NAN),
    ("erf", INF, 1.0),
    ("erf", -INF, -1.0),
    ("erf", 0.0, 0.0),
    ("erf", -0.0, -0.0),
    ("erf", 10.0, 1.0),
];

#[test]
fn special_values_are_exact() {
    for p in [F32, F64] {
        for (name, x, want) in SPECIAL {
            let got = p.compile(name).call(x);
            let same = if want.is_nan() { got.is_nan() } else { got.to_bits() == want.to_bits() };
            assert!(same, "{name}({x:e}) in {p:?} is {got:e}, not {want:e}");
        }
    }
}

/// The divisors fmod is measured at: of both signs, fractional, tiny,
/// huge, zero and infinite.
const FMOD_DIVISORS: [f64; 9] = [2.1, -3.4, 1e-3, 7.0, -0.75, 1e10, 0.0, INF, -INF];

#[test]
fn fmod_is_exact_for_f32() {
    for y in FMOD_DIVISORS {
        let y32 = F32.round(y);
        // Exact while the quotient stays below 2^29 (the module doc).
        let domain = if y32.is_infinite() { INF } else { y32.abs() * (1u64 << 29) as f64 };
        let compiled = F32.compile_binary("fmod", y);
        measure(&format!("fmod(x, {y})"), F32, &compiled, |x| libm::fmod(x, y32), 0.0, domain);
    }
}

/// Trigonometric and hyperbolic results that must be exact, sign of zero
/// included, in both types.
const TRIG_SPECIAL: [(&str, f64, f64); 27] = [
    ("sin", 0.0, 0.0),
    ("sin", -0.0, -0.0),
    ("sin", INF, NAN),
    ("sin", NAN, NAN),
    ("cos", 0.0, 1.0),
    ("cos", -INF, NAN),
    ("tan", -0.0, -0.0),
    ("tan", INF, NAN),
    ("asin", -0.0, -0.0),
    ("asin", 1.5, NAN),
    ("acos", 1.0, 0.0),
    ("acos", -1.5, NAN),
    ("atan", -0.0, -0.0),
    ("atan", NAN, NAN),
    ("sinh", -0.0, -0.0),
    ("sinh", INF, INF),
    ("sinh", -INF, -INF),
    ("cosh", 0.0, 1.0),
    ("cosh", -INF, INF),
    ("asinh", -0.0, -0.0),
    ("asinh", -INF, -INF),
    ("acosh", 1.0, 0.0),
    ("acosh", 0.5, NAN),
    ("acosh", INF, INF),
    ("atanh", -0.0, -0.0),
    ("atanh", 1.0, INF),
    ("atanh", -2.0, NAN),
];

#[test]
fn trigonometric_special_values_are_exact() {
    for p in [F32, F64] {
        for (name, x, want) in TRIG_SPECIAL {
            let got = p.compile(name).call(x);
            let same = if want.is_nan() { got.is_nan() } else { got.to_bits() == want.to_bits() };
            assert!(same, "{name}({x:e}) in {p:?} is {got:e}, not {want:e}");
        }
    }
}
