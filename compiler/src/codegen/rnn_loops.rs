//! Portable recurrent layers (RNN, GRU, LSTM, every direction, layout,
//! activation, clip, sequence lengths and initial states): loop nests over
//! the same [`RnnParams`] `onnxc_rnn_f32`/`_f64` take, for portable mode.
//!
//! The semantics are the kernel's (`generic::rnn` in the kernel library):
//! ONNX gate orders (GRU `z, r, h`; LSTM `i, o, f, c`), the clip applied
//! to every activation's input, LSTM's `input_forget` and peepholes, GRU's
//! `linear_before_reset`; a step at or past a row's sequence length writes
//! zeros to Y and leaves the state alone, so a reverse direction starts at
//! the row's own last step. Every sequence length is checked before
//! anything is written: one outside `[0, seq_len]` leaves the model with
//! [`status::INDEX_OUT_OF_RANGE`].
//!
//! Batch rows never meet in a recurrence, so where the kernel shares one
//! product per step among the rows, this lowering runs a row at a time:
//! per direction (unrolled at compile time, so its step order, weights and
//! activations are constants) a run-time loop over the rows, and per row a
//! loop over the steps. A step fills `gates[g] = Wb[g] + Rb[g] + x·W[g] +
//! h·R[g]`, one fold per gate column, then runs the cell unit by unit.
//! GRU's h gate keeps its recurrent part apart in `hidden` (`Rb_h + h·R_h`
//! with `linear_before_reset`, scaled by the reset gate; else `Rb_h +
//! (r h)·R_h`, taken once the reset gate is known). R is ONNX's layout:
//! portable mode never runs `passes::pack_rnn_weights`.
//!
//! Sums and products are in the tensors' type, as the kernel computes;
//! activations are in f64 through [`portable_math`] (the kernel's f32
//! Sigmoid and Tanh are within a few ulps of those). Per row the scratch
//! holds `h`, `c`, `gates`, `hidden` and `reset`: [`scratch_elems`]
//! elements, less than the kernel's scratch, which the node plans either
//! way.

use super::nest::Level;
use super::{clif_type, portable_math, status, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::abi::rnn::*;

/// The tensors of one recurrent node (the optional ones `None` when absent).
pub struct RnnTensors {
    pub x: Value,
    pub w: Value,
    pub r: Value,
    pub bias: Option<Value>,
    pub lens: Option<Value>,
    pub initial_h: Option<Value>,
    pub initial_c: Option<Value>,
    pub peepholes: Option<Value>,
    pub y: Option<Value>,
    pub y_h: Option<Value>,
    pub y_c: Option<Value>,
    pub scratch: Value,
}

/// Elements of scratch [`rnn`] uses for `p`: `h`, `c`, `hidden`, `reset`
/// (`H` each) and `gates` (`G*H`).
pub fn scratch_elems(p: &RnnParams) -> usize {
    let hidden = p.hidden.max(0) as usize;
    (4 + gate_count(p.kind)) * hidden
}

fn gate_count(kind: i64) -> usize {
    match kind {
        RNN_GRU => 3,
        RNN_LSTM => 4,
        _ => 1,
    }
}

/// One node's sizes, element type and tensors, in bytes where they are
/// offsets.
struct Layer<'a> {
    p: &'a RnnParams,
    t: &'a RnnTensors,
    dtype: DType,
    /// Bytes of one element.
    eb: i64,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    gates: usize,
}

/// The scratch areas of the row being run (see the module doc).
#[derive(Clone, Copy)]
struct State {
    h: Value,
    c: Value,
    gates: Value,
    hidden: Value,
    reset: Value,
}

