//! The kernel library as a C static archive. A staticlib built from a
//! `no_std` crate needs a panic handler; the rlib cannot carry one (the
//! compiler links it next to std), so this thin crate supplies it.
//!
//! It also supplies `rust_eh_personality`: the precompiled `core` in the
//! archive is built for unwinding and its unwind tables reference that
//! symbol, so without a definition a plain C link (`cc main.c
//! libonnxc_runtime.a`) fails. Everything here is built with
//! `panic = "abort"`, so nothing ever unwinds and the stub is never called.
//!
//! And it names a global allocator that refuses every request: the kernels
//! never allocate, but a workspace build links `alloc` in (see `NoHeap`).

#![cfg_attr(not(test), no_std)]

pub use onnxc_runtime;

#[cfg(not(test))]
#[panic_handler]
fn on_panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

/// Never called (no unwinding under `panic = "abort"`); only satisfies the
/// reference from `core`'s unwind tables.
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn rust_eh_personality() {}

/// The kernels never allocate, but a workspace build links `alloc` into
/// this archive all the same: Cargo unifies features across the build, and
/// the `image` crate of `onnxc-runtime-std` turns on bytemuck's
/// `extern_crate_alloc` for the bytemuck the kernels share. A staticlib
/// that links `alloc` must name a global allocator; this one refuses every
/// request, so an allocation would be reported as a failure, never served.
#[cfg(not(test))]
struct NoHeap;

// SAFETY: never hands out memory, so there is nothing to get wrong.
#[cfg(not(test))]
unsafe impl core::alloc::GlobalAlloc for NoHeap {
    unsafe fn alloc(&self, _layout: core::alloc::Layout) -> *mut u8 {
        core::ptr::null_mut()
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: core::alloc::Layout) {}
}

#[cfg(not(test))]
#[global_allocator]
static NO_HEAP: NoHeap = NoHeap;
