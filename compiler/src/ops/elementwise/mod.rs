//! Elementwise operators with numpy broadcasting: unary math and
//! activations, binary arithmetic and comparisons, variadic Sum/Mean/Max/Min,
//! Where, Clip, Cast, Identity, and Dropout in inference mode (training mode
//! is in `random.rs`).
//!
//! They are declared through one table ([`FUNCS`]: op_type, arity, which
//! element types it takes, how its result type is chosen) and share one
//! lowering: a loop nest over the broadcast output shape (adjacent dims
//! merged where every operand is contiguous across them) whose body is the
//! scalar function of [`emit_scalar`]. Where the function needs no library
//! call ([`lane_safe`]) and every tensor is f32, the innermost loop runs
//! four lanes at a time with the same instructions (same bits). The same
//! loop evaluates fused chains of these functions (`fused.rs`).
//!
//! Type constraints: arithmetic on floats and every integer type;
//! transcendental functions on floats; logical ops on bool; bitwise ops and
//! BitShift on integers; Cast/CastLike between all numeric types and bool.
//! f16, bf16 and float8 are computed in f32: each element is widened on
//! load and rounded on store.

use super::{InferCx, Inferred, Operator};
use crate::codegen::{clif_type, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::import::NodeImport;
use crate::ir::shape::{broadcast, broadcast_strides, contiguous_strides};
use crate::ir::{DType, Tensor};
use onnxc_runtime::{MINIFLOAT_ROUND_DOWN, MINIFLOAT_ROUND_NEAREST, MINIFLOAT_ROUND_UP, MINIFLOAT_SATURATE};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Func {
    Identity,
    /// Identity plus, when asked for, an all-true mask (bool from opset 10,
    /// the input's type before): Dropout in inference mode.
    Dropout {
        mask_is_bool: bool,
    },
    /// The same bytes read as another type of the same width.
    BitCast {
        to: DType,
    },
    Abs,
    Neg,
    Sqrt,
    Reciprocal,
    Exp,
    Log,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Tanh,
    Round,
    IsNaN,
    IsInf {
        positive: bool,
        negative: bool,
    },
    Softplus,
    Softsign,
    Mish,
    Selu {
        alpha: f32,
        gamma: f32,
    },
    Celu {
        alpha: f32,
    },
    ThresholdedRelu {
        alpha: f32,
    },
    Shrink {
        lambd: f32,
        bias: f32,
    },
    /// ai.onnx.ml: 1 where `x > threshold`, else 0, in the input's type.
    Binarizer {
        threshold: f32,
    },
    Swish {
        alpha: f32,
    },
    BitwiseNot,
    BitwiseAnd,
    BitwiseOr,
    BitwiseXor,
    BitShift {
        left: bool,
    },
    Mod {
        fmod: bool,
    },
    /// `mode`: how float8 targets narrow (`onnxc_runtime::MINIFLOAT_*`).
    CastLike {
        mode: i64,
    },
    Erf,
    Sigmoid,
    Relu,
    Floor,
    Ceil,
    Sign,
    Not,
    LeakyRelu {
        alpha: f32,
    },
    Elu {
        alpha: f32,
    },
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    HardSwish,
    Gelu {
        tanh: bool,
    },
    Cast {
        to: DType,
        mode: i64,
    },
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    /// `per_channel`: opset 6's rule, a 1-D slope runs along axis 1.
    PRelu {
        per_channel: bool,
    },
    Equal,
    Less,
    Greater,
    LessOrEqual,
    GreaterOrEqual,
    And,
    Or,
    Xor,
    Max,
    Min,
    Sum,
    Mean,
    Where,
    Clip,
}

impl Func {
    /// Cast with the attributes' defaults (saturating, `round_mode` up).
    pub fn cast_to(to: DType) -> Func {
        Func::Cast { to, mode: MINIFLOAT_SATURATE | MINIFLOAT_ROUND_UP }
    }
}

/// Which element types an entry accepts for its (first) operand.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Accepts {
    Numeric,
    Float,
    Integer,
    Logical,
    Any,
}

/// How the output element type follows from the inputs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum OutputType {
    SameAsInput0,
    SameAsInput1,
    Boolean,
    CastTarget,
}

struct Entry {
    op_type: &'static str,
    /// Inputs: (minimum, maximum).
    arity: (usize, usize),
    accepts: Accepts,
    result: OutputType,
}

const fn entry(op_type: &'static str, arity: (usize, usize), accepts: Accepts, result: OutputType) -> Entry {
    Entry { op_type, arity, accepts, result }
}

use Accepts::*;
use OutputType::*;

/// The elementwise table: one row per ONNX op_type.
static FUNCS: &[Entry] = &[
    entry("Identity", (1, 1), Any, SameAsInput0),
    entry("Dropout", (1, 3), Any, SameAsInput0),
    entry("Abs", (1, 1), Numeric, SameAsInput0),
    entry("Neg", (1, 1), Numeric, SameAsInput0),
    entry("Sqrt", (1, 1), Float, SameAsInput0),
    entry("Reciprocal", (1, 1), Float, SameAsInput0),
    entry("Exp", (1, 1), Float, SameAsInput0),
    entry("Log", (1, 1), Float, SameAsInput0),
    entry("Sin", (1, 1), Float, SameAsInput0),
    entry("Cos", (1, 1), Float, SameAsInput0),
    entry("Tan", (1, 1), Float, SameAsInput0),
    entry("Asin", (1, 1), Float, SameAsInput0),
    entry("Acos", (1, 1), Float, SameAsInput0),
    entry("Atan", (1, 1), Float, SameAsInput0),
    entry("Sinh", (1, 1), Float, SameAsInput0),
    entry("Cosh", (1, 1), Float, SameAsInput0),
    entry("Asinh", (1, 1), Float, SameAsInput0),
    entry("Acosh", (1, 1), Float, SameAsInput0),
    entry("Atanh", (1, 1), Float, SameAsInput0),
    entry("Round", (1, 1), Float, SameAsInput0),
    entry("IsNaN", (1, 1), Float, Boolean),
    entry("IsInf", (1, 1), Float, Boolean),
    entry("Softplus", (1, 1), Float, SameAsInput0),
    entry("Softsign", (1, 1), Float, SameAsInput0),
    entry("Mish", (1, 1), Float, SameAsInput0),
    entry("Selu", (1, 1), Float, SameAsInput0),
    entry("Celu", (1, 1), Float, SameAsInput0),
    entry("ThresholdedRelu", (1, 1), Float, SameAsInput0),
    entry("Shrink", (1, 1), Numeric, SameAsInput0),
    entry("Binarizer", (1, 1), Numeric, SameAsInput0),
    entry("Swish", (1, 1), Float, SameAsInput0),
    entry("BitwiseNot", (1, 1), Integer, SameAsInput0),
    entry("BitwiseAnd", (2, 2), Integer, SameAsInput0),
    entry("BitwiseOr", (2, 2), Integer, SameAsInput0),
    entry("BitwiseXor", (2, 2), Integer, SameAsInput0),
    entry("BitShift", (2, 2), Integer, SameAsInput0),
    entry("Mod", (2, 2), Numeric, SameAsInput0),
    entry("CastLike", (2, 2), Any, SameAsInput1),
    entry("Tanh", (1, 1), Float, SameAsInput0),
    entry("Erf", (1, 1), Float, SameAsInput0),
    entry("Sigmoid", (1, 1), Float, SameAsInput0),
    entry("Relu", (1, 1), Numeric, SameAsInput0),
    entry("Floor", (1, 1), Float, SameAsInput0),
    entry("Ceil", (1, 1), Float, SameAsInput0),
    entry("Sign", (1, 1), Numeric, SameAsInput0),
    entry("Not", (1, 1), Logical, Boolean),
    entry("LeakyRelu", (1, 1), Float, SameAsInput0),
    entry("Elu", (1, 1), Float, SameAsInput0),
    entry("HardSigmoid", (1, 1), Float, SameAsInput0),
    entry("HardSwish", (1, 1), Float, SameAsInput0),
    entry("Gelu", (1, 1), Float, SameAsInput0),
    entry("Cast", (1, 1), Any, CastTarget),
    entry("BitCast", (1, 1), Any, CastTarget),
    entry("Add", (2, 2), Numeric, SameAsInput0),
    entry("Sub", (2, 2), Numeric, SameAsInput0),
    entry("Mul", (2, 2), Numeric, SameAsInput0),
    entry("Div", (2, 2), Numeric, SameAsInput0),
    entry("Pow", (2, 2), Numeric, SameAsInput0),
    entry("PRelu", (2, 2), Numeric, SameAsInput0),
    entry("Equal", (2, 2), Any, Boolean),
    entry("Less", (2, 2), Numeric, Boolean),
    entry("Greater", (2, 2), Numeric, Boolean),
    entry("LessOrEqual", (2, 2), Numeric, Boolean),
    entry("GreaterOrEqual", (2, 2), Numeric, Boolean),
    entry("And", (2, 2), Logical, Boolean),
    entry("Or", (2, 2), Logical, Boolean),
    entry("Xor", (2, 2), Logical, Boolean),
    entry("Max", (1, usize::MAX), Numeric, SameAsInput0),
    entry("Min", (1, usize::MAX), Numeric, SameAsInput0),
    entry("Sum", (1, usize::MAX), Numeric, SameAsInput0),
    entry("Mean", (1, usize::MAX), Float, SameAsInput0),
    entry("Where", (3, 3), Logical, SameAsInput1),
    entry("Clip", (1, 3), Numeric, SameAsInput0),
];

