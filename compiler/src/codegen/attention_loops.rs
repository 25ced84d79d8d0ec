//! Portable Attention (opsets 23-25): loop nests over the same
//! [`AttentionParams`] `onnxc_attention` takes, for portable mode.
//!
//! The semantics are the kernel's (`generic::attention` in the kernel
//! library), re-derived as instructions: per query row `(b, h, i)`, one
//! pass over the keys computes `softcap(Q*s . K*s) + bias` into a scratch
//! row (`s = sqrt(scale)`), the bias being the mask (bool: 0 or -inf;
//! additive: its value; past its short last dim: -inf) plus -inf where the
//! causal frontier, the sliding window or `nonpad_kv_seqlen` blocks the
//! key; a second pass takes the row's maximum, ignoring NaN but noting
//! it; a third the exponentials and their sum; a fourth the
//! probabilities (all zero when every bias was -inf, all NaN when a score
//! was NaN); then each output column is one fold of probabilities times
//! values. `qk_matmul_output` stores the score after the product, after
//! the softcap, after the bias (modes 0-2) or the probability (mode 3).
//!
//! The keys and values are two segments, `past_key`/`past_value` then
//! K/V, so a key's row is read where it lies (no concatenated copy);
//! `present_key`/`present_value` are those segments copied row by row.
//! Query head `h` of a group of `q_heads / kv_heads` reads kv head
//! `h / group`: the nest runs kv heads outside and the heads of a group
//! inside, so no division is emitted.
//!
//! f16 and bf16 compute in f32, rounded to the element type where the
//! ONNX reference rounds (each scaled element, each product's result,
//! each softcap step, the biased score, the probability), and the
//! softmax steps round to `softmax_precision` ([`half_floats`]' exact
//! conversions); f64 computes in f64. A mask index past its last dim is
//! never read: the address is clamped and the value replaced by -inf.

use super::nest::Level;
use super::{half_floats, portable_math, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Type, Value};
use crate::ir::DType;
use onnxc_runtime::abi::attention::{AttentionParams, MASK_BOOL, MASK_NONE};

/// The tensors of an Attention node; `None` for the absent ones.
pub struct AttentionTensors {
    pub q: Value,
    pub k: Value,
    pub v: Value,
    pub mask: Option<Value>,
    pub past_key: Option<Value>,
    pub past_value: Option<Value>,
    pub nonpad: Option<Value>,
    pub y: Option<Value>,
    pub present_key: Option<Value>,
    pub present_value: Option<Value>,
    pub qk: Option<Value>,
    /// At least `total` values of the compute type (the kernel's scratch).
    pub scratch: Value,
}

/// A float tensor element type (f16, bf16, f32, f64) and how the
/// attention family computes on it: f32, or f64 for f64 tensors.
#[derive(Clone, Copy)]
pub(super) struct Element {
    pub dtype: DType,
}

impl Element {
    /// The element type of kernel element code `code` (`what` names it in errors).
    pub fn of_code(code: i64, what: &str) -> Result<Element, String> {
        dtype_of(code, what).map(|dtype| Element { dtype })
    }

    pub fn compute(self) -> DType {
        if self.dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        }
    }

    pub fn ty(self) -> Type {
        if self.dtype == DType::F64 {
            types::F64
        } else {
            types::F32
        }
    }

    /// Bytes of an element in memory.
    pub fn bytes(self) -> i64 {
        self.dtype.size() as i64
    }

    pub fn constant(self, cx: &mut Lower, v: f64) -> Value {
        if self.dtype == DType::F64 {
            cx.ins().f64const(v)
        } else {
            cx.ins().f32const(v as f32)
        }
    }

    /// The element at `at` as the compute type.
    pub fn load(self, cx: &mut Lower, at: Value) -> Value {
        let flags = MemFlagsData::trusted();
        match self.dtype {
            DType::F16 | DType::BF16 => {
                let h = cx.ins().uload16(types::I32, flags, at, 0);
                half_floats::widen(cx.b, self.dtype, h)
            }
            _ => cx.ins().load(self.ty(), flags, at, 0),
        }
    }

    /// Stores a compute value at `at` as an element, to nearest even.
    pub fn store(self, cx: &mut Lower, v: Value, at: Value) {
        let flags = MemFlagsData::trusted();
        match self.dtype {
            DType::F16 | DType::BF16 => {
                let h = half_floats::narrow(cx.b, self.dtype, v);
                cx.ins().istore16(flags, h, at, 0);
            }
            _ => {
                cx.ins().store(flags, v, at, 0);
            }
        }
    }

    /// A compute value rounded to the element type.
    pub fn round(self, cx: &mut Lower, v: Value) -> Value {
        round_f32_to(cx, self.dtype, v)
    }

    /// `name` (`exp`, `tanh`) of a compute value.
    pub fn math(self, cx: &mut Lower, name: &str, v: Value) -> Result<Value, String> {
        portable_math::apply(cx.b, name, self.compute(), v).ok_or_else(|| format!("no portable {name}"))
    }
}

