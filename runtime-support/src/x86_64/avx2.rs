//! AVX2+FMA sgemm micro-kernel: `6 x 16` tiles, two ymm accumulators per row.
//!
//! 12 accumulators + 2 B vectors + 1 broadcast fill 15 of the 16 ymm
//! registers; per depth step 2 loads of B and 6 broadcasts of A feed 12 FMAs.

use crate::generic::gemm::{blocked, MatMut, MatRef, MicroKernel};
use core::arch::x86_64::*;

/// Rows per tile.
pub const MR: usize = 6;
/// Columns per tile (two ymm vectors).
pub const NR: usize = 16;

/// The AVX2+FMA micro-kernel (see the module doc).
pub struct Avx2Fma;

impl MicroKernel for Avx2Fma {
    const MR: usize = MR;
    const NR: usize = NR;
    const A_BLOCK: usize = 48 * 1024;
    const KC: usize = 256;

    #[inline(always)]
    unsafe fn tile(kc: usize, a: *const f32, b: *const f32, y: *mut f32, rs: isize, alpha: f32, accumulate: bool) {
        tile(kc, a, b, y, rs, alpha, accumulate)
    }
}

#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn tile(kc: usize, a: *const f32, b: *const f32, y: *mut f32, rs: isize, alpha: f32, accumulate: bool) {
    let mut acc0 = [_mm256_setzero_ps(); MR];
    let mut acc1 = [_mm256_setzero_ps(); MR];
    let (mut a, mut b) = (a, b);
    for _ in 0..kc {
        let b0 = _mm256_loadu_ps(b);
        let b1 = _mm256_loadu_ps(b.add(8));
        for i in 0..MR {
            let ai = _mm256_broadcast_ss(&*a.add(i));
            acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
            acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
        }
        a = a.add(MR);
        b = b.add(NR);
    }
    let al = _mm256_set1_ps(alpha);
    for i in 0..MR {
        let row = y.offset(i as isize * rs);
        let (v0, v1) = if accumulate {
            (
                _mm256_fmadd_ps(acc0[i], al, _mm256_loadu_ps(row)),
                _mm256_fmadd_ps(acc1[i], al, _mm256_loadu_ps(row.add(8))),
            )
        } else {
            (_mm256_mul_ps(acc0[i], al), _mm256_mul_ps(acc1[i], al))
        };
        _mm256_storeu_ps(row, v0);
        _mm256_storeu_ps(row.add(8), v1);
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
