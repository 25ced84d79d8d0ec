//! Attention-family kernels: scaled dot-product attention (MHA, GQA, MQA with
//! masks, causal and sliding windows, KV caches, soft-capping), rotary
//! position embeddings, SwiGLU, linear (recurrent) attention and the
//! depthwise causal convolution with carried state.
//!
//! Every kernel takes an `elem` code ([`ELEM_F32`], [`ELEM_F16`],
//! [`ELEM_BF16`], [`ELEM_F64`]) and raw pointers, and computes in f32 (f64
//! for f64 tensors). For 16-bit tensors the kernels round to the element type
//! where the ONNX reference does (after each elementwise step, after each
//! matrix product, which accumulates in f32), so results match the
//! reference's precision rather than being "too good" for its tolerance.
//! Softmax subtracts the row maximum; a row whose maximum is `-inf` becomes
//! all zeros instead of NaN.

use crate::abi::attention::*;
use crate::abi::{
    ELEM_BF16, ELEM_F16, ELEM_F32, ELEM_F64, STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS, STATUS_OK,
};
use crate::generic::convert::{Bf16, F16};
use crate::generic::real::Real;

/// A tensor element type with its compute type.
pub trait Elem: Copy {
    type C: Real;
    fn load(self) -> Self::C;
    fn store(c: Self::C) -> Self;
    /// `c` rounded to this element type (identity for the compute type).
    #[inline(always)]
    fn round(c: Self::C) -> Self::C {
        Self::store(c).load()
    }
}

impl Elem for f32 {
    type C = f32;
    fn load(self) -> f32 {
        self
    }
    fn store(c: f32) -> f32 {
        c
    }
    fn round(c: f32) -> f32 {
        c
    }
}

impl Elem for f64 {
    type C = f64;
    fn load(self) -> f64 {
        self
    }
    fn store(c: f64) -> f64 {
        c
    }
    fn round(c: f64) -> f64 {
        c
    }
}

impl Elem for F16 {
    type C = f32;
    fn load(self) -> f32 {
        self.to_f32()
    }
    fn store(c: f32) -> F16 {
        F16::from_f32(c)
    }
}

impl Elem for Bf16 {
    type C = f32;
    fn load(self) -> f32 {
        self.to_f32()
    }
    fn store(c: f32) -> Bf16 {
        Bf16::from_f32(c)
    }
}

/// `c` rounded to the element type `code` (used for `softmax_precision`).
fn round_to<C: Real>(code: i64, c: C) -> C {
    match code {
        ELEM_F32 => C::from_f64(c.to_f64() as f32 as f64),
        ELEM_F16 => C::from_f64(F16::round(c.to_f64() as f32) as f64),
        ELEM_BF16 => C::from_f64(Bf16::round(c.to_f64() as f32) as f64),
        _ => c,
    }
}

/// Calls `$f::<T>($args)` with `T` chosen by the element code `$elem`
/// (`f32c:` for kernels whose types all compute in f32: no f64).
macro_rules! dispatch {
    ($elem:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $elem {
            ELEM_F64 => $f::<f64>($($arg),*),
            e => dispatch!(f32c: e, $f($($arg),*)),
        }
    };
    (f32c: $elem:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $elem {
            ELEM_F32 => $f::<f32>($($arg),*),
            ELEM_F16 => $f::<F16>($($arg),*),
            ELEM_BF16 => $f::<Bf16>($($arg),*),
            _ => STATUS_INVALID_PARAMS,
        }
    };
}
pub(crate) use dispatch;

// ---------------------------------------------------------------- Attention

/// Bytes of scratch [`onnxc_attention`] needs: two rows of `total` values
/// of the compute type.
pub fn attention_scratch_bytes(elem: i64, total: usize) -> usize {
    let c = if elem == ELEM_F64 { 8 } else { 4 };
    2 * total.max(1) * c
}

/// Does the work of the C entry point [`crate::abi::onnxc_attention`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn attention_kernel(
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
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let a = AttnPtrs { q, k, v, mask, past_key, past_value, nonpad, y, present_key, present_value, qk_out, scratch };
    dispatch!(p.elem, attention(p, &a))
}

