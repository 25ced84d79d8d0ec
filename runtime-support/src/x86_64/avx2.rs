//! AVX2+FMA sgemm micro-kernel: `4 x 24` tiles, three ymm accumulators per row.
//!
//! 12 accumulators + 3 B vectors + 1 broadcast fill all 16 ymm registers;
//! per depth step 3 loads of B and 4 broadcasts of A feed 12 FMAs. Four
//! rows divide the 8-row A panels ([`PANEL_ROWS`]) that weights are packed
//! in ahead of time, so a panel is two tiles.
//!
//! The depth loop is written in `asm!`: with every register taken, LLVM
//! spilled an accumulator and shuffled the rest on each step, which ran
//! the kernel at a third of the FMA peak. The store and the finish stay in
//! intrinsics.

use crate::generic::gemm::{blocked, BMatrix, Lookahead, MatMut, MatRef, MicroKernel, PACK_AHEAD, PANEL_ROWS};
use crate::generic::prepacked::{BSource, FinishRow, Product, Task, TileActivation, TileEnd};
use core::arch::x86_64::*;

/// Rows per tile.
pub const MR: usize = 4;
/// Columns per tile (three ymm vectors).
pub const NR: usize = 24;

/// The AVX2+FMA micro-kernel (see the module doc).
pub struct Avx2Fma;

impl MicroKernel for Avx2Fma {
    const MR: usize = MR;
    const NR: usize = NR;
    const A_BLOCK: usize = 48 * 1024;
    /// One `KC x NR` B panel (24 KiB) stays in a 32 KiB L1.
    const KC: usize = 256;

    #[inline(always)]
    unsafe fn tile(
        kc: usize,
        a: *const f32,
        b: *const f32,
        y: *mut f32,
        rs: isize,
        rows: usize,
        cols: usize,
        alpha: f32,
        accumulate: bool,
        ahead: Lookahead,
    ) {
        tile(kc, a, b, y, rs, rows, cols, alpha, accumulate, None, ahead)
    }

    #[inline(always)]
    unsafe fn packing_tile(
        kc: usize,
        a: *const f32,
        src: *const f32,
        src_rs: isize,
        b: *mut f32,
        y: *mut f32,
        rs: isize,
        alpha: f32,
        accumulate: bool,
        end: Option<&TileEnd>,
        ahead: Lookahead,
    ) {
        store_whole(&packing_sums(kc, a, src, src_rs, b, ahead), y, rs, alpha, accumulate, end)
    }

    #[inline(always)]
    unsafe fn finished_tile(
        kc: usize,
        a: *const f32,
        b: *const f32,
        y: *mut f32,
        rs: isize,
        rows: usize,
        cols: usize,
        accumulate: bool,
        end: &TileEnd,
    ) {
        tile(kc, a, b, y, rs, rows, cols, 1.0, accumulate, Some(end), Lookahead::NONE)
    }

    #[inline(always)]
    unsafe fn prepacked_task<B: BSource, F: FinishRow>(product: &Product<B, F>, task: Task) {
        prepacked_task(product, task)
    }
}

/// The 12 FMAs of a depth step whose B vectors are in `b0..b2`, its A
/// at byte offset `$a` from `{a}`.
macro_rules! step_fmas {
    ($a:literal) => {
        concat!(
            "vbroadcastss {ai}, dword ptr [{a} + ",
            $a,
            "]\n",
            "vfmadd231ps {c00}, {ai}, {b0}\n",
            "vfmadd231ps {c01}, {ai}, {b1}\n",
            "vfmadd231ps {c02}, {ai}, {b2}\n",
            "vbroadcastss {ai}, dword ptr [{a} + ",
            $a,
            " + 4]\n",
            "vfmadd231ps {c10}, {ai}, {b0}\n",
            "vfmadd231ps {c11}, {ai}, {b1}\n",
            "vfmadd231ps {c12}, {ai}, {b2}\n",
            "vbroadcastss {ai}, dword ptr [{a} + ",
            $a,
            " + 8]\n",
            "vfmadd231ps {c20}, {ai}, {b0}\n",
            "vfmadd231ps {c21}, {ai}, {b1}\n",
            "vfmadd231ps {c22}, {ai}, {b2}\n",
            "vbroadcastss {ai}, dword ptr [{a} + ",
            $a,
            " + 12]\n",
            "vfmadd231ps {c30}, {ai}, {b0}\n",
            "vfmadd231ps {c31}, {ai}, {b1}\n",
            "vfmadd231ps {c32}, {ai}, {b2}",
        )
    };
}

