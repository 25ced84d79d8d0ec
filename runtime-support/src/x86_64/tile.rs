//! The padded input tiles of the plane kernels (depthwise convolution,
//! pooling), for AVX-512F and AVX2 (over [`PlaneVector`]).
//!
//! Their planes are small (7 to 112 columns) and their windows a few taps,
//! so a kernel that tests each tap against the padding, or masks its
//! loads, spends more time on that than on the arithmetic. Instead a plane
//! is cut into tiles whose padded input fits [`TILE_FLOATS`]; each tile's
//! input is copied into a buffer on the stack, the padding filled with the
//! kernel's neutral value (0 for sums, -inf for maxima), its rows a whole
//! number of vectors wide, so that every tap of every output is one
//! unmasked load at a fixed offset. A kernel then keeps a chunk of one
//! vector of output columns of [`ROWS`] output rows in registers over all
//! taps.
//!
//! Every tile, row group and column chunk has its full size: the last one
//! along a row or column starts earlier and overlaps the one before it,
//! recomputing the same values. Only a plane narrower than a vector (its
//! rows but the last store whole vectors, spilling into the next row before
//! it is stored) or shorter than a row group (rows computed on the buffer's
//! spare rows, not stored) is cut short.

use super::plane::{lanes, PlaneVector};
use crate::isa::prefetch_floats;
use core::mem::MaybeUninit;
use core::ops::Range;

/// Floats of the padded input tile on the stack: 16 KiB, so that it and
/// the tile's output stay in L1.
pub(crate) const TILE_FLOATS: usize = 4096;
/// Largest input plane (floats) prefetched whole while the plane before
/// it is computed: a quarter of L1.
pub(crate) const PREFETCHED_PLANE: usize = 2048;
/// Output rows computed together: independent accumulators, so that the
/// operations of one row do not wait on each other's latency.
pub(crate) const ROWS: usize = 4;

/// A window's geometry: kernel, strides and dilations, rows then columns.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct Taps {
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub dh: usize,
    pub dw: usize,
}

impl Taps {
    /// The 2-D window of validated params: kernel, strides and dilations.
    pub(crate) fn of(kernel: &[i64], strides: &[i64], dilations: &[i64]) -> Taps {
        let [kh, kw, sh, sw, dh, dw] = [kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1]];
        let [kh, kw, sh, sw, dh, dw] = [kh, kw, sh, sw, dh, dw].map(|v| v as usize);
        Taps { kh, kw, sh, sw, dh, dw }
    }
}

/// How a plane is cut into tiles, and the padded input of a tile.
///
/// A buffer row holds a tile's input row split by column phase: with
/// column stride `sw`, its phase `f` is the `phase_len` input columns
/// `f, f + sw, f + 2 sw, ...` from the tile's first, so that each tap
/// reads its output columns' inputs as one unit-stride run (with stride 2
/// the split is made once per input, not once per tap).
#[derive(Clone, Copy)]
pub(crate) struct Tiling {
    /// Output rows and columns of every tile.
    pub rows: usize,
    pub cols: usize,
    /// Buffer rows a tile's outputs read (row groups included).
    pub in_rows: usize,
    /// Floats per phase (a whole number of vectors) and per buffer row.
    pub phase_len: usize,
    pub in_stride: usize,
}

impl Tiling {
    /// The largest tiles whose padded input fits [`TILE_FLOATS`]: whole
    /// rows if one row group's fit, else a whole number of vectors wide.
    pub(crate) fn new(out: [usize; 2], t: Taps, pad_left: usize, lanes: usize) -> Option<Tiling> {
        let [oh, ow] = out;
        if !matches!(t.sw, 1 | 2) {
            return None;
        }
        let reach = |k: usize, d: usize| (k - 1).saturating_mul(d);
        let in_rows =
            |rows: usize| (rows.max(ROWS) - 1).saturating_mul(t.sh).saturating_add(reach(t.kh, t.dh)).saturating_add(1);
        // The last tap's offset within its phase.
        let phase_reach = reach(t.kw, t.dw) / t.sw;
        // A phase also holds a vector after the padding ([`fill`]).
        let phase_len = |cols: usize| {
            let floats = cols.max(lanes).saturating_add(phase_reach).max(pad_left.div_ceil(t.sw).saturating_add(lanes));
            floats.checked_next_multiple_of(lanes).unwrap_or(usize::MAX)
        };
        let max_phase_len = TILE_FLOATS / in_rows(1) / t.sw / lanes * lanes;
        let cols =
            if phase_len(ow) <= max_phase_len { ow } else { max_phase_len.checked_sub(phase_reach)? / lanes * lanes };
        if cols == 0 {
            return None;
        }
        let phase_len = phase_len(cols);
        let in_stride = t.sw * phase_len;
        let fitting_in_rows = TILE_FLOATS / in_stride;
        let rows = ((fitting_in_rows - 1 - reach(t.kh, t.dh)) / t.sh + 1).min(oh);
        Some(Tiling { rows, cols, in_rows: in_rows(rows), phase_len, in_stride })
    }
}

