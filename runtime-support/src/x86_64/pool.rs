//! Max and average pooling of one f32 plane (2-D, no dilation), for
//! AVX-512F and AVX2 (one kernel over [`PlaneVector`]).
//!
//! Like the depthwise kernel next to it ([`super::depthwise`]): a chunk of
//! one vector of output columns of four output rows stays in four
//! registers over the windows' taps, each tap one load (stride 1) or two
//! and an even-lane shuffle (stride 2). The plane is walked row-major:
//! four output rows, then their column chunks left to right, so that the
//! loads stream along the few input rows those outputs read (walking a
//! column of chunks down the plane instead missed the cache on nearly every
//! load). Chunks whose windows all lie inside the input row (all but one or
//! two per row) load without masks and keep every lane; the edge chunks
//! mask off the columns outside the row. The portable kernel instead makes
//! one pass over the output row per tap.
//!
//! The results are the portable kernel's bits: the taps inside the input
//! are visited in the same row-major order; max starts from each lane's
//! first such tap and then keeps `v > acc ? v : acc` (what `vmaxps` computes
//! with the new value first, NaN included); the average adds from 0 in the
//! same order and divides by the same count, and a window without taps
//! gives -inf (max) or `0 / count` (average).

use super::plane::{lanes, PlaneVector, Ymm, Zmm};
use crate::generic::pool::{window, Planes, PoolParams, POOL_MAX};
use crate::generic::prepacked::prefetch_floats;
use core::mem::MaybeUninit;

/// Widest and tallest window taken (a chunk's tap masks and a row group's
/// input rows sit on the stack).
const MAX_KERNEL: usize = 16;
/// Output rows pooled together: independent accumulators, so that one
/// row's taps do not wait on each other's latency.
const ROWS: usize = 4;

/// Whether [`pool_plane_avx512`] and [`pool_plane_avx2`] take this
/// (validated, 2-D, undilated, max or average) pooling.
pub(crate) fn supports(p: &PoolParams) -> bool {
    matches!(p.strides[1], 1 | 2) && p.kernel[..2].iter().all(|&k| k as usize <= MAX_KERNEL)
}

/// Pools planes `planes` of `x` (each `in_size` floats) into those of `y`
/// (each `out_size`).
///
/// # Safety
/// `p` is validated, 2-D, undilated, max or average, and [`supports`]ed;
/// `x` and `y` hold the planes; the CPU has AVX-512F.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
pub(crate) unsafe fn pool_planes_avx512(p: &PoolParams, x: *const f32, y: *mut f32, planes: Planes) {
    pool_planes::<Zmm>(p, x, y, planes)
}

/// [`pool_planes_avx512`] with ymm registers.
///
/// # Safety
/// As `pool_planes_avx512`, the CPU having AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn pool_planes_avx2(p: &PoolParams, x: *const f32, y: *mut f32, planes: Planes) {
    pool_planes::<Ymm>(p, x, y, planes)
}

/// The first and last chunk's [`EdgeChunk`]s are the same for every plane:
/// made once for the planes (on small planes making them took a good part
/// of the time), then each plane pooled.
#[inline(always)]
unsafe fn pool_planes<V: PlaneVector>(p: &PoolParams, x: *const f32, y: *mut f32, planes: Planes) {
    let ow = p.out_spatial[1] as usize;
    let (mut first_edge, mut last_edge) = (EdgeChunk::<V>::new(), EdgeChunk::<V>::new());
    first_edge.fill(p, 0);
    last_edge.fill(p, (ow - 1) / V::LANES * V::LANES);
    for plane in planes.range {
        pool_plane(p, x.add(plane * planes.in_size), y.add(plane * planes.out_size), &first_edge, &last_edge);
    }
}

/// The input rows of one group of output rows: per window row reaching
/// the input (the first `len`) and output row `i`, the input row, or null
/// where it lies in the padding or the output row past the plane.
struct RowGroup {
    len: usize,
    rows: [[*const f32; ROWS]; MAX_KERNEL],
}

/// What an edge chunk of output columns needs: per tap column (the first
/// `kw` entries written), the loads and the output lanes whose tap lies
/// inside the input row; per lane, the window's columns inside the input
/// and inside the padded input (the average's divisors).
struct EdgeChunk<V: PlaneVector> {
    loads: [MaybeUninit<V::LoadMask>; MAX_KERNEL],
    taken: [MaybeUninit<V::Mask>; MAX_KERNEL],
    valid: V,
    padded: V,
}

