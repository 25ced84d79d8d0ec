//! Depthwise 2-D convolution of f32 channel planes, for AVX-512F and AVX2
//! (one kernel over [`PlaneVector`]).
//!
//! Depthwise planes are small (7 to 112 columns) and a filter is only a
//! few taps, so a kernel that tests each tap against the padding, or masks
//! its loads, spends more time on that than on the multiply-adds. Here a
//! plane is cut into tiles whose padded input fits [`TILE_FLOATS`]; each
//! tile's input is copied into a zero-padded buffer on the stack, its rows
//! a whole number of vectors wide, so that every tap of every output is
//! one unmasked load (stride 1) or two and an even-lane shuffle (stride 2)
//! at a fixed offset. A chunk of one vector of output columns of [`ROWS`]
//! output rows stays in registers over all taps; the common 3×3 filters
//! are compiled with their loops unrolled (the weights stay in registers).
//!
//! Every tile, row group and column chunk has its full size: the last one
//! along a row or column starts earlier and overlaps the one before it,
//! recomputing the same values. Only a plane narrower than a vector (its
//! rows but the last store whole vectors, spilling into the next row before
//! it is stored) or shorter than a row group (rows computed on the buffer's
//! spare rows, not stored) is cut short.
//!
//! The sum per output is the bias, then every tap in kernel order, each
//! added with one fused multiply-add (the portable kernel rounds the
//! product first), taps in the padding adding `w * 0`.

use super::plane::{lanes, PlaneVector, Ymm, Zmm};
use crate::generic::conv::ConvParams;
use crate::generic::prepacked::prefetch_floats;
use core::mem::MaybeUninit;
use core::ops::Range;

/// Floats of the zero-padded input tile on the stack: 16 KiB, so that it
/// and the tile's output stay in L1.
const TILE_FLOATS: usize = 4096;
/// Largest input plane (floats) prefetched whole while the plane before
/// it is convolved: a quarter of L1.
const PREFETCHED_PLANE: usize = 2048;
/// Output rows computed together: independent accumulators, so that the
/// multiply-adds of one row do not wait on each other's latency.
const ROWS: usize = 4;

/// Convolves channel planes `planes` (of `batch × channels`) of `x` with
/// their filters `w` into `y`, starting from their `bias` (none if null),
/// then runs `finish` on each whole output plane (compiled here too, so
/// its loops use zmm). False, with nothing written, when the filter does
/// not fit the tile buffer or the column stride is not 1 or 2.
///
/// # Safety
/// `p` is validated and depthwise 2-D; `x`, `w`, `bias` and `y` hold the
/// input, filters, biases and output; the CPU has AVX-512F.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
pub(crate) unsafe fn depthwise_planes_avx512(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    planes: Range<usize>,
    finish: impl Fn(usize, &mut [f32]),
) -> bool {
    depthwise_planes::<Zmm>(p, x, w, bias, y, planes, finish)
}

/// [`depthwise_planes_avx512`] with ymm registers.
///
/// # Safety
/// As `depthwise_planes_avx512`, the CPU having AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn depthwise_planes_avx2(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    planes: Range<usize>,
    finish: impl Fn(usize, &mut [f32]),
) -> bool {
    depthwise_planes::<Ymm>(p, x, w, bias, y, planes, finish)
}

/// The filter's geometry: kernel, strides and dilations, rows then columns.
#[derive(Clone, Copy, PartialEq)]
struct Taps {
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    dh: usize,
    dw: usize,
}

/// How a plane is cut into tiles, and the padded input of a tile.
///
/// A buffer row holds a tile's input row split by column phase: with
/// column stride `sw`, its phase `f` is the `phase_len` input columns
/// `f, f + sw, f + 2 sw, ...` from the tile's first, so that each tap
/// reads its output columns' inputs as one unit-stride run (with stride 2
/// the split is made once per input, not once per tap).
#[derive(Clone, Copy)]
struct Tiling {
    /// Output rows and columns of every tile.
    rows: usize,
    cols: usize,
    /// Buffer rows a tile's outputs read (row groups included).
    in_rows: usize,
    /// Floats per phase (a whole number of vectors) and per buffer row.
    phase_len: usize,
    in_stride: usize,
}

