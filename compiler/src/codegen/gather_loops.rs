//! Portable Gather and GatherElements (and ArrayFeatureExtractor, which is
//! a Gather), OneHot and TopK: loop nests reading `data` at run-time
//! indices (or ranking it), for portable mode, where `onnxc_gather`,
//! `onnxc_gather_elements`, `onnxc_one_hot` and `onnxc_topk` are not linked.
//!
//! Every index is checked first, in one flat pass over `indices`, before
//! anything is written, as the kernels do: an index outside `[-len, len)`
//! leaves the model with [`status::INDEX_OUT_OF_RANGE`] and the output
//! untouched. Only then does the copy nest run, wrapping each (known
//! valid) negative index by `len`; no address it forms can leave `data`.
//! Elements of 1, 2, 4, 8 or 16 bytes move as one load and store (the
//! common Gather of embeddings moves rows through memcpy), so any element
//! type, strings included, is handled.
//!
//! OneHot writes only inside its `[outer, depth, inner]` output: an index
//! outside `[-depth, depth)` sets nothing, as in the kernel. TopK keeps,
//! per lane, the positions of the best `k` so far in its scratch (an
//! insertion, `len * k` comparisons at worst, no sort library to call),
//! with the kernels' order: NaN above every number, ties to the lower
//! index.

use super::nest::Level;
use super::{clif_type, half_floats, status, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::{ElementsParams, GatherParams, OneHotParams, TopKParams};

impl Lower<'_, '_> {
    /// The i32 or i64 index at `at` (`index_bytes` 4 or 8), sign-extended to i64.
    fn load_index(&mut self, at: Value, index_bytes: i64) -> Value {
        let flags = MemFlagsData::trusted();
        match index_bytes {
            4 => self.b.ins().sload32(flags, at, 0),
            _ => self.b.ins().load(types::I64, flags, at, 0),
        }
    }

    /// Leaves the model with [`status::INDEX_OUT_OF_RANGE`] unless every one
    /// of the `count` indices from `indices` lies in `[-len, len)`.
    pub(super) fn check_indices(
        &mut self,
        indices: Value,
        count: i64,
        index_bytes: i64,
        len: i64,
    ) -> Result<(), String> {
        let all = [Level::new(count as usize, vec![index_bytes])];
        self.nest(&all, &[indices], &mut |cx, _, at| {
            let k = cx.load_index(at[0], index_bytes);
            // `k + len` in `[0, 2 len)` as an unsigned number is the range
            // test; a `k` so large that the sum wraps is out of it too.
            let shifted = cx.b.ins().iadd_imm_s(k, len);
            let outside = cx.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, shifted, 2 * len);
            cx.fail_if(outside, status::INDEX_OUT_OF_RANGE);
            Ok(())
        })
    }

    /// The checked index at `at` as a byte offset `wrapped * stride` into
    /// the data, negative indices counting from `len`.
    pub(super) fn index_offset(&mut self, at: Value, index_bytes: i64, len: i64, stride: i64) -> Value {
        let k = self.load_index(at, index_bytes);
        let negative = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, k, 0);
        let wrapped = self.b.ins().iadd_imm_s(k, len);
        let k = self.b.ins().select(negative, wrapped, k);
        let ptr = self.ptr_type();
        let k = if ptr == types::I64 { k } else { self.b.ins().ireduce(ptr, k) };
        self.b.ins().imul_imm_s(k, stride)
    }

    /// Copies `bytes` from `src` to `dst`: one load and store when that is
    /// a register's width, else memcpy.
    pub fn copy_run(&mut self, dst: Value, src: Value, bytes: i64) {
        let flags = MemFlagsData::trusted();
        let ty = match bytes {
            1 => types::I8,
            2 => types::I16,
            4 => types::I32,
            8 => types::I64,
            16 => types::I128,
            _ => return self.copy_bytes(dst, src, bytes as usize),
        };
        let v = self.b.ins().load(ty, flags, src, 0);
        self.b.ins().store(flags, v, dst, 0);
    }
}

/// Gather: for every `(outer, index)` the `inner` elements of `data` at
/// that index along the axis.
pub fn gather(cx: &mut Lower, p: &GatherParams, data: Value, indices: Value, out: Value) -> Result<(), String> {
    let run = p.inner * p.elem_bytes;
    if p.outer * p.n_indices * run == 0 {
        return Ok(());
    }
    cx.check_indices(indices, p.n_indices, p.index_bytes, p.axis_len)?;
    let levels = [
        Level::new(p.outer as usize, vec![p.axis_len * run, 0, p.n_indices * run]),
        Level::new(p.n_indices as usize, vec![0, p.index_bytes, run]),
    ];
    cx.nest(&levels, &[data, indices, out], &mut |cx, _, at| {
        let offset = cx.index_offset(at[1], p.index_bytes, p.axis_len, run);
        let src = cx.ins().iadd(at[0], offset);
        cx.copy_run(at[2], src, run);
        Ok(())
    })
}