#[derive(Clone, Debug)]
pub struct Elementwise {
    pub op_type: &'static str,
    pub func: Func,
}

fn table_entry(op_type: &str) -> Option<&'static Entry> {
    FUNCS.iter().find(|e| e.op_type == op_type)
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let entry = table_entry(cx.op_type).ok_or_else(|| format!("{} is not elementwise", cx.op_type))?;
    let a = &cx.attrs;
    let func = match entry.op_type {
        "Identity" => Func::Identity,
        // Inference (training mode goes to `random::import_dropout`): the
        // data passes through; the mask is all true.
        "Dropout" => Func::Dropout { mask_is_bool: cx.opset >= 10 },
        "Abs" => Func::Abs,
        "Neg" => Func::Neg,
        "Sqrt" => Func::Sqrt,
        "Reciprocal" => Func::Reciprocal,
        "Exp" => Func::Exp,
        "Log" => Func::Log,
        "Sin" => Func::Sin,
        "Cos" => Func::Cos,
        "Tan" => Func::Tan,
        "Asin" => Func::Asin,
        "Acos" => Func::Acos,
        "Atan" => Func::Atan,
        "Sinh" => Func::Sinh,
        "Cosh" => Func::Cosh,
        "Asinh" => Func::Asinh,
        "Acosh" => Func::Acosh,
        "Atanh" => Func::Atanh,
        "Round" => Func::Round,
        "IsNaN" => Func::IsNaN,
        "IsInf" => Func::IsInf {
            positive: a.int_or("detect_positive", 1)? != 0,
            negative: a.int_or("detect_negative", 1)? != 0,
        },
        "Softplus" => Func::Softplus,
        "Softsign" => Func::Softsign,
        "Mish" => Func::Mish,
        "Selu" => Func::Selu { alpha: a.float_or("alpha", 1.673_263_2)?, gamma: a.float_or("gamma", 1.050_701)? },
        "Celu" => Func::Celu { alpha: a.float_or("alpha", 1.0)? },
        "ThresholdedRelu" => Func::ThresholdedRelu { alpha: a.float_or("alpha", 1.0)? },
        "Shrink" => Func::Shrink { lambd: a.float_or("lambd", 0.5)?, bias: a.float_or("bias", 0.0)? },
        "Binarizer" => Func::Binarizer { threshold: a.float_or("threshold", 0.0)? },
        "Swish" => Func::Swish { alpha: a.float_or("alpha", 1.0)? },
        "BitwiseNot" => Func::BitwiseNot,
        "BitwiseAnd" => Func::BitwiseAnd,
        "BitwiseOr" => Func::BitwiseOr,
        "BitwiseXor" => Func::BitwiseXor,
        "BitShift" => Func::BitShift {
            left: match a.string("direction")?.as_deref() {
                Some("LEFT") => true,
                Some("RIGHT") => false,
                other => return Err(format!("attribute \"direction\" is {other:?}, expected LEFT or RIGHT")),
            },
        },
        "Mod" => Func::Mod { fmod: a.int_or("fmod", 0)? != 0 },
        "CastLike" => Func::CastLike { mode: minifloat_mode(a)? },
        "BitCast" => Func::BitCast { to: cast_target(a)? },
        "Tanh" => Func::Tanh,
        "Erf" => Func::Erf,
        "Sigmoid" => Func::Sigmoid,
        "Relu" => Func::Relu,
        "Floor" => Func::Floor,
        "Ceil" => Func::Ceil,
        "Sign" => Func::Sign,
        "Not" => Func::Not,
        "LeakyRelu" => Func::LeakyRelu { alpha: a.float_or("alpha", 0.01)? },
        "Elu" => Func::Elu { alpha: a.float_or("alpha", 1.0)? },
        "HardSigmoid" => Func::HardSigmoid { alpha: a.float_or("alpha", 0.2)?, beta: a.float_or("beta", 0.5)? },
        "HardSwish" => Func::HardSwish,
        "Gelu" => Func::Gelu {
            tanh: match a.string_or("approximate", "none")?.as_str() {
                "none" => false,
                "tanh" => true,
                other => return Err(format!("attribute \"approximate\" is \"{other}\", expected none or tanh")),
            },
        },
        "Cast" => Func::Cast { to: cast_target(a)?, mode: minifloat_mode(a)? },
        "Add" => Func::Add,
        "Sub" => Func::Sub,
        "Mul" => Func::Mul,
        "Div" => Func::Div,
        "Pow" => Func::Pow,
        "PRelu" => Func::PRelu { per_channel: cx.opset < 7 },
        "Equal" => Func::Equal,
        "Less" => Func::Less,
        "Greater" => Func::Greater,
        "LessOrEqual" => Func::LessOrEqual,
        "GreaterOrEqual" => Func::GreaterOrEqual,
        "And" => Func::And,
        "Or" => Func::Or,
        "Xor" => Func::Xor,
        "Max" => Func::Max,
        "Min" => Func::Min,
        "Sum" => Func::Sum,
        "Mean" => Func::Mean,
        "Where" => Func::Where,
        "Clip" => {
            if cx.opset < 11 {
                // Before opset 11 the bounds were attributes; make them inputs.
                let lo = a.float_or("min", f32::NEG_INFINITY)?;
                let hi = a.float_or("max", f32::INFINITY)?;
                let lo = cx.add_const("clip_min", Tensor::from_f32s(vec![], &[lo]));
                let hi = cx.add_const("clip_max", Tensor::from_f32s(vec![], &[hi]));
                cx.inputs.truncate(1);
                cx.inputs.extend([Some(lo), Some(hi)]);
            }
            Func::Clip
        }
        other => return Err(format!("{other} is not elementwise")),
    };
    if matches!(func, Func::Identity | Func::Dropout { .. }) {
        cx.inputs.truncate(1);
    }
    Ok(Op::Elementwise(Elementwise { op_type: entry.op_type, func }))
}

