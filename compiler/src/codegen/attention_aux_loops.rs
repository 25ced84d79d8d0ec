//! Portable RotaryEmbedding, SwiGLU and CausalConvWithState: loop nests
//! over the params their kernels take (`generic::attention` in the kernel
//! library), for portable mode, with the kernels' roundings of 16-bit
//! types ([`Element`]).
//!
//! * RotaryEmbedding: every position id is checked against the cache's
//!   rows first (one outside leaves with [`status::INDEX_OUT_OF_RANGE`]
//!   before anything is written); then per `(b, s, h)` each rotated pair
//!   is `(c x1 - s x2, s x1 + c x2)`, each product rounded, and the
//!   elements past the rotary dim are copied.
//! * SwiGLU: `a * sigmoid(alpha a) * b`, the sigmoid as `1 / (1 + e^-(alpha
//!   a))` rounded after each step.
//! * CausalConvWithState: per `(b, c)` row, output `t` is `bias + sum_i
//!   w[i] x'[t + i]` over `x' = concat(past or zeros, x)`, rounded, then
//!   SiLU'd when asked; `present` is the last `K - 1` elements of `x'`.
//!   Where `x'[t + i]` lies is decided per element (a select of two
//!   clamped, always valid addresses), so no address outside a tensor is
//!   formed into a load.

use super::attention_loops::Element;
use super::nest::Level;
use super::{status, InstBuilder, IntCC, Lower, Value};
use onnxc_runtime::abi::attention::{CausalConvParams, RotaryParams, SwigluParams};

fn size(v: i64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{what} is {v}"))
}

/// RotaryEmbedding of `x` into `y` with the caches `cos`, `sin` and the
/// optional `position_ids`.
pub fn rotary(
    cx: &mut Lower,
    p: &RotaryParams,
    [x, cos, sin, y]: [Value; 4],
    positions: Option<Value>,
) -> Result<(), String> {
    let e = Element::of_code(p.elem, "RotaryEmbedding's element")?;
    let eb = e.bytes();
    let (batch, seq, heads) = (size(p.batch, "batch")?, size(p.seq, "sequence")?, size(p.heads, "head count")?);
    let (half, d) = (size(p.rotary_dim / 2, "rotary dim")?, size(p.head_size, "head size")?);
    let grid = [Level::new(batch, vec![]), Level::new(seq, vec![])];
    // The cache row of position (b, t), from the ids or the position itself.
    let cache_row = |cx: &mut Lower, index: &[Value]| -> Value {
        let flat = cx.ins().imul_imm_s(index[0], p.pos_strides[0]);
        let along = cx.ins().imul_imm_s(index[1], p.pos_strides[1]);
        let flat = cx.ins().iadd(flat, along);
        match positions {
            Some(ids) => {
                let at = cx.advance(ids, flat, 8);
                let ptr = cx.ptr_type();
                cx.ins().load(ptr, super::MemFlagsData::trusted(), at, 0)
            }
            None => flat,
        }
    };
    if positions.is_some() {
        cx.nest(&grid, &[], &mut |cx, index, _| {
            let row = cache_row(cx, index);
            let outside = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, row, p.cache_rows);
            cx.fail_if(outside, status::INDEX_OUT_OF_RANGE);
            Ok(())
        })?;
    }
    let s = p.x_strides;
    // The pair's first element steps by `pair_step`, the second is `second` bytes after it.
    let (pair_step, second) = if p.interleaved != 0 { (2 * eb, eb) } else { (eb, half as i64 * eb) };
    let tail = (d - 2 * half) as i64 * eb;
    cx.nest(&grid, &[], &mut |cx, index, _| {
        let row = cache_row(cx, index);
        let cache_at = cx.ins().imul_imm_s(row, half as i64 * eb);
        let (c_row, s_row) = (cx.ins().iadd(cos, cache_at), cx.ins().iadd(sin, cache_at));
        let off = cx.ins().imul_imm_s(index[0], s[0] * eb);
        let along = cx.ins().imul_imm_s(index[1], s[2] * eb);
        let off = cx.ins().iadd(off, along);
        let (xr, yr) = (cx.ins().iadd(x, off), cx.ins().iadd(y, off));
        cx.nest(&[Level::new(heads, vec![s[1] * eb, s[1] * eb])], &[xr, yr], &mut |cx, _, head| {
            let pairs = [Level::new(half, vec![pair_step, pair_step, eb, eb])];
            cx.nest(&pairs, &[head[0], head[1], c_row, s_row], &mut |cx, _, at| {
                let (x1, y1) = (at[0], at[1]);
                let (x2, y2) = (cx.ins().iadd_imm_s(x1, second), cx.ins().iadd_imm_s(y1, second));
                let (a, b) = (e.load(cx, x1), e.load(cx, x2));
                let (c, sn) = (e.load(cx, at[2]), e.load(cx, at[3]));
                let terms = [(c, a), (sn, b), (sn, a), (c, b)].map(|(u, v)| {
                    let m = cx.ins().fmul(u, v);
                    e.round(cx, m)
                });
                let real = cx.ins().fsub(terms[0], terms[1]);
                let imag = cx.ins().fadd(terms[2], terms[3]);
                e.store(cx, real, y1);
                e.store(cx, imag, y2);
                Ok(())
            })?;
            let rest = 2 * half as i64 * eb;
            let (from, to) = (cx.ins().iadd_imm_s(head[0], rest), cx.ins().iadd_imm_s(head[1], rest));
            cx.copy_bytes(to, from, tail as usize);
            Ok(())
        })
    })
}

