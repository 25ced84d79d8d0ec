//! Pointwise runs at AVX-512's full width: tiles of twelve pixels × four
//! output blocks, two blocks to a zmm register.
//!
//! The other tile sets keep one block (8 channels) per ymm register. On
//! the Zen 4 cores that was free, since a zmm FMA there does the work of
//! two ymm ones; on cores with full-width 512-bit units (Zen 5, the Intel
//! server cores) a ymm FMA leaves half the unit idle. A zmm register
//! holds two output blocks of one pixel: the weights of blocks `b` and
//! `b + 1` for an input channel (a vector load and a 256-bit insert from
//! the next block's panel, so the packed layout stays the one every
//! kernel reads), times one broadcast of the pixel's input. The two
//! halves are stored to their blocks' planes. Per input channel a tile
//! does 24 zmm FMAs for 12 broadcasts and 4 weight loads.
//!
//! Each output is summed over the input channels in order, one FMA per
//! channel, as in every other pointwise tile, so a pixel gets the same
//! bits whichever tile computes it: a run may end in the ymm tiles.

use super::pointwise::RunEnd;
use core::arch::x86_64::*;

/// Pixels of a full-width tile (the asm below lists them).
pub(super) const PIXELS: usize = crate::generic::blocked::FULL_WIDTH_TILE_PIXELS;

/// One input channel's step: the weights of blocks 0-1 into `zmm0` and
/// 2-3 into `zmm1` at byte `$wo` of each block's panel, then each pixel's
/// input (at `$po + $xo` from `{x}`) broadcast and multiplied into its
/// two sums `$a` (blocks 0-1) and `$b` (blocks 2-3).
macro_rules! full_width_step {
    ($wo:literal, $xo:literal, [$($po:literal => $a:ident, $b:ident),+]) => {
        concat!(
            "vmovups ymm0, [{w} + ", $wo, "]\n",
            "vinsertf64x4 zmm0, zmm0, [{w} + {ws} + ", $wo, "], 1\n",
            "vmovups ymm1, [{w} + {ws}*2 + ", $wo, "]\n",
            "vinsertf64x4 zmm1, zmm1, [{w} + {ws3} + ", $wo, "], 1\n",
            $(
                "vbroadcastss zmm2, dword ptr [{x} + ", $po, " + ", $xo, "]\n",
                "vfmadd231ps {", stringify!($a), "}, zmm0, zmm2\n",
                "vfmadd231ps {", stringify!($b), "}, zmm1, zmm2\n",
            )+
        )
    };
}

/// The run's epilogue on a pair of blocks' sums `$acc` (pixel offsets
/// `$po`), their lower halves at `{r}`, their upper halves a block on:
/// the residual's two halves loaded into one register, added.
macro_rules! add_residual_pair {
    ([$($po:literal => $acc:ident),+]) => {
        concat!($(
            "vmovups ymm2, [{r} + ", $po, "]\n",
            "vinsertf64x4 zmm2, zmm2, [{r} + {k} + ", $po, "], 1\n",
            "vaddps {", stringify!($acc), "}, {", stringify!($acc), "}, zmm2\n",
        )+)
    };
}

/// Stores a pair of blocks' sums `$acc`, lower halves at `{r}`, upper a block on.
macro_rules! store_pair {
    ([$($po:literal => $acc:ident),+]) => {
        concat!($(
            "vextractf64x4 [{r} + ", $po, "], {", stringify!($acc), "}, 0\n",
            "vextractf64x4 [{r} + {k} + ", $po, "], {", stringify!($acc), "}, 1\n",
        )+)
    };
}

/// Adds the biases (`zmm0`: blocks 0-1, `zmm1`: 2-3) or clamps (`zmm0`
/// low, `zmm1` high) each pixel's sums.
macro_rules! each_sum {
    (add, [$($a:ident, $b:ident),+]) => {
        concat!($(
            "vaddps {", stringify!($a), "}, {", stringify!($a), "}, zmm0\n",
            "vaddps {", stringify!($b), "}, {", stringify!($b), "}, zmm1\n",
        )+)
    };
    (clamp, [$($a:ident, $b:ident),+]) => {
        concat!($(
            "vminps {", stringify!($a), "}, zmm1, {", stringify!($a), "}\n",
            "vmaxps {", stringify!($a), "}, zmm0, {", stringify!($a), "}\n",
            "vminps {", stringify!($b), "}, zmm1, {", stringify!($b), "}\n",
            "vmaxps {", stringify!($b), "}, zmm0, {", stringify!($b), "}\n",
        )+)
    };
}

