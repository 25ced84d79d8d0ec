//! The batched driver behind `onnxc_gemm_f32` (MatMul, Gemm), and how it
//! splits over threads.
//!
//! One call holds up to [`GEMM_MAX_BATCH_RANK`] batch dims of `m x n x k`
//! products (attention's heads, a batched MatMul's broadcast dims). With a
//! threaded [`Parallel`] hook and at least [`PARALLEL_MACS`] multiply-adds,
//! the call is cut into up to [`TASKS`] tasks: ranges of whole batches when
//! there are enough of them, else ranges of each batch's columns, cut at
//! multiples of the micro-kernel's tile width so that no task adds an edge
//! tile. Columns rather than rows: a transformer's products have few rows
//! (the sequence) and many columns (the hidden and feed-forward widths),
//! and a column range packs only its own part of B, the big operand, while
//! A (re-packed by every task) is the small one.
//!
//! Column ranges start at multiples of the tile width, itself a multiple
//! of a strip's width, so a B packed in strips is cut at a strip.
//!
//! Each task runs the serial product on its part, so the bits do not depend
//! on the split: an output element is summed over the same depth slices
//! (they depend on `k` alone, [`crate::generic::gemm::MicroKernel::depth_slice`])
//! by one tile in the same order whatever its neighbours, and the few-rows
//! path groups columns in fours, which every tile width keeps.

use super::gemm::{BMatrix, GemmElem, MatMut, MatRef, GEMM_MAX_BATCH_RANK};
use super::strips::Strips;
use super::{to_isize, to_usize};
use crate::abi::gemm::GemmParams;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};
use crate::isa::choose::{sgemm_tile_columns, sgemm_with};
use crate::isa::Isa;
use crate::parallel::{share, Parallel};
use core::ops::Range;

/// Products of at least this many multiply-adds are split over tasks when
/// the caller lends threads (a few tens of microseconds of work: below,
/// waking a thread costs as much as it saves).
const PARALLEL_MACS: usize = 1 << 20;

/// Most tasks one call is cut into.
const TASKS: usize = 8;

/// Tasks a product of `macs` multiply-adds is cut into: one without a
/// threaded hook or below [`PARALLEL_MACS`], else one per half of it, at
/// most [`TASKS`].
///
/// # Safety
/// `parallel` is null or a valid hook.
pub(crate) unsafe fn product_tasks(macs: usize, parallel: *const Parallel) -> usize {
    match Parallel::is_threaded(parallel) {
        true => (macs / (PARALLEL_MACS / 2)).clamp(1, TASKS),
        false => 1,
    }
}

/// `y = alpha * a * b + beta * c` ([`GemmElem::gemm`]) cut into column
/// ranges at the type's [`GemmElem::column_granule`] over `parallel`'s
/// threads when it is large enough ([`product_tasks`]): each part
/// computes its outputs as the whole product does, so the bits are the
/// serial ones.
///
/// # Safety
/// As [`GemmElem::gemm`]; `parallel` is null or a valid hook.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_by_columns<T: GemmElem>(
    (m, n, k): (usize, usize, usize),
    alpha: T,
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: Option<MatRef<T>>,
    y: MatMut<T>,
    parallel: *const Parallel,
) {
    let granule = T::column_granule().unwrap_or(n).max(1);
    let granules = n.div_ceil(granule);
    let macs = m.saturating_mul(n).saturating_mul(k);
    let tasks = product_tasks(macs, parallel).min(granules.max(1));
    Parallel::for_each(parallel, tasks, |task| {
        let part = share(granules, tasks, task);
        let (first, end) = (part.start * granule, (part.end * granule).min(n));
        let shift = first as isize;
        let b = MatRef { ptr: b.ptr.wrapping_offset(shift * b.cs), ..b };
        let c = c.map(|c| MatRef { ptr: c.ptr.wrapping_offset(shift * c.cs), ..c });
        let y = MatMut { ptr: y.ptr.wrapping_offset(shift * y.cs), ..y };
        T::gemm(m, end - first, k, alpha, a, b, beta, c, y);
    });
}

