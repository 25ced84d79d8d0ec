//! AVX2+FMA convolution in the blocked layout ([`crate::generic::blocked`]).
//!
//! A tile is `PX` consecutive output pixels of one row × `BLK` output
//! blocks (8 channels each), its `PX × BLK` sums in ymm registers over the
//! whole depth: per input channel, `BLK` weight vectors are loaded and
//! each pixel's input is one broadcast, so a tile's inputs are consecutive
//! floats of a few lines and its outputs whole-vector stores.
//!
//! Padding is never materialised. An output row keeps the kernel rows that
//! fall inside the input; pixels whose window crosses the left or right
//! edge are computed one at a time over the kernel columns inside, and the
//! rest in full tiles, the last one moved back over the one before where
//! the pixels do not divide into tiles (each pixel's sums are the same in
//! any tile, so the pixels stored twice get the same bits).
//!
//! Work is split over (image, output block group, output rows); each
//! output vector is computed by one task in one order, so the result is
//! the same for any thread count.

use super::avx2::activate;
use crate::generic::blocked::{finish_vector, BlockedOperands, BlockedShape, BLOCK};
use crate::generic::conv::{tile_activation, ConvParams};
use crate::generic::prepacked::TileActivation;
use crate::parallel::{share, Parallel};
use core::arch::x86_64::*;
use core::ops::Range;

/// Pixels of a full tile.
const PX: usize = 4;
/// Tasks aimed for when there are threads.
const TASKS: usize = 16;

/// Where a tile reads: its first pixel's window origin (`x`, which may lie
/// outside the input: only taps in `ky` × `kx` are read), the weights of
/// its first output block at tap (0, 0), and the distance in floats to the
/// next block's (0 for a lone block, whose second sums are discarded).
#[derive(Clone, Copy)]
struct TileInput {
    x: *const f32,
    w: *const f32,
    w_block: usize,
    ky: (usize, usize),
    kx: (usize, usize),
}

/// The strides shared by every tile of a call, in floats.
struct Strides {
    /// Between a tile's pixels, and between kernel rows and columns.
    pixel: usize,
    tap_row: usize,
    tap_col: usize,
    /// Between input blocks.
    in_block: usize,
    /// Between kernel taps in the weights.
    w_tap: usize,
    in_blocks: usize,
    kernel_w: usize,
}

/// One input channel's step (the `$ci`th of its block): the weights at
/// byte offset `$wo` in each output block's panel (`$b at $panel`), then
/// per pixel `$p` a broadcast of its input at byte `$xo` and its FMAs into
/// `$c` with `$pb`.
macro_rules! step {
    ($wo:literal, $xo:literal, [$($b:literal at $panel:literal),+], [$($p:literal => [$($c:literal * $pb:literal),+]),+]) => {
        concat!(
            $("vmovups {", $b, "}, [{w} + ", $panel, $wo, "]\n",)+
            $(
                "vbroadcastss {ai}, dword ptr [{", $p, "} + ", $xo, "]\n",
                $("vfmadd231ps {", $c, "}, {ai}, {", $pb, "}\n",)+
            )+
        )
    };
}

/// The loop over a tap's input blocks: eight steps (the even ones summing
/// into `$even`'s registers, the odd ones into `$odd`'s), then the next block.
macro_rules! block_loop {
    ($blocks:tt, $even:tt, $odd:tt, [$($p:expr),+]) => {
        concat!(
            "2:\n",
            step!("0", "0", $blocks, $even),
            step!("32", "4", $blocks, $odd),
            step!("64", "8", $blocks, $even),
            step!("96", "12", $blocks, $odd),
            step!("128", "16", $blocks, $even),
            step!("160", "20", $blocks, $odd),
            step!("192", "24", $blocks, $even),
            step!("224", "28", $blocks, $odd),
            "add {w}, 256\n",
            $("add {", $p, "}, {ib}\n",)+
            "dec {k}\n",
            "jnz 2b\n",
        )
    };
}

