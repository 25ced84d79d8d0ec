//! AVX2+FMA direct convolution of 2-D windows, without an im2col matrix.
//!
//! The gemm path packs the im2col matrix (a row per input channel and
//! kernel tap) into B panels before it multiplies; on ResNet-50's 3×3
//! layers that packing took a fifth of the convolution's time. Here the
//! product is computed transposed, `Yᵀ = Xᵀ·Wᵀ`, in tiles of 4 output
//! pixels × 24 output channels (16 where the channels run out):
//! - the weights are the A panels the compiler packed ahead of time (8
//!   channels wide, depth-major), so a depth step of three panels is three
//!   ymm loads;
//! - each pixel's input under depth step `l` is one broadcast from its
//!   window's corner plus `offset[l]`, a table of the steps' byte offsets
//!   ([`ConvWindow`]; padding is a zero-padded copy, so no tap is tested;
//!   1×1 windows read their pixels gathered into 4-pixel panels, in sequence).
//!
//! Any four output pixels can share a tile, whatever their rows and the
//! strides; the tile is transposed as it is stored.
//!
//! The depth slices, the order of the sums within each, the accumulation
//! across slices and the tile finish are those of the AVX2 gemm
//! ([`super::avx2`]), so the output has the bits of the im2col path.

use super::avx2::activate;
use super::conv_activation::VectorActivation;
use crate::generic::conv::ConvFinish;
use crate::generic::conv_window::{ConvWindow, MAX_DIRECT_DEPTH, PANEL_PIXELS};
use crate::generic::gemm::{MicroKernel, PANEL_ROWS};
use crate::generic::prepacked::{FinishRow, TileEnd, PREFETCHED_OUTPUT_BYTES};
use crate::isa::prefetch_floats;
use crate::parallel::{share, Parallel};
use core::arch::x86_64::*;
use core::mem::MaybeUninit;
use core::ops::Range;

/// Output pixels per tile.
const PIXELS: usize = PANEL_PIXELS;
/// Most weight panels (8 output channels each) per tile.
const MAX_PANELS: usize = 3;
/// Pixel tiles per task: the input rows they read and their outputs stay
/// in L2 while every channel block passes over them.
const BLOCK_TILES: usize = 64;
/// Tasks aimed for when there are threads.
const TASKS: usize = 8;
/// How far ahead of a tile, in pixels, the first depth slice prefetches
/// the output rows of large outputs (two cache lines: eight tiles).
const PREFETCH_PIXELS: usize = 32;

/// One depth step: the step's table entry and first-panel weights at byte
/// offsets `$t` and `$w`; `$b at $panel` the weight loads; then per pixel
/// `$p` a broadcast and its FMAs into `$c` with `$pb`.
macro_rules! step {
    ($t:literal, $w:literal, [$($b:literal at $panel:literal),+], [$($p:literal => [$($c:literal * $pb:literal),+]),+]) => {
        concat!(
            "movsxd {r}, dword ptr [{t} + ", $t, "]\n",
            $("vmovups {", $b, "}, [{w} + ", $panel, $w, "]\n",)+
            $(
                "vbroadcastss {ai}, dword ptr [{", $p, "} + {r}]\n",
                $("vfmadd231ps {", $c, "}, {ai}, {", $pb, "}\n",)+
            )+
        )
    };
}

/// Three panels: the weights of panel `j` at `w + j * ps`.
macro_rules! step3 {
    ($t:literal, $w:literal) => {
        step!($t, $w, ["b0" at "", "b1" at "{ps} + ", "b2" at "{ps}*2 + "], [
            "p0" => ["c00" * "b0", "c01" * "b1", "c02" * "b2"],
            "p1" => ["c10" * "b0", "c11" * "b1", "c12" * "b2"],
            "p2" => ["c20" * "b0", "c21" * "b1", "c22" * "b2"],
            "p3" => ["c30" * "b0", "c31" * "b1", "c32" * "b2"]
        ])
    };
}

/// Two panels.
macro_rules! step2 {
    ($t:literal, $w:literal) => {
        step!($t, $w, ["b0" at "", "b1" at "{ps} + "], [
            "p0" => ["c00" * "b0", "c01" * "b1"],
            "p1" => ["c10" * "b0", "c11" * "b1"],
            "p2" => ["c20" * "b0", "c21" * "b1"],
            "p3" => ["c30" * "b0", "c31" * "b1"]
        ])
    };
}

