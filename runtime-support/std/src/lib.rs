//! onnxc-runtime-std: what cannot be `no_std`: ImageDecoder's kernels
//! ([`image`]) and a thread pool for the kernels' `parallel_for`
//! ([`thread_pool`]).
//!
//! Why a crate of its own rather than a `std` feature of `onnxc-runtime`:
//! Cargo unifies a package's features across everything one build selects,
//! so `cargo build` of the workspace would give the `no_std` archive
//! `libonnxc_runtime.a` the feature as soon as onnxc asked for it, and with
//! it std's panic machinery, which the freestanding (`cc -nostdlib`)
//! programs cannot link. Keeping the std kernels here leaves `onnxc-runtime`
//! and its archive exactly as they are.
//!
//! This crate is built twice over: as the rlib that onnxc links (the JIT of
//! `run`/`test`/`bench` and constant folding resolve [`KERNELS`] here as
//! they do `onnxc_runtime::abi::KERNELS`), and as `libonnxc_runtime_std.a`,
//! every kernel of `onnxc-runtime` plus these, with std, which onnxc bundles
//! instead of `libonnxc_runtime.a` into the archive of a host model that
//! calls one of them. Unlike the `no_std` kernels, these allocate (the
//! decoders own their buffers) and need the C library.
//!
//! The decoders, and the `image` crate with them, are the default feature
//! `decoders`: a build script that compiles models through `onnxc::Build`
//! links this crate for the kernels' parameters and needs no decoder, so
//! without the feature [`KERNELS`] is empty and ImageDecoder is refused.

#[cfg(feature = "decoders")]
pub mod image;
pub mod image_params;
pub mod thread_pool;

#[cfg(feature = "decoders")]
pub use image::*;
pub use image_params::*;
pub use onnxc_runtime;

/// The kernels of this crate, as `onnxc_runtime::kernel_list!` lists the
/// `no_std` ones; the list exists without the decoders too, so that the
/// compiler's typed calls to them always compile.
#[macro_export]
macro_rules! kernel_list {
    ($callback:ident) => {
        $callback! {
        onnxc_image_dims(*const ImageDecodeParams, *const u8, i64, *mut i64) -> i32;
        onnxc_image_decode(*const ImageDecodeParams, *const u8, i64, *mut u8, i64) -> i32;
            }
    };
}

#[cfg(feature = "decoders")]
use onnxc_runtime::kernel_table;
#[cfg(feature = "decoders")]
kernel_list!(kernel_table);

/// Every kernel of this crate: none without the decoders.
#[cfg(not(feature = "decoders"))]
pub static KERNELS: &[onnxc_runtime::abi::KernelSig] = &[];

/// Looks a kernel of this crate up by its symbol name.
pub fn kernel(name: &str) -> Option<&'static onnxc_runtime::abi::KernelSig> {
    KERNELS.iter().find(|k| k.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "decoders")]
    #[test]
    fn names_do_not_clash_with_the_no_std_kernels() {
        for k in KERNELS {
            assert!(k.name.starts_with("onnxc_"), "{}", k.name);
            assert!(onnxc_runtime::abi::kernel(k.name).is_none(), "{} is in both tables", k.name);
        }
        assert_eq!(kernel("onnxc_image_decode").map(|k| k.params.len()), Some(5));
    }
}