/// A plane kernel's tiles for one call: the tiling of its planes and the
/// buffer each tile's padded input is copied into.
pub(crate) struct Tiles<'a> {
    pub tiling: Tiling,
    taps: Taps,
    input: [usize; 2],
    output: [usize; 2],
    /// Padding before the first input row and column.
    pads: [i64; 2],
    /// The padding's value.
    pad: f32,
    /// Whether a plane is one tile: then every plane fills the same buffer
    /// columns and rows, and the padding is stored once.
    one_tile: bool,
    /// The plane's first rows that may store whole vectors ([`TileOut`]).
    spilling_rows: usize,
    buf: &'a mut [MaybeUninit<f32>; TILE_FLOATS],
}

/// The tile buffer, on the caller's stack.
pub(crate) type TileBuf = [MaybeUninit<f32>; TILE_FLOATS];

/// An unwritten [`TileBuf`].
pub(crate) const fn tile_buf() -> TileBuf {
    [const { MaybeUninit::uninit() }; TILE_FLOATS]
}

impl<'a> Tiles<'a> {
    /// The tiles of planes `input` pooled or convolved by `taps` into
    /// `output`, padded by `pads` before (`pad` the padding's value); none
    /// when a row group's input does not fit `buf`, or the column stride
    /// is not 1 or 2.
    #[inline(always)]
    pub(crate) unsafe fn new<V: PlaneVector>(
        taps: Taps,
        [input, output]: [[usize; 2]; 2],
        pads: [i64; 2],
        pad: f32,
        buf: &'a mut TileBuf,
    ) -> Option<Tiles<'a>> {
        let tiling = Tiling::new(output, taps, pads[1].max(0) as usize, V::LANES)?;
        let one_tile = tiling.rows == output[0] && tiling.cols == output[1];
        // A plane narrower than a vector: the rows whose whole vector ends
        // inside the plane spill.
        let [oh, ow] = output;
        let spilling_rows = match tiling.cols >= V::LANES {
            true => oh,
            false => (oh * ow).saturating_sub(V::LANES) / ow + usize::from(oh * ow >= V::LANES),
        };
        let tiles = Tiles { tiling, taps, input, output, pads, pad, one_tile, spilling_rows, buf };
        if one_tile {
            splat::<V>(tiles.buf.as_mut_ptr() as *mut f32, 0..tiling.in_rows * tiling.in_stride, pad);
        }
        Some(tiles)
    }

    /// The tiles' first output rows, and (each row of tiles) columns.
    pub(crate) fn rows(&self) -> impl Iterator<Item = usize> {
        pieces(self.output[0], self.tiling.rows)
    }
    pub(crate) fn cols(&self) -> impl Iterator<Item = usize> {
        pieces(self.output[1], self.tiling.cols)
    }

    /// Copies the input under the tile at output row `r` and column `col`
    /// of plane `x` into the buffer ([`fill`]), and returns the buffer.
    #[inline(always)]
    pub(crate) unsafe fn fill<V: PlaneVector>(&mut self, x: *const f32, (r, col): (usize, usize)) -> *const f32 {
        let taps = self.taps;
        // Input row and column of the buffer's first.
        let corner = [(r * taps.sh) as i64 - self.pads[0], (col * taps.sw) as i64 - self.pads[1]];
        let buf = self.buf.as_mut_ptr() as *mut f32;
        fill::<V>(&self.tiling, taps.sw, x, self.input, corner, buf, self.pad, self.one_tile);
        buf
    }

    /// Where the outputs of the tile at `(r, col)` of output plane `y` go.
    pub(crate) fn out(&self, y: *mut f32, (r, col): (usize, usize)) -> TileOut {
        let ow = self.output[1];
        TileOut { y: y.wrapping_add(r * ow + col), ow, spilling_rows: self.spilling_rows.saturating_sub(r) }
    }
}

