//! Einsum as one generic strided loop nest, and batched determinants.
//!
//! Einsum: the compiler numbers the distinct index letters (output letters
//! first, then the summed ones), gives each operand an element stride per
//! letter (a letter repeated in one operand adds its strides, which walks a
//! diagonal; a letter the operand lacks has stride 0), and the kernel
//! computes `y[out] = sum_{summed} prod_operands x[...]` in `f64` with `y`
//! contiguous over the output letters.
//!
//! Det: LU factorisation with partial pivoting of each `n x n` matrix of a
//! contiguous `[batch, n, n]` tensor, in `f64` scratch of `n * n` doubles.

use super::real::Real;
use super::{advance, checked_rank, to_isize, to_usize};
use crate::abi::linalg::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};

pub(crate) unsafe fn einsum<T: Real>(p: *const EinsumParams, xs: [*const T; EINSUM_MAX_INPUTS], y: *mut T) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(rank) = checked_rank(p.rank, MAX_RANK, &p.dims) else {
        return STATUS_INVALID_PARAMS;
    };
    if p.out_rank < 0 || p.out_rank as usize > rank || !(1..=EINSUM_MAX_INPUTS as i64).contains(&p.inputs) {
        return STATUS_INVALID_PARAMS;
    }
    let (out_rank, n_in) = (p.out_rank as usize, p.inputs as usize);
    let dims = to_usize(&p.dims);
    let strides = p.strides.map(|s| to_isize(&s));
    let (out_dims, sum_dims) = (&dims[..out_rank], &dims[out_rank..rank]);
    let out_count: usize = out_dims.iter().product();
    if out_count == 0 {
        return STATUS_OK;
    }
    let sum_empty = sum_dims.contains(&0);
    let st = |range: core::ops::Range<usize>| -> [&[isize]; EINSUM_MAX_INPUTS] {
        [&strides[0][range.clone()], &strides[1][range.clone()], &strides[2][range]]
    };
    let mut out_idx = [0usize; MAX_RANK];
    let mut out_offs = [0isize; EINSUM_MAX_INPUTS];
    for o in 0..out_count {
        let mut acc = 0.0;
        if !sum_empty {
            let mut idx = [0usize; MAX_RANK];
            let mut offs = out_offs;
            loop {
                let mut prod = 1.0;
                for (k, x) in xs.iter().enumerate().take(n_in) {
                    prod *= (*x.offset(offs[k])).to_f64();
                }
                acc += prod;
                if !advance(&mut idx[..sum_dims.len()], sum_dims, st(out_rank..rank), &mut offs) {
                    break;
                }
            }
        }
        *y.add(o) = T::from_f64(acc);
        advance(&mut out_idx[..out_rank], out_dims, st(0..out_rank), &mut out_offs);
    }
    STATUS_OK
}

pub(crate) unsafe fn det<T: Real>(p: *const DetParams, x: *const T, y: *mut T, a: *mut f64) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.batch < 0 || p.n < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (batch, n) = (p.batch as usize, p.n as usize);
    for bi in 0..batch {
        let m = x.add(bi * n * n);
        for k in 0..n * n {
            *a.add(k) = (*m.add(k)).to_f64();
        }
        let at = |r: usize, c: usize| a.add(r * n + c);
        let mut d = 1.0;
        for col in 0..n {
            let mut piv = col;
            for r in col + 1..n {
                if (*at(r, col)).abs() > (*at(piv, col)).abs() {
                    piv = r;
                }
            }
            let pv = *at(piv, col);
            if pv == 0.0 {
                d = 0.0;
                break;
            }
            if piv != col {
                for c in 0..n {
                    core::ptr::swap(at(piv, c), at(col, c));
                }
                d = -d;
            }
            d *= pv;
            for r in col + 1..n {
                let f = *at(r, col) / pv;
                if f != 0.0 {
                    for c in col + 1..n {
                        *at(r, c) -= f * *at(col, c);
                    }
                }
            }
        }
        *y.add(bi) = T::from_f64(d);
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

    #[test]
    fn einsum_batch_matmul_and_trace() {
        // "bij,bjk->bik" with b=2, i=3, j=4, k=5: letters b i k | j.
        let (b, i, j, k) = (2usize, 3usize, 4usize, 5usize);
        let x = rand_vec(b * i * j, 1);
        let w = rand_vec(b * j * k, 2);
        let mut p = EinsumParams { inputs: 2, rank: 4, out_rank: 3, ..Default::default() };
        p.dims[..4].copy_from_slice(&[b as i64, i as i64, k as i64, j as i64]);
        p.strides[0][..4].copy_from_slice(&[(i * j) as i64, j as i64, 0, 1]);
        p.strides[1][..4].copy_from_slice(&[(j * k) as i64, 0, 1, k as i64]);
        let mut y = vec![0f32; b * i * k];
        assert_eq!(unsafe { onnxc_einsum_f32(&p, x.as_ptr(), w.as_ptr(), core::ptr::null(), y.as_mut_ptr()) }, 0);
        let mut want = vec![0f32; b * i * k];
        for bb in 0..b {
            for ii in 0..i {
                for kk in 0..k {
                    want[(bb * i + ii) * k + kk] =
                        (0..j).map(|jj| x[(bb * i + ii) * j + jj] * w[(bb * j + jj) * k + kk]).sum();
                }
            }
        }
        assert_close(&y, &want, 1e-5);
        // "ii->" (trace of a 3x3): one summed letter with stride 4.
        let m = rand_vec(9, 3);
        let mut p = EinsumParams { inputs: 1, rank: 1, out_rank: 0, ..Default::default() };
        p.dims[0] = 3;
        p.strides[0][0] = 4;
        let mut y = [0f32];
        let none = core::ptr::null();
        assert_eq!(unsafe { onnxc_einsum_f32(&p, m.as_ptr(), none, none, y.as_mut_ptr()) }, 0);
        assert_close(&y, &[m[0] + m[4] + m[8]], 1e-6);
    }

    #[test]
    fn det_with_pivoting() {
        // [[0, 2], [3, 4]] needs a row swap: det = -6; a singular matrix gives 0.
        let x: Vec<f32> = vec![0.0, 2.0, 3.0, 4.0, 1.0, 2.0, 2.0, 4.0];
        let mut y = [0f32; 2];
        let mut s = [0f64; 4];
        let p = DetParams { batch: 2, n: 2 };
        assert_eq!(unsafe { onnxc_det_f32(&p, x.as_ptr(), y.as_mut_ptr(), s.as_mut_ptr()) }, 0);
        assert_close(&y, &[-6.0, 0.0], 1e-6);
        let m = rand_vec(9, 5);
        let want = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6])
            + m[2] * (m[3] * m[7] - m[4] * m[6]);
        let mut y = [0f32];
        let mut s = [0f64; 9];
        let p = DetParams { batch: 1, n: 3 };
        assert_eq!(unsafe { onnxc_det_f32(&p, m.as_ptr(), y.as_mut_ptr(), s.as_mut_ptr()) }, 0);
        assert_close(&y, &[want], 1e-5);
    }
}
