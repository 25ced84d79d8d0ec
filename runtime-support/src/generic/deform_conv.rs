//! DeformConv: a convolution whose sampling positions move.
//!
//! The same im2col + gemm shape as Conv (`conv.rs`), except that each column
//! entry is read at the tap's position plus a learned offset (one per image,
//! offset group, tap, spatial dim and output position) by multilinear
//! interpolation, with zero outside the input, and scaled by the optional
//! mask. The gemm with the group's weights then sums over channels and taps
//! with the bias riding along, so only the column builder is new. Any
//! spatial rank; f32 and f64 share one generic implementation.

use super::conv::{validate, ConvShape};
use super::gemm::{GemmElem, MatMut, MatRef};
use super::real::Real;
use super::to_usize;
use crate::abi::deform_conv::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};

/// Number of scratch elements (of the kernel's type) the column matrix of
/// one group takes (0 for invalid params).
pub fn deform_conv_scratch_elems(p: &DeformConvParams) -> usize {
    validate(&p.conv).map_or(0, |s| s.c_per_group * s.taps * s.out_size)
}

/// One channel image `x` (row-major over `dims`) at the real position `pos`:
/// the multilinear blend of the `2^rank` surrounding pixels, those outside
/// the image counting as 0.
unsafe fn sample<T: Real>(x: *const T, dims: &[usize], pos: &[T]) -> T {
    let r = dims.len();
    let mut lo = [0i64; MAX_RANK];
    let mut frac = [T::ZERO; MAX_RANK];
    for d in 0..r {
        let f = pos[d].floor();
        lo[d] = f.to_f64() as i64;
        frac[d] = pos[d] - f;
    }
    let mut acc = T::ZERO;
    'corners: for corner in 0..1usize << r {
        let mut weight = T::ONE;
        let mut at = 0usize;
        for d in 0..r {
            let up = (corner >> d) & 1 == 1;
            let i = lo[d].saturating_add(up as i64);
            if i < 0 || i >= dims[d] as i64 {
                continue 'corners;
            }
            weight = weight * if up { frac[d] } else { T::ONE - frac[d] };
            at = at * dims[d] + i as usize;
        }
        acc = acc + weight * *x.add(at);
    }
    acc
}

/// Advances the row-major multi-index `idx` over `dims` (wrapping to 0).
fn next(idx: &mut [usize], dims: &[usize]) {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        if idx[d] < dims[d] {
            return;
        }
        idx[d] = 0;
    }
}

/// The deformed column matrix `[c_per_group * taps, out_size]` of one group
/// of one image: `x` is the group's first channel, `first_channel` its index
/// in the image, `offset`/`mask` the image's (`mask` nullable).
#[allow(clippy::too_many_arguments)]
unsafe fn deform_im2col<T: Real>(
    p: &DeformConvParams,
    s: &ConvShape,
    x: *const T,
    first_channel: usize,
    per_offset_group: usize,
    offset: *const T,
    mask: *const T,
    col: *mut T,
) {
    let c = &p.conv;
    let r = s.rank;
    let (in_dims, out_dims, kdims) = (to_usize(&c.in_spatial), to_usize(&c.out_spatial), to_usize(&c.kernel));
    let mut row = col;
    for ch in 0..s.c_per_group {
        let og = (first_channel + ch) / per_offset_group;
        let xc = x.add(ch * s.in_size);
        let mut k = [0usize; MAX_RANK];
        for tap in 0..s.taps {
            let ot = og * s.taps + tap;
            let mut o = [0usize; MAX_RANK];
            for at in 0..s.out_size {
                let mut pos = [T::ZERO; MAX_RANK];
                for d in 0..r {
                    let base = o[d] as i64 * c.strides[d] - c.pads_begin[d] + k[d] as i64 * c.dilations[d];
                    pos[d] = T::from_f64(base as f64) + *offset.add((ot * r + d) * s.out_size + at);
                }
                let m = if mask.is_null() { T::ONE } else { *mask.add(ot * s.out_size + at) };
                *row.add(at) = m * sample(xc, &in_dims[..r], &pos[..r]);
                next(&mut o[..r], &out_dims[..r]);
            }
            row = row.add(s.out_size);
            next(&mut k[..r], &kdims[..r]);
        }
    }
}

