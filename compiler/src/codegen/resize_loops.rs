//! Portable Resize (nearest, linear, cubic; antialias, exclude_outside,
//! every coordinate mode, `axes`, `keep_aspect_ratio_policy`), for
//! portable mode, where `onnxc_resize_*` are not linked.
//!
//! Resize is separable: each output coordinate of each axis reads a window
//! of input coordinates of that axis with weights that depend only on that
//! axis. Both cases walk one nest over tap records, `(byte offset, weight)`
//! pairs of [`TAP_BYTES`] each, per axis and output coordinate; each
//! element is the kernel's nested sum `sum_k w_k (sum_j w_j (... x))`, in
//! f64, one fold per axis over its taps. Every offset is of a clamped
//! input index, so no load leaves the input; only `tf_crop_and_resize`
//! marks positions outside its crop region (a negative offset), which take
//! the extrapolation value and read nothing.
//!
//! With constant scales or sizes the compiler fills the records with the
//! kernel's own rule (`onnxc_runtime::generic::resize::fill_taps`) into
//! read-only data. With run-time ones the generated code first sizes the
//! output by `resize_apply_sizing`'s rules (a bad scale or size is
//! [`status::INVALID_PARAMS`], as `onnxc_resize_prepare` returns), gets the
//! output and the records from [`Lower::alloc_output`] and
//! [`Lower::alloc_scratch`] (which check the sizes against the memory
//! there is), and fills the records by `fill_taps`'s rules as
//! instructions, in its order of operations; only then is anything read
//! or written.

