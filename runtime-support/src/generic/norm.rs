//! Normalisation: BatchNormalization, LRN, and the statistics-based family.
//!
//! BatchNorm folds its four per-channel vectors into one scale and shift
//! before touching the data, so the hot loop is a single multiply-add per
//! element. In training mode the mean and (population) variance come from
//! the batch itself, and the running statistics are updated with the
//! momentum. LRN normalises each element by the sum of squares over a window
//! of neighbouring channels (ONNX: `floor((size-1)/2)` before,
//! `ceil((size-1)/2)` after, clipped to the valid channels). Both come for
//! f32 and f64 from one generic implementation each.
//!
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

/// Mean and population variance of channel `ch` over the batch (in f64).
unsafe fn batch_stats<T: Real>(x: *const T, (n, c, s): (usize, usize, usize), ch: usize) -> (f64, f64) {
    let values = || (0..n).flat_map(move |b| (0..s).map(move |i| (*x.add((b * c + ch) * s + i)).to_f64()));
    let count = (n * s) as f64;
    let mean = values().sum::<f64>() / count;
    let var = values().map(|v| (v - mean) * (v - mean)).sum::<f64>() / count;
    (mean, var)
}

pub(crate) unsafe fn batchnorm<T: Real>(
    p: *const BatchNormParams,
    x: *const T,
    [scale, bias, mean, var]: [*const T; 4],
    y: *mut T,
    running: [*mut T; 2],
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.batch < 0 || p.channels < 0 || p.spatial < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (n, c, s) = (p.batch as usize, p.channels as usize, p.spatial as usize);
    for ch in 0..c {
        let (m, v) = if p.training != 0 {
            let (m, v) = batch_stats(x, (n, c, s), ch);
            let keep = p.momentum;
            for (out, (input, batch)) in running.into_iter().zip([(mean, m), (var, v)]) {
                if !out.is_null() {
                    *out.add(ch) = T::from_f64((*input.add(ch)).to_f64() * keep + batch * (1.0 - keep));
                }
            }
            (T::from_f64(m), T::from_f64(v))
        } else {
            (*mean.add(ch), *var.add(ch))
        };
        let a = *scale.add(ch) / (v + T::from_f64(p.epsilon)).sqrt();
        let b = *bias.add(ch) - m * a;
        for b_i in 0..n {
            let off = (b_i * c + ch) * s;
            for i in off..off + s {
                *y.add(i) = *x.add(i) * a + b;
            }
        }
    }
    STATUS_OK
}