use super::Op;

/// Cast's `saturate` and `round_mode` as the float8 narrowing mode.
fn minifloat_mode(a: &crate::import::attrs::Attrs) -> Result<i64, String> {
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
fn cast_target(a: &crate::import::attrs::Attrs) -> Result<DType, String> {
    a.dtype("to")?.ok_or_else(|| "attribute \"to\" is required".to_string())
}

impl Elementwise {
    /// The shape operand `i` broadcasts as: its own, except for opset-6
    /// PRelu, whose 1-D slope (beyond a scalar) lines up with axis 1.
    fn operand_shape(&self, i: usize, shape: &[usize], rank: usize) -> Vec<usize> {
        match self.func {
            Func::PRelu { per_channel: true } if i == 1 && shape.len() == 1 && shape[0] > 1 && rank > 2 => {
                let mut s = vec![1; rank - 1];
                s[0] = shape[0];
                s
            }
            _ => shape.to_vec(),
        }
    }
}

impl Operator for Elementwise {
    fn name(&self) -> &'static str {
        self.op_type
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let entry = table_entry(self.op_type).ok_or("unknown elementwise op")?;
        let present: Vec<_> = cx.inputs.iter().flatten().collect();
        let count = cx.inputs.len();
        if count < entry.arity.0 || count > entry.arity.1 {
            return Err(format!("takes {}..={} inputs, got {count}", entry.arity.0, entry.arity.1.min(99)));
        }
        let first = cx.input(0)?;
        let ok = match entry.accepts {
            Numeric => first.dtype != DType::Bool,
            Float => first.dtype.is_float(),
            Logical => first.dtype == DType::Bool,
            Integer => first.dtype.is_int(),
            Any => true,
        };
        if !ok {
            return Err(format!("element type {} is not supported", first.dtype));
        }
        let strings = cx.inputs.iter().flatten().any(|i| i.dtype == DType::String)
            || matches!(self.func, Func::Cast { to: DType::String, .. } | Func::BitCast { to: DType::String });
        if strings {
            match self.func {
                Func::Equal | Func::Identity => {}
                Func::Cast { to, .. } => super::strings::check_cast(first.dtype, to)?,
                _ => return Err(format!("{} on string tensors is not supported yet", self.op_type)),
            }
        }
        if let Func::BitCast { to } = self.func {
            if to.size() != first.dtype.size() {
                return Err(format!("BitCast from {} to {to}: the types differ in width", first.dtype));
            }
        }
        let mut shape: Vec<usize> = Vec::new();
        let shaping = if matches!(self.func, Func::CastLike { .. }) { &present[..1] } else { &present[..] };
        for (i, input) in shaping.iter().enumerate() {
            let operand = self.operand_shape(i, input.shape, first.shape.len());
            shape = broadcast(&shape, &operand)
                .ok_or_else(|| format!("shapes {:?} and {:?} do not broadcast", shape, input.shape))?;
        }
        // Operands of arithmetic must agree in type (Pow's exponent and
        // Where's condition excepted).
        let same_type_from = match self.func {
            Func::Where => 1,
            Func::Pow
            | Func::Cast { .. }
            | Func::BitCast { .. }
            | Func::CastLike { .. }
            | Func::Identity
            | Func::Dropout { .. } => usize::MAX,
            _ => 0,
        };
        if same_type_from != usize::MAX {
            let want = cx.input(same_type_from)?.dtype;
            for (i, input) in cx.inputs.iter().enumerate().skip(same_type_from) {
                if let Some(input) = input {
                    if input.dtype != want {
                        return Err(format!("input {i} is {}, expected {want}", input.dtype));
                    }
                }
            }
        }
        let dtype = match entry.result {
            SameAsInput0 => first.dtype,
            SameAsInput1 => cx.input(1)?.dtype,
            OutputType::Boolean => DType::Bool,
            CastTarget => match self.func {
                Func::Cast { to, .. } | Func::BitCast { to } => to,
                _ => first.dtype,
            },
        };
        let mut outputs = vec![Inferred::new(dtype, shape.clone())];
        if let (Func::Dropout { mask_is_bool }, true) = (self.func, cx.output_count > 1) {
            outputs.push(Inferred::new(if mask_is_bool { DType::Bool } else { dtype }, shape));
        }
        Ok(outputs)
    }

    fn fails_on_constants(&self, cx: &InferCx) -> Result<(), String> {
        if !matches!(self.func, Func::Div | Func::Mod { .. }) || !cx.input(0)?.dtype.is_int() {
            return Ok(());
        }
        let Some(divisor) = cx.input(1)?.value else { return Ok(()) };
        match (0..divisor.len()).find(|&i| divisor.get_i64(i) == 0) {
            Some(i) => Err(format!("integer division by zero: element {i} of the constant input 1 is 0")),
            None => Ok(()),
        }
    }

    fn is_view(&self) -> bool {
        matches!(self.func, Func::Identity | Func::Dropout { .. } | Func::BitCast { .. })
    }

    /// Cast reaches the packed types through i32/f32 copies.
    fn stages_packed(&self) -> bool {
        matches!(self.func, Func::Cast { .. } | Func::CastLike { .. })
    }

    /// Identity only moves (or aliases) the packed bytes.
    fn reads_packed(&self) -> bool {
        self.func == Func::Identity
    }

    fn allocates_at_run_time(&self) -> bool {
        matches!(self.func, Func::Cast { to: DType::String, .. })
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        match cx.input(0) {
            Ok(x) if x.dtype == DType::String && self.func == Func::Equal => super::strings::equal_scratch(cx),
            _ => 0,
        }
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (out_dtype, out_shape) = cx.output_type(0)?;
        if self.is_view() {
            if cx.view_needs_copy() {
                let bytes = out_dtype.bytes_for(out_shape.iter().product()).ok_or("the output is too large")?;
                let (src, dst) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
                cx.copy_bytes(dst, src, bytes);
            }
            if cx.has_output(1) {
                fill_ones(cx, 1)?;
            }
            return Ok(());
        }
        match self.func {
            Func::Cast { .. } if out_dtype == DType::String || cx.input_type(0)?.0 == DType::String => {
                return super::strings::lower_cast(cx)
            }
            _ if cx.input_type(0)?.0 == DType::String => return super::strings::lower_equal(cx),
            _ => {}
        }
        // CastLike reads only its input 0 (input 1 gives the type; its shape
        // may not broadcast to the output's).
        let read = if matches!(self.func, Func::CastLike { .. }) { 1 } else { cx.input_count() };
        let mut operands = Vec::new();
        for i in (0..read).filter(|&i| cx.has_input(i)) {
            let (dtype, shape) = cx.input_type(i)?;
            let shape = self.operand_shape(i, &shape, out_shape.len());
            operands.push(Operand { index: i, dtype, strides: broadcast_strides(&shape, &out_shape) });
        }
        let in_dtype = scalar_type(cx.input_type(0)?.0);
        // f16/bf16/float8 are computed in f32 (widened on load, rounded on
        // store); a double narrows to float8 directly, rounding once.
        let target = |to: DType| if to.is_minifloat() && in_dtype == DType::F64 { DType::F64 } else { scalar_type(to) };
        let (func, mode) = match self.func {
            Func::Cast { to, mode } => (Func::Cast { to: target(to), mode }, mode),
            Func::CastLike { mode } => (Func::Cast { to: target(out_dtype), mode }, mode),
            f => (f, MINIFLOAT_SATURATE),
        };
        let present: Vec<usize> = operands.iter().map(|o| o.index).collect();
        emit_broadcast_loop(cx, &out_shape, (out_dtype, mode), &operands, lane_safe(func), &mut |cx, args| {
            emit_scalar(cx, func, in_dtype, &present, args)
        })
    }
}

