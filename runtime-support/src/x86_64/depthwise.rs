//! Depthwise 2-D convolution of one f32 channel plane, for AVX-512F and
//! AVX2 (one kernel over [`PlaneVector`]).
//!
//! The portable kernel ([`crate::generic::conv`]) updates a whole output
//! row in memory once per tap; depthwise planes are small (7 to 112
//! columns), so that loop is mostly remainder and loop overhead. Here a
//! chunk of one vector of output columns stays in one register over all
//! taps and is stored once, four output rows at a time so that four
//! independent chains hide the multiply-add latency. Each tap's inputs are
//! one masked load (stride 1) or two masked loads and an even-lane shuffle
//! (stride 2): the mask drops the columns in the padding, and a masked-off
//! lane is never read, so the loads may start before or run past the
//! input row. Other strides take the portable kernel.
//!
//! The sum per output is the bias, then every tap in kernel order, each
//! added with one fused multiply-add (the portable kernel rounds the
//! product first), taps in the padding adding `w * 0`.

use super::plane::{lanes, PlaneVector, Ymm, Zmm};
use crate::generic::conv::ConvParams;
use core::mem::MaybeUninit;

/// Whether [`depthwise_plane_avx512`] and [`depthwise_plane_avx2`] take
/// this (validated, depthwise 2-D) conv.
pub(crate) fn supports(p: &ConvParams) -> bool {
    matches!(p.strides[1], 1 | 2) && p.kernel[1] as usize <= MAX_KERNEL_WIDTH
}

/// Widest filter taken (the input masks of a column chunk sit on the stack).
const MAX_KERNEL_WIDTH: usize = 16;
/// Output rows computed together: independent accumulators, so that the
/// multiply-adds of one row do not wait on each other's latency.
const ROWS: i64 = 4;

/// Convolves one channel plane `x` (`in_spatial`) with its `kh x kw` filter
/// `w` into `y` (`out_spatial`), starting from `bias`, then runs `finish`
/// on the whole output plane (compiled here too, so its loops use zmm).
///
/// # Safety
/// `p` is validated, depthwise 2-D and [`supports`]ed; `x`, `w` and `y`
/// hold the plane, filter and output; the CPU has AVX-512F.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
pub(crate) unsafe fn depthwise_plane_avx512(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: f32,
    y: *mut f32,
    finish: impl FnOnce(&mut [f32]),
) {
    depthwise_plane::<Zmm>(p, x, w, bias, y, finish)
}

/// [`depthwise_plane_avx512`] with ymm registers.
///
/// # Safety
/// As `depthwise_plane_avx512`, the CPU having AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn depthwise_plane_avx2(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: f32,
    y: *mut f32,
    finish: impl FnOnce(&mut [f32]),
) {
    depthwise_plane::<Ymm>(p, x, w, bias, y, finish)
}

