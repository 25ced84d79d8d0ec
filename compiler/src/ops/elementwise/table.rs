//! The elementwise functions, one row each: everything the compiler knows
//! about a function is in its row, and [`Func`], the importer, the
//! emitter, whether it may run on vector lanes and its kernel epilogue
//! code are all read from there.
//!
//! A row reads `Func { attributes } = "op_type" [in "domain"]`, the arity,
//! the first operand's accepted types and from which input on the operands
//! share one type, how the result type follows, the scalar emitter (in the
//! family files beside this one), whether that emitter computes f32 lanes
//! exactly as one f32 (only instructions Cranelift has for vectors, no
//! library call), whether it joins fused chains (from operands of one
//! float type), the `EPILOGUE_*` code of the kernels that can apply it
//! to each element they store, its step in the kernel library's
//! elementwise programs ([`Step`]), and, for a function with attributes or an
//! import that rewrites the node, how it is imported. Adding a function is
//! one row, plus its emitter if no family has one yet.

use super::{activation, arith, bits, cast, compare, transcendental, Operands};
use crate::codegen::{Lower, Value};
use crate::import::attrs::Attrs;
use crate::import::NodeImport;
use crate::ir::{DType, Tensor};
use onnxc_runtime::elementwise::*;
use onnxc_runtime::{
    EPILOGUE_CLIP, EPILOGUE_HARD_SIGMOID, EPILOGUE_HARD_SWISH, EPILOGUE_LEAKY_RELU, EPILOGUE_RELU, EPILOGUE_SIGMOID,
    EPILOGUE_TANH, MINIFLOAT_ROUND_DOWN, MINIFLOAT_ROUND_NEAREST, MINIFLOAT_ROUND_UP, MINIFLOAT_SATURATE,
};
use Accepts::*;
use OutputType::*;
use SameType::*;
use Step::{Absent, Binary, Bounds, Power, Unary};

/// Which element types a function accepts for its (first) operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Accepts {
    Numeric,
    Float,
    Integer,
    Logical,
    Any,
}

/// From which input on the operands must all have one element type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SameType {
    FromInput0,
    /// Where: the condition is bool, the two branches agree.
    FromInput1,
    /// Each operand has its own type (Pow's exponent, the casts).
    Free,
}

/// How the output element type follows from the inputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OutputType {
    SameAsInput0,
    SameAsInput1,
    Boolean,
    CastTarget,
}

/// Emits one application of a function on loaded scalars.
pub type Emit = fn(&mut Lower, Func, &Operands) -> Result<Value, String>;

/// One elementwise function, as declared in its row.
pub struct Row {
    pub op_type: &'static str,
    /// The ONNX domain (`""`: the default one).
    pub domain: &'static str,
    /// Inputs: (minimum, maximum).
    pub arity: (usize, usize),
    pub accepts: Accepts,
    pub same_type: SameType,
    pub result: OutputType,
    /// The function from the node's attributes and opset; it may rewrite
    /// the node's inputs.
    pub import: fn(&mut NodeImport) -> Result<Func, String>,
    pub emit: Emit,
    /// Whether `emit` computes f32 lanes exactly as one f32.
    pub lanes: bool,
    /// Whether it joins chains of f32/f64 functions evaluated in one loop
    /// (`passes::fuse_elementwise`).
    pub chains: bool,
    /// The `EPILOGUE_*` code of the kernels that apply it as they store.
    pub epilogue: Option<i64>,
    /// Its step in the kernel library's elementwise programs.
    pub step: Step,
}

/// How a function is a step of an elementwise program (`program.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// It has none: nodes with it run the loop of `broadcast_loop.rs`.
    Absent,
    /// `STEP_*` of a function of the running value.
    Unary(i32),
    /// The `STEP_*` codes of `v op w` and of `w op v`, `v` the running value.
    Binary(i32, i32),
    /// Clip: maximum with the lower bound, then minimum with the upper.
    Bounds,
    /// Pow with a scalar constant exponent.
    Power,
}