impl Tiling {
    /// The largest tiles whose padded input fits [`TILE_FLOATS`]: whole
    /// rows if one row group's fit, else a whole number of vectors wide.
    fn new(out: [usize; 2], t: Taps, pad_left: usize, lanes: usize) -> Option<Tiling> {
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

/// Starts of the `size`-long pieces covering `0..total` (`size <= total`),
/// the last one moved back to end at `total`.
fn pieces(total: usize, size: usize) -> impl Iterator<Item = usize> {
    (0..total).step_by(size).map(move |start| start.min(total - size))
}

#[inline(always)]
unsafe fn depthwise_planes<V: PlaneVector>(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    planes: Range<usize>,
    finish: impl Fn(usize, &mut [f32]),
) -> bool {
    let dim = |v: &[i64], d: usize| v[d] as usize;
    let taps = Taps {
        kh: dim(&p.kernel, 0),
        kw: dim(&p.kernel, 1),
        sh: dim(&p.strides, 0),
        sw: dim(&p.strides, 1),
        dh: dim(&p.dilations, 0),
        dw: dim(&p.dilations, 1),
    };
    let out = [dim(&p.out_spatial, 0), dim(&p.out_spatial, 1)];
    let Some(tiling) = Tiling::new(out, taps, p.pads_begin[1].max(0) as usize, V::LANES) else {
        return false;
    };
    let plane = Plane { p, tiling, x, w, bias, y };
    let mut buf = [const { MaybeUninit::<f32>::uninit() }; TILE_FLOATS];
    let buf = buf.as_mut_ptr() as *mut f32;
    // A plane in one tile: every plane fills the same buffer columns and
    // rows, so the padding is zeroed once.
    let one_tile = tiling.rows == out[0] && tiling.cols == out[1];
    if one_tile {
        zeros::<V>(buf, 0..tiling.in_rows * tiling.in_stride);
    }
    // Literal geometries for the common filters, so that their loops unroll.
    let three = Taps { kh: 3, kw: 3, sh: 1, sw: 1, dh: 1, dw: 1 };
    let three_strided = Taps { sh: 2, sw: 2, ..three };
    let in_size = (p.in_spatial[0] * p.in_spatial[1]) as usize;
    for nc in planes {
        // The next plane's input, while this one computes: small planes
        // are too short for the hardware prefetcher to get going.
        if in_size <= PREFETCHED_PLANE {
            prefetch_floats(x.wrapping_add((nc + 1) * in_size), in_size);
        }
        if taps == three {
            plane.convolve::<V>(nc, three, buf, one_tile);
        } else if taps == three_strided {
            plane.convolve::<V>(nc, three_strided, buf, one_tile);
        } else {
            plane.convolve::<V>(nc, taps, buf, one_tile);
        }
        let size = out[0] * out[1];
        finish(nc, core::slice::from_raw_parts_mut(y.add(nc * size), size));
    }
    true
}

/// The operands of every plane of one call.
struct Plane<'a> {
    p: &'a ConvParams,
    tiling: Tiling,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
}

impl Plane<'_> {
    /// Plane `nc`'s convolution, tile by tile through `buf` (its padding
    /// already zero if `padding_zeroed`).
    #[inline(always)]
    unsafe fn convolve<V: PlaneVector>(&self, nc: usize, taps: Taps, buf: *mut f32, padding_zeroed: bool) {
        let p = self.p;
        let [ih, iw] = [p.in_spatial[0] as usize, p.in_spatial[1] as usize];
        let [oh, ow] = [p.out_spatial[0] as usize, p.out_spatial[1] as usize];
        let c = nc % p.out_channels as usize;
        let (x, w) = (self.x.add(nc * ih * iw), self.w.add(c * taps.kh * taps.kw));
        let y = self.y.add(nc * oh * ow);
        let bias = if self.bias.is_null() { 0.0 } else { *self.bias.add(c) };
        let t = self.tiling;
        for r in pieces(oh, t.rows) {
            for col in pieces(ow, t.cols) {
                // Input row and column of the buffer's first.
                let corner = [(r * taps.sh) as i64 - p.pads_begin[0], (col * taps.sw) as i64 - p.pads_begin[1]];
                fill::<V>(&t, taps.sw, x, [ih, iw], corner, buf, padding_zeroed);
                // A plane narrower than a vector: the rows whose whole
                // vector ends inside the plane spill.
                let spilling_rows = match t.cols >= V::LANES {
                    true => t.rows,
                    false => {
                        ((oh * ow).saturating_sub(V::LANES) / ow + usize::from(oh * ow >= V::LANES)).saturating_sub(r)
                    }
                };
                tile::<V>(&t, taps, buf, w, bias, TileOut { y: y.add(r * ow + col), ow, spilling_rows });
            }
        }
    }
}

