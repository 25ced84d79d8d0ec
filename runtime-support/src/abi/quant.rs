//! The C entry points and parameter structs of [`crate::generic::quant`].

use crate::abi::conv::ConvParams;
use crate::abi::MAX_RANK;
use crate::generic::qconv_packed::qconv_packed_with;
#[cfg(doc)]
use crate::generic::qconv_packed::{pack_qconv, qconv_packed_scratch_bytes};
use crate::generic::qdepthwise::qdepthwise_with;
#[cfg(doc)]
use crate::generic::qdepthwise::{pack_qdepthwise, qdepthwise_scratch_bytes};
use crate::generic::qelementwise::{qbinary, qlookup};
use crate::generic::quant::*;
use crate::isa::ByteKernel;

/// Parameters of [`onnxc_quantize`] and [`onnxc_dequantize`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QuantParams {
    /// The float side (quantize input, dequantize output) and its type.
    pub float_dtype: i64,
    /// The integer side and its type (the zero point's).
    pub int_dtype: i64,
    pub scale_dtype: i64,
    pub outer: i64,
    pub len: i64,
    pub inner: i64,
    /// Scale/zero-point entry of element `(o, j, i)`:
    /// `o * so + (j / block) * sj + i * si`.
    pub block: i64,
    pub so: i64,
    pub sj: i64,
    pub si: i64,
    /// `saturate` of a float8 quantized type (`MINIFLOAT_SATURATE` or 0).
    pub saturate: i64,
}

/// `y = saturate(rint(x / scale) + zero_point)`; `zp` may be null (0).
///
/// # Safety
/// The pointers hold the tensors `p` describes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_quantize(
    p: *const QuantParams,
    x: *const u8,
    scale: *const u8,
    zp: *const u8,
    y: *mut u8,
) -> i32 {
    quantize(p, x, scale, zp, y)
}

/// `y = (x - zero_point) * scale`, in f32, stored as `float_dtype`.
///
/// # Safety
/// The pointers hold the tensors `p` describes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_dequantize(
    p: *const QuantParams,
    x: *const u8,
    scale: *const u8,
    zp: *const u8,
    y: *mut u8,
) -> i32 {
    dequantize(p, x, scale, zp, y)
}

/// DynamicQuantizeLinear of `n` f32 values: the u8 `y`, its f32 scale and
/// u8 zero point, from the range of `x` widened to include 0.
///
/// # Safety
/// `x` and `y` hold `n` elements, `scale` and `zp` one.
#[no_mangle]
pub unsafe extern "C" fn onnxc_dynamic_quantize(
    x: *const f32,
    n: i64,
    y: *mut u8,
    scale: *mut f32,
    zp: *mut u8,
) -> i32 {
    dynamic_quantize(x, n, y, scale, zp)
}

/// One quantized operand of an integer product: its type and zero point
/// (null for 0), which is per tensor or indexed by a row/column/channel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QOperand {
    pub dtype: i64,
    /// 1 when the zero point has one entry per row (A), column (B) or
    /// output channel (W).
    pub zp_indexed: i64,
}

/// Parameters of [`onnxc_qmatmul`]: batched `[m, k] x [k, n]` with
/// broadcast element strides of A and B per batch dim.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QMatMulParams {
    pub a: QOperand,
    pub b: QOperand,
    pub m: i64,
    pub k: i64,
    pub n: i64,
    pub batch_rank: i64,
    pub batch_dims: [i64; MAX_RANK],
    pub a_strides: [i64; MAX_RANK],
    pub b_strides: [i64; MAX_RANK],
}

/// `acc = (A - a_zp) x (B - b_zp)` in i32 (wrapping, like int32 numpy).
///
/// # Safety
/// The pointers hold what `p` describes; `acc` is `[batch..., m, n]`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_qmatmul(
    p: *const QMatMulParams,
    a: *const u8,
    b: *const u8,
    a_zp: *const u8,
    b_zp: *const u8,
    acc: *mut i32,
) -> i32 {
    qmatmul(p, a, b, a_zp, b_zp, acc)
}

/// [`qconv_with`] through the fastest [`ByteKernel`].
///
/// # Safety
/// As [`qconv_with`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn onnxc_qconv(
    p: *const ConvParams,
    ops: *const [QOperand; 2],
    x: *const u8,
    w: *const u8,
    x_zp: *const u8,
    w_zp: *const u8,
    bias: *const i32,
    acc: *mut i32,
    scratch: *mut u8,
) -> i32 {
    qconv_with(ByteKernel::best(), p, ops, x, w, x_zp, w_zp, bias, acc, scratch)
}

/// Parameters of [`onnxc_requantize`]: `[outer, len, inner]` accumulators
/// whose combined scale `a_scale[..] * b_scale[..] / y_scale` has the
/// per-row entry of A at `(j)` when `a_indexed` and the per-column (or
/// per-channel) entry of B at `(j)` or `(i)` as `b_index` says.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RequantParams {
    pub scale_dtype: i64,
    pub y_dtype: i64,
    pub outer: i64,
    pub len: i64,
    pub inner: i64,
    /// 0: A's scale per tensor; 1: indexed by `j`.
    pub a_indexed: i64,
    /// 0: B's scale per tensor; 1: indexed by `j`; 2: indexed by `i`.
    pub b_index: i64,
}

/// `y = saturate(rint(acc * (a_scale * b_scale / y_scale) + y_zp))`.
///
/// # Safety
/// The pointers hold what `p` describes; `y_zp` may be null.
#[no_mangle]
pub unsafe extern "C" fn onnxc_requantize(
    p: *const RequantParams,
    acc: *const i32,
    a_scale: *const u8,
    b_scale: *const u8,
    y_scale: *const u8,
    y_zp: *const u8,
    y: *mut u8,
) -> i32 {
    requantize(p, acc, a_scale, b_scale, y_scale, y_zp, y)
}

