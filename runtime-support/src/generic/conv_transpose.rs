//! The transposed direction of [`super::conv`] (ConvTranspose, Col2Im): the
//! mirror image of im2col + gemm. One gemm `W^T * X` per image and group
//! yields, for every (output channel, kernel tap), a row over the input
//! positions, and [`col2im`] scatter-adds each row into the output image
//! (positions falling outside, e.g. under negative or positive padding, are
//! dropped).
//!
//! The gemm runs in whichever orientation reads the weights along their
//! rows when they are the large operand: a generator's deep layers (dcgan:
//! 512 channels of 4x4 into 256 of 8x8, weights of 8 MiB against 16 input
//! positions) took 6.3 ms as `W^T X`, whose packing walks the weights
//! across their rows. col2im then reads the columns with either stride; it
//! computes each grid row's landing range once, so its inner loop has no
//! bounds test and, for unit strides, vectorises; at stride 2 it adds two
//! neighbouring taps' rows in one interleaved pass (the per-operator
//! case conv_transpose_k2_s2, gemm included: 1.78 -> 1.41 ms on Zen 4).
//!
//! Constant f32 weights are packed at compile time
//! ([`pack_conv_transpose_weights_f32`]) unless the products run
//! transposed ([`few_positions`]): `W_g^T` of each group as the pre-packed
//! gemm's A panels, as a Conv's weights are. Then the product is
//! [`sgemm_prepacked`] on the input as it lies (a generator's layers are
//! 1x1 convolutions with `M/group * taps` output channels, a gemm of 33
//! million multiply-adds each in dcgan), split over threads like a Conv's;
//! unpacked weights split the plain gemm by columns ([`gemm_by_columns`]).
//! col2im splits its output channels over threads, each channel scattered
//! in the same order whichever task runs it, so the bits do not depend on
//! the thread count.
//!
//! Every kernel is generic over the compute type; f32 and f64 are exported
//! (the gemm is the SIMD one for f32, the portable blocked one for f64).

use super::conv::ConvShape;
use super::gemm::{GemmElem, MatMut, MatRef};
use super::gemm_batched::gemm_by_columns;
use super::pool::{window_fits, MAX_SPATIAL_RANK};
use super::prepacked::{pack_a, packed_a_len, sgemm_prepacked};
use super::real::Real;
use super::{checked_rank, product, to_usize};
use crate::abi::conv::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};
use crate::parallel::{share, Parallel};
use core::ops::Range;

/// Scatter-adds of col2im per task when there are threads (tens of
/// microseconds of work, against a fork and join).
const COL2IM_TASK_ADDS: usize = 1 << 17;
/// Most tasks col2im is cut into.
const COL2IM_TASKS: usize = 8;

/// Validation of the transposed direction: like [`validate`], but the
/// padding may be negative (an output larger than the natural one) and the
/// output dims are free.
fn validate_transposed(p: &ConvParams) -> Option<ConvShape> {
    let rank = checked_rank(p.spatial_rank, MAX_SPATIAL_RANK, &p.in_spatial)?;
    if rank == 0
        || p.batch < 0
        || p.in_channels < 0
        || p.out_channels < 0
        || p.group < 1
        || p.in_channels % p.group != 0
        || p.out_channels % p.group != 0
    {
        return None;
    }
    // Input grid positions land on `i * stride + k * dilation - pad_begin`;
    // the sum before the padding must fit too.
    let dims_ok = (0..rank).all(|d| {
        let (i, k, s, dil) = (p.in_spatial[d], p.kernel[d], p.strides[d], p.dilations[d]);
        p.out_spatial[d] >= 0
            && k >= 1
            && s >= 1
            && dil >= 1
            && window_fits(i, k, s, dil, p.pads_begin[d])
            && window_fits(i, k, s, dil, 0)
    });
    if !dims_ok {
        return None;
    }
    Some(ConvShape {
        rank,
        c_per_group: (p.in_channels / p.group) as usize,
        m_per_group: (p.out_channels / p.group) as usize,
        in_size: product(&p.in_spatial[..rank])?,
        out_size: product(&p.out_spatial[..rank])?,
        taps: product(&p.kernel[..rank])?,
        pointwise: false,
    })
}