/// Copies the input under a tile into `buf`: `t.in_rows` rows from input
/// row `corner[0]`, each split into `sw` phases of the columns from
/// `corner[1]` ([`Tiling`]), zero outside the input (`x`, `ih × iw`).
///
/// The zero padding is stored as zero vectors first (unless
/// `padding_zeroed`: it is still zero from the previous plane), then the inside over
/// it, from plain loads: where the inside is `sw` vectors or longer, the
/// last overlapping the one before; else one vector per phase, the lanes
/// past the inside zeroed, read with a mask only where they would run past
/// the plane (`vmaskmovps` loads are slow on AMD Zen).
#[inline(always)]
unsafe fn fill<V: PlaneVector>(
    t: &Tiling,
    sw: usize,
    x: *const f32,
    [ih, iw]: [usize; 2],
    corner: [i64; 2],
    buf: *mut f32,
    padding_zeroed: bool,
) {
    let (ih, iw, span) = (ih as i64, iw as i64, (sw * t.phase_len) as i64);
    // The row's columns `corner[1] + q` inside the input, and per phase
    // its buffer columns `d` inside (`q = f + sw * d`).
    let first = (-corner[1]).clamp(0, span) as usize;
    let end = (iw - corner[1]).clamp(first as i64, span) as usize;
    let inside = |f: usize| (first.saturating_sub(f)).div_ceil(sw)..(end.saturating_sub(f)).div_ceil(sw);
    // Where buffer column `q`'s phase holds it.
    let at = |q: usize| q % sw * t.phase_len + q / sw;
    let (n, long) = (end - first, end - first >= sw * V::LANES);
    for j in 0..t.in_rows {
        let h = corner[0] + j as i64;
        let dst = buf.add(j * t.in_stride);
        if !(0..ih).contains(&h) || n == 0 {
            if !padding_zeroed {
                zeros::<V>(dst, 0..t.in_stride);
            }
            continue;
        }
        // The input at buffer column `first`, and the floats from it to
        // the plane's end.
        let offset = (h * iw + corner[1]) as usize + first;
        let (src, in_plane) = (x.add(offset), (ih * iw) as usize - offset);
        if long {
            for f in (0..sw).filter(|_| !padding_zeroed) {
                let (phase, d) = (dst.add(f * t.phase_len), inside(f));
                zeros::<V>(phase, 0..d.start);
                zeros::<V>(phase, d.end / V::LANES * V::LANES..t.phase_len);
            }
            for (q, src) in pieces(n, sw * V::LANES).map(|q| (first + q, src.add(q))) {
                if sw == 1 {
                    V::store(dst.add(q), V::LANES, V::read(src));
                } else {
                    let (even, odd) = V::deinterleave(V::read(src), V::read(src.add(V::LANES)));
                    V::store(dst.add(at(q)), V::LANES, even);
                    V::store(dst.add(at(q + 1)), V::LANES, odd);
                }
            }
            continue;
        }
        if !padding_zeroed {
            zeros::<V>(dst, 0..t.in_stride);
        }
        if sw == 1 {
            V::store(dst.add(first), V::LANES, short::<V>(src, n, in_plane, 0));
        } else {
            let (even, odd) = V::deinterleave(short::<V>(src, n, in_plane, 0), short::<V>(src, n, in_plane, 1));
            V::store(dst.add(at(first)), V::LANES, even);
            V::store(dst.add(at(first + 1)), V::LANES, odd);
        }
    }
}

