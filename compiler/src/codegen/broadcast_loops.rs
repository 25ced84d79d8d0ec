//! Portable Expand and Tile of a shape or repeats known only at run time:
//! the output dims computed in generated code by the kernels' rule
//! (`onnxc_broadcast_dims`), then a copy over loops of run-time trip
//! counts, for portable mode, where `onnxc_broadcast*` are not linked.
//!
//! The argument is read and every output dim checked before the output is
//! allocated: a negative entry, or for Expand a dim that is neither the
//! input's nor 1 where the input's is not 1, leaves the model with
//! [`status::INVALID_PARAMS`]. The copy then reads input index `o` along
//! each axis (Expand: 0 where the input dim is 1; Tile: `o mod dim`), so
//! no address leaves the input, and writes the output densely.

use super::gather_loops::pointer_sized;
use super::{status, types, InstBuilder, IntCC, Lower, MemFlagsData, Value};

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