/// Number of scratch elements [`onnxc_conv_transpose_f32`] needs.
pub fn conv_transpose_scratch_elems(p: &ConvParams) -> usize {
    validate_transposed(p).map_or(0, |s| s.m_per_group * s.taps * s.in_size)
}

/// Whether [`onnxc_conv_transpose_f32`] runs these params faster on packed
/// weights: valid, and not [`few_positions`] (then the weights are the
/// large operand, and the gemm streams them along their rows as they lie).
pub fn conv_transpose_takes_packed_weights(p: &ConvParams) -> bool {
    validate_transposed(p).is_some_and(|s| !few_positions(&s))
}

/// Floats of the weights packed by [`onnxc_pack_conv_transpose_weights_f32`]
/// for `p` (0 for params it refuses).
pub fn conv_transpose_packed_weights_elems(p: &ConvParams) -> usize {
    match validate_transposed(p) {
        Some(s) if !few_positions(&s) => p.group as usize * packed_a_len(s.m_per_group * s.taps, s.c_per_group),
        _ => 0,
    }
}

/// Does the work of [`onnxc_pack_conv_transpose_weights_f32`]: each group's
/// `W_g^T` (`[M/group * taps, C/group]`) as pre-packed gemm A panels.
pub(crate) unsafe fn pack_conv_transpose_weights_f32(p: *const ConvParams, w: *const f32, dst: *mut f32) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(s) = validate_transposed(p).filter(|s| !few_positions(s)) else {
        return STATUS_INVALID_PARAMS;
    };
    let rows = s.m_per_group * s.taps;
    let per_group = packed_a_len(rows, s.c_per_group);
    for g in 0..p.group as usize {
        let w_t = MatRef { ptr: w.add(g * s.c_per_group * rows), rs: 1, cs: rows as isize };
        pack_a(rows, s.c_per_group, w_t, dst.add(g * per_group));
    }
    STATUS_OK
}

/// The grid positions `i` in `0..len` that land inside `0..out` at
/// `i * step + first` (`step >= 1`).
fn landing_inside(len: usize, out: usize, first: isize, step: isize) -> Range<usize> {
    let up = |n: isize| ((n + step - 1) / step) as usize;
    let lo = if first >= 0 { 0 } else { up(-first) };
    let hi = if (out as isize) > first { up(out as isize - first) } else { 0 };
    lo.min(len)..hi.min(len).max(lo.min(len))
}

/// The column matrix col2im reads: element (row `r`, grid position `i`)
/// at `ptr + r * row_stride + i * position_stride`.
pub(crate) struct Columns<T> {
    ptr: *const T,
    row_stride: usize,
    position_stride: usize,
}

impl<T> Clone for Columns<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Columns<T> {}

/// `y[i * step + first] += row[i]` for the `i < len` that land inside
/// `y[..out]`, `row` a grid row of `col`: contiguous (and vectorised) for
/// unit steps.
#[inline(always)]
unsafe fn add_row<T: Real>(
    y: *mut T,
    out: usize,
    row: *const T,
    col: Columns<T>,
    len: usize,
    first: isize,
    step: isize,
) {
    let inside = landing_inside(len, out, first, step);
    if inside.is_empty() {
        return;
    }
    let dst = y.offset(inside.start as isize * step + first);
    let src = row.add(inside.start * col.position_stride);
    if step == 1 && col.position_stride == 1 {
        let dst = core::slice::from_raw_parts_mut(dst, inside.len());
        let src = core::slice::from_raw_parts(src, inside.len());
        dst.iter_mut().zip(src).for_each(|(d, &v)| *d = *d + v);
    } else {
        for i in 0..inside.len() {
            let d = dst.offset(i as isize * step);
            *d = *d + *src.add(i * col.position_stride);
        }
    }
}