struct AttnPtrs {
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
}

fn attention_params_ok(p: &AttentionParams) -> bool {
    let sizes = [p.batch, p.q_heads, p.kv_heads, p.q_seq, p.kv_seq, p.past_seq, p.head_size, p.v_head_size];
    sizes.iter().all(|&s| s >= 0)
        && p.kv_heads > 0
        && p.q_heads % p.kv_heads == 0
        && (MASK_NONE..=MASK_ADD).contains(&p.mask_kind)
        && (0..=p.past_seq + p.kv_seq).contains(&p.mask_len)
        && p.left_window >= -1
        && p.right_window >= -1
        && (0..=3).contains(&p.qk_mode)
}

unsafe fn attention<T: Elem>(p: &AttentionParams, a: &AttnPtrs) -> i32 {
    if !attention_params_ok(p) {
        return STATUS_INVALID_PARAMS;
    }
    let u = |v: i64| v as usize;
    let (batch, hq, hkv, sq, skv, past) =
        (u(p.batch), u(p.q_heads), u(p.kv_heads), u(p.q_seq), u(p.kv_seq), u(p.past_seq));
    let (d, dv) = (u(p.head_size), u(p.v_head_size));
    let total = past + skv;
    let group = hq / hkv;
    let (q, k, v) = (a.q as *const T, a.k as *const T, a.v as *const T);
    let (pk, pv) = (a.past_key as *const T, a.past_value as *const T);
    let y = a.y as *mut T;
    let at =
        |s: &[i64; 3], b: usize, h: usize, i: usize| (b as i64 * s[0] + h as i64 * s[1] + i as i64 * s[2]) as isize;

    // Row `j` of the (concatenated) key or value cache of batch b, kv head h.
    let key_row = |b: usize, h: usize, j: usize| -> *const T {
        if j < past {
            pk.add(((b * hkv + h) * past + j) * d)
        } else {
            k.offset(at(&p.k_strides, b, h, j - past))
        }
    };
    let value_row = |b: usize, h: usize, j: usize| -> *const T {
        if j < past {
            pv.add(((b * hkv + h) * past + j) * dv)
        } else {
            v.offset(at(&p.v_strides, b, h, j - past))
        }
    };

    // present_key / present_value: the concatenated caches.
    for (out, width, row) in [
        (a.present_key as *mut T, d, &key_row as &dyn Fn(usize, usize, usize) -> *const T),
        (a.present_value as *mut T, dv, &value_row),
    ] {
        if out.is_null() {
            continue;
        }
        for b in 0..batch {
            for h in 0..hkv {
                for j in 0..total {
                    core::ptr::copy_nonoverlapping(row(b, h, j), out.add(((b * hkv + h) * total + j) * width), width);
                }
            }
        }
    }

    let scale = T::round(T::C::from_f64(libm::sqrt(p.scale)));
    let softcap = T::C::from_f64(p.softcap);
    let neg_inf = T::C::NEG_INF;
    let scores = a.scratch as *mut T::C;
    let bias = scores.add(total.max(1));
    let qk_out = a.qk_out as *mut T;
    let sm = |c: T::C| round_to(p.softmax_elem, c);

    for b in 0..batch {
        // Causal/window offset: the count of valid keys before the query block.
        let offset = if !a.nonpad.is_null() && past == 0 { *a.nonpad.add(b) - sq as i64 } else { past as i64 };
        let valid = if a.nonpad.is_null() { i64::MAX } else { *a.nonpad.add(b) };
        for h in 0..hq {
            let kvh = h / group;
            for i in 0..sq {
                let q_row = q.offset(at(&p.q_strides, b, h, i));
                let mut all_masked = true;
                for j in 0..total {
                    let jj = j as i64;
                    let mut bias_j = T::C::ZERO;
                    if p.mask_kind != MASK_NONE {
                        let m = p.mask_strides;
                        let off = (b as i64 * m[0] + h as i64 * m[1] + i as i64 * m[2] + jj * m[3]) as isize;
                        bias_j = if jj >= p.mask_len {
                            neg_inf
                        } else if p.mask_kind == MASK_BOOL {
                            if *a.mask.offset(off) != 0 {
                                T::C::ZERO
                            } else {
                                neg_inf
                            }
                        } else {
                            (*(a.mask as *const T).offset(off)).load()
                        };
                    }
                    let pos = offset + i as i64;
                    let mut blocked = p.is_causal != 0 && jj > pos;
                    blocked |= p.left_window >= 0 && pos - jj > p.left_window;
                    blocked |= p.right_window >= 0 && jj - pos > p.right_window;
                    blocked |= jj >= valid;
                    if blocked {
                        bias_j = T::round(bias_j + neg_inf);
                    }
                    all_masked &= bias_j == neg_inf;
                    *bias.add(j) = bias_j;

                    let k_row = key_row(b, kvh, j);
                    let mut acc = T::C::ZERO;
                    for x in 0..d {
                        let qs = T::round((*q_row.add(x)).load() * scale);
                        let ks = T::round((*k_row.add(x)).load() * scale);
                        acc = acc + qs * ks;
                    }
                    let raw = T::round(acc);
                    let mut s = raw;
                    if p.softcap > 0.0 {
                        s = T::round(T::round(T::round(s / softcap).tanh()) * softcap);
                    }
                    let with_bias = T::round(s + bias_j);
                    *scores.add(j) = with_bias;
                    if !qk_out.is_null() && p.qk_mode < 3 {
                        let o = [raw, s, with_bias][p.qk_mode as usize];
                        *qk_out.add(((b * hq + h) * sq + i) * total + j) = T::store(o);
                    }
                }
                // Softmax (NaN-propagating max, -inf row → zeros), in the softmax precision.
                let mut max = neg_inf;
                let mut nan = false;
                for j in 0..total {
                    let s = sm(*scores.add(j));
                    nan |= s.is_nan();
                    if s > max {
                        max = s;
                    }
                }
                if max == neg_inf {
                    max = T::C::ZERO;
                }
                // numpy sums f16 in f32, but ml_dtypes' bf16 rounds every addition.
                let mut sum = T::C::ZERO;
                for j in 0..total {
                    let e = sm(sm(sm(*scores.add(j)) - max).exp());
                    *scores.add(j) = e;
                    sum = sum + e;
                    if p.softmax_elem == ELEM_BF16 {
                        sum = sm(sum);
                    }
                }
                let mut sum = sm(sum);
                if sum == T::C::ZERO {
                    sum = T::C::ONE;
                }
                for j in 0..total {
                    let pr = if all_masked {
                        T::C::ZERO
                    } else if nan {
                        T::C::NAN
                    } else {
                        T::round(sm(*scores.add(j) / sum))
                    };
                    *scores.add(j) = pr;
                    if !qk_out.is_null() && p.qk_mode == 3 {
                        *qk_out.add(((b * hq + h) * sq + i) * total + j) = T::store(pr);
                    }
                }
                let y_row = y.offset(at(&p.y_strides, b, h, i));
                for x in 0..dv {
                    let mut acc = T::C::ZERO;
                    for j in 0..total {
                        acc = acc + *scores.add(j) * (*value_row(b, kvh, j).add(x)).load();
                    }
                    *y_row.add(x) = T::store(acc);
                }
            }
        }
    }
    STATUS_OK
}

