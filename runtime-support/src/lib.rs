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
//! Layout: [`abi`] holds the status codes, shared constants and the kernel
//! table; [`generic`] holds the portable scalar implementations, one module
//! per kernel family. Architecture-specific (SIMD) variants will live next to
//! `generic` and be tested against it.
#![no_std]

pub mod abi;
#[allow(clippy::missing_safety_doc)] // the shared contract is in `generic`'s module doc
pub mod generic;

pub use abi::{
    kernel, AbiType, KernelSig, KERNELS, MAX_RANK, STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS, STATUS_OK,
};
pub use generic::conv::*;
pub use generic::convert::*;
pub use generic::copy::*;
pub use generic::gemm::*;
pub use generic::math::*;
pub use generic::norm::*;
pub use generic::pool::*;
pub use generic::reduce::*;
pub use generic::softmax::*;

pub use generic::linalg::*;
pub use generic::rnn::*;
pub use generic::signal::*;
