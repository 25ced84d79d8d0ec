//! Indexing kernels: GatherElements, GatherND, ScatterElements, ScatterND,
//! TensorScatter, OneHot, Trilu, EyeLike, CumSum/CumProd, ReverseSequence
//! and TopK.
//!
//! Data movement is type-agnostic (`elem_bytes`-sized elements); the
//! kernels that compute (scatter reductions, cumulative sums and products,
//! TopK's ordering) take the element type as its ONNX `TensorProto.DataType`
//! code (`DT_*`) and dispatch once to a generic implementation over
//! [`Num`]. f16 and bf16 compute in f32, rounding after every operation.
//!
//! Every index read from a tensor is checked before it is used; a bad one
//! ends the kernel with `STATUS_INDEX_OUT_OF_RANGE` (elements written before
//! it stay written, nothing outside the buffers is touched).

use super::{advance, checked_rank, product, to_usize};
use crate::abi::convert::{onnxc_bf16_to_f32, onnxc_f16_to_f32};
use crate::abi::{
    ELEM_BF16, ELEM_BOOL, ELEM_F16, ELEM_F32, ELEM_F64, ELEM_I16, ELEM_I32, ELEM_I64, ELEM_I8, ELEM_U16, ELEM_U32,
    ELEM_U64, ELEM_U8, MAX_RANK, STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS, STATUS_OK,
};
use crate::generic::convert::{Bf16, F16};
use core::cmp::Ordering;
use core::ptr::{copy_nonoverlapping, write_bytes};

// Element type codes: ONNX `TensorProto.DataType`.

// Scatter reductions.

/// An element type the computing kernels know.
pub(crate) trait Num: Copy {
    unsafe fn load(p: *const u8) -> Self;
    unsafe fn store(self, p: *mut u8);
    fn zero() -> Self;
    fn one() -> Self;
    fn plus(self, o: Self) -> Self;
    fn times(self, o: Self) -> Self;
    /// A total order; NaN sorts above every number.
    fn order(self, o: Self) -> Ordering;
    fn larger(self, o: Self) -> Self {
        if self.order(o) == Ordering::Less {
            o
        } else {
            self
        }
    }
    fn smaller(self, o: Self) -> Self {
        if o.order(self) == Ordering::Less {
            o
        } else {
            self
        }
    }
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            unsafe fn load(p: *const u8) -> Self { (p as *const $t).read_unaligned() }
            unsafe fn store(self, p: *mut u8) { (p as *mut $t).write_unaligned(self) }
            fn zero() -> Self { 0 }
            fn one() -> Self { 1 }
            fn plus(self, o: Self) -> Self { self.wrapping_add(o) }
            fn times(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn order(self, o: Self) -> Ordering { self.cmp(&o) }
        }
    )*};
}
int_num!(i8, i16, i32, i64, u8, u16, u32, u64);

fn float_order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

macro_rules! float_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            unsafe fn load(p: *const u8) -> Self { (p as *const $t).read_unaligned() }
            unsafe fn store(self, p: *mut u8) { (p as *mut $t).write_unaligned(self) }
            fn zero() -> Self { 0.0 }
            fn one() -> Self { 1.0 }
            fn plus(self, o: Self) -> Self { self + o }
            fn times(self, o: Self) -> Self { self * o }
            fn order(self, o: Self) -> Ordering { float_order(self as f64, o as f64) }
        }
    )*};
}
float_num!(f32, f64);

/// A 16-bit float (binary16 or bfloat16) computed in f32, rounded after
/// every step.
macro_rules! half_num {
    ($name:ident) => {
        impl Num for $name {
            unsafe fn load(p: *const u8) -> Self {
                $name((p as *const u16).read_unaligned())
            }
            unsafe fn store(self, p: *mut u8) {
                (p as *mut u16).write_unaligned(self.0)
            }
            fn zero() -> Self {
                Self::from_f32(0.0)
            }
            fn one() -> Self {
                Self::from_f32(1.0)
            }
            fn plus(self, o: Self) -> Self {
                Self::from_f32(self.to_f32() + o.to_f32())
            }
            fn times(self, o: Self) -> Self {
                Self::from_f32(self.to_f32() * o.to_f32())
            }
            fn order(self, o: Self) -> Ordering {
                float_order(self.to_f32() as f64, o.to_f32() as f64)
            }
        }
    };
}
half_num!(F16);
half_num!(Bf16);