pub(crate) unsafe fn deform_conv<T: GemmElem>(
    p: *const DeformConvParams,
    [x, w, offset, bias, mask]: [*const T; 5],
    y: *mut T,
    scratch: *mut T,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(s) = validate(&p.conv) else {
        return STATUS_INVALID_PARAMS;
    };
    let c = &p.conv;
    if p.offset_group < 1 || c.in_channels % p.offset_group != 0 {
        return STATUS_INVALID_PARAMS;
    }
    if s.out_size == 0 || s.m_per_group == 0 {
        return STATUS_OK;
    }
    let (cin, cout, groups) = (c.in_channels as usize, c.out_channels as usize, c.group as usize);
    let og = p.offset_group as usize;
    let kdim = s.c_per_group * s.taps;
    for n in 0..c.batch as usize {
        let offset_n = offset.add(n * og * s.taps * s.rank * s.out_size);
        let mask_n = if mask.is_null() { mask } else { mask.add(n * og * s.taps * s.out_size) };
        for g in 0..groups {
            let first = g * s.c_per_group;
            let xg = x.add((n * cin + first) * s.in_size);
            deform_im2col(p, &s, xg, first, cin / og, offset_n, mask_n, scratch);
            let a = MatRef { ptr: w.add(g * s.m_per_group * kdim), rs: kdim as isize, cs: 1 };
            let b = MatRef { ptr: scratch as *const T, rs: s.out_size as isize, cs: 1 };
            let bias_g = (!bias.is_null()).then(|| MatRef { ptr: bias.add(g * s.m_per_group), rs: 1, cs: 0 });
            let out =
                MatMut { ptr: y.add((n * cout + g * s.m_per_group) * s.out_size), rs: s.out_size as isize, cs: 1 };
            T::gemm(s.m_per_group, s.out_size, kdim, T::ONE, a, b, T::ONE, bias_g, out);
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::conv::ConvParams;
    use crate::generic::test_util::rand_vec;
    use std::vec;
    use std::vec::Vec;

    /// Straight from the definition (2-D): per output pixel, channel and
    /// tap, a bilinear sample at the shifted position, masked, weighted.
    fn reference(p: &DeformConvParams, x: &[f64], w: &[f64], off: &[f64], b: &[f64], mask: &[f64]) -> Vec<f64> {
        let c = &p.conv;
        let (n, cin, cout, g) = (c.batch as usize, c.in_channels as usize, c.out_channels as usize, c.group as usize);
        let (ih, iw, oh, ow) = (c.in_spatial[0], c.in_spatial[1], c.out_spatial[0] as usize, c.out_spatial[1] as usize);
        let (kh, kw) = (c.kernel[0] as usize, c.kernel[1] as usize);
        let (cpg, mpg, og) = (cin / g, cout / g, p.offset_group as usize);
        let pixel = |b: usize, ch: usize, h: i64, v: i64| -> f64 {
            if h < 0 || v < 0 || h >= ih || v >= iw {
                0.0
            } else {
                x[((b * cin + ch) * ih as usize + h as usize) * iw as usize + v as usize]
            }
        };
        let mut y = vec![0.0; n * cout * oh * ow];
        for bi in 0..n {
            for m in 0..cout {
                for i in 0..oh {
                    for j in 0..ow {
                        let mut acc = b[m];
                        for cc in 0..cpg {
                            let ch = (m / mpg) * cpg + cc;
                            let grp = ch / (cin / og);
                            for ki in 0..kh {
                                for kj in 0..kw {
                                    let tap = (grp * kh + ki) * kw + kj;
                                    let o = |d: usize| off[(((bi * og * kh * kw + tap) * 2 + d) * oh + i) * ow + j];
                                    let h = (i as i64 * c.strides[0] - c.pads_begin[0] + ki as i64 * c.dilations[0])
                                        as f64
                                        + o(0);
                                    let v = (j as i64 * c.strides[1] - c.pads_begin[1] + kj as i64 * c.dilations[1])
                                        as f64
                                        + o(1);
                                    let (h0, v0) = (h.floor(), v.floor());
                                    let (fh, fv) = (h - h0, v - v0);
                                    let (h0, v0) = (h0 as i64, v0 as i64);
                                    let s = pixel(bi, ch, h0, v0) * (1.0 - fh) * (1.0 - fv)
                                        + pixel(bi, ch, h0, v0 + 1) * (1.0 - fh) * fv
                                        + pixel(bi, ch, h0 + 1, v0) * fh * (1.0 - fv)
                                        + pixel(bi, ch, h0 + 1, v0 + 1) * fh * fv;
                                    let mk = mask[((bi * og * kh * kw + tap) * oh + i) * ow + j];
                                    acc += s * mk * w[((m * cpg + cc) * kh + ki) * kw + kj];
                                }
                            }
                        }
                        y[((bi * cout + m) * oh + i) * ow + j] = acc;
                    }
                }
            }
        }
        y
    }

    #[test]
    fn matches_reference_with_groups_offsets_and_mask() {
        // 2 images, 4 input channels in 2 groups and 2 offset groups, 3x3
        // kernel with padding, stride 2 and dilation 1 on a 6x5 input.
        let mut conv =
            ConvParams { batch: 2, in_channels: 4, out_channels: 6, group: 2, spatial_rank: 2, ..Default::default() };
        conv.in_spatial[..2].copy_from_slice(&[6, 5]);
        conv.out_spatial[..2].copy_from_slice(&[3, 3]);
        conv.kernel[..2].copy_from_slice(&[3, 3]);
        conv.strides[..2].copy_from_slice(&[2, 2]);
        conv.dilations[..2].copy_from_slice(&[1, 1]);
        conv.pads_begin[..2].copy_from_slice(&[1, 1]);
        let p = DeformConvParams { conv, offset_group: 2 };
        let wide = |len: usize, seed: u64, scale: f64| -> Vec<f64> {
            rand_vec(len, seed).iter().map(|&v| v as f64 * scale).collect()
        };
        let x = wide(2 * 4 * 30, 1, 1.0);
        let w = wide(6 * 2 * 9, 2, 1.0);
        let off = wide(2 * 2 * 9 * 2 * 9, 3, 2.5); // some samples fall outside
        let b = wide(6, 4, 1.0);
        let mask = wide(2 * 2 * 9 * 9, 5, 1.0);
        let want = reference(&p, &x, &w, &off, &b, &mask);
        let mut scratch = vec![f64::NAN; deform_conv_scratch_elems(&p)];
        let mut y = vec![f64::NAN; want.len()];
        let st = unsafe {
            let ptrs = [x.as_ptr(), w.as_ptr(), off.as_ptr(), b.as_ptr(), mask.as_ptr()];
            deform_conv(&p, ptrs, y.as_mut_ptr(), scratch.as_mut_ptr())
        };
        assert_eq!(st, STATUS_OK);
        for (g, w) in y.iter().zip(&want) {
            assert!((g - w).abs() < 1e-12, "{g} vs {w}");
        }
        // f32, no mask (all ones) and no bias (zeros).
        let ones = vec![1.0; mask.len()];
        let want = reference(&p, &x, &w, &off, &[0.0; 6], &ones);
        let narrow = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<f32>>();
        let (x32, w32, off32) = (narrow(&x), narrow(&w), narrow(&off));
        let mut scratch = vec![f32::NAN; deform_conv_scratch_elems(&p)];
        let mut y = vec![f32::NAN; want.len()];
        let null = core::ptr::null();
        let st = unsafe {
            onnxc_deform_conv_f32(
                &p,
                x32.as_ptr(),
                w32.as_ptr(),
                off32.as_ptr(),
                null,
                null,
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(st, STATUS_OK);
        for (g, w) in y.iter().zip(&want) {
            assert!((*g as f64 - w).abs() < 1e-4 * (1.0 + w.abs()), "{g} vs {w}");
        }
        let bad = DeformConvParams { offset_group: 3, ..p };
        let st = unsafe {
            onnxc_deform_conv_f32(&bad, null, null, null, null, null, core::ptr::null_mut(), core::ptr::null_mut())
        };
        assert_eq!(st, STATUS_INVALID_PARAMS);
    }
}
