//! The recurrent weights in panels, and their product with the states.
//!
//! At batch 1 a step's recurrent product `h·Rᵀ` is a matrix-vector
//! product over the whole of R (`G*H` rows of `H`: 256 KiB for an LSTM of
//! 128 units, 4 MiB for 512), so a step costs about the time to stream R
//! from the cache it sits in. Taken along R's rows, each output is a dot
//! product that ends in a horizontal sum; here R is read as panels of
//! [`PANEL`] gate columns instead, each depth-major (`panel[l * PANEL + j]`
//! is row `p * PANEL + j` of the part, column `l`; columns past the part
//! are zero). One pass over a state row then accumulates a whole panel's
//! outputs in registers: each depth step broadcasts one state element and
//! multiply-adds it into `PANEL / lanes` vectors (4 zmm, 8 ymm: enough
//! independent sums to cover the FMA latency), every load a full vector
//! of the stream, no horizontal sums. Batch rows go `ROWS` at a time
//! through a panel, so they share its loads.
//!
//! Each output is its depth sum in order, one multiply-add per step, so
//! the result does not depend on how many rows share a panel; the vector
//! kernels round each multiply-add once (FMA), the portable loop twice.
//!
//! A direction's product comes in one part (G*H columns), or for GRU
//! without `linear_before_reset` two (`z, r`, then the h gate, whose input
//! `r * h` needs the step's reset gate first); each part starts a panel.
//! The packing is this module's [`pack_parts`] whether the compiler runs it
//! once on a constant R (`RnnParams::packed_recurrent`) or the kernel on
//! every call, into scratch, so the layout has one definition.

use super::super::real::Real;
use crate::generic::vector_math::MathLanes;
use core::ops::Range;

/// Gate columns of one panel.
pub const PANEL: usize = 64;

/// One part of a direction's packed R: `cols` gate columns, `depth` deep.
#[derive(Clone, Copy)]
pub(crate) struct Panels<T> {
    pub ptr: *const T,
    pub cols: usize,
    pub depth: usize,
}

/// Elements of `cols` columns packed `depth` deep (whole panels).
pub(crate) fn panels_elems(cols: usize, depth: usize) -> usize {
    cols.div_ceil(PANEL).saturating_mul(PANEL).saturating_mul(depth)
}

/// Packs each part `(first, cols)` of the rows of `r` (`depth` wide) into
/// consecutive panels at `dst`.
///
/// # Safety
/// `r` holds the parts' rows; `dst` the sum of their [`panels_elems`].
pub(crate) unsafe fn pack_parts<T: Real>(r: *const T, parts: &[(usize, usize)], depth: usize, mut dst: *mut T) {
    for &(first, cols) in parts {
        for p in 0..cols.div_ceil(PANEL) {
            for l in 0..depth {
                for j in 0..PANEL {
                    let col = p * PANEL + j;
                    *dst.add(l * PANEL + j) = if col < cols { *r.add((first + col) * depth + l) } else { T::ZERO };
                }
            }
            dst = dst.add(PANEL * depth);
        }
    }
}

/// `out[b][j] = Σ_l a[b][l] · R[j][l]` for `rows` batch rows of a part.
#[derive(Clone, Copy)]
pub(crate) struct Product<T> {
    pub panels: Panels<T>,
    pub rows: usize,
    /// Rows of `panels.depth` elements, one after another.
    pub a: *const T,
    /// Rows `out_stride` apart, `panels.cols` written in each.
    pub out: *mut T,
    pub out_stride: usize,
}

impl<T> Product<T> {
    /// Columns of panel `p` that are in the part.
    fn valid_columns(&self, p: usize) -> usize {
        (self.panels.cols - p * PANEL).min(PANEL)
    }

    /// Where panel `p` starts.
    unsafe fn panel(&self, p: usize) -> *const T {
        self.panels.ptr.add(p * PANEL * self.panels.depth)
    }

    /// Panels in the part.
    pub(crate) fn panel_count(&self) -> usize {
        self.panels.cols.div_ceil(PANEL)
    }

    /// The product of panels `range` alone: their columns of `out`.
    ///
    /// # Safety
    /// `range` lies within the part's panels.
    pub(crate) unsafe fn of_panels(&self, range: Range<usize>) -> Product<T> {
        let first = range.start * PANEL;
        let cols = (range.end * PANEL).min(self.panels.cols).saturating_sub(first);
        let panels = Panels { ptr: self.panel(range.start), cols, depth: self.panels.depth };
        Product { panels, rows: self.rows, a: self.a, out: self.out.add(first), out_stride: self.out_stride }
    }
}

