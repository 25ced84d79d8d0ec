//! Resize plane by plane: the paths for inputs whose axes before the last
//! two each have one tap (N and C kept, or nearest), which is every image
//! resize. The outer taps (weight 1) pick one input plane per output plane.
//!
//! Nearest ([`nearest_rows`], every axis one tap): each output row gathers
//! one input row through a column index table built once. An output row
//! that reads the same input row as the one before (upsampling) is a copy
//! of it, and a column table `j / k` (an integer factor `k`, e.g. x2 under
//! `asymmetric`/floor or `half_pixel`/round_prefer_floor) is a run of
//! duplicate stores instead of a gather.
//!
//! Linear and cubic ([`separable`]): a horizontal pass resamples each input
//! row that an output row needs into a row cache, then a vertical pass
//! blends the cached rows, elementwise along the row (the widest vectors
//! the CPU has, [`with_widest_vectors`]). The cache has one slot per row
//! tap and input row `r` lives in slot `r % row_taps`: an output row's taps
//! are a window of consecutive rows clamped into the input, so their
//! distinct rows fall in distinct slots, and upsampling computes each input
//! row's horizontal pass once. Both passes run in the element type (f32 for
//! f32 data, as ONNX Runtime does), the horizontal one from the first tap
//! on, the vertical one likewise, so the vector width does not change the
//! bits. Columns or rows outside a `tf_crop_and_resize` region take the
//! extrapolation value afterwards.
//!
//! The column table and the cache live in the scratch after the tap tables
//! ([`plane_scratch_bytes`]).

use super::{Tap, TapTables};
use crate::generic::real::Real;
use crate::isa::with_widest_vectors;

/// An element of the scratch the plane paths carve: every table entry and
/// cached value takes 8 bytes, whatever the element type.
const SLOT_BYTES: usize = 8;

/// The row and column taps of a resize that runs plane by plane (rank at
/// least 2, one tap on every axis before the last two; or rank 1 with one
/// tap), else `None`.
pub(super) fn plane_taps(counts: &[usize]) -> Option<(usize, usize)> {
    match *counts {
        [1] => Some((1, 1)),
        [ref outer @ .., rows, cols] if outer.iter().all(|&c| c == 1) => Some((rows, cols)),
        _ => None,
    }
}

/// Bytes of scratch the plane paths need after the tap tables for an output
/// row of `out_w` and these taps: a column table (an index and a weight per
/// column tap), the row cache and its tags.
pub(super) fn plane_scratch_bytes(out_w: usize, (rows, cols): (usize, usize)) -> usize {
    let table = out_w.saturating_mul(cols).saturating_mul(2);
    let cache = rows.saturating_mul(out_w.saturating_add(1));
    table.saturating_add(cache).saturating_mul(SLOT_BYTES)
}

/// The shape of one resize, plane by plane.
pub(super) struct Planes<'a> {
    pub tables: &'a TapTables,
    /// Input strides of every axis (the last is 1).
    pub strides: &'a [usize],
    pub out_dims: &'a [usize],
    /// The input's last dim.
    pub in_w: usize,
    pub extrapolation: f64,
    /// The scratch after the tap tables, [`plane_scratch_bytes`] long.
    pub scratch: *mut u8,
}

