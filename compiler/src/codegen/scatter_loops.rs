//! Portable ScatterElements (and Scatter), ScatterND, GatherND and
//! ReverseSequence: loop nests over the same params the kernels take, for
//! portable mode, where `onnxc_scatter_*`, `onnxc_gather_nd` and
//! `onnxc_reverse_sequence` are not linked.
//!
//! As in [`super::gather_loops`], every index is checked first, in one
//! pass over `indices`, before anything is written (the output's copy of
//! the data included): an index outside `[-len, len)` of its dim leaves
//! the model with [`super::status::INDEX_OUT_OF_RANGE`] and the output untouched
//! (the kernels stop at the first bad index, part way through). Only then
//! does the nest run, with each (known valid) negative index wrapped, so
//! no address it forms leaves the output. Updates are applied in index
//! order, as the kernels do, so a repeated index keeps the last update
//! (or reduces every one).
//!
//! TensorScatter checks each batch entry's write index the same way (a
//! linear run of `seq` rows must fit in `[0, max_seq)`; a circular one
//! always does) before the cache is copied and the rows written.
//!
//! MaxUnpool checks every index against MaxPool's geometry (`[0,
//! prod(dims))`, unlike the others' negative wrap) before it zeroes the
//! output and writes, each index re-ravelled to the output's dims.
//!
//! EyeLike, whose output depends on no input value, is here too: the
//! output zeroed an element at a time, then the ones stored down the
//! diagonal's rows that lie inside it (their range known here).
//!
//! Reductions follow the kernels' `combine`: integers wrap on add and
//! multiply and compare by their signedness; float max and min order NaN
//! above every number (max keeps a NaN, min drops it). Reductions of 16-bit
//! floats have no portable lowering (a plain scatter moves any element).

use super::gather_loops::pointer_sized;
use super::nest::Level;
use super::{clif_type, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Type, Value};
use crate::ir::DType;
use onnxc_runtime::abi::indexing::{EyeParams, ReverseSequenceParams};
use onnxc_runtime::abi::indexing::{SCATTER_ADD, SCATTER_MAX, SCATTER_MIN, SCATTER_MUL, SCATTER_NONE};
use onnxc_runtime::abi::roi::UnpoolParams;
use onnxc_runtime::{ElementsParams, NdParams, TensorScatterParams};

/// EyeLike into `y`: zeros, and `p.one`'s bits on diagonal `p.k`.
pub fn eye(cx: &mut Lower, p: &EyeParams, y: Value) -> Result<(), String> {
    let eb = p.elem_bytes;
    let ty = element_bits(eb, "EyeLike")?;
    let (rows, cols, k) = (p.rows.max(0), p.cols.max(0), p.k);
    let flags = MemFlagsData::trusted();
    zero_elements(cx, y, rows * cols, eb, "EyeLike")?;
    // Row i holds a one when 0 <= i + k < cols.
    let first = k.saturating_neg().clamp(0, rows);
    let end = cols.saturating_sub(k).clamp(first, rows);
    let start = cx.ins().iadd_imm_s(y, (first * cols + first + k) * eb);
    let one = cx.ins().iconst(ty, p.one);
    cx.nest(&[Level::new((end - first) as usize, vec![(cols + 1) * eb])], &[start], &mut |cx, _, at| {
        cx.ins().store(flags, one, at[0], 0);
        Ok(())
    })
}

/// The integer type that moves one element of `eb` bytes.
fn element_bits(eb: i64, what: &str) -> Result<Type, String> {
    Ok(match eb {
        1 => types::I8,
        2 => types::I16,
        4 => types::I32,
        8 => types::I64,
        _ => return Err(format!("{what} of {eb}-byte elements has no portable lowering")),
    })
}

/// Zeroes the `count` elements of `eb` bytes at `y`, one store each.
fn zero_elements(cx: &mut Lower, y: Value, count: i64, eb: i64, what: &str) -> Result<(), String> {
    let ty = element_bits(eb, what)?;
    let count = usize::try_from(count).map_err(|_| format!("{what}'s output is too large"))?;
    let zero = cx.ins().iconst(ty, 0);
    cx.nest(&[Level::new(count, vec![eb])], &[y], &mut |cx, _, at| {
        cx.ins().store(MemFlagsData::trusted(), zero, at[0], 0);
        Ok(())
    })
}

