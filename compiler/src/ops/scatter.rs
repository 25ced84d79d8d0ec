//! Writing by index and the other indexing operators: ScatterElements (and
//! the deprecated Scatter), ScatterND, TensorScatter, Trilu, EyeLike, CumSum,
//! CumProd, ReverseSequence, SpaceToDepth, DepthToSpace and CenterCropPad.
//!
//! Type constraints (ONNX) and opset normalisation:
//! - ScatterElements (11, 13, 16, 18), Scatter (9, deprecated in 11: the
//!   same operator without `reduction`), ScatterND (11, 13, 16, 18): data
//!   any type; ScatterElements indices i32/i64, ScatterND i64. `reduction`
//!   (16: none/add/mul, 18: max/min too) needs a numeric type; f16/bf16
//!   compute in f32. Duplicate indices apply in order.
//! - TensorScatter (24): any data type, optional i64 `write_indices` per
//!   batch entry (dim 0), `axis` >= 1; `mode` linear (positions must fit)
//!   or circular (wrap).
//! - Trilu (14): any type, optional i64 scalar `k` read at run time (in
//!   portable mode a loop nest choosing each element or zero).
//! - EyeLike (9, 22): 2-D input; output type from `dtype` or the input's.
//! - CumSum (11, 14), CumProd (26): numeric; `axis` a constant scalar input
//!   (in portable mode the folds of [`crate::codegen::cumulative_loops`]).
//! - ReverseSequence (10): any type; `batch_axis`/`time_axis` are 0 and 1
//!   in some order; i64 `sequence_lens` checked at run time (in portable
//!   mode by [`crate::codegen::scatter_loops`], all before any write).
//! - SpaceToDepth (1, 13; `mode` DCR/CRD from 28), DepthToSpace (1, 11,
//!   13): 4-D, any type; lowered as one strided copy (a 6-D transpose).
//! - CenterCropPad (18): any type, constant `shape`, optional `axes`;
//!   lowered through the Pad kernel (negative pads crop, zero fill), in
//!   portable mode through Pad's loop nest.
//!
//! Scatter lowerings copy `data` to the output and then update it in place
//! in a kernel that checks every index (`INDEX_OUT_OF_RANGE`); in portable
//! mode ScatterElements and ScatterND are the loops of
//! [`crate::codegen::scatter_loops`], which check every index before the copy.

use super::gather::{
    axis_attr, dims_array, elements_params, flag, max_rank, nd_params, product, require_i64, scalar_i64, split_axis,
};
use super::shape_ops::{emit_strided_copy, StridedCopy};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::scatter_loops;
use crate::codegen::{pad_loops, types, InstBuilder, IntCC, Level, Lower, MemFlagsData, Value};
use crate::import::NodeImport;
use crate::ir::shape::{contiguous_strides, element_count, normalize_axis};
use crate::ir::{DType, Tensor};
use onnxc_runtime::{
    CumulativeParams, EyeParams, PadParams, ReverseSequenceParams, TensorScatterParams, TriluParams, MAX_RANK,
    PAD_CONSTANT, SCATTER_ADD, SCATTER_MAX, SCATTER_MIN, SCATTER_MUL, SCATTER_NONE,
};

/// Copies input 0 to output 0 (the starting point of every scatter).
fn copy_data_to_output(cx: &mut Lower) -> Result<(), String> {
    let (dtype, shape) = cx.input_type(0)?;
    let bytes = element_count(&shape).ok_or("element count overflows")? * dtype.size();
    let (src, dst) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
    cx.copy_bytes(dst, src, bytes);
    Ok(())
}

// ---------------------------------------------------------------------------
// ScatterElements / Scatter, ScatterND
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

impl Reduction {
    fn parse(cx: &NodeImport) -> Result<Reduction, String> {
        match cx.attrs.string_or("reduction", "none")?.as_str() {
            "none" => Ok(Reduction::None),
            "add" => Ok(Reduction::Add),
            "mul" => Ok(Reduction::Mul),
            "max" => Ok(Reduction::Max),
            "min" => Ok(Reduction::Min),
            other => Err(format!("attribute \"reduction\" is \"{other}\", expected none, add, mul, max or min")),
        }
    }

    fn code(self) -> i64 {
        match self {
            Reduction::None => SCATTER_NONE,
            Reduction::Add => SCATTER_ADD,
            Reduction::Mul => SCATTER_MUL,
            Reduction::Max => SCATTER_MAX,
            Reduction::Min => SCATTER_MIN,
        }
    }

