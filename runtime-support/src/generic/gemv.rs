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

/// Dot products [`dots`] computes together.
const DOTS_AT_ONCE: usize = 4;

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
                    let b_col = |j: usize| core::slice::from_raw_parts(b.ptr.offset(j as isize * b.cs), k);
                    let store =
                        |j: usize, s: f32| *y.ptr.offset(i as isize * y.rs + j as isize * y.cs) = finish(i, j, s);
                    let grouped = n / DOTS_AT_ONCE * DOTS_AT_ONCE;
                    for j0 in (0..grouped).step_by(DOTS_AT_ONCE) {
                        // The next group's columns, pulled in while these are summed.
                        let next = b.ptr.wrapping_offset((j0 + DOTS_AT_ONCE) as isize * b.cs);
                        let ahead = (j0 + DOTS_AT_ONCE < n).then_some((next, b.cs));
                        let sums = dots::<DOTS_AT_ONCE>(a_row, core::array::from_fn(|c| b_col(j0 + c)), ahead);
                        sums.into_iter().enumerate().for_each(|(c, s)| store(j0 + c, s));
                    }
                    for j in grouped..n {
                        store(j, dots(a_row, [b_col(j)], None)[0]);
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

/// `x · w` for each `w` of `ws`, each in [`LANES`] partial sums (lane `l`
/// takes elements `l`, `l + LANES`, ...), added pairwise, then the tail in
/// order. Several at once keep several independent sums in flight; each
/// is the same function of its `w` whatever `N`. Written as whole-array
/// steps, which the compiler keeps in vector registers. With `ahead`
/// (the first of `N` more columns, and the floats between two), each step
/// prefetches their line at the same depth: weights larger than L2 come
/// from memory once per call, and four rows streamed by the hardware
/// alone ran a 1280 x 1000 classifier at 14 GB/s.
#[inline(always)]
fn dots<const N: usize>(x: &[f32], ws: [&[f32]; N], ahead: Option<(*const f32, isize)>) -> [f32; N] {
    let mut acc = [[0.0f32; LANES]; N];
    let (groups, tail) = x.as_chunks::<LANES>();
    let body = x.len() - tail.len();
    let w_groups: [&[[f32; LANES]]; N] = core::array::from_fn(|r| ws[r][..body].as_chunks::<LANES>().0);
    for (c, xc) in groups.iter().enumerate() {
        if let Some((next, stride)) = ahead {
            for r in 0..N {
                crate::isa::prefetch_floats(next.wrapping_offset(r as isize * stride + (c * LANES) as isize), 1);
            }
        }
        for r in 0..N {
            let wc = &w_groups[r][c];
            acc[r] = core::array::from_fn(|l| acc[r][l] + xc[l] * wc[l]);
        }
    }
    let mut sums = [0.0; N];
    for (r, sum) in sums.iter_mut().enumerate() {
        let tail: f32 = tail.iter().zip(&ws[r][body..]).map(|(a, b)| a * b).sum();
        let [lanes] = halve::<1, 2>(halve::<2, 4>(halve::<4, 8>(halve::<8, LANES>(acc[r]))));
        *sum = lanes + tail;
    }
    sums
}

/// `a[l] + a[l + HALF]` for the first `HALF` lanes: one pairwise step.
#[inline(always)]
fn halve<const HALF: usize, const FULL: usize>(a: [f32; FULL]) -> [f32; HALF] {
    core::array::from_fn(|l| a[l] + a[l + HALF])
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