/// One depth step of [`depth_sums`], its A and B at byte offsets `$a`
/// and `$b` from the pointers.
macro_rules! depth_step {
    ($a:literal, $b:literal) => {
        concat!(
            "vmovups {b0}, [{b} + ",
            $b,
            "]\n",
            "vmovups {b1}, [{b} + ",
            $b,
            " + 32]\n",
            "vmovups {b2}, [{b} + ",
            $b,
            " + 64]\n",
            step_fmas!($a),
        )
    };
}

/// One depth step of [`packing_sums`]: B from the source row at `$src`
/// (prefetching the row [`PACK_AHEAD`] steps on, at `$far`, and the
/// lookahead's line),
/// stored to the panel at byte offset `$b`; A at byte offset `$a`.
macro_rules! packing_step {
    ($a:literal, $b:literal, $src:literal, $far:literal) => {
        concat!(
            "prefetcht0 [{line}]\n",
            "add {line}, {line_step}\n",
            "prefetcht1 [",
            $far,
            "]\n",
            "prefetcht1 [",
            $far,
            " + 64]\n",
            "prefetcht1 [",
            $far,
            " + 92]\n",
            "vmovups {b0}, [",
            $src,
            "]\n",
            "vmovups {b1}, [",
            $src,
            " + 32]\n",
            "vmovups {b2}, [",
            $src,
            " + 64]\n",
            "vmovups [{b} + ",
            $b,
            "], {b0}\n",
            "vmovups [{b} + ",
            $b,
            " + 32], {b1}\n",
            "vmovups [{b} + ",
            $b,
            " + 64], {b2}\n",
            step_fmas!($a),
        )
    };
}

/// The accumulator registers of a tile, as `asm!` operands.
macro_rules! accumulators {
    ($asm:expr, $acc:expr, $($operands:tt)*) => {{
        let [[c00, c01, c02], [c10, c11, c12], [c20, c21, c22], [c30, c31, c32]] = $acc;
        core::arch::asm!(
            $asm,
            $($operands)*
            b0 = out(ymm_reg) _,
            b1 = out(ymm_reg) _,
            b2 = out(ymm_reg) _,
            ai = out(ymm_reg) _,
            c00 = inout(ymm_reg) *c00,
            c01 = inout(ymm_reg) *c01,
            c02 = inout(ymm_reg) *c02,
            c10 = inout(ymm_reg) *c10,
            c11 = inout(ymm_reg) *c11,
            c12 = inout(ymm_reg) *c12,
            c20 = inout(ymm_reg) *c20,
            c21 = inout(ymm_reg) *c21,
            c22 = inout(ymm_reg) *c22,
            c30 = inout(ymm_reg) *c30,
            c31 = inout(ymm_reg) *c31,
            c32 = inout(ymm_reg) *c32,
        )
    }};
}

/// The `4 x 24` sums of `kc` depth steps: A advances [`PANEL_ROWS`] floats
/// a step, B [`NR`].
///
/// # Safety
/// The panels hold `kc` steps; the CPU has AVX2 and FMA (the callers'
/// `target_feature`, without which `asm!` may not name ymm registers).
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn depth_sums(kc: usize, a: *const f32, b: *const f32, ahead: Lookahead) -> [[__m256; 3]; MR] {
    let mut acc = [[_mm256_setzero_ps(); 3]; MR];
    // One prefetch address a step (`Lookahead::per_step`): the A panel,
    // already in L1, when the lookahead names no lines for them.
    let (line, line_step) = ahead.per_step(kc, a);
    // Two steps per iteration (the loop's own instructions took an issue
    // slot in eight), then the odd step.
    accumulators!(
        concat!(
            "shr {k}, 1",
            "\njz 3f",
            "\n2:",
            "\nprefetcht0 [{line}]",
            "\nprefetcht0 [{line} + {line_step}]\n",
            depth_step!(0, 0),
            "\n",
            depth_step!(32, 96),
            "\nadd {line}, {line_step}",
            "\nadd {line}, {line_step}",
            "\nadd {a}, {a_step}",
            "\nadd {b}, {b_step}",
            "\ndec {k}",
            "\njnz 2b",
            "\n3:",
            "\ntest {odd}, 1",
            "\njz 4f\n",
            depth_step!(0, 0),
            "\n4:",
        ),
        &mut acc,
        a = inout(reg) a => _,
        b = inout(reg) b => _,
        k = inout(reg) kc => _,
        odd = in(reg) kc,
        line = inout(reg) line => _,
        line_step = in(reg) line_step,
        a_step = const 2 * PANEL_ROWS * 4,
        b_step = const 2 * NR * 4,
        options(nostack, readonly),
    );
    acc
}

