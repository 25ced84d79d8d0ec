//! Attention-family operators: Attention, RotaryEmbedding, SwiGLU,
//! LinearAttention and CausalConvWithState. Each lowers to one kernel of
//! `runtime-support/src/generic/attention.rs`, which takes an element-type
//! code and computes in f32 (f64 for f64 tensors), rounding 16-bit types
//! where the ONNX reference does. In portable mode Attention fills the same
//! params for the loop nests of [`crate::codegen::attention_loops`], and
//! RotaryEmbedding, SwiGLU and CausalConvWithState theirs for
//! [`crate::codegen::attention_aux_loops`], LinearAttention for
//! [`crate::codegen::linear_attention_loops`].
//!
//! * Attention (opsets 23, 24, 25): `Y = softmax(softcap(Q*s @ (K*s)^T) +
//!   bias) @ V` with `s = sqrt(scale)`, MHA/GQA/MQA (`q_heads % kv_heads ==
//!   0`, query head `h` reads kv head `h / (q_heads / kv_heads)`), 3-D
//!   `[B, S, H*D]` (with `q_num_heads`/`kv_num_heads`) or 4-D `[B, H, S, D]`
//!   inputs, `past_key`/`past_value` concatenated before K/V into
//!   `present_key`/`present_value`, `qk_matmul_output` in modes 0-3. The
//!   bias composes a bool (true = attend) or additive mask (right-aligned
//!   broadcast to `[B, q_heads, q_seq, total]`, a short last dim padded
//!   with -inf), the bottom-right causal frontier and the sliding window
//!   (opset 25), both offset by `past_seq` or `nonpad_kv_seqlen[b] - q_seq`
//!   (opset 24+), and the `nonpad_kv_seqlen` padding. Opset 23 has neither
//!   input 6 nor the window attributes; their absence is the default, so
//!   the versions need no other normalisation. A fully masked row gives a
//!   zero output row. Types: T1 (Q, K, past_key) and T2 (V, past_value) in
//!   {f16, bf16, f32, f64}, onnxc requires T1 == T2; the mask is bool or T1.
//! * RotaryEmbedding (opset 23): X `[B, H, S, D]` or `[B, S, H*D]` (with
//!   `num_heads`); caches `[max_pos, rot/2]` indexed by `position_ids`
//!   `[B, S]`, or `[B, S, rot/2]` without them; `interleaved` pairs
//!   `(2i, 2i+1)` instead of `(i, i + rot/2)`; `rotary_embedding_dim` 0 means
//!   the head size. T in {f16, bf16, f32}; out-of-range position ids fail
//!   with an index status.
//! * SwiGLU (opset 28): `Y = A * sigmoid(alpha * A) * B`, A and B of one
//!   shape (no broadcasting), T in {f16, bf16, f32, f64}.
//! * LinearAttention (opset 27): the recurrent linear/gated/delta/gated-delta
//!   state update over 3-D `[B, T, H*D]` inputs with an f32 state; onnxc
//!   requires `past_state` (S) to have the type of `query` (T).
//! * CausalConvWithState (opset 27): depthwise causal conv1d of
//!   `concat(past_state or zeros, input)` with weight `[C, 1, K]`, optional
//!   bias, optional SiLU (`activation` "silu"/"swish"); `present_state` is
//!   the last `K-1` positions. T in {f16, bf16, f32}.

use super::{InferCx, Inferred, InputInfo, Op, Operator};
use crate::codegen::attention_aux_loops::{self, CausalConvTensors};
use crate::codegen::attention_loops::{self, AttentionTensors};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::linear_attention_loops::{self, LinearAttentionTensors};
use crate::codegen::Lower;
use crate::import::NodeImport;
use crate::ir::shape::{broadcast_strides, element_count};
use crate::ir::DType;
use onnxc_runtime::abi::attention::{
    AttentionParams, CausalConvParams, LinearAttentionParams, RotaryParams, SwigluParams, MASK_ADD, MASK_BOOL,
    MASK_NONE, RULE_DELTA, RULE_GATED, RULE_GATED_DELTA, RULE_LINEAR,
};
use onnxc_runtime::generic::attention::{attention_scratch_bytes, linear_attention_scratch_elems};
use onnxc_runtime::ELEM_F32;

