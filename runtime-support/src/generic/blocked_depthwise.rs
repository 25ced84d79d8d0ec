//! Depthwise convolution in the blocked layout (NCHWc, 8 channels), so
//! that the inverted-residual blocks of MobileNet, MnasNet and EfficientNet
//! run blocked from end to end.
//!
//! In NCHW a depthwise layer's vectors run along a plane's pixels: on the
//! 7×7 and 14×14 maps of a network's last stages a row is one or two
//! vectors, most of their lanes edges, and the layer sat between reorders
//! of the blocked 1×1 layers around it (MnasNet's 1152-channel 5×5 layers
//! at 7² took 0.41 ms, ONNX Runtime's 0.20). Blocked, the 8 channels of a
//! pixel are one vector, so a tap is one aligned load and one FMA per
//! output pixel whatever the stride, and a tap's weight vector is shared
//! by a whole tile of pixels.
//!
//! Padding is never tested per tap. The input rows a plane's output rows
//! read are copied, each once, into a ring of [`RING_FLOATS`] on the stack
//! (as many rows as the kernel spans), with zeros in the padding columns;
//! kernel rows that fall outside the input are skipped, a whole output
//! row's at once. So a row's pixels read every tap from the ring at a fixed
//! distance apart, and the ring stays in L1. Copying the rows (rather than
//! reading the input where no padding is near) costs a load and a store
//! per input vector; a tap costs one per output vector. Rows too wide for
//! the ring are cut into bands of columns. A layer whose window alone does
//! not fit, whose column stride is past 2 or whose kernel is taller than
//! [`MAX_KERNEL_ROWS`] stays NCHW ([`takes`]).
//!
//! Each output vector's sum runs over the taps in order (rows, then
//! columns) from zero, then the bias, the residual and the activation are
//! applied as [`finish_vector`] does; each is computed by one task, so the
//! result is the same for any thread count. Weights are packed
//! `[C/8][KH][KW][8]`.

use super::blocked::{finish_vector, BlockedOperands, BlockedShape, BLOCK};
use super::gemm::Aligned;
use crate::abi::conv::ConvParams;
use crate::isa::Isa;
use crate::parallel::{share, Parallel};
use core::mem::MaybeUninit;
use core::ops::Range;

/// Floats of the ring of input rows (24 KiB, within L1 with the weights
/// and the outputs).
const RING_FLOATS: usize = 6144;

/// Most kernel rows the blocked path takes.
const MAX_KERNEL_ROWS: usize = 16;

/// Tasks aimed for when there are threads.
const TASKS: usize = 16;

/// Whether the blocked path takes the 2-D convolution `p` as depthwise:
/// one input and one output channel per group, whole blocks of them, a
/// column stride of 1 or 2 (the tiles' pixel distance is a constant), up
/// to [`MAX_KERNEL_ROWS`] kernel rows, and a window whose input rows fit
/// the ring.
pub(crate) fn takes(p: &ConvParams) -> bool {
    let span = |d: usize| (p.kernel[d] - 1).saturating_mul(p.dilations[d]).saturating_add(1);
    p.group > 1
        && p.in_channels == p.group
        && p.out_channels == p.group
        && (p.group as usize).is_multiple_of(BLOCK)
        && (1..=2).contains(&p.strides[1])
        && p.kernel[0] <= MAX_KERNEL_ROWS as i64
        && (span(0) as usize).saturating_mul(span(1) as usize).saturating_mul(BLOCK) <= RING_FLOATS
}

/// Packs ONNX weights `[C][1][KH][KW]` as `[C/8][KH][KW][8]`.
///
/// # Safety
/// `w` holds the weights of `s`, `packed` as many floats.
pub(crate) unsafe fn pack_weights(s: &BlockedShape, w: *const f32, packed: *mut f32) {
    let taps = s.kernel[0] * s.kernel[1];
    for block in 0..s.out_blocks {
        for tap in 0..taps {
            for lane in 0..BLOCK {
                *packed.add((block * taps + tap) * BLOCK + lane) = *w.add((block * BLOCK + lane) * taps + tap);
            }
        }
    }
}