/// Runs `$body` with `$T` bound to the [`Num`] type of ONNX dtype code
/// `$dtype`; for other codes returns `$bad` (`or $bad`), or, in the form
/// with an element width `$eb`, `STATUS_INVALID_PARAMS`, which it also
/// returns when the type is not `$eb` bytes wide.
macro_rules! with_num {
    ($dtype:expr, or $bad:expr, $T:ident => $body:expr) => {{
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
            ELEM_I8 => arm!(i8),
            ELEM_I16 => arm!(i16),
            ELEM_I32 => arm!(i32),
            ELEM_I64 => arm!(i64),
            ELEM_U8 => arm!(u8),
            ELEM_U16 => arm!(u16),
            ELEM_U32 => arm!(u32),
            ELEM_U64 => arm!(u64),
            _ => return $bad,
        }
    }};
    ($dtype:expr, $eb:expr, $T:ident => $body:expr) => {
        with_num!($dtype, or STATUS_INVALID_PARAMS, $T => {
            if core::mem::size_of::<$T>() != $eb {
                return STATUS_INVALID_PARAMS;
            }
            $body
        })
    };
}
use crate::abi::indexing::*;
pub(crate) use with_num;

/// Element widths the data-movement kernels take: the numeric types and
/// 16-byte `onnxc_string` records.
fn valid_elem_bytes(b: i64) -> Option<usize> {
    matches!(b, 1 | 2 | 4 | 8 | 16).then_some(b as usize)
}

/// Copies one element of `eb` bytes.
#[inline(always)]
unsafe fn copy_elem(src: *const u8, dst: *mut u8, eb: usize) {
    copy_nonoverlapping(src, dst, eb);
}

/// Index `i` of an i32 (`index_bytes` 4) or i64 (8) index tensor.
#[inline(always)]
unsafe fn read_index(indices: *const u8, i: usize, index_bytes: i64) -> i64 {
    if index_bytes == 4 {
        (indices as *const i32).add(i).read_unaligned() as i64
    } else {
        (indices as *const i64).add(i).read_unaligned()
    }
}

/// `v` (negative counts from the end) as a position in `0..len`.
#[inline(always)]
fn normalise(v: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let v = if v < 0 { v.checked_add(len)? } else { v };
    (0..len).contains(&v).then_some(v as usize)
}

/// Combines `src` into `dst` with a scatter reduction.
#[inline(always)]
unsafe fn combine<T: Num>(dst: *mut u8, src: *const u8, reduction: i64) {
    let (a, b) = (T::load(dst), T::load(src));
    let r = match reduction {
        SCATTER_ADD => a.plus(b),
        SCATTER_MUL => a.times(b),
        SCATTER_MAX => a.larger(b),
        SCATTER_MIN => a.smaller(b),
        _ => b,
    };
    r.store(dst);
}

/// Writes `count` elements from `src` into `dst` under `reduction`
/// (`SCATTER_NONE` copies, any type; the others need a [`Num`] dtype).
#[inline(always)]
unsafe fn scatter_run(dtype: i64, eb: usize, reduction: i64, dst: *mut u8, src: *const u8, count: usize) -> i32 {
    if reduction == SCATTER_NONE {
        copy_nonoverlapping(src, dst, count * eb);
        return STATUS_OK;
    }
    with_num!(dtype, eb, T => {
        for i in 0..count {
            combine::<T>(dst.add(i * eb), src.add(i * eb), reduction);
        }
    });
    STATUS_OK
}

// ---------------------------------------------------------------------------
// GatherElements / ScatterElements
// ---------------------------------------------------------------------------

