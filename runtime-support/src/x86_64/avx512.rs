//! AVX-512F sgemm micro-kernel: `MR x 32` tiles, two zmm accumulators per row.
//!
//! Per depth step the kernel loads two 16-wide vectors of the packed B panel
//! and, for each of the `MR` rows, broadcasts one element of the packed A
//! panel (folded into the FMA as an embedded broadcast) and issues two FMAs.
//! With `MR = 8` that is 16 independent accumulator chains — enough to cover
//! the 4-cycle FMA latency on two FMA ports — plus 2 B registers, well under
//! the 32 zmm registers, and loads stay at 10 per 16 FMAs.

use crate::generic::gemm::{blocked, BMatrix, Lookahead, MatMut, MatRef, MicroKernel, PACK_AHEAD, PANEL_ROWS};
use crate::generic::prepacked::{BSource, FinishRow, Product, Task, TileActivation, TileEnd};
use core::arch::x86_64::*;

/// Rows per tile.
pub const MR: usize = 8;
/// Columns per tile (two zmm vectors).
pub const NR: usize = 32;

/// The AVX-512 micro-kernel (see the module doc).
pub struct Avx512;

impl MicroKernel for Avx512 {
    const MR: usize = MR;
    const NR: usize = NR;
    /// Most rows of the packed A block (`MC`): sized with `KC` to sit in L2.
    const A_BLOCK: usize = 48 * 1024;
    /// Deepest packed slice (`KC`): one `KC x NR` B panel (32 KiB) stays in L1.
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
        fitted_tile(kc, a, b, y, rs, rows, cols, alpha, accumulate, None, ahead)
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
        let from = PanelRead { b: src, step: src_rs, pack_to: b };
        tile::<MR, 2, true>((kc, a, from, y, rs, MR, NR, alpha, accumulate, end, ahead))
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
        fitted_tile(kc, a, b, y, rs, rows, cols, 1.0, accumulate, Some(end), Lookahead::NONE)
    }

    #[inline(always)]
    unsafe fn prepacked_task<B: BSource, F: FinishRow>(product: &Product<B, F>, task: Task) {
        prepacked_task(product, task)
    }
}

/// [`tile`] computing the fewest rows and vectors that cover `rows` and
/// `cols`: an edge tile of two rows (a 34-row group's last) costs a
/// quarter of a whole one, one of at most 16 columns half.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fitted_tile(
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
    let shape = (rows, cols);
    let from = PanelRead { b, step: NR as isize, pack_to: core::ptr::null_mut() };
    let args = (kc, a, from, y, rs, rows, cols, alpha, accumulate, end, ahead);
    match shape {
        (5.., 17..) => tile::<MR, 2, false>(args),
        (5.., _) => tile::<MR, 1, false>(args),
        (3 | 4, 17..) => tile::<4, 2, false>(args),
        (3 | 4, _) => tile::<4, 1, false>(args),
        (_, 17..) => tile::<2, 2, false>(args),
        _ => tile::<2, 1, false>(args),
    }
}

/// Where [`tile`] reads B: depth step `l` at `b + l * step` (`step` is
/// `NR` in a packed panel), copied to `pack_to + l * NR` when packing.
#[derive(Clone, Copy)]
struct PanelRead {
    b: *const f32,
    step: isize,
    pack_to: *mut f32,
}