/// [`crate::abi::gemm::onnxc_gemm_f32`] with a chosen implementation.
///
/// # Safety
/// As `onnxc_gemm_f32`; `parallel` is null or a valid hook.
pub(crate) unsafe fn gemm_batched(
    kernel: Isa,
    p: &GemmParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    let Some(batches) = Batches::new(p) else {
        return STATUS_INVALID_PARAMS;
    };
    if !matches!(p.b_strips, 0 | 1) {
        return STATUS_INVALID_PARAMS;
    }
    let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
    if m == 0 || n == 0 || batches.count == 0 {
        return STATUS_OK;
    }
    let split = Split::new(kernel, &batches, m, n, k, parallel);
    Parallel::for_each(parallel, split.tasks(), |task| {
        let (batch_range, columns) = split.task(task);
        for batch in batch_range {
            let [ao, bo, co] = batches.offsets(batch);
            let cols = columns.clone();
            let j0 = cols.start as isize;
            let am = MatRef { ptr: a.wrapping_offset(ao), rs: p.a_row_stride as isize, cs: p.a_col_stride as isize };
            let bm: BMatrix = match p.b_strips {
                0 => MatRef {
                    ptr: b.wrapping_offset(bo + j0 * p.b_col_stride as isize),
                    rs: p.b_row_stride as isize,
                    cs: p.b_col_stride as isize,
                }
                .into(),
                _ => BMatrix::Strips(Strips { ptr: b.wrapping_offset(bo), depth: k }.from_column(cols.start)),
            };
            let cs = (p.c_row_stride as isize, p.c_col_stride as isize);
            let cm = (!c.is_null()).then(|| MatRef { ptr: c.wrapping_offset(co + j0 * cs.1), rs: cs.0, cs: cs.1 });
            let ym = MatMut { ptr: y.add(batch * m * n + cols.start), rs: n as isize, cs: 1 };
            sgemm_with(kernel, m, cols.len(), k, p.alpha as f32, am, bm, p.beta as f32, cm, ym);
        }
    });
    STATUS_OK
}

/// The batch dims of a call and the operands' strides over them.
struct Batches {
    rank: usize,
    dims: [usize; MAX_RANK],
    strides: [[isize; MAX_RANK]; 3],
    count: usize,
}

impl Batches {
    /// `None` for negative sizes or too many batch dims.
    fn new(p: &GemmParams) -> Option<Batches> {
        if p.m < 0 || p.n < 0 || p.k < 0 || p.batch_rank < 0 {
            return None;
        }
        let rank = p.batch_rank as usize;
        if rank > GEMM_MAX_BATCH_RANK || p.batch_dims[..rank].iter().any(|&d| d < 0) {
            return None;
        }
        let dims = to_usize(&p.batch_dims);
        let strides = [to_isize(&p.a_batch_strides), to_isize(&p.b_batch_strides), to_isize(&p.c_batch_strides)];
        let count = dims[..rank].iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
        Some(Batches { rank, dims, strides, count })
    }

    /// Element offsets of batch `index` (row-major over the dims) in A, B and C.
    fn offsets(&self, mut index: usize) -> [isize; 3] {
        let mut offs = [0isize; 3];
        for d in (0..self.rank).rev() {
            let at = (index % self.dims[d]) as isize;
            index /= self.dims[d];
            for (off, strides) in offs.iter_mut().zip(&self.strides) {
                *off += at * strides[d];
            }
        }
        offs
    }
}

/// How a call is cut into tasks: `batch_parts` ranges of batches, or, with
/// fewer batches than tasks, `column_parts` column ranges of each batch.
struct Split {
    batches: usize,
    batch_parts: usize,
    n: usize,
    granule: usize,
    column_parts: usize,
}

impl Split {
    fn new(kernel: Isa, batches: &Batches, m: usize, n: usize, k: usize, parallel: *const Parallel) -> Split {
        let granule = sgemm_tile_columns(kernel);
        let macs = batches.count.saturating_mul(m).saturating_mul(n).saturating_mul(k);
        // SAFETY: the caller passes a null or valid hook.
        let tasks = unsafe { product_tasks(macs, parallel) };
        let (batch_parts, column_parts) = match batches.count >= tasks {
            true => (tasks, 1),
            false => (batches.count, tasks.div_ceil(batches.count).min(n.div_ceil(granule))),
        };
        Split { batches: batches.count, batch_parts, n, granule, column_parts }
    }

    fn tasks(&self) -> usize {
        self.batch_parts * self.column_parts
    }