impl Layer<'_> {
    fn gate_width(&self) -> usize {
        self.gates * self.hidden
    }

    fn row_bytes(&self) -> i64 {
        self.hidden as i64 * self.eb
    }

    fn load(&self, cx: &mut Lower, at: Value, offset: i64) -> Value {
        cx.ins().load(clif_type(self.dtype), MemFlagsData::trusted(), at, offset as i32)
    }

    fn store(&self, cx: &mut Lower, v: Value, at: Value, offset: i64) {
        cx.ins().store(MemFlagsData::trusted(), v, at, offset as i32);
    }

    fn constant(&self, cx: &mut Lower, v: f64) -> Value {
        if self.dtype == DType::F64 {
            cx.ins().f64const(v)
        } else {
            cx.ins().f32const(v as f32)
        }
    }

    /// `sum(index * factor) + offset`, pointer-sized.
    fn linear(&self, cx: &mut Lower, terms: &[(Value, i64)], offset: i64) -> Value {
        let mut sum = cx.iconst(offset);
        for &(index, factor) in terms {
            let term = cx.ins().imul_imm_s(index, factor);
            sum = cx.ins().iadd(sum, term);
        }
        sum
    }

    /// Address of X's row for step `tt` of batch row `b`.
    fn x_row(&self, cx: &mut Lower, tt: Value, b: Value) -> Value {
        let (seq, batch, bytes) = (self.seq as i64, self.batch as i64, self.input as i64 * self.eb);
        let terms =
            if self.p.layout != 0 { [(b, seq * bytes), (tt, bytes)] } else { [(tt, batch * bytes), (b, bytes)] };
        let offset = self.linear(cx, &terms, 0);
        cx.ins().iadd(self.t.x, offset)
    }

    /// Byte offset of Y's row for step `tt`, direction `d`, batch row `b`.
    fn y_offset(&self, cx: &mut Lower, tt: Value, d: usize, b: Value) -> Value {
        let (seq, batch, dirs, row) = (self.seq as i64, self.batch as i64, self.dirs as i64, self.row_bytes());
        if self.p.layout != 0 {
            self.linear(cx, &[(b, seq * dirs * row), (tt, dirs * row)], d as i64 * row)
        } else {
            self.linear(cx, &[(tt, dirs * batch * row), (b, row)], d as i64 * batch * row)
        }
    }

    /// Byte offset of a state tensor's row for direction `d`, batch row `b`.
    fn state_offset(&self, cx: &mut Lower, d: usize, b: Value) -> Value {
        let (batch, dirs, row) = (self.batch as i64, self.dirs as i64, self.row_bytes());
        if self.p.layout != 0 {
            self.linear(cx, &[(b, dirs * row)], d as i64 * row)
        } else {
            self.linear(cx, &[(b, row)], d as i64 * batch * row)
        }
    }

    /// `out[g] += a·m[g]` for `cols` rows of `m`, each `depth` elements.
    fn accumulate_products(
        &self,
        cx: &mut Lower,
        a: Value,
        m: Value,
        cols: usize,
        depth: usize,
        out: Value,
    ) -> Result<(), String> {
        let eb = self.eb;
        let columns = [Level::new(cols, vec![depth as i64 * eb, eb])];
        let dot = [Level::new(depth, vec![eb, eb])];
        cx.nest(&columns, &[m, out], &mut |cx, _, at| {
            let init = self.load(cx, at[1], 0);
            let sum = cx.fold_nest(&dot, &[a, at[0]], &[init], &mut |cx, _, ptrs, acc| {
                let (x, y) = (self.load(cx, ptrs[0], 0), self.load(cx, ptrs[1], 0));
                let product = cx.ins().fmul(x, y);
                Ok(vec![cx.ins().fadd(acc[0], product)])
            })?[0];
            self.store(cx, sum, at[1], 0);
            Ok(())
        })
    }

    /// `out[g] = sum of parts[k][g]` (zero for no parts) for `cols` columns.
    fn sum_into(&self, cx: &mut Lower, out: Value, parts: &[Value], cols: usize) -> Result<(), String> {
        let steps = vec![self.eb; parts.len() + 1];
        let ptrs: Vec<Value> = [out].iter().chain(parts).copied().collect();
        cx.nest(&[Level::new(cols, steps)], &ptrs, &mut |cx, _, at| {
            let mut sum = self.constant(cx, 0.0);
            for &part in &at[1..] {
                let v = self.load(cx, part, 0);
                sum = cx.ins().fadd(sum, v);
            }
            self.store(cx, sum, at[0], 0);
            Ok(())
        })
    }

    /// Fills `count` elements from `at` with zeros.
    fn zero(&self, cx: &mut Lower, at: Value, count: usize) -> Result<(), String> {
        self.sum_into(cx, at, &[], count)
    }
}

