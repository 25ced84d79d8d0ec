//! Convolution (ONNX Conv) as im2col + gemm.
//!
//! For each image and group the kernel lays the receptive fields out as the
//! columns of a `[C/group * prod(kernel), prod(out_spatial)]` matrix in the
//! caller-provided scratch buffer (padding reads as 0), then one gemm with
//! the group's weights `[M/group, C/group * prod(kernel)]` produces the
//! group's output channels, the bias riding along as a broadcast C operand.
//! Pointwise convolutions (all kernel dims 1, stride 1, no padding) skip
//! im2col and multiply the input directly. This trades scratch memory for
//! reusing the blocked gemm; a direct/Winograd path can come later.

use super::gemm::{sgemm, MatMut, MatRef};
use super::pool::MAX_SPATIAL_RANK;
use super::{checked_rank, product, to_usize};
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};

/// Parameters of [`onnxc_conv_f32`]: input `[batch, in_channels,
/// in_spatial...]`, weights `[out_channels, in_channels/group, kernel...]`,
/// output `[batch, out_channels, out_spatial...]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ConvParams {
    pub batch: i64,
    pub in_channels: i64,
    pub out_channels: i64,
    pub group: i64,
    /// 1..=6.
    pub spatial_rank: i64,
    pub in_spatial: [i64; MAX_RANK],
    pub out_spatial: [i64; MAX_RANK],
    pub kernel: [i64; MAX_RANK],
    pub strides: [i64; MAX_RANK],
    pub dilations: [i64; MAX_RANK],
    pub pads_begin: [i64; MAX_RANK],
}

/// Sizes derived from validated params.
struct ConvShape {
    rank: usize,
    c_per_group: usize,
    m_per_group: usize,
    in_size: usize,
    out_size: usize,
    taps: usize,
    pointwise: bool,
}

fn validate(p: &ConvParams) -> Option<ConvShape> {
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
    let dims_ok = (0..rank).all(|d| {
        p.out_spatial[d] >= 0 && p.kernel[d] >= 1 && p.strides[d] >= 1 && p.dilations[d] >= 1
    });
    if !dims_ok {
        return None;
    }
    let pointwise = (0..rank)
        .all(|d| p.kernel[d] == 1 && p.strides[d] == 1 && p.pads_begin[d] == 0)
        && p.in_spatial[..rank] == p.out_spatial[..rank];
    Some(ConvShape {
        rank,
        c_per_group: (p.in_channels / p.group) as usize,
        m_per_group: (p.out_channels / p.group) as usize,
        in_size: product(&p.in_spatial[..rank])?,
        out_size: product(&p.out_spatial[..rank])?,
        taps: product(&p.kernel[..rank])?,
        pointwise,
    })
}

/// Number of `f32` scratch elements [`onnxc_conv_f32`] needs for these
/// params (0 for pointwise convolutions and invalid params).
pub fn conv_scratch_elems(p: &ConvParams) -> usize {
    match validate(p) {
        Some(s) if !s.pointwise => s.c_per_group * s.taps * s.out_size,
        _ => 0,
    }
}

/// Writes the im2col matrix of one group of one image into `col`.
unsafe fn im2col(p: &ConvParams, s: &ConvShape, x: *const f32, col: *mut f32) {
    let r = s.rank;
    let in_dims = to_usize(&p.in_spatial);
    let out_dims = to_usize(&p.out_spatial);
    let kdims = to_usize(&p.kernel);
    let mut in_strides = [0isize; MAX_RANK];
    let mut st = 1isize;
    for d in (0..r).rev() {
        in_strides[d] = st;
        st *= in_dims[d] as isize;
    }
    let last = r - 1;
    let (s_last, dil_last, pad_last) = (
        p.strides[last] as isize,
        p.dilations[last] as isize,
        p.pads_begin[last] as isize,
    );
    let in_last = in_dims[last] as isize;
    let mut row = col;
    for c in 0..s.c_per_group {
        let xc = x.add(c * s.in_size);
        let mut k = [0usize; MAX_RANK];
        for _ in 0..s.taps {
            // One row: this (channel, tap) over every output position. Walk
            // the outer output dims explicitly and the last one in a tight loop.
            let mut o = [0usize; MAX_RANK];
            let mut dst = row;
            for _ in 0..s.out_size / out_dims[last] {
                let mut base = 0isize;
                let mut inside = true;
                for d in 0..last {
                    let pos = o[d] as isize * p.strides[d] as isize - p.pads_begin[d] as isize
                        + k[d] as isize * p.dilations[d] as isize;
                    if pos < 0 || pos >= in_dims[d] as isize {
                        inside = false;
                    }
                    base += pos * in_strides[d];
                }
                let first = k[last] as isize * dil_last - pad_last;
                for ol in 0..out_dims[last] {
                    let pos = ol as isize * s_last + first;
                    *dst.add(ol) = if inside && pos >= 0 && pos < in_last {
                        *xc.offset(base + pos)
                    } else {
                        0.0
                    };
                }
                dst = dst.add(out_dims[last]);
                // Next position over the outer output dims (row-major).
                for d in (0..last).rev() {
                    o[d] += 1;
                    if o[d] < out_dims[d] {
                        break;
                    }
                    o[d] = 0;
                }
            }
            row = row.add(s.out_size);
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

/// Convolution; see [`ConvParams`]. `bias` may be null; `scratch` must hold
/// [`conv_scratch_elems`] floats (it may be null when that is 0).
#[no_mangle]
pub unsafe extern "C" fn onnxc_conv_f32(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(s) = validate(p) else {
        return STATUS_INVALID_PARAMS;
    };
    if s.out_size == 0 || s.m_per_group == 0 {
        return STATUS_OK;
    }
    let kdim = s.c_per_group * s.taps;
    let groups = p.group as usize;
    let (cin, cout) = (p.in_channels as usize, p.out_channels as usize);
    for n in 0..p.batch as usize {
        for g in 0..groups {
            let xg = x.add((n * cin + g * s.c_per_group) * s.in_size);
            let b = if s.pointwise {
                MatRef {
                    ptr: xg,
                    rs: s.in_size as isize,
                    cs: 1,
                }
            } else {
                im2col(p, &s, xg, scratch);
                MatRef {
                    ptr: scratch,
                    rs: s.out_size as isize,
                    cs: 1,
                }
            };
            let a = MatRef {
                ptr: w.add(g * s.m_per_group * kdim),
                rs: kdim as isize,
                cs: 1,
            };
            let c = (!bias.is_null()).then(|| MatRef {
                ptr: bias.add(g * s.m_per_group),
                rs: 1,
                cs: 0,
            });
            let out = MatMut {
                ptr: y.add((n * cout + g * s.m_per_group) * s.out_size),
                rs: s.out_size as isize,
                cs: 1,
            };
            sgemm(s.m_per_group, s.out_size, kdim, 1.0, a, b, 1.0, c, out);
        }
    }
    STATUS_OK
}