/// Calls `f(i, off)` for every index element `i` (row-major) with `off` the
/// data element it addresses; stops at the first bad index or nonzero `f`.
unsafe fn each_element_target(p: &ElementsParams, indices: *const u8, mut f: impl FnMut(usize, usize) -> i32) -> i32 {
    let (Some(rank), Some(_)) = (checked_rank(p.rank, MAX_RANK, &p.data_dims), valid_elem_bytes(p.elem_bytes)) else {
        return STATUS_INVALID_PARAMS;
    };
    if checked_rank(p.rank, MAX_RANK, &p.index_dims).is_none() || p.axis < 0 || p.axis >= p.rank {
        return STATUS_INVALID_PARAMS;
    }
    if p.index_bytes != 4 && p.index_bytes != 8 {
        return STATUS_INVALID_PARAMS;
    }
    let axis = p.axis as usize;
    if (0..rank).any(|d| d != axis && p.index_dims[d] > p.data_dims[d]) {
        return STATUS_INVALID_PARAMS;
    }
    let (Some(n), Some(_)) = (product(&p.index_dims[..rank]), product(&p.data_dims[..rank])) else {
        return STATUS_INVALID_PARAMS;
    };
    if n == 0 {
        return STATUS_OK;
    }
    let data_dims = to_usize(&p.data_dims);
    let idx_dims = to_usize(&p.index_dims);
    let mut strides = [0isize; MAX_RANK];
    let mut s = 1isize;
    for d in (0..rank).rev() {
        strides[d] = if d == axis { 0 } else { s };
        s *= data_dims[d] as isize;
    }
    let axis_stride = data_dims[axis + 1..rank].iter().product::<usize>();
    let mut idx = [0usize; MAX_RANK];
    let mut offs = [0isize; 1];
    for i in 0..n {
        let Some(j) = normalise(read_index(indices, i, p.index_bytes), data_dims[axis]) else {
            return STATUS_INDEX_OUT_OF_RANGE;
        };
        let st = f(i, offs[0] as usize + j * axis_stride);
        if st != STATUS_OK {
            return st;
        }
        advance(&mut idx[..rank], &idx_dims[..rank], [&strides[..rank]], &mut offs);
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_gather_elements`].
pub(crate) unsafe fn gather_elements(
    p: *const ElementsParams,
    data: *const u8,
    indices: *const u8,
    out: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let eb = p.elem_bytes as usize;
    each_element_target(p, indices, |i, off| {
        copy_elem(data.add(off * eb), out.add(i * eb), eb);
        STATUS_OK
    })
}

/// Does the work of the C entry point [`crate::abi::onnxc_scatter_elements`].
pub(crate) unsafe fn scatter_elements(
    p: *const ElementsParams,
    out: *mut u8,
    indices: *const u8,
    updates: *const u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let eb = p.elem_bytes as usize;
    each_element_target(p, indices, |i, off| {
        scatter_run(p.dtype, eb, p.reduction, out.add(off * eb), updates.add(i * eb), 1)
    })
}

// ---------------------------------------------------------------------------
// GatherND / ScatterND
// ---------------------------------------------------------------------------

/// Calls `f(t, off)` for every index tuple `t` (over batch × tuples) with
/// `off` the first data element of the slice it addresses.
unsafe fn each_nd_target(p: &NdParams, indices: *const i64, mut f: impl FnMut(usize, usize) -> i32) -> i32 {
    let (Some(k), Some(_)) = (checked_rank(p.k, MAX_RANK, &p.dims), valid_elem_bytes(p.elem_bytes)) else {
        return STATUS_INVALID_PARAMS;
    };
    if p.batch < 0 || p.tuples < 0 || p.slice < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let Some(per_batch) = product(&p.dims[..k]).and_then(|n| n.checked_mul(p.slice as usize)) else {
        return STATUS_INVALID_PARAMS;
    };
    let dims = to_usize(&p.dims);
    let (batch, tuples, slice) = (p.batch as usize, p.tuples as usize, p.slice as usize);
    for b in 0..batch {
        for t in 0..tuples {
            let tuple = indices.add((b * tuples + t) * k);
            let mut off = 0usize;
            for (d, &len) in dims[..k].iter().enumerate() {
                let Some(j) = normalise(tuple.add(d).read_unaligned(), len) else {
                    return STATUS_INDEX_OUT_OF_RANGE;
                };
                off = off * len + j;
            }
            let st = f(b * tuples + t, b * per_batch + off * slice);
            if st != STATUS_OK {
                return st;
            }
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_gather_nd`].
pub(crate) unsafe fn gather_nd(p: *const NdParams, data: *const u8, indices: *const i64, out: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let row = (p.slice.max(0) as usize) * (p.elem_bytes.max(0) as usize);
    each_nd_target(p, indices, |t, off| {
        copy_nonoverlapping(data.add(off * p.elem_bytes as usize), out.add(t * row), row);
        STATUS_OK
    })
}

/// Does the work of the C entry point [`crate::abi::onnxc_scatter_nd`].
pub(crate) unsafe fn scatter_nd(p: *const NdParams, out: *mut u8, indices: *const i64, updates: *const u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let eb = p.elem_bytes.max(0) as usize;
    let slice = p.slice.max(0) as usize;
    each_nd_target(p, indices, |t, off| {
        scatter_run(p.dtype, eb, p.reduction, out.add(off * eb), updates.add(t * slice * eb), slice)
    })
}

// ---------------------------------------------------------------------------
// TensorScatter
// ---------------------------------------------------------------------------

/// Does the work of the C entry point [`crate::abi::onnxc_tensor_scatter`].
pub(crate) unsafe fn tensor_scatter(
    p: *const TensorScatterParams,
    out: *mut u8,
    update: *const u8,
    write_indices: *const i64,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(eb) = valid_elem_bytes(p.elem_bytes) else {
        return STATUS_INVALID_PARAMS;
    };
    if [p.batch, p.mid, p.max_seq, p.seq, p.inner].iter().any(|&v| v < 0) || p.seq > p.max_seq {
        return STATUS_INVALID_PARAMS;
    }
    let (mid, max_seq, seq) = (p.mid as usize, p.max_seq as usize, p.seq as usize);
    let row = p.inner as usize * eb;
    for b in 0..p.batch as usize {
        let w = if write_indices.is_null() { 0 } else { write_indices.add(b).read_unaligned() };
        for m in 0..mid {
            for s in 0..seq {
                let pos = w.checked_add(s as i64).unwrap_or(-1);
                let pos = if p.circular != 0 && max_seq > 0 { pos.rem_euclid(max_seq as i64) } else { pos };
                if !(0..max_seq as i64).contains(&pos) {
                    return STATUS_INDEX_OUT_OF_RANGE;
                }
                let dst = out.add(((b * mid + m) * max_seq + pos as usize) * row);
                let src = update.add(((b * mid + m) * seq + s) * row);
                copy_nonoverlapping(src, dst, row);
            }
        }
    }
    STATUS_OK
}

// ---------------------------------------------------------------------------
// OneHot, Trilu, EyeLike
// ---------------------------------------------------------------------------

/// Index `i` of a numeric tensor of ONNX dtype `dtype`, truncated to i64.
pub(crate) unsafe fn read_numeric(p: *const u8, i: usize, dtype: i64) -> Option<i64> {
    Some(match dtype {
        ELEM_F32 => (p as *const f32).add(i).read_unaligned() as i64,
        ELEM_F64 => (p as *const f64).add(i).read_unaligned() as i64,
        ELEM_F16 => onnxc_f16_to_f32((p as *const u16).add(i).read_unaligned() as i32) as i64,
        ELEM_BF16 => onnxc_bf16_to_f32((p as *const u16).add(i).read_unaligned() as i32) as i64,
        ELEM_I8 => (p as *const i8).add(i).read_unaligned() as i64,
        ELEM_I16 => (p as *const i16).add(i).read_unaligned() as i64,
        ELEM_I32 => (p as *const i32).add(i).read_unaligned() as i64,
        ELEM_I64 => (p as *const i64).add(i).read_unaligned(),
        ELEM_U8 | ELEM_BOOL => *p.add(i) as i64,
        ELEM_U16 => (p as *const u16).add(i).read_unaligned() as i64,
        ELEM_U32 => (p as *const u32).add(i).read_unaligned() as i64,
        ELEM_U64 => (p as *const u64).add(i).read_unaligned() as i64,
        _ => return None,
    })
}

/// Does the work of the C entry point [`crate::abi::onnxc_one_hot`].
pub(crate) unsafe fn one_hot(
    p: *const OneHotParams,
    depth: i64,
    indices: *const u8,
    values: *const u8,
    out: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(eb) = valid_elem_bytes(p.elem_bytes) else {
        return STATUS_INVALID_PARAMS;
    };
    let empty = p.outer == 0 || p.inner == 0;
    if p.outer < 0 || depth < 0 || p.inner < 0 || (!empty && read_numeric(indices, 0, p.index_dtype).is_none()) {
        return STATUS_INVALID_PARAMS;
    }
    let (outer, depth, inner) = (p.outer as usize, depth as usize, p.inner as usize);
    let (off, on) = (values, values.add(eb));
    for o in 0..outer {
        let base = out.add(o * depth * inner * eb);
        for d in 0..depth * inner {
            copy_elem(off, base.add(d * eb), eb);
        }
        for i in 0..inner {
            let v = read_numeric(indices, o * inner + i, p.index_dtype).unwrap_or(i64::MIN);
            if let Some(d) = normalise(v, depth) {
                copy_elem(on, base.add((d * inner + i) * eb), eb);
            }
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_trilu`].
pub(crate) unsafe fn trilu(p: *const TriluParams, x: *const u8, k: *const i64, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(eb) = valid_elem_bytes(p.elem_bytes) else {
        return STATUS_INVALID_PARAMS;
    };
    if p.batch < 0 || p.rows < 0 || p.cols < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let k = if k.is_null() { 0 } else { k.read_unaligned() };
    let (rows, cols) = (p.rows, p.cols);
    let row = cols as usize * eb;
    for m in 0..(p.batch * rows) as usize {
        let i = m as i64 % rows.max(1);
        // Kept columns are [lo, hi).
        let diag = i.saturating_add(k).clamp(-1, cols);
        let (lo, hi) = if p.upper != 0 { (diag.max(0), cols) } else { (0, (diag + 1).clamp(0, cols)) };
        let (lo, hi) = (lo as usize, hi.max(lo) as usize);
        let (src, dst) = (x.add(m * row), y.add(m * row));
        write_bytes(dst, 0, lo * eb);
        copy_nonoverlapping(src.add(lo * eb), dst.add(lo * eb), (hi - lo) * eb);
        write_bytes(dst.add(hi * eb), 0, (cols as usize - hi) * eb);
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_eye`].
pub(crate) unsafe fn eye(p: *const EyeParams, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(eb) = valid_elem_bytes(p.elem_bytes) else {
        return STATUS_INVALID_PARAMS;
    };
    if p.rows < 0 || p.cols < 0 {
        return STATUS_INVALID_PARAMS;
    }
    write_bytes(y, 0, (p.rows * p.cols) as usize * eb);
    let one = p.one.to_le_bytes();
    for i in 0..p.rows {
        let j = i.saturating_add(p.k);
        if (0..p.cols).contains(&j) {
            copy_elem(one.as_ptr(), y.add((i * p.cols + j) as usize * eb), eb);
        }
    }
    STATUS_OK
}

// ---------------------------------------------------------------------------
// CumSum / CumProd, ReverseSequence
// ---------------------------------------------------------------------------

unsafe fn cumulative<T: Num>(p: &CumulativeParams, x: *const u8, y: *mut u8) {
    let eb = core::mem::size_of::<T>();
    let (outer, len, inner) = (p.outer as usize, p.len as usize, p.inner as usize);
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = if p.product != 0 { T::one() } else { T::zero() };
            for step in 0..len {
                let j = if p.reverse != 0 { len - 1 - step } else { step };
                let at = ((o * len + j) * inner + i) * eb;
                let v = T::load(x.add(at));
                let next = if p.product != 0 { acc.times(v) } else { acc.plus(v) };
                (if p.exclusive != 0 { acc } else { next }).store(y.add(at));
                acc = next;
            }
        }
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_cumulative`].
pub(crate) unsafe fn cumulative_kernel(p: *const CumulativeParams, x: *const u8, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.outer < 0 || p.len < 0 || p.inner < 0 {
        return STATUS_INVALID_PARAMS;
    }
    with_num!(p.dtype, p.elem_bytes as usize, T => cumulative::<T>(p, x, y));
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_reverse_sequence`].
pub(crate) unsafe fn reverse_sequence(
    p: *const ReverseSequenceParams,
    x: *const u8,
    lens: *const i64,
    y: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(eb) = valid_elem_bytes(p.elem_bytes) else {
        return STATUS_INVALID_PARAMS;
    };
    if [p.time_len, p.batch_len, p.inner, p.time_stride, p.batch_stride].iter().any(|&v| v < 0) {
        return STATUS_INVALID_PARAMS;
    }
    let row = p.inner as usize * eb;
    let (ts, bs) = (p.time_stride as usize * eb, p.batch_stride as usize * eb);
    for b in 0..p.batch_len as usize {
        let n = lens.add(b).read_unaligned();
        if !(0..=p.time_len).contains(&n) {
            return STATUS_INDEX_OUT_OF_RANGE;
        }
        for t in 0..p.time_len as usize {
            let from = if (t as i64) < n { n as usize - 1 - t } else { t };
            copy_nonoverlapping(x.add(b * bs + from * ts), y.add(b * bs + t * ts), row);
        }
    }
    STATUS_OK
}

// ---------------------------------------------------------------------------
// TopK
// ---------------------------------------------------------------------------

unsafe fn topk<T: Num>(p: &TopKParams, k: usize, x: *const u8, values: *mut u8, indices: *mut i64, scratch: *mut i64) {
    let eb = core::mem::size_of::<T>();
    let (outer, len, inner) = (p.outer as usize, p.len as usize, p.inner as usize);
    let order = core::slice::from_raw_parts_mut(scratch, len);
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: i64| T::load(x.add(((o * len + j as usize) * inner + i) * eb));
            // Best first; ties go to the lower index.
            let cmp = |a: &i64, b: &i64| {
                let by_value = if p.largest != 0 { at(*b).order(at(*a)) } else { at(*a).order(at(*b)) };
                by_value.then(a.cmp(b))
            };
            for (j, slot) in order.iter_mut().enumerate() {
                *slot = j as i64;
            }
            if k < len && k > 0 {
                order.select_nth_unstable_by(k - 1, cmp);
            }
            order[..k].sort_unstable_by(cmp);
            for (r, &j) in order[..k].iter().enumerate() {
                let dst = (o * k + r) * inner + i;
                at(j).store(values.add(dst * eb));
                indices.add(dst).write_unaligned(j);
            }
        }
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_topk`].
pub(crate) unsafe fn topk_kernel(
    p: *const TopKParams,
    k: i64,
    x: *const u8,
    values: *mut u8,
    indices: *mut i64,
    scratch: *mut i64,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.outer < 0 || p.len < 0 || p.inner < 0 || (p.len > 0 && scratch.is_null()) {
        return STATUS_INVALID_PARAMS;
    }
    if k < 0 || k > p.len {
        return STATUS_INDEX_OUT_OF_RANGE;
    }
    if p.len == 0 {
        return STATUS_OK;
    }
    with_num!(p.dtype, p.elem_bytes as usize, T => topk::<T>(p, k as usize, x, values, indices, scratch));
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn elements_params(eb: i64, ib: i64, axis: i64, data: &[i64], idx: &[i64]) -> ElementsParams {
        let mut p = ElementsParams {
            dtype: ELEM_I64,
            elem_bytes: eb,
            index_bytes: ib,
            rank: data.len() as i64,
            axis,
            ..Default::default()
        };
        p.data_dims[..data.len()].copy_from_slice(data);
        p.index_dims[..idx.len()].copy_from_slice(idx);
        p
    }

    fn bytes<T: Copy>(v: &[T]) -> *const u8 {
        v.as_ptr() as *const u8
    }

    #[test]
    fn gather_elements_matches_naive() {
        // data [3, 4], indices [2, 4] along axis 0 and [3, 2] along axis 1.
        let data: Vec<i64> = (0..12).collect();
        let idx0: Vec<i32> = vec![0, 2, -1, 1, 2, 0, 1, -3];
        let mut out = vec![0i64; 8];
        let p = elements_params(8, 4, 0, &[3, 4], &[2, 4]);
        let st = unsafe { onnxc_gather_elements(&p, bytes(&data), bytes(&idx0), out.as_mut_ptr() as *mut u8) };
        assert_eq!(st, STATUS_OK);
        let want: Vec<i64> = (0..8)
            .map(|f| {
                let (r, c) = (f / 4, f % 4);
                let i = idx0[f].rem_euclid(3) as usize;
                let _ = r;
                data[i * 4 + c]
            })
            .collect();
        assert_eq!(out, want);
        let idx1: Vec<i64> = vec![3, 0, -4, 1, 2, 2];
        let mut out = vec![0i64; 6];
        let p = elements_params(8, 8, 1, &[3, 4], &[3, 2]);
        let st = unsafe { onnxc_gather_elements(&p, bytes(&data), bytes(&idx1), out.as_mut_ptr() as *mut u8) };
        assert_eq!(st, STATUS_OK);
        assert_eq!(out, [3, 0, 4, 5, 10, 10]);
        let bad: Vec<i64> = vec![4, 0, 0, 0, 0, 0];
        let st = unsafe { onnxc_gather_elements(&p, bytes(&data), bytes(&bad), out.as_mut_ptr() as *mut u8) };
        assert_eq!(st, STATUS_INDEX_OUT_OF_RANGE);
        let wide = elements_params(8, 8, 1, &[3, 4], &[4, 2]);
        assert_eq!(
            unsafe { onnxc_gather_elements(&wide, bytes(&data), bytes(&idx1), out.as_mut_ptr() as *mut u8) },
            STATUS_INVALID_PARAMS
        );
    }

    #[test]
    fn scatter_elements_reductions() {
        // ONNX example: data [1, 5], indices [[1, 1]], updates [[1.1, 2.1]], axis 1.
        let idx: Vec<i64> = vec![1, 1];
        let upd = [1.1f32, 2.1];
        let mut p = elements_params(4, 8, 1, &[1, 5], &[1, 2]);
        p.dtype = ELEM_F32;
        let base = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        for (red, want) in [
            (SCATTER_NONE, 2.1f32),
            (SCATTER_ADD, 2.0 + 1.1 + 2.1),
            (SCATTER_MUL, 2.0 * 1.1 * 2.1),
            (SCATTER_MAX, 2.1),
            (SCATTER_MIN, 1.1),
        ] {
            let mut out = base;
            p.reduction = red;
            let st = unsafe { onnxc_scatter_elements(&p, out.as_mut_ptr() as *mut u8, bytes(&idx), bytes(&upd)) };
            assert_eq!(st, STATUS_OK);
            assert!((out[1] - want).abs() < 1e-6, "{red}: {}", out[1]);
            assert_eq!([out[0], out[2], out[3], out[4]], [1.0, 3.0, 4.0, 5.0]);
        }
        p.dtype = ELEM_BOOL;
        p.reduction = SCATTER_ADD;
        let mut out = base;
        let st = unsafe { onnxc_scatter_elements(&p, out.as_mut_ptr() as *mut u8, bytes(&idx), bytes(&upd)) };
        assert_eq!(st, STATUS_INVALID_PARAMS);
    }

    #[test]
    fn gather_and_scatter_nd() {
        // data [2, 2, 2] (batch 2), indices [2, 1, 1] with batch_dims 1 → out [2, 1, 2].
        let data: Vec<i32> = (0..8).collect();
        let idx: Vec<i64> = vec![1, 0];
        let mut p =
            NdParams { dtype: ELEM_I32, elem_bytes: 4, batch: 2, tuples: 1, k: 1, slice: 2, ..Default::default() };
        p.dims[0] = 2;
        let mut out = vec![0i32; 4];
        assert_eq!(unsafe { onnxc_gather_nd(&p, bytes(&data), idx.as_ptr(), out.as_mut_ptr() as *mut u8) }, STATUS_OK);
        assert_eq!(out, [2, 3, 4, 5]);
        // Scatter with add: updates into the same slices.
        let mut buf = data.clone();
        let upd = [10i32, 20, 30, 40];
        p.reduction = SCATTER_ADD;
        assert_eq!(unsafe { onnxc_scatter_nd(&p, buf.as_mut_ptr() as *mut u8, idx.as_ptr(), bytes(&upd)) }, STATUS_OK);
        assert_eq!(buf, [0, 1, 12, 23, 34, 45, 6, 7]);
        let bad: Vec<i64> = vec![2, 0];
        assert_eq!(
            unsafe { onnxc_gather_nd(&p, bytes(&data), bad.as_ptr(), out.as_mut_ptr() as *mut u8) },
            STATUS_INDEX_OUT_OF_RANGE
        );
    }

    #[test]
    fn tensor_scatter_linear_and_circular() {
        // cache [1, 1, 4, 1], update [1, 1, 2, 1].
        let upd = [7u8, 8];
        let mut p = TensorScatterParams { elem_bytes: 1, circular: 0, batch: 1, mid: 1, max_seq: 4, seq: 2, inner: 1 };
        let mut out = [0u8; 4];
        let w = [1i64];
        assert_eq!(unsafe { onnxc_tensor_scatter(&p, out.as_mut_ptr(), upd.as_ptr(), w.as_ptr()) }, STATUS_OK);
        assert_eq!(out, [0, 7, 8, 0]);
        let w = [3i64];
        assert_eq!(
            unsafe { onnxc_tensor_scatter(&p, out.as_mut_ptr(), upd.as_ptr(), w.as_ptr()) },
            STATUS_INDEX_OUT_OF_RANGE
        );
        p.circular = 1;
        let mut out = [0u8; 4];
        assert_eq!(unsafe { onnxc_tensor_scatter(&p, out.as_mut_ptr(), upd.as_ptr(), w.as_ptr()) }, STATUS_OK);
        assert_eq!(out, [8, 0, 0, 7]);
    }

    #[test]
    fn one_hot_trilu_eye() {
        let idx = [1.0f32, -1.0, 5.0];
        let values = [0i64, 9];
        let p = OneHotParams { elem_bytes: 8, index_dtype: ELEM_F32, outer: 3, inner: 1 };
        let mut out = [7i64; 9];
        assert_eq!(
            unsafe { onnxc_one_hot(&p, 3, bytes(&idx), bytes(&values), out.as_mut_ptr() as *mut u8) },
            STATUS_OK
        );
        assert_eq!(out, [0, 9, 0, 0, 0, 9, 0, 0, 0]);

        let x: Vec<i16> = (1..=12).collect();
        let p = TriluParams { elem_bytes: 2, batch: 1, rows: 3, cols: 4, upper: 1 };
        let mut y = [0i16; 12];
        let k = [1i64];
        assert_eq!(unsafe { onnxc_trilu(&p, bytes(&x), k.as_ptr(), y.as_mut_ptr() as *mut u8) }, STATUS_OK);
        assert_eq!(y, [0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12]);
        let p = TriluParams { upper: 0, ..p };
        let k = [-1i64];
        assert_eq!(unsafe { onnxc_trilu(&p, bytes(&x), k.as_ptr(), y.as_mut_ptr() as *mut u8) }, STATUS_OK);
        assert_eq!(y, [0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0]);
        let k = [i64::MIN];
        assert_eq!(unsafe { onnxc_trilu(&p, bytes(&x), k.as_ptr(), y.as_mut_ptr() as *mut u8) }, STATUS_OK);
        assert_eq!(y, [0; 12]);

        let p = EyeParams { elem_bytes: 4, rows: 2, cols: 3, k: 1, one: 1.0f32.to_bits() as i64 };
        let mut y = [5.0f32; 6];
        assert_eq!(unsafe { onnxc_eye(&p, y.as_mut_ptr() as *mut u8) }, STATUS_OK);
        assert_eq!(y, [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn cumulative_and_reverse_sequence() {
        let x = [1i32, 2, 3, 4];
        let mut y = [0i32; 4];
        let mut p =
            CumulativeParams { dtype: ELEM_I32, elem_bytes: 4, outer: 1, len: 4, inner: 1, ..Default::default() };
        let run = |p: &CumulativeParams, y: &mut [i32; 4]| unsafe {
            onnxc_cumulative(p, bytes(&x), y.as_mut_ptr() as *mut u8)
        };
        assert_eq!(run(&p, &mut y), STATUS_OK);
        assert_eq!(y, [1, 3, 6, 10]);
        p.exclusive = 1;
        p.reverse = 1;
        assert_eq!(run(&p, &mut y), STATUS_OK);
        assert_eq!(y, [9, 7, 4, 0]);
        p.product = 1;
        p.reverse = 0;
        assert_eq!(run(&p, &mut y), STATUS_OK);
        assert_eq!(y, [1, 1, 2, 6]);

        // [time 3, batch 2], lens [2, 3].
        let x = [0u8, 1, 2, 3, 4, 5];
        let lens = [2i64, 3];
        let p = ReverseSequenceParams {
            elem_bytes: 1,
            time_len: 3,
            batch_len: 2,
            inner: 1,
            time_stride: 2,
            batch_stride: 1,
        };
        let mut y = [0u8; 6];
        assert_eq!(unsafe { onnxc_reverse_sequence(&p, x.as_ptr(), lens.as_ptr(), y.as_mut_ptr()) }, STATUS_OK);
        assert_eq!(y, [2, 5, 0, 3, 4, 1]);
        let lens = [4i64, 0];
        assert_eq!(
            unsafe { onnxc_reverse_sequence(&p, x.as_ptr(), lens.as_ptr(), y.as_mut_ptr()) },
            STATUS_INDEX_OUT_OF_RANGE
        );
    }

    #[test]
    fn topk_ties_and_order() {
        let x = [3.0f64, 1.0, 3.0, f64::NAN, 2.0];
        let mut p = TopKParams { dtype: ELEM_F64, elem_bytes: 8, outer: 1, len: 5, inner: 1, largest: 1 };
        let mut vals = [0.0f64; 3];
        let mut idx = [0i64; 3];
        let mut scratch = [0i64; 5];
        let run = |p: &TopKParams, k: i64, vals: &mut [f64; 3], idx: &mut [i64; 3], scratch: &mut [i64; 5]| unsafe {
            onnxc_topk(p, k, bytes(&x), vals.as_mut_ptr() as *mut u8, idx.as_mut_ptr(), scratch.as_mut_ptr())
        };
        assert_eq!(run(&p, 3, &mut vals, &mut idx, &mut scratch), STATUS_OK);
        assert_eq!(idx, [3, 0, 2]);
        p.largest = 0;
        assert_eq!(run(&p, 3, &mut vals, &mut idx, &mut scratch), STATUS_OK);
        assert_eq!(idx, [1, 4, 0]);
        assert_eq!(vals, [1.0, 2.0, 3.0]);
        assert_eq!(run(&p, 6, &mut vals, &mut idx, &mut scratch), STATUS_INDEX_OUT_OF_RANGE);
    }
}
