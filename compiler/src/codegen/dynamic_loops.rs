//! Portable lowerings of the operators whose output sizes depend on the
//! data, the kernels' `generic/dynamic.rs` family: NonZero, Compress,
//! Range, and Expand and Tile of a shape or repeats known only at run
//! time, for portable mode, where their kernels are not linked. Each
//! computes the output size in generated code by its kernel's rule, gets
//! the memory from [`Lower::alloc_output`], then writes.
//!
//! NonZero and Compress count in one pass and write in a second; "not
//! zero" is the kernels' rule: any bit set for integers and bool, any bit
//! but the sign for floats (so -0 is zero and NaN is not). The writing
//! pass carries the number written so far and writes only while it is
//! below the count, so it can never write past what was allocated.
//!
//! Range counts `ceil((limit - start) / delta)` (clamped at 0): floats in
//! f64 as the kernel and constant folding do, integers widened to i64 and
//! divided as unsigned magnitudes, so no span overflows; a zero step (or a
//! non-finite count) is [`status::INVALID_PARAMS`]. Element `i` is
//! `start + i * delta`, in f64 for floats (rounded once to f32, then to a
//! 16-bit float), wrapping for integers.
//!
//! Expand's and Tile's argument is read and every output dim checked
//! before the output is allocated: a negative entry, or for Expand a dim
//! that is neither the input's nor 1 where the input's is not 1, is
//! [`status::INVALID_PARAMS`]. The copy then reads input index `o` along
//! each axis (Expand: 0 where the input dim is 1; Tile: `o mod dim`), so
//! no address leaves the input, and writes the output densely.
//!
//! Unique ([`unique_count`], [`unique_write`]) is the kernel's: the slices
//! along the axis ranked by a stable insertion sort (lexicographic over
//! the slice's elements, NaN above every number and equal to NaN, -0
//! equal to 0), grouped where neighbours compare equal, and for unsorted
//! output the groups renumbered by first occurrence; the scratch holds
//! the ranking, each slice's group and each group's first slice.
//!
//! NonMaxSuppression ([`nms`]) is the kernel's greedy selection per batch
//! and class: the boxes scoring above the threshold ranked by an insertion
//! (score by `total_cmp`, descending, ties to the lower index), then each
//! in turn kept unless it overlaps a kept one by more than the IoU
//! threshold (the kernel's corner and overlap rules, Rust's `min`/`max`
//! included), until `max_output_boxes_per_class` are kept. Every index it
//! forms is a box below `n` or a count of the `n` slots of its scratch.