/// Scatter-adds the column blocks of `channels` (row `c * taps + tap` of
/// `col`, over the grid positions) into the images `y[c][out position]`:
/// grid position `i` and tap `k` land on `i * stride + k * dilation -
/// pad_begin` in every dim, if that is inside.
unsafe fn col2im<T: Real>(p: &ConvParams, s: &ConvShape, channels: Range<usize>, col: Columns<T>, y: *mut T) {
    let r = s.rank;
    let grid = to_usize(&p.in_spatial);
    let out = to_usize(&p.out_spatial);
    let kdims = to_usize(&p.kernel);
    let mut out_strides = [0isize; MAX_RANK];
    let mut st = 1isize;
    for d in (0..r).rev() {
        out_strides[d] = st;
        st *= out[d] as isize;
    }
    let last = r - 1;
    // Taps `2j` and `2j + 1` of a stride-2 row land on neighbours: one pass
    // adds both rows, interleaved, where a pass each steps by 2.
    let pairs = p.strides[last] == 2 && p.dilations[last] == 1 && col.position_stride == 1;
    for c in channels {
        let yc = y.add(c * s.out_size);
        let mut k = [0usize; MAX_RANK];
        let mut tap = 0;
        while tap < s.taps {
            let paired = pairs && k[last] % 2 == 0 && k[last] + 1 < kdims[last];
            let mut row = col.ptr.add((c * s.taps + tap) * col.row_stride);
            let mut g = [0usize; MAX_RANK];
            let first = k[last] as isize * p.dilations[last] as isize - p.pads_begin[last] as isize;
            let step = p.strides[last] as isize;
            for _ in 0..s.in_size / grid[last].max(1) {
                let mut base = 0isize;
                let mut inside = true;
                for d in 0..last {
                    let pos = g[d] as isize * p.strides[d] as isize + k[d] as isize * p.dilations[d] as isize
                        - p.pads_begin[d] as isize;
                    if pos < 0 || pos >= out[d] as isize {
                        inside = false;
                    }
                    base += pos * out_strides[d];
                }
                if inside && paired {
                    add_row_pair(yc.offset(base), out[last], [row, row.add(col.row_stride)], grid[last], first);
                } else if inside {
                    add_row(yc.offset(base), out[last], row, col, grid[last], first, step);
                }
                row = row.add(grid[last] * col.position_stride);
                for d in (0..last).rev() {
                    g[d] += 1;
                    if g[d] < grid[d] {
                        break;
                    }
                    g[d] = 0;
                }
            }
            for _ in 0..1 + paired as usize {
                tap += 1;
                for d in (0..r).rev() {
                    k[d] += 1;
                    if k[d] < kdims[d] {
                        break;
                    }
                    k[d] = 0;
                }
            }
        }
    }
}

/// `y[2i + first] += rows[0][i]` and `y[2i + first + 1] += rows[1][i]` for
/// the `i < len` that land inside `y[..out]`: [`add_row`] of two taps one
/// apart in a stride-2 row (contiguous grid rows), in one interleaved,
/// vectorised pass where both land. Each output element gets one of the
/// two, so the sums are those of two passes.
#[inline(always)]
unsafe fn add_row_pair<T: Real>(y: *mut T, out: usize, rows: [*const T; 2], len: usize, first: isize) {
    let lands = [landing_inside(len, out, first, 2), landing_inside(len, out, first + 1, 2)];
    let both = lands[0].start.max(lands[1].start)..lands[0].end.min(lands[1].end);
    if both.is_empty() {
        for (q, row) in rows.into_iter().enumerate() {
            add_landing(y, row, lands[q].clone(), first + q as isize);
        }
        return;
    }
    let dst = core::slice::from_raw_parts_mut(y.offset(2 * both.start as isize + first), 2 * both.len());
    let [r0, r1] = rows.map(|row| core::slice::from_raw_parts(row.add(both.start), both.len()));
    for (pair, (&a, &b)) in dst.chunks_exact_mut(2).zip(r0.iter().zip(r1)) {
        pair[0] = pair[0] + a;
        pair[1] = pair[1] + b;
    }
    for (q, row) in rows.into_iter().enumerate() {
        let at = first + q as isize;
        add_landing(y, row, lands[q].start..both.start, at);
        add_landing(y, row, both.end..lands[q].end, at);
    }
}

/// `y[2i + first] += row[i]` for the `i` in `range` (all landing inside).
#[inline(always)]
unsafe fn add_landing<T: Real>(y: *mut T, row: *const T, range: Range<usize>, first: isize) {
    for i in range {
        let d = y.offset(2 * i as isize + first);
        *d = *d + *row.add(i);
    }
}