macro_rules! elementwise_functions {
    (@domain) => { "" };
    (@domain $domain:literal) => { $domain };
    (@import $func:ident) => { |_| Ok(Func::$func) };
    (@import $func:ident $import:expr) => { $import };
    ($(
        $(#[doc = $doc:literal])*
        $func:ident $({ $($field:ident: $ty:ty),+ })? = $op_type:literal $(in $domain:literal)?,
            $min:literal..=$max:expr, $accepts:ident / $same:ident -> $result:ident,
            $emit:path, lanes $lanes:literal, chains $chains:literal, epilogue $epilogue:expr, step $step:expr
            $(, import $import:expr)?;
    )*) => {
        /// An elementwise function with its attributes (one per row).
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum Func {
            $($(#[doc = $doc])* $func $({ $($field: $ty),+ })?,)*
        }

        /// Each function's index in [`ROWS`].
        enum RowIndex {
            $($func,)*
        }

        static ROWS: &[Row] = &[$(Row {
            op_type: $op_type,
            domain: elementwise_functions!(@domain $($domain)?),
            arity: ($min, $max),
            accepts: $accepts,
            same_type: $same,
            result: $result,
            import: elementwise_functions!(@import $func $($import)?),
            emit: $emit,
            lanes: $lanes,
            chains: $chains,
            epilogue: $epilogue,
            step: $step,
        },)*];

        impl Func {
            /// The function's row.
            pub fn row(self) -> &'static Row {
                match self {
                    $(Func::$func { .. } => &ROWS[RowIndex::$func as usize],)*
                }
            }
        }
    };
}

elementwise_functions! {
    Identity = "Identity", 1..=1, Any / Free -> SameAsInput0,
        cast::pass_through, lanes false, chains false, epilogue None, step Absent, import |cx| data_only(cx, Func::Identity);
    /// Identity plus, when asked for, an all-true mask (bool from opset 10,
    /// the input's type before): Dropout in inference mode (training mode
    /// goes to `random::import_dropout`, which `ops::REGISTRY` names first).
    Dropout { mask_is_bool: bool } = "Dropout", 1..=3, Any / Free -> SameAsInput0,
        cast::pass_through, lanes false, chains false, epilogue None, step Absent,
        import |cx| data_only(cx, Func::Dropout { mask_is_bool: cx.opset >= 10 });
    /// The same bytes read as another type of the same width.
    BitCast { to: DType } = "BitCast", 1..=1, Any / Free -> CastTarget,
        cast::pass_through, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::BitCast { to: cast_target(&cx.attrs)? });
    Abs = "Abs", 1..=1, Numeric / FromInput0 -> SameAsInput0,
        arith::abs, lanes true, chains true, epilogue None, step Unary(STEP_ABS);
    Neg = "Neg", 1..=1, Numeric / FromInput0 -> SameAsInput0,
        arith::neg, lanes true, chains true, epilogue None, step Unary(STEP_NEG);
    Sqrt = "Sqrt", 1..=1, Float / FromInput0 -> SameAsInput0,
        arith::sqrt, lanes true, chains true, epilogue None, step Unary(STEP_SQRT);
    Reciprocal = "Reciprocal", 1..=1, Float / FromInput0 -> SameAsInput0,
        arith::reciprocal, lanes false, chains true, epilogue None, step Unary(STEP_RECIPROCAL);
    Exp = "Exp", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::exp, lanes false, chains true, epilogue None, step Unary(STEP_EXP);
    Log = "Log", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::log, lanes false, chains true, epilogue None, step Unary(STEP_LOG);
    Sin = "Sin", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::sin, lanes false, chains false, epilogue None, step Absent;
    Cos = "Cos", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::cos, lanes false, chains false, epilogue None, step Absent;
    Tan = "Tan", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::tan, lanes false, chains false, epilogue None, step Absent;
    Asin = "Asin", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::asin, lanes false, chains false, epilogue None, step Absent;
    Acos = "Acos", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::acos, lanes false, chains false, epilogue None, step Absent;
    Atan = "Atan", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::atan, lanes false, chains false, epilogue None, step Absent;
    Sinh = "Sinh", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::sinh, lanes false, chains false, epilogue None, step Absent;
    Cosh = "Cosh", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::cosh, lanes false, chains false, epilogue None, step Absent;
    Asinh = "Asinh", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::asinh, lanes false, chains false, epilogue None, step Absent;
    Acosh = "Acosh", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::acosh, lanes false, chains false, epilogue None, step Absent;
    Atanh = "Atanh", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::atanh, lanes false, chains false, epilogue None, step Absent;
    Tanh = "Tanh", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::tanh, lanes false, chains true, epilogue Some(EPILOGUE_TANH), step Unary(STEP_TANH);
    Erf = "Erf", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::erf, lanes false, chains true, epilogue None, step Unary(STEP_ERF);
    Round = "Round", 1..=1, Float / FromInput0 -> SameAsInput0,
        arith::round, lanes false, chains false, epilogue None, step Absent;
    Floor = "Floor", 1..=1, Float / FromInput0 -> SameAsInput0,
        arith::floor, lanes false, chains false, epilogue None, step Absent;
    Ceil = "Ceil", 1..=1, Float / FromInput0 -> SameAsInput0,
        arith::ceil, lanes false, chains false, epilogue None, step Absent;
    Sign = "Sign", 1..=1, Numeric / FromInput0 -> SameAsInput0,
        arith::sign, lanes false, chains false, epilogue None, step Absent;
    IsNaN = "IsNaN", 1..=1, Float / FromInput0 -> Boolean,
        compare::is_nan, lanes false, chains false, epilogue None, step Absent;
    IsInf { positive: bool, negative: bool } = "IsInf", 1..=1, Float / FromInput0 -> Boolean,
        compare::is_inf, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::IsInf {
            positive: cx.attrs.int_or("detect_positive", 1)? != 0,
            negative: cx.attrs.int_or("detect_negative", 1)? != 0,
        });
    Softplus = "Softplus", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::softplus, lanes false, chains true, epilogue None, step Unary(STEP_SOFTPLUS);
    Softsign = "Softsign", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::softsign, lanes false, chains false, epilogue None, step Unary(STEP_SOFTSIGN);
    Mish = "Mish", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::mish, lanes false, chains false, epilogue None, step Unary(STEP_MISH);
    Gelu { tanh: bool } = "Gelu", 1..=1, Float / FromInput0 -> SameAsInput0,
        transcendental::gelu, lanes false, chains true, epilogue None, step Unary(STEP_GELU),
        import |cx| Ok(Func::Gelu { tanh: gelu_tanh(&cx.attrs)? });
    Sigmoid = "Sigmoid", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::sigmoid, lanes false, chains true, epilogue Some(EPILOGUE_SIGMOID), step Unary(STEP_SIGMOID);
    Swish { alpha: f32 } = "Swish", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::swish, lanes false, chains false, epilogue None, step Unary(STEP_SWISH),
        import |cx| Ok(Func::Swish { alpha: cx.attrs.float_or("alpha", 1.0)? });
    Relu = "Relu", 1..=1, Numeric / FromInput0 -> SameAsInput0,
        activation::relu, lanes true, chains true, epilogue Some(EPILOGUE_RELU), step Unary(STEP_RELU);
    LeakyRelu { alpha: f32 } = "LeakyRelu", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::leaky_relu, lanes true, chains true, epilogue Some(EPILOGUE_LEAKY_RELU), step Unary(STEP_LEAKY_RELU),
        import |cx| Ok(Func::LeakyRelu { alpha: cx.attrs.float_or("alpha", 0.01)? });
    /// `per_channel`: opset 6's rule, a 1-D slope runs along axis 1.
    PRelu { per_channel: bool } = "PRelu", 2..=2, Numeric / FromInput0 -> SameAsInput0,
        activation::prelu, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::PRelu { per_channel: cx.opset < 7 });
    Elu { alpha: f32 } = "Elu", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::elu, lanes false, chains true, epilogue None, step Unary(STEP_ELU),
        import |cx| Ok(Func::Elu { alpha: cx.attrs.float_or("alpha", 1.0)? });
    Selu { alpha: f32, gamma: f32 } = "Selu", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::selu, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::Selu {
            alpha: cx.attrs.float_or("alpha", 1.673_263_2)?,
            gamma: cx.attrs.float_or("gamma", 1.050_701)?,
        });
    Celu { alpha: f32 } = "Celu", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::celu, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::Celu { alpha: cx.attrs.float_or("alpha", 1.0)? });
    ThresholdedRelu { alpha: f32 } = "ThresholdedRelu", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::thresholded_relu, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::ThresholdedRelu { alpha: cx.attrs.float_or("alpha", 1.0)? });
    HardSigmoid { alpha: f32, beta: f32 } = "HardSigmoid", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::hard_sigmoid, lanes true, chains true, epilogue Some(EPILOGUE_HARD_SIGMOID), step Unary(STEP_HARD_SIGMOID),
        import |cx| Ok(Func::HardSigmoid {
            alpha: cx.attrs.float_or("alpha", 0.2)?,
            beta: cx.attrs.float_or("beta", 0.5)?,
        });
    HardSwish = "HardSwish", 1..=1, Float / FromInput0 -> SameAsInput0,
        activation::hard_swish, lanes true, chains true, epilogue Some(EPILOGUE_HARD_SWISH), step Unary(STEP_HARD_SWISH);
    Shrink { lambd: f32, bias: f32 } = "Shrink", 1..=1, Numeric / FromInput0 -> SameAsInput0,
        activation::shrink, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::Shrink {
            lambd: cx.attrs.float_or("lambd", 0.5)?,
            bias: cx.attrs.float_or("bias", 0.0)?,
        });
    /// 1 where `x > threshold`, else 0, in the input's type.
    Binarizer { threshold: f32 } = "Binarizer" in "ai.onnx.ml", 1..=1, Numeric / FromInput0 -> SameAsInput0,
        activation::binarizer, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::Binarizer { threshold: cx.attrs.float_or("threshold", 0.0)? });
    BitwiseNot = "BitwiseNot", 1..=1, Integer / FromInput0 -> SameAsInput0,
        bits::not, lanes false, chains false, epilogue None, step Absent;
    BitwiseAnd = "BitwiseAnd", 2..=2, Integer / FromInput0 -> SameAsInput0,
        bits::and, lanes false, chains false, epilogue None, step Absent;
    BitwiseOr = "BitwiseOr", 2..=2, Integer / FromInput0 -> SameAsInput0,
        bits::or, lanes false, chains false, epilogue None, step Absent;
    BitwiseXor = "BitwiseXor", 2..=2, Integer / FromInput0 -> SameAsInput0,
        bits::xor, lanes false, chains false, epilogue None, step Absent;
    BitShift { left: bool } = "BitShift", 2..=2, Integer / FromInput0 -> SameAsInput0,
        bits::shift, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::BitShift { left: shifts_left(&cx.attrs)? });
    Mod { fmod: bool } = "Mod", 2..=2, Numeric / FromInput0 -> SameAsInput0,
        arith::modulo, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::Mod { fmod: cx.attrs.int_or("fmod", 0)? != 0 });
    /// `mode`: how float8 targets narrow (`onnxc_runtime::MINIFLOAT_*`).
    Cast { to: DType, mode: i64 } = "Cast", 1..=1, Any / Free -> CastTarget,
        cast::cast_to, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::Cast { to: cast_target(&cx.attrs)?, mode: minifloat_mode(&cx.attrs)? });
    /// `mode`: as Cast's.
    CastLike { mode: i64 } = "CastLike", 2..=2, Any / Free -> SameAsInput1,
        cast::cast_like, lanes false, chains false, epilogue None, step Absent,
        import |cx| Ok(Func::CastLike { mode: minifloat_mode(&cx.attrs)? });
    Add = "Add", 2..=2, Numeric / FromInput0 -> SameAsInput0,
        arith::add, lanes true, chains true, epilogue None, step Binary(STEP_ADD, STEP_ADD);
    Sub = "Sub", 2..=2, Numeric / FromInput0 -> SameAsInput0,
        arith::sub, lanes true, chains true, epilogue None, step Binary(STEP_SUB, STEP_SUB_FROM);
    Mul = "Mul", 2..=2, Numeric / FromInput0 -> SameAsInput0,
        arith::mul, lanes true, chains true, epilogue None, step Binary(STEP_MUL, STEP_MUL);
    Div = "Div", 2..=2, Numeric / FromInput0 -> SameAsInput0,
        arith::div, lanes true, chains true, epilogue None, step Binary(STEP_DIV, STEP_DIV_INTO);
    Pow = "Pow", 2..=2, Numeric / Free -> SameAsInput0,
        transcendental::pow, lanes false, chains false, epilogue None, step Power;
    Equal = "Equal", 2..=2, Any / FromInput0 -> Boolean,
        compare::compare, lanes false, chains false, epilogue None, step Absent;
    Less = "Less", 2..=2, Numeric / FromInput0 -> Boolean,
        compare::compare, lanes false, chains false, epilogue None, step Absent;
    Greater = "Greater", 2..=2, Numeric / FromInput0 -> Boolean,
        compare::compare, lanes false, chains false, epilogue None, step Absent;
    LessOrEqual = "LessOrEqual", 2..=2, Numeric / FromInput0 -> Boolean,
        compare::compare, lanes false, chains false, epilogue None, step Absent;
    GreaterOrEqual = "GreaterOrEqual", 2..=2, Numeric / FromInput0 -> Boolean,
        compare::compare, lanes false, chains false, epilogue None, step Absent;
    Not = "Not", 1..=1, Logical / FromInput0 -> Boolean,
        compare::not, lanes false, chains false, epilogue None, step Absent;
    And = "And", 2..=2, Logical / FromInput0 -> Boolean,
        bits::and, lanes false, chains false, epilogue None, step Absent;
    Or = "Or", 2..=2, Logical / FromInput0 -> Boolean,
        bits::or, lanes false, chains false, epilogue None, step Absent;
    Xor = "Xor", 2..=2, Logical / FromInput0 -> Boolean,
        bits::xor, lanes false, chains false, epilogue None, step Absent;
    Max = "Max", 1..=usize::MAX, Numeric / FromInput0 -> SameAsInput0,
        arith::variadic, lanes true, chains true, epilogue None, step Binary(STEP_MAXIMUM, STEP_MAXIMUM);
    Min = "Min", 1..=usize::MAX, Numeric / FromInput0 -> SameAsInput0,
        arith::variadic, lanes true, chains true, epilogue None, step Binary(STEP_MINIMUM, STEP_MINIMUM);
    Sum = "Sum", 1..=usize::MAX, Numeric / FromInput0 -> SameAsInput0,
        arith::variadic, lanes true, chains true, epilogue None, step Binary(STEP_ADD, STEP_ADD);
    Mean = "Mean", 1..=usize::MAX, Float / FromInput0 -> SameAsInput0,
        arith::variadic, lanes false, chains true, epilogue None, step Absent;
    Where = "Where", 3..=3, Logical / FromInput1 -> SameAsInput1,
        compare::select, lanes true, chains false, epilogue None, step Absent;
    Clip = "Clip", 1..=3, Numeric / FromInput0 -> SameAsInput0,
        arith::clip, lanes true, chains true, epilogue Some(EPILOGUE_CLIP), step Bounds, import clip;
}

