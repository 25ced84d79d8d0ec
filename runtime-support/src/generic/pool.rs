//! MaxPool, AveragePool and LpPool over 0..=6 spatial dims.
//!
//! Follows ONNX semantics (checked against the ONNX reference
//! implementation): the compiler computes `out_spatial` (including
//! `ceil_mode`), so the last windows may run past the input and the end
//! padding. Window taps are `o * stride - pad_begin + k * dilation`.
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

use super::{checked_rank, product, to_usize};
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};

pub const POOL_MAX: i64 = 0;
pub const POOL_AVERAGE: i64 = 1;
pub const POOL_LP: i64 = 2;

/// Parameters of [`onnxc_pool_f32`]; the input is `[batch, channels,
/// in_spatial...]`, the output `[batch, channels, out_spatial...]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PoolParams {
    /// `POOL_MAX`, `POOL_AVERAGE` or `POOL_LP`.
    pub kind: i64,
    pub batch: i64,
    pub channels: i64,
    pub spatial_rank: i64,
    pub in_spatial: [i64; MAX_RANK],
    pub out_spatial: [i64; MAX_RANK],
    pub kernel: [i64; MAX_RANK],
    pub strides: [i64; MAX_RANK],
    pub dilations: [i64; MAX_RANK],
    pub pads_begin: [i64; MAX_RANK],
    pub pads_end: [i64; MAX_RANK],
    pub count_include_pad: i64,
    pub p_norm: f64,
    pub storage_order: i64,
}

/// Largest spatial rank of pool and conv kernels.
pub const MAX_SPATIAL_RANK: usize = MAX_RANK - 2;

fn validate(p: &PoolParams) -> Option<usize> {
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
        });
    ok.then_some(r)
}

/// Pooling; see [`PoolParams`] and the module doc. `indices` may be null and
/// is only written for `POOL_MAX`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_pool_f32(
    p: *const PoolParams,
    x: *const f32,
    y: *mut f32,
    indices: *mut i64,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(r) = validate(p) else {
        return STATUS_INVALID_PARAMS;
    };
    let (Some(in_size), Some(out_size), Some(taps)) = (
        product(&p.in_spatial[..r]),
        product(&p.out_spatial[..r]),
        product(&p.kernel[..r]),
    ) else {
        return STATUS_INVALID_PARAMS;
    };
    let planes = (p.batch * p.channels) as usize;
    if out_size == 0 || planes == 0 {
        return STATUS_OK;
    }
    let in_dims = to_usize(&p.in_spatial);
    let out_dims = to_usize(&p.out_spatial);
    let kdims = to_usize(&p.kernel);
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
    let p_norm = p.p_norm as f32;
    let inv_p = 1.0 / p_norm;

    for plane in 0..planes {
        let xp = x.add(plane * in_size);
        let yp = y.add(plane * out_size);
        let mut o = [0usize; MAX_RANK];
        for out_i in 0..out_size {
            // Window origin per dim.
            let mut start = [0i64; MAX_RANK];
            for d in 0..r {
                start[d] = o[d] as i64 * p.strides[d] - p.pads_begin[d];
            }
            let mut best = f32::NEG_INFINITY;
            let mut best_at: i64 = -1;
            let mut sum = 0.0f32;
            let mut valid = 0usize;
            let mut padded = 0usize;
            let mut k = [0usize; MAX_RANK];
            for _ in 0..taps {
                let mut inside = true;
                let mut in_padded = true;
                let mut off = 0i64;
                let mut idx_off = 0i64;
                for d in 0..r {
                    let pos = start[d] + k[d] as i64 * p.dilations[d];
                    if pos < 0 || pos >= in_dims[d] as i64 {
                        inside = false;
                        if pos < -p.pads_begin[d] || pos >= in_dims[d] as i64 + p.pads_end[d] {
                            in_padded = false;
                        }
                    }
                    off += pos * rm[d];
                    idx_off += pos * index_strides[d];
                }
                if in_padded {
                    padded += 1;
                }
                if inside {
                    let v = *xp.offset(off as isize);
                    valid += 1;
                    match p.kind {
                        POOL_MAX => {
                            if best_at < 0 || v > best {
                                best = v;
                                best_at = idx_off;
                            }
                        }
                        POOL_AVERAGE => sum += v,
                        _ => sum += libm::powf(libm::fabsf(v), p_norm),
                    }
                }
                // Next tap (row-major over the kernel dims).
                for d in (0..r).rev() {
                    k[d] += 1;
                    if k[d] < kdims[d] {
                        break;
                    }
                    k[d] = 0;
                }
            }
            *yp.add(out_i) = match p.kind {
                POOL_MAX => {
                    if !indices.is_null() {
                        let flat = if best_at < 0 {
                            -1
                        } else {
                            (plane * in_size) as i64 + best_at
                        };
                        *indices.add(plane * out_size + out_i) = flat;
                    }
                    best
                }
                POOL_AVERAGE => {
                    let n = if p.count_include_pad != 0 {
                        padded
                    } else {
                        valid
                    };
                    sum / n as f32
                }
                _ => libm::powf(sum, inv_p),
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
