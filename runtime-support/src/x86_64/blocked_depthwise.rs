//! [`crate::generic::blocked_depthwise`]'s bands with ymm loops: the ring
//! filled a vector at a time, and each output row in tiles. A tile is a
//! run of up to 8 pixels of the row, one accumulator each; per tap, one
//! weight vector and one FMA with each pixel's input vector, read from the
//! ring at a constant distance (the column stride, a type parameter). A
//! tap's FMAs into different pixels are independent, so a tile keeps the
//! FMA units busy where a pixel's own chain of taps is latency-bound. A row
//! is cut into tiles of near-equal length (a 14-pixel row is two of 7, not
//! 8 and 6): the shortest tile sets the row's pace.
//!
//! With AVX-512 and column stride 1, a zmm register holds two neighbouring
//! pixels of a block (consecutive in the ring), so a tile is up to 16
//! pixels in 8 registers and each tap's weight vector is duplicated into
//! both halves: on cores with 512-bit units that halves the FMAs. A pixel
//! sums its taps in the same order either way, so its bits are the same.

use super::blocked_conv::Epilogue;
use crate::generic::blocked::BLOCK;
use crate::generic::blocked_depthwise::{Band, RowTaps};
use core::arch::x86_64::*;

/// Pixels of the longest tile: 8 accumulators, a weight vector and the
/// loads fit AVX2's 16 registers.
const TILE: usize = 8;

/// Defines a SIMD level's band function: the closures that fill the ring
/// and compute the rows are written inside it, so that they are compiled
/// with its target features (a closure of a plain function would call each
/// intrinsic out of line).
macro_rules! band_kernel {
    ($(#[$doc:meta])* $name:ident, $features:literal, $stride_one_rows:ident) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $name(band: &Band) {
            let finish = Epilogue::of(band.p);
            let copy = |src: *const f32, dst: *mut f32, vectors: usize| {
                for i in 0..vectors {
                    _mm256_store_ps(dst.add(i * BLOCK), _mm256_loadu_ps(src.add(i * BLOCK)));
                }
            };
            let zero = |dst: *mut f32, vectors: usize| {
                for i in 0..vectors {
                    _mm256_store_ps(dst.add(i * BLOCK), _mm256_setzero_ps());
                }
            };
            // `takes` admits column strides 1 and 2 only.
            if band.s.strides[1] == 1 {
                band.run(copy, zero, |oy, taps| $stride_one_rows(band, &finish, oy, taps))
            } else {
                band.run(copy, zero, |oy, taps| row_tiles::<2>(band, &finish, oy, taps))
            }
        }
    };
}

band_kernel!(
    /// [`Band::run_portable`]'s result in zmm tiles of pixel pairs at column
    /// stride 1, else in ymm tiles with AVX-512's encodings.
    ///
    /// # Safety
    /// As `Band::run_portable`; the CPU supports AVX-512F and VL.
    band_avx512,
    "avx512f,avx512vl,avx2,fma",
    pair_row_tiles
);

band_kernel!(
    /// [`Band::run_portable`]'s result in ymm tiles.
    ///
    /// # Safety
    /// As `Band::run_portable`; the CPU supports AVX2 and FMA.
    band_avx2,
    "avx2,fma",
    stride_one_row_tiles
);

/// Output row `oy` of the band in tiles of near-equal length.
#[inline(always)]
unsafe fn row_tiles<const STRIDE: usize>(band: &Band, finish: &Epilogue, oy: usize, taps: &RowTaps) {
    let width = band.cols.len();
    let tiles = width.div_ceil(TILE);
    let mut ox = band.cols.start;
    for k in 0..tiles {
        let len = width / tiles + usize::from(k < width % tiles);
        match len {
            1 => tile::<1, STRIDE>(band, finish, taps, oy, ox),
            2 => tile::<2, STRIDE>(band, finish, taps, oy, ox),
            3 => tile::<3, STRIDE>(band, finish, taps, oy, ox),
            4 => tile::<4, STRIDE>(band, finish, taps, oy, ox),
            5 => tile::<5, STRIDE>(band, finish, taps, oy, ox),
            6 => tile::<6, STRIDE>(band, finish, taps, oy, ox),
            7 => tile::<7, STRIDE>(band, finish, taps, oy, ox),
            _ => tile::<TILE, STRIDE>(band, finish, taps, oy, ox),
        }
        ox += len;
    }
}

/// [`row_tiles`] at column stride 1 (AVX2's ymm tiles).
#[inline(always)]
unsafe fn stride_one_row_tiles(band: &Band, finish: &Epilogue, oy: usize, taps: &RowTaps) {
    row_tiles::<1>(band, finish, oy, taps)
}

