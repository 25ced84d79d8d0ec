//! Elementwise operators with numpy broadcasting: unary math and
//! activations, binary arithmetic and comparisons, variadic Sum/Mean/Max/Min,
//! Where, Clip, Cast, Identity, and Dropout in inference mode (training mode
//! is in `random.rs`).
//!
//! Each function is one row of the table in `table.rs` (its ONNX name,
//! arity, types, attributes, scalar emitter, lane safety, whether it joins
//! fused chains, kernel epilogue code), and the emitters live by family: `arith.rs`,
//! `compare.rs`, `bits.rs`, `transcendental.rs`, `activation.rs`,
//! `cast.rs`. All share one lowering, the loop of `broadcast_loop.rs` over
//! the broadcast output shape whose body is the function's emitter (see
//! [`emit_scalar`]); where the emitter is lane-safe and every tensor is f32
//! the innermost loop runs four lanes at a time with the same instructions
//! (same bits). The same loop evaluates fused chains of these functions
//! (`fused.rs`), and kernels apply the functions that have an epilogue code
//! to what they store ([`Activation`]).
//!
//! Type constraints: arithmetic on floats and every integer type;
//! transcendental functions on floats; logical ops on bool; bitwise ops and
//! BitShift on integers; Cast/CastLike between all numeric types and bool.
//! f16, bf16 and float8 are computed in f32: each element is widened on
//! load and rounded on store.

mod activation;
mod arith;
mod bits;
mod broadcast_loop;
mod cast;
mod compare;
mod epilogue;
mod program;
mod shape_elements;
mod table;
mod transcendental;

pub use broadcast_loop::{emit_broadcast_loop, emit_loop_at, Operand};
pub use cast::{cast, compute_type, narrow, widen};
pub use epilogue::Activation;
pub use program::lower_chain;
pub use table::{row_named, Func};

use super::fused::{Arg, Step};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::{types, InstBuilder, Lower, Value};
use crate::import::NodeImport;
use crate::ir::dim_expr::DimExpr;
use crate::ir::shape::{broadcast_dims, broadcast_strides, dims_text};
use crate::ir::DType;
use broadcast_loop::fill_ones;
use cast::scalar_type;
use onnxc_runtime::MINIFLOAT_SATURATE;
use table::{Accepts, OutputType, SameType};

#[derive(Clone, Debug)]
pub struct Elementwise {
    pub op_type: &'static str,
    pub func: Func,
}

/// The importer of every function in the table: the node's row, then its
/// attributes.
pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let row = table::row_named(cx.op_type).ok_or_else(|| format!("{} is not elementwise", cx.op_type))?;
    let func = (row.import)(cx)?;
    Ok(Op::Elementwise(Elementwise { op_type: row.op_type, func }))
}

impl Elementwise {
    /// The shape operand `i` broadcasts as: its own, except for opset-6
    /// PRelu, whose 1-D slope (beyond a scalar) lines up with axis 1.
    /// `wide` says whether the operand's first dim is more than 1.
    fn operand_shape<D: Clone + From<usize>>(&self, i: usize, shape: &[D], rank: usize, wide: bool) -> Vec<D> {
        match self.func {
            Func::PRelu { per_channel: true } if i == 1 && shape.len() == 1 && wide && rank > 2 => {
                let mut s = vec![D::from(1); rank - 1];
                s[0] = shape[0].clone();
                s
            }
            _ => shape.to_vec(),
        }
    }

    /// The arity and element types the row accepts, and the string and
    /// BitCast special cases.
    fn check_inputs(&self, cx: &InferCx) -> Result<(), String> {
        let row = self.func.row();
        let count = cx.inputs.len();
        if count < row.arity.0 || count > row.arity.1 {
            return Err(format!("takes {}..={} inputs, got {count}", row.arity.0, row.arity.1.min(99)));
        }
        let first = cx.input(0)?;
        let ok = match row.accepts {
            Accepts::Numeric => first.dtype != DType::Bool,
            Accepts::Float => first.dtype.is_float(),
            Accepts::Logical => first.dtype == DType::Bool,
            Accepts::Integer => first.dtype.is_int(),
            Accepts::Any => true,
        };
        if !ok {
            return Err(format!("element type {} is not supported", first.dtype));
        }
        self.check_strings(cx, first.dtype)?;
        if let Func::BitCast { to } = self.func {
            if to.size() != first.dtype.size() {
                return Err(format!("BitCast from {} to {to}: the types differ in width", first.dtype));
            }
        }
        Ok(())
    }

    /// The operands the row says share one element type do.
    fn check_same_type(&self, cx: &InferCx) -> Result<(), String> {
        let same_type_from = match self.func.row().same_type {
            SameType::FromInput0 => 0,
            SameType::FromInput1 => 1,
            SameType::Free => return Ok(()),
        };
        let want = cx.input(same_type_from)?.dtype;
        for (i, input) in cx.inputs.iter().enumerate().skip(same_type_from) {
            if let Some(input) = input.as_ref().filter(|input| input.dtype != want) {
                return Err(format!("input {i} is {}, expected {want}", input.dtype));
            }
        }
        Ok(())
    }

