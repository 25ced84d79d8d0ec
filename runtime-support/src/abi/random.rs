//! The C entry points and parameter structs of [`crate::generic::random`].

use crate::generic::random::*;

/// [`RandomParams::distribution`]: uniform on `[a, b)`.
pub const RANDOM_UNIFORM: i64 = 0;

/// [`RandomParams::distribution`]: normal with mean `a`, standard deviation `b`.
pub const RANDOM_NORMAL: i64 = 1;

/// Parameters of [`onnxc_random`]: `count` elements of type `elem`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RandomParams {
    /// The stream key ([`stream_key`]), as its bits.
    pub key: i64,
    pub count: i64,
    pub elem: i64,
    /// [`RANDOM_UNIFORM`] or [`RANDOM_NORMAL`].
    pub distribution: i64,
    /// low and high, or mean and standard deviation.
    pub a: f64,
    pub b: f64,
}

/// RandomUniform, RandomNormal and their *Like forms. Uniform samples
/// that round up to `high` in the element type become the largest value
/// below it, so every sample is in `[low, high)` when `low < high`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_random(p: *const RandomParams, y: *mut u8) -> i32 {
    random(p, y)
}

/// Parameters of [`onnxc_bernoulli`]: `count` probabilities of float type
/// `p_elem` in, `count` elements of `elem_bytes` bytes out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BernoulliParams {
    pub key: i64,
    pub count: i64,
    pub p_elem: i64,
    pub elem_bytes: i64,
    /// The little-endian bytes of one `1` of the output type.
    pub one: i64,
}

/// Bernoulli: `y[i] = 1` with probability `probs[i]`, else 0.
#[no_mangle]
pub unsafe extern "C" fn onnxc_bernoulli(p: *const BernoulliParams, probs: *const u8, y: *mut u8) -> i32 {
    bernoulli(p, probs, y)
}

/// Parameters of [`onnxc_multinomial`]: `x` is `[batch, classes]` of float
/// type `x_elem`, `y` is `[batch, samples]` of `index_elem` (i32 or i64).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MultinomialParams {
    pub key: i64,
    pub batch: i64,
    pub classes: i64,
    pub samples: i64,
    pub x_elem: i64,
    pub index_elem: i64,
}

/// Multinomial: `samples` class indices per row, drawn with probabilities
/// `softmax(x[b, :])`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_multinomial(p: *const MultinomialParams, x: *const u8, y: *mut u8) -> i32 {
    multinomial(p, x, y)
}

/// Parameters of [`onnxc_dropout`]: `count` elements of float type `elem`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DropoutParams {
    pub key: i64,
    pub count: i64,
    pub elem: i64,
    /// The element type of the `ratio` input, when there is one.
    pub ratio_elem: i64,
    /// The ratio when there is no `ratio` input.
    pub ratio: f64,
}

/// Dropout with a run-time `training` flag (one bool): in training mode
/// with ratio `r`, `mask[i] = u[i] >= r` and `y = mask * x / (1 - r)`;
/// otherwise (or with `r = 0`) `y = x` and the mask is all true. `ratio`
/// (one element of `ratio_elem`) and `mask` (bools) may be null; a ratio
/// outside `[0, 1)` in training mode is `STATUS_INVALID_PARAMS`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_dropout(
    p: *const DropoutParams,
    x: *const u8,
    ratio: *const u8,
    training: *const u8,
    y: *mut u8,
    mask: *mut u8,
) -> i32 {
    dropout(p, x, ratio, training, y, mask)
}
