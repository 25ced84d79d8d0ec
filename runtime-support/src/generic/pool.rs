//! MaxPool, AveragePool and LpPool over 0..=6 spatial dims.
//!
//! Follows ONNX semantics (checked against the ONNX reference
//! implementation): the compiler computes `out_spatial` (including
//! `ceil_mode`), so the last windows may run past the input and the end
//! padding. Window taps are `o * stride - pad_begin + k * dilation`; only
//! the taps inside the input are visited (counts of the others come from
//! arithmetic), so a huge `kernel_shape` costs no more than the input.
//!
//! * Max ignores every tap outside the input. `indices` (optional) receives
//!   the flat index of the maximum in the whole input tensor, including the
//!   `(n * C + c) * spatial_size` offset; `storage_order == 1` numbers the
//!   spatial position column-major. A window with no valid tap yields `-inf`
//!   and index -1.
//! * Average divides by the number of valid taps, or, with
//!   `count_include_pad`, by the number of taps inside the explicitly padded
//!   input `[-pad_begin, in + pad_end)`: taps past the end padding (which
//!   only `ceil_mode` produces) are never counted.
//! * Lp computes `(sum |x|^p)^(1/p)` over the valid taps (padding is zero and
//!   adds nothing).
//!
//! f32 and f64 share one generic implementation, each computing in its own type.
//!
//! Max and average pooling without `indices` take two faster paths: a
//! global pool (one output per whole, unpadded plane) is a lane-wise
//! reduction (`global_pool`), and a 2-D pool without dilation runs, for
//! f32, the x86-64 plane kernels (`x86_64::pool`, with this module's
//! bits) where the CPU has them, else the 2-D loops compiled for its
//! widest vectors. Both split the planes over the context's threads.

use super::real::Real;
use super::{checked_rank, product, to_usize};
use crate::abi::pool::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};
use crate::parallel::{share, Parallel};
use core::ops::Range;

/// Largest spatial rank of pool and conv kernels.
pub const MAX_SPATIAL_RANK: usize = MAX_RANK - 2;

/// True when the tap arithmetic of one spatial dim cannot overflow `i64`:
/// `o * stride - pad_begin + k * dilation` for `o < out`, `k < kernel`,
/// and each partial sum the kernels form. Params come from the compiler,
/// which checks this too; kernels refuse params that break it.
pub(crate) fn window_fits(out: i64, kernel: i64, stride: i64, dilation: i64, pad_begin: i64) -> bool {
    let reach = (i128::from(out.max(1)) - 1) * i128::from(stride);
    let span = (i128::from(kernel.max(1)) - 1) * i128::from(dilation);
    let pad = i128::from(pad_begin);
    [reach, span, -pad, reach - pad, span - pad, reach + span - pad].iter().all(|&v| i64::try_from(v).is_ok())
}

pub(crate) fn validate(p: &PoolParams) -> Option<usize> {
    let r = checked_rank(p.spatial_rank, MAX_SPATIAL_RANK, &p.in_spatial)?;
    let ok = p.batch >= 0
        && p.channels >= 0
        && (POOL_MAX..=POOL_LP).contains(&p.kind)
        && (0..=1).contains(&p.storage_order)
        && (0..r).all(|d| {
            p.out_spatial[d] >= 0
                && p.kernel[d] >= 1
                && p.strides[d] >= 1
                && p.dilations[d] >= 1
                && p.pads_begin[d] >= 0
                && p.pads_end[d] >= 0
                && p.in_spatial[d].checked_add(p.pads_end[d]).is_some()
                && window_fits(p.out_spatial[d], p.kernel[d], p.strides[d], p.dilations[d], p.pads_begin[d])
        });
    ok.then_some(r)
}

/// The taps `k` in `0..kernel` whose position `start + k * dilation` lies
/// in `lo..hi`, as `first..end` (empty when none do).
fn tap_range(start: i64, dilation: i64, kernel: i64, lo: i64, hi: i64) -> (i64, i64) {
    let ceil_div = |a: i128, b: i128| a.div_euclid(b) + i128::from(a.rem_euclid(b) != 0);
    let (s, d, k) = (i128::from(start), i128::from(dilation), i128::from(kernel));
    let first = ceil_div(i128::from(lo) - s, d).clamp(0, k);
    let end = ceil_div(i128::from(hi) - s, d).clamp(first, k);
    (first as i64, end as i64)
}

/// The window `[start, end)` of output position `o` along dim `d`, clipped
/// to the input, and the number of its taps inside the padded input.
pub(crate) fn window(p: &PoolParams, d: usize, o: usize) -> (usize, usize, usize) {
    let (len, k) = (p.in_spatial[d], p.kernel[d]);
    let start = o as i64 * p.strides[d] - p.pads_begin[d];
    let (lo, hi) = (start.max(0), (start + k).min(len));
    let padded = (start + k).min(len + p.pads_end[d]) - start.max(-p.pads_begin[d]);
    (lo as usize, hi.max(lo) as usize, padded.max(0) as usize)
}

/// The taps along dim `d` the average of output position `o` divides by:
/// those of its [`window`] inside the input, or inside the padded input
/// with `count_include_pad`.
pub(crate) fn average_extent(p: &PoolParams, d: usize, o: usize) -> usize {
    let (lo, hi, padded) = window(p, d, o);
    if p.count_include_pad != 0 {
        padded
    } else {
        hi - lo
    }
}