pub(crate) unsafe fn lrn<T: Real>(p: *const LrnParams, x: *const T, y: *mut T) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.batch < 0 || p.channels < 0 || p.spatial < 0 || p.size < 1 {
        return STATUS_INVALID_PARAMS;
    }
    let (n, c, s) = (p.batch as usize, p.channels as usize, p.spatial as usize);
    let before = ((p.size - 1) / 2) as usize;
    let after = (p.size as usize - 1) - before;
    let coef = T::from_f64(p.alpha / p.size as f64);
    let (bias, beta) = (T::from_f64(p.bias), T::from_f64(p.beta));
    for b_i in 0..n {
        let plane = b_i * c * s;
        for ch in 0..c {
            let lo = ch.saturating_sub(before);
            let hi = (ch + after).min(c - 1);
            for i in 0..s {
                let mut sq = T::ZERO;
                for k in lo..=hi {
                    let v = *x.add(plane + k * s + i);
                    sq = sq + v * v;
                }
                let at = plane + ch * s + i;
                *y.add(at) = *x.add(at) / (bias + coef * sq).powf(beta);
            }
        }
    }
    STATUS_OK
}

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
    use std::vec::Vec;

    #[test]
    fn batchnorm_matches_reference() {
        for &(n, c, s) in &[(1usize, 1usize, 1usize), (2, 3, 5), (3, 4, 1), (1, 7, 33)] {
            let x = rand_vec(n * c * s, 1);
            let scale = rand_vec(c, 2);
            let bias = rand_vec(c, 3);
            let mean = rand_vec(c, 4);
            let var: std::vec::Vec<f32> = rand_vec(c, 5).iter().map(|v| v.abs() + 0.1).collect();
            let p = BatchNormParams {
                batch: n as i64,
                channels: c as i64,
                spatial: s as i64,
                epsilon: 1e-5,
                ..Default::default()
            };
            let mut y = vec![0.0f32; x.len()];
            let st = unsafe {
                let null = core::ptr::null_mut();
                onnxc_batchnorm_f32(
                    &p,
                    x.as_ptr(),
                    scale.as_ptr(),
                    bias.as_ptr(),
                    mean.as_ptr(),
                    var.as_ptr(),
                    y.as_mut_ptr(),
                    null,
                    null,
                )
            };
            assert_eq!(st, STATUS_OK);
            for b in 0..n {
                for ch in 0..c {
                    for i in 0..s {
                        let at = (b * c + ch) * s + i;
                        let want = ((x[at] as f64 - mean[ch] as f64) / (var[ch] as f64 + 1e-5).sqrt()
                            * scale[ch] as f64
                            + bias[ch] as f64) as f32;
                        assert!((y[at] - want).abs() < 1e-5, "{} vs {want}", y[at]);
                    }
                }
            }
        }
    }

    /// Training mode in f64: batch statistics, then the momentum update.
    #[test]
    fn batchnorm_training_uses_batch_statistics() {
        let (n, c, s) = (2usize, 3usize, 4usize);
        let x: Vec<f64> = rand_vec(n * c * s, 21).iter().map(|&v| v as f64 * 3.0).collect();
        let scale = [0.5, 1.0, 2.0];
        let bias = [0.1, -0.2, 0.3];
        let (mean, var) = ([0.0, 1.0, -1.0], [1.0, 2.0, 0.5]);
        let p = BatchNormParams { batch: 2, channels: 3, spatial: 4, epsilon: 1e-5, training: 1, momentum: 0.9 };
        let mut y = vec![0.0f64; x.len()];
        let (mut run_mean, mut run_var) = ([0.0f64; 3], [0.0f64; 3]);
        let st = unsafe {
            onnxc_batchnorm_f64(
                &p,
                x.as_ptr(),
                scale.as_ptr(),
                bias.as_ptr(),
                mean.as_ptr(),
                var.as_ptr(),
                y.as_mut_ptr(),
                run_mean.as_mut_ptr(),
                run_var.as_mut_ptr(),
            )
        };
        assert_eq!(st, STATUS_OK);
        for ch in 0..c {
            let vals: Vec<f64> =
                (0..n).flat_map(|b| (0..s).map(move |i| (b * c + ch) * s + i)).map(|at| x[at]).collect();
            let m = vals.iter().sum::<f64>() / vals.len() as f64;
            let v = vals.iter().map(|x| (x - m).powi(2)).sum::<f64>() / vals.len() as f64;
            assert!((run_mean[ch] - (mean[ch] * 0.9 + m * 0.1)).abs() < 1e-12);
            assert!((run_var[ch] - (var[ch] * 0.9 + v * 0.1)).abs() < 1e-12);
            for b in 0..n {
                for i in 0..s {
                    let at = (b * c + ch) * s + i;
                    let want = (x[at] - m) / (v + 1e-5).sqrt() * scale[ch] + bias[ch];
                    assert!((y[at] - want).abs() < 1e-12);
                }
            }
        }
    }

    #[test]
    fn lrn_matches_reference() {
        for &(n, c, s, size) in &[(1usize, 1usize, 1usize, 1i64), (2, 5, 3, 3), (1, 6, 4, 4), (2, 3, 2, 7)] {
            let x = rand_vec(n * c * s, 7);
            let p = LrnParams {
                batch: n as i64,
                channels: c as i64,
                spatial: s as i64,
                size,
                alpha: 1e-2,
                beta: 0.75,
                bias: 1.5,
            };
            let mut y = vec![0.0f32; x.len()];
            assert_eq!(unsafe { onnxc_lrn_f32(&p, x.as_ptr(), y.as_mut_ptr()) }, STATUS_OK);
            let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let mut y64 = vec![0.0f64; x.len()];
            assert_eq!(unsafe { onnxc_lrn_f64(&p, x64.as_ptr(), y64.as_mut_ptr()) }, STATUS_OK);
            let c1 = ((size - 1) as f64 / 2.0).floor() as i64;
            let c2 = ((size - 1) as f64 / 2.0).ceil() as i64;
            for b in 0..n {
                for ch in 0..c as i64 {
                    for i in 0..s {
                        let mut sq = 0.0f64;
                        for k in (ch - c1).max(0)..=(ch + c2).min(c as i64 - 1) {
                            let v = x[(b * c + k as usize) * s + i] as f64;
                            sq += v * v;
                        }
                        let at = (b * c + ch as usize) * s + i;
                        let want = x[at] as f64 / (1.5 + 1e-2 / size as f64 * sq).powf(0.75);
                        assert!((y[at] as f64 - want).abs() < 1e-5);
                        assert!((y64[at] - want).abs() < 1e-12);
                    }
                }
            }
        }
        let bad = LrnParams { size: 0, ..Default::default() };
        assert_eq!(unsafe { onnxc_lrn_f32(&bad, core::ptr::null(), core::ptr::null_mut()) }, STATUS_INVALID_PARAMS);
    }

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
