//! The C entry points and parameter structs of [`crate::generic::copy`].

use crate::abi::MAX_RANK;
use crate::generic::copy::*;
use crate::parallel::Parallel;

/// Parameters of [`onnxc_copy_strided`]. Strides are in elements and may be
/// zero (broadcast) or negative (reverse).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CopyParams {
    pub elem_bytes: i64,
    pub rank: i64,
    pub dims: [i64; MAX_RANK],
    pub src_strides: [i64; MAX_RANK],
    pub dst_strides: [i64; MAX_RANK],
}

/// Parameters of [`onnxc_gather`]: `data` is `[outer, axis_len, inner]`,
/// `indices` has `n_indices` entries, `out` is `[outer, n_indices, inner]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GatherParams {
    pub elem_bytes: i64,
    pub outer: i64,
    pub axis_len: i64,
    pub inner: i64,
    pub n_indices: i64,
    /// 4 (`i32` indices) or 8 (`i64` indices).
    pub index_bytes: i64,
}

pub const PAD_CONSTANT: i64 = 0;
pub const PAD_REFLECT: i64 = 1;
pub const PAD_EDGE: i64 = 2;
pub const PAD_WRAP: i64 = 3;

/// Parameters of [`onnxc_pad`]. `out_dims[d] = in_dims[d] + pads_begin[d] +
/// pads_end[d]`; negative pads crop. Cropping applies first, then the mode
/// pads relative to the cropped tensor.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PadParams {
    pub elem_bytes: i64,
    /// One of `PAD_CONSTANT`, `PAD_REFLECT`, `PAD_EDGE`, `PAD_WRAP`.
    pub mode: i64,
    pub rank: i64,
    pub in_dims: [i64; MAX_RANK],
    pub out_dims: [i64; MAX_RANK],
    pub pads_begin: [i64; MAX_RANK],
}

/// N-d strided copy; see [`CopyParams`]. Rank 0 copies one element. Source
/// and destination must not overlap. Large copies run through `parallel`
/// (see [`crate::parallel`]), split along their outermost dimension.
#[no_mangle]
pub unsafe extern "C" fn onnxc_copy_strided(
    p: *const CopyParams,
    src: *const u8,
    dst: *mut u8,
    parallel: *const Parallel,
) -> i32 {
    copy_strided(p, src, dst, parallel)
}

/// Gather along one axis; see [`GatherParams`]. Negative indices count from
/// the end. All indices are checked before anything is written, so on
/// `STATUS_INDEX_OUT_OF_RANGE` the output is untouched.
#[no_mangle]
pub unsafe extern "C" fn onnxc_gather(
    p: *const GatherParams,
    data: *const u8,
    indices: *const u8,
    out: *mut u8,
) -> i32 {
    gather(p, data, indices, out)
}

/// ONNX Pad (constant, reflect, edge, wrap); see [`PadParams`]. `value` is
/// null (pad with zero bytes) or points to one element.
#[no_mangle]
pub unsafe extern "C" fn onnxc_pad(p: *const PadParams, x: *const u8, value: *const u8, y: *mut u8) -> i32 {
    pad(p, x, value, y)
}
