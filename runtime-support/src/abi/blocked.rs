//! The C entry points and parameter structs of [`crate::generic::blocked`].

use crate::abi::conv::ConvParams;
use crate::generic::blocked::*;
use crate::parallel::Parallel;

/// Packs `w` (`[M][C][KH][KW]`, ONNX order) into `packed`
/// (`[M/8][KH][KW][C/8][8 in][8 out]`; for a Winograd layer its transformed
/// weights, [`crate::generic::winograd`]).
///
/// # Safety
/// As the module contract; `packed` holds [`conv_blocked_weights_elems`] floats.
#[no_mangle]
pub unsafe extern "C" fn onnxc_pack_conv_weights_blocked_f32(
    p: *const ConvParams,
    w: *const f32,
    packed: *mut f32,
) -> i32 {
    pack_conv_weights_blocked_f32(p, w, packed)
}

/// `y = conv(x)` with `x`, `y` and `residual` blocked and the weights
/// packed by [`onnxc_pack_conv_weights_blocked_f32`]; the epilogue
/// (`bias`, `residual`, activation) is [`onnxc_conv_f32`]'s. `bias`
/// (`out_channels` floats) and `residual` may be null. Results are within
/// rounding of the NCHW convolution (the sums' order differs), and the same
/// for any thread count. `scratch` holds [`conv_blocked_scratch_elems`]
/// floats (it may be null when that is 0).
///
/// [`onnxc_conv_f32`]: super::conv::onnxc_conv_f32
///
/// # Safety
/// As the module contract.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn onnxc_conv_blocked_f32(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    residual: *const f32,
    y: *mut f32,
    scratch: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    conv_blocked_f32(p, x, w, bias, residual, y, scratch, parallel)
}

/// Reorders `x` (`batch` images of `channels` planes of `pixels`) into
/// the blocked layout `y`. `channels` is a multiple of [`BLOCK`].
///
/// # Safety
/// As the module contract.
#[no_mangle]
pub unsafe extern "C" fn onnxc_to_blocked_f32(
    x: *const f32,
    y: *mut f32,
    batch: i64,
    channels: i64,
    pixels: i64,
    parallel: *const Parallel,
) -> i32 {
    reorder(x, y, [batch, channels, pixels], true, parallel)
}

/// The inverse of [`onnxc_to_blocked_f32`].
///
/// # Safety
/// As the module contract.
#[no_mangle]
pub unsafe extern "C" fn onnxc_from_blocked_f32(
    x: *const f32,
    y: *mut f32,
    batch: i64,
    channels: i64,
    pixels: i64,
    parallel: *const Parallel,
) -> i32 {
    reorder(x, y, [batch, channels, pixels], false, parallel)
}