impl Planes<'_> {
    fn rank(&self) -> usize {
        self.out_dims.len()
    }

    fn out_w(&self) -> usize {
        self.out_dims[self.rank() - 1]
    }

    /// The column table: per output column, `cols` input indices and their
    /// weights (0 for a column outside the crop), and whether any column is.
    unsafe fn columns<T: Real>(&self, cols: usize) -> (&[usize], &[T], bool) {
        let (out_w, last) = (self.out_w(), self.rank() - 1);
        let index = core::slice::from_raw_parts_mut(self.scratch.cast::<usize>(), out_w * cols);
        let weight =
            core::slice::from_raw_parts_mut(self.scratch.add(out_w * cols * SLOT_BYTES).cast::<T>(), out_w * cols);
        let mut outside = false;
        for j in 0..out_w {
            let taps = self.tables.row(last, j);
            let column_outside = taps[0].index < 0;
            outside |= column_outside;
            for (k, t) in taps.iter().enumerate() {
                index[j * cols + k] = t.index.max(0) as usize;
                weight[j * cols + k] = T::from_f64(if column_outside { 0.0 } else { t.weight });
            }
        }
        (index, weight, outside)
    }

    /// Runs `plane(input offset, output plane)` for every output plane whose
    /// outer taps are inside the crop, and fills the others.
    unsafe fn each_plane<T: Real>(&self, y: *mut T, mut plane: impl FnMut(usize, *mut T)) {
        let rank = self.rank();
        let outer_rank = rank.saturating_sub(2);
        let plane_len = self.out_dims[outer_rank..].iter().product::<usize>();
        let mut idx = [0usize; crate::abi::MAX_RANK];
        let mut out = y;
        loop {
            let taps = self.tables.outer(&idx[..outer_rank], self.strides);
            if taps.outside {
                core::slice::from_raw_parts_mut(out, plane_len).fill(T::from_f64(self.extrapolation));
            } else {
                plane(taps.base, out);
            }
            out = out.add(plane_len);
            if !crate::generic::advance(&mut idx[..outer_rank], &self.out_dims[..outer_rank], [], &mut []) {
                return;
            }
        }
    }

    /// The output rows of one plane: `rows` of them (1 at rank 1).
    fn plane_rows(&self) -> usize {
        if self.rank() >= 2 {
            self.out_dims[self.rank() - 2]
        } else {
            1
        }
    }

    /// The one row tap of output row `o` (rank 1: row 0).
    unsafe fn row_tap(&self, o: usize) -> Tap {
        if self.rank() >= 2 {
            self.tables.row(self.rank() - 2, o)[0]
        } else {
            Tap { index: 0, weight: 1.0 }
        }
    }

    /// Input row stride (rank 1: the one row's length).
    fn in_row_stride(&self) -> usize {
        if self.rank() >= 2 {
            self.strides[self.rank() - 2]
        } else {
            0
        }
    }
}

/// `j / factor` for every column, with `out_w = factor * in_w`: the table of
/// an integer upsampling factor (1: a copy).
fn duplication_factor(index: &[usize], in_w: usize) -> Option<usize> {
    let factor = index.len() / in_w.max(1);
    (factor >= 1 && factor * in_w == index.len() && index.iter().enumerate().all(|(j, &i)| i == j / factor))
        .then_some(factor)
}

/// `out[j] = src[j / factor]`.
#[inline(always)]
unsafe fn duplicate<T: Copy>(src: *const T, out: &mut [T], factor: usize) {
    let src = core::slice::from_raw_parts(src, out.len() / factor);
    for (chunk, &v) in out.chunks_exact_mut(factor).zip(src) {
        chunk.fill(v);
    }
}

/// Resize where every axis has one tap: each output is a copy of one input
/// element (its bits), rows as the module doc says.
pub(super) unsafe fn nearest_rows<T: Real>(s: &Planes, x: *const T, y: *mut T) {
    let (index, _, columns_outside) = s.columns::<T>(1);
    let out_w = s.out_w();
    let factor = if columns_outside { None } else { duplication_factor(index, s.in_w) };
    let last = s.rank() - 1;
    let extrapolation = T::from_f64(s.extrapolation);
    s.each_plane(y, |base, plane| {
        let mut previous: Option<i64> = None;
        for o in 0..s.plane_rows() {
            let row = core::slice::from_raw_parts_mut(plane.add(o * out_w), out_w);
            let tap = s.row_tap(o);
            if tap.index < 0 {
                row.fill(extrapolation);
                previous = None;
                continue;
            }
            if previous == Some(tap.index) {
                core::ptr::copy_nonoverlapping(plane.add((o - 1) * out_w), row.as_mut_ptr(), out_w);
                continue;
            }
            previous = Some(tap.index);
            let src = x.add(base + tap.index as usize * s.in_row_stride());
            match factor {
                Some(1) => core::ptr::copy_nonoverlapping(src, row.as_mut_ptr(), out_w),
                Some(2) => with_widest_vectors(|| duplicate(src, row, 2)),
                Some(f) => duplicate(src, row, f),
                None => {
                    for (j, (v, &i)) in row.iter_mut().zip(index).enumerate() {
                        *v = if columns_outside && s.tables.row(last, j)[0].index < 0 {
                            extrapolation
                        } else {
                            *src.add(i)
                        };
                    }
                }
            }
        }
    });
}

