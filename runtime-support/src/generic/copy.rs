//! Data movement: N-d strided copy, gather, pad.
//!
//! These kernels are type-agnostic: they move `elem_bytes`-sized elements
//! (1, 2, 4 or 8 bytes) so one implementation serves every dtype. The
//! strided copy is the workhorse behind Transpose, Slice, Concat, Split,
//! Expand and Tile (all of which are "copy with some strides"), so it
//! canonicalises its iteration space first: size-1 dims are dropped and
//! adjacent dims that are contiguous in both source and destination merge,
//! turning most copies into a few long `memcpy`s.

use super::{advance, checked_rank, product, to_usize};
use crate::abi::copy::*;
use crate::abi::{MAX_RANK, STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS, STATUS_OK};
use crate::parallel::{share, Parallel};
use core::ptr::copy_nonoverlapping;

/// Element widths the data-movement kernels take: the numeric types and
/// 16-byte `onnxc_string` records.
fn valid_elem_bytes(b: i64) -> Option<usize> {
    matches!(b, 1 | 2 | 4 | 8 | 16).then_some(b as usize)
}

/// Copies one element of `eb` bytes.
#[inline(always)]
unsafe fn copy_elem(src: *const u8, dst: *mut u8, eb: usize) {
    match eb {
        1 => *dst = *src,
        2 => (dst as *mut u16).write_unaligned((src as *const u16).read_unaligned()),
        4 => (dst as *mut u32).write_unaligned((src as *const u32).read_unaligned()),
        8 => (dst as *mut u64).write_unaligned((src as *const u64).read_unaligned()),
        _ => (dst as *mut u128).write_unaligned((src as *const u128).read_unaligned()),
    }
}

/// Copies of at least this many elements are split over [`COPY_TASKS`]
/// tasks when there are threads: a channel shuffle's Transpose reads what a
/// convolution split over both cores just wrote, and on one thread it ran
/// 2.5 times slower than with no threads at all (ShuffleNet's 28² ones).
const PARALLEL_ELEMENTS: usize = 1 << 14;
const COPY_TASKS: usize = 8;

/// Does the work of the C entry point [`crate::abi::onnxc_copy_strided`].
pub(crate) unsafe fn copy_strided(
    p: *const CopyParams,
    src: *const u8,
    dst: *mut u8,
    parallel: *const Parallel,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let (Some(eb), Some(rank)) = (valid_elem_bytes(p.elem_bytes), checked_rank(p.rank, MAX_RANK, &p.dims)) else {
        return STATUS_INVALID_PARAMS;
    };
    if p.dims[..rank].contains(&0) {
        return STATUS_OK;
    }

    // Canonicalise: drop size-1 dims, merge (outer, inner) pairs where the
    // outer stride is exactly inner stride * inner dim on both sides.
    let mut dims = [0usize; MAX_RANK];
    let mut ss = [0isize; MAX_RANK];
    let mut ds = [0isize; MAX_RANK];
    let mut r = 0usize;
    for d in 0..rank {
        let (n, s, t) = (p.dims[d] as usize, p.src_strides[d] as isize, p.dst_strides[d] as isize);
        if n == 1 {
            continue;
        }
        if r > 0 && ss[r - 1] == s * n as isize && ds[r - 1] == t * n as isize {
            dims[r - 1] *= n;
            ss[r - 1] = s;
            ds[r - 1] = t;
        } else {
            dims[r] = n;
            ss[r] = s;
            ds[r] = t;
            r += 1;
        }
    }
    if r == 0 {
        copy_elem(src, dst, eb);
        return STATUS_OK;
    }
    // Tasks take ranges of the outermost dimension: disjoint destinations
    // unless its destination stride is 0.
    let threaded = Parallel::is_threaded(parallel) && r > 1 && ds[0] != 0;
    let tasks =
        if threaded && dims[..r].iter().product::<usize>() >= PARALLEL_ELEMENTS { COPY_TASKS.min(dims[0]) } else { 1 };
    Parallel::for_each(parallel, tasks, |task| {
        let rows = share(dims[0], tasks, task);
        let mut part = dims;
        part[0] = rows.len();
        let ebi = eb as isize;
        let (s, d) = (src.offset(rows.start as isize * ss[0] * ebi), dst.offset(rows.start as isize * ds[0] * ebi));
        copy_canonical(s, d, eb, &part[..r], &ss[..r], &ds[..r]);
    });
    STATUS_OK
}

