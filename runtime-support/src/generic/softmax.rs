//! Softmax, LogSoftmax and Hardmax along one axis.
//!
//! The compiler flattens the tensor to `[outer, axis_len, inner]` around the
//! reduction axis, so one kernel covers every axis; `inner == 1` (the common
//! last-axis case) walks memory contiguously. Softmax subtracts the row
//! maximum before exponentiating so large logits cannot overflow. f32 and
//! f64 share one generic implementation, each computing in its own type;
//! f32 Softmax and LogSoftmax along a contiguous axis (`inner == 1`: the
//! attention scores, a vocabulary) take [`softmax_rows`] instead, whose
//! exp is the vector math of [`super::vector_math`] (partial sums per
//! lane, so the rounding of a row's sum follows the vector width).

use super::real::Real;
use super::vector_math::{exp, MathLanes};
use crate::abi::softmax::*;
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};
use core::ops::Range;

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

/// [`softmax`] for f32: rows of Softmax or LogSoftmax through
/// [`softmax_rows`] with the CPU's vectors, the rest as [`softmax`].
///
/// # Safety
/// As [`crate::abi::onnxc_softmax_f32`].
pub(crate) unsafe fn softmax_f32(p: *const SoftmaxParams, x: *const f32, y: *mut f32) -> i32 {
    match p.as_ref() {
        Some(q) if q.inner == 1 && q.outer >= 0 && q.axis_len > 0 && matches!(q.kind, SOFTMAX | LOG_SOFTMAX) => {
            let (outer, len) = (q.outer as usize, q.axis_len as usize);
            crate::isa::choose::softmax_rows(crate::isa::Isa::best(), x, y, outer, len, q.kind == LOG_SOFTMAX);
            STATUS_OK
        }
        _ => softmax(p, x, y),
    }
}

/// Softmax (or, with `log`, LogSoftmax) of each of the `rows` rows of `len`
/// (at least 1) f32 at `x` into `y`, in vectors `V`. The last `len %
/// V::LANES` of a row run as one more vector, padded with `-inf` (whose
/// `e^(x - max)` is 0): one lane at a time, the five of an attention row of
/// 197 took a third of its time. Every lane computes the same function, and
/// the tail's terms are summed in order, so the bits are those the
/// lane-by-lane tail gave.
///
/// # Safety
/// `x` and `y` hold `rows * len` floats; `V`'s instructions are supported.
#[inline(always)]
pub(crate) unsafe fn softmax_rows<V: MathLanes>(x: *const f32, y: *mut f32, rows: usize, len: usize, log: bool) {
    let body = len - len % V::LANES;
    let tail = len - body;
    for r in 0..rows {
        let (x, y) = (x.add(r * len), y.add(r * len));
        let mut x_tail = [f32::NEG_INFINITY; 16];
        x_tail[..tail].copy_from_slice(core::slice::from_raw_parts(x.add(body), tail));
        let max = row_max::<V>(x, body, &x_tail);
        let mut y_tail = [0f32; 16];
        let tail_terms = lanes_of(exp_term::<V>(x_tail.as_ptr(), y_tail.as_mut_ptr(), 0, max, !log));
        let sum = exp_sum::<V>(x, y, 0..body, max, !log) + tail_terms[..tail].iter().sum::<f32>();
        let (log_sum, inverse) = if log { (libm::logf(sum), 0.0) } else { (0.0, 1.0 / sum) };
        let source = if log { x } else { y };
        for i in (0..body).step_by(V::LANES) {
            V::store(y.add(i), finish(V::load(source.add(i)), log, max, log_sum, inverse));
        }
        if tail > 0 {
            let source = if log { x_tail.as_ptr() } else { y_tail.as_ptr() };
            V::store(y_tail.as_mut_ptr(), finish(V::load(source), log, max, log_sum, inverse));
            core::ptr::copy_nonoverlapping(y_tail.as_ptr(), y.add(body), tail);
        }
    }
}

/// LogSoftmax's `(x - max) - ln sum` (`x - max` first: exact for values
/// near the maximum), or Softmax's `e * (1 / sum)`.
#[inline(always)]
unsafe fn finish<V: MathLanes>(v: V, log: bool, max: f32, log_sum: f32, inverse: f32) -> V {
    if log {
        V::sub(V::sub(v, V::splat(max)), V::splat(log_sum))
    } else {
        V::mul(v, V::splat(inverse))
    }
}

