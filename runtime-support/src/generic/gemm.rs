//! Single-precision matrix multiply (`Y = alpha * A * B + beta * C`).
//!
//! Gemm is where models spend their time (MatMul, Gemm, and Conv via
//! im2col), so even the portable version is cache-blocked in the classic
//! three-level shape: loops over `NC`-wide column blocks and `KC`-deep slices
//! **pack** the operands into small contiguous stack buffers (panels of `MR`
//! rows of A and `NR` columns of B, zero-padded at the edges), a
//! **macro-kernel** walks the panels, and a register-blocked `MR x NR`
//! **micro-kernel** does the arithmetic. Packing turns every stride layout
//! (transposes, broadcasts) into the same unit-stride stream, so only the
//! micro-kernel ([`MicroKernel`]) has SIMD variants (`x86_64::avx2`,
//! `x86_64::avx512`); the drivers are shared.
//!
//! Every micro-kernel reads A in [`PANEL_ROWS`]-row panels, so weights can
//! be packed ahead of time without knowing the CPU (`prepacked`). A
//! unit-stride B panel is packed by the first tile over it, which stores
//! the source rows to the panel as it multiplies them
//! ([`MicroKernel::packing_tile`]: the AVX-512 and AVX2 kernels in their
//! depth loop, the portable one by copying first); any other B is packed a
//! block at a time. While a block's tiles compute, they prefetch the next
//! block's rows, one line per depth step ([`Lookahead`]). A tile stores
//! only its valid rows and columns, straight into the output, so edge
//! tiles need no copy; the AVX-512 kernel computes the fewest rows and
//! vectors that cover an edge tile.
//!
//! All matrices are described by a pointer and signed element strides, which
//! is how transposes and broadcast operands arrive from the compiler.
//!
//! The portable blocked gemm is generic over the compute type, so f64
//! (convolutions of f64 tensors) runs the same code as the f32 reference;
//! [`GemmElem::gemm`] picks the fastest implementation per type.

use super::prepacked::{BSource, FinishRow, Product, Task, TileEnd};
use super::real::Real;
use super::strips::{Strips, StripsAhead};
use crate::abi::conv::ConvParams;
use crate::isa::choose::sgemm_with;
use crate::isa::{prefetch_floats, Isa};
use core::mem::MaybeUninit;
use core::ops::Range;

/// Rows of A per micro-kernel call.
pub const MR: usize = 8;
/// Columns of B per micro-kernel call.
pub const NR: usize = 8;
/// Rows of A packed at once (multiple of `MR`).
const MC: usize = 64;
/// Depth of one packed slice.
const KC: usize = 128;
/// Columns of B packed at once (multiple of `NR`).
const NC: usize = 128;

/// Largest batch rank `onnxc_gemm_f32` accepts.
pub const GEMM_MAX_BATCH_RANK: usize = 6;

/// A read-only strided matrix: element `(i, j)` is at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<T = f32> {
    pub ptr: *const T,
    pub rs: isize,
    pub cs: isize,
}

impl<T: Copy> MatRef<T> {
    #[inline(always)]
    unsafe fn at(&self, i: usize, j: usize) -> T {
        *self.ptr.offset(i as isize * self.rs + j as isize * self.cs)
    }
}

/// A writable strided matrix, same addressing as [`MatRef`].
#[derive(Clone, Copy, Debug)]
pub struct MatMut<T = f32> {
    pub ptr: *mut T,
    pub rs: isize,
    pub cs: isize,
}

/// The B operand of the SIMD drivers: a strided matrix as it lies, or
/// weights packed ahead of time into strips ([`Strips`]).
#[derive(Clone, Copy, Debug)]
pub enum BMatrix {
    Strided(MatRef),
    Strips(Strips),
}

impl From<MatRef> for BMatrix {
    fn from(b: MatRef) -> BMatrix {
        BMatrix::Strided(b)
    }
}

/// Element types with a gemm: `y = alpha * a * b + beta * c`, same contract
/// as [`sgemm`]; and the SIMD variants the convolution kernels use where
/// this type and the CPU have one.
pub trait GemmElem: Real {
    /// # Safety
    /// As [`sgemm`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        m: usize,
        n: usize,
        k: usize,
        alpha: Self,
        a: MatRef<Self>,
        b: MatRef<Self>,
        beta: Self,
        c: Option<MatRef<Self>>,
        y: MatMut<Self>,
    );

    /// The column multiple at which [`GemmElem::gemm`] can be cut into
    /// parts that compute each output as the whole product does (its
    /// tile width), or `None` where that is not known: no cut.
    fn column_granule() -> Option<usize> {
        None
    }

    /// Depthwise 2-D channel planes `planes` by a SIMD kernel, then
    /// `finish(plane, output)` on each; false (nothing written) when there
    /// is none for these params.
    ///
    /// # Safety
    /// As `crate::x86_64::depthwise::depthwise_planes_avx512`, CPU aside.
    unsafe fn depthwise_planes(
        _p: &ConvParams,
        _x: *const Self,
        _w: *const Self,
        _bias: *const Self,
        _y: *mut Self,
        _planes: Range<usize>,
        _finish: impl Fn(usize, &mut [Self]),
    ) -> bool {
        false
    }
}

/// f32: the fastest micro-kernel this CPU has.
impl GemmElem for f32 {
    unsafe fn gemm(
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        a: MatRef,
        b: MatRef,
        beta: f32,
        c: Option<MatRef>,
        y: MatMut,
    ) {
        sgemm(m, n, k, alpha, a, b, beta, c, y)
    }

    fn column_granule() -> Option<usize> {
        Some(crate::isa::choose::sgemm_tile_columns(crate::isa::Isa::best()))
    }

    #[inline(always)]
    unsafe fn depthwise_planes(
        p: &ConvParams,
        x: *const f32,
        w: *const f32,
        bias: *const f32,
        y: *mut f32,
        planes: Range<usize>,
        finish: impl Fn(usize, &mut [f32]),
    ) -> bool {
        crate::isa::choose::depthwise_planes(p, x, w, bias, y, planes, finish)
    }
}

/// f64: the portable blocked gemm.
impl GemmElem for f64 {
    unsafe fn gemm(
        m: usize,
        n: usize,
        k: usize,
        alpha: f64,
        a: MatRef<f64>,
        b: MatRef<f64>,
        beta: f64,
        c: Option<MatRef<f64>>,
        y: MatMut<f64>,
    ) {
        gemm_generic(m, n, k, alpha, a, b, beta, c, y)
    }
}

