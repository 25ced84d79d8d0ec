//! [`onnxc_normalize`] serves every statistics-based normalisation
//! (InstanceNormalization, LayerNormalization, GroupNormalization,
//! RMSNormalization, MeanVarianceNormalization, LpNormalization): the input
//! is described by its dims and, per dim, a stride into the statistics
//! array (0 on the reduced dims), the scale and the bias (0 where they
//! broadcast), so one odometer walk handles any axis set and any
//! unidirectional broadcast of the affine parameters. Statistics are
//! accumulated in `f64`; elements are f32, f64, f16 or bf16 (ONNX codes).

use super::convert::{is_float_elem, load_float, store_float};
use super::real::Real;
use super::{advance, checked_rank, product, to_isize, to_usize};
use crate::abi::norm::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};

/// Bytes of scratch [`onnxc_normalize`] needs.
pub fn normalize_scratch_bytes(p: &NormParams) -> usize {
    16 * p.stat_count.max(0) as usize
}

/// Calls `f(x_offset, [stat, scale, bias] offsets)` for every element in
/// row-major order.
unsafe fn walk(rank: usize, dims: &[usize], strides: [&[isize]; 3], mut f: impl FnMut(isize, [isize; 3])) {
    if dims[..rank].contains(&0) {
        return;
    }
    let mut idx = [0usize; MAX_RANK];
    let mut offs = [0isize; 3];
    let mut at = 0isize;
    loop {
        f(at, offs);
        at += 1;
        if !advance(
            &mut idx[..rank],
            &dims[..rank],
            [&strides[0][..rank], &strides[1][..rank], &strides[2][..rank]],
            &mut offs,
        ) {
            break;
        }
    }
}

/// The tensors of one [`crate::abi::onnxc_normalize`] call (`scale`,
/// `bias`, `mean_out` and `inv_out` may be null).
pub(crate) struct NormTensors {
    pub x: *const u8,
    pub scale: *const u8,
    pub bias: *const u8,
    pub y: *mut u8,
    pub mean_out: *mut u8,
    pub inv_out: *mut u8,
}

