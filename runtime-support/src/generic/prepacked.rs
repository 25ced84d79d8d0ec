//! Gemm with the A operand packed ahead of time (convolution weights).
//!
//! [`crate::generic::gemm::blocked`] packs A and B on every call. When A is a
//! constant (a convolution's filters) the compiler packs it once, at compile
//! time, with [`pack_a`] — this very code — into [`PANEL_ROWS`]-row panels,
//! each `k` deep and depth-major (`panel[l * PANEL_ROWS + i]`), and stores
//! the panels in the object's read-only data. A depth slice of a panel is
//! then one contiguous run, so any slicing the driver picks reads it in place.
//!
//! The driver here ([`prepacked`]) therefore only packs B, and packs each B
//! block exactly once: its loops are B blocks (`NC` columns), depth slices
//! (`KC`), A blocks (`MC` rows, read in place from the packed weights), the
//! `NR`-wide B panels of the block (into L1), and the A panels. B arrives
//! through a [`BSource`], so a convolution's im2col matrix is generated
//! straight into packed panels and never materialised in the workspace.
//!
//! When a tile has seen its last depth slice, `finish` runs on each of its
//! rows while they are still in L1: the bias, a residual and the activation
//! of a convolution, without another pass over the output. A finish that
//! is a [`TileEnd`] (bias, residual, Relu/Clip/LeakyRelu) is applied by
//! the micro-kernel in registers before the store instead
//! ([`MicroKernel::finished_tile`], the same bits).
//!
//! A `B` that is a unit-stride matrix in memory gets the same treatment as
//! in [`crate::generic::gemm::blocked`]: its panels are packed by the first
//! tile over them ([`MicroKernel::packing_tile`]), and the tiles prefetch
//! the rows the next block reads. The work is cut into [`Task`]s: a column
//! block with its own packed B, or, when threads split the rows of a
//! single B block, that block packed once per depth slice by `Pack` tasks
//! and multiplied by row ranges (`Slice`). Each task runs through the
//! micro-kernel's [`MicroKernel::prepacked_task`], compiled for its
//! instruction set, so the packing and finishing code inlined into it is
//! vectorised for that instruction set too.

use super::gemm::{
    pack_a_panels, pack_b_block, pack_b_panel, Aligned, BlockAhead, Lookahead, MatMut, MatRef, MicroKernel, PANEL_ROWS,
};
use crate::isa::choose::sgemm_prepacked_with;
use crate::isa::{prefetch_floats, Isa};
use crate::parallel::{share, Parallel};
use core::ops::Range;

/// Floats of the packed B block (256 KiB of stack, sits in L2).
const B_BUF: usize = 64 * 1024;
/// Widest B block: bounds the row buffer a [`BSource`] may use.
pub const MAX_BLOCK_COLUMNS: usize = 2048;
/// Outputs larger than this (a core's L2) are prefetched a tile ahead:
/// their rows are far apart and miss the caches, and the hardware
/// prefetchers do not follow a tile's short row segments.
pub(crate) const PREFETCHED_OUTPUT_BYTES: usize = 512 * 1024;

/// Floats of `m x k` packed by [`pack_a`] (rows padded to whole panels).
pub fn packed_a_len(m: usize, k: usize) -> usize {
    m.div_ceil(PANEL_ROWS) * PANEL_ROWS * k
}

/// Packs `a` (`m x k`) into `dst` ([`packed_a_len`] floats): panels of
/// [`PANEL_ROWS`] rows, each depth-major over all `k`, rows past `m` zero.
///
/// # Safety
/// Every element of `a` must be readable and `dst` hold `packed_a_len(m, k)` floats.
pub unsafe fn pack_a(m: usize, k: usize, a: MatRef, dst: *mut f32) {
    pack_a_panels(m, k, a, 0, 0, dst);
}