/// The depthwise convolution `p` (shape `s`, epilogue as the blocked
/// convolution's) with `level`'s tiles: tasks take (image, block) planes,
/// split into row ranges when there are too few planes for the threads.
///
/// # Safety
/// As [`onnxc_conv_blocked_f32`](crate::abi::onnxc_conv_blocked_f32), `s` from `p`, which [`takes`].
pub(crate) unsafe fn conv(level: Isa, p: &ConvParams, s: &BlockedShape, o: BlockedOperands, parallel: *const Parallel) {
    let planes = s.batch * s.out_blocks;
    let parts = if Parallel::is_threaded(parallel) { TASKS.div_ceil(planes).min(s.out_h) } else { 1 };
    let tasks = if Parallel::is_threaded(parallel) { planes * parts } else { 1 };
    let band_cols = band_cols(s);
    Parallel::for_each(parallel, tasks, |task| {
        let mut ring = MaybeUninit::<Aligned<RING_FLOATS>>::uninit();
        for unit in share(planes * parts, tasks, task) {
            let (plane, part) = (unit / parts, unit % parts);
            let (n, block) = (plane / s.out_blocks, plane % s.out_blocks);
            for col0 in (0..s.out_w).step_by(band_cols) {
                let cols = col0..(col0 + band_cols).min(s.out_w);
                let band = Band {
                    p,
                    s,
                    o,
                    n,
                    block,
                    plane: o.x.add(n * s.in_image() + block * s.in_h * s.in_w * BLOCK),
                    ring: ring.as_mut_ptr().cast::<f32>(),
                    in_cols: span(s, 1, cols.len()),
                    rows: share(s.out_h, parts, part),
                    cols,
                };
                crate::isa::choose::blocked_depthwise_band(level, &band);
            }
        }
    });
}

/// Input rows (`axis` 0) or columns (1) read by `out` consecutive output
/// rows or columns.
fn span(s: &BlockedShape, axis: usize, out: usize) -> usize {
    (out - 1) * s.strides[axis] + (s.kernel[axis] - 1) * s.dilations[axis] + 1
}

/// Output columns of a band: whole rows where their ring fits (halved
/// until it does).
fn band_cols(s: &BlockedShape) -> usize {
    let mut cols = s.out_w.max(1);
    while cols > 1 && span(s, 0, 1) * span(s, 1, cols) * BLOCK > RING_FLOATS {
        cols = cols.div_ceil(2);
    }
    cols
}

/// The output columns `cols` of output rows `rows` of one plane (block
/// `block` of image `n`), and the ring that holds the input rows they
/// read, `in_cols` vectors each, filled from the block's input `plane`.
pub(crate) struct Band<'a> {
    pub p: &'a ConvParams,
    pub s: &'a BlockedShape,
    pub o: BlockedOperands,
    pub n: usize,
    pub block: usize,
    pub plane: *const f32,
    pub ring: *mut f32,
    pub in_cols: usize,
    pub rows: Range<usize>,
    pub cols: Range<usize>,
}

/// The ring's rows that one output row reads: the kernel rows inside the
/// input, from `first`.
pub(crate) struct RowTaps {
    pub first: usize,
    pub rows: [*const f32; MAX_KERNEL_ROWS],
    pub count: usize,
}

