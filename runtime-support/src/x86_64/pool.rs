//! Max and average pooling of f32 planes (2-D, no dilation), for AVX-512F
//! and AVX2 (one kernel over [`PlaneVector`]).
//!
//! Like the depthwise kernel next to it ([`super::depthwise`]): each tile
//! of a plane is copied into a buffer padded with -inf (max) or 0
//! (average) ([`super::tile`]), so that every tap of every output is one
//! unmasked load; a chunk of one vector of output columns of [`ROWS`]
//! output rows stays in registers over the window's taps; 3×3 windows are
//! compiled with their loops unrolled.
//!
//! The results are the portable kernel's bits ([`crate::generic::pool`]):
//! max starts from the window's first tap (-inf where it lies in the
//! padding) and then keeps `v > acc ? v : acc` (what `vmaxps` computes with
//! the new value first, NaN included) over the taps in row-major order, so
//! later padding never changes it; the average adds the taps from 0 in
//! row-major order (the padding's zeros change no sum, which from +0 is
//! never -0) and divides by the same count, the window's rows times its
//! columns inside the input (or the padded input).

use super::plane::{PlaneVector, Ymm, Zmm};
use super::tile::{
    phase_and_offset, pieces, prefetch_plane, tile_buf, with_literal_taps, Taps, TileOut, Tiles, Tiling, ROWS,
    TILE_FLOATS,
};
use crate::abi::pool::{PoolParams, POOL_MAX};
use crate::generic::pool::{average_extent, Planes};
use core::mem::MaybeUninit;

/// Pools planes `planes` of `x` (each `in_size` floats) into those of `y`
/// (each `out_size`); false, with nothing written, when a row group's
/// windows do not fit the tile buffer or the column stride is not 1 or 2.
///
/// # Safety
/// `p` is validated, 2-D, undilated, max or average; `x` and `y` hold the
/// planes; the CPU has AVX-512F.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
pub(crate) unsafe fn pool_planes_avx512(p: &PoolParams, x: *const f32, y: *mut f32, planes: Planes) -> bool {
    pool_planes::<Zmm>(p, x, y, planes)
}

/// [`pool_planes_avx512`] with ymm registers.
///
/// # Safety
/// As `pool_planes_avx512`, the CPU having AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn pool_planes_avx2(p: &PoolParams, x: *const f32, y: *mut f32, planes: Planes) -> bool {
    pool_planes::<Ymm>(p, x, y, planes)
}

/// Most output columns of a tile: a buffer row holds at least [`ROWS`]
/// rows' worth of a row group.
const MAX_TILE_COLS: usize = TILE_FLOATS / ROWS;

#[inline(always)]
unsafe fn pool_planes<V: PlaneVector>(p: &PoolParams, x: *const f32, y: *mut f32, planes: Planes) -> bool {
    let dim = |v: &[i64], d: usize| v[d] as usize;
    let taps = Taps::of(&p.kernel, &p.strides, &[1, 1]);
    let input = [dim(&p.in_spatial, 0), dim(&p.in_spatial, 1)];
    let output = [dim(&p.out_spatial, 0), dim(&p.out_spatial, 1)];
    let max = p.kind == POOL_MAX;
    let pad = if max { f32::NEG_INFINITY } else { 0.0 };
    let mut buf = tile_buf();
    let Some(mut tiles) = Tiles::new::<V>(taps, [input, output], [p.pads_begin[0], p.pads_begin[1]], pad, &mut buf)
    else {
        return false;
    };
    // The average's column counts of the tile columns from `counted`.
    let mut counts = [MaybeUninit::<f32>::uninit(); MAX_TILE_COLS];
    let mut counted = None;
    for plane in planes.range {
        let (xp, yp) = (x.add(plane * planes.in_size), y.add(plane * planes.out_size));
        prefetch_plane(x.wrapping_add((plane + 1) * planes.in_size), planes.in_size);
        with_literal_taps!(taps, {
            for r in tiles.rows() {
                for col in tiles.cols() {
                    if !max && counted != Some(col) {
                        count_columns::<V>(p, col, &tiles.tiling, &mut counts);
                        counted = Some(col);
                    }
                    let buf = tiles.fill::<V>(xp, (r, col));
                    let counts = (!max).then_some(counts.as_ptr() as *const f32);
                    tile::<V>(p, &tiles.tiling, taps, buf, counts, r, tiles.out(yp, (r, col)));
                }
            }
        });
    }
    true
}

/// Per output column `col + j` of a tile, its window's columns inside the
/// input (or the padded input, if counted); lanes past the tile count 1.
#[inline(always)]
unsafe fn count_columns<V: PlaneVector>(
    p: &PoolParams,
    col: usize,
    t: &Tiling,
    counts: &mut [MaybeUninit<f32>; MAX_TILE_COLS],
) {
    for (j, count) in counts[..t.cols.max(V::LANES)].iter_mut().enumerate() {
        let n = if j < t.cols { average_extent(p, 1, col + j) } else { 1 };
        count.write(n as f32);
    }
}

/// One tile's outputs (`t.rows` rows of `t.cols`, the first in output row
/// `r`) from its padded input `buf`: maxima, or averages when `counts`
/// holds the tile's column counts ([`count_columns`]).
#[inline(always)]
unsafe fn tile<V: PlaneVector>(
    p: &PoolParams,
    t: &Tiling,
    taps: Taps,
    buf: *const f32,
    counts: Option<*const f32>,
    r: usize,
    out: TileOut,
) {
    for r0 in pieces(t.rows.max(ROWS), ROWS) {
        for c0 in pieces(t.cols.max(V::LANES), V::LANES) {
            let mut acc = [V::splat(0.0); ROWS];
            if counts.is_none() {
                for (i, acc) in acc.iter_mut().enumerate() {
                    *acc = tap::<V>(t, taps, buf, [r0 + i, 0, 0, c0]);
                }
            }
            for a in 0..taps.kh {
                for b in 0..taps.kw {
                    if counts.is_none() && a == 0 && b == 0 {
                        continue;
                    }
                    for (i, acc) in acc.iter_mut().enumerate() {
                        let v = tap::<V>(t, taps, buf, [r0 + i, a, b, c0]);
                        *acc = if counts.is_none() { V::max(v, *acc) } else { V::add(*acc, v) };
                    }
                }
            }
            for (i, mut acc) in acc.into_iter().enumerate().take(t.rows - r0) {
                if let Some(counts) = counts {
                    let rows = average_extent(p, 0, r + r0 + i);
                    acc = V::div(acc, V::mul(V::splat(rows as f32), V::load(counts.add(c0))));
                }
                out.store(t, r0 + i, c0, acc);
            }
        }
    }
}

/// The inputs of tap `(a, b)` of tile output row `i` and columns from `c0`
/// (a function: a closure would not inline its intrinsics, being compiled
/// without the caller's target features).
#[inline(always)]
unsafe fn tap<V: PlaneVector>(t: &Tiling, taps: Taps, buf: *const f32, [i, a, b, c0]: [usize; 4]) -> V {
    let row = buf.add((i * taps.sh + a) * t.in_stride);
    // Output column `c0 + l`'s input `sw * (c0 + l) + b`.
    let (phase, offset) = phase_and_offset(b, taps.sw);
    V::load(row.add(phase * t.phase_len + c0 + offset))
}