/// The copy of a canonical iteration space (`dims`, element strides `ss`
/// and `ds`, at least one dimension, none empty): the innermost dimension
/// by `memcpy` where it is contiguous on both sides.
unsafe fn copy_canonical(src: *const u8, dst: *mut u8, eb: usize, dims: &[usize], ss: &[isize], ds: &[isize]) {
    let r = dims.len();
    if let Some(plane) = TransposedPlane::of(dims, ss, ds) {
        return for_each_outer(src, dst, eb, r - 2, dims, [ss, ds], |s, d| plane.copy(s, d, eb));
    }
    let inner = dims[r - 1];
    let contiguous = ss[r - 1] == 1 && ds[r - 1] == 1;
    let (si, di) = (ss[r - 1] * eb as isize, ds[r - 1] * eb as isize);
    for_each_outer(src, dst, eb, r - 1, dims, [ss, ds], |s, d| {
        if contiguous {
            copy_nonoverlapping(s, d, inner * eb);
        } else {
            for i in 0..inner as isize {
                copy_elem(s.offset(i * si), d.offset(i * di), eb);
            }
        }
    });
}

/// Calls `part(source, destination)` at every index of the first `outer`
/// dims of a canonical copy, in order.
unsafe fn for_each_outer(
    src: *const u8,
    dst: *mut u8,
    eb: usize,
    outer: usize,
    dims: &[usize],
    [ss, ds]: [&[isize]; 2],
    mut part: impl FnMut(*const u8, *mut u8),
) {
    let ebi = eb as isize;
    let mut idx = [0usize; MAX_RANK];
    let mut offs = [0isize; 2];
    loop {
        part(src.offset(offs[0] * ebi), dst.offset(offs[1] * ebi));
        if !advance(&mut idx[..outer], &dims[..outer], [&ss[..outer], &ds[..outer]], &mut offs) {
            return;
        }
    }
}

/// The two innermost dims of a canonical copy when they transpose a plane:
/// the source is contiguous along the first (`a`), the destination along
/// the second (`b`), as in NCHW <-> NHWC. Element by element, every read
/// (or every write) would be a cache line of its own; in blocks of
/// [`BLOCK`] x [`BLOCK`] (8x8 transposes in registers for 4-byte elements
/// where the CPU has them), swept over [`BAND`] `a`s at a time, both sides
/// stream whole lines and a band's destination rows stay in L1.
struct TransposedPlane {
    a: usize,
    b: usize,
    /// Source stride of `b`, destination stride of `a` (elements).
    src_b: usize,
    dst_a: usize,
}

const BLOCK: usize = 8;
const BAND: usize = 64;

impl TransposedPlane {
    fn of(dims: &[usize], ss: &[isize], ds: &[isize]) -> Option<TransposedPlane> {
        let r = dims.len();
        if r < 2 || ss[r - 2] != 1 || ds[r - 1] != 1 || dims[r - 2] < BLOCK || dims[r - 1] < BLOCK {
            return None;
        }
        let (src_b, dst_a) = (usize::try_from(ss[r - 1]).ok()?, usize::try_from(ds[r - 2]).ok()?);
        Some(TransposedPlane { a: dims[r - 2], b: dims[r - 1], src_b, dst_a })
    }

    /// Copies the plane at `src` to `dst`.
    unsafe fn copy(&self, src: *const u8, dst: *mut u8, eb: usize) {
        let simd = if eb == 4 { crate::isa::choose::transpose8x8() } else { None };
        for band in (0..self.a).step_by(BAND) {
            let band_end = self.a.min(band + BAND);
            for b0 in (0..self.b).step_by(BLOCK) {
                let rows = BLOCK.min(self.b - b0);
                for a0 in (band..band_end).step_by(BLOCK) {
                    let cols = BLOCK.min(band_end - a0);
                    let (from, to) = (src.add((a0 + b0 * self.src_b) * eb), dst.add((a0 * self.dst_a + b0) * eb));
                    match simd {
                        Some(transpose) if rows == BLOCK && cols == BLOCK => {
                            transpose(from as *const f32, self.src_b, to as *mut f32, self.dst_a)
                        }
                        _ => self.copy_block(from, to, eb, rows, cols),
                    }
                }
            }
        }
    }

