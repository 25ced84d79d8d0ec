//! Kernels of operators whose output size depends on the data: NonZero,
//! Compress, Unique, NonMaxSuppression, and Range, Expand and Tile with
//! run-time arguments.
//!
//! Each works in two steps so the generated code can size the output
//! before anything is written: a counting kernel returns how many elements
//! (or slices, or boxes) the output gets — a negative value is `-status` —
//! and, once the code has allocated exactly that much, a writing kernel
//! fills it, never writing more than the count it is given. Unique and
//! NonMaxSuppression do their real work in the counting step (into the
//! node's scratch) and the writing step only copies it out.

use super::indexing::{with_num, Num};
use super::product;
use crate::abi::dynamic::*;
use crate::abi::{
    ELEM_BF16, ELEM_BOOL, ELEM_F16, ELEM_F32, ELEM_F64, ELEM_I16, ELEM_I32, ELEM_I64, ELEM_I8, ELEM_U16, ELEM_U32,
    ELEM_U64, ELEM_U8, MAX_RANK, STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS, STATUS_OK,
};
use crate::generic::convert::{Bf16, F16};
use core::cmp::Ordering;
use core::ptr::copy_nonoverlapping;

/// A count kernel's failure: `-status`.
const INVALID: i64 = -(STATUS_INVALID_PARAMS as i64);

/// Bool tensors are bytes for these kernels.
fn num_code(dtype: i64) -> i64 {
    if dtype == ELEM_BOOL {
        ELEM_U8
    } else {
        dtype
    }
}

fn is_nonzero<T: Num>(v: T) -> bool {
    v.order(T::zero()) != Ordering::Equal
}

// ---------------------------------------------------------------------------
// NonZero
// ---------------------------------------------------------------------------

impl NonZeroParams {
    fn shape(&self) -> Option<&[i64]> {
        let rank = usize::try_from(self.rank).ok().filter(|&r| r <= MAX_RANK)?;
        let dims = &self.dims[..rank];
        dims.iter().all(|&d| d >= 0).then_some(dims)
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_count_nonzero`].
pub(crate) unsafe fn count_nonzero(p: *const NonZeroParams, x: *const u8) -> i64 {
    let Some((p, n)) = p.as_ref().and_then(|p| Some((p, product(p.shape()?)?))) else {
        return INVALID;
    };
    with_num!(num_code(p.dtype), or INVALID, T => {
        let size = core::mem::size_of::<T>();
        (0..n).filter(|&i| is_nonzero(T::load(x.add(i * size)))).count() as i64
    })
}

/// Does the work of the C entry point [`crate::abi::onnxc_nonzero`].
pub(crate) unsafe fn nonzero(p: *const NonZeroParams, x: *const u8, y: *mut i64, count: i64) -> i32 {
    let Some((p, dims, n)) = p.as_ref().and_then(|p| Some((p, p.shape()?, product(p.shape()?)?))) else {
        return STATUS_INVALID_PARAMS;
    };
    let Ok(count) = usize::try_from(count) else {
        return STATUS_INVALID_PARAMS;
    };
    with_num!(num_code(p.dtype), or STATUS_INVALID_PARAMS, T => {
        let size = core::mem::size_of::<T>();
        let mut found = 0;
        for i in (0..n).filter(|&i| is_nonzero(T::load(x.add(i * size)))) {
            if found == count {
                break;
            }
            let mut rest = i;
            for (d, &len) in dims.iter().enumerate().rev() {
                let len = len as usize;
                y.add(d * count + found).write_unaligned((rest % len) as i64);
                rest /= len;
            }
            found += 1;
        }
    });
    STATUS_OK
}

// ---------------------------------------------------------------------------
// Compress and Unique: slices along one axis
// ---------------------------------------------------------------------------

impl SliceParams {
    /// (outer, len, inner, element bytes), validated.
    fn sizes(&self) -> Option<(usize, usize, usize, usize)> {
        let eb = usize::try_from(self.elem_bytes).ok().filter(|b| matches!(b, 1 | 2 | 4 | 8))?;
        let [outer, len, inner] = [self.outer, self.len, self.inner].map(|d| usize::try_from(d).ok());
        let (outer, len, inner) = (outer?, len?, inner?);
        outer.checked_mul(len)?.checked_mul(inner)?.checked_mul(eb)?;
        Some((outer, len, inner, eb))
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_compress`].
pub(crate) unsafe fn compress(
    p: *const SliceParams,
    x: *const u8,
    cond: *const u8,
    cond_len: i64,
    y: *mut u8,
    count: i64,
) -> i32 {
    let (Some((outer, len, inner, eb)), Ok(cond_len), Ok(count)) =
        (p.as_ref().and_then(SliceParams::sizes), usize::try_from(cond_len), usize::try_from(count))
    else {
        return STATUS_INVALID_PARAMS;
    };
    let slice = inner * eb;
    let kept: usize = (0..len.min(cond_len)).filter(|&j| *cond.add(j) != 0).count();
    if kept != count {
        return STATUS_INVALID_PARAMS;
    }
    let mut at = y;
    for o in 0..outer {
        for j in (0..len.min(cond_len)).filter(|&j| *cond.add(j) != 0) {
            copy_nonoverlapping(x.add((o * len + j) * slice), at, slice);
            at = at.add(slice);
        }
    }
    STATUS_OK
}

/// Lexicographic order of slices `a` and `b` of `x`.
unsafe fn slice_order<T: Num>(
    x: *const u8,
    (outer, len, inner): (usize, usize, usize),
    a: usize,
    b: usize,
) -> Ordering {
    let size = core::mem::size_of::<T>();
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| T::load(x.add(((o * len + j) * inner + i) * size));
            let ord = at(a).order(at(b));
            if ord != Ordering::Equal {
                return ord;
            }
        }
    }
    Ordering::Equal
}