/// The element types and sizes one node works with.
struct Attn<'a> {
    p: &'a AttentionParams,
    /// The tensors' type (Q, K, V, the past and present caches, Y).
    elem: Element,
    /// The type softmax steps round to.
    softmax: DType,
    /// Bytes of an element, of a compute value and of a mask entry.
    eb: i64,
    cb: i64,
    mb: i64,
    hq: usize,
    hkv: usize,
    sq: usize,
    past: usize,
    total: usize,
    d: usize,
    dv: usize,
}

/// The element type of a kernel element code.
fn dtype_of(code: i64, what: &str) -> Result<DType, String> {
    match i32::try_from(code).ok().and_then(DType::from_onnx) {
        Some(d @ (DType::F16 | DType::BF16 | DType::F32 | DType::F64)) => Ok(d),
        other => Err(format!("Attention's {what} type {other:?} has no portable lowering")),
    }
}

fn size(v: i64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("Attention's {what} is {v}"))
}

/// Lowers Attention as `p` describes it over `t`.
pub fn attention(cx: &mut Lower, p: &AttentionParams, t: &AttentionTensors) -> Result<(), String> {
    let elem = Element::of_code(p.elem, "element")?;
    let (hq, hkv) = (size(p.q_heads, "query head count")?, size(p.kv_heads, "kv head count")?);
    if hkv == 0 || hq % hkv != 0 {
        return Err(format!("Attention's {hq} query heads are not a multiple of {hkv} kv heads"));
    }
    let (past, skv) = (size(p.past_seq, "past length")?, size(p.kv_seq, "kv length")?);
    let eb = elem.bytes();
    let a = Attn {
        p,
        elem,
        softmax: dtype_of(p.softmax_elem, "softmax precision")?,
        eb,
        cb: elem.compute().size() as i64,
        mb: if p.mask_kind == MASK_BOOL { 1 } else { eb },
        hq,
        hkv,
        sq: size(p.q_seq, "query length")?,
        past,
        total: past + skv,
        d: size(p.head_size, "head size")?,
        dv: size(p.v_head_size, "value head size")?,
    };
    let batch = size(p.batch, "batch")?;
    a.copy_present(cx, batch, t.present_key, t.past_key, t.k, a.d, &p.k_strides)?;
    a.copy_present(cx, batch, t.present_value, t.past_value, t.v, a.dv, &p.v_strides)?;
    a.rows(cx, batch, t)
}

/// A run of keys (or values): where its first row of the current kv head
/// starts, the bytes between rows, how many there are and the index of
/// the first in the whole sequence.
#[derive(Clone, Copy)]
struct Segment {
    base: Value,
    row_step: i64,
    count: usize,
    start: usize,
}

