//! [`crate::generic::blocked_depthwise`]'s bands with ymm loops: the ring
//! filled a vector at a time, and each output row in tiles. A tile is a
//! run of up to 8 pixels of the row, one accumulator each; per tap, one
//! weight vector and one FMA with each pixel's input vector, read from the
//! ring at a constant distance (the column stride, a type parameter). A
//! tap's FMAs into different pixels are independent, so a tile keeps the
//! FMA units busy where a pixel's own chain of taps is latency-bound. A row
//! is cut into tiles of near-equal length (a 14-pixel row is two of 7, not
//! 8 and 6): the shortest tile sets the row's pace.

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
    ($(#[$doc:meta])* $name:ident, $features:literal) => {
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
                band.run(copy, zero, |oy, taps| row_tiles::<1>(band, &finish, oy, taps))
            } else {
                band.run(copy, zero, |oy, taps| row_tiles::<2>(band, &finish, oy, taps))
            }
        }
    };
}

band_kernel!(
    /// [`Band::run_portable`]'s result in ymm tiles, with AVX-512's encodings.
    ///
    /// # Safety
    /// As `Band::run_portable`; the CPU supports AVX-512F and VL.
    band_avx512,
    "avx512f,avx512vl,avx2,fma"
);

band_kernel!(
    /// [`Band::run_portable`]'s result in ymm tiles.
    ///
    /// # Safety
    /// As `Band::run_portable`; the CPU supports AVX2 and FMA.
    band_avx2,
    "avx2,fma"
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