/// The portable reference: [`sgemm`] with the scalar 8x8 micro-kernel, for
/// any compute type.
///
/// # Safety
/// As [`sgemm`].
#[allow(clippy::too_many_arguments)] // the BLAS-style signature reads best flat
pub unsafe fn gemm_generic<T: Real>(
    m: usize,
    n: usize,
    k: usize,
    alpha: T,
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: Option<MatRef<T>>,
    y: MatMut<T>,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        bias_only(m, n, beta, c, y);
        return;
    }

    // Packing buffers live on the stack (96 KiB); every element read by the
    // micro-kernel is written by packing first, so they need no zeroing.
    let mut a_buf = MaybeUninit::<[T; MC * KC]>::uninit();
    let mut b_buf = MaybeUninit::<[T; KC * NC]>::uninit();
    let a_pack = a_buf.as_mut_ptr() as *mut T;
    let b_pack = b_buf.as_mut_ptr() as *mut T;

    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            let b_len = nc.div_ceil(NR) * NR * kc;
            pack_b(kc, nc, b, pc, jc, b_pack);
            let b_panels = core::slice::from_raw_parts(b_pack, b_len);
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                let a_len = mc.div_ceil(MR) * MR * kc;
                pack_a(mc, kc, a, ic, pc, a_pack);
                let a_panels = core::slice::from_raw_parts(a_pack, a_len);
                let slice = DepthSlice { first: pc == 0, last: pc + kc == k };
                macro_kernel(mc, nc, kc, a_panels, b_panels, alpha, beta, c, y, ic, jc, slice);
            }
        }
    }
}

/// Packs `a[row0.., col0..]` (`mc x kc`) into `MR`-row panels, each stored
/// depth-major: `panel[l * MR + i]`. Rows past `mc` are zero.
unsafe fn pack_a<T: Real>(mc: usize, kc: usize, a: MatRef<T>, row0: usize, col0: usize, dst: *mut T) {
    let mut out = dst;
    for p in (0..mc).step_by(MR) {
        let rows = MR.min(mc - p);
        for l in 0..kc {
            for i in 0..MR {
                let v = if i < rows { a.at(row0 + p + i, col0 + l) } else { T::ZERO };
                out.write(v);
                out = out.add(1);
            }
        }
    }
}

/// Packs `b[row0.., col0..]` (`kc x nc`) into `NR`-column panels, each stored
/// depth-major: `panel[l * NR + j]`. Columns past `nc` are zero.
unsafe fn pack_b<T: Real>(kc: usize, nc: usize, b: MatRef<T>, row0: usize, col0: usize, dst: *mut T) {
    let mut out = dst;
    for p in (0..nc).step_by(NR) {
        let cols = NR.min(nc - p);
        for l in 0..kc {
            for j in 0..NR {
                let v = if j < cols { b.at(row0 + l, col0 + p + j) } else { T::ZERO };
                out.write(v);
                out = out.add(1);
            }
        }
    }
}

/// Which depth slice of a product a tile is: the first overwrites `y`,
/// later ones accumulate into it, and the last adds the bias, after the
/// whole sum (as a separate Add after the product would, so that fusing
/// the Add into the product keeps its bits).
#[derive(Clone, Copy, Debug)]
struct DepthSlice {
    first: bool,
    last: bool,
}

/// Runs the micro-kernel over every (A panel, B panel) pair of one packed
/// block and stores the valid part of each tile into `y` (see [`DepthSlice`]).
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel<T: Real>(
    mc: usize,
    nc: usize,
    kc: usize,
    a_panels: &[T],
    b_panels: &[T],
    alpha: T,
    beta: T,
    c: Option<MatRef<T>>,
    y: MatMut<T>,
    row0: usize,
    col0: usize,
    slice: DepthSlice,
) {
    for (jp, b_panel) in b_panels.chunks_exact(kc * NR).enumerate() {
        let j0 = jp * NR;
        let cols = NR.min(nc - j0);
        for (ip, a_panel) in a_panels.chunks_exact(kc * MR).enumerate() {
            let i0 = ip * MR;
            let rows = MR.min(mc - i0);
            let mut acc = [[T::ZERO; NR]; MR];
            micro_kernel(a_panel, b_panel, &mut acc);
            for (i, acc_row) in acc.iter().enumerate().take(rows) {
                let gi = row0 + i0 + i;
                for (j, &v) in acc_row.iter().enumerate().take(cols) {
                    store_element(v, alpha, beta, c, y, gi, col0 + j0 + j, slice);
                }
            }
        }
    }
}

/// Writes one accumulated product to `Y[gi][gj]`: on the first depth slice
/// `alpha * v`, on later slices `+= alpha * v`; then on the last one
/// `+= beta * C[gi][gj]` (bias optional).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn store_element<T: Real>(
    v: T,
    alpha: T,
    beta: T,
    c: Option<MatRef<T>>,
    y: MatMut<T>,
    gi: usize,
    gj: usize,
    slice: DepthSlice,
) {
    let dst = y.ptr.offset(gi as isize * y.rs + gj as isize * y.cs);
    let sum = if slice.first { alpha * v } else { *dst + alpha * v };
    *dst = match c {
        Some(c) if slice.last => sum + beta * c.at(gi, gj),
        _ => sum,
    };
}

/// `acc += a_panel * b_panel` for one `MR x kc` by `kc x NR` tile. Written so
/// the accumulators stay in registers and the inner loops auto-vectorise.
#[inline(always)]
fn micro_kernel<T: Real>(a_panel: &[T], b_panel: &[T], acc: &mut [[T; NR]; MR]) {
    for (av, bv) in a_panel.chunks_exact(MR).zip(b_panel.chunks_exact(NR)) {
        for i in 0..MR {
            let ai = av[i];
            for j in 0..NR {
                acc[i][j] = acc[i][j] + ai * bv[j];
            }
        }
    }
}

/// `y = alpha * a * b + beta * c` (or `+ 0` when `c` is `None`), with `a`
/// `m x k`, `b` `k x n`, `c` and `y` `m x n`, using the fastest
/// micro-kernel the CPU supports ([`Isa::best`]).
///
/// # Safety
/// Every addressed element of `a`, `b`, `c` must be readable and of `y`
/// writable; `y` must not overlap the inputs.
#[allow(clippy::too_many_arguments)]
#[inline]
pub unsafe fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef,
    b: MatRef,
    beta: f32,
    c: Option<MatRef>,
    y: MatMut,
) {
    sgemm_with(Isa::best(), m, n, k, alpha, a, b, beta, c, y)
}

// ---------------------------------------------------------------------------
// SIMD driver: the same pack -> macro-kernel -> micro-kernel structure, with
// blocking sized for the SIMD micro-kernels and a vector epilogue.
// ---------------------------------------------------------------------------

