//! Depthwise 2-D convolution with channels in the lanes, for small planes
//! (over [`PlaneVector`], AVX-512F and AVX2).
//!
//! The plane kernels ([`super::depthwise`]) put a row of outputs in the
//! lanes: on a 7×7 or 14×14 plane most of each vector is padding, and each
//! plane pays for setting up its own tile. Here a vector holds one pixel of
//! `LANES` channels instead. A group of `LANES` planes is transposed, a
//! band of rows at a time, into a zero-padded buffer of pixel vectors;
//! each output pixel is then one multiply-add per tap on whole vectors,
//! with no padding tests and no column phases for stride 2; and every
//! `LANES` output pixels are transposed back into their planes.
//!
//! The sums are the plane kernels' to the bit: the bias, then every tap in
//! kernel order with one FMA, taps in the padding adding `w * 0`.
//!
//! What touches vectors here, the transposes included, is written as
//! `#[inline(always)]` functions, never closures: a closure is compiled
//! without the AVX-512 features of the function around it (each intrinsic
//! becomes a call), and a 1 KiB array of vectors returned by a call that is
//! not inlined goes through `memcpy`.

use super::plane::PlaneVector;
use super::tile::{with_literal_taps, Taps};
use crate::abi::conv::ConvParams;
use crate::generic::gemm::Aligned;
use core::mem::MaybeUninit;
use core::ops::Range;

/// Floats of the band buffer on the stack (64 KiB: in L2 with the group's
/// planes).
const BAND_FLOATS: usize = 16 * 1024;
/// Most taps a filter may have here (its weights are a vector each): 7×7.
const MAX_TAPS: usize = 49;
/// Output pixels computed together: independent sums, so that one pixel's
/// multiply-adds do not wait on each other's latency.
const PIXELS: usize = 4;

/// Where a layer's input lands in the band buffer, and how many output
/// rows a band holds.
#[derive(Clone, Copy)]
struct Bands {
    taps: Taps,
    input: [usize; 2],
    output: [usize; 2],
    pads: [usize; 2],
    /// Pixels per buffer row: the padded input width.
    width: usize,
    /// Output rows per band.
    rows: usize,
}

impl Bands {
    /// The layout of a layer whose band of at least one output row fits
    /// the buffer with `lanes`-wide pixels, and whose filter has at most
    /// [`MAX_TAPS`] taps; `None` otherwise.
    fn new(p: &ConvParams, lanes: usize) -> Option<Bands> {
        let taps = Taps::of(&p.kernel, &p.strides, &p.dilations);
        let dim = |v: &[i64], d: usize| v[d] as usize;
        let (input, output) =
            ([dim(&p.in_spatial, 0), dim(&p.in_spatial, 1)], [dim(&p.out_spatial, 0), dim(&p.out_spatial, 1)]);
        let pads = [dim(&p.pads_begin, 0), dim(&p.pads_begin, 1)];
        if taps.kh * taps.kw > MAX_TAPS || output[0] == 0 || output[1] == 0 {
            return None;
        }
        // The last output column's last tap, or the input's last column.
        let width = (pads[1] + input[1]).max((output[1] - 1) * taps.sw + (taps.kw - 1) * taps.dw + 1);
        let band_rows = BAND_FLOATS / lanes / width;
        let reach = (taps.kh - 1) * taps.dh + 1;
        let rows = (band_rows.checked_sub(reach)? / taps.sh + 1).min(output[0]);
        Some(Bands { taps, input, output, pads, width, rows })
    }

    /// Buffer rows that a band of `rows` output rows reads.
    fn in_rows(&self, rows: usize) -> usize {
        (rows - 1) * self.taps.sh + (self.taps.kh - 1) * self.taps.dh + 1
    }
}

/// Whether a layer's planes are better computed here than by the plane
/// kernels: output rows narrower than two vectors (most of a plane
/// kernel's lanes would be padding), or a column stride over 1 (which the
/// plane kernels pay for with a split of every input row into phases)
/// where a band holds at least [`MIN_STRIDED_ROWS`] output rows (fewer
/// transpose each input row into several bands: a 224-wide plane with
/// stride 2 ran twice as long as in the plane kernel). Measured on
/// ShuffleNet's and MobileNet's layers; 28 and 56 wide output rows with
/// stride 1 ran as fast either way.
///
/// Filters of [`MIN_LANES_TAPS`] taps or more come here too where a band
/// holds [`MIN_STRIDED_ROWS`] rows: against their multiply-adds the
/// transposes are small, and every load here is an aligned vector, where
/// most of a plane tile's loads straddle two cache lines.
pub(crate) fn takes_lanes(p: &ConvParams, lanes: usize) -> bool {
    Bands::new(p, lanes).is_some_and(|b| {
        let banded = b.rows >= MIN_STRIDED_ROWS;
        b.output[1] < 2 * lanes || b.taps.sw > 1 && banded || b.taps.kh * b.taps.kw >= MIN_LANES_TAPS && banded
    })
}