/// The loop around a step macro: two steps an iteration, then the odd one.
macro_rules! depth_loop {
    ($step:ident) => {
        concat!(
            "shr {k}, 1\n",
            "jz 3f\n",
            "2:\n",
            $step!(0, 0),
            $step!(4, 32),
            "add {t}, 8\n",
            "add {w}, 64\n",
            "dec {k}\n",
            "jnz 2b\n",
            "3:\n",
            "test {odd}, 1\n",
            "jz 4f\n",
            $step!(0, 0),
            "4:\n",
        )
    };
}

/// Where a tile's depth steps read: `kc` steps of weights from `w` (panel
/// `j` at `w + j * panel_stride` bytes), table entries from `offsets`,
/// each pixel's input from its corner `pixels[i]`.
#[derive(Clone, Copy)]
struct TileInput {
    kc: usize,
    w: *const f32,
    panel_stride: usize,
    offsets: *const i32,
    pixels: [*const f32; PIXELS],
}

/// A function computing a tile's sums, `[pixel][panel]`, with the asm
/// loop of `$step`: weights in `$b`, sum `$c` in `acc[$i][$j]`.
macro_rules! tile_sums {
    ($(#[$doc:meta])* $name:ident, $step:ident, [$($b:ident),+], [$($c:ident = $i:literal, $j:literal);+]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Every read is inside the weights, the table and the placed
        /// input; the CPU has AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        unsafe fn $name(tile: TileInput) -> [[__m256; MAX_PANELS]; PIXELS] {
            let mut acc = [[_mm256_setzero_ps(); MAX_PANELS]; PIXELS];
            core::arch::asm!(
                depth_loop!($step),
                w = inout(reg) tile.w => _,
                t = inout(reg) tile.offsets => _,
                k = inout(reg) tile.kc => _,
                odd = in(reg) tile.kc,
                ps = in(reg) tile.panel_stride,
                p0 = in(reg) tile.pixels[0],
                p1 = in(reg) tile.pixels[1],
                p2 = in(reg) tile.pixels[2],
                p3 = in(reg) tile.pixels[3],
                r = out(reg) _,
                $($b = out(ymm_reg) _,)+
                ai = out(ymm_reg) _,
                $($c = inout(ymm_reg) acc[$i][$j],)+
                options(nostack, readonly),
            );
            acc
        }
    };
}

tile_sums!(
    /// The sums of a three-panel tile.
    sums3,
    step3,
    [b0, b1, b2],
    [c00 = 0, 0; c01 = 0, 1; c02 = 0, 2; c10 = 1, 0; c11 = 1, 1; c12 = 1, 2;
     c20 = 2, 0; c21 = 2, 1; c22 = 2, 2; c30 = 3, 0; c31 = 3, 1; c32 = 3, 2]
);

tile_sums!(
    /// The sums of a two-panel tile (the third column zero).
    sums2,
    step2,
    [b0, b1],
    [c00 = 0, 0; c01 = 0, 1; c10 = 1, 0; c11 = 1, 1; c20 = 2, 0; c21 = 2, 1; c30 = 3, 0; c31 = 3, 1]
);

/// Stores the tile `acc` (`panels` panels) transposed: channel `i`'s four
/// pixels at `y + i * rs`. Adds what is there when `accumulate`; then
/// applies `end` (its rows being the tile's channels) and `vector` after
/// it. The arithmetic is the AVX2 gemm tile's, element for element.
#[inline(always)]
unsafe fn store(
    acc: &[[__m256; MAX_PANELS]; PIXELS],
    panels: usize,
    y: *mut f32,
    rs: usize,
    accumulate: bool,
    end: Option<&TileEnd>,
    vector: Option<VectorActivation>,
) {
    for q in 0..panels {
        let [r0, r1, r2, r3] = acc.map(|pixel| pixel[q]);
        let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
        let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
        // `pairs[j]`: channel `8q + j`'s pixels, then channel `8q + j + 4`'s.
        let pairs = [
            _mm256_shuffle_ps::<0x44>(t0, t2),
            _mm256_shuffle_ps::<0xEE>(t0, t2),
            _mm256_shuffle_ps::<0x44>(t1, t3),
            _mm256_shuffle_ps::<0xEE>(t1, t3),
        ];
        for (j, mut v) in pairs.into_iter().enumerate() {
            let (lo, hi) = (8 * q + j, 8 * q + j + 4);
            let (dst_lo, dst_hi) = (y.add(lo * rs), y.add(hi * rs));
            if accumulate {
                v = _mm256_fmadd_ps(v, _mm256_set1_ps(1.0), _mm256_loadu2_m128(dst_hi, dst_lo));
            }
            if let Some(end) = end {
                if !end.bias.is_null() {
                    let bias = _mm256_set_m128(_mm_set1_ps(*end.bias.add(hi)), _mm_set1_ps(*end.bias.add(lo)));
                    v = _mm256_add_ps(v, bias);
                }
                if !end.residual.is_null() {
                    let row = |i: usize| end.residual.offset(i as isize * end.residual_rs);
                    v = _mm256_add_ps(v, _mm256_loadu2_m128(row(hi), row(lo)));
                }
                v = activate(end.activation, v);
                if let Some(vector) = vector {
                    v = vector.apply(v);
                }
            }
            _mm256_storeu2_m128(dst_hi, dst_lo, v);
        }
    }
}

