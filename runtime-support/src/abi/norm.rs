//! The C entry points and parameter structs of [`crate::generic::norm`] and
//! [`crate::generic::normalize`].

use crate::abi::MAX_RANK;
use crate::generic::norm::*;
use crate::generic::normalize::*;

/// Parameters of [`onnxc_batchnorm_f32`] and [`onnxc_batchnorm_f64`];
/// `spatial` is the product of the spatial dims (1 for `[N, C]` inputs).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BatchNormParams {
    pub batch: i64,
    pub channels: i64,
    pub spatial: i64,
    pub epsilon: f64,
    /// 1: normalise with the batch's statistics (training mode).
    pub training: i64,
    /// Weight of the old running statistics in training mode.
    pub momentum: f64,
}

/// Parameters of [`onnxc_lrn_f32`] and [`onnxc_lrn_f64`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LrnParams {
    pub batch: i64,
    pub channels: i64,
    pub spatial: i64,
    pub size: i64,
    pub alpha: f64,
    pub beta: f64,
    pub bias: f64,
}

/// `y = (x - mean) / sqrt(var + epsilon) * scale + bias`, per channel.
/// `y` may alias `x` exactly (in-place). In training mode `mean` and `var`
/// are the batch's own, and `running_mean`/`running_var` (nullable) receive
/// `input * momentum + batch * (1 - momentum)` of each.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // one pointer per tensor
pub unsafe extern "C" fn onnxc_batchnorm_f32(
    p: *const BatchNormParams,
    x: *const f32,
    scale: *const f32,
    bias: *const f32,
    mean: *const f32,
    var: *const f32,
    y: *mut f32,
    running_mean: *mut f32,
    running_var: *mut f32,
) -> i32 {
    batchnorm(p, x, [scale, bias, mean, var], y, [running_mean, running_var])
}

/// [`onnxc_batchnorm_f32`] for `f64`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // one pointer per tensor
pub unsafe extern "C" fn onnxc_batchnorm_f64(
    p: *const BatchNormParams,
    x: *const f64,
    scale: *const f64,
    bias: *const f64,
    mean: *const f64,
    var: *const f64,
    y: *mut f64,
    running_mean: *mut f64,
    running_var: *mut f64,
) -> i32 {
    batchnorm(p, x, [scale, bias, mean, var], y, [running_mean, running_var])
}

/// Local response normalisation across channels of an `[N, C, spatial]`
/// tensor: `y = x / (bias + alpha / size * sum(x^2 over window))^beta`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_lrn_f32(p: *const LrnParams, x: *const f32, y: *mut f32) -> i32 {
    lrn(p, x, y)
}

/// [`onnxc_lrn_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_lrn_f64(p: *const LrnParams, x: *const f64, y: *mut f64) -> i32 {
    lrn(p, x, y)
}

/// `y = (x - mean) / sqrt(var + epsilon)` (Instance/Layer/GroupNormalization).
pub const NORM_STANDARD: i64 = 0;

/// `y = (x - mean) / (sqrt(var) + epsilon)` (MeanVarianceNormalization).
pub const NORM_MVN: i64 = 1;

/// `y = x / sqrt(mean(x^2) + epsilon)` (RMSNormalization).
pub const NORM_RMS: i64 = 2;

/// `y = x / sum(|x|)`, 0 where the norm is 0 (LpNormalization p = 1).
pub const NORM_L1: i64 = 3;

/// `y = x / sqrt(sum(x^2))`, 0 where the norm is 0 (LpNormalization p = 2).
pub const NORM_L2: i64 = 4;

/// Parameters of [`onnxc_normalize`]. Strides are in elements; `x` and `y`
/// are contiguous over `dims`, the statistics (and the optional mean /
/// inverse-deviation outputs) contiguous over the kept dims.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NormParams {
    /// One of the `NORM_*` constants.
    pub mode: i64,
    pub rank: i64,
    pub dims: [i64; MAX_RANK],
    /// Stride into the statistics per dim; 0 marks a reduced dim.
    pub stat_strides: [i64; MAX_RANK],
    pub scale_strides: [i64; MAX_RANK],
    pub bias_strides: [i64; MAX_RANK],
    pub stat_count: i64,
    /// `ELEM_*` of `x` and `y`, of scale, of bias, of the statistics outputs.
    pub x_elem: i64,
    pub scale_elem: i64,
    pub bias_elem: i64,
    pub stat_elem: i64,
    pub epsilon: f64,
}

/// Normalisation over arbitrary axes with an optional broadcast affine
/// `y * scale + bias`; see [`NormParams`]. `scale`, `bias`, `mean_out` and
/// `inv_out` may be null; `scratch` holds [`normalize_scratch_bytes`] bytes
/// (8-byte aligned). `mean_out`/`inv_out` receive the mean (0 for the modes
/// without one) and the factor each element was multiplied by.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // one pointer per tensor
pub unsafe extern "C" fn onnxc_normalize(
    p: *const NormParams,
    x: *const u8,
    scale: *const u8,
    bias: *const u8,
    y: *mut u8,
    mean_out: *mut u8,
    inv_out: *mut u8,
    scratch: *mut f64,
) -> i32 {
    normalize(p, x, scale, bias, y, mean_out, inv_out, scratch)
}
