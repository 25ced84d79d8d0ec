//! The C entry points and parameter structs of [`crate::generic::rnn`].

use crate::generic::rnn::*;
use crate::parallel::Parallel;

/// Activation slots per direction (f, g, h).
pub const RNN_ACTS: usize = 3;

pub const RNN_SIMPLE: i64 = 0;
pub const RNN_GRU: i64 = 1;
pub const RNN_LSTM: i64 = 2;
pub const ACT_RELU: i64 = 0;
pub const ACT_TANH: i64 = 1;
pub const ACT_SIGMOID: i64 = 2;
pub const ACT_AFFINE: i64 = 3;
pub const ACT_LEAKY_RELU: i64 = 4;
pub const ACT_THRESHOLDED_RELU: i64 = 5;
pub const ACT_SCALED_TANH: i64 = 6;
pub const ACT_HARD_SIGMOID: i64 = 7;
pub const ACT_ELU: i64 = 8;
pub const ACT_SOFTSIGN: i64 = 9;
pub const ACT_SOFTPLUS: i64 = 10;

/// Parameters of [`onnxc_rnn_f32`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RnnParams {
    /// `RNN_SIMPLE`, `RNN_GRU` or `RNN_LSTM`.
    pub kind: i64,
    pub seq_len: i64,
    pub batch: i64,
    pub input_size: i64,
    pub hidden: i64,
    /// 1 or 2.
    pub directions: i64,
    /// With one direction: 1 runs it backwards in time.
    pub reverse: i64,
    pub layout: i64,
    pub linear_before_reset: i64,
    pub input_forget: i64,
    /// 1: R holds every direction's panels, packed by
    /// [`rnn_pack_recurrent`] (at compile time), not `[D, G*H, H]`.
    pub packed_recurrent: i64,
    pub has_clip: i64,
    pub clip: f64,
    /// `ACT_*` per direction and slot: `[d * RNN_ACTS + slot]`.
    pub act: [i64; 2 * RNN_ACTS],
    pub alpha: [f64; 2 * RNN_ACTS],
    pub beta: [f64; 2 * RNN_ACTS],
}

macro_rules! rnn_kernel {
    ($name:ident, $t:ty) => {
        /// RNN/GRU/LSTM (see the module doc); `scratch` holds
        /// [`rnn_scratch_elems`] elements.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            p: *const RnnParams,
            x: *const $t,
            w: *const $t,
            r: *const $t,
            b: *const $t,
            lens: *const i32,
            init_h: *const $t,
            init_c: *const $t,
            peep: *const $t,
            y: *mut $t,
            y_h: *mut $t,
            y_c: *mut $t,
            scratch: *mut $t,
            parallel: *const Parallel,
        ) -> i32 {
            rnn(p, [x, w, r, b, init_h, init_c, peep], [y, y_h, y_c], lens, scratch, parallel)
        }
    };
}

rnn_kernel!(onnxc_rnn_f32, f32);
rnn_kernel!(onnxc_rnn_f64, f64);