impl Attn<'_> {
    /// `v` rounded to the softmax precision.
    fn round_softmax(&self, cx: &mut Lower, v: Value) -> Value {
        match (self.elem.compute(), self.softmax) {
            (DType::F64, DType::F64) => v,
            (DType::F64, narrow) => {
                let single = cx.ins().fdemote(types::F32, v);
                let single = round_f32_to(cx, narrow, single);
                cx.ins().fpromote(types::F64, single)
            }
            (_, narrow) => round_f32_to(cx, narrow, v),
        }
    }

    /// `present` (when wanted): for each `(b, kv head)` the past rows, then
    /// the new ones, each `width` elements.
    #[allow(clippy::too_many_arguments)]
    fn copy_present(
        &self,
        cx: &mut Lower,
        batch: usize,
        present: Option<Value>,
        past: Option<Value>,
        new: Value,
        width: usize,
        new_strides: &[i64; 3],
    ) -> Result<(), String> {
        let Some(present) = present else {
            return Ok(());
        };
        let row = width as i64 * self.eb;
        let past = past.unwrap_or(present);
        let heads = [
            Level::new(
                batch,
                vec![
                    self.hkv as i64 * self.total as i64 * row,
                    self.hkv as i64 * self.past as i64 * row,
                    new_strides[0] * self.eb,
                ],
            ),
            Level::new(self.hkv, vec![self.total as i64 * row, self.past as i64 * row, new_strides[1] * self.eb]),
        ];
        let (past_rows, new_rows) = (self.past, self.total - self.past);
        cx.nest(&heads, &[present, past, new], &mut |cx, _, at| {
            cx.nest(&[Level::new(past_rows, vec![row, row])], &at[..2], &mut |cx, _, r| {
                cx.copy_bytes(r[0], r[1], row as usize);
                Ok(())
            })?;
            let first_new = cx.ins().iadd_imm_s(at[0], past_rows as i64 * row);
            cx.nest(
                &[Level::new(new_rows, vec![row, new_strides[2] * self.eb])],
                &[first_new, at[2]],
                &mut |cx, _, r| {
                    cx.copy_bytes(r[0], r[1], row as usize);
                    Ok(())
                },
            )
        })
    }

    /// Every query row: the nest over `(b, kv head, head of its group, i)`.
    fn rows(&self, cx: &mut Lower, batch: usize, t: &AttentionTensors) -> Result<(), String> {
        let p = self.p;
        let (eb, mb) = (self.eb, self.mb);
        let group = self.hq / self.hkv;
        let g = group as i64;
        let qk_row = self.total as i64 * eb;
        let null = cx.iconst(0);
        let (pk, pv) = (t.past_key.unwrap_or(null), t.past_value.unwrap_or(null));
        let (pk_head, pv_head) = (self.past as i64 * self.d as i64 * eb, self.past as i64 * self.dv as i64 * eb);
        let (qs, ks, vs, ys, ms) = (p.q_strides, p.k_strides, p.v_strides, p.y_strides, p.mask_strides);
        // Pointers: Q, Y, qk, mask (rows); K, V, past K, past V (heads).
        let ptrs = [t.q, t.y.unwrap_or(null), t.qk.unwrap_or(null), t.mask.unwrap_or(null), t.k, t.v, pk, pv];
        let levels = [
            Level::new(
                batch,
                vec![
                    qs[0] * eb,
                    ys[0] * eb,
                    self.hq as i64 * self.sq as i64 * qk_row,
                    ms[0] * mb,
                    ks[0] * eb,
                    vs[0] * eb,
                    self.hkv as i64 * pk_head,
                    self.hkv as i64 * pv_head,
                ],
            ),
            Level::new(
                self.hkv,
                vec![
                    g * qs[1] * eb,
                    g * ys[1] * eb,
                    g * self.sq as i64 * qk_row,
                    g * ms[1] * mb,
                    ks[1] * eb,
                    vs[1] * eb,
                    pk_head,
                    pv_head,
                ],
            ),
            Level::new(group, vec![qs[1] * eb, ys[1] * eb, self.sq as i64 * qk_row, ms[1] * mb]),
            Level::new(self.sq, vec![qs[2] * eb, ys[2] * eb, qk_row, ms[2] * mb]),
        ];
        cx.nest(&levels, &ptrs, &mut |cx, index, at| {
            let keys = [
                Segment { base: at[6], row_step: self.d as i64 * eb, count: self.past, start: 0 },
                Segment { base: at[4], row_step: ks[2] * eb, count: self.total - self.past, start: self.past },
            ];
            let values = [
                Segment { base: at[7], row_step: self.dv as i64 * eb, count: self.past, start: 0 },
                Segment { base: at[5], row_step: vs[2] * eb, count: self.total - self.past, start: self.past },
            ];
            let row = Row { q: at[0], y: at[1], qk: t.qk.map(|_| at[2]), mask: at[3], scores: t.scratch };
            let frontier = self.frontier(cx, t.nonpad, index[0], index[3]);
            let all_masked = self.scores(cx, &row, &keys, &frontier)?;
            self.softmax(cx, &row, all_masked)?;
            match t.y {
                Some(_) => self.weigh_values(cx, &row, &values),
                None => Ok(()),
            }
        })
    }

    /// The query position and the count of valid keys of batch row `b`,
    /// query `i`: `offset + i` with the offset `nonpad_kv_seqlen[b] - q_seq`
    /// when that input is given (then the count is `nonpad_kv_seqlen[b]`),
    /// else `past_seq`.
    fn frontier(&self, cx: &mut Lower, nonpad: Option<Value>, b: Value, i: Value) -> Frontier {
        let ptr = cx.ptr_type();
        match nonpad {
            Some(n) => {
                let at = cx.advance(n, b, 8);
                let valid = cx.ins().load(ptr, MemFlagsData::trusted(), at, 0);
                let offset = cx.ins().iadd_imm_s(valid, -(self.sq as i64));
                Frontier { pos: cx.ins().iadd(offset, i), valid: Some(valid) }
            }
            None => Frontier { pos: cx.ins().iadd_imm_s(i, self.past as i64), valid: None },
        }
    }

    /// `(b, i, j)`'s bias: the mask's entry and -inf where the key is
    /// blocked.
    fn bias(&self, cx: &mut Lower, mask_row: Value, j: Value, f: &Frontier) -> Value {
        let p = self.p;
        let neg_inf = self.elem.constant(cx, f64::NEG_INFINITY);
        let mut bias = match (p.mask_kind, p.mask_len) {
            (MASK_NONE, _) => self.elem.constant(cx, 0.0),
            (_, 0) => neg_inf,
            (kind, len) => {
                let inside = cx.ins().icmp_imm_s(IntCC::SignedLessThan, j, len);
                let zero_index = cx.iconst(0);
                let index = cx.ins().select(inside, j, zero_index);
                let at = cx.advance(mask_row, index, self.mb);
                let value = if kind == MASK_BOOL {
                    let m = cx.ins().load(types::I8, MemFlagsData::trusted(), at, 0);
                    let attend = cx.ins().icmp_imm_s(IntCC::NotEqual, m, 0);
                    let zero = self.elem.constant(cx, 0.0);
                    cx.ins().select(attend, zero, neg_inf)
                } else {
                    self.elem.load(cx, at)
                };
                cx.ins().select(inside, value, neg_inf)
            }
        };
        let mut blocked = Vec::new();
        if p.is_causal != 0 {
            blocked.push(cx.ins().icmp(IntCC::SignedGreaterThan, j, f.pos));
        }
        if p.left_window >= 0 {
            let behind = cx.ins().isub(f.pos, j);
            blocked.push(cx.ins().icmp_imm_s(IntCC::SignedGreaterThan, behind, p.left_window));
        }
        if p.right_window >= 0 {
            let ahead = cx.ins().isub(j, f.pos);
            blocked.push(cx.ins().icmp_imm_s(IntCC::SignedGreaterThan, ahead, p.right_window));
        }
        if let Some(valid) = f.valid {
            blocked.push(cx.ins().icmp(IntCC::SignedGreaterThanOrEqual, j, valid));
        }
        if let Some((&first, rest)) = blocked.split_first() {
            let any = rest.iter().fold(first, |acc, &c| cx.ins().bor(acc, c));
            let sum = cx.ins().fadd(bias, neg_inf);
            let sum = self.elem.round(cx, sum);
            bias = cx.ins().select(any, sum, bias);
        }
        bias
    }

    /// The first pass: each key's score into the scratch row (and the qk
    /// output of modes 0-2); returns whether every bias was -inf.
    fn scores(&self, cx: &mut Lower, row: &Row, keys: &[Segment; 2], f: &Frontier) -> Result<Value, String> {
        let p = self.p;
        let (eb, cb) = (self.eb, self.cb);
        let root = self.elem.constant(cx, p.scale.sqrt());
        let scale = self.elem.round(cx, root);
        let softcap = (p.softcap > 0.0).then(|| self.elem.constant(cx, p.softcap));
        let neg_inf = self.elem.constant(cx, f64::NEG_INFINITY);
        let dot_level = [Level::new(self.d, vec![eb, eb])];
        let mut all_masked = cx.ins().iconst(types::I8, 1);
        for seg in keys {
            let scores = cx.ins().iadd_imm_s(row.scores, seg.start as i64 * cb);
            let qk = row.qk.map(|q| cx.ins().iadd_imm_s(q, seg.start as i64 * eb)).unwrap_or(scores);
            let level = [Level::new(seg.count, vec![seg.row_step, cb, eb])];
            all_masked = cx.fold_nest(&level, &[seg.base, scores, qk], &[all_masked], &mut |cx, index, at, acc| {
                let j = cx.ins().iadd_imm_s(index[0], seg.start as i64);
                let bias = self.bias(cx, row.mask, j, f);
                let masked = cx.ins().fcmp(FloatCC::Equal, bias, neg_inf);
                let all = cx.ins().band(acc[0], masked);
                let zero = self.elem.constant(cx, 0.0);
                let dot = cx.fold_nest(&dot_level, &[row.q, at[0]], &[zero], &mut |cx, _, x, acc| {
                    let (q, k) = (self.elem.load(cx, x[0]), self.elem.load(cx, x[1]));
                    let (q, k) = (cx.ins().fmul(q, scale), cx.ins().fmul(k, scale));
                    let (q, k) = (self.elem.round(cx, q), self.elem.round(cx, k));
                    let product = cx.ins().fmul(q, k);
                    Ok(vec![cx.ins().fadd(acc[0], product)])
                })?[0];
                let raw = self.elem.round(cx, dot);
                let capped = match softcap {
                    Some(cap) => self.softcap(cx, raw, cap)?,
                    None => raw,
                };
                let biased = cx.ins().fadd(capped, bias);
                let biased = self.elem.round(cx, biased);
                cx.ins().store(MemFlagsData::trusted(), biased, at[1], 0);
                if row.qk.is_some() && p.qk_mode < 3 {
                    let out = [raw, capped, biased][p.qk_mode as usize];
                    self.elem.store(cx, out, at[2]);
                }
                Ok(vec![all])
            })?[0];
        }
        Ok(all_masked)
    }

    /// `cap * tanh(s / cap)`, each step rounded to the element type.
    fn softcap(&self, cx: &mut Lower, s: Value, cap: Value) -> Result<Value, String> {
        let x = cx.ins().fdiv(s, cap);
        let x = self.elem.round(cx, x);
        let th = self.elem.math(cx, "tanh", x)?;
        let th = self.elem.round(cx, th);
        let y = cx.ins().fmul(th, cap);
        Ok(self.elem.round(cx, y))
    }

    /// Passes two to four: the scratch row of scores becomes
    /// probabilities (and the qk output of mode 3).
    fn softmax(&self, cx: &mut Lower, row: &Row, all_masked: Value) -> Result<(), String> {
        let cb = self.cb;
        let flags = MemFlagsData::trusted();
        let ty = self.elem.ty();
        let along = [Level::new(self.total, vec![cb, self.eb])];
        let qk = row.qk.filter(|_| self.p.qk_mode == 3);
        let ptrs = [row.scores, qk.unwrap_or(row.scores)];
        let neg_inf = self.elem.constant(cx, f64::NEG_INFINITY);
        let no_nan = cx.ins().iconst(types::I8, 0);
        let found = cx.fold_nest(&along, &ptrs, &[neg_inf, no_nan], &mut |cx, _, at, acc| {
            let s = cx.ins().load(ty, flags, at[0], 0);
            let s = self.round_softmax(cx, s);
            let is_nan = cx.ins().fcmp(FloatCC::Unordered, s, s);
            let nan = cx.ins().bor(acc[1], is_nan);
            let above = cx.ins().fcmp(FloatCC::GreaterThan, s, acc[0]);
            Ok(vec![cx.ins().select(above, s, acc[0]), nan])
        })?;
        let (zero, one) = (self.elem.constant(cx, 0.0), self.elem.constant(cx, 1.0));
        let empty = cx.ins().fcmp(FloatCC::Equal, found[0], neg_inf);
        let max = cx.ins().select(empty, zero, found[0]);
        let sum = cx.fold_nest(&along, &ptrs, &[zero], &mut |cx, _, at, acc| {
            let s = cx.ins().load(ty, flags, at[0], 0);
            let s = self.round_softmax(cx, s);
            let shifted = cx.ins().fsub(s, max);
            let shifted = self.round_softmax(cx, shifted);
            let e = self.elem.math(cx, "exp", shifted)?;
            let e = self.round_softmax(cx, e);
            cx.ins().store(flags, e, at[0], 0);
            let sum = cx.ins().fadd(acc[0], e);
            // numpy sums f16 in f32, but ml_dtypes' bf16 rounds every addition.
            Ok(vec![if self.softmax == DType::BF16 { self.round_softmax(cx, sum) } else { sum }])
        })?[0];
        let sum = self.round_softmax(cx, sum);
        let nothing = cx.ins().fcmp(FloatCC::Equal, sum, zero);
        let sum = cx.ins().select(nothing, one, sum);
        let nan = self.elem.constant(cx, f64::NAN);
        cx.nest(&along, &ptrs, &mut |cx, _, at| {
            let e = cx.ins().load(ty, flags, at[0], 0);
            let pr = cx.ins().fdiv(e, sum);
            let pr = self.round_softmax(cx, pr);
            let pr = self.elem.round(cx, pr);
            let pr = cx.ins().select(found[1], nan, pr);
            let pr = cx.ins().select(all_masked, zero, pr);
            cx.ins().store(flags, pr, at[0], 0);
            if qk.is_some() {
                self.elem.store(cx, pr, at[1]);
            }
            Ok(())
        })
    }

    /// `Y[b, h, i, x] = sum_j P[j] V[j, x]`, the past values first.
    fn weigh_values(&self, cx: &mut Lower, row: &Row, values: &[Segment; 2]) -> Result<(), String> {
        let (eb, cb) = (self.eb, self.cb);
        let columns = [Level::new(self.dv, vec![eb, eb, eb])];
        let ty = self.elem.ty();
        cx.nest(&columns, &[row.y, values[0].base, values[1].base], &mut |cx, _, at| {
            let mut acc = self.elem.constant(cx, 0.0);
            for (seg, &base) in values.iter().zip(&at[1..]) {
                let scores = cx.ins().iadd_imm_s(row.scores, seg.start as i64 * cb);
                let level = [Level::new(seg.count, vec![seg.row_step, cb])];
                acc = cx.fold_nest(&level, &[base, scores], &[acc], &mut |cx, _, x, acc| {
                    let v = self.elem.load(cx, x[0]);
                    let pr = cx.ins().load(ty, MemFlagsData::trusted(), x[1], 0);
                    let term = cx.ins().fmul(pr, v);
                    Ok(vec![cx.ins().fadd(acc[0], term)])
                })?[0];
            }
            self.elem.store(cx, acc, at[0]);
            Ok(())
        })
    }
}

/// The pointers of one query row.
struct Row {
    q: Value,
    y: Value,
    qk: Option<Value>,
    mask: Value,
    scores: Value,
}

/// Where query `i` stands among the keys (see [`Attn::frontier`]).
struct Frontier {
    pos: Value,
    valid: Option<Value>,
}

/// An f32 `v` rounded to `dtype` (f16, bf16; unchanged for the others).
fn round_f32_to(cx: &mut Lower, dtype: DType, v: Value) -> Value {
    match dtype {
        DType::F16 | DType::BF16 => {
            let h = half_floats::narrow(cx.b, dtype, v);
            half_floats::widen(cx.b, dtype, h)
        }
        _ => v,
    }
}
