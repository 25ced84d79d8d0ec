//! Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
//! ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare (one
//! [`Reduce`] with a [`ReduceKind`]), and ArgMax/ArgMin ([`ArgReduce`]).
//!
//! Type constraints (newest opsets): `T` is every float and 32/64-bit
//! integer type; ReduceMax/ReduceMin also take u8/i8 (opset 18) and bool
//! (opset 20, ordered `false < true`). ArgMax/ArgMin take every numeric type
//! and always produce i64. onnxc lowers reductions of f32, f64, i32 and i64
//! through `onnxc_reduce_*`, and ArgMax/ArgMin of f32 through
//! `onnxc_argreduce_f32`; f16/bf16 run those f32 kernels on staged copies
//! ([`crate::codegen::staging`]); the remaining integer types, and every type in portable mode, are
//! inline loop nests (ArgMax/ArgMin too).
//!
//! Opset differences, normalised in the importer: `axes` is an attribute
//! before the opset where it became an optional input (ReduceSum 13, the
//! others 18); an attribute is turned into a constant input 1, so `infer`
//! and `lower` only see the input form. Before that change
//! `noop_with_empty_axes` does not exist and is taken as 0. Semantics:
//! axes may be negative and must be distinct; absent or empty axes reduce
//! every axis unless `noop_with_empty_axes` is 1, in which case nothing is
//! reduced (the composite kinds still apply their per-element step: log,
//! square, abs...). Reducing over an empty set gives the kind's identity:
//! 0 (Sum, L1, L2, SumSquare), 1 (Prod), -inf / the type's minimum (Max),
//! +inf / the type's maximum (Min), -inf (LogSum, LogSumExp), NaN (Mean).
//! ArgMax/ArgMin: `axis` (default 0), `keepdims` (default 1) and, from
//! opset 12, `select_last_index` (default 0); the axis must not be empty.

use super::elementwise::compute_type;
use super::softmax::split_at_axis;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Kernel, Ptr, Ref, I32};
use crate::codegen::{clif_type, FloatCC, InstBuilder, IntCC, Level, Lower, MemFlagsData, Value};
use crate::import::NodeImport;
use crate::ir::dim_expr::DimExpr;
use crate::ir::shape::normalize_axis;
use crate::ir::{DType, Tensor};
use onnxc_runtime::abi::reduce::{self as k, ArgReduceParams, ReduceParams};
use onnxc_runtime::MAX_RANK;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

/// op_type, kind, the first opset where `axes` is an input.
static KINDS: &[(&str, ReduceKind, i64)] = &[
    ("ReduceSum", ReduceKind::Sum, 13),
    ("ReduceMean", ReduceKind::Mean, 18),
    ("ReduceMax", ReduceKind::Max, 18),
    ("ReduceMin", ReduceKind::Min, 18),
    ("ReduceProd", ReduceKind::Prod, 18),
    ("ReduceL1", ReduceKind::L1, 18),
    ("ReduceL2", ReduceKind::L2, 18),
    ("ReduceLogSum", ReduceKind::LogSum, 18),
    ("ReduceLogSumExp", ReduceKind::LogSumExp, 18),
    ("ReduceSumSquare", ReduceKind::SumSquare, 18),
];