/// SwiGLU of `a` and `b` into `y`.
pub fn swiglu(cx: &mut Lower, p: &SwigluParams, [a, b, y]: [Value; 3]) -> Result<(), String> {
    let e = Element::of_code(p.elem, "SwiGLU's element")?;
    let eb = e.bytes();
    let alpha = e.constant(cx, p.alpha);
    let one = e.constant(cx, 1.0);
    cx.nest(&[Level::new(size(p.count, "element count")?, vec![eb; 3])], &[a, b, y], &mut |cx, _, at| {
        let av = e.load(cx, at[0]);
        let scaled = cx.ins().fmul(alpha, av);
        let neg = cx.ins().fneg(scaled);
        let neg = e.round(cx, neg);
        let ex = e.math(cx, "exp", neg)?;
        let ex = e.round(cx, ex);
        let den = cx.ins().fadd(one, ex);
        let den = e.round(cx, den);
        let sig = cx.ins().fdiv(one, den);
        let sig = e.round(cx, sig);
        let swish = cx.ins().fmul(av, sig);
        let swish = e.round(cx, swish);
        let bv = e.load(cx, at[1]);
        let out = cx.ins().fmul(swish, bv);
        e.store(cx, out, at[2]);
        Ok(())
    })
}

/// The tensors of a CausalConvWithState node.
pub struct CausalConvTensors {
    pub x: Value,
    pub w: Value,
    pub bias: Option<Value>,
    pub past: Option<Value>,
    pub y: Value,
    pub present: Value,
}

/// CausalConvWithState as `p` describes it over `t`.
pub fn causal_conv(cx: &mut Lower, p: &CausalConvParams, t: &CausalConvTensors) -> Result<(), String> {
    let e = Element::of_code(p.elem, "CausalConvWithState's element")?;
    let eb = e.bytes();
    let (batch, c, len) = (size(p.batch, "batch")?, size(p.channels, "channels")?, size(p.len, "length")?);
    let k = size(p.kernel, "kernel")?;
    let st = k.saturating_sub(1) as i64;
    let len_i = len as i64;
    let null = cx.iconst(0);
    let past = t.past.unwrap_or(null);
    let bias = t.bias.unwrap_or(null);
    let rows = [
        Level::new(
            batch,
            vec![c as i64 * len_i * eb, c as i64 * st * eb, 0, 0, c as i64 * len_i * eb, c as i64 * st * eb],
        ),
        Level::new(c, vec![len_i * eb, st * eb, k as i64 * eb, eb, len_i * eb, st * eb]),
    ];
    // Element `idx` (a pointer-sized value) of `concat(past, x)` for the row at `at`.
    let padded = |cx: &mut Lower, at: &[Value], idx: Value| -> Value {
        let in_x = cx.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, idx, st);
        let zero_index = cx.iconst(0);
        let x_index = cx.ins().iadd_imm_s(idx, -st);
        let x_index = cx.ins().select(in_x, x_index, zero_index);
        let x_at = cx.advance(at[0], x_index, eb);
        let xv = e.load(cx, x_at);
        let earlier = match t.past {
            Some(_) if st > 0 => {
                let p_index = cx.ins().select(in_x, zero_index, idx);
                let p_at = cx.advance(at[1], p_index, eb);
                e.load(cx, p_at)
            }
            _ => e.constant(cx, 0.0),
        };
        cx.ins().select(in_x, xv, earlier)
    };
    cx.nest(&rows, &[t.x, past, t.w, bias, t.y, t.present], &mut |cx, _, at| {
        let b0 = match t.bias {
            Some(_) => e.load(cx, at[3]),
            None => e.constant(cx, 0.0),
        };
        cx.nest(&[Level::new(len, vec![eb])], &[at[4]], &mut |cx, index, out| {
            let taps = [Level::new(k, vec![eb])];
            let acc = cx.fold_nest(&taps, &[at[2]], &[b0], &mut |cx, tap, w, acc| {
                let idx = cx.ins().iadd(index[0], tap[0]);
                let xv = padded(cx, at, idx);
                let wv = e.load(cx, w[0]);
                let m = cx.ins().fmul(wv, xv);
                Ok(vec![cx.ins().fadd(acc[0], m)])
            })?[0];
            let mut v = e.round(cx, acc);
            if p.silu != 0 {
                let neg = cx.ins().fneg(v);
                let ex = e.math(cx, "exp", neg)?;
                let one = e.constant(cx, 1.0);
                let den = cx.ins().fadd(one, ex);
                let sig = cx.ins().fdiv(one, den);
                v = cx.ins().fmul(v, sig);
            }
            e.store(cx, v, out[0]);
            Ok(())
        })?;
        // present[i] = x'[len + i]: the past's tail (or zeros) where
        // `len + i < K - 1`, then x's; the split is known here.
        let from_past = (st - len_i).clamp(0, st) as usize;
        cx.nest(&[Level::new(from_past, vec![eb])], &[at[5]], &mut |cx, index, out| {
            let v = match t.past {
                Some(_) => {
                    let src = cx.ins().iadd_imm_s(at[1], len_i * eb);
                    let src = cx.advance(src, index[0], eb);
                    e.load(cx, src)
                }
                None => e.constant(cx, 0.0),
            };
            e.store(cx, v, out[0]);
            Ok(())
        })?;
        let from_x = st as usize - from_past;
        let dst = cx.ins().iadd_imm_s(at[5], from_past as i64 * eb);
        let src = cx.ins().iadd_imm_s(at[0], (len_i - from_x as i64) * eb);
        cx.copy_bytes(dst, src, from_x * eb as usize);
        Ok(())
    })
}