/// Row-major strides of `dims` in units of `unit`.
fn row_major(dims: &[i64], unit: i64) -> Vec<i64> {
    let mut strides = vec![unit; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * dims[d + 1];
    }
    strides
}

/// The element type a reduction computes in, checked to have one.
fn reduced_type(code: i64, reduction: i64) -> Result<Option<DType>, String> {
    if reduction == SCATTER_NONE {
        return Ok(None);
    }
    match i32::try_from(code).ok().and_then(DType::from_onnx) {
        Some(d) if d.is_int() || matches!(d, DType::F32 | DType::F64) => Ok(Some(d)),
        other => Err(format!("a scatter reduction of {other:?} has no portable lowering")),
    }
}

/// Writes the element at `src` into `dst` under `reduction` (`dtype` is
/// [`reduced_type`]'s; `None` copies `elem_bytes`).
fn combine(cx: &mut Lower, dtype: Option<DType>, reduction: i64, elem_bytes: i64, dst: Value, src: Value) {
    let Some(dtype) = dtype else {
        return cx.copy_run(dst, src, elem_bytes);
    };
    let (flags, ty) = (MemFlagsData::trusted(), clif_type(dtype));
    let (a, b) = (cx.ins().load(ty, flags, dst, 0), cx.ins().load(ty, flags, src, 0));
    let float = dtype.is_float();
    let signed = dtype.is_signed_int();
    let v = match reduction {
        SCATTER_ADD if float => cx.ins().fadd(a, b),
        SCATTER_ADD => cx.ins().iadd(a, b),
        SCATTER_MUL if float => cx.ins().fmul(a, b),
        SCATTER_MUL => cx.ins().imul(a, b),
        SCATTER_MAX if float => {
            // b when a < b or b is NaN (a NaN stays).
            let below = cx.ins().fcmp(FloatCC::LessThan, a, b);
            let b_nan = cx.ins().fcmp(FloatCC::Unordered, b, b);
            let take = cx.ins().bor(below, b_nan);
            cx.ins().select(take, b, a)
        }
        SCATTER_MIN if float => {
            // b when b < a, or a is NaN and b is not.
            let below = cx.ins().fcmp(FloatCC::LessThan, b, a);
            let a_nan = cx.ins().fcmp(FloatCC::Unordered, a, a);
            let b_number = cx.ins().fcmp(FloatCC::Ordered, b, b);
            let over_nan = cx.ins().band(a_nan, b_number);
            let take = cx.ins().bor(below, over_nan);
            cx.ins().select(take, b, a)
        }
        SCATTER_MAX if signed => cx.ins().smax(a, b),
        SCATTER_MAX => cx.ins().umax(a, b),
        SCATTER_MIN if signed => cx.ins().smin(a, b),
        SCATTER_MIN => cx.ins().umin(a, b),
        _ => b,
    };
    cx.ins().store(flags, v, dst, 0);
}

/// Copies the `bytes` of `data` into `out` (the scatters' starting point).
fn copy_data(cx: &mut Lower, data: Value, out: Value, bytes: i64) {
    cx.copy_bytes(out, data, bytes as usize);
}

