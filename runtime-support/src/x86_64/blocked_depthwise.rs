//! [`crate::generic::blocked_depthwise`]'s bands in ymm tiles: a tile is
//! a run of up to 8 pixels of one output row, one accumulator each; per
//! tap, one weight vector and one FMA with each pixel's input vector, read
//! from the band's buffer at a constant distance (the column stride, a
//! type parameter). A tap's FMAs into different pixels are independent, so
//! a tile keeps the FMA units busy where a pixel's own chain of taps is
//! latency-bound. A row is cut into tiles of near-equal length (a 14-pixel
//! row is two of 7, not 8 and 6): the shortest tile sets the row's pace.

use super::avx2::activate;
use super::conv_activation::VectorActivation;
use crate::generic::blocked::BLOCK;
use crate::generic::blocked_depthwise::Band;
use crate::generic::conv::tile_activation;
use crate::generic::prepacked::TileActivation;
use core::arch::x86_64::*;

/// Pixels of the longest tile: 8 accumulators, a weight vector and the
/// loads fit AVX2's 16 registers.
const TILE: usize = 8;

/// [`Band::run_portable`]'s result in ymm tiles, with AVX-512's encodings.
///
/// # Safety
/// As `Band::run_portable`; the CPU supports AVX-512F and VL.
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
pub(crate) unsafe fn band_avx512(band: &Band) {
    rows(band)
}

/// [`Band::run_portable`]'s result in ymm tiles.
///
/// # Safety
/// As `Band::run_portable`; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn band_avx2(band: &Band) {
    rows(band)
}

/// The epilogue of every vector of a band.
struct Finish {
    bias: Option<__m256>,
    residual: *const f32,
    vector: Option<VectorActivation>,
    clamp: TileActivation,
}

#[inline(always)]
unsafe fn rows(band: &Band) {
    let bias = band.o.bias;
    let finish = Finish {
        bias: (!bias.is_null()).then(|| _mm256_loadu_ps(bias.add(band.block * BLOCK))),
        residual: band.o.residual,
        vector: VectorActivation::of(band.p),
        // The blocked convolution leaves Sigmoid, Tanh and SiLU to a pass
        // of their own; the rest are a select or a VectorActivation.
        clamp: tile_activation(band.p).unwrap_or(TileActivation::None),
    };
    // `takes` admits column strides 1 and 2 only.
    if band.s.strides[1] == 1 {
        row_tiles::<1>(band, &finish)
    } else {
        row_tiles::<2>(band, &finish)
    }
}

/// Each output row of the band in tiles of near-equal length.
#[inline(always)]
unsafe fn row_tiles<const STRIDE: usize>(band: &Band, finish: &Finish) {
    let width = band.cols.len();
    let tiles = width.div_ceil(TILE);
    for oy in band.rows.clone() {
        let mut ox = band.cols.start;
        for k in 0..tiles {
            let len = width / tiles + usize::from(k < width % tiles);
            let at = (oy, ox);
            match len {
                1 => tile::<1, STRIDE>(band, finish, at),
                2 => tile::<2, STRIDE>(band, finish, at),
                3 => tile::<3, STRIDE>(band, finish, at),
                4 => tile::<4, STRIDE>(band, finish, at),
                5 => tile::<5, STRIDE>(band, finish, at),
                6 => tile::<6, STRIDE>(band, finish, at),
                7 => tile::<7, STRIDE>(band, finish, at),
                _ => tile::<TILE, STRIDE>(band, finish, at),
            }
            ox += len;
        }
    }
}

/// Pixels `ox..ox + P` of output row `oy`.
#[inline(always)]
unsafe fn tile<const P: usize, const STRIDE: usize>(band: &Band, finish: &Finish, (oy, ox): (usize, usize)) {
    let [kh, kw] = band.s.kernel;
    let origin = band.input.add(band.origin((oy, ox))).cast_const();
    let weights = band.weights();
    let mut sums = [_mm256_setzero_ps(); P];
    for ky in 0..kh {
        for kx in 0..kw {
            let w = _mm256_loadu_ps(weights.add((ky * kw + kx) * BLOCK));
            let x = origin.add(band.tap(ky, kx));
            for (t, sum) in sums.iter_mut().enumerate() {
                *sum = _mm256_fmadd_ps(_mm256_loadu_ps(x.add(t * STRIDE * BLOCK)), w, *sum);
            }
        }
    }
    let at = band.output((oy, ox));
    for (t, &sum) in sums.iter().enumerate() {
        let at = at + t * BLOCK;
        let mut v = sum;
        if let Some(bias) = finish.bias {
            v = _mm256_add_ps(v, bias);
        }
        if !finish.residual.is_null() {
            v = _mm256_add_ps(v, _mm256_loadu_ps(finish.residual.add(at)));
        }
        v = match finish.vector {
            Some(vector) => vector.apply(v),
            None => activate(finish.clamp, v),
        };
        _mm256_storeu_ps(band.o.y.add(at), v);
    }
}