impl Band<'_> {
    /// Each output row of the band: the input rows it reads that are not
    /// in the ring yet copied in (with `copy(src, dst, vectors)` and
    /// `zero(dst, vectors)`, a SIMD level's loops), then `row(oy, taps)`.
    ///
    /// # Safety
    /// As [`conv`].
    #[inline(always)]
    pub(crate) unsafe fn run(
        &self,
        mut copy: impl FnMut(*const f32, *mut f32, usize),
        mut zero: impl FnMut(*mut f32, usize),
        mut row: impl FnMut(usize, &RowTaps),
    ) {
        let s = self.s;
        let mut next_input = 0;
        for oy in self.rows.clone() {
            let ky = s.taps(0, oy, s.in_h);
            let input_row = |k: usize| oy * s.strides[0] + k * s.dilations[0] - s.pads[0];
            let Some(last) = ky.clone().last() else {
                row(oy, &RowTaps { first: 0, rows: [core::ptr::null(); MAX_KERNEL_ROWS], count: 0 });
                continue;
            };
            for iy in next_input.max(input_row(ky.start))..=input_row(last) {
                self.fill_row(iy, &mut copy, &mut zero);
            }
            next_input = next_input.max(input_row(last) + 1);
            let mut taps = RowTaps { first: ky.start, rows: [core::ptr::null(); MAX_KERNEL_ROWS], count: ky.len() };
            for (k, slot) in ky.zip(taps.rows.iter_mut()) {
                *slot = self.slot(input_row(k)).cast_const();
            }
            row(oy, &taps);
        }
    }

    /// Input row `iy`'s place in the ring.
    #[inline(always)]
    fn slot(&self, iy: usize) -> *mut f32 {
        self.ring.wrapping_add(iy % span(self.s, 0, 1) * self.in_cols * BLOCK)
    }

    /// Copies input row `iy`'s columns that the band reads into its slot,
    /// zeros outside the input.
    #[inline(always)]
    unsafe fn fill_row(
        &self,
        iy: usize,
        copy: &mut impl FnMut(*const f32, *mut f32, usize),
        zero: &mut impl FnMut(*mut f32, usize),
    ) {
        let s = self.s;
        let left = (self.cols.start * s.strides[1]) as isize - s.pads[1] as isize;
        let first = (-left).clamp(0, self.in_cols as isize) as usize;
        let end = (s.in_w as isize - left).clamp(first as isize, self.in_cols as isize) as usize;
        let dst = self.slot(iy);
        zero(dst, first);
        let src = self.plane.add((iy * s.in_w + (left + first as isize) as usize) * BLOCK);
        copy(src, dst.add(first * BLOCK), end - first);
        zero(dst.add(end * BLOCK), self.in_cols - end);
    }

    /// Float offset in a ring row of output column `ox`'s window.
    #[inline(always)]
    pub fn column(&self, ox: usize) -> usize {
        (ox - self.cols.start) * self.s.strides[1] * BLOCK
    }

    /// Float offset of pixel `(oy, ox)`'s output vector (and residual).
    #[inline(always)]
    pub fn output(&self, oy: usize, ox: usize) -> usize {
        let s = self.s;
        self.n * s.out_image() + ((self.block * s.out_h + oy) * s.out_w + ox) * BLOCK
    }

    /// The block's packed weights of kernel row `ky`.
    ///
    /// # Safety
    /// As [`conv`].
    #[inline(always)]
    pub unsafe fn weights(&self, ky: usize) -> *const f32 {
        self.o.w.add(self.block * self.s.weights_per_block() + ky * self.s.kernel[1] * BLOCK)
    }

    /// The band with plain loops: each lane's sum, then [`finish_vector`].
    ///
    /// # Safety
    /// As [`conv`].
    pub(crate) unsafe fn run_portable(&self) {
        let copy = |src: *const f32, dst: *mut f32, vectors| core::ptr::copy_nonoverlapping(src, dst, vectors * BLOCK);
        let zero = |dst: *mut f32, vectors| dst.write_bytes(0, vectors * BLOCK);
        self.run(copy, zero, |oy, taps| {
            for ox in self.cols.clone() {
                let mut sums = [0.0f32; BLOCK];
                for (k, &input) in taps.rows[..taps.count].iter().enumerate() {
                    let w = self.weights(taps.first + k);
                    for kx in 0..self.s.kernel[1] {
                        let x = input.add(self.column(ox) + kx * self.s.dilations[1] * BLOCK);
                        for (lane, sum) in sums.iter_mut().enumerate() {
                            *sum += *x.add(lane) * *w.add(kx * BLOCK + lane);
                        }
                    }
                }
                let at = self.output(oy, ox);
                let out = core::slice::from_raw_parts_mut(self.o.y.add(at), BLOCK);
                finish_vector(self.p, self.o.bias, self.o.residual, at, self.block, &sums, out);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::blocked::{onnxc_conv_blocked_f32, onnxc_pack_conv_weights_blocked_f32};
    use crate::abi::conv::{
        EPILOGUE_CLIP, EPILOGUE_HARD_SWISH, EPILOGUE_LEAKY_RELU, EPILOGUE_NONE, EPILOGUE_RELU, EPILOGUE_SILU,
    };
    use crate::abi::STATUS_OK;
    use crate::generic::blocked::tests::{blocked, nchw_conv, params, unblocked, Case};
    use crate::generic::blocked::{conv_blocked_weights_elems, conv_takes_blocked};
    use crate::generic::test_util::{assert_close, rand_vec, reversed, testable_isas};
    use core::ptr::null;
    use std::vec;
    use std::vec::Vec;

    /// A depthwise case: `(channels, channels, input, kernel, stride, dilation, pads)`.
    fn depthwise(case: &Case) -> ConvParams {
        ConvParams { group: case.0 as i64, ..params(case) }
    }

    /// Every case through the NCHW kernel and the blocked one at every
    /// level, with each kind of epilogue, serial and threaded.
    #[test]
    fn blocked_depthwise_matches_the_nchw_conv() {
        // MobileNet-like layers (5×5 at 7², stride 2), a 7×7 filter, a
        // dilation, no padding, a 1×1 filter, and rows too wide for one
        // band (300 columns: bands of half rows); rows of 19 pixels are
        // tiles of 7, 6 and 6.
        let cases: [Case; 9] = [
            (16, 16, [10, 19], [3, 3], 1, 1, [1, 1]),
            (16, 16, [7, 7], [5, 5], 1, 1, [2, 2]),
            (16, 16, [14, 13], [5, 5], 2, 1, [2, 2]),
            (8, 8, [14, 13], [3, 3], 2, 1, [1, 1]),
            (24, 24, [9, 11], [7, 7], 1, 1, [3, 3]),
            (8, 8, [5, 6], [3, 3], 1, 2, [2, 2]),
            (8, 8, [6, 6], [3, 3], 1, 1, [0, 0]),
            (8, 8, [3, 4], [1, 1], 1, 1, [0, 0]),
            (8, 8, [4, 300], [3, 3], 1, 1, [1, 1]),
        ];
        let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
        for (i, case) in cases.iter().enumerate() {
            let p = depthwise(case);
            assert!(conv_takes_blocked(&p), "case {i}");
            let s = BlockedShape::of(&p).expect("blocked");
            let c = case.0;
            let (in_len, out_len) = (2 * c * case.2[0] * case.2[1], 2 * c * s.out_h * s.out_w);
            let x = rand_vec(in_len, i as u64);
            let w = rand_vec(c * case.3[0] * case.3[1], 10 + i as u64);
            let bias = rand_vec(c, 20 + i as u64);
            let residual = rand_vec(out_len, 30 + i as u64);
            let mut packed = vec![0.0; conv_blocked_weights_elems(&p)];
            assert_eq!(packed.len(), w.len());
            assert_eq!(unsafe { onnxc_pack_conv_weights_blocked_f32(&p, w.as_ptr(), packed.as_mut_ptr()) }, STATUS_OK);
            let (xb, rb) = (blocked(&x, 2, c), blocked(&residual, 2, c));
            for (activation, fused, biased) in [
                (EPILOGUE_NONE, 0, true),
                (EPILOGUE_RELU, 1, true),
                (EPILOGUE_CLIP, 0, true),
                (EPILOGUE_LEAKY_RELU, 1, false),
                (EPILOGUE_HARD_SWISH, 0, true),
                (EPILOGUE_SILU, 1, true),
            ] {
                let p = ConvParams { activation, act_a: 0.1, act_b: 0.6, residual: fused, ..p };
                let bias = if biased { bias.as_ptr() } else { null() };
                let r = if fused == 1 { (residual.as_ptr(), rb.as_ptr()) } else { (null(), null()) };
                let want = nchw_conv(&p, &x, &w, bias, r.0, out_len);
                // Through the C entry point (the best level), serial and threaded.
                let mut outputs = Vec::new();
                for parallel in [null(), &threaded as *const Parallel] {
                    let mut y = vec![f32::NAN; out_len];
                    let (x, w, out) = (xb.as_ptr(), packed.as_ptr(), y.as_mut_ptr());
                    let status =
                        unsafe { onnxc_conv_blocked_f32(&p, x, w, bias, r.1, out, core::ptr::null_mut(), parallel) };
                    assert_eq!(status, STATUS_OK);
                    assert_close(&unblocked(&y, 2, c), &want, 1e-5);
                    outputs.push(y);
                }
                assert_eq!(outputs[0], outputs[1], "case {i}: thread split changed the bits");
                // Each level's tiles (SiLU is the blocked convolution's
                // separate pass, after them).
                if activation == EPILOGUE_SILU {
                    continue;
                }
                let mut simd_outputs: Vec<(Isa, Vec<f32>)> = Vec::new();
                for level in testable_isas() {
                    let mut outputs = Vec::new();
                    for parallel in [null(), &threaded as *const Parallel] {
                        let mut y = vec![f32::NAN; out_len];
                        let o = BlockedOperands {
                            x: xb.as_ptr(),
                            w: packed.as_ptr(),
                            bias,
                            residual: r.1,
                            y: y.as_mut_ptr(),
                        };
                        unsafe { conv(level, &p, &s, o, parallel) };
                        assert_close(&unblocked(&y, 2, c), &want, 1e-5);
                        outputs.push(y);
                    }
                    assert_eq!(outputs[0], outputs[1], "case {i}, {level:?}: thread split changed the bits");
                    if level != Isa::Generic {
                        simd_outputs.push((level, outputs.swap_remove(0)));
                    }
                }
                // The zmm tiles of pixel pairs sum each pixel as the ymm ones do.
                for (level, y) in &simd_outputs[1..] {
                    let same = y.iter().zip(&simd_outputs[0].1).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "case {i}: {level:?}'s bits differ from {:?}'s", simd_outputs[0].0);
                }
            }
        }
    }

    #[test]
    fn depthwise_of_whole_blocks_and_a_window_that_fits_is_taken() {
        let p = depthwise(&(16, 16, [9, 9], [3, 3], 1, 1, [1, 1]));
        assert!(takes(&p) && conv_takes_blocked(&p));
        assert!(!takes(&ConvParams { in_channels: 12, out_channels: 12, group: 12, ..p }));
        // A channel multiplier of 2, and grouped convolutions, are not depthwise.
        assert!(!takes(&ConvParams { out_channels: 32, ..p }));
        assert!(!takes(&ConvParams { group: 8, ..p }));
        let mut strided = p;
        strided.strides[1] = 3;
        assert!(!takes(&strided));
        // A 3×3 window dilated 40 times spans 81 × 81 pixels: no band holds it.
        let mut dilated = p;
        dilated.dilations[..2].copy_from_slice(&[40, 40]);
        assert!(!takes(&dilated));
    }
}
