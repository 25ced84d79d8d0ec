//! Inference-mode normalisation: BatchNormalization and LRN.
//!
//! BatchNorm folds its four per-channel vectors into one scale and shift
//! before touching the data, so the hot loop is a single multiply-add per
//! element. LRN normalises each element by the sum of squares over a window
//! of neighbouring channels (ONNX: `floor((size-1)/2)` before,
//! `ceil((size-1)/2)` after, clipped to the valid channels).

use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};

/// Parameters of [`onnxc_batchnorm_f32`]; `spatial` is the product of the
/// spatial dims (1 for `[N, C]` inputs).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BatchNormParams {
    pub batch: i64,
    pub channels: i64,
    pub spatial: i64,
    pub epsilon: f64,
}

/// Parameters of [`onnxc_lrn_f32`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LrnParams {
    pub batch: i64,
    pub channels: i64,
    pub spatial: i64,
    pub size: i64,
    pub alpha: f64,
    pub beta: f64,
    pub bias: f64,
}

/// `y = (x - mean) / sqrt(var + epsilon) * scale + bias`, per channel.
/// `y` may alias `x` exactly (in-place).
#[no_mangle]
pub unsafe extern "C" fn onnxc_batchnorm_f32(
    p: *const BatchNormParams,
    x: *const f32,
    scale: *const f32,
    bias: *const f32,
    mean: *const f32,
    var: *const f32,
    y: *mut f32,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.batch < 0 || p.channels < 0 || p.spatial < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (n, c, s) = (p.batch as usize, p.channels as usize, p.spatial as usize);
    for ch in 0..c {
        let a = *scale.add(ch) / libm::sqrtf(*var.add(ch) + p.epsilon as f32);
        let b = *bias.add(ch) - *mean.add(ch) * a;
        for b_i in 0..n {
            let off = (b_i * c + ch) * s;
            for i in off..off + s {
                *y.add(i) = *x.add(i) * a + b;
            }
        }
    }
    STATUS_OK
}

/// Local response normalisation across channels of an `[N, C, spatial]`
/// tensor: `y = x / (bias + alpha / size * sum(x^2 over window))^beta`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_lrn_f32(p: *const LrnParams, x: *const f32, y: *mut f32) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.batch < 0 || p.channels < 0 || p.spatial < 0 || p.size < 1 {
        return STATUS_INVALID_PARAMS;
    }
    let (n, c, s) = (p.batch as usize, p.channels as usize, p.spatial as usize);
    let before = ((p.size - 1) / 2) as usize;
    let after = (p.size as usize - 1) - before;
    let coef = (p.alpha / p.size as f64) as f32;
    let (bias, beta) = (p.bias as f32, p.beta as f32);
    for b_i in 0..n {
        let plane = b_i * c * s;
        for ch in 0..c {
            let lo = ch.saturating_sub(before);
            let hi = (ch + after).min(c - 1);
            for i in 0..s {
                let mut sq = 0.0f32;
                for k in lo..=hi {
                    let v = *x.add(plane + k * s + i);
                    sq += v * v;
                }
                let at = plane + ch * s + i;
                *y.add(at) = *x.add(at) / libm::powf(bias + coef * sq, beta);
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

    #[test]
    fn batchnorm_matches_reference() {
        for &(n, c, s) in &[(1usize, 1usize, 1usize), (2, 3, 5), (3, 4, 1), (1, 7, 33)] {
            let x = rand_vec(n * c * s, 1);
            let scale = rand_vec(c, 2);
            let bias = rand_vec(c, 3);
            let mean = rand_vec(c, 4);
            let var: std::vec::Vec<f32> = rand_vec(c, 5).iter().map(|v| v.abs() + 0.1).collect();
            let p = BatchNormParams { batch: n as i64, channels: c as i64, spatial: s as i64, epsilon: 1e-5 };
            let mut y = vec![0.0f32; x.len()];
            let st = unsafe {
                onnxc_batchnorm_f32(
                    &p,
                    x.as_ptr(),
                    scale.as_ptr(),
                    bias.as_ptr(),
                    mean.as_ptr(),
                    var.as_ptr(),
                    y.as_mut_ptr(),
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
                    }
                }
            }
        }
        let bad = LrnParams { size: 0, ..Default::default() };
        assert_eq!(unsafe { onnxc_lrn_f32(&bad, core::ptr::null(), core::ptr::null_mut()) }, STATUS_INVALID_PARAMS);
    }
}