/// Where the B operand comes from: anything that can write a block of it as
/// consecutive `nr`-column panels, depth-major (`panel[l * nr + j]`),
/// columns past the matrix zero.
pub trait BSource {
    /// Packs rows `row0..row0 + kc` and columns `col0..col0 + nc` (`nc` at
    /// most [`MAX_BLOCK_COLUMNS`]) into `dst` (`nc.div_ceil(nr) * nr * kc` floats).
    ///
    /// # Safety
    /// The rows and columns are inside the matrix; `dst` is writable.
    unsafe fn pack(&self, kc: usize, nc: usize, row0: usize, col0: usize, nr: usize, dst: *mut f32);

    /// B as a matrix in memory, if it is one: the tiles then prefetch the
    /// next block's rows (see [`BlockAhead`]).
    #[inline(always)]
    fn in_memory(&self) -> Option<MatRef> {
        None
    }
}

/// A strided matrix in memory.
impl BSource for MatRef {
    #[inline(always)]
    unsafe fn pack(&self, kc: usize, nc: usize, row0: usize, col0: usize, nr: usize, dst: *mut f32) {
        pack_b_block(kc, nc, *self, row0, col0, nr, dst)
    }

    #[inline(always)]
    fn in_memory(&self) -> Option<MatRef> {
        Some(*self)
    }
}

/// What runs on each finished row segment of the product, `row` being
/// `y[i][j0..j0 + row.len()]`. A trait rather than a closure so that its
/// code is inlined (`#[inline(always)]`) into each micro-kernel's task,
/// compiled for the kernel's instruction set; any `Fn(i, j0, row)` is one.
pub trait FinishRow {
    fn finish(&self, i: usize, j0: usize, row: &mut [f32]);

    /// Called before the last depth slice of a tile that `finish` will
    /// then see, so that it can start fetching what it will read for row
    /// `i`, columns `j0..j0 + len` (a residual), while the tile computes.
    #[inline(always)]
    fn prefetch(&self, _i: usize, _j0: usize, _len: usize) {}

    /// The same finish for the whole tile whose first element is row `i0`,
    /// column `j0`, when it is a [`TileEnd`] (then `finish` is not called
    /// for the tile's rows).
    #[inline(always)]
    fn tile_end(&self, _i0: usize, _j0: usize) -> Option<TileEnd> {
        None
    }
}

/// A finish simple enough for a micro-kernel to apply to a whole tile in
/// registers, before it stores it: `y = act((y + bias[i]) + residual[i][j])`
/// with each part optional, the same arithmetic, in the same order, as the
/// row-at-a-time finish it replaces (so the same bits).
#[derive(Clone, Copy, Debug)]
pub struct TileEnd {
    /// The tile's first row's bias (null: none); row `i` adds `bias[i]`.
    pub bias: *const f32,
    /// The tile's first residual element (null: none); row `i` adds
    /// `residual[i * residual_rs + j]`.
    pub residual: *const f32,
    pub residual_rs: isize,
    pub activation: TileActivation,
}

/// The activations a [`TileEnd`] applies, each a compare and a select.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TileActivation {
    None,
    /// `v > hi ? hi : v`, then `v < lo ? lo : that` (Relu is `0, +inf`; NaN stays).
    Clamp {
        lo: f32,
        hi: f32,
    },
    /// `v < 0 ? v * slope : v`.
    Leaky {
        slope: f32,
    },
}

impl TileActivation {
    #[inline(always)]
    pub fn apply(self, v: f32) -> f32 {
        match self {
            TileActivation::None => v,
            TileActivation::Clamp { lo, hi } => {
                let high = if v > hi { hi } else { v };
                if v < lo {
                    lo
                } else {
                    high
                }
            }
            TileActivation::Leaky { slope } => {
                if v < 0.0 {
                    v * slope
                } else {
                    v
                }
            }
        }
    }
}

