//! Reading by index: Gather, GatherElements, GatherND, OneHot and TopK.
//! (Writing by index and the other indexing operators are in `scatter.rs`.)
//!
//! Type constraints (ONNX):
//! - Gather (1, 11, 13), GatherElements (11, 13), GatherND (11, 12, 13):
//!   `data` any element type (moved as `elem_bytes`-sized elements);
//!   Gather/GatherElements indices i32 or i64, GatherND indices i64. Every
//!   version accepts negative indices here (older ones merely did not
//!   document them); GatherND 11 has no `batch_dims` (default 0 = same).
//! - OneHot (9, 11): indices and depth any numeric type (floats truncate),
//!   values any type; a run-time `depth` makes the output data-dependent
//!   along the new axis. Indices outside `[-depth, depth)` give an all-off
//!   row.
//! - TopK (1, 10, 11, 24): numeric data; K is attribute `k` before opset 10
//!   (the importer turns it into constant input 1) and an input after — a
//!   run-time K makes the outputs data-dependent along the axis;
//!   `largest`/`sorted` from 11 (results are always sorted, ties go to the
//!   lower index).
//!
//! Every index is checked at run time in the kernels
//! (`runtime-support/src/generic/indexing.rs`, `copy.rs`), or in portable
//! mode by the loop nests of [`crate::codegen::gather_loops`]; a bad one ends the model with
//! `INDEX_OUT_OF_RANGE` tagged with this node.

use super::{InferCx, Inferred, InputInfo, Op, Operator};
use crate::codegen::kernels::{self, Ptr, I64};
use crate::codegen::{gather_loops, types, InstBuilder, IntCC, Lower, MemFlagsData};
use crate::import::NodeImport;
use crate::ir::dim_expr::DimExpr;
use crate::ir::shape::{dims_product, element_count, normalize_axis};
use crate::ir::{DType, Dim, Tensor};
use onnxc_runtime::{ElementsParams, GatherParams, NdParams, OneHotParams, TopKParams, MAX_RANK};

// ---------------------------------------------------------------------------
// Helpers shared with scatter.rs
// ---------------------------------------------------------------------------

/// Bytes per index of an i32/i64 index input (input `i`, for messages).
pub(crate) fn index_bytes(dtype: DType, i: usize) -> Result<i64, String> {
    match dtype {
        DType::I32 => Ok(4),
        DType::I64 => Ok(8),
        other => Err(format!("input {i} (indices) must be i32 or i64, got {other}")),
    }
}

/// Requires an i64 index input.
pub(crate) fn require_i64(dtype: DType, what: &str) -> Result<(), String> {
    if dtype != DType::I64 {
        return Err(format!("{what} must be i64, got {dtype}"));
    }
    Ok(())
}

/// Element count of `dims` as i64.
pub(crate) fn product(dims: &[usize]) -> Result<i64, String> {
    element_count(dims).and_then(|n| i64::try_from(n).ok()).ok_or_else(|| "element count overflows".to_string())
}

pub(crate) fn axis_attr(axis: i64, rank: usize) -> Result<usize, String> {
    normalize_axis(axis, rank)
        .ok_or_else(|| format!("attribute \"axis\" {axis} is out of range for an input of rank {rank}"))
}

pub(crate) fn max_rank(rank: usize, what: &str) -> Result<(), String> {
    if rank > MAX_RANK {
        return Err(format!("{what} has rank {rank}; at most {MAX_RANK} is supported"));
    }
    Ok(())
}

/// `dims` in the first `dims.len()` slots of a kernel dims array.
pub(crate) fn dims_array(dims: &[usize]) -> [i64; MAX_RANK] {
    let mut out = [0i64; MAX_RANK];
    for (o, &d) in out.iter_mut().zip(dims) {
        *o = d as i64;
    }
    out
}

