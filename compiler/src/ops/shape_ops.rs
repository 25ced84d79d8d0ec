//! Shape and data-movement operators: Reshape, Flatten, Squeeze, Unsqueeze
//! (all four one view operator, [`Reshape`]), Transpose, Concat, Split,
//! Slice, Expand, Pad, Tile, and the shape producers Shape, Size,
//! ConstantOfShape and Range.
//!
//! Type constraints: the data-movement operators take every element type
//! (they move `elem_bytes`-sized elements: `onnxc_copy_strided`, in portable
//! mode a loop nest of rows or elements, and `onnxc_pad`, in portable mode
//! [`crate::codegen::pad_loops`]); shape-carrying inputs (shapes, axes, starts/ends/steps,
//! pads, repeats, split sizes) are i32/i64 compile-time constants; Shape and
//! Size produce i64; Range takes float or i16/i32/i64 scalars — constant
//! ones fold, run-time ones give a data-dependent (unbounded) length that
//! the generated code allocates for.
//!
//! Opset normalisation (importers, so inference and lowering see one form):
//! - Reshape < 5: the `shape` attribute becomes constant input 1.
//! - Squeeze/Unsqueeze < 13: the `axes` attribute becomes constant input 1.
//! - Split < 13: the `split` attribute becomes constant input 1; opset 18's
//!   `num_outputs` is kept (equal chunks, the last one smaller).
//! - Slice < 10: `starts`/`ends`/`axes` attributes become inputs 1..=3.
//! - Pad < 11: `pads` (`paddings` in opset 1) and `value` become inputs 1
//!   and 2; the f32 `value` is converted to the data type at lowering.
//! - Concat < 4: `axis` defaults to 1.
//!
//! Every data-movement lowering is one or more strided copies described by
//! a [`StridedCopy`] and emitted by [`emit_strided_copy`]. Shape, Size and
//! ConstantOfShape are known at compile time and return their value from
//! inference; their lowerings only run for results too large to fold.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr, I64};
use crate::codegen::{dynamic_loops, pad_loops, types, InstBuilder, Level, Lower, MemFlagsData, Value};
use crate::import::NodeImport;
use crate::ir::dim_expr::{DimExpr, SymbolFacts};
use crate::ir::shape::{
    broadcast, broadcast_dims, broadcast_strides, contiguous_strides, dims_product, dims_text, element_count,
    normalize_axis,
};
use crate::ir::{DType, Dim, Tensor};
use onnxc_runtime::{BroadcastParams, CopyParams, PadParams, MAX_RANK};

// ---------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------

/// Places `v` as node input `i`, growing the input list with omitted inputs.
fn set_input(cx: &mut NodeImport, i: usize, v: crate::ir::ValueId) {
    if cx.inputs.len() <= i {
        cx.inputs.resize(i + 1, None);
    }
    cx.inputs[i] = Some(v);
}

/// Turns an ints attribute of an old opset into constant i64 input `i`.
/// Returns whether the attribute was present.
fn ints_attr_to_input(cx: &mut NodeImport, name: &str, i: usize) -> Result<bool, String> {
    match cx.attrs.ints(name)? {
        None => Ok(false),
        Some(v) => {
            let t = Tensor::from_i64s(vec![v.len()], &v);
            let id = cx.add_const(name, t);
            set_input(cx, i, id);
            Ok(true)
        }
    }
}

/// The values of a constant integer input (a shape, axes, pads...).
fn ints_of(t: &Tensor, what: &str) -> Result<Vec<i64>, String> {
    if !matches!(t.dtype, DType::I64 | DType::I32) {
        return Err(format!("{what} must be i32 or i64, got {}", t.dtype));
    }
    if t.shape.len() > 1 {
        return Err(format!("{what} must be 1-D, got rank {}", t.shape.len()));
    }
    Ok(t.to_i64s())
}

fn const_ints(cx: &InferCx, i: usize, what: &str) -> Result<Vec<i64>, String> {
    let t = cx.const_input(i).map_err(|e| format!("{what}: {e}"))?;
    ints_of(t, what)
}

fn opt_const_ints(cx: &InferCx, i: usize, what: &str) -> Result<Option<Vec<i64>>, String> {
    match cx.opt_const_input(i).map_err(|e| format!("{what}: {e}"))? {
        None => Ok(None),
        Some(t) => ints_of(t, what).map(Some),
    }
}

/// The constant ints of input `i` at lowering time (inference checked them).
fn lower_ints(cx: &Lower, i: usize, what: &str) -> Result<Option<Vec<i64>>, String> {
    match cx.const_input(i) {
        None if cx.has_input(i) => Err(format!("{what} must be a compile-time constant")),
        None => Ok(None),
        Some(t) => ints_of(t, what).map(Some),
    }
}

fn axis_of(axis: i64, rank: usize, what: &str) -> Result<usize, String> {
    normalize_axis(axis, rank).ok_or_else(|| format!("{what} {axis} is out of range for rank {rank}"))
}

/// Normalised, duplicate-free axes against `rank`.
fn axes_of(axes: &[i64], rank: usize, what: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = axis_of(a, rank, what)?;
        if out.contains(&n) {
            return Err(format!("{what} repeats axis {a}"));
        }
        out.push(n);
    }
    Ok(out)
}

fn dim_of(v: i64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{what} {v} is negative"))
}

fn count(shape: &[usize], what: &str) -> Result<usize, String> {
    element_count(shape).ok_or_else(|| format!("{what}: element count overflows"))
}

fn dense(shape: &[usize]) -> Vec<i64> {
    contiguous_strides(shape).into_iter().map(|s| s as i64).collect()
}

fn checked_rank(rank: usize, what: &str) -> Result<(), String> {
    if rank > MAX_RANK {
        return Err(format!("{what} has rank {rank}; at most {MAX_RANK} is supported"));
    }
    Ok(())
}

/// Little-endian bytes of one element of `dtype` holding `v`.
fn encode_f64(dtype: DType, v: f64) -> Vec<u8> {
    match dtype {
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        DType::F64 => v.to_le_bytes().to_vec(),
        DType::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
        DType::BF16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
        DType::Bool => vec![u8::from(v != 0.0)],
        _ => encode_i64(dtype, v as i64),
    }
}

/// Little-endian bytes of one element of `dtype` holding `v` (truncating
/// two's complement for integers).
fn encode_i64(dtype: DType, v: i64) -> Vec<u8> {
    if dtype.is_float() {
        return encode_f64(dtype, v as f64);
    }
    let bytes = v.to_le_bytes();
    let n = dtype.size().min(8);
    if dtype == DType::Bool {
        return vec![u8::from(v != 0)];
    }
    bytes[..n].to_vec()
}

/// Element 0 of a constant as one element of `dtype`, padded to 8 bytes so
/// it can be placed with [`Lower::params`].
fn scalar_as(t: &Tensor, dtype: DType) -> Result<[u8; 8], String> {
    if t.is_empty() {
        return Err("the value tensor is empty".into());
    }
    let bytes = if t.dtype == dtype {
        t.data.get(..dtype.size()).map(<[u8]>::to_vec)
    } else if t.dtype.is_float() {
        Some(encode_f64(dtype, t.get_f64(0)))
    } else {
        Some(encode_i64(dtype, t.get_i64(0)))
    }
    .ok_or("the value tensor is too short")?;
    let mut out = [0u8; 8];
    out[..bytes.len()].copy_from_slice(&bytes);
    Ok(out)
}