impl TileEnd {
    /// Applies the finish to `rows x cols` of a stored tile at `y`, element
    /// by element (kernels without a register version).
    ///
    /// # Safety
    /// The tile and the residual rows are readable and `y`'s writable.
    #[inline(always)]
    pub unsafe fn apply(&self, y: *mut f32, rs: isize, rows: usize, cols: usize) {
        for i in 0..rows {
            let row = core::slice::from_raw_parts_mut(y.offset(i as isize * rs), cols);
            let bias = (!self.bias.is_null()).then(|| *self.bias.add(i));
            let residual = self.residual.wrapping_offset(i as isize * self.residual_rs);
            for (j, v) in row.iter_mut().enumerate() {
                let mut x = *v;
                if let Some(b) = bias {
                    x += b;
                }
                if !self.residual.is_null() {
                    x += *residual.add(j);
                }
                *v = self.activation.apply(x);
            }
        }
    }
}

impl<F: Fn(usize, usize, &mut [f32])> FinishRow for F {
    #[inline(always)]
    fn finish(&self, i: usize, j0: usize, row: &mut [f32]) {
        self(i, j0, row)
    }
}

/// `y = a * b`, then `finish(i, j0, row)` on every finished row segment
/// `y[i][j0..j0 + row.len()]`, with `a` packed by [`pack_a`] and micro-kernel
/// `K`. `y` is unit-stride in columns. The work is split into tasks run
/// through `parallel` (see [`crate::parallel`]): column blocks, and with
/// threads narrower ones and ranges of A panels as well; each task packs
/// its own B block, and no output depends on how the work was split.
///
/// # Safety
/// `a` holds `packed_a_len(m, k)` floats; `b` is `k x n`; `y`'s `m x n`
/// elements are writable and overlap neither; `finish` and `b` may be used
/// from several threads at once; `parallel` as [`Parallel::for_each`]; the
/// CPU has `K`'s features.
#[allow(clippy::too_many_arguments)]
pub unsafe fn prepacked<K: MicroKernel, B: BSource, F: FinishRow>(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    b: &B,
    y: MatMut,
    finish: &F,
    parallel: *const Parallel,
) {
    const {
        assert!(K::KC * K::NR <= B_BUF && PANEL_ROWS.is_multiple_of(K::MR));
    }
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            let row = core::slice::from_raw_parts_mut(y.ptr.offset(i as isize * y.rs), n);
            row.fill(0.0);
            finish.finish(i, 0, row);
        }
        return;
    }
    let kc_max = K::depth_slice(k);
    let nc_max = (B_BUF / kc_max / K::NR * K::NR).clamp(K::NR, MAX_BLOCK_COLUMNS / K::NR * K::NR);
    let product = Product {
        m,
        n,
        k,
        a,
        b,
        y,
        finish,
        kc_max,
        mc_max: (K::A_BLOCK / kc_max / PANEL_ROWS * PANEL_ROWS).max(PANEL_ROWS),
        prefetch_output: m.saturating_mul(n).saturating_mul(4) > PREFETCHED_OUTPUT_BYTES,
    };
    // Column blocks of (nearly) equal whole B panels, at most `nc_max`
    // wide. With threads, more and narrower blocks first (they cost
    // nothing), then row ranges of at least MIN_PART_PANELS panels (each
    // packs its own copy of the B block, so only where the arithmetic
    // dwarfs that); equal tasks keep the threads finishing together.
    let panels = m.div_ceil(PANEL_ROWS);
    let column_panels = n.div_ceil(K::NR);
    let mut column_blocks = n.div_ceil(nc_max);
    let mut row_parts = 1;
    if Parallel::is_threaded(parallel) {
        column_blocks = column_blocks.max(TASKS.min(column_panels / MIN_BLOCK_PANELS));
        row_parts = TASKS.div_ceil(column_blocks).min(panels / MIN_PART_PANELS).max(1);
    }
    let rows = |part: usize| {
        let panel_range = share(panels, row_parts, part);
        panel_range.start * PANEL_ROWS..m.min(panel_range.end * PANEL_ROWS)
    };
    if row_parts > 1 && column_blocks == 1 {
        // One B block read by every row range: packed once per depth slice
        // into a block all tasks share (its panels split over the threads),
        // then each row range multiplies it.
        let mut b_buf = core::mem::MaybeUninit::<Aligned<B_BUF>>::uninit();
        let b_pack = b_buf.as_mut_ptr() as *mut f32;
        let pack_parts = column_panels.min(TASKS);
        for pc in (0..k).step_by(kc_max) {
            Parallel::for_each(parallel, pack_parts, |part| {
                K::prepacked_task(&product, Task::Pack { b_pack, pc, panels: share(column_panels, pack_parts, part) });
            });
            Parallel::for_each(parallel, row_parts, |part| {
                K::prepacked_task(&product, Task::Slice { b_pack, pc, rows: rows(part) });
            });
        }
        return;
    }
    Parallel::for_each(parallel, column_blocks * row_parts, |task| {
        let block = share(column_panels, column_blocks, task / row_parts);
        let columns = block.start * K::NR..n.min(block.end * K::NR);
        K::prepacked_task(&product, Task::Block { columns, rows: rows(task % row_parts) });
    });
}