use super::gather_loops::{pointer_sized, widened};
use super::grid_sample_loops::cubic_weight;
use super::{clif_type, status, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::abi::resize::*;
use onnxc_runtime::generic::resize::{fill_taps, resize_taps, Tap};

/// Bytes of one tap record: an i64 byte offset, then an f64 weight.
const TAP_BYTES: i64 = 16;

/// The largest output dim `resize_apply_sizing` accepts from scales.
const MAX_SCALED_DIM: f64 = (1u64 << 40) as f64;

/// The most taps an antialiased axis has (`resize_taps`' bound).
const MAX_TAPS: i64 = 1 << 16;

/// One axis as the nest walks it: output length and taps per output
/// coordinate (pointer-sized), and where its tap records start.
struct AxisTaps {
    out_len: Value,
    taps: Value,
    /// Every output coordinate has exactly one tap (of weight 1).
    one_tap: bool,
    records: Value,
}

/// The taps of every axis, concatenated as `[offset, weight bits]` pairs,
/// and each axis's taps per output coordinate.
fn tap_tables(p: &ResizeParams, strides: &[i64]) -> (Vec<i64>, Vec<usize>) {
    let (mut table, mut counts) = (Vec::new(), Vec::new());
    for (a, &stride) in strides.iter().enumerate() {
        let count = resize_taps(p, a);
        let mut row = vec![Tap::default(); count];
        for o in 0..p.out_dims[a] as usize {
            fill_taps(p, a, o, &mut row);
            for t in &row {
                let offset = if t.index < 0 { -1 } else { t.index * stride };
                table.extend([offset, t.weight.to_bits() as i64]);
            }
        }
        counts.push(count);
    }
    (table, counts)
}

/// Byte strides of the input's axes (`in_dims` of `p`, `elem_bytes` each).
fn input_strides(p: &ResizeParams, elem_bytes: i64) -> Vec<i64> {
    let rank = p.rank as usize;
    let mut strides = vec![elem_bytes; rank];
    for a in (0..rank.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * p.in_dims[a + 1];
    }
    strides
}

fn check_dtype(dtype: DType) -> Result<(), String> {
    match dtype {
        DType::F32 | DType::F64 => Ok(()),
        _ => Err(format!("{dtype} data has no portable Resize (f32 and f64 do)")),
    }
}

/// Resizes `x` into `y` (`dtype` f32 or f64) as the constant params `p` say.
pub fn resize(cx: &mut Lower, p: &ResizeParams, dtype: DType, x: Value, y: Value) -> Result<(), String> {
    check_dtype(dtype)?;
    let rank = p.rank as usize;
    if p.out_dims[..rank].contains(&0) {
        return Ok(());
    }
    let (table, counts) = tap_tables(p, &input_strides(p, dtype.size() as i64));
    let table_ptr = cx.table(&table)?;
    let mut start = 0;
    let mut axes = Vec::with_capacity(rank);
    for (a, &count) in counts.iter().enumerate() {
        let records = cx.ins().iadd_imm_s(table_ptr, TAP_BYTES * start);
        start += p.out_dims[a] * count as i64;
        let (out_len, taps) = (cx.iconst(p.out_dims[a]), cx.iconst(count as i64));
        axes.push(AxisTaps { out_len, taps, one_tap: count == 1, records });
    }
    resample(cx, p, dtype, &axes, x, y)
}

/// Where Resize's scales (f32) or sizes (i64) are at run time.
pub struct RunTimeSizing {
    pub values: Value,
    pub from_scales: bool,
    /// How many values the input holds.
    pub len: usize,
}

/// Resizes `x` (`dtype` f32 or f64) by the run-time scales or sizes of
/// `given` into output 0, allocated here: `template` holds the dims,
/// modes and roi, `sizing` the axes and policy (as `onnxc_resize_prepare`
/// takes them).
pub fn resize_run_time(
    cx: &mut Lower,
    template: &ResizeParams,
    sizing: &ResizeSizing,
    given: &RunTimeSizing,
    dtype: DType,
    x: Value,
) -> Result<(), String> {
    check_dtype(dtype)?;
    let listed = &sizing.axes[..sizing.axes_len as usize];
    if given.len != listed.len() {
        let which = if given.from_scales { "scales" } else { "sizes" };
        return Err(format!("input {which} has {} values, expected {}", given.len, listed.len()));
    }
    let sized = size_axes(cx, template, sizing, given);
    let dims: Vec<Value> = sized.iter().map(|s| pointer_sized(cx, s.out)).collect();
    let y = cx.alloc_output(0, &dims)?;
    let counts: Vec<Value> = sized.iter().map(|s| tap_count(cx, template, s)).collect();
    let mut record_bytes = Vec::with_capacity(dims.len());
    let mut total = cx.iconst(0);
    for (&out_len, &count) in dims.iter().zip(&counts) {
        let row = cx.ins().imul_imm_s(count, TAP_BYTES);
        let (bytes, overflow) = cx.ins().umul_overflow(out_len, row);
        cx.fail_if(overflow, status::OUT_OF_MEMORY);
        let (sum, overflow) = cx.ins().uadd_overflow(total, bytes);
        cx.fail_if(overflow, status::OUT_OF_MEMORY);
        record_bytes.push(bytes);
        total = sum;
    }
    let mut records = cx.alloc_scratch(total)?;
    let strides = input_strides(template, dtype.size() as i64);
    let mut axes = Vec::with_capacity(dims.len());
    for (a, s) in sized.iter().enumerate() {
        fill_axis(cx, template, a, s, [dims[a], counts[a]], records, strides[a]);
        // An axis the sizing does not cover keeps its length: one tap each.
        let one_tap = template.mode == MODE_NEAREST || !listed.contains(&(a as i64));
        axes.push(AxisTaps { out_len: dims[a], taps: counts[a], one_tap, records });
        records = cx.ins().iadd(records, record_bytes[a]);
    }
    resample(cx, template, dtype, &axes, x, y)
}

/// The nest over the output, row-major, `x` read through `axes`' records.
fn resample(
    cx: &mut Lower,
    p: &ResizeParams,
    dtype: DType,
    axes: &[AxisTaps],
    x: Value,
    y: Value,
) -> Result<(), String> {
    let mut strides = vec![cx.iconst(dtype.size() as i64); axes.len()];
    for a in (0..axes.len().saturating_sub(1)).rev() {
        strides[a] = cx.ins().imul(strides[a + 1], axes[a + 1].out_len);
    }
    let extrapolation = (p.coord_mode == COORD_TF_CROP_AND_RESIZE).then_some(p.extrapolation_value);
    walk(cx, dtype, axes, &strides, extrapolation, &mut Vec::new(), [x, y])
}

/// The loops of `axes[rows.len()..]` below the tap rows `rows` of the outer
/// axes, writing at `out`.
fn walk(
    cx: &mut Lower,
    dtype: DType,
    axes: &[AxisTaps],
    strides: &[Value],
    extrapolation: Option<f64>,
    rows: &mut Vec<Value>,
    [x, out]: [Value; 2],
) -> Result<(), String> {
    let Some(axis) = axes.get(rows.len()) else {
        let taps = rows.clone();
        let value = match extrapolation {
            Some(fill) => outside_or(cx, &taps, fill, &mut |cx| Ok(tap_sum(cx, dtype, axes, &taps, x)))?,
            None => tap_sum(cx, dtype, axes, &taps, x),
        };
        let value = if dtype == DType::F64 { value } else { cx.ins().fdemote(types::F32, value) };
        cx.ins().store(MemFlagsData::trusted(), value, out, 0);
        return Ok(());
    };
    let l = cx.loop_begin_dynamic(axis.out_len);
    let row_bytes = cx.ins().imul_imm_s(axis.taps, TAP_BYTES);
    let row_offset = cx.ins().imul(l.index, row_bytes);
    rows.push(cx.ins().iadd(axis.records, row_offset));
    let out_offset = cx.ins().imul(l.index, strides[rows.len() - 1]);
    let out = cx.ins().iadd(out, out_offset);
    walk(cx, dtype, axes, strides, extrapolation, rows, [x, out])?;
    rows.pop();
    cx.loop_end(l);
    Ok(())
}

/// `sum_k w_k (inner sum)` over the taps of the first of `axes` at row
/// `rows[0]`, down to the element of `dtype` at `x` (as f64).
fn tap_sum(cx: &mut Lower, dtype: DType, axes: &[AxisTaps], rows: &[Value], x: Value) -> Value {
    let flags = MemFlagsData::trusted();
    let (Some((axis, rest)), Some((&row, inner))) = (axes.split_first(), rows.split_first()) else {
        let v = cx.ins().load(clif_type(dtype), flags, x, 0);
        return if dtype == DType::F64 { v } else { cx.ins().fpromote(types::F64, v) };
    };
    if axis.one_tap {
        let offset = cx.ins().load(types::I64, flags, row, 0);
        let at = cx.ins().iadd(x, offset);
        return tap_sum(cx, dtype, rest, inner, at);
    }
    let acc = cx.b.declare_var(types::F64);
    let zero = cx.ins().f64const(0.0);
    cx.b.def_var(acc, zero);
    let l = cx.loop_begin_dynamic(axis.taps);
    let tap = cx.advance(row, l.index, TAP_BYTES);
    let offset = cx.ins().load(types::I64, flags, tap, 0);
    let weight = cx.ins().load(types::F64, flags, tap, 8);
    let at = cx.ins().iadd(x, offset);
    let sum = tap_sum(cx, dtype, rest, inner, at);
    let term = cx.ins().fmul(weight, sum);
    let before = cx.b.use_var(acc);
    let after = cx.ins().fadd(before, term);
    cx.b.def_var(acc, after);
    cx.loop_end(l);
    cx.b.use_var(acc)
}

/// The extrapolation value where any axis's first tap is marked outside the
/// crop region, else what `inside` computes (a branch: outside, nothing is
/// read).
fn outside_or(
    cx: &mut Lower,
    rows: &[Value],
    extrapolation: f64,
    inside: &mut dyn FnMut(&mut Lower) -> Result<Value, String>,
) -> Result<Value, String> {
    let mut any = cx.ins().iconst(types::I64, 0);
    for &t in rows {
        let offset = cx.ins().load(types::I64, MemFlagsData::trusted(), t, 0);
        any = cx.ins().bor(any, offset);
    }
    let outside = cx.ins().icmp_imm_s(IntCC::SignedLessThan, any, 0);
    let (read, done) = (cx.b.create_block(), cx.b.create_block());
    let result = cx.b.append_block_param(done, types::F64);
    let fill = cx.ins().f64const(extrapolation);
    cx.ins().brif(outside, done, &[fill.into()], read, &[]);
    cx.b.switch_to_block(read);
    let v = inside(cx)?;
    cx.ins().jump(done, &[v.into()]);
    cx.b.switch_to_block(done);
    Ok(result)
}

/// One axis sized at run time: its scale (f64), output length (i64, not
/// negative) and whether it is left unchanged (an i8).
struct SizedAxis {
    scale: Value,
    out: Value,
    identity: Value,
}

/// `resize_apply_sizing` as instructions: every axis of `p` sized by
/// `given`, failing with [`status::INVALID_PARAMS`] where it returns an
/// error.
fn size_axes(cx: &mut Lower, p: &ResizeParams, s: &ResizeSizing, given: &RunTimeSizing) -> Vec<SizedAxis> {
    let rank = p.rank as usize;
    let flags = MemFlagsData::trusted();
    let listed = &s.axes[..s.axes_len as usize];
    let mut scales: Vec<Value> = (0..rank).map(|a| cx.ins().f64const(p.scales[a])).collect();
    let mut outs: Vec<Value> = (0..rank).map(|a| cx.ins().iconst(types::I64, p.out_dims[a])).collect();
    for (i, &a) in listed.iter().enumerate() {
        let (a, len) = (a as usize, cx.ins().f64const(p.in_dims[a as usize] as f64));
        if given.from_scales {
            let narrow = cx.ins().load(types::F32, flags, given.values, 4 * i as i32);
            let scale = cx.ins().fpromote(types::F64, narrow);
            let zero = cx.ins().f64const(0.0);
            let infinity = cx.ins().f64const(f64::INFINITY);
            let positive = cx.ins().fcmp(FloatCC::GreaterThan, scale, zero);
            let finite = cx.ins().fcmp(FloatCC::LessThan, scale, infinity);
            let good = cx.ins().band(positive, finite);
            let bad = cx.ins().bxor_imm_u(good, 1);
            cx.fail_if(bad, status::INVALID_PARAMS);
            let product = cx.ins().fmul(scale, len);
            let out = cx.ins().floor(product);
            let most = cx.ins().f64const(MAX_SCALED_DIM);
            let too_large = cx.ins().fcmp(FloatCC::GreaterThan, out, most);
            cx.fail_if(too_large, status::INVALID_PARAMS);
            (scales[a], outs[a]) = (scale, cx.ins().fcvt_to_sint_sat(types::I64, out));
        } else {
            let size = cx.ins().load(types::I64, flags, given.values, 8 * i as i32);
            let negative = cx.ins().icmp_imm_s(IntCC::SignedLessThan, size, 0);
            cx.fail_if(negative, status::INVALID_PARAMS);
            let wide = cx.ins().fcvt_from_sint(types::F64, size);
            (scales[a], outs[a]) = (cx.ins().fdiv(wide, len), size);
        }
    }
    if !given.from_scales && s.policy != POLICY_STRETCH {
        keep_aspect_ratio(cx, p, s, &mut scales, &mut outs);
    }
    let mut total = cx.ins().iconst(types::I64, 4);
    (0..rank)
        .map(|a| {
            let (scale, out) = (scales[a], outs[a]);
            if p.in_dims[a] == 0 {
                let resized = cx.ins().icmp_imm_u(IntCC::NotEqual, out, 0);
                cx.fail_if(resized, status::INVALID_PARAMS);
            }
            let (product, overflow) = cx.ins().umul_overflow(total, out);
            cx.fail_if(overflow, status::INVALID_PARAMS);
            total = product;
            let [unit, zero, roi_start, roi_end] =
                [1.0, 0.0, p.roi_start[a], p.roi_end[a]].map(|v| cx.ins().f64const(v));
            let mut identity = cx.ins().icmp_imm_s(IntCC::Equal, out, p.in_dims[a]);
            for (v, plain) in [(scale, unit), (roi_start, zero), (roi_end, unit)] {
                let near = close(cx, v, plain);
                identity = cx.ins().band(identity, near);
            }
            SizedAxis { scale, out, identity }
        })
        .collect()
}

/// `keep_aspect_ratio_policy` not_larger (the smallest of the listed axes'
/// scales) or not_smaller (the largest) applied to every listed axis, its
/// length rounded half up.
fn keep_aspect_ratio(cx: &mut Lower, p: &ResizeParams, s: &ResizeSizing, scales: &mut [Value], outs: &mut [Value]) {
    let listed = &s.axes[..s.axes_len as usize];
    let smallest = s.policy == POLICY_NOT_LARGER;
    let start = if smallest { f64::INFINITY } else { f64::NEG_INFINITY };
    let mut chosen = cx.ins().f64const(start);
    let better = if smallest { FloatCC::LessThan } else { FloatCC::GreaterThan };
    for &a in listed {
        // f64::min/max: a NaN candidate never wins.
        let wins = cx.ins().fcmp(better, scales[a as usize], chosen);
        chosen = cx.ins().select(wins, scales[a as usize], chosen);
    }
    let half = cx.ins().f64const(0.5);
    for &a in listed {
        let a = a as usize;
        let len = cx.ins().f64const(p.in_dims[a] as f64);
        let scaled = cx.ins().fmul(chosen, len);
        let rounded = cx.ins().fadd(scaled, half);
        (scales[a], outs[a]) = (chosen, cx.ins().fcvt_to_sint_sat(types::I64, rounded));
    }
}

/// `resize_apply_sizing`'s `close`: `|a - b| <= 1e-9 max(|a|, |b|)` (an i8),
/// the maximum ignoring a NaN as `fmax` does.
fn close(cx: &mut Lower, a: Value, b: Value) -> Value {
    let difference = cx.ins().fsub(a, b);
    let difference = cx.ins().fabs(difference);
    let (a, b) = (cx.ins().fabs(a), cx.ins().fabs(b));
    let a_wins = cx.ins().fcmp(FloatCC::GreaterThan, a, b);
    let b_nan = cx.ins().fcmp(FloatCC::Unordered, b, b);
    let take_a = cx.ins().bor(a_wins, b_nan);
    let larger = cx.ins().select(take_a, a, b);
    let tolerance = cx.ins().f64const(1e-9);
    let bound = cx.ins().fmul(tolerance, larger);
    cx.ins().fcmp(FloatCC::LessThanOrEqual, difference, bound)
}

/// Taps per output coordinate of a run-time sized axis, by `resize_taps`'
/// rule (pointer-sized).
fn tap_count(cx: &mut Lower, p: &ResizeParams, s: &SizedAxis) -> Value {
    let count = match (p.mode, p.antialias != 0) {
        (MODE_NEAREST, _) => cx.iconst(1),
        (MODE_LINEAR, false) => cx.iconst(2),
        (_, true) => {
            let start = antialias_start(cx, support(p), s.scale);
            let taps = cx.ins().imul_imm_s(start, -2);
            let taps = cx.ins().iadd_imm_s(taps, 2);
            let (most, least) = (i64_const(cx, MAX_TAPS), i64_const(cx, 1));
            let taps = cx.ins().smin(taps, most);
            let taps = cx.ins().smax(taps, least);
            pointer_sized(cx, taps)
        }
        _ => cx.iconst(4),
    };
    let one = cx.iconst(1);
    cx.ins().select(s.identity, one, count)
}

/// An i64 constant (`Lower::iconst` is pointer-sized).
fn i64_const(cx: &mut Lower, v: i64) -> Value {
    cx.ins().iconst(types::I64, v)
}

/// The half-width of the antialiased kernel: linear 1, cubic 2.
fn support(p: &ResizeParams) -> f64 {
    if p.mode == MODE_LINEAR {
        1.0
    } else {
        2.0
    }
}

/// `floor(-support / min(scale, 1)) + 1` (an i64): the first tap offset
/// of an antialiased kernel of half-width `support`.
fn antialias_start(cx: &mut Lower, support: f64, scale: Value) -> Value {
    let narrowed = scale_at_most_one(cx, scale);
    let reach = cx.ins().f64const(-support);
    let first = cx.ins().fdiv(reach, narrowed);
    let first = cx.ins().floor(first);
    let first = cx.ins().fcvt_to_sint_sat(types::I64, first);
    cx.ins().iadd_imm_s(first, 1)
}

/// `scale.min(1.0)` (a NaN scale gives 1, as `f64::min` does).
fn scale_at_most_one(cx: &mut Lower, scale: Value) -> Value {
    let one = cx.ins().f64const(1.0);
    let below = cx.ins().fcmp(FloatCC::LessThan, scale, one);
    cx.ins().select(below, scale, one)
}

/// Fills the records of axis `a` (`dims` = output length and taps per
/// output coordinate, pointer-sized) at `records`, one row per output
/// coordinate, as `fill_taps` does; `stride` is the axis's input stride
/// in bytes.
fn fill_axis(
    cx: &mut Lower,
    p: &ResizeParams,
    a: usize,
    s: &SizedAxis,
    [out_len, count]: [Value; 2],
    records: Value,
    stride: i64,
) {
    let last = p.in_dims[a] - 1;
    let row_bytes = cx.ins().imul_imm_s(count, TAP_BYTES);
    let l = cx.loop_begin_dynamic(out_len);
    let row_offset = cx.ins().imul(l.index, row_bytes);
    let row = cx.ins().iadd(records, row_offset);
    let o = widened(cx, l.index);
    let (unchanged, resampled, next) = (cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
    cx.ins().brif(s.identity, unchanged, &[], resampled, &[]);

    cx.b.switch_to_block(unchanged);
    let last_index = i64_const(cx, last);
    let index = cx.ins().smin(o, last_index);
    store_tap(cx, row, index, stride, None);
    cx.ins().jump(next, &[]);

    cx.b.switch_to_block(resampled);
    let y = cx.ins().fcvt_from_uint(types::F64, o);
    let (x, outside) = source_coordinate(cx, p, a, s, y);
    if let Some(outside) = outside {
        let (cropped, inside) = (cx.b.create_block(), cx.b.create_block());
        cx.ins().brif(outside, cropped, &[], inside, &[]);
        cx.b.switch_to_block(cropped);
        let t = cx.loop_begin_dynamic(count);
        let tap = cx.advance(row, t.index, TAP_BYTES);
        let (marker, nothing) = (i64_const(cx, -1), cx.ins().f64const(0.0));
        cx.ins().store(MemFlagsData::trusted(), marker, tap, 0);
        cx.ins().store(MemFlagsData::trusted(), nothing, tap, 8);
        cx.loop_end(t);
        cx.ins().jump(next, &[]);
        cx.b.switch_to_block(inside);
    }
    if p.mode == MODE_NEAREST {
        nearest_tap(cx, p, s, x, row, [last, stride]);
    } else {
        window_taps(cx, p, s, x, [row, count], [last, stride]);
    }
    cx.ins().jump(next, &[]);

    cx.b.switch_to_block(next);
    cx.loop_end(l);
}

/// Stores the tap of input `index` (an i64, clamped into the axis) at
/// `tap`, with `weight` (1 when `None`).
fn store_tap(cx: &mut Lower, tap: Value, index: Value, stride: i64, weight: Option<Value>) {
    let flags = MemFlagsData::trusted();
    let offset = cx.ins().imul_imm_s(index, stride);
    cx.ins().store(flags, offset, tap, 0);
    let weight = weight.unwrap_or_else(|| cx.ins().f64const(1.0));
    cx.ins().store(flags, weight, tap, 8);
}

/// `index.clamp(0, last)` for an i64.
fn clamped(cx: &mut Lower, index: Value, last: i64) -> Value {
    let (most, least) = (i64_const(cx, last), i64_const(cx, 0));
    let below = cx.ins().smin(index, most);
    cx.ins().smax(below, least)
}

/// The source coordinate of output coordinate `y` (f64) along axis `a`,
/// and for `tf_crop_and_resize` whether it falls outside the crop region:
/// `source_coordinate`'s formulas in its order of operations.
fn source_coordinate(cx: &mut Lower, p: &ResizeParams, a: usize, s: &SizedAxis, y: Value) -> (Value, Option<Value>) {
    let in_w = p.in_dims[a] as f64;
    let c = |cx: &mut Lower, v: f64| cx.ins().f64const(v);
    let in_w_value = c(cx, in_w);
    let out_w = cx.ins().fmul(s.scale, in_w_value);
    let one = c(cx, 1.0);
    let single = cx.ins().fcmp(FloatCC::Equal, out_w, one);
    let out_w_less_one = cx.ins().fsub(out_w, one);
    let half = c(cx, 0.5);
    // `(y + 0.5) / scale`, the half-pixel modes' common term.
    let centre = |cx: &mut Lower| {
        let centre = cx.ins().fadd(y, half);
        cx.ins().fdiv(centre, s.scale)
    };
    let x = match p.coord_mode {
        COORD_ALIGN_CORNERS => {
            let span = c(cx, in_w - 1.0);
            let x = cx.ins().fmul(y, span);
            let x = cx.ins().fdiv(x, out_w_less_one);
            let zero = c(cx, 0.0);
            cx.ins().select(single, zero, x)
        }
        COORD_ASYMMETRIC => cx.ins().fdiv(y, s.scale),
        COORD_TF_CROP_AND_RESIZE => {
            let (r0, r1) = (p.roi_start[a], p.roi_end[a]);
            let middle = c(cx, (r1 - r0) * (in_w - 1.0) / 2.0);
            let width = c(cx, r1 - r0);
            let span = c(cx, in_w - 1.0);
            let x = cx.ins().fmul(y, width);
            let x = cx.ins().fmul(x, span);
            let x = cx.ins().fdiv(x, out_w_less_one);
            let x = cx.ins().select(single, middle, x);
            let origin = c(cx, r0 * (in_w - 1.0));
            let x = cx.ins().fadd(x, origin);
            let zero = c(cx, 0.0);
            let before = cx.ins().fcmp(FloatCC::LessThan, x, zero);
            let after = cx.ins().fcmp(FloatCC::GreaterThan, x, span);
            return (x, Some(cx.ins().bor(before, after)));
        }
        COORD_HALF_PIXEL_SYMMETRIC => {
            let out_len = cx.ins().fcvt_from_sint(types::F64, s.out);
            let adjustment = cx.ins().fdiv(out_len, out_w);
            let shrink = cx.ins().fsub(one, adjustment);
            let middle = c(cx, in_w / 2.0);
            let offset = cx.ins().fmul(middle, shrink);
            let centre = centre(cx);
            let x = cx.ins().fadd(offset, centre);
            cx.ins().fsub(x, half)
        }
        COORD_TF_HALF_PIXEL_FOR_NN => centre(cx),
        _ => {
            let centre = centre(cx);
            let x = cx.ins().fsub(centre, half);
            if p.coord_mode == COORD_PYTORCH_HALF_PIXEL {
                let edge = c(cx, -0.5);
                cx.ins().select(single, edge, x)
            } else {
                x
            }
        }
    };
    (x, None)
}

/// `x - floor(x)`, or 1 where `x` is whole (`fill_taps`' ratio).
fn ratio(cx: &mut Lower, x: Value) -> Value {
    let floor = cx.ins().floor(x);
    let whole = cx.ins().fcmp(FloatCC::Equal, x, floor);
    let fraction = cx.ins().fsub(x, floor);
    let one = cx.ins().f64const(1.0);
    cx.ins().select(whole, one, fraction)
}

/// The first input index (an i64, not yet clamped) of the `n` (an i64)
/// inputs nearest to `x`, ties to the smaller index, as `fill_taps` finds
/// them; `floor(x + pad)` is bounded by 2^53 first, which changes no
/// index after clamping and keeps the sums below from overflowing.
fn window_start(cx: &mut Lower, x: Value, n: Value) -> Value {
    let pad = cx.ins().iadd_imm_s(n, 1);
    let pad = cx.ins().sshr_imm_u(pad, 1);
    let pad_f = cx.ins().fcvt_from_sint(types::F64, pad);
    let shifted = cx.ins().fadd(x, pad_f);
    let floor = cx.ins().floor(shifted);
    let frac = cx.ins().fsub(shifted, floor);
    let (low, high) = (cx.ins().f64const(-(2f64.powi(53))), cx.ins().f64const(2f64.powi(53)));
    let bounded = cx.ins().fmax(floor, low);
    let bounded = cx.ins().fmin(bounded, high);
    let floor = cx.ins().fcvt_to_sint_sat(types::I64, bounded);
    let zero = cx.ins().f64const(0.0);
    // Even n: -n/2 on a whole position, else 1 - n/2.
    let half = cx.ins().sshr_imm_u(n, 1);
    let whole = cx.ins().fcmp(FloatCC::Equal, frac, zero);
    let minus_half = cx.ins().ineg(half);
    let past = cx.ins().iadd_imm_s(minus_half, 1);
    let even = cx.ins().select(whole, minus_half, past);
    // Odd n: -(n - 1)/2, one more past the middle.
    let below = cx.ins().iadd_imm_s(n, -1);
    let below = cx.ins().sshr_imm_u(below, 1);
    let base = cx.ins().ineg(below);
    let point_five = cx.ins().f64const(0.5);
    let early = cx.ins().fcmp(FloatCC::LessThanOrEqual, frac, point_five);
    let next = cx.ins().iadd_imm_s(base, 1);
    let odd = cx.ins().select(early, base, next);
    let parity = cx.ins().band_imm_s(n, 1);
    let offset = cx.ins().select(parity, odd, even);
    let start = cx.ins().iadd(floor, offset);
    cx.ins().isub(start, pad)
}

/// Nearest's one tap: the lower or upper of the two inputs around `x`
/// by `nearest_mode` (with exclude_outside, an upper one outside the input
/// gives way to the lower).
fn nearest_tap(cx: &mut Lower, p: &ResizeParams, s: &SizedAxis, x: Value, row: Value, [last, stride]: [i64; 2]) {
    let ratio = ratio(cx, x);
    let c = |cx: &mut Lower, v: f64| cx.ins().f64const(v);
    let half = c(cx, 0.5);
    let upper = match p.nearest_mode {
        NEAREST_ROUND_PREFER_CEIL => cx.ins().fcmp(FloatCC::GreaterThanOrEqual, ratio, half),
        NEAREST_FLOOR => cx.ins().iconst(types::I8, 0),
        NEAREST_CEIL => cx.ins().iconst(types::I8, 1),
        NEAREST_SIMPLE => {
            let one = c(cx, 1.0);
            cx.ins().fcmp(FloatCC::LessThan, s.scale, one)
        }
        _ => cx.ins().fcmp(FloatCC::GreaterThan, ratio, half),
    };
    let one = c(cx, 1.0);
    let whole = cx.ins().fcmp(FloatCC::Equal, ratio, one);
    let mut upper = cx.ins().bor(whole, upper);
    let two = i64_const(cx, 2);
    let lower = window_start(cx, x, two);
    let higher = cx.ins().iadd_imm_s(lower, 1);
    if p.exclude_outside != 0 {
        let inside = in_input(cx, higher, last);
        upper = cx.ins().band(upper, inside);
    }
    let index = cx.ins().select(upper, higher, lower);
    let index = clamped(cx, index, last);
    store_tap(cx, row, index, stride, None);
}

/// 1 (an i8) when the i64 `index` is in `0..=last`.
fn in_input(cx: &mut Lower, index: Value, last: i64) -> Value {
    let from = cx.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, index, 0);
    let to = cx.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, index, last);
    cx.ins().band(from, to)
}

