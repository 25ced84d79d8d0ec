//! [`onnxc_normalize`] serves every statistics-based normalisation
//! (InstanceNormalization, LayerNormalization, GroupNormalization,
//! RMSNormalization, MeanVarianceNormalization, LpNormalization): the input
//! is described by its dims and, per dim, a stride into the statistics
//! array (0 on the reduced dims), the scale and the bias (0 where they
//! broadcast), so one odometer walk handles any axis set and any
//! unidirectional broadcast of the affine parameters. Statistics are
//! accumulated in `f64`; elements are f32, f64, f16 or bf16 (ONNX codes).

use super::convert::{is_float_elem, load_float, store_float};
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

/// Does the work of the C entry point [`crate::abi::onnxc_normalize`].
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
    let Some(rank) = checked_rank(p.rank, MAX_RANK, &p.dims) else {
        return STATUS_INVALID_PARAMS;
    };
    let elems_ok = is_float_elem(p.x_elem)
        && is_float_elem(p.scale_elem)
        && is_float_elem(p.bias_elem)
        && is_float_elem(p.stat_elem);
    if !elems_ok || !(NORM_STANDARD..=NORM_L2).contains(&p.mode) || p.stat_count < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let strides_ok = (0..rank).all(|d| p.stat_strides[d] >= 0 && p.scale_strides[d] >= 0 && p.bias_strides[d] >= 0);
    let (Some(total), Some(stat_count)) = (product(&p.dims[..rank]), usize::try_from(p.stat_count).ok()) else {
        return STATUS_INVALID_PARAMS;
    };
    if !strides_ok {
        return STATUS_INVALID_PARAMS;
    }
    if total == 0 {
        return STATUS_OK;
    }
    let dims = to_usize(&p.dims);
    let last_stat: i128 = (0..rank).map(|d| (p.dims[d] - 1) as i128 * p.stat_strides[d] as i128).sum();
    if last_stat >= p.stat_count as i128 {
        return STATUS_INVALID_PARAMS;
    }
    let count = (total / stat_count) as f64;
    let (ss, sc, sb) = (to_isize(&p.stat_strides), to_isize(&p.scale_strides), to_isize(&p.bias_strides));
    let strides = [&ss[..], &sc[..], &sb[..]];
    let shift = scratch;
    let mul = scratch.add(stat_count);
    for i in 0..2 * stat_count {
        *scratch.add(i) = 0.0;
    }
    // Pass 1: sums (of x, x^2 or |x|).
    walk(rank, &dims, strides, |at, o| {
        let v = load_float(x, p.x_elem, at);
        let s = match p.mode {
            NORM_STANDARD | NORM_MVN => v,
            NORM_L1 => v.abs(),
            _ => v * v,
        };
        *shift.offset(o[0]) += s;
    });
    let eps = p.epsilon;
    if matches!(p.mode, NORM_STANDARD | NORM_MVN) {
        for i in 0..stat_count {
            *shift.add(i) /= count;
        }
        // Pass 2: squared deviations, two-pass for accuracy.
        walk(rank, &dims, strides, |at, o| {
            let d = load_float(x, p.x_elem, at) - *shift.offset(o[0]);
            *mul.offset(o[0]) += d * d;
        });
        for i in 0..stat_count {
            let var = *mul.add(i) / count;
            *mul.add(i) = if p.mode == NORM_MVN { 1.0 / (libm::sqrt(var) + eps) } else { 1.0 / libm::sqrt(var + eps) };
        }
    } else {
        for i in 0..stat_count {
            let s = *shift.add(i);
            let norm = match p.mode {
                NORM_RMS => libm::sqrt(s / count + eps),
                NORM_L1 => s,
                _ => libm::sqrt(s),
            };
            *mul.add(i) = if norm == 0.0 && p.mode != NORM_RMS { 0.0 } else { 1.0 / norm };
            *shift.add(i) = 0.0;
        }
    }
    walk(rank, &dims, strides, |at, o| {
        let mut v = (load_float(x, p.x_elem, at) - *shift.offset(o[0])) * *mul.offset(o[0]);
        if !scale.is_null() {
            v *= load_float(scale, p.scale_elem, o[1]);
        }
        if !bias.is_null() {
            v += load_float(bias, p.bias_elem, o[2]);
        }
        store_float(y, p.x_elem, at, v);
    });
    for i in 0..stat_count {
        if !mean_out.is_null() {
            store_float(mean_out, p.stat_elem, i as isize, *shift.add(i));
        }
        if !inv_out.is_null() {
            store_float(inv_out, p.stat_elem, i as isize, *mul.add(i));
        }
    }
    STATUS_OK
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