/// See [`takes_lanes`].
const MIN_STRIDED_ROWS: usize = 3;
/// See [`takes_lanes`]: 7×7 filters.
const MIN_LANES_TAPS: usize = 49;

/// Convolves channel planes `planes` (of `batch × channels`) of `x` with
/// their filters `w` into `y`, starting from their `bias` (none if null),
/// then runs `finish` on each whole output plane. False, with nothing
/// written, when the layer does not fit ([`Bands::new`]).
///
/// # Safety
/// `p` is validated and depthwise 2-D; `x`, `w`, `bias` and `y` hold the
/// input, filters, biases and output; the CPU has `V`'s features.
#[inline(always)]
pub(crate) unsafe fn depthwise_lanes<V: PlaneVector>(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    planes: Range<usize>,
    finish: impl Fn(usize, &mut [f32]),
) -> bool {
    let Some(bands) = Bands::new(p, V::LANES) else {
        return false;
    };
    // Every float a band reads is written first (`fill_band`).
    let mut buf = MaybeUninit::<Aligned<BAND_FLOATS>>::uninit();
    let buf = buf.as_mut_ptr() as *mut f32;
    let mut weights = Aligned([0.0f32; MAX_TAPS * 16]);
    let mut sums = Aligned([0.0f32; STAGED_FLOATS]);
    let channels = p.out_channels as usize;
    let taps = bands.taps;
    let (in_size, out_size) = (bands.input[0] * bands.input[1], bands.output[0] * bands.output[1]);
    for first in planes.clone().step_by(V::LANES) {
        let count = V::LANES.min(planes.end - first);
        // Lane `l`'s weights and bias: plane `first + l`'s channel's.
        let mut bias_lanes = [0.0f32; 16];
        for (l, lane_bias) in bias_lanes.iter_mut().enumerate().take(count) {
            let c = (first + l) % channels;
            for t in 0..taps.kh * taps.kw {
                weights.0[t * V::LANES + l] = *w.add(c * taps.kh * taps.kw + t);
            }
            *lane_bias = if bias.is_null() { 0.0 } else { *bias.add(c) };
        }
        let group = Group { x: x.add(first * in_size), y: y.add(first * out_size), count, out_size };
        let mut staged = Staged { sums: sums.0.as_mut_ptr(), pixels: 0, stored: 0 };
        with_literal_taps!(taps, {
            let bands = Bands { taps, ..bands };
            let bias = V::load(bias_lanes.as_ptr());
            for top in (0..bands.output[0]).step_by(bands.rows) {
                let rows = bands.rows.min(bands.output[0] - top);
                fill_band::<V>(&bands, group, top, rows, buf);
                band::<V>(&bands, buf, rows, (weights.0.as_ptr(), bias), group, &mut staged);
            }
        });
        staged.store::<V>(group);
        for l in 0..count {
            finish(first + l, core::slice::from_raw_parts_mut(group.y.add(l * out_size), out_size));
        }
    }
    true
}

/// The planes of a group: the first's input and output, how many, and
/// the output plane's size.
#[derive(Clone, Copy)]
struct Group {
    x: *const f32,
    y: *mut f32,
    count: usize,
    out_size: usize,
}

/// Floats of the staged sums: a vector's worth of pixels, and the
/// [`PIXELS`] `- 1` a group may put past it (zmm).
const STAGED_FLOATS: usize = (16 + PIXELS - 1) * 16;

/// Output pixels computed and not yet stored in their planes: `sums`
/// holds pixel `k`'s sums at `k * LANES` (those past `pixels`, stale, are
/// not stored); `stored` pixels of each plane are stored. The counts are
/// kept apart from the sums, so that they stay in registers.
struct Staged {
    sums: *mut f32,
    pixels: usize,
    stored: usize,
}

