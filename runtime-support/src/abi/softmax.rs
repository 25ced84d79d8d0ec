//! The C entry points and parameter structs of [`crate::generic::softmax`].

use crate::generic::softmax::*;

pub const SOFTMAX: i64 = 0;
pub const LOG_SOFTMAX: i64 = 1;
pub const HARDMAX: i64 = 2;

/// Parameters of [`onnxc_softmax_f32`] and [`onnxc_softmax_f64`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SoftmaxParams {
    pub outer: i64,
    pub axis_len: i64,
    pub inner: i64,
    /// `SOFTMAX`, `LOG_SOFTMAX` or `HARDMAX`.
    pub kind: i64,
}

/// Softmax-family along the middle axis of `[outer, axis_len, inner]`.
/// Hardmax writes 1 at the first maximum and 0 elsewhere.
#[no_mangle]
pub unsafe extern "C" fn onnxc_softmax_f32(p: *const SoftmaxParams, x: *const f32, y: *mut f32) -> i32 {
    softmax_f32(p, x, y)
}

/// [`onnxc_softmax_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_softmax_f64(p: *const SoftmaxParams, x: *const f64, y: *mut f64) -> i32 {
    softmax(p, x, y)
}