/// GatherElements: `out[i] = data[i with i[axis] = indices[i]]`, one nest
/// over the index dims walking indices and output contiguously and data by
/// its own strides (none along the axis, which the index supplies).
pub fn gather_elements(
    cx: &mut Lower,
    p: &ElementsParams,
    data: Value,
    indices: Value,
    out: Value,
) -> Result<(), String> {
    let rank = p.rank as usize;
    let (data_dims, index_dims) = (&p.data_dims[..rank], &p.index_dims[..rank]);
    let count: i64 = index_dims.iter().product();
    if count == 0 {
        return Ok(());
    }
    let axis = p.axis as usize;
    cx.check_indices(indices, count, p.index_bytes, data_dims[axis])?;
    let row_major = |dims: &[i64], unit: i64| {
        let mut strides = vec![unit; dims.len()];
        for d in (0..dims.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * dims[d + 1];
        }
        strides
    };
    let data_strides = row_major(data_dims, p.elem_bytes);
    let index_strides = row_major(index_dims, p.index_bytes);
    let out_strides = row_major(index_dims, p.elem_bytes);
    let levels: Vec<Level> = (0..rank)
        .map(|d| {
            let data_step = if d == axis { 0 } else { data_strides[d] };
            Level::new(index_dims[d] as usize, vec![data_step, index_strides[d], out_strides[d]])
        })
        .collect();
    cx.nest(&levels, &[data, indices, out], &mut |cx, _, at| {
        let offset = cx.index_offset(at[1], p.index_bytes, data_dims[axis], data_strides[axis]);
        let src = cx.ins().iadd(at[0], offset);
        cx.copy_run(at[2], src, p.elem_bytes);
        Ok(())
    })
}

/// The numeric element of `dtype` at `at` truncated to i64, by the kernels'
/// rule (`read_numeric`: floats saturate, NaN gives 0).
fn load_truncated(cx: &mut Lower, dtype: DType, at: Value) -> Result<Value, String> {
    let raw = cx.ins().load(clif_type(dtype), MemFlagsData::trusted(), at, 0);
    Ok(match dtype {
        DType::F32 | DType::F64 => cx.ins().fcvt_to_sint_sat(types::I64, raw),
        DType::F16 | DType::BF16 => {
            let bits = cx.ins().uextend(types::I32, raw);
            let f = half_floats::widen(cx.b, dtype, bits);
            cx.ins().fcvt_to_sint_sat(types::I64, f)
        }
        DType::I64 | DType::U64 => raw,
        DType::I8 | DType::I16 | DType::I32 => cx.ins().sextend(types::I64, raw),
        DType::U8 | DType::U16 | DType::U32 | DType::Bool => cx.ins().uextend(types::I64, raw),
        other => return Err(format!("{other} is not a numeric type the portable code reads")),
    })
}

/// An i64 as a pointer-sized integer.
pub(super) fn pointer_sized(cx: &mut Lower, v: Value) -> Value {
    let ptr = cx.ptr_type();
    if ptr == types::I64 {
        v
    } else {
        cx.ins().ireduce(ptr, v)
    }
}

/// A pointer-sized integer as an i64.
pub(super) fn widened(cx: &mut Lower, v: Value) -> Value {
    if cx.ptr_type() == types::I64 {
        v
    } else {
        cx.ins().uextend(types::I64, v)
    }
}

/// A count (OneHot's run-time depth) read from the numeric scalar of
/// `dtype` at `at`, as a pointer-sized integer; a negative one leaves the
/// model with [`status::INVALID_PARAMS`], as `onnxc_read_count` does.
pub fn read_count(cx: &mut Lower, dtype: DType, at: Value) -> Result<Value, String> {
    let n = load_truncated(cx, dtype, at)?;
    let negative = cx.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
    cx.fail_if(negative, status::INVALID_PARAMS);
    Ok(pointer_sized(cx, n))
}