/// `[outer, len, inner]` around `axis`.
pub(crate) fn split_axis(shape: &[usize], axis: usize) -> Result<(i64, i64, i64), String> {
    Ok((product(&shape[..axis])?, shape[axis] as i64, product(&shape[axis + 1..])?))
}

/// A 0/1 attribute.
pub(crate) fn flag(cx: &NodeImport, name: &str, default: bool) -> Result<bool, String> {
    match cx.attrs.int_or(name, default as i64)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("attribute \"{name}\" is {v}, expected 0 or 1")),
    }
}

/// The single value of a constant scalar (or 1-element) input.
pub(crate) fn scalar_i64(t: &Tensor, what: &str) -> Result<i64, String> {
    if t.len() != 1 {
        return Err(format!("{what} must hold exactly one value, got {}", t.len()));
    }
    Ok(t.get_i64(0))
}

// ---------------------------------------------------------------------------
// Gather
// ---------------------------------------------------------------------------

/// Gather: picks slices of `data` along `axis` at the positions in `indices`
/// (`onnxc_gather`, which checks every index against `[-len, len)`).
/// ai.onnx.ml's ArrayFeatureExtractor is the same walk along the last axis
/// with the indices read flat, shaped `data[..-1] + [n]` (`[1, n]` for 1-D
/// data, as ONNX Runtime and the reference do).
#[derive(Clone, Debug)]
pub struct Gather {
    pub axis: i64,
    pub feature_extractor: bool,
}

impl Gather {
    fn axis(&self, rank: usize) -> Result<usize, String> {
        if self.feature_extractor {
            rank.checked_sub(1).ok_or_else(|| "input 0 is a scalar; features need at least one dim".to_string())
        } else {
            axis_attr(self.axis, rank)
        }
    }
}

/// `elements[indices]` for a 1-D input of symbolic elements (a shape) and
/// constant indices, negative ones counting from the end.
fn gather_elements(cx: &InferCx, elements: &[DimExpr]) -> Result<Vec<DimExpr>, String> {
    let len = elements.len() as i64;
    let indices = cx.const_input(1)?;
    (0..indices.len())
        .map(|k| {
            let i = indices.get_i64(k);
            let at = if i < 0 { i.saturating_add(len) } else { i };
            usize::try_from(at)
                .ok()
                .and_then(|at| elements.get(at).cloned())
                .ok_or_else(|| format!("index {i} is out of range for {len} elements"))
        })
        .collect()
}

impl Operator for Gather {
    fn name(&self) -> &'static str {
        if self.feature_extractor {
            "ArrayFeatureExtractor"
        } else {
            "Gather"
        }
    }

    /// Symbolic elements (of a shape) gather at constant indices too.
    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let data = cx.input(0)?;
        index_bytes(cx.input(1)?.dtype, 1)?;
        let (dims, index_dims) = (cx.dims(0)?, cx.dims(1)?);
        let overflow = || "element count overflows".to_string();
        let axis = self.axis(dims.len())?;
        let mut shape = dims[..axis].to_vec();
        if !self.feature_extractor {
            shape.extend_from_slice(&index_dims);
            shape.extend_from_slice(&dims[axis + 1..]);
        } else {
            if axis == 0 {
                shape.push(DimExpr::constant(1));
            }
            shape.push(dims_product(&index_dims).ok_or_else(overflow)?);
        }
        dims_product(&shape).ok_or_else(overflow)?;
        let elements = cx.symbolic_elements(0).map(|e| gather_elements(cx, &e)).transpose()?;
        Ok(vec![Inferred::of_dims(data.dtype, shape)?.with_elements(elements)])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn fails_on_constants(&self, cx: &InferCx) -> Result<(), String> {
        let data = cx.input(0)?;
        let len = data.shape.get(self.axis(data.shape.len())?).ok_or("the axis is past input 0's rank")?;
        indices_in_range(cx.input(1)?, *len)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (idx_type, idx_shape) = cx.input_type(1)?;
        let axis = self.axis(shape.len())?;
        let (outer, axis_len, inner) = split_axis(&shape, axis)?;
        let p = GatherParams {
            elem_bytes: dtype.size() as i64,
            outer,
            axis_len,
            inner,
            n_indices: product(&idx_shape)?,
            index_bytes: index_bytes(idx_type, 1)?,
        };
        let data = cx.input_ptr(0)?;
        let indices = cx.input_ptr(1)?;
        let out = cx.output_ptr(0)?;
        if cx.portable() {
            return gather_loops::gather(cx, &p, data, indices, out);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_gather, (params, Ptr(data), Ptr(indices), Ptr(out)))
    }
}