/// The kernels' element code of `dtype`, if `dtype` is one of `allowed`.
fn elem_code(what: &str, dtype: DType, allowed: &[DType]) -> Result<i64, String> {
    if !allowed.contains(&dtype) {
        return Err(format!("{what} is {dtype}, expected one of {allowed:?}"));
    }
    Ok(i64::from(dtype.onnx_code()))
}

const FLOATS: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];
const FLOATS32: &[DType] = &[DType::F16, DType::BF16, DType::F32];

/// Checks that input `i` (when present) has type `want`.
fn check_type(cx: &InferCx, i: usize, name: &str, want: DType) -> Result<(), String> {
    match cx.opt_input(i) {
        Some(x) if x.dtype != want => Err(format!("input {i} ({name}) is {}, expected {want}", x.dtype)),
        _ => Ok(()),
    }
}

/// Input types and shapes as the lowering sees them, for re-running an
/// operator's (already passed) inference checks to get its kernel params.
type LowerInputs = Vec<Option<(DType, Vec<usize>)>>;

fn lower_inputs(cx: &Lower) -> LowerInputs {
    (0..cx.input_count()).map(|i| if cx.has_input(i) { cx.input_type(i).ok() } else { None }).collect()
}

fn infer_view(inputs: &LowerInputs) -> InferCx<'_> {
    InferCx {
        inputs: inputs
            .iter()
            .map(|t| t.as_ref().map(|(d, s)| InputInfo { dtype: *d, shape: s, value: None }))
            .collect(),
        output_count: 0,
        missing_values: Default::default(),
        max_fold_bytes: 0,
        exprs: Vec::new(),
        facts: None,
    }
}

/// The outputs for the `cx.output_count` outputs the node has.
fn take(mut all: Vec<Inferred>, count: usize) -> Vec<Inferred> {
    all.truncate(count.max(1));
    all
}

// ---------------------------------------------------------------- Attention

#[derive(Clone, Debug)]
pub struct Attention {
    pub is_causal: bool,
    pub scale: Option<f32>,
    pub q_num_heads: Option<i64>,
    pub kv_num_heads: Option<i64>,
    pub softmax_precision: Option<DType>,
    pub softcap: f32,
    pub qk_matmul_output_mode: i64,
    pub left_window_size: i64,
    pub right_window_size: i64,
}

pub fn import_attention(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let softmax_precision = match a.int("softmax_precision")? {
        None => None,
        Some(1) => Some(DType::F32),
        Some(10) => Some(DType::F16),
        Some(11) => Some(DType::F64),
        Some(16) => Some(DType::BF16),
        Some(v) => return Err(format!("attribute \"softmax_precision\" is {v}, expected 1, 10, 11 or 16")),
    };
    let qk_matmul_output_mode = a.int_or("qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&qk_matmul_output_mode) {
        return Err(format!("attribute \"qk_matmul_output_mode\" is {qk_matmul_output_mode}, expected 0 to 3"));
    }
    let window = |name: &str| -> Result<i64, String> {
        let v = a.int_or(name, -1)?;
        if v < -1 {
            return Err(format!("attribute \"{name}\" is {v}, expected -1 or nonnegative"));
        }
        Ok(v)
    };
    Ok(Op::Attention(Attention {
        is_causal: a.int_or("is_causal", 0)? != 0,
        scale: a.float("scale")?,
        q_num_heads: a.int("q_num_heads")?,
        kv_num_heads: a.int("kv_num_heads")?,
        softmax_precision,
        softcap: a.float_or("softcap", 0.0)?,
        qk_matmul_output_mode,
        left_window_size: window("left_window_size")?,
        right_window_size: window("right_window_size")?,
    }))
}

/// The shapes an Attention node works on.
struct AttnGeom {
    rank3: bool,
    batch: usize,
    hq: usize,
    hkv: usize,
    sq: usize,
    skv: usize,
    past: usize,
    d: usize,
    dv: usize,
}

impl AttnGeom {
    fn total(&self) -> usize {
        self.past + self.skv
    }

    /// `(b, h, s)` strides of a `[B, H, S, D]` or `[B, S, H*D]` tensor.
    fn strides(&self, heads: usize, seq: usize, dim: usize) -> [i64; 3] {
        if self.rank3 {
            [(seq * heads * dim) as i64, dim as i64, (heads * dim) as i64]
        } else {
            [(heads * seq * dim) as i64, (seq * dim) as i64, dim as i64]
        }
    }

