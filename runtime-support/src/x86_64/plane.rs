//! The vector operations of the plane kernels ([`super::depthwise`],
//! [`super::pool`]), for zmm (AVX-512F, 16 lanes) and ymm (AVX2, 8 lanes),
//! beyond the arithmetic of [`MathLanes`]: the kernels are written once
//! over [`PlaneVector`] and compiled per ISA.
//!
//! Lane sets are built as bits (bit `l` for lane `l`, [`lanes`]) and
//! turned into the ISA's mask: AVX-512 masks are those bits; AVX2 masks
//! are vectors, a compare away. A masked-off lane is never read
//! (`vmaskmovps` and AVX-512 masked loads do not fault on it), so a load
//! may run past the input.

use super::transpose::{transpose16, transpose8};
use crate::generic::vector_math::MathLanes;
use core::arch::x86_64::*;

/// Lanes `l` of `0..32` with `lo <= l < hi`, as bits: the masks of the
/// plane kernels (depthwise, pooling).
#[inline(always)]
pub(crate) fn lanes(lo: i64, hi: i64) -> u32 {
    let (lo, hi) = (lo.clamp(0, 32) as u32, hi.clamp(0, 32) as u32);
    let below = |n: u32| if n >= 32 { u32::MAX } else { (1u32 << n) - 1 };
    below(hi) & !below(lo)
}

/// One vector of the plane kernels. Its methods carry no `target_feature`
/// (which would forbid `inline(always)`): they are inlined into the
/// kernels' per-ISA entry points, whose features their intrinsics take.
pub(crate) trait PlaneVector: MathLanes {
    /// The lanes of `bits` (bit `l` for lane `l`; bits past `LANES` ignored).
    unsafe fn mask(bits: u32) -> Self::Mask;
    /// The first `count` floats from `p` (all when `count >= LANES`), zero
    /// in the other lanes, whose floats are not read.
    unsafe fn load_first(p: *const f32, count: usize) -> Self;
    /// The `2 * LANES` floats of `lo` then `hi`, split: the even ones, the
    /// odd ones.
    unsafe fn deinterleave(lo: Self, hi: Self) -> (Self, Self);
    /// Stores the first `count` lanes (all when `count >= LANES`) at `p`.
    unsafe fn store_first(p: *mut f32, count: usize, v: Self);
    /// The `LANES x LANES` block whose row `i` is the `LANES` floats at
    /// `src + i * stride`, transposed: only its first `rows` (at least one)
    /// rows and `cols` columns are read (the rest is zero), and column
    /// `j < cols` is stored at `dst + j * LANES`.
    unsafe fn transpose_in(src: *const f32, stride: usize, rows: usize, cols: usize, dst: *mut f32);
    /// The `LANES` vectors at `src` (vector `j` at `src + j * LANES`),
    /// transposed: row `i < rows` (lane `i` of each) is stored at `dst + i *
    /// stride`, its first `cols` floats.
    unsafe fn transpose_out(src: *const f32, dst: *mut f32, stride: usize, rows: usize, cols: usize);
}

/// A zmm register (AVX-512F).
#[derive(Clone, Copy)]
pub(crate) struct Zmm(pub(crate) __m512);

impl PlaneVector for Zmm {
    #[inline(always)]
    unsafe fn mask(bits: u32) -> u16 {
        bits as u16
    }
    #[inline(always)]
    unsafe fn load_first(p: *const f32, count: usize) -> Zmm {
        Zmm(_mm512_maskz_loadu_ps(lanes(0, count as i64) as u16, p))
    }
    #[inline(always)]
    unsafe fn deinterleave(Zmm(lo): Zmm, Zmm(hi): Zmm) -> (Zmm, Zmm) {
        let odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
        (Zmm::even_lanes(lo, hi), Zmm(_mm512_permutex2var_ps(lo, odd, hi)))
    }
    #[inline(always)]
    unsafe fn store_first(p: *mut f32, count: usize, v: Zmm) {
        _mm512_mask_storeu_ps(p, lanes(0, count as i64) as u16, v.0)
    }
    #[inline(always)]
    unsafe fn transpose_in(src: *const f32, stride: usize, rows: usize, cols: usize, dst: *mut f32) {
        // Rows past `rows` load no lanes, from the last row's address (a
        // masked load of an unmapped page would take a microcode assist):
        // the loops have constant bounds, and the rows stay in registers.
        let mask = lanes(0, cols as i64) as u16;
        let mut r = [_mm512_setzero_ps(); 16];
        for (i, row) in r.iter_mut().enumerate() {
            let (mask, i) = if i < rows { (mask, i) } else { (0, rows - 1) };
            *row = _mm512_maskz_loadu_ps(mask, src.add(i * stride));
        }
        for (j, &column) in transpose16(r).iter().enumerate() {
            if j < cols {
                _mm512_storeu_ps(dst.add(j * 16), column);
            }
        }
    }
    #[inline(always)]
    unsafe fn transpose_out(src: *const f32, dst: *mut f32, stride: usize, rows: usize, cols: usize) {
        let mut r = [_mm512_setzero_ps(); 16];
        for (j, column) in r.iter_mut().enumerate() {
            *column = _mm512_loadu_ps(src.add(j * 16));
        }
        let mask = lanes(0, cols as i64) as u16;
        for (i, &row) in transpose16(r).iter().enumerate() {
            if i < rows {
                _mm512_mask_storeu_ps(dst.add(i * stride), mask, row);
            }
        }
    }
}