/// The `count` taps of linear or cubic at `x` into `row`: weights (then
/// normalised when antialiased), the window's indices, weights outside the
/// input dropped and the rest normalised with exclude_outside, indices
/// clamped, in `fill_taps`' order.
fn window_taps(
    cx: &mut Lower,
    p: &ResizeParams,
    s: &SizedAxis,
    x: Value,
    [row, count]: [Value; 2],
    [last, stride]: [i64; 2],
) {
    let ratio = ratio(cx, x);
    let n = widened(cx, count);
    let start = window_start(cx, x, n);
    let antialias = p.antialias != 0;
    let first = antialias.then(|| antialias_start(cx, support(p), s.scale));
    let narrowed = scale_at_most_one(cx, s.scale);
    let flags = MemFlagsData::trusted();
    each_tap(cx, row, count, &mut |cx, k, tap| {
        let weight = window_weight(cx, p, [ratio, narrowed], first, k);
        // The index unclamped for now (exclude_outside tests it).
        let index = cx.ins().iadd(start, k);
        cx.ins().store(flags, index, tap, 0);
        cx.ins().store(flags, weight, tap, 8);
    });
    if antialias {
        let sum = weight_sum(cx, row, count);
        divide_weights(cx, row, count, sum);
    }
    if p.exclude_outside != 0 {
        each_tap(cx, row, count, &mut |cx, _, tap| {
            let index = cx.ins().load(types::I64, flags, tap, 0);
            let inside = in_input(cx, index, last);
            let weight = cx.ins().load(types::F64, flags, tap, 8);
            let zero = cx.ins().f64const(0.0);
            let weight = cx.ins().select(inside, weight, zero);
            cx.ins().store(flags, weight, tap, 8);
        });
        let sum = weight_sum(cx, row, count);
        let (zero, one) = (cx.ins().f64const(0.0), cx.ins().f64const(1.0));
        let nothing = cx.ins().fcmp(FloatCC::Equal, sum, zero);
        let sum = cx.ins().select(nothing, one, sum);
        divide_weights(cx, row, count, sum);
    }
    each_tap(cx, row, count, &mut |cx, _, tap| {
        let index = cx.ins().load(types::I64, flags, tap, 0);
        let index = clamped(cx, index, last);
        let offset = cx.ins().imul_imm_s(index, stride);
        cx.ins().store(flags, offset, tap, 0);
    });
}

