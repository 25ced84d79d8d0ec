//! Depthwise 2-D convolution of f32 channel planes, for AVX-512F and AVX2
//! (one kernel over [`PlaneVector`]).
//!
//! Each tile of a plane is copied into a zero-padded buffer
//! ([`super::tile`]), so that every tap of every output is one unmasked
//! load (stride 2 reads the buffer's column phases). A chunk of one vector
//! of output columns of [`ROWS`] output rows stays in registers over all
//! taps; the common 3×3 filters are compiled with their loops unrolled (the
//! weights stay in registers).
//!
//! The sum per output is the bias, then every tap in kernel order, each
//! added with one fused multiply-add (the portable kernel rounds the
//! product first), taps in the padding adding `w * 0`.
//!
//! Layers with output rows narrower than two vectors, or strided columns,
//! go to [`super::depthwise_lanes`] instead (channels in the lanes, same
//! sums; the rule is `takes_lanes` there).

use super::depthwise_lanes::{depthwise_lanes, takes_lanes};
use super::plane::{PlaneVector, Ymm, Zmm};
use super::tile::{
    phase_and_offset, pieces, prefetch_plane, tile_buf, with_literal_taps, Taps, TileOut, Tiles, Tiling, ROWS,
};
use crate::abi::conv::ConvParams;
use core::ops::Range;

/// Convolves channel planes `planes` (of `batch × channels`) of `x` with
/// their filters `w` into `y`, starting from their `bias` (none if null),
/// then runs `finish` on each whole output plane (compiled here too, so
/// its loops use zmm). False, with nothing written, when the filter does
/// not fit the tile buffer or the column stride is not 1 or 2.
///
/// # Safety
/// `p` is validated and depthwise 2-D; `x`, `w`, `bias` and `y` hold the
/// input, filters, biases and output; the CPU has AVX-512F.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
pub(crate) unsafe fn depthwise_planes_avx512(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    planes: Range<usize>,
    finish: impl Fn(usize, &mut [f32]),
) -> bool {
    depthwise_planes::<Zmm>(p, x, w, bias, y, planes, finish)
}

/// [`depthwise_planes_avx512`] with ymm registers.
///
/// # Safety
/// As `depthwise_planes_avx512`, the CPU having AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn depthwise_planes_avx2(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    planes: Range<usize>,
    finish: impl Fn(usize, &mut [f32]),
) -> bool {
    depthwise_planes::<Ymm>(p, x, w, bias, y, planes, finish)
}

#[inline(always)]
unsafe fn depthwise_planes<V: PlaneVector>(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    planes: Range<usize>,
    finish: impl Fn(usize, &mut [f32]),
) -> bool {
    if takes_lanes(p, V::LANES) {
        depthwise_lanes::<V>(p, x, w, bias, y, planes, finish)
    } else {
        plane_tiles::<V>(p, x, w, bias, y, planes, finish)
    }
}

/// [`depthwise_planes`] a plane at a time, in padded tiles (see the
/// module doc).
#[inline(always)]
pub(super) unsafe fn plane_tiles<V: PlaneVector>(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    planes: Range<usize>,
    finish: impl Fn(usize, &mut [f32]),
) -> bool {
    let dim = |v: &[i64], d: usize| v[d] as usize;
    let taps = Taps::of(&p.kernel, &p.strides, &p.dilations);
    let input = [dim(&p.in_spatial, 0), dim(&p.in_spatial, 1)];
    let output = [dim(&p.out_spatial, 0), dim(&p.out_spatial, 1)];
    let pads = [p.pads_begin[0], p.pads_begin[1]];
    let mut buf = tile_buf();
    let Some(mut tiles) = Tiles::new::<V>(taps, [input, output], pads, 0.0, &mut buf) else {
        return false;
    };
    let (in_size, out_size) = (input[0] * input[1], output[0] * output[1]);
    for nc in planes {
        prefetch_plane(x.wrapping_add((nc + 1) * in_size), in_size);
        let c = nc % p.out_channels as usize;
        let (xc, wc, yc) = (x.add(nc * in_size), w.add(c * taps.kh * taps.kw), y.add(nc * out_size));
        let bias = if bias.is_null() { 0.0 } else { *bias.add(c) };
        with_literal_taps!(taps, {
            for r in tiles.rows() {
                for col in tiles.cols() {
                    let buf = tiles.fill::<V>(xc, (r, col));
                    tile::<V>(&tiles.tiling, taps, buf, wc, bias, tiles.out(yc, (r, col)));
                }
            }
        });
        finish(nc, core::slice::from_raw_parts_mut(yc, out_size));
    }
    true
}

