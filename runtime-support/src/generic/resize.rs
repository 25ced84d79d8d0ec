//! Spatial resampling: Resize (and Upsample), GridSample, AffineGrid.
//!
//! Resize is separable: along each axis, output coordinate `o` reads a few
//! input positions ("taps") with weights that depend only on that axis. The
//! kernel first writes every axis's tap table into scratch
//! ([`resize_scratch_bytes`] says how much). Images (one tap on every axis
//! before the last two) then run plane by plane in the element type
//! ([`plane`]: row copies for nearest, a horizontal then a vertical pass
//! for linear and cubic); any other resize computes each output as the sum
//! over tap combinations of the product of the axis weights times the
//! input, in f64. Tap indices are clamped into the input, so no input value
//! can make the kernel read out of bounds. The tap rules follow the ONNX
//! reference implementation: coordinate transformation, neighbour choice
//! (edge padding = clamping), nearest rounding modes, Keys cubic
//! coefficients, antialiasing (a kernel widened by `1/scale` when
//! downsampling) and `exclude_outside`.
//!
//! GridSample reads `[N, C, D1..Dk]` at the normalised coordinates of a
//! `[N, O1..Ok, k]` grid (innermost coordinate first); AffineGrid builds such
//! a grid from `[N, k, k+1]` affine matrices.
//!
//! Each kernel is generic over the element type; f32 and f64 are exported.

use super::real::Real;
use crate::abi::resize::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};
use crate::generic::{checked_rank, product};

mod plane;

/// Why scales or sizes cannot resize the input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizingError {
    /// The scales/sizes input does not have one value per axis.
    Count {
        got: usize,
        want: usize,
    },
    BadScale {
        axis: usize,
        scale: f64,
    },
    NegativeSize {
        index: usize,
        size: i64,
    },
    EmptyAxis {
        axis: usize,
        size: i64,
    },
    /// Bad axes or rank in the sizing or template.
    Invalid,
    TooLarge,
}

impl core::fmt::Display for SizingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SizingError::Count { got, want } => write!(f, "has {got} values, expected {want}"),
            SizingError::BadScale { axis, scale } => {
                write!(f, "scale {scale} of axis {axis} is not positive and finite")
            }
            SizingError::NegativeSize { index, size } => write!(f, "sizes[{index}] is {size}, negative"),
            SizingError::EmptyAxis { axis, size } => {
                write!(f, "axis {axis} of input 0 is empty and cannot be resized to {size}")
            }
            SizingError::Invalid => f.write_str("invalid axes"),
            SizingError::TooLarge => f.write_str("the output size overflows"),
        }
    }
}

