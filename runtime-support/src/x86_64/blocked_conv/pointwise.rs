//! Pointwise layers (1×1, stride 1, unpadded) in the blocked layout: a
//! tile's pixels are consecutive in the input and the output, so one
//! input pointer serves them all, and full tiles run in one asm call per
//! run of pixels with the epilogue (bias, residual, clamp, stores) inside
//! the asm too. A layer of few input channels then no longer pays a call,
//! pointer set-up and an epilogue through memory per tile. The last one
//! to four pixels of a run go in two-pixel tiles (AVX-512, four blocks);
//! every tile sums a pixel in the same order, so the bits do not depend
//! on how a run is cut. With AVX-512, a run of four-block tiles goes two
//! tiles at a time in [`full_width`]'s zmm tiles, and stride-2 layers
//! (ResNet's downsampling 1×1 convolutions) run too, a row at a time,
//! their four-block groups in tiles reading every other input pixel.

use super::full_width::{self, full_width_tiles};
use super::{block_group, tile_shape, Job, Place, TileActivation};
use crate::generic::blocked::{BlockedOperands, BlockedShape, BLOCK};
use core::arch::x86_64::*;
use core::ops::Range;

/// What a run of pointwise tiles reads from memory (its general registers
/// are all taken): byte counts and the epilogue's operands.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct RunEnd {
    /// Input blocks (the block loop's iterations).
    pub(super) steps: usize,
    /// From the end of a tile's input to the next tile's start.
    pub(super) x_back: isize,
    /// From the end of a block group's weights back to their start.
    pub(super) w_back: usize,
    /// Between output blocks.
    pub(super) out_block: usize,
    /// From the output to the residual (read when `has_residual` is 1).
    pub(super) residual: isize,
    /// The group's first bias, or null.
    pub(super) bias: *const f32,
    pub(super) has_residual: usize,
    /// 1: clamp to `lo..=hi` (`lo <= hi`).
    pub(super) clamp: usize,
    pub(super) lo: f32,
    pub(super) hi: f32,
}

/// The clamp a run's epilogue applies for `activation` (1 and its
/// bounds, or 0) when the asm has it: no activation or a clamp with
/// `lo <= hi`.
pub(super) fn run_clamp(activation: Option<TileActivation>) -> Option<(usize, f32, f32)> {
    match activation? {
        TileActivation::None => Some((0, 0.0, 0.0)),
        TileActivation::Clamp { lo, hi } if lo <= hi => Some((1, lo, hi)),
        _ => None,
    }
}

impl RunEnd {
    /// The end of `s`'s runs whose loops take `steps`, `x_back` and
    /// `w_back` (in bytes), when the epilogue is one the asm has: no
    /// activation or a clamp with `lo <= hi`.
    pub(super) fn new(
        s: &BlockedShape,
        o: &BlockedOperands,
        activation: Option<TileActivation>,
        (steps, x_back, w_back): (usize, isize, usize),
    ) -> Option<RunEnd> {
        let (clamp, lo, hi) = run_clamp(activation)?;
        Some(RunEnd {
            steps,
            x_back,
            w_back,
            out_block: s.out_h * s.out_w * BLOCK * 4,
            residual: (o.residual as isize).wrapping_sub(o.y as isize),
            bias: o.bias,
            has_residual: usize::from(!o.residual.is_null()),
            clamp,
            lo,
            hi,
        })
    }

    /// The same end for the block group from output block `mb` (its bias
    /// starts at the group's first block).
    pub(super) fn for_block(&self, mb: usize) -> RunEnd {
        let bias = if self.bias.is_null() { self.bias } else { self.bias.wrapping_add(mb * BLOCK) };
        RunEnd { bias, ..*self }
    }
}