/// Floats of the packed A block, for every micro-kernel (192 KiB of stack).
const A_BUF: usize = 48 * 1024;
/// Floats of the packed B block: `KC x NC`, several `NR`-column panels
/// packed together (256 KiB of stack, sits in L2 next to the A block).
const B_BUF: usize = 64 * 1024;
/// Floats of the largest tile (edge tiles are computed into a stack tile).
const TILE_BUF: usize = 16 * 32;

/// `N` floats on a cache line boundary: the kernels' stack buffers.
#[repr(C, align(64))]
pub(crate) struct Aligned<const N: usize>(pub [f32; N]);

/// Rows of one packed A panel, for every micro-kernel: `panel[l * PANEL_ROWS + i]`.
/// One layout for all kernels lets the compiler pack weights ahead of time
/// without knowing which kernel the CPU will pick; a kernel with fewer rows
/// per tile covers a panel in several tiles.
pub const PANEL_ROWS: usize = 8;

/// Cache lines a tile asks for while it computes, one per depth step `l`
/// below `lines`: `first + l * stride` floats. [`blocked`] points them at
/// the B block it packs next, so that packing reads the cache, not memory.
/// A hint: a prefetch never faults, and a kernel may ignore it.
#[derive(Clone, Copy, Debug)]
pub struct Lookahead {
    pub first: *const f32,
    pub stride: isize,
    pub lines: usize,
}

impl Lookahead {
    pub const NONE: Lookahead = Lookahead { first: core::ptr::null(), stride: 0, lines: 0 };

    /// For a kernel that prefetches one address per depth step over `kc`
    /// steps: the first address and the bytes between two. The lines one
    /// per step; fewer contiguous lines than steps (a strip's slice) at a
    /// fraction of a line per step; otherwise `idle` (memory the tile reads
    /// from L1 anyway) and 0.
    pub fn per_step(&self, kc: usize, idle: *const f32) -> (*const f32, isize) {
        const LINE_BYTES: usize = LINE_FLOATS * 4;
        match self.lines {
            lines if lines >= kc => (self.first, self.stride * 4),
            lines if lines > 0 && self.stride == LINE_FLOATS as isize => {
                (self.first, (lines * LINE_BYTES / kc) as isize)
            }
            _ => (idle, 0),
        }
    }
}

/// How many depth steps ahead a [`MicroKernel::packing_tile`] prefetches
/// its source row: the rows are far apart, so no hardware prefetcher
/// follows them.
pub const PACK_AHEAD: isize = 16;

/// A register-blocked micro-kernel and its blocking parameters.
///
/// The driver packs A into [`PANEL_ROWS`]-row panels (`panel[l * PANEL_ROWS + i]`)
/// and B into `NR`-column panels (`panel[l * NR + j]`), both zero-padded at
/// the edges.
pub trait MicroKernel {
    /// Rows per tile (divides [`PANEL_ROWS`]).
    const MR: usize;
    /// Columns per tile (at most 32).
    const NR: usize;
    /// Floats of packed A per block (`MC x KC`, at most [`A_BUF`]): sized for L2.
    const A_BLOCK: usize;
    /// Deepest depth slice (`KC`; `KC * NR` at most [`B_BUF`]): one B panel sized for L1.
    const KC: usize;

    /// The depth slice for depth `k`: even slices of at most `KC` (k = 576
    /// -> 2 x 288 rather than 256 + 256 + 64). The slices fix the order of
    /// the sums, so every driver of this kernel cuts the same ones.
    fn depth_slice(k: usize) -> usize {
        k.div_ceil(k.div_ceil(Self::KC))
    }

    /// Multiplies `MR` rows of one A panel (`a[l * PANEL_ROWS + i]`, `kc`
    /// deep) by one `kc x NR` B panel and stores the first `rows` rows
    /// (`1..=MR`) and `cols` columns (`1..=NR`) of the tile:
    /// `y[i*rs + j] = alpha * acc[i][j]`, plus the previous `y[i*rs + j]`
    /// when `accumulate`. Rows and columns past them are neither read nor
    /// written, so edge tiles need no copy (and a kernel may skip the
    /// arithmetic of the rows past `rows`). `ahead` names cache lines to
    /// prefetch meanwhile (a kernel may ignore it).
    ///
    /// # Safety
    /// The panels hold `kc * PANEL_ROWS` and `kc * NR` floats; the `rows x cols`
    /// tile of `y` is writable (and readable when `accumulate`), columns unit-stride.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile(
        kc: usize,
        a: *const f32,
        b: *const f32,
        y: *mut f32,
        rs: isize,
        rows: usize,
        cols: usize,
        alpha: f32,
        accumulate: bool,
        ahead: Lookahead,
    );

    /// [`MicroKernel::tile`] for a whole tile (`MR` rows, `NR` columns)
    /// whose B panel is read from its unit-stride source `src` (depth step
    /// `l` at `src + l * src_rs`) and packed into `b` on the way, for the
    /// tiles after it to read. The copy rides on the tile's own loads
    /// instead of taking a pass of its own; the sums are the same. This
    /// default packs the panel first. With `end` (and `alpha = 1`), as
    /// [`MicroKernel::finished_tile`].
    ///
    /// # Safety
    /// As `tile` (and `finished_tile` with `end`); `kc` rows of `NR`
    /// floats are readable from `src`, and `b` holds `kc * NR` writable floats.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn packing_tile(
        kc: usize,
        a: *const f32,
        src: *const f32,
        src_rs: isize,
        b: *mut f32,
        y: *mut f32,
        rs: isize,
        alpha: f32,
        accumulate: bool,
        end: Option<&TileEnd>,
        ahead: Lookahead,
    ) {
        for l in 0..kc {
            core::ptr::copy_nonoverlapping(src.offset(l as isize * src_rs), b.add(l * Self::NR), Self::NR);
        }
        match end {
            Some(end) => Self::finished_tile(kc, a, b, y, rs, Self::MR, Self::NR, accumulate, end),
            None => Self::tile(kc, a, b, y, rs, Self::MR, Self::NR, alpha, accumulate, ahead),
        }
    }

    /// [`MicroKernel::tile`] with `alpha = 1` that applies `end` to the
    /// tile's `rows x cols` results before it stores them.
    ///
    /// # Safety
    /// As `tile`; `end`'s bias and residual rows hold the tile's rows.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn finished_tile(
        kc: usize,
        a: *const f32,
        b: *const f32,
        y: *mut f32,
        rs: isize,
        rows: usize,
        cols: usize,
        accumulate: bool,
        end: &TileEnd,
    ) {
        Self::tile(kc, a, b, y, rs, rows, cols, 1.0, accumulate, Lookahead::NONE);
        end.apply(y, rs, rows, cols);
    }

    /// One task of the gemm on pre-packed weights, [`Product::run`] with
    /// this kernel, compiled for its instruction set: the task runs on its
    /// own (maybe on another thread), outside any `#[target_feature]` caller.
    ///
    /// # Safety
    /// As [`Product::run`].
    unsafe fn prepacked_task<B: BSource, F: FinishRow>(product: &Product<B, F>, task: Task);
}