/// One group's convolution, shared by its tasks.
struct Job<'a> {
    window: &'a ConvWindow,
    /// The input as placed ([`ConvWindow::place`]).
    x: *const f32,
    /// Packed weights: `m` channels (whole panels), `k` deep.
    a: *const f32,
    m: usize,
    k: usize,
    kc_max: usize,
    offsets: *const i32,
    /// Output: `m` channel rows of `n` pixels.
    y: *mut f32,
    n: usize,
    /// Whether the output is larger than [`PREFETCHED_OUTPUT_BYTES`]: its
    /// lines are then in no cache when the first slice stores a tile's
    /// 24 rows of 16 bytes, and the store queue fills while they arrive.
    prefetch_output: bool,
    finish: &'a ConvFinish<'a>,
    /// The finish's activation when [`FinishRow::tile_end`] lacks it but
    /// the vectors have it: full tiles then apply it in registers rather
    /// than on rows of four pixels.
    vector_activation: Option<VectorActivation>,
}

/// The channel blocks of `m` channels: panels of 8 in blocks of three,
/// then of two (a lone panel is a block of two whose second panel is the
/// first again, its sums discarded). Block `b`: (first panel, panels).
fn channel_block(m: usize, b: usize) -> (usize, usize) {
    let panels = m.div_ceil(PANEL_ROWS);
    let threes = match panels % 3 {
        0 | 2 => panels / 3,
        _ => (panels / 3).saturating_sub(1),
    };
    if b < threes {
        (3 * b, 3)
    } else {
        let first = 3 * threes + 2 * (b - threes);
        (first, 2.min(panels - first))
    }
}

/// Number of [`channel_block`]s.
fn channel_blocks(m: usize) -> usize {
    m.div_ceil(PANEL_ROWS).div_ceil(3)
}

