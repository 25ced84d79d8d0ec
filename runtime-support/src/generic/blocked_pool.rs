//! Max and average pooling in the blocked layout ([`super::blocked`]), so
//! that the pools between blocked convolutions (VGG's, SqueezeNet's,
//! Inception's) need no reorder around them.
//!
//! Each output pixel's window is visited tap by tap with the 8 channels of
//! a block as one vector (`[f32; 8]`, compiled for the CPU's widest
//! vectors): the same taps, order and arithmetic per channel as the NCHW
//! kernel's edge path, so max pooling gives its bits (NaN as there) and
//! average pooling its sums.

use super::blocked::BLOCK;
use super::pool::{average_extent, validate, window};
use crate::abi::pool::{PoolParams, POOL_AVERAGE, POOL_MAX};
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};
use crate::parallel::{share, Parallel};

/// Tasks aimed for when there are threads.
const TASKS: usize = 16;

/// Whether [`onnxc_pool_blocked_f32`](crate::abi::onnxc_pool_blocked_f32) takes these params: 2-D max or
/// average pooling without dilation, of whole channel blocks.
pub fn pool_takes_blocked(p: &PoolParams) -> bool {
    validate(p).is_some()
        && p.spatial_rank == 2
        && matches!(p.kind, POOL_MAX | POOL_AVERAGE)
        && p.dilations[..2] == [1, 1]
        && (p.channels as usize).is_multiple_of(BLOCK)
}

/// Does the work of the C entry point [`crate::abi::onnxc_pool_blocked_f32`].
pub(crate) unsafe fn pool_blocked_f32(
    p: *const PoolParams,
    x: *const f32,
    y: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    let Some(p) = p.as_ref().filter(|p| pool_takes_blocked(p)) else { return STATUS_INVALID_PARAMS };
    let [ih, iw, oh, ow] = [p.in_spatial[0], p.in_spatial[1], p.out_spatial[0], p.out_spatial[1]].map(|d| d as usize);
    let planes = p.batch as usize * p.channels as usize / BLOCK;
    let parts = if Parallel::is_threaded(parallel) { TASKS.min(planes) } else { 1 };
    Parallel::for_each(parallel, parts, |part| {
        for plane in share(planes, parts, part) {
            let (x, y) = (x.add(plane * ih * iw * BLOCK), y.add(plane * oh * ow * BLOCK));
            crate::isa::with_widest_vectors(
                #[inline(always)]
                || pool_plane(p, x, y),
            );
        }
    });
    STATUS_OK
}

/// One block of channels: every output pixel's window, lane-wise.
#[inline(always)]
unsafe fn pool_plane(p: &PoolParams, x: *const f32, y: *mut f32) {
    if p.kind == POOL_MAX {
        pool_plane_of::<true>(p, x, y)
    } else {
        pool_plane_of::<false>(p, x, y)
    }
}

/// [`pool_plane`] for max (`MAX`) or average pooling.
#[inline(always)]
unsafe fn pool_plane_of<const MAX: bool>(p: &PoolParams, x: *const f32, y: *mut f32) {
    match p.kernel[1] {
        2 => pool_rows::<MAX, 2>(p, x, y),
        3 => pool_rows::<MAX, 3>(p, x, y),
        _ => pool_rows::<MAX, 0>(p, x, y),
    }
}

