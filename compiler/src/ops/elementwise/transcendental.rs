//! Functions computed by the kernel library's libm wrappers
//! (`onnxc_exp`/`onnxc_expf`...) or, in portable mode, by the instruction
//! sequences of [`crate::codegen::portable_math`] where it has one: exp,
//! log, the trigonometric and hyperbolic functions, erf, Pow, and the
//! activations built from them (Softplus, Mish, Gelu).

use super::cast::cast;
use super::{fconst, Func, Operands};
use crate::codegen::kernels::{self, Kernel, F32, F64};
use crate::codegen::{InstBuilder, Lower, Value};
use crate::ir::DType;

/// A libm function of the kernel library: its name (as
/// [`crate::codegen::portable_math`] knows it) and its f32 and f64 kernels,
/// taking the arguments `A32` and `A64`.
#[derive(Clone, Copy)]
pub struct Libm<A32, A64> {
    name: &'static str,
    f32: Kernel<A32, F32>,
    f64: Kernel<A64, F64>,
}

/// A libm function of one argument.
pub type Unary = Libm<(F32,), (F64,)>;
/// A libm function of two arguments.
pub type Binary = Libm<(F32, F32), (F64, F64)>;

macro_rules! libm_functions {
    ($($arity:ident $name:ident: $f32:ident, $f64:ident;)*) => {
        /// The libm functions of the kernel library, named as in C.
        #[allow(non_upper_case_globals)]
        pub mod libm {
            use super::*;
            $(pub const $name: $arity = Libm { name: stringify!($name), f32: kernels::$f32, f64: kernels::$f64 };)*
        }
    };
}

libm_functions! {
    Unary exp: onnxc_expf, onnxc_exp;
    Unary log: onnxc_logf, onnxc_log;
    Unary tanh: onnxc_tanhf, onnxc_tanh;
    Unary erf: onnxc_erff, onnxc_erf;
    Unary sin: onnxc_sinf, onnxc_sin;
    Unary cos: onnxc_cosf, onnxc_cos;
    Unary tan: onnxc_tanf, onnxc_tan;
    Unary asin: onnxc_asinf, onnxc_asin;
    Unary acos: onnxc_acosf, onnxc_acos;
    Unary atan: onnxc_atanf, onnxc_atan;
    Unary sinh: onnxc_sinhf, onnxc_sinh;
    Unary cosh: onnxc_coshf, onnxc_cosh;
    Unary asinh: onnxc_asinhf, onnxc_asinh;
    Unary acosh: onnxc_acoshf, onnxc_acosh;
    Unary atanh: onnxc_atanhf, onnxc_atanh;
    Unary expm1: onnxc_expm1f, onnxc_expm1;
    Unary log1p: onnxc_log1pf, onnxc_log1p;
    Binary pow: onnxc_powf, onnxc_pow;
    Binary fmod: onnxc_fmodf, onnxc_fmod;
}

/// Computes `f(x)` in `dtype` (f64 or f32) through the kernel library (in
/// portable mode: through its Cranelift sequence, where
/// [`crate::codegen::portable_math`] has one).
pub fn unary(cx: &mut Lower, f: Unary, dtype: DType, x: Value) -> Result<Value, String> {
    if cx.portable() {
        if let Some(y) = crate::codegen::portable_math::apply(cx.b, f.name, dtype, x) {
            return Ok(y);
        }
    }
    if dtype == DType::F64 {
        cx.call(f.f64, (F64(x),))
    } else {
        cx.call(f.f32, (F32(x),))
    }
}

/// Computes `f(x, y)` in `dtype` (f64 or f32) through the kernel library
/// (in portable mode: through its Cranelift sequence, where
/// [`crate::codegen::portable_math`] has one).
pub fn binary(cx: &mut Lower, f: Binary, dtype: DType, x: Value, y: Value) -> Result<Value, String> {
    if cx.portable() {
        if let Some(z) = crate::codegen::portable_math::apply_binary(cx.b, f.name, dtype, x, y) {
            return Ok(z);
        }
    }
    if dtype == DType::F64 {
        cx.call(f.f64, (F64(x), F64(y)))
    } else {
        cx.call(f.f32, (F32(x), F32(y)))
    }
}

/// One emitter per libm function of one argument, named as the function.
macro_rules! libm_unary {
    ($($name:ident),*) => {$(
        pub fn $name(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
            unary(cx, libm::$name, o.dtype, o.x())
        }
    )*};
}

libm_unary!(exp, log, sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, tanh, erf);

/// log(1 + exp(x)).
pub fn softplus(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    softplus_of(cx, o.dtype, o.x())
}

fn softplus_of(cx: &mut Lower, t: DType, x: Value) -> Result<Value, String> {
    let e = unary(cx, libm::exp, t, x)?;
    unary(cx, libm::log1p, t, e)
}

/// x tanh(softplus(x)).
pub fn mish(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (t, x) = (o.dtype, o.x());
    let sp = softplus_of(cx, t, x)?;
    let th = unary(cx, libm::tanh, t, sp)?;
    Ok(cx.ins().fmul(x, th))
}

/// x (1 + erf(x / sqrt 2)) / 2, or with `tanh` the approximation
/// x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2.
pub fn gelu(cx: &mut Lower, func: Func, o: &Operands) -> Result<Value, String> {
    let Func::Gelu { tanh } = func else { return Err(format!("{func:?} is not Gelu")) };
    let (t, x) = (o.dtype, o.x());
    let half = fconst(cx, t, 0.5);
    let one = fconst(cx, t, 1.0);
    let inner = if tanh {
        let c = fconst(cx, t, (2.0 / std::f64::consts::PI).sqrt());
        let k = fconst(cx, t, 0.044715);
        let x2 = cx.ins().fmul(x, x);
        let x3 = cx.ins().fmul(x2, x);
        let kx3 = cx.ins().fmul(k, x3);
        let s = cx.ins().fadd(x, kx3);
        let s = cx.ins().fmul(c, s);
        unary(cx, libm::tanh, t, s)?
    } else {
        let c = fconst(cx, t, std::f64::consts::FRAC_1_SQRT_2);
        let s = cx.ins().fmul(x, c);
        unary(cx, libm::erf, t, s)?
    };
    let v = cx.ins().fadd(one, inner);
    let v = cx.ins().fmul(v, x);
    Ok(cx.ins().fmul(v, half))
}

/// Pow in f64 when either operand is f64, else in f32, whatever the
/// operands' types (integers too), the result cast back to the base's.
pub fn pow(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let t = o.dtype;
    let (e, e_type) = *o.args.get(1).ok_or("missing exponent")?;
    let compute = if t == DType::F64 || e_type == DType::F64 { DType::F64 } else { DType::F32 };
    let base = cast(cx, o.x(), t, compute)?;
    let exp = cast(cx, e, e_type, compute)?;
    let r = binary(cx, libm::pow, compute, base, exp)?;
    cast(cx, r, compute, t)
}