/// What [`tile`] takes: `kc, a, from, y, rs, rows, cols, alpha, accumulate, end, ahead`.
type TileArgs<'a> =
    (usize, *const f32, PanelRead, *mut f32, isize, usize, usize, f32, bool, Option<&'a TileEnd>, Lookahead);

/// The first `rows` (at most `R`) rows and `cols` (at most `16 * W`)
/// columns of a tile, `R x W` vectors computed; with `PACK`, B's depth
/// steps are stored to `b.pack_to` as they are loaded. Inlined (without a
/// `target_feature` of its own, which would forbid `inline(always)`) into
/// the AVX-512 drivers, whose features its intrinsics then take.
#[inline(always)]
unsafe fn tile<const R: usize, const W: usize, const PACK: bool>(
    (kc, a, from, y, rs, rows, cols, alpha, accumulate, end, ahead): TileArgs,
) {
    if accumulate {
        // The tile of y is read at the end; start pulling it in now.
        for i in 0..rows {
            let row = y.wrapping_offset(i as isize * rs) as *const i8;
            for q in 0..W {
                _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(64 * q));
            }
        }
    }
    let mut acc = [[_mm512_setzero_ps(); W]; R];
    let (mut a, mut b, mut pack_to) = (a, from.b, from.pack_to);
    // A packed panel's step is a constant.
    let step = if PACK { from.step } else { NR as isize };
    for l in 0..kc {
        if l < ahead.lines {
            _mm_prefetch::<_MM_HINT_T0>(ahead.first.wrapping_offset(l as isize * ahead.stride) as *const i8);
        }
        let bv: [__m512; W] = core::array::from_fn(|q| _mm512_loadu_ps(b.add(16 * q)));
        if PACK {
            // The source row `PACK_AHEAD` steps on, every line its `NR`
            // floats touch; into L2 only, as rows a power of two apart
            // share an L1 set.
            let row = b.wrapping_offset(PACK_AHEAD * step);
            for line in [0, 16, NR - 1] {
                _mm_prefetch::<_MM_HINT_T1>(row.wrapping_add(line) as *const i8);
            }
            for (q, &bq) in bv.iter().enumerate() {
                _mm512_storeu_ps(pack_to.add(16 * q), bq);
            }
            pack_to = pack_to.add(NR);
        }
        for acc_row in acc.iter_mut() {
            let ai = _mm512_set1_ps(*a);
            a = a.add(1);
            for (sum, &bq) in acc_row.iter_mut().zip(&bv) {
                *sum = _mm512_fmadd_ps(ai, bq, *sum);
            }
        }
        a = a.add(PANEL_ROWS - R);
        b = b.offset(step);
    }
    let al = _mm512_set1_ps(alpha);
    // Lanes below `cols` in each vector (all ones in a full tile).
    let lanes = if cols >= 32 { u32::MAX } else { (1u32 << cols) - 1 };
    let masks = [lanes as u16, (lanes >> 16) as u16];
    // Row by row, written out: with constant indices the sums stay in
    // registers (a loop over `rows` kept them on the stack). A macro, not
    // a closure: a closure would not take this function's target features.
    macro_rules! store_row {
        ($i:literal) => {
            if $i < R && $i < rows {
                let row = y.offset($i * rs);
                for q in 0..W {
                    let (out, mask) = (row.wrapping_add(16 * q), masks[q]);
                    let v = if accumulate {
                        _mm512_fmadd_ps(acc[$i][q], al, _mm512_maskz_loadu_ps(mask, out))
                    } else {
                        _mm512_mul_ps(acc[$i][q], al)
                    };
                    let v = match end {
                        Some(end) => finish(end, $i, 16 * q, mask, v),
                        None => v,
                    };
                    _mm512_mask_storeu_ps(out, mask, v);
                }
            }
        };
    }
    const { assert!(R <= 8) };
    store_row!(0);
    store_row!(1);
    store_row!(2);
    store_row!(3);
    store_row!(4);
    store_row!(5);
    store_row!(6);
    store_row!(7);
}

/// [`TileEnd`] on the 16 columns from `col` of row `i` (`lanes` of them
/// in the tile), the same operations as [`TileEnd::apply`] on each lane.
#[inline(always)]
unsafe fn finish(end: &TileEnd, i: usize, col: usize, lanes: u16, mut v: __m512) -> __m512 {
    if !end.bias.is_null() {
        v = _mm512_add_ps(v, _mm512_set1_ps(*end.bias.add(i)));
    }
    if !end.residual.is_null() {
        let r = end.residual.wrapping_offset(i as isize * end.residual_rs).wrapping_add(col);
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, r));
    }
    match end.activation {
        TileActivation::None => v,
        // With `lo <= hi`, `vminps` and `vmaxps` (which return their second
        // operand, `v`, for a NaN or two zeros) are the same selects.
        TileActivation::Clamp { lo, hi } if lo <= hi => {
            _mm512_max_ps(_mm512_set1_ps(lo), _mm512_min_ps(_mm512_set1_ps(hi), v))
        }
        TileActivation::Clamp { lo, hi } => {
            let (lo, hi) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi));
            let high = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, hi), v, hi);
            _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, lo), high, lo)
        }
        TileActivation::Leaky { slope } => {
            let below = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, _mm512_setzero_ps());
            _mm512_mask_mul_ps(v, below, v, _mm512_set1_ps(slope))
        }
    }
}

/// [`crate::generic::gemm::sgemm`] with the AVX-512 micro-kernel.
///
/// # Safety
/// As `sgemm`; the CPU and OS must support AVX-512F
/// ([`crate::isa::cpu`]).
#[target_feature(enable = "avx512f,avx2,fma")]
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
    blocked::<Avx512>(m, n, k, alpha, a, b, beta, c, y)
}

/// A task of [`crate::generic::prepacked::prepacked`] compiled for this
/// kernel's instruction set (the packing and epilogue code inlined with it).
///
/// # Safety
/// As `Product::run`; the CPU and OS must support the kernel's features
/// ([`crate::isa::cpu`]).
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn prepacked_task<B: BSource, F: FinishRow>(product: &Product<B, F>, task: Task) {
    product.run::<Avx512>(task)
}