/// Weight `k` (an i64) of the window: linear `1 - ratio, ratio`; Keys
/// cubic at `ratio + 1 - k`; antialiased, the kernel widened by
/// `1 / narrowed` from tap offset `first`.
fn window_weight(
    cx: &mut Lower,
    p: &ResizeParams,
    [ratio, narrowed]: [Value; 2],
    first: Option<Value>,
    k: Value,
) -> Value {
    let one = cx.ins().f64const(1.0);
    if let Some(first) = first {
        let offset = cx.ins().iadd(first, k);
        let offset = cx.ins().fcvt_from_sint(types::F64, offset);
        let distance = cx.ins().fsub(offset, ratio);
        if p.mode == MODE_LINEAR {
            let distance = cx.ins().fmul(distance, narrowed);
            let distance = cx.ins().fabs(distance);
            let w = cx.ins().fsub(one, distance);
            // `clamp(0, 1)`: NaN stays NaN.
            let zero = cx.ins().f64const(0.0);
            let negative = cx.ins().fcmp(FloatCC::LessThan, w, zero);
            let above = cx.ins().fcmp(FloatCC::GreaterThan, w, one);
            let w = cx.ins().select(above, one, w);
            return cx.ins().select(negative, zero, w);
        }
        let distance = cx.ins().fmul(narrowed, distance);
        return cubic_weight(cx, distance, p.cubic_a);
    }
    if p.mode == MODE_LINEAR {
        let first = cx.ins().icmp_imm_s(IntCC::Equal, k, 0);
        let complement = cx.ins().fsub(one, ratio);
        return cx.ins().select(first, complement, ratio);
    }
    let shifted = cx.ins().fadd(ratio, one);
    let k = cx.ins().fcvt_from_sint(types::F64, k);
    let distance = cx.ins().fsub(shifted, k);
    cubic_weight(cx, distance, p.cubic_a)
}

