//! Portable NonZero and Compress, whose output sizes depend on the data:
//! one pass counts (the size given to [`Lower::alloc_output`]), a second
//! writes, for portable mode, where `onnxc_count_nonzero`, `onnxc_nonzero`
//! and `onnxc_compress` are not linked.
//!
//! "Not zero" is the kernels' rule: any bit set for integers and bool, any
//! bit but the sign for floats (so -0 is zero and NaN is not). The writing
//! pass carries the number written so far and writes only while it is
//! below the count, so it can never write past what was allocated.

use super::nest::Level;
use super::{types, InstBuilder, IntCC, Lower, MemFlagsData, Value};
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