/// The portable micro-kernel ([`micro_kernel`], 8x8) in the SIMD drivers'
/// structure, so pre-packed weights run on every target.
pub struct Portable;

impl MicroKernel for Portable {
    const MR: usize = MR;
    const NR: usize = NR;
    const A_BLOCK: usize = 16 * 1024;
    const KC: usize = KC;

    #[inline(always)]
    unsafe fn tile(
        kc: usize,
        a: *const f32,
        b: *const f32,
        y: *mut f32,
        rs: isize,
        rows: usize,
        cols: usize,
        alpha: f32,
        accumulate: bool,
        _ahead: Lookahead,
    ) {
        const { assert!(MR == PANEL_ROWS) };
        let mut acc = [[0.0f32; NR]; MR];
        micro_kernel(core::slice::from_raw_parts(a, kc * MR), core::slice::from_raw_parts(b, kc * NR), &mut acc);
        for (i, acc_row) in acc.iter().enumerate().take(rows) {
            let row = core::slice::from_raw_parts_mut(y.offset(i as isize * rs), cols);
            for (d, &v) in row.iter_mut().zip(acc_row) {
                *d = if accumulate { *d + alpha * v } else { alpha * v };
            }
        }
    }

    unsafe fn prepacked_task<B: BSource, F: FinishRow>(product: &Product<B, F>, task: Task) {
        product.run::<Self>(task)
    }
}

/// `y = alpha * a * b + beta * c` with micro-kernel `K`; same contract as
/// [`sgemm`]. Loops: `MC`-row blocks of A, `KC`-deep slices (A block packed
/// once, sized for L2), `NC`-wide B blocks (packed together, also in L2),
/// then each `NR`-wide B panel of the block (it moves into L1) swept by every
/// A panel. B is re-packed once per A block, A exactly once. A unit-stride
/// B is packed by the first tile over each whole panel
/// ([`MicroKernel::packing_tile`]): as a pass of its own, the copy took a
/// tenth of a 64 x 576 x 3136 product, whose panels serve only 8 tiles.
/// Any other B is packed a block at a time, which reads each source row
/// over `NC` contiguous columns: with one panel at a time, a strided B
/// (im2col rows thousands of floats apart) cost a TLB miss and a cache miss
/// per row and per panel, as much as the arithmetic on conv shapes with
/// few output channels.
///
/// While a block's tiles compute, they prefetch the next block's rows (see
/// [`BlockAhead`]): packing a B that comes from memory otherwise took a
/// fifth of a 64 x 576 x 3136 product, and issued from the driver between
/// tiles the prefetches stalled the tiles as much as they saved.
///
/// # Safety
/// As [`sgemm`]; `K`'s target features must be available. Meant to be
/// inlined into a `#[target_feature]` entry point so the packing code is
/// compiled for the same ISA.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn blocked<K: MicroKernel>(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef,
    b: BMatrix,
    beta: f32,
    c: Option<MatRef>,
    y: MatMut,
) {
    let (mr, nr) = (K::MR, K::NR);
    const {
        assert!(K::KC * K::NR <= B_BUF && K::A_BLOCK <= A_BUF && K::A_BLOCK >= K::KC * PANEL_ROWS);
        assert!(K::MR * K::NR <= TILE_BUF && PANEL_ROWS.is_multiple_of(K::MR));
    }
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        bias_only(m, n, beta, c, y);
        return;
    }
    let mut a_buf = MaybeUninit::<Aligned<A_BUF>>::uninit();
    let mut b_buf = MaybeUninit::<Aligned<B_BUF>>::uninit();
    let mut t_buf = MaybeUninit::<Aligned<TILE_BUF>>::uninit();
    let a_pack = a_buf.as_mut_ptr() as *mut f32;
    let b_pack = b_buf.as_mut_ptr() as *mut f32;
    let tile = t_buf.as_mut_ptr() as *mut f32;

    let kc_max = K::depth_slice(k);
    let mc_max = (K::A_BLOCK / kc_max / PANEL_ROWS * PANEL_ROWS).max(PANEL_ROWS);
    let nc_max = B_BUF / kc_max / nr * nr;
    let direct_y = y.cs == 1;
    let strided = match b {
        BMatrix::Strided(b) => Some(b),
        BMatrix::Strips(_) => None,
    };
    for ic in (0..m).step_by(mc_max) {
        let mc = mc_max.min(m - ic);
        let panels = mc.div_ceil(mr);
        for pc in (0..k).step_by(kc_max) {
            let kc = kc_max.min(k - pc);
            pack_a_panels(mc, kc, a, ic, pc, a_pack);
            let slice = DepthSlice { first: pc == 0, last: pc + kc == k };
            // Whole B panels are packed by the first tile over them (a
            // whole tile then); a strided B a block at a time, up front;
            // strips panel by panel, from their prefetched runs.
            let pack_in_tiles = matches!(b, BMatrix::Strided(b) if b.cs == 1) && m - ic >= mr;
            for jb in (0..n).step_by(nc_max) {
                let nc = nc_max.min(n - jb);
                if let (Some(b), false) = (strided, pack_in_tiles) {
                    pack_b_block(kc, nc, b, pc, jb, nr, b_pack);
                }
                let next = if jb + nc < n {
                    Some(BlockAhead { row0: pc, rows: kc, col0: jb + nc, cols: nc_max.min(n - jb - nc) })
                } else if pc + kc < k {
                    Some(BlockAhead { row0: pc + kc, rows: kc_max.min(k - pc - kc), col0: 0, cols: nc_max.min(n) })
                } else if ic + mc < m {
                    Some(BlockAhead { row0: 0, rows: kc_max, col0: 0, cols: nc_max.min(n) })
                } else {
                    None
                };
                let next = strided.zip(next);
                let tiles = nc.div_ceil(nr) * panels;
                for (jp, jc) in (jb..jb + nc).step_by(nr).enumerate() {
                    let cols = nr.min(n - jc);
                    let strips_after = if jc + nr < n {
                        Some(StripsAhead { row0: pc, depth: kc, col0: jc + nr })
                    } else if pc + kc < k {
                        Some(StripsAhead { row0: pc + kc, depth: kc_max.min(k - pc - kc), col0: 0 })
                    } else {
                        (ic + mc < m).then_some(StripsAhead { row0: 0, depth: kc_max, col0: 0 })
                    };
                    let panel_buf = b_pack.add(jp * kc * nr);
                    let packing = pack_in_tiles && cols == nr;
                    let b_panel = match b {
                        BMatrix::Strided(b) if pack_in_tiles && !packing => {
                            pack_b_panel(kc, cols, b, pc, jc, nr, panel_buf);
                            panel_buf
                        }
                        BMatrix::Strips(s) => s.panel(kc, cols, pc, jc, nr, panel_buf),
                        BMatrix::Strided(_) => panel_buf,
                    };
                    for ip in 0..panels {
                        let ahead = match (b, strips_after) {
                            (BMatrix::Strips(s), Some(after)) => s.lookahead(after, ip, kc, n, nr),
                            _ => next.map_or(Lookahead::NONE, |(b, nb)| nb.lookahead(b, jp * panels + ip, tiles)),
                        };
                        let i0 = ic + ip * mr;
                        let rows = mr.min(m - i0);
                        if direct_y && i0 + mr < m {
                            for i in i0 + mr..m.min(i0 + 2 * mr) {
                                let row = y.ptr.offset(i as isize * y.rs + jc as isize);
                                prefetch_floats(row, cols);
                                prefetch_floats(row.wrapping_add(cols - 1), 1);
                            }
                        }
                        let a_panel = a_pack.add(ip * mr / PANEL_ROWS * PANEL_ROWS * kc + ip * mr % PANEL_ROWS);
                        // The tile's destination: y itself, or a whole tile in `tile`.
                        let (yt, yt_rs, tile_rows, tile_cols, al, accumulate) = if direct_y {
                            (y.ptr.offset(i0 as isize * y.rs + jc as isize), y.rs, rows, cols, alpha, !slice.first)
                        } else {
                            (tile, nr as isize, mr, nr, 1.0, false)
                        };
                        if let (Some(b), true) = (strided, packing && ip == 0) {
                            let src = b.ptr.offset(pc as isize * b.rs + jc as isize);
                            K::packing_tile(kc, a_panel, src, b.rs, panel_buf, yt, yt_rs, al, accumulate, None, ahead);
                        } else {
                            K::tile(kc, a_panel, b_panel, yt, yt_rs, tile_rows, tile_cols, al, accumulate, ahead);
                        }
                        match c {
                            _ if !direct_y => store_tile(rows, cols, tile, nr, alpha, beta, c, y, i0, jc, slice),
                            Some(c) if slice.last => add_bias(rows, cols, beta, c, i0, jc, y),
                            _ => {}
                        }
                    }
                }
            }
        }
    }
}