impl Func {
    /// Cast with the attributes' defaults (saturating, `round_mode` up).
    pub fn cast_to(to: DType) -> Func {
        Func::Cast { to, mode: MINIFLOAT_SATURATE | MINIFLOAT_ROUND_UP }
    }
}

/// The row of `op_type` (no two rows share one, whatever their domains).
pub fn row_named(op_type: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| r.op_type == op_type)
}

/// `func`, which passes its data through: the node keeps input 0 only.
fn data_only(cx: &mut NodeImport, func: Func) -> Result<Func, String> {
    cx.inputs.truncate(1);
    Ok(func)
}

/// Clip's bounds, attributes before opset 11, become inputs.
fn clip(cx: &mut NodeImport) -> Result<Func, String> {
    if cx.opset < 11 {
        let lo = cx.attrs.float_or("min", f32::NEG_INFINITY)?;
        let hi = cx.attrs.float_or("max", f32::INFINITY)?;
        let lo = cx.add_const("clip_min", Tensor::from_f32s(vec![], &[lo]));
        let hi = cx.add_const("clip_max", Tensor::from_f32s(vec![], &[hi]));
        cx.inputs.truncate(1);
        cx.inputs.extend([Some(lo), Some(hi)]);
    }
    Ok(Func::Clip)
}