/// One task of [`prepacked`].
#[derive(Clone, Debug)]
pub enum Task {
    /// Output rows `rows` (whole A panels) of column block `columns`, all
    /// depth slices, with its own packed B block.
    Block { columns: Range<usize>, rows: Range<usize> },
    /// Packs B panels `panels` (of all the columns) of depth slice `pc`
    /// into the shared block `b_pack`.
    Pack { b_pack: *mut f32, pc: usize, panels: Range<usize> },
    /// Output rows `rows`, all columns, depth slice `pc`, from the shared
    /// block `b_pack` (packed by the slice's `Pack` tasks).
    Slice { b_pack: *mut f32, pc: usize, rows: Range<usize> },
}

/// Tasks [`prepacked`] aims for when it has threads (enough to balance a few).
const TASKS: usize = 8;
/// Narrowest column block it makes for threads, in B panels: one, so that
/// a product of few columns (a 1×1 convolution on a 14×14 or 7×7 map:
/// 7 or 2 panels) still makes enough tasks to balance.
const MIN_BLOCK_PANELS: usize = 1;
/// Fewest A panels in a row range it makes for threads (DenseNet's 128-row
/// products split in up to four).
const MIN_PART_PANELS: usize = 4;

/// One product of [`prepacked`], which its tasks share.
pub struct Product<'a, B, F> {
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    b: &'a B,
    y: MatMut,
    finish: &'a F,
    kc_max: usize,
    mc_max: usize,
    /// Whether the output is larger than [`PREFETCHED_OUTPUT_BYTES`].
    prefetch_output: bool,
}