// ---------------------------------------------------------------------------
// The strided copy behind every data-movement lowering
// ---------------------------------------------------------------------------

/// One N-d strided copy: `dims` are iterated in row-major order; strides
/// and offsets are in elements and may be zero (broadcast) or negative.
#[derive(Clone, Debug, Default)]
pub(crate) struct StridedCopy {
    pub dims: Vec<usize>,
    pub src_strides: Vec<i64>,
    pub dst_strides: Vec<i64>,
    pub src_offset: i64,
    pub dst_offset: i64,
}

impl StridedCopy {
    /// Reads `dims` through `src_strides` from `src_offset`, writes them densely.
    pub fn to_dense(dims: Vec<usize>, src_strides: Vec<i64>, src_offset: i64) -> StridedCopy {
        let dst_strides = dense(&dims);
        StridedCopy { dims, src_strides, dst_strides, src_offset, dst_offset: 0 }
    }

    /// Reads `dims` densely, writes them through `dst_strides` at `dst_offset`.
    pub fn from_dense(dims: Vec<usize>, dst_strides: Vec<i64>, dst_offset: i64) -> StridedCopy {
        let src_strides = dense(&dims);
        StridedCopy { dims, src_strides, dst_strides, src_offset: 0, dst_offset }
    }

    /// Drops size-1 dims and merges adjacent dims contiguous on both sides,
    /// so that even a 2×rank copy (Tile) usually fits the kernel's rank.
    fn canonical(&self) -> StridedCopy {
        let mut c = StridedCopy { src_offset: self.src_offset, dst_offset: self.dst_offset, ..Default::default() };
        for ((&n, &s), &d) in self.dims.iter().zip(&self.src_strides).zip(&self.dst_strides) {
            if n == 1 {
                continue;
            }
            let merge = match (c.dims.last(), c.src_strides.last(), c.dst_strides.last()) {
                (Some(_), Some(&ps), Some(&pd)) => ps == s * n as i64 && pd == d * n as i64,
                _ => false,
            };
            if merge {
                if let (Some(pn), Some(ps), Some(pd)) =
                    (c.dims.last_mut(), c.src_strides.last_mut(), c.dst_strides.last_mut())
                {
                    *pn *= n;
                    *ps = s;
                    *pd = d;
                }
            } else {
                c.dims.push(n);
                c.src_strides.push(s);
                c.dst_strides.push(d);
            }
        }
        c
    }
}

/// Emits one call to `onnxc_copy_strided` moving `dtype` elements.
pub(crate) fn emit_strided_copy(
    cx: &mut Lower,
    dtype: DType,
    src: Value,
    dst: Value,
    copy: &StridedCopy,
) -> Result<(), String> {
    if copy.dims.contains(&0) {
        return Ok(());
    }
    let c = copy.canonical();
    let eb = dtype.size() as i64;
    if cx.portable() {
        let src = offset(cx, src, c.src_offset * eb);
        let dst = offset(cx, dst, c.dst_offset * eb);
        return portable_strided_copy(cx, eb, &c, src, dst);
    }
    checked_rank(c.dims.len(), "a strided copy")?;
    let mut p = CopyParams { elem_bytes: eb, rank: c.dims.len() as i64, ..Default::default() };
    for (k, &n) in c.dims.iter().enumerate() {
        p.dims[k] = n as i64;
        p.src_strides[k] = c.src_strides[k];
        p.dst_strides[k] = c.dst_strides[k];
    }
    let params = cx.params(&p)?;
    let src = offset(cx, src, c.src_offset * eb);
    let dst = offset(cx, dst, c.dst_offset * eb);
    let parallel = cx.parallel_ptr();
    cx.call_checked(kernels::onnxc_copy_strided, (params, Ptr(src), Ptr(dst), parallel))
}

/// The strided copy as a loop nest (portable mode): whole rows by memcpy
/// when the innermost dim is contiguous on both sides, else one element
/// load and store per step.
fn portable_strided_copy(cx: &mut Lower, eb: i64, c: &StridedCopy, src: Value, dst: Value) -> Result<(), String> {
    let mut levels: Vec<Level> =
        (0..c.dims.len()).map(|k| Level::new(c.dims[k], vec![c.src_strides[k] * eb, c.dst_strides[k] * eb])).collect();
    let row = match levels.last() {
        Some(l) if l.steps == [eb, eb] => Some(l.count as i64 * eb),
        _ => None,
    };
    if row.is_some() {
        levels.pop();
    }
    let ty = match eb {
        1 => types::I8,
        2 => types::I16,
        4 => types::I32,
        8 => types::I64,
        _ => return Err(format!("elements of {eb} bytes have no portable copy")),
    };
    cx.nest(&levels, &[src, dst], &mut |cx, _, at| {
        match row {
            Some(bytes) => cx.copy_bytes(at[1], at[0], bytes as usize),
            None => {
                let v = cx.ins().load(ty, MemFlagsData::trusted(), at[0], 0);
                cx.ins().store(MemFlagsData::trusted(), v, at[1], 0);
            }
        }
        Ok(())
    })
}

fn offset(cx: &mut Lower, p: Value, bytes: i64) -> Value {
    if bytes == 0 {
        p
    } else {
        cx.ins().iadd_imm_s(p, bytes)
    }
}

/// Emits one strided copy from input `input` to output `output`.
fn copy_io(cx: &mut Lower, input: usize, output: usize, copy: &StridedCopy) -> Result<(), String> {
    let (dtype, _) = cx.input_type(input)?;
    let src = cx.input_ptr(input)?;
    let dst = cx.output_ptr(output)?;
    emit_strided_copy(cx, dtype, src, dst, copy)
}

// ---------------------------------------------------------------------------
// Reshape, Flatten, Squeeze, Unsqueeze: one view operator
// ---------------------------------------------------------------------------

/// How the output shape of a view follows from input 0's shape and the
/// (constant) input 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ViewKind {
    /// Input 1 is the target shape: -1 is inferred, 0 copies the input dim
    /// unless `allowzero`.
    Reshape { allowzero: bool },
    /// `[prod(dims[..axis]), prod(dims[axis..])]`.
    Flatten { axis: i64 },
    /// Removes the size-1 dims listed in input 1, or all of them without it.
    Squeeze,
    /// Inserts size-1 dims at the output positions listed in input 1.
    Unsqueeze,
}

/// A view: output 0 is input 0's bytes under another shape.
#[derive(Clone, Debug)]
pub struct Reshape {
    pub kind: ViewKind,
}

