//! Products with one or two rows of A: a fully connected layer on one
//! sample (`[1, K] x [K, N]`).
//!
//! The blocked sgemm packs B into panels and A into 8-row panels: with one
//! row of A, packing reads and writes all of B to use it once, and seven of
//! every eight multiply-adds are padding. Here B is read once per row of A,
//! where it lies:
//! - columns of B unit-stride (B transposed, as Gemm's `transB` weights
//!   are): each output is a dot product, kept in 16 partial sums;
//! - rows of B unit-stride: the output row accumulates each row of B
//!   scaled by one element of A, in depth order.
//!
//! Both orders are fixed, so results do not depend on the vector width
//! the loops are compiled for ([`crate::isa::with_widest_vectors`]).

use super::gemm::{MatMut, MatRef};

/// Rows of A up to which [`few_rows`] is used.
pub const FEW_ROWS: usize = 2;

/// Partial sums of a dot product.
const LANES: usize = 16;

/// `y = alpha * a * b + beta * c` as [`super::gemm::sgemm`] when `m` is at
/// most [`FEW_ROWS`] and B or `y` has the layout one of the two orders
/// needs (see the module doc); false (nothing written) otherwise.
///
/// # Safety
/// As [`super::gemm::sgemm`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn few_rows(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef,
    b: MatRef,
    beta: f32,
    c: Option<MatRef>,
    y: MatMut,
) -> bool {
    if m > FEW_ROWS || m == 0 || n == 0 || k == 0 {
        return false;
    }
    let finish = |i: usize, j: usize, s: f32| match c {
        Some(c) => alpha * s + beta * *c.ptr.offset(i as isize * c.rs + j as isize * c.cs),
        None => alpha * s,
    };
    if b.rs == 1 && a.cs == 1 {
        crate::isa::with_widest_vectors(
            #[inline(always)]
            || {
                for i in 0..m {
                    let a_row = core::slice::from_raw_parts(a.ptr.offset(i as isize * a.rs), k);
                    for j in 0..n {
                        let b_col = core::slice::from_raw_parts(b.ptr.offset(j as isize * b.cs), k);
                        *y.ptr.offset(i as isize * y.rs + j as isize * y.cs) = finish(i, j, dot(a_row, b_col));
                    }
                }
            },
        );
        return true;
    }
    if b.cs == 1 && y.cs == 1 {
        crate::isa::with_widest_vectors(
            #[inline(always)]
            || {
                for i in 0..m {
                    let out = core::slice::from_raw_parts_mut(y.ptr.offset(i as isize * y.rs), n);
                    out.fill(0.0);
                    for l in 0..k {
                        let ail = *a.ptr.offset(i as isize * a.rs + l as isize * a.cs);
                        let b_row = core::slice::from_raw_parts(b.ptr.offset(l as isize * b.rs), n);
                        out.iter_mut().zip(b_row).for_each(|(o, &w)| *o += ail * w);
                    }
                    for (j, o) in out.iter_mut().enumerate() {
                        *o = finish(i, j, *o);
                    }
                }
            },
        );
        return true;
    }
    false
}

/// `x · w` in [`LANES`] partial sums (lane `l` takes elements `l`,
/// `l + LANES`, ...), added pairwise, then the tail in order.
#[inline(always)]
fn dot(x: &[f32], w: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (xs, ws) = (x.chunks_exact(LANES), w.chunks_exact(LANES));
    let tail: f32 = xs.remainder().iter().zip(ws.remainder()).map(|(a, b)| a * b).sum();
    for (xc, wc) in xs.zip(ws) {
        for l in 0..LANES {
            acc[l] += xc[l] * wc[l];
        }
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] += acc[l + width];
        }
    }
    acc[0] + tail
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec};
    use std::vec;

    /// Both layouts of B, one and two rows, a broadcast bias, against a
    /// naive product; other layouts are declined.
    #[test]
    fn matches_naive_product() {
        for (m, n, k) in [(1, 1, 1), (1, 1000, 960), (2, 37, 45), (1, 5, 16), (2, 3, 17)] {
            let a = rand_vec(m * k, 1);
            let w = rand_vec(k * n, 2);
            let bias = rand_vec(n, 3);
            for transposed in [false, true] {
                let (rs, cs) = if transposed { (1, k as isize) } else { (n as isize, 1) };
                let b = MatRef { ptr: w.as_ptr(), rs, cs };
                let at = |l: usize, j: usize| w[(l as isize * rs + j as isize * cs) as usize];
                let mut want = vec![0.0f32; m * n];
                for i in 0..m {
                    for j in 0..n {
                        let s: f64 = (0..k).map(|l| a[i * k + l] as f64 * at(l, j) as f64).sum();
                        want[i * n + j] = 0.5 * s as f32 + 2.0 * bias[j];
                    }
                }
                let mut got = vec![f32::NAN; m * n];
                let am = MatRef { ptr: a.as_ptr(), rs: k as isize, cs: 1 };
                let c = MatRef { ptr: bias.as_ptr(), rs: 0, cs: 1 };
                let y = MatMut { ptr: got.as_mut_ptr(), rs: n as isize, cs: 1 };
                assert!(unsafe { few_rows(m, n, k, 0.5, am, b, 2.0, Some(c), y) });
                assert_close(&got, &want, 1e-4);
            }
        }
        let a = rand_vec(12, 1);
        let (am, b) = (MatRef { ptr: a.as_ptr(), rs: 4, cs: 1 }, MatRef { ptr: a.as_ptr(), rs: 2, cs: 2 });
        let mut y = vec![0.0f32; 9];
        let ym = MatMut { ptr: y.as_mut_ptr(), rs: 3, cs: 1 };
        assert!(!unsafe { few_rows(1, 2, 2, 1.0, am, b, 0.0, None, ym) }, "B with no unit stride");
        assert!(!unsafe { few_rows(3, 2, 2, 1.0, am, b, 0.0, None, ym) }, "three rows");
    }
}