/// Floats per cache line.
pub(crate) const LINE_FLOATS: usize = 16;

/// The B block a driver packs next: rows `row0..row0 + rows`, columns
/// `col0..col0 + cols`.
#[derive(Clone, Copy)]
pub(crate) struct BlockAhead {
    pub row0: usize,
    pub rows: usize,
    pub col0: usize,
    pub cols: usize,
}

impl BlockAhead {
    /// What tile `t` of the `tiles` before the block is packed prefetches:
    /// a block row is `width` lines, so every `tiles / width`-th tile takes
    /// one line of every row (one per depth step), spreading the misses
    /// over the tiles' arithmetic. A unit-stride `b` only.
    pub(crate) fn lookahead(&self, b: MatRef, t: usize, tiles: usize) -> Lookahead {
        let width = self.cols.div_ceil(LINE_FLOATS);
        let every = (tiles / width).max(1);
        if b.cs != 1 || !t.is_multiple_of(every) || t / every >= width {
            return Lookahead::NONE;
        }
        let offset = self.row0 as isize * b.rs + (self.col0 + t / every * LINE_FLOATS) as isize;
        Lookahead { first: b.ptr.wrapping_offset(offset), stride: b.rs, lines: self.rows }
    }
}

/// `y = beta * c` (or 0): the whole product when `k == 0`.
unsafe fn bias_only<T: Real>(m: usize, n: usize, beta: T, c: Option<MatRef<T>>, y: MatMut<T>) {
    for i in 0..m {
        for j in 0..n {
            let bias = match c {
                Some(c) => beta * c.at(i, j),
                None => T::ZERO,
            };
            *y.ptr.offset(i as isize * y.rs + j as isize * y.cs) = bias;
        }
    }
}

/// Packs `a[row0.., col0..]` (`mc x kc`) into [`PANEL_ROWS`]-row panels
/// stored depth-major (`panel[l * PANEL_ROWS + i]`), rows past `mc` zero.
#[inline(always)]
pub(crate) unsafe fn pack_a_panels(mc: usize, kc: usize, a: MatRef, row0: usize, col0: usize, dst: *mut f32) {
    let mr = PANEL_ROWS;
    let mut out = dst;
    for p in (0..mc).step_by(mr) {
        let rows = mr.min(mc - p);
        let base = a.ptr.offset((row0 + p) as isize * a.rs + col0 as isize * a.cs);
        if rows == mr && a.rs == 1 {
            // Column-major A (transposed): each depth step is `mr` contiguous floats.
            for l in 0..kc {
                core::ptr::copy_nonoverlapping(base.offset(l as isize * a.cs), out, mr);
                out = out.add(mr);
            }
        } else if rows == mr {
            for l in 0..kc {
                let col = base.offset(l as isize * a.cs);
                for i in 0..mr {
                    out.write(*col.offset(i as isize * a.rs));
                    out = out.add(1);
                }
            }
        } else {
            for l in 0..kc {
                let col = base.offset(l as isize * a.cs);
                for i in 0..mr {
                    out.write(if i < rows { *col.offset(i as isize * a.rs) } else { 0.0 });
                    out = out.add(1);
                }
            }
        }
    }
}

/// Source rows a unit-stride B block is packed in at once: their panels
/// are written one after the other. Row by row (the writes switching panel
/// every 32 floats) the stores missed L1 twice as long as the loads took.
const PACKED_ROW_GROUP: usize = 8;

/// Packs `b[row0.., col0..]` (`kc x nc`) into consecutive `nr`-column panels
/// (see [`pack_b_panel`]). A unit-stride B is copied in groups of
/// [`PACKED_ROW_GROUP`] rows across all full panels, so that each source row
/// is read as one contiguous run (a few pages, not one per row and panel).
#[inline(always)]
pub(crate) unsafe fn pack_b_block(kc: usize, nc: usize, b: MatRef, row0: usize, col0: usize, nr: usize, dst: *mut f32) {
    let full = if b.cs == 1 { nc / nr } else { 0 };
    if full > 0 {
        let base = b.ptr.offset(row0 as isize * b.rs + col0 as isize);
        for group in (0..kc).step_by(PACKED_ROW_GROUP) {
            for p in 0..full {
                for l in group..kc.min(group + PACKED_ROW_GROUP) {
                    let src = base.offset(l as isize * b.rs);
                    core::ptr::copy_nonoverlapping(src.add(p * nr), dst.add((p * kc + l) * nr), nr);
                }
            }
        }
    }
    for (p, j) in (full * nr..nc).step_by(nr).enumerate() {
        pack_b_panel(kc, nr.min(nc - j), b, row0, col0 + j, nr, dst.add((full + p) * kc * nr));
    }
}