/// Does the work of the C entry point [`crate::abi::onnxc_unique`].
pub(crate) unsafe fn unique(p: *const SliceParams, x: *const u8, scratch: *mut i64) -> i64 {
    let Some((p, (outer, len, inner, eb))) = p.as_ref().and_then(|p| Some((p, p.sizes()?))) else {
        return INVALID;
    };
    if len == 0 {
        return 0;
    }
    let all = core::slice::from_raw_parts_mut(scratch, 3 * len);
    let (order, rest) = all.split_at_mut(len);
    let (group, first) = rest.split_at_mut(len);
    with_num!(num_code(p.dtype), or INVALID, T => {
        if core::mem::size_of::<T>() != eb {
            return INVALID;
        }
        let cmp = |a: usize, b: usize| slice_order::<T>(x, (outer, len, inner), a, b);
        for (j, o) in order.iter_mut().enumerate() {
            *o = j as i64;
        }
        order.sort_unstable_by(|&a, &b| cmp(a as usize, b as usize).then(a.cmp(&b)));
        let mut count = 0;
        for r in 0..len {
            let j = order[r] as usize;
            if r == 0 || cmp(order[r - 1] as usize, j) != Ordering::Equal {
                first[count] = j as i64;
                count += 1;
            }
            group[j] = count as i64 - 1;
        }
        if p.sorted == 0 {
            renumber_by_first_occurrence(order, group, first, count);
        }
        count as i64
    })
}