/// One tile's outputs (`t.rows` rows of `t.cols`) from its padded input
/// `buf`, filter `w` and `bias`.
#[inline(always)]
unsafe fn tile<V: PlaneVector>(t: &Tiling, taps: Taps, buf: *const f32, w: *const f32, bias: f32, out: TileOut) {
    for c0 in pieces(t.cols.max(V::LANES), V::LANES) {
        for r0 in pieces(t.rows.max(ROWS), ROWS) {
            let mut acc = [V::splat(bias); ROWS];
            for a in 0..taps.kh {
                for b in 0..taps.kw {
                    let weight = V::splat(*w.add(a * taps.kw + b));
                    // Output column `c0 + l`'s input `sw * (c0 + l) + b * dw`.
                    let (phase, offset) = phase_and_offset(b * taps.dw, taps.sw);
                    let start = phase * t.phase_len + c0 + offset;
                    for (i, acc) in acc.iter_mut().enumerate() {
                        let row = buf.add(((r0 + i) * taps.sh + a * taps.dh) * t.in_stride);
                        *acc = V::mul_add(weight, V::load(row.add(start)), *acc);
                    }
                }
            }
            for (i, acc) in acc.into_iter().enumerate().take(t.rows - r0) {
                out.store(t, r0 + i, c0, acc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::conv::depthwise_plane_portable;
    use crate::generic::test_util::{assert_close, rand_vec};
    use std::vec;

    /// Floats checked past a test's output.
    const GUARD: usize = 32;

    /// Params of `channels` planes: input `[h, w]`, kernel, strides,
    /// dilations, pads `[top, left, bottom, right]`.
    fn planes(
        channels: i64,
        input: [i64; 2],
        kernel: [i64; 2],
        strides: [i64; 2],
        dilations: [i64; 2],
        pads: [i64; 4],
    ) -> ConvParams {
        let mut p = ConvParams {
            batch: 1,
            in_channels: channels,
            out_channels: channels,
            group: channels,
            spatial_rank: 2,
            ..Default::default()
        };
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

    /// Against the portable kernel, plane by plane: rows shorter than,
    /// equal to and several times a vector, planes shorter than a row
    /// group, both strides, dilation, padding wider than the kernel's
    /// reach, a filter wider than the row, and planes cut into tiles by
    /// rows and by columns; `finish` sees every whole plane once.
    #[test]
    fn matches_portable_planes() {
        use crate::isa::Isa;
        let testable = crate::generic::test_util::testable_isas();
        let (avx512, avx2) = (testable.contains(&Isa::Avx512), testable.contains(&Isa::Avx2Fma));
        let cases = [
            planes(3, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(2, [14, 16], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(2, [9, 40], [3, 3], [1, 1], [1, 1], [0, 1, 2, 1]),
            planes(3, [28, 28], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
            planes(1, [11, 71], [3, 5], [2, 2], [1, 1], [2, 1, 1, 3]),
            planes(1, [10, 37], [3, 3], [2, 2], [2, 2], [2, 2, 2, 2]),
            planes(1, [6, 33], [5, 5], [1, 1], [1, 3], [6, 9, 0, 4]),
            planes(1, [4, 5], [3, 7], [1, 1], [1, 1], [1, 3, 1, 3]),
            planes(2, [1, 1], [3, 3], [1, 1], [1, 1], [6, 6, 0, 0]),
            planes(1, [2, 3], [1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
            planes(2, [9, 3], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(1, [56, 112], [3, 3], [1, 2], [1, 1], [1, 1, 1, 1]),
            planes(1, [13, 30], [2, 16], [3, 1], [2, 1], [0, 15, 0, 0]),
            planes(2, [150, 40], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(1, [9, 1500], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(1, [20, 1201], [5, 5], [2, 2], [1, 1], [2, 2, 2, 2]),
        ];
        for (n, p) in cases.iter().enumerate() {
            let channels = p.out_channels as usize;
            let (in_size, out_size) =
                ((p.in_spatial[0] * p.in_spatial[1]) as usize, (p.out_spatial[0] * p.out_spatial[1]) as usize);
            let taps = (p.kernel[0] * p.kernel[1]) as usize;
            let x = rand_vec(channels * in_size, n as u64);
            let w = rand_vec(channels * taps, 100 + n as u64);
            let bias = rand_vec(channels, 200 + n as u64);
            let mut want = vec![f32::NAN; channels * out_size];
            for c in 0..channels {
                let (xc, wc, yc) =
                    (x[c * in_size..].as_ptr(), w[c * taps..].as_ptr(), want[c * out_size..].as_mut_ptr());
                unsafe { depthwise_plane_portable(p, xc, wc, bias[c], yc) };
            }
            for zmm in [true, false].into_iter().filter(|&zmm| if zmm { avx512 } else { avx2 }) {
                // Guard floats past the output must stay untouched.
                let mut got = vec![f32::NAN; channels * out_size + GUARD];
                let finished = std::cell::RefCell::new(vec![]);
                let finish = |nc: usize, out: &mut [f32]| finished.borrow_mut().push((nc, out.len()));
                let (x, w, b, y) = (x.as_ptr(), w.as_ptr(), bias.as_ptr(), got.as_mut_ptr());
                let taken = unsafe {
                    if zmm {
                        depthwise_planes_avx512(p, x, w, b, y, 0..channels, finish)
                    } else {
                        depthwise_planes_avx2(p, x, w, b, y, 0..channels, finish)
                    }
                };
                assert!(taken, "case {n} zmm {zmm}");
                let all: std::vec::Vec<_> = (0..channels).map(|nc| (nc, out_size)).collect();
                assert_eq!(*finished.borrow(), all, "case {n} zmm {zmm}");
                assert!(
                    got[channels * out_size..].iter().all(|v| v.is_nan()),
                    "case {n} zmm {zmm} wrote past its output"
                );
                assert_close(&got[..channels * out_size], &want, 1e-5);
            }
        }
    }

    /// Both kernels (channels in lanes, plane tiles) give the bits of a
    /// scalar sum with one FMA per tap in kernel order from the bias,
    /// padding read as zero: on ranges of planes that start and end inside
    /// a group of lanes, channels that straddle two images, no bias,
    /// filters of 1 to 49 taps, strides 1 to 3, dilation, uneven padding
    /// (and wider than the filter's reach) and planes cut into several
    /// bands. Planes outside the range stay untouched; `finish` sees each
    /// one in it once, in order.
    #[test]
    fn kernels_give_the_fma_sum_bits() {
        use crate::isa::Isa;
        let testable = crate::generic::test_util::testable_isas();
        let (avx512, avx2) = (testable.contains(&Isa::Avx512), testable.contains(&Isa::Avx2Fma));
        let cases = [
            (planes(20, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]), 2),
            (planes(37, [14, 14], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]), 1),
            (planes(16, [28, 28], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]), 1),
            (planes(9, [11, 13], [5, 5], [1, 1], [1, 1], [2, 2, 2, 2]), 1),
            (planes(17, [9, 10], [3, 5], [3, 2], [1, 1], [0, 2, 1, 0]), 1),
            (planes(5, [12, 12], [3, 3], [1, 1], [2, 2], [2, 2, 2, 2]), 1),
            (planes(3, [6, 6], [1, 1], [1, 1], [1, 1], [0, 0, 0, 0]), 1),
            (planes(18, [100, 60], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]), 1),
            (planes(4, [2, 3], [3, 3], [1, 1], [1, 1], [3, 3, 3, 3]), 1),
            (planes(3, [5, 40], [3, 3], [1, 3], [1, 1], [1, 1, 1, 1]), 1),
            (planes(19, [13, 15], [7, 7], [1, 1], [1, 1], [3, 3, 3, 3]), 1),
            (planes(6, [23, 30], [7, 7], [2, 2], [1, 1], [3, 2, 3, 3]), 2),
            (planes(17, [9, 61], [7, 7], [1, 1], [1, 1], [3, 3, 3, 3]), 1),
        ];
        for (n, (mut p, batch)) in cases.into_iter().enumerate() {
            p.batch = batch;
            let channels = p.out_channels as usize;
            let all = batch as usize * channels;
            let (in_size, out_size) =
                ((p.in_spatial[0] * p.in_spatial[1]) as usize, (p.out_spatial[0] * p.out_spatial[1]) as usize);
            let taps = (p.kernel[0] * p.kernel[1]) as usize;
            let x = rand_vec(all * in_size, 300 + n as u64);
            let w = rand_vec(channels * taps, 400 + n as u64);
            let bias = rand_vec(channels, 500 + n as u64);
            for with_bias in [true, false] {
                let want = fma_sums(&p, &x, &w, with_bias.then_some(&bias[..]));
                for range in [0..all, all.min(5)..all - all.min(3)] {
                    for (kernel, lanes) in [(0, true), (0, false), (1, true), (1, false)] {
                        if kernel == 0 && !avx512 || kernel == 1 && !avx2 {
                            continue;
                        }
                        let mut got = vec![f32::NAN; all * out_size];
                        let finished = std::cell::RefCell::new(vec![]);
                        let finish = |nc: usize, out: &mut [f32]| finished.borrow_mut().push((nc, out.len()));
                        let b = if with_bias { bias.as_ptr() } else { core::ptr::null() };
                        let args = (&p, x.as_ptr(), w.as_ptr(), b, got.as_mut_ptr(), range.clone());
                        let taken = unsafe { run_kernel(kernel, lanes, args, finish) };
                        let what = std::format!("case {n} bias {with_bias} {range:?} kernel {kernel} lanes {lanes}");
                        if !taken {
                            // The plane tiles decline column strides over 2.
                            assert!(!lanes && p.strides[1] > 2, "{what} declined");
                            continue;
                        }
                        let seen: std::vec::Vec<_> = range.clone().map(|nc| (nc, out_size)).collect();
                        assert_eq!(*finished.borrow(), seen, "{what}");
                        for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                            let inside = range.contains(&(i / out_size));
                            let ok = if inside { g.to_bits() == e.to_bits() } else { g.is_nan() };
                            assert!(ok, "{what}: element {i}: {g} against {e}");
                        }
                    }
                }
            }
        }
    }

    /// The arguments of a kernel over planes, `finish` aside.
    type Args<'a> = (&'a ConvParams, *const f32, *const f32, *const f32, *mut f32, Range<usize>);

    /// Kernel 0 (zmm) or 1 (ymm), channels in lanes or plane tiles.
    unsafe fn run_kernel(kernel: usize, lanes: bool, a: Args, finish: impl Fn(usize, &mut [f32])) -> bool {
        match (kernel, lanes) {
            (0, true) => zmm_lanes(a, finish),
            (0, false) => zmm_tiles(a, finish),
            (_, true) => ymm_lanes(a, finish),
            (_, false) => ymm_tiles(a, finish),
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    unsafe fn zmm_lanes((p, x, w, b, y, r): Args, finish: impl Fn(usize, &mut [f32])) -> bool {
        depthwise_lanes::<Zmm>(p, x, w, b, y, r, finish)
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    unsafe fn zmm_tiles((p, x, w, b, y, r): Args, finish: impl Fn(usize, &mut [f32])) -> bool {
        plane_tiles::<Zmm>(p, x, w, b, y, r, finish)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn ymm_lanes((p, x, w, b, y, r): Args, finish: impl Fn(usize, &mut [f32])) -> bool {
        depthwise_lanes::<Ymm>(p, x, w, b, y, r, finish)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn ymm_tiles((p, x, w, b, y, r): Args, finish: impl Fn(usize, &mut [f32])) -> bool {
        plane_tiles::<Ymm>(p, x, w, b, y, r, finish)
    }

    /// Every plane's outputs as a scalar sum: the bias, then each tap in
    /// kernel order with one FMA, the padding read as zero.
    fn fma_sums(p: &ConvParams, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> std::vec::Vec<f32> {
        let [ih, iw, oh, ow] = [p.in_spatial[0], p.in_spatial[1], p.out_spatial[0], p.out_spatial[1]];
        let [kh, kw] = [p.kernel[0], p.kernel[1]];
        let channels = p.out_channels as usize;
        let mut out = vec![];
        for nc in 0..p.batch as usize * channels {
            let c = nc % channels;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut sum = bias.map_or(0.0, |b| b[c]);
                    for a in 0..kh {
                        for b in 0..kw {
                            let iy = oy * p.strides[0] + a * p.dilations[0] - p.pads_begin[0];
                            let ix = ox * p.strides[1] + b * p.dilations[1] - p.pads_begin[1];
                            let inside = (0..ih).contains(&iy) && (0..iw).contains(&ix);
                            let v = if inside { x[nc * (ih * iw) as usize + (iy * iw + ix) as usize] } else { 0.0 };
                            sum = w[c * (kh * kw) as usize + (a * kw + b) as usize].mul_add(v, sum);
                        }
                    }
                    out.push(sum);
                }
            }
        }
        out
    }
}