/// Sets `p`'s scales, output dims and identity flags from `scales` (one
/// per axis of `s`) or, when `None`, `sizes`, as the ONNX reference does.
pub fn resize_apply_sizing(
    p: &mut ResizeParams,
    s: &ResizeSizing,
    scales: Option<&[f32]>,
    sizes: &[i64],
) -> Result<(), SizingError> {
    let rank = checked_rank(p.rank, MAX_RANK, &p.in_dims).ok_or(SizingError::Invalid)?;
    let n = usize::try_from(s.axes_len).ok().filter(|&n| n <= rank).ok_or(SizingError::Invalid)?;
    let axes = &s.axes[..n];
    if axes.iter().any(|&a| !(0..rank as i64).contains(&a)) {
        return Err(SizingError::Invalid);
    }
    let got = scales.map_or(sizes.len(), <[f32]>::len);
    if got != n {
        return Err(SizingError::Count { got, want: n });
    }
    for (i, &a) in axes.iter().enumerate() {
        let (a, len) = (a as usize, p.in_dims[a as usize] as f64);
        match scales {
            Some(scales) => {
                let scale = scales[i] as f64;
                if !(scale > 0.0 && scale.is_finite()) {
                    return Err(SizingError::BadScale { axis: a, scale });
                }
                let out = libm::floor(scale * len);
                if out > (1u64 << 40) as f64 {
                    return Err(SizingError::TooLarge);
                }
                p.scales[a] = scale;
                p.out_dims[a] = out as i64;
            }
            None => {
                if sizes[i] < 0 {
                    return Err(SizingError::NegativeSize { index: i, size: sizes[i] });
                }
                p.out_dims[a] = sizes[i];
                p.scales[a] = sizes[i] as f64 / len;
            }
        }
    }
    if scales.is_none() && s.policy != POLICY_STRETCH {
        let chosen = axes.iter().map(|&a| p.scales[a as usize]);
        let scale = if s.policy == POLICY_NOT_LARGER {
            chosen.fold(f64::INFINITY, f64::min)
        } else {
            chosen.fold(f64::NEG_INFINITY, f64::max)
        };
        for &a in axes {
            let a = a as usize;
            p.scales[a] = scale;
            p.out_dims[a] = (scale * p.in_dims[a] as f64 + 0.5) as i64;
        }
    }
    let close = |a: f64, b: f64| libm::fabs(a - b) <= 1e-9 * libm::fmax(libm::fabs(a), libm::fabs(b));
    for a in 0..rank {
        if p.in_dims[a] == 0 && p.out_dims[a] != 0 {
            return Err(SizingError::EmptyAxis { axis: a, size: p.out_dims[a] });
        }
        let roi_plain = close(p.roi_start[a], 0.0) && close(p.roi_end[a], 1.0);
        p.identity[a] = (close(p.scales[a], 1.0) && p.out_dims[a] == p.in_dims[a] && roi_plain) as i64;
    }
    let dims = p.out_dims;
    dims[..rank]
        .iter()
        .try_fold(4usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
        .ok_or(SizingError::TooLarge)?;
    Ok(())
}

/// Does the work of the C entry point [`crate::abi::onnxc_resize_prepare`].
pub(crate) unsafe fn resize_prepare(
    template: *const ResizeParams,
    sizing: *const ResizeSizing,
    scales: *const f32,
    sizes: *const i64,
    len: i64,
    out: *mut ResizeParams,
) -> i32 {
    let (Some(template), Some(sizing), Ok(len)) = (template.as_ref(), sizing.as_ref(), usize::try_from(len)) else {
        return STATUS_INVALID_PARAMS;
    };
    if out.is_null() || (scales.is_null() && sizes.is_null()) {
        return STATUS_INVALID_PARAMS;
    }
    let mut p = *template;
    let scales = (!scales.is_null()).then(|| core::slice::from_raw_parts(scales, len));
    let sizes = if scales.is_none() { core::slice::from_raw_parts(sizes, len) } else { &[] };
    match resize_apply_sizing(&mut p, sizing, scales, sizes) {
        Ok(()) => {
            out.write_unaligned(p);
            STATUS_OK
        }
        Err(_) => STATUS_INVALID_PARAMS,
    }
}

/// One input position and its weight; `index < 0` marks an output position
/// that takes the extrapolation value. (Public, with [`fill_taps`], for the
/// compiler's portable Resize, which tabulates the taps at compile time.)
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Tap {
    pub index: i64,
    pub weight: f64,
}

/// `floor(-support / min(scale, 1)) + 1`: the first tap offset of an
/// antialiased kernel of half-width `support`.
fn antialias_start(support: f64, scale: f64) -> i64 {
    libm::floor(-support / scale.min(1.0)) as i64 + 1
}

/// Taps per output position along `axis` (0 for an invalid axis).
pub fn resize_taps(p: &ResizeParams, axis: usize) -> usize {
    if axis >= MAX_RANK {
        return 0;
    }
    if p.identity[axis] != 0 {
        return 1;
    }
    let scale = p.scales[axis];
    let taps = match (p.mode, p.antialias != 0) {
        (MODE_NEAREST, _) => 1,
        (MODE_LINEAR, false) => 2,
        (MODE_CUBIC, false) => 4,
        (MODE_LINEAR, true) => 2 - 2 * antialias_start(1.0, scale),
        (_, true) => 2 - 2 * antialias_start(2.0, scale),
        _ => 4,
    };
    // A nonsensical scale (0, NaN) would ask for an absurd kernel.
    taps.clamp(1, 1 << 16) as usize
}

/// Scratch bytes [`onnxc_resize_f32`] needs for these params: the tap
/// tables, then what the plane paths need.
pub fn resize_scratch_bytes(p: &ResizeParams) -> usize {
    let rank = p.rank.clamp(0, MAX_RANK as i64) as usize;
    let mut counts = [0usize; MAX_RANK];
    (0..rank).for_each(|a| counts[a] = resize_taps(p, a));
    let tables = (0..rank)
        .map(|a| (p.out_dims[a].max(0) as usize).saturating_mul(counts[a] * core::mem::size_of::<Tap>()))
        .fold(0, usize::saturating_add);
    let planes = plane::plane_taps(&counts[..rank])
        .map_or(0, |taps| plane::plane_scratch_bytes(p.out_dims[rank - 1].max(0) as usize, taps));
    tables.saturating_add(planes)
}

/// The source coordinate of output position `y` along one axis, and whether
/// it falls outside the crop region (`tf_crop_and_resize` only).
fn source_coordinate(p: &ResizeParams, axis: usize, y: f64) -> (f64, bool) {
    let scale = p.scales[axis];
    let in_w = p.in_dims[axis] as f64;
    let out_w = scale * in_w;
    let x = match p.coord_mode {
        COORD_ALIGN_CORNERS if out_w == 1.0 => 0.0,
        COORD_ALIGN_CORNERS => y * (in_w - 1.0) / (out_w - 1.0),
        COORD_ASYMMETRIC => y / scale,
        COORD_TF_CROP_AND_RESIZE => {
            let (r0, r1) = (p.roi_start[axis], p.roi_end[axis]);
            let x = if out_w == 1.0 {
                (r1 - r0) * (in_w - 1.0) / 2.0
            } else {
                y * (r1 - r0) * (in_w - 1.0) / (out_w - 1.0)
            } + r0 * (in_w - 1.0);
            return (x, x < 0.0 || x > in_w - 1.0);
        }
        COORD_PYTORCH_HALF_PIXEL if out_w == 1.0 => -0.5,
        COORD_HALF_PIXEL_SYMMETRIC => {
            let adjustment = p.out_dims[axis] as f64 / out_w;
            let offset = in_w / 2.0 * (1.0 - adjustment);
            offset + (y + 0.5) / scale - 0.5
        }
        COORD_TF_HALF_PIXEL_FOR_NN => (y + 0.5) / scale,
        _ => (y + 0.5) / scale - 0.5,
    };
    (x, false)
}

/// Keys cubic convolution weight at distance `x`.
fn cubic_weight(x: f64, a: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

/// Fills `row` (the [`resize_taps`] taps of output `y` along `axis`).
pub fn fill_taps(p: &ResizeParams, axis: usize, y: usize, row: &mut [Tap]) {
    let in_len = p.in_dims[axis];
    if p.identity[axis] != 0 {
        row[0] = Tap { index: (y as i64).min(in_len - 1), weight: 1.0 };
        return;
    }
    let (x, extrapolate) = source_coordinate(p, axis, y as f64);
    if extrapolate {
        row.iter_mut().for_each(|t| *t = Tap { index: -1, weight: 0.0 });
        return;
    }
    let floor = libm::floor(x);
    let ratio = if x == floor { 1.0 } else { x - floor };
    let scale = p.scales[axis];
    // `n` weights for the window of `n` neighbours (nearest: 2, reduced to one below).
    let n = if p.mode == MODE_NEAREST { 2 } else { row.len() };
    let mut nearest = [Tap::default(); 2];
    let taps: &mut [Tap] = if p.mode == MODE_NEAREST { &mut nearest } else { row };
    match p.mode {
        MODE_NEAREST => {
            let upper = if ratio == 1.0 {
                true
            } else {
                match p.nearest_mode {
                    NEAREST_ROUND_PREFER_CEIL => ratio >= 0.5,
                    NEAREST_FLOOR => false,
                    NEAREST_CEIL => true,
                    NEAREST_SIMPLE => scale < 1.0,
                    _ => ratio > 0.5,
                }
            };
            taps[0].weight = (!upper) as i32 as f64;
            taps[1].weight = upper as i32 as f64;
        }
        MODE_LINEAR if p.antialias != 0 => {
            let s = scale.min(1.0);
            let start = antialias_start(1.0, scale);
            for (k, t) in taps.iter_mut().enumerate() {
                t.weight = (1.0 - (((start + k as i64) as f64 - ratio) * s).abs()).clamp(0.0, 1.0);
            }
        }
        MODE_LINEAR => {
            taps[0].weight = 1.0 - ratio;
            taps[1].weight = ratio;
        }
        _ if p.antialias != 0 => {
            let s = scale.min(1.0);
            let start = antialias_start(2.0, scale);
            for (k, t) in taps.iter_mut().enumerate() {
                t.weight = cubic_weight(s * ((start + k as i64) as f64 - ratio), p.cubic_a);
            }
        }
        _ => {
            let a = p.cubic_a;
            for (k, t) in taps.iter_mut().enumerate() {
                t.weight = cubic_weight(ratio + 1.0 - k as f64, a);
            }
        }
    }
    if p.antialias != 0 && p.mode != MODE_NEAREST {
        let sum: f64 = taps.iter().map(|t| t.weight).sum();
        taps.iter_mut().for_each(|t| t.weight /= sum);
    }
    // The n inputs nearest to x, ties to the smaller index (edge padding of
    // `pad` on each side).
    let pad = n.div_ceil(2) as f64;
    let xp = x + pad;
    let pf = libm::floor(xp);
    let frac = xp - pf;
    let half = (n / 2) as i64;
    let offset = if n % 2 == 0 {
        if frac == 0.0 {
            -half
        } else {
            1 - half
        }
    } else {
        let base = -(((n - 1) / 2) as i64);
        if frac <= 0.5 {
            base
        } else {
            base + 1
        }
    };
    let start = (pf as i64).saturating_add(offset).saturating_sub(pad as i64);
    for (k, t) in taps.iter_mut().enumerate() {
        t.index = start.saturating_add(k as i64);
    }
    if p.exclude_outside != 0 {
        taps.iter_mut().filter(|t| t.index < 0 || t.index >= in_len).for_each(|t| t.weight = 0.0);
        let sum: f64 = taps.iter().map(|t| t.weight).sum();
        let sum = if sum == 0.0 { 1.0 } else { sum };
        taps.iter_mut().for_each(|t| t.weight /= sum);
    }
    taps.iter_mut().for_each(|t| t.index = t.index.clamp(0, in_len - 1));
    if p.mode == MODE_NEAREST {
        row[0] = if nearest[1].weight != 0.0 { nearest[1] } else { nearest[0] };
        row[0].weight = 1.0;
    }
}

/// Sum over the tap combinations of axes `axis..`, for the output position
/// whose tap rows are `rows`.
unsafe fn resize_sum<T: Real>(x: *const T, strides: &[usize], rows: &[&[Tap]], base: usize) -> f64 {
    let (Some(row), Some(&stride)) = (rows.first(), strides.first()) else {
        return (*x.add(base)).to_f64();
    };
    let mut acc = 0.0;
    for t in row.iter() {
        acc += t.weight * resize_sum(x, &strides[1..], &rows[1..], base + t.index as usize * stride);
    }
    acc
}

pub(crate) unsafe fn resize<T: Real>(p: *const ResizeParams, x: *const T, y: *mut T, scratch: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let (Some(rank), Some(_)) =
        (checked_rank(p.rank, MAX_RANK, &p.in_dims), checked_rank(p.rank, MAX_RANK, &p.out_dims))
    else {
        return STATUS_INVALID_PARAMS;
    };
    if !(MODE_NEAREST..=MODE_CUBIC).contains(&p.mode)
        || !(scratch as usize).is_multiple_of(core::mem::align_of::<Tap>())
    {
        return STATUS_INVALID_PARAMS;
    }
    let Some(total) = product(&p.out_dims[..rank]) else {
        return STATUS_INVALID_PARAMS;
    };
    if total == 0 {
        return STATUS_OK;
    }
    if p.in_dims[..rank].contains(&0) {
        return STATUS_INVALID_PARAMS;
    }
    let shape = build_tables(p, rank, scratch);
    let (strides, out_dims) = (&shape.strides[..rank], &shape.out_dims[..rank]);
    let Some(plane_taps) = plane::plane_taps(&shape.tables.counts[..rank]) else {
        resize_sums(p, x, y, &shape.tables, strides, out_dims);
        return STATUS_OK;
    };
    let planes = plane::Planes {
        tables: &shape.tables,
        strides,
        out_dims,
        in_w: p.in_dims[rank - 1] as usize,
        extrapolation: p.extrapolation_value,
        scratch: scratch.add(shape.table_bytes),
    };
    match plane_taps {
        (1, 1) => plane::nearest_rows(&planes, x, y),
        taps => plane::separable(&planes, x, y, taps),
    }
    STATUS_OK
}

/// The tap tables [`build_tables`] writes, and the shapes they go with.
struct ResizeShape {
    tables: TapTables,
    strides: [usize; MAX_RANK],
    out_dims: [usize; MAX_RANK],
    /// The bytes of scratch the tables take.
    table_bytes: usize,
}

/// Writes every axis's tap table into `scratch`, one after the other.
unsafe fn build_tables(p: &ResizeParams, rank: usize, scratch: *mut u8) -> ResizeShape {
    let mut offsets = [0usize; MAX_RANK];
    let mut counts = [0usize; MAX_RANK];
    let mut next = 0usize;
    let taps = scratch.cast::<Tap>();
    for a in 0..rank {
        counts[a] = resize_taps(p, a);
        offsets[a] = next;
        for o in 0..p.out_dims[a] as usize {
            let row = core::slice::from_raw_parts_mut(taps.add(next), counts[a]);
            fill_taps(p, a, o, row);
            next += counts[a];
        }
    }
    let mut strides = [0usize; MAX_RANK];
    let mut s = 1usize;
    for a in (0..rank).rev() {
        strides[a] = s;
        s *= p.in_dims[a] as usize;
    }
    ResizeShape {
        tables: TapTables { taps: taps.cast_const(), offsets, counts },
        strides,
        out_dims: crate::generic::to_usize(&p.out_dims),
        table_bytes: next * core::mem::size_of::<Tap>(),
    }
}

/// Every output of any resize as [`resize_sum`]'s nested sum over its taps.
unsafe fn resize_sums<T: Real>(
    p: &ResizeParams,
    x: *const T,
    y: *mut T,
    tables: &TapTables,
    strides: &[usize],
    out_dims: &[usize],
) {
    let rank = out_dims.len();
    let mut idx = [0usize; MAX_RANK];
    for k in 0..out_dims.iter().product::<usize>() {
        let mut rows: [&[Tap]; MAX_RANK] = [&[]; MAX_RANK];
        let mut extrapolate = false;
        for a in 0..rank {
            let row = tables.row(a, idx[a]);
            extrapolate |= row.first().is_some_and(|t| t.index < 0);
            rows[a] = row;
        }
        *y.add(k) =
            T::from_f64(if extrapolate { p.extrapolation_value } else { resize_sum(x, strides, &rows[..rank], 0) });
        for a in (0..rank).rev() {
            idx[a] += 1;
            if idx[a] < out_dims[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

/// The tap tables of every axis, one after the other in scratch.
struct TapTables {
    taps: *const Tap,
    offsets: [usize; MAX_RANK],
    counts: [usize; MAX_RANK],
}

impl TapTables {
    /// The taps of output position `o` along `axis`.
    unsafe fn row(&self, axis: usize, o: usize) -> &[Tap] {
        core::slice::from_raw_parts(self.taps.add(self.offsets[axis] + o * self.counts[axis]), self.counts[axis])
    }

    /// The one tap of each of the first `idx.len()` axes at output position
    /// `idx`: the input offset they select, and whether one falls outside
    /// the crop.
    unsafe fn outer(&self, idx: &[usize], strides: &[usize]) -> OuterTaps {
        let mut taps = OuterTaps { base: 0, outside: false };
        for (a, &i) in idx.iter().enumerate() {
            let t = self.row(a, i)[0];
            taps.outside |= t.index < 0;
            taps.base += t.index.max(0) as usize * strides[a];
        }
        taps
    }
}

/// What [`TapTables::outer`] finds.
struct OuterTaps {
    base: usize,
    outside: bool,
}

/// Reflects `x` into `[lo, hi]` by bouncing off the borders.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    let bounce = |dx: f64, near: f64, far: f64, dir: f64| {
        let n = libm::trunc(dx / range);
        let r = dx - n * range;
        if libm::fmod(n, 2.0) == 0.0 {
            near + dir * r
        } else {
            far - dir * r
        }
    };
    if x < lo {
        bounce(lo - x, lo, hi, 1.0)
    } else if x > hi {
        bounce(x - hi, hi, lo, -1.0)
    } else {
        x
    }
}

/// One grid sample tap: input index along a dim (`None`: zero padding) and weight.
type SampleTap<T> = (Option<usize>, T);

/// Sum over the tap combinations of dims `dim..` (innermost summed first).
unsafe fn grid_sum<T: Real>(
    x: *const T,
    strides: &[usize],
    taps: &[[SampleTap<T>; 4]],
    counts: &[usize],
    base: usize,
) -> T {
    let (Some(row), Some(&stride), Some(&count)) = (taps.first(), strides.first(), counts.first()) else {
        return *x.add(base);
    };
    let mut acc = T::ZERO;
    for &(index, w) in &row[..count] {
        if let Some(i) = index {
            acc = acc + w * grid_sum(x, &strides[1..], &taps[1..], &counts[1..], base + i * stride);
        }
    }
    acc
}

pub(crate) unsafe fn grid_sample<T: Real>(p: *const GridSampleParams, x: *const T, grid: *const T, y: *mut T) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let (Some(k), Some(_)) = (checked_rank(p.rank, MAX_RANK, &p.in_dims), checked_rank(p.rank, MAX_RANK, &p.out_dims))
    else {
        return STATUS_INVALID_PARAMS;
    };
    if p.n < 0 || p.c < 0 || !(MODE_NEAREST..=MODE_CUBIC).contains(&p.mode) {
        return STATUS_INVALID_PARAMS;
    }
    let (Some(in_count), Some(out_count)) = (product(&p.in_dims[..k]), product(&p.out_dims[..k])) else {
        return STATUS_INVALID_PARAMS;
    };
    let (n, c) = (p.n as usize, p.c as usize);
    if n * c * out_count == 0 {
        return STATUS_OK;
    }
    if in_count == 0 {
        return STATUS_INVALID_PARAMS;
    }
    let mut strides = [0usize; MAX_RANK];
    let mut s = 1usize;
    for a in (0..k).rev() {
        strides[a] = s;
        s *= p.in_dims[a] as usize;
    }
    let align = p.align_corners != 0;
    for b in 0..n {
        for o in 0..out_count {
            let g = grid.add((b * out_count + o) * k);
            let mut taps = [[(None, T::ZERO); 4]; MAX_RANK];
            let mut counts = [0usize; MAX_RANK];
            let (one, two) = (T::ONE, T::from_f64(2.0));
            for i in 0..k {
                let len = p.in_dims[i];
                let lenf = T::from_f64(len as f64);
                let coord = *g.add(k - 1 - i);
                let mut v = if align { (coord + one) / two * (lenf - one) } else { ((coord + one) * lenf - one) / two };
                if p.mode == MODE_NEAREST {
                    v = v.rint();
                }
                let (lo, hi) = if align { (0.0, len as f64 - 1.0) } else { (-0.5, len as f64 - 0.5) };
                let vd = v.to_f64();
                if vd < lo || vd > hi {
                    match p.padding {
                        PADDING_BORDER => v = T::from_f64(vd.clamp(0.0, len as f64 - 1.0)),
                        PADDING_REFLECTION => v = T::from_f64(reflect(vd, lo, hi)),
                        _ => {}
                    }
                }
                // Input index of tap position `i`, per padding mode.
                let resolve = |i: i64| -> Option<usize> {
                    let i = match p.padding {
                        PADDING_ZEROS => return (0..len).contains(&i).then_some(i as usize),
                        PADDING_BORDER => i,
                        _ => reflect(i as f64, lo, hi) as i64,
                    };
                    Some(i.clamp(0, len - 1) as usize)
                };
                let row = &mut taps[i];
                counts[i] = match p.mode {
                    MODE_NEAREST => {
                        row[0] = (resolve(v.to_f64() as i64), one);
                        1
                    }
                    MODE_LINEAR => {
                        let x0 = v.floor();
                        let t = v - x0;
                        let i0 = x0.to_f64() as i64;
                        row[0] = (resolve(i0), one - t);
                        row[1] = (resolve(i0.saturating_add(1)), t);
                        2
                    }
                    _ => {
                        let x0 = v.floor();
                        let t = (v - x0).to_f64();
                        for (j, tap) in row.iter_mut().enumerate() {
                            let w = T::from_f64(cubic_weight(t + 1.0 - j as f64, -0.75));
                            *tap = (resolve((x0.to_f64() as i64).saturating_add(j as i64 - 1)), w);
                        }
                        4
                    }
                };
            }
            for ch in 0..c {
                let plane = x.add((b * c + ch) * in_count);
                *y.add((b * c + ch) * out_count + o) = grid_sum(plane, &strides[..k], &taps[..k], &counts[..k], 0);
            }
        }
    }
    STATUS_OK
}

/// AffineGrid's normalised coordinate of position `i` of a dim of `len`
/// positions: corners at ±1 (`align`), else pixel centres. The portable
/// lowering computes its grid from this very function.
pub fn base_coordinate(i: usize, len: usize, align: bool) -> f64 {
    if align {
        if len <= 1 {
            return -1.0;
        }
        -1.0 + i as f64 * (2.0 / (len - 1) as f64)
    } else {
        let step = 2.0 / len as f64;
        (-1.0 + step / 2.0) + i as f64 * step
    }
}

pub(crate) unsafe fn affine_grid<T: Real>(p: *const AffineGridParams, theta: *const T, grid: *mut T) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.n < 0 || !(2..=3).contains(&p.rank) || p.dims.iter().any(|&d| d < 0) {
        return STATUS_INVALID_PARAMS;
    }
    let k = p.rank as usize;
    let dims = &p.dims[..k];
    let Some(count) = product(dims) else {
        return STATUS_INVALID_PARAMS;
    };
    let align = p.align_corners != 0;
    let mut out = grid;
    for b in 0..p.n as usize {
        let th = theta.add(b * k * (k + 1));
        let mut idx = [0usize; 3];
        for _ in 0..count {
            // Homogeneous base point, innermost dim first.
            let mut base = [1.0f64; 4];
            for i in 0..k {
                base[i] = base_coordinate(idx[k - 1 - i], dims[k - 1 - i] as usize, align);
            }
            for j in 0..k {
                let row = th.add(j * (k + 1));
                let v: f64 = (0..=k).map(|i| (*row.add(i)).to_f64() * base[i]).sum();
                *out = T::from_f64(v);
                out = out.add(1);
            }
            for a in (0..k).rev() {
                idx[a] += 1;
                if idx[a] < dims[a] as usize {
                    break;
                }
                idx[a] = 0;
            }
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec, testable_isas, with_level};
    use std::vec;
    use std::vec::Vec;

    fn params(in_dims: &[i64], out_dims: &[i64], mode: i64, coord_mode: i64) -> ResizeParams {
        let mut p = ResizeParams { rank: in_dims.len() as i64, mode, coord_mode, cubic_a: -0.75, ..Default::default() };
        for (a, (&i, &o)) in in_dims.iter().zip(out_dims).enumerate() {
            p.in_dims[a] = i;
            p.out_dims[a] = o;
            p.scales[a] = o as f64 / i as f64;
            p.identity[a] = (i == o) as i64;
            p.roi_end[a] = 1.0;
        }
        p
    }

    fn run(p: &ResizeParams, x: &[f32]) -> Vec<f32> {
        let total: i64 = p.out_dims[..p.rank as usize].iter().product();
        let mut y = vec![0.0f32; total as usize];
        let mut scratch = vec![0u64; resize_scratch_bytes(p) / 8 + 1];
        let r = unsafe { onnxc_resize_f32(p, x.as_ptr(), y.as_mut_ptr(), scratch.as_mut_ptr().cast()) };
        assert_eq!(r, STATUS_OK);
        y
    }

    /// [`resize_sums`] (the nested sums of any resize) on the same params.
    fn run_sums(p: &ResizeParams, x: &[f32]) -> Vec<f32> {
        let rank = p.rank as usize;
        let mut y = vec![0.0f32; p.out_dims[..rank].iter().product::<i64>() as usize];
        let mut scratch = vec![0u64; resize_scratch_bytes(p) / 8 + 1];
        unsafe {
            let shape = build_tables(p, rank, scratch.as_mut_ptr().cast());
            let (strides, out_dims) = (&shape.strides[..rank], &shape.out_dims[..rank]);
            resize_sums(p, x.as_ptr(), y.as_mut_ptr(), &shape.tables, strides, out_dims);
        }
        y
    }

    /// Every mode's params on the last two axes of `ins -> outs`: each
    /// coordinate transformation, nearest rounding, antialiasing and
    /// exclude_outside, and a crop reaching outside the input.
    fn plane_cases(ins: &[i64], outs: &[i64]) -> Vec<ResizeParams> {
        let mut cases = vec![];
        for (mode, rounding) in
            [(MODE_LINEAR, 0), (MODE_CUBIC, 0)].into_iter().chain((0..=4).map(|r| (MODE_NEAREST, r)))
        {
            for coord in 0..=6 {
                for flags in 0..4 {
                    let mut p = params(ins, outs, mode, coord);
                    (p.nearest_mode, p.exclude_outside) = (rounding, flags & 1);
                    p.antialias = (flags >> 1) * (mode != MODE_NEAREST) as i64;
                    let rank = ins.len();
                    for a in rank.saturating_sub(2)..rank {
                        (p.roi_start[a], p.roi_end[a]) = (0.2, 1.3);
                    }
                    p.extrapolation_value = 7.5;
                    cases.push(p);
                }
            }
        }
        cases
    }

    #[test]
    fn plane_paths_match_the_nested_sums() {
        // Integer and fractional factors up and down, odd sizes, rank 1 to
        // 4, and resizes of the rows or the columns only.
        let shapes: [(&[i64], &[i64]); 8] = [
            (&[2, 3, 5, 7], &[2, 3, 10, 14]),
            (&[1, 2, 7, 5], &[1, 2, 11, 8]),
            (&[1, 3, 9, 17], &[1, 3, 4, 6]),
            (&[3, 1, 4], &[3, 1, 12]),
            (&[6, 19], &[6, 37]),
            (&[2, 4, 6], &[2, 8, 6]),
            (&[2, 9, 40], &[2, 18, 80]),
            (&[5], &[9]),
        ];
        for level in testable_isas() {
            for (ins, outs) in shapes {
                let x = rand_vec(ins.iter().product::<i64>() as usize, 11);
                for p in plane_cases(ins, outs) {
                    let got = with_level(level, || run(&p, &x));
                    let want = run_sums(&p, &x);
                    if p.mode == MODE_NEAREST {
                        assert_eq!(got, want, "{ins:?} -> {outs:?} {p:?} at {}", level.name());
                    } else {
                        assert_close(&got, &want, 1e-5);
                    }
                }
            }
        }
    }

    #[test]
    fn one_tap_resize_gathers_whole_rows() {
        // Nearest ×2 on H and W of [2, 3, 4, 5] (N and C kept), half_pixel
        // with round_prefer_floor: output (h, w) reads input (h / 2, w / 2).
        let x: Vec<f32> = (0..120).map(|v| v as f32 - 60.5).collect();
        let y = run(&params(&[2, 3, 4, 5], &[2, 3, 8, 10], MODE_NEAREST, COORD_HALF_PIXEL), &x);
        let want: Vec<f32> = (0..480).map(|k| x[k / 80 * 20 + (k / 10 % 8) / 2 * 5 + k % 10 / 2]).collect();
        assert_eq!(y, want);
    }

    #[test]
    fn resize_matches_known_values() {
        // ONNX's test_resize_upsample_scales_nearest: [1,2;3,4] x (2, 3).
        let x = [1.0, 2.0, 3.0, 4.0];
        let y = run(&params(&[2, 2], &[4, 6], MODE_NEAREST, COORD_HALF_PIXEL), &x);
        let want = [1., 1., 1., 2., 2., 2., 1., 1., 1., 2., 2., 2., 3., 3., 3., 4., 4., 4., 3., 3., 3., 4., 4., 4.];
        assert_close(&y, &want, 0.0);
        // test_resize_upsample_scales_linear_align_corners (first row).
        let y = run(&params(&[2, 2], &[4, 4], MODE_LINEAR, COORD_ALIGN_CORNERS), &x);
        assert_close(&y[..4], &[1.0, 1.333_333_3, 1.666_666_7, 2.0], 1e-6);
        // Linear half_pixel upsampling, first row: 1, 1.25, 1.75, 2.
        let y = run(&params(&[2, 2], &[4, 4], MODE_LINEAR, COORD_HALF_PIXEL), &x);
        assert_close(&y[..4], &[1.0, 1.25, 1.75, 2.0], 1e-6);
    }

    #[test]
    fn resize_linear_matches_direct_formula() {
        // asymmetric linear on a random 3-D tensor against a direct bilinear formula.
        let (d0, h, w, oh, ow) = (2usize, 5usize, 7usize, 9usize, 4usize);
        let x = rand_vec(d0 * h * w, 3);
        let p =
            params(&[d0 as i64, h as i64, w as i64], &[d0 as i64, oh as i64, ow as i64], MODE_LINEAR, COORD_ASYMMETRIC);
        let y = run(&p, &x);
        let mut want = vec![];
        for b in 0..d0 {
            for i in 0..oh {
                for j in 0..ow {
                    let sy = i as f64 * h as f64 / oh as f64;
                    let sx = j as f64 * w as f64 / ow as f64;
                    let (y0, x0) = (sy.floor() as usize, sx.floor() as usize);
                    let (y1, x1) = ((y0 + 1).min(h - 1), (x0 + 1).min(w - 1));
                    let (fy, fx) = (sy - y0 as f64, sx - x0 as f64);
                    let at = |r: usize, c: usize| x[(b * h + r) * w + c] as f64;
                    let v = (1.0 - fy) * ((1.0 - fx) * at(y0, x0) + fx * at(y0, x1))
                        + fy * ((1.0 - fx) * at(y1, x0) + fx * at(y1, x1));
                    want.push(v as f32);
                }
            }
        }
        assert_close(&y, &want, 1e-5);
    }

    #[test]
    fn resize_taps_stay_in_bounds() {
        // Extreme crop regions and scales: every index read is clamped.
        for mode in [MODE_NEAREST, MODE_LINEAR, MODE_CUBIC] {
            for coord in 0..=6 {
                for antialias in [0, 1] {
                    let mut p = params(&[3, 4], &[7, 2], mode, coord);
                    p.antialias = antialias;
                    p.exclude_outside = antialias;
                    p.roi_start = [-5.0; MAX_RANK];
                    p.roi_end = [9.0; MAX_RANK];
                    p.extrapolation_value = 7.0;
                    let x = rand_vec(12, 4);
                    let y = run(&p, &x);
                    assert!(y.iter().all(|v| v.is_finite()));
                    // f64 runs the same taps (computed in f64 for both).
                    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                    let mut y64 = vec![0.0f64; y.len()];
                    let mut scratch = vec![0u64; resize_scratch_bytes(&p) / 8 + 1];
                    let st =
                        unsafe { onnxc_resize_f64(&p, x64.as_ptr(), y64.as_mut_ptr(), scratch.as_mut_ptr().cast()) };
                    assert_eq!(st, STATUS_OK);
                    assert_close(&y64.iter().map(|&v| v as f32).collect::<Vec<_>>(), &y, 1e-6);
                }
            }
        }
    }

    #[test]
    fn grid_sample_identity_and_padding() {
        // align_corners=1 with a grid at the pixel positions reproduces the input.
        let (h, w) = (3usize, 4usize);
        let x = rand_vec(h * w, 5);
        let mut grid = vec![];
        for i in 0..h {
            for j in 0..w {
                grid.push(j as f32 * 2.0 / (w - 1) as f32 - 1.0);
                grid.push(i as f32 * 2.0 / (h - 1) as f32 - 1.0);
            }
        }
        for mode in [MODE_NEAREST, MODE_LINEAR, MODE_CUBIC] {
            for padding in [PADDING_ZEROS, PADDING_BORDER, PADDING_REFLECTION] {
                let mut p =
                    GridSampleParams { n: 1, c: 1, rank: 2, mode, padding, align_corners: 1, ..Default::default() };
                p.in_dims[..2].copy_from_slice(&[h as i64, w as i64]);
                p.out_dims[..2].copy_from_slice(&[h as i64, w as i64]);
                let mut y = vec![0.0f32; h * w];
                assert_eq!(unsafe { onnxc_grid_sample_f32(&p, x.as_ptr(), grid.as_ptr(), y.as_mut_ptr()) }, STATUS_OK);
                assert_close(&y, &x, 1e-5);
                let wide = |v: &[f32]| v.iter().map(|&v| v as f64).collect::<Vec<f64>>();
                let mut y64 = vec![0.0f64; h * w];
                let st =
                    unsafe { onnxc_grid_sample_f64(&p, wide(&x).as_ptr(), wide(&grid).as_ptr(), y64.as_mut_ptr()) };
                assert_eq!(st, STATUS_OK);
                assert_close(&y64.iter().map(|&v| v as f32).collect::<Vec<_>>(), &x, 1e-6);
                // Far outside: zeros gives 0, border/reflection stay in range.
                let far = [1e9f32, -1e9, f32::NAN, 3.0];
                let mut p2 = p;
                p2.out_dims[..2].copy_from_slice(&[1, 2]);
                let mut y2 = [0.0f32; 2];
                assert_eq!(unsafe { onnxc_grid_sample_f32(&p2, x.as_ptr(), far.as_ptr(), y2.as_mut_ptr()) }, STATUS_OK);
            }
        }
    }

    #[test]
    fn affine_grid_identity() {
        let theta = [1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0];
        let p = AffineGridParams { n: 1, rank: 2, dims: [2, 3, 0], align_corners: 1 };
        let mut g = vec![0.0f32; 12];
        assert_eq!(unsafe { onnxc_affine_grid_f32(&p, theta.as_ptr(), g.as_mut_ptr()) }, STATUS_OK);
        assert_close(&g, &[-1., -1., 0., -1., 1., -1., -1., 1., 0., 1., 1., 1.], 1e-6);
        let theta64 = theta.map(|v| v as f64);
        let mut g64 = vec![0.0f64; 12];
        assert_eq!(unsafe { onnxc_affine_grid_f64(&p, theta64.as_ptr(), g64.as_mut_ptr()) }, STATUS_OK);
        assert_eq!(g64.iter().map(|&v| v as f32).collect::<Vec<_>>(), g);
    }
}
