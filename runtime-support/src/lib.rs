//! onnxc-runtime: the kernel library that generated code calls.
//!
//! The compiler lowers simple elementwise work to Cranelift IR directly and
//! calls into this crate for everything that benefits from hand-written loops
//! (matrix multiply, convolution, pooling, normalisation, reductions, data
//! movement) and for transcendental scalar functions Cranelift lacks.
//!
//! The crate is `no_std` and never allocates, so that the static archive built
//! from it links into any program without dragging in a Rust runtime. Kernels
//! use the C ABI; their parameter structs ([`GemmParams`], [`ConvParams`], ...)
//! are plain `repr(C)` bags of `i64`/`f64` that the compiler fills in at
//! compile time and embeds as read-only data. [`abi::KERNELS`] is the single
//! declared list of kernel signatures that the compiler uses to declare the
//! imports, so the two sides cannot drift apart.
//!
//! Layout, in layers: [`abi`] holds the status codes, shared constants,
//! the kernel table and, one module per family, the C entry points and
//! their parameter structs; an entry point decodes its arguments and calls
//! [`generic`], the portable kernels in plain Rust (the reference), one
//! module per family, or [`isa::choose`], the one place where the CPU's
//! level ([`isa`] detects it) picks a SIMD kernel of [`x86_64`], each
//! tested against `generic`. [`model`] is the caller's side of a compiled
//! model's C ABI for Rust (context, status decoding, the error of generated
//! `run`s); [`parallel`] how kernels split work over the caller's threads;
//! [`tolerance`] the rule by which tests compare floats.
#![no_std]

#[allow(clippy::missing_safety_doc)] // the shared contract is in `abi`'s module doc
pub mod abi;
#[allow(clippy::missing_safety_doc)] // the same contract
pub mod generic;
pub mod isa;
pub mod model;
pub mod parallel;
pub mod tolerance;
#[cfg(target_arch = "x86_64")]
#[allow(clippy::missing_safety_doc)]
pub mod x86_64;

pub use abi::*;
pub use generic::attention::*;
pub use generic::blocked::*;
pub use generic::blocked_pool::*;
pub use generic::conv::*;
pub use generic::conv_transpose::*;
pub use generic::convert::*;
pub use generic::deform_conv::*;
pub use generic::gemm::*;
pub use generic::minifloat::*;
pub use generic::normalize::*;
pub use generic::packed::*;
pub use generic::pool::*;
pub use generic::prepacked::*;
pub use generic::qconv_packed::{pack_qconv, qconv_packed_bytes, qconv_packed_scratch_bytes};
pub use generic::qdepthwise::{
    pack_qdepthwise, qdepthwise_packed_bytes, qdepthwise_scratch_bytes, QConvConstants, MAX_TAPS,
};
pub use generic::qelementwise::{QBINARY_ADD, QBINARY_MUL};
pub use generic::qproduct::{integer_product, IntMatrix};
pub use generic::quant::*;
pub use generic::random::*;
pub use generic::reduce::*;
pub use generic::resize::*;
pub use generic::strings::*;
pub use generic::strips::{b_strips_len, pack_b_strips, Strips, STRIP};
pub use isa::choose::{sgemm_prepacked_with, sgemm_with};
pub use isa::{ByteKernel, Isa};
pub use parallel::*;

pub use generic::rnn::*;