    /// Strings go through Identity, Equal and Cast only.
    fn check_strings(&self, cx: &InferCx, first: DType) -> Result<(), String> {
        let strings = cx.inputs.iter().flatten().any(|i| i.dtype == DType::String)
            || matches!(self.func, Func::Cast { to: DType::String, .. } | Func::BitCast { to: DType::String });
        match self.func {
            _ if !strings => Ok(()),
            Func::Equal | Func::Identity => Ok(()),
            Func::Cast { to, .. } => super::strings::check_cast(first, to),
            _ => Err(format!("{} on string tensors is not supported yet", self.op_type)),
        }
    }

    /// Lowers the node as a one-step elementwise program where it can be
    /// (see `program.rs`); `present` lists the node's inputs.
    fn lower_as_program(&self, cx: &mut Lower, present: &[usize]) -> Result<bool, String> {
        if self.func.row().step == table::Step::Absent {
            return Ok(false);
        }
        let args = present.iter().map(|&i| (i, if i == 0 { Arg::Chain } else { Arg::Input(i) })).collect();
        lower_chain(cx, &[Step::Apply { func: self.func, args }])
    }

    /// The broadcast output shape (CastLike's input 1 gives only a type).
    fn output_shape(&self, cx: &InferCx) -> Result<Vec<DimExpr>, String> {
        let present: Vec<usize> = (0..cx.inputs.len()).filter(|&i| cx.opt_input(i).is_some()).collect();
        let shaping = if matches!(self.func, Func::CastLike { .. }) { &present[..1] } else { &present[..] };
        let rank = cx.dims(0)?.len();
        let mut shape: Vec<DimExpr> = Vec::new();
        for (i, &input) in shaping.iter().enumerate() {
            let dims = cx.dims(input)?;
            let wide = dims.first().and_then(DimExpr::as_size).is_some_and(|d| d > 1);
            let operand = self.operand_shape(i, &dims, rank, wide);
            shape = broadcast_dims(&shape, &operand, cx.facts())
                .ok_or_else(|| format!("shapes {} and {} do not broadcast", dims_text(&shape), dims_text(&dims)))?;
        }
        Ok(shape)
    }
}

impl Operator for Elementwise {
    fn name(&self) -> &'static str {
        self.op_type
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        self.check_inputs(cx)?;
        let shape = self.output_shape(cx)?;
        self.check_same_type(cx)?;
        let first = cx.input(0)?.dtype;
        let dtype = match self.func.row().result {
            OutputType::SameAsInput0 => first,
            OutputType::SameAsInput1 => cx.input(1)?.dtype,
            OutputType::Boolean => DType::Bool,
            OutputType::CastTarget => match self.func {
                Func::Cast { to, .. } | Func::BitCast { to } => to,
                _ => first,
            },
        };
        let first_output = Inferred::of_dims(dtype, shape.clone())?;
        let mut outputs = vec![shape_elements::with_symbolic_elements(self.func, cx, first_output)];
        if let (Func::Dropout { mask_is_bool }, true) = (self.func, cx.output_count > 1) {
            outputs.push(Inferred::of_dims(if mask_is_bool { DType::Bool } else { dtype }, shape)?);
        }
        Ok(outputs)
    }

    fn infers_symbolically(&self) -> bool {
        true
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
            let shape = self.operand_shape(i, &shape, out_shape.len(), shape.first().is_some_and(|&d| d > 1));
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
        if self.lower_as_program(cx, &present)? {
            return Ok(());
        }
        emit_broadcast_loop(cx, &out_shape, (out_dtype, mode), &operands, func.row().lanes, &mut |cx, args| {
            emit_scalar(cx, func, in_dtype, &present, args)
        })
    }
}

/// What an emitter applies its function to.
pub struct Operands<'a> {
    /// The element type computed in (f32 for f16, bf16 and float8).
    pub dtype: DType,
    /// Which node input each of `args` is (Clip's bounds are optional).
    pub present: &'a [usize],
    /// The loaded operands with their types, never empty.
    pub args: &'a [(Value, DType)],
}

impl Operands<'_> {
    /// The first operand.
    fn x(&self) -> Value {
        self.args[0].0
    }

    /// The second operand.
    fn y(&self) -> Result<Value, String> {
        self.args.get(1).map(|a| a.0).ok_or_else(|| "missing second operand".to_string())
    }
}

/// Emits one application of `func` on loaded scalars (or f32 lanes, for a
/// lane-safe function) through its row's emitter. `present` lists which
/// node inputs the args correspond to (Clip's bounds are optional).
pub fn emit_scalar(
    cx: &mut Lower,
    func: Func,
    in_dtype: DType,
    present: &[usize],
    args: &[(Value, DType)],
) -> Result<Value, String> {
    if args.is_empty() {
        return Err("no operands".into());
    }
    (func.row().emit)(cx, func, &Operands { dtype: in_dtype, present, args })
}

/// A float constant of the compute type of `dtype` (f32 or f64).
fn fconst(cx: &mut Lower, dtype: DType, v: f64) -> Value {
    if dtype == DType::F64 {
        cx.ins().f64const(v)
    } else {
        cx.ins().f32const(v as f32)
    }
}

/// A float constant of `like`'s Cranelift type: f32, f64, or a vector of
/// either (the constant in every lane).
pub fn fconst_like(cx: &mut Lower, like: Value, v: f64) -> Value {
    let ty = cx.b.func.dfg.value_type(like);
    let scalar = if ty.lane_type() == types::F64 { cx.ins().f64const(v) } else { cx.ins().f32const(v as f32) };
    if ty.is_vector() {
        cx.ins().splat(ty, scalar)
    } else {
        scalar
    }
}
