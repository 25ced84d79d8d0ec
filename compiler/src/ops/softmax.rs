//! Softmax, LogSoftmax and Hardmax along one axis.
//!
//! Type constraints: `T` is a float type (f16, f32, f64, bf16 from opset 13);
//! the output has the input's type and shape. onnxc lowers f32 and f64
//! through `onnxc_softmax_{f32,f64}` (each computing in its own type) and
//! f16/bf16 through the f32 kernel on staged copies ([`crate::codegen::staging`]).
//! Portable mode lowers Softmax and LogSoftmax as Cranelift folds (max,
//! then sum of exponentials) with [`crate::codegen::portable_math`]'s exp and log,
//! and Hardmax as a fold for the first index of the maximum.
//!
//! Opset differences, normalised in the importer into [`Softmax::coerce_2d`]:
//! before opset 13 the `axis` attribute defaults to 1 and the input is
//! coerced to the 2-D matrix `[prod(dims[..axis]), prod(dims[axis..])]`, the
//! operation running along each row; from opset 13 `axis` defaults to -1 and
//! the operation runs along that single axis. Both become one
//! `[outer, axis_len, inner]` split of the contiguous input (see
//! [`split_at_axis`]), which is all the kernel needs.

use super::elementwise::compute_type;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{clif_type, FloatCC, InstBuilder, IntCC, Level, Lower, MemFlagsData, Type, Value};
use crate::import::NodeImport;
use crate::ir::shape::normalize_axis;
use crate::ir::DType;
use onnxc_runtime::abi::softmax::{SoftmaxParams, HARDMAX, LOG_SOFTMAX, SOFTMAX};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftmaxKind {
    Softmax,
    LogSoftmax,
    Hardmax,
}

#[derive(Clone, Debug)]
pub struct Softmax {
    pub kind: SoftmaxKind,
    /// As given (possibly negative); checked against the rank in `infer`.
    pub axis: i64,
    /// Opset < 13: reduce over every dim from `axis` on (the 2-D coercion).
    pub coerce_2d: bool,
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let kind = match cx.op_type {
        "Softmax" => SoftmaxKind::Softmax,
        "LogSoftmax" => SoftmaxKind::LogSoftmax,
        "Hardmax" => SoftmaxKind::Hardmax,
        other => return Err(format!("{other} is not a softmax-family operator")),
    };
    let coerce_2d = cx.opset < 13;
    let axis = cx.attrs.int_or("axis", if coerce_2d { 1 } else { -1 })?;
    Ok(Op::Softmax(Softmax { kind, axis, coerce_2d }))
}

/// `[outer, axis_len, inner]` of a contiguous tensor split around `axis`;
/// with `to_end`, `axis_len` spans every dim from `axis` on (`inner` = 1).
pub fn split_at_axis(shape: &[usize], axis: usize, to_end: bool) -> (usize, usize, usize) {
    let outer = shape.iter().take(axis).product();
    if to_end {
        (outer, shape.iter().skip(axis).product(), 1)
    } else {
        let len = shape.get(axis).copied().unwrap_or(1);
        (outer, len, shape.iter().skip(axis + 1).product())
    }
}

impl Softmax {
    pub(crate) fn axis_for(&self, rank: usize) -> Result<usize, String> {
        // The 2-D coercion also accepts axis == rank (every row is one element).
        if self.coerce_2d && (self.axis == rank as i64) {
            return Ok(rank);
        }
        normalize_axis(self.axis, rank)
            .ok_or_else(|| format!("attribute \"axis\" is {}, out of range for an input of rank {rank}", self.axis))
    }
}