/// The transposed convolution, its columns from `weights`: in the ONNX
/// layout ([`Unpacked`], any type) or packed ([`Packed`], f32).
pub(crate) unsafe fn conv_transpose<T: Real, W: Weights<T>>(
    p: *const ConvParams,
    x: *const T,
    weights: W,
    bias: *const T,
    y: *mut T,
    scratch: *mut T,
    parallel: *const Parallel,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(s) = validate_transposed(p) else {
        return STATUS_INVALID_PARAMS;
    };
    if p.packed_weights != W::PACKED as i64 {
        return STATUS_INVALID_PARAMS;
    }
    let (cin, cout) = (p.in_channels as usize, p.out_channels as usize);
    let empty = s.out_size == 0 || s.in_size == 0 || s.m_per_group == 0;
    for n in 0..p.batch as usize {
        for g in 0..p.group as usize {
            let xg = x.add((n * cin + g * s.c_per_group) * s.in_size);
            let yg = y.add((n * cout + g * s.m_per_group) * s.out_size);
            let col = (!empty).then(|| weights.columns(&s, g, xg, scratch, parallel));
            let tasks = col2im_tasks(&s, parallel);
            Parallel::for_each(parallel, tasks, |task| {
                let channels = share(s.m_per_group, tasks, task);
                for c in channels.clone() {
                    let b = if bias.is_null() { T::ZERO } else { *bias.add(g * s.m_per_group + c) };
                    core::slice::from_raw_parts_mut(yg.add(c * s.out_size), s.out_size).fill(b);
                }
                if let Some(col) = col {
                    col2im(p, &s, channels, col, yg);
                }
            });
        }
    }
    STATUS_OK
}

/// Tasks col2im of one group is cut into: ranges of its output channels.
unsafe fn col2im_tasks(s: &ConvShape, parallel: *const Parallel) -> usize {
    let adds = s.m_per_group.saturating_mul(s.taps).saturating_mul(s.in_size);
    match Parallel::is_threaded(parallel) {
        true => (adds / COL2IM_TASK_ADDS).clamp(1, s.m_per_group.clamp(1, COL2IM_TASKS)),
        false => 1,
    }
}

/// Where a group's columns `W_g^T X_g` come from.
pub(crate) trait Weights<T> {
    /// Whether these are the packed weights (`ConvParams::packed_weights`).
    const PACKED: bool;
    /// The columns of group `g` (input `xg`) in `scratch`.
    ///
    /// # Safety
    /// The params' shapes hold for the weights, `xg` and `scratch`.
    unsafe fn columns(
        &self,
        s: &ConvShape,
        g: usize,
        xg: *const T,
        scratch: *mut T,
        parallel: *const Parallel,
    ) -> Columns<T>;
}

/// Weights in the ONNX layout, `[C, M/group, k...]`.
#[derive(Clone, Copy)]
pub(crate) struct Unpacked<T>(pub(crate) *const T);

impl<T: GemmElem> Weights<T> for Unpacked<T> {
    const PACKED: bool = false;
    unsafe fn columns(
        &self,
        s: &ConvShape,
        g: usize,
        xg: *const T,
        scratch: *mut T,
        par: *const Parallel,
    ) -> Columns<T> {
        columns(s, xg, self.0.add(g * s.c_per_group * s.m_per_group * s.taps), scratch, par)
    }
}

/// f32 weights packed by [`pack_conv_transpose_weights_f32`]: the
/// pre-packed gemm on the input as it lies, split over the threads.
#[derive(Clone, Copy)]
pub(crate) struct Packed(pub(crate) *const f32);

impl Weights<f32> for Packed {
    const PACKED: bool = true;
    unsafe fn columns(
        &self,
        s: &ConvShape,
        g: usize,
        xg: *const f32,
        scratch: *mut f32,
        parallel: *const Parallel,
    ) -> Columns<f32> {
        let (rows, positions, k) = (s.m_per_group * s.taps, s.in_size, s.c_per_group);
        let a = self.0.add(g * packed_a_len(rows, k));
        let input = MatRef { ptr: xg, rs: positions as isize, cs: 1 };
        let col = MatMut { ptr: scratch, rs: positions as isize, cs: 1 };
        sgemm_prepacked(rows, positions, k, a, &input, col, &|_: usize, _: usize, _: &mut [f32]| {}, parallel);
        Columns { ptr: scratch, row_stride: positions, position_stride: 1 }
    }
}