impl<B: BSource, F: FinishRow> Product<'_, B, F> {
    /// Runs one task. Loops of a block: depth slices (the B block packed
    /// once per slice), then [`Product::slice`]. Inlined into each
    /// micro-kernel's [`MicroKernel::prepacked_task`], which is compiled
    /// for its ISA.
    ///
    /// # Safety
    /// As [`prepacked`]; the CPU has `K`'s features; a `Slice` follows the
    /// `Pack` tasks of its depth slice, and no `Pack` runs with it.
    #[inline(always)]
    pub unsafe fn run<K: MicroKernel>(&self, task: Task) {
        match task {
            Task::Block { columns, rows } => {
                let mut b_buf = core::mem::MaybeUninit::<Aligned<B_BUF>>::uninit();
                let b_pack = b_buf.as_mut_ptr() as *mut f32;
                // A unit-stride matrix is packed by the tiles themselves.
                let pack_in_tiles = self.b.in_memory().filter(|b| b.cs == 1);
                for pc in (0..self.k).step_by(self.kc_max) {
                    let kc = self.kc_max.min(self.k - pc);
                    if pack_in_tiles.is_none() {
                        self.b.pack(kc, columns.len(), pc, columns.start, K::NR, b_pack);
                    }
                    let next = (pc + kc < self.k).then(|| BlockAhead {
                        row0: pc + kc,
                        rows: self.kc_max.min(self.k - pc - kc),
                        col0: columns.start,
                        cols: columns.len(),
                    });
                    self.slice::<K>(b_pack, pc, columns.clone(), rows.clone(), next, pack_in_tiles);
                }
            }
            Task::Pack { b_pack, pc, panels } => {
                let kc = self.kc_max.min(self.k - pc);
                let (j0, j1) = (panels.start * K::NR, self.n.min(panels.end * K::NR));
                if j1 > j0 {
                    self.b.pack(kc, j1 - j0, pc, j0, K::NR, b_pack.add(panels.start * kc * K::NR));
                }
            }
            Task::Slice { b_pack, pc, rows } => self.slice::<K>(b_pack, pc, 0..self.n, rows, None, None),
        }
    }

    /// Depth slice `pc` of output rows `rows` and columns `columns`, B
    /// packed in `b_pack` (the columns' panels): loops A blocks, B panels
    /// (into L1), A panels; the finish on the last slice. The tiles prefetch
    /// block `next` when B is in memory. With `pack_from` (B itself, unit
    /// stride), `b_pack` is not packed yet: the first A block's tiles pack
    /// it (see [`MicroKernel::packing_tile`]).
    #[inline(always)]
    unsafe fn slice<K: MicroKernel>(
        &self,
        b_pack: *mut f32,
        pc: usize,
        columns: Range<usize>,
        rows: Range<usize>,
        next: Option<BlockAhead>,
        pack_from: Option<MatRef>,
    ) {
        let (mr, nr) = (K::MR, K::NR);
        let (m, n, k, a, y) = (self.m, self.n, self.k, self.a, self.y);
        let kc = self.kc_max.min(k - pc);
        let (first, last) = (pc == 0, pc + kc == k);
        let ahead_in = next.zip(self.b.in_memory());
        let tiles = rows.len().div_ceil(mr) * columns.len().div_ceil(nr);
        let mut t = 0;
        for ic in rows.clone().step_by(self.mc_max) {
            let mc = self.mc_max.min(rows.end - ic);
            for (jp, jc) in columns.clone().step_by(nr).enumerate() {
                let cols = nr.min(n - jc);
                let b_panel = b_pack.add(jp * kc * nr);
                // The panel's source when its first tile packs it.
                let mut packing = pack_from.filter(|_| ic == rows.start);
                if let Some(src) = packing.filter(|_| cols < nr || m - ic < mr) {
                    pack_b_panel(kc, cols, src, pc, jc, nr, b_panel);
                    packing = None;
                }
                for i0 in (ic..ic + mc).step_by(mr) {
                    let valid_rows = mr.min(m - i0);
                    let a_panel = a.add(i0 / PANEL_ROWS * PANEL_ROWS * k + pc * PANEL_ROWS + i0 % PANEL_ROWS);
                    let yt = y.ptr.offset(i0 as isize * y.rs + jc as isize);
                    // The next tile's output rows (when large), and on the
                    // last slice what its finish reads, while this one
                    // computes.
                    let next = (i0 + mr).min(ic + mc)..(i0 + 2 * mr).min(ic + mc);
                    for i in next {
                        if self.prefetch_output {
                            prefetch_floats(y.ptr.wrapping_offset(i as isize * y.rs + jc as isize), cols);
                        }
                        if last {
                            self.finish.prefetch(i, jc, cols);
                        }
                    }
                    let ahead = ahead_in.as_ref().map_or(Lookahead::NONE, |(nb, b)| nb.lookahead(*b, t, tiles));
                    t += 1;
                    let end = if last { self.finish.tile_end(i0, jc) } else { None };
                    if let Some(src) = packing.take() {
                        let from = src.ptr.offset(pc as isize * src.rs + jc as isize);
                        K::packing_tile(kc, a_panel, from, src.rs, b_panel, yt, y.rs, 1.0, !first, end.as_ref(), ahead);
                    } else if let Some(end) = &end {
                        K::finished_tile(kc, a_panel, b_panel, yt, y.rs, valid_rows, cols, !first, end);
                    } else {
                        K::tile(kc, a_panel, b_panel, yt, y.rs, valid_rows, cols, 1.0, !first, ahead);
                    }
                    if last && end.is_none() {
                        for i in 0..valid_rows {
                            let row = core::slice::from_raw_parts_mut(yt.offset(i as isize * y.rs), cols);
                            self.finish.finish(i0 + i, jc, row);
                        }
                    }
                }
            }
        }
    }
}

