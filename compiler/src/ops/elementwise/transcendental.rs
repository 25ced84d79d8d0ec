//! Functions computed by the kernel library's libm wrappers
//! (`onnxc_exp`/`onnxc_expf`...) or, in portable mode, by the instruction
//! sequences of [`crate::codegen::portable_math`] where it has one: exp,
//! log, the trigonometric and hyperbolic functions, erf, Pow, and the
//! activations built from them (Softplus, Mish, Gelu).

use super::cast::cast;
use super::{fconst, Func, Operands};
use crate::codegen::{InstBuilder, Lower, Value};
use crate::ir::DType;

/// Calls a libm-backed scalar function of the kernel library (in portable
/// mode: its Cranelift sequence, where [`crate::codegen::portable_math`] has one).
pub fn math(cx: &mut Lower, name: &str, dtype: DType, args: &[Value]) -> Result<Value, String> {
    if let (true, [x]) = (cx.portable(), args) {
        if let Some(y) = crate::codegen::portable_math::apply(cx.b, name, dtype, *x) {
            return Ok(y);
        }
    }
    let full = if dtype == DType::F64 { format!("onnxc_{name}") } else { format!("onnxc_{name}f") };
    cx.call(&full, args)?.ok_or_else(|| format!("{full} returns nothing"))
}

/// One emitter per libm function of one argument, named as the function.
macro_rules! libm_unary {
    ($($name:ident),*) => {$(
        pub fn $name(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
            math(cx, stringify!($name), o.dtype, &[o.x()])
        }
    )*};
}

libm_unary!(exp, log, sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, tanh, erf);

/// log(1 + exp(x)).
pub fn softplus(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    softplus_of(cx, o.dtype, o.x())
}

fn softplus_of(cx: &mut Lower, t: DType, x: Value) -> Result<Value, String> {
    let e = math(cx, "exp", t, &[x])?;
    math(cx, "log1p", t, &[e])
}

/// x tanh(softplus(x)).
pub fn mish(cx: &mut Lower, _: Func, o: &Operands) -> Result<Value, String> {
    let (t, x) = (o.dtype, o.x());
    let sp = softplus_of(cx, t, x)?;
    let th = math(cx, "tanh", t, &[sp])?;
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
        math(cx, "tanh", t, &[s])?
    } else {
        let c = fconst(cx, t, std::f64::consts::FRAC_1_SQRT_2);
        let s = cx.ins().fmul(x, c);
        math(cx, "erf", t, &[s])?
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
    let r = math(cx, "pow", compute, &[base, exp])?;
    cast(cx, r, compute, t)
}
