//! x86-64 SIMD kernels (AVX2+FMA, AVX-512F, and the 8-bit products of
//! AVX2 and AVX-512 VNNI), each tested against the
//! portable reference in [`crate::generic`].
//!
//! Everything here is compiled with `#[target_feature]`, so the crate still
//! builds for (and runs on) baseline x86-64; callers must check
//! [`crate::isa`] before calling a kernel.

pub mod avx2;
pub mod avx2_int8;
pub mod avx512;
pub(crate) mod blocked_conv;
pub(crate) mod blocked_depthwise;
pub(crate) mod conv_activation;
pub mod depthwise;
mod depthwise_lanes;
pub(crate) mod direct_conv;
pub(crate) mod math_lanes;
mod plane;
pub mod pool;
pub(crate) mod qdepthwise;
pub(crate) mod rnn;
pub(crate) mod small_groups;
mod tile;
pub(crate) mod transpose;
pub mod vnni;

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
/// The CPU and OS support AVX-512F ([`crate::isa::cpu`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(crate) unsafe fn with_avx512<R>(body: impl FnOnce() -> R) -> R {
    body()
}

/// [`with_avx512`] for AVX2 and FMA.
///
/// # Safety
/// The CPU and OS support AVX2 and FMA ([`crate::isa::cpu`]).
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) unsafe fn with_avx2<R>(body: impl FnOnce() -> R) -> R {
    body()
}

#[cfg(test)]
mod tests {
    use super::{avx2::Avx2Fma, avx512::Avx512};
    use crate::generic::{gemm, prepacked};

    /// The blocked and pre-packed gemm drivers in each SIMD micro-kernel's
    /// layout, with portable arithmetic: they pack, slice and cut edge
    /// tiles for these kernels correctly on any host, whatever its
    /// instruction sets.
    #[test]
    fn gemm_drivers_in_simd_layouts_match_on_any_host() {
        gemm::tests::check_layout::<Avx2Fma>("avx2-fma layout");
        gemm::tests::check_layout::<Avx512>("avx512f layout");
        prepacked::tests::check_layout::<Avx2Fma>("avx2-fma layout");
        prepacked::tests::check_layout::<Avx512>("avx512f layout");
    }
}