/// Renumbers Unique's groups so they appear in order of first occurrence.
fn renumber_by_first_occurrence(new_id: &mut [i64], group: &mut [i64], first: &mut [i64], count: usize) {
    let mut next = 0;
    for (j, &g) in group.iter().enumerate() {
        if first[g as usize] == j as i64 {
            new_id[g as usize] = next;
            next += 1;
        }
    }
    for g in group.iter_mut() {
        *g = new_id[*g as usize];
    }
    first[..count].fill(-1);
    for (j, &g) in group.iter().enumerate() {
        if first[g as usize] < 0 {
            first[g as usize] = j as i64;
        }
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_unique_write`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn unique_write(
    p: *const SliceParams,
    x: *const u8,
    scratch: *const i64,
    count: i64,
    y: *mut u8,
    indices: *mut i64,
    inverse: *mut i64,
    counts: *mut i64,
) -> i32 {
    let (Some((outer, len, inner, eb)), Ok(count)) = (p.as_ref().and_then(SliceParams::sizes), usize::try_from(count))
    else {
        return STATUS_INVALID_PARAMS;
    };
    if count > len {
        return STATUS_INVALID_PARAMS;
    }
    if len == 0 {
        return STATUS_OK;
    }
    let group = core::slice::from_raw_parts(scratch.add(len), len);
    let first = core::slice::from_raw_parts(scratch.add(2 * len), count);
    if group.iter().chain(first).any(|&v| v < 0 || v as usize >= len) || group.iter().any(|&g| g as usize >= count) {
        return STATUS_INVALID_PARAMS;
    }
    let slice = inner * eb;
    for o in 0..outer {
        for (g, &j) in first.iter().enumerate() {
            copy_nonoverlapping(x.add((o * len + j as usize) * slice), y.add((o * count + g) * slice), slice);
        }
    }
    if !indices.is_null() {
        copy_nonoverlapping(first.as_ptr(), indices, count);
    }
    if !inverse.is_null() {
        copy_nonoverlapping(group.as_ptr(), inverse, len);
    }
    if !counts.is_null() {
        core::ptr::write_bytes(counts, 0, count);
        for &g in group {
            *counts.add(g as usize) += 1;
        }
    }
    STATUS_OK
}

// ---------------------------------------------------------------------------
// NonMaxSuppression
// ---------------------------------------------------------------------------

/// A box as `(y_min, x_min, y_max, x_max)`.
fn corners(b: [f32; 4], center: bool) -> [f32; 4] {
    if center {
        let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
        [b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw]
    } else {
        [b[0].min(b[2]), b[1].min(b[3]), b[0].max(b[2]), b[1].max(b[3])]
    }
}

/// True when `a` and `b` overlap by more than `threshold` (intersection over union).
fn overlaps(a: [f32; 4], b: [f32; 4], threshold: f32) -> bool {
    let (h, w) = (a[2].min(b[2]) - a[0].max(b[0]), a[3].min(b[3]) - a[1].max(b[1]));
    if h <= 0.0 || w <= 0.0 {
        return false;
    }
    let inter = h * w;
    let area = |c: [f32; 4]| (c[2] - c[0]) * (c[3] - c[1]);
    let (area_a, area_b) = (area(a), area(b));
    let union = area_a + area_b - inter;
    if area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}

/// Does the work of the C entry point [`crate::abi::onnxc_nms`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn nms(
    p: *const NmsParams,
    boxes: *const f32,
    scores: *const f32,
    max_out: *const i64,
    iou: *const f32,
    score_threshold: *const f32,
    selected: *mut i64,
    scratch: *mut i64,
) -> i64 {
    let Some(p) = p.as_ref() else {
        return INVALID;
    };
    let [Ok(batches), Ok(classes), Ok(n)] = [p.batches, p.classes, p.boxes].map(usize::try_from) else {
        return INVALID;
    };
    if batches.checked_mul(classes).and_then(|bc| bc.checked_mul(n)).and_then(|v| v.checked_mul(12)).is_none() {
        return INVALID;
    }
    let limit = if max_out.is_null() { 0 } else { max_out.read_unaligned().max(0) as usize };
    let iou = if iou.is_null() { 0.0 } else { iou.read_unaligned() };
    let threshold = (!score_threshold.is_null()).then(|| score_threshold.read_unaligned());
    if n == 0 || limit == 0 {
        return 0;
    }
    let order = core::slice::from_raw_parts_mut(scratch, n);
    let kept = core::slice::from_raw_parts_mut(scratch.add(n), n);
    let mut total = 0;
    for b in 0..batches {
        let corner = |j: usize| {
            let q = boxes.add((b * n + j) * 4);
            corners([0, 1, 2, 3].map(|k| q.add(k).read_unaligned()), p.center_point_box != 0)
        };
        for c in 0..classes {
            let score = |j: usize| scores.add((b * classes + c) * n + j).read_unaligned();
            let mut candidates = 0;
            for j in (0..n).filter(|&j| threshold.is_none_or(|t| score(j) > t)) {
                order[candidates] = j as i64;
                candidates += 1;
            }
            let order = &mut order[..candidates];
            order.sort_unstable_by(|&a, &b| score(b as usize).total_cmp(&score(a as usize)).then(a.cmp(&b)));
            let mut chosen = 0;
            for &j in order.iter() {
                if chosen == limit {
                    break;
                }
                let this = corner(j as usize);
                if kept[..chosen].iter().any(|&k| overlaps(this, corner(k as usize), iou)) {
                    continue;
                }
                kept[chosen] = j;
                chosen += 1;
                for (k, v) in [b as i64, c as i64, j].into_iter().enumerate() {
                    selected.add(total * 3 + k).write_unaligned(v);
                }
                total += 1;
            }
        }
    }
    total as i64
}

// ---------------------------------------------------------------------------
// Range
// ---------------------------------------------------------------------------

/// An element type Range computes in (floats in f64, like the compiler's
/// constant folding, so folded and run-time results agree).
trait Step: Num {
    /// `ceil((limit - start) / delta)` clamped at 0; `None` for a zero or
    /// non-finite step.
    fn count(start: Self, limit: Self, delta: Self) -> Option<u64>;
    fn nth(start: Self, delta: Self, i: u64) -> Self;
}

macro_rules! int_step {
    ($($t:ty),*) => {$(
        impl Step for $t {
            fn count(start: Self, limit: Self, delta: Self) -> Option<u64> {
                if delta == 0 {
                    return None;
                }
                let (span, d) = (limit as i128 - start as i128, delta as i128);
                let n = span / d + i128::from(span % d != 0 && (span < 0) == (d < 0));
                Some(n.max(0) as u64)
            }
            fn nth(start: Self, delta: Self, i: u64) -> Self {
                (start as i128 + delta as i128 * i as i128) as $t
            }
        }
    )*};
}
int_step!(i16, i32, i64);

/// Floats step in f64; `$wide`/`$narrow` convert to and from it.
macro_rules! float_step {
    ($($t:ty: $wide:expr, $narrow:expr);*) => {$(
        impl Step for $t {
            fn count(start: Self, limit: Self, delta: Self) -> Option<u64> {
                let [start, limit, delta]: [f64; 3] = [start, limit, delta].map($wide);
                let n = libm::ceil((limit - start) / delta);
                if delta == 0.0 || !n.is_finite() {
                    return None;
                }
                Some(if n > 0.0 { n as u64 } else { 0 })
            }
            fn nth(start: Self, delta: Self, i: u64) -> Self {
                $narrow($wide(start) + $wide(delta) * i as f64)
            }
        }
    )*};
}
float_step!(
    f32: |v: f32| v as f64, |v: f64| v as f32;
    f64: |v: f64| v, |v: f64| v;
    F16: |v: F16| v.to_f32() as f64, |v: f64| F16::from_f32(v as f32);
    Bf16: |v: Bf16| v.to_f32() as f64, |v: f64| Bf16::from_f32(v as f32)
);

/// Runs `$body` with `$T` the [`Step`] type of `$dtype`, or returns `$bad`.
macro_rules! with_step {
    ($dtype:expr, $bad:expr, $T:ident => $body:expr) => {{
        macro_rules! arm {
            ($ty:ty) => {{
                type $T = $ty;
                $body
            }};
        }
        match $dtype {
            ELEM_F32 => arm!(f32),
            ELEM_F64 => arm!(f64),
            ELEM_F16 => arm!(F16),
            ELEM_BF16 => arm!(Bf16),
            ELEM_I16 => arm!(i16),
            ELEM_I32 => arm!(i32),
            ELEM_I64 => arm!(i64),
            _ => return $bad,
        }
    }};
}

/// Does the work of the C entry point [`crate::abi::onnxc_range_count`].
pub(crate) unsafe fn range_count(dtype: i64, start: *const u8, limit: *const u8, delta: *const u8) -> i64 {
    with_step!(dtype, INVALID, T => {
        match T::count(T::load(start), T::load(limit), T::load(delta)) {
            Some(n) => i64::try_from(n).unwrap_or(i64::MAX),
            None => INVALID,
        }
    })
}

/// Does the work of the C entry point [`crate::abi::onnxc_range`].
pub(crate) unsafe fn range(dtype: i64, start: *const u8, delta: *const u8, y: *mut u8, count: i64) -> i32 {
    if count < 0 {
        return STATUS_INDEX_OUT_OF_RANGE;
    }
    with_step!(dtype, STATUS_INVALID_PARAMS, T => {
        let (s, d) = (T::load(start), T::load(delta));
        for i in 0..count as u64 {
            T::nth(s, d, i).store(y.add(i as usize * core::mem::size_of::<T>()));
        }
    });
    STATUS_OK
}

// ---------------------------------------------------------------------------
// Expand and Tile with a run-time shape or repeats
// ---------------------------------------------------------------------------

/// The output dims (right-aligned input dims, padded with 1) and rank.
unsafe fn broadcast_dims(
    p: &BroadcastParams,
    arg: *const i64,
) -> Option<([usize; MAX_RANK], [usize; MAX_RANK], usize)> {
    let rank = usize::try_from(p.rank).ok().filter(|&r| r <= MAX_RANK)?;
    let arg_len = usize::try_from(p.arg_len).ok().filter(|&r| r <= MAX_RANK)?;
    let out_rank = if p.tile != 0 { (arg_len == rank).then_some(rank)? } else { rank.max(arg_len) };
    let (mut input, mut out) = ([1usize; MAX_RANK], [0usize; MAX_RANK]);
    for d in 0..rank {
        input[out_rank - rank + d] = usize::try_from(p.dims[d]).ok()?;
    }
    for d in 0..out_rank {
        let a = if d + arg_len >= out_rank {
            usize::try_from(arg.add(d + arg_len - out_rank).read_unaligned()).ok()?
        } else {
            1
        };
        out[d] = match (p.tile != 0, input[d], a) {
            (true, n, r) => n.checked_mul(r)?,
            (false, n, m) if n == m || m == 1 => n,
            (false, 1, m) => m,
            _ => return None,
        };
    }
    out[..out_rank].iter().try_fold(p.elem_bytes.max(1) as usize, |acc, &n| acc.checked_mul(n))?;
    Some((input, out, out_rank))
}

/// Does the work of the C entry point [`crate::abi::onnxc_broadcast_dims`].
pub(crate) unsafe fn broadcast_dims_kernel(p: *const BroadcastParams, arg: *const i64, out_dims: *mut i64) -> i32 {
    let Some((_, out, rank)) = p.as_ref().and_then(|p| broadcast_dims(p, arg)) else {
        return STATUS_INVALID_PARAMS;
    };
    for (d, &n) in out[..rank].iter().enumerate() {
        out_dims.add(d).write_unaligned(n as i64);
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_broadcast`].
pub(crate) unsafe fn broadcast(p: *const BroadcastParams, arg: *const i64, x: *const u8, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let (Some((input, out, rank)), Ok(eb)) = (broadcast_dims(p, arg), usize::try_from(p.elem_bytes)) else {
        return STATUS_INVALID_PARAMS;
    };
    let total = out[..rank].iter().product::<usize>();
    if total == 0 {
        return STATUS_OK;
    }
    let (row, src_row) = if rank == 0 { (1, 1) } else { (out[rank - 1], input[rank - 1]) };
    let mut idx = [0usize; MAX_RANK];
    let mut dst = y;
    for _ in 0..total / row {
        // Source offset of this output row: every outer index modulo the input dim.
        let mut src = 0;
        for d in 0..rank.saturating_sub(1) {
            src = src * input[d] + idx[d] % input[d];
        }
        let src = x.add(src * src_row * eb);
        let mut done = 0;
        while done < row {
            let n = src_row.min(row - done);
            copy_nonoverlapping(src, dst, n * eb);
            dst = dst.add(n * eb);
            done += n;
        }
        for d in (0..rank.saturating_sub(1)).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn nonzero_params(dims: &[i64], dtype: i64) -> NonZeroParams {
        let mut p = NonZeroParams { dtype, rank: dims.len() as i64, dims: [0; MAX_RANK] };
        p.dims[..dims.len()].copy_from_slice(dims);
        p
    }

    #[test]
    fn nonzero_lists_coordinates_column_per_element() {
        let x: [f32; 6] = [0.0, 2.0, -0.0, f32::NAN, 0.0, 1.0];
        let p = nonzero_params(&[2, 3], ELEM_F32);
        let n = unsafe { onnxc_count_nonzero(&p, x.as_ptr() as *const u8) };
        assert_eq!(n, 3);
        let mut y = vec![0i64; 6];
        assert_eq!(unsafe { onnxc_nonzero(&p, x.as_ptr() as *const u8, y.as_mut_ptr(), n) }, STATUS_OK);
        assert_eq!(y, [0, 1, 1, 1, 0, 2]);
    }

    fn unique(x: &[i32], outer: i64, len: i64, inner: i64, sorted: bool) -> (Vec<i32>, Vec<i64>, Vec<i64>, Vec<i64>) {
        let p = SliceParams { dtype: ELEM_I32, elem_bytes: 4, outer, len, inner, sorted: sorted as i64 };
        let mut scratch = vec![0i64; 3 * len as usize];
        let count = unsafe { onnxc_unique(&p, x.as_ptr() as *const u8, scratch.as_mut_ptr()) };
        assert!(count >= 0);
        let c = count as usize;
        let (mut y, mut idx, mut inv, mut counts) =
            (vec![0i32; (outer * inner) as usize * c], vec![0i64; c], vec![0i64; len as usize], vec![0i64; c]);
        let status = unsafe {
            onnxc_unique_write(
                &p,
                x.as_ptr() as *const u8,
                scratch.as_ptr(),
                count,
                y.as_mut_ptr() as *mut u8,
                idx.as_mut_ptr(),
                inv.as_mut_ptr(),
                counts.as_mut_ptr(),
            )
        };
        assert_eq!(status, STATUS_OK);
        (y, idx, inv, counts)
    }

    #[test]
    fn unique_sorted_and_in_first_occurrence_order() {
        let x = [2, 1, 1, 3, 4, 3];
        assert_eq!(
            unique(&x, 1, 6, 1, true),
            (vec![1, 2, 3, 4], vec![1, 0, 3, 4], vec![1, 0, 0, 2, 3, 2], vec![2, 1, 2, 1])
        );
        assert_eq!(
            unique(&x, 1, 6, 1, false),
            (vec![2, 1, 3, 4], vec![0, 1, 3, 4], vec![0, 1, 1, 2, 3, 2], vec![1, 2, 2, 1])
        );
    }

    #[test]
    fn unique_compares_whole_slices() {
        // Rows of [[1,0],[0,1],[1,0]] along axis 0.
        let x = [1, 0, 0, 1, 1, 0];
        let (y, idx, inv, counts) = unique(&x, 1, 3, 2, true);
        assert_eq!((y, idx, inv, counts), (vec![0, 1, 1, 0], vec![1, 0], vec![1, 0, 1], vec![1, 2]));
    }

    #[test]
    fn compress_keeps_selected_slices_only() {
        let x: Vec<u8> = (0..6).collect();
        let cond = [1u8, 0, 1];
        let p = SliceParams { dtype: ELEM_U8, elem_bytes: 1, outer: 2, len: 3, inner: 1, sorted: 0 };
        let mut y = vec![0u8; 4];
        assert_eq!(unsafe { onnxc_compress(&p, x.as_ptr(), cond.as_ptr(), 3, y.as_mut_ptr(), 2) }, STATUS_OK);
        assert_eq!(y, [0, 2, 3, 5]);
        assert_eq!(
            unsafe { onnxc_compress(&p, x.as_ptr(), cond.as_ptr(), 3, y.as_mut_ptr(), 1) },
            STATUS_INVALID_PARAMS
        );
    }

    #[test]
    fn nms_suppresses_overlaps_best_first() {
        let boxes: [f32; 12] = [0.0, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 0.0, 10.0, 1.0, 11.0];
        let scores: [f32; 3] = [0.9, 0.95, 0.3];
        let p = NmsParams { batches: 1, classes: 1, boxes: 3, center_point_box: 0 };
        let (max_out, iou) = (10i64, 0.5f32);
        let mut selected = vec![0i64; 9];
        let mut scratch = vec![0i64; 6];
        let n = unsafe {
            onnxc_nms(
                &p,
                boxes.as_ptr(),
                scores.as_ptr(),
                &max_out,
                &iou,
                core::ptr::null(),
                selected.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(n, 2);
        assert_eq!(&selected[..6], &[0, 0, 1, 0, 0, 2]);
    }

    fn broadcast(x: &[i32], dims: &[i64], arg: &[i64], tile: bool) -> (Vec<i64>, Vec<i32>) {
        let mut p = BroadcastParams {
            elem_bytes: 4,
            rank: dims.len() as i64,
            arg_len: arg.len() as i64,
            tile: tile as i64,
            ..Default::default()
        };
        p.dims[..dims.len()].copy_from_slice(dims);
        let mut out = [0i64; MAX_RANK];
        assert_eq!(unsafe { onnxc_broadcast_dims(&p, arg.as_ptr(), out.as_mut_ptr()) }, STATUS_OK);
        let rank = if tile { dims.len() } else { dims.len().max(arg.len()) };
        let out = out[..rank].to_vec();
        let mut y = vec![0i32; out.iter().product::<i64>() as usize];
        let status = unsafe { onnxc_broadcast(&p, arg.as_ptr(), x.as_ptr() as *const u8, y.as_mut_ptr() as *mut u8) };
        assert_eq!(status, STATUS_OK);
        (out, y)
    }

    #[test]
    fn expand_broadcasts_and_tile_repeats() {
        assert_eq!(
            broadcast(&[1, 2, 3], &[3, 1], &[2, 1, 2], false),
            (vec![2, 3, 2], vec![1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3])
        );
        assert_eq!(
            broadcast(&[1, 2, 3, 4], &[2, 2], &[2, 3], true).1,
            [1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4]
        );
        let p = BroadcastParams { elem_bytes: 4, rank: 1, dims: [3, 0, 0, 0, 0, 0, 0, 0], arg_len: 1, tile: 0 };
        let mut out = [0i64; MAX_RANK];
        assert_eq!(unsafe { onnxc_broadcast_dims(&p, [2i64].as_ptr(), out.as_mut_ptr()) }, STATUS_INVALID_PARAMS);
    }

    #[test]
    fn range_counts_like_ceil_of_span_over_step() {
        let count = |s: i32, l: i32, d: i32| unsafe {
            onnxc_range_count(
                ELEM_I32,
                &s as *const i32 as *const u8,
                &l as *const i32 as *const u8,
                &d as *const i32 as *const u8,
            )
        };
        assert_eq!(count(0, 10, 3), 4);
        assert_eq!(count(10, 0, -3), 4);
        assert_eq!(count(0, 10, -1), 0);
        assert_eq!(count(0, 10, 0), INVALID);
        let (s, d) = (1.5f32, 0.5f32);
        let mut y = [0f32; 3];
        let status = unsafe {
            onnxc_range(
                ELEM_F32,
                &s as *const f32 as *const u8,
                &d as *const f32 as *const u8,
                y.as_mut_ptr() as *mut u8,
                3,
            )
        };
        assert_eq!((status, y), (STATUS_OK, [1.5, 2.0, 2.5]));
    }
}