/// OneHot into `out` (`[outer, depth, inner]`, `depth` pointer-sized and
/// possibly known only at run time): every row is `values[0]`, then each
/// index in `[-depth, depth)` (negative from the end) sets its element to
/// `values[1]`; other indices leave the row off, as the spec says.
pub fn one_hot(
    cx: &mut Lower,
    p: &OneHotParams,
    index_dtype: DType,
    depth: Value,
    [indices, values, out]: [Value; 3],
) -> Result<(), String> {
    if p.outer * p.inner == 0 {
        return Ok(());
    }
    let (eb, index_bytes) = (p.elem_bytes, index_dtype.size() as i64);
    let on = cx.ins().iadd_imm_s(values, eb);
    let row = cx.ins().imul_imm_s(depth, p.inner * eb);
    let depth64 = widened(cx, depth);
    let lane_count = cx.ins().imul_imm_s(depth, p.inner);
    let o = cx.loop_begin(p.outer as usize);
    let base = cx.ins().imul(o.index, row);
    let base = cx.ins().iadd(out, base);
    let fill = cx.loop_begin_dynamic(lane_count);
    let at = cx.advance(base, fill.index, eb);
    cx.copy_run(at, values, eb);
    cx.loop_end(fill);
    let row_indices = cx.advance(indices, o.index, p.inner * index_bytes);
    let i = cx.loop_begin(p.inner as usize);
    let at = cx.advance(row_indices, i.index, index_bytes);
    let k = load_truncated(cx, index_dtype, at)?;
    // `k + depth` in `[0, 2 depth)` as an unsigned number is the range test.
    let shifted = cx.ins().iadd(k, depth64);
    let twice = cx.ins().iadd(depth64, depth64);
    let inside = cx.ins().icmp(IntCC::UnsignedLessThan, shifted, twice);
    let negative = cx.ins().icmp_imm_s(IntCC::SignedLessThan, k, 0);
    let d = cx.ins().select(negative, shifted, k);
    let d = pointer_sized(cx, d);
    let (set, next) = (cx.b.create_block(), cx.b.create_block());
    cx.ins().brif(inside, set, &[], next, &[]);
    cx.b.switch_to_block(set);
    let lane = cx.ins().imul_imm_s(d, p.inner);
    let lane = cx.ins().iadd(lane, i.index);
    let at = cx.advance(base, lane, eb);
    cx.copy_run(at, on, eb);
    cx.ins().jump(next, &[]);
    cx.b.switch_to_block(next);
    cx.loop_end(i);
    cx.loop_end(o);
    Ok(())
}

/// The element of `dtype` at `at` as the value TopK compares (16-bit
/// floats widened to f32).
fn load_key(cx: &mut Lower, dtype: DType, at: Value) -> Value {
    let raw = cx.ins().load(clif_type(dtype), MemFlagsData::trusted(), at, 0);
    if matches!(dtype, DType::F16 | DType::BF16) {
        let bits = cx.ins().uextend(types::I32, raw);
        return half_floats::widen(cx.b, dtype, bits);
    }
    raw
}

/// True when key `a` ranks strictly before `b`: larger first when
/// `largest`, else smaller first, in the kernels' total order where NaN
/// sorts above every number.
fn ranks_before(cx: &mut Lower, dtype: DType, largest: bool, a: Value, b: Value) -> Value {
    if dtype.is_float() {
        let (cc, nan_first) = if largest { (FloatCC::GreaterThan, a) } else { (FloatCC::LessThan, b) };
        let other = if largest { b } else { a };
        let by_value = cx.ins().fcmp(cc, a, b);
        let nan = cx.ins().fcmp(FloatCC::Unordered, nan_first, nan_first);
        let number = cx.ins().fcmp(FloatCC::Ordered, other, other);
        let by_nan = cx.ins().band(nan, number);
        return cx.ins().bor(by_value, by_nan);
    }
    let cc = match (largest, dtype.is_signed_int()) {
        (true, true) => IntCC::SignedGreaterThan,
        (true, false) => IntCC::UnsignedGreaterThan,
        (false, true) => IntCC::SignedLessThan,
        (false, false) => IntCC::UnsignedLessThan,
    };
    cx.ins().icmp(cc, a, b)
}