impl Reshape {
    fn target(&self, cx: &InferCx, shape: &[DimExpr]) -> Result<Vec<DimExpr>, String> {
        let rank = shape.len();
        let one = DimExpr::constant(1);
        match self.kind {
            ViewKind::Reshape { allowzero } => reshape_target(cx, shape, allowzero),
            ViewKind::Flatten { axis } => {
                let a = if axis < 0 { axis + rank as i64 } else { axis };
                let a = usize::try_from(a)
                    .ok()
                    .filter(|&a| a <= rank)
                    .ok_or_else(|| format!("attribute \"axis\" {axis} is out of range for rank {rank}"))?;
                let product = |dims: &[DimExpr]| dims_product(dims).ok_or("input 0: element count overflows");
                Ok(vec![product(&shape[..a])?, product(&shape[a..])?])
            }
            ViewKind::Squeeze => match opt_const_ints(cx, 1, "axes")? {
                None if shape.iter().any(|d| d.as_const().is_none()) => {
                    Err(format!("cannot squeeze {} without axes: a symbolic dim may or may not be 1", dims_text(shape)))
                }
                None => Ok(shape.iter().filter(|&d| *d != one).cloned().collect()),
                Some(axes) => {
                    let axes = axes_of(&axes, rank, "axes")?;
                    for &a in &axes {
                        if shape[a] != one {
                            let text = dims_text(shape);
                            return Err(format!("cannot squeeze axis {a} of size {} (shape {text})", shape[a]));
                        }
                    }
                    Ok(shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d.clone()).collect())
                }
            },
            ViewKind::Unsqueeze => {
                let axes = const_ints(cx, 1, "axes")?;
                let out_rank = rank + axes.len();
                let axes = axes_of(&axes, out_rank, "axes")?;
                let mut rest = shape.iter();
                (0..out_rank)
                    .map(|i| {
                        if axes.contains(&i) {
                            Ok(one.clone())
                        } else {
                            rest.next().cloned().ok_or_else(|| "axes are inconsistent".to_string())
                        }
                    })
                    .collect()
            }
        }
    }
}

/// Reshape's output dims: input 1's entries, 0 copying input 0's dim (unless
/// `allowzero`) and one -1 taking what the element count leaves, exactly
/// divided (`b*s*768` over `b*64` is `12*s`).
fn reshape_target(cx: &InferCx, shape: &[DimExpr], allowzero: bool) -> Result<Vec<DimExpr>, String> {
    let target = cx.elements(1).map_err(|e| format!("input 1 (shape): {e}"))?;
    let total = dims_product(shape).ok_or("input 0: element count overflows")?;
    let mismatch = || format!("cannot reshape {} ({total} elements) to {}", dims_text(shape), dims_text(&target));
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, d) in target.iter().enumerate() {
        out.push(match d.as_const() {
            Some(-1) if infer_at.is_some() => return Err("shape has more than one -1".into()),
            Some(-1) => {
                infer_at = Some(i);
                DimExpr::constant(1)
            }
            Some(0) if !allowzero => shape
                .get(i)
                .cloned()
                .ok_or_else(|| format!("shape[{i}] is 0 (copy), but input 0 has rank {}", shape.len()))?,
            Some(v) => DimExpr::from(dim_of(v, &format!("shape[{i}]"))?),
            None => d.clone(),
        });
    }
    let known = dims_product(&out).ok_or("shape: element count overflows")?;
    match infer_at {
        Some(i) => out[i] = total.div_exact(&known).ok_or_else(mismatch)?,
        None if known != total => return Err(mismatch()),
        None => {}
    }
    Ok(out)
}

impl Operator for Reshape {
    fn name(&self) -> &'static str {
        match self.kind {
            ViewKind::Reshape { .. } => "Reshape",
            ViewKind::Flatten { .. } => "Flatten",
            ViewKind::Squeeze => "Squeeze",
            ViewKind::Unsqueeze => "Unsqueeze",
        }
    }

    /// Symbolic elements (a shape being built) keep their values.
    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let shape = self.target(cx, &cx.dims(0)?)?;
        Ok(vec![Inferred::of_dims(cx.input(0)?.dtype, shape)?.with_elements(cx.symbolic_elements(0))])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        if !cx.view_needs_copy() {
            return Ok(());
        }
        let (dtype, shape) = cx.input_type(0)?;
        let bytes = dtype.bytes_for(count(&shape, "input 0")?).ok_or("input 0 is too large")?;
        let src = cx.input_ptr(0)?;
        let dst = cx.output_ptr(0)?;
        cx.copy_bytes(dst, src, bytes);
        Ok(())
    }

    fn is_view(&self) -> bool {
        true
    }

    /// Same bytes under another shape: packed types too.
    fn reads_packed(&self) -> bool {
        true
    }
}

pub fn import_reshape(cx: &mut NodeImport) -> Result<Op, String> {
    if cx.opset < 5 && !ints_attr_to_input(cx, "shape", 1)? {
        return Err("attribute \"shape\" is required".into());
    }
    let allowzero = cx.attrs.int_or("allowzero", 0)? != 0;
    Ok(Op::Reshape(Reshape { kind: ViewKind::Reshape { allowzero } }))
}

pub fn import_flatten(cx: &mut NodeImport) -> Result<Op, String> {
    let axis = cx.attrs.int_or("axis", 1)?;
    Ok(Op::Reshape(Reshape { kind: ViewKind::Flatten { axis } }))
}

pub fn import_squeeze(cx: &mut NodeImport) -> Result<Op, String> {
    if cx.opset < 13 {
        ints_attr_to_input(cx, "axes", 1)?;
    }
    Ok(Op::Reshape(Reshape { kind: ViewKind::Squeeze }))
}

pub fn import_unsqueeze(cx: &mut NodeImport) -> Result<Op, String> {
    if cx.opset < 13 && !ints_attr_to_input(cx, "axes", 1)? {
        return Err("attribute \"axes\" is required".into());
    }
    Ok(Op::Reshape(Reshape { kind: ViewKind::Unsqueeze }))
}

// ---------------------------------------------------------------------------
// Transpose
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Transpose {
    /// `None`: reverse the dims.
    pub perm: Option<Vec<i64>>,
}

impl Transpose {
    fn perm(&self, rank: usize) -> Result<Vec<usize>, String> {
        let Some(perm) = &self.perm else {
            return Ok((0..rank).rev().collect());
        };
        if perm.len() != rank {
            return Err(format!("attribute \"perm\" has {} entries, input 0 has rank {rank}", perm.len()));
        }
        axes_of(perm, rank, "attribute \"perm\"")
    }
}

impl Operator for Transpose {
    fn name(&self) -> &'static str {
        "Transpose"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let dims = cx.dims(0)?;
        let perm = self.perm(dims.len())?;
        let shape = perm.iter().map(|&p| dims[p].clone()).collect();
        Ok(vec![Inferred::of_dims(cx.input(0)?.dtype, shape)?])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let perm = self.perm(shape.len())?;
        let strides = dense(&shape);
        let copy = StridedCopy::to_dense(
            perm.iter().map(|&p| shape[p]).collect(),
            perm.iter().map(|&p| strides[p]).collect(),
            0,
        );
        copy_io(cx, 0, 0, &copy)
    }
}

pub fn import_transpose(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Transpose(Transpose { perm: cx.attrs.ints("perm")? }))
}

// ---------------------------------------------------------------------------
// Concat
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Concat {
    pub axis: i64,
}

