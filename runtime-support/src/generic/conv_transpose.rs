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
//! bounds test and, for unit strides, vectorises.
//!
//! Every kernel is generic over the compute type; f32 and f64 are exported
//! (the gemm is the SIMD one for f32, the portable blocked one for f64).

use super::conv::ConvShape;
use super::gemm::{GemmElem, MatMut, MatRef};
use super::pool::{window_fits, MAX_SPATIAL_RANK};
use super::real::Real;
use super::{checked_rank, product, to_usize};
use crate::abi::conv::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};
use core::ops::Range;

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
#[derive(Clone, Copy)]
struct Columns<T> {
    ptr: *const T,
    row_stride: usize,
    position_stride: usize,
}

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

/// Scatter-adds `channels` column blocks (row `c * taps + tap` of `col`,
/// over the grid positions) into the images `y[c][out position]`: grid
/// position `i` and tap `k` land on `i * stride + k * dilation - pad_begin`
/// in every dim, if that is inside.
unsafe fn col2im<T: Real>(p: &ConvParams, s: &ConvShape, channels: usize, col: Columns<T>, y: *mut T) {
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
    for c in 0..channels {
        let yc = y.add(c * s.out_size);
        let mut k = [0usize; MAX_RANK];
        for tap in 0..s.taps {
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
                if inside {
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

pub(crate) unsafe fn conv_transpose<T: GemmElem>(
    p: *const ConvParams,
    x: *const T,
    w: *const T,
    bias: *const T,
    y: *mut T,
    scratch: *mut T,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(s) = validate_transposed(p) else {
        return STATUS_INVALID_PARAMS;
    };
    let (cin, cout) = (p.in_channels as usize, p.out_channels as usize);
    let batch = p.batch as usize;
    for i in 0..batch * cout {
        let b = if bias.is_null() { T::ZERO } else { *bias.add(i % cout) };
        for j in 0..s.out_size {
            *y.add(i * s.out_size + j) = b;
        }
    }
    if s.out_size == 0 || s.in_size == 0 || s.m_per_group == 0 {
        return STATUS_OK;
    }
    for n in 0..batch {
        for g in 0..p.group as usize {
            let xg = x.add((n * cin + g * s.c_per_group) * s.in_size);
            let col = columns(&s, xg, w.add(g * s.c_per_group * s.m_per_group * s.taps), scratch);
            let yg = y.add((n * cout + g * s.m_per_group) * s.out_size);
            col2im(p, &s, s.m_per_group, col, yg);
        }
    }
    STATUS_OK
}

/// The gemm runs transposed when the input positions are this many times
/// fewer than the column rows: then the weights are the large operand, and
/// col2im's strided reads of the columns are few. dcgan's 4x4 layer (16
/// positions, 4096 rows) takes 6.3 -> 1.2 ms; its 16x16 layer (256
/// positions, 1024 rows) 1.05 -> 1.5 ms when transposed, so it is not.
const FEW_POSITIONS: usize = 16;

/// `m`'s transpose (the same elements).
fn transposed<T>(m: MatRef<T>) -> MatRef<T> {
    MatRef { ptr: m.ptr, rs: m.cs, cs: m.rs }
}

/// The columns of one group, `W_g^T X_g` (`W_g` is `[C/group, rows]`, `X_g`
/// `[C/group, in]`), in `scratch`. With [`FEW_POSITIONS`] the gemm runs
/// transposed, `X_g^T W_g`, so that the weights, the large operand, are
/// read along their rows.
unsafe fn columns<T: GemmElem>(s: &ConvShape, xg: *const T, wg: *const T, scratch: *mut T) -> Columns<T> {
    let (rows, positions, k) = (s.m_per_group * s.taps, s.in_size, s.c_per_group);
    let weights = MatRef { ptr: wg, rs: rows as isize, cs: 1 };
    let input = MatRef { ptr: xg, rs: positions as isize, cs: 1 };
    if positions.saturating_mul(FEW_POSITIONS) <= rows {
        let col = MatMut { ptr: scratch, rs: rows as isize, cs: 1 };
        T::gemm(positions, rows, k, T::ONE, transposed(input), weights, T::ZERO, None, col);
        return Columns { ptr: scratch, row_stride: 1, position_stride: rows };
    }
    let col = MatMut { ptr: scratch, rs: positions as isize, cs: 1 };
    T::gemm(rows, positions, k, T::ONE, transposed(weights), input, T::ZERO, None, col);
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
        col2im(p, &s, c, col, y.add(n * c * s.out_size));
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
            let out_n: i64 = outs.iter().product();
            let taps: i64 = k.iter().product();
            let x = rand_vec((2 * cin * in_n) as usize, 1);
            let w = rand_vec((cin * mpg * taps) as usize, 2);
            let bias = rand_vec((mpg * group) as usize, 3);
            let mut scratch = vec![f32::NAN; conv_transpose_scratch_elems(&p)];
            let mut y = vec![f32::NAN; (2 * mpg * group * out_n) as usize];
            let st = unsafe {
                onnxc_conv_transpose_f32(
                    &p,
                    x.as_ptr(),
                    w.as_ptr(),
                    bias.as_ptr(),
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            assert_eq!(st, STATUS_OK);
            let want = reference_transposed(&p, &x, &w, Some(&bias));
            assert_close(&y, &want, 1e-4);
            let wide = |v: &[f32]| v.iter().map(|&v| v as f64).collect::<Vec<_>>();
            let (x64, w64, b64) = (wide(&x), wide(&w), wide(&bias));
            let mut scratch64 = vec![f64::NAN; scratch.len()];
            let mut y64 = vec![f64::NAN; y.len()];
            let st = unsafe {
                onnxc_conv_transpose_f64(
                    &p,
                    x64.as_ptr(),
                    w64.as_ptr(),
                    b64.as_ptr(),
                    y64.as_mut_ptr(),
                    scratch64.as_mut_ptr(),
                )
            };
            assert_eq!(st, STATUS_OK);
            assert_close(&y64.iter().map(|&v| v as f32).collect::<Vec<_>>(), &want, 1e-6);
        }
    }
}
