//! The C entry points and parameter structs of [`crate::generic::gemm`].

use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS};
use crate::generic::gemm_batched::gemm_batched;
use crate::isa::Isa;
use crate::parallel::Parallel;

/// Parameters of [`onnxc_gemm_f32`]. Strides are in elements. With
/// `b_strips = 1`, B is packed by [`crate::pack_b_strips`] (the compiler
/// packs constant weights so) and its row and column strides are unused;
/// its batch strides still apply.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GemmParams {
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub a_row_stride: i64,
    pub a_col_stride: i64,
    pub b_row_stride: i64,
    pub b_col_stride: i64,
    pub c_row_stride: i64,
    pub c_col_stride: i64,
    pub alpha: f64,
    pub beta: f64,
    pub batch_rank: i64,
    pub batch_dims: [i64; MAX_RANK],
    pub a_batch_strides: [i64; MAX_RANK],
    pub b_batch_strides: [i64; MAX_RANK],
    pub c_batch_strides: [i64; MAX_RANK],
    pub b_strips: i64,
}

/// Batched strided gemm; see [`GemmParams`]. `c` may be null (no bias). The
/// output is contiguous: batch after batch of row-major `m x n` matrices.
/// `parallel` (null: none) lends threads for large products.
#[no_mangle]
pub unsafe extern "C" fn onnxc_gemm_f32(
    p: *const GemmParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    gemm_batched(Isa::best(), p, a, b, c, y, parallel)
}