/// Runs `body(k, tap)` for each of the `count` taps of `row` (`k` an i64).
fn each_tap(cx: &mut Lower, row: Value, count: Value, body: &mut dyn FnMut(&mut Lower, Value, Value)) {
    let l = cx.loop_begin_dynamic(count);
    let tap = cx.advance(row, l.index, TAP_BYTES);
    let k = widened(cx, l.index);
    body(cx, k, tap);
    cx.loop_end(l);
}

/// The sum of `row`'s `count` weights, in order (from -0, as Rust's float
/// sum starts).
fn weight_sum(cx: &mut Lower, row: Value, count: Value) -> Value {
    let sum = cx.b.declare_var(types::F64);
    let start = cx.ins().f64const(-0.0);
    cx.b.def_var(sum, start);
    each_tap(cx, row, count, &mut |cx, _, tap| {
        let weight = cx.ins().load(types::F64, MemFlagsData::trusted(), tap, 8);
        let before = cx.b.use_var(sum);
        let after = cx.ins().fadd(before, weight);
        cx.b.def_var(sum, after);
    });
    cx.b.use_var(sum)
}

fn divide_weights(cx: &mut Lower, row: Value, count: Value, by: Value) {
    each_tap(cx, row, count, &mut |cx, _, tap| {
        let flags = MemFlagsData::trusted();
        let weight = cx.ins().load(types::F64, flags, tap, 8);
        let weight = cx.ins().fdiv(weight, by);
        cx.ins().store(flags, weight, tap, 8);
    });
}
