//! Portable kernels in plain Rust, one module per family: the reference
//! every SIMD variant in `crate::x86_64` is tested against, and the fallback
//! where none applies. Their C entry points and parameter structs are in
//! [`crate::abi`]; the functions here that take raw pointers share the
//! safety contract written there.

pub mod attention;
pub mod blocked;
pub(crate) mod blocked_depthwise;
pub mod blocked_pool;
pub mod conv;
pub mod conv_transpose;
pub(crate) mod conv_window;
pub mod convert;
pub mod copy;
pub mod deform_conv;
pub mod dynamic;
pub mod elementwise;
pub mod gemm;
pub(crate) mod gemm_batched;
pub mod gemv;
pub mod indexing;
pub mod lanes;
pub mod loss;
pub mod minifloat;
pub mod ml;
pub mod norm;
pub mod normalize;
pub(crate) mod normalize_contiguous;
pub mod packed;
pub mod pool;
pub mod prepacked;
pub mod qconv_packed;
pub mod qdepthwise;
pub mod qelementwise;
pub mod qproduct;
pub mod quant;
pub mod random;
pub mod real;
pub mod reduce;
pub(crate) mod reduce_contiguous;
pub mod resize;
pub mod roi;
pub(crate) mod small_groups;
pub mod softmax;
pub mod strings;
pub mod strips;
pub mod svm;
pub mod training;
pub mod tree;
pub mod vector_math;
pub mod winograd;

pub mod linalg;
pub mod rnn;
pub mod signal;

use crate::abi::MAX_RANK;

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
    use crate::isa::Isa;
    use core::cell::Cell;
    use std::vec::Vec;

    /// The environment variable that makes a missing instruction set fail
    /// the kernel tests instead of skipping them: a comma-separated list of
    /// [`ISAS`], or `all`.
    pub const REQUIRE_ISA: &str = "ONNXC_REQUIRE_ISA";

    /// The instruction sets whose kernels the tests run where the CPU has
    /// them.
    pub const ISAS: [&str; 3] = ["avx2", "avx512", "vnni"];

    /// Whether a test may run the kernels of `isa` (one of [`ISAS`]), which
    /// this CPU has when `available`. Kernels the CPU lacks are skipped, and
    /// said so on stderr; but when [`REQUIRE_ISA`] names `isa` the test
    /// fails instead, so that a run meant to cover a path cannot pass on a
    /// host that lacks it.
    pub fn isa_runs_here(isa: &str, available: bool) -> bool {
        let required = std::env::var(REQUIRE_ISA).unwrap_or_default();
        let runs = decide_isa(isa, available, &required).unwrap_or_else(|e| panic!("{e}"));
        if !runs {
            std::eprintln!(
                "skipping the {isa} kernels: this CPU lacks {isa} (set {REQUIRE_ISA}={isa} to fail instead)"
            );
        }
        runs
    }

    /// [`isa_runs_here`]'s rule with [`REQUIRE_ISA`] set to `required`:
    /// whether the kernels run, or why the test must fail.
    fn decide_isa(isa: &str, available: bool, required: &str) -> Result<bool, std::string::String> {
        assert!(ISAS.contains(&isa), "unknown instruction set {isa:?}");
        let names: Vec<&str> = required.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
        let unknown: Vec<&&str> = names.iter().filter(|n| **n != "all" && !ISAS.contains(n)).collect();
        if !unknown.is_empty() {
            return Err(std::format!("{REQUIRE_ISA}={required}: unknown {unknown:?} (known: {ISAS:?} or all)"));
        }
        if !available && names.iter().any(|&n| n == isa || n == "all") {
            return Err(std::format!("{REQUIRE_ISA}={required} requires the {isa} kernels; this CPU lacks {isa}"));
        }
        Ok(available)
    }

    #[test]
    fn a_required_isa_the_cpu_lacks_fails_the_test() {
        assert_eq!(decide_isa("avx512", false, ""), Ok(false));
        assert!(decide_isa("avx512", false, "avx512").is_err());
        assert!(decide_isa("vnni", false, "avx2, vnni").is_err());
        assert!(decide_isa("avx2", false, "all").is_err());
        assert_eq!(decide_isa("avx2", false, "avx512"), Ok(false));
        assert_eq!(decide_isa("avx512", true, "all"), Ok(true));
        assert!(decide_isa("avx2", true, "avx-512").is_err(), "a misspelt name must not pass unnoticed");
    }

    /// The instruction set of a gemm level (`None` for the portable one).
    pub fn isa_name(kernel: Isa) -> Option<&'static str> {
        match kernel {
            Isa::Generic => None,
            Isa::Avx2Fma => Some("avx2"),
            Isa::Avx512 => Some("avx512"),
        }
    }

    /// Every gemm level a test can run here ([`isa_runs_here`] for each).
    pub fn testable_isas() -> Vec<Isa> {
        let runs = |k: &Isa| isa_name(*k).is_none_or(|isa| isa_runs_here(isa, k.available()));
        Isa::ALL.into_iter().filter(runs).collect()
    }

    std::thread_local! {
        static FORCED_LEVEL: Cell<Option<Isa>> = const { Cell::new(None) };
    }

    /// Runs `body` with [`Isa::best`] answering `level` on this
    /// thread, so that a test reaches what a host whose best level is
    /// `level` runs (the AVX2 paths on an AVX-512 host). Work handed to
    /// other threads sees the CPU's best; the tests' `parallel_for` hooks
    /// run their tasks on the calling thread. `level` must be available.
    pub fn with_level<R>(level: Isa, body: impl FnOnce() -> R) -> R {
        assert!(level.available(), "{} is not available here", level.name());
        let before = FORCED_LEVEL.with(|f| f.replace(Some(level)));
        let result = body();
        FORCED_LEVEL.with(|f| f.set(before));
        result
    }

    /// The level [`with_level`] forces on this thread, if any.
    pub fn forced_level() -> Option<Isa> {
        FORCED_LEVEL.with(Cell::get)
    }

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

    /// Asserts `got` and `want` agree elementwise within `tol`, relative
    /// and absolute ([`crate::tolerance::close`]).
    pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
        assert_eq!(got.len(), want.len(), "lengths differ");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let ok = crate::tolerance::close(*g as f64, *w as f64, tol as f64, tol as f64);
            assert!(ok, "index {i}: got {g}, want {w}");
        }
    }
}