/// The gemm runs transposed when the input positions are this many times
/// fewer than the column rows: then the weights are the large operand, and
/// col2im's strided reads of the columns are few. dcgan's 4x4 layer (16
/// positions, 4096 rows) takes 6.3 -> 1.2 ms; its 16x16 layer (256
/// positions, 1024 rows) 1.05 -> 1.5 ms when transposed, so it is not.
/// Packed weights would be read across their rows there too (0.6 -> 0.8 ms
/// on the 4x4 layer), so such params keep them unpacked.
const FEW_POSITIONS: usize = 16;

/// Whether group products of `s` run transposed ([`FEW_POSITIONS`]).
fn few_positions(s: &ConvShape) -> bool {
    s.in_size.saturating_mul(FEW_POSITIONS) <= s.m_per_group * s.taps
}

/// `m`'s transpose (the same elements).
fn transposed<T>(m: MatRef<T>) -> MatRef<T> {
    MatRef { ptr: m.ptr, rs: m.cs, cs: m.rs }
}

/// The columns of one group, `W_g^T X_g` (`W_g` is `[C/group, rows]`, `X_g`
/// `[C/group, in]`), in `scratch`, cut into column ranges over `parallel`.
/// With [`few_positions`] the gemm runs transposed, `X_g^T W_g`, so that
/// the weights, the large operand, are read along their rows.
unsafe fn columns<T: GemmElem>(
    s: &ConvShape,
    xg: *const T,
    wg: *const T,
    scratch: *mut T,
    parallel: *const Parallel,
) -> Columns<T> {
    let (rows, positions, k) = (s.m_per_group * s.taps, s.in_size, s.c_per_group);
    let weights = MatRef { ptr: wg, rs: rows as isize, cs: 1 };
    let input = MatRef { ptr: xg, rs: positions as isize, cs: 1 };
    if few_positions(s) {
        let col = MatMut { ptr: scratch, rs: rows as isize, cs: 1 };
        gemm_by_columns((positions, rows, k), T::ONE, transposed(input), weights, T::ZERO, None, col, parallel);
        return Columns { ptr: scratch, row_stride: 1, position_stride: rows };
    }
    let col = MatMut { ptr: scratch, rs: positions as isize, cs: 1 };
    gemm_by_columns((rows, positions, k), T::ONE, transposed(weights), input, T::ZERO, None, col, parallel);
    Columns { ptr: scratch, row_stride: positions, position_stride: 1 }
}

