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

use super::gather_loops::pointer_sized;
use super::nest::Level;
use super::{half_floats, status, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;

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
