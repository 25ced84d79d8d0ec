//! The depthwise QLinearConv: one kernel call (`onnxc_qdepthwise`, see
//! `runtime-support/src/generic/qdepthwise.rs`) that convolves and
//! requantizes, its weights, bias, zero points and scales packed here at
//! compile time, instead of the im2col product (whose one-row weight
//! matrices leave the byte kernels idle) and a separate requantize pass.
//!
//! Taken when the convolution is 2-D with one input and one output channel
//! per group, equal strides, at most `MAX_TAPS` taps, 8-bit input, weights
//! and output, and every operand but the input constant: scales f32 (per
//! tensor, the weights' per tensor or per channel), zero points per tensor
//! (the weights' per tensor or per channel). Its output is the general
//! path's bit for bit (the kernel's tests compare them).

use super::{IntegerProduct, QLINEAR};
use crate::ir::{DType, Tensor};
use onnxc_runtime::{pack_qdepthwise, qdepthwise_packed_bytes, ConvParams, QConvConstants, QDepthwiseParams, MAX_TAPS};

/// The constant inputs of a QLinearConv, by slot.
pub(super) type Constant<'a> = &'a dyn Fn(usize) -> Option<&'a Tensor>;

pub(super) fn byte_type(dtype: DType) -> Option<bool> {
    match dtype {
        DType::U8 => Some(false),
        DType::I8 => Some(true),
        _ => None,
    }
}

/// A per-tensor constant zero point of 8-bit `dtype` (absent: 0).
pub(super) fn scalar_zero(zero: Option<&Tensor>, present: bool, dtype: DType) -> Option<i64> {
    match zero {
        Some(z) if z.dtype == dtype && z.len() == 1 => Some(z.to_i64s()[0]),
        None if !present => Some(0),
        _ => None,
    }
}

fn scalar_scale(scale: Option<&Tensor>) -> Option<f32> {
    scale.filter(|s| s.dtype == DType::F32 && s.len() == 1).map(|s| s.get_f64(0) as f32)
}

/// The kernel's params when `conv` (of the QLinearConv `product`, with
/// input `x` and output types) is a depthwise convolution it takes;
/// `present(i)` says whether input `i` is given at all.
pub(super) fn depthwise_params(
    product: &IntegerProduct,
    conv: &ConvParams,
    x: DType,
    y: DType,
    constant: Constant,
    present: &dyn Fn(usize) -> bool,
) -> Option<QDepthwiseParams> {
    let taps = (conv.kernel[0] * conv.kernel[1]) as usize;
    let depthwise = conv.spatial_rank == 2 && conv.group == conv.in_channels && conv.out_channels == conv.group;
    if product.slots != QLINEAR || !depthwise || conv.strides[0] != conv.strides[1] || taps > MAX_TAPS {
        return None;
    }
    let (x_signed, y_signed) = (byte_type(x)?, byte_type(y)?);
    let channels = conv.out_channels as usize;
    constants_fit(channels, constant, present).then_some(())?;
    let (y_min, y_max) = y_range(y_signed);
    Some(QDepthwiseParams {
        batch: conv.batch,
        channels: channels as i64,
        in_h: conv.in_spatial[0],
        in_w: conv.in_spatial[1],
        out_h: conv.out_spatial[0],
        out_w: conv.out_spatial[1],
        kernel_h: conv.kernel[0],
        kernel_w: conv.kernel[1],
        stride: conv.strides[0],
        dilation_h: conv.dilations[0],
        dilation_w: conv.dilations[1],
        pad_top: conv.pads_begin[0],
        pad_left: conv.pads_begin[1],
        x_signed: x_signed as i64,
        x_zero: scalar_zero(constant(2), present(2), x)?,
        y_zero: scalar_zero(constant(7), present(7), y)?,
        y_min,
        y_max,
    })
}

/// The packed constants of the convolution `depthwise_params` accepted.
pub(super) fn pack(p: &QDepthwiseParams, constant: Constant) -> Result<Vec<u8>, String> {
    let mut packed = vec![0u8; qdepthwise_packed_bytes(p)];
    let packs = pack_constants(constant, |weights| pack_qdepthwise(p, weights, &mut packed))?;
    if !packs {
        return Err("the depthwise convolution's constants do not match its shapes".into());
    }
    Ok(packed)
}

/// The range of an 8-bit output, `signed` for i8.
pub(super) fn y_range(signed: bool) -> (i64, i64) {
    if signed {
        (-128, 127)
    } else {
        (0, 255)
    }
}

/// Whether a QLinearConv of `channels` output channels has the constants
/// the one-call kernels take: 8-bit weights, their f32 scale and zero
/// point per tensor or per channel, an i32 bias per channel or none, and
/// per-tensor f32 scales of the input and output.
pub(super) fn constants_fit(channels: usize, constant: Constant, present: &dyn Fn(usize) -> bool) -> bool {
    let Some(w) = constant(3).filter(|w| byte_type(w.dtype).is_some()) else { return false };
    let per = |len: usize| len == 1 || len == channels;
    let w_scale_fits = constant(4).is_some_and(|s| s.dtype == DType::F32 && per(s.len()));
    let w_zero_fits = constant(5).map_or(!present(5), |z| z.dtype == w.dtype && per(z.len()));
    let bias_fits = constant(8).map_or(!present(8), |b| b.dtype == DType::I32 && b.len() == channels);
    let scales_fit = scalar_scale(constant(1)).is_some() && scalar_scale(constant(6)).is_some();
    w_scale_fits && w_zero_fits && bias_fits && scales_fit
}

/// The constants of a QLinearConv that [`constants_fit`] accepted, widened
/// and given to `pack` (its result, or an error if one is missing).
pub(super) fn pack_constants<R>(constant: Constant, pack: impl FnOnce(&QConvConstants) -> R) -> Result<R, String> {
    let missing = || "a constant of the quantized convolution is missing".to_string();
    let w = constant(3).ok_or_else(missing)?;
    let ints = |t: &Tensor| t.to_i64s().into_iter().map(|v| v as i32).collect();
    let (w_zero, bias): (Vec<i32>, Vec<i32>) = (constant(5).map_or(vec![0], ints), constant(8).map_or(vec![], ints));
    let w_scale = constant(4).and_then(Tensor::to_f32s).ok_or_else(missing)?;
    let scale = |i: usize| constant(i).map(|s| s.get_f64(0) as f32).ok_or_else(missing);
    Ok(pack(&QConvConstants {
        w: &w.data,
        w_signed: w.dtype == DType::I8,
        w_zero: &w_zero,
        bias: &bias,
        x_scale: scale(1)?,
        w_scale: &w_scale,
        y_scale: scale(6)?,
    }))
}