/// Prefetches the next plane's input (`size` floats at `x`, which may lie
/// past the input) while this one computes, if it is small: small planes
/// are too short for the hardware prefetcher to get going.
#[inline(always)]
pub(crate) fn prefetch_plane(x: *const f32, size: usize) {
    if size <= PREFETCHED_PLANE {
        prefetch_floats(x, size);
    }
}

/// Where input column `q` (from a tile's first) lies in a buffer row with
/// column stride `sw` (1 or 2, [`Tiling`]): its phase, and its offset in it
/// (no division: this runs per tap).
#[inline(always)]
pub(crate) fn phase_and_offset(q: usize, sw: usize) -> (usize, usize) {
    if sw == 1 {
        (0, q)
    } else {
        (q & 1, q >> 1)
    }
}

/// Starts of the `size`-long pieces covering `0..total` (`size <= total`),
/// the last one moved back to end at `total`.
pub(crate) fn pieces(total: usize, size: usize) -> impl Iterator<Item = usize> {
    (0..total).step_by(size).map(move |start| start.min(total - size))
}

/// Copies the input under a tile into `buf`: `t.in_rows` rows from input
/// row `corner[0]`, each split into `sw` phases of the columns from
/// `corner[1]` ([`Tiling`]), `pad` outside the input (`x`, `ih × iw`).
///
/// The padding is stored as `pad` vectors first (unless `padding_filled`:
/// it is still there from the previous plane), then the inside over it,
/// from plain loads: where the inside is `sw` vectors or longer, the last
/// overlapping the one before; else one vector per phase, the lanes past
/// the inside `pad`, read with a mask only where they would run past the
/// plane (`vmaskmovps` loads are slow on AMD Zen).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn fill<V: PlaneVector>(
    t: &Tiling,
    sw: usize,
    x: *const f32,
    [ih, iw]: [usize; 2],
    corner: [i64; 2],
    buf: *mut f32,
    pad: f32,
    padding_filled: bool,
) {
    let (ih, iw, span) = (ih as i64, iw as i64, (sw * t.phase_len) as i64);
    // The row's columns `corner[1] + q` inside the input, and per phase
    // its buffer columns `d` inside (`q = f + sw * d`).
    let first = (-corner[1]).clamp(0, span) as usize;
    let end = (iw - corner[1]).clamp(first as i64, span) as usize;
    let inside = |f: usize| (first.saturating_sub(f)).div_ceil(sw)..(end.saturating_sub(f)).div_ceil(sw);
    // Where buffer column `q`'s phase holds it.
    let at = |q: usize| {
        let (phase, offset) = phase_and_offset(q, sw);
        phase * t.phase_len + offset
    };
    let (n, long) = (end - first, end - first >= sw * V::LANES);
    for j in 0..t.in_rows {
        let h = corner[0] + j as i64;
        let dst = buf.add(j * t.in_stride);
        if !(0..ih).contains(&h) || n == 0 {
            if !padding_filled {
                splat::<V>(dst, 0..t.in_stride, pad);
            }
            continue;
        }
        // The input at buffer column `first`, and the floats from it to
        // the plane's end.
        let offset = (h * iw + corner[1] + first as i64) as usize;
        let (src, in_plane) = (x.add(offset), (ih * iw) as usize - offset);
        if long {
            for f in (0..sw).filter(|_| !padding_filled) {
                let (phase, d) = (dst.add(f * t.phase_len), inside(f));
                splat::<V>(phase, 0..d.start, pad);
                splat::<V>(phase, d.end / V::LANES * V::LANES..t.phase_len, pad);
            }
            if sw == 1 {
                for q in pieces(n, V::LANES) {
                    V::store_first(dst.add(first + q), V::LANES, V::load(src.add(q)));
                }
                continue;
            }
            // Column stride 2: whole pieces from `first`, each phase's
            // stores running on from the one before; then the last piece,
            // moved back to end at `end` (its phases placed afresh: its
            // parity may differ).
            let piece = 2 * V::LANES;
            let (even, odd) = (dst.add(at(first)), dst.add(at(first + 1)));
            for k in 0..n / piece {
                deinterleave_piece::<V>(src.add(k * piece), even.add(k * V::LANES), odd.add(k * V::LANES));
            }
            if n % piece != 0 {
                let q = first + n - piece;
                deinterleave_piece::<V>(src.add(n - piece), dst.add(at(q)), dst.add(at(q + 1)));
            }
            continue;
        }
        if !padding_filled {
            splat::<V>(dst, 0..t.in_stride, pad);
        }
        if sw == 1 {
            V::store_first(dst.add(first), V::LANES, short::<V>(src, n, in_plane, 0, pad));
        } else {
            let (even, odd) =
                V::deinterleave(short::<V>(src, n, in_plane, 0, pad), short::<V>(src, n, in_plane, 1, pad));
            V::store_first(dst.add(at(first)), V::LANES, even);
            V::store_first(dst.add(at(first + 1)), V::LANES, odd);
        }
    }
}

