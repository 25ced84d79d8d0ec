//! The C entry points and parameter structs of [`crate::generic::linalg`].

use crate::abi::MAX_RANK;
use crate::generic::linalg::*;

/// Most operands [`onnxc_einsum_f32`] multiplies.
pub const EINSUM_MAX_INPUTS: usize = 3;

/// Parameters of [`onnxc_einsum_f32`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct EinsumParams {
    /// Operand count, 1 to `EINSUM_MAX_INPUTS` (unused operand pointers may be null).
    pub inputs: i64,
    /// Distinct letters: the output's first, then the summed ones.
    pub rank: i64,
    pub out_rank: i64,
    pub dims: [i64; MAX_RANK],
    /// Element stride of each operand along each letter.
    pub strides: [[i64; MAX_RANK]; EINSUM_MAX_INPUTS],
}

/// Einsum over up to three operands (see the module doc).
#[no_mangle]
pub unsafe extern "C" fn onnxc_einsum_f32(
    p: *const EinsumParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
) -> i32 {
    einsum(p, [a, b, c], y)
}

/// [`onnxc_einsum_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_einsum_f64(
    p: *const EinsumParams,
    a: *const f64,
    b: *const f64,
    c: *const f64,
    y: *mut f64,
) -> i32 {
    einsum(p, [a, b, c], y)
}

/// Parameters of [`onnxc_det_f32`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DetParams {
    pub batch: i64,
    pub n: i64,
}

/// Determinants of the `batch` contiguous `n x n` matrices in `x`;
/// `scratch` holds `n * n` doubles.
#[no_mangle]
pub unsafe extern "C" fn onnxc_det_f32(p: *const DetParams, x: *const f32, y: *mut f32, scratch: *mut f64) -> i32 {
    det(p, x, y, scratch)
}

/// [`onnxc_det_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_det_f64(p: *const DetParams, x: *const f64, y: *mut f64, scratch: *mut f64) -> i32 {
    det(p, x, y, scratch)
}
