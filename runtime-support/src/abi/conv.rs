//! The C entry points and parameter structs of [`crate::generic::conv`] and
//! [`crate::generic::conv_transpose`].

use crate::abi::MAX_RANK;
use crate::generic::conv::*;
use crate::generic::conv_transpose::*;
use crate::parallel::Parallel;

/// Parameters of [`onnxc_conv_f32`]: input `[batch, in_channels,
/// in_spatial...]`, weights `[out_channels, in_channels/group, kernel...]`,
/// output `[batch, out_channels, out_spatial...]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ConvParams {
    pub batch: i64,
    pub in_channels: i64,
    pub out_channels: i64,
    pub group: i64,
    /// 1..=6.
    pub spatial_rank: i64,
    pub in_spatial: [i64; MAX_RANK],
    pub out_spatial: [i64; MAX_RANK],
    pub kernel: [i64; MAX_RANK],
    pub strides: [i64; MAX_RANK],
    pub dilations: [i64; MAX_RANK],
    pub pads_begin: [i64; MAX_RANK],
    /// Conv only: an activation fused into the epilogue (`EPILOGUE_*`), with its
    /// parameters (LeakyRelu's alpha in `act_a`; Clip's bounds in `act_a`,
    /// `act_b`).
    pub activation: i64,
    pub act_a: f64,
    pub act_b: f64,
    /// Conv only: 1 when the kernel's `residual` operand (shaped like the
    /// output) is added to the result before the activation (a fused
    /// residual Add), else 0.
    pub residual: i64,
    /// Conv (f32) only: 1 when `w` holds the weights packed by
    /// [`onnxc_pack_conv_weights_f32`] (only where
    /// [`conv_takes_packed_weights`]), else 0.
    pub packed_weights: i64,
}

pub const EPILOGUE_NONE: i64 = 0;
pub const EPILOGUE_RELU: i64 = 1;
pub const EPILOGUE_LEAKY_RELU: i64 = 2;
pub const EPILOGUE_CLIP: i64 = 3;
pub const EPILOGUE_SIGMOID: i64 = 4;

/// `act_a` is alpha, `act_b` beta.
pub const EPILOGUE_HARD_SIGMOID: i64 = 5;
pub const EPILOGUE_HARD_SWISH: i64 = 6;
pub const EPILOGUE_TANH: i64 = 7;

/// SiLU, `v * sigmoid(v)`: a Sigmoid and the Mul of its input by it
/// (EfficientNet's and YOLO's activation), with their bits.
pub const EPILOGUE_SILU: i64 = 8;

/// Convolution; see [`ConvParams`]. `bias` may be null; `residual` is read
/// only when `p.residual` is 1 (then it must not be null); `scratch` must
/// hold [`conv_scratch_elems`] floats (it may be null when that is 0).
#[no_mangle]
pub unsafe extern "C" fn onnxc_conv_f32(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    residual: *const f32,
    y: *mut f32,
    scratch: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    conv_f32(p, x, w, bias, residual, y, scratch, parallel)
}

/// [`onnxc_conv_f32`] on its input taken through `max(x * scale[c] + shift[c], 0)`
/// for each input channel `c`: an inference BatchNormalization and Relu in
/// front of the convolution, applied as the input is packed rather than
/// in a pass of their own over it. `prologue` holds `scale` then `shift`,
/// `in_channels` floats each. Only for a pointwise convolution on packed
/// weights (`STATUS_INVALID_PARAMS` otherwise).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn onnxc_conv_prologue_f32(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    residual: *const f32,
    prologue: *const f32,
    y: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    conv_prologue_f32(p, x, w, bias, residual, prologue, y, parallel)
}

/// [`onnxc_conv_f32`] for `f64` (which never takes packed weights).
#[no_mangle]
pub unsafe extern "C" fn onnxc_conv_f64(
    p: *const ConvParams,
    x: *const f64,
    w: *const f64,
    bias: *const f64,
    residual: *const f64,
    y: *mut f64,
    scratch: *mut f64,
    parallel: *const Parallel,
) -> i32 {
    conv(p, x, w, bias, residual, y, scratch, parallel)
}

/// Packs Conv weights `[out_channels, in_channels/group, kernel...]` for
/// [`onnxc_conv_f32`] with `packed_weights` 1: group after group, each
/// group's `[out/group, in/group * taps]` matrix as gemm A panels
/// (`generic::gemm`'s `pack_a`). `dst` holds [`conv_packed_weights_elems`] floats. The
/// compiler calls this at compile time on constant weights.
#[no_mangle]
pub unsafe extern "C" fn onnxc_pack_conv_weights_f32(p: *const ConvParams, w: *const f32, dst: *mut f32) -> i32 {
    pack_conv_weights_f32(p, w, dst)
}

/// Transposed convolution: input `[batch, in_channels, in_spatial...]`,
/// weights `[in_channels, out_channels/group, kernel...]` (or, with
/// `packed_weights` 1, as [`onnxc_pack_conv_transpose_weights_f32`] packs
/// them), output `[batch, out_channels, out_spatial...]` (`out_spatial`
/// and `pads_begin` resolved by the caller; pads may be negative). `bias`
/// may be null; `scratch` holds [`conv_transpose_scratch_elems`] floats;
/// `parallel` (may be null) lends threads, with the same bits on any count.
#[no_mangle]
pub unsafe extern "C" fn onnxc_conv_transpose_f32(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    scratch: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    match p.as_ref().map(|p| p.packed_weights) {
        Some(1) => conv_transpose(p, x, Packed(w), bias, y, scratch, parallel),
        _ => conv_transpose(p, x, Unpacked(w), bias, y, scratch, parallel),
    }
}

/// [`onnxc_conv_transpose_f32`] for `f64` (weights in the ONNX layout).
#[no_mangle]
pub unsafe extern "C" fn onnxc_conv_transpose_f64(
    p: *const ConvParams,
    x: *const f64,
    w: *const f64,
    bias: *const f64,
    y: *mut f64,
    scratch: *mut f64,
    parallel: *const Parallel,
) -> i32 {
    conv_transpose(p, x, Unpacked(w), bias, y, scratch, parallel)
}

/// Packs ConvTranspose weights `[in_channels, out_channels/group,
/// kernel...]` for [`onnxc_conv_transpose_f32`] with `packed_weights` 1:
/// group after group, `W_g^T` (`[out/group * taps, in/group]`) as gemm A
/// panels. `dst` holds [`conv_transpose_packed_weights_elems`] floats. The
/// compiler calls this at compile time on constant weights.
#[no_mangle]
pub unsafe extern "C" fn onnxc_pack_conv_transpose_weights_f32(
    p: *const ConvParams,
    w: *const f32,
    dst: *mut f32,
) -> i32 {
    pack_conv_transpose_weights_f32(p, w, dst)
}

/// ONNX Col2Im: `col [batch, in_channels * prod(kernel), prod(in_spatial)]`
/// (the sliding-block grid is `in_spatial`) summed into `y [batch,
/// in_channels, out_spatial...]`. `out_channels` must equal `in_channels`
/// and `group` be 1.
#[no_mangle]
pub unsafe extern "C" fn onnxc_col2im_f32(p: *const ConvParams, col: *const f32, y: *mut f32) -> i32 {
    col2im_kernel(p, col, y)
}

/// [`onnxc_col2im_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_col2im_f64(p: *const ConvParams, col: *const f64, y: *mut f64) -> i32 {
    col2im_kernel(p, col, y)
}