/// Every element of a constant `indices` input in `[-len, len)`, the range
/// the gather kernels check at run time.
fn indices_in_range(indices: &InputInfo, len: usize) -> Result<(), String> {
    let Some(t) = indices.value else { return Ok(()) };
    let len = len as i64;
    match (0..t.len()).map(|i| (i, t.get_i64(i))).find(|&(_, k)| k < -len || k >= len) {
        Some((i, k)) => Err(format!("constant index {k} (element {i} of input 1) is out of range for a dim of {len}")),
        None => Ok(()),
    }
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Gather(Gather { axis: cx.attrs.int_or("axis", 0)?, feature_extractor: false }))
}

pub fn import_array_feature_extractor(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Gather(Gather { axis: -1, feature_extractor: true }))
}

// ---------------------------------------------------------------------------
// GatherElements (and the shape rules ScatterElements shares)
// ---------------------------------------------------------------------------

/// GatherElements: `out[i] = data[i with i[axis] = indices[i]]`.
#[derive(Clone, Debug)]
pub struct GatherElements {
    pub axis: i64,
}

/// Checks `indices` against `data` for GatherElements/ScatterElements:
/// same rank, and no longer than `data` except along `axis`. Returns the
/// kernel params (reduction and dtype left for the caller).
pub(crate) fn elements_params(
    data: (DType, &[usize]),
    indices: (DType, &[usize]),
    axis: i64,
) -> Result<ElementsParams, String> {
    let (dtype, dshape) = data;
    let (itype, ishape) = indices;
    let rank = dshape.len();
    let axis = axis_attr(axis, rank)?;
    if ishape.len() != rank {
        return Err(format!("input 1 (indices) has rank {}, expected the rank of data ({rank})", ishape.len()));
    }
    max_rank(rank, "data")?;
    if let Some(d) = (0..rank).find(|&d| d != axis && ishape[d] > dshape[d]) {
        return Err(format!(
            "input 1 (indices) has dim {d} of size {}, larger than data's {} (only the axis may differ)",
            ishape[d], dshape[d]
        ));
    }
    if ishape.iter().all(|&n| n > 0) && dshape[axis] == 0 {
        return Err("data's axis has size 0, so no index can be valid".into());
    }
    product(ishape)?;
    Ok(ElementsParams {
        dtype: dtype.onnx_code() as i64,
        elem_bytes: dtype.size() as i64,
        index_bytes: index_bytes(itype, 1)?,
        reduction: 0,
        rank: rank as i64,
        axis: axis as i64,
        data_dims: dims_array(dshape),
        index_dims: dims_array(ishape),
    })
}

impl Operator for GatherElements {
    fn name(&self) -> &'static str {
        "GatherElements"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (data, indices) = (cx.input(0)?, cx.input(1)?);
        elements_params((data.dtype, data.shape), (indices.dtype, indices.shape), self.axis)?;
        Ok(vec![Inferred::new(data.dtype, indices.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (itype, ishape) = cx.input_type(1)?;
        let p = elements_params((dtype, &shape), (itype, &ishape), self.axis)?;
        let (data, indices, out) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?);
        if cx.portable() {
            return gather_loops::gather_elements(cx, &p, data, indices, out);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_gather_elements, (params, Ptr(data), Ptr(indices), Ptr(out)))
    }
}

pub fn import_gather_elements(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::GatherElements(GatherElements { axis: cx.attrs.int_or("axis", 0)? }))
}