impl Operator for Concat {
    fn name(&self) -> &'static str {
        "Concat"
    }

    /// Symbolic elements (a shape being built) concatenate too.
    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let first = cx.input(0)?;
        let first_dims = cx.dims(0)?;
        let rank = first_dims.len();
        let axis = axis_of(self.axis, rank, "attribute \"axis\"")?;
        let mut shape = first_dims.clone();
        shape[axis] = DimExpr::default();
        for i in 0..cx.inputs.len() {
            let (x, dims) = (cx.input(i)?, cx.dims(i)?);
            if x.dtype != first.dtype {
                return Err(format!("input {i} has type {}, input 0 has {}", x.dtype, first.dtype));
            }
            let same = dims.len() == rank && (0..rank).all(|d| d == axis || dims[d] == first_dims[d]);
            if !same {
                return Err(format!(
                    "input {i} has shape {}, incompatible with input 0's {} along axis {axis}",
                    dims_text(&dims),
                    dims_text(&first_dims)
                ));
            }
            shape[axis] = shape[axis].checked_add(&dims[axis]).ok_or("the output's dims overflow")?;
        }
        let symbolic = (0..cx.inputs.len()).any(|i| cx.symbolic_elements(i).is_some());
        let elements = match symbolic {
            true => Some((0..cx.inputs.len()).map(|i| cx.elements(i)).collect::<Result<Vec<_>, _>>()?.concat()),
            false => None,
        };
        Ok(vec![Inferred::of_dims(first.dtype, shape)?.with_elements(elements)])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, out_shape) = cx.output_type(0)?;
        let axis = axis_of(self.axis, out_shape.len(), "attribute \"axis\"")?;
        let out_strides = dense(&out_shape);
        let mut at = 0i64;
        for i in 0..cx.input_count() {
            let (_, shape) = cx.input_type(i)?;
            let len = shape[axis] as i64;
            if !cx.input_is_in_output(i) {
                let copy = StridedCopy::from_dense(shape, out_strides.clone(), at * out_strides[axis]);
                copy_io(cx, i, 0, &copy)?;
            }
            at += len;
        }
        Ok(())
    }
}

pub fn import_concat(cx: &mut NodeImport) -> Result<Op, String> {
    let axis = match cx.attrs.int("axis")? {
        Some(a) => a,
        None if cx.opset < 4 => 1,
        None => return Err("attribute \"axis\" is required".into()),
    };
    Ok(Op::Concat(Concat { axis }))
}

// ---------------------------------------------------------------------------
// Split
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Split {
    pub axis: i64,
    /// Opset 18's `num_outputs`; otherwise the node's output count decides.
    pub num_outputs: Option<usize>,
}

impl Split {
    /// [`Split::sizes`] into equal parts of a symbolic axis length `dim`:
    /// `ceil(dim / n)` each, the last what is left.
    fn symbolic_sizes(&self, dim: &DimExpr, outputs: usize, facts: &SymbolFacts) -> Result<Vec<DimExpr>, String> {
        let n = self.num_outputs.unwrap_or(outputs);
        let overflow = || format!("axis length {dim} cannot be split into {n} parts");
        let parts = i64::try_from(n).ok().filter(|&n| n > 0).ok_or_else(overflow)?;
        let chunk = dim.div_ceil(parts, facts).ok_or_else(overflow)?;
        let last = chunk.checked_scale(parts - 1).and_then(|c| dim.checked_sub(&c)).ok_or_else(overflow)?;
        Ok(std::iter::repeat_n(chunk, n - 1).chain([last]).collect())
    }

    /// Sizes of the parts along the axis.
    fn sizes(&self, dim: usize, split: Option<Vec<i64>>, outputs: usize) -> Result<Vec<usize>, String> {
        if let Some(split) = split {
            let sizes = split
                .iter()
                .enumerate()
                .map(|(i, &s)| dim_of(s, &format!("split[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            if sizes.iter().sum::<usize>() != dim {
                return Err(format!("split sizes {split:?} do not sum to the axis length {dim}"));
            }
            if sizes.len() != outputs {
                return Err(format!("split has {} entries, the node has {outputs} outputs", sizes.len()));
            }
            return Ok(sizes);
        }
        let n = self.num_outputs.unwrap_or(outputs);
        if n == 0 {
            return Err("Split needs at least one output".into());
        }
        let chunk = dim.div_ceil(n);
        let last = dim
            .checked_sub(chunk * (n - 1))
            .ok_or_else(|| format!("axis length {dim} cannot be split into {n} parts"))?;
        let mut sizes = vec![chunk; n - 1];
        sizes.push(last);
        Ok(sizes)
    }
}

impl Operator for Split {
    fn name(&self) -> &'static str {
        "Split"
    }

    /// Over a symbolic axis, only into equal parts (no split sizes).
    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (x, dims) = (cx.input(0)?, cx.dims(0)?);
        let axis = axis_of(self.axis, dims.len(), "attribute \"axis\"")?;
        let split = opt_const_ints(cx, 1, "input 1 (split)")?;
        let sizes = match dims[axis].as_size() {
            Some(dim) => self.sizes(dim, split, cx.output_count)?.into_iter().map(DimExpr::from).collect(),
            None if split.is_some() => return Err(format!("split sizes over axis {axis} of {}", dims_text(&dims))),
            None => self.symbolic_sizes(&dims[axis], cx.output_count, cx.facts())?,
        };
        sizes
            .into_iter()
            .map(|s| {
                let mut shape = dims.clone();
                shape[axis] = s;
                Inferred::of_dims(x.dtype, shape)
            })
            .collect()
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let axis = axis_of(self.axis, shape.len(), "attribute \"axis\"")?;
        let strides = dense(&shape);
        let split = lower_ints(cx, 1, "input 1 (split)")?;
        let outputs = cx.node().outputs.len();
        let sizes = self.sizes(shape[axis], split, outputs)?;
        let mut at = 0i64;
        for (j, &s) in sizes.iter().enumerate().take(outputs) {
            if cx.has_output(j) {
                let mut dims = shape.clone();
                dims[axis] = s;
                let copy = StridedCopy::to_dense(dims, strides.clone(), at * strides[axis]);
                copy_io(cx, 0, j, &copy)?;
            }
            at += s as i64;
        }
        Ok(())
    }
}

pub fn import_split(cx: &mut NodeImport) -> Result<Op, String> {
    if cx.opset < 13 {
        ints_attr_to_input(cx, "split", 1)?;
    }
    let num_outputs = match cx.attrs.int("num_outputs")? {
        None => None,
        Some(n) => {
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("attribute \"num_outputs\" {n} must be positive"))?;
            if n != cx.output_count {
                return Err(format!("attribute \"num_outputs\" is {n}, the node has {} outputs", cx.output_count));
            }
            Some(n)
        }
    };
    Ok(Op::Split(Split { axis: cx.attrs.int_or("axis", 0)?, num_outputs }))
}

// ---------------------------------------------------------------------------
// Slice
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Slice;

/// Per input dim: first element, step, and output length.
struct SliceDims {
    start: Vec<i64>,
    step: Vec<i64>,
    len: Vec<usize>,
}

/// Resolves starts/ends/axes/steps against `shape` with the spec's clamping.
fn slice_dims(
    shape: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: Option<Vec<i64>>,
    steps: Option<Vec<i64>>,
) -> Result<SliceDims, String> {
    let rank = shape.len();
    let (axes, steps) = slice_axes(rank, starts.len(), ends.len(), axes, steps)?;
    let mut d = SliceDims { start: vec![0; rank], step: vec![1; rank], len: shape.to_vec() };
    for (k, &a) in axes.iter().enumerate() {
        let (start, len) = slice_range(shape[a] as i64, starts[k], ends[k], steps[k]);
        d.start[a] = start;
        d.step[a] = steps[k];
        d.len[a] = len as usize;
    }
    Ok(d)
}

