//! Reductions (ReduceSum, ReduceMean, ..., ArgMax/ArgMin).
//!
//! `onnxc_reduce_*` takes the full input shape and a per-axis "reduce" flag
//! rather than a flattened `[outer, len, inner]`, because ONNX reduces over
//! arbitrary axis sets. Every kind but log-sum-exp is a fold (an identity,
//! a map of each element, a combining step, then a last step such as the
//! mean's division), written once in [`reduce_by`] and run over one of two
//! layouts ([`Folds`]): the contiguous ones of
//! [`super::reduce_contiguous`], vectorised, or the general [`Walk`],
//! which for each output element walks the reduced sub-space with an
//! odometer. One generic function serves all element types; kinds that
//! need logarithms or square roots compute those steps in `f64` and
//! convert back (integers truncate, as ONNX implementations do).

use super::{advance, checked_rank, product, to_usize};
use crate::abi::reduce::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};

/// Element types the reduce kernels support.
pub trait ReduceElem: Copy + PartialOrd {
    const ZERO: Self;
    const ONE: Self;
    /// Identity of max (`-inf` for floats).
    const LOWEST: Self;
    /// Identity of min (`+inf` for floats).
    const HIGHEST: Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn abs(self) -> Self;
    fn is_nan(self) -> bool;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn from_count(n: usize) -> Self;
    /// Division used by the mean (`0` on integer division by zero).
    fn div(self, o: Self) -> Self;
}

macro_rules! float_elem {
    ($t:ty) => {
        impl ReduceElem for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn abs(self) -> Self {
                if self < 0.0 {
                    -self
                } else {
                    self
                }
            }
            fn is_nan(self) -> bool {
                self != self
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_count(n: usize) -> Self {
                n as $t
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
        }
    };
}

macro_rules! int_elem {
    ($t:ty) => {
        impl ReduceElem for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn abs(self) -> Self {
                self.wrapping_abs()
            }
            fn is_nan(self) -> bool {
                false
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_count(n: usize) -> Self {
                n as $t
            }
            fn div(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_div(o)
                }
            }
        }
    };
}

float_elem!(f32);
float_elem!(f64);
int_elem!(i32);
int_elem!(i64);

/// `v` if it is larger than `acc` or NaN: ReduceMax's step, which lets a
/// NaN through and then keeps it.
#[inline(always)]
fn larger<T: ReduceElem>(acc: T, v: T) -> T {
    if v > acc || v.is_nan() {
        v
    } else {
        acc
    }
}

/// ReduceMin's step, as [`larger`].
#[inline(always)]
fn smaller<T: ReduceElem>(acc: T, v: T) -> T {
    if v < acc || v.is_nan() {
        v
    } else {
        acc
    }
}

/// A way to visit the elements of every output: the odometer [`Walk`] or
/// a contiguous layout (`super::reduce_contiguous`).
pub(crate) trait Folds<T: ReduceElem> {
    /// Writes each output's `combine` of `map(v)` over its elements, from
    /// `identity`, to `y`.
    unsafe fn fold_into(&self, y: *mut T, identity: T, map: impl Fn(T) -> T, combine: impl Fn(T, T) -> T);
}