/// [`depth_sums`] reading B from its source, depth step `l` at
/// `src + l * src_rs`, and storing each step to the packed panel `b`.
/// One step an iteration (the stride is not a constant); like the AVX-512
/// kernel, it prefetches the source row [`PACK_AHEAD`] steps on, which no
/// hardware prefetcher follows.
///
/// # Safety
/// As `depth_sums`; `kc` rows of `NR` floats are readable at `src` and
/// `b` holds `kc * NR` writable floats.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn packing_sums(
    kc: usize,
    a: *const f32,
    src: *const f32,
    src_rs: isize,
    b: *mut f32,
    ahead: Lookahead,
) -> [[__m256; 3]; MR] {
    let mut acc = [[_mm256_setzero_ps(); 3]; MR];
    let (line, line_step) = ahead.per_step(kc, a);
    // Two steps per iteration, as in `depth_sums`, the second's source row
    // one stride on; then the odd step.
    accumulators!(
        concat!(
            "shr {k}, 1",
            "\njz 3f",
            "\n2:\n",
            packing_step!("0", "0", "{src}", "{far}"),
            "\n",
            packing_step!("32", "96", "{src} + {src_step}", "{far} + {src_step}"),
            "\nadd {src}, {src_step2}",
            "\nadd {far}, {src_step2}",
            "\nadd {a}, {a_step}",
            "\nadd {b}, {b_step}",
            "\ndec {k}",
            "\njnz 2b",
            "\n3:",
            "\ntest {odd}, 1",
            "\njz 4f\n",
            packing_step!("0", "0", "{src}", "{far}"),
            "\n4:",
        ),
        &mut acc,
        a = inout(reg) a => _,
        src = inout(reg) src => _,
        b = inout(reg) b => _,
        k = inout(reg) kc => _,
        odd = in(reg) kc,
        line = inout(reg) line => _,
        line_step = in(reg) line_step,
        far = inout(reg) src.wrapping_offset(PACK_AHEAD * src_rs) => _,
        src_step = in(reg) src_rs * 4,
        src_step2 = in(reg) src_rs * 8,
        a_step = const 2 * PANEL_ROWS * 4,
        b_step = const 2 * NR * 4,
        options(nostack),
    );
    acc
}

/// Inlined (without a `target_feature` of its own, which would forbid
/// `inline(always)`) into the AVX2 drivers, whose features its intrinsics
/// then take.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    kc: usize,
    a: *const f32,
    b: *const f32,
    y: *mut f32,
    rs: isize,
    rows: usize,
    cols: usize,
    alpha: f32,
    accumulate: bool,
    end: Option<&TileEnd>,
    ahead: Lookahead,
) {
    let acc = depth_sums(kc, a, b, ahead);
    if rows == MR && cols == NR {
        return store_whole(&acc, y, rs, alpha, accumulate, end);
    }
    let al = _mm256_set1_ps(alpha);
    // An edge tile: only its first `rows` rows are stored. Per vector, lanes below `cols`: only the vector that
    // straddles `cols` takes masked loads and stores (microcoded on AMD
    // Zen); those past it are skipped.
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let masks: [__m256i; 3] =
        core::array::from_fn(|q| _mm256_cmpgt_epi32(_mm256_set1_epi32(cols as i32 - 8 * q as i32), lane));
    let vectors = cols.div_ceil(8);
    for (i, row) in acc.iter().enumerate().take(rows) {
        let out = y.offset(i as isize * rs);
        for (q, (&v, &mask)) in row.iter().zip(&masks).enumerate().take(vectors) {
            let (dst, full) = (out.add(8 * q), 8 * q + 8 <= cols);
            let load = || if full { _mm256_loadu_ps(dst) } else { _mm256_maskload_ps(dst, mask) };
            let v = if accumulate { _mm256_fmadd_ps(v, al, load()) } else { _mm256_mul_ps(v, al) };
            let v = match end {
                Some(end) => finish(end, i, 8 * q, mask, full, v),
                None => v,
            };
            if full {
                _mm256_storeu_ps(dst, v);
            } else {
                _mm256_maskstore_ps(dst, mask, v);
            }
        }
    }
}