/// TopK along the middle axis of `x` (`[outer, len, inner]`) for a
/// pointer-sized `k` already checked to be in `0..=len`: per lane, an
/// insertion into the `k` best so far (positions in `scratch`, `len`
/// words), a later element moving only past strictly worse ones so ties
/// keep the lower index first; then the `k` are written best first.
pub fn topk(
    cx: &mut Lower,
    p: &TopKParams,
    dtype: DType,
    k: Value,
    [x, values, indices, scratch]: [Value; 4],
) -> Result<(), String> {
    if !(dtype.is_float() || dtype.is_int()) {
        return Err(format!("TopK of {dtype} has no portable lowering"));
    }
    if p.outer * p.len * p.inner == 0 {
        return Ok(());
    }
    let (eb, step) = (p.elem_bytes, p.inner * p.elem_bytes);
    let (empty, work) = (cx.b.create_block(), cx.b.create_block());
    cx.ins().brif(k, work, &[], empty, &[]);
    cx.b.switch_to_block(work);
    let lanes = [Level::new(p.outer as usize, vec![p.len * step]), Level::new(p.inner as usize, vec![eb])];
    cx.nest(&lanes, &[x], &mut |cx, at, lane| {
        let lane = lane[0];
        let j = cx.loop_begin(p.len as usize);
        let v = cx.advance(lane, j.index, step);
        let v = load_key(cx, dtype, v);
        let lane_keys = LaneKeys { dtype, largest: p.largest != 0, lane, step };
        insert_ranked(cx, &lane_keys, k, scratch, j.index, v);
        cx.loop_end(j);
        // Output element `(o k + r) inner + i` for rank `r`.
        let first = cx.ins().imul(at[0], k);
        let first = cx.ins().imul_imm_s(first, p.inner);
        let first = cx.ins().iadd(first, at[1]);
        let r = cx.loop_begin_dynamic(k);
        let slot = cx.advance(scratch, r.index, 8);
        let chosen = cx.ins().load(types::I64, MemFlagsData::trusted(), slot, 0);
        let chosen_ptr = pointer_sized(cx, chosen);
        let src = cx.advance(lane, chosen_ptr, step);
        let element = cx.ins().imul_imm_s(r.index, p.inner);
        let element = cx.ins().iadd(element, first);
        let dst = cx.advance(values, element, eb);
        cx.copy_run(dst, src, eb);
        let dst = cx.advance(indices, element, 8);
        cx.ins().store(MemFlagsData::trusted(), chosen, dst, 0);
        cx.loop_end(r);
        Ok(())
    })?;
    cx.ins().jump(empty, &[]);
    cx.b.switch_to_block(empty);
    Ok(())
}

/// One TopK lane: its keys' type and order, its first element and the
/// bytes between its elements.
struct LaneKeys {
    dtype: DType,
    largest: bool,
    lane: Value,
    step: i64,
}

impl LaneKeys {
    /// The position stored at `slot` and the key there.
    fn at(&self, cx: &mut Lower, slot: Value) -> (Value, Value) {
        let position = cx.ins().load(types::I64, MemFlagsData::trusted(), slot, 0);
        let position_ptr = pointer_sized(cx, position);
        let at = cx.advance(self.lane, position_ptr, self.step);
        (position, load_key(cx, self.dtype, at))
    }

    fn before(&self, cx: &mut Lower, a: Value, b: Value) -> Value {
        ranks_before(cx, self.dtype, self.largest, a, b)
    }
}

/// Inserts position `j` (key `v`) into the ranked positions in `order`
/// (the first `min(j, k)` words), keeping at most `k`: below `k` entries it
/// is appended, else it replaces the last only when it ranks before it;
/// then it moves up past every entry it ranks strictly before.
fn insert_ranked(cx: &mut Lower, keys: &LaneKeys, k: Value, order: Value, j: Value, v: Value) {
    let flags = MemFlagsData::trusted();
    let ptr = cx.ptr_type();
    let (full, sift, place, next) =
        (cx.b.create_block(), cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
    let pos = cx.b.append_block_param(sift, ptr);
    let place_pos = cx.b.append_block_param(place, ptr);
    let below = cx.ins().icmp(IntCC::UnsignedLessThan, j, k);
    cx.ins().brif(below, sift, &[j.into()], full, &[]);
    cx.b.switch_to_block(full);
    let last = cx.ins().iadd_imm_s(k, -1);
    let last_slot = cx.advance(order, last, 8);
    let (_, last_key) = keys.at(cx, last_slot);
    let better = keys.before(cx, v, last_key);
    cx.ins().brif(better, sift, &[last.into()], next, &[]);
    cx.b.switch_to_block(sift);
    let (up, compare) = (cx.b.create_block(), cx.b.create_block());
    cx.ins().brif(pos, compare, &[], place, &[pos.into()]);
    cx.b.switch_to_block(compare);
    let above = cx.ins().iadd_imm_s(pos, -1);
    let above_slot = cx.advance(order, above, 8);
    let (above_position, above_key) = keys.at(cx, above_slot);
    let moves = keys.before(cx, v, above_key);
    cx.ins().brif(moves, up, &[], place, &[pos.into()]);
    cx.b.switch_to_block(up);
    let slot = cx.advance(order, pos, 8);
    cx.ins().store(flags, above_position, slot, 0);
    cx.ins().jump(sift, &[above.into()]);
    cx.b.switch_to_block(place);
    let slot = cx.advance(order, place_pos, 8);
    let j64 = widened(cx, j);
    cx.ins().store(flags, j64, slot, 0);
    cx.ins().jump(next, &[]);
    cx.b.switch_to_block(next);
}