impl ReduceKind {
    fn code(self) -> i64 {
        match self {
            ReduceKind::Sum => k::REDUCE_SUM,
            ReduceKind::Mean => k::REDUCE_MEAN,
            ReduceKind::Max => k::REDUCE_MAX,
            ReduceKind::Min => k::REDUCE_MIN,
            ReduceKind::Prod => k::REDUCE_PROD,
            ReduceKind::L1 => k::REDUCE_L1,
            ReduceKind::L2 => k::REDUCE_L2,
            ReduceKind::LogSum => k::REDUCE_LOG_SUM,
            ReduceKind::LogSumExp => k::REDUCE_LOG_SUM_EXP,
            ReduceKind::SumSquare => k::REDUCE_SUM_SQUARE,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Reduce {
    pub op_type: &'static str,
    pub kind: ReduceKind,
    pub keepdims: bool,
    pub noop_with_empty_axes: bool,
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let &(op_type, kind, axes_input_since) = KINDS
        .iter()
        .find(|(name, _, _)| *name == cx.op_type)
        .ok_or_else(|| format!("{} is not a reduction", cx.op_type))?;
    let keepdims = bool_attr(cx, "keepdims", true)?;
    let noop_with_empty_axes = if cx.opset < axes_input_since {
        // The attribute form: axes become a constant input 1.
        cx.inputs.truncate(1);
        if let Some(axes) = cx.attrs.ints("axes")? {
            let t = Tensor::from_i64s(vec![axes.len()], &axes);
            let id = cx.add_const("axes", t);
            cx.inputs.push(Some(id));
        }
        false
    } else {
        if cx.attrs.has("axes") {
            return Err(format!("attribute \"axes\" is not allowed from opset {axes_input_since} (axes is input 1)"));
        }
        bool_attr(cx, "noop_with_empty_axes", false)?
    };
    Ok(Op::Reduce(Reduce { op_type, kind, keepdims, noop_with_empty_axes }))
}

/// An int attribute that must be 0 or 1.
fn bool_attr(cx: &NodeImport, name: &str, default: bool) -> Result<bool, String> {
    match cx.attrs.int_or(name, default as i64)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("attribute \"{name}\" is {v}, expected 0 or 1")),
    }
}

/// `onnxc_reduce_{f32,f64,i32,i64}`: `(params, x, y) -> status`.
type ReduceKernel = Kernel<(Ref<ReduceParams>, Ptr, Ptr), I32>;

/// The reduction kernel for an element type, if there is one.
fn reduce_kernel(dtype: DType) -> Option<ReduceKernel> {
    Some(match dtype {
        DType::F32 => kernels::onnxc_reduce_f32,
        DType::F64 => kernels::onnxc_reduce_f64,
        DType::I32 => kernels::onnxc_reduce_i32,
        DType::I64 => kernels::onnxc_reduce_i64,
        _ => return None,
    })
}

/// Element types that the inline lowering ([`lower_inline_reduce`])
/// covers for `kind`: u32/u64 for the kinds that need no logarithm or
/// root, u8/i8/bool for ReduceMax/ReduceMin, and in portable mode also
/// f32/f64 (every kind) and i32/i64 (as u32/u64).
fn inline_reduce_supported(kind: ReduceKind, dtype: DType, portable: bool) -> bool {
    use ReduceKind::*;
    match dtype {
        DType::F32 | DType::F64 => portable,
        DType::I32 | DType::I64 if portable => matches!(kind, Sum | Mean | Max | Min | Prod | L1 | SumSquare),
        DType::U32 | DType::U64 => matches!(kind, Sum | Mean | Max | Min | Prod | L1 | SumSquare),
        DType::U8 | DType::I8 | DType::Bool => matches!(kind, Max | Min),
        _ => false,
    }
}

impl Reduce {
    /// Which axes of an input of `rank` are reduced.
    fn reduced_axes(&self, axes: Option<&Tensor>, rank: usize) -> Result<Vec<bool>, String> {
        let axes = axes.map(Tensor::to_i64s).unwrap_or_default();
        if axes.is_empty() {
            return Ok(vec![!self.noop_with_empty_axes; rank]);
        }
        let mut reduced = vec![false; rank];
        for a in axes {
            let d = normalize_axis(a, rank)
                .ok_or_else(|| format!("axes value {a} is out of range for an input of rank {rank}"))?;
            if std::mem::replace(&mut reduced[d], true) {
                return Err(format!("axes names axis {d} twice"));
            }
        }
        Ok(reduced)
    }

    fn axes_input<'a>(&self, cx: &InferCx<'a>) -> Result<Option<&'a Tensor>, String> {
        let axes = cx.opt_const_input(1)?;
        if let Some(t) = axes {
            if !t.dtype.is_int() || t.shape.len() > 1 {
                return Err(format!("input 1 (axes) must be a 1-D int64 tensor, got {}{:?}", t.dtype, t.shape));
            }
        }
        Ok(axes)
    }
}