/// Parameters of [`onnxc_qdepthwise`]: a 2-D depthwise QLinearConv (one
/// input and one output channel per group) with equal strides along both
/// axes, on 8-bit NCHW tensors (`generic::qdepthwise`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QDepthwiseParams {
    pub batch: i64,
    pub channels: i64,
    pub in_h: i64,
    pub in_w: i64,
    pub out_h: i64,
    pub out_w: i64,
    pub kernel_h: i64,
    pub kernel_w: i64,
    pub stride: i64,
    pub dilation_h: i64,
    pub dilation_w: i64,
    pub pad_top: i64,
    pub pad_left: i64,
    /// 1 when the input is i8, 0 for u8.
    pub x_signed: i64,
    /// The input's zero point, which padding reads as.
    pub x_zero: i64,
    /// The output's zero point and the range it saturates to: its type's,
    /// or narrower for a fused Relu or Clip.
    pub y_zero: i64,
    pub y_min: i64,
    pub y_max: i64,
}

/// `y = saturate(rint(acc · scale[c] + y_zero))` of the depthwise
/// convolution whose weights, bias and scales [`pack_qdepthwise`] packed
/// into `packed`; `scratch` holds [`qdepthwise_scratch_bytes`].
///
/// # Safety
/// The pointers hold what `p` describes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_qdepthwise(
    p: *const QDepthwiseParams,
    x: *const u8,
    packed: *const u8,
    y: *mut u8,
    scratch: *mut u8,
) -> i32 {
    match p.as_ref() {
        Some(p) => qdepthwise_with(ByteKernel::best(), p, x, packed, y, scratch),
        None => crate::abi::STATUS_INVALID_PARAMS,
    }
}

/// Parameters of [`onnxc_qconv_packed`]: a QLinearConv of 8-bit input,
/// weights and output whose weights are constant (`generic::qconv_packed`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QConvPackedParams {
    pub conv: ConvParams,
    /// 1 when the input is i8, 0 for u8.
    pub x_signed: i64,
    /// The input's zero point, which padding reads as.
    pub x_zero: i64,
    /// The output's zero point and the range it saturates to: its type's,
    /// or narrower for a fused Relu or Clip.
    pub y_zero: i64,
    pub y_min: i64,
    pub y_max: i64,
}

/// `y = saturate(rint(acc · scale[m] + y_zero))` of the convolution whose
/// weights, corrections and scales [`pack_qconv`] packed into `packed`;
/// `scratch` holds [`qconv_packed_scratch_bytes`].
///
/// # Safety
/// The pointers hold what `p` describes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_qconv_packed(
    p: *const QConvPackedParams,
    x: *const u8,
    packed: *const u8,
    y: *mut u8,
    scratch: *mut u8,
) -> i32 {
    match p.as_ref() {
        Some(p) => qconv_packed_with(ByteKernel::best(), p, x, packed, y, scratch),
        None => crate::abi::STATUS_INVALID_PARAMS,
    }
}

/// Parameters of [`onnxc_scale_product`]: `rows x cols` accumulators, a
/// scale of `scale_len` entries (1 or `cols`) and a bias of `bias_len` (0,
/// 1 or `cols`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ScaleParams {
    pub rows: i64,
    pub cols: i64,
    pub scale_len: i64,
    pub bias_len: i64,
}

/// `y = f32(acc) · scale (+ bias)` in place over the i32 product in `y`:
/// MatMulInteger's Cast, Mul and Add (`passes::fuse_qdq`).
///
/// # Safety
/// `y` holds `rows · cols` i32s, `scale` and `bias` their entries (`bias`
/// may be null when `bias_len` is 0).
#[no_mangle]
pub unsafe extern "C" fn onnxc_scale_product(
    p: *const ScaleParams,
    y: *mut u8,
    scale: *const f32,
    bias: *const f32,
) -> i32 {
    scale_product(p, y, scale, bias)
}

/// One 8-bit operand or result of [`onnxc_qbinary`]: its type (u8 or i8),
/// per-tensor zero point and f32 scale (held widened, exactly).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QuantizedSide {
    pub dtype: i64,
    pub zero: i64,
    pub scale: f64,
}

/// Parameters of [`onnxc_qbinary`]: `rows x inner` elements of A and Y;
/// B has one element per row when `b_per_row` is 1, else one per element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QBinaryParams {
    /// `QBINARY_ADD` or `QBINARY_MUL`.
    pub op: i64,
    pub rows: i64,
    pub inner: i64,
    pub b_per_row: i64,
    pub a: QuantizedSide,
    pub b: QuantizedSide,
    pub y: QuantizedSide,
}

/// QLinearAdd / QLinearMul: `y = quantize(dequantize(a) op dequantize(b))`
/// with the f32 operations of the QDQ group (`generic::qelementwise`).
///
/// # Safety
/// The pointers hold what `p` describes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_qbinary(p: *const QBinaryParams, a: *const u8, b: *const u8, y: *mut u8) -> i32 {
    qbinary(p, a, b, y)
}

/// `y[i] = table[x[i]]` for `n` bytes: an 8-bit elementwise function as
/// the 256-entry table the compiler computed.
///
/// # Safety
/// `table` holds 256 bytes, `x` and `y` `n`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_qlookup(table: *const u8, n: i64, x: *const u8, y: *mut u8) -> i32 {
    qlookup(table, n, x, y)
}