/// Every kind but log-sum-exp as a fold over `folds` (its identity, the
/// map of each element and the combining step), then the kind's last step
/// on each of the `outputs`, `count` elements each.
pub(crate) unsafe fn reduce_by<T: ReduceElem>(
    kind: i64,
    folds: &impl Folds<T>,
    y: *mut T,
    (outputs, count): (usize, usize),
) {
    let sum = |a: T, b: T| a.add(b);
    match kind {
        REDUCE_MAX => folds.fold_into(y, T::LOWEST, |v| v, larger),
        REDUCE_MIN => folds.fold_into(y, T::HIGHEST, |v| v, smaller),
        REDUCE_PROD => folds.fold_into(y, T::ONE, |v| v, |a, b| a.mul(b)),
        REDUCE_L1 => folds.fold_into(y, T::ZERO, |v| v.abs(), sum),
        REDUCE_L2 | REDUCE_SUM_SQUARE => folds.fold_into(y, T::ZERO, |v| v.mul(v), sum),
        _ => folds.fold_into(y, T::ZERO, |v| v, sum),
    }
    let last: fn(T, usize) -> T = match kind {
        REDUCE_MEAN => |acc, count| acc.div(T::from_count(count)),
        REDUCE_LOG_SUM => |acc, _| T::from_f64(libm::log(acc.to_f64())),
        REDUCE_L2 => |acc, _| T::from_f64(libm::sqrt(acc.to_f64())),
        _ => return,
    };
    for i in 0..outputs {
        *y.add(i) = last(*y.add(i), count);
    }
}

/// The reduction itself, shared by every element type.
///
/// # Safety
/// `x` must hold the `p.dims` tensor and `y` the reduced one.
pub unsafe fn reduce<T: ReduceElem>(p: &ReduceParams, x: *const T, y: *mut T) -> i32 {
    let Some(rank) = checked_rank(p.rank, MAX_RANK, &p.dims) else {
        return STATUS_INVALID_PARAMS;
    };
    if !(REDUCE_SUM..=REDUCE_SUM_SQUARE).contains(&p.kind) || p.reduced[..rank].iter().any(|&r| r != 0 && r != 1) {
        return STATUS_INVALID_PARAMS;
    }
    let Some(_) = product(&p.dims[..rank]) else {
        return STATUS_INVALID_PARAMS;
    };
    let walk = Walk::new(p, rank, x);
    let (outputs, count) =
        (walk.kept.0[..walk.kept.2].iter().product(), walk.reduced.0[..walk.reduced.2].iter().product());
    if outputs == 0 {
        return STATUS_OK;
    }
    if p.kind == REDUCE_LOG_SUM_EXP {
        walk.log_sum_exp(y);
    } else if let Some(runs) = super::reduce_contiguous::Contiguous::of(p, rank, x) {
        reduce_by(p.kind, &runs, y, (outputs, count));
    } else {
        reduce_by(p.kind, &walk, y, (outputs, count));
    }
    STATUS_OK
}

/// The general layout: the kept axes (outer loop) and the reduced ones
/// (inner loop), each as dims, input strides and count.
pub(crate) struct Walk<T> {
    x: *const T,
    kept: ([usize; MAX_RANK], [isize; MAX_RANK], usize),
    reduced: ([usize; MAX_RANK], [isize; MAX_RANK], usize),
}

impl<T: ReduceElem> Walk<T> {
    pub(crate) fn new(p: &ReduceParams, rank: usize, x: *const T) -> Walk<T> {
        let dims = to_usize(&p.dims);
        let mut walk = Walk { x, kept: ([0; MAX_RANK], [0; MAX_RANK], 0), reduced: ([0; MAX_RANK], [0; MAX_RANK], 0) };
        let mut strides = [0isize; MAX_RANK];
        let mut stride = 1isize;
        for d in (0..rank).rev() {
            strides[d] = stride;
            stride *= dims[d] as isize;
        }
        for d in 0..rank {
            let (ds, ss, n) = if p.reduced[d] == 1 { &mut walk.reduced } else { &mut walk.kept };
            (ds[*n], ss[*n]) = (dims[d], strides[d]);
            *n += 1;
        }
        walk
    }

    /// Calls `f(y, input offset)` for every output in order.
    unsafe fn each_output(&self, y: *mut T, mut f: impl FnMut(*mut T, isize)) {
        let (dims, strides, n) = &self.kept;
        let mut idx = [0usize; MAX_RANK];
        let mut off = [0isize];
        let mut out = y;
        loop {
            f(out, off[0]);
            out = out.add(1);
            if !advance(&mut idx[..*n], &dims[..*n], [&strides[..*n]], &mut off) {
                break;
            }
        }
    }