// Helpers of `fill` as functions: closures would not inline their
// intrinsics, being compiled without the caller's target features.

/// Zero vectors over `columns` (whole vectors) from `dst`.
#[inline(always)]
unsafe fn zeros<V: PlaneVector>(dst: *mut f32, columns: Range<usize>) {
    for d in columns.step_by(V::LANES) {
        V::store(dst.add(d), V::LANES, V::splat(0.0));
    }
}

/// The `k`-th vector from `src`, zero from float `n` on; `in_plane`
/// floats from `src` may be read.
#[inline(always)]
unsafe fn short<V: PlaneVector>(src: *const f32, n: usize, in_plane: usize, k: usize) -> V {
    let bits = lanes(0, n as i64 - (k * V::LANES) as i64);
    if (k + 1) * V::LANES <= in_plane {
        V::select(V::mask(bits), V::read(src.add(k * V::LANES)), V::splat(0.0))
    } else {
        V::load(src, (k * V::LANES) as isize, 1, V::load_mask(1, bits, bits))
    }
}

/// Where a tile's outputs go: `y`, output rows `ow` apart. A tile
/// narrower than a vector (the whole plane's width) stores whole vectors on
/// its first `spilling_rows`, their spill into the next row rewritten when
/// that row is stored (rows are stored in order), and only its columns on
/// the rest.
struct TileOut {
    y: *mut f32,
    ow: usize,
    spilling_rows: usize,
}

