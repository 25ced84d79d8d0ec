//! The C entry points and parameter structs of [`crate::generic::reduce`].

use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS};
use crate::generic::reduce::*;

pub const REDUCE_SUM: i64 = 0;
pub const REDUCE_MEAN: i64 = 1;
pub const REDUCE_MAX: i64 = 2;
pub const REDUCE_MIN: i64 = 3;
pub const REDUCE_PROD: i64 = 4;
pub const REDUCE_L1: i64 = 5;
pub const REDUCE_L2: i64 = 6;
pub const REDUCE_LOG_SUM: i64 = 7;
pub const REDUCE_LOG_SUM_EXP: i64 = 8;
pub const REDUCE_SUM_SQUARE: i64 = 9;
pub const ARG_MAX: i64 = 0;
pub const ARG_MIN: i64 = 1;

/// Parameters of `onnxc_reduce_{f32,f64,i32,i64}`. The output is contiguous
/// with every reduced axis kept as size 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ReduceParams {
    /// One of the `REDUCE_*` constants.
    pub kind: i64,
    pub rank: i64,
    pub dims: [i64; MAX_RANK],
    /// 1 = reduce this axis, 0 = keep it.
    pub reduced: [i64; MAX_RANK],
}

/// Parameters of [`onnxc_argreduce_f32`] on `[outer, axis_len, inner]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ArgReduceParams {
    pub outer: i64,
    pub axis_len: i64,
    pub inner: i64,
    /// `ARG_MAX` or `ARG_MIN`.
    pub kind: i64,
    /// Nonzero: ties pick the last index instead of the first.
    pub select_last_index: i64,
}

/// ArgMax / ArgMin along the middle axis of `[outer, axis_len, inner]`,
/// writing `[outer, inner]` indices. `axis_len` must be positive.
#[no_mangle]
pub unsafe extern "C" fn onnxc_argreduce_f32(p: *const ArgReduceParams, x: *const f32, y: *mut i64) -> i32 {
    argreduce_f32(p, x, y)
}

macro_rules! reduce_kernels {
    ($($name:ident: $t:ty;)*) => {$(
        #[doc = concat!("Reduction over `", stringify!($t), "`; see [`ReduceParams`].")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(p: *const ReduceParams, x: *const $t, y: *mut $t) -> i32 {
            match p.as_ref() {
                Some(p) => reduce(p, x, y),
                None => STATUS_INVALID_PARAMS,
            }
        }
    )*};
}

reduce_kernels! {
    onnxc_reduce_f32: f32;
    onnxc_reduce_f64: f64;
    onnxc_reduce_i32: i32;
    onnxc_reduce_i64: i64;
}