#[inline(always)]
unsafe fn depthwise_plane<V: PlaneVector>(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: f32,
    y: *mut f32,
    finish: impl FnOnce(&mut [f32]),
) {
    let [ih, iw] = [p.in_spatial[0], p.in_spatial[1]];
    let [oh, ow] = [p.out_spatial[0], p.out_spatial[1]];
    let [kh, kw] = [p.kernel[0], p.kernel[1]];
    let [sh, sw] = [p.strides[0], p.strides[1]];
    let [dh, dw] = [p.dilations[0], p.dilations[1]];
    let [ph, pw] = [p.pads_begin[0], p.pads_begin[1]];
    // Only the first `kw` entries are written and read: the masks are wide,
    // and initialising all of them took a tenth of a small plane's time.
    let mut loads = [const { MaybeUninit::<V::LoadMask>::uninit() }; MAX_KERNEL_WIDTH];
    for c0 in (0..ow).step_by(V::LANES) {
        let (count, store_bits) = ((ow - c0) as usize, lanes(0, ow - c0));
        // Per tap column, the lanes whose input column is inside the row:
        // input column of output column `c0 + l` is `base + l * sw`.
        let base = |b: i64| c0 * sw + b * dw - pw;
        for b in 0..kw {
            let inside = lanes(-base(b), iw - base(b));
            loads[b as usize].write(V::load_mask(sw, inside, inside & store_bits));
        }
        for r0 in (0..oh).step_by(ROWS as usize) {
            let mut acc = [V::splat(bias); ROWS as usize];
            for a in 0..kh {
                // Each output row's input row for this filter row (null:
                // past the output or in the padding, skipped); in the
                // plane's interior all of them, taken without a test.
                let rows: [*const f32; ROWS as usize] = core::array::from_fn(|i| {
                    let out_row = r0 + i as i64;
                    let in_row = (out_row < oh).then(|| out_row * sh - ph + a * dh);
                    match in_row.filter(|h| (0..ih).contains(h)) {
                        Some(h) => x.add((h * iw) as usize),
                        None => core::ptr::null(),
                    }
                });
                let all = rows.iter().all(|r| !r.is_null());
                for b in 0..kw {
                    let weight = V::splat(*w.add((a * kw + b) as usize));
                    let (mask, start) = (loads[b as usize].assume_init(), base(b) as isize);
                    for (acc, &xr) in acc.iter_mut().zip(&rows) {
                        if all || !xr.is_null() {
                            *acc = V::mul_add(weight, V::load(xr, start, sw, mask), *acc);
                        }
                    }
                }
            }
            for (i, acc) in acc.into_iter().enumerate().take((oh - r0) as usize) {
                V::store(y.add(((r0 + i as i64) * ow + c0) as usize), count, acc);
            }
        }
    }
    finish(core::slice::from_raw_parts_mut(y, (oh * ow) as usize));
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::conv::depthwise_plane_portable;
    use crate::generic::test_util::{assert_close, rand_vec};
    use std::vec;

    /// Params of one plane: input `[h, w]`, kernel, strides, dilations,
    /// pads `[top, left, bottom, right]`.
    fn plane(input: [i64; 2], kernel: [i64; 2], strides: [i64; 2], dilations: [i64; 2], pads: [i64; 4]) -> ConvParams {
        let mut p =
            ConvParams { batch: 1, in_channels: 1, out_channels: 1, group: 1, spatial_rank: 2, ..Default::default() };
        for d in 0..2 {
            p.in_spatial[d] = input[d];
            p.kernel[d] = kernel[d];
            p.strides[d] = strides[d];
            p.dilations[d] = dilations[d];
            p.pads_begin[d] = pads[d];
            let span = (kernel[d] - 1) * dilations[d] + 1;
            p.out_spatial[d] = (input[d] + pads[d] + pads[d + 2] - span) / strides[d] + 1;
        }
        p
    }

    /// Against the portable kernel: rows shorter than, equal to and several
    /// times a chunk, both strides, dilation, padding wider than the kernel
    /// reach, and a filter wider than the row; `finish` sees the whole plane.
    #[test]
    fn matches_portable_plane() {
        use crate::generic::gemm::GemmKernel;
        let (avx512, avx2) = (GemmKernel::Avx512.available(), GemmKernel::Avx2Fma.available());
        if !avx2 {
            std::eprintln!("skipping: no AVX2");
        }
        let cases = [
            plane([7, 7], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            plane([14, 16], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            plane([9, 40], [3, 3], [1, 1], [1, 1], [0, 1, 2, 1]),
            plane([28, 28], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
            plane([11, 71], [3, 5], [2, 2], [1, 1], [2, 1, 1, 3]),
            plane([10, 37], [3, 3], [2, 2], [2, 2], [2, 2, 2, 2]),
            plane([6, 33], [5, 5], [1, 1], [1, 3], [6, 9, 0, 4]),
            plane([4, 5], [3, 7], [1, 1], [1, 1], [1, 3, 1, 3]),
            plane([1, 1], [3, 3], [1, 1], [1, 1], [6, 6, 0, 0]),
            plane([56, 112], [3, 3], [1, 2], [1, 1], [1, 1, 1, 1]),
            plane([13, 30], [2, 16], [3, 1], [2, 1], [0, 15, 0, 0]),
        ];
        for (n, p) in cases.iter().enumerate() {
            let (oh, ow) = (p.out_spatial[0] as usize, p.out_spatial[1] as usize);
            let x = rand_vec((p.in_spatial[0] * p.in_spatial[1]) as usize, n as u64);
            let w = rand_vec((p.kernel[0] * p.kernel[1]) as usize, 100 + n as u64);
            let mut want = vec![f32::NAN; oh * ow];
            unsafe { depthwise_plane_portable(p, x.as_ptr(), w.as_ptr(), 0.25, want.as_mut_ptr()) };
            assert!(supports(p));
            for zmm in [true, false].into_iter().filter(|&zmm| if zmm { avx512 } else { avx2 }) {
                let mut got = vec![f32::NAN; oh * ow];
                let mut finished = 0;
                let (x, w, y) = (x.as_ptr(), w.as_ptr(), got.as_mut_ptr());
                unsafe {
                    if zmm {
                        depthwise_plane_avx512(p, x, w, 0.25, y, |out| finished = out.len());
                    } else {
                        depthwise_plane_avx2(p, x, w, 0.25, y, |out| finished = out.len());
                    }
                }
                assert_eq!(finished, oh * ow, "case {n} zmm {zmm}");
                assert_close(&got, &want, 1e-5);
            }
        }
        assert!(!supports(&plane([9, 9], [3, 3], [1, 3], [1, 1], [0, 0, 0, 0])));
        assert!(!supports(&plane([9, 20], [3, 17], [1, 1], [1, 1], [0, 0, 0, 0])));
    }
}