/// The sliced axes and their steps (1 by default, never 0), checked
/// against the counts of starts and ends and the rank.
fn slice_axes(
    rank: usize,
    starts: usize,
    ends: usize,
    axes: Option<Vec<i64>>,
    steps: Option<Vec<i64>>,
) -> Result<(Vec<usize>, Vec<i64>), String> {
    if starts != ends {
        return Err(format!("starts has {starts} entries, ends has {ends}"));
    }
    let axes = match axes {
        Some(a) => axes_of(&a, rank, "axes")?,
        None => (0..starts).collect(),
    };
    let steps = steps.unwrap_or_else(|| vec![1; starts]);
    if axes.len() != starts || steps.len() != starts {
        return Err(format!(
            "starts, ends, axes and steps must have the same length ({starts}, {ends}, {}, {})",
            axes.len(),
            steps.len()
        ));
    }
    if axes.len() > rank {
        return Err(format!("{} axes given for rank {rank}", axes.len()));
    }
    if let Some(k) = steps.iter().position(|&s| s == 0) {
        return Err(format!("steps[{k}] is 0"));
    }
    Ok((axes, steps))
}

/// One axis of length `dim` sliced from `start` to `end` by `step` (not
/// 0), with the spec's wrapping and clamping: the first element and the
/// length.
fn slice_range(dim: i64, start: i64, end: i64, step: i64) -> (i64, i64) {
    let wrap = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
    let (start, end) = (wrap(start), wrap(end));
    let (start, end) = if step > 0 || dim == 0 {
        (start.clamp(0, dim), end.clamp(0, dim))
    } else {
        (start.clamp(0, dim - 1), end.clamp(-1, dim - 1))
    };
    let span = if step > 0 { end - start } else { start - end };
    let len = if span <= 0 { 0 } else { (span - 1) / step.saturating_abs() + 1 };
    (if len == 0 { 0 } else { start }, len)
}

/// Ends at or past this are "to the end" whatever the dim (exporters
/// write `i64::MAX`), so over a symbolic dim they are the dim.
const SLICE_TO_END: i64 = i64::MAX / 2;

/// Shape elements (`what`'s) as dims: an error for one that may be
/// negative.
fn nonnegative_dims(elements: Vec<DimExpr>, facts: &SymbolFacts, what: &str) -> Result<Vec<DimExpr>, String> {
    match elements.iter().position(|e| !e.is_nonnegative(facts)) {
        Some(i) => Err(format!("{what}[{i}] is {}, which may be negative", elements[i])),
        None => Ok(elements),
    }
}

/// Symbolic inference of Slice: the output dims as expressions, and for
/// a 1-D input of symbolic elements (a shape being cut) the elements
/// kept. A symbolic axis (its dim, start or end) is sliced with a
/// positive step only: `clamp(start) .. clamp(end)` over the facts.
fn symbolic_slice(cx: &InferCx) -> Result<Inferred, String> {
    let mut dims = cx.dims(0)?;
    let (starts, ends) = (cx.elements(1)?, cx.elements(2)?);
    let (axes, steps) = slice_axes(
        dims.len(),
        starts.len(),
        ends.len(),
        opt_const_ints(cx, 3, "input 3 (axes)")?,
        opt_const_ints(cx, 4, "input 4 (steps)")?,
    )?;
    let facts = cx.facts();
    let mut kept = Vec::with_capacity(axes.len());
    for (k, &a) in axes.iter().enumerate() {
        let (dim, step) = (&dims[a], steps[k]);
        let (start, len) = match (dim.as_const(), starts[k].as_const(), ends[k].as_const()) {
            (Some(d), Some(s), Some(e)) => {
                let (s, l) = slice_range(d, s, e, step);
                (DimExpr::constant(s), DimExpr::constant(l))
            }
            _ if step < 0 => return Err(format!("axis {a}: a negative step over a symbolic dim is not inferred yet")),
            _ => {
                let overflow = || format!("axis {a}: the sliced length overflows");
                let wrap = |v: &DimExpr| match v.as_const() {
                    Some(c) if c >= SLICE_TO_END => Some(dim.clone()),
                    Some(c) if c < 0 => dim.checked_add(v),
                    _ => Some(v.clone()),
                };
                let clamp = |v: &DimExpr| Some(wrap(v)?.maximum(&DimExpr::default(), facts).minimum(dim, facts));
                let (start, end) = clamp(&starts[k]).zip(clamp(&ends[k])).ok_or_else(overflow)?;
                let len = end.checked_sub(&start).and_then(|l| l.div_ceil(step, facts)).ok_or_else(overflow)?;
                (start, len.maximum(&DimExpr::default(), facts))
            }
        };
        kept.push((start, step, len.clone()));
        dims[a] = len;
    }
    let dtype = cx.input(0)?.dtype;
    let Some(elements) = cx.symbolic_elements(0) else { return Inferred::of_dims(dtype, dims) };
    let [(start, step, len)] = &kept[..] else {
        return Err("symbolic elements are sliced along their one axis".into());
    };
    let (Some(start), Some(len)) = (start.as_const(), len.as_const()) else {
        return Err(format!("the elements {} are sliced at a symbolic position", dims_text(&elements)));
    };
    let at =
        |i: i64| start.checked_add(i.checked_mul(*step)?).and_then(|p| elements.get(usize::try_from(p).ok()?).cloned());
    let picked = (0..len).map(at).collect::<Option<Vec<_>>>().ok_or("the slice leaves the elements")?;
    Ok(Inferred::of_elements(dtype, picked))
}

impl Operator for Slice {
    fn name(&self) -> &'static str {
        "Slice"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let symbolic_dims = cx.dims(0)?.iter().any(|d| d.as_size().is_none());
        if symbolic_dims || (0..3).any(|i| cx.symbolic_elements(i).is_some()) {
            return Ok(vec![symbolic_slice(cx)?]);
        }
        let x = cx.input(0)?;
        let d = slice_dims(
            x.shape,
            &const_ints(cx, 1, "input 1 (starts)")?,
            &const_ints(cx, 2, "input 2 (ends)")?,
            opt_const_ints(cx, 3, "input 3 (axes)")?,
            opt_const_ints(cx, 4, "input 4 (steps)")?,
        )?;
        Ok(vec![Inferred::new(x.dtype, d.len)])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let starts = lower_ints(cx, 1, "input 1 (starts)")?.ok_or("input 1 is required")?;
        let ends = lower_ints(cx, 2, "input 2 (ends)")?.ok_or("input 2 is required")?;
        let d = slice_dims(
            &shape,
            &starts,
            &ends,
            lower_ints(cx, 3, "input 3 (axes)")?,
            lower_ints(cx, 4, "input 4 (steps)")?,
        )?;
        let strides = dense(&shape);
        let offset = (0..shape.len()).map(|a| d.start[a] * strides[a]).sum();
        let src_strides = (0..shape.len()).map(|a| d.step[a] * strides[a]).collect();
        copy_io(cx, 0, 0, &StridedCopy::to_dense(d.len, src_strides, offset))
    }
}

pub fn import_slice(cx: &mut NodeImport) -> Result<Op, String> {
    if cx.opset < 10 {
        cx.inputs.truncate(1);
        for (i, name) in [(1, "starts"), (2, "ends")] {
            if !ints_attr_to_input(cx, name, i)? {
                return Err(format!("attribute \"{name}\" is required"));
            }
        }
        ints_attr_to_input(cx, "axes", 3)?;
    }
    Ok(Op::Slice(Slice))
}

// ---------------------------------------------------------------------------
// Expand
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Expand;