impl Job<'_> {
    /// Pixel tiles `tiles` of channel blocks `blocks`, every depth slice.
    ///
    /// # Safety
    /// As [`conv`]; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run(&self, tiles: Range<usize>, blocks: Range<usize>) {
        for pc in (0..self.k).step_by(self.kc_max) {
            let kc = self.kc_max.min(self.k - pc);
            let (first, last) = (pc == 0, pc + kc == self.k);
            for b in blocks.clone() {
                let (panel, panels) = channel_block(self.m, b);
                let input = TileInput {
                    kc,
                    w: self.a.add(panel * PANEL_ROWS * self.k + pc * PANEL_ROWS),
                    panel_stride: if panels > 1 { PANEL_ROWS * self.k * 4 } else { 0 },
                    offsets: self.offsets.add(pc),
                    pixels: [core::ptr::null(); PIXELS],
                };
                for tile in tiles.clone() {
                    self.tile(input, tile * PIXELS, panel * PANEL_ROWS, panels, first, last);
                }
            }
        }
    }

    /// The tile of pixels from `p0` and channels from `i0` over one depth
    /// slice (`input` without its pixels), stored and, on the `last`
    /// slice, finished.
    #[inline(always)]
    unsafe fn tile(&self, mut input: TileInput, p0: usize, i0: usize, panels: usize, first: bool, last: bool) {
        let pixels = PIXELS.min(self.n - p0);
        if first && self.prefetch_output && p0.is_multiple_of(16) {
            // Every 16 pixels (a cache line of each row): the line two ahead.
            let ahead = self.y.wrapping_add(i0 * self.n + p0 + PREFETCH_PIXELS);
            for i in 0..PANEL_ROWS * panels {
                prefetch_floats(ahead.wrapping_add(i * self.n), 1);
            }
        }
        // Pixels past the output repeat the last one (read, never stored).
        input.pixels = self.window.corners(p0, self.n - 1).map(|corner| self.x.add(corner));
        let acc = if panels == 3 { sums3(input) } else { sums2(input) };
        let channels = (PANEL_ROWS * panels).min(self.m - i0);
        let y = self.y.add(i0 * self.n + p0);
        if pixels == PIXELS && channels == PANEL_ROWS * panels {
            let end = match (last, self.vector_activation) {
                (false, _) => None,
                (true, Some(_)) => Some(self.finish.unactivated_end(i0, p0)),
                (true, None) => self.finish.tile_end(i0, p0),
            };
            store(&acc, panels, y, self.n, !first, end.as_ref(), self.vector_activation);
            if last && end.is_none() {
                for i in 0..channels {
                    self.finish.finish(i0 + i, p0, core::slice::from_raw_parts_mut(y.add(i * self.n), pixels));
                }
            }
            return;
        }
        // An edge tile: stored whole on the stack, its part inside the
        // output added or copied, then finished row by row.
        let mut buf = MaybeUninit::<[f32; MAX_PANELS * PANEL_ROWS * PIXELS]>::uninit();
        let buf = buf.as_mut_ptr() as *mut f32;
        store(&acc, panels, buf, PIXELS, false, None, None);
        for i in 0..channels {
            let src = core::slice::from_raw_parts(buf.add(i * PIXELS), pixels);
            let dst = core::slice::from_raw_parts_mut(y.add(i * self.n), pixels);
            if first {
                dst.copy_from_slice(src);
            } else {
                dst.iter_mut().zip(src).for_each(|(d, &s)| *d += s);
            }
            if last {
                self.finish.finish(i0 + i, p0, dst);
            }
        }
    }
}

/// One group of a convolution on packed weights, directly: `y` (`m` rows
/// of [`ConvWindow::pixels`]) `= a · im2col(x)`, then `finish` on every
/// finished row segment, the work split over `parallel` (no output depends
/// on how). `kc_max` is the depth slice, which fixes the sums' order.
///
/// # Safety
/// `x` is the group's input placed by `window`; `a` holds the group's
/// weights packed by [`crate::generic::prepacked::pack_a`] (`m` rows,
/// `window.depth()` deep); `y` is writable and overlaps neither; `finish`
/// may be called from several threads; the CPU has AVX2 and FMA.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn conv(
    window: &ConvWindow,
    x: *const f32,
    m: usize,
    a: *const f32,
    y: *mut f32,
    finish: &ConvFinish,
    parallel: *const Parallel,
) {
    let (k, n) = (window.depth(), window.pixels());
    let mut table = [MaybeUninit::<i32>::uninit(); MAX_DIRECT_DEPTH];
    window.tap_offsets(&mut table[..k]);
    let kc_max = super::avx2::Avx2Fma::depth_slice(k);
    let prefetch_output = m.saturating_mul(n).saturating_mul(4) > PREFETCHED_OUTPUT_BYTES;
    let job = Job {
        window,
        x,
        a,
        m,
        k,
        kc_max,
        offsets: table.as_ptr() as *const i32,
        y,
        n,
        prefetch_output,
        finish,
        vector_activation: VectorActivation::of(finish.p),
    };
    let tiles = n.div_ceil(PIXELS);
    let blocks = channel_blocks(m);
    let mut tile_parts = tiles.div_ceil(BLOCK_TILES);
    let mut block_parts = 1;
    if Parallel::is_threaded(parallel) {
        // Few pixels: split the channels, so that each thread reads its
        // own part of the weights. Then a whole number of rounds of tasks.
        block_parts = TASKS.div_ceil(tile_parts).min(blocks);
        tile_parts = (tile_parts * block_parts).next_multiple_of(TASKS).div_ceil(block_parts).min(tiles);
    }
    Parallel::for_each(parallel, tile_parts * block_parts, |task| {
        let tile_range = share(tiles, tile_parts, task / block_parts);
        job.run(tile_range, share(blocks, block_parts, task % block_parts));
    });
}