    /// Calls `f` on every input element of the output at `base`.
    #[inline(always)]
    unsafe fn each_reduced(&self, base: isize, f: impl FnMut(T)) {
        let (dims, strides, n) = &self.reduced;
        for_each_reduced(self.x, base, &dims[..*n], &strides[..*n], f)
    }

    /// ReduceLogSumExp, shifted by the maximum for stability.
    unsafe fn log_sum_exp(&self, y: *mut T) {
        self.each_output(y, |out, base| {
            let mut max = f64::NEG_INFINITY;
            self.each_reduced(base, |v| max = max.max(v.to_f64()));
            *out = if max.is_infinite() {
                T::from_f64(max)
            } else {
                let mut sum = 0.0f64;
                self.each_reduced(base, |v| sum += libm::exp(v.to_f64() - max));
                T::from_f64(max + libm::log(sum))
            };
        });
    }
}

impl<T: ReduceElem> Folds<T> for Walk<T> {
    unsafe fn fold_into(&self, y: *mut T, identity: T, map: impl Fn(T) -> T, combine: impl Fn(T, T) -> T) {
        self.each_output(y, |out, base| {
            let mut acc = identity;
            self.each_reduced(base, |v| acc = combine(acc, map(v)));
            *out = acc;
        });
    }
}

