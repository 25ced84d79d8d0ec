//! Portable scalar kernels: the reference implementation of every kernel,
//! and the fallback used when no architecture-specific variant applies.
//!
//! # Safety
//!
//! Every `onnxc_*` kernel in this module tree is an `unsafe extern "C" fn`
//! sharing one contract:
//!
//! * the params pointer is null (the kernel then returns
//!   `STATUS_INVALID_PARAMS`) or points to a valid, initialised params struct;
//! * every data pointer is valid for all reads/writes the params describe
//!   (sizes and strides are in elements of the kernel's element type) and is
//!   suitably aligned for that element type; pointers documented as nullable
//!   may be null; pointers to empty tensors are never dereferenced;
//! * output buffers do not overlap input buffers (or scratch), unless the
//!   kernel says otherwise.
//!
//! Kernels check their params cheaply (ranks, signs, divisibility) and return
//! `STATUS_INVALID_PARAMS` instead of misbehaving; they cannot check buffer
//! sizes, which are the caller's responsibility.

pub mod attention;
pub mod blocked;
pub mod blocked_pool;
pub mod conv;
pub(crate) mod conv_window;
pub mod convert;
pub mod copy;
pub mod deform_conv;
pub mod dynamic;
pub mod gemm;
pub mod gemv;
pub mod indexing;
pub mod loss;
pub mod math;
pub mod minifloat;
pub mod ml;
pub mod norm;
pub mod packed;
pub mod pool;
pub mod prepacked;
pub mod qproduct;
pub mod quant;
pub mod random;
pub mod real;
pub mod reduce;
pub mod resize;
pub mod roi;
pub mod softmax;
pub mod strings;
pub mod svm;
pub mod training;
pub mod tree;
pub mod winograd;

pub mod linalg;
pub mod rnn;
pub mod signal;

use crate::abi::MAX_RANK;

/// Runs `body` compiled for the widest vectors of the CPU's sgemm level
/// ([`gemm::GemmKernel::best`]): the crate is
/// built for baseline x86-64, so a portable kernel's loops would otherwise
/// use 128-bit SSE2 at best. Kernels wrap their hot loops in it (marked
/// `#[inline(always)]`); results do not depend on the vector width, as the
/// loops it is meant for keep each element's operations in order.
#[inline(always)]
pub(crate) fn with_widest_vectors<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    match gemm::GemmKernel::best() {
        // SAFETY: `best` only names a level the CPU and OS support.
        gemm::GemmKernel::Avx512 => return unsafe { crate::x86_64::with_avx512(body) },
        gemm::GemmKernel::Avx2Fma => return unsafe { crate::x86_64::with_avx2(body) },
        gemm::GemmKernel::Generic => {}
    }
    body()
}

/// `rank` as a `usize` if `0 <= rank <= max` and `dims[..rank]` are all
/// nonnegative.
pub(crate) fn checked_rank(rank: i64, max: usize, dims: &[i64; MAX_RANK]) -> Option<usize> {
    if rank < 0 || rank as usize > max {
        return None;
    }
    let rank = rank as usize;
    if dims[..rank].iter().any(|&d| d < 0) {
        return None;
    }
    Some(rank)
}

/// Product of (already validated, nonnegative) dims, `None` on overflow.
pub(crate) fn product(dims: &[i64]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
}

/// Advances the row-major multi-index `idx` over `dims`, keeping each
/// `offs[s]` equal to `sum(idx[d] * strides[s][d])`. Returns `false` once the
/// index wraps around past the last element (idx and offs are then back to
/// zero). Every dim must be positive.
#[inline]
pub(crate) fn advance<const S: usize>(
    idx: &mut [usize],
    dims: &[usize],
    strides: [&[isize]; S],
    offs: &mut [isize; S],
) -> bool {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        for s in 0..S {
            offs[s] += strides[s][d];
        }
        if idx[d] < dims[d] {
            return true;
        }
        for s in 0..S {
            offs[s] -= strides[s][d] * dims[d] as isize;
        }
        idx[d] = 0;
    }
    false
}

/// Converts validated `i64` dims to `usize`.
pub(crate) fn to_usize<const N: usize>(src: &[i64; N]) -> [usize; N] {
    src.map(|v| v.max(0) as usize)
}

/// Converts `i64` strides to `isize`.
pub(crate) fn to_isize<const N: usize>(src: &[i64; N]) -> [isize; N] {
    src.map(|v| v as isize)
}

/// Helpers shared by the unit tests of every kernel family.
#[cfg(test)]
pub(crate) mod test_util {
    extern crate std;
    use std::vec::Vec;

    /// Deterministic pseudo-random values in [-1, 1).
    pub fn rand_vec(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// A deterministic byte stream (xorshift) for integer operands.
    pub fn rand_bytes(len: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.max(1);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    /// A `parallel_for` that runs the tasks last to first (a threaded split
    /// in another order than the serial one).
    pub unsafe extern "C" fn reversed(_user: *mut u8, count: usize, task: crate::parallel::TaskFn, env: *mut u8) {
        for i in (0..count).rev() {
            task(env, i);
        }
    }

    /// Row-major coordinates of flat index `flat` over `dims`.
    pub fn unravel(mut flat: usize, dims: &[usize]) -> [usize; 8] {
        let mut out = [0usize; 8];
        for d in (0..dims.len()).rev() {
            out[d] = flat % dims[d];
            flat /= dims[d];
        }
        out
    }

    /// Asserts `got` and `want` agree to a relative tolerance.
    pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
            assert!(ok, "index {i}: got {g}, want {w}");
        }
    }
}
