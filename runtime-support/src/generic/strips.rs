//! A constant B operand (MatMul and Gemm weights) packed ahead of time.
//!
//! The blocked sgemm packs B into `NR`-column panels on every call. For a
//! transformer's weights (`768 x 3072` and up, far larger than L2) the
//! packing reads each depth step of a panel from a row thousands of floats
//! away from the last: one cache and TLB miss per row and panel, which no
//! hardware prefetcher follows, and a large product ran at 60-70 % of the
//! speed it has on a B that fits in L2.
//!
//! So the compiler packs constant weights once, at compile time, with
//! [`pack_b_strips`] (this very code), into [`STRIP`]-column strips: strip
//! `s` holds columns `s * STRIP ..` for the whole depth, depth-major
//! (`strip[l * STRIP + j]`), strip after strip, the last zero-padded. Every
//! micro-kernel's `NR` is a multiple of [`STRIP`], so the layout does not
//! depend on the CPU the object runs on, and a panel's depth slice is
//! `NR / STRIP` contiguous runs that the hardware prefetchers stream: the
//! driver copies them into the panel ([`Strips::panel`]), or reads a
//! one-strip panel in place. The compiler leaves the weights of one or
//! two rows of A (a classifier head on one sample) as they are: the
//! few-rows product (`generic::gemv`) reads B once, in place, either way.

use super::gemm::{Lookahead, MatRef, LINE_FLOATS};

/// Columns of one strip.
pub const STRIP: usize = 8;

/// A B operand packed by [`pack_b_strips`]: `depth` rows, strips from `ptr`.
#[derive(Clone, Copy, Debug)]
pub struct Strips {
    pub ptr: *const f32,
    pub depth: usize,
}

/// Floats [`pack_b_strips`] writes for a `k x n` B.
pub const fn b_strips_len(k: usize, n: usize) -> usize {
    n.div_ceil(STRIP) * STRIP * k
}

/// Packs the `k x n` matrix `b` into strips at `dst` ([`b_strips_len`] floats).
///
/// # Safety
/// Every element of `b` is readable and `dst` holds `b_strips_len(k, n)` writable floats.
pub unsafe fn pack_b_strips(k: usize, n: usize, b: MatRef, dst: *mut f32) {
    let mut out = dst;
    for j0 in (0..n).step_by(STRIP) {
        for l in 0..k {
            for j in j0..j0 + STRIP {
                let v = if j < n { *b.ptr.offset(l as isize * b.rs + j as isize * b.cs) } else { 0.0 };
                out.write(v);
                out = out.add(1);
            }
        }
    }
}

/// The B panel a driver reads after the current one: depth steps
/// `row0..row0 + depth` of the strips from column `col0` on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StripsAhead {
    pub row0: usize,
    pub depth: usize,
    pub col0: usize,
}

impl Strips {
    /// What tile `t` of a panel (each tile `kc` depth steps) prefetches of
    /// the `nr`-column panel `next` (of `n` columns): the strips are read
    /// from memory once per panel, and a miss per line left to the
    /// hardware prefetchers cost a product of 64 rows against weights
    /// larger than L2 a third of its time. Whole strips lie one after the
    /// other, so the tiles take the panel's lines in turn, `kc` each; a
    /// depth slice of each strip is a run of its own, one per tile.
    pub(crate) fn lookahead(&self, next: StripsAhead, t: usize, kc: usize, n: usize, nr: usize) -> Lookahead {
        let strips = nr.min(n.saturating_sub(next.col0)).div_ceil(STRIP);
        let slice_lines = (next.depth * STRIP).div_ceil(LINE_FLOATS);
        // Prefetch addresses only: wrapping arithmetic, never read here.
        let start = self.ptr.wrapping_add((next.col0 / STRIP * self.depth + next.row0) * STRIP);
        let (first, lines) = if next.row0 == 0 && next.depth == self.depth {
            let (skipped, total) = (t * kc, strips * slice_lines);
            (start.wrapping_add(skipped * LINE_FLOATS), total.saturating_sub(skipped).min(kc))
        } else {
            (start.wrapping_add(t * self.depth * STRIP), if t < strips { slice_lines } else { 0 })
        };
        Lookahead { first, stride: LINE_FLOATS as isize, lines }
    }

    /// The strips from column `j` (a multiple of [`STRIP`]) on.
    pub fn from_column(self, j: usize) -> Strips {
        Strips { ptr: self.ptr.wrapping_add(j / STRIP * self.depth * STRIP), ..self }
    }

    /// Strip `s`'s depth steps from `row0` on.
    unsafe fn strip(&self, s: usize, row0: usize) -> *const f32 {
        self.ptr.add((s * self.depth + row0) * STRIP)
    }

    /// The `nr`-column B panel at columns `col0..col0 + cols` (of `n`), depth
    /// steps `row0..row0 + kc`, laid out as the blocked driver's panels
    /// (`panel[l * nr + j]`, zero past `cols`): the strip itself when the
    /// panel is one whole strip, else copied into `dst`.
    ///
    /// # Safety
    /// The strips cover the columns below `col0 + cols` and rows below
    /// `row0 + kc`; `dst` holds `kc * nr` writable floats; `col0` and `nr`
    /// are multiples of [`STRIP`].
    #[inline(always)]
    pub(crate) unsafe fn panel(
        &self,
        kc: usize,
        cols: usize,
        row0: usize,
        col0: usize,
        nr: usize,
        dst: *mut f32,
    ) -> *const f32 {
        let first = col0 / STRIP;
        if nr == STRIP {
            return self.strip(first, row0);
        }
        for q in 0..nr / STRIP {
            let target = dst.add(q * STRIP);
            if q * STRIP < cols {
                let src = self.strip(first + q, row0);
                for l in 0..kc {
                    core::ptr::copy_nonoverlapping(src.add(l * STRIP), target.add(l * nr), STRIP);
                }
            } else {
                for l in 0..kc {
                    core::ptr::write_bytes(target.add(l * nr), 0, STRIP);
                }
            }
        }
        dst
    }
}