/// A function adding a tile's products over every tap in its ranges into
/// `acc[$i][$j]`, with the asm loop over each tap's input blocks: pixel
/// pointers `$p`, weights in `$b`, even and odd input channels' FMAs as
/// `$even` and `$odd` list them.
macro_rules! tile_sums {
    ($(#[$doc:meta])* $name:ident, $rows:literal, $blocks:literal, [$($p:ident = $pi:literal),+], [$($b:ident),+],
     $block_list:tt, $even:tt, $odd:tt, [$($c:ident = $i:literal, $j:literal);+]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Every tap in the ranges is inside the input; the CPU has AVX2
        /// and FMA.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        unsafe fn $name(t: TileInput, s: &Strides) -> [[__m256; $blocks]; $rows] {
            let mut acc = [[_mm256_setzero_ps(); $blocks]; $rows];
            for ky in t.ky.0..t.ky.1 {
                for kx in t.kx.0..t.kx.1 {
                    let x = t.x.wrapping_add(ky * s.tap_row + kx * s.tap_col);
                    core::arch::asm!(
                        block_loop!($block_list, $even, $odd, [$(stringify!($p)),+]),
                        w = inout(reg) t.w.add((ky * s.kernel_w + kx) * s.w_tap) => _,
                        k = inout(reg) s.in_blocks => _,
                        ws = in(reg) t.w_block * 4,
                        ib = in(reg) s.in_block * 4,
                        $($p = inout(reg) x.wrapping_add($pi * s.pixel) => _,)+
                        $($b = out(ymm_reg) _,)+
                        ai = out(ymm_reg) _,
                        $($c = inout(ymm_reg) acc[$i][$j],)+
                        options(nostack, readonly),
                    );
                }
            }
            acc
        }
    };
}

tile_sums!(
    /// The sums of four pixels × three output blocks.
    sums4x3, 4, 3, [p0 = 0, p1 = 1, p2 = 2, p3 = 3], [b0, b1, b2],
    ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + "],
    ["p0" => ["c00" * "b0", "c01" * "b1", "c02" * "b2"],
     "p1" => ["c10" * "b0", "c11" * "b1", "c12" * "b2"],
     "p2" => ["c20" * "b0", "c21" * "b1", "c22" * "b2"],
     "p3" => ["c30" * "b0", "c31" * "b1", "c32" * "b2"]],
    ["p0" => ["c00" * "b0", "c01" * "b1", "c02" * "b2"],
     "p1" => ["c10" * "b0", "c11" * "b1", "c12" * "b2"],
     "p2" => ["c20" * "b0", "c21" * "b1", "c22" * "b2"],
     "p3" => ["c30" * "b0", "c31" * "b1", "c32" * "b2"]],
    [c00 = 0, 0; c01 = 0, 1; c02 = 0, 2; c10 = 1, 0; c11 = 1, 1; c12 = 1, 2;
     c20 = 2, 0; c21 = 2, 1; c22 = 2, 2; c30 = 3, 0; c31 = 3, 1; c32 = 3, 2]
);

tile_sums!(
    /// The sums of four pixels × two output blocks.
    sums4x2, 4, 2, [p0 = 0, p1 = 1, p2 = 2, p3 = 3], [b0, b1],
    ["b0" at "", "b1" at "{ws} + "],
    ["p0" => ["c00" * "b0", "c01" * "b1"],
     "p1" => ["c10" * "b0", "c11" * "b1"],
     "p2" => ["c20" * "b0", "c21" * "b1"],
     "p3" => ["c30" * "b0", "c31" * "b1"]],
    ["p0" => ["c00" * "b0", "c01" * "b1"],
     "p1" => ["c10" * "b0", "c11" * "b1"],
     "p2" => ["c20" * "b0", "c21" * "b1"],
     "p3" => ["c30" * "b0", "c31" * "b1"]],
    [c00 = 0, 0; c01 = 0, 1; c10 = 1, 0; c11 = 1, 1; c20 = 2, 0; c21 = 2, 1; c30 = 3, 0; c31 = 3, 1]
);