impl Operator for Expand {
    fn name(&self) -> &'static str {
        "Expand"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        let dims = cx.dims(0)?;
        if dims.iter().any(|d| d.as_size().is_none()) || cx.symbolic_elements(1).is_some() {
            let target = nonnegative_dims(cx.elements(1)?, cx.facts(), "shape")?;
            let shape = broadcast_dims(&dims, &target, cx.facts()).ok_or_else(|| {
                format!("input 0 of shape {} does not broadcast with {}", dims_text(&dims), dims_text(&target))
            })?;
            return Ok(vec![Inferred::of_dims(x.dtype, shape)?]);
        }
        if cx.input(1)?.value.is_none() {
            return run_time_broadcast(cx, false);
        }
        let target = const_ints(cx, 1, "input 1 (shape)")?
            .iter()
            .enumerate()
            .map(|(i, &d)| dim_of(d, &format!("shape[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let shape = broadcast(x.shape, &target)
            .ok_or_else(|| format!("input 0 of shape {:?} does not broadcast with {target:?}", x.shape))?;
        Ok(vec![Inferred::new(x.dtype, shape)])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        run_time_broadcast_scratch(cx)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        if cx.output_is_dynamic(0) {
            return lower_run_time_broadcast(cx, false);
        }
        let (_, shape) = cx.input_type(0)?;
        let (_, out) = cx.output_type(0)?;
        let strides = broadcast_strides(&shape, &out);
        copy_io(cx, 0, 0, &StridedCopy::to_dense(out, strides, 0))
    }
}

/// Expand's or Tile's data-dependent output type when the shape or repeats
/// (input 1) are only known at run time: dims that cannot change stay known.
fn run_time_broadcast(cx: &InferCx, tile: bool) -> Result<Vec<Inferred>, String> {
    let (x, arg) = (cx.input(0)?, cx.input(1)?);
    let &[len] = arg.shape else {
        return Err(format!("input 1 must be 1-D, got shape {:?}", arg.shape));
    };
    if arg.dtype != DType::I64 {
        return Err(format!("input 1 must be i64, got {}", arg.dtype));
    }
    if tile && len != x.shape.len() {
        return Err(format!("repeats has {len} entries, input 0 has rank {}", x.shape.len()));
    }
    let rank = x.shape.len().max(len);
    checked_rank(rank, "the output")?;
    let dims = (0..rank)
        .map(|d| match (d + x.shape.len()).checked_sub(rank).map(|i| x.shape[i]) {
            Some(0) if tile => Dim::Known(0),
            Some(n) if n != 1 && !tile => Dim::Known(n),
            _ => Dim::Dynamic(None),
        })
        .collect();
    Ok(vec![Inferred::data_dependent(x.dtype, dims)])
}

/// Room for the output dims the kernel computes at run time.
fn run_time_broadcast_scratch(cx: &InferCx) -> usize {
    match cx.opt_input(1) {
        Some(arg) if arg.value.is_none() => 8 * MAX_RANK,
        _ => 0,
    }
}

/// `onnxc_broadcast_dims` into scratch, allocate, then `onnxc_broadcast`
/// (in portable mode the loops of [`dynamic_loops`]).
fn lower_run_time_broadcast(cx: &mut Lower, tile: bool) -> Result<(), String> {
    let (dtype, shape) = cx.input_type(0)?;
    let (_, arg_shape) = cx.input_type(1)?;
    if cx.portable() {
        let (x, arg) = (cx.input_ptr(0)?, cx.input_ptr(1)?);
        let dims = dynamic_loops::output_dims(cx, &shape, arg, arg_shape[0], tile)?;
        let y = cx.alloc_output(0, &dims)?;
        return dynamic_loops::broadcast(cx, dtype.size() as i64, &shape, &dims, tile, [x, y]);
    }
    let mut p = BroadcastParams {
        elem_bytes: dtype.size() as i64,
        rank: shape.len() as i64,
        arg_len: arg_shape[0] as i64,
        tile: tile as i64,
        ..Default::default()
    };
    for (slot, &d) in p.dims.iter_mut().zip(&shape) {
        *slot = d as i64;
    }
    let params = cx.params(&p)?;
    let (x, arg, out_dims) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.scratch_ptr()?);
    cx.call_checked(kernels::onnxc_broadcast_dims, (params, Ptr(arg), Ptr(out_dims)))?;
    let rank = shape.len().max(arg_shape[0]);
    let ptr = cx.ptr_type();
    let dims: Vec<_> =
        (0..rank).map(|d| cx.ins().load(ptr, MemFlagsData::trusted(), out_dims, (8 * d) as i32)).collect();
    let y = cx.alloc_output(0, &dims)?;
    cx.call_checked(kernels::onnxc_broadcast, (params, Ptr(arg), Ptr(x), Ptr(y)))
}

pub fn import_expand(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Expand(Expand))
}

// ---------------------------------------------------------------------------
// Tile
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Tile;

fn tile_repeats(repeats: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    if repeats.len() != rank {
        return Err(format!("repeats has {} entries, input 0 has rank {rank}", repeats.len()));
    }
    repeats.iter().enumerate().map(|(i, &r)| dim_of(r, &format!("repeats[{i}]"))).collect()
}

impl Operator for Tile {
    fn name(&self) -> &'static str {
        "Tile"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if cx.input(1)?.value.is_none() {
            return run_time_broadcast(cx, true);
        }
        let reps = tile_repeats(&const_ints(cx, 1, "input 1 (repeats)")?, x.shape.len())?;
        let shape = x
            .shape
            .iter()
            .zip(&reps)
            .map(|(&d, &r)| d.checked_mul(r).ok_or("output size overflows"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(vec![Inferred::new(x.dtype, shape)])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        run_time_broadcast_scratch(cx)
    }

    /// One copy over `[repeats..., dims...]`: the repeat dims read with
    /// stride 0 and write one input-sized block further along each axis.
    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        if cx.output_is_dynamic(0) {
            return lower_run_time_broadcast(cx, true);
        }
        let (_, shape) = cx.input_type(0)?;
        let (_, out) = cx.output_type(0)?;
        let reps = tile_repeats(&lower_ints(cx, 1, "input 1 (repeats)")?.ok_or("input 1 is required")?, shape.len())?;
        let (in_strides, out_strides) = (dense(&shape), dense(&out));
        let mut copy = StridedCopy {
            dims: reps.clone(),
            src_strides: vec![0; reps.len()],
            dst_strides: (0..shape.len()).map(|d| shape[d] as i64 * out_strides[d]).collect(),
            ..Default::default()
        };
        copy.dims.extend(&shape);
        copy.src_strides.extend(in_strides);
        copy.dst_strides.extend(out_strides);
        copy_io(cx, 0, 0, &copy)
    }
}

pub fn import_tile(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Tile(Tile))
}

// ---------------------------------------------------------------------------
// Pad
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

#[derive(Clone, Debug)]
pub struct Pad {
    pub mode: PadMode,
}

/// Per-dim (begin, end) pads from the `pads` input and the optional axes.
fn pad_amounts(rank: usize, pads: &[i64], axes: Option<Vec<i64>>) -> Result<Vec<(i64, i64)>, String> {
    let axes = match axes {
        Some(a) => axes_of(&a, rank, "axes")?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(format!("pads has {} entries, expected {} (2 per axis)", pads.len(), 2 * axes.len()));
    }
    let mut out = vec![(0, 0); rank];
    for (k, &a) in axes.iter().enumerate() {
        out[a] = (pads[k], pads[k + axes.len()]);
    }
    Ok(out)
}

