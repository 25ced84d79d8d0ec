//! The C entry points and parameter structs of [`crate::generic::deform_conv`].

use crate::abi::conv::ConvParams;
use crate::generic::deform_conv::*;

/// Parameters of [`onnxc_deform_conv_f32`]: the convolution (its
/// `out_spatial` is the offset's spatial shape) and the number of offset
/// groups, which split the input channels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeformConvParams {
    pub conv: ConvParams,
    pub offset_group: i64,
}

/// Deformable convolution: input `[batch, in_channels, in_spatial...]`,
/// weights `[out_channels, in_channels/group, kernel...]`, `offset [batch,
/// offset_group * prod(kernel) * rank, out_spatial...]`, optional `bias
/// [out_channels]` and `mask [batch, offset_group * prod(kernel),
/// out_spatial...]`, output `[batch, out_channels, out_spatial...]`;
/// `scratch` holds [`deform_conv_scratch_elems`] elements.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // one pointer per tensor
pub unsafe extern "C" fn onnxc_deform_conv_f32(
    p: *const DeformConvParams,
    x: *const f32,
    w: *const f32,
    offset: *const f32,
    bias: *const f32,
    mask: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) -> i32 {
    deform_conv(p, [x, w, offset, bias, mask], y, scratch)
}

/// [`onnxc_deform_conv_f32`] for `f64`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // one pointer per tensor
pub unsafe extern "C" fn onnxc_deform_conv_f64(
    p: *const DeformConvParams,
    x: *const f64,
    w: *const f64,
    offset: *const f64,
    bias: *const f64,
    mask: *const f64,
    y: *mut f64,
    scratch: *mut f64,
) -> i32 {
    deform_conv(p, [x, w, offset, bias, mask], y, scratch)
}