    fn y_shape(&self) -> Vec<usize> {
        if self.rank3 {
            vec![self.batch, self.sq, self.hq * self.dv]
        } else {
            vec![self.batch, self.hq, self.sq, self.dv]
        }
    }
}

impl Attention {
    fn geometry(
        &self,
        q: &[usize],
        k: &[usize],
        v: &[usize],
        past: Option<(&[usize], &[usize])>,
    ) -> Result<AttnGeom, String> {
        if q.len() != k.len() || q.len() != v.len() {
            return Err(format!("Q, K and V must have one rank, got {q:?}, {k:?}, {v:?}"));
        }
        let mut g = match (q, k, v) {
            (&[b, sq, qh], &[kb, skv, kh], &[vb, vs, vh]) => {
                let (Some(hq), Some(hkv)) = (self.q_num_heads, self.kv_num_heads) else {
                    return Err("3-D inputs need attributes \"q_num_heads\" and \"kv_num_heads\"".into());
                };
                if hq <= 0 || hkv <= 0 {
                    return Err(format!("q_num_heads ({hq}) and kv_num_heads ({hkv}) must be positive"));
                }
                let (hq, hkv) = (hq as usize, hkv as usize);
                if qh % hq != 0 || kh % hkv != 0 || vh % hkv != 0 {
                    return Err(format!(
                        "hidden sizes {qh}, {kh}, {vh} are not multiples of q_num_heads {hq} / kv_num_heads {hkv}"
                    ));
                }
                if kb != b || vb != b || vs != skv || qh / hq != kh / hkv {
                    return Err(format!("Q {q:?}, K {k:?} and V {v:?} do not agree"));
                }
                AttnGeom { rank3: true, batch: b, hq, hkv, sq, skv, past: 0, d: qh / hq, dv: vh / hkv }
            }
            (&[b, hq, sq, d], &[kb, hkv, skv, kd], &[vb, vh, vs, dv]) => {
                if self.q_num_heads.is_some() || self.kv_num_heads.is_some() {
                    // Attention-25 rejects them; older versions ignore them.
                }
                if kb != b || vb != b || vh != hkv || vs != skv || kd != d {
                    return Err(format!("Q {q:?}, K {k:?} and V {v:?} do not agree"));
                }
                AttnGeom { rank3: false, batch: b, hq, hkv, sq, skv, past: 0, d, dv }
            }
            _ => return Err(format!("Q, K and V must be 3-D or 4-D, got {q:?}, {k:?}, {v:?}")),
        };
        if g.hkv == 0 || g.hq % g.hkv != 0 {
            return Err(format!("{} query heads are not a multiple of {} key/value heads", g.hq, g.hkv));
        }
        if let Some((pk, pv)) = past {
            let p = pk.get(2).copied().unwrap_or(0);
            if pk != [g.batch, g.hkv, p, g.d] || pv != [g.batch, g.hkv, p, g.dv] {
                return Err(format!(
                    "past_key {pk:?} / past_value {pv:?} must be [{}, {}, past, {}] / [.., {}]",
                    g.batch, g.hkv, g.d, g.dv
                ));
            }
            g.past = p;
        }
        Ok(g)
    }

    /// Mask kind, `(b, h, s, key)` strides and last-dim length.
    fn mask_layout(
        &self,
        g: &AttnGeom,
        mask: Option<(DType, &[usize])>,
        elem: DType,
    ) -> Result<(i64, [i64; 4], usize), String> {
        let Some((dtype, shape)) = mask else {
            return Ok((MASK_NONE, [0; 4], 0));
        };
        let kind = match dtype {
            DType::Bool => MASK_BOOL,
            t if t == elem => MASK_ADD,
            t => return Err(format!("attn_mask is {t}, expected bool or {elem} like Q")),
        };
        let Some(&len) = shape.last() else {
            return Err("attn_mask must have rank 1 to 4".into());
        };
        if shape.len() > 4 || len > g.total() {
            return Err(format!("attn_mask {shape:?} does not fit [{}, {}, {}, {}]", g.batch, g.hq, g.sq, g.total()));
        }
        let target = [g.batch, g.hq, g.sq, len];
        let lead = 4 - shape.len();
        if shape.iter().enumerate().any(|(i, &s)| s != 1 && s != target[lead + i]) {
            return Err(format!("attn_mask {shape:?} does not broadcast to {target:?}"));
        }
        let s = broadcast_strides(shape, &target);
        Ok((kind, [s[0], s[1], s[2], 1], len))
    }