/// One input of a broadcast loop: which node input, its type, its element
/// strides against the output shape.
pub struct Operand {
    pub index: usize,
    pub dtype: DType,
    pub strides: Vec<i64>,
}

type Body<'b> = dyn FnMut(&mut Lower, &[(Value, DType)]) -> Result<Value, String> + 'b;

/// Emits `out[i] = body(operands[i]...)` over `out_shape`, with operands
/// read through broadcast strides; `out` is the output type and how a
/// float8 output narrows. With `lanes`, the body computes f32 lanes exactly
/// as one f32 (see [`emit_loop_at`]).
pub fn emit_broadcast_loop(
    cx: &mut Lower,
    out_shape: &[usize],
    out: (DType, i64),
    operands: &[Operand],
    lanes: bool,
    body: &mut Body,
) -> Result<(), String> {
    let mut bases = Vec::with_capacity(operands.len() + 1);
    for o in operands {
        bases.push(cx.input_ptr(o.index)?);
    }
    bases.push(cx.output_ptr(0)?);
    emit_loop_at(cx, out_shape, out, operands, &bases, lanes, body)
}

/// [`emit_broadcast_loop`] with the operands' addresses given (`bases`:
/// one per operand, then output 0's); the operands' `index` is not read.
///
/// When `lanes` says the body may be given vectors, every operand and the
/// output are f32, the innermost loop (after merging) is contiguous or
/// broadcast for every operand, and the target has 128-bit vectors, that
/// loop runs four elements per step (the body gets `f32x4` values, a
/// broadcast operand splatted once before the loop) and the last few one
/// at a time: the same operations on the same elements, so the same bits
/// (a NaN that `fmax`/`fmin` return may differ in sign).
pub fn emit_loop_at(
    cx: &mut Lower,
    out_shape: &[usize],
    out: (DType, i64),
    operands: &[Operand],
    bases: &[Value],
    lanes: bool,
    body: &mut Body,
) -> Result<(), String> {
    // Merge adjacent dims where every operand (and the contiguous output)
    // steps uniformly across them.
    let out_strides: Vec<i64> = contiguous_strides(out_shape).iter().map(|&s| s as i64).collect();
    let mut dims: Vec<usize> = Vec::new();
    let mut strides: Vec<Vec<i64>> = vec![Vec::new(); operands.len() + 1];
    for d in 0..out_shape.len() {
        let all: Vec<i64> = operands.iter().map(|o| o.strides[d]).chain([out_strides[d]]).collect();
        let mergeable = !dims.is_empty()
            && strides
                .iter()
                .zip(&all)
                .all(|(s, &cur)| s.last().is_some_and(|&prev| prev == cur * out_shape[d] as i64));
        if mergeable {
            let last = dims.len() - 1;
            dims[last] *= out_shape[d];
            for (s, &cur) in strides.iter_mut().zip(&all) {
                *s.last_mut().expect("merged dims have a stride") = cur;
            }
        } else {
            dims.push(out_shape[d]);
            for (s, &cur) in strides.iter_mut().zip(&all) {
                s.push(cur);
            }
        }
    }
    let mut sizes: Vec<i64> = operands.iter().map(|o| o.dtype.size() as i64).collect();
    sizes.push(out.0.size() as i64);
    let vector = lanes
        && cx.has_f32x4()
        && out.0 == DType::F32
        && operands.iter().all(|o| o.dtype == DType::F32)
        && dims.last().is_some_and(|&n| n >= F32_LANES)
        && strides.iter().all(|s| matches!(s.last(), Some(0 | 1)));
    let nest = Nest { dims, strides, sizes, operands, out, vector };
    nest.emit(cx, 0, bases, body)
}

/// f32 values in one 128-bit vector.
const F32_LANES: usize = 4;

/// The merged loop nest of [`emit_loop_at`].
struct Nest<'o> {
    dims: Vec<usize>,
    /// Per operand, then the output: element stride per level.
    strides: Vec<Vec<i64>>,
    /// Per operand, then the output: element bytes.
    sizes: Vec<i64>,
    operands: &'o [Operand],
    out: (DType, i64),
    /// The innermost level runs four f32 lanes at a time.
    vector: bool,
}

impl Nest<'_> {
    fn emit(&self, cx: &mut Lower, level: usize, ptrs: &[Value], body: &mut Body) -> Result<(), String> {
        if level == self.dims.len() {
            return self.element(cx, ptrs, body);
        }
        if self.vector && level + 1 == self.dims.len() {
            return self.innermost_in_lanes(cx, ptrs, body);
        }
        let l = cx.loop_begin(self.dims[level]);
        let inner = self.advance(cx, ptrs, level, l.index, 1);
        self.emit(cx, level + 1, &inner, body)?;
        cx.loop_end(l);
        Ok(())
    }

    /// Each pointer moved `index * count` steps along `level`.
    fn advance(&self, cx: &mut Lower, ptrs: &[Value], level: usize, index: Value, count: i64) -> Vec<Value> {
        let mut moved = Vec::with_capacity(ptrs.len());
        for (t, &p) in ptrs.iter().enumerate() {
            let step = self.strides[t][level] * self.sizes[t] * count;
            moved.push(cx.advance(p, index, step));
        }
        moved
    }

    /// `out = body(operands)` for the one element the pointers address.
    fn element(&self, cx: &mut Lower, ptrs: &[Value], body: &mut Body) -> Result<(), String> {
        let mut args = Vec::with_capacity(self.operands.len());
        for (o, &p) in self.operands.iter().zip(ptrs) {
            let raw = cx.b.ins().load(clif_type(o.dtype), MemFlagsData::trusted(), p, 0);
            args.push((widen(cx, raw, o.dtype)?, scalar_type(o.dtype)));
        }
        let result = body(cx, &args)?;
        let result = narrow(cx, result, self.out.0, self.out.1)?;
        let out = *ptrs.last().ok_or("no output pointer")?;
        cx.b.ins().store(MemFlagsData::trusted(), result, out, 0);
        Ok(())
    }

    /// The innermost level in f32x4 steps, then its remainder one by one.
    fn innermost_in_lanes(&self, cx: &mut Lower, ptrs: &[Value], body: &mut Body) -> Result<(), String> {
        let level = self.dims.len() - 1;
        let count = self.dims[level];
        let steps = count / F32_LANES;
        let vector = types::F32X4;
        // Unaligned and not trapping: the data is only 4-byte aligned.
        let flags = MemFlagsData::new().with_notrap();
        let mut splats = Vec::with_capacity(self.operands.len());
        for (t, &p) in ptrs.iter().take(self.operands.len()).enumerate() {
            splats.push(if self.strides[t][level] == 0 {
                let one = cx.b.ins().load(types::F32, MemFlagsData::trusted(), p, 0);
                Some(cx.b.ins().splat(vector, one))
            } else {
                None
            });
        }
        let l = cx.loop_begin(steps);
        let at = self.advance(cx, ptrs, level, l.index, F32_LANES as i64);
        let mut args = Vec::with_capacity(self.operands.len());
        for (splat, &p) in splats.iter().zip(&at) {
            let v = match splat {
                Some(v) => *v,
                None => cx.b.ins().load(vector, flags, p, 0),
            };
            args.push((v, DType::F32));
        }
        let result = body(cx, &args)?;
        let out = *at.last().ok_or("no output pointer")?;
        cx.b.ins().store(flags, result, out, 0);
        cx.loop_end(l);
        let done = cx.iconst((steps * F32_LANES) as i64);
        let rest = self.advance(cx, ptrs, level, done, 1);
        let l = cx.loop_begin(count % F32_LANES);
        let at = self.advance(cx, &rest, level, l.index, 1);
        self.element(cx, &at, body)?;
        cx.loop_end(l);
        Ok(())
    }
}