// ---------------------------------------------------------- RotaryEmbedding

pub(crate) unsafe fn rotary<T: Elem>(
    p: &RotaryParams,
    x: *const u8,
    cos: *const u8,
    sin: *const u8,
    pos: *const i64,
    y: *mut u8,
) -> i32 {
    let sizes = [p.batch, p.heads, p.seq, p.head_size, p.cache_rows];
    if sizes.iter().any(|&s| s < 0) || p.rotary_dim < 0 || p.rotary_dim > p.head_size || p.rotary_dim % 2 != 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (x, y, cos, sin) = (x as *const T, y as *mut T, cos as *const T, sin as *const T);
    let half = (p.rotary_dim / 2) as usize;
    let s = p.x_strides;
    for b in 0..p.batch {
        for t in 0..p.seq {
            let flat = b * p.pos_strides[0] + t * p.pos_strides[1];
            let row = if pos.is_null() { flat } else { *pos.offset(flat as isize) };
            if row < 0 || row >= p.cache_rows {
                return STATUS_INDEX_OUT_OF_RANGE;
            }
            let (cos_row, sin_row) = (cos.add(row as usize * half), sin.add(row as usize * half));
            for h in 0..p.heads {
                let base = (b * s[0] + h * s[1] + t * s[2]) as isize;
                let (xr, yr) = (x.offset(base), y.offset(base));
                for i in 0..half {
                    let (i1, i2) = if p.interleaved != 0 { (2 * i, 2 * i + 1) } else { (i, i + half) };
                    let (x1, x2) = ((*xr.add(i1)).load(), (*xr.add(i2)).load());
                    let (c, sn) = ((*cos_row.add(i)).load(), (*sin_row.add(i)).load());
                    let real = T::round(c * x1) - T::round(sn * x2);
                    let imag = T::round(sn * x1) + T::round(c * x2);
                    *yr.add(i1) = T::store(real);
                    *yr.add(i2) = T::store(imag);
                }
                for i in 2 * half..p.head_size as usize {
                    *yr.add(i) = *xr.add(i);
                }
            }
        }
    }
    STATUS_OK
}

