//! Signal processing: DFT (forward, inverse, one-sided, inverse real) along
//! one axis, and STFT (framed, windowed one-dimensional DFT).
//!
//! Both kernels compute in `f64` and use a naive `O(n^2)` transform over a
//! table of twiddle factors the caller provides room for in scratch
//! (`2 * dft_length` doubles), so any `dft_length` works (not only powers of
//! two) without allocating. Complex values are stored as `[re, im]` pairs;
//! a real signal has a trailing dim of 1.

use crate::abi::signal::*;
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};
use crate::generic::real::Real;

/// Fills `tw[2j], tw[2j+1]` with `cos, sin` of `2 pi j / n` for `j < n`
/// (public for the compiler's portable transforms, which need the same table).
///
/// # Safety
/// `tw` holds `2 n` doubles.
pub unsafe fn twiddles(n: usize, tw: *mut f64) {
    for j in 0..n {
        let a = 2.0 * core::f64::consts::PI * j as f64 / n as f64;
        *tw.add(2 * j) = libm::cos(a);
        *tw.add(2 * j + 1) = libm::sin(a);
    }
}

/// Bin `k` of the transform of length `n` of the `len` samples `at(t)`
/// (zero beyond `len`): `sum_t x[t] e^{sign 2 pi i k t / n}`.
#[inline]
unsafe fn dft_bin(
    n: usize,
    len: usize,
    k: usize,
    sign: f64,
    tw: *const f64,
    at: impl Fn(usize) -> (f64, f64),
) -> (f64, f64) {
    let (mut re, mut im) = (0.0, 0.0);
    let mut j = 0usize; // (k * t) mod n
    for t in 0..len.min(n) {
        let (c, s) = (*tw.add(2 * j), sign * *tw.add(2 * j + 1));
        let (xr, xi) = at(t);
        re += xr * c - xi * s;
        im += xr * s + xi * c;
        j += k;
        if j >= n {
            j -= n;
        }
    }
    (re, im)
}

pub(crate) unsafe fn dft<T: Real>(p: *const DftParams, x: *const T, y: *mut T, scratch: *mut f64) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let dims = [p.outer, p.in_len, p.inner, p.n, p.out_len];
    if dims.iter().any(|&d| d < 0) || p.n == 0 && p.out_len != 0 {
        return STATUS_INVALID_PARAMS;
    }
    let [outer, in_len, inner, n, out_len] = dims.map(|d| d as usize);
    let real_out = p.inverse != 0 && p.real_output != 0;
    if out_len > n || (real_out && out_len != n) {
        return STATUS_INVALID_PARAMS;
    }
    if outer * inner * out_len == 0 {
        return STATUS_OK;
    }
    twiddles(n, scratch);
    let ci = if p.in_complex != 0 { 2 } else { 1 };
    let co = if real_out { 1 } else { 2 };
    let sign = if p.inverse != 0 { 1.0 } else { -1.0 };
    let scale = if p.inverse != 0 { 1.0 / n as f64 } else { 1.0 };
    for o in 0..outer {
        for r in 0..inner {
            let at = |t: usize| {
                let e = x.add(((o * in_len + t) * inner + r) * ci);
                let im = if ci == 2 { (*e.add(1)).to_f64() } else { 0.0 };
                ((*e).to_f64(), im)
            };
            let out = |k: usize| y.add(((o * out_len + k) * inner + r) * co);
            if real_out {
                // Hermitian extension of the one-sided bins: bin k (0 < k < n/2)
                // also stands for bin n-k, so Re(sum) counts it twice.
                let bins = in_len.min(n / 2 + 1);
                for t in 0..n {
                    let mut sum = 0.0;
                    let mut j = 0usize; // (k * t) mod n
                    for k in 0..bins {
                        let (xr, xi) = at(k);
                        let v = xr * *scratch.add(2 * j) - xi * *scratch.add(2 * j + 1);
                        let twice = k != 0 && 2 * k != n;
                        sum += if twice { 2.0 * v } else { v };
                        j += t;
                        if j >= n {
                            j %= n;
                        }
                    }
                    *out(t) = T::from_f64(sum * scale);
                }
            } else {
                for k in 0..out_len {
                    let (re, im) = dft_bin(n, in_len, k, sign, scratch, at);
                    let e = out(k);
                    *e = T::from_f64(re * scale);
                    *e.add(1) = T::from_f64(im * scale);
                }
            }
        }
    }
    STATUS_OK
}