impl Staged {
    /// Stages the next `N` pixels' sums; once there are a vector's worth,
    /// they go to the planes and those past them move to the front.
    #[inline(always)]
    unsafe fn push<V: PlaneVector, const N: usize>(&mut self, g: Group, sums: [V; N]) {
        for (i, &v) in sums.iter().enumerate() {
            V::store(self.sums.add((self.pixels + i) * V::LANES), v);
        }
        self.pixels += N;
        if self.pixels >= V::LANES {
            let past = self.pixels - V::LANES;
            self.pixels = V::LANES;
            self.store::<V>(g);
            for k in 0..N - 1 {
                if k < past {
                    V::store(self.sums.add(k * V::LANES), V::load(self.sums.add((V::LANES + k) * V::LANES)));
                }
            }
            self.pixels = past;
        }
    }

    /// Stores the first `pixels` staged pixels.
    #[inline(always)]
    unsafe fn store<V: PlaneVector>(&mut self, g: Group) {
        V::transpose_out(self.sums, g.y.add(self.stored), g.out_size, g.count, self.pixels);
        (self.stored, self.pixels) = (self.stored + self.pixels, 0);
    }
}

/// Writes the band of output rows `top..top + rows`'s input into `buf`:
/// buffer row `r` is input row `top * sh + r - pad_top` (zero when outside
/// the input), buffer column `j` input column `j - pad_left`, a pixel
/// vector of the group's channels each.
#[inline(always)]
unsafe fn fill_band<V: PlaneVector>(b: &Bands, g: Group, top: usize, rows: usize, buf: *mut f32) {
    let [h, w] = b.input;
    let lanes = V::LANES;
    let first_row = (top * b.taps.sh) as isize - b.pads[0] as isize;
    let in_rows = b.in_rows(rows);
    let zero = V::splat(0.0);
    // Rows of the buffer outside the input are zero, and so are the
    // columns left and right of it.
    for r in 0..in_rows {
        let row = buf.add(r * b.width * lanes);
        let inside = (0..h as isize).contains(&(first_row + r as isize));
        let (left, right) = if inside { (b.pads[1], b.pads[1] + w) } else { (b.width, b.width) };
        for j in (0..left).chain(right..b.width) {
            V::store(row.add(j * lanes), zero);
        }
    }
    // The input rows inside the image, transposed a vector of pixels at a
    // time into their buffer row.
    let lo = first_row.clamp(0, h as isize) as usize;
    let hi = (first_row + in_rows as isize).clamp(0, h as isize) as usize;
    for iy in lo..hi {
        let row = buf.add(((iy as isize - first_row) as usize * b.width + b.pads[1]) * lanes);
        for ix in (0..w).step_by(lanes) {
            V::transpose_in(g.x.add(iy * w + ix), h * w, g.count, lanes.min(w - ix), row.add(ix * lanes));
        }
    }
}

/// Computes `rows` output rows from their band in `buf` (with the
/// group's `weights`, a vector per tap, and `bias`) and stages each
/// pixel's sums, in order, [`PIXELS`] at a time (fewer at a row's end).
#[inline(always)]
unsafe fn band<V: PlaneVector>(
    b: &Bands,
    buf: *const f32,
    rows: usize,
    (weights, bias): (*const f32, V),
    g: Group,
    staged: &mut Staged,
) {
    let ow = b.output[1];
    for oy in 0..rows {
        for ox in (0..ow).step_by(PIXELS) {
            let at = (oy, ox);
            match ow - ox {
                1 => staged.push(g, group_of::<V, 1>(b, buf, at, weights, bias)),
                2 => staged.push(g, group_of::<V, 2>(b, buf, at, weights, bias)),
                3 => staged.push(g, group_of::<V, 3>(b, buf, at, weights, bias)),
                _ => staged.push(g, group_of::<V, PIXELS>(b, buf, at, weights, bias)),
            }
        }
    }
}

/// The sums of the `N` output pixels from `(oy, ox)` of a band: the bias,
/// then each tap in kernel order.
#[inline(always)]
unsafe fn group_of<V: PlaneVector, const N: usize>(
    b: &Bands,
    buf: *const f32,
    (oy, ox): (usize, usize),
    weights: *const f32,
    bias: V,
) -> [V; N] {
    let (t, lanes) = (b.taps, V::LANES);
    let mut sums = [bias; N];
    for a in 0..t.kh {
        for c in 0..t.kw {
            let weight = V::load(weights.add((a * t.kw + c) * lanes));
            let row = buf.add(((oy * t.sh + a * t.dh) * b.width + c * t.dw) * lanes);
            for (i, sum) in sums.iter_mut().enumerate() {
                *sum = V::mul_add(weight, V::load(row.add((ox + i) * t.sw * lanes)), *sum);
            }
        }
    }
    sums
}