// ------------------------------------------------------------------- SwiGLU

/// `1 / (1 + exp(-alpha * x))` with the reference's roundings.
fn sigmoid<T: Elem>(x: T::C, alpha: T::C) -> T::C {
    let e = T::round(T::round(-(alpha * x)).exp());
    T::round(T::C::ONE / T::round(T::C::ONE + e))
}

pub(crate) unsafe fn swiglu<T: Elem>(p: &SwigluParams, a: *const u8, b: *const u8, y: *mut u8) -> i32 {
    if p.count < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (a, b, y) = (a as *const T, b as *const T, y as *mut T);
    let alpha = T::C::from_f64(p.alpha);
    for i in 0..p.count as usize {
        let av = (*a.add(i)).load();
        let swish = T::round(av * sigmoid::<T>(av, alpha));
        *y.add(i) = T::store(swish * (*b.add(i)).load());
    }
    STATUS_OK
}

// ------------------------------------------------------ CausalConvWithState

pub(crate) unsafe fn causal_conv<T: Elem<C = f32>>(
    p: &CausalConvParams,
    x: *const u8,
    w: *const u8,
    bias: *const u8,
    past: *const u8,
    y: *mut u8,
    present: *mut u8,
) -> i32 {
    if p.batch < 0 || p.channels < 0 || p.len < 0 || p.kernel < 1 {
        return STATUS_INVALID_PARAMS;
    }
    let (x, w, bias, past) = (x as *const T, w as *const T, bias as *const T, past as *const T);
    let (y, present) = (y as *mut T, present as *mut T);
    let (n, c, len, kn) = (p.batch as usize, p.channels as usize, p.len as usize, p.kernel as usize);
    let st = kn - 1;
    for b in 0..n {
        for ch in 0..c {
            let xr = x.add((b * c + ch) * len);
            let pr = past.wrapping_add((b * c + ch) * st);
            // Element t of concat(past, x).
            let padded = |t: usize| -> f32 {
                if t >= st {
                    (*xr.add(t - st)).load()
                } else if past.is_null() {
                    0.0
                } else {
                    (*pr.add(t)).load()
                }
            };
            let wr = w.add(ch * kn);
            let b0 = if bias.is_null() { 0.0 } else { (*bias.add(ch)).load() };
            for t in 0..len {
                let mut acc = b0;
                for i in 0..kn {
                    acc += (*wr.add(i)).load() * padded(t + i);
                }
                let mut out = T::round(acc);
                if p.silu != 0 {
                    out *= 1.0 / (1.0 + libm::expf(-out));
                }
                *y.add((b * c + ch) * len + t) = T::store(out);
            }
            let pres = present.add((b * c + ch) * st);
            for i in 0..st {
                *pres.add(i) = T::store(padded(len + i));
            }
        }
    }
    STATUS_OK
}