/// Runs the recurrent layer `p` over the tensors `t` (see the module doc).
pub fn rnn(cx: &mut Lower, p: &RnnParams, dtype: DType, t: &RnnTensors) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("a recurrent layer of {dtype} has no portable lowering (f32 and f64 do)"));
    }
    let dims = [p.seq_len, p.batch, p.input_size, p.hidden, p.directions];
    if dims.iter().any(|&d| d < 0) || !(1..=2).contains(&p.directions) {
        return Err(format!("recurrent sizes {dims:?} are not a layer's"));
    }
    let [seq, batch, input, hidden, dirs] = dims.map(|d| d as usize);
    let eb = dtype.size() as i64;
    let layer = Layer { p, t, dtype, eb, seq, batch, input, hidden, dirs, gates: gate_count(p.kind) };
    if let Some(lens) = t.lens {
        check_lengths(cx, &layer, lens)?;
    }
    if batch == 0 || hidden == 0 {
        return Ok(());
    }
    for d in 0..dirs {
        run_direction(cx, &layer, d)?;
    }
    Ok(())
}

/// Leaves the model with [`status::INDEX_OUT_OF_RANGE`] unless every
/// sequence length lies in `[0, seq_len]`.
fn check_lengths(cx: &mut Lower, layer: &Layer, lens: Value) -> Result<(), String> {
    cx.nest(&[Level::new(layer.batch, vec![4])], &[lens], &mut |cx, _, at| {
        let len = cx.ins().sload32(MemFlagsData::trusted(), at[0], 0);
        // Sign-extended, a negative length is above any seq_len unsigned.
        let outside = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, len, layer.seq as i64);
        cx.fail_if(outside, status::INDEX_OUT_OF_RANGE);
        Ok(())
    })
}

/// Direction `d` for every batch row, from its initial states to its final ones.
fn run_direction(cx: &mut Lower, layer: &Layer, d: usize) -> Result<(), String> {
    let (h, eb) = (layer.hidden as i64, layer.eb);
    let area = |cx: &mut Lower, elems: i64| cx.ins().iadd_imm_s(layer.t.scratch, elems * eb);
    let state = State {
        h: area(cx, 0),
        c: area(cx, h),
        hidden: area(cx, 2 * h),
        reset: area(cx, 3 * h),
        gates: area(cx, 4 * h),
    };
    let rows = cx.loop_begin(layer.batch);
    let b = rows.index;
    let state_at = layer.state_offset(cx, d, b);
    load_state(cx, layer, state.h, layer.t.initial_h, state_at)?;
    if layer.p.kind == RNN_LSTM {
        load_state(cx, layer, state.c, layer.t.initial_c, state_at)?;
    }
    let len = match layer.t.lens {
        Some(lens) => {
            let at = cx.ins().imul_imm_s(b, 4);
            let at = cx.ins().iadd(lens, at);
            let len = cx.ins().sload32(MemFlagsData::trusted(), at, 0);
            let ptr = cx.ptr_type();
            if ptr == types::I64 {
                len
            } else {
                cx.ins().ireduce(ptr, len)
            }
        }
        None => cx.iconst(layer.seq as i64),
    };
    run_steps(cx, layer, &state, d, b, len)?;
    for (out, area) in [(layer.t.y_h, state.h), (layer.t.y_c, state.c)] {
        if let Some(out) = out {
            let dst = cx.ins().iadd(out, state_at);
            cx.copy_bytes(dst, area, layer.row_bytes() as usize);
        }
    }
    cx.loop_end(rows);
    Ok(())
}

/// A state row from its initial tensor at `offset`, or zeros without one.
fn load_state(cx: &mut Lower, layer: &Layer, area: Value, initial: Option<Value>, offset: Value) -> Result<(), String> {
    match initial {
        Some(initial) => {
            let src = cx.ins().iadd(initial, offset);
            cx.copy_bytes(area, src, layer.row_bytes() as usize);
            Ok(())
        }
        None => layer.zero(cx, area, layer.hidden),
    }
}

