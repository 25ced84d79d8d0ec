//! The row kernels of the depthwise QLinearConv (`generic::qdepthwise`):
//! one channel's virtual row of outputs, [`BLOCK`] (AVX-512) or 16 (AVX2)
//! at a time, for strides 1 and 2.
//!
//! The padded plane's bytes are widened to i16 lanes: by `vpmovzxbw` at
//! stride 1, and at stride 2 by reading the bytes as u16 words and masking
//! the high byte, which leaves the even bytes zero-extended. Two taps'
//! lanes are interleaved (`vpunpcklwd`/`vpunpckhwd`) into i16 pairs
//! `(x[t0], x[t1])` and multiplied by the packed weight pair `(w'[t0],
//! w'[t1])` into i32 lanes: `vpdpwssd` (AVX-512 VNNI) or `vpmaddwd` +
//! `vpaddd` (AVX2). `x ∈ [0, 255]` and `|w'| ≤ 255`, so a pair sums to at
//! most 130050 in magnitude: exact, no saturation; the i32 sums wrap as the
//! reference's. The interleave leaves, per 128-bit lane, outputs 0-3 in
//! the low accumulator and 4-7 in the high one; `vpackssdw` of the two
//! requantized accumulators puts them back in order.
//!
//! The requantization is the generic one's f64 arithmetic lane for lane
//! (`cvtdq2pd`, multiply, add, max, min, add `1.5 · 2^52`), no FMA, so the
//! bits agree; the integer is the low dword of each f64's bits.

use crate::generic::qdepthwise::{Channel, BLOCK};
use crate::generic::quant::ROUNDER;
use core::arch::x86_64::*;

/// The AVX-512 VNNI row kernel; `ch.stride` is 1 or 2.
///
/// # Safety
/// The CPU has AVX-512F/BW/VL and VNNI; `ch` is what
/// `generic::qdepthwise` built and `out` holds `ch.len` bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn rows_vnni(ch: &Channel, out: *mut u8) {
    let r = &ch.requant;
    let f64s = [r.scale, r.zero, r.lo, r.hi].map(|v| _mm512_set1_pd(v));
    let mask = _mm512_set1_epi16(0xff);
    let load = |p: *const u8| match ch.stride {
        1 => _mm512_cvtepu8_epi16(_mm256_loadu_si256(p as *const __m256i)),
        _ => _mm512_and_si512(_mm512_loadu_si512(p as *const __m512i), mask),
    };
    for v0 in (0..ch.len).step_by(BLOCK) {
        let (mut low, mut high) = (_mm512_set1_epi32(ch.offset), _mm512_set1_epi32(ch.offset));
        let at = ch.plane.add(ch.stride * v0);
        for (pair, taps) in ch.pairs.iter().zip(ch.taps.chunks_exact(2)) {
            let (a, b) = (load(at.add(taps[0])), load(at.add(taps[1])));
            let w = _mm512_set1_epi32(*pair);
            low = _mm512_dpwssd_epi32(low, _mm512_unpacklo_epi16(a, b), w);
            high = _mm512_dpwssd_epi32(high, _mm512_unpackhi_epi16(a, b), w);
        }
        let words = _mm512_packs_epi32(requantize_512(low, f64s), requantize_512(high, f64s));
        _mm256_storeu_si256(out.add(v0) as *mut __m256i, _mm512_cvtepi16_epi8(words));
    }
}

/// Sixteen i32 sums requantized to their integers (module doc).
#[inline(always)]
unsafe fn requantize_512(acc: __m512i, [scale, zero, lo, hi]: [__m512d; 4]) -> __m512i {
    let rounder = _mm512_set1_pd(ROUNDER);
    let one = |half: __m256i| {
        let v = _mm512_add_pd(_mm512_mul_pd(_mm512_cvtepi32_pd(half), scale), zero);
        let v = _mm512_add_pd(_mm512_min_pd(_mm512_max_pd(v, lo), hi), rounder);
        _mm512_cvtepi64_epi32(_mm512_castpd_si512(v))
    };
    let (first, second) = (one(_mm512_castsi512_si256(acc)), one(_mm512_extracti64x4_epi64::<1>(acc)));
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(first), second)
}

/// The AVX2 row kernel, 16 outputs at a time; `ch.stride` is 1 or 2.
///
/// # Safety
/// The CPU has AVX2; `ch` is what `generic::qdepthwise` built and `out`
/// holds `ch.len` bytes (a multiple of [`BLOCK`], so of 16).
#[target_feature(enable = "avx2")]
pub unsafe fn rows_avx2(ch: &Channel, out: *mut u8) {
    let r = &ch.requant;
    let f64s = [r.scale, r.zero, r.lo, r.hi].map(|v| _mm256_set1_pd(v));
    let mask = _mm256_set1_epi16(0xff);
    let load = |p: *const u8| match ch.stride {
        1 => _mm256_cvtepu8_epi16(_mm_loadu_si128(p as *const __m128i)),
        _ => _mm256_and_si256(_mm256_loadu_si256(p as *const __m256i), mask),
    };
    for v0 in (0..ch.len).step_by(16) {
        let (mut low, mut high) = (_mm256_set1_epi32(ch.offset), _mm256_set1_epi32(ch.offset));
        let at = ch.plane.add(ch.stride * v0);
        for (pair, taps) in ch.pairs.iter().zip(ch.taps.chunks_exact(2)) {
            let (a, b) = (load(at.add(taps[0])), load(at.add(taps[1])));
            let w = _mm256_set1_epi32(*pair);
            low = _mm256_add_epi32(low, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), w));
            high = _mm256_add_epi32(high, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), w));
        }
        let words = _mm256_packs_epi32(requantize_256(low, f64s), requantize_256(high, f64s));
        // The low byte of each word (the integer, in range), in order.
        let bytes = _mm256_packus_epi16(_mm256_and_si256(words, mask), _mm256_setzero_si256());
        let bytes = _mm256_permute4x64_epi64::<0b1000>(bytes);
        _mm_storeu_si128(out.add(v0) as *mut __m128i, _mm256_castsi256_si128(bytes));
    }
}

/// Eight i32 sums requantized to their integers (module doc).
#[inline(always)]
unsafe fn requantize_256(acc: __m256i, [scale, zero, lo, hi]: [__m256d; 4]) -> __m256i {
    let rounder = _mm256_set1_pd(ROUNDER);
    let low_dwords = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    let one = |half: __m128i| {
        let v = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(half), scale), zero);
        let v = _mm256_add_pd(_mm256_min_pd(_mm256_max_pd(v, lo), hi), rounder);
        _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(v), low_dwords))
    };
    let (first, second) = (one(_mm256_castsi256_si128(acc)), one(_mm256_extracti128_si256::<1>(acc)));
    _mm256_set_m128i(second, first)
}
