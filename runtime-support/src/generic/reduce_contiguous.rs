//! The fast layouts of the reductions: after dropping size-1 axes and
//! merging neighbours that are both kept or both reduced, the input is
//! `[outer, len, inner]` with only the middle axis reduced.
//!
//! With `inner == 1` (ReduceMean over the last axis, ReduceSum over a
//! plane) each output is a fold of one contiguous run, in
//! [`super::lanes::fold`]'s lanes. Otherwise (ReduceMax over the channels
//! of `[N, C, H*W]`) each block of `len` rows of `inner` elements folds
//! into one output row, row after row with [`super::lanes::fold_row`],
//! which vectorises along the row and keeps each output's order. Both run
//! under [`crate::isa::with_widest_vectors`]; other layouts, and empty
//! axes, take the odometer [`super::reduce`] walks.

use super::lanes::{fold, fold_row};
use super::reduce::{Folds, ReduceElem};
use crate::abi::reduce::ReduceParams;
use crate::abi::MAX_RANK;
use core::slice::{from_raw_parts, from_raw_parts_mut};

/// An input laid out as `[outer, len, inner]`, the middle axis reduced.
pub(crate) struct Contiguous<T> {
    x: *const T,
    outer: usize,
    len: usize,
    inner: usize,
}

impl<T: ReduceElem> Contiguous<T> {
    /// `p`'s layout as `[outer, len, inner]`, if it merges into one.
    pub(crate) fn of(p: &ReduceParams, rank: usize, x: *const T) -> Option<Contiguous<T>> {
        let mut merged = [(1usize, false); MAX_RANK];
        let mut n = 0usize;
        for d in (0..rank).filter(|&d| p.dims[d] != 1) {
            let (dim, reduced) = (p.dims[d] as usize, p.reduced[d] == 1);
            match n.checked_sub(1).map(|last| &mut merged[last]) {
                Some((size, r)) if *r == reduced => *size *= dim,
                _ => {
                    merged[n] = (dim, reduced);
                    n += 1;
                }
            }
        }
        if merged[..n].iter().any(|&(dim, _)| dim == 0) {
            return None;
        }
        let (outer, len, inner) = match merged[..n] {
            [] => (1, 1, 1),
            [(len, true)] => (1, len, 1),
            [(inner, false)] => (1, 1, inner),
            [(outer, false), (len, true)] => (outer, len, 1),
            [(len, true), (inner, false)] => (1, len, inner),
            [(outer, false), (len, true), (inner, false)] => (outer, len, inner),
            _ => return None,
        };
        Some(Contiguous { x, outer, len, inner })
    }
}

