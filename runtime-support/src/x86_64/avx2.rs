//! AVX2+FMA sgemm micro-kernel: `4 x 24` tiles, three ymm accumulators per row.
//!
//! 12 accumulators + 3 B vectors + 1 broadcast fill the 16 ymm registers;
//! per depth step 3 loads of B and 4 broadcasts of A feed 12 FMAs. Four
//! rows divide the 8-row A panels ([`PANEL_ROWS`]) that weights are packed
//! in ahead of time, so a panel is two tiles.

use crate::generic::gemm::{blocked, MatMut, MatRef, MicroKernel, PANEL_ROWS};
use crate::generic::prepacked::{BSource, FinishRow, Product, Task};
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
    const KC: usize = 256;

    #[inline(always)]
    unsafe fn tile(
        kc: usize,
        a: *const f32,
        b: *const f32,
        y: *mut f32,
        rs: isize,
        cols: usize,
        alpha: f32,
        accumulate: bool,
    ) {
        tile(kc, a, b, y, rs, cols, alpha, accumulate)
    }

    #[inline(always)]
    unsafe fn prepacked_task<B: BSource, F: FinishRow>(product: &Product<B, F>, task: Task) {
        prepacked_task(product, task)
    }
}

#[target_feature(enable = "avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    kc: usize,
    a: *const f32,
    b: *const f32,
    y: *mut f32,
    rs: isize,
    cols: usize,
    alpha: f32,
    accumulate: bool,
) {
    let mut acc = [[_mm256_setzero_ps(); 3]; MR];
    let (mut a, mut b) = (a, b);
    for _ in 0..kc {
        let bv = [_mm256_loadu_ps(b), _mm256_loadu_ps(b.add(8)), _mm256_loadu_ps(b.add(16))];
        for (i, row) in acc.iter_mut().enumerate() {
            let ai = _mm256_broadcast_ss(&*a.add(i));
            for (r, &v) in row.iter_mut().zip(&bv) {
                *r = _mm256_fmadd_ps(ai, v, *r);
            }
        }
        a = a.add(PANEL_ROWS);
        b = b.add(NR);
    }
    let al = _mm256_set1_ps(alpha);
    // Per vector, lanes below `cols` (all ones in a full tile).
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let masks: [__m256i; 3] =
        core::array::from_fn(|q| _mm256_cmpgt_epi32(_mm256_set1_epi32(cols as i32 - 8 * q as i32), lane));
    for (i, row) in acc.iter().enumerate() {
        let out = y.offset(i as isize * rs);
        for (q, (&v, &mask)) in row.iter().zip(&masks).enumerate() {
            let dst = out.add(8 * q);
            if cols == NR {
                let v = if accumulate { _mm256_fmadd_ps(v, al, _mm256_loadu_ps(dst)) } else { _mm256_mul_ps(v, al) };
                _mm256_storeu_ps(dst, v);
            } else {
                let v = if accumulate {
                    _mm256_fmadd_ps(v, al, _mm256_maskload_ps(dst, mask))
                } else {
                    _mm256_mul_ps(v, al)
                };
                _mm256_maskstore_ps(dst, mask, v);
            }
        }
    }
}

/// [`crate::generic::gemm::sgemm`] with the AVX2+FMA micro-kernel.
///
/// # Safety
/// As `sgemm`; the CPU and OS must support AVX2 and FMA
/// ([`super::cpu_features`]).
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef,
    b: MatRef,
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
/// ([`super::cpu_features`]).
#[target_feature(enable = "avx2,fma")]
unsafe fn prepacked_task<B: BSource, F: FinishRow>(product: &Product<B, F>, task: Task) {
    product.run::<Avx2Fma>(task)
}
