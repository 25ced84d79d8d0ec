//! AVX-512F max and average pooling of one f32 plane (2-D, no dilation).
//!
//! Like the depthwise kernel next to it ([`super::avx512_depthwise`]): a
//! chunk of 16 output columns of four output rows stays in four zmm
//! registers over the windows' taps, each tap one masked load (stride 1) or two and an even-lane
//! permute (stride 2), the mask dropping the columns outside the input row.
//! The portable kernel instead makes one pass over the output row per tap.
//!
//! The results are the portable kernel's bits: the taps inside the input
//! are visited in the same row-major order; max starts from each lane's
//! first such tap and then keeps `v > acc ? v : acc` (what `vmaxps` computes
//! with the new value first, NaN included); the average adds from 0 in the
//! same order and divides by the same count, and a window without taps
//! gives -inf (max) or `0 / count` (average).

use super::{lanes, load_strided};
use crate::generic::pool::{window, PoolParams, POOL_MAX};
use core::arch::x86_64::*;

/// Widest window taken (the input masks of a column chunk sit on the stack).
const MAX_KERNEL_WIDTH: usize = 16;
/// Output rows pooled together: independent accumulators, so that one
/// row's taps do not wait on each other's latency.
const ROWS: usize = 4;

/// Whether [`pool_plane`] takes this (validated, 2-D, undilated, max or
/// average) pooling.
pub(crate) fn supports(p: &PoolParams) -> bool {
    matches!(p.strides[1], 1 | 2) && p.kernel[1] as usize <= MAX_KERNEL_WIDTH
}

/// Pools plane `x` (`in_spatial`) into `y` (`out_spatial`).
///
/// # Safety
/// `p` is validated, 2-D, undilated, max or average, and [`supports`]ed;
/// `x` and `y` hold the plane and its output; the CPU has AVX-512F.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
pub(crate) unsafe fn pool_plane(p: &PoolParams, x: *const f32, y: *mut f32) {
    let [ih, iw] = [p.in_spatial[0], p.in_spatial[1]];
    let [kh, sh, ph] = [p.kernel[0], p.strides[0], p.pads_begin[0]];
    let [oh, ow] = [p.out_spatial[0] as usize, p.out_spatial[1] as usize];
    let [kw, sw, pw] = [p.kernel[1], p.strides[1], p.pads_begin[1]];
    let max = p.kind == POOL_MAX;
    let mut inside = [0u32; MAX_KERNEL_WIDTH];
    let mut taken = [0u16; MAX_KERNEL_WIDTH];
    for c0 in (0..ow).step_by(16) {
        let store = lanes(0, (ow - c0) as i64) as u16;
        // Input column of output column `c0 + l` for tap column `b`: `base(b) + l * sw`.
        let base = |b: i64| c0 as i64 * sw + b - pw;
        // Per tap column, the input lanes to load and the output lanes whose
        // tap is inside the input row: `ceil((0 - base) / sw)..ceil((iw - base) / sw)`.
        let ceil_div = |a: i64| (a + sw - 1).div_euclid(sw);
        for b in 0..kw {
            inside[b as usize] = lanes(-base(b), iw - base(b));
            taken[b as usize] = lanes(ceil_div(-base(b)), ceil_div(iw - base(b))) as u16 & store;
        }
        // Per lane, the window's columns inside the input and inside the
        // padded input (the average's divisors).
        let (mut valid, mut padded) = ([0f32; 16], [0f32; 16]);
        for l in 0..16.min(ow - c0) {
            let (w0, w1, wp) = window(p, 1, c0 + l);
            (valid[l], padded[l]) = ((w1 - w0) as f32, wp as f32);
        }
        let (valid, padded) = (_mm512_loadu_ps(valid.as_ptr()), _mm512_loadu_ps(padded.as_ptr()));
        for r0 in (0..oh).step_by(ROWS) {
            let rows = ROWS.min(oh - r0);
            let init = if max { _mm512_set1_ps(f32::NEG_INFINITY) } else { _mm512_setzero_ps() };
            let mut acc = [init; ROWS];
            let mut seen = [0u16; ROWS];
            // Only the window rows that reach the input for some of these
            // output rows (a window may be far taller than the input).
            let (top, bottom) = (r0 as i64 * sh - ph, (r0 + rows - 1) as i64 * sh - ph);
            for a in (-bottom).clamp(0, kh)..(ih - top).clamp(0, kh) {
                for b in 0..kw {
                    let (mask, taken, start) = (inside[b as usize], taken[b as usize], base(b) as isize);
                    for i in 0..rows {
                        let h = (r0 + i) as i64 * sh - ph + a;
                        if !(0..ih).contains(&h) {
                            continue;
                        }
                        let xr = x.add(h as usize * iw as usize);
                        let v = load_strided(xr, start, sw, mask, taken);
                        if max {
                            acc[i] = _mm512_mask_mov_ps(acc[i], taken & !seen[i], v);
                            acc[i] = _mm512_mask_max_ps(acc[i], taken & seen[i], v, acc[i]);
                            seen[i] |= taken;
                        } else {
                            acc[i] = _mm512_mask_add_ps(acc[i], taken, acc[i], v);
                        }
                    }
                }
            }
            for (i, mut acc) in acc.into_iter().enumerate().take(rows) {
                if !max {
                    let (h0, h1, hp) = window(p, 0, r0 + i);
                    let count = if p.count_include_pad != 0 {
                        _mm512_mul_ps(_mm512_set1_ps(hp as f32), padded)
                    } else {
                        _mm512_mul_ps(_mm512_set1_ps((h1 - h0) as f32), valid)
                    };
                    acc = _mm512_div_ps(acc, count);
                }
                _mm512_mask_storeu_ps(y.add((r0 + i) * ow + c0), store, acc);
            }
        }
    }
}