impl Operator for Reduce {
    fn name(&self) -> &'static str {
        self.op_type
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if reduce_kernel(compute_type(x.dtype)).is_none() && !inline_reduce_supported(self.kind, x.dtype, false) {
            return Err(format!("{} of {} is not supported yet", self.op_type, x.dtype));
        }
        let dims = cx.dims(0)?;
        let reduced = self.reduced_axes(self.axes_input(cx)?, dims.len())?;
        let shape = dims
            .into_iter()
            .zip(&reduced)
            .filter_map(|(d, &r)| match (r, self.keepdims) {
                (false, _) => Some(d),
                (true, true) => Some(DimExpr::constant(1)),
                (true, false) => None,
            })
            .collect();
        Ok(vec![Inferred::of_dims(x.dtype, shape)?])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let reduced = self.reduced_axes(cx.const_input(1), shape.len())?;
        // Size-1 axes change nothing; merge runs of adjacent axes that are
        // all kept or all reduced: the kernel then walks fewer, longer dims.
        let mut dims: Vec<(usize, bool)> = Vec::new();
        for (&d, &r) in shape.iter().zip(&reduced).filter(|(&d, _)| d != 1) {
            match dims.last_mut() {
                Some((n, last)) if *last == r => *n *= d,
                _ => dims.push((d, r)),
            }
        }
        let kernel = reduce_kernel(dtype).filter(|_| !cx.portable());
        let Some(kernel) = kernel else {
            if !inline_reduce_supported(self.kind, dtype, cx.portable()) {
                return Err(format!("{} of {dtype} is not supported yet", self.op_type));
            }
            return lower_inline_reduce(cx, self.kind, dtype, &dims);
        };
        if dims.len() > MAX_RANK {
            return Err(format!(
                "alternating kept and reduced axes need {} dims, the kernel takes {MAX_RANK}",
                dims.len()
            ));
        }
        let mut p = ReduceParams { kind: self.kind.code(), rank: dims.len() as i64, ..Default::default() };
        for (i, &(d, r)) in dims.iter().enumerate() {
            p.dims[i] = d as i64;
            p.reduced[i] = r as i64;
        }
        let params = cx.params(&p)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(kernel, (params, Ptr(x), Ptr(y)))
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    Max,
    Min,
}

#[derive(Clone, Debug)]
pub struct ArgReduce {
    pub kind: ArgKind,
    /// As given (possibly negative); checked against the rank in `infer`.
    pub axis: i64,
    pub keepdims: bool,
    pub select_last_index: bool,
}

pub fn import_arg(cx: &mut NodeImport) -> Result<Op, String> {
    let kind = match cx.op_type {
        "ArgMax" => ArgKind::Max,
        "ArgMin" => ArgKind::Min,
        other => return Err(format!("{other} is not ArgMax or ArgMin")),
    };
    Ok(Op::ArgReduce(ArgReduce {
        kind,
        axis: cx.attrs.int_or("axis", 0)?,
        keepdims: bool_attr(cx, "keepdims", true)?,
        // Before opset 12 the attribute does not exist: ties pick the first.
        select_last_index: bool_attr(cx, "select_last_index", false)?,
    }))
}

impl ArgReduce {
    fn axis_for(&self, shape: &[DimExpr]) -> Result<usize, String> {
        let axis = normalize_axis(self.axis, shape.len()).ok_or_else(|| {
            format!("attribute \"axis\" is {}, out of range for an input of rank {}", self.axis, shape.len())
        })?;
        if shape.get(axis).and_then(DimExpr::as_const) == Some(0) {
            return Err(format!("axis {axis} has size 0: the arg-reduction is undefined"));
        }
        Ok(axis)
    }
}

