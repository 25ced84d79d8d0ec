//! Portable LinearAttention (opset 27): loop nests over the
//! [`LinearAttentionParams`] `onnxc_linear_attention` takes, for portable
//! mode, with the kernel's semantics (`generic::attention`).
//!
//! The state `S` (`[B, kv_heads, dk, dv]`, f32 in the node's scratch)
//! starts as `past_state` or zeros. Per batch row and step, each kv head
//! first decays (gated rules: row `x` of `S` times `exp(decay[x])`, or one
//! factor for all rows), then takes `k vᵀ` where `v` is the value, or for
//! the delta rules `beta (v - Sᵀ k)` (what the state already retrieves for
//! `k` replaced); then each query head `h` reads kv head `h / group`:
//! `y = scale qᵀ S`. `present_state` is the final state. Sums are in f32
//! as the kernel's, 16-bit tensors widened on load and rounded on store.

use super::attention_loops::Element;
use super::nest::Level;
use super::{types, InstBuilder, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::abi::attention::{LinearAttentionParams, RULE_DELTA, RULE_GATED, RULE_GATED_DELTA};

/// The tensors of a LinearAttention node.
pub struct LinearAttentionTensors {
    pub q: Value,
    pub k: Value,
    pub v: Value,
    pub past: Option<Value>,
    pub decay: Option<Value>,
    pub beta: Option<Value>,
    pub y: Value,
    pub present: Value,
    /// `linear_attention_scratch_elems` f32s: the state, then one value row.
    pub scratch: Value,
}

fn size(v: i64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("LinearAttention's {what} is {v}"))
}