impl NormTensors {
    /// Writes statistics group `i`'s shift and factor to the optional
    /// outputs.
    pub(crate) unsafe fn store_stats(&self, p: &NormParams, i: usize, shift: f64, factor: f64) {
        if !self.mean_out.is_null() {
            store_float(self.mean_out, p.stat_elem, i as isize, shift);
        }
        if !self.inv_out.is_null() {
            store_float(self.inv_out, p.stat_elem, i as isize, factor);
        }
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_normalize`]:
/// the contiguous path where the layout fits it, else the odometer walk.
#[allow(clippy::too_many_arguments)] // one pointer per tensor
pub(crate) unsafe fn normalize(
    p: *const NormParams,
    x: *const u8,
    scale: *const u8,
    bias: *const u8,
    y: *mut u8,
    mean_out: *mut u8,
    inv_out: *mut u8,
    scratch: *mut f64,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some((rank, total)) = checked(p) else {
        return STATUS_INVALID_PARAMS;
    };
    let t = NormTensors { x, scale, bias, y, mean_out, inv_out };
    if total > 0 && !super::normalize_contiguous::normalize(p, rank, &t) {
        walk_normalize(p, rank, total, &t, scratch);
    }
    STATUS_OK
}

/// The rank and element count of valid params: known modes and element
/// types, nonnegative strides, and statistics strides within `stat_count`.
fn checked(p: &NormParams) -> Option<(usize, usize)> {
    let rank = checked_rank(p.rank, MAX_RANK, &p.dims)?;
    let elems_ok = [p.x_elem, p.scale_elem, p.bias_elem, p.stat_elem].into_iter().all(is_float_elem);
    let strides_ok = (0..rank).all(|d| p.stat_strides[d] >= 0 && p.scale_strides[d] >= 0 && p.bias_strides[d] >= 0);
    if !elems_ok || !strides_ok || !(NORM_STANDARD..=NORM_L2).contains(&p.mode) || p.stat_count < 0 {
        return None;
    }
    let total = product(&p.dims[..rank])?;
    let last_stat: i128 = (0..rank).map(|d| (p.dims[d] - 1) as i128 * p.stat_strides[d] as i128).sum();
    (total == 0 || last_stat < p.stat_count as i128).then_some((rank, total))
}

/// What multiplies `x - mean` in the modes with a mean (standard, MVN),
/// from the population variance.
pub(crate) fn deviation_factor(mode: i64, var: f64, eps: f64) -> f64 {
    if mode == NORM_MVN {
        1.0 / (libm::sqrt(var) + eps)
    } else {
        1.0 / libm::sqrt(var + eps)
    }
}

/// What multiplies `x` in the modes without a mean (RMS, L1, L2), from the
/// sum of [`size_term`] over `count` elements; 0 for a zero L1 or L2 norm.
pub(crate) fn size_factor(mode: i64, sum: f64, count: f64, eps: f64) -> f64 {
    let norm = match mode {
        NORM_RMS => libm::sqrt(sum / count + eps),
        NORM_L1 => sum,
        _ => libm::sqrt(sum),
    };
    if norm == 0.0 && mode != NORM_RMS {
        0.0
    } else {
        1.0 / norm
    }
}

/// The term the modes without a mean sum: `|v|` for L1, `v^2` otherwise.
#[inline(always)]
pub(crate) fn size_term<T: Real>(mode: i64, v: T) -> T {
    if mode == NORM_L1 {
        v.abs()
    } else {
        v * v
    }
}

/// The general path: statistics by odometer walks in f64, then the affine.
pub(crate) unsafe fn walk_normalize(p: &NormParams, rank: usize, total: usize, t: &NormTensors, scratch: *mut f64) {
    let stat_count = p.stat_count as usize;
    let dims = to_usize(&p.dims);
    let (ss, sc, sb) = (to_isize(&p.stat_strides), to_isize(&p.scale_strides), to_isize(&p.bias_strides));
    let strides = [&ss[..], &sc[..], &sb[..]];
    let (shift, mul) = (scratch, scratch.add(stat_count));
    walk_statistics(p, rank, (total / stat_count) as f64, strides, t.x, [shift, mul]);
    walk(rank, &dims, strides, |at, o| {
        let mut v = (load_float(t.x, p.x_elem, at) - *shift.offset(o[0])) * *mul.offset(o[0]);
        if !t.scale.is_null() {
            v *= load_float(t.scale, p.scale_elem, o[1]);
        }
        if !t.bias.is_null() {
            v += load_float(t.bias, p.bias_elem, o[2]);
        }
        store_float(t.y, p.x_elem, at, v);
    });
    for i in 0..stat_count {
        t.store_stats(p, i, *shift.add(i), *mul.add(i));
    }
}

/// Each statistics group's shift (its mean, or 0) into `shift` and factor
/// into `mul`, from sums over `count` elements in f64 (two passes for the
/// variance).
unsafe fn walk_statistics(
    p: &NormParams,
    rank: usize,
    count: f64,
    strides: [&[isize]; 3],
    x: *const u8,
    [shift, mul]: [*mut f64; 2],
) {
    let stat_count = p.stat_count as usize;
    let dims = to_usize(&p.dims);
    for i in 0..2 * stat_count {
        *shift.add(i) = 0.0;
    }
    let with_mean = matches!(p.mode, NORM_STANDARD | NORM_MVN);
    walk(rank, &dims, strides, |at, o| {
        let v = load_float(x, p.x_elem, at);
        *shift.offset(o[0]) += if with_mean { v } else { size_term(p.mode, v) };
    });
    if with_mean {
        for i in 0..stat_count {
            *shift.add(i) /= count;
        }
        walk(rank, &dims, strides, |at, o| {
            let d = load_float(x, p.x_elem, at) - *shift.offset(o[0]);
            *mul.offset(o[0]) += d * d;
        });
        for i in 0..stat_count {
            *mul.add(i) = deviation_factor(p.mode, *mul.add(i) / count, p.epsilon);
        }
    } else {
        for i in 0..stat_count {
            *mul.add(i) = size_factor(p.mode, *shift.add(i), count, p.epsilon);
            *shift.add(i) = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::ELEM_F32;
    use crate::generic::test_util::rand_vec;
    use std::vec;

    /// Layer norm over the last axis of [2, 3, 4] with scale [4], bias [4].
    #[test]
    fn normalize_layer_and_group() {
        let x = rand_vec(24, 11);
        let scale = rand_vec(4, 12);
        let bias = rand_vec(4, 13);
        let mut p = NormParams {
            mode: NORM_STANDARD,
            rank: 3,
            stat_count: 6,
            x_elem: ELEM_F32,
            scale_elem: ELEM_F32,
            bias_elem: ELEM_F32,
            stat_elem: ELEM_F32,
            epsilon: 1e-5,
            ..Default::default()
        };
        p.dims[..3].copy_from_slice(&[2, 3, 4]);
        p.stat_strides[..3].copy_from_slice(&[3, 1, 0]);
        p.scale_strides[..3].copy_from_slice(&[0, 0, 1]);
        p.bias_strides[..3].copy_from_slice(&[0, 0, 1]);
        let mut y = vec![0.0f32; 24];
        let (mut mean, mut inv) = (vec![0.0f32; 6], vec![0.0f32; 6]);
        let mut scratch = vec![0.0f64; 16];
        let st = unsafe {
            onnxc_normalize(
                &p,
                x.as_ptr() as *const u8,
                scale.as_ptr() as *const u8,
                bias.as_ptr() as *const u8,
                y.as_mut_ptr() as *mut u8,
                mean.as_mut_ptr() as *mut u8,
                inv.as_mut_ptr() as *mut u8,
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(st, STATUS_OK);
        for r in 0..6 {
            let row = &x[r * 4..r * 4 + 4];
            let m = row.iter().map(|&v| v as f64).sum::<f64>() / 4.0;
            let var = row.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / 4.0;
            let is = 1.0 / (var + 1e-5).sqrt();
            assert!((mean[r] as f64 - m).abs() < 1e-6 && (inv[r] as f64 - is).abs() < 1e-4);
            for j in 0..4 {
                let want = (row[j] as f64 - m) * is * scale[j] as f64 + bias[j] as f64;
                assert!((y[r * 4 + j] as f64 - want).abs() < 1e-5);
            }
        }
        // L2 over the middle axis, no affine; an all-zero column gives 0.
        let mut x2 = x.clone();
        for r in 0..3 {
            x2[r * 4] = 0.0;
        }
        p.mode = NORM_L2;
        p.stat_count = 8;
        p.stat_strides[..3].copy_from_slice(&[4, 0, 1]);
        let st = unsafe {
            let n = core::ptr::null_mut();
            onnxc_normalize(&p, x2.as_ptr() as *const u8, n, n, y.as_mut_ptr() as *mut u8, n, n, scratch.as_mut_ptr())
        };
        assert_eq!(st, STATUS_OK);
        for b in 0..2 {
            for j in 0..4 {
                let at = |c: usize| b * 12 + c * 4 + j;
                let norm = (0..3).map(|c| (x2[at(c)] as f64).powi(2)).sum::<f64>().sqrt();
                for c in 0..3 {
                    let want = if norm == 0.0 { 0.0 } else { x2[at(c)] as f64 / norm };
                    assert!((y[at(c)] as f64 - want).abs() < 1e-6);
                }
            }
        }
        p.stat_count = 7; // too small for the strides
        let n = core::ptr::null_mut();
        let st = unsafe { onnxc_normalize(&p, n, n, n, n, n, n, core::ptr::null_mut()) };
        assert_eq!(st, STATUS_INVALID_PARAMS);
    }
}