/// Calls `f` on `x[base + sum(idx * strides)]` for every index over `dims`.
#[inline(always)]
unsafe fn for_each_reduced<T: Copy>(x: *const T, base: isize, dims: &[usize], strides: &[isize], mut f: impl FnMut(T)) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = [0usize; MAX_RANK];
    let mut off = [base];
    loop {
        f(*x.offset(off[0]));
        if !advance(&mut idx[..dims.len()], dims, [strides], &mut off) {
            break;
        }
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_argreduce_f32`].
pub(crate) unsafe fn argreduce_f32(p: *const ArgReduceParams, x: *const f32, y: *mut i64) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.outer < 0 || p.axis_len < 1 || p.inner < 0 || !(ARG_MAX..=ARG_MIN).contains(&p.kind) {
        return STATUS_INVALID_PARAMS;
    }
    let (outer, len, inner) = (p.outer as usize, p.axis_len as usize, p.inner as usize);
    let last = p.select_last_index != 0;
    for o in 0..outer {
        for r in 0..inner {
            let at = |i: usize| *x.add((o * len + i) * inner + r);
            let mut best = at(0);
            let mut arg = 0usize;
            for i in 1..len {
                let v = at(i);
                let better =
                    if p.kind == ARG_MAX { v > best || (last && v == best) } else { v < best || (last && v == best) };
                if better {
                    best = v;
                    arg = i;
                }
            }
            *y.add(o * inner + r) = arg as i64;
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{rand_vec, unravel};
    use std::vec;
    use std::vec::Vec;

    /// Reference: gather each output's values as f64 and reduce them by the
    /// textbook formula.
    fn reference(dims: &[usize], reduced: &[bool], x: &[f64], kind: i64) -> Vec<f64> {
        let out_dims: Vec<usize> = dims.iter().zip(reduced).map(|(&d, &r)| if r { 1 } else { d }).collect();
        let out_n: usize = out_dims.iter().product();
        let in_n: usize = dims.iter().product();
        let mut groups: Vec<Vec<f64>> = vec![Vec::new(); out_n];
        for (f, &v) in x.iter().enumerate().take(in_n) {
            let c = unravel(f, dims);
            let mut o = 0;
            for d in 0..dims.len() {
                o = o * out_dims[d] + if reduced[d] { 0 } else { c[d] };
            }
            groups[o].push(v);
        }
        groups
            .iter()
            .map(|g| {
                let sum: f64 = g.iter().sum();
                match kind {
                    REDUCE_SUM => sum,
                    REDUCE_MEAN => sum / g.len() as f64,
                    REDUCE_MAX => g.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                    REDUCE_MIN => g.iter().cloned().fold(f64::INFINITY, f64::min),
                    REDUCE_PROD => g.iter().product(),
                    REDUCE_L1 => g.iter().map(|v| v.abs()).sum(),
                    REDUCE_L2 => g.iter().map(|v| v * v).sum::<f64>().sqrt(),
                    REDUCE_LOG_SUM => sum.ln(),
                    REDUCE_LOG_SUM_EXP => g.iter().map(|v| v.exp()).sum::<f64>().ln(),
                    _ => g.iter().map(|v| v * v).sum(),
                }
            })
            .collect()
    }

    fn params(kind: i64, dims: &[usize], reduced: &[bool]) -> ReduceParams {
        let mut p = ReduceParams { kind, rank: dims.len() as i64, ..Default::default() };
        for d in 0..dims.len() {
            p.dims[d] = dims[d] as i64;
            p.reduced[d] = reduced[d] as i64;
        }
        p
    }

    const SHAPES: &[(&[usize], &[bool])] = &[
        (&[], &[]),
        (&[7], &[true]),
        (&[7], &[false]),
        (&[3, 5], &[false, true]),
        (&[3, 5], &[true, false]),
        (&[3, 5], &[true, true]),
        (&[2, 3, 4, 5], &[false, true, false, true]),
        (&[4, 1, 3], &[true, true, false]),
        (&[2, 0, 3], &[false, true, false]), // empty reduction: identities
        (&[0, 3], &[false, true]),           // empty output
    ];

    #[test]
    fn float_kinds_match_reference() {
        for &(dims, reduced) in SHAPES {
            let n: usize = dims.iter().product();
            let x32: Vec<f32> = rand_vec(n, 3).iter().map(|v| v + 1.5).collect(); // positive for log-sum
            let x64: Vec<f64> = x32.iter().map(|&v| v as f64).collect();
            for kind in REDUCE_SUM..=REDUCE_SUM_SQUARE {
                let p = params(kind, dims, reduced);
                let want = reference(dims, reduced, &x64, kind);
                let mut got32 = vec![f32::NAN; want.len()];
                let mut got64 = vec![f64::NAN; want.len()];
                unsafe {
                    assert_eq!(onnxc_reduce_f32(&p, x32.as_ptr(), got32.as_mut_ptr()), STATUS_OK);
                    assert_eq!(onnxc_reduce_f64(&p, x64.as_ptr(), got64.as_mut_ptr()), STATUS_OK);
                }
                for i in 0..want.len() {
                    let w = want[i];
                    let close = |g: f64, tol: f64| crate::tolerance::close(g, w, tol, tol);
                    assert!(close(got32[i] as f64, 1e-5), "kind {kind} dims {dims:?}: {} vs {w}", got32[i]);
                    assert!(close(got64[i], 1e-12), "kind {kind} dims {dims:?}: {} vs {w}", got64[i]);
                }
            }
        }
    }

    #[test]
    fn integer_kinds_match_reference() {
        for &(dims, reduced) in SHAPES {
            let n: usize = dims.iter().product();
            let x64: Vec<i64> = (0..n as i64).map(|i| (i * 7 + 3) % 7 - 2).collect();
            let x32: Vec<i32> = x64.iter().map(|&v| v as i32).collect();
            let xf: Vec<f64> = x64.iter().map(|&v| v as f64).collect();
            for kind in REDUCE_SUM..=REDUCE_SUM_SQUARE {
                let p = params(kind, dims, reduced);
                let want = reference(dims, reduced, &xf, kind);
                let mut got64 = vec![7i64; want.len()];
                let mut got32 = vec![7i32; want.len()];
                unsafe {
                    assert_eq!(onnxc_reduce_i64(&p, x64.as_ptr(), got64.as_mut_ptr()), STATUS_OK);
                    assert_eq!(onnxc_reduce_i32(&p, x32.as_ptr(), got32.as_mut_ptr()), STATUS_OK);
                }
                for i in 0..want.len() {
                    // Integer max/min identities are the type's extremes.
                    let (w64, w32) = match want[i] {
                        w if w == f64::NEG_INFINITY && kind == REDUCE_MAX => (i64::MIN, i32::MIN),
                        w if w == f64::INFINITY && kind == REDUCE_MIN => (i64::MAX, i32::MAX),
                        w if w.is_nan() => (0, 0), // integer mean of nothing
                        w => (w as i64, w as i32),
                    };
                    assert_eq!(got64[i], w64, "kind {kind} dims {dims:?}");
                    assert_eq!(got32[i], w32, "kind {kind} dims {dims:?}");
                }
            }
        }
    }

    #[test]
    fn nan_propagates_through_max_and_min() {
        let x = [1.0f32, f32::NAN, 3.0];
        for kind in [REDUCE_MAX, REDUCE_MIN] {
            let p = params(kind, &[3], &[true]);
            let mut y = [0.0f32];
            unsafe { onnxc_reduce_f32(&p, x.as_ptr(), y.as_mut_ptr()) };
            assert!(y[0].is_nan());
        }
    }

    #[test]
    fn reduce_rejects_bad_params() {
        let mut p = params(10, &[3], &[true]);
        assert_eq!(unsafe { onnxc_reduce_f32(&p, core::ptr::null(), core::ptr::null_mut()) }, STATUS_INVALID_PARAMS);
        p.kind = REDUCE_SUM;
        p.reduced[0] = 2;
        assert_eq!(unsafe { onnxc_reduce_i64(&p, core::ptr::null(), core::ptr::null_mut()) }, STATUS_INVALID_PARAMS);
        p.reduced[0] = 1;
        p.dims[0] = -1;
        assert_eq!(unsafe { onnxc_reduce_i32(&p, core::ptr::null(), core::ptr::null_mut()) }, STATUS_INVALID_PARAMS);
    }

    #[test]
    fn argreduce_matches_reference() {
        for &(outer, len, inner) in &[(1usize, 1usize, 1usize), (3, 6, 1), (2, 5, 4), (1, 9, 3)] {
            // Few distinct values so ties are common.
            let x: Vec<f32> = (0..outer * len * inner).map(|i| ((i * 5 + 1) % 4) as f32).collect();
            for kind in [ARG_MAX, ARG_MIN] {
                for last in [0i64, 1] {
                    let p = ArgReduceParams {
                        outer: outer as i64,
                        axis_len: len as i64,
                        inner: inner as i64,
                        kind,
                        select_last_index: last,
                    };
                    let mut got = vec![-1i64; outer * inner];
                    assert_eq!(unsafe { onnxc_argreduce_f32(&p, x.as_ptr(), got.as_mut_ptr()) }, STATUS_OK);
                    for o in 0..outer {
                        for r in 0..inner {
                            let vals: Vec<f32> = (0..len).map(|i| x[(o * len + i) * inner + r]).collect();
                            let target = if kind == ARG_MAX {
                                vals.iter().cloned().fold(f32::MIN, f32::max)
                            } else {
                                vals.iter().cloned().fold(f32::MAX, f32::min)
                            };
                            let want = if last == 1 {
                                vals.iter().rposition(|&v| v == target)
                            } else {
                                vals.iter().position(|&v| v == target)
                            };
                            assert_eq!(got[o * inner + r], want.unwrap() as i64);
                        }
                    }
                }
            }
        }
        let bad = ArgReduceParams { outer: 1, axis_len: 0, inner: 1, ..Default::default() };
        assert_eq!(
            unsafe { onnxc_argreduce_f32(&bad, core::ptr::null(), core::ptr::null_mut()) },
            STATUS_INVALID_PARAMS
        );
    }
}