// ---------------------------------------------------------------------------
// GatherND (and the shape rules ScatterND shares)
// ---------------------------------------------------------------------------

/// GatherND: `out[b, t, :] = data[b, indices[b, t, :], :]` over
/// `batch_dims` leading batch dims.
#[derive(Clone, Debug)]
pub struct GatherNd {
    pub batch_dims: i64,
}

/// Kernel params and result shape `indices.shape[..-1] ++ data.shape[b+k..]`
/// for GatherND/ScatterND.
pub(crate) fn nd_params(
    dtype: DType,
    dshape: &[usize],
    itype: DType,
    ishape: &[usize],
    batch_dims: i64,
) -> Result<(NdParams, Vec<usize>), String> {
    require_i64(itype, "input 1 (indices)")?;
    let (r, q) = (dshape.len(), ishape.len());
    let b = usize::try_from(batch_dims).map_err(|_| format!("attribute \"batch_dims\" {batch_dims} is negative"))?;
    if q == 0 || r == 0 {
        return Err("data and indices must have rank at least 1".into());
    }
    if b >= q.min(r) {
        return Err(format!(
            "attribute \"batch_dims\" {b} must be less than the ranks of data ({r}) and indices ({q})"
        ));
    }
    if dshape[..b] != ishape[..b] {
        return Err(format!("the first {b} dims of data {dshape:?} and indices {ishape:?} must match"));
    }
    let k = ishape[q - 1];
    if k < 1 || k > r - b {
        return Err(format!("the last dim of indices ({k}) must be in 1..={}", r - b));
    }
    max_rank(k, "an index tuple")?;
    let mut out = ishape[..q - 1].to_vec();
    out.extend_from_slice(&dshape[b + k..]);
    product(&out)?;
    let p = NdParams {
        dtype: dtype.onnx_code() as i64,
        elem_bytes: dtype.size() as i64,
        reduction: 0,
        batch: product(&dshape[..b])?,
        tuples: product(&ishape[b..q - 1])?,
        k: k as i64,
        slice: product(&dshape[b + k..])?,
        dims: dims_array(&dshape[b..b + k]),
    };
    Ok((p, out))
}

impl Operator for GatherNd {
    fn name(&self) -> &'static str {
        "GatherND"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (data, indices) = (cx.input(0)?, cx.input(1)?);
        let (_, shape) = nd_params(data.dtype, data.shape, indices.dtype, indices.shape, self.batch_dims)?;
        Ok(vec![Inferred::new(data.dtype, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (itype, ishape) = cx.input_type(1)?;
        let (p, _) = nd_params(dtype, &shape, itype, &ishape, self.batch_dims)?;
        let (data, indices, out) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?);
        if cx.portable() {
            return crate::codegen::scatter_loops::gather_nd(cx, &p, [data, indices, out]);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_gather_nd, (params, Ptr(data), Ptr(indices), Ptr(out)))
    }
}

pub fn import_gather_nd(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::GatherNd(GatherNd { batch_dims: cx.attrs.int_or("batch_dims", 0)? }))
}

// ---------------------------------------------------------------------------
// OneHot
// ---------------------------------------------------------------------------

/// OneHot: inserts a `depth`-long axis at `axis` holding `values[1]` at the
/// index and `values[0]` elsewhere.
#[derive(Clone, Debug)]
pub struct OneHot {
    pub axis: i64,
}

impl OneHot {
    /// The output axis for indices of rank `index_rank`.
    fn out_axis(&self, index_rank: usize) -> Result<usize, String> {
        normalize_axis(self.axis, index_rank + 1).ok_or_else(|| {
            format!("attribute \"axis\" {} is out of range for an output of rank {}", self.axis, index_rank + 1)
        })
    }