/// Packs `b[row0.., col0..]` (`kc x cols`, `cols <= nr`) into one `nr`-column
/// panel stored depth-major (`panel[l * nr + j]`), columns past `cols` zero.
#[inline(always)]
pub(crate) unsafe fn pack_b_panel(
    kc: usize,
    cols: usize,
    b: MatRef,
    row0: usize,
    col0: usize,
    nr: usize,
    dst: *mut f32,
) {
    let base = b.ptr.offset(row0 as isize * b.rs + col0 as isize * b.cs);
    if cols == nr {
        for l in 0..kc {
            let row = base.offset(l as isize * b.rs);
            for j in 0..nr {
                dst.add(l * nr + j).write(*row.offset(j as isize * b.cs));
            }
        }
    } else {
        for l in 0..kc {
            let row = base.offset(l as isize * b.rs);
            for j in 0..nr {
                dst.add(l * nr + j).write(if j < cols { *row.offset(j as isize * b.cs) } else { 0.0 });
            }
        }
    }
}

/// `y[i0.., j0..] += beta * c[i0.., j0..]` over a `rows x cols` tile that
/// has seen its last depth slice. `y` is unit-stride in columns.
#[inline(always)]
unsafe fn add_bias(rows: usize, cols: usize, beta: f32, c: MatRef, i0: usize, j0: usize, y: MatMut) {
    for i in 0..rows {
        let yr = core::slice::from_raw_parts_mut(y.ptr.offset((i0 + i) as isize * y.rs + j0 as isize), cols);
        let cr = c.ptr.offset((i0 + i) as isize * c.rs + j0 as isize * c.cs);
        if c.cs == 1 {
            let cr = core::slice::from_raw_parts(cr, cols);
            for (d, &s) in yr.iter_mut().zip(cr) {
                *d += beta * s;
            }
        } else if c.cs == 0 {
            let bias = beta * *cr;
            yr.iter_mut().for_each(|d| *d += bias);
        } else {
            for (j, d) in yr.iter_mut().enumerate() {
                *d += beta * *cr.offset(j as isize * c.cs);
            }
        }
    }
}