impl<V: PlaneVector> EdgeChunk<V> {
    /// Unfilled (the masks are wide and small planes many: only the
    /// entries a chunk uses are ever written).
    #[inline(always)]
    unsafe fn new() -> Self {
        let zero = V::splat(0.0);
        EdgeChunk {
            loads: [const { MaybeUninit::uninit() }; MAX_KERNEL],
            taken: [const { MaybeUninit::uninit() }; MAX_KERNEL],
            valid: zero,
            padded: zero,
        }
    }

    /// Fills in the chunk of output columns from `c0`.
    #[inline(always)]
    unsafe fn fill(&mut self, p: &PoolParams, c0: usize) {
        let [iw, kw, sw, pw] = [p.in_spatial[1], p.kernel[1], p.strides[1], p.pads_begin[1]];
        let ow = p.out_spatial[1] as usize;
        let store_bits = lanes(0, (ow - c0) as i64);
        // Input lanes to load and output lanes whose tap is inside the
        // input row: `ceil((0 - start) / sw)..ceil((iw - start) / sw)`.
        let ceil_div = |a: i64| (a + sw - 1).div_euclid(sw);
        for b in 0..kw as usize {
            let start = c0 as i64 * sw + b as i64 - pw;
            let bits = lanes(ceil_div(-start), ceil_div(iw - start)) & store_bits;
            self.loads[b].write(V::load_mask(sw, lanes(-start, iw - start), bits));
            self.taken[b].write(V::mask(bits));
        }
        if p.kind != POOL_MAX {
            let (mut valid, mut padded) = ([0f32; 16], [0f32; 16]);
            for l in 0..V::LANES.min(ow - c0) {
                let (w0, w1, wp) = window(p, 1, c0 + l);
                (valid[l], padded[l]) = ((w1 - w0) as f32, wp as f32);
            }
            (self.valid, self.padded) = (V::read(valid.as_ptr()), V::read(padded.as_ptr()));
        }
    }
}

/// Pools plane `x` (`in_spatial`) into `y` (`out_spatial`), the first and
/// last chunk's edges made by [`pool_planes`].
#[inline(always)]
unsafe fn pool_plane<V: PlaneVector>(
    p: &PoolParams,
    x: *const f32,
    y: *mut f32,
    first_edge: &EdgeChunk<V>,
    last_edge: &EdgeChunk<V>,
) {
    let [ih, iw] = [p.in_spatial[0], p.in_spatial[1]];
    let [kh, sh, ph] = [p.kernel[0], p.strides[0], p.pads_begin[0]];
    let [oh, ow] = [p.out_spatial[0] as usize, p.out_spatial[1] as usize];
    let [kw, sw, pw] = [p.kernel[1], p.strides[1], p.pads_begin[1]];
    let max = p.kind == POOL_MAX;
    // Input column of output column `c0 + l` for tap column `b`: `base(c0, b) + l * sw`.
    let base = |c0: usize, b: i64| c0 as i64 * sw + b - pw;
    // A chunk is interior when every tap column's load (`LANES * sw`
    // floats from its base) lies inside the row and all its lanes are stored.
    let interior = |c0: usize| c0 + V::LANES <= ow && base(c0, 0) >= 0 && base(c0, kw - 1) + V::LANES as i64 * sw <= iw;
    // Other edge chunks than the first and the last (rare) are made here.
    let last = (ow - 1) / V::LANES * V::LANES;
    let mut other_edge = EdgeChunk::<V>::new();
    // An interior chunk's windows have all their columns inside the input.
    let whole = V::splat(kw as f32);
    let mut group = RowGroup { len: 0, rows: [[core::ptr::null(); ROWS]; MAX_KERNEL] };
    for r0 in (0..oh).step_by(ROWS) {
        let rows = ROWS.min(oh - r0);
        // The next group's input rows, asked for now: whole rows lie too
        // far apart for the hardware prefetcher to follow from one to the next.
        // Only output rows that exist: validation bounds their windows'
        // arithmetic, not that of rows past the output.
        let next = r0 + ROWS..oh.min(r0 + 2 * ROWS);
        if !next.is_empty() {
            let (first, last) = (next.start as i64 * sh - ph, (next.end - 1) as i64 * sh - ph + (kh - 1));
            let first = first.max((next.start as i64 - 1) * sh - ph + kh);
            for h in first.max(0)..=last.min(ih - 1) {
                prefetch_floats(x.add(h as usize * iw as usize), iw as usize);
            }
        }
        // Only the window rows that reach the input for some of these
        // output rows (a window may be far taller than the input).
        let (top, bottom) = (r0 as i64 * sh - ph, (r0 + rows - 1) as i64 * sh - ph);
        let window_rows = (-bottom).clamp(0, kh)..(ih - top).clamp(0, kh);
        group.len = window_rows.clone().count();
        for (a, row) in window_rows.zip(&mut group.rows) {
            *row = core::array::from_fn(|i| {
                let h = (r0 + i) as i64 * sh - ph + a;
                if i < rows && (0..ih).contains(&h) {
                    x.add(h as usize * iw as usize)
                } else {
                    core::ptr::null()
                }
            });
        }
        for c0 in (0..ow).step_by(V::LANES) {
            let start = base(c0, 0) as isize;
            let (acc, valid, padded) = if interior(c0) {
                (pool_chunk::<V, true>(p, &group, start, first_edge), whole, whole)
            } else {
                let edge = match c0 {
                    0 => first_edge,
                    _ if c0 == last => last_edge,
                    _ => {
                        other_edge.fill(p, c0);
                        &other_edge
                    }
                };
                (pool_chunk::<V, false>(p, &group, start, edge), edge.valid, edge.padded)
            };
            for (i, mut acc) in acc.into_iter().enumerate().take(rows) {
                if !max {
                    let (h0, h1, hp) = window(p, 0, r0 + i);
                    let divisor = if p.count_include_pad != 0 {
                        V::mul(V::splat(hp as f32), padded)
                    } else {
                        V::mul(V::splat((h1 - h0) as f32), valid)
                    };
                    acc = V::div(acc, divisor);
                }
                V::store(y.add((r0 + i) * ow + c0), ow - c0, acc);
            }
        }
    }
}