tile_sums!(
    /// The sums of one pixel × three output blocks, over the even input
    /// channels in row 0 and the odd ones in row 1 (so that six chains of
    /// FMAs are in flight, not three).
    sums1x3, 2, 3, [p0 = 0], [b0, b1, b2],
    ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + "],
    ["p0" => ["c00" * "b0", "c01" * "b1", "c02" * "b2"]],
    ["p0" => ["c10" * "b0", "c11" * "b1", "c12" * "b2"]],
    [c00 = 0, 0; c01 = 0, 1; c02 = 0, 2; c10 = 1, 0; c11 = 1, 1; c12 = 1, 2]
);

tile_sums!(
    /// The sums of one pixel × two output blocks, even and odd input
    /// channels apart.
    sums1x2, 2, 2, [p0 = 0], [b0, b1],
    ["b0" at "", "b1" at "{ws} + "],
    ["p0" => ["c00" * "b0", "c01" * "b1"]],
    ["p0" => ["c10" * "b0", "c11" * "b1"]],
    [c00 = 0, 0; c01 = 0, 1; c10 = 1, 0; c11 = 1, 1]
);

/// One call's convolution, shared by its tasks.
struct Job<'a> {
    p: &'a ConvParams,
    s: &'a BlockedShape,
    o: BlockedOperands,
    strides: Strides,
    /// The epilogue's activation when it is a select, else `None` (then
    /// the portable epilogue finishes each vector).
    activation: Option<TileActivation>,
}

/// The output block groups of `blocks` blocks: groups of three, then of
/// two (a lone block is a group of its own). Group `g`: (first block, blocks).
fn block_group(blocks: usize, g: usize) -> (usize, usize) {
    let threes = match blocks % 3 {
        0 | 2 => blocks / 3,
        _ => (blocks / 3).saturating_sub(1),
    };
    if g < threes {
        (3 * g, 3)
    } else {
        let first = 3 * threes + 2 * (g - threes);
        (first, 2.min(blocks - first))
    }
}

/// A one-pixel tile's sums from its even and odd input channels' halves.
#[inline(always)]
unsafe fn halves<const B: usize>([even, odd]: [[__m256; B]; 2]) -> [[__m256; B]; 1] {
    [core::array::from_fn(|j| _mm256_add_ps(even[j], odd[j]))]
}