/// Independent maxima and partial sums the row loops keep in flight: with
/// one, each vector waited for the last one's `max` or `add` (the scores'
/// rows of 128 are only 16 vectors).
const CHAINS: usize = 4;

/// The largest of the `body` floats at `x` (a whole number of vectors)
/// and of `tail` (NaNs skipped, as [`softmax`] does after the first
/// element).
#[inline(always)]
unsafe fn row_max<V: MathLanes>(x: *const f32, body: usize, tail: &[f32]) -> f32 {
    let mut m = [V::splat(f32::NEG_INFINITY); CHAINS];
    let step = V::LANES * CHAINS;
    for i in (0..body - body % step).step_by(step) {
        for (c, chain) in m.iter_mut().enumerate() {
            *chain = V::max(V::load(x.add(i + c * V::LANES)), *chain);
        }
    }
    for i in (body - body % step..body).step_by(V::LANES) {
        m[0] = V::max(V::load(x.add(i)), m[0]);
    }
    let lanes = lanes_of(V::max(V::max(m[0], m[1]), V::max(m[2], m[3])));
    lanes[..V::LANES].iter().chain(tail).fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a })
}

/// The sum of `e^(x - max)` over the elements `range` of the row, in
/// steps of `V::LANES`, each stored to `y` when `store`.
#[inline(always)]
unsafe fn exp_sum<V: MathLanes>(x: *const f32, y: *mut f32, range: Range<usize>, max: f32, store: bool) -> f32 {
    let mut s = [V::splat(0.0); CHAINS];
    let step = V::LANES * CHAINS;
    let chained = range.start + (range.len() - range.len() % step);
    for i in (range.start..chained).step_by(step) {
        for (c, sum) in s.iter_mut().enumerate() {
            *sum = V::add(*sum, exp_term::<V>(x, y, i + c * V::LANES, max, store));
        }
    }
    for i in (chained..range.end).step_by(V::LANES) {
        s[0] = V::add(s[0], exp_term::<V>(x, y, i, max, store));
    }
    lanes_of(V::add(V::add(s[0], s[1]), V::add(s[2], s[3])))[..V::LANES].iter().sum()
}

/// `e^(x - max)` of the vector at element `i`, stored to `y` when `store`.
#[inline(always)]
unsafe fn exp_term<V: MathLanes>(x: *const f32, y: *mut f32, i: usize, max: f32, store: bool) -> V {
    let e = exp(V::sub(V::load(x.add(i)), V::splat(max)));
    if store {
        V::store(y.add(i), e);
    }
    e
}

/// The lanes of `v` (the first `V::LANES` of the array).
#[inline(always)]
unsafe fn lanes_of<V: MathLanes>(v: V) -> [f32; 16] {
    let mut lanes = [0f32; 16];
    V::store(lanes.as_mut_ptr(), v);
    lanes
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{rand_vec, testable_isas, with_level};
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

    /// A row's last elements (past its whole vectors) take part in the
    /// maximum and the sum: rows with the maximum and a `-inf` among them.
    #[test]
    fn row_tails_count_at_every_level() {
        for level in testable_isas() {
            with_level(level, || {
                for len in [17, 21, 197, 203] {
                    let mut x: Vec<f32> = rand_vec(2 * len, 3).iter().map(|v| v * 10.0).collect();
                    x[len - 1] = 40.0;
                    x[2 * len - 2] = f32::NEG_INFINITY;
                    for kind in [SOFTMAX, LOG_SOFTMAX] {
                        let want = reference(&x, 2, len, 1, kind);
                        let mut got = vec![0.0f32; x.len()];
                        let p = SoftmaxParams { outer: 2, axis_len: len as i64, inner: 1, kind };
                        assert_eq!(unsafe { onnxc_softmax_f32(&p, x.as_ptr(), got.as_mut_ptr()) }, STATUS_OK);
                        for (g, w) in got.iter().zip(&want) {
                            let close = g == w || (g - w).abs() <= 1e-5 * (1.0 + w.abs());
                            assert!(close, "{} len {len}: {g} vs {w}", level.name());
                        }
                    }
                }
            });
        }
    }

    #[test]
    fn matches_reference_at_every_level() {
        for level in testable_isas() {
            with_level(level, matches_reference);
        }
    }

    fn matches_reference() {
        let shapes = [(1, 1, 1), (3, 7, 1), (2, 5, 3), (1, 1000, 1), (4, 3, 17), (2, 16, 1), (3, 17, 1), (2, 31, 1)];
        for &(outer, len, inner) in &shapes {
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