/// ScatterElements: `out = data`, then for every index position `i`,
/// `out[i with i[axis] = indices[i]] (reduction)= updates[i]`.
pub fn scatter_elements(
    cx: &mut Lower,
    p: &ElementsParams,
    [data, indices, updates, out]: [Value; 4],
) -> Result<(), String> {
    let rank = p.rank as usize;
    let (data_dims, index_dims) = (&p.data_dims[..rank], &p.index_dims[..rank]);
    let count: i64 = index_dims.iter().product();
    let dtype = reduced_type(p.dtype, p.reduction)?;
    let axis = p.axis as usize;
    if count > 0 {
        cx.check_indices(indices, count, p.index_bytes, data_dims[axis])?;
    }
    copy_data(cx, data, out, data_dims.iter().product::<i64>() * p.elem_bytes);
    if count == 0 {
        return Ok(());
    }
    let out_strides = row_major(data_dims, p.elem_bytes);
    let index_strides = row_major(index_dims, p.index_bytes);
    let update_strides = row_major(index_dims, p.elem_bytes);
    let levels: Vec<Level> = (0..rank)
        .map(|d| {
            let out_step = if d == axis { 0 } else { out_strides[d] };
            Level::new(index_dims[d] as usize, vec![out_step, index_strides[d], update_strides[d]])
        })
        .collect();
    cx.nest(&levels, &[out, indices, updates], &mut |cx, _, at| {
        let offset = cx.index_offset(at[1], p.index_bytes, data_dims[axis], out_strides[axis]);
        let dst = cx.ins().iadd(at[0], offset);
        combine(cx, dtype, p.reduction, p.elem_bytes, dst, at[2]);
        Ok(())
    })
}

/// Levels over every index tuple (`batch * tuples` of them), advancing the
/// indices by a tuple and a second pointer by a row of `row` bytes.
fn tuple_levels(p: &NdParams, row: i64) -> [Level; 1] {
    [Level::new((p.batch * p.tuples) as usize, vec![8 * p.k, row])]
}

/// Leaves the model with [`super::status::INDEX_OUT_OF_RANGE`] unless every
/// tuple's `d`-th index lies in `[-dims[d], dims[d])`.
fn check_tuples(cx: &mut Lower, p: &NdParams, indices: Value) -> Result<(), String> {
    let tuples = [Level::new((p.batch * p.tuples) as usize, vec![8 * p.k])];
    cx.nest(&tuples, &[indices], &mut |cx, _, at| {
        for d in 0..p.k as usize {
            let entry = cx.ins().iadd_imm_s(at[0], 8 * d as i64);
            cx.check_indices(entry, 1, 8, p.dims[d])?;
        }
        Ok(())
    })
}

/// The byte offset, within its batch's block, of the slice the checked
/// tuple at `tuple` addresses.
fn tuple_offset(cx: &mut Lower, p: &NdParams, tuple: Value) -> Value {
    let k = p.k as usize;
    let strides = row_major(&p.dims[..k], p.slice * p.elem_bytes);
    let mut offset = cx.iconst(0);
    for (d, &stride) in strides.iter().enumerate() {
        let entry = cx.ins().iadd_imm_s(tuple, 8 * d as i64);
        let part = cx.index_offset(entry, 8, p.dims[d], stride);
        offset = cx.ins().iadd(offset, part);
    }
    offset
}

/// The byte offset of batch `b`'s block of the data (`b` from the tuple
/// index `t`: `t / tuples`).
fn batch_offset(cx: &mut Lower, p: &NdParams, t: Value) -> Value {
    if p.batch <= 1 {
        return cx.iconst(0);
    }
    let block: i64 = p.dims[..p.k as usize].iter().product::<i64>() * p.slice * p.elem_bytes;
    let tuples = cx.iconst(p.tuples.max(1));
    let b = cx.ins().udiv(t, tuples);
    cx.ins().imul_imm_s(b, block)
}

/// GatherND: `out[t, :] = data[batch of t, indices[t], :]`.
pub fn gather_nd(cx: &mut Lower, p: &NdParams, [data, indices, out]: [Value; 3]) -> Result<(), String> {
    let row = p.slice * p.elem_bytes;
    if p.batch * p.tuples * row == 0 {
        return Ok(());
    }
    check_tuples(cx, p, indices)?;
    cx.nest(&tuple_levels(p, row), &[indices, out], &mut |cx, index, at| {
        let (block, offset) = (batch_offset(cx, p, index[0]), tuple_offset(cx, p, at[0]));
        let src = cx.ins().iadd(data, block);
        let src = cx.ins().iadd(src, offset);
        cx.copy_run(at[1], src, row);
        Ok(())
    })
}

