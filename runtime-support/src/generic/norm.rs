//! Normalisation: BatchNormalization and LRN.
//!
//! BatchNorm folds its four per-channel vectors into one scale and shift
//! before touching the data, so the hot loop is a single multiply-add per
//! element. In training mode the mean and (population) variance come from
//! the batch itself, and the running statistics are updated with the
//! momentum. LRN normalises each element by the sum of squares over a window
//! of neighbouring channels (ONNX: `floor((size-1)/2)` before,
//! `ceil((size-1)/2)` after, clipped to the valid channels). Both come for
//! f32 and f64 from one generic implementation each. The statistics-based
//! normalisations are in [`super::normalize`].

use super::real::Real;
use crate::abi::norm::*;
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};

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

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
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
}