/// [`prepacked`] with the fastest micro-kernel this CPU has
/// ([`Isa::best`]).
///
/// # Safety
/// As [`prepacked`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_prepacked<B: BSource, F: FinishRow>(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    b: &B,
    y: MatMut,
    finish: &F,
    parallel: *const Parallel,
) {
    sgemm_prepacked_with(Isa::best(), m, n, k, a, b, y, finish, parallel)
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec, reversed, testable_isas};
    use std::vec;

    /// Bias, residual and activation, applied row by row or (when `tiled`)
    /// handed to the kernels as a [`TileEnd`].
    struct BiasResidual<'a> {
        bias: &'a [f32],
        residual: &'a [f32],
        n: usize,
        activation: TileActivation,
        tiled: bool,
    }

    impl FinishRow for BiasResidual<'_> {
        fn finish(&self, i: usize, j0: usize, row: &mut [f32]) {
            let residual = &self.residual[i * self.n + j0..];
            for (v, &r) in row.iter_mut().zip(residual) {
                *v = self.activation.apply(*v + self.bias[i] + r);
            }
        }

        fn tile_end(&self, i0: usize, j0: usize) -> Option<TileEnd> {
            self.tiled.then(|| TileEnd {
                bias: self.bias[i0..].as_ptr(),
                residual: self.residual[i0 * self.n + j0..].as_ptr(),
                residual_rs: self.n as isize,
                activation: self.activation,
            })
        }
    }

    /// Every kernel's finished tiles give the bits of the row-by-row
    /// finish, for each activation, with NaN, infinities and signed zeros
    /// in the residual, edge tiles (of each row count a kernel computes:
    /// 5, 3 and 2 rows over 8-row panels; 13, 18 and 17 columns) and two
    /// depth slices.
    #[test]
    fn finished_tiles_match_the_row_finish_bits() {
        for (m, n, k) in [(21, 45, 300), (19, 50, 40), (2, 17, 3)] {
            finished_tiles_match_on(m, n, k);
        }
    }

    fn finished_tiles_match_on(m: usize, n: usize, k: usize) {
        let a = rand_vec(m * k, 5);
        let b = rand_vec(k * n, 6);
        let bias = rand_vec(m, 7);
        let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, 1e30];
        let residual: std::vec::Vec<f32> = rand_vec(m * n, 8)
            .iter()
            .enumerate()
            .map(|(i, &v)| if i % 7 == 0 { specials[i / 7 % 6] } else { v })
            .collect();
        let mut packed = vec![0.0f32; packed_a_len(m, k)];
        unsafe { pack_a(m, k, MatRef { ptr: a.as_ptr(), rs: k as isize, cs: 1 }, packed.as_mut_ptr()) };
        let activations = [
            TileActivation::None,
            TileActivation::Clamp { lo: 0.0, hi: f32::INFINITY },
            TileActivation::Clamp { lo: -0.5, hi: 0.5 },
            TileActivation::Clamp { lo: 1.0, hi: -1.0 },
            TileActivation::Leaky { slope: 0.1 },
        ];
        for kernel in testable_isas() {
            for activation in activations {
                let run = |tiled: bool| {
                    let finish = BiasResidual { bias: &bias, residual: &residual, n, activation, tiled };
                    let mut got = vec![f32::NAN; m * n];
                    let bm = MatRef { ptr: b.as_ptr(), rs: n as isize, cs: 1 };
                    let y = MatMut { ptr: got.as_mut_ptr(), rs: n as isize, cs: 1 };
                    let serial = Parallel::SERIAL;
                    unsafe { sgemm_prepacked_with(kernel, m, n, k, packed.as_ptr(), &bm, y, &finish, &serial) };
                    got
                };
                let (rows, tiles) = (run(false), run(true));
                let same = rows.iter().zip(&tiles).all(|(r, t)| r.to_bits() == t.to_bits() || r.is_nan() && t.is_nan());
                assert!(same, "{kernel:?} {activation:?} {m}x{n}x{k}");
            }
        }
    }

    /// The finish [`check_naive_product`] hands the drivers: adds each
    /// row's index, so that a row finished as another shows.
    type RowTag = fn(usize, usize, &mut [f32]);

    fn tag_rows(i: usize, _j0: usize, row: &mut [f32]) {
        row.iter_mut().for_each(|v| *v += i as f32);
    }

    /// A pre-packed gemm under test, with [`prepacked`]'s arguments.
    type Driver<'a> = &'a dyn Fn(usize, usize, usize, *const f32, &MatRef, MatMut, &RowTag, *const Parallel);

    /// Every kernel, with edge tiles in both directions, several depth
    /// slices and B blocks, against a naive product plus a row-tagged
    /// finish; the tasks run in reverse (a threaded split) give the same
    /// bits.
    #[test]
    fn matches_naive_product() {
        for kernel in testable_isas() {
            let driver = |m, n, k, a, b: &MatRef, y, finish: &RowTag, parallel| unsafe {
                sgemm_prepacked_with(kernel, m, n, k, a, b, y, finish, parallel)
            };
            check_naive_product(kernel.name(), &driver);
        }
    }

    /// The driver in `K`'s layout with portable arithmetic ([`LayoutOf`]),
    /// on any host.
    pub(crate) fn check_layout<K: MicroKernel>(name: &str) {
        use crate::generic::gemm::tests::LayoutOf;
        let driver = |m, n, k, a, b: &MatRef, y, finish: &RowTag, parallel| unsafe {
            prepacked::<LayoutOf<K>, _, _>(m, n, k, a, b, y, finish, parallel)
        };
        check_naive_product(name, &driver);
    }

    fn check_naive_product(name: &str, driver: Driver) {
        // (300, 40, 600): threads split the rows and share one B block
        // per slice. (35, 50, 20): a last tile of 3 rows and 18 columns.
        for (m, n, k) in
            [(1, 1, 1), (8, 32, 16), (13, 37, 5), (70, 2100, 9), (17, 45, 700), (3, 5, 0), (300, 40, 600), (35, 50, 20)]
        {
            let a = rand_vec(m * k, 3);
            let b = rand_vec(k * n, 4);
            let mut want = vec![0.0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..k).map(|l| a[i * k + l] as f64 * b[l * n + j] as f64).sum();
                    want[i * n + j] = s as f32 + i as f32;
                }
            }
            let mut packed = vec![f32::NAN; packed_a_len(m, k)];
            unsafe { pack_a(m, k, MatRef { ptr: a.as_ptr(), rs: k as isize, cs: 1 }, packed.as_mut_ptr()) };
            let run = |parallel: Parallel| {
                let mut got = vec![f32::NAN; m * n];
                let bm = MatRef { ptr: b.as_ptr(), rs: n as isize, cs: 1 };
                let y = MatMut { ptr: got.as_mut_ptr(), rs: n as isize, cs: 1 };
                driver(m, n, k, packed.as_ptr(), &bm, y, &(tag_rows as RowTag), &parallel);
                got
            };
            let got = run(Parallel::SERIAL);
            assert_close(&got, &want, 1e-4);
            let shuffled = run(Parallel { run: Some(reversed), user: core::ptr::null_mut() });
            let same = got.iter().zip(&shuffled).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{name} {m}x{n}x{k}: the threaded split changed the bits");
        }
    }
}
