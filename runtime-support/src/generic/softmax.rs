//! Softmax, LogSoftmax and Hardmax along one axis.
//!
//! The compiler flattens the tensor to `[outer, axis_len, inner]` around the
//! reduction axis, so one kernel covers every axis; `inner == 1` (the common
//! last-axis case) walks memory contiguously. Softmax subtracts the row
//! maximum before exponentiating so large logits cannot overflow. f32 and
//! f64 share one generic implementation, each computing in its own type.

use super::real::Real;
use crate::abi::softmax::*;
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};

pub(crate) unsafe fn softmax<T: Real>(p: *const SoftmaxParams, x: *const T, y: *mut T) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.outer < 0 || p.axis_len < 0 || p.inner < 0 || !(SOFTMAX..=HARDMAX).contains(&p.kind) {
        return STATUS_INVALID_PARAMS;
    }
    let (outer, len, inner) = (p.outer as usize, p.axis_len as usize, p.inner as usize);
    if len == 0 {
        return STATUS_OK;
    }
    for o in 0..outer {
        for r in 0..inner {
            let base = o * len * inner + r;
            let xs = |i: usize| *x.add(base + i * inner);
            let ys = |i: usize| y.add(base + i * inner);
            let mut max = xs(0);
            let mut arg = 0;
            for i in 1..len {
                if xs(i) > max {
                    max = xs(i);
                    arg = i;
                }
            }
            match p.kind {
                HARDMAX => {
                    for i in 0..len {
                        *ys(i) = if i == arg { T::ONE } else { T::ZERO };
                    }
                }
                SOFTMAX => {
                    let mut sum = T::ZERO;
                    for i in 0..len {
                        let e = (xs(i) - max).exp();
                        *ys(i) = e;
                        sum = sum + e;
                    }
                    let inv = T::ONE / sum;
                    for i in 0..len {
                        *ys(i) = *ys(i) * inv;
                    }
                }
                _ => {
                    let mut sum = T::ZERO;
                    for i in 0..len {
                        sum = sum + (xs(i) - max).exp();
                    }
                    // (x - max) first: exact for nearby values, unlike x - (max + log sum).
                    let log_sum = sum.ln();
                    for i in 0..len {
                        *ys(i) = (xs(i) - max) - log_sum;
                    }
                }
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

    fn reference(x: &[f32], outer: usize, len: usize, inner: usize, kind: i64) -> Vec<f32> {
        let mut y = vec![0.0f32; x.len()];
        for o in 0..outer {
            for r in 0..inner {
                let at = |i: usize| o * len * inner + i * inner + r;
                let vals: Vec<f64> = (0..len).map(|i| x[at(i)] as f64).collect();
                let m = vals.iter().cloned().fold(f64::MIN, f64::max);
                let s: f64 = vals.iter().map(|v| (v - m).exp()).sum();
                let first = vals.iter().position(|&v| v == m).unwrap();
                for i in 0..len {
                    y[at(i)] = match kind {
                        SOFTMAX => ((vals[i] - m).exp() / s) as f32,
                        LOG_SOFTMAX => (vals[i] - m - s.ln()) as f32,
                        _ => (i == first) as i32 as f32,
                    };
                }
            }
        }
        y
    }

    #[test]
    fn matches_reference() {
        for &(outer, len, inner) in &[(1, 1, 1), (3, 7, 1), (2, 5, 3), (1, 1000, 1), (4, 3, 17)] {
            for kind in [SOFTMAX, LOG_SOFTMAX, HARDMAX] {
                let mut x = rand_vec(outer * len * inner, 5);
                x.iter_mut().for_each(|v| *v *= 50.0);
                if len > 2 {
                    x[inner] = x[0]; // tie between positions 0 and 1 of the first row
                    x[0] = 1e3;
                    x[inner] = 1e3;
                }
                let want = reference(&x, outer, len, inner, kind);
                let mut got = vec![0.0f32; x.len()];
                let p = SoftmaxParams { outer: outer as i64, axis_len: len as i64, inner: inner as i64, kind };
                assert_eq!(unsafe { onnxc_softmax_f32(&p, x.as_ptr(), got.as_mut_ptr()) }, STATUS_OK);
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{g} vs {w}");
                }
            }
        }
        // f64 runs the same code in f64.
        let x: Vec<f64> = rand_vec(12, 9).iter().map(|&v| v as f64 * 30.0).collect();
        let p = SoftmaxParams { outer: 3, axis_len: 4, inner: 1, kind: SOFTMAX };
        let mut got = vec![0.0f64; 12];
        assert_eq!(unsafe { onnxc_softmax_f64(&p, x.as_ptr(), got.as_mut_ptr()) }, STATUS_OK);
        for row in 0..3 {
            let xs = &x[row * 4..row * 4 + 4];
            let m = xs.iter().cloned().fold(f64::MIN, f64::max);
            let s: f64 = xs.iter().map(|v| (v - m).exp()).sum();
            for i in 0..4 {
                assert!((got[row * 4 + i] - (xs[i] - m).exp() / s).abs() < 1e-15);
            }
        }
        let bad = SoftmaxParams { kind: 3, ..Default::default() };
        assert_eq!(unsafe { onnxc_softmax_f32(&bad, core::ptr::null(), core::ptr::null_mut()) }, STATUS_INVALID_PARAMS);
    }
}