/// [`pool_plane_of`] with the kernel's width `KW` known (its taps
/// unrolled in the interior), or any width when `KW` is 0.
#[inline(always)]
unsafe fn pool_rows<const MAX: bool, const KW: usize>(p: &PoolParams, x: *const f32, y: *mut f32) {
    let [iw, oh, ow] = [p.in_spatial[1], p.out_spatial[0], p.out_spatial[1]].map(|d| d as usize);
    let (stride, pad, kw) = (p.strides[1] as usize, p.pads_begin[1] as usize, p.kernel[1] as usize);
    let kw = if KW == 0 { kw } else { KW };
    // Interior columns `[ja, jb)`, whose window lies inside the input row:
    // their taps and divisor need no clipping.
    let ja = pad.div_ceil(stride).min(ow);
    let jb = if iw + pad >= kw { ((iw + pad - kw) / stride + 1).min(ow) } else { 0 }.max(ja);
    let tap = |h: usize, w: usize| *(x.add((h * iw + w) * BLOCK) as *const [f32; BLOCK]);
    let fold = |acc: &mut [f32; BLOCK], v: [f32; BLOCK]| {
        for (a, v) in acc.iter_mut().zip(v) {
            *a = if !MAX {
                *a + v
            } else if v > *a {
                v
            } else {
                *a
            };
        }
    };
    let empty = [if MAX { f32::NEG_INFINITY } else { 0.0 }; BLOCK];
    for i in 0..oh {
        let (h0, h1, _) = window(p, 0, i);
        let rows = average_extent(p, 0, i);
        let top_padded = (i as i64) * p.strides[0] < p.pads_begin[0];
        let finish = |j: usize, mut acc: [f32; BLOCK], columns: usize| {
            if !MAX {
                let n = (rows * columns) as f32;
                acc.iter_mut().for_each(|a| *a /= n);
            }
            *(y.add((i * ow + j) * BLOCK) as *mut [f32; BLOCK]) = acc;
        };
        for j in (0..ja).chain(jb..ow) {
            let (w0, w1, _) = window(p, 1, j);
            let padded_first = top_padded || (j as i64) * p.strides[1] < p.pads_begin[1];
            // Max starts from the first tap, or from -inf where that lies
            // in the padding; the sum from zero.
            let from_first = MAX && !padded_first && h0 < h1 && w0 < w1;
            let mut acc = if from_first { tap(h0, w0) } else { empty };
            for h in h0..h1 {
                let start = if from_first && h == h0 { w0 + 1 } else { w0 };
                (start..w1).for_each(|w| fold(&mut acc, tap(h, w)));
            }
            finish(j, acc, average_extent(p, 1, j));
        }
        // The interior, the same taps in the same order.
        let from_first = MAX && !top_padded && h0 < h1;
        for j in ja..jb {
            let w0 = j * stride - pad;
            let mut acc = if from_first { tap(h0, w0) } else { empty };
            for h in h0..h1 {
                for dw in 0..kw {
                    if !(from_first && h == h0 && dw == 0) {
                        fold(&mut acc, tap(h, w0 + dw));
                    }
                }
            }
            finish(j, acc, kw);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::blocked::{onnxc_from_blocked_f32, onnxc_to_blocked_f32};
    use crate::abi::blocked_pool::*;
    use crate::abi::pool::onnxc_pool_f32;
    use crate::generic::test_util::{rand_vec, reversed};
    use core::ptr::null_mut;
    use std::vec;

    /// `(kind, input h × w, kernel, stride, pads begin, pads end, count_include_pad)`.
    type Case = (i64, [usize; 2], [usize; 2], usize, [usize; 2], [usize; 2], i64);

    fn params(&(kind, input, kernel, stride, begin, end, include): &Case) -> PoolParams {
        let mut p = PoolParams {
            kind,
            batch: 2,
            channels: 16,
            spatial_rank: 2,
            count_include_pad: include,
            ..Default::default()
        };
        for d in 0..2 {
            p.in_spatial[d] = input[d] as i64;
            p.kernel[d] = kernel[d] as i64;
            p.strides[d] = stride as i64;
            p.dilations[d] = 1;
            p.pads_begin[d] = begin[d] as i64;
            p.pads_end[d] = end[d] as i64;
            p.out_spatial[d] = ((input[d] + begin[d] + end[d] - kernel[d]) / stride + 1) as i64;
        }
        p
    }

    /// Every case through the NCHW kernel and through the blocked one,
    /// serial and threaded: max pooling gives the same bits, average
    /// pooling the same sums.
    #[test]
    fn blocked_pools_match_the_nchw_pools() {
        let cases: [Case; 7] = [
            (POOL_MAX, [9, 11], [3, 3], 2, [0, 0], [0, 0], 0),
            (POOL_MAX, [9, 12], [2, 4], 1, [1, 2], [0, 1], 0),
            (POOL_AVERAGE, [9, 12], [3, 5], 2, [1, 2], [1, 2], 1),
            (POOL_MAX, [8, 8], [3, 3], 2, [1, 1], [1, 1], 0),
            (POOL_MAX, [7, 6], [2, 2], 2, [0, 0], [1, 0], 0),
            (POOL_AVERAGE, [7, 7], [3, 3], 1, [1, 1], [1, 1], 0),
            (POOL_AVERAGE, [7, 7], [3, 3], 1, [1, 1], [1, 1], 1),
        ];
        for (i, case) in cases.iter().enumerate() {
            let p = params(case);
            let (pixels, out_pixels) = (case.1[0] * case.1[1], (p.out_spatial[0] * p.out_spatial[1]) as usize);
            let mut x = rand_vec(2 * 16 * pixels, i as u64);
            x[5] = f32::NAN;
            let mut want = vec![0.0; 2 * 16 * out_pixels];
            assert_eq!(unsafe { onnxc_pool_f32(&p, x.as_ptr(), want.as_mut_ptr(), null_mut(), null_mut()) }, STATUS_OK);
            let mut xb = vec![0.0; x.len()];
            unsafe { onnxc_to_blocked_f32(x.as_ptr(), xb.as_mut_ptr(), 2, 16, pixels as i64, null_mut()) };
            let threaded = Parallel { run: Some(reversed), user: null_mut() };
            for parallel in [core::ptr::null(), &threaded as *const Parallel] {
                let mut yb = vec![0.0; want.len()];
                assert_eq!(unsafe { onnxc_pool_blocked_f32(&p, xb.as_ptr(), yb.as_mut_ptr(), parallel) }, STATUS_OK);
                let mut y = vec![0.0; want.len()];
                unsafe { onnxc_from_blocked_f32(yb.as_ptr(), y.as_mut_ptr(), 2, 16, out_pixels as i64, null_mut()) };
                for (k, (g, w)) in y.iter().zip(&want).enumerate() {
                    assert!(g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan(), "case {i} at {k}: {g} vs {w}");
                }
            }
        }
    }

    #[test]
    fn only_2d_max_and_average_pools_of_whole_blocks_are_taken() {
        let p = params(&(POOL_MAX, [5, 5], [3, 3], 1, [0, 0], [0, 0], 0));
        assert!(pool_takes_blocked(&p));
        assert!(!pool_takes_blocked(&PoolParams { channels: 12, ..p }));
        let mut dilated = p;
        dilated.dilations[0] = 2;
        dilated.out_spatial[0] = 1;
        assert!(!pool_takes_blocked(&dilated));
        let mut y = [0.0f32; 1];
        let lp = PoolParams { kind: crate::abi::pool::POOL_LP, p_norm: 2.0, ..p };
        assert_eq!(
            unsafe { onnxc_pool_blocked_f32(&lp, null_mut(), y.as_mut_ptr(), null_mut()) },
            STATUS_INVALID_PARAMS
        );
    }
}