impl<T: ReduceElem> Folds<T> for Contiguous<T> {
    unsafe fn fold_into(&self, y: *mut T, identity: T, map: impl Fn(T) -> T, combine: impl Fn(T, T) -> T) {
        let Contiguous { x, outer, len, inner } = *self;
        crate::isa::with_widest_vectors(
            #[inline(always)]
            || {
                for o in 0..outer {
                    let block = x.add(o * len * inner);
                    if inner == 1 {
                        *y.add(o) = fold(from_raw_parts(block, len), identity, &map, &combine);
                        continue;
                    }
                    let acc = from_raw_parts_mut(y.add(o * inner), inner);
                    acc.fill(identity);
                    for r in 0..len {
                        fold_row(acc, from_raw_parts(block.add(r * inner), inner), &map, &combine);
                    }
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::reduce::*;
    use crate::generic::reduce::{reduce_by, Walk};
    use crate::generic::test_util::{rand_vec, testable_isas, with_level};
    use std::vec;
    use std::vec::Vec;

    /// Runs, rows and both, with lengths of 1, odd, around the lane count
    /// and large, size-1 axes between, a scalar and nothing reduced.
    const LAYOUTS: &[(&[i64], &[i64])] = &[
        (&[1], &[1]),
        (&[7], &[1]),
        (&[17], &[1]),
        (&[5000], &[1]),
        (&[3, 16], &[0, 1]),
        (&[5, 33], &[0, 1]),
        (&[16, 3], &[1, 0]),
        (&[7, 31], &[1, 0]),
        (&[2, 9, 17], &[0, 1, 0]),
        (&[2, 1, 3, 4, 5], &[0, 1, 1, 0, 0]),
        (&[], &[]),
        (&[6], &[0]),
    ];

    fn params(kind: i64, (dims, reduced): (&[i64], &[i64])) -> ReduceParams {
        let mut p = ReduceParams { kind, rank: dims.len() as i64, ..Default::default() };
        p.dims[..dims.len()].copy_from_slice(dims);
        p.reduced[..dims.len()].copy_from_slice(reduced);
        p
    }

    /// The outputs of `p` by the walk or, where `contiguous`, the
    /// contiguous path.
    fn run<T: ReduceElem + Default>(p: &ReduceParams, x: &[T], contiguous: bool) -> Vec<T> {
        let rank = p.rank as usize;
        let outputs = (0..rank).filter(|&d| p.reduced[d] == 0).map(|d| p.dims[d] as usize).product();
        let count = x.len() / outputs;
        let mut y = vec![T::default(); outputs];
        unsafe {
            match Contiguous::of(p, rank, x.as_ptr()) {
                Some(runs) if contiguous => reduce_by(p.kind, &runs, y.as_mut_ptr(), (outputs, count)),
                _ => reduce_by(p.kind, &Walk::new(p, rank, x.as_ptr()), y.as_mut_ptr(), (outputs, count)),
            }
        }
        y
    }

    /// The contiguous path against the walk within `close`, the same bits
    /// at every level this host runs.
    fn check<T: ReduceElem + Default + core::fmt::Debug>(from: impl Fn(f32) -> T, close: impl Fn(T, T) -> bool) {
        for &layout in LAYOUTS {
            let n = layout.0.iter().product::<i64>() as usize;
            let x: Vec<T> = rand_vec(n, 9).into_iter().map(|v| from(v * 4.0 + 1.0)).collect();
            for kind in (REDUCE_SUM..=REDUCE_SUM_SQUARE).filter(|&k| k != REDUCE_LOG_SUM_EXP) {
                let p = params(kind, layout);
                assert!(Contiguous::of(&p, p.rank as usize, x.as_ptr()).is_some(), "{layout:?}");
                let want = run(&p, &x, false);
                let levels = testable_isas();
                let got: Vec<Vec<T>> = levels.iter().map(|&l| with_level(l, || run(&p, &x, true))).collect();
                for (level, bits) in levels.iter().zip(&got) {
                    let same = bits.iter().zip(&got[0]).all(|(a, b)| a == b || a.is_nan() && b.is_nan());
                    assert!(same, "{} differs from {}", level.name(), levels[0].name());
                }
                for (i, (&g, &w)) in got[0].iter().zip(&want).enumerate() {
                    assert!(close(g, w), "kind {kind} {layout:?} [{i}]: {g:?} vs {w:?}");
                }
            }
        }
    }

    #[test]
    fn contiguous_layouts_match_the_walk() {
        let near = |tol: f64| move |g: f64, w: f64| crate::tolerance::close(g, w, tol, tol);
        check(|v| v, |g: f32, w: f32| near(1e-5)(g as f64, w as f64));
        check(|v| v as f64, |g: f64, w: f64| near(1e-12)(g, w));
        check(|v| v as i32, |g: i32, w: i32| g == w);
        check(|v| v as i64, |g: i64, w: i64| g == w);
    }

    /// Reduced axes on both sides of a kept one, and empty axes, take the
    /// walk.
    #[test]
    fn other_layouts_are_declined() {
        let x = [0.0f32; 60];
        for layout in [(&[3, 4, 5][..], &[1, 0, 1][..]), (&[2, 0, 3], &[0, 1, 0]), (&[0, 3], &[1, 0])] {
            let p = params(REDUCE_SUM, layout);
            assert!(Contiguous::of(&p, p.rank as usize, x.as_ptr()).is_none(), "{layout:?}");
        }
    }
}
