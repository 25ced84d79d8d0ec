//! The C entry points and parameter structs of [`crate::generic::pool`].

use crate::abi::MAX_RANK;
use crate::generic::pool::*;
use crate::parallel::Parallel;

pub const POOL_MAX: i64 = 0;
pub const POOL_AVERAGE: i64 = 1;
pub const POOL_LP: i64 = 2;

/// Parameters of [`onnxc_pool_f32`] and [`onnxc_pool_f64`]; the input is `[batch, channels,
/// in_spatial...]`, the output `[batch, channels, out_spatial...]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PoolParams {
    /// `POOL_MAX`, `POOL_AVERAGE` or `POOL_LP`.
    pub kind: i64,
    pub batch: i64,
    pub channels: i64,
    pub spatial_rank: i64,
    pub in_spatial: [i64; MAX_RANK],
    pub out_spatial: [i64; MAX_RANK],
    pub kernel: [i64; MAX_RANK],
    pub strides: [i64; MAX_RANK],
    pub dilations: [i64; MAX_RANK],
    pub pads_begin: [i64; MAX_RANK],
    pub pads_end: [i64; MAX_RANK],
    pub count_include_pad: i64,
    pub p_norm: f64,
    pub storage_order: i64,
}

/// Pooling; see [`PoolParams`] and the module doc. `indices` may be null and
/// is only written for `POOL_MAX`. 2-D max and average pooling split their
/// planes over `parallel` (may be null: one thread).
#[no_mangle]
pub unsafe extern "C" fn onnxc_pool_f32(
    p: *const PoolParams,
    x: *const f32,
    y: *mut f32,
    indices: *mut i64,
    parallel: *const Parallel,
) -> i32 {
    pool(p, x, y, indices, parallel)
}

/// [`onnxc_pool_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_pool_f64(
    p: *const PoolParams,
    x: *const f64,
    y: *mut f64,
    indices: *mut i64,
    parallel: *const Parallel,
) -> i32 {
    pool(p, x, y, indices, parallel)
}
