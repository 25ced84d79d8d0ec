//! The C entry points and parameter structs of [`crate::generic::training`].

use crate::generic::training::*;

pub const OPTIMIZER_ADAGRAD: i64 = 0;
pub const OPTIMIZER_MOMENTUM: i64 = 1;
pub const OPTIMIZER_NESTEROV: i64 = 2;
pub const OPTIMIZER_ADAM: i64 = 3;

/// Parameters of [`onnxc_optimizer_step_f32`] and [`onnxc_optimizer_step_f64`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct OptimizerParams {
    /// One of the `OPTIMIZER_*` constants.
    pub kind: i64,
    /// Elements of `X` (and of `G` and each state tensor).
    pub len: i64,
    /// Element code of the learning rate `R`.
    pub rate_elem: i64,
    pub alpha: f64,
    pub beta: f64,
    pub epsilon: f64,
    pub decay_factor: f64,
    pub norm_coefficient: f64,
    pub norm_coefficient_post: f64,
}

/// `rate` points to `R`, `count` to `T`; `state2` and `state2_out` are
/// Adam's `H` (null for the other optimizers).
#[no_mangle]
pub unsafe extern "C" fn onnxc_optimizer_step_f32(
    p: *const OptimizerParams,
    rate: *const u8,
    count: *const i64,
    x: *const f32,
    g: *const f32,
    state1: *const f32,
    state2: *const f32,
    x_out: *mut f32,
    state1_out: *mut f32,
    state2_out: *mut f32,
) -> i32 {
    step(p, rate, count, [x, g, state1, state2], [x_out, state1_out, state2_out])
}

/// [`onnxc_optimizer_step_f32`] for `f64` tensors.
#[no_mangle]
pub unsafe extern "C" fn onnxc_optimizer_step_f64(
    p: *const OptimizerParams,
    rate: *const u8,
    count: *const i64,
    x: *const f64,
    g: *const f64,
    state1: *const f64,
    state2: *const f64,
    x_out: *mut f64,
    state1_out: *mut f64,
    state2_out: *mut f64,
) -> i32 {
    step(p, rate, count, [x, g, state1, state2], [x_out, state1_out, state2_out])
}