/// Max and average pooling of one 2-D plane without dilation or indices:
/// the same taps in the same order as the general loop, except that max
/// starts from -inf where the window's first tap lies in the padding (as
/// the SIMD kernels, whose padding is -inf, do; it differs only when that
/// window's first tap inside the input is NaN). Output columns whose
/// window lies inside the input row (all but a few at the edges) are done a
/// tap at a time across the whole output row, a loop that vectorises; the
/// edge columns compute their clipped window once and visit it.
#[inline(always)]
unsafe fn pool_2d<T: Real>(p: &PoolParams, x: *const T, y: *mut T) {
    let (oh, ow, iw) = (p.out_spatial[0] as usize, p.out_spatial[1] as usize, p.in_spatial[1] as usize);
    let (stride, pad, kw) = (p.strides[1], p.pads_begin[1], p.kernel[1]);
    // Interior columns `[ja, jb)`: `j * stride - pad >= 0` and `... + kw <= iw`.
    let ja = ((pad + stride - 1) / stride).min(ow as i64);
    let jb = if iw as i64 + pad >= kw { ((iw as i64 + pad - kw) / stride + 1).clamp(ja, ow as i64) } else { ja };
    let (ja, jb, stride, kw) = (ja as usize, jb as usize, stride as usize, kw as usize);
    let max = p.kind == POOL_MAX;
    for i in 0..oh {
        let (h0, h1, _) = window(p, 0, i);
        let row = core::slice::from_raw_parts_mut(y.add(i * ow), ow);
        let interior = if h0 < h1 { ja..jb } else { 0..0 };
        // Whether the windows of this row start in the padding.
        let top_padded = (i as i64) * p.strides[0] < p.pads_begin[0];
        for j in (0..ow).filter(|j| !interior.contains(j)) {
            let (w0, w1, _) = window(p, 1, j);
            let padded_first = top_padded || (j as i64) * p.strides[1] < p.pads_begin[1];
            let mut best: Option<T> = padded_first.then_some(T::NEG_INF);
            let mut sum = T::ZERO;
            for h in h0..h1 {
                for w in w0..w1 {
                    let v = *x.add(h * iw + w);
                    sum = sum + v;
                    if best.is_none_or(|b| v > b) {
                        best = Some(v);
                    }
                }
            }
            row[j] = if max {
                best.unwrap_or(T::NEG_INF)
            } else {
                let n = average_extent(p, 0, i) * average_extent(p, 1, j);
                sum / T::from_f64(n as f64)
            };
        }
        if interior.is_empty() {
            continue;
        }
        let out = &mut row[interior];
        if max && top_padded {
            out.fill(T::NEG_INF);
        }
        for h in h0..h1 {
            for w in 0..kw {
                // Input of output column `ja + q` for this tap: `src[q * stride]`.
                let src = x.add(h * iw + ja * stride - pad as usize + w);
                let first = h == h0 && w == 0 && !(max && top_padded);
                match stride {
                    1 => interior_tap::<T, 1>(out, src, 1, max, first),
                    2 => interior_tap::<T, 2>(out, src, 2, max, first),
                    _ => interior_tap::<T, 0>(out, src, stride, max, first),
                }
            }
        }
        if !max {
            let n = T::from_f64((average_extent(p, 0, i) * kw) as f64);
            out.iter_mut().for_each(|o| *o = *o / n);
        }
    }
}

/// Whether each plane pools to one output whose window is the whole plane,
/// without padding (GlobalMaxPool, GlobalAveragePool, and pools whose
/// kernel is the input).
fn is_global(p: &PoolParams, r: usize) -> bool {
    (0..r).all(|d| {
        p.out_spatial[d] == 1
            && p.kernel[d] == p.in_spatial[d]
            && p.dilations[d] == 1
            && p.pads_begin[d] == 0
            && p.pads_end[d] == 0
    })
}

/// Lanes of [`global_pool`]'s partial results.
const GLOBAL_LANES: usize = 8;

/// The maximum or mean of a whole plane, in the order of
/// [`GLOBAL_LANES`] interleaved partial results (element `i` into lane
/// `i % GLOBAL_LANES` while whole groups of lanes remain), which vectorises
/// whatever the plane's size: the lanes are then combined in order, and
/// the remaining elements taken one by one. Max keeps `v > acc ? v : acc`
/// from each lane's first element, as the windowed kernels do; the average
/// is the sum over the element count. An empty plane gives -inf or NaN.
fn global_pool<T: Real>(x: &[T], max: bool) -> T {
    let pick = |acc: T, v: T| {
        if max {
            if v > acc {
                v
            } else {
                acc
            }
        } else {
            acc + v
        }
    };
    let start = |v: T| if max { v } else { T::ZERO + v };
    let (result, rest) = if let Some((first, rest)) = x.split_first_chunk::<GLOBAL_LANES>() {
        let groups = rest.chunks_exact(GLOBAL_LANES);
        let rest = groups.remainder();
        let lanes = groups.fold(first.map(start), |mut lanes, group| {
            lanes.iter_mut().zip(group).for_each(|(lane, &v)| *lane = pick(*lane, v));
            lanes
        });
        (lanes[1..].iter().fold(lanes[0], |acc, &v| pick(acc, v)), rest)
    } else if let Some((&first, rest)) = x.split_first() {
        (start(first), rest)
    } else {
        (if max { T::NEG_INF } else { T::ZERO }, x)
    };
    let result = rest.iter().fold(result, |acc, &v| pick(acc, v));
    if max {
        result
    } else {
        result / T::from_f64(x.len() as f64)
    }
}