/// The steps of batch row `b` in direction `d`: step `n` runs while `n <
/// len` (on step `len - 1 - n` backwards), and zeros Y's row `n` past it.
fn run_steps(cx: &mut Lower, layer: &Layer, state: &State, d: usize, b: Value, len: Value) -> Result<(), String> {
    let backwards = if layer.dirs == 2 { d == 1 } else { layer.p.reverse != 0 };
    let steps = cx.loop_begin(layer.seq);
    let n = steps.index;
    let (active, idle, join) = (cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
    let runs = cx.ins().icmp(IntCC::UnsignedLessThan, n, len);
    cx.ins().brif(runs, active, &[], idle, &[]);
    cx.b.switch_to_block(active);
    let tt = if backwards {
        let last = cx.ins().iadd_imm_s(len, -1);
        cx.ins().isub(last, n)
    } else {
        n
    };
    step(cx, layer, state, d, b, tt)?;
    if let Some(y) = layer.t.y {
        let offset = layer.y_offset(cx, tt, d, b);
        let dst = cx.ins().iadd(y, offset);
        cx.copy_bytes(dst, state.h, layer.row_bytes() as usize);
    }
    cx.ins().jump(join, &[]);
    cx.b.switch_to_block(idle);
    if let Some(y) = layer.t.y {
        let offset = layer.y_offset(cx, n, d, b);
        let dst = cx.ins().iadd(y, offset);
        layer.zero(cx, dst, layer.hidden)?;
    }
    cx.ins().jump(join, &[]);
    cx.b.switch_to_block(join);
    cx.loop_end(steps);
    Ok(())
}

/// Step `tt` of batch row `b` in direction `d`: the products, then the cell.
fn step(cx: &mut Lower, layer: &Layer, state: &State, d: usize, b: Value, tt: Value) -> Result<(), String> {
    let (h, gw, eb) = (layer.hidden, layer.gate_width(), layer.eb);
    let gru = layer.p.kind == RNN_GRU;
    // GRU's h gate takes its recurrent part in `hidden` instead.
    let recurrent_cols = if gru { 2 * h } else { gw };
    let t = layer.t;
    let w = cx.ins().iadd_imm_s(t.w, (d * gw * layer.input) as i64 * eb);
    let r = cx.ins().iadd_imm_s(t.r, (d * gw * h) as i64 * eb);
    match t.bias {
        Some(bias) => {
            let wb = cx.ins().iadd_imm_s(bias, (2 * d * gw) as i64 * eb);
            let rb = cx.ins().iadd_imm_s(wb, gw as i64 * eb);
            layer.sum_into(cx, state.gates, &[wb, rb], recurrent_cols)?;
            if gru {
                let at = (2 * h) as i64 * eb;
                let (gates_h, wb_h, rb_h) =
                    (cx.ins().iadd_imm_s(state.gates, at), cx.ins().iadd_imm_s(wb, at), cx.ins().iadd_imm_s(rb, at));
                layer.sum_into(cx, gates_h, &[wb_h], h)?;
                layer.sum_into(cx, state.hidden, &[rb_h], h)?;
            }
        }
        None => {
            layer.zero(cx, state.gates, gw)?;
            layer.zero(cx, state.hidden, h)?;
        }
    }
    let x = layer.x_row(cx, tt, b);
    layer.accumulate_products(cx, x, w, gw, layer.input, state.gates)?;
    layer.accumulate_products(cx, state.h, r, recurrent_cols, h, state.gates)?;
    match layer.p.kind {
        RNN_LSTM => lstm_cell(cx, layer, state, d),
        RNN_GRU => gru_cell(cx, layer, state, d, r),
        _ => each_unit(cx, layer, state, &mut |cx, at| {
            let pre = layer.load(cx, at.gates, 0);
            let h = activate(cx, layer, d, 0, pre);
            layer.store(cx, h, at.h, 0);
            Ok(())
        }),
    }
}

/// The body of [`each_unit`]: the state areas advanced to one unit.
type UnitBody<'b> = dyn FnMut(&mut Lower, &State) -> Result<(), String> + 'b;

/// Runs `body` for every unit `j` of the row, with each area at element `j`.
fn each_unit(cx: &mut Lower, layer: &Layer, state: &State, body: &mut UnitBody) -> Result<(), String> {
    let ptrs = [state.h, state.c, state.gates, state.hidden, state.reset];
    cx.nest(&[Level::new(layer.hidden, vec![layer.eb; 5])], &ptrs, &mut |cx, _, at| {
        body(cx, &State { h: at[0], c: at[1], gates: at[2], hidden: at[3], reset: at[4] })
    })
}

/// LSTM (gates i, o, f, c): `c = f c + i g(.)`, `h = o h(c)`, with the
/// peepholes and `input_forget`.
fn lstm_cell(cx: &mut Lower, layer: &Layer, state: &State, d: usize) -> Result<(), String> {
    let gate = layer.row_bytes();
    let peepholes = layer.t.peepholes.map(|p| cx.ins().iadd_imm_s(p, (3 * d) as i64 * gate));
    let units = [Level::new(layer.hidden, vec![layer.eb; 4])];
    let ptrs = [state.h, state.c, state.gates, peepholes.unwrap_or(state.h)];
    cx.nest(&units, &ptrs, &mut |cx, _, at| {
        let (h, c, gates, peep) = (at[0], at[1], at[2], at[3]);
        let old_c = layer.load(cx, c, 0);
        let peephole = |cx: &mut Lower, pre: Value, k: i64, by: Value| match peepholes {
            Some(_) => {
                let weight = layer.load(cx, peep, k * gate);
                let term = cx.ins().fmul(weight, by);
                cx.ins().fadd(pre, term)
            }
            None => pre,
        };
        let pre_f = layer.load(cx, gates, 2 * gate);
        let pre_f = peephole(cx, pre_f, 2, old_c);
        let forget = activate(cx, layer, d, 0, pre_f);
        let input = if layer.p.input_forget != 0 {
            let one = layer.constant(cx, 1.0);
            cx.ins().fsub(one, forget)
        } else {
            let pre_i = layer.load(cx, gates, 0);
            let pre_i = peephole(cx, pre_i, 0, old_c);
            activate(cx, layer, d, 0, pre_i)
        };
        let pre_c = layer.load(cx, gates, 3 * gate);
        let candidate = activate(cx, layer, d, 1, pre_c);
        let kept = cx.ins().fmul(forget, old_c);
        let added = cx.ins().fmul(input, candidate);
        let new_c = cx.ins().fadd(kept, added);
        layer.store(cx, new_c, c, 0);
        let pre_o = layer.load(cx, gates, gate);
        let pre_o = peephole(cx, pre_o, 1, new_c);
        let output = activate(cx, layer, d, 0, pre_o);
        let squashed = activate(cx, layer, d, 2, new_c);
        let new_h = cx.ins().fmul(output, squashed);
        layer.store(cx, new_h, h, 0);
        Ok(())
    })
}

/// GRU (gates z, r, h): `h = (1 - z) g(.) + z h`, the h gate's input
/// `gx_h + r hidden` with `linear_before_reset`, else `gx_h + (r h)·R_h`.
/// `r` is the direction's R.
fn gru_cell(cx: &mut Lower, layer: &Layer, state: &State, d: usize, r: Value) -> Result<(), String> {
    let (h, gate) = (layer.hidden, layer.row_bytes());
    let linear_before_reset = layer.p.linear_before_reset != 0;
    if linear_before_reset {
        let r_h = cx.ins().iadd_imm_s(r, 2 * h as i64 * gate);
        layer.accumulate_products(cx, state.h, r_h, h, h, state.hidden)?;
    }
    // z and r, each in place; without linear_before_reset also `r h`.
    each_unit(cx, layer, state, &mut |cx, at| {
        for k in 0..2 {
            let pre = layer.load(cx, at.gates, k * gate);
            let v = activate(cx, layer, d, 0, pre);
            layer.store(cx, v, at.gates, k * gate);
        }
        if !linear_before_reset {
            let (reset, old_h) = (layer.load(cx, at.gates, gate), layer.load(cx, at.h, 0));
            let scaled = cx.ins().fmul(reset, old_h);
            layer.store(cx, scaled, at.reset, 0);
        }
        Ok(())
    })?;
    if !linear_before_reset {
        let r_h = cx.ins().iadd_imm_s(r, 2 * h as i64 * gate);
        layer.accumulate_products(cx, state.reset, r_h, h, h, state.hidden)?;
    }
    each_unit(cx, layer, state, &mut |cx, at| {
        let (pre, recurrent) = (layer.load(cx, at.gates, 2 * gate), layer.load(cx, at.hidden, 0));
        let recurrent = if linear_before_reset {
            let reset = layer.load(cx, at.gates, gate);
            cx.ins().fmul(reset, recurrent)
        } else {
            recurrent
        };
        let pre = cx.ins().fadd(pre, recurrent);
        let candidate = activate(cx, layer, d, 1, pre);
        let (update, old_h) = (layer.load(cx, at.gates, 0), layer.load(cx, at.h, 0));
        let one = layer.constant(cx, 1.0);
        let keep = cx.ins().fsub(one, update);
        let fresh = cx.ins().fmul(keep, candidate);
        let kept = cx.ins().fmul(update, old_h);
        let new_h = cx.ins().fadd(fresh, kept);
        layer.store(cx, new_h, at.h, 0);
        Ok(())
    })
}

/// Activation `slot` (f, g, h) of direction `d` applied to `x`, after the
/// clip: in f64, rounded back to the layer's type.
fn activate(cx: &mut Lower, layer: &Layer, d: usize, slot: usize, x: Value) -> Value {
    let k = d * RNN_ACTS + slot;
    let p = layer.p;
    let x = if p.has_clip != 0 { clip(cx, layer, x, p.clip) } else { x };
    let wide = if layer.dtype == DType::F64 { x } else { cx.ins().fpromote(types::F64, x) };
    let y = activation_f64(cx, p.act[k], p.alpha[k], p.beta[k], wide);
    if layer.dtype == DType::F64 {
        y
    } else {
        cx.ins().fdemote(types::F32, y)
    }
}

/// `x` limited to `[-c, c]`, written as compares so that a NaN stays NaN.
fn clip(cx: &mut Lower, layer: &Layer, x: Value, c: f64) -> Value {
    let (low, high) = (layer.constant(cx, -c), layer.constant(cx, c));
    let below = cx.ins().fcmp(FloatCC::LessThan, x, low);
    let x = cx.ins().select(below, low, x);
    let above = cx.ins().fcmp(FloatCC::GreaterThan, x, high);
    cx.ins().select(above, high, x)
}

/// The `ACT_*` function `kind` with its `alpha` and `beta` on the f64 `x`
/// (the kernel's `cells::activate`).
fn activation_f64(cx: &mut Lower, kind: i64, alpha: f64, beta: f64, x: Value) -> Value {
    let zero = cx.ins().f64const(0.0);
    let one = cx.ins().f64const(1.0);
    let (a, bias) = (cx.ins().f64const(alpha), cx.ins().f64const(beta));
    let non_negative = cx.ins().fcmp(FloatCC::GreaterThanOrEqual, x, zero);
    match kind {
        ACT_RELU => {
            let positive = cx.ins().fcmp(FloatCC::GreaterThan, x, zero);
            cx.ins().select(positive, x, zero)
        }
        ACT_TANH => portable_math::tanh(cx.b, x),
        ACT_SIGMOID => {
            let minus = cx.ins().fneg(x);
            let e = portable_math::exp(cx.b, minus);
            let den = cx.ins().fadd(one, e);
            cx.ins().fdiv(one, den)
        }
        ACT_AFFINE => {
            let scaled = cx.ins().fmul(a, x);
            cx.ins().fadd(scaled, bias)
        }
        ACT_LEAKY_RELU => {
            let scaled = cx.ins().fmul(a, x);
            cx.ins().select(non_negative, x, scaled)
        }
        ACT_THRESHOLDED_RELU => {
            let above = cx.ins().fcmp(FloatCC::GreaterThan, x, a);
            cx.ins().select(above, x, zero)
        }
        ACT_SCALED_TANH => {
            let inner = cx.ins().fmul(bias, x);
            let t = portable_math::tanh(cx.b, inner);
            cx.ins().fmul(a, t)
        }
        ACT_HARD_SIGMOID => {
            let scaled = cx.ins().fmul(a, x);
            let line = cx.ins().fadd(scaled, bias);
            let low = cx.ins().fmax(line, zero);
            cx.ins().fmin(low, one)
        }
        ACT_ELU => {
            let e = portable_math::expm1(cx.b, x);
            let scaled = cx.ins().fmul(a, e);
            cx.ins().select(non_negative, x, scaled)
        }
        ACT_SOFTSIGN => {
            let magnitude = cx.ins().fabs(x);
            let den = cx.ins().fadd(one, magnitude);
            cx.ins().fdiv(x, den)
        }
        _ => softplus(cx, x),
    }
}

/// `ln(1 + e^x)` without overflow: `x + ln(1 + e^-x)` for a positive `x`.
fn softplus(cx: &mut Lower, x: Value) -> Value {
    let zero = cx.ins().f64const(0.0);
    let positive = cx.ins().fcmp(FloatCC::GreaterThan, x, zero);
    let magnitude = cx.ins().fabs(x);
    let minus = cx.ins().fneg(magnitude);
    let e = portable_math::exp(cx.b, minus);
    let tail = portable_math::log1p(cx.b, e);
    let shifted = cx.ins().fadd(x, tail);
    cx.ins().select(positive, shifted, tail)
}