/// LinearAttention as `p` describes it over `t`.
pub fn linear_attention(cx: &mut Lower, p: &LinearAttentionParams, t: &LinearAttentionTensors) -> Result<(), String> {
    let e = Element::of_code(p.elem, "LinearAttention's element")?;
    if e.dtype == DType::F64 {
        return Err("LinearAttention of f64 has no portable lowering".into());
    }
    let (nb, nt) = (size(p.batch, "batch")?, size(p.seq, "sequence length")?);
    let (hq, hkv) = (size(p.q_heads, "query head count")?, size(p.kv_heads, "kv head count")?);
    let (dk, dv) = (size(p.dk, "key size")?, size(p.dv, "value size")?);
    if hkv == 0 || hq % hkv != 0 {
        return Err(format!("LinearAttention's {hq} query heads are not a multiple of {hkv} kv heads"));
    }
    let eb = e.bytes();
    let flags = MemFlagsData::trusted();
    let state_len = nb * hkv * dk * dv;
    let head_state = (dk * dv * 4) as i64;
    let state = t.scratch;
    let values = cx.ins().iadd_imm_s(state, state_len as i64 * 4);
    // S = past_state or zeros.
    let src = t.past.unwrap_or(t.present);
    cx.nest(&[Level::new(state_len, vec![eb, 4])], &[src, state], &mut |cx, _, at| {
        let v = match t.past {
            Some(_) => e.load(cx, at[0]),
            None => cx.ins().f32const(0.0),
        };
        cx.ins().store(flags, v, at[1], 0);
        Ok(())
    })?;
    let gated = matches!(p.rule, RULE_GATED | RULE_GATED_DELTA);
    let delta = matches!(p.rule, RULE_DELTA | RULE_GATED_DELTA);
    let (hkv_i, nt_i) = (hkv as i64, nt as i64);
    let (dk_i, dv_i, w, bh) = (dk as i64, dv as i64, p.decay_width, p.beta_heads);
    let null = cx.iconst(0);
    let (decay, beta) = (t.decay.unwrap_or(null), t.beta.unwrap_or(null));
    // Pointers: S, K, V, decay, beta, Q, Y.
    let steps = [
        Level::new(
            nb,
            vec![
                hkv_i * head_state,
                nt_i * hkv_i * dk_i * eb,
                nt_i * hkv_i * dv_i * eb,
                nt_i * hkv_i * w * eb,
                nt_i * bh * eb,
                nt_i * hq as i64 * dk_i * eb,
                nt_i * hq as i64 * dv_i * eb,
            ],
        ),
        Level::new(
            nt,
            vec![
                0,
                hkv_i * dk_i * eb,
                hkv_i * dv_i * eb,
                hkv_i * w * eb,
                bh * eb,
                hq as i64 * dk_i * eb,
                hq as i64 * dv_i * eb,
            ],
        ),
    ];
    let beta_head_step = if bh == 1 { 0 } else { eb };
    let group = (hq / hkv) as i64;
    cx.nest(&steps, &[state, t.k, t.v, decay, beta, t.q, t.y], &mut |cx, _, at| {
        let heads = [Level::new(hkv, vec![head_state, dk_i * eb, dv_i * eb, w * eb, beta_head_step])];
        cx.nest(&heads, &at[..5], &mut |cx, _, h| {
            let (s, k, v) = (h[0], h[1], h[2]);
            if gated {
                let decay_step = if w == 1 { 0 } else { eb };
                let rows = [Level::new(dk, vec![dv_i * 4, decay_step])];
                cx.nest(&rows, &[s, h[3]], &mut |cx, _, r| {
                    let d = e.load(cx, r[1]);
                    let g = e.math(cx, "exp", d)?;
                    cx.nest(&[Level::new(dv, vec![4])], &[r[0]], &mut |cx, _, m| {
                        let sv = cx.ins().load(types::F32, flags, m[0], 0);
                        let sv = cx.ins().fmul(sv, g);
                        cx.ins().store(flags, sv, m[0], 0);
                        Ok(())
                    })
                })?;
            }
            let bt = if delta { Some(e.load(cx, h[4])) } else { None };
            cx.nest(&[Level::new(dv, vec![eb, 4, 4])], &[v, values, s], &mut |cx, _, m| {
                let mut val = e.load(cx, m[0]);
                if let Some(bt) = bt {
                    let zero = cx.ins().f32const(0.0);
                    let column = [Level::new(dk, vec![dv_i * 4, eb])];
                    let retrieved = cx.fold_nest(&column, &[m[2], k], &[zero], &mut |cx, _, x, acc| {
                        let sv = cx.ins().load(types::F32, flags, x[0], 0);
                        let kv = e.load(cx, x[1]);
                        let prod = cx.ins().fmul(sv, kv);
                        Ok(vec![cx.ins().fadd(acc[0], prod)])
                    })?[0];
                    let diff = cx.ins().fsub(val, retrieved);
                    val = cx.ins().fmul(bt, diff);
                }
                cx.ins().store(flags, val, m[1], 0);
                Ok(())
            })?;
            cx.nest(&[Level::new(dk, vec![dv_i * 4, eb])], &[s, k], &mut |cx, _, x| {
                let kx = e.load(cx, x[1]);
                cx.nest(&[Level::new(dv, vec![4, 4])], &[x[0], values], &mut |cx, _, m| {
                    let sv = cx.ins().load(types::F32, flags, m[0], 0);
                    let vt = cx.ins().load(types::F32, flags, m[1], 0);
                    let prod = cx.ins().fmul(kx, vt);
                    let sv = cx.ins().fadd(sv, prod);
                    cx.ins().store(flags, sv, m[0], 0);
                    Ok(())
                })
            })
        })?;
        let queries = [
            Level::new(hkv, vec![head_state, group * dk_i * eb, group * dv_i * eb]),
            Level::new(group as usize, vec![0, dk_i * eb, dv_i * eb]),
        ];
        let scale = cx.ins().f32const(p.scale as f32);
        cx.nest(&queries, &[at[0], at[5], at[6]], &mut |cx, _, h| {
            cx.nest(&[Level::new(dv, vec![4, 0, eb])], &[h[0], h[1], h[2]], &mut |cx, _, m| {
                let zero = cx.ins().f32const(0.0);
                let row = [Level::new(dk, vec![dv_i * 4, eb])];
                let acc = cx.fold_nest(&row, &[m[0], m[1]], &[zero], &mut |cx, _, x, acc| {
                    let qv = e.load(cx, x[1]);
                    let sv = cx.ins().load(types::F32, flags, x[0], 0);
                    let prod = cx.ins().fmul(qv, sv);
                    Ok(vec![cx.ins().fadd(acc[0], prod)])
                })?[0];
                let out = cx.ins().fmul(scale, acc);
                e.store(cx, out, m[2]);
                Ok(())
            })
        })
    })?;
    cx.nest(&[Level::new(state_len, vec![4, eb])], &[state, t.present], &mut |cx, _, at| {
        let v = cx.ins().load(types::F32, flags, at[0], 0);
        e.store(cx, v, at[1]);
        Ok(())
    })
}
