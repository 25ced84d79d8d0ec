//! [`MathLanes`] for zmm (AVX-512F) and ymm (AVX2+FMA) registers, and the
//! kernels written over it compiled for each (elementwise programs,
//! softmax rows): the vector math of [`crate::generic::vector_math`] in 16
//! and 8 lanes.
//!
//! Every operation is the IEEE one the scalar [`MathLanes`] performs
//! (`vfmadd` rounds once like `fmaf`, `vmaxps` returns the second operand
//! on NaN like the scalar `max`), so the lanes agree with it bit for bit.

use super::plane::{Ymm, Zmm};
use crate::abi::elementwise::PROGRAM_OPERANDS;
use crate::generic::elementwise::{run, Program};
use crate::generic::softmax::softmax_rows;
use crate::generic::vector_math::{map_in_place, LaneFunction, MathLanes};
use core::arch::x86_64::*;
use core::ops::Range;

const SIGN: i32 = i32::MIN;
const MAGNITUDE: i32 = i32::MAX;
const SIGNIFICAND: i32 = 0x007f_ffff;
const ONE_BITS: i32 = 0x3f80_0000;

impl MathLanes for Zmm {
    const LANES: usize = 16;
    type Mask = __mmask16;

    #[inline(always)]
    unsafe fn splat(v: f32) -> Zmm {
        Zmm(_mm512_set1_ps(v))
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Zmm {
        Zmm(_mm512_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Zmm) {
        _mm512_storeu_ps(p, v.0)
    }
    #[inline(always)]
    unsafe fn add(a: Zmm, b: Zmm) -> Zmm {
        Zmm(_mm512_add_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn sub(a: Zmm, b: Zmm) -> Zmm {
        Zmm(_mm512_sub_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn mul(a: Zmm, b: Zmm) -> Zmm {
        Zmm(_mm512_mul_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn div(a: Zmm, b: Zmm) -> Zmm {
        Zmm(_mm512_div_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn mul_add(a: Zmm, b: Zmm, c: Zmm) -> Zmm {
        Zmm(_mm512_fmadd_ps(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn max(a: Zmm, b: Zmm) -> Zmm {
        Zmm(_mm512_max_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn min(a: Zmm, b: Zmm) -> Zmm {
        Zmm(_mm512_min_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn sqrt(a: Zmm) -> Zmm {
        Zmm(_mm512_sqrt_ps(a.0))
    }
    #[inline(always)]
    unsafe fn abs(a: Zmm) -> Zmm {
        Zmm(_mm512_castsi512_ps(_mm512_and_epi32(_mm512_castps_si512(a.0), _mm512_set1_epi32(MAGNITUDE))))
    }
    #[inline(always)]
    unsafe fn copy_sign(magnitude: Zmm, sign: Zmm) -> Zmm {
        let m = _mm512_and_epi32(_mm512_castps_si512(magnitude.0), _mm512_set1_epi32(MAGNITUDE));
        let s = _mm512_and_epi32(_mm512_castps_si512(sign.0), _mm512_set1_epi32(SIGN));
        Zmm(_mm512_castsi512_ps(_mm512_or_epi32(m, s)))
    }
    #[inline(always)]
    unsafe fn round(a: Zmm) -> Zmm {
        Zmm(_mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a.0))
    }
    #[inline(always)]
    unsafe fn floor(a: Zmm) -> Zmm {
        Zmm(_mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(a.0))
    }
    #[inline(always)]
    unsafe fn less(a: Zmm, b: Zmm) -> __mmask16 {
        _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a.0, b.0)
    }
    #[inline(always)]
    unsafe fn is_nan(a: Zmm) -> __mmask16 {
        _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a.0, a.0)
    }
    #[inline(always)]
    unsafe fn any(mask: __mmask16) -> bool {
        mask != 0
    }
    #[inline(always)]
    unsafe fn select(mask: __mmask16, if_in: Zmm, other: Zmm) -> Zmm {
        Zmm(_mm512_mask_blend_ps(mask, other.0, if_in.0))
    }
    #[inline(always)]
    unsafe fn pow2(n: Zmm) -> Zmm {
        let biased = _mm512_add_epi32(_mm512_cvtps_epi32(n.0), _mm512_set1_epi32(127));
        Zmm(_mm512_castsi512_ps(_mm512_slli_epi32::<23>(biased)))
    }
    #[inline(always)]
    unsafe fn pow2_of_rounded(k: Zmm) -> Zmm {
        Zmm(_mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_castps_si512(k.0))))
    }
    /// `vscalefps`: one instruction, rounded once as the default's halves.
    #[inline(always)]
    unsafe fn scale(p: Zmm, n: Zmm) -> Zmm {
        Zmm(_mm512_scalef_ps(p.0, n.0))
    }
    /// `vscalefps` on `2 + 2p` and `n - 1` (any magnitude, unlike the
    /// default `scale`'s halves), normal and subnormal lanes alike.
    #[inline(always)]
    unsafe fn exp_scaled(p: Zmm, n: Zmm, _pow2: Zmm) -> Zmm {
        let two = Zmm::splat(2.0);
        Zmm::scale(Zmm::mul_add(p, two, two), Zmm::sub(n, Zmm::splat(1.0)))
    }
    #[inline(always)]
    unsafe fn split_exponent(x: Zmm) -> (Zmm, Zmm) {
        let bits = _mm512_castps_si512(x.0);
        let exponent = _mm512_sub_epi32(_mm512_srli_epi32::<23>(bits), _mm512_set1_epi32(127));
        let significand =
            _mm512_or_epi32(_mm512_and_epi32(bits, _mm512_set1_epi32(SIGNIFICAND)), _mm512_set1_epi32(ONE_BITS));
        (Zmm(_mm512_castsi512_ps(significand)), Zmm(_mm512_cvtepi32_ps(exponent)))
    }
}

impl MathLanes for Ymm {
    const LANES: usize = 8;
    /// All ones in the lanes of the set.
    type Mask = __m256;

    #[inline(always)]
    unsafe fn splat(v: f32) -> Ymm {
        Ymm(_mm256_set1_ps(v))
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Ymm {
        Ymm(_mm256_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Ymm) {
        _mm256_storeu_ps(p, v.0)
    }
    #[inline(always)]
    unsafe fn add(a: Ymm, b: Ymm) -> Ymm {
        Ymm(_mm256_add_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn sub(a: Ymm, b: Ymm) -> Ymm {
        Ymm(_mm256_sub_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn mul(a: Ymm, b: Ymm) -> Ymm {
        Ymm(_mm256_mul_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn div(a: Ymm, b: Ymm) -> Ymm {
        Ymm(_mm256_div_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn mul_add(a: Ymm, b: Ymm, c: Ymm) -> Ymm {
        Ymm(_mm256_fmadd_ps(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn max(a: Ymm, b: Ymm) -> Ymm {
        Ymm(_mm256_max_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn min(a: Ymm, b: Ymm) -> Ymm {
        Ymm(_mm256_min_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn sqrt(a: Ymm) -> Ymm {
        Ymm(_mm256_sqrt_ps(a.0))
    }
    #[inline(always)]
    unsafe fn abs(a: Ymm) -> Ymm {
        Ymm(_mm256_and_ps(a.0, _mm256_castsi256_ps(_mm256_set1_epi32(MAGNITUDE))))
    }
    #[inline(always)]
    unsafe fn copy_sign(magnitude: Ymm, sign: Ymm) -> Ymm {
        let m = _mm256_and_ps(magnitude.0, _mm256_castsi256_ps(_mm256_set1_epi32(MAGNITUDE)));
        let s = _mm256_and_ps(sign.0, _mm256_castsi256_ps(_mm256_set1_epi32(SIGN)));
        Ymm(_mm256_or_ps(m, s))
    }
    #[inline(always)]
    unsafe fn round(a: Ymm) -> Ymm {
        Ymm(_mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a.0))
    }
    #[inline(always)]
    unsafe fn floor(a: Ymm) -> Ymm {
        Ymm(_mm256_floor_ps(a.0))
    }
    #[inline(always)]
    unsafe fn less(a: Ymm, b: Ymm) -> __m256 {
        _mm256_cmp_ps::<_CMP_LT_OQ>(a.0, b.0)
    }
    #[inline(always)]
    unsafe fn is_nan(a: Ymm) -> __m256 {
        _mm256_cmp_ps::<_CMP_UNORD_Q>(a.0, a.0)
    }
    #[inline(always)]
    unsafe fn any(mask: __m256) -> bool {
        _mm256_movemask_ps(mask) != 0
    }
    #[inline(always)]
    unsafe fn select(mask: __m256, if_in: Ymm, other: Ymm) -> Ymm {
        Ymm(_mm256_blendv_ps(other.0, if_in.0, mask))
    }
    #[inline(always)]
    unsafe fn pow2(n: Ymm) -> Ymm {
        let biased = _mm256_add_epi32(_mm256_cvtps_epi32(n.0), _mm256_set1_epi32(127));
        Ymm(_mm256_castsi256_ps(_mm256_slli_epi32::<23>(biased)))
    }
    #[inline(always)]
    unsafe fn pow2_of_rounded(k: Ymm) -> Ymm {
        Ymm(_mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_castps_si256(k.0))))
    }
    #[inline(always)]
    unsafe fn split_exponent(x: Ymm) -> (Ymm, Ymm) {
        let bits = _mm256_castps_si256(x.0);
        let exponent = _mm256_sub_epi32(_mm256_srli_epi32::<23>(bits), _mm256_set1_epi32(127));
        let significand =
            _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(SIGNIFICAND)), _mm256_set1_epi32(ONE_BITS));
        (Ymm(_mm256_castsi256_ps(significand)), Ymm(_mm256_cvtepi32_ps(exponent)))
    }
}

/// [`run`] in zmm registers.
///
/// # Safety
/// As [`crate::abi::onnxc_elementwise_f32`]; the CPU supports AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn run_program_avx512(
    program: &Program,
    y: *mut f32,
    operands: [*const f32; PROGRAM_OPERANDS],
    span: Range<usize>,
) {
    run::<Zmm>(program, y, operands, span)
}

/// [`run`] in ymm registers.
///
/// # Safety
/// As [`crate::abi::onnxc_elementwise_f32`]; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn run_program_avx2(
    program: &Program,
    y: *mut f32,
    operands: [*const f32; PROGRAM_OPERANDS],
    span: Range<usize>,
) {
    run::<Ymm>(program, y, operands, span)
}

/// [`softmax_rows`] in zmm registers.
///
/// # Safety
/// As `softmax_rows`; the CPU supports AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn softmax_rows_avx512(x: *const f32, y: *mut f32, rows: usize, len: usize, log: bool) {
    softmax_rows::<Zmm>(x, y, rows, len, log)
}

/// [`softmax_rows`] in ymm registers.
///
/// # Safety
/// As `softmax_rows`; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn softmax_rows_avx2(x: *const f32, y: *mut f32, rows: usize, len: usize, log: bool) {
    softmax_rows::<Ymm>(x, y, rows, len, log)
}

/// [`map_in_place`] in zmm registers.
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn map_in_place_avx512<F: LaneFunction>(xs: &mut [f32]) {
    map_in_place::<Zmm, F>(xs)
}

/// [`map_in_place`] in ymm registers.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn map_in_place_avx2<F: LaneFunction>(xs: &mut [f32]) {
    map_in_place::<Ymm, F>(xs)
}
