//! The C entry points and parameter structs of [`crate::generic::loss`].

use crate::generic::loss::*;

pub const REDUCTION_NONE: i64 = 0;
pub const REDUCTION_SUM: i64 = 1;
pub const REDUCTION_MEAN: i64 = 2;

/// Parameters of [`onnxc_nll_loss_f32`] and [`onnxc_nll_loss_f64`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NllLossParams {
    pub n: i64,
    pub c: i64,
    /// Product of the dims after C (1 for a 2-D input).
    pub d: i64,
    /// `REDUCTION_NONE`, `REDUCTION_SUM` or `REDUCTION_MEAN`.
    pub reduction: i64,
    /// 1 when `ignore_index` is set.
    pub has_ignore: i64,
    pub ignore_index: i64,
    /// 1 when the target tensor holds i32 values, 0 for i64.
    pub target_i32: i64,
}

/// `x` is `[n, c, d]` f32 (log-probabilities), `target` `[n, d]` i64 or i32,
/// `weight` `[c]` f32 or null, `loss` `[n, d]` (reduction none) or one value.
#[no_mangle]
pub unsafe extern "C" fn onnxc_nll_loss_f32(
    p: *const NllLossParams,
    x: *const f32,
    target: *const u8,
    weight: *const f32,
    loss: *mut f32,
) -> i32 {
    nll_loss(p, x, target, weight, loss)
}

/// [`onnxc_nll_loss_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_nll_loss_f64(
    p: *const NllLossParams,
    x: *const f64,
    target: *const u8,
    weight: *const f64,
    loss: *mut f64,
) -> i32 {
    nll_loss(p, x, target, weight, loss)
}