/// Output row `oy` (column stride 1) in tiles of near-equal length of up
/// to [`PAIR_TILE`] pixels, two to a zmm register.
#[inline(always)]
unsafe fn pair_row_tiles(band: &Band, finish: &Epilogue, oy: usize, taps: &RowTaps) {
    let width = band.cols.len();
    let tiles = width.div_ceil(PAIR_TILE);
    let mut ox = band.cols.start;
    for k in 0..tiles {
        let len = width / tiles + usize::from(k < width % tiles);
        let odd = len % 2 == 1;
        match len / 2 {
            0 => tile::<1, 1>(band, finish, taps, oy, ox),
            1 => pair_tile::<1>(band, finish, taps, (oy, ox), odd),
            2 => pair_tile::<2>(band, finish, taps, (oy, ox), odd),
            3 => pair_tile::<3>(band, finish, taps, (oy, ox), odd),
            4 => pair_tile::<4>(band, finish, taps, (oy, ox), odd),
            5 => pair_tile::<5>(band, finish, taps, (oy, ox), odd),
            6 => pair_tile::<6>(band, finish, taps, (oy, ox), odd),
            7 => pair_tile::<7>(band, finish, taps, (oy, ox), odd),
            _ => pair_tile::<8>(band, finish, taps, (oy, ox), false),
        }
        ox += len;
    }
}

/// Pixels of the longest tile of pixel pairs: 8 zmm accumulators.
const PAIR_TILE: usize = 16;

/// Pixels `ox..ox + 2 * PAIRS` of output row `oy` (column stride 1) in
/// zmm pairs, and the pixel after them in a ymm register when `odd`.
#[inline(always)]
unsafe fn pair_tile<const PAIRS: usize>(
    band: &Band,
    finish: &Epilogue,
    taps: &RowTaps,
    (oy, ox): (usize, usize),
    odd: bool,
) {
    let (kw, dilation) = (band.s.kernel[1], band.s.dilations[1]);
    let column = band.column(ox);
    let mut pairs = [_mm512_setzero_ps(); PAIRS];
    let mut last = _mm256_setzero_ps();
    for (k, &input) in taps.rows[..taps.count].iter().enumerate() {
        let weights = band.weights(taps.first + k);
        for kx in 0..kw {
            let w = _mm256_loadu_ps(weights.add(kx * BLOCK));
            let both = _mm512_shuffle_f32x4::<0x44>(_mm512_castps256_ps512(w), _mm512_castps256_ps512(w));
            let x = input.add(column + kx * dilation * BLOCK);
            for (t, sum) in pairs.iter_mut().enumerate() {
                *sum = _mm512_fmadd_ps(_mm512_loadu_ps(x.add(2 * t * BLOCK)), both, *sum);
            }
            if odd {
                last = _mm256_fmadd_ps(_mm256_load_ps(x.add(2 * PAIRS * BLOCK)), w, last);
            }
        }
    }
    let at = band.output(oy, ox);
    for (t, &sum) in pairs.iter().enumerate() {
        let upper = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(sum)));
        finish.finish(band.p, &band.o, band.block, at + 2 * t * BLOCK, _mm512_castps512_ps256(sum));
        finish.finish(band.p, &band.o, band.block, at + (2 * t + 1) * BLOCK, upper);
    }
    if odd {
        finish.finish(band.p, &band.o, band.block, at + 2 * PAIRS * BLOCK, last);
    }
}

/// Pixels `ox..ox + P` of output row `oy`.
#[inline(always)]
unsafe fn tile<const P: usize, const STRIDE: usize>(
    band: &Band,
    finish: &Epilogue,
    taps: &RowTaps,
    oy: usize,
    ox: usize,
) {
    let (kw, dilation) = (band.s.kernel[1], band.s.dilations[1]);
    let column = band.column(ox);
    let mut sums = [_mm256_setzero_ps(); P];
    for (k, &input) in taps.rows[..taps.count].iter().enumerate() {
        let weights = band.weights(taps.first + k);
        for kx in 0..kw {
            let w = _mm256_loadu_ps(weights.add(kx * BLOCK));
            let x = input.add(column + kx * dilation * BLOCK);
            for (t, sum) in sums.iter_mut().enumerate() {
                *sum = _mm256_fmadd_ps(_mm256_load_ps(x.add(t * STRIDE * BLOCK)), w, *sum);
            }
        }
    }
    let at = band.output(oy, ox);
    for (t, &sum) in sums.iter().enumerate() {
        finish.finish(band.p, &band.o, band.block, at + t * BLOCK, sum);
    }
}
