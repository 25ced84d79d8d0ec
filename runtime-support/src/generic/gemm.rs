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
//! micro-kernel needs SIMD variants later; the rest of the structure stays.
//!
//! All matrices are described by a pointer and signed element strides, which
//! is how transposes and broadcast operands arrive from the compiler.

use super::{advance, to_isize, to_usize};
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};
use core::mem::MaybeUninit;

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

/// Parameters of [`onnxc_gemm_f32`]. Strides are in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GemmParams {
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub a_row_stride: i64,
    pub a_col_stride: i64,
    pub b_row_stride: i64,
    pub b_col_stride: i64,
    pub c_row_stride: i64,
    pub c_col_stride: i64,
    pub alpha: f64,
    pub beta: f64,
    pub batch_rank: i64,
    pub batch_dims: [i64; MAX_RANK],
    pub a_batch_strides: [i64; MAX_RANK],
    pub b_batch_strides: [i64; MAX_RANK],
    pub c_batch_strides: [i64; MAX_RANK],
}

/// A read-only strided matrix: element `(i, j)` is at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef {
    pub ptr: *const f32,
    pub rs: isize,
    pub cs: isize,
}

impl MatRef {
    #[inline(always)]
    unsafe fn at(&self, i: usize, j: usize) -> f32 {
        *self.ptr.offset(i as isize * self.rs + j as isize * self.cs)
    }
}

/// A writable strided matrix, same addressing as [`MatRef`].
#[derive(Clone, Copy, Debug)]
pub struct MatMut {
    pub ptr: *mut f32,
    pub rs: isize,
    pub cs: isize,
}

/// `y = alpha * a * b + beta * c` (or `+ 0` when `c` is `None`), with `a`
/// `m x k`, `b` `k x n`, `c` and `y` `m x n`.
///
/// # Safety
/// Every addressed element of `a`, `b`, `c` must be readable and of `y`
/// writable; `y` must not overlap the inputs.
#[allow(clippy::too_many_arguments)] // the BLAS-style signature reads best flat
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
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                let bias = match c {
                    Some(c) => beta * c.at(i, j),
                    None => 0.0,
                };
                *y.ptr.offset(i as isize * y.rs + j as isize * y.cs) = bias;
            }
        }
        return;
    }

    // Packing buffers live on the stack (96 KiB); every element read by the
    // micro-kernel is written by packing first, so they need no zeroing.
    let mut a_buf = MaybeUninit::<[f32; MC * KC]>::uninit();
    let mut b_buf = MaybeUninit::<[f32; KC * NC]>::uninit();
    let a_pack = a_buf.as_mut_ptr() as *mut f32;
    let b_pack = b_buf.as_mut_ptr() as *mut f32;

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
                let first = pc == 0;
                macro_kernel(mc, nc, kc, a_panels, b_panels, alpha, beta, c, y, ic, jc, first);
            }
        }
    }
}

/// Packs `a[row0.., col0..]` (`mc x kc`) into `MR`-row panels, each stored
/// depth-major: `panel[l * MR + i]`. Rows past `mc` are zero.
unsafe fn pack_a(mc: usize, kc: usize, a: MatRef, row0: usize, col0: usize, dst: *mut f32) {
    let mut out = dst;
    for p in (0..mc).step_by(MR) {
        let rows = MR.min(mc - p);
        for l in 0..kc {
            for i in 0..MR {
                let v = if i < rows { a.at(row0 + p + i, col0 + l) } else { 0.0 };
                out.write(v);
                out = out.add(1);
            }
        }
    }
}

/// Packs `b[row0.., col0..]` (`kc x nc`) into `NR`-column panels, each stored
/// depth-major: `panel[l * NR + j]`. Columns past `nc` are zero.
unsafe fn pack_b(kc: usize, nc: usize, b: MatRef, row0: usize, col0: usize, dst: *mut f32) {
    let mut out = dst;
    for p in (0..nc).step_by(NR) {
        let cols = NR.min(nc - p);
        for l in 0..kc {
            for j in 0..NR {
                let v = if j < cols { b.at(row0 + l, col0 + p + j) } else { 0.0 };
                out.write(v);
                out = out.add(1);
            }
        }
    }
}

