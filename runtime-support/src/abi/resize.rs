//! The C entry points and parameter structs of [`crate::generic::resize`].

use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS};
use crate::generic::resize::*;

pub const MODE_NEAREST: i64 = 0;
pub const MODE_LINEAR: i64 = 1;
pub const MODE_CUBIC: i64 = 2;
pub const COORD_HALF_PIXEL: i64 = 0;
pub const COORD_HALF_PIXEL_SYMMETRIC: i64 = 1;
pub const COORD_PYTORCH_HALF_PIXEL: i64 = 2;
pub const COORD_ALIGN_CORNERS: i64 = 3;
pub const COORD_ASYMMETRIC: i64 = 4;
pub const COORD_TF_CROP_AND_RESIZE: i64 = 5;
pub const COORD_TF_HALF_PIXEL_FOR_NN: i64 = 6;
pub const NEAREST_ROUND_PREFER_FLOOR: i64 = 0;
pub const NEAREST_ROUND_PREFER_CEIL: i64 = 1;
pub const NEAREST_FLOOR: i64 = 2;
pub const NEAREST_CEIL: i64 = 3;

/// Resize-10 and Upsample: floor when upsampling, ceil when downsampling.
pub const NEAREST_SIMPLE: i64 = 4;

/// Parameters of [`onnxc_resize_f32`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ResizeParams {
    pub rank: i64,
    pub in_dims: [i64; MAX_RANK],
    pub out_dims: [i64; MAX_RANK],
    /// The scale factor of each axis as the coordinate transformation uses it.
    pub scales: [f64; MAX_RANK],
    /// `tf_crop_and_resize` region of interest (normalised), per axis.
    pub roi_start: [f64; MAX_RANK],
    pub roi_end: [f64; MAX_RANK],
    /// 1 where the axis is left unchanged (one tap of weight 1).
    pub identity: [i64; MAX_RANK],
    pub mode: i64,
    pub coord_mode: i64,
    pub nearest_mode: i64,
    pub exclude_outside: i64,
    pub antialias: i64,
    pub cubic_a: f64,
    pub extrapolation_value: f64,
}

/// `keep_aspect_ratio_policy` values of [`ResizeSizing`].
pub const POLICY_STRETCH: i64 = 0;
pub const POLICY_NOT_LARGER: i64 = 1;
pub const POLICY_NOT_SMALLER: i64 = 2;

/// Which axes Resize's scales or sizes input covers and how sizes keep the
/// aspect ratio; with [`resize_apply_sizing`] it turns a template
/// [`ResizeParams`] (dims, modes, roi) into the full parameters. The
/// compiler runs it on constant scales/sizes, [`onnxc_resize_prepare`] on
/// run-time ones, so both give the same output size.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ResizeSizing {
    pub axes_len: i64,
    pub axes: [i64; MAX_RANK],
    pub policy: i64,
}

/// [`resize_apply_sizing`] at run time: `out` = `template` sized by the
/// `scales` (f32, nullable) or `sizes` (i64) input of `len` values.
///
/// # Safety
/// `template`, `sizing` and `out` are valid; the given input holds `len` values.
#[no_mangle]
pub unsafe extern "C" fn onnxc_resize_prepare(
    template: *const ResizeParams,
    sizing: *const ResizeSizing,
    scales: *const f32,
    sizes: *const i64,
    len: i64,
    out: *mut ResizeParams,
) -> i32 {
    resize_prepare(template, sizing, scales, sizes, len, out)
}

/// [`resize_scratch_bytes`] for generated code that sizes Resize at run time.
///
/// # Safety
/// `p` is valid.
#[no_mangle]
pub unsafe extern "C" fn onnxc_resize_scratch(p: *const ResizeParams) -> i64 {
    p.as_ref().map_or(-(STATUS_INVALID_PARAMS as i64), |p| resize_scratch_bytes(p).min(i64::MAX as usize) as i64)
}

/// Resizes the f32 tensor `x` (`in_dims`) into `y` (`out_dims`); `scratch`
/// holds [`resize_scratch_bytes`] bytes, 8-byte aligned.
#[no_mangle]
pub unsafe extern "C" fn onnxc_resize_f32(p: *const ResizeParams, x: *const f32, y: *mut f32, scratch: *mut u8) -> i32 {
    resize(p, x, y, scratch)
}

/// [`onnxc_resize_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_resize_f64(p: *const ResizeParams, x: *const f64, y: *mut f64, scratch: *mut u8) -> i32 {
    resize(p, x, y, scratch)
}

pub const PADDING_ZEROS: i64 = 0;
pub const PADDING_BORDER: i64 = 1;
pub const PADDING_REFLECTION: i64 = 2;

/// Parameters of [`onnxc_grid_sample_f32`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GridSampleParams {
    pub n: i64,
    pub c: i64,
    /// Number of spatial dims `k`.
    pub rank: i64,
    pub in_dims: [i64; MAX_RANK],
    pub out_dims: [i64; MAX_RANK],
    /// `MODE_NEAREST`, `MODE_LINEAR` or `MODE_CUBIC`.
    pub mode: i64,
    /// `PADDING_ZEROS`, `PADDING_BORDER` or `PADDING_REFLECTION`.
    pub padding: i64,
    pub align_corners: i64,
}

/// Samples `x` (`[n, c, in_dims..]`) at `grid` (`[n, out_dims.., rank]`) into
/// `y` (`[n, c, out_dims..]`).
#[no_mangle]
pub unsafe extern "C" fn onnxc_grid_sample_f32(
    p: *const GridSampleParams,
    x: *const f32,
    grid: *const f32,
    y: *mut f32,
) -> i32 {
    grid_sample(p, x, grid, y)
}

/// [`onnxc_grid_sample_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_grid_sample_f64(
    p: *const GridSampleParams,
    x: *const f64,
    grid: *const f64,
    y: *mut f64,
) -> i32 {
    grid_sample(p, x, grid, y)
}

/// Parameters of [`onnxc_affine_grid_f32`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AffineGridParams {
    pub n: i64,
    /// Spatial dims: 2 (`[H, W]`) or 3 (`[D, H, W]`).
    pub rank: i64,
    pub dims: [i64; 3],
    pub align_corners: i64,
}

/// `grid[b, pos.., j] = sum_i theta[b, j, i] * [x, y, (z), 1][i]`, with `x`
/// along the last spatial dim.
#[no_mangle]
pub unsafe extern "C" fn onnxc_affine_grid_f32(p: *const AffineGridParams, theta: *const f32, grid: *mut f32) -> i32 {
    affine_grid(p, theta, grid)
}

/// [`onnxc_affine_grid_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_affine_grid_f64(p: *const AffineGridParams, theta: *const f64, grid: *mut f64) -> i32 {
    affine_grid(p, theta, grid)
}
