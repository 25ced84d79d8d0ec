//! The C entry points and parameter structs of [`crate::generic::signal`].

use crate::generic::signal::*;

/// Parameters of [`onnxc_dft_f32`] / [`onnxc_dft_f64`]. The input is
/// `[outer, in_len, inner, in_complex ? 2 : 1]`, the output
/// `[outer, out_len, inner, out_complex ? 2 : 1]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DftParams {
    pub outer: i64,
    pub in_len: i64,
    pub inner: i64,
    /// 1 when the input's last dim is 2 (complex), 0 when it is 1 (real).
    pub in_complex: i64,
    /// The transform length `n`: the signal is truncated or zero-padded to it.
    pub n: i64,
    /// Output bins: `n`, or `n / 2 + 1` for a one-sided forward transform.
    pub out_len: i64,
    /// 1: inverse transform (`+i` exponent, scaled by `1 / n`).
    pub inverse: i64,
    /// With `inverse`: the input holds the `n / 2 + 1` one-sided bins of a
    /// Hermitian spectrum and the output is real (`out_len == n`, last dim 1).
    pub real_output: i64,
}

/// DFT along the middle axis of `[outer, in_len, inner, 1|2]` (see [`DftParams`]);
/// `scratch` holds `2 * n` doubles.
#[no_mangle]
pub unsafe extern "C" fn onnxc_dft_f32(p: *const DftParams, x: *const f32, y: *mut f32, scratch: *mut f64) -> i32 {
    dft(p, x, y, scratch)
}

/// [`onnxc_dft_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_dft_f64(p: *const DftParams, x: *const f64, y: *mut f64, scratch: *mut f64) -> i32 {
    dft(p, x, y, scratch)
}

/// Parameters of [`onnxc_stft_f32`]: the signal is `[batch, signal_len, 1|2]`,
/// the optional window `[frame_length]`, the output
/// `[batch, frames, bins, 2]` with `frames = 1 + (signal_len - frame_length) / frame_step`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct StftParams {
    pub batch: i64,
    pub signal_len: i64,
    pub in_complex: i64,
    pub frame_step: i64,
    /// Also the transform length.
    pub frame_length: i64,
    pub frames: i64,
    /// `frame_length`, or `frame_length / 2 + 1` when one-sided.
    pub bins: i64,
}

/// Short-time Fourier transform (see [`StftParams`]); `window` may be null
/// (rectangular); `scratch` holds `2 * frame_length` doubles.
#[no_mangle]
pub unsafe extern "C" fn onnxc_stft_f32(
    p: *const StftParams,
    x: *const f32,
    window: *const f32,
    y: *mut f32,
    scratch: *mut f64,
) -> i32 {
    stft(p, x, window, y, scratch)
}

/// [`onnxc_stft_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_stft_f64(
    p: *const StftParams,
    x: *const f64,
    window: *const f64,
    y: *mut f64,
    scratch: *mut f64,
) -> i32 {
    stft(p, x, window, y, scratch)
}
