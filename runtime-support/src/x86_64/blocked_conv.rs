//! x86-64 convolution in the blocked layout ([`crate::generic::blocked`]).
//!
//! A tile is a few output pixels × a few output blocks (8 channels each),
//! its sums in ymm registers over the whole depth: per input channel, one
//! weight vector per block is loaded and each pixel's input is one
//! broadcast, so a tile's outputs are whole-vector stores. Two tile sets:
//! 4 pixels × 3 blocks in the 16 registers of AVX2, and, where AVX-512 is
//! there, 6 pixels × 4 blocks in its 32 (still ymm: on Zen 4 a zmm FMA
//! does no more work than two ymm ones). The wider tile loads a third
//! fewer weights and broadcasts per FMA: most layers stream their weights
//! from L2 once per tile. Pointwise runs of four-block groups go at zmm
//! width ([`full_width`]), which cores with 512-bit units (Zen 5, Intel's
//! server cores) run twice as fast.
//!
//! Padding is never materialised. Output pixels are grouped by the kernel
//! taps that fall inside the input (the same rows and columns of the
//! kernel): the interior, each edge row or column, each corner. Each pixel
//! has its own input pointer, so a tile takes any pixels of one group,
//! across output rows: a 7×7 map is 25 interior pixels and four edges of
//! 5, not 7 rows of partial tiles. A group is cut into full tiles, the last
//! moved back over the one before (or, for a group smaller than a tile,
//! its last pixel repeated); the pixels computed twice get the same bits.
//! Groups of fewer than half a tile's pixels are computed a pixel at a
//! time, even and odd input channels summed apart so that enough FMA
//! chains are in flight.
//!
//! A group's last one to four pixels (of more than a tile) go in tiles of
//! two pixels where the block group is full, at a third of a tile's time.
//! Each asm call loops over a kernel row's taps. Pointwise layers run in
//! [`pointwise`]'s runs of tiles instead.
//!
//! An input of fewer than 8 channels (an image) is read in NCHW: the
//! pixel pointers move a plane per input channel, channels taken in pairs
//! (even and odd again) and the odd one left last. Such a stem's rows
//! inside the input run in [`stem`]'s runs of tiles.
//!
//! Work is split over (image, output block group, output rows, or a
//! pointwise layer's full tiles); rows or tiles are split only where there
//! are too few block groups to share out. Each output vector is computed
//! by one task in one order, so the result is the same for any thread
//! count.

use super::avx2::activate;
use crate::abi::conv::ConvParams;
use crate::generic::blocked::{finish_vector, BlockedOperands, BlockedShape, BLOCK};
use crate::generic::conv::tile_activation;
use crate::generic::prepacked::TileActivation;
use crate::isa::Isa;
use crate::parallel::{share, Parallel};
use core::arch::x86_64::*;
use core::ops::Range;

/// Tasks aimed for when there are threads.
const TASKS: usize = 16;
/// Fewest block-group tasks (an even number of them) that run unsplit.
const MIN_GROUP_TASKS: usize = 4;
/// Weights up to this size, of up to [`GROUPS_PER_TILE_MAX_BLOCKS`] output
/// blocks, are walked by every tile, one block group after another, so
/// that the tile's input is read from L1 for all but the first; otherwise
/// a block group runs at a time over all pixels, so that its weights stay
/// in L2 (the input then is read once per group). Each output block is a
/// stream of stores (and of residual loads) far from the others: a tile
/// walking more blocks than this runs ahead of the prefetchers (measured
/// on ResNet-50's 64 → 256 1×1 layers at 56², 12 % slower).
const GROUPS_PER_TILE_WEIGHT_BYTES: usize = 192 * 1024;
const GROUPS_PER_TILE_MAX_BLOCKS: usize = 8;

/// Where a tile reads: each pixel's window origin (which may lie outside
/// the input: only taps in `ky` × `kx` are read), the weights of its first
/// output block at tap (0, 0), and the distance in floats to the next
/// block's (0 for a lone block, whose second sums are discarded).
#[derive(Clone, Copy)]
struct TileInput<const P: usize> {
    x: [*const f32; P],
    w: *const f32,
    w_block: usize,
    ky: (usize, usize),
    kx: (usize, usize),
}

/// A group of output pixels with the same taps: their image and the
/// kernel rows and columns inside the input (computed once per group).
struct Place {
    n: usize,
    ky: (usize, usize),
    kx: (usize, usize),
}

/// The strides shared by every tile of a call, in floats unless named
/// bytes; the tap loop's asm reads the fields it needs from memory.
#[repr(C)]
struct Strides {
    /// Between kernel rows and columns in the input.
    tap_row: usize,
    tap_col: usize,
    /// Between input blocks (between input channels for an NCHW input).
    in_block: usize,
    /// Between kernel taps in the weights.
    w_tap: usize,
    kernel_w: usize,
    /// 1: the input is NCHW, its channels taken in pairs, the odd one
    /// (`odd_channel` 1) last.
    nchw_input: usize,
    /// Iterations of a tap's loop: input blocks, or pairs of NCHW channels.
    steps: usize,
    odd_channel: usize,
    /// Bytes from where a tap's loop leaves the pixel pointers to the
    /// next tap along the kernel row.
    next_tap: isize,
}

