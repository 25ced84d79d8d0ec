//! Folds over contiguous runs written in the shape the compiler turns into
//! vector code, for the reductions and the normalisations' statistics.
//!
//! A left fold `acc = combine(acc, x[i])` is one chain of dependent
//! operations, which the compiler may not reorder for floats (addition is
//! not associative), so it stays scalar. [`fold`] keeps [`LANES`] partial
//! results instead: lane `l` takes elements `l`, `l + LANES`, ..., the
//! lanes are combined pairwise, then the remaining elements one by one.
//! That order is written in the code, not chosen by the vector width, so
//! the AVX2 and AVX-512 builds of a loop ([`crate::isa::with_widest_vectors`])
//! give the same bits; sixteen short chains are also more accurate than one
//! long one. [`fold_row`] is the other direction: one step of many folds at
//! once, each element of a row into its own accumulator, which vectorises
//! along the row and keeps each accumulator's order.

/// Partial results of [`fold`]: one AVX-512 register of f32.
pub const LANES: usize = 16;

/// `combine` of `map(v)` over every `v` of `x`, from `identity`, in
/// [`LANES`] partial results (see the module doc for the order).
#[inline(always)]
pub fn fold<T: Copy>(x: &[T], identity: T, map: impl Fn(T) -> T, combine: impl Fn(T, T) -> T) -> T {
    let (groups, tail) = x.as_chunks::<LANES>();
    let mut lanes = [identity; LANES];
    for group in groups {
        for l in 0..LANES {
            lanes[l] = combine(lanes[l], map(group[l]));
        }
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            lanes[l] = combine(lanes[l], lanes[l + width]);
        }
    }
    tail.iter().fold(lanes[0], |acc, &v| combine(acc, map(v)))
}

/// `acc[k] = combine(acc[k], map(row[k]))` for every `k`: one step of as
/// many folds as the row is long.
#[inline(always)]
pub fn fold_row<T: Copy>(acc: &mut [T], row: &[T], map: impl Fn(T) -> T, combine: impl Fn(T, T) -> T) {
    for (a, &v) in acc.iter_mut().zip(row) {
        *a = combine(*a, map(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes' order: a sum that a left fold gets wrong by cancellation
    /// (1e8 + 1 - 1e8 in f32) shows which elements share a lane; the tail
    /// is added after the lanes.
    #[test]
    fn fold_combines_lanes_pairwise_then_the_tail() {
        let mut x = [0.0f32; 2 * LANES + 3];
        (x[0], x[LANES], x[1]) = (1e8, -1e8, 1.0);
        x[2 * LANES + 2] = 0.5;
        let sum = fold(&x, 0.0, |v| v, |a, b| a + b);
        assert_eq!(sum, 1.5, "lane 0 cancels exactly before lane 1's 1.0 is added");
        assert_eq!(fold(&[] as &[f32], -1.0, |v| v, f32::max), -1.0);
        assert_eq!(fold(&[3i64, -4, 5], 0, |v| v * v, |a, b| a + b), 50);
    }

    #[test]
    fn fold_row_steps_each_accumulator() {
        let mut acc = [1.0f64, 2.0, 3.0];
        fold_row(&mut acc, &[4.0, -5.0, 6.0], |v| v, f64::max);
        assert_eq!(acc, [4.0, 2.0, 6.0]);
    }
}