/// ScatterND: `out = data`, then for every tuple `t`, `out[batch of t,
/// indices[t], :] (reduction)= updates[t, :]`.
pub fn scatter_nd(cx: &mut Lower, p: &NdParams, [data, indices, updates, out]: [Value; 4]) -> Result<(), String> {
    let dtype = reduced_type(p.dtype, p.reduction)?;
    let row = p.slice * p.elem_bytes;
    let tuples = p.batch * p.tuples;
    if tuples > 0 {
        check_tuples(cx, p, indices)?;
    }
    let block: i64 = p.dims[..p.k as usize].iter().product::<i64>() * row;
    copy_data(cx, data, out, p.batch * block);
    if tuples * row == 0 {
        return Ok(());
    }
    let slice = [Level::new(p.slice as usize, vec![p.elem_bytes, p.elem_bytes])];
    cx.nest(&tuple_levels(p, row), &[indices, updates], &mut |cx, index, at| {
        let (block, offset) = (batch_offset(cx, p, index[0]), tuple_offset(cx, p, at[0]));
        let dst = cx.ins().iadd(out, block);
        let dst = cx.ins().iadd(dst, offset);
        cx.nest(&slice, &[dst, at[1]], &mut |cx, _, el| {
            combine(cx, dtype, p.reduction, p.elem_bytes, el[0], el[1]);
            Ok(())
        })
    })
}

/// ReverseSequence: for batch entry `b` the first `lens[b]` time steps of
/// `x` reversed into `y`, the rest copied. Every length is checked to lie
/// in `0..=time_len` first ([`super::status::INDEX_OUT_OF_RANGE`], nothing
/// written), so each row read is inside `x`.
pub fn reverse_sequence(cx: &mut Lower, p: &ReverseSequenceParams, [x, lens, y]: [Value; 3]) -> Result<(), String> {
    let row = p.inner * p.elem_bytes;
    if p.batch_len * p.time_len * row == 0 {
        return Ok(());
    }
    let flags = MemFlagsData::trusted();
    cx.nest(&[Level::new(p.batch_len as usize, vec![8])], &[lens], &mut |cx, _, at| {
        let n = cx.ins().load(types::I64, flags, at[0], 0);
        let outside = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, n, p.time_len);
        cx.fail_if(outside, super::status::INDEX_OUT_OF_RANGE);
        Ok(())
    })?;
    let (time_step, batch_step) = (p.time_stride * p.elem_bytes, p.batch_stride * p.elem_bytes);
    let levels = [
        Level::new(p.batch_len as usize, vec![batch_step, 8, batch_step]),
        Level::new(p.time_len as usize, vec![0, 0, time_step]),
    ];
    cx.nest(&levels, &[x, lens, y], &mut |cx, index, at| {
        let n = cx.ins().load(types::I64, flags, at[1], 0);
        let n = pointer_sized(cx, n);
        let t = index[1];
        let reversed = cx.ins().isub(n, t);
        let reversed = cx.ins().iadd_imm_s(reversed, -1);
        let inside = cx.ins().icmp(IntCC::UnsignedLessThan, t, n);
        let from = cx.ins().select(inside, reversed, t);
        let src = cx.advance(at[0], from, time_step);
        cx.copy_run(at[2], src, row);
        Ok(())
    })
}