impl Operator for ArgReduce {
    fn name(&self) -> &'static str {
        match self.kind {
            ArgKind::Max => "ArgMax",
            ArgKind::Min => "ArgMin",
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !(x.dtype.is_float() || x.dtype.is_int()) {
            return Err(format!("{} of {} is not supported yet", self.name(), x.dtype));
        }
        let mut shape = cx.dims(0)?;
        let axis = self.axis_for(&shape)?;
        if self.keepdims {
            shape[axis] = DimExpr::constant(1);
        } else {
            shape.remove(axis);
        }
        Ok(vec![Inferred::of_dims(DType::I64, shape)?])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let axis = self.axis_for(&shape.iter().map(|&d| DimExpr::from(d)).collect::<Vec<_>>())?;
        let (outer, len, inner) = split_at_axis(&shape, axis, false);
        if dtype != DType::F32 || cx.portable() {
            return self.lower_inline(cx, dtype, outer, len, inner);
        }
        let p = ArgReduceParams {
            outer: outer as i64,
            axis_len: len as i64,
            inner: inner as i64,
            kind: match self.kind {
                ArgKind::Max => k::ARG_MAX,
                ArgKind::Min => k::ARG_MIN,
            },
            select_last_index: self.select_last_index as i64,
        };
        let params = cx.params(&p)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(kernels::onnxc_argreduce_f32, (params, Ptr(x), Ptr(y)))
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

impl ArgReduce {
    /// ArgMax/ArgMin of the element types without a kernel, as a Cranelift
    /// loop nest over `[outer, len, inner]`: the running best index lives in
    /// the output, the best value is re-read through it.
    fn lower_inline(&self, cx: &mut Lower, dtype: DType, outer: usize, len: usize, inner: usize) -> Result<(), String> {
        let size = dtype.size() as i64;
        let row = len as i64 * inner as i64 * size;
        let levels = [Level::new(outer, vec![row, inner as i64 * 8]), Level::new(inner, vec![size, 8])];
        let ptrs = [cx.input_ptr(0)?, cx.output_ptr(0)?];
        let (kind, last) = (self.kind, self.select_last_index);
        let ty = clif_type(dtype);
        let flags = MemFlagsData::trusted();
        cx.nest(&levels, &ptrs, &mut |cx, _, p| {
            let (xp, yp) = (p[0], p[1]);
            let zero = cx.ins().iconst(crate::codegen::types::I64, 0);
            cx.ins().store(flags, zero, yp, 0);
            // Positions 1..len: compare with the best so far.
            let l = cx.loop_begin(len.saturating_sub(1));
            let i = cx.ins().iadd_imm_s(l.index, 1);
            let off = cx.ins().imul_imm_s(i, inner as i64 * size);
            let at = cx.ins().iadd(xp, off);
            let v = cx.ins().load(ty, flags, at, 0);
            let best_i = cx.ins().load(crate::codegen::types::I64, flags, yp, 0);
            let best_i_ptr = resize(cx, best_i, cx.ptr_type());
            let best_off = cx.ins().imul_imm_s(best_i_ptr, inner as i64 * size);
            let best_at = cx.ins().iadd(xp, best_off);
            let best = cx.ins().load(ty, flags, best_at, 0);
            let better = compare(cx, dtype, kind, last, v, best);
            let i64_i = resize(cx, i, crate::codegen::types::I64);
            let chosen = cx.ins().select(better, i64_i, best_i);
            cx.ins().store(flags, chosen, yp, 0);
            cx.loop_end(l);
            Ok(())
        })
    }
}

/// An index converted between i64 and the pointer type.
fn resize(cx: &mut Lower, v: Value, to: crate::codegen::Type) -> Value {
    let from = cx.b.func.dfg.value_type(v);
    match from.bits().cmp(&to.bits()) {
        std::cmp::Ordering::Equal => v,
        std::cmp::Ordering::Greater => cx.ins().ireduce(to, v),
        std::cmp::Ordering::Less => cx.ins().uextend(to, v),
    }
}

/// `v` beats `best` (strictly, or also on ties when `last`).
fn compare(cx: &mut Lower, dtype: DType, kind: ArgKind, last: bool, v: Value, best: Value) -> Value {
    if dtype.is_float() {
        let cc = match (kind, last) {
            (ArgKind::Max, false) => FloatCC::GreaterThan,
            (ArgKind::Max, true) => FloatCC::GreaterThanOrEqual,
            (ArgKind::Min, false) => FloatCC::LessThan,
            (ArgKind::Min, true) => FloatCC::LessThanOrEqual,
        };
        return cx.ins().fcmp(cc, v, best);
    }
    let cc = match (kind, last, dtype.is_signed_int()) {
        (ArgKind::Max, false, true) => IntCC::SignedGreaterThan,
        (ArgKind::Max, true, true) => IntCC::SignedGreaterThanOrEqual,
        (ArgKind::Min, false, true) => IntCC::SignedLessThan,
        (ArgKind::Min, true, true) => IntCC::SignedLessThanOrEqual,
        (ArgKind::Max, false, false) => IntCC::UnsignedGreaterThan,
        (ArgKind::Max, true, false) => IntCC::UnsignedGreaterThanOrEqual,
        (ArgKind::Min, false, false) => IntCC::UnsignedLessThan,
        (ArgKind::Min, true, false) => IntCC::UnsignedLessThanOrEqual,
    };
    cx.ins().icmp(cc, v, best)
}

/// Reductions without a kernel call: the integer (and bool) types without
/// a kernel, and every type in portable mode. A [`Lower::nest`] over the
/// kept dims (merged `(dim, reduced)` axes) and, per output element, a
/// register [`Lower::fold_nest`] over the reduced ones from the kind's
/// identity; LogSumExp folds the maximum first and sums `exp(x - max)`.
fn lower_inline_reduce(cx: &mut Lower, kind: ReduceKind, dtype: DType, dims: &[(usize, bool)]) -> Result<(), String> {
    let size = dtype.size() as i64;
    let mut in_strides = vec![0i64; dims.len()];
    let mut s = size;
    for (i, &(d, _)) in dims.iter().enumerate().rev() {
        in_strides[i] = s;
        s *= d as i64;
    }
    let mut kept = Vec::new();
    let mut reduced = Vec::new();
    let mut count = 1usize;
    for (&(d, r), &stride) in dims.iter().zip(&in_strides) {
        if r {
            reduced.push(Level::new(d, vec![stride]));
            count *= d;
        } else {
            kept.push(Level::new(d, vec![stride, 0]));
        }
    }
    // The output is contiguous over the kept dims.
    let mut s = size;
    for level in kept.iter_mut().rev() {
        level.steps[1] = s;
        s *= level.count as i64;
    }
    let flags = MemFlagsData::trusted();
    let ptrs = [cx.input_ptr(0)?, cx.output_ptr(0)?];
    cx.nest(&kept, &ptrs, &mut |cx, _, p| {
        let (xp, yp) = (p[0], p[1]);
        let y = if dtype.is_float() {
            float_reduce(cx, kind, dtype, &reduced, xp, count)?
        } else {
            int_reduce(cx, kind, dtype, &reduced, xp, count)?
        };
        cx.ins().store(flags, y, yp, 0);
        Ok(())
    })
}

/// Folds `step(acc, x)` over the reduced elements at `xp`.
fn fold_elements(
    cx: &mut Lower,
    reduced: &[Level],
    xp: Value,
    ty: crate::codegen::Type,
    init: Value,
    step: &mut dyn FnMut(&mut Lower, Value, Value) -> Result<Value, String>,
) -> Result<Value, String> {
    let acc = cx.fold_nest(reduced, &[xp], &[init], &mut |cx, _, q, acc| {
        let v = cx.ins().load(ty, MemFlagsData::trusted(), q[0], 0);
        Ok(vec![step(cx, acc[0], v)?])
    })?;
    Ok(acc[0])
}

fn float_reduce(
    cx: &mut Lower,
    kind: ReduceKind,
    dtype: DType,
    reduced: &[Level],
    xp: Value,
    count: usize,
) -> Result<Value, String> {
    let ty = clif_type(dtype);
    let constant =
        |cx: &mut Lower, v: f64| if dtype == DType::F64 { cx.ins().f64const(v) } else { cx.ins().f32const(v as f32) };
    let math = |cx: &mut Lower, name: &str, v: Value| {
        crate::codegen::portable_math::apply(cx.b, name, dtype, v).ok_or_else(|| format!("no portable {name}"))
    };
    if kind == ReduceKind::LogSumExp {
        let lowest = constant(cx, f64::NEG_INFINITY);
        let max = fold_elements(cx, reduced, xp, ty, lowest, &mut |cx, acc, v| Ok(cx.ins().fmax(acc, v)))?;
        // An empty or all -inf input: -inf, not exp(-inf - -inf) = NaN.
        let zero = constant(cx, 0.0);
        let infinite = cx.ins().fcmp(FloatCC::Equal, max, lowest);
        let shift = cx.ins().select(infinite, zero, max);
        let sum = fold_elements(cx, reduced, xp, ty, zero, &mut |cx, acc, v| {
            let shifted = cx.ins().fsub(v, shift);
            let e = math(cx, "exp", shifted)?;
            Ok(cx.ins().fadd(acc, e))
        })?;
        let log = math(cx, "log", sum)?;
        return Ok(cx.ins().fadd(shift, log));
    }
    let identity = match kind {
        ReduceKind::Prod => 1.0,
        ReduceKind::Max => f64::NEG_INFINITY,
        ReduceKind::Min => f64::INFINITY,
        _ => 0.0,
    };
    let init = constant(cx, identity);
    let acc = fold_elements(cx, reduced, xp, ty, init, &mut |cx, acc, v| {
        let ins = cx.ins();
        Ok(match kind {
            ReduceKind::Max => ins.fmax(acc, v),
            ReduceKind::Min => ins.fmin(acc, v),
            ReduceKind::Prod => ins.fmul(acc, v),
            ReduceKind::L1 => {
                let a = ins.fabs(v);
                cx.ins().fadd(acc, a)
            }
            ReduceKind::L2 | ReduceKind::SumSquare => {
                let sq = ins.fmul(v, v);
                cx.ins().fadd(acc, sq)
            }
            _ => ins.fadd(acc, v),
        })
    })?;
    Ok(match kind {
        ReduceKind::Mean => {
            let n = constant(cx, count as f64);
            cx.ins().fdiv(acc, n)
        }
        ReduceKind::L2 => cx.ins().sqrt(acc),
        ReduceKind::LogSum => math(cx, "log", acc)?,
        _ => acc,
    })
}

fn int_reduce(
    cx: &mut Lower,
    kind: ReduceKind,
    dtype: DType,
    reduced: &[Level],
    xp: Value,
    count: usize,
) -> Result<Value, String> {
    let ty = clif_type(dtype);
    let signed = dtype.is_signed_int();
    let bits = ty.bits();
    let identity: i64 = match kind {
        ReduceKind::Prod => 1,
        ReduceKind::Max if dtype == DType::Bool || !signed => 0,
        ReduceKind::Max => i64::MIN >> (64 - bits),
        ReduceKind::Min if dtype == DType::Bool => 1,
        ReduceKind::Min if signed => i64::MAX >> (64 - bits),
        ReduceKind::Min => -1, // all ones
        _ => 0,
    };
    // Cranelift wants narrow immediates zero-extended.
    let mask = |v: i64| {
        if bits >= 64 {
            v
        } else {
            v & ((1i64 << bits) - 1)
        }
    };
    let init = cx.ins().iconst(ty, mask(identity));
    let acc = fold_elements(cx, reduced, xp, ty, init, &mut |cx, acc, v| {
        let ins = cx.ins();
        Ok(match kind {
            ReduceKind::Max if signed => ins.smax(acc, v),
            ReduceKind::Max => ins.umax(acc, v),
            ReduceKind::Min if signed => ins.smin(acc, v),
            ReduceKind::Min => ins.umin(acc, v),
            ReduceKind::Prod => ins.imul(acc, v),
            ReduceKind::L1 if signed => {
                let a = ins.iabs(v);
                cx.ins().iadd(acc, a)
            }
            ReduceKind::SumSquare => {
                let sq = ins.imul(v, v);
                cx.ins().iadd(acc, sq)
            }
            _ => ins.iadd(acc, v),
        })
    })?;
    if kind == ReduceKind::Mean && count > 0 {
        let n = cx.ins().iconst(ty, mask(count as i64));
        return Ok(if signed { cx.ins().sdiv(acc, n) } else { cx.ins().udiv(acc, n) });
    }
    Ok(acc)
}