/// Stores the valid `rows x cols` part of a computed tile (`t[i * ts + j]`,
/// not yet scaled by alpha) with the same semantics as the generic
/// macro-kernel (see [`store_element`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn store_tile(
    rows: usize,
    cols: usize,
    t: *const f32,
    ts: usize,
    alpha: f32,
    beta: f32,
    c: Option<MatRef>,
    y: MatMut,
    i0: usize,
    j0: usize,
    slice: DepthSlice,
) {
    for i in 0..rows {
        for j in 0..cols {
            store_element(*t.add(i * ts + j), alpha, beta, c, y, i0 + i, j0 + j, slice);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use crate::abi::gemm::*;
    use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};
    use crate::generic::strips::{b_strips_len, pack_b_strips};
    use crate::generic::test_util::{assert_close, rand_vec, testable_isas};
    use std::vec;
    use std::vec::Vec;

    /// Naive reference for one problem, same addressing as the kernel.
    pub(crate) fn reference(p: &GemmParams, a: &[f32], b: &[f32], c: Option<&[f32]>) -> Vec<f32> {
        let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
        let rank = p.batch_rank as usize;
        let nb: usize = p.batch_dims[..rank].iter().product::<i64>() as usize;
        let mut y = vec![0.0f32; nb * m * n];
        for bi in 0..nb {
            let (mut ao, mut bo, mut co) = (0i64, 0i64, 0i64);
            let mut rem = bi;
            for d in (0..rank).rev() {
                let ix = (rem % p.batch_dims[d] as usize) as i64;
                rem /= p.batch_dims[d] as usize;
                ao += ix * p.a_batch_strides[d];
                bo += ix * p.b_batch_strides[d];
                co += ix * p.c_batch_strides[d];
            }
            for i in 0..m as i64 {
                for j in 0..n as i64 {
                    let mut s = 0.0f64;
                    for l in 0..k as i64 {
                        s += a[(ao + i * p.a_row_stride + l * p.a_col_stride) as usize] as f64
                            * b[(bo + l * p.b_row_stride + j * p.b_col_stride) as usize] as f64;
                    }
                    let mut v = p.alpha * s;
                    if let Some(c) = c {
                        v += p.beta * c[(co + i * p.c_row_stride + j * p.c_col_stride) as usize] as f64;
                    }
                    y[bi * m * n + (i * n as i64 + j) as usize] = v as f32;
                }
            }
        }
        y
    }

    fn run(p: &GemmParams, a: &[f32], b: &[f32], c: Option<&[f32]>) {
        let want = reference(p, a, b, c);
        let mut got = vec![f32::NAN; want.len()];
        let cp = c.map_or(core::ptr::null(), |c| c.as_ptr());
        let st = unsafe { onnxc_gemm_f32(p, a.as_ptr(), b.as_ptr(), cp, got.as_mut_ptr(), core::ptr::null()) };
        assert_eq!(st, STATUS_OK);
        assert_close(&got, &want, 1e-4);
    }

    pub(crate) fn plain(m: i64, n: i64, k: i64, ta: bool, tb: bool) -> GemmParams {
        GemmParams {
            m,
            n,
            k,
            a_row_stride: if ta { 1 } else { k },
            a_col_stride: if ta { m } else { 1 },
            b_row_stride: if tb { 1 } else { n },
            b_col_stride: if tb { k } else { 1 },
            c_row_stride: n,
            c_col_stride: 1,
            alpha: 1.0,
            beta: 1.0,
            ..Default::default()
        }
    }

    #[test]
    fn many_shapes_and_transposes() {
        let sizes = [0i64, 1, 2, 3, 7, 8, 9, 17, 65, 130];
        let mut seed = 1;
        for &m in &sizes {
            for &n in &[1i64, 5, 8, 33, 129] {
                for &k in &[0i64, 1, 4, 13, 129, 260] {
                    if m * n * k > 600_000 {
                        continue;
                    }
                    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                        seed += 1;
                        let a = rand_vec((m * k) as usize, seed);
                        let b = rand_vec((k * n) as usize, seed + 100);
                        let c = rand_vec((m * n) as usize, seed + 200);
                        let mut p = plain(m, n, k, ta, tb);
                        p.alpha = 0.5;
                        p.beta = -2.0;
                        run(&p, &a, &b, Some(&c));
                        run(&p, &a, &b, None);
                    }
                }
            }
        }
    }

    #[test]
    fn broadcast_bias_and_batches() {
        // Y[2,3] batch of 5x7 = A[2,3,5,4] * B[4,7] (B broadcast) + bias row [7].
        let (m, n, k) = (5i64, 7i64, 4i64);
        let a = rand_vec(2 * 3 * 5 * 4, 9);
        let b = rand_vec(4 * 7, 10);
        let c = rand_vec(7, 11);
        let mut p = plain(m, n, k, false, false);
        p.c_row_stride = 0;
        p.batch_rank = 2;
        p.batch_dims[..2].copy_from_slice(&[2, 3]);
        p.a_batch_strides[..2].copy_from_slice(&[60, 20]);
        run(&p, &a, &b, Some(&c));
        // Scalar bias, and B batched too.
        let b2 = rand_vec(2 * 3 * 4 * 7, 12);
        p.b_batch_strides[..2].copy_from_slice(&[84, 28]);
        p.c_col_stride = 0;
        run(&p, &a, &b2, Some(&c));
    }

    #[test]
    fn negative_strides() {
        let (m, n, k) = (9i64, 10i64, 11i64);
        let a = rand_vec(99, 3);
        let b = rand_vec(110, 4);
        // Reverse the rows of A by starting at the last row with a negative stride.
        let p = GemmParams { a_row_stride: -k, ..plain(m, n, k, false, false) };
        let want = {
            let mut q = plain(m, n, k, false, false);
            q.beta = 0.0;
            let ar: Vec<f32> = a.chunks(k as usize).rev().flatten().copied().collect();
            reference(&q, &ar, &b, None)
        };
        let mut got = vec![0.0; (m * n) as usize];
        let st = unsafe {
            onnxc_gemm_f32(
                &p,
                a.as_ptr().add(((m - 1) * k) as usize),
                b.as_ptr(),
                core::ptr::null(),
                got.as_mut_ptr(),
                core::ptr::null(),
            )
        };
        assert_eq!(st, STATUS_OK);
        assert_close(&got, &want, 1e-4);
    }

    #[test]
    fn rejects_bad_params() {
        let mut p = plain(2, 2, 2, false, false);
        p.batch_rank = 7;
        let z = [0.0f32; 4];
        let mut y = [0.0f32; 4];
        let f = |p: &GemmParams, y: &mut [f32; 4]| unsafe {
            onnxc_gemm_f32(p, z.as_ptr(), z.as_ptr(), core::ptr::null(), y.as_mut_ptr(), core::ptr::null())
        };
        assert_eq!(f(&p, &mut y), STATUS_INVALID_PARAMS);
        p.batch_rank = 0;
        p.m = -1;
        assert_eq!(f(&p, &mut y), STATUS_INVALID_PARAMS);
        assert_eq!(
            unsafe {
                onnxc_gemm_f32(core::ptr::null(), z.as_ptr(), z.as_ptr(), z.as_ptr(), y.as_mut_ptr(), core::ptr::null())
            },
            STATUS_INVALID_PARAMS
        );
    }

    /// Every SIMD kernel this CPU supports against the generic reference, on
    /// shapes that straddle the tiles and the cache blocks, with every
    /// stride pattern the compiler emits and B in strips. Kernels the CPU lacks are skipped
    /// (see [`testable_isas`]).
    #[test]
    fn simd_kernels_match_generic() {
        for kernel in testable_isas() {
            let mut seed = 500;
            let gemm =
                |m, n, k, alpha, a, b, beta, c, y| unsafe { sgemm_with(kernel, m, n, k, alpha, a, b, beta, c, y) };
            for &(m, n, k) in SHAPES {
                for layout in 0..8 {
                    for bias in 0..5 {
                        seed += 1;
                        check_kernel(kernel.name(), &gemm, (m, n, k), layout, bias, seed);
                    }
                }
            }
        }
    }

    /// Products that straddle the tiles and the cache blocks.
    const SHAPES: &[(usize, usize, usize)] = &[
        (1, 1, 1),
        (1, 37, 5),
        (5, 1, 9),
        (6, 16, 7),
        (8, 32, 256),
        (7, 31, 257),
        (9, 33, 300),
        (13, 50, 513),
        (33, 65, 17),
        (200, 70, 300),
        (64, 96, 576),
        (17, 129, 1),
        // Several A blocks (the next block prefetched across them), with
        // unequal depth slices.
        (400, 70, 257),
        (300, 40, 600),
    ];

    /// The blocked driver's packing and edge logic in `K`'s layout (tile
    /// rows and columns, depth slices, A blocks), with portable arithmetic
    /// ([`LayoutOf`]): the same problems as [`simd_kernels_match_generic`],
    /// run on any host whatever its instruction sets.
    pub(crate) fn check_layout<K: MicroKernel>(name: &str) {
        let mut seed = 900;
        for &(m, n, k) in SHAPES {
            for layout in 0..8 {
                for bias in 0..5 {
                    seed += 1;
                    let gemm = |m, n, k, alpha, a, b, beta, c, y| unsafe {
                        blocked::<LayoutOf<K>>(m, n, k, alpha, a, b, beta, c, y)
                    };
                    check_kernel(name, &gemm, (m, n, k), layout, bias, seed);
                }
            }
        }
    }

    /// Portable arithmetic in `K`'s layout: `K`'s tile rows and columns,
    /// depth slices and A blocks, so that a driver instantiated with it
    /// packs, slices and cuts edge tiles exactly as it does for `K`, on a
    /// host that cannot run `K`.
    pub(crate) struct LayoutOf<K>(core::marker::PhantomData<K>);

    impl<K: MicroKernel> MicroKernel for LayoutOf<K> {
        const MR: usize = K::MR;
        const NR: usize = K::NR;
        const A_BLOCK: usize = K::A_BLOCK;
        const KC: usize = K::KC;

        unsafe fn tile(
            kc: usize,
            a: *const f32,
            b: *const f32,
            y: *mut f32,
            rs: isize,
            rows: usize,
            cols: usize,
            alpha: f32,
            accumulate: bool,
            _ahead: Lookahead,
        ) {
            for i in 0..rows {
                for j in 0..cols {
                    let sum = (0..kc).fold(0.0f32, |acc, l| acc + *a.add(l * PANEL_ROWS + i) * *b.add(l * K::NR + j));
                    let at = y.offset(i as isize * rs + j as isize);
                    *at = if accumulate { *at + alpha * sum } else { alpha * sum };
                }
            }
        }

        unsafe fn prepacked_task<B: BSource, F: FinishRow>(product: &Product<B, F>, task: Task) {
            product.run::<Self>(task)
        }
    }

    /// A gemm under test, with [`sgemm`]'s arguments.
    type Gemm<'a> = &'a dyn Fn(usize, usize, usize, f32, MatRef, BMatrix, f32, Option<MatRef>, MatMut);

    /// Runs one problem through `gemm` and the generic path and compares.
    /// `layout`: 0 plain, 1 A transposed, 2 B transposed, 3 both, 4 negative
    /// row strides + padded y rows, 5 non-unit column strides everywhere,
    /// 6 only y's columns strided (B's panels packed by tiles that store
    /// through the tile buffer).
    /// `bias`: 0 none, 1 full C, 2 row broadcast, 3 column broadcast, 4 scalar.
    fn check_kernel(name: &str, gemm: Gemm, (m, n, k): (usize, usize, usize), layout: u32, bias: u32, seed: u64) {
        let (mi, ni, ki) = (m as isize, n as isize, k as isize);
        let pad = 3isize;
        let a = rand_vec(m * k * 2 + 8, seed);
        let b = rand_vec(k * n * 2 + 8, seed + 1);
        let cv = rand_vec(m * n + 8, seed + 2);
        // (offset, rs, cs) per operand.
        let (ao, ars, acs, bo, brs, bcs) = match layout {
            0 => (0, ki, 1, 0, ni, 1),
            1 => (0, 1, mi, 0, ni, 1),
            2 => (0, ki, 1, 0, 1, ki),
            3 => (0, 1, mi, 0, 1, ki),
            4 => ((mi - 1) * ki, -ki, 1, (ki - 1) * ni, -ni, 1),
            5 => (0, 2 * ki, 2, 0, 2 * ni, 2),
            _ => (0, ki, 1, 0, ni, 1),
        };
        let am = MatRef { ptr: a.as_ptr().wrapping_offset(ao), rs: ars, cs: acs };
        let bm = MatRef { ptr: b.as_ptr().wrapping_offset(bo), rs: brs, cs: bcs };
        let cm = match bias {
            0 => None,
            1 => Some(MatRef { ptr: cv.as_ptr(), rs: ni, cs: 1 }),
            2 => Some(MatRef { ptr: cv.as_ptr(), rs: 0, cs: 1 }),
            3 => Some(MatRef { ptr: cv.as_ptr(), rs: 1, cs: 0 }),
            _ => Some(MatRef { ptr: cv.as_ptr(), rs: 0, cs: 0 }),
        };
        let (alpha, beta) = if seed.is_multiple_of(2) { (1.0, 1.0) } else { (-0.75, 1.5) };
        let (yrs, ycs) = match layout {
            4 => (ni + pad, 1),
            5 | 6 => (2 * ni, 2),
            _ => (ni, 1),
        };
        let len = (m as isize * yrs) as usize + 2 * n;
        let mut want = vec![f32::NAN; len];
        let mut got = vec![f32::NAN; len];
        unsafe {
            let ym = MatMut { ptr: want.as_mut_ptr(), rs: yrs, cs: ycs };
            gemm_generic(m, n, k, alpha, am, bm, beta, cm, ym);
            // Layout 7: B as the compiler packs constant weights.
            let mut strips = vec![0.0f32; b_strips_len(k, n)];
            pack_b_strips(k, n, bm, strips.as_mut_ptr());
            let b = if layout == 7 { BMatrix::Strips(Strips { ptr: strips.as_ptr(), depth: k }) } else { bm.into() };
            gemm(m, n, k, alpha, am, b, beta, cm, MatMut { ptr: got.as_mut_ptr(), rs: yrs, cs: ycs });
        }
        // Untouched padding stays NaN in both (compared as equal).
        let tol = 1e-4 * (1.0 + (k as f64).sqrt());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let ok = crate::tolerance::close(*g as f64, *w as f64, tol, tol);
            assert!(ok, "{name} m={m} n={n} k={k} layout={layout} bias={bias} at {i}: got {g}, want {w}");
        }
    }

    /// A bias added by the product gives the bits of the product followed
    /// by a separate Add (the bias joins after the last depth slice), for
    /// every kernel, over several depth slices and edge tiles, with y's
    /// columns unit-stride or strided (through the tile buffer).
    #[test]
    fn bias_joins_after_the_whole_sum() {
        for kernel in testable_isas() {
            for &(m, n, k) in &[(19usize, 45usize, 600usize), (200, 70, 300), (2, 33, 513), (9, 8, 5)] {
                for ycs in [1usize, 2] {
                    let a = rand_vec(m * k, 41);
                    let b = rand_vec(k * n, 42);
                    let bias = rand_vec(n, 43);
                    let am = MatRef { ptr: a.as_ptr(), rs: k as isize, cs: 1 };
                    let bm = MatRef { ptr: b.as_ptr(), rs: n as isize, cs: 1 };
                    let cm = MatRef { ptr: bias.as_ptr(), rs: 0, cs: 1 };
                    let run = |c: Option<MatRef>| {
                        let mut y = vec![0.0f32; m * n * ycs];
                        let ym = MatMut { ptr: y.as_mut_ptr(), rs: (n * ycs) as isize, cs: ycs as isize };
                        unsafe { sgemm_with(kernel, m, n, k, 1.0, am, bm, 1.0, c, ym) };
                        y
                    };
                    let mut want = run(None);
                    for (j, v) in want.iter_mut().enumerate().filter(|(j, _)| j % ycs == 0) {
                        *v += bias[j / ycs % n];
                    }
                    let got = run(Some(cm));
                    let same = got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits());
                    assert!(same, "{kernel:?} {m}x{n}x{k} y column stride {ycs}");
                }
            }
        }
    }

    /// f64 runs the portable blocked gemm in f64: edge tiles, a transposed
    /// B, two depth slices, a broadcast bias.
    #[test]
    fn f64_gemm_matches_reference() {
        let (m, n, k) = (19usize, 23usize, 150usize);
        let wide = |len: usize, seed: u64| rand_vec(len, seed).iter().map(|&v| v as f64).collect::<Vec<f64>>();
        let (a, b, c) = (wide(m * k, 31), wide(n * k, 32), wide(n, 33));
        let mut y = vec![f64::NAN; m * n];
        unsafe {
            f64::gemm(
                m,
                n,
                k,
                0.5,
                MatRef { ptr: a.as_ptr(), rs: k as isize, cs: 1 },
                MatRef { ptr: b.as_ptr(), rs: 1, cs: k as isize },
                2.0,
                Some(MatRef { ptr: c.as_ptr(), rs: 0, cs: 1 }),
                MatMut { ptr: y.as_mut_ptr(), rs: n as isize, cs: 1 },
            );
        }
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k).map(|l| a[i * k + l] * b[j * k + l]).sum();
                let want = 0.5 * dot + 2.0 * c[j];
                assert!((y[i * n + j] - want).abs() < 1e-12, "({i}, {j}): {} vs {want}", y[i * n + j]);
            }
        }
    }
}