/// A function computing `tiles` consecutive tiles of a pointwise
/// convolution (1×1, stride 1, no padding: a tile's pixels are
/// consecutive in the input and in the output), its epilogue in the asm
/// too. Pixel `p`'s input is at `{x} + $po` (`$fmas` lists each pixel's
/// FMAs), its outputs `$acc at $po`, block by block (`$bias_at`: the
/// block's bias offset); the clamp's bounds go in two weight registers.
macro_rules! pointwise_tiles {
    ($(#[$doc:meta])* $name:ident, $features:literal, $class:ident, $zero:literal, $tile_bytes:literal,
     [$($b:ident),+], [$($ws:ident = $wm:literal),+], $block_list:tt, $fmas:tt,
     [$($bias_at:literal => [$($acc:ident at $po:literal),+]),+]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `x`, `w` and `y` (and the residual and bias in `end`) hold the
        /// tiles' operands; the CPU has the features enabled here.
        #[target_feature(enable = $features)]
        unsafe fn $name(x: *const f32, w: *const f32, w_block: usize, in_block: usize, y: *mut f32, tiles: usize, end: &RunEnd) {
            tile_run!(
                $zero, $class, $tile_bytes,
                [
                    "mov {k}, [{s} + {steps}]\n",
                    block_loop!($block_list, $fmas, $fmas, ["x"]),
                    "sub {x}, [{s} + {x_back}]\n",
                    "sub {w}, [{s} + {w_back}]\n",
                ],
                x = x, w = w, [$($b),+], [$($ws = $wm),+], w_block = w_block, ib = in_block, y = y, tiles = tiles,
                end = end, run at 0, [],
                clamp in "b0", "b1", [$($bias_at => [$($acc at $po),+]),+]
            );
        }
    };
}

run_tiles_6x4!(
    pointwise_tiles,
    /// Pointwise tiles of six pixels × four output blocks (AVX-512's 32 registers).
    pointwise6x4,
    ["{x} + ", "{x} + 32 + ", "{x} + 64 + ", "{x} + 96 + ", "{x} + 128 + ", "{x} + 160 + "]
);

run_tiles_4x3!(
    pointwise_tiles,
    /// Pointwise tiles of four pixels × three output blocks (AVX2).
    pointwise4x3,
    ["{x} + ", "{x} + 32 + ", "{x} + 64 + ", "{x} + 96 + "]
);

run_tiles_2x4!(
    pointwise_tiles,
    /// Pointwise tiles of two pixels × four output blocks, for the last
    /// few pixels of a run (eight FMA chains: a third of a six-pixel
    /// tile's time).
    pointwise2x4,
    ["{x} + ", "{x} + 32 + "]
);

run_tiles_6x4!(
    pointwise_tiles,
    /// Pointwise tiles of six pixels × four output blocks at stride 2
    /// (every other input pixel).
    pointwise6x4s2,
    ["{x} + ", "{x} + 64 + ", "{x} + 128 + ", "{x} + 192 + ", "{x} + 256 + ", "{x} + 320 + "]
);

run_tiles_2x4!(
    pointwise_tiles,
    /// Pointwise tiles of two pixels × four output blocks at stride 2.
    pointwise2x4s2,
    ["{x} + ", "{x} + 64 + "]
);

run_tiles_6x3!(
    pointwise_tiles,
    /// Pointwise tiles of six pixels × three output blocks.
    pointwise6x3,
    ["{x} + ", "{x} + 32 + ", "{x} + 64 + ", "{x} + 96 + ", "{x} + 128 + ", "{x} + 160 + "]
);

run_tiles_6x2!(
    pointwise_tiles,
    /// Pointwise tiles of six pixels × two output blocks.
    pointwise6x2,
    ["{x} + ", "{x} + 32 + ", "{x} + 64 + ", "{x} + 96 + ", "{x} + 128 + ", "{x} + 160 + "]
);

run_tiles_4x2!(
    pointwise_tiles,
    /// Pointwise tiles of four pixels × two output blocks (AVX2).
    pointwise4x2,
    ["{x} + ", "{x} + 32 + ", "{x} + 64 + ", "{x} + 96 + "]
);

/// A pointwise layer's pixels are computed in runs of this much input
/// when each tile walks every block group, so that the run's input is
/// read from L1 for every group after the first.
const RUN_INPUT_BYTES: usize = 16 * 1024;

/// The end of `s`'s pointwise runs when it has them: 1×1, stride 1,
/// unpadded, a blocked input (a tile's pixels are then consecutive in the
/// input and the output) whose blocks are `plane` floats apart, and no
/// activation or a clamp with `lo <= hi`.
pub(super) fn pointwise_end(
    s: &BlockedShape,
    o: &BlockedOperands,
    activation: Option<TileActivation>,
    wide: bool,
    plane: usize,
) -> Option<RunEnd> {
    let pixels = tile_shape(wide).0;
    let stride = s.strides[0];
    let unpadded = |input: usize, output: usize| input > 0 && (input - 1) / stride + 1 == output && s.pads == [0, 0];
    // Stride 2 (AVX-512 only) reads every other input pixel; its tiles
    // stay within an output row, so a row must end in whole tiles and
    // pairs (a 7-wide row would waste a pixel per row: the tiles of the
    // general path run on across rows).
    let strided = stride == 2 && wide && s.out_w >= pixels && (s.out_w % pixels).is_multiple_of(2);
    let pointwise = s.kernel == [1, 1]
        && s.strides == [stride, stride]
        && (stride == 1 || strided)
        && !s.nchw_input
        && unpadded(s.in_h, s.out_h)
        && unpadded(s.in_w, s.out_w);
    if !pointwise {
        return None;
    }
    let input_block = plane * 4;
    let x_back = (s.in_blocks * input_block - pixels * BLOCK * 4 * stride) as isize;
    RunEnd::new(s, o, activation, (s.in_blocks, x_back, s.in_blocks * BLOCK * BLOCK * 4))
}

impl Job<'_> {
    /// Output pixels `pixels` (in row-major order, at least a tile's;
    /// whole rows at stride 2) of block groups `groups` of a pointwise
    /// layer, a row at a time at stride 2.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn pointwise(&self, n: usize, groups: Range<usize>, pixels: Range<usize>, end: &RunEnd) {
        let width = self.s.out_w;
        if self.s.strides[1] == 1 {
            return self.pointwise_pixels(n, groups, pixels, end);
        }
        for row in pixels.start / width..pixels.end / width {
            self.pointwise_pixels(n, groups.clone(), row * width..(row + 1) * width, end);
        }
    }

    /// [`Self::pointwise`] on pixels whose tiles' inputs are evenly spaced:
    /// full tiles in runs (every group's run in turn when tiles walk the
    /// groups), the last pixels in pairs or a tile moved back over the one
    /// before.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pointwise_pixels(&self, n: usize, groups: Range<usize>, pixels: Range<usize>, end: &RunEnd) {
        let s = self.s;
        let strided = s.strides[1] != 1;
        let (px, most) = tile_shape(self.wide);
        let (first, count) = (pixels.start, pixels.len());
        let full = count / px;
        let run = if self.groups_per_tile { (RUN_INPUT_BYTES / (px * s.in_channels * 4)).max(1) } else { full };
        let blocks = |g| block_group(s.out_blocks, most, g);
        let place = self.place(n, (0, 0));
        let mut done = 0;
        while done < full {
            let tiles = run.min(full - done);
            let start = first + done * px;
            for (mb, blocks) in groups.clone().map(blocks) {
                if blocks > 1 && (!strided || blocks == 4) {
                    self.pointwise_run(n, (mb, blocks), px, start, tiles, end);
                } else {
                    for t in 0..tiles {
                        self.consecutive_tile(&place, mb, blocks, start + t * px);
                    }
                }
            }
            done += tiles;
        }
        let (tail, last) = (count % px, first + count);
        if tail == 0 {
            return;
        }
        for (mb, blocks) in groups.map(blocks) {
            // Up to four pixels left, in pairs (the first moved back over
            // the tile before when they are odd); more, in a tile moved back.
            if self.wide && blocks == 4 && tail <= 4 {
                let pairs = tail.div_ceil(2);
                self.pointwise_run(n, (mb, blocks), 2, last - 2 * pairs, pairs, end);
            } else {
                self.consecutive_tile(&place, mb, blocks, last - px);
            }
        }
    }

    /// `tiles` tiles of `pixels` pixels (a full tile's, or 2 with four
    /// blocks on AVX-512) × `blocks` (2 to a tile's most; 4 at stride 2)
    /// output blocks from `mb`, from pixel `start` of image `n`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pointwise_run(
        &self,
        n: usize,
        (mb, blocks): (usize, usize),
        pixels: usize,
        start: usize,
        tiles: usize,
        end: &RunEnd,
    ) {
        let (s, o) = (self.s, &self.o);
        let stride = s.strides[1];
        let (oy, ox) = (start / s.out_w, start % s.out_w);
        // Wrapping: a gathered chunk's input pointer stands for pixel 0 of the map.
        let x = o.x.wrapping_add(n * s.in_image() + (oy * stride * s.in_w + ox * stride) * BLOCK);
        let w = o.w.add(mb * s.weights_per_block());
        let y = o.y.add(n * s.out_image() + (mb * s.out_h * s.out_w + start) * BLOCK);
        let end = RunEnd {
            x_back: end.x_back + ((self.tile_pixels() - pixels) * BLOCK * 4 * stride) as isize,
            ..end.for_block(mb)
        };
        let (w_block, in_block) = (s.weights_per_block(), self.strides.in_block);
        match (self.wide, stride, pixels, blocks) {
            (_, 2, 2, _) => pointwise2x4s2(x, w, w_block, in_block, y, tiles, &end),
            (_, 2, _, _) => pointwise6x4s2(x, w, w_block, in_block, y, tiles, &end),
            (true, _, 2, _) => pointwise2x4(x, w, w_block, in_block, y, tiles, &end),
            (true, 1, 6, 4) if tiles >= 2 => {
                let pairs = tiles / 2;
                full_width_tiles(x, w, w_block, in_block, y, pairs, &full_width::run_end(&end, pixels));
                if tiles % 2 == 1 {
                    let done = pairs * full_width::PIXELS * BLOCK;
                    pointwise6x4(x.add(done), w, w_block, in_block, y.add(done), 1, &end);
                }
            }
            (true, _, _, 4) => pointwise6x4(x, w, w_block, in_block, y, tiles, &end),
            (true, _, _, 3) => pointwise6x3(x, w, w_block, in_block, y, tiles, &end),
            (true, _, _, _) => pointwise6x2(x, w, w_block, in_block, y, tiles, &end),
            (false, _, _, 3) => pointwise4x3(x, w, w_block, in_block, y, tiles, &end),
            (false, _, _, _) => pointwise4x2(x, w, w_block, in_block, y, tiles, &end),
        }
        self.finish_run(y, blocks, tiles * pixels);
    }

    /// The full tile of the pixels from `start` (in the image's row-major
    /// order) of `blocks` blocks from `mb`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn consecutive_tile(&self, place: &Place, mb: usize, blocks: usize, start: usize) {
        let at = |i: usize| ((start + i) / self.s.out_w, (start + i) % self.s.out_w);
        if self.wide {
            self.wide_tile(place, mb, blocks, core::array::from_fn(at), 6);
        } else {
            self.narrow_tile(place, mb, blocks, core::array::from_fn(at), 4);
        }
    }
}