/// TensorScatter: `out = cache`, then for each batch entry `b` and middle
/// index `m`, update row `s` written at position `w + s` of the cache's
/// `max_seq` (`w` the entry's write index, 0 without `write`), wrapped by
/// the Euclidean remainder when `p.circular` (an overflowing `w + s` wraps
/// as -1 does, as in the kernel).
pub fn tensor_scatter(
    cx: &mut Lower,
    p: &TensorScatterParams,
    [cache, update, out]: [Value; 3],
    write: Option<Value>,
) -> Result<(), String> {
    let flags = MemFlagsData::trusted();
    let row = p.inner * p.elem_bytes;
    let entries = [Level::new(p.batch as usize, vec![8])];
    let linear = p.circular == 0 || p.max_seq == 0;
    if let (Some(write), true, true) = (write, linear, p.seq > 0) {
        cx.nest(&entries, &[write], &mut |cx, _, at| {
            let w = cx.ins().load(types::I64, flags, at[0], 0);
            let below = cx.ins().icmp_imm_s(IntCC::SignedLessThan, w, 0);
            let past = cx.ins().icmp_imm_s(IntCC::SignedGreaterThan, w, p.max_seq - p.seq);
            let outside = cx.ins().bor(below, past);
            cx.fail_if(outside, super::status::INDEX_OUT_OF_RANGE);
            Ok(())
        })?;
    }
    copy_data(cx, cache, out, p.batch * p.mid * p.max_seq * row);
    if p.batch * p.mid * p.seq * row == 0 {
        return Ok(());
    }
    let levels = [
        Level::new(p.batch as usize, vec![8, p.mid * p.max_seq * row, p.mid * p.seq * row]),
        Level::new(p.mid as usize, vec![0, p.max_seq * row, p.seq * row]),
        Level::new(p.seq as usize, vec![0, 0, row]),
    ];
    let given = write.is_some();
    let write = write.unwrap_or_else(|| cx.iconst(0));
    cx.nest(&levels, &[write, out, update], &mut |cx, index, at| {
        let w = if given { cx.ins().load(types::I64, flags, at[0], 0) } else { cx.ins().iconst(types::I64, 0) };
        let s = super::gather_loops::widened(cx, index[2]);
        let sum = cx.ins().iadd(w, s);
        let pos = if linear {
            sum
        } else {
            let overflowed = cx.ins().icmp(IntCC::SignedLessThan, sum, w);
            let minus_one = cx.ins().iconst(types::I64, -1);
            let pos = cx.ins().select(overflowed, minus_one, sum);
            let rem = cx.ins().srem_imm_s(pos, p.max_seq);
            let negative = cx.ins().icmp_imm_s(IntCC::SignedLessThan, rem, 0);
            let lifted = cx.ins().iadd_imm_s(rem, p.max_seq);
            cx.ins().select(negative, lifted, rem)
        };
        let pos = pointer_sized(cx, pos);
        let dst = cx.advance(at[1], pos, row);
        cx.copy_run(dst, at[2], row);
        Ok(())
    })
}

/// MaxUnpool: `y` zeroed, then `y[re-ravel(indices[i])] = x[i]` for each of
/// the `p.count` elements, an index addressing the row-major `p.dims` and
/// landing at the same coordinates of `p.out_dims`.
pub fn max_unpool(cx: &mut Lower, p: &UnpoolParams, [x, indices, y]: [Value; 3]) -> Result<(), String> {
    let rank = p.rank.max(0) as usize;
    let eb = p.elem_size;
    let (dims, out_dims) = (&p.dims[..rank], &p.out_dims[..rank]);
    let total: i64 = dims.iter().product();
    let count = p.count.max(0) as usize;
    let flags = MemFlagsData::trusted();
    cx.nest(&[Level::new(count, vec![8])], &[indices], &mut |cx, _, at| {
        let index = cx.ins().load(types::I64, flags, at[0], 0);
        // A negative index compares as a huge unsigned one.
        let outside = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, index, total);
        cx.fail_if(outside, super::status::INDEX_OUT_OF_RANGE);
        Ok(())
    })?;
    zero_elements(cx, y, out_dims.iter().product(), eb, "MaxUnpool")?;
    if total == 0 {
        return Ok(());
    }
    cx.nest(&[Level::new(count, vec![eb, 8])], &[x, indices], &mut |cx, _, at| {
        let index = cx.ins().load(types::I64, flags, at[1], 0);
        let mut rest = pointer_sized(cx, index);
        let mut offset = cx.iconst(0);
        let mut stride = 1;
        for d in (0..rank).rev() {
            let next = cx.ins().udiv_imm_u(rest, dims[d]);
            let whole = cx.ins().imul_imm_s(next, dims[d]);
            let coordinate = cx.ins().isub(rest, whole);
            let part = cx.ins().imul_imm_s(coordinate, stride);
            offset = cx.ins().iadd(offset, part);
            (rest, stride) = (next, stride * out_dims[d]);
        }
        let dst = cx.advance(y, offset, eb);
        cx.copy_run(dst, at[0], eb);
        Ok(())
    })
}
