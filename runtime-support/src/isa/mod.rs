//! CPU-feature detection and kernel choice, in one place.
//!
//! The crate is built for baseline x86-64, and its SIMD kernels are
//! compiled with `#[target_feature]`: a kernel may run only where [`cpu`]
//! says the CPU and OS support it. Detection uses `cpuid` and `xgetbv`,
//! which need no `std`; a CPU may support AVX while the OS does not save
//! the wider registers, so both the feature bits and the OS-enabled state
//! (XCR0) are checked. [`Isa::best`] is the level every float kernel
//! family runs at, [`ByteKernel::best`] the 8-bit products';
//! [`with_widest_vectors`] compiles a portable loop for that level, and
//! [`choose`] matches a level to its SIMD kernel.

#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};
use core::sync::atomic::{AtomicU8, Ordering};

pub mod choose;

/// The instruction-set levels the kernels are built for, slowest first:
/// every kernel family with SIMD variants takes the one [`Isa::best`]
/// names (the sgemm micro-kernels among them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Isa {
    /// The portable kernels (`crate::generic`, the reference), e.g. the
    /// blocked sgemm with its scalar 8x8 micro-kernel.
    Generic = 1,
    /// x86-64 AVX2+FMA (sgemm: a 4x24 micro-kernel).
    Avx2Fma = 2,
    /// x86-64 AVX-512F (sgemm: an 8x32 micro-kernel).
    Avx512 = 3,
}

impl Isa {
    /// Every implementation, available here or not.
    pub const ALL: [Isa; 3] = [Isa::Generic, Isa::Avx2Fma, Isa::Avx512];

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Generic => "generic",
            Isa::Avx2Fma => "avx2-fma",
            Isa::Avx512 => "avx512f",
        }
    }

    /// Whether this CPU (and OS) can run the implementation.
    pub fn available(self) -> bool {
        match self {
            Isa::Generic => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => cpu().avx2_fma,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => cpu().avx512f,
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The level named `name` (as [`Isa::name`] gives it).
    pub fn named(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Makes [`Isa::best`] answer this level from now on in this process,
    /// so that a benchmark times a slower level's kernels on a faster CPU
    /// (`onnxc bench --isa`); false, changing nothing, where the CPU lacks it.
    pub fn limit_to(self) -> bool {
        if !self.available() {
            return false;
        }
        SELECTED.store(self as u8, Ordering::Relaxed);
        true
    }

    /// The fastest available implementation (detected once, then cached).
    pub fn best() -> Isa {
        #[cfg(test)]
        if let Some(level) = crate::generic::test_util::forced_level() {
            return level;
        }
        match SELECTED.load(Ordering::Relaxed) {
            1 => Isa::Generic,
            2 => Isa::Avx2Fma,
            3 => Isa::Avx512,
            _ => {
                let k = *Isa::ALL.iter().rev().find(|k| k.available()).unwrap_or(&Isa::Generic);
                SELECTED.store(k as u8, Ordering::Relaxed);
                k
            }
        }
    }
}

/// Cached [`Isa::best`] (0 = not detected yet). Racing first calls
/// both detect and store the same value.
static SELECTED: AtomicU8 = AtomicU8::new(0);

/// Cached CPU features: bit 0 = detected, bit 1 = AVX2+FMA, bit 2 = AVX-512F,
/// bit 3 = AVX-512 VNNI.
#[cfg(target_arch = "x86_64")]
static FEATURES: AtomicU8 = AtomicU8::new(0);

#[cfg(target_arch = "x86_64")]
/// The CPU features, detected on the first call.
pub(crate) fn cpu() -> CpuFeatures {
    let mut bits = FEATURES.load(Ordering::Relaxed);
    if bits == 0 {
        let f = detect();
        bits = 1 | (f.avx2_fma as u8) << 1 | (f.avx512f as u8) << 2 | (f.avx512_vnni as u8) << 3;
        FEATURES.store(bits, Ordering::Relaxed);
    }
    CpuFeatures { avx2_fma: bits & 2 != 0, avx512f: bits & 4 != 0, avx512_vnni: bits & 8 != 0 }
}

/// An implementation of the raw 8-bit product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteKernel {
    /// Plain loops over bytes (the compiler vectorises them for the
    /// baseline target).
    Generic,
    /// x86-64 AVX2: bytes widened to i16, `vpmaddwd`.
    Avx2,
    /// x86-64 AVX-512 VNNI: `vpdpbusd`.
    Vnni,
}

impl ByteKernel {
    /// Every implementation, available here or not.
    pub const ALL: [ByteKernel; 3] = [ByteKernel::Generic, ByteKernel::Avx2, ByteKernel::Vnni];

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            ByteKernel::Generic => "generic",
            ByteKernel::Avx2 => "avx2",
            ByteKernel::Vnni => "vnni",
        }
    }

    /// Whether this CPU (and OS) can run the implementation.
    pub fn available(self) -> bool {
        match self {
            ByteKernel::Generic => true,
            #[cfg(target_arch = "x86_64")]
            ByteKernel::Avx2 => cpu().avx2_fma,
            #[cfg(target_arch = "x86_64")]
            ByteKernel::Vnni => cpu().avx512_vnni,
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The fastest available implementation within [`Isa::best`]'s level
    /// (VNNI needs AVX-512, the AVX2 products AVX2).
    pub fn best() -> ByteKernel {
        let within = |k: &ByteKernel| match k {
            ByteKernel::Vnni => Isa::best() == Isa::Avx512,
            ByteKernel::Avx2 => Isa::best() != Isa::Generic,
            ByteKernel::Generic => true,
        };
        [ByteKernel::Vnni, ByteKernel::Avx2]
            .into_iter()
            .find(|k| k.available() && within(k))
            .unwrap_or(ByteKernel::Generic)
    }
}

/// Runs `body` compiled for the widest vectors of the CPU's sgemm level
/// ([`Isa::best`]): the crate is
/// built for baseline x86-64, so a portable kernel's loops would otherwise
/// use 128-bit SSE2 at best. Kernels wrap their hot loops in it (marked
/// `#[inline(always)]`); results do not depend on the vector width, as the
/// loops it is meant for keep each element's operations in order.
#[inline(always)]
pub(crate) fn with_widest_vectors<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    match Isa::best() {
        // SAFETY: `best` only names a level the CPU and OS support.
        Isa::Avx512 => return unsafe { crate::x86_64::with_avx512(body) },
        Isa::Avx2Fma => return unsafe { crate::x86_64::with_avx2(body) },
        Isa::Generic => {}
    }
    body()
}

/// Asks the cache for the lines of `len` floats at `p` (no effect where the
/// target has no prefetch hint). Never faults, whatever `p`.
#[inline(always)]
pub(crate) fn prefetch_floats(p: *const f32, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..len).step_by(16) {
        // SAFETY: a prefetch is a hint: it neither faults nor changes memory.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(line) as *const i8)
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

#[cfg(target_arch = "x86_64")]
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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    _xgetbv(0)
}

/// Detects the SIMD features of the running CPU (a few `cpuid`s; [`cpu`]
/// caches the result).
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)] // `__cpuid` is a safe fn only in recent Rust
pub fn detect() -> CpuFeatures {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each 8-bit product runs exactly where the detected features say.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn byte_kernels_follow_the_detected_features() {
        let f = detect();
        assert_eq!(ByteKernel::Vnni.available(), f.avx512_vnni);
        assert_eq!(ByteKernel::Avx2.available(), f.avx2_fma);
    }
}