impl Operator for Softmax {
    fn name(&self) -> &'static str {
        match self.kind {
            SoftmaxKind::Softmax => "Softmax",
            SoftmaxKind::LogSoftmax => "LogSoftmax",
            SoftmaxKind::Hardmax => "Hardmax",
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !matches!(compute_type(x.dtype), DType::F32 | DType::F64) {
            return Err(format!("input 0 is {}, expected a float type", x.dtype));
        }
        let dims = cx.dims(0)?;
        self.axis_for(dims.len())?;
        Ok(vec![Inferred::of_dims(x.dtype, dims)?])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let axis = self.axis_for(shape.len())?;
        let (outer, len, inner) = split_at_axis(&shape, axis, self.coerce_2d);
        if cx.portable() {
            return match self.kind {
                SoftmaxKind::Hardmax => lower_hardmax_portable(cx, dtype, [outer, len, inner]),
                kind => {
                    let ptrs = [cx.input_ptr(0)?, cx.output_ptr(0)?];
                    lower_softmax_portable(cx, kind == SoftmaxKind::LogSoftmax, dtype, [outer, len, inner], ptrs)
                }
            };
        }
        let p = SoftmaxParams {
            outer: outer as i64,
            axis_len: len as i64,
            inner: inner as i64,
            kind: match self.kind {
                SoftmaxKind::Softmax => SOFTMAX,
                SoftmaxKind::LogSoftmax => LOG_SOFTMAX,
                SoftmaxKind::Hardmax => HARDMAX,
            },
        };
        let params = cx.params(&p)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_softmax_f32, kernels::onnxc_softmax_f64, dtype),
            (params, Ptr(x), Ptr(y)),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

/// Portable Softmax or LogSoftmax (`log_softmax`) of the `[outer, len,
/// inner]` tensor at `ptrs[0]` into `ptrs[1]` (SoftmaxCrossEntropyLoss's
/// log-probabilities too): per `(outer, inner)` position, one fold for the
/// maximum, one for the sum of `exp(x - max)` (Softmax stores each
/// exponential on the way), then one pass writing the result.
pub fn lower_softmax_portable(
    cx: &mut Lower,
    log_softmax: bool,
    dtype: DType,
    [outer, len, inner]: [usize; 3],
    ptrs: [Value; 2],
) -> Result<(), String> {
    let Rows { ty, flags, positions, along, ptrs } = Rows::new(dtype, [outer, len, inner], ptrs);
    let constant = |cx: &mut Lower, v: f64| float_const(cx, dtype, v);
    let exp = |cx: &mut Lower, v: Value| {
        crate::codegen::portable_math::apply(cx.b, "exp", dtype, v).ok_or_else(|| "no portable exp".to_string())
    };
    cx.nest(&positions, &ptrs, &mut |cx, _, base| {
        let lowest = constant(cx, f64::NEG_INFINITY);
        let max = cx.fold_nest(&along, base, &[lowest], &mut |cx, _, at, acc| {
            let v = cx.ins().load(ty, flags, at[0], 0);
            Ok(vec![cx.ins().fmax(acc[0], v)])
        })?[0];
        let zero = constant(cx, 0.0);
        let sum = cx.fold_nest(&along, base, &[zero], &mut |cx, _, at, acc| {
            let v = cx.ins().load(ty, flags, at[0], 0);
            let shifted = cx.ins().fsub(v, max);
            let e = exp(cx, shifted)?;
            if !log_softmax {
                cx.ins().store(flags, e, at[1], 0);
            }
            Ok(vec![cx.ins().fadd(acc[0], e)])
        })?[0];
        let log_sum = if log_softmax {
            crate::codegen::portable_math::apply(cx.b, "log", dtype, sum).ok_or("no portable log")?
        } else {
            sum
        };
        cx.nest(&along, base, &mut |cx, _, at| {
            let y = if log_softmax {
                let v = cx.ins().load(ty, flags, at[0], 0);
                let shifted = cx.ins().fsub(v, max);
                cx.ins().fsub(shifted, log_sum)
            } else {
                let e = cx.ins().load(ty, flags, at[1], 0);
                cx.ins().fdiv(e, sum)
            };
            cx.ins().store(flags, y, at[1], 0);
            Ok(())
        })
    })
}

/// The loops of a portable row operator over `[outer, len, inner]`
/// (`ptrs[0]` read, `ptrs[1]` written): each `(outer, inner)` position, and
/// the `len` elements of its row.
struct Rows {
    ty: Type,
    flags: MemFlagsData,
    positions: [Level; 2],
    along: [Level; 1],
    ptrs: [Value; 2],
}

impl Rows {
    fn new(dtype: DType, [outer, len, inner]: [usize; 3], ptrs: [Value; 2]) -> Rows {
        let size = dtype.size() as i64;
        let row = len as i64 * inner as i64 * size;
        Rows {
            ty: clif_type(dtype),
            flags: MemFlagsData::trusted(),
            positions: [Level::new(outer, vec![row, row]), Level::new(inner, vec![size, size])],
            along: [Level::new(len, vec![inner as i64 * size, inner as i64 * size])],
            ptrs,
        }
    }
}

/// `v` as a constant of the float type `dtype`.
pub(super) fn float_const(cx: &mut Lower, dtype: DType, v: f64) -> Value {
    match dtype {
        DType::F64 => cx.ins().f64const(v),
        _ => cx.ins().f32const(v as f32),
    }
}

/// Portable Hardmax: per `(outer, inner)` position, one fold for the first
/// index of the maximum (from the first element, with a strict compare, as
/// the kernel does: a leading NaN wins), then one pass writing 1 there and
/// 0 elsewhere.
fn lower_hardmax_portable(cx: &mut Lower, dtype: DType, [outer, len, inner]: [usize; 3]) -> Result<(), String> {
    if len == 0 {
        return Ok(());
    }
    let ptrs = [cx.input_ptr(0)?, cx.output_ptr(0)?];
    let Rows { ty, flags, positions, along, ptrs } = Rows::new(dtype, [outer, len, inner], ptrs);
    cx.nest(&positions, &ptrs, &mut |cx, _, base| {
        let first = cx.ins().load(ty, flags, base[0], 0);
        let start = cx.iconst(0);
        let found = cx.fold_nest(&along, base, &[first, start], &mut |cx, index, at, acc| {
            let v = cx.ins().load(ty, flags, at[0], 0);
            let above = cx.ins().fcmp(FloatCC::GreaterThan, v, acc[0]);
            Ok(vec![cx.ins().select(above, v, acc[0]), cx.ins().select(above, index[0], acc[1])])
        })?;
        let (zero, one) = (float_const(cx, dtype, 0.0), float_const(cx, dtype, 1.0));
        cx.nest(&along, base, &mut |cx, index, at| {
            let chosen = cx.ins().icmp(IntCC::Equal, index[0], found[1]);
            let y = cx.ins().select(chosen, one, zero);
            cx.ins().store(flags, y, at[1], 0);
            Ok(())
        })
    })
}
