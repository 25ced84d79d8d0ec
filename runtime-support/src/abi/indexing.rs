//! The C entry points and parameter structs of [`crate::generic::indexing`].

use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS};
use crate::generic::indexing::*;

pub const SCATTER_NONE: i64 = 0;
pub const SCATTER_ADD: i64 = 1;
pub const SCATTER_MUL: i64 = 2;
pub const SCATTER_MAX: i64 = 3;
pub const SCATTER_MIN: i64 = 4;

/// Parameters of [`onnxc_gather_elements`] and [`onnxc_scatter_elements`].
/// `indices` (and, for scatter, `updates`) have `index_dims`, which match
/// `data_dims` except along `axis`, where any length is allowed; each index
/// picks a position along `axis` of `data` (negative counts from the end).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ElementsParams {
    /// ONNX dtype code; read only by scatter reductions.
    pub dtype: i64,
    pub elem_bytes: i64,
    /// 4 (`i32` indices) or 8 (`i64` indices).
    pub index_bytes: i64,
    /// `SCATTER_*`; scatter only.
    pub reduction: i64,
    pub rank: i64,
    pub axis: i64,
    pub data_dims: [i64; MAX_RANK],
    pub index_dims: [i64; MAX_RANK],
}

/// GatherElements: `out[i] = data[i with i[axis] = indices[i]]`; `out` has
/// `index_dims`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_gather_elements(
    p: *const ElementsParams,
    data: *const u8,
    indices: *const u8,
    out: *mut u8,
) -> i32 {
    gather_elements(p, data, indices, out)
}

/// ScatterElements, in place: `out` already holds `data`; each update
/// element is written (or reduced) into the position its index addresses.
#[no_mangle]
pub unsafe extern "C" fn onnxc_scatter_elements(
    p: *const ElementsParams,
    out: *mut u8,
    indices: *const u8,
    updates: *const u8,
) -> i32 {
    scatter_elements(p, out, indices, updates)
}

/// Parameters of [`onnxc_gather_nd`] and [`onnxc_scatter_nd`]. `data` is
/// `[batch, dims[0..k], slice]`; `indices` is `[batch, tuples, k]` (i64);
/// the gathered (or scattered) tensor is `[batch, tuples, slice]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NdParams {
    /// ONNX dtype code; read only by scatter reductions.
    pub dtype: i64,
    pub elem_bytes: i64,
    /// `SCATTER_*`; scatter only.
    pub reduction: i64,
    pub batch: i64,
    pub tuples: i64,
    pub k: i64,
    pub slice: i64,
    pub dims: [i64; MAX_RANK],
}

/// GatherND: `out[b, t, :] = data[b, indices[b, t, :], :]`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_gather_nd(
    p: *const NdParams,
    data: *const u8,
    indices: *const i64,
    out: *mut u8,
) -> i32 {
    gather_nd(p, data, indices, out)
}

/// ScatterND, in place: `out` already holds `data`; each update slice is
/// written (or reduced) into the slice its index tuple addresses.
#[no_mangle]
pub unsafe extern "C" fn onnxc_scatter_nd(
    p: *const NdParams,
    out: *mut u8,
    indices: *const i64,
    updates: *const u8,
) -> i32 {
    scatter_nd(p, out, indices, updates)
}

/// Parameters of [`onnxc_tensor_scatter`]: the cache is
/// `[batch, mid, max_seq, inner]`, the update `[batch, mid, seq, inner]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TensorScatterParams {
    pub elem_bytes: i64,
    /// 1: write positions wrap modulo `max_seq`; 0: they must fit.
    pub circular: i64,
    pub batch: i64,
    pub mid: i64,
    pub max_seq: i64,
    pub seq: i64,
    pub inner: i64,
}

/// TensorScatter, in place: `out` already holds the past cache; update row
/// `s` of batch `b` goes to row `write_indices[b] + s` (0 + s when
/// `write_indices` is null).
#[no_mangle]
pub unsafe extern "C" fn onnxc_tensor_scatter(
    p: *const TensorScatterParams,
    out: *mut u8,
    update: *const u8,
    write_indices: *const i64,
) -> i32 {
    tensor_scatter(p, out, update, write_indices)
}

/// A nonnegative count (OneHot's depth) read from a numeric scalar of ONNX
/// dtype `dtype` (floats truncate); `-STATUS_INVALID_PARAMS` when it is
/// negative or the dtype unknown.
///
/// # Safety
/// `p` holds one element of `dtype`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_read_count(dtype: i64, p: *const u8) -> i64 {
    match read_numeric(p, 0, dtype) {
        Some(n) if n >= 0 => n,
        _ => -(STATUS_INVALID_PARAMS as i64),
    }
}

