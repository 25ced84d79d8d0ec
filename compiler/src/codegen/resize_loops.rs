//! Portable Resize (nearest, linear, cubic; antialias, exclude_outside,
//! every coordinate mode) with sizes known at compile time: loop nests
//! over tap tables, for portable mode, where `onnxc_resize_*` are not
//! linked.
//!
//! Resize is separable: each output coordinate of each axis reads a fixed
//! window of input coordinates of that axis with fixed weights. The
//! compiler fills those taps with the kernel's own rule
//! (`onnxc_runtime::generic::resize::fill_taps`) and places them in
//! read-only data as `(byte offset, weight)` records, [`TAP_BYTES`] each,
//! per axis and output coordinate. The nest walks the output; each
//! element is the kernel's nested sum `sum_k w_k (sum_j w_j (... x))`, in
//! f64, one fold per axis over its taps. Every offset is of a clamped
//! input index, so no load leaves the input; only `tf_crop_and_resize`
//! marks positions outside its crop region (a negative offset), which
//! take the extrapolation value and read nothing.

use super::nest::Level;
use super::{clif_type, types, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::generic::resize::{fill_taps, resize_taps, Tap};
use onnxc_runtime::ResizeParams;

/// Bytes of one tap record: an i64 byte offset, then an f64 weight.
const TAP_BYTES: i64 = 16;

/// The taps of every axis, concatenated as `[offset, weight bits]` pairs,
/// and each axis's taps per output coordinate.
fn tap_tables(p: &ResizeParams, rank: usize, elem_bytes: i64) -> (Vec<i64>, Vec<usize>) {
    let mut stride = elem_bytes;
    let mut strides = vec![0; rank];
    for a in (0..rank).rev() {
        strides[a] = stride;
        stride *= p.in_dims[a];
    }
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

/// Resizes `x` into `y` (`dtype` f32 or f64) as the constant params `p` say.
pub fn resize(cx: &mut Lower, p: &ResizeParams, dtype: DType, x: Value, y: Value) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("{dtype} data has no portable Resize (f32 and f64 do)"));
    }
    let rank = p.rank as usize;
    if p.out_dims[..rank].contains(&0) {
        return Ok(());
    }
    let eb = dtype.size() as i64;
    let (table, counts) = tap_tables(p, rank, eb);
    let extrapolates = table.iter().step_by(2).any(|&offset| offset < 0);
    let table_ptr = cx.table(&table)?;
    // Pointers: each axis's taps, then the output (row-major).
    let mut ptrs = Vec::with_capacity(rank + 1);
    let mut start = 0;
    for (a, &count) in counts.iter().enumerate() {
        ptrs.push(cx.ins().iadd_imm_s(table_ptr, TAP_BYTES * start));
        start += p.out_dims[a] * count as i64;
    }
    ptrs.push(y);
    let mut levels = vec![Level::new(0, Vec::new()); rank];
    let mut out_stride = eb;
    for a in (0..rank).rev() {
        let mut steps = vec![0; rank + 1];
        steps[a] = TAP_BYTES * counts[a] as i64;
        steps[rank] = out_stride;
        levels[a] = Level::new(p.out_dims[a] as usize, steps);
        out_stride *= p.out_dims[a];
    }
    cx.nest(&levels, &ptrs, &mut |cx, _, at| {
        let (taps, out) = (&at[..rank], at[rank]);
        let value = if extrapolates {
            outside_or(cx, taps, p.extrapolation_value, &mut |cx| tap_sum(cx, dtype, &counts, taps, x))?
        } else {
            tap_sum(cx, dtype, &counts, taps, x)?
        };
        let value = if dtype == DType::F64 { value } else { cx.ins().fdemote(types::F32, value) };
        cx.ins().store(MemFlagsData::trusted(), value, out, 0);
        Ok(())
    })
}

/// `sum_k w_k (inner sum)` over the taps of the first of `counts`' axes at
/// `taps[0]`, down to the element of `dtype` at `x` (as f64).
fn tap_sum(cx: &mut Lower, dtype: DType, counts: &[usize], taps: &[Value], x: Value) -> Result<Value, String> {
    let (Some((&count, rest)), Some((&first, inner))) = (counts.split_first(), taps.split_first()) else {
        let v = cx.ins().load(clif_type(dtype), MemFlagsData::trusted(), x, 0);
        return Ok(if dtype == DType::F64 { v } else { cx.ins().fpromote(types::F64, v) });
    };
    let zero = cx.ins().f64const(0.0);
    let level = [Level::new(count, vec![TAP_BYTES])];
    Ok(cx.fold_nest(&level, &[first], &[zero], &mut |cx, _, tap, acc| {
        let flags = MemFlagsData::trusted();
        let offset = cx.ins().load(types::I64, flags, tap[0], 0);
        let weight = cx.ins().load(types::F64, flags, tap[0], 8);
        let at = cx.ins().iadd(x, offset);
        let sum = tap_sum(cx, dtype, rest, inner, at)?;
        let term = cx.ins().fmul(weight, sum);
        Ok(vec![cx.ins().fadd(acc[0], term)])
    })?[0])
}

/// The extrapolation value where any axis's first tap is marked outside the
/// crop region, else what `inside` computes (a branch: outside, nothing is
/// read).
fn outside_or(
    cx: &mut Lower,
    taps: &[Value],
    extrapolation: f64,
    inside: &mut dyn FnMut(&mut Lower) -> Result<Value, String>,
) -> Result<Value, String> {
    let mut any = cx.iconst(0);
    for &t in taps {
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