    /// Reductions compute, so they need a numeric element type.
    fn check(self, dtype: DType) -> Result<(), String> {
        if self != Reduction::None && dtype == DType::Bool {
            return Err(format!("attribute \"reduction\" {self:?} is not defined for bool data"));
        }
        Ok(())
    }
}

/// Updates must match `want` and have the data's element type.
fn check_updates(cx: &InferCx, want: &[usize], dtype: DType) -> Result<(), String> {
    let updates = cx.input(2)?;
    if updates.shape != want || updates.dtype != dtype {
        return Err(format!("input 2 (updates) is {}{:?}, expected {dtype}{want:?}", updates.dtype, updates.shape));
    }
    Ok(())
}

/// ScatterElements (and Scatter): `out = data` with `out[i with i[axis] =
/// indices[i]] (reduction)= updates[i]`.
#[derive(Clone, Debug)]
pub struct ScatterElements {
    pub axis: i64,
    pub reduction: Reduction,
}

impl Operator for ScatterElements {
    fn name(&self) -> &'static str {
        "ScatterElements"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (data, indices) = (cx.input(0)?, cx.input(1)?);
        elements_params((data.dtype, data.shape), (indices.dtype, indices.shape), self.axis)?;
        self.reduction.check(data.dtype)?;
        check_updates(cx, indices.shape, data.dtype)?;
        Ok(vec![Inferred::new(data.dtype, data.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (itype, ishape) = cx.input_type(1)?;
        let mut p = elements_params((dtype, &shape), (itype, &ishape), self.axis)?;
        p.reduction = self.reduction.code();
        if cx.portable() {
            let ptrs = [cx.input_ptr(0)?, cx.input_ptr(1)?, cx.input_ptr(2)?, cx.output_ptr(0)?];
            return scatter_loops::scatter_elements(cx, &p, ptrs);
        }
        copy_data_to_output(cx)?;
        let params = cx.params(&p)?;
        let (out, indices, updates) = (cx.output_ptr(0)?, cx.input_ptr(1)?, cx.input_ptr(2)?);
        cx.call_checked(kernels::onnxc_scatter_elements, (params, Ptr(out), Ptr(indices), Ptr(updates)))
    }
}

pub fn import_scatter_elements(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::ScatterElements(ScatterElements { axis: cx.attrs.int_or("axis", 0)?, reduction: Reduction::parse(cx)? }))
}

/// ScatterND: `out = data` with `out[indices[t], :] (reduction)= updates[t, :]`.
#[derive(Clone, Debug)]
pub struct ScatterNd {
    pub reduction: Reduction,
}

impl Operator for ScatterNd {
    fn name(&self) -> &'static str {
        "ScatterND"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (data, indices) = (cx.input(0)?, cx.input(1)?);
        let (_, ushape) = nd_params(data.dtype, data.shape, indices.dtype, indices.shape, 0)?;
        self.reduction.check(data.dtype)?;
        check_updates(cx, &ushape, data.dtype)?;
        Ok(vec![Inferred::new(data.dtype, data.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (itype, ishape) = cx.input_type(1)?;
        let (mut p, _) = nd_params(dtype, &shape, itype, &ishape, 0)?;
        p.reduction = self.reduction.code();
        if cx.portable() {
            let ptrs = [cx.input_ptr(0)?, cx.input_ptr(1)?, cx.input_ptr(2)?, cx.output_ptr(0)?];
            return scatter_loops::scatter_nd(cx, &p, ptrs);
        }
        copy_data_to_output(cx)?;
        let params = cx.params(&p)?;
        let (out, indices, updates) = (cx.output_ptr(0)?, cx.input_ptr(1)?, cx.input_ptr(2)?);
        cx.call_checked(kernels::onnxc_scatter_nd, (params, Ptr(out), Ptr(indices), Ptr(updates)))
    }
}

pub fn import_scatter_nd(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::ScatterNd(ScatterNd { reduction: Reduction::parse(cx)? }))
}

// ---------------------------------------------------------------------------
// TensorScatter
// ---------------------------------------------------------------------------

/// TensorScatter: writes `update` into a copy of the cache along `axis`
/// at each batch entry's write index.
#[derive(Clone, Debug)]
pub struct TensorScatter {
    pub axis: i64,
    pub circular: bool,
}

impl TensorScatter {
    fn params(&self, dtype: DType, cache: &[usize], update: &[usize]) -> Result<TensorScatterParams, String> {
        let rank = cache.len();
        let axis = axis_attr(self.axis, rank)?;
        if axis == 0 {
            return Err("attribute \"axis\" must not be the batch axis 0".into());
        }
        let fits = update.len() == rank
            && (0..rank).all(|d| if d == axis { update[d] <= cache[d] } else { update[d] == cache[d] });
        if !fits {
            return Err(format!("input 1 (update) {update:?} does not fit the cache {cache:?} along axis {axis}"));
        }
        Ok(TensorScatterParams {
            elem_bytes: dtype.size() as i64,
            circular: self.circular as i64,
            batch: cache[0] as i64,
            mid: product(&cache[1..axis])?,
            max_seq: cache[axis] as i64,
            seq: update[axis] as i64,
            inner: product(&cache[axis + 1..])?,
        })
    }
}

impl Operator for TensorScatter {
    fn name(&self) -> &'static str {
        "TensorScatter"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (cache, update) = (cx.input(0)?, cx.input(1)?);
        if update.dtype != cache.dtype {
            return Err(format!("input 1 (update) is {}, expected {}", update.dtype, cache.dtype));
        }
        self.params(cache.dtype, cache.shape, update.shape)?;
        if let Some(w) = cx.opt_input(2) {
            require_i64(w.dtype, "input 2 (write_indices)")?;
            if w.shape != [cache.shape[0]] {
                return Err(format!("input 2 (write_indices) has shape {:?}, expected [{}]", w.shape, cache.shape[0]));
            }
        }
        Ok(vec![Inferred::new(cache.dtype, cache.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (_, ushape) = cx.input_type(1)?;
        let p = self.params(dtype, &shape, &ushape)?;
        if cx.portable() {
            let write = if cx.has_input(2) { Some(cx.input_ptr(2)?) } else { None };
            let ptrs = [cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?];
            return scatter_loops::tensor_scatter(cx, &p, ptrs, write);
        }
        copy_data_to_output(cx)?;
        let params = cx.params(&p)?;
        let (out, update, write) = (cx.output_ptr(0)?, cx.input_ptr(1)?, cx.opt_input_ptr(2));
        cx.call_checked(kernels::onnxc_tensor_scatter, (params, Ptr(out), Ptr(update), Ptr(write)))
    }
}

pub fn import_tensor_scatter(cx: &mut NodeImport) -> Result<Op, String> {
    let circular = match cx.attrs.string_or("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        other => return Err(format!("attribute \"mode\" is \"{other}\", expected linear or circular")),
    };
    Ok(Op::TensorScatter(TensorScatter { axis: cx.attrs.int_or("axis", -2)?, circular }))
}

// ---------------------------------------------------------------------------
// Trilu, EyeLike
// ---------------------------------------------------------------------------

/// Trilu: keeps the upper (`j - i >= k`) or lower (`j - i <= k`) triangle of
/// the last two dims and zeroes the rest.
#[derive(Clone, Debug)]
pub struct Trilu {
    pub upper: bool,
}

impl Operator for Trilu {
    fn name(&self) -> &'static str {
        "Trilu"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if x.shape.len() < 2 {
            return Err(format!("input 0 has rank {}, expected at least 2", x.shape.len()));
        }
        if let Some(k) = cx.opt_input(1) {
            require_i64(k.dtype, "input 1 (k)")?;
            if element_count(k.shape) != Some(1) {
                return Err(format!("input 1 (k) must be a scalar, has shape {:?}", k.shape));
            }
        }
        Ok(vec![Inferred::new(x.dtype, x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let r = shape.len();
        let p = TriluParams {
            elem_bytes: dtype.size() as i64,
            batch: product(&shape[..r - 2])?,
            rows: shape[r - 2] as i64,
            cols: shape[r - 1] as i64,
            upper: self.upper as i64,
        };
        let (x, k, y) = (cx.input_ptr(0)?, cx.opt_input_ptr(1), cx.output_ptr(0)?);
        if cx.portable() {
            let k = cx.has_input(1).then_some(k);
            return trilu_portable(cx, &p, x, k, y);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_trilu, (params, Ptr(x), Ptr(k), Ptr(y)))
    }
}

/// Trilu in portable mode: one nest over (batch, row, column) copying the
/// element or storing zero, by `column - row` against the run-time `k`
/// (0 without it).
fn trilu_portable(cx: &mut Lower, p: &TriluParams, x: Value, k: Option<Value>, y: Value) -> Result<(), String> {
    let (eb, flags) = (p.elem_bytes, MemFlagsData::trusted());
    let k = match k {
        Some(ptr) => cx.ins().load(types::I64, flags, ptr, 0),
        None => cx.ins().iconst(types::I64, 0),
    };
    let row = p.cols * eb;
    let levels = [
        Level::new(p.batch as usize, vec![p.rows * row; 2]),
        Level::new(p.rows as usize, vec![row; 2]),
        Level::new(p.cols as usize, vec![eb; 2]),
    ];
    let zero = cx.data_bytes(&vec![0u8; eb as usize])?;
    let keep_cc = if p.upper != 0 { IntCC::SignedGreaterThanOrEqual } else { IntCC::SignedLessThanOrEqual };
    cx.nest(&levels, &[x, y], &mut |cx, index, at| {
        let diagonal = cx.ins().isub(index[2], index[1]);
        let keep = cx.ins().icmp(keep_cc, diagonal, k);
        let src = cx.ins().select(keep, at[0], zero);
        cx.copy_run(at[1], src, eb);
        Ok(())
    })
}

pub fn import_trilu(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Trilu(Trilu { upper: flag(cx, "upper", true)? }))
}

/// EyeLike: a 2-D tensor of the input's shape with ones on diagonal `k`.
#[derive(Clone, Debug)]
pub struct EyeLike {
    pub dtype: Option<DType>,
    pub k: i64,
}

/// The little-endian bytes of one `1` of `dtype`, in an i64.
pub(super) fn one_bits(dtype: DType) -> i64 {
    match dtype {
        DType::F32 => 1.0f32.to_bits() as i64,
        DType::F64 => 1.0f64.to_bits() as i64,
        DType::F16 => half::f16::ONE.to_bits() as i64,
        DType::BF16 => half::bf16::ONE.to_bits() as i64,
        _ => 1,
    }
}

impl Operator for EyeLike {
    fn name(&self) -> &'static str {
        "EyeLike"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if x.shape.len() != 2 {
            return Err(format!("input 0 has rank {}, expected 2", x.shape.len()));
        }
        Ok(vec![Inferred::new(self.dtype.unwrap_or(x.dtype), x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.output_type(0)?;
        let p = EyeParams {
            elem_bytes: dtype.size() as i64,
            rows: shape[0] as i64,
            cols: shape[1] as i64,
            k: self.k,
            one: one_bits(dtype),
        };
        let y = cx.output_ptr(0)?;
        if cx.portable() {
            return scatter_loops::eye(cx, &p, y);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_eye, (params, Ptr(y)))
    }
}

pub fn import_eye_like(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::EyeLike(EyeLike { dtype: cx.attrs.dtype("dtype")?, k: cx.attrs.int_or("k", 0)? }))
}

// ---------------------------------------------------------------------------
// CumSum / CumProd, ReverseSequence
// ---------------------------------------------------------------------------

/// CumSum and CumProd along the constant `axis` input.
#[derive(Clone, Debug)]
pub struct Cumulative {
    pub product: bool,
    pub exclusive: bool,
    pub reverse: bool,
}

impl Cumulative {
    fn axis(t: &Tensor, rank: usize) -> Result<usize, String> {
        let a = scalar_i64(t, "input 1 (axis)")?;
        normalize_axis(a, rank).ok_or_else(|| format!("input 1 (axis) {a} is out of range for rank {rank}"))
    }
}

impl Operator for Cumulative {
    fn name(&self) -> &'static str {
        if self.product {
            "CumProd"
        } else {
            "CumSum"
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if x.dtype == DType::Bool {
            return Err("input 0 must be numeric, got bool".into());
        }
        Self::axis(cx.const_input(1)?, x.shape.len())?;
        Ok(vec![Inferred::new(x.dtype, x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let axis = Self::axis(cx.const_input(1).ok_or("input 1 (axis) must be a compile-time constant")?, shape.len())?;
        let (outer, len, inner) = split_axis(&shape, axis)?;
        let p = CumulativeParams {
            dtype: dtype.onnx_code() as i64,
            elem_bytes: dtype.size() as i64,
            product: self.product as i64,
            exclusive: self.exclusive as i64,
            reverse: self.reverse as i64,
            outer,
            len,
            inner,
        };
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        if cx.portable() {
            return crate::codegen::cumulative_loops::cumulative(cx, &p, x, y);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_cumulative, (params, Ptr(x), Ptr(y)))
    }
}

pub fn import_cumulative(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Cumulative(Cumulative {
        product: cx.op_type == "CumProd",
        exclusive: flag(cx, "exclusive", false)?,
        reverse: flag(cx, "reverse", false)?,
    }))
}

/// ReverseSequence: reverses the first `sequence_lens[b]` time steps of
/// every batch entry.
#[derive(Clone, Debug)]
pub struct ReverseSequence {
    pub batch_axis: i64,
    pub time_axis: i64,
}

impl ReverseSequence {
    fn params(&self, dtype: DType, shape: &[usize]) -> Result<ReverseSequenceParams, String> {
        if shape.len() < 2 {
            return Err(format!("input 0 has rank {}, expected at least 2", shape.len()));
        }
        let time_first = match (self.batch_axis, self.time_axis) {
            (1, 0) => true,
            (0, 1) => false,
            (b, t) => return Err(format!("attributes \"batch_axis\" {b} and \"time_axis\" {t} must be 0 and 1")),
        };
        let inner = product(&shape[2..])?;
        let (outer_stride, inner_stride) = (shape[1] as i64 * inner, inner);
        let (time_stride, batch_stride) =
            if time_first { (outer_stride, inner_stride) } else { (inner_stride, outer_stride) };
        Ok(ReverseSequenceParams {
            elem_bytes: dtype.size() as i64,
            time_len: shape[self.time_axis as usize] as i64,
            batch_len: shape[self.batch_axis as usize] as i64,
            inner,
            time_stride,
            batch_stride,
        })
    }
}

impl Operator for ReverseSequence {
    fn name(&self) -> &'static str {
        "ReverseSequence"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (x, lens) = (cx.input(0)?, cx.input(1)?);
        let p = self.params(x.dtype, x.shape)?;
        require_i64(lens.dtype, "input 1 (sequence_lens)")?;
        if lens.shape != [p.batch_len as usize] {
            return Err(format!("input 1 (sequence_lens) has shape {:?}, expected [{}]", lens.shape, p.batch_len));
        }
        Ok(vec![Inferred::new(x.dtype, x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let p = self.params(dtype, &shape)?;
        let (x, lens, y) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?);
        if cx.portable() {
            return scatter_loops::reverse_sequence(cx, &p, [x, lens, y]);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_reverse_sequence, (params, Ptr(x), Ptr(lens), Ptr(y)))
    }
}

pub fn import_reverse_sequence(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::ReverseSequence(ReverseSequence {
        batch_axis: cx.attrs.int_or("batch_axis", 1)?,
        time_axis: cx.attrs.int_or("time_axis", 0)?,
    }))
}

// ---------------------------------------------------------------------------
// SpaceToDepth / DepthToSpace
// ---------------------------------------------------------------------------

/// SpaceToDepth and DepthToSpace: a 4-D tensor viewed as 6-D and transposed.
#[derive(Clone, Debug)]
pub struct SpaceDepth {
    pub to_depth: bool,
    /// Column-row-depth order of the channel blocks (else depth-column-row).
    pub crd: bool,
    pub blocksize: usize,
}

/// The 6-D view of the input, the permutation, and the output shape.
type BlockLayout = ([usize; 6], [usize; 6], Vec<usize>);

impl SpaceDepth {
    fn layout(&self, shape: &[usize]) -> Result<BlockLayout, String> {
        let &[n, c, h, w] = shape else {
            return Err(format!("input 0 has rank {}, expected 4", shape.len()));
        };
        let bs = self.blocksize;
        if self.to_depth {
            if h % bs != 0 || w % bs != 0 {
                return Err(format!("height {h} and width {w} must be multiples of attribute \"blocksize\" {bs}"));
            }
            let view = [n, c, h / bs, bs, w / bs, bs];
            let perm = if self.crd { [0, 1, 3, 5, 2, 4] } else { [0, 3, 5, 1, 2, 4] };
            Ok((view, perm, vec![n, c * bs * bs, h / bs, w / bs]))
        } else {
            if c % (bs * bs) != 0 {
                return Err(format!("channels {c} must be a multiple of attribute \"blocksize\" {bs} squared"));
            }
            let cc = c / (bs * bs);
            let (view, perm) = if self.crd {
                ([n, cc, bs, bs, h, w], [0, 1, 4, 2, 5, 3])
            } else {
                ([n, bs, bs, cc, h, w], [0, 3, 4, 1, 5, 2])
            };
            Ok((view, perm, vec![n, cc, h * bs, w * bs]))
        }
    }
}

impl Operator for SpaceDepth {
    fn name(&self) -> &'static str {
        if self.to_depth {
            "SpaceToDepth"
        } else {
            "DepthToSpace"
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        let (_, _, shape) = self.layout(x.shape)?;
        Ok(vec![Inferred::new(x.dtype, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (view, perm, _) = self.layout(&shape)?;
        let strides = contiguous_strides(&view);
        let dims = perm.iter().map(|&p| view[p]).collect();
        let src_strides = perm.iter().map(|&p| strides[p] as i64).collect();
        let copy = StridedCopy::to_dense(dims, src_strides, 0);
        let (src, dst) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        emit_strided_copy(cx, dtype, src, dst, &copy)
    }
}

pub fn import_space_depth(cx: &mut NodeImport) -> Result<Op, String> {
    let blocksize = cx.attrs.int("blocksize")?.ok_or("attribute \"blocksize\" is required")?;
    let blocksize = usize::try_from(blocksize)
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("attribute \"blocksize\" {blocksize} must be positive"))?;
    let crd = match cx.attrs.string_or("mode", "DCR")?.as_str() {
        "DCR" => false,
        "CRD" => true,
        other => return Err(format!("attribute \"mode\" is \"{other}\", expected DCR or CRD")),
    };
    Ok(Op::SpaceDepth(SpaceDepth { to_depth: cx.op_type == "SpaceToDepth", crd, blocksize }))
}

// ---------------------------------------------------------------------------
// CenterCropPad
// ---------------------------------------------------------------------------

/// CenterCropPad: crops or zero-pads each listed axis to the target length,
/// centred (the extra element of an odd difference goes to the end).
#[derive(Clone, Debug)]
pub struct CenterCropPad {
    pub axes: Option<Vec<i64>>,
}

impl CenterCropPad {
    fn params(&self, dtype: DType, shape: &[usize], target: &Tensor) -> Result<PadParams, String> {
        let rank = shape.len();
        max_rank(rank, "input 0")?;
        if !matches!(target.dtype, DType::I32 | DType::I64) {
            return Err(format!("input 1 (shape) must be i32 or i64, got {}", target.dtype));
        }
        let target = target.to_i64s();
        let axes: Vec<usize> = match &self.axes {
            None => (0..rank).collect(),
            Some(a) => a.iter().map(|&a| axis_attr(a, rank)).collect::<Result<_, _>>()?,
        };
        if target.len() != axes.len() {
            return Err(format!("input 1 (shape) has {} values for {} axes", target.len(), axes.len()));
        }
        let mut out = shape.to_vec();
        let mut begin = [0i64; MAX_RANK];
        for (&a, &t) in axes.iter().zip(&target) {
            let t = usize::try_from(t).map_err(|_| format!("input 1 (shape) value {t} is negative"))?;
            let dim = shape[a] as i64;
            begin[a] = if (t as i64) < dim { -((dim - t as i64) / 2) } else { (t as i64 - dim) / 2 };
            out[a] = t;
        }
        product(&out)?;
        Ok(PadParams {
            elem_bytes: dtype.size() as i64,
            mode: PAD_CONSTANT,
            rank: rank as i64,
            in_dims: dims_array(shape),
            out_dims: dims_array(&out),
            pads_begin: begin,
        })
    }
}

impl Operator for CenterCropPad {
    fn name(&self) -> &'static str {
        "CenterCropPad"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        let p = self.params(x.dtype, x.shape, cx.const_input(1)?)?;
        let shape = p.out_dims[..x.shape.len()].iter().map(|&d| d as usize).collect();
        Ok(vec![Inferred::new(x.dtype, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let target = cx.const_input(1).ok_or("input 1 (shape) must be a compile-time constant")?;
        let p = self.params(dtype, &shape, target)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        if cx.portable() {
            return pad_loops::pad(cx, &p, x, None, y);
        }
        let params = cx.params(&p)?;
        let zero = cx.iconst(0);
        cx.call_checked(kernels::onnxc_pad, (params, Ptr(x), Ptr(zero), Ptr(y)))
    }
}

pub fn import_center_crop_pad(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::CenterCropPad(CenterCropPad { axes: cx.attrs.ints("axes")? }))
}