/// Parameters of [`onnxc_one_hot`]: `indices` is `[outer, inner]` of ONNX
/// dtype `index_dtype`; the output is `[outer, depth, inner]` (the depth is
/// an argument: it may be known only at run time).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct OneHotParams {
    pub elem_bytes: i64,
    pub index_dtype: i64,
    pub outer: i64,
    pub inner: i64,
}

/// OneHot: `out[o, d, i] = values[1]` where `indices[o, i]` (negative counts
/// from the end) equals `d`, else `values[0]`. Indices outside
/// `[-depth, depth)` give an all-`values[0]` row, as the spec says.
#[no_mangle]
pub unsafe extern "C" fn onnxc_one_hot(
    p: *const OneHotParams,
    depth: i64,
    indices: *const u8,
    values: *const u8,
    out: *mut u8,
) -> i32 {
    one_hot(p, depth, indices, values, out)
}

/// Parameters of [`onnxc_trilu`]: `batch` matrices of `rows × cols`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TriluParams {
    pub elem_bytes: i64,
    pub batch: i64,
    pub rows: i64,
    pub cols: i64,
    /// 1: keep `j - i >= k`; 0: keep `j - i <= k`.
    pub upper: i64,
}

/// Trilu: copies the kept triangle of every matrix and zeroes the rest; `k`
/// points to one i64 diagonal offset, or is null for 0.
#[no_mangle]
pub unsafe extern "C" fn onnxc_trilu(p: *const TriluParams, x: *const u8, k: *const i64, y: *mut u8) -> i32 {
    trilu(p, x, k, y)
}

/// Parameters of [`onnxc_eye`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct EyeParams {
    pub elem_bytes: i64,
    pub rows: i64,
    pub cols: i64,
    pub k: i64,
    /// The little-endian bytes of one `1` of the output type.
    pub one: i64,
}

/// EyeLike: zeros with ones on the diagonal `j = i + k`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_eye(p: *const EyeParams, y: *mut u8) -> i32 {
    eye(p, y)
}

/// Parameters of [`onnxc_cumulative`]: `x` and `y` are `[outer, len, inner]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CumulativeParams {
    pub dtype: i64,
    pub elem_bytes: i64,
    /// 0: sum, 1: product.
    pub product: i64,
    pub exclusive: i64,
    pub reverse: i64,
    pub outer: i64,
    pub len: i64,
    pub inner: i64,
}

/// CumSum and CumProd along the middle axis.
#[no_mangle]
pub unsafe extern "C" fn onnxc_cumulative(p: *const CumulativeParams, x: *const u8, y: *mut u8) -> i32 {
    cumulative_kernel(p, x, y)
}

/// Parameters of [`onnxc_reverse_sequence`]; strides are in elements and
/// describe both `x` and `y` (same shape).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ReverseSequenceParams {
    pub elem_bytes: i64,
    pub time_len: i64,
    pub batch_len: i64,
    pub inner: i64,
    pub time_stride: i64,
    pub batch_stride: i64,
}

/// ReverseSequence: for batch entry `b`, the first `lens[b]` time steps are
/// reversed and the rest copied; `lens[b]` must be in `0..=time_len`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_reverse_sequence(
    p: *const ReverseSequenceParams,
    x: *const u8,
    lens: *const i64,
    y: *mut u8,
) -> i32 {
    reverse_sequence(p, x, lens, y)
}

/// Parameters of [`onnxc_topk`]: `x` is `[outer, len, inner]`; values and
/// indices are `[outer, k, inner]` (K is an argument: it may be known only
/// at run time).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TopKParams {
    pub dtype: i64,
    pub elem_bytes: i64,
    pub outer: i64,
    pub len: i64,
    pub inner: i64,
    pub largest: i64,
}

/// TopK along the middle axis, sorted best first with ties to the lower
/// index. `scratch` holds `len` i64s. A `k` outside `0..=len` is
/// `STATUS_INDEX_OUT_OF_RANGE`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_topk(
    p: *const TopKParams,
    k: i64,
    x: *const u8,
    values: *mut u8,
    indices: *mut i64,
    scratch: *mut i64,
) -> i32 {
    topk_kernel(p, k, x, values, indices, scratch)
}