pub(crate) unsafe fn col2im_kernel<T: Real>(p: *const ConvParams, col: *const T, y: *mut T) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(s) = validate_transposed(p) else {
        return STATUS_INVALID_PARAMS;
    };
    if p.group != 1 || p.in_channels != p.out_channels {
        return STATUS_INVALID_PARAMS;
    }
    let c = p.in_channels as usize;
    let images = p.batch as usize * c;
    for i in 0..images * s.out_size {
        *y.add(i) = T::ZERO;
    }
    if s.out_size == 0 || s.in_size == 0 {
        return STATUS_OK;
    }
    for n in 0..p.batch as usize {
        let col = Columns { ptr: col.add(n * c * s.taps * s.in_size), row_stride: s.in_size, position_stride: 1 };
        col2im(p, &s, 0..c, col, y.add(n * c * s.out_size));
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec, reversed, testable_isas, unravel, with_level};
    use std::vec;
    use std::vec::Vec;

    /// Transposed convolution straight from the definition: every input
    /// element spreads `x * w` over the output.
    fn reference_transposed(p: &ConvParams, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
        let r = p.spatial_rank as usize;
        let ind: Vec<usize> = (0..r).map(|d| p.in_spatial[d] as usize).collect();
        let outd: Vec<usize> = (0..r).map(|d| p.out_spatial[d] as usize).collect();
        let kd: Vec<usize> = (0..r).map(|d| p.kernel[d] as usize).collect();
        let (in_size, out_size, taps) =
            (ind.iter().product::<usize>(), outd.iter().product::<usize>(), kd.iter().product::<usize>());
        let (cin, cout, g) = (p.in_channels as usize, p.out_channels as usize, p.group as usize);
        let (cpg, mpg) = (cin / g, cout / g);
        let mut y = vec![0.0f64; p.batch as usize * cout * out_size];
        for n in 0..p.batch as usize {
            for c in 0..cin {
                let grp = c / cpg;
                for i in 0..in_size {
                    let ic = unravel(i, &ind);
                    for m in 0..mpg {
                        for t in 0..taps {
                            let kc = unravel(t, &kd);
                            let mut off = 0usize;
                            let mut inside = true;
                            for d in 0..r {
                                let pos = (ic[d] * p.strides[d] as usize + kc[d] * p.dilations[d] as usize) as i64
                                    - p.pads_begin[d];
                                if pos < 0 || pos >= outd[d] as i64 {
                                    inside = false;
                                }
                                off = off * outd[d] + pos.max(0) as usize;
                            }
                            if inside {
                                let xv = x[(n * cin + c) * in_size + i] as f64;
                                let wv = w[(c * mpg + m) * taps + t] as f64;
                                y[(n * cout + grp * mpg + m) * out_size + off] += xv * wv;
                            }
                        }
                    }
                }
            }
        }
        let b = bias.map_or(vec![0.0; cout], |b| b.to_vec());
        y.iter().enumerate().map(|(i, &v)| (v + b[(i / out_size) % cout] as f64) as f32).collect()
    }

    #[test]
    fn landing_inside_keeps_the_positions_in_the_output() {
        for (len, out, first, step) in [(5, 9, -3, 2), (4, 3, 1, 1), (6, 20, 0, 3), (3, 2, 5, 1), (7, 5, -9, 2)] {
            let want: Vec<usize> =
                (0..len).filter(|&i| (0..out as isize).contains(&(i as isize * step + first))).collect();
            assert_eq!(landing_inside(len, out, first, step).collect::<Vec<_>>(), want);
        }
    }

    #[test]
    fn conv_transpose_matches_reference() {
        // (input, output, kernel, strides, dilations, pad, group, out channels per group)
        type Case<'a> = (&'a [i64], &'a [i64], &'a [i64], &'a [i64], &'a [i64], i64, i64, i64);
        let cases: [Case; 8] = [
            (&[3, 3], &[5, 5], &[3, 3], &[1, 1], &[1, 1], 0, 1, 2),
            (&[5, 7], &[10, 14], &[2, 2], &[2, 2], &[1, 1], 0, 1, 3),
            (&[4, 5], &[8, 10], &[4, 4], &[2, 2], &[1, 1], 1, 1, 2),
            (&[3, 3], &[9, 9], &[3, 3], &[2, 2], &[1, 1], -1, 1, 1),
            (&[1, 1], &[4, 4], &[4, 4], &[1, 1], &[1, 1], 0, 1, 5),
            (&[3, 4], &[8, 10], &[3, 3], &[3, 2], &[1, 1], 1, 2, 4),
            (&[5], &[13], &[3], &[2], &[2], -1, 1, 1),
            (&[2, 2, 3], &[4, 5, 5], &[2, 2, 2], &[2, 2, 2], &[1, 1, 1], 0, 2, 2),
        ];
        for (ins, outs, k, st, dil, pad, group, mpg) in cases {
            let r = ins.len();
            let cin = 2 * group;
            let mut p = ConvParams {
                batch: 2,
                in_channels: cin,
                out_channels: mpg * group,
                group,
                spatial_rank: r as i64,
                ..Default::default()
            };
            for d in 0..r {
                p.in_spatial[d] = ins[d];
                p.out_spatial[d] = outs[d];
                p.kernel[d] = k[d];
                p.strides[d] = st[d];
                p.dilations[d] = dil[d];
                p.pads_begin[d] = pad;
            }
            let in_n: i64 = ins.iter().product();
            let taps: i64 = k.iter().product();
            let x = rand_vec((2 * cin * in_n) as usize, 1);
            let w = rand_vec((cin * mpg * taps) as usize, 2);
            let bias = rand_vec((mpg * group) as usize, 3);
            let y = run_f32(&p, &x, &w, &bias, &Parallel::SERIAL);
            let want = reference_transposed(&p, &x, &w, Some(&bias));
            assert_close(&y, &want, 1e-4);
            if conv_transpose_takes_packed_weights(&p) {
                assert_close(&run_packed(&p, &x, &w, &bias, &Parallel::SERIAL), &want, 1e-4);
            }
            let wide = |v: &[f32]| v.iter().map(|&v| v as f64).collect::<Vec<_>>();
            let (x64, w64, b64) = (wide(&x), wide(&w), wide(&bias));
            let mut scratch64 = vec![f64::NAN; conv_transpose_scratch_elems(&p)];
            let mut y64 = vec![f64::NAN; y.len()];
            let st = unsafe {
                onnxc_conv_transpose_f64(
                    &p,
                    x64.as_ptr(),
                    w64.as_ptr(),
                    b64.as_ptr(),
                    y64.as_mut_ptr(),
                    scratch64.as_mut_ptr(),
                    core::ptr::null(),
                )
            };
            assert_eq!(st, STATUS_OK);
            assert_close(&y64.iter().map(|&v| v as f32).collect::<Vec<_>>(), &want, 1e-6);
        }
    }

    /// `onnxc_conv_transpose_f32` on weights in the ONNX layout.
    fn run_f32(p: &ConvParams, x: &[f32], w: &[f32], bias: &[f32], parallel: &Parallel) -> Vec<f32> {
        run_kernel(p, x, w, bias, parallel)
    }

    /// `onnxc_conv_transpose_f32` on the weights packed as the compiler
    /// packs a constant.
    fn run_packed(p: &ConvParams, x: &[f32], w: &[f32], bias: &[f32], parallel: &Parallel) -> Vec<f32> {
        let mut packed = vec![f32::NAN; conv_transpose_packed_weights_elems(p)];
        let st = unsafe { onnxc_pack_conv_transpose_weights_f32(p, w.as_ptr(), packed.as_mut_ptr()) };
        assert_eq!(st, STATUS_OK);
        run_kernel(&ConvParams { packed_weights: 1, ..*p }, x, &packed, bias, parallel)
    }

    fn run_kernel(p: &ConvParams, x: &[f32], w: &[f32], bias: &[f32], parallel: &Parallel) -> Vec<f32> {
        let out: i64 = p.out_spatial[..p.spatial_rank as usize].iter().product();
        let mut scratch = vec![f32::NAN; conv_transpose_scratch_elems(p)];
        let mut y = vec![f32::NAN; (p.batch * p.out_channels * out) as usize];
        let st = unsafe {
            onnxc_conv_transpose_f32(
                p,
                x.as_ptr(),
                w.as_ptr(),
                bias.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
                parallel,
            )
        };
        assert_eq!(st, STATUS_OK);
        y
    }

    /// A generator's layer: 4x4 kernel, stride 2, pad 1, two groups, from
    /// `size`² positions.
    fn generator_layer(in_channels: i64, out_channels: i64, size: i64) -> ConvParams {
        let mut p = ConvParams { batch: 2, in_channels, out_channels, group: 2, spatial_rank: 2, ..Default::default() };
        p.in_spatial[..2].fill(size);
        p.out_spatial[..2].fill(2 * size);
        p.kernel[..2].fill(4);
        p.strides[..2].fill(2);
        p.dilations[..2].fill(1);
        p.pads_begin[..2].fill(1);
        p
    }

    /// Generator layers large enough that with threads the gemm (packed,
    /// or plain and transposed for 4x4 positions) and col2im split: the
    /// same bits as serial, at every level.
    #[test]
    fn large_layers_split_over_tasks() {
        let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (p, packed) in [(generator_layer(96, 80, 24), true), (generator_layer(256, 128, 4), false)] {
            assert_eq!(conv_transpose_takes_packed_weights(&p), packed);
            let s = validate_transposed(&p).expect("valid");
            assert!(!packed || unsafe { col2im_tasks(&s, &threaded) } > 1);
            let in_size = (p.in_spatial[0] * p.in_spatial[1]) as usize;
            let x = rand_vec(2 * p.in_channels as usize * in_size, 4);
            let w = rand_vec(p.in_channels as usize * s.m_per_group * 16, 5);
            let bias = rand_vec(p.out_channels as usize, 6);
            let want = reference_transposed(&p, &x, &w, Some(&bias));
            for isa in testable_isas() {
                with_level(isa, || {
                    let run = if packed { run_packed } else { run_f32 };
                    let serial = run(&p, &x, &w, &bias, &Parallel::SERIAL);
                    assert_close(&serial, &want, 1e-4);
                    assert_eq!(bits(&run(&p, &x, &w, &bias, &threaded)), bits(&serial), "{}", isa.name());
                    let plain = run_f32(&p, &x, &w, &bias, &Parallel::SERIAL);
                    assert_eq!(bits(&run_f32(&p, &x, &w, &bias, &threaded)), bits(&plain), "{}", isa.name());
                });
            }
        }
    }
}
