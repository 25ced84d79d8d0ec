//! The C entry points and parameter structs of [`crate::generic::dynamic`].

use crate::abi::MAX_RANK;
use crate::generic::dynamic::*;

/// Parameters of [`onnxc_count_nonzero`] and [`onnxc_nonzero`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NonZeroParams {
    pub dtype: i64,
    pub rank: i64,
    pub dims: [i64; MAX_RANK],
}

/// How many elements of `x` are not zero.
///
/// # Safety
/// `p` is valid and `x` holds the tensor it describes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_count_nonzero(p: *const NonZeroParams, x: *const u8) -> i64 {
    count_nonzero(p, x)
}

/// The coordinates of the first `count` nonzero elements of `x`, as the
/// `[rank, count]` int64 tensor `y`.
///
/// # Safety
/// `p` is valid, `x` holds the tensor it describes, `y` has room for
/// `rank * count` i64s.
#[no_mangle]
pub unsafe extern "C" fn onnxc_nonzero(p: *const NonZeroParams, x: *const u8, y: *mut i64, count: i64) -> i32 {
    nonzero(p, x, y, count)
}

/// A tensor viewed as `[outer, len, inner]` around the axis an operator
/// works along (`len` = element count and `outer = inner = 1` without one).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SliceParams {
    pub dtype: i64,
    pub elem_bytes: i64,
    pub outer: i64,
    pub len: i64,
    pub inner: i64,
    /// Unique: sort the unique slices (else keep first-occurrence order).
    pub sorted: i64,
}

/// Copies the slices `j` of `x` whose `cond[j]` is true (for `j` below both
/// `len` and `cond_len`) to `y`, which has room for `count` slices.
///
/// # Safety
/// `p` is valid, `x` and `cond` hold what it and `cond_len` describe, `y`
/// has room for `outer * count * inner` elements.
#[no_mangle]
pub unsafe extern "C" fn onnxc_compress(
    p: *const SliceParams,
    x: *const u8,
    cond: *const u8,
    cond_len: i64,
    y: *mut u8,
    count: i64,
) -> i32 {
    compress(p, x, cond, cond_len, y, count)
}

/// Unique's analysis of `x`'s slices into `scratch` (`3 * len` i64s):
/// `[0, len)` is free space, `[len, 2len)` each slice's output position
/// (the inverse indices) and `[2len, 2len + count)` each output slice's
/// first occurrence. Returns the number of unique slices.
///
/// # Safety
/// `p` is valid, `x` holds the tensor it describes, `scratch` has room for
/// `3 * len` i64s.
#[no_mangle]
pub unsafe extern "C" fn onnxc_unique(p: *const SliceParams, x: *const u8, scratch: *mut i64) -> i64 {
    unique(p, x, scratch)
}

/// Writes Unique's outputs from the analysis [`onnxc_unique`] left in
/// `scratch`: `y` (`[outer, count, inner]`), and the optional (nullable)
/// `indices` and `counts` (`count` i64s) and `inverse` (`len` i64s).
///
/// # Safety
/// As for [`onnxc_unique`], with `count` its result; outputs sized as above.
#[no_mangle]
pub unsafe extern "C" fn onnxc_unique_write(
    p: *const SliceParams,
    x: *const u8,
    scratch: *const i64,
    count: i64,
    y: *mut u8,
    indices: *mut i64,
    inverse: *mut i64,
    counts: *mut i64,
) -> i32 {
    unique_write(p, x, scratch, count, y, indices, inverse, counts)
}

/// Parameters of [`onnxc_nms`]: boxes `[batches, boxes, 4]`, scores
/// `[batches, classes, boxes]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NmsParams {
    pub batches: i64,
    pub classes: i64,
    pub boxes: i64,
    /// 1: boxes are `[x_center, y_center, width, height]`; 0: two corners
    /// `[y1, x1, y2, x2]` in either order.
    pub center_point_box: i64,
}

/// Greedy non-maximum suppression per batch and class. Writes the selected
/// `(batch, class, box)` triples to `selected` (room for
/// `batches * classes * boxes` triples) and returns their number.
/// `max_out`, `iou` and `score_threshold` are the optional scalar inputs
/// (nullable); `scratch` holds `2 * boxes` i64s.
///
/// # Safety
/// Pointers hold what `p` describes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_nms(
    p: *const NmsParams,
    boxes: *const f32,
    scores: *const f32,
    max_out: *const i64,
    iou: *const f32,
    score_threshold: *const f32,
    selected: *mut i64,
    scratch: *mut i64,
) -> i64 {
    nms(p, boxes, scores, max_out, iou, score_threshold, selected, scratch)
}

/// Range's length from the scalars `start`, `limit`, `delta` of type
/// `dtype`; a zero or non-finite step is `-STATUS_INVALID_PARAMS`.
///
/// # Safety
/// The pointers hold one element each.
#[no_mangle]
pub unsafe extern "C" fn onnxc_range_count(dtype: i64, start: *const u8, limit: *const u8, delta: *const u8) -> i64 {
    range_count(dtype, start, limit, delta)
}

/// Writes `start + i * delta` for `i` in `0..count` to `y`.
///
/// # Safety
/// `start` and `delta` hold one element, `y` room for `count`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_range(dtype: i64, start: *const u8, delta: *const u8, y: *mut u8, count: i64) -> i32 {
    range(dtype, start, delta, y, count)
}

/// Parameters of [`onnxc_broadcast_dims`] and [`onnxc_broadcast`]: the
/// input's dims, and the length of the i64 argument (Expand's shape,
/// Tile's repeats).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BroadcastParams {
    pub elem_bytes: i64,
    pub rank: i64,
    pub dims: [i64; MAX_RANK],
    pub arg_len: i64,
    /// 1: Tile (multiply by the repeats); 0: Expand (broadcast to the shape).
    pub tile: i64,
}

/// Writes Expand's or Tile's output dims to `out_dims` (room for
/// `MAX_RANK`); an incompatible or negative argument is
/// `STATUS_INVALID_PARAMS`.
///
/// # Safety
/// `p` is valid and `arg` holds `arg_len` i64s.
#[no_mangle]
pub unsafe extern "C" fn onnxc_broadcast_dims(p: *const BroadcastParams, arg: *const i64, out_dims: *mut i64) -> i32 {
    broadcast_dims_kernel(p, arg, out_dims)
}

/// `y[i] = x[i mod input dims]` over the output [`onnxc_broadcast_dims`]
/// gives: a broadcast for Expand (input dims are 1 or the output's), a
/// repetition for Tile.
///
/// # Safety
/// As for [`onnxc_broadcast_dims`]; `x` holds the input and `y` has room
/// for the output.
#[no_mangle]
pub unsafe extern "C" fn onnxc_broadcast(p: *const BroadcastParams, arg: *const i64, x: *const u8, y: *mut u8) -> i32 {
    broadcast(p, arg, x, y)
}