    /// Task `t`'s batches and columns.
    fn task(&self, t: usize) -> (Range<usize>, Range<usize>) {
        let batches = share(self.batches, self.batch_parts, t / self.column_parts);
        let granules = share(self.n.div_ceil(self.granule), self.column_parts, t % self.column_parts);
        (batches, granules.start * self.granule..(granules.end * self.granule).min(self.n))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::gemm::tests::{plain, reference};
    use crate::generic::strips::{b_strips_len, pack_b_strips};
    use crate::generic::test_util::{assert_close, rand_vec, reversed, testable_isas};
    use std::vec;

    /// Batched calls (broadcast operands, bias broadcast) through every
    /// available kernel.
    #[test]
    fn simd_kernels_batched() {
        let (m, n, k) = (13i64, 37i64, 70i64);
        let a = rand_vec((2 * 3 * m * k) as usize, 21);
        let b = rand_vec((3 * k * n) as usize, 22);
        let c = rand_vec(n as usize, 23);
        let mut p = plain(m, n, k, false, true);
        p.alpha = 0.25;
        p.c_row_stride = 0;
        p.batch_rank = 2;
        p.batch_dims[..2].copy_from_slice(&[2, 3]);
        p.a_batch_strides[..2].copy_from_slice(&[3 * m * k, m * k]);
        p.b_batch_strides[..2].copy_from_slice(&[0, k * n]);
        let want = reference(&p, &a, &b, Some(&c));
        for kernel in testable_isas() {
            let mut got = vec![f32::NAN; want.len()];
            let st = unsafe {
                gemm_batched(kernel, &p, a.as_ptr(), b.as_ptr(), c.as_ptr(), got.as_mut_ptr(), core::ptr::null())
            };
            assert_eq!(st, STATUS_OK);
            assert_close(&got, &want, 1e-4);
        }
    }

    /// Split over tasks (run last to first), by columns (one and two rows
    /// take the few-rows path; three batches, each split) and by batches,
    /// the bits are the serial call's, with B as it lies and in strips.
    #[test]
    fn tasks_give_the_serial_bits() {
        let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
        for (batches, m, n, k) in
            [(1i64, 64i64, 333i64, 300i64), (1, 1, 1000, 1100), (1, 2, 517, 1200), (3, 16, 200, 400), (11, 40, 50, 300)]
        {
            let a = rand_vec((batches * m * k) as usize, 7);
            let plain_b = rand_vec((k * n) as usize, 8);
            let c = rand_vec((m * n) as usize, 9);
            let mut p = plain(m, n, k, false, false);
            p.beta = 0.5;
            p.batch_rank = 1;
            p.batch_dims[0] = batches;
            p.a_batch_strides[0] = m * k;
            // B as it lies, and in strips.
            let (k_, n_) = (k as usize, n as usize);
            let mut strips = vec![0.0f32; b_strips_len(k_, n_)];
            let bm = MatRef { ptr: plain_b.as_ptr(), rs: n as isize, cs: 1 };
            unsafe { pack_b_strips(k_, n_, bm, strips.as_mut_ptr()) };
            for (kernel, b_strips) in testable_isas().into_iter().flat_map(|kernel| [(kernel, 0), (kernel, 1)]) {
                p.b_strips = b_strips;
                let b = if b_strips == 1 { &strips } else { &plain_b };
                let run = |parallel: *const Parallel| {
                    let mut y = vec![f32::NAN; (batches * m * n) as usize];
                    let st = unsafe {
                        gemm_batched(kernel, &p, a.as_ptr(), b.as_ptr(), c.as_ptr(), y.as_mut_ptr(), parallel)
                    };
                    assert_eq!(st, STATUS_OK);
                    y.iter().map(|v| v.to_bits()).collect::<std::vec::Vec<_>>()
                };
                let split =
                    Split::new(kernel, &Batches::new(&p).unwrap(), m as usize, n as usize, k as usize, &threaded);
                assert!(split.tasks() > 1, "{batches}x{m}x{n}x{k} is not split");
                assert_eq!(
                    run(core::ptr::null()),
                    run(&threaded),
                    "{}: {batches}x{m}x{n}x{k}, strips {b_strips}",
                    kernel.name()
                );
            }
        }
    }
}