/// One tile's outputs (`t.rows` rows of `t.cols`) from its padded input
/// `buf`, filter `w` and `bias`.
#[inline(always)]
unsafe fn tile<V: PlaneVector>(t: &Tiling, taps: Taps, buf: *const f32, w: *const f32, bias: f32, out: TileOut) {
    for c0 in pieces(t.cols.max(V::LANES), V::LANES) {
        for r0 in pieces(t.rows.max(ROWS), ROWS) {
            let mut acc = [V::splat(bias); ROWS];
            for a in 0..taps.kh {
                for b in 0..taps.kw {
                    let weight = V::splat(*w.add(a * taps.kw + b));
                    // Output column `c0 + l`'s input `sw * (c0 + l) + b * dw`.
                    let (phase, offset) = (b * taps.dw % taps.sw, b * taps.dw / taps.sw);
                    let start = (phase * t.phase_len + c0 + offset) as isize;
                    for (i, acc) in acc.iter_mut().enumerate() {
                        let row = buf.add(((r0 + i) * taps.sh + a * taps.dh) * t.in_stride);
                        *acc = V::mul_add(weight, V::load_full(row, start, 1), *acc);
                    }
                }
            }
            for (i, acc) in acc.into_iter().enumerate().take(t.rows - r0) {
                let count = if r0 + i < out.spilling_rows { V::LANES } else { t.cols };
                V::store(out.y.add((r0 + i) * out.ow + c0), count, acc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::conv::depthwise_plane_portable;
    use crate::generic::test_util::{assert_close, rand_vec};
    use std::vec;

    /// Floats checked past a test's output.
    const GUARD: usize = 32;

    /// Params of `channels` planes: input `[h, w]`, kernel, strides,
    /// dilations, pads `[top, left, bottom, right]`.
    fn planes(
        channels: i64,
        input: [i64; 2],
        kernel: [i64; 2],
        strides: [i64; 2],
        dilations: [i64; 2],
        pads: [i64; 4],
    ) -> ConvParams {
        let mut p = ConvParams {
            batch: 1,
            in_channels: channels,
            out_channels: channels,
            group: channels,
            spatial_rank: 2,
            ..Default::default()
        };
        for d in 0..2 {
            p.in_spatial[d] = input[d];
            p.kernel[d] = kernel[d];
            p.strides[d] = strides[d];
            p.dilations[d] = dilations[d];
            p.pads_begin[d] = pads[d];
            let span = (kernel[d] - 1) * dilations[d] + 1;
            p.out_spatial[d] = (input[d] + pads[d] + pads[d + 2] - span) / strides[d] + 1;
        }
        p
    }

    /// Against the portable kernel, plane by plane: rows shorter than,
    /// equal to and several times a vector, planes shorter than a row
    /// group, both strides, dilation, padding wider than the kernel's
    /// reach, a filter wider than the row, and planes cut into tiles by
    /// rows and by columns; `finish` sees every whole plane once.
    #[test]
    fn matches_portable_planes() {
        use crate::generic::gemm::GemmKernel;
        let (avx512, avx2) = (GemmKernel::Avx512.available(), GemmKernel::Avx2Fma.available());
        if !avx2 {
            std::eprintln!("skipping: no AVX2");
        }
        let cases = [
            planes(3, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(2, [14, 16], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(2, [9, 40], [3, 3], [1, 1], [1, 1], [0, 1, 2, 1]),
            planes(3, [28, 28], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
            planes(1, [11, 71], [3, 5], [2, 2], [1, 1], [2, 1, 1, 3]),
            planes(1, [10, 37], [3, 3], [2, 2], [2, 2], [2, 2, 2, 2]),
            planes(1, [6, 33], [5, 5], [1, 1], [1, 3], [6, 9, 0, 4]),
            planes(1, [4, 5], [3, 7], [1, 1], [1, 1], [1, 3, 1, 3]),
            planes(2, [1, 1], [3, 3], [1, 1], [1, 1], [6, 6, 0, 0]),
            planes(1, [2, 3], [1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
            planes(2, [9, 3], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(1, [56, 112], [3, 3], [1, 2], [1, 1], [1, 1, 1, 1]),
            planes(1, [13, 30], [2, 16], [3, 1], [2, 1], [0, 15, 0, 0]),
            planes(2, [150, 40], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(1, [9, 1500], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            planes(1, [20, 1201], [5, 5], [2, 2], [1, 1], [2, 2, 2, 2]),
        ];
        for (n, p) in cases.iter().enumerate() {
            let channels = p.out_channels as usize;
            let (in_size, out_size) =
                ((p.in_spatial[0] * p.in_spatial[1]) as usize, (p.out_spatial[0] * p.out_spatial[1]) as usize);
            let taps = (p.kernel[0] * p.kernel[1]) as usize;
            let x = rand_vec(channels * in_size, n as u64);
            let w = rand_vec(channels * taps, 100 + n as u64);
            let bias = rand_vec(channels, 200 + n as u64);
            let mut want = vec![f32::NAN; channels * out_size];
            for c in 0..channels {
                let (xc, wc, yc) =
                    (x[c * in_size..].as_ptr(), w[c * taps..].as_ptr(), want[c * out_size..].as_mut_ptr());
                unsafe { depthwise_plane_portable(p, xc, wc, bias[c], yc) };
            }
            for zmm in [true, false].into_iter().filter(|&zmm| if zmm { avx512 } else { avx2 }) {
                // Guard floats past the output must stay untouched.
                let mut got = vec![f32::NAN; channels * out_size + GUARD];
                let finished = std::cell::RefCell::new(vec![]);
                let finish = |nc: usize, out: &mut [f32]| finished.borrow_mut().push((nc, out.len()));
                let (x, w, b, y) = (x.as_ptr(), w.as_ptr(), bias.as_ptr(), got.as_mut_ptr());
                let taken = unsafe {
                    if zmm {
                        depthwise_planes_avx512(p, x, w, b, y, 0..channels, finish)
                    } else {
                        depthwise_planes_avx2(p, x, w, b, y, 0..channels, finish)
                    }
                };
                assert!(taken, "case {n} zmm {zmm}");
                let all: std::vec::Vec<_> = (0..channels).map(|nc| (nc, out_size)).collect();
                assert_eq!(*finished.borrow(), all, "case {n} zmm {zmm}");
                assert!(
                    got[channels * out_size..].iter().all(|v| v.is_nan()),
                    "case {n} zmm {zmm} wrote past its output"
                );
                assert_close(&got[..channels * out_size], &want, 1e-5);
            }
        }
    }

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