/// BitShift's `direction`.
fn shifts_left(a: &Attrs) -> Result<bool, String> {
    match a.string("direction")?.as_deref() {
        Some("LEFT") => Ok(true),
        Some("RIGHT") => Ok(false),
        other => Err(format!("attribute \"direction\" is {other:?}, expected LEFT or RIGHT")),
    }
}

/// Gelu's `approximate`: whether it is the tanh form.
fn gelu_tanh(a: &Attrs) -> Result<bool, String> {
    match a.string_or("approximate", "none")?.as_str() {
        "none" => Ok(false),
        "tanh" => Ok(true),
        other => Err(format!("attribute \"approximate\" is \"{other}\", expected none or tanh")),
    }
}

/// Cast's `saturate` and `round_mode` as the float8 narrowing mode.
fn minifloat_mode(a: &Attrs) -> Result<i64, String> {
    let saturate = if a.int_or("saturate", 1)? != 0 { MINIFLOAT_SATURATE } else { 0 };
    let round = match a.string_or("round_mode", "up")?.as_str() {
        "up" => MINIFLOAT_ROUND_UP,
        "down" => MINIFLOAT_ROUND_DOWN,
        "nearest" => MINIFLOAT_ROUND_NEAREST,
        other => return Err(format!("attribute \"round_mode\" is \"{other}\", expected up, down or nearest")),
    };
    Ok(saturate | round)
}

/// The element type named by a Cast/BitCast `to` attribute.
fn cast_target(a: &Attrs) -> Result<DType, String> {
    a.dtype("to")?.ok_or_else(|| "attribute \"to\" is required".to_string())
}
