//! Negative log-likelihood loss over `[N, C, D]` (SoftmaxCrossEntropyLoss is
//! a log-softmax along C followed by this kernel).
//!
//! `loss[n, d] = -w[t] * x[n, t, d]` with `t = target[n, d]`; a target equal
//! to `ignore_index` contributes 0 and has weight 0. Reductions: none (one
//! value per `[n, d]`), sum, or mean (`sum / sum of weights of the counted
//! elements`). A target outside `[0, C)` that is not ignored returns
//! `STATUS_INDEX_OUT_OF_RANGE`. Sums are accumulated in f64; f32 and f64
//! share one generic implementation.

use super::real::Real;
use crate::abi::loss::*;
use crate::abi::{STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS, STATUS_OK};

pub(crate) unsafe fn nll_loss<T: Real>(
    p: *const NllLossParams,
    x: *const T,
    target: *const u8,
    weight: *const T,
    loss: *mut T,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.n < 0 || p.c < 0 || p.d < 0 || !(REDUCTION_NONE..=REDUCTION_MEAN).contains(&p.reduction) {
        return STATUS_INVALID_PARAMS;
    }
    let (n, c, d) = (p.n as usize, p.c as usize, p.d as usize);
    let (mut sum, mut wsum) = (0.0f64, 0.0f64);
    for i in 0..n {
        for j in 0..d {
            let k = i * d + j;
            let t = if p.target_i32 != 0 { *target.cast::<i32>().add(k) as i64 } else { *target.cast::<i64>().add(k) };
            let (value, w) = if p.has_ignore != 0 && t == p.ignore_index {
                (T::ZERO, T::ZERO)
            } else {
                if t < 0 || t as usize >= c {
                    return STATUS_INDEX_OUT_OF_RANGE;
                }
                let t = t as usize;
                let w = if weight.is_null() { T::ONE } else { *weight.add(t) };
                (-*x.add((i * c + t) * d + j) * w, w)
            };
            if p.reduction == REDUCTION_NONE {
                *loss.add(k) = value;
            } else {
                sum += value.to_f64();
                wsum += w.to_f64();
            }
        }
    }
    match p.reduction {
        REDUCTION_SUM => *loss = T::from_f64(sum),
        REDUCTION_MEAN => *loss = T::from_f64(sum / wsum),
        _ => {}
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec};
    use std::vec;
    use std::vec::Vec;

    fn reference(x: &[f32], t: &[i64], w: Option<&[f32]>, n: usize, c: usize, d: usize, ii: Option<i64>) -> Vec<f64> {
        let mut out = vec![];
        for i in 0..n {
            for j in 0..d {
                let tv = t[i * d + j];
                if Some(tv) == ii {
                    out.push(0.0);
                    continue;
                }
                let wv = w.map_or(1.0, |w| w[tv as usize]) as f64;
                out.push(-(x[(i * c + tv as usize) * d + j] as f64) * wv);
            }
        }
        out
    }

    #[test]
    fn matches_reference() {
        let (n, c, d) = (3, 5, 4);
        let x = rand_vec(n * c * d, 1);
        let t: Vec<i64> = (0..n * d).map(|k| (k * 7 % c) as i64).collect();
        let w = rand_vec(c, 2);
        for weight in [None, Some(&w[..])] {
            for ii in [None, Some(2)] {
                let want = reference(&x, &t, weight, n, c, d, ii);
                let wptr = weight.map_or(core::ptr::null(), |w| w.as_ptr());
                let mut p = NllLossParams {
                    n: n as i64,
                    c: c as i64,
                    d: d as i64,
                    has_ignore: ii.is_some() as i64,
                    ignore_index: ii.unwrap_or(0),
                    ..Default::default()
                };
                let mut got = vec![0.0f32; n * d];
                let tp = t.as_ptr().cast::<u8>();
                assert_eq!(unsafe { onnxc_nll_loss_f32(&p, x.as_ptr(), tp, wptr, got.as_mut_ptr()) }, STATUS_OK);
                let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
                assert_close(&got, &want32, 1e-6);
                p.reduction = REDUCTION_MEAN;
                assert_eq!(unsafe { onnxc_nll_loss_f32(&p, x.as_ptr(), tp, wptr, got.as_mut_ptr()) }, STATUS_OK);
                let wsum: f64 = t
                    .iter()
                    .filter(|&&tv| Some(tv) != ii)
                    .map(|&tv| weight.map_or(1.0, |w| w[tv as usize]) as f64)
                    .sum();
                assert_close(&got[..1], &[(want.iter().sum::<f64>() / wsum) as f32], 1e-5);
                // f64 runs the same code in f64.
                let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                let w64: Option<Vec<f64>> = weight.map(|w| w.iter().map(|&v| v as f64).collect());
                let w64p = w64.as_ref().map_or(core::ptr::null(), |w| w.as_ptr());
                let mut got64 = [0.0f64];
                assert_eq!(unsafe { onnxc_nll_loss_f64(&p, x64.as_ptr(), tp, w64p, got64.as_mut_ptr()) }, STATUS_OK);
                assert!((got64[0] - want.iter().sum::<f64>() / wsum).abs() < 1e-12);
            }
        }
        let bad: Vec<i64> = vec![5; n * d];
        let p = NllLossParams { n: n as i64, c: c as i64, d: d as i64, ..Default::default() };
        let mut got = vec![0.0f32; n * d];
        let r = unsafe { onnxc_nll_loss_f32(&p, x.as_ptr(), bad.as_ptr().cast(), core::ptr::null(), got.as_mut_ptr()) };
        assert_eq!(r, STATUS_INDEX_OUT_OF_RANGE);
    }
}
