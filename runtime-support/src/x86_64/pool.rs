//! Max and average pooling of one f32 plane (2-D, no dilation), for
//! AVX-512F and AVX2 (one kernel over [`PlaneVector`]).
//!
//! Like the depthwise kernel next to it ([`super::depthwise`]): a chunk of
//! one vector of output columns of four output rows stays in four
//! registers over the windows' taps, each tap one masked load (stride 1)
//! or two and an even-lane shuffle (stride 2), the mask dropping the
//! columns outside the input row. The portable kernel instead makes one
//! pass over the output row per tap.
//!
//! The results are the portable kernel's bits: the taps inside the input
//! are visited in the same row-major order; max starts from each lane's
//! first such tap and then keeps `v > acc ? v : acc` (what `vmaxps` computes
//! with the new value first, NaN included); the average adds from 0 in the
//! same order and divides by the same count, and a window without taps
//! gives -inf (max) or `0 / count` (average).

use super::plane::{lanes, PlaneVector, Ymm, Zmm};
use crate::generic::pool::{window, PoolParams, POOL_MAX};
use crate::generic::prepacked::prefetch_floats;

/// Widest window taken (the input masks of a column chunk sit on the stack).
const MAX_KERNEL_WIDTH: usize = 16;
/// Output rows pooled together: independent accumulators, so that one
/// row's taps do not wait on each other's latency.
const ROWS: usize = 4;
/// Output rows of one band: all column chunks of a band are pooled before
/// the next, so the band's input rows stay in L1 while the chunks reread
/// their overlapping columns.
const BAND_ROWS: usize = 8;

/// Whether [`pool_plane_avx512`] and [`pool_plane_avx2`] take this
/// (validated, 2-D, undilated, max or average) pooling.
pub(crate) fn supports(p: &PoolParams) -> bool {
    matches!(p.strides[1], 1 | 2) && p.kernel[1] as usize <= MAX_KERNEL_WIDTH
}

/// Pools plane `x` (`in_spatial`) into `y` (`out_spatial`).
///
/// # Safety
/// `p` is validated, 2-D, undilated, max or average, and [`supports`]ed;
/// `x` and `y` hold the plane and its output; the CPU has AVX-512F.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
pub(crate) unsafe fn pool_plane_avx512(p: &PoolParams, x: *const f32, y: *mut f32) {
    pool_plane::<Zmm>(p, x, y)
}

/// [`pool_plane_avx512`] with ymm registers.
///
/// # Safety
/// As `pool_plane_avx512`, the CPU having AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn pool_plane_avx2(p: &PoolParams, x: *const f32, y: *mut f32) {
    pool_plane::<Ymm>(p, x, y)
}

#[inline(always)]
unsafe fn pool_plane<V: PlaneVector>(p: &PoolParams, x: *const f32, y: *mut f32) {
    let [ih, iw] = [p.in_spatial[0], p.in_spatial[1]];
    let [kh, sh, ph] = [p.kernel[0], p.strides[0], p.pads_begin[0]];
    let [oh, ow] = [p.out_spatial[0] as usize, p.out_spatial[1] as usize];
    let [kw, sw, pw] = [p.kernel[1], p.strides[1], p.pads_begin[1]];
    let max = p.kind == POOL_MAX;
    let none = V::mask(0);
    let mut loads = [V::load_mask(sw, 0, 0); MAX_KERNEL_WIDTH];
    let mut taken = [none; MAX_KERNEL_WIDTH];
    for band in (0..oh).step_by(BAND_ROWS) {
        // The next band's input rows, asked for now: a plane just written
        // by the layer before sits in L3, and whole rows lie too far apart
        // for the hardware prefetcher to follow.
        // Only output rows that exist: validation bounds their windows'
        // arithmetic, not that of rows past the output.
        let next = band + BAND_ROWS..oh.min(band + 2 * BAND_ROWS);
        if !next.is_empty() {
            let (first, last) = (next.start as i64 * sh - ph, (next.end - 1) as i64 * sh - ph + (kh - 1));
            for h in first.max(0)..=last.min(ih - 1) {
                prefetch_floats(x.add(h as usize * iw as usize), iw as usize);
            }
        }
        for c0 in (0..ow).step_by(V::LANES) {
            let (count, store_bits) = (ow - c0, lanes(0, (ow - c0) as i64));
            // Input column of output column `c0 + l` for tap column `b`: `base(b) + l * sw`.
            let base = |b: i64| c0 as i64 * sw + b - pw;
            // Per tap column, the input lanes to load and the output lanes whose
            // tap is inside the input row: `ceil((0 - base) / sw)..ceil((iw - base) / sw)`.
            let ceil_div = |a: i64| (a + sw - 1).div_euclid(sw);
            for b in 0..kw {
                let bits = lanes(ceil_div(-base(b)), ceil_div(iw - base(b))) & store_bits;
                loads[b as usize] = V::load_mask(sw, lanes(-base(b), iw - base(b)), bits);
                taken[b as usize] = V::mask(bits);
            }
            // Per lane, the window's columns inside the input and inside the
            // padded input (the average's divisors).
            let (mut valid, mut padded) = ([0f32; 16], [0f32; 16]);
            for l in 0..V::LANES.min(ow - c0) {
                let (w0, w1, wp) = window(p, 1, c0 + l);
                (valid[l], padded[l]) = ((w1 - w0) as f32, wp as f32);
            }
            let (valid, padded) = (V::read(valid.as_ptr()), V::read(padded.as_ptr()));
            for r0 in (band..oh.min(band + BAND_ROWS)).step_by(ROWS) {
                let rows = ROWS.min(oh - r0);
                let init = V::splat(if max { f32::NEG_INFINITY } else { 0.0 });
                let mut acc = [init; ROWS];
                let mut seen = [none; ROWS];
                // Whether row `i` is past its first window row inside the
                // input: a lane taken there was taken in that row already (the
                // lanes of a tap column do not depend on the window row), so
                // from then on max needs no first-tap bookkeeping.
                let mut started = [false; ROWS];
                // Only the window rows that reach the input for some of these
                // output rows (a window may be far taller than the input).
                let (top, bottom) = (r0 as i64 * sh - ph, (r0 + rows - 1) as i64 * sh - ph);
                for a in (-bottom).clamp(0, kh)..(ih - top).clamp(0, kh) {
                    let inside: [bool; ROWS] =
                        core::array::from_fn(|i| i < rows && (0..ih).contains(&((r0 + i) as i64 * sh - ph + a)));
                    for b in 0..kw {
                        let (mask, taken, start) = (loads[b as usize], taken[b as usize], base(b) as isize);
                        for i in (0..rows).filter(|&i| inside[i]) {
                            let h = (r0 + i) as i64 * sh - ph + a;
                            let v = V::load(x.add(h as usize * iw as usize), start, sw, mask);
                            acc[i] = if !max {
                                V::select(taken, V::add(acc[i], v), acc[i])
                            } else if started[i] {
                                V::select(taken, V::max(v, acc[i]), acc[i])
                            } else {
                                let first = V::select(V::mask_and_not(taken, seen[i]), v, acc[i]);
                                let later = V::mask_and(taken, seen[i]);
                                seen[i] = V::mask_or(seen[i], taken);
                                V::select(later, V::max(v, first), first)
                            };
                        }
                    }
                    (0..rows).for_each(|i| started[i] |= inside[i]);
                }
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
                    V::store(y.add((r0 + i) * ow + c0), count, acc);
                }
            }
        }
    }
}
