//! The dense QLinearConv with constant weights: one kernel call
//! (`onnxc_qconv_packed`, see `runtime-support/src/generic/qconv_packed.rs`)
//! that convolves and requantizes, its weights flipped to the byte
//! kernels' unsigned side, and its per-channel weight sums, zero-point
//! corrections, bias and scales folded here at compile time, instead of
//! `onnxc_qconv`'s per-call weight sums and bias pass and a separate
//! `onnxc_requantize` pass over the i32 sums.
//!
//! Taken when the convolution is not the depthwise kernel's, has 8-bit
//! input, weights and output, and every operand but the input is constant
//! with the layouts `depthwise::constants_fit` names (zero points of the
//! input and output per tensor), and every combined scale `x_scale ·
//! w_scale[m] / y_scale` is finite. Its output is the general path's bit
//! for bit (the kernel's tests compare them).

use super::depthwise::{byte_type, constants_fit, pack_constants, scalar_zero, y_range, Constant};
use crate::ir::DType;
use onnxc_runtime::{pack_qconv, qconv_packed_bytes, ConvParams, QConvPackedParams};

/// The kernel's params when `conv`, with input `x` and output `y` types,
/// is a convolution it takes; `present(i)` says whether input `i` is
/// given at all.
pub(super) fn packed_params(
    conv: &ConvParams,
    x: DType,
    y: DType,
    constant: Constant,
    present: &dyn Fn(usize) -> bool,
) -> Option<QConvPackedParams> {
    let (x_signed, y_signed) = (byte_type(x)?, byte_type(y)?);
    constants_fit(conv.out_channels as usize, constant, present).then_some(())?;
    let scalar = |i: usize| constant(i).map_or(0.0, |s| s.get_f64(0) as f32);
    let w_scales = constant(4)?.to_f32s()?;
    let finite = w_scales.iter().all(|&w| (scalar(1) * w / scalar(6)).is_finite());
    finite.then_some(())?;
    let (y_min, y_max) = y_range(y_signed);
    Some(QConvPackedParams {
        conv: *conv,
        x_signed: x_signed as i64,
        x_zero: scalar_zero(constant(2), present(2), x)?,
        y_zero: scalar_zero(constant(7), present(7), y)?,
        y_min,
        y_max,
    })
}

/// The packed constants of the convolution `packed_params` accepted.
pub(super) fn pack(p: &QConvPackedParams, constant: Constant) -> Result<Vec<u8>, String> {
    let mut packed = vec![0u8; qconv_packed_bytes(p)];
    if !pack_constants(constant, |constants| pack_qconv(p, constants, &mut packed))? {
        return Err("the quantized convolution's constants do not match its shapes".into());
    }
    Ok(packed)
}