/// Runs the micro-kernel over every (A panel, B panel) pair of one packed
/// block and stores the valid part of each tile into `y`. On the first depth
/// slice (`first`) the tile overwrites `y` (plus the bias); later slices
/// accumulate into it.
#[allow(clippy::too_many_arguments)]
unsafe fn macro_kernel(
    mc: usize,
    nc: usize,
    kc: usize,
    a_panels: &[f32],
    b_panels: &[f32],
    alpha: f32,
    beta: f32,
    c: Option<MatRef>,
    y: MatMut,
    row0: usize,
    col0: usize,
    first: bool,
) {
    for (jp, b_panel) in b_panels.chunks_exact(kc * NR).enumerate() {
        let j0 = jp * NR;
        let cols = NR.min(nc - j0);
        for (ip, a_panel) in a_panels.chunks_exact(kc * MR).enumerate() {
            let i0 = ip * MR;
            let rows = MR.min(mc - i0);
            let mut acc = [[0.0f32; NR]; MR];
            micro_kernel(a_panel, b_panel, &mut acc);
            for (i, acc_row) in acc.iter().enumerate().take(rows) {
                let gi = row0 + i0 + i;
                for (j, &v) in acc_row.iter().enumerate().take(cols) {
                    let gj = col0 + j0 + j;
                    let dst = y.ptr.offset(gi as isize * y.rs + gj as isize * y.cs);
                    if first {
                        let bias = match c {
                            Some(c) => beta * c.at(gi, gj),
                            None => 0.0,
                        };
                        *dst = alpha * v + bias;
                    } else {
                        *dst += alpha * v;
                    }
                }
            }
        }
    }
}

/// `acc += a_panel * b_panel` for one `MR x kc` by `kc x NR` tile. Written so
/// the accumulators stay in registers and the inner loops auto-vectorise.
#[inline(always)]
fn micro_kernel(a_panel: &[f32], b_panel: &[f32], acc: &mut [[f32; NR]; MR]) {
    for (av, bv) in a_panel.chunks_exact(MR).zip(b_panel.chunks_exact(NR)) {
        for i in 0..MR {
            let ai = av[i];
            for j in 0..NR {
                acc[i][j] += ai * bv[j];
            }
        }
    }
}

/// Batched strided gemm; see [`GemmParams`]. `c` may be null (no bias). The
/// output is contiguous: batch after batch of row-major `m x n` matrices.
#[no_mangle]
pub unsafe extern "C" fn onnxc_gemm_f32(
    p: *const GemmParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.m < 0 || p.n < 0 || p.k < 0 || p.batch_rank < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let rank = p.batch_rank as usize;
    if rank > GEMM_MAX_BATCH_RANK || p.batch_dims[..rank].iter().any(|&d| d < 0) {
        return STATUS_INVALID_PARAMS;
    }
    let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
    let dims = to_usize(&p.batch_dims);
    if m == 0 || n == 0 || dims[..rank].contains(&0) {
        return STATUS_OK;
    }
    let strides = [to_isize(&p.a_batch_strides), to_isize(&p.b_batch_strides), to_isize(&p.c_batch_strides)];
    let mut idx = [0usize; MAX_RANK];
    let mut offs = [0isize; 3];
    let mut y_batch = y;
    loop {
        let am = MatRef { ptr: a.wrapping_offset(offs[0]), rs: p.a_row_stride as isize, cs: p.a_col_stride as isize };
        let bm = MatRef { ptr: b.wrapping_offset(offs[1]), rs: p.b_row_stride as isize, cs: p.b_col_stride as isize };
        let cm = (!c.is_null()).then(|| MatRef {
            ptr: c.wrapping_offset(offs[2]),
            rs: p.c_row_stride as isize,
            cs: p.c_col_stride as isize,
        });
        let ym = MatMut { ptr: y_batch, rs: n as isize, cs: 1 };
        sgemm(m, n, k, p.alpha as f32, am, bm, p.beta as f32, cm, ym);
        y_batch = y_batch.add(m * n);
        if !advance(&mut idx[..rank], &dims[..rank], [&strides[0][..], &strides[1][..], &strides[2][..]], &mut offs) {
            break;
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec};
    use std::vec;
    use std::vec::Vec;

    /// Naive reference for one problem, same addressing as the kernel.
    fn reference(p: &GemmParams, a: &[f32], b: &[f32], c: Option<&[f32]>) -> Vec<f32> {
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
        let st = unsafe { onnxc_gemm_f32(p, a.as_ptr(), b.as_ptr(), cp, got.as_mut_ptr()) };
        assert_eq!(st, STATUS_OK);
        assert_close(&got, &want, 1e-4);
    }

    fn plain(m: i64, n: i64, k: i64, ta: bool, tb: bool) -> GemmParams {
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
            onnxc_gemm_f32(&p, a.as_ptr().add(((m - 1) * k) as usize), b.as_ptr(), core::ptr::null(), got.as_mut_ptr())
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
            onnxc_gemm_f32(p, z.as_ptr(), z.as_ptr(), core::ptr::null(), y.as_mut_ptr())
        };
        assert_eq!(f(&p, &mut y), STATUS_INVALID_PARAMS);
        p.batch_rank = 0;
        p.m = -1;
        assert_eq!(f(&p, &mut y), STATUS_INVALID_PARAMS);
        assert_eq!(
            unsafe { onnxc_gemm_f32(core::ptr::null(), z.as_ptr(), z.as_ptr(), z.as_ptr(), y.as_mut_ptr(),) },
            STATUS_INVALID_PARAMS
        );
    }
}