/// Writes 1 (true) to every element of output `k`.
fn fill_ones(cx: &mut Lower, k: usize) -> Result<(), String> {
    let (dtype, shape) = cx.output_type(k)?;
    let one = match scalar_type(dtype) {
        DType::F32 => cx.ins().f32const(1.0),
        DType::F64 => cx.ins().f64const(1.0),
        t => cx.ins().iconst(clif_type(t), 1),
    };
    let one = narrow(cx, one, dtype, MINIFLOAT_SATURATE)?;
    let base = cx.output_ptr(k)?;
    let l = cx.loop_begin(shape.iter().product());
    let offset = cx.ins().imul_imm_s(l.index, dtype.size() as i64);
    let at = cx.ins().iadd(base, offset);
    cx.ins().store(MemFlagsData::trusted(), one, at, 0);
    cx.loop_end(l);
    Ok(())
}

/// The type arithmetic on `dtype` is done in: f16 and bf16 widen to f32.
pub fn compute_type(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// The type elementwise arithmetic on `dtype` is done in: [`compute_type`],
/// and f32 for the float8 bit patterns too ([`widen`], [`narrow`]).
fn scalar_type(dtype: DType) -> DType {
    if dtype.is_minifloat() {
        DType::F32
    } else {
        compute_type(dtype)
    }
}

/// A loaded element of `dtype` in its scalar type.
pub fn widen(cx: &mut Lower, raw: Value, dtype: DType) -> Result<Value, String> {
    if dtype.is_minifloat() {
        let bits = cx.ins().uextend(types::I32, raw);
        let elem = cx.ins().iconst(types::I64, dtype.onnx_code() as i64);
        let kernel = "onnxc_minifloat_to_f32";
        return cx.call(kernel, &[bits, elem])?.ok_or_else(|| format!("{kernel} returns nothing"));
    }
    let kernel = match dtype {
        DType::F16 => "onnxc_f16_to_f32",
        DType::BF16 => "onnxc_bf16_to_f32",
        _ => return Ok(raw),
    };
    let bits = cx.ins().uextend(types::I32, raw);
    cx.call(kernel, &[bits])?.ok_or_else(|| format!("{kernel} returns nothing"))
}

/// A computed value (in the scalar type; f64 too for float8) as stored for
/// `dtype`; float8 narrows by `mode` (`onnxc_runtime::MINIFLOAT_*`).
pub fn narrow(cx: &mut Lower, value: Value, dtype: DType, mode: i64) -> Result<Value, String> {
    if dtype.is_minifloat() {
        let double = cx.b.func.dfg.value_type(value) == types::F64;
        let kernel = if double { "onnxc_f64_to_minifloat" } else { "onnxc_f32_to_minifloat" };
        let elem = cx.ins().iconst(types::I64, dtype.onnx_code() as i64);
        let mode = cx.ins().iconst(types::I64, mode);
        let bits = cx.call(kernel, &[value, elem, mode])?.ok_or_else(|| format!("{kernel} returns nothing"))?;
        return Ok(cx.ins().ireduce(types::I8, bits));
    }
    let kernel = match dtype {
        DType::F16 => "onnxc_f32_to_f16",
        DType::BF16 => "onnxc_f32_to_bf16",
        _ => return Ok(value),
    };
    let bits = cx.call(kernel, &[value])?.ok_or_else(|| format!("{kernel} returns nothing"))?;
    Ok(cx.ins().ireduce(types::I16, bits))
}

/// A float constant of the compute type of `dtype` (f32 or f64).
fn fconst(cx: &mut Lower, dtype: DType, v: f64) -> Value {
    if dtype == DType::F64 {
        cx.b.ins().f64const(v)
    } else {
        cx.b.ins().f32const(v as f32)
    }
}

/// A float constant of `like`'s Cranelift type: f32, f64, or a vector of
/// either (the constant in every lane).
pub fn fconst_like(cx: &mut Lower, like: Value, v: f64) -> Value {
    let ty = cx.b.func.dfg.value_type(like);
    let scalar = if ty.lane_type() == types::F64 { cx.b.ins().f64const(v) } else { cx.b.ins().f32const(v as f32) };
    if ty.is_vector() {
        cx.b.ins().splat(ty, scalar)
    } else {
        scalar
    }
}

/// `cond ? a : b` for a scalar condition, or lane by lane for the mask a
/// vector comparison gives (all ones or all zeros per lane).
fn choose(cx: &mut Lower, cond: Value, a: Value, b: Value) -> Value {
    let ty = cx.b.func.dfg.value_type(a);
    if ty.is_vector() {
        let mask = cx.b.ins().bitcast(ty, MemFlagsData::new(), cond);
        cx.b.ins().bitselect(mask, a, b)
    } else {
        cx.b.ins().select(cond, a, b)
    }
}

/// True when [`emit_scalar`] computes `func` on f32 lanes exactly as on
/// one f32: only instructions Cranelift has for vectors, no library call.
pub fn lane_safe(func: Func) -> bool {
    matches!(
        func,
        Func::Abs
            | Func::Neg
            | Func::Sqrt
            | Func::Relu
            | Func::LeakyRelu { .. }
            | Func::HardSigmoid { .. }
            | Func::HardSwish
            | Func::Add
            | Func::Sub
            | Func::Mul
            | Func::Div
            | Func::Max
            | Func::Min
            | Func::Sum
            | Func::Clip
    )
}

/// Calls a libm-backed scalar function of the kernel library (in portable
/// mode: its Cranelift sequence, where [`crate::codegen::portable_math`] has one).
fn math(cx: &mut Lower, name: &str, dtype: DType, args: &[Value]) -> Result<Value, String> {
    if let (true, [x]) = (cx.portable(), args) {
        if let Some(y) = crate::codegen::portable_math::apply(cx.b, name, dtype, *x) {
            return Ok(y);
        }
    }
    let full = if dtype == DType::F64 { format!("onnxc_{name}") } else { format!("onnxc_{name}f") };
    cx.call(&full, args)?.ok_or_else(|| format!("{full} returns nothing"))
}

/// Emits one application of `func` on loaded scalars. `present` lists which
/// node inputs the args correspond to (Clip's bounds are optional).
pub fn emit_scalar(
    cx: &mut Lower,
    func: Func,
    in_dtype: DType,
    present: &[usize],
    args: &[(Value, DType)],
) -> Result<Value, String> {
    let x = args.first().map(|a| a.0).ok_or("no operands")?;
    let t = in_dtype;
    let float = t.is_float();
    let signed = t.is_signed_int();
    let y = || args.get(1).map(|a| a.0).ok_or("missing second operand".to_string());
    Ok(match func {
        Func::Identity | Func::Dropout { .. } | Func::BitCast { .. } => x,
        Func::Abs if float => cx.ins().fabs(x),
        Func::Abs if signed => cx.ins().iabs(x),
        Func::Abs => x,
        Func::Neg if float => cx.ins().fneg(x),
        Func::Neg => cx.ins().ineg(x),
        Func::Sqrt => cx.ins().sqrt(x),
        Func::Reciprocal => {
            let one = fconst(cx, t, 1.0);
            cx.ins().fdiv(one, x)
        }
        Func::Exp => math(cx, "exp", t, &[x])?,
        Func::Log => math(cx, "log", t, &[x])?,
        Func::Sin => math(cx, "sin", t, &[x])?,
        Func::Cos => math(cx, "cos", t, &[x])?,
        Func::Tan => math(cx, "tan", t, &[x])?,
        Func::Asin => math(cx, "asin", t, &[x])?,
        Func::Acos => math(cx, "acos", t, &[x])?,
        Func::Atan => math(cx, "atan", t, &[x])?,
        Func::Sinh => math(cx, "sinh", t, &[x])?,
        Func::Cosh => math(cx, "cosh", t, &[x])?,
        Func::Asinh => math(cx, "asinh", t, &[x])?,
        Func::Acosh => math(cx, "acosh", t, &[x])?,
        Func::Atanh => math(cx, "atanh", t, &[x])?,
        Func::Tanh => math(cx, "tanh", t, &[x])?,
        Func::Round => cx.ins().nearest(x),
        Func::IsNaN => cx.ins().fcmp(FloatCC::Unordered, x, x),
        Func::IsInf { positive, negative } => {
            let (pinf, ninf) = (fconst(cx, t, f64::INFINITY), fconst(cx, t, f64::NEG_INFINITY));
            let is_pos = cx.ins().fcmp(FloatCC::Equal, x, pinf);
            let is_neg = cx.ins().fcmp(FloatCC::Equal, x, ninf);
            match (positive, negative) {
                (true, true) => cx.ins().bor(is_pos, is_neg),
                (true, false) => is_pos,
                (false, true) => is_neg,
                (false, false) => cx.ins().iconst(types::I8, 0),
            }
        }
        Func::Softplus => softplus(cx, t, x)?,
        Func::Softsign => {
            let one = fconst(cx, t, 1.0);
            let ax = cx.ins().fabs(x);
            let d = cx.ins().fadd(one, ax);
            cx.ins().fdiv(x, d)
        }
        Func::Mish => {
            let sp = softplus(cx, t, x)?;
            let th = math(cx, "tanh", t, &[sp])?;
            cx.ins().fmul(x, th)
        }
        Func::Selu { alpha, gamma } => {
            // gamma * (x > 0 ? x : alpha * (exp(x) - 1))
            let e = math(cx, "expm1", t, &[x])?;
            let (a, g, zero) = (fconst(cx, t, alpha as f64), fconst(cx, t, gamma as f64), fconst(cx, t, 0.0));
            let neg = cx.ins().fmul(e, a);
            let pos = cx.ins().fcmp(FloatCC::GreaterThan, x, zero);
            let v = cx.ins().select(pos, x, neg);
            cx.ins().fmul(v, g)
        }
        Func::Celu { alpha } => {
            // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
            let (a, zero) = (fconst(cx, t, alpha as f64), fconst(cx, t, 0.0));
            let scaled = cx.ins().fdiv(x, a);
            let e = math(cx, "expm1", t, &[scaled])?;
            let neg = cx.ins().fmul(e, a);
            let neg = cx.ins().fmin(neg, zero);
            let pos = cx.ins().fmax(x, zero);
            cx.ins().fadd(pos, neg)
        }
        Func::ThresholdedRelu { alpha } => {
            let (a, zero) = (fconst(cx, t, alpha as f64), fconst(cx, t, 0.0));
            let above = cx.ins().fcmp(FloatCC::GreaterThan, x, a);
            cx.ins().select(above, x, zero)
        }
        Func::Shrink { lambd, bias } => {
            // x < -lambd ? x + bias : x > lambd ? x - bias : 0, in the input's type
            let as_t = |cx: &mut Lower, v: f64| -> Result<Value, String> {
                let f = fconst(cx, DType::F64, v);
                cast(cx, f, DType::F64, t)
            };
            let (lo, hi, b) = (as_t(cx, -(lambd as f64))?, as_t(cx, lambd as f64)?, as_t(cx, bias as f64)?);
            let zero = as_t(cx, 0.0)?;
            let (below, above, plus, minus) = if float {
                (
                    cx.ins().fcmp(FloatCC::LessThan, x, lo),
                    cx.ins().fcmp(FloatCC::GreaterThan, x, hi),
                    cx.ins().fadd(x, b),
                    cx.ins().fsub(x, b),
                )
            } else {
                let (lt, gt) = if signed {
                    (IntCC::SignedLessThan, IntCC::SignedGreaterThan)
                } else {
                    (IntCC::UnsignedLessThan, IntCC::UnsignedGreaterThan)
                };
                (cx.ins().icmp(lt, x, lo), cx.ins().icmp(gt, x, hi), cx.ins().iadd(x, b), cx.ins().isub(x, b))
            };
            let v = cx.ins().select(above, minus, zero);
            cx.ins().select(below, plus, v)
        }
        Func::Binarizer { threshold } => {
            // Compared in f64, as the reference compares integers with a float.
            let wide = cast(cx, x, t, DType::F64)?;
            let limit = fconst(cx, DType::F64, threshold as f64);
            let above = cx.ins().fcmp(FloatCC::GreaterThan, wide, limit);
            let (one, zero) = (fconst(cx, DType::F64, 1.0), fconst(cx, DType::F64, 0.0));
            let bit = cx.ins().select(above, one, zero);
            cast(cx, bit, DType::F64, t)?
        }
        Func::Swish { alpha } => {
            let a = fconst(cx, t, alpha as f64);
            let ax = cx.ins().fmul(x, a);
            let neg = cx.ins().fneg(ax);
            let e = math(cx, "exp", t, &[neg])?;
            let one = fconst(cx, t, 1.0);
            let d = cx.ins().fadd(one, e);
            cx.ins().fdiv(x, d)
        }
        Func::BitwiseNot => cx.ins().bnot(x),
        Func::BitwiseAnd => cx.ins().band(x, y()?),
        Func::BitwiseOr => cx.ins().bor(x, y()?),
        Func::BitwiseXor => cx.ins().bxor(x, y()?),
        Func::BitShift { left } => {
            // Shifting by the width or more gives 0 (numpy), not a masked shift.
            let amount = y()?;
            let bits = (t.size() * 8) as i64;
            let too_far = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, amount, bits);
            if !left && signed {
                // Arithmetic shift: past the width only the sign remains.
                let max = cx.ins().iconst(clif_type(t), bits - 1);
                let clamped = cx.ins().select(too_far, max, amount);
                cx.ins().sshr(x, clamped)
            } else {
                let shifted = if left { cx.ins().ishl(x, amount) } else { cx.ins().ushr(x, amount) };
                let zero = cx.ins().iconst(clif_type(t), 0);
                cx.ins().select(too_far, zero, shifted)
            }
        }
        Func::Mod { fmod } => modulo(cx, t, x, y()?, fmod)?,
        Func::CastLike { .. } => {
            let to = args.get(1).map(|a| a.1).ok_or("missing target operand")?;
            cast(cx, x, t, to)?
        }
        Func::Erf => math(cx, "erf", t, &[x])?,
        Func::Sigmoid => {
            // 1 / (1 + exp(-x))
            let neg = cx.ins().fneg(x);
            let e = math(cx, "exp", t, &[neg])?;
            let one = fconst(cx, t, 1.0);
            let d = cx.ins().fadd(one, e);
            cx.ins().fdiv(one, d)
        }
        Func::Relu if float => {
            let zero = fconst_like(cx, x, 0.0);
            cx.ins().fmax(x, zero)
        }
        Func::Relu => {
            let zero = cx.ins().iconst(clif_type(t), 0);
            if signed {
                cx.ins().smax(x, zero)
            } else {
                x
            }
        }
        Func::Floor => cx.ins().floor(x),
        Func::Ceil => cx.ins().ceil(x),
        Func::Sign if float => {
            let (zero, one, minus) = (fconst(cx, t, 0.0), fconst(cx, t, 1.0), fconst(cx, t, -1.0));
            let pos = cx.ins().fcmp(FloatCC::GreaterThan, x, zero);
            let neg = cx.ins().fcmp(FloatCC::LessThan, x, zero);
            let s = cx.ins().select(neg, minus, zero);
            let s = cx.ins().select(pos, one, s);
            // NaN stays NaN.
            let nan = cx.ins().fcmp(FloatCC::Unordered, x, x);
            cx.ins().select(nan, x, s)
        }
        Func::Sign => {
            let ty = clif_type(t);
            let (zero, one, minus) = (cx.ins().iconst(ty, 0), cx.ins().iconst(ty, 1), cx.ins().iconst(ty, -1));
            let pos =
                cx.ins().icmp_imm_u(if signed { IntCC::SignedGreaterThan } else { IntCC::UnsignedGreaterThan }, x, 0);
            let neg = cx.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
            let s = if signed { cx.ins().select(neg, minus, zero) } else { zero };
            cx.ins().select(pos, one, s)
        }
        Func::Not => cx.ins().bxor_imm_u(x, 1),
        Func::LeakyRelu { alpha } => {
            let a = fconst_like(cx, x, alpha as f64);
            let scaled = cx.ins().fmul(x, a);
            let zero = fconst_like(cx, x, 0.0);
            let neg = cx.ins().fcmp(FloatCC::LessThan, x, zero);
            choose(cx, neg, scaled, x)
        }
        Func::Elu { alpha } => {
            let e = math(cx, "expm1", t, &[x])?;
            let a = fconst(cx, t, alpha as f64);
            let scaled = cx.ins().fmul(e, a);
            let zero = fconst(cx, t, 0.0);
            let neg = cx.ins().fcmp(FloatCC::LessThan, x, zero);
            cx.ins().select(neg, scaled, x)
        }
        Func::HardSigmoid { alpha, beta } => {
            let (a, b) = (fconst_like(cx, x, alpha as f64), fconst_like(cx, x, beta as f64));
            let v = cx.ins().fmul(x, a);
            let v = cx.ins().fadd(v, b);
            clamp01(cx, v)
        }
        Func::HardSwish => {
            let (a, b) = (fconst_like(cx, x, 1.0 / 6.0), fconst_like(cx, x, 0.5));
            let v = cx.ins().fmul(x, a);
            let v = cx.ins().fadd(v, b);
            let v = clamp01(cx, v);
            cx.ins().fmul(x, v)
        }
        Func::Gelu { tanh } => {
            let half = fconst(cx, t, 0.5);
            let one = fconst(cx, t, 1.0);
            let inner = if tanh {
                // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
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
            cx.ins().fmul(v, half)
        }
        Func::Cast { to, .. } => cast(cx, x, t, to)?,
        Func::Add if float => cx.ins().fadd(x, y()?),
        Func::Add => cx.ins().iadd(x, y()?),
        Func::Sub if float => cx.ins().fsub(x, y()?),
        Func::Sub => cx.ins().isub(x, y()?),
        Func::Mul if float => cx.ins().fmul(x, y()?),
        Func::Mul => cx.ins().imul(x, y()?),
        Func::Div if float => cx.ins().fdiv(x, y()?),
        Func::Div => int_div(cx, x, y()?, signed),
        Func::Pow => {
            let (e, e_type) = *args.get(1).ok_or("missing exponent")?;
            let compute = if t == DType::F64 || e_type == DType::F64 { DType::F64 } else { DType::F32 };
            let base = cast(cx, x, t, compute)?;
            let exp = cast(cx, e, e_type, compute)?;
            let r = math(cx, "pow", compute, &[base, exp])?;
            cast(cx, r, compute, t)?
        }
        Func::PRelu { .. } if float => {
            let scaled = cx.ins().fmul(x, y()?);
            let zero = fconst(cx, t, 0.0);
            let neg = cx.ins().fcmp(FloatCC::LessThan, x, zero);
            cx.ins().select(neg, scaled, x)
        }
        Func::PRelu { .. } => {
            let scaled = cx.ins().imul(x, y()?);
            let neg = cx.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
            if signed {
                cx.ins().select(neg, scaled, x)
            } else {
                x
            }
        }
        Func::Equal | Func::Less | Func::Greater | Func::LessOrEqual | Func::GreaterOrEqual => {
            compare(cx, func, t, x, y()?)
        }
        Func::And => cx.ins().band(x, y()?),
        Func::Or => cx.ins().bor(x, y()?),
        Func::Xor => cx.ins().bxor(x, y()?),
        Func::Max | Func::Min | Func::Sum | Func::Mean => {
            let mut acc = x;
            for &(v, _) in &args[1..] {
                acc = match (func, float) {
                    (Func::Max, true) => cx.ins().fmax(acc, v),
                    (Func::Min, true) => cx.ins().fmin(acc, v),
                    (Func::Max, false) if signed => cx.ins().smax(acc, v),
                    (Func::Max, false) => cx.ins().umax(acc, v),
                    (Func::Min, false) if signed => cx.ins().smin(acc, v),
                    (Func::Min, false) => cx.ins().umin(acc, v),
                    (_, true) => cx.ins().fadd(acc, v),
                    (_, false) => cx.ins().iadd(acc, v),
                };
            }
            if func == Func::Mean {
                let n = fconst(cx, t, args.len() as f64);
                acc = cx.ins().fdiv(acc, n);
            }
            acc
        }
        Func::Where => {
            let (a, b) = (y()?, args.get(2).map(|a| a.0).ok_or("missing operand")?);
            cx.ins().select(x, a, b)
        }
        Func::Clip => {
            let mut v = x;
            for (&input, &(bound, _)) in present.iter().zip(args).skip(1) {
                let lower = input == 1;
                v = match (lower, float) {
                    (true, true) => cx.ins().fmax(v, bound),
                    (false, true) => cx.ins().fmin(v, bound),
                    (true, false) if signed => cx.ins().smax(v, bound),
                    (true, false) => cx.ins().umax(v, bound),
                    (false, false) if signed => cx.ins().smin(v, bound),
                    (false, false) => cx.ins().umin(v, bound),
                };
            }
            v
        }
    })
}

/// log(1 + exp(x)).
fn softplus(cx: &mut Lower, t: DType, x: Value) -> Result<Value, String> {
    let e = math(cx, "exp", t, &[x])?;
    math(cx, "log1p", t, &[e])
}

/// ONNX Mod: with `fmod` the remainder takes the dividend's sign (C fmod);
/// without it (integers only) the divisor's sign (Python `%`). An integer
/// zero divisor leaves the model with a status.
fn modulo(cx: &mut Lower, t: DType, x: Value, y: Value, fmod: bool) -> Result<Value, String> {
    if t.is_float() {
        let r = math(cx, "fmod", t, &[x, y])?;
        if fmod {
            return Ok(r);
        }
        // Python: a nonzero remainder takes the divisor's sign.
        let zero = fconst(cx, t, 0.0);
        let r_neg = cx.ins().fcmp(FloatCC::LessThan, r, zero);
        let y_neg = cx.ins().fcmp(FloatCC::LessThan, y, zero);
        let r_nonzero = cx.ins().fcmp(FloatCC::NotEqual, r, zero);
        let differ = cx.ins().bxor(r_neg, y_neg);
        let fix = cx.ins().band(differ, r_nonzero);
        let adjusted = cx.ins().fadd(r, y);
        return Ok(cx.ins().select(fix, adjusted, r));
    }
    let zero = cx.ins().icmp_imm_u(IntCC::Equal, y, 0);
    cx.fail_if(zero, crate::codegen::status::DIVISION_BY_ZERO);
    if !t.is_signed_int() {
        return Ok(cx.ins().urem(x, y));
    }
    // srem traps on MIN % -1, whose remainder is 0 anyway.
    let ty = clif_type(t);
    let minus_one = cx.ins().icmp_imm_s(IntCC::Equal, y, -1);
    let one = cx.ins().iconst(ty, 1);
    let safe = cx.ins().select(minus_one, one, y);
    let r = cx.ins().srem(x, safe);
    if fmod {
        return Ok(r);
    }
    // Python: if r != 0 and sign(r) != sign(y): r += y
    let r_nonzero = cx.ins().icmp_imm_u(IntCC::NotEqual, r, 0);
    let signs = cx.ins().bxor(r, y);
    let differ = cx.ins().icmp_imm_s(IntCC::SignedLessThan, signs, 0);
    let fix = cx.ins().band(r_nonzero, differ);
    let adjusted = cx.ins().iadd(r, safe);
    Ok(cx.ins().select(fix, adjusted, r))
}

/// min(max(v, 0), 1) in `v`'s float type (lanes too).
fn clamp01(cx: &mut Lower, v: Value) -> Value {
    let (zero, one) = (fconst_like(cx, v, 0.0), fconst_like(cx, v, 1.0));
    let v = cx.b.ins().fmax(v, zero);
    cx.b.ins().fmin(v, one)
}

/// Integer division truncating toward zero; a zero divisor leaves the model
/// with a status, and MIN / -1 wraps instead of trapping.
fn int_div(cx: &mut Lower, x: Value, y: Value, signed: bool) -> Value {
    let zero = cx.b.ins().icmp_imm_u(IntCC::Equal, y, 0);
    cx.fail_if(zero, crate::codegen::status::DIVISION_BY_ZERO);
    if !signed {
        return cx.b.ins().udiv(x, y);
    }
    let ty = cx.b.func.dfg.value_type(y);
    let minus_one = cx.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
    let one = cx.b.ins().iconst(ty, 1);
    let safe = cx.b.ins().select(minus_one, one, y);
    let q = cx.b.ins().sdiv(x, safe);
    let negated = cx.b.ins().ineg(x);
    cx.b.ins().select(minus_one, negated, q)
}

fn compare(cx: &mut Lower, func: Func, t: DType, x: Value, y: Value) -> Value {
    if t.is_float() {
        let cc = match func {
            Func::Equal => FloatCC::Equal,
            Func::Less => FloatCC::LessThan,
            Func::Greater => FloatCC::GreaterThan,
            Func::LessOrEqual => FloatCC::LessThanOrEqual,
            _ => FloatCC::GreaterThanOrEqual,
        };
        return cx.b.ins().fcmp(cc, x, y);
    }
    let s = t.is_signed_int();
    let cc = match (func, s) {
        (Func::Equal, _) => IntCC::Equal,
        (Func::Less, true) => IntCC::SignedLessThan,
        (Func::Less, false) => IntCC::UnsignedLessThan,
        (Func::Greater, true) => IntCC::SignedGreaterThan,
        (Func::Greater, false) => IntCC::UnsignedGreaterThan,
        (Func::LessOrEqual, true) => IntCC::SignedLessThanOrEqual,
        (Func::LessOrEqual, false) => IntCC::UnsignedLessThanOrEqual,
        (_, true) => IntCC::SignedGreaterThanOrEqual,
        (_, false) => IntCC::UnsignedGreaterThanOrEqual,
    };
    cx.b.ins().icmp(cc, x, y)
}

/// Converts a scalar between element types (Cast semantics: float → int
/// truncates and saturates, anything → bool is `!= 0`).
pub fn cast(cx: &mut Lower, x: Value, from: DType, to: DType) -> Result<Value, String> {
    if from == to {
        return Ok(x);
    }
    for t in [from, to] {
        if matches!(t, DType::F16 | DType::BF16) {
            return Err(format!("Cast involving {t} is not supported yet"));
        }
    }
    let (fty, tty) = (clif_type(from), clif_type(to));
    let ins = cx.b.ins();
    Ok(match (from.is_float(), to.is_float()) {
        _ if to == DType::Bool => {
            if from.is_float() {
                let zero = if from == DType::F64 { cx.b.ins().f64const(0.0) } else { cx.b.ins().f32const(0.0) };
                cx.b.ins().fcmp(FloatCC::NotEqual, x, zero)
            } else {
                ins.icmp_imm_u(IntCC::NotEqual, x, 0)
            }
        }
        (true, true) if to == DType::F64 => ins.fpromote(tty, x),
        (true, true) => ins.fdemote(tty, x),
        (false, true) if from.is_signed_int() => ins.fcvt_from_sint(tty, x),
        (false, true) => ins.fcvt_from_uint(tty, x),
        (true, false) => {
            let wide = if tty.bits() < 32 { types::I32 } else { tty };
            let v = if to.is_signed_int() || tty.bits() < 32 {
                cx.b.ins().fcvt_to_sint_sat(wide, x)
            } else {
                cx.b.ins().fcvt_to_uint_sat(wide, x)
            };
            if wide == tty {
                v
            } else {
                cx.b.ins().ireduce(tty, v)
            }
        }
        (false, false) => {
            if tty.bits() == fty.bits() {
                x
            } else if tty.bits() < fty.bits() {
                ins.ireduce(tty, x)
            } else if from.is_signed_int() {
                ins.sextend(tty, x)
            } else {
                ins.uextend(tty, x)
            }
        }
    })
}