impl Job<'_> {
    /// Output rows `rows` of block group `group` of image `n`.
    ///
    /// # Safety
    /// As [`conv`]; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run(&self, n: usize, group: usize, rows: Range<usize>) {
        let s = self.s;
        let (mb, blocks) = block_group(s.out_blocks, group);
        // Pixels whose window lies inside the input's width.
        let (sw, dw, pw) = (s.strides[1], s.dilations[1], s.pads[1]);
        let inner_start = pw.div_ceil(sw).min(s.out_w);
        let reach = (s.kernel[1] - 1) * dw;
        let inner_end = if s.in_w + pw > reach { ((s.in_w + pw - reach - 1) / sw + 1).min(s.out_w) } else { 0 };
        let inner_end = inner_end.max(inner_start);
        // The inner pixels in full tiles, the last one overlapping the one
        // before where they do not divide (it stores the same values again).
        let inner = inner_end - inner_start;
        let tiles = if inner >= PX { inner.div_ceil(PX) } else { 0 };
        let tile_at = |t: usize| inner_start + (t * PX).min(inner - PX);
        let singles = (0..s.out_w).filter(|&ox| tiles == 0 || !(inner_start..inner_end).contains(&ox));
        for oy in rows {
            for t in 0..tiles {
                self.tile(n, mb, blocks, oy, tile_at(t), PX);
            }
            for ox in singles.clone() {
                self.tile(n, mb, blocks, oy, ox, 1);
            }
        }
    }

    /// The tile of `pixels` (1 or [`PX`]) from `(oy, ox)` and `blocks`
    /// output blocks from `mb`: summed, finished and stored.
    #[inline(always)]
    unsafe fn tile(&self, n: usize, mb: usize, blocks: usize, oy: usize, ox: usize, pixels: usize) {
        let s = self.s;
        let ky = s.taps(0, oy, s.in_h);
        let kx = if pixels == 1 { s.taps(1, ox, s.in_w) } else { 0..s.kernel[1] };
        // The window origin, as a wrapping offset: it may precede the input.
        let iy = (oy * s.strides[0]).wrapping_sub(s.pads[0]);
        let ix = (ox * s.strides[1]).wrapping_sub(s.pads[1]);
        let origin = iy.wrapping_mul(s.in_w).wrapping_add(ix).wrapping_mul(BLOCK);
        let input = TileInput {
            x: self.o.x.add(n * s.in_image()).wrapping_add(origin),
            w: self.o.w.add(mb * s.weights_per_block()),
            w_block: if blocks > 1 { s.weights_per_block() } else { 0 },
            ky: (ky.start, ky.end),
            kx: (kx.start, kx.end),
        };
        let at = n * s.out_image() + ((mb * s.out_h + oy) * s.out_w + ox) * BLOCK;
        let block_step = s.out_h * s.out_w * BLOCK;
        match (pixels, blocks) {
            (1, 3) => self.store(&halves(sums1x3(input, &self.strides)), mb, 3, at, block_step),
            (1, _) => self.store(&halves(sums1x2(input, &self.strides)), mb, blocks, at, block_step),
            (_, 3) => self.store(&sums4x3(input, &self.strides), mb, 3, at, block_step),
            _ => self.store(&sums4x2(input, &self.strides), mb, blocks, at, block_step),
        }
    }

    /// Stores the first `blocks` blocks of tile sums `acc` (pixel `p`, block
    /// `j` at float `at + j * block_step + p * 8`), finished.
    #[inline(always)]
    unsafe fn store<const P: usize, const B: usize>(
        &self,
        acc: &[[__m256; B]; P],
        mb: usize,
        blocks: usize,
        at: usize,
        block_step: usize,
    ) {
        for (p, row) in acc.iter().enumerate() {
            for (j, &v) in row.iter().enumerate().take(blocks) {
                self.finish(mb + j, at + j * block_step + p * BLOCK, v);
            }
        }
    }

    /// Stores the sums `v` of output block `mb` at float `at`, finished.
    #[inline(always)]
    unsafe fn finish(&self, mb: usize, at: usize, mut v: __m256) {
        let o = &self.o;
        let Some(activation) = self.activation else {
            let mut sums = [0.0f32; BLOCK];
            _mm256_storeu_ps(sums.as_mut_ptr(), v);
            finish_vector(
                self.p,
                o.bias,
                o.residual,
                at,
                mb,
                &sums,
                core::slice::from_raw_parts_mut(o.y.add(at), BLOCK),
            );
            return;
        };
        if !o.bias.is_null() {
            v = _mm256_add_ps(v, _mm256_loadu_ps(o.bias.add(mb * BLOCK)));
        }
        if !o.residual.is_null() {
            v = _mm256_add_ps(v, _mm256_loadu_ps(o.residual.add(at)));
        }
        _mm256_storeu_ps(o.y.add(at), activate(activation, v));
    }
}

/// The blocked convolution `p` (shape `s`) on the AVX2 kernel.
///
/// # Safety
/// As [`crate::generic::blocked::onnxc_conv_blocked_f32`]; the CPU has AVX2
/// and FMA.
pub(crate) unsafe fn conv(p: &ConvParams, s: &BlockedShape, o: BlockedOperands, parallel: *const Parallel) {
    let activation = tile_activation(p);
    let strides = Strides {
        pixel: s.strides[1] * BLOCK,
        tap_row: s.dilations[0] * s.in_w * BLOCK,
        tap_col: s.dilations[1] * BLOCK,
        in_block: s.in_h * s.in_w * BLOCK,
        w_tap: s.in_blocks * BLOCK * BLOCK,
        in_blocks: s.in_blocks,
        kernel_w: s.kernel[1],
    };
    let job = Job { p, s, o, strides, activation };
    // Tasks: block groups, their rows split when there are threads.
    let groups = s.out_blocks.div_ceil(3);
    let row_parts = if Parallel::is_threaded(parallel) { TASKS.div_ceil(groups * s.batch).min(s.out_h) } else { 1 };
    let per_image = groups * row_parts;
    Parallel::for_each(parallel, s.batch * per_image, |task| {
        let (n, task) = (task / per_image, task % per_image);
        job.run(n, task / row_parts, share(s.out_h, row_parts, task % row_parts));
    });
}