/// The product in plain loops (f64, and f32 where there are no vector
/// kernels).
///
/// # Safety
/// The pointers hold what [`Product`] says.
#[inline(always)]
pub(crate) unsafe fn product<T: Real>(q: &Product<T>) {
    let depth = q.panels.depth;
    for p in 0..q.panels.cols.div_ceil(PANEL) {
        let panel = q.panel(p);
        for b in 0..q.rows {
            let a = q.a.add(b * depth);
            let mut acc = [T::ZERO; PANEL];
            for l in 0..depth {
                let (x, w) = (*a.add(l), panel.add(l * PANEL));
                for (j, sum) in acc.iter_mut().enumerate() {
                    *sum = *sum + x * *w.add(j);
                }
            }
            let out = q.out.add(b * q.out_stride + p * PANEL);
            core::ptr::copy_nonoverlapping(acc.as_ptr(), out, q.valid_columns(p));
        }
    }
}

/// The product in vectors `V`, `VECS` of them per panel row, `ROWS`
/// batch rows at a time.
///
/// # Safety
/// The pointers hold what [`Product`] says; the CPU has `V`'s instructions.
#[inline(always)]
pub(crate) unsafe fn product_lanes<V: MathLanes, const VECS: usize, const ROWS: usize>(q: &Product<f32>) {
    const { assert!(VECS * V::LANES == PANEL) };
    let grouped = q.rows / ROWS * ROWS;
    for p in 0..q.panels.cols.div_ceil(PANEL) {
        for b in (0..grouped).step_by(ROWS) {
            panel_rows::<V, VECS, ROWS>(q, p, b);
        }
        for b in grouped..q.rows {
            panel_rows::<V, VECS, 1>(q, p, b);
        }
    }
}

/// Panel `p` times batch rows `first..first + ROWS`, the sums in registers.
#[inline(always)]
unsafe fn panel_rows<V: MathLanes, const VECS: usize, const ROWS: usize>(q: &Product<f32>, p: usize, first: usize) {
    let depth = q.panels.depth;
    let panel = q.panel(p);
    let a: [*const f32; ROWS] = core::array::from_fn(|r| q.a.add((first + r) * depth));
    let mut acc = [[V::splat(0.0); VECS]; ROWS];
    for l in 0..depth {
        let w = panel.add(l * PANEL);
        let x: [V; ROWS] = core::array::from_fn(|r| V::splat(*a[r].add(l)));
        let w: [V; VECS] = core::array::from_fn(|v| V::load(w.add(v * V::LANES)));
        for (sums, &x) in acc.iter_mut().zip(&x) {
            for (sum, &w) in sums.iter_mut().zip(&w) {
                *sum = V::mul_add(x, w, *sum);
            }
        }
    }
    let valid = q.valid_columns(p);
    for (r, sums) in acc.iter().enumerate() {
        let out = q.out.add((first + r) * q.out_stride + p * PANEL);
        if valid == PANEL {
            sums.iter().enumerate().for_each(|(v, &s)| V::store(out.add(v * V::LANES), s));
        } else {
            let mut row = [0.0f32; PANEL];
            sums.iter().enumerate().for_each(|(v, &s)| V::store(row.as_mut_ptr().add(v * V::LANES), s));
            core::ptr::copy_nonoverlapping(row.as_ptr(), out, valid);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::cells::GateMath;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec, testable_isas, with_level};
    use std::vec;

    /// Two parts of rows of `r` (`depth` wide) times `rows` state rows, at
    /// every level, against dot products in f64: panel tails (1, 63, 65,
    /// 130 columns), row groups and their remainders (1 to 6 rows), odd
    /// depths; the columns between the parts' outputs are left alone.
    #[test]
    fn packed_product_matches_dot_products() {
        for (cols, depth) in [(1, 1), (63, 7), (64, 37), (65, 16), (130, 37), (200, 130)] {
            let parts = [(0, cols), (cols, cols / 2)];
            let total = cols + cols / 2;
            let r = rand_vec(total * depth, 1);
            let mut packed = vec![f32::NAN; parts.iter().map(|&(_, c)| panels_elems(c, depth)).sum()];
            unsafe { pack_parts(r.as_ptr(), &parts, depth, packed.as_mut_ptr()) };
            for rows in 1..=6 {
                let a = rand_vec(rows * depth, 2);
                let stride = total + 3;
                let mut want = vec![-7.0f32; rows * stride];
                for b in 0..rows {
                    for j in 0..total {
                        let dot: f64 = (0..depth).map(|l| a[b * depth + l] as f64 * r[j * depth + l] as f64).sum();
                        want[b * stride + j] = dot as f32;
                    }
                }
                for isa in testable_isas() {
                    let mut got = vec![-7.0f32; rows * stride];
                    let mut at = packed.as_ptr();
                    for (first, part_cols) in parts {
                        let panels = Panels { ptr: at, cols: part_cols, depth };
                        let out = unsafe { got.as_mut_ptr().add(first) };
                        let q = Product { panels, rows, a: a.as_ptr(), out, out_stride: stride };
                        with_level(isa, || unsafe { f32::recurrent_product(&q) });
                        at = unsafe { at.add(panels_elems(part_cols, depth)) };
                    }
                    assert_close(&got, &want, 1e-5);
                }
            }
        }
    }
}
