//! Dense blocked convolutions that are not pointwise (3×3 at stride 2,
//! 5×5, dilated, the 3×3 layers Winograd leaves) at AVX-512's full width:
//! a chunk of output pixels' windows is gathered into scratch and run as
//! a pointwise layer by the [`super::full_width`] tiles.
//!
//! The general tiles keep one output block per ymm register, and cannot
//! widen: their six pixel pointers and the weight offsets take every
//! general register. Gathered, a window is one pixel of a pointwise input
//! whose channels are the window's taps × input channels, in the order the
//! packed weights already have (`[KH][KW][C/8][8]` per output block), so
//! the weights serve unchanged. The copy costs about `KH·KW / stride²`
//! times the input once, against every FMA at twice the width on cores
//! with 512-bit units. A chunk ([`gathered_chunk`] pixels, whole tiles)
//! stays in L2 while every block group reads it.

use super::pointwise::run_clamp;
use super::{tile_shape, Epilogue, Job};
use crate::abi::conv::ConvParams;
use crate::generic::blocked::{gathered_chunk, BlockedOperands, BlockedShape, BLOCK, GATHER_SLOTS};
use crate::parallel::{share, Parallel};
use core::arch::x86_64::*;
use core::ops::Range;

/// The output pixels per chunk when [`conv`] takes `p` (shape `s`): a
/// layer whose windows are gathered ([`gathered_chunk`]), with an epilogue
/// the pointwise runs have (no activation, a clamp, or an activation
/// applied to the stored outputs).
pub(crate) fn chunk(p: &ConvParams, s: &BlockedShape) -> Option<usize> {
    gathered_chunk(s).filter(|_| run_clamp(Epilogue::of(p).activation).is_some())
}

/// The convolution `p` (shape `s`) on gathered windows in chunks of
/// `chunk` output pixels (as [`chunk`] gave them), each task gathering
/// into its own of the [`GATHER_SLOTS`] chunks of `scratch`.
///
/// # Safety
/// As [`super::conv`]; `scratch` holds
/// [`crate::generic::blocked::conv_blocked_scratch_elems`] floats; the
/// CPU has AVX-512 F and VL.
pub(crate) unsafe fn conv(
    p: &ConvParams,
    s: &BlockedShape,
    o: BlockedOperands,
    scratch: *mut f32,
    parallel: *const Parallel,
    chunk: usize,
) {
    let pixels = s.out_h * s.out_w;
    // Chunks of near-equal size: each at least half a tile (the runs' least).
    let chunks = pixels.div_ceil(chunk);
    let tasks = s.batch * chunks;
    let slots = GATHER_SLOTS.min(tasks);
    Parallel::for_each(parallel, slots, |slot| {
        let windows = scratch.add(slot * chunk * s.window());
        for task in (slot..tasks).step_by(slots) {
            let (n, c) = (task / chunks, task % chunks);
            run_chunk(p, s, &o, windows, n, share(pixels, chunks, c));
        }
    });
}

/// Output pixels `pixels` of image `n`: their windows gathered into
/// `windows`, then computed as a pointwise layer.
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn run_chunk(
    p: &ConvParams,
    s: &BlockedShape,
    o: &BlockedOperands,
    windows: *mut f32,
    n: usize,
    pixels: Range<usize>,
) {
    gather(s, o.x.add(n * s.in_image()), windows, pixels.clone());
    let taps = s.kernel[0] * s.kernel[1];
    // The chunk as a pointwise layer over the whole map, its input pointer
    // standing for pixel 0 (only the chunk's pixels are read).
    let pointwise = BlockedShape {
        batch: 1,
        in_channels: taps * s.in_channels,
        in_blocks: taps * s.in_blocks,
        in_h: s.out_h,
        in_w: s.out_w,
        kernel: [1, 1],
        strides: [1, 1],
        dilations: [1, 1],
        pads: [0, 0],
        ..*s
    };
    let offset = |v: *const f32| if v.is_null() { v } else { v.add(n * s.out_image()) };
    let operands = BlockedOperands {
        x: windows.wrapping_sub(pixels.start * BLOCK),
        w: o.w,
        bias: o.bias,
        residual: offset(o.residual),
        y: o.y.add(n * s.out_image()),
    };
    let job = Job::new(p, &pointwise, operands, true, Some(pixels.len() * BLOCK));
    // [`chunk`] took only epilogues the runs have: there is a run end.
    let Some(end) = job.run_end else { return };
    let groups = s.out_blocks.div_ceil(tile_shape(true).1);
    job.pointwise(0, 0..groups, pixels, &end);
}

/// The windows of output pixels `pixels` of one image `x` into `windows`,
/// `[tap][input block][pixel][8]`; taps in the padding are zeros.
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn gather(s: &BlockedShape, x: *const f32, windows: *mut f32, pixels: Range<usize>) {
    let len = pixels.len();
    let plane = s.in_h * s.in_w * BLOCK;
    for ky in 0..s.kernel[0] {
        for kx in 0..s.kernel[1] {
            let tap = ky * s.kernel[1] + kx;
            for cb in 0..s.in_blocks {
                let dst = windows.add((tap * s.in_blocks + cb) * len * BLOCK);
                let src = x.add(cb * plane);
                let (mut oy, mut ox) = (pixels.start / s.out_w, pixels.start % s.out_w);
                for q in 0..len {
                    let iy = (oy * s.strides[0] + ky * s.dilations[0]).wrapping_sub(s.pads[0]);
                    let ix = (ox * s.strides[1] + kx * s.dilations[1]).wrapping_sub(s.pads[1]);
                    let v = if iy < s.in_h && ix < s.in_w {
                        _mm256_loadu_ps(src.add((iy * s.in_w + ix) * BLOCK))
                    } else {
                        _mm256_setzero_ps()
                    };
                    _mm256_storeu_ps(dst.add(q * BLOCK), v);
                    ox += 1;
                    if ox == s.out_w {
                        (oy, ox) = (oy + 1, 0);
                    }
                }
            }
        }
    }
}
