//! Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
//! ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare (one
//! [`Reduce`] with a [`ReduceKind`]), and ArgMax/ArgMin ([`ArgReduce`]).
//!
//! Type constraints (newest opsets): `T` is every float and 32/64-bit
//! integer type; ReduceMax/ReduceMin also take u8/i8 (opset 18) and bool
//! (opset 20, ordered `false < true`). ArgMax/ArgMin take every numeric type
//! and always produce i64. onnxc lowers reductions of f32, f64, i32 and i64
//! through `onnxc_reduce_*`, and ArgMax/ArgMin of f32 through
//! `onnxc_argreduce_f32`; other element types are reported as unsupported.
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

use super::softmax::split_at_axis;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;
use crate::ir::shape::normalize_axis;
use crate::ir::{DType, Tensor};
use onnxc_runtime::generic::reduce::{self as k, ArgReduceParams, ReduceParams};
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
            return Err(format!(
                "attribute \"axes\" is not allowed from opset {axes_input_since} (axes is input 1)"
            ));
        }
        bool_attr(cx, "noop_with_empty_axes", false)?
    };
    Ok(Op::Reduce(Reduce {
        op_type,
        kind,
        keepdims,
        noop_with_empty_axes,
    }))
}

/// An int attribute that must be 0 or 1.
fn bool_attr(cx: &NodeImport, name: &str, default: bool) -> Result<bool, String> {
    match cx.attrs.int_or(name, default as i64)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("attribute \"{name}\" is {v}, expected 0 or 1")),
    }
}

/// The reduction kernel for an element type, if there is one.
fn reduce_kernel(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "onnxc_reduce_f32",
        DType::F64 => "onnxc_reduce_f64",
        DType::I32 => "onnxc_reduce_i32",
        DType::I64 => "onnxc_reduce_i64",
        _ => return None,
    })
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
            let d = normalize_axis(a, rank).ok_or_else(|| {
                format!("axes value {a} is out of range for an input of rank {rank}")
            })?;
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
                return Err(format!(
                    "input 1 (axes) must be a 1-D int64 tensor, got {}{:?}",
                    t.dtype, t.shape
                ));
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
        if reduce_kernel(x.dtype).is_none() {
            return Err(format!(
                "input 0 is {}, only f32, f64, i32 and i64 are supported yet",
                x.dtype
            ));
        }
        let reduced = self.reduced_axes(self.axes_input(cx)?, x.shape.len())?;
        let shape = x
            .shape
            .iter()
            .zip(&reduced)
            .filter_map(|(&d, &r)| match (r, self.keepdims) {
                (false, _) => Some(d),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        Ok(vec![Inferred::new(x.dtype, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let kernel = reduce_kernel(dtype)
            .ok_or_else(|| format!("input 0 is {dtype}, which has no reduction kernel"))?;
        let reduced = self.reduced_axes(cx.const_input(1), shape.len())?;
        // Merge runs of adjacent axes that are all kept or all reduced: the
        // kernel then walks fewer, longer dims, and any rank fits MAX_RANK.
        let mut dims: Vec<(usize, bool)> = Vec::new();
        for (&d, &r) in shape.iter().zip(&reduced) {
            match dims.last_mut() {
                Some((n, last)) if *last == r => *n *= d,
                _ => dims.push((d, r)),
            }
        }
        if dims.len() > MAX_RANK {
            return Err(format!(
                "alternating kept and reduced axes need {} dims, the kernel takes {MAX_RANK}",
                dims.len()
            ));
        }
        let mut p = ReduceParams {
            kind: self.kind.code(),
            rank: dims.len() as i64,
            ..Default::default()
        };
        for (i, &(d, r)) in dims.iter().enumerate() {
            p.dims[i] = d as i64;
            p.reduced[i] = r as i64;
        }
        let params = cx.params(&p)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(kernel, &[params, x, y])
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
    fn axis_for(&self, shape: &[usize]) -> Result<usize, String> {
        let axis = normalize_axis(self.axis, shape.len()).ok_or_else(|| {
            format!(
                "attribute \"axis\" is {}, out of range for an input of rank {}",
                self.axis,
                shape.len()
            )
        })?;
        if shape.get(axis) == Some(&0) {
            return Err(format!(
                "axis {axis} has size 0: the arg-reduction is undefined"
            ));
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
        if x.dtype != DType::F32 {
            return Err(format!("input 0 is {}, only f32 is supported yet", x.dtype));
        }
        let axis = self.axis_for(x.shape)?;
        let mut shape = x.shape.to_vec();
        if self.keepdims {
            shape[axis] = 1;
        } else {
            shape.remove(axis);
        }
        Ok(vec![Inferred::new(DType::I64, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        if dtype != DType::F32 {
            return Err(format!("input 0 is {dtype}, only f32 is supported yet"));
        }
        let axis = self.axis_for(&shape)?;
        let (outer, len, inner) = split_at_axis(&shape, axis, false);
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
        cx.call_checked("onnxc_argreduce_f32", &[params, x, y])
    }
}