    fn shapes(&self, cx: &InferCx) -> Result<(AttnGeom, DType), String> {
        let (q, k, v) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
        elem_code("input 0 (Q)", q.dtype, FLOATS)?;
        check_type(cx, 1, "K", q.dtype)?;
        check_type(cx, 2, "V", q.dtype)?;
        check_type(cx, 4, "past_key", q.dtype)?;
        check_type(cx, 5, "past_value", q.dtype)?;
        let past = match (cx.opt_input(4), cx.opt_input(5)) {
            (Some(pk), Some(pv)) => Some((pk.shape, pv.shape)),
            (None, None) => None,
            _ => return Err("past_key and past_value must be given together".into()),
        };
        let g = self.geometry(q.shape, k.shape, v.shape, past)?;
        if let Some(n) = cx.opt_input(6) {
            if n.dtype != DType::I64 || n.shape != [g.batch] {
                return Err(format!("nonpad_kv_seqlen is {}{:?}, expected i64[{}]", n.dtype, n.shape, g.batch));
            }
            if past.is_some() {
                return Err("nonpad_kv_seqlen cannot be combined with past_key/past_value".into());
            }
        }
        self.mask_layout(&g, cx.opt_input(3).map(|m| (m.dtype, m.shape)), q.dtype)?;
        Ok((g, q.dtype))
    }
}

impl Operator for Attention {
    fn name(&self) -> &'static str {
        "Attention"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (g, t) = self.shapes(cx)?;
        let total = g.total();
        let all = vec![
            Inferred::new(t, g.y_shape()),
            Inferred::new(t, vec![g.batch, g.hkv, total, g.d]),
            Inferred::new(t, vec![g.batch, g.hkv, total, g.dv]),
            Inferred::new(t, vec![g.batch, g.hq, g.sq, total]),
        ];
        Ok(take(all, cx.output_count))
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        match self.shapes(cx) {
            Ok((g, t)) => attention_scratch_bytes(elem_code("Q", t, FLOATS).unwrap_or(ELEM_F32), g.total()),
            Err(_) => 0,
        }
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let inputs = lower_inputs(cx);
        let icx = infer_view(&inputs);
        let (g, t) = self.shapes(&icx)?;
        let mask = icx.opt_input(3).map(|m| (m.dtype, m.shape));
        let (mask_kind, mask_strides, mask_len) = self.mask_layout(&g, mask, t)?;
        let elem = elem_code("Q", t, FLOATS)?;
        let p = AttentionParams {
            elem,
            batch: g.batch as i64,
            q_heads: g.hq as i64,
            kv_heads: g.hkv as i64,
            q_seq: g.sq as i64,
            kv_seq: g.skv as i64,
            past_seq: g.past as i64,
            head_size: g.d as i64,
            v_head_size: g.dv as i64,
            q_strides: g.strides(g.hq, g.sq, g.d),
            k_strides: g.strides(g.hkv, g.skv, g.d),
            v_strides: g.strides(g.hkv, g.skv, g.dv),
            y_strides: g.strides(g.hq, g.sq, g.dv),
            mask_kind,
            mask_strides,
            mask_len: mask_len as i64,
            is_causal: self.is_causal as i64,
            left_window: self.left_window_size,
            right_window: self.right_window_size,
            scale: match self.scale {
                Some(s) => s as f64,
                None => 1.0 / (g.d as f64).sqrt(),
            },
            softcap: self.softcap as f64,
            qk_mode: self.qk_matmul_output_mode,
            softmax_elem: match self.softmax_precision {
                Some(sp) => elem_code("softmax_precision", sp, FLOATS)?,
                None => elem,
            },
        };
        if cx.portable() {
            return lower_attention_portable(cx, &p);
        }
        let params = cx.params(&p)?;
        let [q, k, v, mask, past_k, past_v, nonpad] = std::array::from_fn(|i| Ptr(cx.opt_input_ptr(i)));
        let mut output = |i| if cx.has_output(i) { cx.output_ptr(i).map(Ptr) } else { Ok(Ptr(cx.iconst(0))) };
        let (y, present_k, present_v, qk) = (output(0)?, output(1)?, output(2)?, output(3)?);
        let scratch = Ptr(cx.scratch_ptr()?);
        let args = (params, q, k, v, mask, past_k, past_v, nonpad, y, present_k, present_v, qk, scratch);
        cx.call_checked(kernels::onnxc_attention, args)
    }
}