// ---------------------------------------------------------- LinearAttention

/// f32 scratch elements [`onnxc_linear_attention`] needs.
pub fn linear_attention_scratch_elems(p: &LinearAttentionParams) -> usize {
    let u = |v: i64| v.max(0) as usize;
    u(p.batch) * u(p.kv_heads) * u(p.dk) * u(p.dv) + u(p.dv)
}

/// Does the work of the C entry point [`crate::abi::onnxc_linear_attention`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn linear_attention_kernel(
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
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let io = LinPtrs { q, k, v, past, decay, beta, y, present, scratch };
    dispatch!(f32c: p.elem, linear_attention(p, &io))
}

struct LinPtrs {
    q: *const u8,
    k: *const u8,
    v: *const u8,
    past: *const u8,
    decay: *const u8,
    beta: *const u8,
    y: *mut u8,
    present: *mut u8,
    scratch: *mut f32,
}

unsafe fn linear_attention<T: Elem<C = f32>>(p: &LinearAttentionParams, io: &LinPtrs) -> i32 {
    let sizes = [p.batch, p.seq, p.q_heads, p.dk, p.dv];
    let gated = p.rule == RULE_GATED || p.rule == RULE_GATED_DELTA;
    let delta = p.rule == RULE_DELTA || p.rule == RULE_GATED_DELTA;
    if sizes.iter().any(|&s| s < 0)
        || p.kv_heads < 1
        || p.q_heads % p.kv_heads != 0
        || !(RULE_LINEAR..=RULE_GATED_DELTA).contains(&p.rule)
        || (gated && (io.decay.is_null() || (p.decay_width != 1 && p.decay_width != p.dk)))
        || (delta && (io.beta.is_null() || (p.beta_heads != 1 && p.beta_heads != p.kv_heads)))
    {
        return STATUS_INVALID_PARAMS;
    }
    let u = |v: i64| v as usize;
    let (nb, nt, hq, hkv, dk, dv) = (u(p.batch), u(p.seq), u(p.q_heads), u(p.kv_heads), u(p.dk), u(p.dv));
    let (q, k, v) = (io.q as *const T, io.k as *const T, io.v as *const T);
    let (decay, beta, past) = (io.decay as *const T, io.beta as *const T, io.past as *const T);
    let (y, present) = (io.y as *mut T, io.present as *mut T);
    let state_len = nb * hkv * dk * dv;
    let state = io.scratch;
    let vt = state.add(state_len);
    for i in 0..state_len {
        *state.add(i) = if past.is_null() { 0.0 } else { (*past.add(i)).load() };
    }
    let group = hq / hkv;
    let scale = p.scale as f32;
    for b in 0..nb {
        for t in 0..nt {
            let row = b * nt + t;
            for h in 0..hkv {
                let s = state.add((b * hkv + h) * dk * dv);
                let kr = k.add((row * hkv + h) * dk);
                let vr = v.add((row * hkv + h) * dv);
                if gated {
                    let w = u(p.decay_width);
                    let dr = decay.add((row * hkv + h) * w);
                    for x in 0..dk {
                        let g = libm::expf((*dr.add(if w == 1 { 0 } else { x })).load());
                        for m in 0..dv {
                            *s.add(x * dv + m) *= g;
                        }
                    }
                }
                for m in 0..dv {
                    *vt.add(m) = (*vr.add(m)).load();
                }
                if delta {
                    let bh = u(p.beta_heads);
                    let bt = (*beta.add(row * bh + if bh == 1 { 0 } else { h })).load();
                    for m in 0..dv {
                        let mut retrieved = 0.0f32;
                        for x in 0..dk {
                            retrieved += *s.add(x * dv + m) * (*kr.add(x)).load();
                        }
                        *vt.add(m) = bt * (*vt.add(m) - retrieved);
                    }
                }
                for x in 0..dk {
                    let kx = (*kr.add(x)).load();
                    for m in 0..dv {
                        *s.add(x * dv + m) += kx * *vt.add(m);
                    }
                }
            }
            for h in 0..hq {
                let s = state.add((b * hkv + h / group) * dk * dv);
                let qr = q.add((row * hq + h) * dk);
                let yr = y.add((row * hq + h) * dv);
                for m in 0..dv {
                    let mut acc = 0.0f32;
                    for x in 0..dk {
                        acc += (*qr.add(x)).load() * *s.add(x * dv + m);
                    }
                    *yr.add(m) = T::store(scale * acc);
                }
            }
        }
    }
    for i in 0..state_len {
        *present.add(i) = T::store(*state.add(i));
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::convert::{onnxc_f16_to_f32, onnxc_f32_to_f16};
    use crate::generic::test_util::{assert_close, rand_vec};
    use std::vec;
    use std::vec::Vec;

    /// Naive 4-D attention in f64 with an optional causal frontier and
    /// additive `[sq, total]` mask; GQA by integer division of heads.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: Option<&[f32]>,
        dims: (usize, usize, usize, usize, usize, usize, usize),
        causal: bool,
        scale: f64,
    ) -> Vec<f32> {
        let (b, hq, hkv, sq, skv, d, dv) = dims;
        let mut y = vec![0.0f32; b * hq * sq * dv];
        for bi in 0..b {
            for h in 0..hq {
                let kh = h / (hq / hkv);
                for i in 0..sq {
                    let mut s: Vec<f64> = (0..skv)
                        .map(|j| {
                            let dot: f64 = (0..d)
                                .map(|x| {
                                    q[((bi * hq + h) * sq + i) * d + x] as f64
                                        * k[((bi * hkv + kh) * skv + j) * d + x] as f64
                                })
                                .sum();
                            let mut v = dot * scale + mask.map_or(0.0, |m| m[i * skv + j] as f64);
                            if causal && j > i {
                                v = f64::NEG_INFINITY;
                            }
                            v
                        })
                        .collect();
                    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    s.iter_mut().for_each(|x| *x = (*x - m).exp());
                    let sum: f64 = s.iter().sum();
                    for x in 0..dv {
                        let acc: f64 =
                            (0..skv).map(|j| s[j] / sum * v[((bi * hkv + kh) * skv + j) * dv + x] as f64).sum();
                        y[((bi * hq + h) * sq + i) * dv + x] = acc as f32;
                    }
                }
            }
        }
        y
    }

    #[test]
    fn attention_matches_reference() {
        let (b, hq, hkv, sq, skv, d, dv) = (2, 4, 2, 3, 5, 8, 6);
        let q = rand_vec(b * hq * sq * d, 1);
        let k = rand_vec(b * hkv * skv * d, 2);
        let v = rand_vec(b * hkv * skv * dv, 3);
        let mask = rand_vec(sq * skv, 4);
        for causal in [false, true] {
            let p = AttentionParams {
                elem: ELEM_F32,
                batch: b as i64,
                q_heads: hq as i64,
                kv_heads: hkv as i64,
                q_seq: sq as i64,
                kv_seq: skv as i64,
                head_size: d as i64,
                v_head_size: dv as i64,
                q_strides: [(hq * sq * d) as i64, (sq * d) as i64, d as i64],
                k_strides: [(hkv * skv * d) as i64, (skv * d) as i64, d as i64],
                v_strides: [(hkv * skv * dv) as i64, (skv * dv) as i64, dv as i64],
                y_strides: [(hq * sq * dv) as i64, (sq * dv) as i64, dv as i64],
                mask_kind: MASK_ADD,
                mask_strides: [0, 0, skv as i64, 1],
                mask_len: skv as i64,
                is_causal: causal as i64,
                left_window: -1,
                right_window: -1,
                scale: 0.3,
                qk_mode: 0,
                softmax_elem: ELEM_F32,
                ..Default::default()
            };
            let mut y = vec![0.0f32; b * hq * sq * dv];
            let mut scratch = vec![0.0f64; skv * 2];
            let null = core::ptr::null_mut::<u8>();
            let status = unsafe {
                onnxc_attention(
                    &p,
                    q.as_ptr() as _,
                    k.as_ptr() as _,
                    v.as_ptr() as _,
                    mask.as_ptr() as _,
                    null,
                    null,
                    core::ptr::null(),
                    y.as_mut_ptr() as _,
                    null,
                    null,
                    null,
                    scratch.as_mut_ptr() as _,
                )
            };
            assert_eq!(status, STATUS_OK);
            let want = reference(&q, &k, &v, Some(&mask), (b, hq, hkv, sq, skv, d, dv), causal, 0.3);
            assert_close(&y, &want, 1e-5);
        }
        let bad = AttentionParams { kv_heads: 3, q_heads: 4, ..Default::default() };
        let null = core::ptr::null_mut::<u8>();
        let n = core::ptr::null::<u8>();
        let status =
            unsafe { onnxc_attention(&bad, n, n, n, n, n, n, core::ptr::null(), null, null, null, null, null) };
        assert_eq!(status, STATUS_INVALID_PARAMS);
    }

    #[test]
    fn rotary_rotates_pairs_and_checks_positions() {
        // One head of size 4, rotary dim 4, interleaved and not.
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let (cos, sin) = ([0.0f32, 1.0, 0.5, 0.5], [1.0f32, 0.0, 0.5, 0.5]);
        for (interleaved, want) in [(0, [-3.0f32, 2.0, 1.0, 4.0]), (1, [-2.0f32, 1.0, 3.0, 4.0])] {
            let p = RotaryParams {
                elem: ELEM_F32,
                batch: 1,
                heads: 1,
                seq: 1,
                head_size: 4,
                rotary_dim: 4,
                interleaved,
                x_strides: [4, 4, 4],
                pos_strides: [1, 1],
                cache_rows: 2,
            };
            let mut y = [0.0f32; 4];
            let pos = [0i64];
            let s = unsafe {
                onnxc_rotary_embedding(
                    &p,
                    x.as_ptr() as _,
                    cos.as_ptr() as _,
                    sin.as_ptr() as _,
                    pos.as_ptr(),
                    y.as_mut_ptr() as _,
                )
            };
            assert_eq!(s, STATUS_OK);
            assert_eq!(y, want);
            let pos = [2i64];
            let s = unsafe {
                onnxc_rotary_embedding(
                    &p,
                    x.as_ptr() as _,
                    cos.as_ptr() as _,
                    sin.as_ptr() as _,
                    pos.as_ptr(),
                    y.as_mut_ptr() as _,
                )
            };
            assert_eq!(s, STATUS_INDEX_OUT_OF_RANGE);
        }
    }

    #[test]
    fn swiglu_and_f16() {
        let a = rand_vec(10, 7);
        let b = rand_vec(10, 8);
        let mut y = vec![0.0f32; 10];
        let p = SwigluParams { elem: ELEM_F32, count: 10, alpha: 0.5 };
        assert_eq!(unsafe { onnxc_swiglu(&p, a.as_ptr() as _, b.as_ptr() as _, y.as_mut_ptr() as _) }, STATUS_OK);
        let want: Vec<f32> = a.iter().zip(&b).map(|(&a, &b)| a / (1.0 + (-0.5 * a).exp()) * b).collect();
        assert_close(&y, &want, 1e-6);
        // f16 storage: close to the f32 result at f16 precision.
        let a16: Vec<u16> = a.iter().map(|&v| onnxc_f32_to_f16(v) as u16).collect();
        let b16: Vec<u16> = b.iter().map(|&v| onnxc_f32_to_f16(v) as u16).collect();
        let mut y16 = vec![0u16; 10];
        let p = SwigluParams { elem: ELEM_F16, ..p };
        assert_eq!(unsafe { onnxc_swiglu(&p, a16.as_ptr() as _, b16.as_ptr() as _, y16.as_mut_ptr() as _) }, STATUS_OK);
        let got: Vec<f32> = y16.iter().map(|&h| onnxc_f16_to_f32(h as i32)).collect();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 5e-3, "{g} vs {w}");
        }
    }

    #[test]
    fn causal_conv_matches_reference() {
        let (b, c, len, k) = (2, 3, 5, 3);
        let x = rand_vec(b * c * len, 1);
        let w = rand_vec(c * k, 2);
        let bias = rand_vec(c, 3);
        let past = rand_vec(b * c * (k - 1), 4);
        let p = CausalConvParams { elem: ELEM_F32, batch: 2, channels: 3, len: 5, kernel: 3, silu: 0 };
        let mut y = vec![0.0f32; b * c * len];
        let mut present = vec![0.0f32; b * c * (k - 1)];
        let s = unsafe {
            onnxc_causal_conv_with_state(
                &p,
                x.as_ptr() as _,
                w.as_ptr() as _,
                bias.as_ptr() as _,
                past.as_ptr() as _,
                y.as_mut_ptr() as _,
                present.as_mut_ptr() as _,
            )
        };
        assert_eq!(s, STATUS_OK);
        for bi in 0..b {
            for ch in 0..c {
                let row = bi * c + ch;
                let mut padded: Vec<f32> = past[row * (k - 1)..(row + 1) * (k - 1)].to_vec();
                padded.extend_from_slice(&x[row * len..(row + 1) * len]);
                for t in 0..len {
                    let want = bias[ch] + (0..k).map(|i| w[ch * k + i] * padded[t + i]).sum::<f32>();
                    assert!((y[row * len + t] - want).abs() < 1e-5);
                }
                assert_eq!(&present[row * (k - 1)..(row + 1) * (k - 1)], &padded[len..]);
            }
        }
    }

    #[test]
    fn linear_attention_linear_rule_is_cumulative() {
        // Linear rule: o_t = scale * q_t . sum_{s<=t} k_s v_s^T.
        let (b, t, h, dk, dv) = (1, 3, 1, 2, 2);
        let q = rand_vec(b * t * h * dk, 1);
        let k = rand_vec(b * t * h * dk, 2);
        let v = rand_vec(b * t * h * dv, 3);
        let p = LinearAttentionParams {
            elem: ELEM_F32,
            batch: 1,
            seq: 3,
            q_heads: 1,
            kv_heads: 1,
            dk: 2,
            dv: 2,
            rule: RULE_LINEAR,
            decay_width: 1,
            beta_heads: 1,
            scale: 0.5,
        };
        let mut y = vec![0.0f32; t * dv];
        let mut present = vec![0.0f32; dk * dv];
        let mut scratch = vec![0.0f32; linear_attention_scratch_elems(&p)];
        let n = core::ptr::null::<u8>();
        let s = unsafe {
            onnxc_linear_attention(
                &p,
                q.as_ptr() as _,
                k.as_ptr() as _,
                v.as_ptr() as _,
                n,
                n,
                n,
                y.as_mut_ptr() as _,
                present.as_mut_ptr() as _,
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(s, STATUS_OK);
        let mut want = vec![0.0f32; t * dv];
        for ti in 0..t {
            for m in 0..dv {
                let mut acc = 0.0;
                for si in 0..=ti {
                    let qk: f32 = (0..dk).map(|x| q[ti * dk + x] * k[si * dk + x]).sum();
                    acc += qk * v[si * dv + m];
                }
                want[ti * dv + m] = 0.5 * acc;
            }
        }
        assert_close(&y, &want, 1e-5);
        // The gated rule without decay is rejected.
        let bad = LinearAttentionParams { rule: RULE_GATED, ..p };
        let s = unsafe {
            onnxc_linear_attention(
                &bad,
                q.as_ptr() as _,
                k.as_ptr() as _,
                v.as_ptr() as _,
                n,
                n,
                n,
                y.as_mut_ptr() as _,
                present.as_mut_ptr() as _,
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(s, STATUS_INVALID_PARAMS);
    }
}