/// Element types of the pooling kernels, with the SIMD plane kernel where
/// the type and CPU have one.
pub(crate) trait PoolElem: Real {
    /// Max or average pooling of 2-D planes `range` (each `in_size` and
    /// `out_size` elements) without dilation by a SIMD kernel (the same
    /// bits as [`pool_2d`]); false (nothing written) when there is none for
    /// these params.
    ///
    /// # Safety
    /// As `pool_2d`, for each plane.
    unsafe fn pool_planes_simd(_p: &PoolParams, _x: *const Self, _y: *mut Self, _planes: Planes) -> bool {
        false
    }
}

/// Planes `range` of `in_size` input and `out_size` output elements each.
#[derive(Clone, Debug)]
pub(crate) struct Planes {
    pub range: Range<usize>,
    pub in_size: usize,
    pub out_size: usize,
}

impl PoolElem for f32 {
    unsafe fn pool_planes_simd(p: &PoolParams, x: *const f32, y: *mut f32, planes: Planes) -> bool {
        crate::isa::choose::pool_planes(crate::isa::Isa::best(), p, x, y, planes)
    }
}

impl PoolElem for f64 {}

/// One window tap of [`pool_2d`] across the interior output columns:
/// `out[q]` takes in `src[q * stride]` (the first tap sets it). `STRIDE`,
/// when not 0, is the stride as a constant, so that the strided reads
/// vectorise (as shuffles rather than gathers); each case is its own loop.
#[inline(always)]
unsafe fn interior_tap<T: Real, const STRIDE: usize>(
    out: &mut [T],
    src: *const T,
    stride: usize,
    max: bool,
    first: bool,
) {
    let stride = if STRIDE == 0 { stride } else { STRIDE };
    let taps = out.iter_mut().enumerate().map(|(q, o)| (o, *src.add(q * stride)));
    match (max, first) {
        (true, true) => taps.for_each(|(o, v)| *o = v),
        (true, false) => taps.for_each(|(o, v)| *o = if v > *o { v } else { *o }),
        (false, true) => taps.for_each(|(o, v)| *o = T::ZERO + v),
        (false, false) => taps.for_each(|(o, v)| *o = *o + v),
    }
}

/// Runs `some_planes` on ranges of planes `0..planes`, split over `parallel`.
unsafe fn for_each_plane(parallel: *const Parallel, planes: usize, some_planes: impl Fn(Range<usize>)) {
    let parts = planes.min(super::conv::CHANNEL_TASKS);
    Parallel::for_each(parallel, parts, |part| some_planes(share(planes, parts, part)));
}

/// 1-D pooling `p` as 2-D pooling of planes one row high, which the
/// plane kernels take.
fn as_rows(p: &PoolParams) -> PoolParams {
    let mut rows = *p;
    rows.spatial_rank = 2;
    for field in [&mut rows.in_spatial, &mut rows.out_spatial, &mut rows.kernel, &mut rows.strides, &mut rows.dilations]
    {
        *field = [1, field[0], 1, 1, 1, 1, 1, 1];
    }
    for field in [&mut rows.pads_begin, &mut rows.pads_end] {
        *field = [0, field[0], 0, 0, 0, 0, 0, 0];
    }
    rows
}

