//! Stems (a convolution reading an NCHW image of a few channels, a CNN's
//! first layer) in runs of tiles along an output row, in either tile set
//! (AVX-512's six pixels, AVX2's four). With
//! three input channels a 3×3 tile sums only 27 products per output, so
//! the general tile's set-up (its pixels and pointers, an asm call per
//! kernel row) and its epilogue through memory cost a third of its time
//! (3×3 stride-2 stems ran at 64 GFLOP/s). Inside the input, consecutive
//! output pixels' windows are `stride` floats apart, so one pointer serves
//! a tile, and one asm call runs a row's full tiles: the loops over the
//! kernel's rows, its columns and the input channels, and
//! [`run_epilogue!`], are all inside it. The sums are in the general
//! tiles' order (kernel row, column, channel pairs, the odd channel last)
//! into one register per output vector, so the bits are theirs.

use super::pointwise::RunEnd;
use super::{block_group, tile_shape, Job, TileActivation};
use crate::generic::blocked::{BlockedOperands, BlockedShape, BLOCK};
use core::arch::x86_64::*;
use core::ops::Range;

/// What a run of stem tiles reads from memory: a pointwise run's fields
/// and the loops over the kernel's taps.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct StemEnd {
    run: RunEnd,
    kernel_h: usize,
    kernel_w: usize,
    /// Bytes from where a tap's channel loop leaves the input pointer to
    /// the next tap along the kernel row.
    next_tap: isize,
    /// From where a kernel row's taps leave it to the next row's first.
    next_row: isize,
    /// 1: an odd input channel is left after the pairs.
    odd_channel: usize,
}

