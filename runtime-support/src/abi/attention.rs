//! The C entry points and parameter structs of [`crate::generic::attention`].

use crate::abi::{ELEM_BF16, ELEM_F16, ELEM_F32, ELEM_F64, STATUS_INVALID_PARAMS};
use crate::generic::attention::*;
use crate::generic::convert::{Bf16, F16};

/// Attention mask kinds.
pub const MASK_NONE: i64 = 0;

/// `bool` bytes: true = attend.
pub const MASK_BOOL: i64 = 1;

/// Additive, of the element type of Q.
pub const MASK_ADD: i64 = 2;

/// Parameters of [`onnxc_attention`]. Q, K, V and Y are addressed as
/// `(batch, head, seq, dim)` with the given element strides for the first
/// three axes and a contiguous last axis (3-D `[B, S, H*D]` tensors are the
/// strided view `(S*H*D, D, H*D)`). `past_key`/`past_value` and the present
/// outputs are contiguous `[B, kv_heads, seq, dim]`; `qk_matmul_output` is
/// contiguous `[B, q_heads, q_seq, total]` with `total = past_seq + kv_seq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionParams {
    pub elem: i64,
    pub batch: i64,
    pub q_heads: i64,
    pub kv_heads: i64,
    pub q_seq: i64,
    pub kv_seq: i64,
    pub past_seq: i64,
    pub head_size: i64,
    pub v_head_size: i64,
    pub q_strides: [i64; 3],
    pub k_strides: [i64; 3],
    pub v_strides: [i64; 3],
    pub y_strides: [i64; 3],
    /// `MASK_NONE`, `MASK_BOOL` or `MASK_ADD`.
    pub mask_kind: i64,
    /// Mask element strides along `(batch, q_head, q_seq, key)` (0 = broadcast).
    pub mask_strides: [i64; 4],
    /// Keys `j >= mask_len` are masked out (the mask's last dim may be short).
    pub mask_len: i64,
    pub is_causal: i64,
    /// -1 = unbounded.
    pub left_window: i64,
    pub right_window: i64,
    pub scale: f64,
    /// Applied when positive.
    pub softcap: f64,
    /// 0 raw scores, 1 after softcap, 2 with bias, 3 probabilities.
    pub qk_mode: i64,
    /// Element code the softmax computes in (usually `elem`).
    pub softmax_elem: i64,
}

/// Scaled dot-product attention (ONNX Attention, opsets 23 to 25).
/// `mask` (bytes or elements per `mask_kind`), `past_key`, `past_value`,
/// `nonpad` (`[batch]` i64), `present_key`, `present_value` and `qk_out`
/// may be null. `scratch` holds [`attention_scratch_bytes`] bytes, aligned
/// for f64.
#[no_mangle]
pub unsafe extern "C" fn onnxc_attention(
    p: *const AttentionParams,
    q: *const u8,
    k: *const u8,
    v: *const u8,
    mask: *const u8,
    past_key: *const u8,
    past_value: *const u8,
    nonpad: *const i64,
    y: *mut u8,
    present_key: *mut u8,
    present_value: *mut u8,
    qk_out: *mut u8,
    scratch: *mut u8,
) -> i32 {
    attention_kernel(p, q, k, v, mask, past_key, past_value, nonpad, y, present_key, present_value, qk_out, scratch)
}

/// Parameters of [`onnxc_rotary_embedding`]. X and Y are addressed as
/// `(batch, head, seq, dim)` with strides for the first three axes (the
/// last is contiguous). The caches are `[rows, rotary_dim / 2]`; the row of
/// `(b, s)` is `position_ids[b * pos_strides[0] + s * pos_strides[1]]`
/// (checked against `cache_rows`) or, without position ids,
/// `b * pos_strides[0] + s * pos_strides[1]` itself.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RotaryParams {
    pub elem: i64,
    pub batch: i64,
    pub heads: i64,
    pub seq: i64,
    pub head_size: i64,
    pub rotary_dim: i64,
    pub interleaved: i64,
    pub x_strides: [i64; 3],
    pub pos_strides: [i64; 2],
    pub cache_rows: i64,
}

/// Rotary position embedding (ONNX RotaryEmbedding, opset 23); `pos` may be null.
#[no_mangle]
pub unsafe extern "C" fn onnxc_rotary_embedding(
    p: *const RotaryParams,
    x: *const u8,
    cos: *const u8,
    sin: *const u8,
    pos: *const i64,
    y: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    dispatch!(p.elem, rotary(p, x, cos, sin, pos, y))
}

/// Parameters of [`onnxc_swiglu`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SwigluParams {
    pub elem: i64,
    pub count: i64,
    pub alpha: f64,
}

/// `y = a * sigmoid(alpha * a) * b` elementwise (ONNX SwiGLU).
#[no_mangle]
pub unsafe extern "C" fn onnxc_swiglu(p: *const SwigluParams, a: *const u8, b: *const u8, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    dispatch!(p.elem, swiglu(p, a, b, y))
}

/// Parameters of [`onnxc_causal_conv_with_state`]: input `[batch, channels,
/// len]`, weight `[channels, 1, kernel]`, state `[batch, channels, kernel-1]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CausalConvParams {
    pub elem: i64,
    pub batch: i64,
    pub channels: i64,
    pub len: i64,
    pub kernel: i64,
    /// 1: SiLU on the output.
    pub silu: i64,
}

/// Depthwise causal 1-D convolution over `concat(past_state, input)`;
/// `bias` and `past` may be null (zeros).
#[no_mangle]
pub unsafe extern "C" fn onnxc_causal_conv_with_state(
    p: *const CausalConvParams,
    x: *const u8,
    w: *const u8,
    bias: *const u8,
    past: *const u8,
    y: *mut u8,
    present: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    dispatch!(f32c: p.elem, causal_conv(p, x, w, bias, past, y, present))
}

pub const RULE_LINEAR: i64 = 0;
pub const RULE_GATED: i64 = 1;
pub const RULE_DELTA: i64 = 2;
pub const RULE_GATED_DELTA: i64 = 3;

/// Parameters of [`onnxc_linear_attention`]: query `[B, T, q_heads*dk]`,
/// key `[B, T, kv_heads*dk]`, value `[B, T, kv_heads*dv]`, state
/// `[B, kv_heads, dk, dv]`, decay `[B, T, kv_heads*decay_width]`
/// (`decay_width` 1 or dk), beta `[B, T, beta_heads]` (1 or kv_heads).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LinearAttentionParams {
    pub elem: i64,
    pub batch: i64,
    pub seq: i64,
    pub q_heads: i64,
    pub kv_heads: i64,
    pub dk: i64,
    pub dv: i64,
    pub rule: i64,
    pub decay_width: i64,
    pub beta_heads: i64,
    pub scale: f64,
}

/// Recurrent linear attention (ONNX LinearAttention, opset 27). `past`,
/// `decay` and `beta` may be null as the rule allows; the state runs in f32
/// in `scratch` ([`linear_attention_scratch_elems`] floats).
#[no_mangle]
pub unsafe extern "C" fn onnxc_linear_attention(
    p: *const LinearAttentionParams,
    q: *const u8,
    k: *const u8,
    v: *const u8,
    past: *const u8,
    decay: *const u8,
    beta: *const u8,
    y: *mut u8,
    present: *mut u8,
    scratch: *mut f32,
) -> i32 {
    linear_attention_kernel(p, q, k, v, past, decay, beta, y, present, scratch)
}