pub(crate) unsafe fn pool<T: PoolElem>(
    p: *const PoolParams,
    x: *const T,
    y: *mut T,
    indices: *mut i64,
    parallel: *const Parallel,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(r) = validate(p) else {
        return STATUS_INVALID_PARAMS;
    };
    // The kernel's size is only checked: windows visit their valid taps.
    let (Some(in_size), Some(out_size), Some(_)) =
        (product(&p.in_spatial[..r]), product(&p.out_spatial[..r]), product(&p.kernel[..r]))
    else {
        return STATUS_INVALID_PARAMS;
    };
    let planes = (p.batch * p.channels) as usize;
    if out_size == 0 || planes == 0 {
        return STATUS_OK;
    }
    let in_dims = to_usize(&p.in_spatial);
    let out_dims = to_usize(&p.out_spatial);
    if is_global(p, r) && indices.is_null() && matches!(p.kind, POOL_MAX | POOL_AVERAGE) {
        let one_plane = |plane: usize| {
            let x = core::slice::from_raw_parts(x.add(plane * in_size), in_size);
            *y.add(plane) = crate::isa::with_widest_vectors(
                #[inline(always)]
                || global_pool(x, p.kind == POOL_MAX),
            );
        };
        for_each_plane(parallel, planes, |range| range.for_each(one_plane));
        return STATUS_OK;
    }
    if r == 1 && p.dilations[0] == 1 && indices.is_null() && matches!(p.kind, POOL_MAX | POOL_AVERAGE) {
        return pool(&as_rows(p), x, y, indices, parallel);
    }
    let plain = r == 2 && p.dilations[..2] == [1, 1] && indices.is_null();
    if plain && matches!(p.kind, POOL_MAX | POOL_AVERAGE) {
        let some_planes = |range: Range<usize>| {
            if !T::pool_planes_simd(p, x, y, Planes { range: range.clone(), in_size, out_size }) {
                for plane in range {
                    crate::isa::with_widest_vectors(
                        #[inline(always)]
                        || pool_2d(p, x.add(plane * in_size), y.add(plane * out_size)),
                    );
                }
            }
        };
        for_each_plane(parallel, planes, some_planes);
        return STATUS_OK;
    }
    // Row-major strides for reading, and the strides used to number indices.
    let mut rm = [0i64; MAX_RANK];
    let mut cm = [0i64; MAX_RANK];
    let mut s = 1i64;
    for d in (0..r).rev() {
        rm[d] = s;
        s *= in_dims[d] as i64;
    }
    s = 1;
    for d in 0..r {
        cm[d] = s;
        s *= in_dims[d] as i64;
    }
    let index_strides = if p.storage_order == 1 { cm } else { rm };
    let p_norm = T::from_f64(p.p_norm);
    let inv_p = T::ONE / p_norm;

    for plane in 0..planes {
        let xp = x.add(plane * in_size);
        let yp = y.add(plane * out_size);
        let mut o = [0usize; MAX_RANK];
        for out_i in 0..out_size {
            // Per dim: the window's origin, its taps inside the input
            // (`first..end`) and how many lie inside the padded input.
            let mut start = [0i64; MAX_RANK];
            let (mut first, mut end) = ([0i64; MAX_RANK], [0i64; MAX_RANK]);
            let (mut valid, mut padded) = (1usize, 1usize);
            for d in 0..r {
                let (dil, k) = (p.dilations[d], p.kernel[d]);
                start[d] = o[d] as i64 * p.strides[d] - p.pads_begin[d];
                (first[d], end[d]) = tap_range(start[d], dil, k, 0, p.in_spatial[d]);
                let (pf, pe) = tap_range(start[d], dil, k, -p.pads_begin[d], p.in_spatial[d] + p.pads_end[d]);
                valid *= (end[d] - first[d]) as usize;
                padded *= (pe - pf) as usize;
            }
            let mut best = T::NEG_INF;
            let mut best_at: i64 = -1;
            let mut sum = T::ZERO;
            // Only the taps inside the input, row-major over the kernel dims:
            // a window far larger than the input costs no more than the input.
            let mut k = first;
            for _ in 0..valid {
                let mut off = 0i64;
                let mut idx_off = 0i64;
                for d in 0..r {
                    let pos = start[d] + k[d] * p.dilations[d];
                    off += pos * rm[d];
                    idx_off += pos * index_strides[d];
                }
                let v = *xp.offset(off as isize);
                match p.kind {
                    POOL_MAX => {
                        if best_at < 0 || v > best {
                            best = v;
                            best_at = idx_off;
                        }
                    }
                    POOL_AVERAGE => sum = sum + v,
                    _ => sum = sum + v.abs().powf(p_norm),
                }
                for d in (0..r).rev() {
                    k[d] += 1;
                    if k[d] < end[d] {
                        break;
                    }
                    k[d] = first[d];
                }
            }
            *yp.add(out_i) = match p.kind {
                POOL_MAX => {
                    if !indices.is_null() {
                        let flat = if best_at < 0 { -1 } else { (plane * in_size) as i64 + best_at };
                        *indices.add(plane * out_size + out_i) = flat;
                    }
                    best
                }
                POOL_AVERAGE => {
                    let n = if p.count_include_pad != 0 { padded } else { valid };
                    sum / T::from_f64(n as f64)
                }
                _ => sum.powf(inv_p),
            };
            // Next output position.
            for d in (0..r).rev() {
                o[d] += 1;
                if o[d] < out_dims[d] {
                    break;
                }
                o[d] = 0;
            }
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec, unravel};
    use std::vec;
    use std::vec::Vec;

    /// The SIMD plane kernels (each this CPU has) give the portable one's bits: max and
    /// average (with and without the padding counted), strides 1 and 2,
    /// windows clipped at both ends and past the end padding (ceil mode),
    /// rows of one to several chunks, NaN, infinities and -0 in the input.
    #[test]
    fn simd_plane_matches_portable_bits() {
        use crate::isa::{choose::pool_planes, Isa};
        let testable = crate::generic::test_util::testable_isas();
        let kernels: Vec<_> = testable.into_iter().filter(|&kernel| kernel != Isa::Generic).collect();
        // (input, kernel, strides, pads [top, left, bottom, right], extra output columns/rows)
        let shapes = [
            ([7, 7], [3, 3], [1, 1], [1, 1, 1, 1], 0),
            ([111, 111], [3, 3], [2, 2], [0, 0, 0, 0], 1),
            ([14, 40], [3, 5], [1, 1], [1, 2, 1, 2], 0),
            ([9, 37], [2, 3], [2, 2], [0, 1, 1, 1], 1),
            ([5, 3], [5, 7], [1, 2], [2, 3, 2, 3], 0),
            ([13, 13], [13, 13], [1, 1], [0, 0, 0, 0], 0),
            ([4, 70], [1, 16], [1, 2], [0, 15, 0, 15], 1),
            ([40, 9], [16, 2], [1, 2], [15, 0, 15, 1], 1),
        ];
        for (n, &(input, kernel, strides, pads, extra)) in shapes.iter().enumerate() {
            for (kind, include_pad) in [(POOL_MAX, 0), (POOL_AVERAGE, 0), (POOL_AVERAGE, 1)] {
                let mut p = PoolParams { kind, batch: 1, channels: 1, spatial_rank: 2, ..Default::default() };
                for d in 0..2 {
                    p.in_spatial[d] = input[d];
                    p.kernel[d] = kernel[d];
                    p.strides[d] = strides[d];
                    p.dilations[d] = 1;
                    p.pads_begin[d] = pads[d];
                    p.pads_end[d] = pads[d + 2];
                    p.out_spatial[d] = (input[d] + pads[d] + pads[d + 2] - kernel[d]) / strides[d] + 1 + extra;
                }
                p.count_include_pad = include_pad;
                let mut x = rand_vec((input[0] * input[1]) as usize, n as u64);
                for (i, special) in [f32::NAN, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN].into_iter().enumerate()
                {
                    let at = (i * 7919 + n) % x.len();
                    x[at] = special;
                }
                // Two planes in one call: the plane, then its negation.
                let (in_size, out) = (x.len(), (p.out_spatial[0] * p.out_spatial[1]) as usize);
                let x: Vec<f32> = x.iter().copied().chain(x.iter().map(|v| -v)).collect();
                let mut want = vec![1.5f32; 2 * out];
                unsafe { pool_2d(&p, x.as_ptr(), want.as_mut_ptr()) };
                unsafe { pool_2d(&p, x[in_size..].as_ptr(), want[out..].as_mut_ptr()) };
                for &kernel in &kernels {
                    let mut got = vec![2.5f32; 2 * out];
                    let planes = Planes { range: 0..2, in_size, out_size: out };
                    assert!(unsafe { pool_planes(kernel, &p, x.as_ptr(), got.as_mut_ptr(), planes) }, "case {n} taken");
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
                        assert!(same, "{kernel:?} case {n}, kind {kind}, pad {include_pad}, output {i}: {g} vs {w}");
                    }
                }
            }
        }
        // A window whose row group does not fit the tile buffer takes the
        // portable kernel.
        let mut p = PoolParams { kind: POOL_MAX, batch: 1, channels: 1, spatial_rank: 2, ..Default::default() };
        for (d, (input, kernel)) in [(700, 600), (5, 3)].into_iter().enumerate() {
            (p.in_spatial[d], p.kernel[d], p.strides[d], p.dilations[d]) = (input, kernel, 1, 1);
            p.out_spatial[d] = input - kernel + 1;
        }
        let (x, mut y) = (vec![0f32; 700 * 5], vec![0f32; 101 * 3]);
        for &kernel in &kernels {
            let planes = Planes { range: 0..1, in_size: x.len(), out_size: y.len() };
            assert!(!unsafe { pool_planes(kernel, &p, x.as_ptr(), y.as_mut_ptr(), planes) });
        }
    }

    /// 1-D pooling runs as planes one row high: the same windows (padding
    /// at both ends, counted or not, and ceil mode) as the definition.
    #[test]
    fn one_dimensional_pooling_matches_its_windows() {
        // (length, kernel, stride, pads begin and end, extra output)
        for (n, (len, kernel, stride, (begin, end), extra)) in
            [(16, 4, 4, (0, 0), 0), (37, 3, 2, (1, 1), 1), (9, 5, 1, (2, 2), 0), (3981, 4, 4, (0, 0), 0)]
                .into_iter()
                .enumerate()
        {
            for (kind, include_pad) in [(POOL_MAX, 0), (POOL_AVERAGE, 0), (POOL_AVERAGE, 1)] {
                let mut p = PoolParams { kind, batch: 1, channels: 3, spatial_rank: 1, ..Default::default() };
                let out = (len + begin + end - kernel) / stride + 1 + extra;
                (p.in_spatial[0], p.kernel[0], p.strides[0], p.dilations[0]) = (len, kernel, stride, 1);
                (p.pads_begin[0], p.pads_end[0], p.out_spatial[0], p.count_include_pad) =
                    (begin, end, out, include_pad);
                let x = rand_vec(3 * len as usize, 60 + n as u64);
                let mut y = vec![0f32; 3 * out as usize];
                let status = unsafe { pool(&p, x.as_ptr(), y.as_mut_ptr(), core::ptr::null_mut(), core::ptr::null()) };
                assert_eq!(status, STATUS_OK);
                for (i, &got) in y.iter().enumerate() {
                    let (plane, o) = (i / out as usize, (i % out as usize) as i64);
                    let start = o * stride - begin;
                    let taps: Vec<f32> = (start.max(0)..(start + kernel).min(len))
                        .map(|t| x[plane * len as usize + t as usize])
                        .collect();
                    let want = match kind {
                        POOL_MAX => taps.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                        _ if include_pad == 1 => {
                            taps.iter().sum::<f32>()
                                / (start + kernel).min(len + end).saturating_sub(start).min(kernel) as f32
                        }
                        _ => taps.iter().sum::<f32>() / taps.len() as f32,
                    };
                    let close = got == want || (got - want).abs() <= 1e-6 || (got.is_nan() && want.is_nan());
                    assert!(close, "case {n}, kind {kind}, output {i}: {got} vs {want}");
                }
            }
        }
    }

    /// Global pooling (the whole plane, no padding) takes its own path:
    /// max is exact; the average's sum is in lanes, so it matches the plain
    /// mean to rounding; one element, shorter-than-a-lane and uneven planes.
    #[test]
    fn global_pool_matches_the_plain_reduction() {
        for (n, len) in [1usize, 2, 7, 8, 9, 49, 169, 1000].into_iter().enumerate() {
            let x = rand_vec(len, 40 + n as u64);
            let mut p = PoolParams { batch: 1, channels: 2, spatial_rank: 1, ..Default::default() };
            (p.in_spatial[0], p.kernel[0], p.out_spatial[0], p.strides[0], p.dilations[0]) =
                (len as i64, len as i64, 1, 1, 1);
            let planes: Vec<f32> = x.iter().copied().chain(x.iter().map(|v| -v)).collect();
            for kind in [POOL_MAX, POOL_AVERAGE] {
                p.kind = kind;
                let mut y = [7.0f32; 2];
                let status = unsafe {
                    onnxc_pool_f32(&p, planes.as_ptr(), y.as_mut_ptr(), core::ptr::null_mut(), core::ptr::null())
                };
                assert_eq!(status, STATUS_OK);
                for (plane, &got) in planes.chunks(len).zip(&y) {
                    let want = if kind == POOL_MAX {
                        plane.iter().copied().fold(f32::NEG_INFINITY, f32::max)
                    } else {
                        (plane.iter().map(|&v| f64::from(v)).sum::<f64>() / len as f64) as f32
                    };
                    if kind == POOL_MAX {
                        assert_eq!(got, want, "len {len}");
                    } else {
                        assert!((got - want).abs() <= 1e-6, "len {len}: {got} vs {want}");
                    }
                }
            }
        }
    }

    #[test]
    fn windows_whose_taps_overflow_are_refused() {
        assert!(window_fits(8, 3, 1, 1, 0));
        assert!(window_fits(1, 1, i64::MAX, 1, 0));
        assert!(!window_fits(3, 1, i64::MAX, 1, 0));
        assert!(!window_fits(1, 3, 1, i64::MAX, 0));
        assert!(!window_fits(2, 1, i64::MAX, 1, -1));
        assert!(!window_fits(1, 1, 1, 1, i64::MIN));
        let mut p = PoolParams { kind: POOL_MAX, batch: 1, channels: 1, spatial_rank: 1, ..Default::default() };
        (p.in_spatial[0], p.out_spatial[0], p.kernel[0], p.strides[0], p.dilations[0]) = (4, 2, 2, i64::MAX, 1);
        let (x, mut y) = ([0f32; 4], [0f32; 2]);
        let status =
            unsafe { onnxc_pool_f32(&p, x.as_ptr(), y.as_mut_ptr(), core::ptr::null_mut(), core::ptr::null()) };
        assert_eq!(status, STATUS_INVALID_PARAMS);
        p.strides[0] = 2;
        p.pads_end[0] = i64::MAX;
        let status =
            unsafe { onnxc_pool_f32(&p, x.as_ptr(), y.as_mut_ptr(), core::ptr::null_mut(), core::ptr::null()) };
        assert_eq!(status, STATUS_INVALID_PARAMS);
    }

    /// A 2^40-tap window over 4 inputs takes four steps, not 2^40.
    #[test]
    fn a_huge_window_visits_only_the_input() {
        let k = 1i64 << 40;
        let mut p = PoolParams { batch: 1, channels: 1, spatial_rank: 1, ..Default::default() };
        (p.in_spatial[0], p.out_spatial[0], p.kernel[0], p.strides[0], p.dilations[0]) = (4, 1, k, 1, 1);
        (p.pads_begin[0], p.pads_end[0]) = (1 << 39, k - 4 - (1 << 39));
        let x = [1.0f32, 4.0, 2.0, 3.0];
        let run = |p: &PoolParams| {
            let (mut y, mut i) = ([0f32; 1], [0i64; 1]);
            let status = unsafe { onnxc_pool_f32(p, x.as_ptr(), y.as_mut_ptr(), i.as_mut_ptr(), core::ptr::null()) };
            assert_eq!(status, STATUS_OK);
            (y[0], i[0])
        };
        p.kind = POOL_MAX;
        assert_eq!(run(&p), (4.0, 1));
        p.kind = POOL_AVERAGE;
        assert_eq!(run(&p).0, 2.5);
        p.count_include_pad = 1;
        assert_eq!(run(&p).0, 10.0 / k as f32);
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Cell {
        Real(f32, usize),
        Pad,
        Beyond,
    }

    struct Case {
        input: Vec<usize>,
        kernel: Vec<usize>,
        strides: Vec<usize>,
        dilations: Vec<usize>,
        pads: Vec<(usize, usize)>,
        ceil: bool,
    }

    fn params(c: &Case, kind: i64) -> PoolParams {
        let mut p = PoolParams {
            kind,
            batch: 2,
            channels: 3,
            spatial_rank: c.input.len() as i64,
            p_norm: 2.0,
            ..Default::default()
        };
        for d in 0..c.input.len() {
            let (i, k, s, dl) = (c.input[d] as i64, c.kernel[d] as i64, c.strides[d] as i64, c.dilations[d] as i64);
            let (pb, pe) = (c.pads[d].0 as i64, c.pads[d].1 as i64);
            let span = dl * (k - 1) + 1;
            let num = i + pb + pe - span;
            let mut out = if c.ceil { (num + s - 1).div_euclid(s) + 1 } else { num.div_euclid(s) + 1 };
            // ONNX: the last window must start inside the input or the begin padding.
            if c.ceil && (out - 1) * s >= i + pb {
                out -= 1;
            }
            p.in_spatial[d] = i;
            p.out_spatial[d] = out.max(0);
            p.kernel[d] = k;
            p.strides[d] = s;
            p.dilations[d] = dl;
            p.pads_begin[d] = pb;
            p.pads_end[d] = pe;
        }
        p
    }

    /// Pools one plane through an explicitly padded copy of it, the way the
    /// ONNX reference does: cells are real values, explicit padding, or the
    /// extra space that ceil_mode windows may reach past the end padding.
    fn reference(p: &PoolParams, x: &[f32]) -> (Vec<f32>, Vec<i64>) {
        let r = p.spatial_rank as usize;
        let ind: Vec<usize> = (0..r).map(|d| p.in_spatial[d] as usize).collect();
        let outd: Vec<usize> = (0..r).map(|d| p.out_spatial[d] as usize).collect();
        let kd: Vec<usize> = (0..r).map(|d| p.kernel[d] as usize).collect();
        let pb: Vec<usize> = (0..r).map(|d| p.pads_begin[d] as usize).collect();
        let explicit: Vec<usize> = (0..r).map(|d| ind[d] + pb[d] + p.pads_end[d] as usize).collect();
        let padded: Vec<usize> = (0..r)
            .map(|d| {
                let need =
                    outd[d].saturating_sub(1) * p.strides[d] as usize + (kd[d] - 1) * p.dilations[d] as usize + 1;
                need.max(explicit[d])
            })
            .collect();
        let in_size: usize = ind.iter().product();
        let out_size: usize = outd.iter().product();
        let padded_size: usize = padded.iter().product();
        let taps: usize = kd.iter().product();
        let planes = (p.batch * p.channels) as usize;
        let mut y = vec![0.0f32; planes * out_size];
        let mut idx = vec![0i64; planes * out_size];
        for plane in 0..planes {
            let grid: Vec<Cell> = (0..padded_size)
                .map(|f| {
                    let c = unravel(f, &padded);
                    if (0..r).any(|d| c[d] >= explicit[d]) {
                        Cell::Beyond
                    } else if (0..r).any(|d| c[d] < pb[d] || c[d] >= pb[d] + ind[d]) {
                        Cell::Pad
                    } else {
                        let (mut rm, mut cm, mut mul) = (0usize, 0usize, 1usize);
                        for d in 0..r {
                            rm = rm * ind[d] + c[d] - pb[d];
                        }
                        for d in 0..r {
                            cm += (c[d] - pb[d]) * mul;
                            mul *= ind[d];
                        }
                        let at = if p.storage_order == 1 { cm } else { rm };
                        Cell::Real(x[plane * in_size + rm], plane * in_size + at)
                    }
                })
                .collect();
            for o in 0..out_size {
                let oc = unravel(o, &outd);
                let cells: Vec<Cell> = (0..taps)
                    .map(|t| {
                        let kc = unravel(t, &kd);
                        let mut f = 0;
                        for d in 0..r {
                            f = f * padded[d] + oc[d] * p.strides[d] as usize + kc[d] * p.dilations[d] as usize;
                        }
                        grid[f]
                    })
                    .collect();
                let reals: Vec<(f32, usize)> =
                    cells.iter().filter_map(|c| if let Cell::Real(v, i) = c { Some((*v, *i)) } else { None }).collect();
                let pads = cells.iter().filter(|c| **c == Cell::Pad).count();
                let at = plane * out_size + o;
                match p.kind {
                    POOL_MAX => {
                        let mut best: Option<(f32, usize)> = None;
                        for &(v, i) in &reals {
                            if best.is_none_or(|b| v > b.0) {
                                best = Some((v, i));
                            }
                        }
                        y[at] = best.map_or(f32::NEG_INFINITY, |b| b.0);
                        idx[at] = best.map_or(-1, |b| b.1 as i64);
                    }
                    POOL_AVERAGE => {
                        let n = reals.len() + if p.count_include_pad != 0 { pads } else { 0 };
                        y[at] = (reals.iter().map(|v| v.0 as f64).sum::<f64>() / n as f64) as f32;
                    }
                    _ => {
                        let s: f64 = reals.iter().map(|v| (v.0.abs() as f64).powf(p.p_norm)).sum();
                        y[at] = s.powf(1.0 / p.p_norm) as f32;
                    }
                }
            }
        }
        (y, idx)
    }

    fn check(c: Case) {
        for kind in [POOL_MAX, POOL_AVERAGE, POOL_LP] {
            for variant in 0..2 {
                let mut p = params(&c, kind);
                p.count_include_pad = variant;
                p.storage_order = variant;
                if kind == POOL_LP && variant == 1 {
                    p.p_norm = 3.0;
                }
                let in_n = 6 * c.input.iter().product::<usize>();
                let mut x = rand_vec(in_n, 4);
                if in_n > 3 {
                    x[1] = x[2]; // a tie: the first occurrence must win
                }
                let (want, want_idx) = reference(&p, &x);
                let mut got = vec![f32::NAN; want.len()];
                let mut got_idx = vec![-7i64; want.len()];
                let ip = if kind == POOL_MAX { got_idx.as_mut_ptr() } else { core::ptr::null_mut() };
                let st = unsafe { onnxc_pool_f32(&p, x.as_ptr(), got.as_mut_ptr(), ip, core::ptr::null()) };
                assert_eq!(st, STATUS_OK);
                assert_close(&got, &want, 1e-5);
                if kind == POOL_MAX {
                    assert_eq!(got_idx, want_idx);
                    // Without indices 2-D windows take the fast path: same values.
                    let mut fast = vec![f32::NAN; want.len()];
                    let st = unsafe {
                        onnxc_pool_f32(&p, x.as_ptr(), fast.as_mut_ptr(), core::ptr::null_mut(), core::ptr::null())
                    };
                    assert_eq!((st, fast), (STATUS_OK, got.clone()));
                }
                // f64 runs the same code in f64.
                let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                let mut got64 = vec![f64::NAN; want.len()];
                let st = unsafe {
                    onnxc_pool_f64(&p, x64.as_ptr(), got64.as_mut_ptr(), core::ptr::null_mut(), core::ptr::null())
                };
                assert_eq!(st, STATUS_OK);
                assert_close(&got64.iter().map(|&v| v as f32).collect::<Vec<_>>(), &want, 1e-6);
            }
        }
    }

    fn c2(input: [usize; 2], kernel: [usize; 2], s: [usize; 2], dl: [usize; 2], pads: [usize; 4], ceil: bool) -> Case {
        Case {
            input: input.to_vec(),
            kernel: kernel.to_vec(),
            strides: s.to_vec(),
            dilations: dl.to_vec(),
            pads: vec![(pads[0], pads[2]), (pads[1], pads[3])],
            ceil,
        }
    }

    #[test]
    fn pool2d_variants() {
        check(c2([5, 5], [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], false));
        check(c2([5, 5], [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], true));
        check(c2([7, 6], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], true));
        check(c2([8, 9], [3, 2], [3, 2], [2, 1], [1, 0, 2, 1], true));
        check(c2([6, 7], [3, 3], [1, 1], [2, 2], [2, 2, 2, 2], false));
        check(c2([4, 4], [4, 4], [1, 1], [1, 1], [0, 0, 0, 0], false)); // global
        check(c2([1, 1], [1, 1], [1, 1], [1, 1], [0, 0, 0, 0], false));
        check(c2([10, 3], [4, 2], [3, 5], [1, 1], [2, 1, 1, 0], true));
        // Wide rows: mostly interior columns (the tap-at-a-time loop), edges on both sides.
        check(c2([9, 40], [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], true));
        check(c2([6, 33], [3, 2], [1, 1], [1, 1], [1, 0, 1, 1], false));
        check(c2([5, 23], [2, 5], [1, 3], [1, 1], [0, 2, 1, 0], true));
    }

    #[test]
    fn pool1d_and_3d() {
        check(Case {
            input: vec![11],
            kernel: vec![3],
            strides: vec![2],
            dilations: vec![2],
            pads: vec![(1, 2)],
            ceil: true,
        });
        check(Case {
            input: vec![4, 5, 6],
            kernel: vec![2, 3, 2],
            strides: vec![2, 1, 3],
            dilations: vec![1, 2, 1],
            pads: vec![(0, 1), (1, 1), (1, 0)],
            ceil: true,
        });
    }

    /// ceil_mode windows past the end: windows start at `o * stride -
    /// pad_begin` (as in ONNX Runtime and the reference MaxPool). The ONNX
    /// reference AveragePool instead shifts such windows by half the extra
    /// padding and would give [1.5, 3.5] here; we do not follow that quirk.
    #[test]
    fn ceil_mode_window_positions() {
        let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
        let mut p = PoolParams { batch: 1, channels: 1, spatial_rank: 1, ..Default::default() };
        p.in_spatial[0] = 6;
        p.out_spatial[0] = 2;
        p.kernel[0] = 5;
        p.strides[0] = 4;
        p.dilations[0] = 1;
        for (kind, cip, want) in
            [(POOL_AVERAGE, 0, [2.0, 4.5]), (POOL_AVERAGE, 1, [2.0, 4.5]), (POOL_MAX, 0, [4.0, 5.0])]
        {
            p.kind = kind;
            p.count_include_pad = cip;
            let mut y = [0.0f32; 2];
            let st =
                unsafe { onnxc_pool_f32(&p, x.as_ptr(), y.as_mut_ptr(), core::ptr::null_mut(), core::ptr::null()) };
            assert_eq!(st, STATUS_OK);
            assert_eq!(y, want);
        }
    }

    #[test]
    fn rejects_bad_params() {
        let mut p = params(&c2([5, 5], [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], false), POOL_MAX);
        let z = core::ptr::null_mut();
        p.strides[1] = 0;
        assert_eq!(
            unsafe { onnxc_pool_f32(&p, z, z, core::ptr::null_mut(), core::ptr::null()) },
            STATUS_INVALID_PARAMS
        );
        p.strides[1] = 1;
        p.kind = 3;
        assert_eq!(
            unsafe { onnxc_pool_f32(&p, z, z, core::ptr::null_mut(), core::ptr::null()) },
            STATUS_INVALID_PARAMS
        );
    }
}