/// Input `i`'s address for a portable lowering, `None` when it is absent.
fn optional_input(cx: &mut Lower, i: usize) -> Result<Option<crate::codegen::Value>, String> {
    if cx.has_input(i) {
        cx.input_ptr(i).map(Some)
    } else {
        Ok(None)
    }
}

/// Output `i`'s address for a portable lowering, `None` when it is not wanted.
fn optional_output(cx: &mut Lower, i: usize) -> Result<Option<crate::codegen::Value>, String> {
    if cx.has_output(i) {
        cx.output_ptr(i).map(Some)
    } else {
        Ok(None)
    }
}

/// Attention's loop nests ([`attention_loops`]) over the kernel's params.
fn lower_attention_portable(cx: &mut Lower, p: &AttentionParams) -> Result<(), String> {
    let t = AttentionTensors {
        q: cx.input_ptr(0)?,
        k: cx.input_ptr(1)?,
        v: cx.input_ptr(2)?,
        mask: optional_input(cx, 3)?,
        past_key: optional_input(cx, 4)?,
        past_value: optional_input(cx, 5)?,
        nonpad: optional_input(cx, 6)?,
        y: optional_output(cx, 0)?,
        present_key: optional_output(cx, 1)?,
        present_value: optional_output(cx, 2)?,
        qk: optional_output(cx, 3)?,
        scratch: cx.scratch_ptr()?,
    };
    attention_loops::attention(cx, p, &t)
}

// ---------------------------------------------------------- RotaryEmbedding

#[derive(Clone, Debug)]
pub struct RotaryEmbedding {
    pub num_heads: Option<i64>,
    pub rotary_embedding_dim: i64,
    pub interleaved: bool,
}

pub fn import_rotary(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    Ok(Op::RotaryEmbedding(RotaryEmbedding {
        num_heads: a.int("num_heads")?,
        rotary_embedding_dim: a.int_or("rotary_embedding_dim", 0)?,
        interleaved: a.int_or("interleaved", 0)? != 0,
    }))
}

impl RotaryEmbedding {
    fn params(
        &self,
        x: &[usize],
        cache: &[usize],
        sin: &[usize],
        pos: Option<&[usize]>,
    ) -> Result<RotaryParams, String> {
        // (batch, heads, seq, head_size) and the (b, h, s) strides of X.
        let (b, h, s, d, strides) = match *x {
            [b, h, s, d] => (b, h, s, d, [(h * s * d) as i64, (s * d) as i64, d as i64]),
            [b, s, hidden] => {
                let h = match self.num_heads {
                    Some(n) if n > 0 && hidden % n as usize == 0 => n as usize,
                    _ => {
                        return Err(format!(
                            "3-D input needs attribute \"num_heads\" dividing the hidden size {hidden}, got {:?}",
                            self.num_heads
                        ))
                    }
                };
                let d = hidden / h;
                (b, h, s, d, [(s * hidden) as i64, d as i64, hidden as i64])
            }
            _ => return Err(format!("input 0 must be 3-D or 4-D, got {x:?}")),
        };
        let rot = if self.rotary_embedding_dim == 0 { d as i64 } else { self.rotary_embedding_dim };
        if rot < 0 || rot as usize > d || rot % 2 != 0 {
            return Err(format!("rotary_embedding_dim {rot} must be even and at most the head size {d}"));
        }
        let half = rot as usize / 2;
        if cache != sin || cache.last() != Some(&half) {
            return Err(format!("cos_cache {cache:?} and sin_cache {sin:?} must match, last dim {half}"));
        }
        // Broadcast strides of a `[pb, ps]` index grid over (b, s).
        let grid = |pb: usize, ps: usize| -> Result<[i64; 2], String> {
            if (pb != 1 && pb != b) || (ps != 1 && ps != s) {
                return Err(format!("position grid [{pb}, {ps}] does not broadcast to [{b}, {s}]"));
            }
            Ok([if pb == 1 { 0 } else { ps as i64 }, if ps == 1 { 0 } else { 1 }])
        };
        let (pos_strides, cache_rows) = match (pos, cache) {
            (Some(&[pb, ps]), &[rows, _]) => (grid(pb, ps)?, rows),
            (None, &[cb, cs, _]) => (grid(cb, cs)?, cb * cs),
            _ => {
                return Err(format!(
                    "expected position_ids [B, S] with caches [max_pos, {half}], or caches [B, S, {half}] alone; got {pos:?} and {cache:?}"
                ))
            }
        };
        Ok(RotaryParams {
            elem: ELEM_F32,
            batch: b as i64,
            heads: h as i64,
            seq: s as i64,
            head_size: d as i64,
            rotary_dim: rot,
            interleaved: self.interleaved as i64,
            x_strides: strides,
            pos_strides,
            cache_rows: cache_rows as i64,
        })
    }
}