    fn const_depth(depth: &Tensor) -> Result<usize, String> {
        let depth = scalar_i64(depth, "input 1 (depth)")?;
        usize::try_from(depth).map_err(|_| format!("input 1 (depth) {depth} is negative"))
    }
}

impl Operator for OneHot {
    fn name(&self) -> &'static str {
        "OneHot"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let indices = cx.input(0)?;
        if indices.dtype == DType::Bool {
            return Err("input 0 (indices) must be numeric, got bool".into());
        }
        let axis = self.out_axis(indices.shape.len())?;
        let values = cx.input(2)?;
        if element_count(values.shape) != Some(2) {
            return Err(format!("input 2 (values) must hold 2 elements, has shape {:?}", values.shape));
        }
        let depth = cx.input(1)?;
        if depth.dtype == DType::Bool || element_count(depth.shape) != Some(1) {
            return Err(format!("input 1 (depth) must be one number, got {}{:?}", depth.dtype, depth.shape));
        }
        let Some(depth) = depth.value else {
            // A run-time depth: the output is data-dependent along the axis.
            let mut dims: Vec<Dim> = indices.shape.iter().map(|&d| Dim::Known(d)).collect();
            dims.insert(axis, Dim::Dynamic(None));
            return Ok(vec![Inferred::data_dependent(values.dtype, dims)]);
        };
        let mut shape = indices.shape.to_vec();
        shape.insert(axis, Self::const_depth(depth)?);
        product(&shape)?;
        Ok(vec![Inferred::new(values.dtype, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (itype, ishape) = cx.input_type(0)?;
        let (vtype, _) = cx.input_type(2)?;
        let axis = self.out_axis(ishape.len())?;
        let p = OneHotParams {
            elem_bytes: vtype.size() as i64,
            index_dtype: itype.onnx_code() as i64,
            outer: product(&ishape[..axis])?,
            inner: product(&ishape[axis..])?,
        };
        let (depth, out) = match cx.const_input(1) {
            Some(depth) => {
                let depth = Self::const_depth(depth)? as i64;
                (cx.iconst(depth), cx.output_ptr(0)?)
            }
            None => {
                let (dtype, _) = cx.input_type(1)?;
                let depth_ptr = cx.input_ptr(1)?;
                let depth = if cx.portable() {
                    gather_loops::read_count(cx, dtype, depth_ptr)?
                } else {
                    let code = cx.iconst(dtype.onnx_code() as i64);
                    cx.call_count(kernels::onnxc_read_count, (I64(code), Ptr(depth_ptr)))?
                };
                let mut dims: Vec<_> = ishape.iter().map(|&d| cx.iconst(d as i64)).collect();
                dims.insert(axis, depth);
                (depth, cx.alloc_output(0, &dims)?)
            }
        };
        let (indices, values) = (cx.input_ptr(0)?, cx.input_ptr(2)?);
        if cx.portable() {
            return gather_loops::one_hot(cx, &p, itype, depth, [indices, values, out]);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_one_hot, (params, I64(depth), Ptr(indices), Ptr(values), Ptr(out)))
    }
}

pub fn import_one_hot(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::OneHot(OneHot { axis: cx.attrs.int_or("axis", -1)? }))
}

// ---------------------------------------------------------------------------
// TopK
// ---------------------------------------------------------------------------

/// TopK: the `K` largest (or smallest) entries along `axis`, best first,
/// and their indices.
#[derive(Clone, Debug)]
pub struct TopK {
    pub axis: i64,
    pub largest: bool,
}

impl TopK {
    fn params(&self, dtype: DType, shape: &[usize]) -> Result<TopKParams, String> {
        if dtype == DType::Bool {
            return Err("input 0 (X) must be numeric, got bool".into());
        }
        let (outer, len, inner) = split_axis(shape, axis_attr(self.axis, shape.len())?)?;
        Ok(TopKParams {
            dtype: dtype.onnx_code() as i64,
            elem_bytes: dtype.size() as i64,
            outer,
            len,
            inner,
            largest: self.largest as i64,
        })
    }