pub(crate) unsafe fn stft<T: Real>(
    p: *const StftParams,
    x: *const T,
    window: *const T,
    y: *mut T,
    scratch: *mut f64,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let dims = [p.batch, p.signal_len, p.frame_step, p.frame_length, p.frames, p.bins];
    if dims.iter().any(|&d| d < 0) {
        return STATUS_INVALID_PARAMS;
    }
    let [batch, signal_len, step, n, frames, bins] = dims.map(|d| d as usize);
    let last_start = frames.saturating_sub(1) * step;
    if bins > n || (frames > 0 && last_start + n > signal_len) {
        return STATUS_INVALID_PARAMS;
    }
    if batch * frames * bins == 0 {
        return STATUS_OK;
    }
    twiddles(n, scratch);
    let ci = if p.in_complex != 0 { 2 } else { 1 };
    for b in 0..batch {
        for f in 0..frames {
            let at = |t: usize| {
                let e = x.add((b * signal_len + f * step + t) * ci);
                let w = if window.is_null() { 1.0 } else { (*window.add(t)).to_f64() };
                let im = if ci == 2 { (*e.add(1)).to_f64() } else { 0.0 };
                ((*e).to_f64() * w, im * w)
            };
            for k in 0..bins {
                let (re, im) = dft_bin(n, n, k, -1.0, scratch, at);
                let e = y.add(((b * frames + f) * bins + k) * 2);
                *e = T::from_f64(re);
                *e.add(1) = T::from_f64(im);
            }
        }
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

    /// Naive complex DFT with direct `cos`/`sin` of each angle.
    fn naive(x: &[(f64, f64)], n: usize, sign: f64) -> Vec<(f64, f64)> {
        (0..n)
            .map(|k| {
                let mut acc = (0.0, 0.0);
                for (t, &(xr, xi)) in x.iter().enumerate().take(n) {
                    let a = sign * 2.0 * core::f64::consts::PI * (k * t) as f64 / n as f64;
                    acc.0 += xr * a.cos() - xi * a.sin();
                    acc.1 += xr * a.sin() + xi * a.cos();
                }
                acc
            })
            .collect()
    }

    #[test]
    fn forward_real_padded_and_onesided() {
        let (in_len, n) = (5, 8);
        let x = rand_vec(in_len * 3, 1); // [1, 5, 3, 1]
        let p =
            DftParams { outer: 1, in_len: 5, inner: 3, in_complex: 0, n: 8, out_len: 5, inverse: 0, real_output: 0 };
        let mut y = vec![0f32; 5 * 3 * 2];
        let mut s = vec![0f64; 2 * n];
        assert_eq!(unsafe { onnxc_dft_f32(&p, x.as_ptr(), y.as_mut_ptr(), s.as_mut_ptr()) }, 0);
        let mut want = vec![0f32; y.len()];
        for r in 0..3 {
            let sig: Vec<(f64, f64)> = (0..in_len).map(|t| (x[t * 3 + r] as f64, 0.0)).collect();
            for (k, v) in naive(&sig, n, -1.0).iter().take(5).enumerate() {
                want[(k * 3 + r) * 2] = v.0 as f32;
                want[(k * 3 + r) * 2 + 1] = v.1 as f32;
            }
        }
        assert_close(&y, &want, 1e-5);
    }

    #[test]
    fn inverse_round_trips_and_irfft() {
        let n = 6;
        let x = rand_vec(n, 2);
        let mut s = vec![0f64; 2 * n];
        // Forward, one-sided.
        let fwd =
            DftParams { outer: 1, in_len: 6, inner: 1, in_complex: 0, n: 6, out_len: 4, inverse: 0, real_output: 0 };
        let mut spec = vec![0f32; 8];
        assert_eq!(unsafe { onnxc_dft_f32(&fwd, x.as_ptr(), spec.as_mut_ptr(), s.as_mut_ptr()) }, 0);
        let inv =
            DftParams { outer: 1, in_len: 4, inner: 1, in_complex: 1, n: 6, out_len: 6, inverse: 1, real_output: 1 };
        let mut back = vec![0f32; 6];
        assert_eq!(unsafe { onnxc_dft_f32(&inv, spec.as_ptr(), back.as_mut_ptr(), s.as_mut_ptr()) }, 0);
        assert_close(&back, &x, 1e-5);
        // Full complex inverse.
        let full = DftParams { out_len: 6, ..fwd };
        let mut spec = vec![0f32; 12];
        assert_eq!(unsafe { onnxc_dft_f32(&full, x.as_ptr(), spec.as_mut_ptr(), s.as_mut_ptr()) }, 0);
        let inv = DftParams { in_len: 6, real_output: 0, ..inv };
        let mut back = vec![0f32; 12];
        assert_eq!(unsafe { onnxc_dft_f32(&inv, spec.as_ptr(), back.as_mut_ptr(), s.as_mut_ptr()) }, 0);
        let want: Vec<f32> = x.iter().flat_map(|&v| [v, 0.0]).collect();
        assert_close(&back, &want, 1e-5);
    }

    #[test]
    fn stft_matches_framed_dft() {
        let (len, step, n) = (10, 3, 4);
        let x = rand_vec(len, 3);
        let w = rand_vec(n, 4);
        let frames = 1 + (len - n) / step;
        let p = StftParams {
            batch: 1,
            signal_len: len as i64,
            in_complex: 0,
            frame_step: step as i64,
            frame_length: n as i64,
            frames: frames as i64,
            bins: 3,
        };
        let mut y = vec![0f32; frames * 3 * 2];
        let mut s = vec![0f64; 2 * n];
        assert_eq!(unsafe { onnxc_stft_f32(&p, x.as_ptr(), w.as_ptr(), y.as_mut_ptr(), s.as_mut_ptr()) }, 0);
        let mut want = Vec::new();
        for f in 0..frames {
            let sig: Vec<(f64, f64)> = (0..n).map(|t| ((x[f * step + t] * w[t]) as f64, 0.0)).collect();
            for v in naive(&sig, n, -1.0).iter().take(3) {
                want.extend([v.0 as f32, v.1 as f32]);
            }
        }
        assert_close(&y, &want, 1e-5);
        let bad = StftParams { frames: frames as i64 + 1, ..p };
        assert_eq!(unsafe { onnxc_stft_f32(&bad, x.as_ptr(), w.as_ptr(), y.as_mut_ptr(), s.as_mut_ptr()) }, 3);
    }
}