fn padded_shape(shape: &[usize], pads: &[(i64, i64)]) -> Result<Vec<usize>, String> {
    shape
        .iter()
        .zip(pads)
        .enumerate()
        .map(|(d, (&n, &(b, e)))| {
            let v = (n as i64).saturating_add(b).saturating_add(e);
            usize::try_from(v).map_err(|_| format!("pads make dim {d} negative ({v})"))
        })
        .collect()
}

impl Operator for Pad {
    fn name(&self) -> &'static str {
        "Pad"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        let pads = pad_amounts(
            x.shape.len(),
            &const_ints(cx, 1, "input 1 (pads)")?,
            opt_const_ints(cx, 3, "input 3 (axes)")?,
        )?;
        let shape = padded_shape(x.shape, &pads)?;
        if self.mode != PadMode::Constant {
            for (d, (&n, &(b, e))) in x.shape.iter().zip(&pads).enumerate() {
                let kept = n as i64 - (-b).max(0) - (-e).max(0);
                if kept <= 0 && shape[d] > 0 {
                    return Err(format!("{:?} padding of dim {d} needs input elements, but none remain", self.mode));
                }
            }
        }
        if let Some(v) = cx.opt_input(2) {
            if v.value.is_none() && v.dtype != x.dtype {
                return Err(format!("input 2 (constant_value) has type {}, input 0 has {}", v.dtype, x.dtype));
            }
        }
        checked_rank(x.shape.len(), "input 0")?;
        Ok(vec![Inferred::new(x.dtype, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (_, out) = cx.output_type(0)?;
        checked_rank(shape.len(), "input 0")?;
        let pads = pad_amounts(
            shape.len(),
            &lower_ints(cx, 1, "input 1 (pads)")?.ok_or("input 1 is required")?,
            lower_ints(cx, 3, "input 3 (axes)")?,
        )?;
        if out.contains(&0) {
            return Ok(());
        }
        let mut p = PadParams {
            elem_bytes: dtype.size() as i64,
            mode: match self.mode {
                PadMode::Constant => onnxc_runtime::PAD_CONSTANT,
                PadMode::Reflect => onnxc_runtime::PAD_REFLECT,
                PadMode::Edge => onnxc_runtime::PAD_EDGE,
                PadMode::Wrap => onnxc_runtime::PAD_WRAP,
            },
            rank: shape.len() as i64,
            ..Default::default()
        };
        for d in 0..shape.len() {
            p.in_dims[d] = shape[d] as i64;
            p.out_dims[d] = out[d] as i64;
            p.pads_begin[d] = pads[d].0;
        }
        // A constant value is placed in the data's type (old opsets give f32).
        let value = match cx.const_input(2) {
            Some(t) if !t.is_empty() => {
                let bytes = scalar_as(t, dtype).map_err(|e| format!("input 2: {e}"))?;
                Some(cx.data_bytes(&bytes)?)
            }
            Some(_) => None,
            None if cx.has_input(2) => Some(cx.input_ptr(2)?),
            None => None,
        };
        let x = cx.input_ptr(0)?;
        let y = cx.output_ptr(0)?;
        if cx.portable() {
            return pad_loops::pad(cx, &p, x, value, y);
        }
        // A null value pads with zero bytes.
        let value = value.unwrap_or_else(|| cx.iconst(0));
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_pad, (params, Ptr(x), Ptr(value), Ptr(y)))
    }
}

pub fn import_pad(cx: &mut NodeImport) -> Result<Op, String> {
    let mode = match cx.attrs.string_or("mode", "constant")?.as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        other => return Err(format!("attribute \"mode\" is \"{other}\", expected constant, reflect, edge or wrap")),
    };
    if cx.opset < 11 {
        cx.inputs.truncate(1);
        let name = if cx.attrs.has("paddings") { "paddings" } else { "pads" };
        if !ints_attr_to_input(cx, name, 1)? {
            return Err("attribute \"pads\" is required".into());
        }
        let value = cx.attrs.float_or("value", 0.0)?;
        let id = cx.add_const("value", Tensor::from_f32s(vec![], &[value]));
        set_input(cx, 2, id);
    }
    Ok(Op::Pad(Pad { mode }))
}

// ---------------------------------------------------------------------------
// Shape, Size: known from shapes alone
// ---------------------------------------------------------------------------

const COMPILE_TIME: &str = "is evaluated at compile time and has no code";

#[derive(Clone, Debug)]
pub struct Shape {
    pub start: i64,
    pub end: Option<i64>,
}

impl Operator for Shape {
    fn name(&self) -> &'static str {
        "Shape"
    }

    /// Only the dims are read, never the elements.
    fn reads_packed(&self) -> bool {
        true
    }

    /// A constant, or of a tensor with symbolic dims, their expressions.
    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let shape = cx.dims(0)?;
        let r = shape.len() as i64;
        let clamp = |v: i64| (if v < 0 { v.saturating_add(r) } else { v }).clamp(0, r) as usize;
        let (start, end) = (clamp(self.start), clamp(self.end.unwrap_or(r)));
        let dims = shape.get(start..end.max(start)).unwrap_or(&[]).to_vec();
        Ok(vec![Inferred::of_elements(DType::I64, dims)])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err(format!("Shape {COMPILE_TIME}"))
    }
}

pub fn import_shape(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Shape(Shape { start: cx.attrs.int_or("start", 0)?, end: cx.attrs.int("end")? }))
}

#[derive(Clone, Debug)]
pub struct Size;

impl Operator for Size {
    fn name(&self) -> &'static str {
        "Size"
    }

    /// Only the dims are read, never the elements.
    fn reads_packed(&self) -> bool {
        true
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let n = count(cx.input(0)?.shape, "input 0")?;
        let value = Tensor::from_i64s(vec![], &[n as i64]);
        Ok(vec![Inferred::constant(value)])
    }

    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err(format!("Size {COMPILE_TIME}"))
    }
}

pub fn import_size(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Size(Size))
}

/// An inference result carrying its value when it is small enough to fold.
fn maybe_known(cx: &InferCx, dtype: DType, shape: Vec<usize>, make: impl FnOnce() -> Vec<u8>) -> Inferred {
    let small = element_count(&shape).and_then(|n| n.checked_mul(dtype.size())).is_some_and(|b| b <= cx.max_fold_bytes);
    match small.then(|| Tensor::from_bytes(dtype, shape.clone(), make())).flatten() {
        Some(value) => Inferred::constant(value),
        None => Inferred::new(dtype, shape),
    }
}

// ---------------------------------------------------------------------------
// ConstantOfShape
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct ConstantOfShape {
    /// One element; f32 0 by default.
    pub value: Tensor,
}

impl Operator for ConstantOfShape {
    fn name(&self) -> &'static str {
        "ConstantOfShape"
    }

    /// A shape of symbolic elements gives symbolic dims.
    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        if let Some(dims) = cx.symbolic_elements(0) {
            return Ok(vec![Inferred::of_dims(self.value.dtype, nonnegative_dims(dims, cx.facts(), "shape")?)?]);
        }
        let shape = const_ints(cx, 0, "input 0 (shape)")?
            .iter()
            .enumerate()
            .map(|(i, &d)| dim_of(d, &format!("shape[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let n = count(&shape, "output")?;
        let v = &self.value;
        Ok(vec![maybe_known(cx, v.dtype, shape, || v.data.repeat(n))])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, out) = cx.output_type(0)?;
        let n = count(&out, "output")?;
        let value = cx.data_bytes(&scalar_as(&self.value, dtype)?)?;
        let dst = cx.output_ptr(0)?;
        let copy = StridedCopy::to_dense(vec![n], vec![0], 0);
        emit_strided_copy(cx, dtype, value, dst, &copy)
    }
}