    /// One block element by element: `rows` values of `b`, `cols` of `a`.
    unsafe fn copy_block(&self, src: *const u8, dst: *mut u8, eb: usize, rows: usize, cols: usize) {
        for i in 0..rows {
            for j in 0..cols {
                copy_elem(src.add((j + i * self.src_b) * eb), dst.add((j * self.dst_a + i) * eb), eb);
            }
        }
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_gather`].
pub(crate) unsafe fn gather(p: *const GatherParams, data: *const u8, indices: *const u8, out: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(eb) = valid_elem_bytes(p.elem_bytes) else {
        return STATUS_INVALID_PARAMS;
    };
    if p.outer < 0 || p.axis_len < 0 || p.inner < 0 || p.n_indices < 0 {
        return STATUS_INVALID_PARAMS;
    }
    if p.index_bytes != 4 && p.index_bytes != 8 {
        return STATUS_INVALID_PARAMS;
    }
    let n_idx = p.n_indices as usize;
    let index_at = |i: usize| -> i64 {
        if p.index_bytes == 4 {
            (indices as *const i32).add(i).read_unaligned() as i64
        } else {
            (indices as *const i64).add(i).read_unaligned()
        }
    };
    let normalise = |v: i64| -> Option<usize> {
        let v = if v < 0 { v + p.axis_len } else { v };
        (0..p.axis_len).contains(&v).then_some(v as usize)
    };
    for i in 0..n_idx {
        if normalise(index_at(i)).is_none() {
            return STATUS_INDEX_OUT_OF_RANGE;
        }
    }
    let (outer, axis_len, inner) = (p.outer as usize, p.axis_len as usize, p.inner as usize);
    let row = inner * eb;
    if row == 0 {
        return STATUS_OK;
    }
    let mut o_ptr = out;
    for o in 0..outer {
        let base = data.add(o * axis_len * row);
        for i in 0..n_idx {
            let Some(ix) = normalise(index_at(i)) else {
                return STATUS_INDEX_OUT_OF_RANGE;
            };
            copy_nonoverlapping(base.add(ix * row), o_ptr, row);
            o_ptr = o_ptr.add(row);
        }
    }
    STATUS_OK
}

/// Where output coordinate `o` of one padded dim reads from, as an index into
/// the uncropped input, or `None` for the constant value. (Public for the
/// compiler's portable Pad, which tabulates it at compile time.)
#[inline]
pub fn pad_source(o: i64, pad_begin: i64, in_len: i64, pad_end: i64, mode: i64) -> Option<i64> {
    // The cropped input is `in[lo..hi]`, padded by the positive parts.
    let lo = (-pad_begin).max(0);
    let hi = in_len - (-pad_end).max(0);
    let n = hi - lo;
    let j = o - pad_begin.max(0);
    if (0..n).contains(&j) {
        return Some(lo + j);
    }
    if n <= 0 {
        return None;
    }
    let k = match mode {
        PAD_EDGE => j.clamp(0, n - 1),
        PAD_WRAP => j.rem_euclid(n),
        PAD_REFLECT => {
            if n == 1 {
                0
            } else {
                // Triangle wave: 0,1,..,n-1,n-2,..,1,0,1,...
                let period = 2 * (n - 1);
                let t = j.rem_euclid(period);
                if t < n {
                    t
                } else {
                    period - t
                }
            }
        }
        _ => return None,
    };
    Some(lo + k)
}

/// The padded columns of a row with their source columns (`None`: the
/// constant), the same for every row: worked out once when there are at
/// most [`EDGE_COLUMNS`], since [`pad_source`]'s division per element cost
/// more than the copies (reflect-padding 64 planes of 128² by 3 spent half
/// its time there).
struct EdgeColumns {
    columns: [(i64, Option<i64>); EDGE_COLUMNS],
    count: usize,
}

const EDGE_COLUMNS: usize = 64;

impl EdgeColumns {
    fn of(columns: impl Iterator<Item = i64> + Clone, source: impl Fn(i64) -> Option<i64>) -> Option<EdgeColumns> {
        let count = columns.clone().count();
        if count > EDGE_COLUMNS {
            return None;
        }
        let mut edges = EdgeColumns { columns: [(0, None); EDGE_COLUMNS], count };
        for (slot, c) in edges.columns.iter_mut().zip(columns) {
            *slot = (c, source(c));
        }
        Some(edges)
    }

    fn iter(&self) -> core::slice::Iter<'_, (i64, Option<i64>)> {
        self.columns[..self.count].iter()
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_pad`].
pub(crate) unsafe fn pad(p: *const PadParams, x: *const u8, value: *const u8, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let (Some(eb), Some(rank)) = (valid_elem_bytes(p.elem_bytes), checked_rank(p.rank, MAX_RANK, &p.in_dims)) else {
        return STATUS_INVALID_PARAMS;
    };
    if !(PAD_CONSTANT..=PAD_WRAP).contains(&p.mode) || p.out_dims[..rank].iter().any(|&d| d < 0) {
        return STATUS_INVALID_PARAMS;
    }
    let zero = [0u8; 8];
    let value = if value.is_null() { zero.as_ptr() } else { value };
    if rank == 0 {
        copy_elem(x, y, eb);
        return STATUS_OK;
    }
    let Some(total) = product(&p.out_dims[..rank]) else {
        return STATUS_INVALID_PARAMS;
    };
    if total == 0 {
        return STATUS_OK;
    }
    let pads_end: [i64; MAX_RANK] = core::array::from_fn(|d| p.out_dims[d] - p.in_dims[d] - p.pads_begin[d]);
    // Non-constant modes need something left after cropping to replicate.
    let empty_after_crop = (0..rank).any(|d| p.in_dims[d] - (-p.pads_begin[d]).max(0) - (-pads_end[d]).max(0) <= 0);
    if p.mode != PAD_CONSTANT && empty_after_crop {
        return STATUS_INVALID_PARAMS;
    }
    let in_dims = to_usize(&p.in_dims);
    let out_dims = to_usize(&p.out_dims);
    // Input element strides (row-major).
    let mut in_strides = [0isize; MAX_RANK];
    let mut s = 1isize;
    for d in (0..rank).rev() {
        in_strides[d] = s;
        s *= in_dims[d] as isize;
    }
    let last = rank - 1;
    let out_row = out_dims[last];
    let (pb, il, pe) = (p.pads_begin[last], p.in_dims[last], pads_end[last]);
    // Output columns [c0, c1) map one-to-one onto a contiguous input run.
    let c0 = pb.max(0);
    let c1 = (c0 + il - (-pb).max(0) - (-pe).max(0)).clamp(c0, out_row as i64);
    let edges = EdgeColumns::of((0..c0).chain(c1..out_row as i64), |c| pad_source(c, pb, il, pe, p.mode));
    let mut idx = [0usize; MAX_RANK];
    let mut y_row = y;
    loop {
        // Source offset of this row, or None if any outer coordinate is constant padding.
        let mut src_off = Some(0isize);
        for d in 0..last {
            let pe_d = pads_end[d];
            match pad_source(idx[d] as i64, p.pads_begin[d], p.in_dims[d], pe_d, p.mode) {
                Some(i) => src_off = src_off.map(|o| o + i as isize * in_strides[d]),
                None => src_off = None,
            }
        }
        match src_off {
            None => {
                for c in 0..out_row {
                    copy_elem(value, y_row.add(c * eb), eb);
                }
            }
            Some(off) => {
                let x_row = x.offset(off * eb as isize);
                let copy_column = |c: i64, source: Option<i64>| {
                    let from = source.map_or(value, |i| x_row.add(i as usize * eb));
                    copy_elem(from, y_row.add(c as usize * eb), eb);
                };
                match &edges {
                    Some(edges) => edges.iter().for_each(|&(c, source)| copy_column(c, source)),
                    None => (0..c0)
                        .chain(c1..out_row as i64)
                        .for_each(|c| copy_column(c, pad_source(c, pb, il, pe, p.mode))),
                }
                if c1 > c0 {
                    let first = (c0 - pb) as usize;
                    copy_nonoverlapping(x_row.add(first * eb), y_row.add(c0 as usize * eb), (c1 - c0) as usize * eb);
                }
            }
        }
        y_row = y_row.add(out_row * eb);
        if !advance::<0>(&mut idx[..last], &out_dims[..last], [], &mut []) {
            break;
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{reversed, unravel};
    use core::ptr::null;
    use std::vec;
    use std::vec::Vec;

    fn copy_params(eb: i64, dims: &[i64], src: &[i64], dst: &[i64]) -> CopyParams {
        let mut p = CopyParams { elem_bytes: eb, rank: dims.len() as i64, ..Default::default() };
        p.dims[..dims.len()].copy_from_slice(dims);
        p.src_strides[..dims.len()].copy_from_slice(src);
        p.dst_strides[..dims.len()].copy_from_slice(dst);
        p
    }

    /// Element-by-element strided copy of u64 "elements", then checked
    /// against the kernel run on the same data at every element size.
    fn check_copy(dims: &[i64], src: &[i64], dst: &[i64], src_origin: usize, src_len: usize, dst_len: usize) {
        let n: usize = dims.iter().product::<i64>() as usize;
        let ud: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        for eb in [1usize, 2, 4, 8] {
            let src_buf: Vec<u8> = (0..src_len * eb).map(|i| (i * 7 + 3) as u8).collect();
            let mut want = vec![0xAAu8; dst_len * eb];
            for f in 0..n {
                let c = unravel(f, &ud);
                let so = src_origin as i64 + (0..dims.len()).map(|d| c[d] as i64 * src[d]).sum::<i64>();
                let dof = (0..dims.len()).map(|d| c[d] as i64 * dst[d]).sum::<i64>();
                let (so, dof) = (so as usize * eb, dof as usize * eb);
                want[dof..dof + eb].copy_from_slice(&src_buf[so..so + eb]);
            }
            let p = copy_params(eb as i64, dims, src, dst);
            let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
            for parallel in [null(), &threaded as *const Parallel] {
                let mut got = vec![0xAAu8; dst_len * eb];
                let from = unsafe { src_buf.as_ptr().add(src_origin * eb) };
                let st = unsafe { onnxc_copy_strided(&p, from, got.as_mut_ptr(), parallel) };
                assert_eq!(st, STATUS_OK);
                assert_eq!(got, want, "dims {dims:?} eb {eb}");
            }
        }
    }

    #[test]
    fn strided_copies() {
        check_copy(&[], &[], &[], 0, 1, 1); // rank 0
        check_copy(&[2, 3, 4], &[12, 4, 1], &[12, 4, 1], 0, 24, 24); // plain
        check_copy(&[3, 5], &[1, 3], &[5, 1], 0, 15, 15); // transpose
        check_copy(&[4, 3, 5], &[1, 20, 4], &[15, 5, 1], 0, 60, 60); // 3-d permute
        check_copy(&[2, 2, 3], &[35, 7, 1], &[6, 3, 1], 9, 70, 12); // slice
        check_copy(&[3, 4], &[0, 1], &[4, 1], 0, 4, 12); // expand rows
        check_copy(&[3, 4], &[1, 0], &[4, 1], 0, 3, 12); // expand cols
        check_copy(&[5], &[-1], &[1], 4, 5, 5); // reverse
        check_copy(&[2, 1, 3], &[3, 9, 1], &[6, 3, 1], 0, 6, 12); // concat half, size-1 dim
        check_copy(&[0, 3], &[3, 1], &[3, 1], 0, 0, 0); // empty
        check_copy(&[3, 1, 1, 7], &[7, 0, 0, 1], &[7, 7, 7, 1], 0, 21, 21);
        // Large enough to be split over tasks: a channel shuffle (34 × 4
        // planes of 28² to 4 × 34), a broadcast of rows, a reversed plane.
        check_copy(&[34, 4, 784], &[784, 34 * 784, 1], &[4 * 784, 784, 1], 0, 106_624, 106_624);
        check_copy(&[129, 200], &[0, 1], &[200, 1], 0, 200, 25_800);
        check_copy(&[150, 120], &[-120, 1], &[120, 1], 149 * 120, 18_000, 18_000);
        // Transposed planes in blocks: NCHW -> NHWC of 3 x 37 x 70 (edges in
        // both dims), and a batch of planes whose inner dims are 8 and 9.
        check_copy(&[2590, 3], &[1, 2590], &[3, 1], 0, 7770, 7770);
        check_copy(&[70 * 37, 19], &[1, 70 * 37], &[19, 1], 0, 70 * 37 * 19, 70 * 37 * 19);
        check_copy(&[5, 8, 9], &[72, 1, 8], &[72, 9, 1], 0, 360, 360);
    }

    #[test]
    fn copy_rejects_bad_params() {
        let z = core::ptr::null_mut();
        let p = copy_params(3, &[1], &[1], &[1]);
        assert_eq!(unsafe { onnxc_copy_strided(&p, z, z, null()) }, STATUS_INVALID_PARAMS);
        let p = copy_params(4, &[-1], &[1], &[1]);
        assert_eq!(unsafe { onnxc_copy_strided(&p, z, z, null()) }, STATUS_INVALID_PARAMS);
        let mut p = copy_params(4, &[1], &[1], &[1]);
        p.rank = 9;
        assert_eq!(unsafe { onnxc_copy_strided(&p, z, z, null()) }, STATUS_INVALID_PARAMS);
    }

    #[test]
    fn gather_both_index_widths() {
        let (outer, axis, inner) = (3usize, 5usize, 2usize);
        let data: Vec<u16> = (0..(outer * axis * inner) as u16).collect();
        let idx64: Vec<i64> = vec![4, 0, -1, 2, -5, 4];
        let idx32: Vec<i32> = idx64.iter().map(|&v| v as i32).collect();
        let mut want = Vec::new();
        for o in 0..outer {
            for &i in &idx64 {
                let i = if i < 0 { i + axis as i64 } else { i } as usize;
                for r in 0..inner {
                    want.push(data[(o * axis + i) * inner + r]);
                }
            }
        }
        let p = GatherParams {
            elem_bytes: 2,
            outer: outer as i64,
            axis_len: axis as i64,
            inner: inner as i64,
            n_indices: 6,
            index_bytes: 8,
        };
        let mut got = vec![0u16; want.len()];
        let run = |p: &GatherParams, idx: *const u8, got: &mut Vec<u16>| unsafe {
            onnxc_gather(p, data.as_ptr() as *const u8, idx, got.as_mut_ptr() as *mut u8)
        };
        assert_eq!(run(&p, idx64.as_ptr() as *const u8, &mut got), STATUS_OK);
        assert_eq!(got, want);
        got.fill(0);
        let p32 = GatherParams { index_bytes: 4, ..p };
        assert_eq!(run(&p32, idx32.as_ptr() as *const u8, &mut got), STATUS_OK);
        assert_eq!(got, want);

        // Out of range: status, and the output is left untouched.
        for bad in [5i64, -6] {
            let idx = [0i64, bad];
            let pb = GatherParams { n_indices: 2, ..p };
            let mut out = vec![0xBEEFu16; outer * 2 * inner];
            assert_eq!(run(&pb, idx.as_ptr() as *const u8, &mut out), STATUS_INDEX_OUT_OF_RANGE);
            assert!(out.iter().all(|&v| v == 0xBEEF));
        }
        let pbad = GatherParams { index_bytes: 2, ..p };
        assert_eq!(run(&pbad, idx64.as_ptr() as *const u8, &mut got), STATUS_INVALID_PARAMS);
    }

    fn pad_params(mode: i64, in_dims: &[i64], begin: &[i64], end: &[i64]) -> PadParams {
        let mut p = PadParams { elem_bytes: 8, mode, rank: in_dims.len() as i64, ..Default::default() };
        for d in 0..in_dims.len() {
            p.in_dims[d] = in_dims[d];
            p.pads_begin[d] = begin[d];
            p.out_dims[d] = in_dims[d] + begin[d] + end[d];
        }
        p
    }

    fn run_pad(p: &PadParams, x: &[i64], value: Option<i64>) -> Vec<i64> {
        let r = p.rank as usize;
        let n: i64 = p.out_dims[..r].iter().product();
        let mut y = vec![i64::MIN; n as usize];
        let vp = value.as_ref().map_or(core::ptr::null(), |v| v as *const i64 as *const u8);
        let st = unsafe { onnxc_pad(p, x.as_ptr() as *const u8, vp, y.as_mut_ptr() as *mut u8) };
        assert_eq!(st, STATUS_OK);
        y
    }

    /// Expected values produced by the ONNX reference implementation (numpy.pad).
    #[test]
    fn pad_matches_onnx_reference() {
        let x = [1i64, 2, 3];
        let cases: [(i64, [i64; 15]); 3] = [
            (PAD_REFLECT, [2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2]),
            (PAD_EDGE, [1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3, 3]),
            (PAD_WRAP, [3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2]),
        ];
        for (mode, want) in cases {
            assert_eq!(run_pad(&pad_params(mode, &[3], &[7], &[5]), &x, None), want);
        }
        let x2: Vec<i64> = (0..6).collect();
        let p = |m| pad_params(m, &[2, 3], &[3, 1], &[2, 4]);
        assert_eq!(
            run_pad(&p(PAD_REFLECT), &x2, None),
            [
                4, 3, 4, 5, 4, 3, 4, 5, 1, 0, 1, 2, 1, 0, 1, 2, 4, 3, 4, 5, 4, 3, 4, 5, 1, 0, 1, 2, 1, 0, 1, 2, 4, 3,
                4, 5, 4, 3, 4, 5, 1, 0, 1, 2, 1, 0, 1, 2, 4, 3, 4, 5, 4, 3, 4, 5
            ]
        );
        assert_eq!(
            run_pad(&p(PAD_EDGE), &x2, None),
            [
                0, 0, 1, 2, 2, 2, 2, 2, 0, 0, 1, 2, 2, 2, 2, 2, 0, 0, 1, 2, 2, 2, 2, 2, 0, 0, 1, 2, 2, 2, 2, 2, 3, 3,
                4, 5, 5, 5, 5, 5, 3, 3, 4, 5, 5, 5, 5, 5, 3, 3, 4, 5, 5, 5, 5, 5
            ]
        );
        assert_eq!(
            run_pad(&p(PAD_WRAP), &x2, None),
            [
                5, 3, 4, 5, 3, 4, 5, 3, 2, 0, 1, 2, 0, 1, 2, 0, 5, 3, 4, 5, 3, 4, 5, 3, 2, 0, 1, 2, 0, 1, 2, 0, 5, 3,
                4, 5, 3, 4, 5, 3, 2, 0, 1, 2, 0, 1, 2, 0, 5, 3, 4, 5, 3, 4, 5, 3
            ]
        );
        let mut want = vec![0i64; 56];
        want[3 * 8 + 1..3 * 8 + 4].copy_from_slice(&[0, 1, 2]);
        want[4 * 8 + 1..4 * 8 + 4].copy_from_slice(&[3, 4, 5]);
        assert_eq!(run_pad(&p(PAD_CONSTANT), &x2, None), want);
        for v in want.iter_mut() {
            if *v == 0 {
                *v = -9;
            }
        }
        want[3 * 8 + 1] = 0;
        assert_eq!(run_pad(&p(PAD_CONSTANT), &x2, Some(-9)), want);
        assert_eq!(run_pad(&pad_params(PAD_REFLECT, &[1], &[3], &[2]), &[5], None), [5; 6]);
        // More padded columns than are worked out once: 70 on each side of
        // a row of 4, by the triangle wave of reflect.
        let x4 = [10i64, 11, 12, 13];
        let wave = |j: i64| x4[[0usize, 1, 2, 3, 2, 1][(j - 70).rem_euclid(6) as usize]];
        let want: Vec<i64> = (0..144).map(wave).collect();
        assert_eq!(run_pad(&pad_params(PAD_REFLECT, &[4], &[70], &[70]), &x4, None), want);
    }

    #[test]
    fn pad_crops_with_negative_pads() {
        // [3, 4] input; crop one row at the top, one column at the right,
        // then edge-pad two columns at the left and one row at the bottom.
        let x: Vec<i64> = (0..12).collect();
        let p = pad_params(PAD_EDGE, &[3, 4], &[-1, 2], &[1, -1]);
        let want = [4, 4, 4, 5, 6, 8, 8, 8, 9, 10, 8, 8, 8, 9, 10];
        assert_eq!(run_pad(&p, &x, None), want);
        let p = pad_params(PAD_CONSTANT, &[3, 4], &[-1, 0], &[-1, -2]);
        assert_eq!(run_pad(&p, &x, None), [4, 5]);
        let p = pad_params(PAD_WRAP, &[3, 4], &[0, -2], &[0, 1]);
        assert_eq!(run_pad(&p, &x, None), [2, 3, 2, 6, 7, 6, 10, 11, 10]);
        // Rank 0 and bad params.
        assert_eq!(run_pad(&pad_params(PAD_CONSTANT, &[], &[], &[]), &[42], None), [42]);
        let z = core::ptr::null_mut();
        let bad = pad_params(PAD_REFLECT, &[2], &[-2], &[1]);
        assert_eq!(unsafe { onnxc_pad(&bad, z, z, z) }, STATUS_INVALID_PARAMS);
        let bad = PadParams { mode: 4, ..pad_params(PAD_EDGE, &[2], &[1], &[1]) };
        assert_eq!(unsafe { onnxc_pad(&bad, z, z, z) }, STATUS_INVALID_PARAMS);
    }
}