use super::gather_loops::{pointer_sized, widened};
use super::nest::Level;
use super::{half_floats, status, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::{NmsParams, SliceParams};

/// 1 when the element of `dtype` at `at` is not zero, else 0 (an i8).
fn is_nonzero(cx: &mut Lower, dtype: DType, at: Value) -> Result<Value, String> {
    let (ty, magnitude) = match dtype {
        DType::F32 => (types::I32, Some(0x7fff_ffff)),
        DType::F64 => (types::I64, Some(i64::MAX)),
        DType::F16 | DType::BF16 => (types::I16, Some(0x7fff)),
        d if d.is_int() || d == DType::Bool => (super::clif_type(d), None),
        other => return Err(format!("{other} has no portable test for zero")),
    };
    let mut bits = cx.ins().load(ty, MemFlagsData::trusted(), at, 0);
    if let Some(magnitude) = magnitude {
        bits = cx.ins().band_imm_s(bits, magnitude);
    }
    Ok(cx.ins().icmp_imm_u(IntCC::NotEqual, bits, 0))
}

/// How many of the `n` elements of `dtype` at `x` are not zero (pointer-sized).
pub fn count_nonzero(cx: &mut Lower, dtype: DType, x: Value, n: usize) -> Result<Value, String> {
    let zero = cx.iconst(0);
    let all = [Level::new(n, vec![dtype.size() as i64])];
    Ok(cx.fold_nest(&all, &[x], &[zero], &mut |cx, _, at, acc| {
        let set = is_nonzero(cx, dtype, at[0])?;
        let ptr = cx.ptr_type();
        let set = cx.ins().uextend(ptr, set);
        Ok(vec![cx.ins().iadd(acc[0], set)])
    })?[0])
}

/// Runs `write(found)` when `cond` is set and `found` is below `count`;
/// returns `found` plus one in that case, else `found`.
fn write_if(
    cx: &mut Lower,
    cond: Value,
    found: Value,
    count: Value,
    write: &mut dyn FnMut(&mut Lower, Value),
) -> Value {
    let room = cx.ins().icmp(IntCC::UnsignedLessThan, found, count);
    let go = cx.ins().band(cond, room);
    let (body, done) = (cx.b.create_block(), cx.b.create_block());
    cx.ins().brif(go, body, &[], done, &[]);
    cx.b.switch_to_block(body);
    write(cx, found);
    cx.ins().jump(done, &[]);
    cx.b.switch_to_block(done);
    let ptr = cx.ptr_type();
    let step = cx.ins().uextend(ptr, go);
    cx.ins().iadd(found, step)
}

/// NonZero into `y` (`[rank, count]` i64s): the coordinates of the first
/// `count` nonzero elements of `x` (of `dtype` and `shape`), in order.
pub fn nonzero(cx: &mut Lower, dtype: DType, shape: &[usize], x: Value, y: Value, count: Value) -> Result<(), String> {
    let mut step = dtype.size() as i64;
    let mut levels = vec![Level::new(0, Vec::new()); shape.len()];
    for d in (0..shape.len()).rev() {
        levels[d] = Level::new(shape[d], vec![step]);
        step *= shape[d] as i64;
    }
    let row = cx.ins().imul_imm_s(count, 8);
    let zero = cx.iconst(0);
    cx.fold_nest(&levels, &[x], &[zero], &mut |cx, index, at, acc| {
        let set = is_nonzero(cx, dtype, at[0])?;
        Ok(vec![write_if(cx, set, acc[0], count, &mut |cx, found| {
            let mut dst = cx.advance(y, found, 8);
            for &i in index {
                let i = if cx.ptr_type() == types::I64 { i } else { cx.ins().uextend(types::I64, i) };
                cx.ins().store(MemFlagsData::trusted(), i, dst, 0);
                dst = cx.ins().iadd(dst, row);
            }
        })])
    })?;
    Ok(())
}

/// Compress of `x` as `[outer, len, inner]` (`elem_bytes` per element) by
/// the first `used` bools at `cond` into `y` (`[outer, count, inner]`).
pub fn compress(
    cx: &mut Lower,
    [outer, len, inner, elem_bytes]: [i64; 4],
    used: usize,
    [x, cond, y]: [Value; 3],
    count: Value,
) -> Result<(), String> {
    let slice = inner * elem_bytes;
    if outer * slice == 0 || used == 0 {
        return Ok(());
    }
    let out_row = cx.ins().imul_imm_s(count, slice);
    let o = cx.loop_begin(outer as usize);
    let src_row = cx.advance(x, o.index, len * slice);
    let dst_row = cx.ins().imul(o.index, out_row);
    let dst_row = cx.ins().iadd(y, dst_row);
    let zero = cx.iconst(0);
    let entries = [Level::new(used, vec![1, slice])];
    cx.fold_nest(&entries, &[cond, src_row], &[zero], &mut |cx, _, at, acc| {
        let set = is_nonzero(cx, DType::Bool, at[0])?;
        Ok(vec![write_if(cx, set, acc[0], count, &mut |cx, found| {
            let dst = cx.advance(dst_row, found, slice);
            cx.copy_run(dst, at[1], slice);
        })])
    })?;
    cx.loop_end(o);
    Ok(())
}

/// Expand's (`tile` false) or Tile's output dims for an input of `dims`
/// and the `arg_len` i64s at `arg`, as pointer-sized values.
pub fn output_dims(
    cx: &mut Lower,
    dims: &[usize],
    arg: Value,
    arg_len: usize,
    tile: bool,
) -> Result<Vec<Value>, String> {
    let rank = if tile { dims.len() } else { dims.len().max(arg_len) };
    if tile && arg_len != rank {
        return Err(format!("repeats has {arg_len} entries, input 0 has rank {rank}"));
    }
    let mut out = Vec::with_capacity(rank);
    for (d, &input) in aligned_dims(dims, rank).iter().enumerate() {
        let Some(a) = (d + arg_len).checked_sub(rank) else {
            out.push(cx.iconst(input as i64));
            continue;
        };
        let given = cx.ins().load(types::I64, MemFlagsData::trusted(), arg, (8 * a) as i32);
        let negative = cx.ins().icmp_imm_s(IntCC::SignedLessThan, given, 0);
        cx.fail_if(negative, status::INVALID_PARAMS);
        let given = pointer_sized(cx, given);
        let dim = if tile {
            let input = cx.iconst(input as i64);
            let (product, overflow) = cx.ins().umul_overflow(given, input);
            cx.fail_if(overflow, status::INVALID_PARAMS);
            product
        } else if input == 1 {
            given
        } else {
            let equal = cx.ins().icmp_imm_u(IntCC::Equal, given, input as i64);
            let one = cx.ins().icmp_imm_u(IntCC::Equal, given, 1);
            let fits = cx.ins().bor(equal, one);
            let mismatch = cx.ins().bxor_imm_u(fits, 1);
            cx.fail_if(mismatch, status::INVALID_PARAMS);
            cx.iconst(input as i64)
        };
        out.push(dim);
    }
    Ok(out)
}

/// The input's dims with leading 1s up to `rank`.
fn aligned_dims(dims: &[usize], rank: usize) -> Vec<usize> {
    let mut aligned = vec![1; rank - dims.len()];
    aligned.extend_from_slice(dims);
    aligned
}

/// `y[o] = x[o mod dims]` over the output of run-time `out_dims` (from
/// [`output_dims`]), `elem_bytes` per element.
pub fn broadcast(
    cx: &mut Lower,
    elem_bytes: i64,
    dims: &[usize],
    out_dims: &[Value],
    tile: bool,
    [x, y]: [Value; 2],
) -> Result<(), String> {
    let input = aligned_dims(dims, out_dims.len());
    if input.contains(&0) && tile {
        return Ok(());
    }
    let mut in_strides = vec![elem_bytes; input.len()];
    for d in (0..input.len().saturating_sub(1)).rev() {
        in_strides[d] = in_strides[d + 1] * input[d + 1] as i64;
    }
    let mut out_strides = vec![cx.iconst(elem_bytes); out_dims.len()];
    for d in (0..out_dims.len().saturating_sub(1)).rev() {
        out_strides[d] = cx.ins().imul(out_strides[d + 1], out_dims[d + 1]);
    }
    let axes: Vec<Axis> = (0..input.len())
        .map(|d| Axis { input: input[d], in_stride: in_strides[d], count: out_dims[d], out_stride: out_strides[d] })
        .collect();
    copy_axes(cx, &axes, tile, elem_bytes, x, y);
    Ok(())
}

/// One output axis of the copy.
struct Axis {
    input: usize,
    in_stride: i64,
    count: Value,
    out_stride: Value,
}

fn copy_axes(cx: &mut Lower, axes: &[Axis], tile: bool, elem_bytes: i64, src: Value, dst: Value) {
    let Some((axis, rest)) = axes.split_first() else {
        cx.copy_run(dst, src, elem_bytes);
        return;
    };
    let l = cx.loop_begin_dynamic(axis.count);
    // A dim of 1 reads its one index (both rules give 0 there).
    let src = if axis.input == 1 {
        src
    } else {
        let from = if tile { cx.ins().urem_imm_u(l.index, axis.input as i64) } else { l.index };
        cx.advance(src, from, axis.in_stride)
    };
    let offset = cx.ins().imul(l.index, axis.out_stride);
    let dst = cx.ins().iadd(dst, offset);
    copy_axes(cx, rest, tile, elem_bytes, src, dst);
    cx.loop_end(l);
}

/// The Range element of `dtype` at `at`: floats as f64, integers as i64.
fn load_step(cx: &mut Lower, dtype: DType, at: Value) -> Result<Value, String> {
    let raw = cx.ins().load(super::clif_type(dtype), MemFlagsData::trusted(), at, 0);
    Ok(match dtype {
        DType::F64 => raw,
        DType::F32 => cx.ins().fpromote(types::F64, raw),
        DType::F16 | DType::BF16 => {
            let bits = cx.ins().uextend(types::I32, raw);
            let f = half_floats::widen(cx.b, dtype, bits);
            cx.ins().fpromote(types::F64, f)
        }
        DType::I64 => raw,
        DType::I16 | DType::I32 => cx.ins().sextend(types::I64, raw),
        other => return Err(format!("Range of {other} has no portable lowering")),
    })
}

/// Range's length (pointer-sized) from the scalars of `dtype` at `start`,
/// `limit` and `delta`, by `onnxc_range_count`'s rule.
pub fn range_count(cx: &mut Lower, dtype: DType, [start, limit, delta]: [Value; 3]) -> Result<Value, String> {
    let [start, limit, delta] = [start, limit, delta].map(|at| load_step(cx, dtype, at));
    let (start, limit, delta) = (start?, limit?, delta?);
    let n = if dtype.is_float() {
        let span = cx.ins().fsub(limit, start);
        let quotient = cx.ins().fdiv(span, delta);
        let n = cx.ins().ceil(quotient);
        let zero = cx.ins().f64const(0.0);
        let still = cx.ins().fcmp(FloatCC::Equal, delta, zero);
        let magnitude = cx.ins().fabs(n);
        let infinity = cx.ins().f64const(f64::INFINITY);
        let finite = cx.ins().fcmp(FloatCC::LessThan, magnitude, infinity);
        let unbounded = cx.ins().bxor_imm_u(finite, 1);
        let invalid = cx.ins().bor(still, unbounded);
        cx.fail_if(invalid, status::INVALID_PARAMS);
        let n = cx.ins().fmax(n, zero);
        cx.ins().fcvt_to_sint_sat(types::I64, n)
    } else {
        let still = cx.ins().icmp_imm_s(IntCC::Equal, delta, 0);
        cx.fail_if(still, status::INVALID_PARAMS);
        int_count(cx, start, limit, delta)
    };
    Ok(pointer_sized(cx, n))
}

/// `ceil((limit - start) / delta)` clamped to `0..=i64::MAX` for i64
/// operands and a nonzero `delta`: the span's and the step's magnitudes
/// divided as unsigned numbers, which cannot overflow.
fn int_count(cx: &mut Lower, start: Value, limit: Value, delta: Value) -> Value {
    let up = cx.ins().icmp(IntCC::SignedLessThan, start, limit);
    let down = cx.ins().icmp(IntCC::SignedGreaterThan, start, limit);
    let backwards = cx.ins().icmp_imm_s(IntCC::SignedLessThan, delta, 0);
    let (rising, falling) = (cx.ins().isub(limit, start), cx.ins().isub(start, limit));
    let span = cx.ins().select(up, rising, falling);
    let negated = cx.ins().ineg(delta);
    let step = cx.ins().select(backwards, negated, delta);
    let whole = cx.ins().udiv(span, step);
    let rest = cx.ins().urem(span, step);
    let partial = cx.ins().icmp_imm_u(IntCC::NotEqual, rest, 0);
    let partial = cx.ins().uextend(types::I64, partial);
    let n = cx.ins().iadd(whole, partial);
    let forwards = cx.ins().bxor_imm_u(backwards, 1);
    let with_up = cx.ins().band(up, forwards);
    let with_down = cx.ins().band(down, backwards);
    let moves = cx.ins().bor(with_up, with_down);
    let zero = cx.ins().iconst(types::I64, 0);
    let n = cx.ins().select(moves, n, zero);
    let too_many = cx.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
    let most = cx.ins().iconst(types::I64, i64::MAX);
    cx.ins().select(too_many, most, n)
}

/// Range into `y`: `start + i * delta` for `i` in `0..count` (pointer-sized).
pub fn range(cx: &mut Lower, dtype: DType, [start, delta, y]: [Value; 3], count: Value) -> Result<(), String> {
    let (start, delta) = (load_step(cx, dtype, start)?, load_step(cx, dtype, delta)?);
    let l = cx.loop_begin_dynamic(count);
    let value = if dtype.is_float() {
        let i = cx.ins().fcvt_from_uint(types::F64, l.index);
        let offset = cx.ins().fmul(delta, i);
        let v = cx.ins().fadd(start, offset);
        match dtype {
            DType::F64 => v,
            DType::F32 => cx.ins().fdemote(types::F32, v),
            _ => {
                let v = cx.ins().fdemote(types::F32, v);
                let bits = half_floats::narrow(cx.b, dtype, v);
                cx.ins().ireduce(types::I16, bits)
            }
        }
    } else {
        let i = if cx.ptr_type() == types::I64 { l.index } else { cx.ins().uextend(types::I64, l.index) };
        let offset = cx.ins().imul(delta, i);
        let v = cx.ins().iadd(start, offset);
        let ty = super::clif_type(dtype);
        if ty == types::I64 {
            v
        } else {
            cx.ins().ireduce(ty, v)
        }
    };
    let at = cx.advance(y, l.index, dtype.size() as i64);
    cx.ins().store(MemFlagsData::trusted(), value, at, 0);
    cx.loop_end(l);
    Ok(())
}

/// NonMaxSuppression's inputs: boxes and scores, and the optional scalar
/// `max_output_boxes_per_class`, `iou_threshold` and `score_threshold`.
pub struct NmsInputs {
    pub boxes: Value,
    pub scores: Value,
    pub max_out: Option<Value>,
    pub iou: Option<Value>,
    pub score_threshold: Option<Value>,
}

/// NonMaxSuppression of `p`'s boxes into `selected` (room for every box's
/// `(batch, class, box)` i64 triple), with `scratch` holding `2 * boxes`
/// i64s (the ranked candidates, then the kept boxes); returns the number
/// of triples (pointer-sized).
pub fn nms(cx: &mut Lower, p: &NmsParams, t: &NmsInputs, selected: Value, scratch: Value) -> Result<Value, String> {
    let flags = MemFlagsData::trusted();
    let n = p.boxes.max(0) as usize;
    let limit = match t.max_out {
        Some(at) => {
            let v = cx.ins().load(types::I64, flags, at, 0);
            let zero = cx.ins().iconst(types::I64, 0);
            cx.ins().smax(v, zero)
        }
        None => cx.ins().iconst(types::I64, 0),
    };
    let iou = match t.iou {
        Some(at) => cx.ins().load(types::F32, flags, at, 0),
        None => cx.ins().f32const(0.0),
    };
    let threshold = t.score_threshold.map(|at| cx.ins().load(types::F32, flags, at, 0));
    let ranked = Ranked { order: scratch, kept: cx.ins().iadd_imm_s(scratch, 8 * n as i64) };
    let classes = [Level::new(p.batches.max(0) as usize, vec![]), Level::new(p.classes.max(0) as usize, vec![])];
    let none = cx.iconst(0);
    let total = cx.fold_nest(&classes, &[], &[none], &mut |cx, bc, _, acc| {
        let (b, c) = (bc[0], bc[1]);
        let row = cx.ins().imul_imm_s(b, p.classes);
        let row = cx.ins().iadd(row, c);
        let scores = cx.advance(t.scores, row, 4 * n as i64);
        let boxes = cx.advance(t.boxes, b, 16 * n as i64);
        let every = [Level::new(n, vec![4])];
        let none = cx.iconst(0);
        let candidates = cx.fold_nest(&every, &[scores], &[none], &mut |cx, j, at, acc| {
            let s = cx.ins().load(types::F32, flags, at[0], 0);
            let passes = match threshold {
                Some(t) => cx.ins().fcmp(FloatCC::GreaterThan, s, t),
                None => cx.ins().iconst(types::I8, 1),
            };
            let (insert, next) = (cx.b.create_block(), cx.b.create_block());
            cx.ins().brif(passes, insert, &[], next, &[]);
            cx.b.switch_to_block(insert);
            ranked.insert(cx, scores, acc[0], j[0], s);
            cx.ins().jump(next, &[]);
            cx.b.switch_to_block(next);
            let ptr = cx.ptr_type();
            let step = cx.ins().uextend(ptr, passes);
            Ok(vec![cx.ins().iadd(acc[0], step)])
        })?[0];
        let ranks = [Level::new(n, vec![])];
        let none = cx.iconst(0);
        let greedy = cx.fold_nest(&ranks, &[], &[none, acc[0]], &mut |cx, rank, _, acc| {
            let (chosen, total) = (acc[0], acc[1]);
            let ranked_yet = cx.ins().icmp(IntCC::UnsignedLessThan, rank[0], candidates);
            let chosen_wide = widened(cx, chosen);
            let room = cx.ins().icmp(IntCC::SignedLessThan, chosen_wide, limit);
            let active = cx.ins().band(ranked_yet, room);
            let ptr = cx.ptr_type();
            let (work, keep, join) = (cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
            let (chosen_out, total_out) = (cx.b.append_block_param(join, ptr), cx.b.append_block_param(join, ptr));
            cx.ins().brif(active, work, &[], join, &[chosen.into(), total.into()]);
            cx.b.switch_to_block(work);
            let slot = cx.advance(ranked.order, rank[0], 8);
            let j = cx.ins().load(types::I64, flags, slot, 0);
            let this = corners(cx, p, boxes, j);
            let suppressed = ranked.overlaps_kept(cx, p, boxes, chosen, this, iou);
            cx.ins().brif(suppressed, join, &[chosen.into(), total.into()], keep, &[]);
            cx.b.switch_to_block(keep);
            let slot = cx.advance(ranked.kept, chosen, 8);
            cx.ins().store(flags, j, slot, 0);
            let triple = cx.advance(selected, total, 24);
            let (b64, c64) = (widened(cx, b), widened(cx, c));
            for (k, v) in [b64, c64, j].into_iter().enumerate() {
                cx.ins().store(flags, v, triple, 8 * k as i32);
            }
            let (chosen_next, total_next) = (cx.ins().iadd_imm_s(chosen, 1), cx.ins().iadd_imm_s(total, 1));
            cx.ins().jump(join, &[chosen_next.into(), total_next.into()]);
            cx.b.switch_to_block(join);
            Ok(vec![chosen_out, total_out])
        })?;
        Ok(vec![greedy[1]])
    })?[0];
    Ok(total)
}

/// NonMaxSuppression's scratch: `order`, the candidates (box indices, i64)
/// best first, and `kept`, the boxes kept so far for the current class.
struct Ranked {
    order: Value,
    kept: Value,
}

/// Inserts `j` (pointer-sized) into the `count` i64 entries at `order`,
/// moving it up past each entry `e` for which `moves_past(e)` (an i64
/// entry, giving an i8) holds, from the last on: with `j` above every
/// entry so far, a stable insertion sort.
fn insert_sorted(
    cx: &mut Lower,
    order: Value,
    count: Value,
    j: Value,
    moves_past: &mut dyn FnMut(&mut Lower, Value) -> Value,
) {
    let flags = MemFlagsData::trusted();
    let ptr = cx.ptr_type();
    let (sift, compare, up, place) =
        (cx.b.create_block(), cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
    let pos = cx.b.append_block_param(sift, ptr);
    let place_pos = cx.b.append_block_param(place, ptr);
    cx.ins().jump(sift, &[count.into()]);
    cx.b.switch_to_block(sift);
    cx.ins().brif(pos, compare, &[], place, &[pos.into()]);
    cx.b.switch_to_block(compare);
    let above = cx.ins().iadd_imm_s(pos, -1);
    let above_slot = cx.advance(order, above, 8);
    let above_entry = cx.ins().load(types::I64, flags, above_slot, 0);
    let moves = moves_past(cx, above_entry);
    cx.ins().brif(moves, up, &[], place, &[pos.into()]);
    cx.b.switch_to_block(up);
    let slot = cx.advance(order, pos, 8);
    cx.ins().store(flags, above_entry, slot, 0);
    cx.ins().jump(sift, &[above.into()]);
    cx.b.switch_to_block(place);
    let slot = cx.advance(order, place_pos, 8);
    let j64 = widened(cx, j);
    cx.ins().store(flags, j64, slot, 0);
}

/// The `total_cmp` key of the f32 `s`: its bits as an i32, the magnitude
/// bits of a negative one flipped, so that signed integer order is
/// `total_cmp`'s.
fn total_order_key(cx: &mut Lower, s: Value) -> Value {
    let bits = cx.ins().bitcast(types::I32, MemFlagsData::new(), s);
    let sign = cx.ins().sshr_imm_u(bits, 31);
    let flip = cx.ins().ushr_imm_u(sign, 1);
    cx.ins().bxor(bits, flip)
}

impl Ranked {
    /// Inserts box `j` (pointer-sized, score `s`; `scores` the class's row)
    /// after the first `count` candidates, moving it up past every one
    /// scoring strictly lower.
    fn insert(&self, cx: &mut Lower, scores: Value, count: Value, j: Value, s: Value) {
        let key = total_order_key(cx, s);
        insert_sorted(cx, self.order, count, j, &mut |cx, above| {
            let above_index = pointer_sized(cx, above);
            let above_score = cx.advance(scores, above_index, 4);
            let above_score = cx.ins().load(types::F32, MemFlagsData::trusted(), above_score, 0);
            let above_key = total_order_key(cx, above_score);
            cx.ins().icmp(IntCC::SignedLessThan, above_key, key)
        });
    }

    /// Whether the box of corners `this` overlaps one of the first `chosen`
    /// kept boxes by more than `iou`.
    fn overlaps_kept(
        &self,
        cx: &mut Lower,
        p: &NmsParams,
        boxes: Value,
        chosen: Value,
        this: [Value; 4],
        iou: Value,
    ) -> Value {
        let ptr = cx.ptr_type();
        let (header, body, done) = (cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
        let k = cx.b.append_block_param(header, ptr);
        let found = cx.b.append_block_param(done, types::I8);
        let (zero, no, yes) = (cx.iconst(0), cx.ins().iconst(types::I8, 0), cx.ins().iconst(types::I8, 1));
        cx.ins().jump(header, &[zero.into()]);
        cx.b.switch_to_block(header);
        let end = cx.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, k, chosen);
        cx.ins().brif(end, done, &[no.into()], body, &[]);
        cx.b.switch_to_block(body);
        let slot = cx.advance(self.kept, k, 8);
        let other = cx.ins().load(types::I64, MemFlagsData::trusted(), slot, 0);
        let other = corners(cx, p, boxes, other);
        let hit = overlaps(cx, this, other, iou);
        let next = cx.ins().iadd_imm_s(k, 1);
        cx.ins().brif(hit, done, &[yes.into()], header, &[next.into()]);
        cx.b.switch_to_block(done);
        found
    }
}

/// Rust's `f32::min` (`less`) or `max`: of a NaN and a number, the number.
pub(super) fn rust_min_max(cx: &mut Lower, less: bool, a: Value, b: Value) -> Value {
    let cc = if less { FloatCC::LessThan } else { FloatCC::GreaterThan };
    let wins = cx.ins().fcmp(cc, a, b);
    let b_nan = cx.ins().fcmp(FloatCC::Unordered, b, b);
    let take_a = cx.ins().bor(wins, b_nan);
    cx.ins().select(take_a, a, b)
}

/// Box `j` (an i64 below `p.boxes`) of the batch's `boxes` as
/// `(y_min, x_min, y_max, x_max)`, by the kernel's rule.
fn corners(cx: &mut Lower, p: &NmsParams, boxes: Value, j: Value) -> [Value; 4] {
    let j = pointer_sized(cx, j);
    let at = cx.advance(boxes, j, 16);
    let v: [Value; 4] = std::array::from_fn(|k| cx.ins().load(types::F32, MemFlagsData::trusted(), at, 4 * k as i32));
    if p.center_point_box != 0 {
        let two = cx.ins().f32const(2.0);
        let (hw, hh) = (cx.ins().fdiv(v[2], two), cx.ins().fdiv(v[3], two));
        return [cx.ins().fsub(v[1], hh), cx.ins().fsub(v[0], hw), cx.ins().fadd(v[1], hh), cx.ins().fadd(v[0], hw)];
    }
    [
        rust_min_max(cx, true, v[0], v[2]),
        rust_min_max(cx, true, v[1], v[3]),
        rust_min_max(cx, false, v[0], v[2]),
        rust_min_max(cx, false, v[1], v[3]),
    ]
}

/// The kernel's `overlaps`: both extents of the intersection positive,
/// both areas and the union positive, and intersection over union above
/// `threshold` (an i8).
fn overlaps(cx: &mut Lower, a: [Value; 4], b: [Value; 4], threshold: Value) -> Value {
    let extent = |cx: &mut Lower, lo: usize, hi: usize| {
        let top = rust_min_max(cx, true, a[hi], b[hi]);
        let bottom = rust_min_max(cx, false, a[lo], b[lo]);
        cx.ins().fsub(top, bottom)
    };
    let (h, w) = (extent(cx, 0, 2), extent(cx, 1, 3));
    let inter = cx.ins().fmul(h, w);
    let area = |cx: &mut Lower, c: [Value; 4]| {
        let (dy, dx) = (cx.ins().fsub(c[2], c[0]), cx.ins().fsub(c[3], c[1]));
        cx.ins().fmul(dy, dx)
    };
    let (area_a, area_b) = (area(cx, a), area(cx, b));
    let sum = cx.ins().fadd(area_a, area_b);
    let union = cx.ins().fsub(sum, inter);
    let zero = cx.ins().f32const(0.0);
    let mut ok = cx.ins().iconst(types::I8, 1);
    for v in [h, w, area_a, area_b, union] {
        let positive = cx.ins().fcmp(FloatCC::UnorderedOrGreaterThan, v, zero);
        ok = cx.ins().band(ok, positive);
    }
    let ratio = cx.ins().fdiv(inter, union);
    let above = cx.ins().fcmp(FloatCC::GreaterThan, ratio, threshold);
    cx.ins().band(ok, above)
}

/// Unique's three scratch rows of `len` i64s (see the module doc).
struct UniqueScratch {
    order: Value,
    group: Value,
    first: Value,
}

impl UniqueScratch {
    fn new(cx: &mut Lower, scratch: Value, len: i64) -> UniqueScratch {
        let group = cx.ins().iadd_imm_s(scratch, 8 * len);
        let first = cx.ins().iadd_imm_s(scratch, 16 * len);
        UniqueScratch { order: scratch, group, first }
    }
}

/// The i64 at entry `i` (pointer-sized) of the row at `row`, pointer-sized.
fn entry(cx: &mut Lower, row: Value, i: Value) -> Value {
    let at = cx.advance(row, i, 8);
    let v = cx.ins().load(types::I64, MemFlagsData::trusted(), at, 0);
    pointer_sized(cx, v)
}

/// Stores the pointer-sized `v` as the i64 at entry `i` of the row at `row`.
fn set_entry(cx: &mut Lower, row: Value, i: Value, v: Value) {
    let at = cx.advance(row, i, 8);
    let v = widened(cx, v);
    cx.ins().store(MemFlagsData::trusted(), v, at, 0);
}

/// The order of the elements of `dtype` at `a` and `b`: -1, 0 or 1 (an i32).
fn element_order(cx: &mut Lower, dtype: DType, a: Value, b: Value) -> Result<Value, String> {
    let flags = MemFlagsData::trusted();
    let bit = |cx: &mut Lower, v: Value| cx.ins().uextend(types::I32, v);
    if dtype.is_float() {
        let load = |cx: &mut Lower, at: Value| match dtype {
            DType::F16 | DType::BF16 => {
                let bits = cx.ins().uload16(types::I32, flags, at, 0);
                half_floats::widen(cx.b, dtype, bits)
            }
            _ => cx.ins().load(super::clif_type(dtype), flags, at, 0),
        };
        let (a, b) = (load(cx, a), load(cx, b));
        let (gt, lt) = (cx.ins().fcmp(FloatCC::GreaterThan, a, b), cx.ins().fcmp(FloatCC::LessThan, a, b));
        let (gt, lt) = (bit(cx, gt), bit(cx, lt));
        let by_value = cx.ins().isub(gt, lt);
        let (a_nan, b_nan) = (cx.ins().fcmp(FloatCC::Unordered, a, a), cx.ins().fcmp(FloatCC::Unordered, b, b));
        let any_nan = cx.ins().bor(a_nan, b_nan);
        let (a_nan, b_nan) = (bit(cx, a_nan), bit(cx, b_nan));
        let by_nan = cx.ins().isub(a_nan, b_nan);
        return Ok(cx.ins().select(any_nan, by_nan, by_value));
    }
    if !dtype.is_int() {
        return Err(format!("Unique of {dtype} has no portable lowering"));
    }
    let ty = super::clif_type(dtype);
    let (a, b) = (cx.ins().load(ty, flags, a, 0), cx.ins().load(ty, flags, b, 0));
    let (gt_cc, lt_cc) = if dtype.is_signed_int() {
        (IntCC::SignedGreaterThan, IntCC::SignedLessThan)
    } else {
        (IntCC::UnsignedGreaterThan, IntCC::UnsignedLessThan)
    };
    let (gt, lt) = (cx.ins().icmp(gt_cc, a, b), cx.ins().icmp(lt_cc, a, b));
    let (gt, lt) = (bit(cx, gt), bit(cx, lt));
    Ok(cx.ins().isub(gt, lt))
}

/// The lexicographic order of slices `a` and `b` (pointer-sized) of `x`
/// viewed as `[outer, len, inner]`: -1, 0 or 1 (an i32).
fn slice_order(cx: &mut Lower, p: &SliceParams, dtype: DType, x: Value, [a, b]: [Value; 2]) -> Result<Value, String> {
    let total = p.outer * p.inner;
    if total == 0 {
        return Ok(cx.ins().iconst(types::I32, 0));
    }
    let ptr = cx.ptr_type();
    let (header, body, done) = (cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
    let e = cx.b.append_block_param(header, ptr);
    let result = cx.b.append_block_param(done, types::I32);
    let (start, equal) = (cx.iconst(0), cx.ins().iconst(types::I32, 0));
    cx.ins().jump(header, &[start.into()]);
    cx.b.switch_to_block(header);
    let end = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, e, total);
    cx.ins().brif(end, done, &[equal.into()], body, &[]);
    cx.b.switch_to_block(body);
    let o = cx.ins().udiv_imm_u(e, p.inner);
    let row = cx.ins().imul_imm_s(o, p.inner);
    let i = cx.ins().isub(e, row);
    let element = |cx: &mut Lower, slice: Value| {
        let at = cx.ins().imul_imm_s(o, p.len);
        let at = cx.ins().iadd(at, slice);
        let at = cx.ins().imul_imm_s(at, p.inner);
        let at = cx.ins().iadd(at, i);
        cx.advance(x, at, p.elem_bytes)
    };
    let (at_a, at_b) = (element(cx, a), element(cx, b));
    let order = element_order(cx, dtype, at_a, at_b)?;
    let next = cx.ins().iadd_imm_s(e, 1);
    cx.ins().brif(order, done, &[order.into()], header, &[next.into()]);
    cx.b.switch_to_block(done);
    Ok(result)
}

/// Unique's first pass over `x` (of `dtype`, as `p` views it): ranks and
/// groups the slices in `scratch` (`3 * len` i64s); returns the number of
/// groups (pointer-sized).
pub fn unique_count(cx: &mut Lower, p: &SliceParams, dtype: DType, x: Value, scratch: Value) -> Result<Value, String> {
    let len = p.len.max(0) as usize;
    if len == 0 {
        return Ok(cx.iconst(0));
    }
    let s = UniqueScratch::new(cx, scratch, p.len);
    let slices = [Level::new(len, vec![])];
    let mut failure = None;
    cx.nest(&slices, &[], &mut |cx, j, _| {
        insert_sorted(cx, s.order, j[0], j[0], &mut |cx, above| {
            let above = pointer_sized(cx, above);
            match slice_order(cx, p, dtype, x, [above, j[0]]) {
                Ok(order) => cx.ins().icmp_imm_s(IntCC::SignedGreaterThan, order, 0),
                Err(e) => {
                    failure = Some(e);
                    cx.ins().iconst(types::I8, 0)
                }
            }
        });
        Ok(())
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    let none = cx.iconst(0);
    let count = cx.fold_nest(&slices, &[], &[none], &mut |cx, r, _, acc| {
        let j = entry(cx, s.order, r[0]);
        let zero = cx.iconst(0);
        let at_start = cx.ins().icmp_imm_u(IntCC::Equal, r[0], 0);
        let before = cx.ins().iadd_imm_s(r[0], -1);
        let before = cx.ins().select(at_start, zero, before);
        let previous = entry(cx, s.order, before);
        let order = slice_order(cx, p, dtype, x, [previous, j])?;
        let differs = cx.ins().icmp_imm_s(IntCC::NotEqual, order, 0);
        let opens = cx.ins().bor(at_start, differs);
        let (open, next) = (cx.b.create_block(), cx.b.create_block());
        cx.ins().brif(opens, open, &[], next, &[]);
        cx.b.switch_to_block(open);
        set_entry(cx, s.first, acc[0], j);
        cx.ins().jump(next, &[]);
        cx.b.switch_to_block(next);
        let ptr = cx.ptr_type();
        let step = cx.ins().uextend(ptr, opens);
        let count = cx.ins().iadd(acc[0], step);
        let group = cx.ins().iadd_imm_s(count, -1);
        set_entry(cx, s.group, j, group);
        Ok(vec![count])
    })?[0];
    if p.sorted == 0 {
        renumber_by_first_occurrence(cx, &s, len, count)?;
    }
    Ok(count)
}

/// The kernel's renumbering of Unique's `count` groups in order of first
/// occurrence (`order` reused for the new numbers).
fn renumber_by_first_occurrence(cx: &mut Lower, s: &UniqueScratch, len: usize, count: Value) -> Result<(), String> {
    let slices = [Level::new(len, vec![])];
    let none = cx.iconst(0);
    cx.fold_nest(&slices, &[], &[none], &mut |cx, j, _, acc| {
        let g = entry(cx, s.group, j[0]);
        let first = entry(cx, s.first, g);
        let opens = cx.ins().icmp(IntCC::Equal, first, j[0]);
        let (open, next) = (cx.b.create_block(), cx.b.create_block());
        cx.ins().brif(opens, open, &[], next, &[]);
        cx.b.switch_to_block(open);
        set_entry(cx, s.order, g, acc[0]);
        cx.ins().jump(next, &[]);
        cx.b.switch_to_block(next);
        let ptr = cx.ptr_type();
        let step = cx.ins().uextend(ptr, opens);
        Ok(vec![cx.ins().iadd(acc[0], step)])
    })?;
    cx.nest(&slices, &[], &mut |cx, j, _| {
        let g = entry(cx, s.group, j[0]);
        let renumbered = entry(cx, s.order, g);
        set_entry(cx, s.group, j[0], renumbered);
        Ok(())
    })?;
    let unset = cx.ins().iconst(types::I64, -1);
    let groups = cx.loop_begin_dynamic(count);
    let at = cx.advance(s.first, groups.index, 8);
    cx.ins().store(MemFlagsData::trusted(), unset, at, 0);
    cx.loop_end(groups);
    cx.nest(&slices, &[], &mut |cx, j, _| {
        let g = entry(cx, s.group, j[0]);
        let at = cx.advance(s.first, g, 8);
        let first = cx.ins().load(types::I64, MemFlagsData::trusted(), at, 0);
        let unseen = cx.ins().icmp_imm_s(IntCC::SignedLessThan, first, 0);
        let j64 = widened(cx, j[0]);
        let kept = cx.ins().select(unseen, j64, first);
        cx.ins().store(MemFlagsData::trusted(), kept, at, 0);
        Ok(())
    })
}

/// Unique's outputs, each written when present: the distinct slices, each
/// group's first index, every slice's group, each group's size.
pub struct UniqueOutputs {
    pub y: Value,
    pub indices: Option<Value>,
    pub inverse: Option<Value>,
    pub counts: Option<Value>,
}

/// Unique's second pass: writes `out` from `x` and the `count` groups
/// [`unique_count`] left in `scratch`.
pub fn unique_write(cx: &mut Lower, p: &SliceParams, x: Value, scratch: Value, count: Value, out: &UniqueOutputs) {
    let len = p.len.max(0) as usize;
    if len == 0 {
        return;
    }
    let s = UniqueScratch::new(cx, scratch, p.len);
    let slice = p.inner * p.elem_bytes;
    let outer = cx.loop_begin(p.outer.max(0) as usize);
    let groups = cx.loop_begin_dynamic(count);
    let j = entry(cx, s.first, groups.index);
    let source = cx.ins().imul_imm_s(outer.index, p.len);
    let source = cx.ins().iadd(source, j);
    let src = cx.advance(x, source, slice);
    let target = cx.ins().imul(outer.index, count);
    let target = cx.ins().iadd(target, groups.index);
    let dst = cx.advance(out.y, target, slice);
    cx.copy_run(dst, src, slice);
    cx.loop_end(groups);
    cx.loop_end(outer);
    if let Some(indices) = out.indices {
        let bytes = cx.ins().imul_imm_s(count, 8);
        cx.copy_bytes_dynamic(indices, s.first, bytes);
    }
    if let Some(inverse) = out.inverse {
        cx.copy_bytes(inverse, s.group, 8 * len);
    }
    if let Some(counts) = out.counts {
        let flags = MemFlagsData::trusted();
        let zero = cx.ins().iconst(types::I64, 0);
        let groups = cx.loop_begin_dynamic(count);
        let at = cx.advance(counts, groups.index, 8);
        cx.ins().store(flags, zero, at, 0);
        cx.loop_end(groups);
        let slices = cx.loop_begin(len);
        let g = entry(cx, s.group, slices.index);
        let at = cx.advance(counts, g, 8);
        let n = cx.ins().load(types::I64, flags, at, 0);
        let n = cx.ins().iadd_imm_s(n, 1);
        cx.ins().store(flags, n, at, 0);
        cx.loop_end(slices);
    }
}