/// Stores a whole tile (`NR` columns): the edge tiles' arithmetic and
/// [`finish`], unrolled with the sums in registers, without lane masks or
/// a branch per vector (which, with the sums spilled to the stack, had
/// taken more time than a 6-deep tile's products: grouped 1×1
/// convolutions on 56² planes 0.86 to 0.90 of their time, ResNet-50's 64
/// to 256 channels 0.94 to 0.96).
#[inline(always)]
unsafe fn store_whole(
    acc: &[[__m256; 3]; MR],
    y: *mut f32,
    rs: isize,
    alpha: f32,
    accumulate: bool,
    end: Option<&TileEnd>,
) {
    let al = _mm256_set1_ps(alpha);
    let every_lane = _mm256_set1_epi32(-1);
    for (i, row) in acc.iter().enumerate() {
        let out = y.offset(i as isize * rs);
        for (q, &v) in row.iter().enumerate() {
            let dst = out.add(8 * q);
            let v = if accumulate { _mm256_fmadd_ps(v, al, _mm256_loadu_ps(dst)) } else { _mm256_mul_ps(v, al) };
            let v = match end {
                Some(end) => finish(end, i, 8 * q, every_lane, true, v),
                None => v,
            };
            _mm256_storeu_ps(dst, v);
        }
    }
}

/// [`TileEnd`] on the 8 columns from `col` of row `i` (the lanes of `mask`
/// in the tile, all of them when `full`), the same operations as
/// [`TileEnd::apply`] on each lane.
#[inline(always)]
unsafe fn finish(end: &TileEnd, i: usize, col: usize, mask: __m256i, full: bool, mut v: __m256) -> __m256 {
    if !end.bias.is_null() {
        v = _mm256_add_ps(v, _mm256_set1_ps(*end.bias.add(i)));
    }
    if !end.residual.is_null() {
        let r = end.residual.wrapping_offset(i as isize * end.residual_rs).wrapping_add(col);
        v = _mm256_add_ps(v, if full { _mm256_loadu_ps(r) } else { _mm256_maskload_ps(r, mask) });
    }
    activate(end.activation, v)
}

/// [`TileActivation::apply`] on each lane.
#[inline(always)]
pub(super) unsafe fn activate(activation: TileActivation, v: __m256) -> __m256 {
    match activation {
        TileActivation::None => v,
        // With `lo <= hi`, `vminps` and `vmaxps` (which return their second
        // operand, `v`, for a NaN or two zeros) are the same selects.
        TileActivation::Clamp { lo, hi } if lo <= hi => {
            _mm256_max_ps(_mm256_set1_ps(lo), _mm256_min_ps(_mm256_set1_ps(hi), v))
        }
        TileActivation::Clamp { lo, hi } => {
            let (lo, hi) = (_mm256_set1_ps(lo), _mm256_set1_ps(hi));
            let high = _mm256_blendv_ps(v, hi, _mm256_cmp_ps::<_CMP_GT_OQ>(v, hi));
            _mm256_blendv_ps(high, lo, _mm256_cmp_ps::<_CMP_LT_OQ>(v, lo))
        }
        TileActivation::Leaky { slope } => {
            let below = _mm256_cmp_ps::<_CMP_LT_OQ>(v, _mm256_setzero_ps());
            _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(slope)), below)
        }
    }
}

/// [`crate::generic::gemm::sgemm`] with the AVX2+FMA micro-kernel.
///
/// # Safety
/// As `sgemm`; the CPU and OS must support AVX2 and FMA
/// ([`crate::isa::cpu`]).
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef,
    b: BMatrix,
    beta: f32,
    c: Option<MatRef>,
    y: MatMut,
) {
    blocked::<Avx2Fma>(m, n, k, alpha, a, b, beta, c, y)
}

/// A task of [`crate::generic::prepacked::prepacked`] compiled for this
/// kernel's instruction set (the packing and epilogue code inlined with it).
///
/// # Safety
/// As `Product::run`; the CPU and OS must support the kernel's features
/// ([`crate::isa::cpu`]).
#[target_feature(enable = "avx2,fma")]
unsafe fn prepacked_task<B: BSource, F: FinishRow>(product: &Product<B, F>, task: Task) {
    product.run::<Avx2Fma>(task)
}