/// One chunk of output columns (tap column 0 reading from `start`) over
/// the group's rows: the maxima or sums. `INTERIOR`: every tap of every
/// lane inside the input row (`edge` unused), so loads take no mask and
/// every lane takes every tap; otherwise `edge` is filled for the chunk.
#[inline(always)]
unsafe fn pool_chunk<V: PlaneVector, const INTERIOR: bool>(
    p: &PoolParams,
    group: &RowGroup,
    start: isize,
    edge: &EdgeChunk<V>,
) -> [V; ROWS] {
    let (kw, sw, max) = (p.kernel[1], p.strides[1], p.kind == POOL_MAX);
    let none = V::mask(0);
    let mut acc = [V::splat(if max { f32::NEG_INFINITY } else { 0.0 }); ROWS];
    let mut seen = [none; ROWS];
    // Whether row `i` is past its first window row inside the input: a
    // lane taken there was taken in that row already (the lanes of a tap
    // column do not depend on the window row), so from then on max needs
    // no first-tap bookkeeping.
    let mut started = [false; ROWS];
    for rows in &group.rows[..group.len] {
        // In the plane's interior every row is there, taken without a test.
        let all = rows.iter().all(|row| !row.is_null());
        for b in 0..kw as usize {
            let at = start + b as isize;
            for (i, &row) in rows.iter().enumerate() {
                if !all && row.is_null() {
                    continue;
                }
                let v = if INTERIOR {
                    V::load_full(row, at, sw)
                } else {
                    V::load(row, at, sw, edge.loads[b].assume_init())
                };
                let taken = if INTERIOR { V::mask(u32::MAX) } else { edge.taken[b].assume_init() };
                acc[i] = match (max, INTERIOR) {
                    (false, true) => V::add(acc[i], v),
                    (false, false) => V::select(taken, V::add(acc[i], v), acc[i]),
                    (true, true) if started[i] || b > 0 => V::max(v, acc[i]),
                    (true, true) => v,
                    (true, false) if started[i] => V::select(taken, V::max(v, acc[i]), acc[i]),
                    (true, false) => {
                        let first = V::select(V::mask_and_not(taken, seen[i]), v, acc[i]);
                        let later = V::mask_and(taken, seen[i]);
                        seen[i] = V::mask_or(seen[i], taken);
                        V::select(later, V::max(v, first), first)
                    }
                };
            }
        }
        rows.iter().zip(&mut started).for_each(|(row, started)| *started |= !row.is_null());
    }
    acc
}