impl Zmm {
    /// The even lanes of `lo` then those of `hi`.
    #[inline(always)]
    unsafe fn even_lanes(lo: __m512, hi: __m512) -> Zmm {
        let even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        Zmm(_mm512_permutex2var_ps(lo, even, hi))
    }
}

/// A ymm register (AVX2).
#[derive(Clone, Copy)]
pub(crate) struct Ymm(pub(crate) __m256);

impl PlaneVector for Ymm {
    #[inline(always)]
    unsafe fn mask(bits: u32) -> __m256 {
        let bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(bits as i32), bit), bit))
    }
    /// A whole vector is a plain load (`vmaskmovps` loads are several times
    /// slower than plain ones on AMD Zen).
    #[inline(always)]
    unsafe fn load_first(p: *const f32, count: usize) -> Ymm {
        if count >= 8 {
            return Ymm(_mm256_loadu_ps(p));
        }
        Ymm(_mm256_maskload_ps(p, _mm256_castps_si256(Self::mask(lanes(0, count as i64)))))
    }
    #[inline(always)]
    unsafe fn deinterleave(Ymm(lo): Ymm, Ymm(hi): Ymm) -> (Ymm, Ymm) {
        let odd = _mm256_shuffle_ps::<0b11_01_11_01>(lo, hi);
        (Ymm::even_lanes(lo, hi), Ymm::swap_middle_pairs(odd))
    }
    #[inline(always)]
    /// A part vector goes through the stack: AMD Zen runs a `vmaskmovps`
    /// store as a long microcode sequence, slower than a few scalar stores.
    unsafe fn store_first(p: *mut f32, count: usize, v: Ymm) {
        if count >= 8 {
            return _mm256_storeu_ps(p, v.0);
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), v.0);
        for (l, &x) in lanes.iter().enumerate().take(count) {
            p.add(l).write(x);
        }
    }
    #[inline(always)]
    unsafe fn transpose_in(src: *const f32, stride: usize, rows: usize, cols: usize, dst: *mut f32) {
        // As for zmm: rows past `rows` load no lanes, at the last row.
        let mut r = [_mm256_setzero_ps(); 8];
        for (i, row) in r.iter_mut().enumerate() {
            let (count, i) = if i < rows { (cols, i) } else { (0, rows - 1) };
            *row = Self::load_first(src.add(i * stride), count).0;
        }
        for (j, &column) in transpose8(r).iter().enumerate() {
            if j < cols {
                _mm256_storeu_ps(dst.add(j * 8), column);
            }
        }
    }
    #[inline(always)]
    unsafe fn transpose_out(src: *const f32, dst: *mut f32, stride: usize, rows: usize, cols: usize) {
        let mut r = [_mm256_setzero_ps(); 8];
        for (j, column) in r.iter_mut().enumerate() {
            *column = _mm256_loadu_ps(src.add(j * 8));
        }
        for (i, &row) in transpose8(r).iter().enumerate() {
            if i < rows {
                Self::store_first(dst.add(i * stride), cols, Ymm(row));
            }
        }
    }
}

impl Ymm {
    /// The even lanes of `lo` then those of `hi`.
    #[inline(always)]
    unsafe fn even_lanes(lo: __m256, hi: __m256) -> Ymm {
        // Even lanes of each 128-bit half: lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6;
        // then the middle 64-bit pairs swap places.
        Ymm::swap_middle_pairs(_mm256_shuffle_ps::<0b10_00_10_00>(lo, hi))
    }

    /// `v`'s 64-bit lane pairs 1 and 2 swapped: the 128-bit halves' picks
    /// of `_mm256_shuffle_ps` put back in order.
    #[inline(always)]
    unsafe fn swap_middle_pairs(v: __m256) -> Ymm {
        Ymm(_mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v))))
    }
}