/// One output element of the horizontal pass: the column's taps over `src`.
#[inline(always)]
unsafe fn column_sum<T: Real>(src: *const T, index: &[usize], weight: &[T]) -> T {
    let mut acc = weight[0] * *src.add(index[0]);
    for k in 1..index.len() {
        acc = acc + weight[k] * *src.add(index[k]);
    }
    acc
}

/// The horizontal pass of input row `src` into `dst`, `cols` taps per column
/// (called with a constant `cols` for the usual counts).
#[inline(always)]
unsafe fn horizontal<T: Real>(src: *const T, index: &[usize], weight: &[T], cols: usize, dst: &mut [T]) {
    for ((d, i), w) in dst.iter_mut().zip(index.chunks_exact(cols)).zip(weight.chunks_exact(cols)) {
        *d = column_sum(src, i, w);
    }
}

/// `out[j] = sum_k w_k * cached row_k[j]` over the row taps, in order;
/// input row `r` is cached in slot `r % slots`.
#[inline(always)]
unsafe fn vertical<T: Real>(taps: &[Tap], cache: *const T, slots: usize, out: &mut [T]) {
    let len = out.len();
    let row = |t: &Tap| core::slice::from_raw_parts(cache.add(t.index as usize % slots * len), len);
    let weight = |t: &Tap| T::from_f64(t.weight);
    if let [t0, t1] = taps {
        let (w0, w1) = (weight(t0), weight(t1));
        for ((o, &a), &b) in out.iter_mut().zip(row(t0)).zip(row(t1)) {
            *o = w0 * a + w1 * b;
        }
        return;
    }
    let w0 = weight(&taps[0]);
    for (o, &a) in out.iter_mut().zip(row(&taps[0])) {
        *o = w0 * a;
    }
    for t in &taps[1..] {
        let w = weight(t);
        for (o, &a) in out.iter_mut().zip(row(t)) {
            *o = *o + w * a;
        }
    }
}

/// Resize with several taps on the last two axes (and one before them), as
/// the module doc says.
pub(super) unsafe fn separable<T: Real>(s: &Planes, x: *const T, y: *mut T, (row_taps, cols): (usize, usize)) {
    let (index, weight, columns_outside) = s.columns::<T>(cols);
    let (out_w, rank) = (s.out_w(), s.rank());
    let cache = s.scratch.add(2 * out_w * cols * SLOT_BYTES);
    let tags = core::slice::from_raw_parts_mut(cache.add(row_taps * out_w * SLOT_BYTES).cast::<usize>(), row_taps);
    let cache = cache.cast::<T>();
    let extrapolation = T::from_f64(s.extrapolation);
    s.each_plane(y, |base, plane| {
        tags.fill(usize::MAX);
        for o in 0..s.plane_rows() {
            let row = core::slice::from_raw_parts_mut(plane.add(o * out_w), out_w);
            let taps = s.tables.row(rank - 2, o);
            if taps[0].index < 0 {
                row.fill(extrapolation);
                continue;
            }
            for t in taps {
                let r = t.index as usize;
                let slot = cache.add(r % row_taps * out_w);
                if tags[r % row_taps] != r {
                    let dst = core::slice::from_raw_parts_mut(slot, out_w);
                    let src = x.add(base + r * s.in_row_stride());
                    with_widest_vectors(|| match cols {
                        2 => horizontal(src, index, weight, 2, dst),
                        4 => horizontal(src, index, weight, 4, dst),
                        n => horizontal(src, index, weight, n, dst),
                    });
                    tags[r % row_taps] = r;
                }
            }
            with_widest_vectors(|| vertical(taps, cache, row_taps, row));
            if columns_outside {
                for (j, v) in row.iter_mut().enumerate() {
                    if s.tables.row(rank - 1, j)[0].index < 0 {
                        *v = extrapolation;
                    }
                }
            }
        }
    });
}