/// The run function over tiles whose pixels are at byte offsets `$po`
/// from the tile's start, in the input and in the output.
macro_rules! full_width_run {
    ([$($po:literal => $a:ident, $b:ident),+]) => {
        /// `tiles` consecutive tiles of twelve pixels × four output blocks
        /// of a pointwise layer (1×1, stride 1, unpadded), the epilogue in
        /// the asm: `x` at the first tile's input, `w` at the first
        /// block's weights (blocks `w_block` floats apart), input blocks
        /// `in_block` floats apart, `y` at the first tile's output in the
        /// first block; `end`'s `x_back` brings the input pointer from the
        /// end of a tile's input blocks to the next tile.
        ///
        /// # Safety
        /// `x`, `w` and `y` (and the residual and bias in `end`) hold the
        /// tiles' operands; the CPU has AVX-512 F and VL.
        #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
        pub(super) unsafe fn full_width_tiles(
            x: *const f32,
            w: *const f32,
            w_block: usize,
            in_block: usize,
            y: *mut f32,
            tiles: usize,
            end: &RunEnd,
        ) {
            core::arch::asm!(
                "7:\n",
                $(concat!(
                    "vpxord {", stringify!($a), "}, {", stringify!($a), "}, {", stringify!($a), "}\n",
                    "vpxord {", stringify!($b), "}, {", stringify!($b), "}, {", stringify!($b), "}\n",
                ),)+
                "mov {k}, [{s} + {steps}]\n",
                "2:\n",
                full_width_step!("0", "0", [$($po => $a, $b),+]),
                full_width_step!("32", "4", [$($po => $a, $b),+]),
                full_width_step!("64", "8", [$($po => $a, $b),+]),
                full_width_step!("96", "12", [$($po => $a, $b),+]),
                full_width_step!("128", "16", [$($po => $a, $b),+]),
                full_width_step!("160", "20", [$($po => $a, $b),+]),
                full_width_step!("192", "24", [$($po => $a, $b),+]),
                full_width_step!("224", "28", [$($po => $a, $b),+]),
                "add {w}, 256\n",
                "add {x}, {ib}\n",
                "dec {k}\n",
                "jnz 2b\n",
                "sub {x}, [{s} + {x_back}]\n",
                "sub {w}, [{s} + {w_back}]\n",
                // Bias: the group's four blocks' are 32 consecutive floats.
                "mov {k}, [{s} + {bias}]\n",
                "test {k}, {k}\n",
                "jz 3f\n",
                "vmovups zmm0, [{k}]\n",
                "vmovups zmm1, [{k} + 64]\n",
                each_sum!(add, [$($a, $b),+]),
                "3:\n",
                "mov {k}, [{s} + {out_block}]\n",
                "cmp qword ptr [{s} + {has_residual}], 0\n",
                "je 4f\n",
                "mov {r}, [{s} + {residual}]\n",
                "add {r}, {y}\n",
                add_residual_pair!([$($po => $a),+]),
                "lea {r}, [{r} + {k}*2]\n",
                add_residual_pair!([$($po => $b),+]),
                "4:\n",
                "cmp qword ptr [{s} + {clamp}], 0\n",
                "je 5f\n",
                "vbroadcastss zmm0, dword ptr [{s} + {lo}]\n",
                "vbroadcastss zmm1, dword ptr [{s} + {hi}]\n",
                each_sum!(clamp, [$($a, $b),+]),
                "5:\n",
                "mov {r}, {y}\n",
                store_pair!([$($po => $a),+]),
                "lea {r}, [{r} + {k}*2]\n",
                store_pair!([$($po => $b),+]),
                "add {y}, 384\n",
                "dec {n}\n",
                "jnz 7b\n",
                x = inout(reg) x => _,
                w = inout(reg) w => _,
                k = out(reg) _,
                ws = in(reg) w_block * 4,
                ws3 = in(reg) w_block * 4 * 3,
                ib = in(reg) in_block * 4,
                y = inout(reg) y => _,
                n = inout(reg) tiles => _,
                r = out(reg) _,
                s = in(reg) end,
                steps = const core::mem::offset_of!(RunEnd, steps),
                x_back = const core::mem::offset_of!(RunEnd, x_back),
                w_back = const core::mem::offset_of!(RunEnd, w_back),
                out_block = const core::mem::offset_of!(RunEnd, out_block),
                residual = const core::mem::offset_of!(RunEnd, residual),
                bias = const core::mem::offset_of!(RunEnd, bias),
                has_residual = const core::mem::offset_of!(RunEnd, has_residual),
                clamp = const core::mem::offset_of!(RunEnd, clamp),
                lo = const core::mem::offset_of!(RunEnd, lo),
                hi = const core::mem::offset_of!(RunEnd, hi),
                // The weights, bounds and broadcasts in fixed registers, so that
                // their lower halves can be named (the `y` modifier printed
                // some allocated zmm registers as mask registers).
                out("zmm0") _,
                out("zmm1") _,
                out("zmm2") _,
                $($a = inout(zmm_reg) _mm512_setzero_ps() => _, $b = inout(zmm_reg) _mm512_setzero_ps() => _,)+
                options(nostack),
            )
        }
    };
}

full_width_run!([
    "0" => c0a, c0b,
    "32" => c1a, c1b,
    "64" => c2a, c2b,
    "96" => c3a, c3b,
    "128" => c4a, c4b,
    "160" => c5a, c5b,
    "192" => c6a, c6b,
    "224" => c7a, c7b,
    "256" => c8a, c8b,
    "288" => c9a, c9b,
    "320" => c10a, c10b,
    "352" => c11a, c11b
]);

/// The end of a run of full-width tiles over the input of `run`, a run
/// of `pixels`-pixel tiles at stride 1: its `x_back` moves the input on
/// by twelve pixels.
pub(super) fn run_end(run: &RunEnd, pixels: usize) -> RunEnd {
    let bytes = ((PIXELS - pixels) * crate::generic::blocked::BLOCK * 4) as isize;
    RunEnd { x_back: run.x_back - bytes, ..*run }
}