    /// K when it is a compile-time constant, checked against the axis length.
    fn const_k(&self, k: &Tensor, len: i64) -> Result<i64, String> {
        let k = scalar_i64(k, "input 1 (K)")?;
        if k < 0 || k > len {
            return Err(format!("input 1 (K) is {k}, outside 0..={len} (the axis length)"));
        }
        Ok(k)
    }
}

impl Operator for TopK {
    fn name(&self) -> &'static str {
        "TopK"
    }

    /// With K known only at run time, the outputs are data-dependent along
    /// the axis (at most its length).
    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        let p = self.params(x.dtype, x.shape)?;
        let at = axis_attr(self.axis, x.shape.len())?;
        let k_input = cx.input(1)?;
        if k_input.dtype != DType::I64 || product(k_input.shape)? != 1 {
            return Err(format!("input 1 (K) must be one i64 value, got {}{:?}", k_input.dtype, k_input.shape));
        }
        match k_input.value {
            Some(k) => {
                let mut shape = x.shape.to_vec();
                shape[at] = self.const_k(k, p.len)? as usize;
                Ok(vec![Inferred::new(x.dtype, shape.clone()), Inferred::new(DType::I64, shape)])
            }
            None => {
                let mut dims: Vec<Dim> = x.shape.iter().map(|&d| Dim::Known(d)).collect();
                dims[at] = Dim::Dynamic(Some(x.shape[at]));
                Ok(vec![Inferred::data_dependent(x.dtype, dims.clone()), Inferred::data_dependent(DType::I64, dims)])
            }
        }
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        cx.opt_input(0).and_then(|x| Some(x.shape.get(axis_attr(self.axis, x.shape.len()).ok()?)? * 8)).unwrap_or(0)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let p = self.params(dtype, &shape)?;
        let scratch = if p.len > 0 { cx.scratch_ptr()? } else { cx.iconst(0) };
        let x = cx.input_ptr(0)?;
        let (k, values, indices) = match cx.const_input(1) {
            Some(k) => {
                let k = self.const_k(k, p.len)?;
                (cx.iconst(k), cx.output_ptr(0)?, cx.output_ptr(1)?)
            }
            None => {
                let k_ptr = cx.input_ptr(1)?;
                let k = cx.ins().load(types::I64, MemFlagsData::trusted(), k_ptr, 0);
                let too_big = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, k, p.len);
                cx.fail_if(too_big, crate::codegen::status::INDEX_OUT_OF_RANGE);
                let at = axis_attr(self.axis, shape.len())?;
                let dims: Vec<_> =
                    shape.iter().enumerate().map(|(i, &d)| if i == at { k } else { cx.iconst(d as i64) }).collect();
                (k, cx.alloc_output(0, &dims)?, cx.alloc_output(1, &dims)?)
            }
        };
        if cx.portable() {
            return gather_loops::topk(cx, &p, dtype, k, [x, values, indices, scratch]);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_topk, (params, I64(k), Ptr(x), Ptr(values), Ptr(indices), Ptr(scratch)))
    }
}

pub fn import_topk(cx: &mut NodeImport) -> Result<Op, String> {
    if cx.opset < 10 {
        let k = cx.attrs.int("k")?.ok_or("attribute \"k\" is required before opset 10")?;
        let id = cx.add_const("k", Tensor::from_i64s(vec![1], &[k]));
        cx.inputs.truncate(1);
        cx.inputs.push(Some(id));
    }
    Ok(Op::TopK(TopK { axis: cx.attrs.int_or("axis", -1)?, largest: flag(cx, "largest", true)? }))
}
