//! The C entry points and parameter structs of [`crate::generic::roi`].

use crate::abi::MAX_RANK;
use crate::generic::roi::*;

/// Parameters of [`onnxc_max_unpool`]: `x` and `indices` have `count`
/// elements; an index addresses the row-major tensor of shape `dims`
/// (MaxPool's output geometry reversed), which is placed at the origin of
/// the (equal or larger) output of shape `out_dims`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct UnpoolParams {
    pub rank: i64,
    pub dims: [i64; MAX_RANK],
    pub out_dims: [i64; MAX_RANK],
    pub count: i64,
    /// Bytes per element.
    pub elem_size: i64,
}

/// MaxUnpool: zeroes `y`, then `y[unravel(indices[i])] = x[i]`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_max_unpool(
    p: *const UnpoolParams,
    x: *const u8,
    indices: *const i64,
    y: *mut u8,
) -> i32 {
    max_unpool(p, x, indices, y)
}

pub const ROI_AVG: i64 = 0;
pub const ROI_MAX: i64 = 1;

/// Parameters of [`onnxc_roi_align_f32`] and [`onnxc_max_roi_pool_f32`]:
/// `x [batch, channels, height, width]`, `y [num_rois, channels, out_h,
/// out_w]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RoiParams {
    pub batch: i64,
    pub channels: i64,
    pub height: i64,
    pub width: i64,
    pub num_rois: i64,
    pub out_h: i64,
    pub out_w: i64,
    /// RoiAlign: samples per bin per dim; 0 = adaptive `ceil(roi / out)`.
    pub sampling_ratio: i64,
    /// `ROI_AVG` or `ROI_MAX` (RoiAlign).
    pub mode: i64,
    /// RoiAlign: nonzero for `half_pixel` (shift by -0.5, no 1x1 clamp).
    pub half_pixel: i64,
    pub spatial_scale: f64,
}

/// RoiAlign (ONNX, opsets 10 and 16): `rois [num_rois, 4]` as `(x1, y1, x2,
/// y2)`, `batch_indices [num_rois]`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_roi_align_f32(
    p: *const RoiParams,
    x: *const f32,
    rois: *const f32,
    batch_indices: *const i64,
    y: *mut f32,
) -> i32 {
    roi_align_f32(p, x, rois, batch_indices, y)
}

/// MaxRoiPool (opset 1): `rois [num_rois, 5]` as `(batch_index, x1, y1, x2,
/// y2)`; the roi is rounded to whole pixels and split into `out_h x out_w`
/// bins (floor/ceil edges, clipped to the image); an empty bin gives 0.
#[no_mangle]
pub unsafe extern "C" fn onnxc_max_roi_pool_f32(
    p: *const RoiParams,
    x: *const f32,
    rois: *const f32,
    y: *mut f32,
) -> i32 {
    max_roi_pool_f32(p, x, rois, y)
}