/// One input channel's step (the `$ci`th of its block): the weights at
/// byte offset `$wo` in each output block's panel (`$b at $panel`), then
/// per pixel `$p` a broadcast of its input at byte `$xo` and its FMAs into
/// `$c` with `$pb`. Vector operands are named with the `y` modifier, so
/// they may be any of AVX-512's 32 registers.
macro_rules! step {
    ($wo:literal, $xo:literal, [$($b:literal at $panel:literal),+], [$($p:literal => [$($c:literal * $pb:literal),+]),+]) => {
        concat!(
            $("vmovups {", $b, ":y}, [{w} + ", $panel, $wo, "]\n",)+
            $(
                "vbroadcastss {ai:y}, dword ptr [", $p, $xo, "]\n",
                $("vfmadd231ps {", $c, ":y}, {ai:y}, {", $pb, ":y}\n",)+
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

/// The loop over a tap's input channels when the input is NCHW: pairs of
/// steps (the first summing into `$even`'s registers, the second into
/// `$odd`'s), each followed by the pixel pointers' move to the next
/// channel's plane, then the odd channel left, if any.
macro_rules! channel_loop {
    ($blocks:tt, $even:tt, $odd:tt, [$($p:expr),+]) => {
        concat!(
            "test {k}, {k}\n",
            "jz 3f\n",
            "2:\n",
            step!("0", "0", $blocks, $even),
            $("add {", $p, "}, {ib}\n",)+
            step!("32", "0", $blocks, $odd),
            $("add {", $p, "}, {ib}\n",)+
            "add {w}, 64\n",
            "dec {k}\n",
            "jnz 2b\n",
            "3:\n",
            "cmp qword ptr [{s} + {odd_channel}], 0\n",
            "jz 4f\n",
            step!("0", "0", $blocks, $even),
            "add {w}, 32\n",
            "4:\n",
        )
    };
}

/// The end of an asm loop over runs of tiles: the bias, the residual and
/// the clamp on the tile's sums `$acc` (per output block, `$bias_at` its
/// bias offset; per pixel, `$po` its output offset), their stores, then
/// the next tile (`$tile_bytes` on in the output) while `{n}` counts down
/// to label 7. Reads the run's fields at `{s}` (a [`RunEnd`] at the
/// offsets named `bias`, `has_residual`, `residual`, `out_block`, `clamp`,
/// `lo`, `hi`); the clamp's bounds go in the vector registers `$lo`, `$hi`.
macro_rules! run_epilogue {
    ($tile_bytes:literal, clamp in $lo:literal, $hi:literal, [$($bias_at:literal => [$($acc:ident at $po:literal),+]),+]) => {
        concat!(
            "mov {k}, [{s} + {bias}]\n",
            "test {k}, {k}\n",
            "jz 3f\n",
            $($(concat!("vaddps {", stringify!($acc), ":y}, {", stringify!($acc), ":y}, [{k} + ", $bias_at, "]\n"),)+)+
            "3:\n",
            "cmp qword ptr [{s} + {has_residual}], 0\n",
            "je 4f\n",
            "mov {r}, [{s} + {residual}]\n",
            "add {r}, {y}\n",
            $(
                $(concat!("vaddps {", stringify!($acc), ":y}, {", stringify!($acc), ":y}, [{r} + ", $po, "]\n"),)+
                "add {r}, [{s} + {out_block}]\n",
            )+
            "4:\n",
            "cmp qword ptr [{s} + {clamp}], 0\n",
            "je 5f\n",
            concat!("vbroadcastss {", $lo, ":y}, dword ptr [{s} + {lo}]\n"),
            concat!("vbroadcastss {", $hi, ":y}, dword ptr [{s} + {hi}]\n"),
            $($(concat!(
                "vminps {", stringify!($acc), ":y}, {", $hi, ":y}, {", stringify!($acc), ":y}\n",
                "vmaxps {", stringify!($acc), ":y}, {", $lo, ":y}, {", stringify!($acc), ":y}\n",
            ),)+)+
            "5:\n",
            "mov {r}, {y}\n",
            $(
                $(concat!("vmovups [{r} + ", $po, "], {", stringify!($acc), ":y}\n"),)+
                "add {r}, [{s} + {out_block}]\n",
            )+
            concat!("add {y}, ", $tile_bytes, "\n"),
            "dec {n}\n",
            "jnz 7b\n",
        )
    };
}

/// An asm loop over `$n` tiles of a run ([`pointwise`]'s and [`stem`]'s):
/// zeroes the tile's sums `$acc` with `$zero`, runs the templates `$sums`
/// (which add the tile's products and leave `{x}` and `{w}` at the next
/// tile's input and weights), then [`run_epilogue!`]. The run's fields are
/// read at `$end`, whose [`RunEnd`] is at byte `$run`; `$extra` are the
/// sums' own operands.
macro_rules! tile_run {
    ($zero:literal, $class:ident, $tile_bytes:literal, [$($sums:expr),+ $(,)?],
     x = $x:expr, w = $w:expr, [$($b:ident),+], [$($ws:ident = $wm:literal),+], w_block = $w_block:expr,
     ib = $ib:expr, y = $y:expr, tiles = $n:expr, end = $end:expr, run at $run:expr, [$($extra:tt)*],
     clamp in $lo:literal, $hi:literal, [$($bias_at:literal => [$($acc:ident at $po:literal),+]),+]) => {
        core::arch::asm!(
            "7:\n",
            $($(concat!($zero, " {", stringify!($acc), ":y}, {", stringify!($acc), ":y}, {", stringify!($acc), ":y}\n"),)+)+
            $($sums,)+
            run_epilogue!($tile_bytes, clamp in $lo, $hi, [$($bias_at => [$($acc at $po),+]),+]),
            x = inout(reg) $x => _,
            w = inout(reg) $w => _,
            k = out(reg) _,
            $($ws = in(reg) $w_block * 4 * $wm,)+
            ib = in(reg) $ib * 4,
            y = inout(reg) $y => _,
            n = inout(reg) $n => _,
            r = out(reg) _,
            s = in(reg) $end,
            steps = const $run + core::mem::offset_of!(RunEnd, steps),
            x_back = const $run + core::mem::offset_of!(RunEnd, x_back),
            w_back = const $run + core::mem::offset_of!(RunEnd, w_back),
            out_block = const $run + core::mem::offset_of!(RunEnd, out_block),
            residual = const $run + core::mem::offset_of!(RunEnd, residual),
            bias = const $run + core::mem::offset_of!(RunEnd, bias),
            has_residual = const $run + core::mem::offset_of!(RunEnd, has_residual),
            clamp = const $run + core::mem::offset_of!(RunEnd, clamp),
            lo = const $run + core::mem::offset_of!(RunEnd, lo),
            hi = const $run + core::mem::offset_of!(RunEnd, hi),
            $($extra)*
            // Typed as ymm (an untyped one takes no vector register).
            $($b = inout($class) _mm256_setzero_ps() => _,)+
            ai = inout($class) _mm256_setzero_ps() => _,
            $($($acc = inout($class) _mm256_setzero_ps() => _,)+)+
            options(nostack),
        )
    };
}

/// A function adding a tile's products over every tap in its ranges into
/// `acc[$i][$j]`, with the asm loop over each tap's input blocks: pixel
/// pointers `$p`, weights in `$b` (registers of class `$class`; the
/// weight panels at multiples `$wm` of the block distance in `$ws`), even
/// and odd input channels' FMAs as `$even` and `$odd` list them.
macro_rules! tile_sums {
    // Tiles of several pixels: the same FMAs for even and odd channels.
    ($(#[$doc:meta])* $name:ident, $features:literal, $class:ident, $px:literal, $rows:literal, $blocks:literal,
     $pixels:tt, $b:tt, $ws:tt, $block_list:tt, every $fmas:tt, $accs:tt) => {
        tile_sums!($(#[$doc])* $name, $features, $class, $px, $rows, $blocks, $pixels, $b, $ws, $block_list, $fmas, $fmas, $accs);
    };
    ($(#[$doc:meta])* $name:ident, $features:literal, $class:ident, $px:literal, $rows:literal, $blocks:literal,
     [$($p:ident = $pi:literal),+], [$($b:ident),+], [$($ws:ident = $wm:literal),+],
     $block_list:tt, $even:tt, $odd:tt, [$($c:ident = $i:literal, $j:literal);+]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Every tap in the ranges is inside the input; the CPU has the
        /// features enabled here.
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn $name(t: TileInput<$px>, s: &Strides) -> [[__m256; $blocks]; $rows] {
            let mut acc = [[_mm256_setzero_ps(); $blocks]; $rows];
            if t.kx.0 == t.kx.1 {
                return acc;
            }
            // A kernel row's taps are one asm loop: a tap's weights follow
            // the one before's.
            for ky in t.ky.0..t.ky.1 {
                let tap = ky * s.tap_row + t.kx.0 * s.tap_col;
                let w = t.w.add((ky * s.kernel_w + t.kx.0) * s.w_tap);
                // Scratch vectors are typed as ymm (an untyped scratch
                // would take the class's zmm width and ignore the `y`
                // modifier).
                core::arch::asm!(
                    "8:\n",
                    "mov {k}, [{s} + {steps}]\n",
                    "cmp qword ptr [{s} + {nchw}], 0\n",
                    "jnz 5f\n",
                    block_loop!($block_list, $even, $odd, [$(stringify!($p)),+]),
                    "jmp 6f\n",
                    "5:\n",
                    channel_loop!($block_list, $even, $odd, [$(stringify!($p)),+]),
                    "6:\n",
                    $(concat!("add {", stringify!($p), "}, [{s} + {next_tap}]\n"),)+
                    "dec {kx}\n",
                    "jnz 8b\n",
                    s = in(reg) s,
                    steps = const core::mem::offset_of!(Strides, steps),
                    nchw = const core::mem::offset_of!(Strides, nchw_input),
                    odd_channel = const core::mem::offset_of!(Strides, odd_channel),
                    next_tap = const core::mem::offset_of!(Strides, next_tap),
                    kx = inout(reg) t.kx.1 - t.kx.0 => _,
                    w = inout(reg) w => _,
                    k = out(reg) _,
                    $($ws = in(reg) t.w_block * 4 * $wm,)+
                    ib = in(reg) s.in_block * 4,
                    $($p = inout(reg) t.x[$pi].wrapping_add(tap) => _,)+
                    $($b = inout($class) _mm256_setzero_ps() => _,)+
                    ai = inout($class) _mm256_setzero_ps() => _,
                    $($c = inout($class) acc[$i][$j],)+
                    options(nostack, readonly),
                );
            }
            acc
        }
    };
}

tile_sums!(
    /// The sums of four pixels × three output blocks (AVX2).
    sums4x3, "avx2,fma", ymm_reg, 4, 4, 3, [p0 = 0, p1 = 1, p2 = 2, p3 = 3], [b0, b1, b2], [ws = 1],
    ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + "],
    every ["{p0} + " => ["c00" * "b0", "c01" * "b1", "c02" * "b2"],
     "{p1} + " => ["c10" * "b0", "c11" * "b1", "c12" * "b2"],
     "{p2} + " => ["c20" * "b0", "c21" * "b1", "c22" * "b2"],
     "{p3} + " => ["c30" * "b0", "c31" * "b1", "c32" * "b2"]],
    [c00 = 0, 0; c01 = 0, 1; c02 = 0, 2; c10 = 1, 0; c11 = 1, 1; c12 = 1, 2; c20 = 2, 0; c21 = 2, 1; c22 = 2, 2; c30 = 3, 0; c31 = 3, 1; c32 = 3, 2]
);

tile_sums!(
    /// The sums of four pixels × two output blocks (AVX2).
    sums4x2, "avx2,fma", ymm_reg, 4, 4, 2, [p0 = 0, p1 = 1, p2 = 2, p3 = 3], [b0, b1], [ws = 1],
    ["b0" at "", "b1" at "{ws} + "],
    every ["{p0} + " => ["c00" * "b0", "c01" * "b1"],
     "{p1} + " => ["c10" * "b0", "c11" * "b1"],
     "{p2} + " => ["c20" * "b0", "c21" * "b1"],
     "{p3} + " => ["c30" * "b0", "c31" * "b1"]],
    [c00 = 0, 0; c01 = 0, 1; c10 = 1, 0; c11 = 1, 1; c20 = 2, 0; c21 = 2, 1; c30 = 3, 0; c31 = 3, 1]
);

tile_sums!(
    /// The sums of six pixels × four output blocks (AVX-512's 32 registers).
    sums6x4, "avx512f,avx512vl,avx2,fma", zmm_reg, 6, 6, 4, [p0 = 0, p1 = 1, p2 = 2, p3 = 3, p4 = 4, p5 = 5], [b0, b1, b2, b3], [ws = 1, ws3 = 3],
    ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + ", "b3" at "{ws3} + "],
    every ["{p0} + " => ["c00" * "b0", "c01" * "b1", "c02" * "b2", "c03" * "b3"],
     "{p1} + " => ["c10" * "b0", "c11" * "b1", "c12" * "b2", "c13" * "b3"],
     "{p2} + " => ["c20" * "b0", "c21" * "b1", "c22" * "b2", "c23" * "b3"],
     "{p3} + " => ["c30" * "b0", "c31" * "b1", "c32" * "b2", "c33" * "b3"],
     "{p4} + " => ["c40" * "b0", "c41" * "b1", "c42" * "b2", "c43" * "b3"],
     "{p5} + " => ["c50" * "b0", "c51" * "b1", "c52" * "b2", "c53" * "b3"]],
    [c00 = 0, 0; c01 = 0, 1; c02 = 0, 2; c03 = 0, 3; c10 = 1, 0; c11 = 1, 1; c12 = 1, 2; c13 = 1, 3; c20 = 2, 0; c21 = 2, 1; c22 = 2, 2; c23 = 2, 3; c30 = 3, 0; c31 = 3, 1; c32 = 3, 2; c33 = 3, 3; c40 = 4, 0; c41 = 4, 1; c42 = 4, 2; c43 = 4, 3; c50 = 5, 0; c51 = 5, 1; c52 = 5, 2; c53 = 5, 3]
);

tile_sums!(
    /// The sums of two pixels × four output blocks, for the last few
    /// pixels of a group (eight FMA chains: a third of a 6 × 4 tile's time).
    sums2x4, "avx2,fma", ymm_reg, 2, 2, 4, [p0 = 0, p1 = 1], [b0, b1, b2, b3], [ws = 1, ws3 = 3],
    ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + ", "b3" at "{ws3} + "],
    every ["{p0} + " => ["c00" * "b0", "c01" * "b1", "c02" * "b2", "c03" * "b3"],
     "{p1} + " => ["c10" * "b0", "c11" * "b1", "c12" * "b2", "c13" * "b3"]],
    [c00 = 0, 0; c01 = 0, 1; c02 = 0, 2; c03 = 0, 3; c10 = 1, 0; c11 = 1, 1; c12 = 1, 2; c13 = 1, 3]
);

tile_sums!(
    /// The sums of six pixels × three output blocks (AVX-512's 32 registers).
    sums6x3, "avx512f,avx512vl,avx2,fma", zmm_reg, 6, 6, 3, [p0 = 0, p1 = 1, p2 = 2, p3 = 3, p4 = 4, p5 = 5], [b0, b1, b2], [ws = 1],
    ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + "],
    every ["{p0} + " => ["c00" * "b0", "c01" * "b1", "c02" * "b2"],
     "{p1} + " => ["c10" * "b0", "c11" * "b1", "c12" * "b2"],
     "{p2} + " => ["c20" * "b0", "c21" * "b1", "c22" * "b2"],
     "{p3} + " => ["c30" * "b0", "c31" * "b1", "c32" * "b2"],
     "{p4} + " => ["c40" * "b0", "c41" * "b1", "c42" * "b2"],
     "{p5} + " => ["c50" * "b0", "c51" * "b1", "c52" * "b2"]],
    [c00 = 0, 0; c01 = 0, 1; c02 = 0, 2; c10 = 1, 0; c11 = 1, 1; c12 = 1, 2; c20 = 2, 0; c21 = 2, 1; c22 = 2, 2; c30 = 3, 0; c31 = 3, 1; c32 = 3, 2; c40 = 4, 0; c41 = 4, 1; c42 = 4, 2; c50 = 5, 0; c51 = 5, 1; c52 = 5, 2]
);

tile_sums!(
    /// The sums of six pixels × two output blocks.
    sums6x2, "avx512f,avx512vl,avx2,fma", zmm_reg, 6, 6, 2, [p0 = 0, p1 = 1, p2 = 2, p3 = 3, p4 = 4, p5 = 5], [b0, b1], [ws = 1],
    ["b0" at "", "b1" at "{ws} + "],
    every ["{p0} + " => ["c00" * "b0", "c01" * "b1"],
     "{p1} + " => ["c10" * "b0", "c11" * "b1"],
     "{p2} + " => ["c20" * "b0", "c21" * "b1"],
     "{p3} + " => ["c30" * "b0", "c31" * "b1"],
     "{p4} + " => ["c40" * "b0", "c41" * "b1"],
     "{p5} + " => ["c50" * "b0", "c51" * "b1"]],
    [c00 = 0, 0; c01 = 0, 1; c10 = 1, 0; c11 = 1, 1; c20 = 2, 0; c21 = 2, 1; c30 = 3, 0; c31 = 3, 1; c40 = 4, 0; c41 = 4, 1; c50 = 5, 0; c51 = 5, 1]
);

tile_sums!(
    /// The sums of one pixel × four output blocks, over the even input
    /// channels in row 0 and the odd ones in row 1 (so that eight chains of
    /// FMAs are in flight, not four).
    sums1x4, "avx2,fma", ymm_reg, 1, 2, 4, [p0 = 0], [b0, b1, b2, b3], [ws = 1, ws3 = 3],
    ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + ", "b3" at "{ws3} + "],
    ["{p0} + " => ["c00" * "b0", "c01" * "b1", "c02" * "b2", "c03" * "b3"]],
    ["{p0} + " => ["c10" * "b0", "c11" * "b1", "c12" * "b2", "c13" * "b3"]],
    [c00 = 0, 0; c01 = 0, 1; c02 = 0, 2; c03 = 0, 3; c10 = 1, 0; c11 = 1, 1; c12 = 1, 2; c13 = 1, 3]
);

tile_sums!(
    /// The sums of one pixel × three output blocks, even and odd input
    /// channels apart.
    sums1x3, "avx2,fma", ymm_reg, 1, 2, 3, [p0 = 0], [b0, b1, b2], [ws = 1],
    ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + "],
    ["{p0} + " => ["c00" * "b0", "c01" * "b1", "c02" * "b2"]],
    ["{p0} + " => ["c10" * "b0", "c11" * "b1", "c12" * "b2"]],
    [c00 = 0, 0; c01 = 0, 1; c02 = 0, 2; c10 = 1, 0; c11 = 1, 1; c12 = 1, 2]
);

tile_sums!(
    /// The sums of one pixel × two output blocks, even and odd input
    /// channels apart.
    sums1x2, "avx2,fma", ymm_reg, 1, 2, 2, [p0 = 0], [b0, b1], [ws = 1],
    ["b0" at "", "b1" at "{ws} + "],
    ["{p0} + " => ["c00" * "b0", "c01" * "b1"]],
    ["{p0} + " => ["c10" * "b0", "c11" * "b1"]],
    [c00 = 0, 0; c01 = 0, 1; c10 = 1, 0; c11 = 1, 1]
);

/// Hands a run kernel macro (`$kernel`: `pointwise_tiles` or
/// `stem_tiles`) one tile shape's registers and instruction set for the
/// function `$name`: its weight registers, each pixel's FMAs (pixel `p`
/// read at `$p`, an address prefix such as `"{x} + 32 + "`) and each
/// output block's stores (pixel `p` at `32 * p`, block `j`'s bias at
/// `32 * j`). One macro per shape, so that a shape's tables are written once.
///
/// Six pixels × four blocks (AVX-512's 32 registers).
macro_rules! run_tiles_6x4 {
    ($kernel:ident, $(#[$doc:meta])* $name:ident, [$p0:literal, $p1:literal, $p2:literal, $p3:literal, $p4:literal, $p5:literal]) => {
        $kernel!(
            $(#[$doc])* $name, "avx512f,avx512vl,avx2,fma", zmm_reg, "vpxord", "192", [b0, b1, b2, b3], [ws = 1, ws3 = 3],
            ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + ", "b3" at "{ws3} + "],
            [$p0 => ["c00" * "b0", "c01" * "b1", "c02" * "b2", "c03" * "b3"],
             $p1 => ["c10" * "b0", "c11" * "b1", "c12" * "b2", "c13" * "b3"],
             $p2 => ["c20" * "b0", "c21" * "b1", "c22" * "b2", "c23" * "b3"],
             $p3 => ["c30" * "b0", "c31" * "b1", "c32" * "b2", "c33" * "b3"],
             $p4 => ["c40" * "b0", "c41" * "b1", "c42" * "b2", "c43" * "b3"],
             $p5 => ["c50" * "b0", "c51" * "b1", "c52" * "b2", "c53" * "b3"]],
            ["0" => [c00 at "0", c10 at "32", c20 at "64", c30 at "96", c40 at "128", c50 at "160"],
             "32" => [c01 at "0", c11 at "32", c21 at "64", c31 at "96", c41 at "128", c51 at "160"],
             "64" => [c02 at "0", c12 at "32", c22 at "64", c32 at "96", c42 at "128", c52 at "160"],
             "96" => [c03 at "0", c13 at "32", c23 at "64", c33 at "96", c43 at "128", c53 at "160"]]
        );
    };
}

/// [`run_tiles_6x4!`] for six pixels × three blocks (AVX-512).
macro_rules! run_tiles_6x3 {
    ($kernel:ident, $(#[$doc:meta])* $name:ident, [$p0:literal, $p1:literal, $p2:literal, $p3:literal, $p4:literal, $p5:literal]) => {
        $kernel!(
            $(#[$doc])* $name, "avx512f,avx512vl,avx2,fma", zmm_reg, "vpxord", "192", [b0, b1, b2], [ws = 1],
            ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + "],
            [$p0 => ["c00" * "b0", "c01" * "b1", "c02" * "b2"],
             $p1 => ["c10" * "b0", "c11" * "b1", "c12" * "b2"],
             $p2 => ["c20" * "b0", "c21" * "b1", "c22" * "b2"],
             $p3 => ["c30" * "b0", "c31" * "b1", "c32" * "b2"],
             $p4 => ["c40" * "b0", "c41" * "b1", "c42" * "b2"],
             $p5 => ["c50" * "b0", "c51" * "b1", "c52" * "b2"]],
            ["0" => [c00 at "0", c10 at "32", c20 at "64", c30 at "96", c40 at "128", c50 at "160"],
             "32" => [c01 at "0", c11 at "32", c21 at "64", c31 at "96", c41 at "128", c51 at "160"],
             "64" => [c02 at "0", c12 at "32", c22 at "64", c32 at "96", c42 at "128", c52 at "160"]]
        );
    };
}

/// [`run_tiles_6x4!`] for six pixels × two blocks (AVX-512).
macro_rules! run_tiles_6x2 {
    ($kernel:ident, $(#[$doc:meta])* $name:ident, [$p0:literal, $p1:literal, $p2:literal, $p3:literal, $p4:literal, $p5:literal]) => {
        $kernel!(
            $(#[$doc])* $name, "avx512f,avx512vl,avx2,fma", zmm_reg, "vpxord", "192", [b0, b1], [ws = 1],
            ["b0" at "", "b1" at "{ws} + "],
            [$p0 => ["c00" * "b0", "c01" * "b1"],
             $p1 => ["c10" * "b0", "c11" * "b1"],
             $p2 => ["c20" * "b0", "c21" * "b1"],
             $p3 => ["c30" * "b0", "c31" * "b1"],
             $p4 => ["c40" * "b0", "c41" * "b1"],
             $p5 => ["c50" * "b0", "c51" * "b1"]],
            ["0" => [c00 at "0", c10 at "32", c20 at "64", c30 at "96", c40 at "128", c50 at "160"],
             "32" => [c01 at "0", c11 at "32", c21 at "64", c31 at "96", c41 at "128", c51 at "160"]]
        );
    };
}

/// [`run_tiles_6x4!`] for two pixels × four blocks (AVX-512), a run's last pixels.
macro_rules! run_tiles_2x4 {
    ($kernel:ident, $(#[$doc:meta])* $name:ident, [$p0:literal, $p1:literal]) => {
        $kernel!(
            $(#[$doc])* $name, "avx512f,avx512vl,avx2,fma", zmm_reg, "vpxord", "64", [b0, b1, b2, b3], [ws = 1, ws3 = 3],
            ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + ", "b3" at "{ws3} + "],
            [$p0 => ["c00" * "b0", "c01" * "b1", "c02" * "b2", "c03" * "b3"],
             $p1 => ["c10" * "b0", "c11" * "b1", "c12" * "b2", "c13" * "b3"]],
            ["0" => [c00 at "0", c10 at "32"],
             "32" => [c01 at "0", c11 at "32"],
             "64" => [c02 at "0", c12 at "32"],
             "96" => [c03 at "0", c13 at "32"]]
        );
    };
}

/// [`run_tiles_6x4!`] for four pixels × three blocks (AVX2's 16 registers).
macro_rules! run_tiles_4x3 {
    ($kernel:ident, $(#[$doc:meta])* $name:ident, [$p0:literal, $p1:literal, $p2:literal, $p3:literal]) => {
        $kernel!(
            $(#[$doc])* $name, "avx2,fma", ymm_reg, "vxorps", "128", [b0, b1, b2], [ws = 1],
            ["b0" at "", "b1" at "{ws} + ", "b2" at "{ws}*2 + "],
            [$p0 => ["c00" * "b0", "c01" * "b1", "c02" * "b2"],
             $p1 => ["c10" * "b0", "c11" * "b1", "c12" * "b2"],
             $p2 => ["c20" * "b0", "c21" * "b1", "c22" * "b2"],
             $p3 => ["c30" * "b0", "c31" * "b1", "c32" * "b2"]],
            ["0" => [c00 at "0", c10 at "32", c20 at "64", c30 at "96"],
             "32" => [c01 at "0", c11 at "32", c21 at "64", c31 at "96"],
             "64" => [c02 at "0", c12 at "32", c22 at "64", c32 at "96"]]
        );
    };
}

/// [`run_tiles_6x4!`] for four pixels × two blocks (AVX2).
macro_rules! run_tiles_4x2 {
    ($kernel:ident, $(#[$doc:meta])* $name:ident, [$p0:literal, $p1:literal, $p2:literal, $p3:literal]) => {
        $kernel!(
            $(#[$doc])* $name, "avx2,fma", ymm_reg, "vxorps", "128", [b0, b1], [ws = 1],
            ["b0" at "", "b1" at "{ws} + "],
            [$p0 => ["c00" * "b0", "c01" * "b1"],
             $p1 => ["c10" * "b0", "c11" * "b1"],
             $p2 => ["c20" * "b0", "c21" * "b1"],
             $p3 => ["c30" * "b0", "c31" * "b1"]],
            ["0" => [c00 at "0", c10 at "32", c20 at "64", c30 at "96"],
             "32" => [c01 at "0", c11 at "32", c21 at "64", c31 at "96"]]
        );
    };
}

mod full_width;
pub(crate) mod gathered;
mod pointwise;
mod stem;

use super::conv_activation::VectorActivation;
use pointwise::{pointwise_end, RunEnd};
use stem::{stem_end, StemEnd};

/// A blocked output vector's epilogue, `activation((sums + bias) + residual)`.
#[derive(Clone, Copy)]
pub(super) struct Epilogue {
    /// The activation when it is a select (`TileActivation::None` when it
    /// is a [`VectorActivation`]), else `None` (then the portable epilogue
    /// finishes each vector).
    pub activation: Option<TileActivation>,
    /// The activation when it is not a select but the vectors have it:
    /// applied after the select-free epilogue.
    pub vector_activation: Option<VectorActivation>,
}

impl Epilogue {
    pub(super) fn of(p: &ConvParams) -> Epilogue {
        let vector_activation = VectorActivation::of(p);
        let activation = if vector_activation.is_some() { Some(TileActivation::None) } else { tile_activation(p) };
        Epilogue { activation, vector_activation }
    }

    /// Stores the sums `v` of output block `mb` at float `at` of `o`, finished.
    ///
    /// # Safety
    /// As the blocked convolution `p` of `o`; the CPU has AVX2 and FMA.
    #[inline(always)]
    pub(super) unsafe fn finish(&self, p: &ConvParams, o: &BlockedOperands, mb: usize, at: usize, mut v: __m256) {
        let Some(activation) = self.activation else {
            let mut sums = [0.0f32; BLOCK];
            _mm256_storeu_ps(sums.as_mut_ptr(), v);
            finish_vector(p, o.bias, o.residual, at, mb, &sums, core::slice::from_raw_parts_mut(o.y.add(at), BLOCK));
            return;
        };
        if !o.bias.is_null() {
            v = _mm256_add_ps(v, _mm256_loadu_ps(o.bias.add(mb * BLOCK)));
        }
        if !o.residual.is_null() {
            v = _mm256_add_ps(v, _mm256_loadu_ps(o.residual.add(at)));
        }
        v = activate(activation, v);
        if let Some(vector_activation) = self.vector_activation {
            v = vector_activation.apply(v);
        }
        _mm256_storeu_ps(o.y.add(at), v);
    }
}

/// One call's convolution, shared by its tasks.
struct Job<'a> {
    p: &'a ConvParams,
    s: &'a BlockedShape,
    o: BlockedOperands,
    strides: Strides,
    epilogue: Epilogue,
    /// Whether the AVX-512 tiles (6 pixels × 4 blocks) run, else the AVX2 ones.
    wide: bool,
    /// Floats between the input's pixels.
    pixel_step: usize,
    /// Whether each tile walks every block group of its task.
    groups_per_tile: bool,
    /// For a pointwise layer with a clamp or no activation: its runs' end.
    run_end: Option<RunEnd>,
    /// For a stem with a clamp or no activation: its runs' end.
    stem_end: Option<StemEnd>,
}

/// The output block groups of `blocks` blocks, `most` at a time: groups
/// of `most`, then what is left (a left-over single block is joined to the
/// last full group and the two halved, since one-block tiles waste half
/// their loads). Group `g`: (first block, blocks). There are
/// `blocks.div_ceil(most)` groups.
fn block_group(blocks: usize, most: usize, g: usize) -> (usize, usize) {
    let full = if blocks % most == 1 && blocks > 1 { blocks / most - 1 } else { blocks / most };
    let (first, rest) = (most * full, blocks - most * full);
    if g < full {
        (most * g, most)
    } else if rest <= most {
        (first, rest)
    } else if g == full {
        (first, rest.div_ceil(2))
    } else {
        (first + rest.div_ceil(2), rest / 2)
    }
}

/// Pixels and most output blocks of a full tile: the AVX-512 set's
/// (`wide`) or the AVX2 one's.
fn tile_shape(wide: bool) -> (usize, usize) {
    if wide {
        (6, 4)
    } else {
        (4, 3)
    }
}

/// A one-pixel tile's sums from its even and odd input channels' halves.
#[inline(always)]
unsafe fn halves<const B: usize>([even, odd]: [[__m256; B]; 2]) -> [[__m256; B]; 1] {
    [core::array::from_fn(|j| _mm256_add_ps(even[j], odd[j]))]
}

impl<'a> Job<'a> {
    /// The job of convolution `p` (shape `s`) with the AVX-512 tiles
    /// (`wide`) or AVX2's, its input blocks `plane` floats apart (by
    /// default a map's: gathered windows are closer).
    fn new(p: &'a ConvParams, s: &'a BlockedShape, o: BlockedOperands, wide: bool, plane: Option<usize>) -> Job<'a> {
        let epilogue = Epilogue::of(p);
        // An NCHW input's pixels are consecutive floats, its channels planes apart.
        let pixel_step = if s.nchw_input { 1 } else { BLOCK };
        let plane = plane.unwrap_or(s.in_h * s.in_w * pixel_step);
        let strides = Strides {
            tap_row: s.dilations[0] * s.in_w * pixel_step,
            tap_col: s.dilations[1] * pixel_step,
            in_block: plane,
            w_tap: s.in_channels * BLOCK,
            kernel_w: s.kernel[1],
            nchw_input: usize::from(s.nchw_input),
            steps: if s.nchw_input { s.in_channels / 2 } else { s.in_blocks },
            odd_channel: if s.nchw_input { s.in_channels % 2 } else { 0 },
            // A block step moves the pointers a block, an NCHW channel a plane
            // (the odd channel left last does not move them).
            next_tap: (s.dilations[1] * pixel_step * 4) as isize
                - (if s.nchw_input { s.in_channels / 2 * 2 } else { s.in_blocks } * plane * 4) as isize,
        };
        let groups_per_tile = s.out_blocks * s.weights_per_block() * 4 <= GROUPS_PER_TILE_WEIGHT_BYTES
            && s.out_blocks <= GROUPS_PER_TILE_MAX_BLOCKS;
        let run_end = pointwise_end(s, &o, epilogue.activation, wide, plane);
        let stem_end = stem_end(s, &o, epilogue.activation, wide);
        Job { p, s, o, strides, epilogue, wide, pixel_step, groups_per_tile, run_end, stem_end }
    }
}

impl Job<'_> {
    /// Pixels of a full tile.
    fn tile_pixels(&self) -> usize {
        tile_shape(self.wide).0
    }

    /// Output rows `rows` of block groups `groups` of image `n`, a group of
    /// pixels with the same taps at a time.
    ///
    /// # Safety
    /// As [`conv`]; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run(&self, n: usize, groups: Range<usize>, rows: Range<usize>) {
        let s = self.s;
        // Columns whose window lies inside the input's width share their
        // taps; every other column has its own.
        let (sw, dw, pw) = (s.strides[1], s.dilations[1], s.pads[1]);
        let inner_start = pw.div_ceil(sw).min(s.out_w);
        let reach = (s.kernel[1] - 1) * dw;
        let inner_end = if s.in_w + pw > reach { ((s.in_w + pw - reach - 1) / sw + 1).min(s.out_w) } else { 0 };
        let inner_end = inner_end.max(inner_start);
        let columns = (0..inner_start)
            .map(|c| c..c + 1)
            .chain(core::iter::once(inner_start..inner_end))
            .chain((inner_end..s.out_w).map(|c| c..c + 1))
            .filter(|c| !c.is_empty());
        let mut oy = rows.start;
        while oy < rows.end {
            let run = self.same_row_taps(oy);
            let part = oy..run.end.min(rows.end);
            let full_rows = s.taps(0, oy, s.in_h).len() == s.kernel[0];
            for cols in columns.clone() {
                let inside = full_rows && s.taps(1, cols.start, s.in_w).len() == s.kernel[1];
                match &self.stem_end {
                    Some(end) if inside && cols.len() >= self.tile_pixels() => {
                        self.stem_rows(n, groups.clone(), part.clone(), cols, run.len(), end)
                    }
                    _ => {
                        // Whether to tile depends on the whole image's
                        // group, not on this task's part of it: a pixel
                        // gets the same bits whatever the thread split.
                        let tiled = 2 * run.len() * cols.len() > self.tile_pixels();
                        self.pixels(n, groups.clone(), part.clone(), cols, tiled)
                    }
                }
            }
            oy = part.end;
        }
    }

    /// The place of the pixels of image `n` that share output pixel
    /// (`oy`, `ox`)'s taps.
    fn place(&self, n: usize, (oy, ox): (usize, usize)) -> Place {
        let (ky, kx) = (self.s.taps(0, oy, self.s.in_h), self.s.taps(1, ox, self.s.in_w));
        Place { n, ky: (ky.start, ky.end), kx: (kx.start, kx.end) }
    }

    /// The output rows around `oy` whose kernel rows inside the input are `oy`'s.
    fn same_row_taps(&self, oy: usize) -> Range<usize> {
        let s = self.s;
        let taps = s.taps(0, oy, s.in_h);
        let start = (0..oy).rev().take_while(|&r| s.taps(0, r, s.in_h) == taps).last().unwrap_or(oy);
        let end = (oy + 1..s.out_h).take_while(|&r| s.taps(0, r, s.in_h) == taps).last().map_or(oy + 1, |r| r + 1);
        start..end
    }

    /// The pixels `rows` × `cols`, which share their taps, for each block
    /// group in `groups` in turn: in full tiles (the last moved back, or its
    /// last pixel repeated when there are fewer) when `tiled`, else a pixel
    /// at a time.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pixels(&self, n: usize, groups: Range<usize>, rows: Range<usize>, cols: Range<usize>, tiled: bool) {
        let (count, width) = (rows.len() * cols.len(), cols.len());
        let at = |i: usize| (rows.start + i / width, cols.start + i % width);
        let blocks = |g| block_group(self.s.out_blocks, tile_shape(self.wide).1, g);
        let place = self.place(n, (rows.start, cols.start));
        if !tiled {
            for i in 0..count {
                for (mb, blocks) in groups.clone().map(blocks) {
                    self.single(&place, mb, blocks, at(i));
                }
            }
            return;
        }
        let px = self.tile_pixels();
        let tiles = count.div_ceil(px);
        // With AVX-512, the last one to four pixels of a group of more
        // than a tile go in pairs where the block group is full.
        let paired_tail = self.wide && count > px && (1..=4).contains(&(count % px));
        for t in 0..tiles {
            if paired_tail && t + 1 == tiles {
                for (mb, blocks) in groups.clone().map(blocks) {
                    if blocks == 4 {
                        let pairs = (count % px).div_ceil(2);
                        for first in (count - 2 * pairs..count).step_by(2) {
                            self.pair_tile(&place, mb, [at(first), at(first + 1)]);
                        }
                    } else {
                        self.wide_tile(&place, mb, blocks, core::array::from_fn(|i| at(count - px + i)), px);
                    }
                }
                break;
            }
            let first = (t * px).min(count.saturating_sub(px));
            let stored = px.min(count - first);
            // The tile's pixels in order (no division per pixel), the
            // last one repeated past the group's end.
            let (mut next, mut left) = (at(first), stored);
            let pixel = |_| {
                let this = next;
                if left > 1 {
                    left -= 1;
                    next = if this.1 + 1 == cols.end { (this.0 + 1, cols.start) } else { (this.0, this.1 + 1) };
                }
                this
            };
            if self.wide {
                let pixels = core::array::from_fn(pixel);
                for (mb, blocks) in groups.clone().map(blocks) {
                    self.wide_tile(&place, mb, blocks, pixels, stored);
                }
            } else {
                let pixels = core::array::from_fn(pixel);
                for (mb, blocks) in groups.clone().map(blocks) {
                    self.narrow_tile(&place, mb, blocks, pixels, stored);
                }
            }
        }
    }

    /// Where the tile of output `pixels` (sharing their taps) and `blocks`
    /// blocks from `mb` reads, and where each pixel's first block is stored.
    #[inline(always)]
    unsafe fn input<const P: usize>(
        &self,
        place: &Place,
        mb: usize,
        blocks: usize,
        pixels: [(usize, usize); P],
    ) -> (TileInput<P>, [usize; P]) {
        let (s, n) = (self.s, place.n);
        let image = self.o.x.add(n * s.in_image());
        // The window origins, as wrapping offsets: they may precede the input.
        let x = pixels.map(|(oy, ox)| {
            let iy = (oy * s.strides[0]).wrapping_sub(s.pads[0]);
            let ix = (ox * s.strides[1]).wrapping_sub(s.pads[1]);
            image.wrapping_add(iy.wrapping_mul(s.in_w).wrapping_add(ix).wrapping_mul(self.pixel_step))
        });
        let input = TileInput {
            x,
            w: self.o.w.add(mb * s.weights_per_block()),
            w_block: if blocks > 1 { s.weights_per_block() } else { 0 },
            ky: place.ky,
            kx: place.kx,
        };
        let at = pixels.map(|(oy, ox)| n * s.out_image() + ((mb * s.out_h + oy) * s.out_w + ox) * BLOCK);
        (input, at)
    }

    /// One pixel's tile: summed, finished and stored.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn single(&self, place: &Place, mb: usize, blocks: usize, pixel: (usize, usize)) {
        let (t, at) = self.input(place, mb, blocks, [pixel]);
        let st = &self.strides;
        match blocks {
            4 => self.store(&halves(sums1x4(t, st)), mb, 4, &at, 1),
            3 => self.store(&halves(sums1x3(t, st)), mb, 3, &at, 1),
            _ => self.store(&halves(sums1x2(t, st)), mb, blocks, &at, 1),
        }
    }

    /// An AVX2 tile, its first `stored` pixels stored.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn narrow_tile(&self, place: &Place, mb: usize, blocks: usize, pixels: [(usize, usize); 4], stored: usize) {
        let (t, at) = self.input(place, mb, blocks, pixels);
        let st = &self.strides;
        match blocks {
            3 => self.store(&sums4x3(t, st), mb, 3, &at, stored),
            _ => self.store(&sums4x2(t, st), mb, blocks, &at, stored),
        }
    }

    /// An AVX-512 tile, its first `stored` pixels stored (compiled for
    /// AVX-512, so that the sums are inlined and stay in registers for the
    /// epilogue).
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    unsafe fn wide_tile(&self, place: &Place, mb: usize, blocks: usize, pixels: [(usize, usize); 6], stored: usize) {
        let (t, at) = self.input(place, mb, blocks, pixels);
        let st = &self.strides;
        match blocks {
            4 => self.store(&sums6x4(t, st), mb, 4, &at, stored),
            3 => self.store(&sums6x3(t, st), mb, 3, &at, stored),
            _ => self.store(&sums6x2(t, st), mb, blocks, &at, stored),
        }
    }

    /// A tile of two pixels × four blocks from `mb`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pair_tile(&self, place: &Place, mb: usize, pixels: [(usize, usize); 2]) {
        let (t, at) = self.input(place, mb, 4, pixels);
        self.store(&sums2x4(t, &self.strides), mb, 4, &at, 2);
    }

    /// Stores the first `blocks` blocks of the first `stored` pixels of
    /// tile sums `acc` (pixel `p`, block `j` at float `at[p] + j * block_step`),
    /// finished.
    #[inline(always)]
    unsafe fn store<const P: usize, const B: usize>(
        &self,
        acc: &[[__m256; B]; P],
        mb: usize,
        blocks: usize,
        at: &[usize; P],
        stored: usize,
    ) {
        let block_step = self.s.out_h * self.s.out_w * BLOCK;
        for (row, &at) in acc.iter().zip(at).take(stored) {
            for (j, &v) in row.iter().enumerate().take(blocks) {
                self.finish(mb + j, at + j * block_step, v);
            }
        }
    }

    /// Stores the sums `v` of output block `mb` at float `at`, finished.
    #[inline(always)]
    unsafe fn finish(&self, mb: usize, at: usize, v: __m256) {
        self.epilogue.finish(self.p, &self.o, mb, at, v)
    }

    /// The [`VectorActivation`] (if any) on the `pixels` pixels from `y` of
    /// `blocks` output blocks, which a run has just stored.
    #[inline(always)]
    unsafe fn finish_run(&self, y: *mut f32, blocks: usize, pixels: usize) {
        let Some(vector_activation) = self.epilogue.vector_activation else {
            return;
        };
        let block_step = self.s.out_h * self.s.out_w * BLOCK;
        for j in 0..blocks {
            vector_activation.apply_in_place(y.add(j * block_step), pixels);
        }
    }
}

/// The blocked convolution `p` (shape `s`) with `kernel`'s tiles
/// ([`Isa::Avx512`]'s or else AVX2's).
///
/// # Safety
/// As [`crate::generic::blocked::onnxc_conv_blocked_f32`]; the CPU has
/// `kernel`'s features, at least AVX2 and FMA.
pub(crate) unsafe fn conv(
    p: &ConvParams,
    s: &BlockedShape,
    o: BlockedOperands,
    parallel: *const Parallel,
    kernel: Isa,
) {
    let wide = kernel == Isa::Avx512;
    let job = Job::new(p, s, o, wide, None);
    // Tasks: block groups (all in one when each tile walks them), their
    // rows split when there are threads.
    let groups = s.out_blocks.div_ceil(tile_shape(wide).1);
    let per_tile = job.groups_per_tile;
    let (group_tasks, task_groups) = if per_tile { (1, groups) } else { (groups, 1) };
    // What a task's part of an image is made of: a pointwise layer's full
    // tiles (its pixels run on across rows, so a part cuts no tile), else
    // output rows. Parts are made only where there are too few equal
    // block-group tasks to share out: cutting a small map's rows cuts its
    // tap groups into more partial tiles.
    let (px, image) = (tile_shape(wide).0, s.out_h * s.out_w);
    let pointwise = job.run_end.as_ref().filter(|_| image >= px);
    // A strided pointwise layer's tiles stay within a row: its parts are rows.
    let tile_units = pointwise.is_some() && s.strides[1] == 1;
    let units = if tile_units { image / px } else { s.out_h };
    let even_groups = (group_tasks * s.batch).is_multiple_of(2) && group_tasks * s.batch >= MIN_GROUP_TASKS;
    let parts = if Parallel::is_threaded(parallel) && !even_groups {
        TASKS.div_ceil(group_tasks * s.batch).min(units)
    } else {
        1
    };
    let per_image = group_tasks * parts;
    Parallel::for_each(parallel, s.batch * per_image, |task| {
        let (n, task) = (task / per_image, task % per_image);
        let (first, part) = (task / parts * task_groups, task % parts);
        let groups = first..first + task_groups;
        let units = share(units, parts, part);
        match pointwise {
            // The last part takes the pixels past the last full tile.
            Some(end) if tile_units => {
                let last = if part + 1 == parts { image } else { units.end * px };
                job.pointwise(n, groups, units.start * px..last, end)
            }
            Some(end) => job.pointwise(n, groups, units.start * s.out_w..units.end * s.out_w, end),
            None => job.run(n, groups, units),
        }
    });
}

/// The blocked convolution `p` as Winograd's F(4×4, 3×3) or F(2×2, 3×3)
/// ([`crate::generic::winograd`]), its products run by [`conv`] with
/// `kernel`'s tiles.
///
/// # Safety
/// As [`conv`]; `scratch` holds [`crate::generic::blocked::conv_blocked_scratch_elems`] floats.
pub(crate) unsafe fn winograd(
    p: &ConvParams,
    s: &BlockedShape,
    o: BlockedOperands,
    scratch: *mut f32,
    parallel: *const Parallel,
    kernel: Isa,
) {
    let tasks = crate::generic::winograd::tasks(s, parallel);
    Parallel::for_each(parallel, tasks, |task| winograd_task(p, s, &o, scratch, (task, tasks), kernel));
}

/// One task of [`winograd`], its transforms compiled for AVX2 (a task's
/// closure would not take the caller's target features).
#[target_feature(enable = "avx2,fma")]
unsafe fn winograd_task(
    p: &ConvParams,
    s: &BlockedShape,
    o: &BlockedOperands,
    scratch: *mut f32,
    task: (usize, usize),
    kernel: Isa,
) {
    let serial = Parallel::SERIAL;
    let pointwise = |p: &ConvParams, s: &BlockedShape, o: BlockedOperands| conv(p, s, o, &serial, kernel);
    crate::generic::winograd::run_task(p, s, o, scratch, task, &pointwise);
}