// Helpers of `fill` as functions: closures would not inline their
// intrinsics, being compiled without the caller's target features.

/// Copies the two vectors at `src` into a buffer row: the even columns
/// to `even`, the odd ones to `odd`.
#[inline(always)]
unsafe fn deinterleave_piece<V: PlaneVector>(src: *const f32, even: *mut f32, odd: *mut f32) {
    let (e, o) = V::deinterleave(V::load(src), V::load(src.add(V::LANES)));
    V::store_first(even, V::LANES, e);
    V::store_first(odd, V::LANES, o);
}

/// `value` vectors over `columns` (whole vectors) from `dst`.
#[inline(always)]
unsafe fn splat<V: PlaneVector>(dst: *mut f32, columns: Range<usize>, value: f32) {
    for d in columns.step_by(V::LANES) {
        V::store_first(dst.add(d), V::LANES, V::splat(value));
    }
}

/// The `k`-th vector from `src`, `pad` from float `n` on; `in_plane`
/// floats from `src` may be read.
#[inline(always)]
unsafe fn short<V: PlaneVector>(src: *const f32, n: usize, in_plane: usize, k: usize, pad: f32) -> V {
    let bits = lanes(0, n as i64 - (k * V::LANES) as i64);
    let v = if (k + 1) * V::LANES <= in_plane {
        V::load(src.add(k * V::LANES))
    } else {
        V::load_first(src.wrapping_add(k * V::LANES), n.saturating_sub(k * V::LANES))
    };
    V::select(V::mask(bits), v, V::splat(pad))
}

/// Where a tile's outputs go: `y`, output rows `ow` apart. A tile
/// narrower than a vector (the whole plane's width) stores whole vectors on
/// its first `spilling_rows`, their spill into the next row rewritten when
/// that row is stored (rows are stored in order), and only its columns on
/// the rest.
pub(crate) struct TileOut {
    y: *mut f32,
    ow: usize,
    spilling_rows: usize,
}

impl TileOut {
    /// Stores `v`, the outputs of tile row `i` from tile column `c0`.
    #[inline(always)]
    pub(crate) unsafe fn store<V: PlaneVector>(&self, t: &Tiling, i: usize, c0: usize, v: V) {
        let count = if i < self.spilling_rows { V::LANES } else { t.cols };
        V::store_first(self.y.add(i * self.ow + c0), count, v);
    }
}

/// Runs `$body` with `$taps` rebound to a literal when it is one of the
/// common 3×3 windows (stride 1 or 2, undilated), so that the loops over
/// it unroll (and a depthwise filter's weights stay in registers).
macro_rules! with_literal_taps {
    ($taps:ident, $body:expr) => {{
        const THREE: Taps = Taps { kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1 };
        const THREE_STRIDED: Taps = Taps { sh: 2, sw: 2, ..THREE };
        if $taps == THREE {
            let $taps = THREE;
            $body
        } else if $taps == THREE_STRIDED {
            let $taps = THREE_STRIDED;
            $body
        } else {
            $body
        }
    }};
}
pub(crate) use with_literal_taps;

#[cfg(test)]
mod tests {
    use super::*;

    /// Tiles hold whole vectors and at least a row group: a filter whose
    /// reach exceeds the buffer, or a column stride of 3, is not taken.
    #[test]
    fn declines_what_does_not_fit() {
        let taps = Taps { kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1 };
        let t = Tiling::new([14, 14], taps, 1, 8).unwrap();
        assert_eq!((t.rows, t.cols, t.in_rows, t.in_stride), (14, 14, 16, 16));
        let wide = Tiling::new([9, 1500], taps, 1, 8).unwrap();
        assert!(wide.cols.is_multiple_of(8) && wide.cols < 1500 && wide.in_rows * wide.in_stride <= TILE_FLOATS);
        assert!(Tiling::new([9, 9], Taps { sw: 3, ..taps }, 1, 8).is_none());
        assert!(Tiling::new([9, 9], Taps { kw: 16, dw: 300, ..taps }, 1, 8).is_none());
        assert!(Tiling::new([9, 9], Taps { kh: 16, dh: 300, ..taps }, 1, 8).is_none());
    }
}
