//! x86-64 SIMD kernels (AVX2+FMA, AVX-512F, and the 8-bit products of
//! AVX2 and AVX-512 VNNI), each tested against the
//! portable reference in [`crate::generic`].
//!
//! Everything here is compiled with `#[target_feature]`, so the crate still
//! builds for (and runs on) baseline x86-64; callers must check
//! [`cpu_features`] before calling a kernel. Detection uses `cpuid` and
//! `xgetbv`, which need no `std`: a CPU may support AVX but the OS may not
//! save the wider registers on context switch, so both the feature bits and
//! the OS-enabled state (XCR0) are checked.

pub mod avx2;
pub mod avx2_int8;
pub mod avx512;
pub(crate) mod blocked_conv;
pub mod depthwise;
mod depthwise_lanes;
pub(crate) mod direct_conv;
mod plane;
pub mod pool;
mod tile;
pub(crate) mod transpose;
pub mod vnni;

use core::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};

/// SIMD levels usable on this CPU and OS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuFeatures {
    /// AVX2 and FMA3, with the ymm state enabled by the OS.
    pub avx2_fma: bool,
    /// AVX-512F, with the zmm/opmask state enabled by the OS.
    pub avx512f: bool,
    /// AVX-512 VNNI (8-bit dot products) on top of AVX-512F.
    pub avx512_vnni: bool,
}

/// Up to four bytes from `p` (`left` of them readable) as one
/// native-endian i32, zero-padded: a depth quad of the 8-bit products.
///
/// # Safety
/// `min(left, 4)` bytes at `p` are readable.
#[inline(always)]
pub(crate) unsafe fn read_quad(p: *const u8, left: usize) -> i32 {
    if left >= 4 {
        return (p as *const i32).read_unaligned();
    }
    let mut bytes = [0u8; 4];
    core::ptr::copy_nonoverlapping(p, bytes.as_mut_ptr(), left);
    i32::from_ne_bytes(bytes)
}

/// Runs `body` compiled for AVX-512 (F, BW, VL) with AVX2 and FMA: the
/// autovectorised loops of a portable kernel inlined into it use zmm
/// registers. `body` and what it calls must be `#[inline(always)]` (or be
/// inlined anyway) for that to happen.
///
/// # Safety
/// The CPU and OS support AVX-512F ([`cpu_features`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(crate) unsafe fn with_avx512<R>(body: impl FnOnce() -> R) -> R {
    body()
}

/// [`with_avx512`] for AVX2 and FMA.
///
/// # Safety
/// The CPU and OS support AVX2 and FMA ([`cpu_features`]).
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) unsafe fn with_avx2<R>(body: impl FnOnce() -> R) -> R {
    body()
}

#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    _xgetbv(0)
}

/// Detects the SIMD features of the running CPU (a few `cpuid`s; callers
/// cache the result).
#[allow(unused_unsafe)] // `__cpuid` is a safe fn only in recent Rust
pub fn cpu_features() -> CpuFeatures {
    let mut f = CpuFeatures::default();
    // SAFETY: cpuid exists on every x86-64 CPU.
    let max_leaf = unsafe { __cpuid(0) }.eax;
    if max_leaf < 7 {
        return f;
    }
    let l1 = unsafe { __cpuid(1) };
    let (fma, osxsave, avx) = (l1.ecx >> 12 & 1 == 1, l1.ecx >> 27 & 1 == 1, l1.ecx >> 28 & 1 == 1);
    if !(osxsave && avx) {
        return f;
    }
    // SAFETY: OSXSAVE says xgetbv is available and XCR0 readable.
    let xcr0 = unsafe { xcr0() };
    let ymm_state = xcr0 & 0b110 == 0b110; // SSE + AVX state
    let zmm_state = xcr0 & 0b1110_0110 == 0b1110_0110; // + opmask, ZMM_Hi256, Hi16_ZMM
    let l7 = unsafe { __cpuid_count(7, 0) };
    let (avx2, avx512f) = (l7.ebx >> 5 & 1 == 1, l7.ebx >> 16 & 1 == 1);
    f.avx2_fma = ymm_state && avx2 && fma;
    f.avx512f = zmm_state && avx512f && f.avx2_fma;
    f.avx512_vnni = f.avx512f && l7.ecx >> 11 & 1 == 1;
    f
}