pub fn import_constant_of_shape(cx: &mut NodeImport) -> Result<Op, String> {
    let value = match cx.attrs.tensor("value")? {
        None => Tensor::from_f32s(vec![1], &[0.0]),
        Some(t) if t.len() == 1 => t,
        Some(t) => return Err(format!("attribute \"value\" must hold one element, it holds {}", t.len())),
    };
    Ok(Op::ConstantOfShape(ConstantOfShape { value }))
}

// ---------------------------------------------------------------------------
// Range
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Range;

/// Range's constant scalars, exact for integers.
#[derive(Clone, Copy, Debug)]
enum RangeArgs {
    Int { start: i64, delta: i64 },
    Float { start: f64, delta: f64 },
}

/// Range's type constraint.
fn range_type(dtype: DType) -> Result<(), String> {
    match dtype {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I16 | DType::I32 | DType::I64 => Ok(()),
        other => Err(format!("Range does not take {other}")),
    }
}

fn range_args(inputs: [&Tensor; 3]) -> Result<(DType, RangeArgs, usize), String> {
    let dtype = inputs[0].dtype;
    for (i, t) in inputs.iter().enumerate() {
        if t.dtype != dtype {
            return Err(format!("input {i} has type {}, input 0 has {dtype}", t.dtype));
        }
        if t.len() != 1 {
            return Err(format!("input {i} must be a scalar, it has {} elements", t.len()));
        }
    }
    range_type(dtype)?;
    if dtype.is_float() {
        let [start, limit, delta] = inputs.map(|t| t.get_f64(0));
        if delta == 0.0 || !delta.is_finite() || !start.is_finite() || !limit.is_finite() {
            return Err(format!("cannot range from {start} to {limit} by {delta}"));
        }
        let n = ((limit - start) / delta).ceil().max(0.0);
        if n > usize::MAX as f64 {
            return Err("Range output is too large".into());
        }
        Ok((dtype, RangeArgs::Float { start, delta }, n as usize))
    } else {
        let [start, limit, delta] = inputs.map(|t| t.get_i64(0) as i128);
        if delta == 0 {
            return Err("input 2 (delta) is 0".into());
        }
        let span = limit - start;
        let n = if (span > 0) == (delta > 0) && span != 0 { (span.abs() + delta.abs() - 1) / delta.abs() } else { 0 };
        let n = usize::try_from(n).map_err(|_| "Range output is too large".to_string())?;
        Ok((dtype, RangeArgs::Int { start: start as i64, delta: delta as i64 }, n))
    }
}

impl Operator for Range {
    fn name(&self) -> &'static str {
        "Range"
    }

    /// Constant arguments give a static (usually folded) result; run-time
    /// ones an unbounded data-dependent length.
    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let given = [cx.input(0)?, cx.input(1)?, cx.input(2)?];
        let [Some(start), Some(limit), Some(delta)] = given.map(|i| i.value) else {
            let dtype = given[0].dtype;
            for (i, t) in given.iter().enumerate() {
                if t.dtype != dtype || element_count(t.shape) != Some(1) {
                    return Err(format!("input {i} must be one {dtype} value, got {}{:?}", t.dtype, t.shape));
                }
            }
            range_type(dtype)?;
            return Ok(vec![Inferred::data_dependent(dtype, vec![Dim::Dynamic(None)])]);
        };
        let (dtype, args, n) = range_args([start, limit, delta])?;
        Ok(vec![maybe_known(cx, dtype, vec![n], || {
            (0..n)
                .flat_map(|i| match args {
                    RangeArgs::Int { start, delta } => {
                        encode_i64(dtype, start.wrapping_add(delta.wrapping_mul(i as i64)))
                    }
                    RangeArgs::Float { start, delta } => encode_f64(dtype, start + delta * i as f64),
                })
                .collect()
        })])
    }

    /// `onnxc_range`: for constant arguments only when the result was too
    /// large to fold; otherwise the length is computed at run time and the
    /// output allocated.
    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, _) = cx.input_type(0)?;
        if cx.portable() {
            return self.lower_portable(cx, dtype);
        }
        let (count, y) = if cx.output_is_dynamic(0) {
            let code = I64(cx.iconst(dtype.onnx_code() as i64));
            let args = (code, Ptr(cx.input_ptr(0)?), Ptr(cx.input_ptr(1)?), Ptr(cx.input_ptr(2)?));
            let count = cx.call_count(kernels::onnxc_range_count, args)?;
            (count, cx.alloc_output(0, &[count])?)
        } else {
            let (_, shape) = cx.output_type(0)?;
            (cx.iconst(shape[0] as i64), cx.output_ptr(0)?)
        };
        let code = cx.iconst(dtype.onnx_code() as i64);
        let (start, delta) = (cx.input_ptr(0)?, cx.input_ptr(2)?);
        cx.call_checked(kernels::onnxc_range, (I64(code), Ptr(start), Ptr(delta), Ptr(y), I64(count)))
    }
}

impl Range {
    /// Range in portable mode: the loops of [`dynamic_loops`].
    fn lower_portable(&self, cx: &mut Lower, dtype: DType) -> Result<(), String> {
        let (start, delta) = (cx.input_ptr(0)?, cx.input_ptr(2)?);
        let (count, y) = if cx.output_is_dynamic(0) {
            let limit = cx.input_ptr(1)?;
            let count = dynamic_loops::range_count(cx, dtype, [start, limit, delta])?;
            (count, cx.alloc_output(0, &[count])?)
        } else {
            let (_, shape) = cx.output_type(0)?;
            (cx.iconst(shape[0] as i64), cx.output_ptr(0)?)
        };
        dynamic_loops::range(cx, dtype, [start, delta, y], count)
    }
}

pub fn import_range(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Range(Range))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_clamps_per_spec() {
        let d = slice_dims(&[10], &[-3], &[i64::MAX], None, None).unwrap();
        assert_eq!((d.start, d.len), (vec![7], vec![3]));
        let d = slice_dims(&[10], &[i64::MAX], &[i64::MIN], None, Some(vec![-2])).unwrap();
        assert_eq!((d.start, d.step, d.len), (vec![9], vec![-2], vec![5]));
        let d = slice_dims(&[4, 5], &[20], &[30], Some(vec![-1]), None).unwrap();
        assert_eq!(d.len, vec![4, 0]);
        let d = slice_dims(&[0], &[-1], &[i64::MIN], None, Some(vec![-1])).unwrap();
        assert_eq!(d.len, vec![0]);
    }

    #[test]
    fn split_chunks_leave_the_last_smaller() {
        let s = Split { axis: 0, num_outputs: Some(3) };
        assert_eq!(s.sizes(7, None, 3).unwrap(), vec![3, 3, 1]);
        assert!(s.sizes(7, Some(vec![3, 3]), 2).is_err());
    }

    #[test]
    fn canonical_copy_merges_contiguous_dims() {
        let c = StridedCopy::to_dense(vec![2, 1, 3], vec![3, 9, 1], 0).canonical();
        assert_eq!(c.dims, vec![6]);
    }
}