impl Operator for RotaryEmbedding {
    fn name(&self) -> &'static str {
        "RotaryEmbedding"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        elem_code("input 0", x.dtype, FLOATS32)?;
        check_type(cx, 1, "cos_cache", x.dtype)?;
        check_type(cx, 2, "sin_cache", x.dtype)?;
        check_type(cx, 3, "position_ids", DType::I64)?;
        self.params(x.shape, cx.input(1)?.shape, cx.input(2)?.shape, cx.opt_input(3).map(|p| p.shape))?;
        Ok(vec![Inferred::new(x.dtype, x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (t, x) = cx.input_type(0)?;
        let pos = if cx.has_input(3) { Some(cx.input_type(3)?.1) } else { None };
        let mut p = self.params(&x, &cx.input_type(1)?.1, &cx.input_type(2)?.1, pos.as_deref())?;
        p.elem = elem_code("input 0", t, FLOATS32)?;
        if cx.portable() {
            let tensors = [cx.input_ptr(0)?, cx.input_ptr(1)?, cx.input_ptr(2)?, cx.output_ptr(0)?];
            let positions = optional_input(cx, 3)?;
            return attention_aux_loops::rotary(cx, &p, tensors, positions);
        }
        let params = cx.params(&p)?;
        let [x, cos, sin, positions] = std::array::from_fn(|i| Ptr(cx.opt_input_ptr(i)));
        let y = Ptr(cx.output_ptr(0)?);
        cx.call_checked(kernels::onnxc_rotary_embedding, (params, x, cos, sin, positions, y))
    }
}

// ------------------------------------------------------------------- SwiGLU

#[derive(Clone, Debug)]
pub struct Swiglu {
    pub alpha: f32,
}

pub fn import_swiglu(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Swiglu(Swiglu { alpha: cx.attrs.float_or("alpha", 1.0)? }))
}

impl Operator for Swiglu {
    fn name(&self) -> &'static str {
        "SwiGLU"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (a, b) = (cx.input(0)?, cx.input(1)?);
        elem_code("input 0", a.dtype, FLOATS)?;
        check_type(cx, 1, "B", a.dtype)?;
        if a.shape != b.shape {
            return Err(format!("A {:?} and B {:?} must have one shape (no broadcasting)", a.shape, b.shape));
        }
        Ok(vec![Inferred::new(a.dtype, a.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (t, shape) = cx.input_type(0)?;
        let count = element_count(&shape).ok_or("element count overflows")?;
        let p = SwigluParams { elem: elem_code("input 0", t, FLOATS)?, count: count as i64, alpha: self.alpha as f64 };
        let (a, b, y) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?);
        if cx.portable() {
            return attention_aux_loops::swiglu(cx, &p, [a, b, y]);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_swiglu, (params, Ptr(a), Ptr(b), Ptr(y)))
    }
}

// ------------------------------------------------------ CausalConvWithState

#[derive(Clone, Debug)]
pub struct CausalConvWithState {
    pub silu: bool,
}

pub fn import_causal_conv(cx: &mut NodeImport) -> Result<Op, String> {
    let silu = match cx.attrs.string_or("activation", "none")?.as_str() {
        "none" => false,
        "silu" | "swish" => true,
        other => return Err(format!("attribute \"activation\" is \"{other}\", expected none, silu or swish")),
    };
    Ok(Op::CausalConvWithState(CausalConvWithState { silu }))
}

impl CausalConvWithState {
    fn params(&self, cx: &InferCx) -> Result<(CausalConvParams, DType), String> {
        let (x, w) = (cx.input(0)?, cx.input(1)?);
        let elem = elem_code("input 0", x.dtype, FLOATS32)?;
        for (i, name) in [(1, "weight"), (2, "bias"), (3, "past_state")] {
            check_type(cx, i, name, x.dtype)?;
        }
        let (&[b, c, len], &[wc, 1, k]) = (x.shape, w.shape) else {
            return Err(format!("input must be [B, C, L] and weight [C, 1, K], got {:?} and {:?}", x.shape, w.shape));
        };
        if wc != c || k == 0 {
            return Err(format!("weight {:?} does not match {c} channels", w.shape));
        }
        if let Some(bias) = cx.opt_input(2) {
            if bias.shape != [c] {
                return Err(format!("bias {:?} must be [{c}]", bias.shape));
            }
        }
        if let Some(past) = cx.opt_input(3) {
            if past.shape != [b, c, k - 1] {
                return Err(format!("past_state {:?} must be [{b}, {c}, {}]", past.shape, k - 1));
            }
        }
        let p = CausalConvParams {
            elem,
            batch: b as i64,
            channels: c as i64,
            len: len as i64,
            kernel: k as i64,
            silu: self.silu as i64,
        };
        Ok((p, x.dtype))
    }
}

impl Operator for CausalConvWithState {
    fn name(&self) -> &'static str {
        "CausalConvWithState"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (p, t) = self.params(cx)?;
        let (b, c, len, k) = (p.batch as usize, p.channels as usize, p.len as usize, p.kernel as usize);
        Ok(take(vec![Inferred::new(t, vec![b, c, len]), Inferred::new(t, vec![b, c, k - 1])], cx.output_count))
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let inputs = lower_inputs(cx);
        let (p, _) = self.params(&infer_view(&inputs))?;
        if cx.portable() {
            let t = CausalConvTensors {
                x: cx.input_ptr(0)?,
                w: cx.input_ptr(1)?,
                bias: optional_input(cx, 2)?,
                past: optional_input(cx, 3)?,
                y: cx.output_ptr(0)?,
                present: cx.output_ptr(1)?,
            };
            return attention_aux_loops::causal_conv(cx, &p, &t);
        }
        let params = cx.params(&p)?;
        let [x, w, bias, past] = std::array::from_fn(|i| Ptr(cx.opt_input_ptr(i)));
        let y = Ptr(cx.output_ptr(0)?);
        // present_state: always written; a planned (possibly unnamed) buffer.
        let present = Ptr(cx.output_ptr(1)?);
        cx.call_checked(kernels::onnxc_causal_conv_with_state, (params, x, w, bias, past, y, present))
    }
}

// ---------------------------------------------------------- LinearAttention

#[derive(Clone, Debug)]
pub struct LinearAttention {
    pub q_num_heads: i64,
    pub kv_num_heads: i64,
    pub scale: f32,
    pub rule: i64,
}

pub fn import_linear_attention(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let heads = |name: &str| -> Result<i64, String> {
        match a.int(name)? {
            Some(v) if v > 0 => Ok(v),
            v => Err(format!("attribute \"{name}\" is required and positive, got {v:?}")),
        }
    };
    let rule = match a.string_or("update_rule", "gated_delta")?.as_str() {
        "linear" => RULE_LINEAR,
        "gated" => RULE_GATED,
        "delta" => RULE_DELTA,
        "gated_delta" => RULE_GATED_DELTA,
        other => {
            return Err(format!(
                "attribute \"update_rule\" is \"{other}\", expected linear, gated, delta or gated_delta"
            ))
        }
    };
    let (q_num_heads, kv_num_heads) = (heads("q_num_heads")?, heads("kv_num_heads")?);
    if q_num_heads % kv_num_heads != 0 {
        return Err(format!("q_num_heads {q_num_heads} is not a multiple of kv_num_heads {kv_num_heads}"));
    }
    Ok(Op::LinearAttention(LinearAttention { q_num_heads, kv_num_heads, scale: a.float_or("scale", 0.0)?, rule }))
}

impl LinearAttention {
    fn params(&self, cx: &InferCx) -> Result<(LinearAttentionParams, DType), String> {
        let (q, k, v) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
        let elem = elem_code("input 0 (query)", q.dtype, FLOATS32)?;
        for (i, name) in [(1, "key"), (2, "value"), (3, "past_state"), (4, "decay"), (5, "beta")] {
            check_type(cx, i, name, q.dtype)?;
        }
        let (hq, hkv) = (self.q_num_heads as usize, self.kv_num_heads as usize);
        let (&[b, t, qh], &[kb, kt, kh], &[vb, vt, vh]) = (q.shape, k.shape, v.shape) else {
            return Err(format!("query, key, value must be 3-D, got {:?}, {:?}, {:?}", q.shape, k.shape, v.shape));
        };
        if (kb, kt, vb, vt) != (b, t, b, t) || qh % hq != 0 || kh % hkv != 0 || vh % hkv != 0 || qh / hq != kh / hkv {
            return Err(format!(
                "query {:?}, key {:?} and value {:?} do not agree with the head counts",
                q.shape, k.shape, v.shape
            ));
        }
        let (dk, dv) = (qh / hq, vh / hkv);
        let gated = matches!(self.rule, RULE_GATED | RULE_GATED_DELTA);
        let delta = matches!(self.rule, RULE_DELTA | RULE_GATED_DELTA);
        let decay_width = match (gated, cx.opt_input(4)) {
            (true, Some(d)) => match *d.shape {
                [db, dt, w] if (db, dt) == (b, t) && (w == hkv || w == hkv * dk) => w / hkv,
                _ => return Err(format!("decay {:?} must be [{b}, {t}, {hkv} or {}]", d.shape, hkv * dk)),
            },
            (false, None) => 1,
            (true, None) => return Err("this update_rule requires input 4 (decay)".into()),
            (false, Some(_)) => return Err("this update_rule forbids input 4 (decay)".into()),
        };
        let beta_heads = match (delta, cx.opt_input(5)) {
            (true, Some(be)) => match *be.shape {
                [bb, bt, w] if (bb, bt) == (b, t) && (w == hkv || w == 1) => w,
                _ => return Err(format!("beta {:?} must be [{b}, {t}, {hkv} or 1]", be.shape)),
            },
            (false, None) => 1,
            (true, None) => return Err("this update_rule requires input 5 (beta)".into()),
            (false, Some(_)) => return Err("this update_rule forbids input 5 (beta)".into()),
        };
        if let Some(s) = cx.opt_input(3) {
            if s.shape != [b, hkv, dk, dv] {
                return Err(format!("past_state {:?} must be [{b}, {hkv}, {dk}, {dv}]", s.shape));
            }
        }
        let scale = if self.scale == 0.0 { 1.0 / (dk as f64).sqrt() } else { self.scale as f64 };
        let p = LinearAttentionParams {
            elem,
            batch: b as i64,
            seq: t as i64,
            q_heads: hq as i64,
            kv_heads: hkv as i64,
            dk: dk as i64,
            dv: dv as i64,
            rule: self.rule,
            decay_width: decay_width as i64,
            beta_heads: beta_heads as i64,
            scale,
        };
        Ok((p, q.dtype))
    }
}

impl Operator for LinearAttention {
    fn name(&self) -> &'static str {
        "LinearAttention"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (p, t) = self.params(cx)?;
        let u = |v: i64| v as usize;
        let all = vec![
            Inferred::new(t, vec![u(p.batch), u(p.seq), u(p.q_heads * p.dv)]),
            Inferred::new(t, vec![u(p.batch), u(p.kv_heads), u(p.dk), u(p.dv)]),
        ];
        Ok(take(all, cx.output_count))
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        self.params(cx).map(|(p, _)| 4 * linear_attention_scratch_elems(&p)).unwrap_or(0)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let inputs = lower_inputs(cx);
        let (p, _) = self.params(&infer_view(&inputs))?;
        if cx.portable() {
            let t = LinearAttentionTensors {
                q: cx.input_ptr(0)?,
                k: cx.input_ptr(1)?,
                v: cx.input_ptr(2)?,
                past: optional_input(cx, 3)?,
                decay: optional_input(cx, 4)?,
                beta: optional_input(cx, 5)?,
                y: cx.output_ptr(0)?,
                present: cx.output_ptr(1)?,
                scratch: cx.scratch_ptr()?,
            };
            return linear_attention_loops::linear_attention(cx, &p, &t);
        }
        let params = cx.params(&p)?;
        let [q, k, v, past, decay, beta] = std::array::from_fn(|i| Ptr(cx.opt_input_ptr(i)));
        let (y, present, scratch) = (Ptr(cx.output_ptr(0)?), Ptr(cx.output_ptr(1)?), Ptr(cx.scratch_ptr()?));
        cx.call_checked(kernels::onnxc_linear_attention, (params, q, k, v, past, decay, beta, y, present, scratch))
    }
}