/// A function computing `tiles` consecutive tiles along an output row of
/// a stem whose windows lie inside the input, compiled for `$features`
/// with vector registers of `$class`. Pixel `p`'s window starts at
/// `$fmas`' `{x} + ` offset (its stride apart); its outputs, the epilogue
/// and the clamp registers are as in [`super::pointwise`]'s runs.
macro_rules! stem_tiles {
    ($(#[$doc:meta])* $name:ident, $features:literal, $class:ident, $zero:literal, $tile_bytes:literal,
     [$($b:ident),+], [$($ws:ident = $wm:literal),+], $block_list:tt, $fmas:tt,
     [$($bias_at:literal => [$($acc:ident at $po:literal),+]),+]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `x` (channel 0's plane), `w` and `y` (and the residual and bias
        /// in `end`) hold the tiles' operands, every window inside the
        /// input; the CPU has the features enabled here.
        #[target_feature(enable = $features)]
        unsafe fn $name(x: *const f32, w: *const f32, w_block: usize, plane: usize, y: *mut f32, tiles: usize, end: &StemEnd) {
            tile_run!(
                $zero, $class, $tile_bytes,
                [
                    "mov {r}, [{s} + {kernel_h}]\n",
                    "9:\n",
                    "mov {kx}, [{s} + {kernel_w}]\n",
                    "8:\n",
                    "mov {k}, [{s} + {steps}]\n",
                    channel_loop!($block_list, $fmas, $fmas, ["x"]),
                    "add {x}, [{s} + {next_tap}]\n",
                    "dec {kx}\n",
                    "jnz 8b\n",
                    "add {x}, [{s} + {next_row}]\n",
                    "dec {r}\n",
                    "jnz 9b\n",
                    "sub {x}, [{s} + {x_back}]\n",
                    "sub {w}, [{s} + {w_back}]\n",
                ],
                x = x, w = w, [$($b),+], [$($ws = $wm),+], w_block = w_block, ib = plane, y = y, tiles = tiles,
                end = end, run at core::mem::offset_of!(StemEnd, run),
                [
                    kx = out(reg) _,
                    kernel_h = const core::mem::offset_of!(StemEnd, kernel_h),
                    kernel_w = const core::mem::offset_of!(StemEnd, kernel_w),
                    next_tap = const core::mem::offset_of!(StemEnd, next_tap),
                    next_row = const core::mem::offset_of!(StemEnd, next_row),
                    odd_channel = const core::mem::offset_of!(StemEnd, odd_channel),
                ],
                clamp in "b0", "b1", [$($bias_at => [$($acc at $po),+]),+]
            );
        }
    };
}

run_tiles_6x4!(
    stem_tiles,
    /// Stem tiles of six pixels × four output blocks at stride 2.
    stem6x4s2,
    ["{x} + ", "{x} + 8 + ", "{x} + 16 + ", "{x} + 24 + ", "{x} + 32 + ", "{x} + 40 + "]
);

run_tiles_6x3!(
    stem_tiles,
    /// Stem tiles of six pixels × three output blocks at stride 2.
    stem6x3s2,
    ["{x} + ", "{x} + 8 + ", "{x} + 16 + ", "{x} + 24 + ", "{x} + 32 + ", "{x} + 40 + "]
);

run_tiles_6x4!(
    stem_tiles,
    /// Stem tiles of six pixels × four output blocks at stride 1.
    stem6x4s1,
    ["{x} + ", "{x} + 4 + ", "{x} + 8 + ", "{x} + 12 + ", "{x} + 16 + ", "{x} + 20 + "]
);

run_tiles_6x3!(
    stem_tiles,
    /// Stem tiles of six pixels × three output blocks at stride 1.
    stem6x3s1,
    ["{x} + ", "{x} + 4 + ", "{x} + 8 + ", "{x} + 12 + ", "{x} + 16 + ", "{x} + 20 + "]
);

run_tiles_4x3!(
    stem_tiles,
    /// Stem tiles of four pixels × three output blocks at stride 2 (AVX2).
    stem4x3s2,
    ["{x} + ", "{x} + 8 + ", "{x} + 16 + ", "{x} + 24 + "]
);

run_tiles_4x2!(
    stem_tiles,
    /// Stem tiles of four pixels × two output blocks at stride 2 (AVX2).
    stem4x2s2,
    ["{x} + ", "{x} + 8 + ", "{x} + 16 + ", "{x} + 24 + "]
);

run_tiles_4x3!(
    stem_tiles,
    /// Stem tiles of four pixels × three output blocks at stride 1 (AVX2).
    stem4x3s1,
    ["{x} + ", "{x} + 4 + ", "{x} + 8 + ", "{x} + 12 + "]
);

run_tiles_4x2!(
    stem_tiles,
    /// Stem tiles of four pixels × two output blocks at stride 1 (AVX2).
    stem4x2s1,
    ["{x} + ", "{x} + 4 + ", "{x} + 8 + ", "{x} + 12 + "]
);

/// The end of `s`'s stem runs when it has them: an NCHW input, stride 1
/// or 2 along rows, every block group of the two largest sizes of the
/// tile set's (`wide`: AVX-512's 4 and 3 blocks, else AVX2's 3 and 2), and
/// no activation or a clamp with `lo <= hi`.
pub(super) fn stem_end(
    s: &BlockedShape,
    o: &BlockedOperands,
    activation: Option<TileActivation>,
    wide: bool,
) -> Option<StemEnd> {
    let (pixels, most) = tile_shape(wide);
    let groups = s.out_blocks.div_ceil(most);
    let stem = s.nchw_input
        && matches!(s.strides[1], 1 | 2)
        && (0..groups).all(|g| (most - 1..=most).contains(&block_group(s.out_blocks, most, g).1));
    if !stem {
        return None;
    }
    let [kh, kw] = s.kernel;
    let (tap_row, tap_col) = (s.dilations[0] * s.in_w * 4, s.dilations[1] * 4);
    let channel_moves = s.in_channels / 2 * 2 * s.in_h * s.in_w * 4;
    let x_back = (kh * tap_row) as isize - (pixels * s.strides[1] * 4) as isize;
    let run = RunEnd::new(s, o, activation, (s.in_channels / 2, x_back, s.weights_per_block() * 4))?;
    Some(StemEnd {
        run,
        kernel_h: kh,
        kernel_w: kw,
        next_tap: tap_col as isize - channel_moves as isize,
        next_row: tap_row as isize - (kw * tap_col) as isize,
        odd_channel: s.in_channels % 2,
    })
}

impl Job<'_> {
    /// Output rows `rows` × columns `cols` of image `n`, block groups
    /// `groups`, every window inside the input: each row's full tiles in a
    /// run per block group, then the columns left (of all the rows) in
    /// the general tiles. `group_rows` is the image's rows with these taps
    /// (deciding, as for any group, whether those are tiled).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn stem_rows(
        &self,
        n: usize,
        groups: Range<usize>,
        rows: Range<usize>,
        cols: Range<usize>,
        group_rows: usize,
        end: &StemEnd,
    ) {
        let (px, most) = tile_shape(self.wide);
        let (full, rest) = (cols.len() / px, cols.len() % px);
        if full > 0 {
            for oy in rows.clone() {
                for (mb, blocks) in groups.clone().map(|g| block_group(self.s.out_blocks, most, g)) {
                    self.stem_run(n, (mb, blocks), (oy, cols.start), full, end);
                }
            }
        }
        if rest > 0 {
            let tiled = 2 * group_rows * rest > px;
            self.pixels(n, groups, rows, cols.end - rest..cols.end, tiled);
        }
    }

    /// `tiles` tiles of `blocks` (AVX-512: 3 or 4, AVX2: 2 or 3) output blocks from `mb`, from
    /// output pixel `(oy, ox)` of image `n` along its row.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn stem_run(
        &self,
        n: usize,
        (mb, blocks): (usize, usize),
        (oy, ox): (usize, usize),
        tiles: usize,
        end: &StemEnd,
    ) {
        let (s, o) = (self.s, &self.o);
        let (iy, ix) = (oy * s.strides[0] - s.pads[0], ox * s.strides[1] - s.pads[1]);
        let x = o.x.add(n * s.in_image() + iy * s.in_w + ix);
        let w = o.w.add(mb * s.weights_per_block());
        let y = o.y.add(n * s.out_image() + ((mb * s.out_h + oy) * s.out_w + ox) * BLOCK);
        let end = StemEnd { run: end.run.for_block(mb), ..*end };
        let (w_block, plane) = (s.weights_per_block(), self.strides.in_block);
        match (self.wide, s.strides[1], blocks) {
            (true, 2, 4) => stem6x4s2(x, w, w_block, plane, y, tiles, &end),
            (true, 2, _) => stem6x3s2(x, w, w_block, plane, y, tiles, &end),
            (true, _, 4) => stem6x4s1(x, w, w_block, plane, y, tiles, &end),
            (true, _, _) => stem6x3s1(x, w, w_block, plane, y, tiles, &end),
            (false, 2, 3) => stem4x3s2(x, w, w_block, plane, y, tiles, &end),
            (false, 2, _) => stem4x2s2(x, w, w_block, plane, y, tiles, &end),
            (false, _, 3) => stem4x3s1(x, w, w_block, plane, y, tiles, &end),
            (false, _, _) => stem4x2s1(x, w, w_block, plane, y, tiles, &end),
        }
        self.finish_run(y, blocks, tiles * tile_shape(self.wide).0);
    }
}
