//! The binary interface between generated code and the kernels.
//!
//! Each family module here (one per family of [`crate::generic`]) holds
//! that family's `#[no_mangle]` C entry points, its `#[repr(C)]` parameter
//! structs and the codes their fields take. An entry point decodes its raw
//! arguments and calls the family's Rust function, which does the work; the
//! compiler fills the structs in at compile time.
//!
//! Status codes and limits are shared constants; [`KERNELS`] is the one
//! declared list of kernel signatures. The compiler reads it to declare each
//! kernel as an import (and, when JIT-compiling, to resolve the address), so
//! a signature change here is a compile error or a visible table change, never
//! a silent ABI mismatch: the `kernel_table!` macro type-checks every entry
//! against the real function.
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
pub mod convert;
pub mod copy;
pub mod deform_conv;
pub mod dynamic;
pub mod elementwise;
pub mod gemm;
pub mod indexing;
pub mod linalg;
pub mod loss;
pub mod math;
pub mod minifloat;
pub mod ml;
pub mod norm;
pub mod packed;
pub mod pool;
pub mod quant;
pub mod random;
pub mod reduce;
pub mod resize;
pub mod rnn;
pub mod roi;
pub mod signal;
pub mod softmax;
pub mod strings;
pub mod svm;
pub mod training;
pub mod tree;

pub use attention::*;
pub use blocked::*;
pub use blocked_pool::*;
pub use conv::*;
pub use convert::*;
pub use copy::*;
pub use deform_conv::*;
pub use dynamic::*;
pub use elementwise::*;
pub use gemm::*;
pub use indexing::*;
pub use linalg::*;
pub use loss::*;
pub use math::*;
pub use minifloat::*;
pub use ml::*;
pub use norm::*;
pub use packed::*;
pub use pool::*;
pub use quant::*;
pub use random::*;
pub use reduce::*;
pub use resize::*;
pub use rnn::*;
pub use roi::*;
pub use signal::*;
pub use softmax::*;
pub use strings::*;
pub use svm::*;
pub use training::*;
pub use tree::*;

use crate::model::OnnxString;
use crate::parallel::Parallel;

/// The kernel (or the model) did its work.
pub const STATUS_OK: i32 = 0;
/// The caller's workspace is too small or not 8-byte aligned (returned by
/// generated code before any node runs).
pub const STATUS_BAD_CONTEXT: i32 = 1;
/// A gather index was outside `[-axis_len, axis_len)`.
pub const STATUS_INDEX_OUT_OF_RANGE: i32 = 2;
/// The params struct is inconsistent (bad rank, negative dim, unknown kind...).
pub const STATUS_INVALID_PARAMS: i32 = 3;
/// Integer division by zero (checked by generated code).
pub const STATUS_DIVISION_BY_ZERO: i32 = 4;
/// No memory for a data-dependent value: the workspace is too small, the
/// allocator hook returned NULL, or the size overflows.
pub const STATUS_OUT_OF_MEMORY: i32 = 5;
/// Cast from string met a string that is not a number of the target type.
pub const STATUS_NOT_A_NUMBER: i32 = 6;
/// A sequence, optional or map input's descriptor does not match what the
/// model was compiled for (presence, element count, rank or dims, or a
/// NULL address); the status's upper bits are the input's index + 1.
pub const STATUS_BAD_INPUT: i32 = 7;

/// Element-type codes that kernels taking any element type (`elem` fields)
/// switch on: the ONNX `TensorProto.DataType` numbers, so the compiler
/// passes `DType::onnx_code()` unchanged.
pub const ELEM_F32: i64 = 1;
pub const ELEM_U8: i64 = 2;
pub const ELEM_I8: i64 = 3;
pub const ELEM_U16: i64 = 4;
pub const ELEM_I16: i64 = 5;
pub const ELEM_I32: i64 = 6;
pub const ELEM_I64: i64 = 7;
pub const ELEM_BOOL: i64 = 9;
pub const ELEM_F16: i64 = 10;
pub const ELEM_F64: i64 = 11;
pub const ELEM_U32: i64 = 12;
pub const ELEM_U64: i64 = 13;
pub const ELEM_BF16: i64 = 16;
pub const ELEM_F8E4M3FN: i64 = 17;
pub const ELEM_F8E4M3FNUZ: i64 = 18;
pub const ELEM_F8E5M2: i64 = 19;
pub const ELEM_F8E5M2FNUZ: i64 = 20;
pub const ELEM_U4: i64 = 21;
pub const ELEM_I4: i64 = 22;
pub const ELEM_F4E2M1: i64 = 23;
pub const ELEM_F8E8M0: i64 = 24;
pub const ELEM_U2: i64 = 25;
pub const ELEM_I2: i64 = 26;

/// Capacity of every dims/strides array in a params struct.
pub const MAX_RANK: usize = 8;

/// The machine-level type of one kernel argument or return value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbiType {
    Ptr,
    I32,
    I64,
    F32,
    F64,
}

/// Maps a Rust argument type to its [`AbiType`]; lets the kernel table derive
/// the declared types from the checked Rust signature.
pub trait AbiTyped {
    const ABI: AbiType;
}
impl<T> AbiTyped for *const T {
    const ABI: AbiType = AbiType::Ptr;
}
impl<T> AbiTyped for *mut T {
    const ABI: AbiType = AbiType::Ptr;
}
impl AbiTyped for i32 {
    const ABI: AbiType = AbiType::I32;
}
impl AbiTyped for i64 {
    const ABI: AbiType = AbiType::I64;
}
impl AbiTyped for f32 {
    const ABI: AbiType = AbiType::F32;
}
impl AbiTyped for f64 {
    const ABI: AbiType = AbiType::F64;
}

/// One kernel's symbol name, C signature and address in this build.
#[derive(Debug)]
pub struct KernelSig {
    pub name: &'static str,
    pub params: &'static [AbiType],
    pub ret: Option<AbiType>,
    pub address: *const u8,
}

// SAFETY: `address` is a function address, immutable and valid for the whole
// program; sharing it between threads is harmless.
unsafe impl Sync for KernelSig {}

/// Builds [`KERNELS`] (and `onnxc-runtime-std`'s table of the kernels that
/// need std) from the rows of a kernel list. Each row names a function and
/// spells out its signature; the expansion assigns the function to a function
/// pointer of exactly that type, so a mismatch fails to compile, and derives
/// the [`AbiType`]s from the same spelled-out types.
#[macro_export]
macro_rules! kernel_table {
    ($($name:ident ( $($arg:ty),* ) -> $ret:ty;)*) => {
        /// Every exported kernel, in no particular order.
        pub static KERNELS: &[$crate::abi::KernelSig] = &[$(
            $crate::abi::KernelSig {
                name: stringify!($name),
                params: &[$(<$arg as $crate::abi::AbiTyped>::ABI),*],
                ret: Some(<$ret as $crate::abi::AbiTyped>::ABI),
                address: {
                    let f: unsafe extern "C" fn($($arg),*) -> $ret = $name;
                    f as *const u8
                },
            },
        )*];
    };
}

/// The one list of the kernels' signatures: hands its rows to the macro
/// `$callback`, so that [`KERNELS`] (through `kernel_table!`) and the
/// compiler's typed kernel calls are made from the same text. A row's types
/// resolve where `$callback` expands, which must have them in scope.
#[macro_export]
macro_rules! kernel_list {
    ($callback:ident) => {
        $callback! {
    onnxc_string_equal(*const OnnxString, *const OnnxString, *mut u8, i64) -> i32;
    onnxc_string_concat_bytes(*const OnnxString, *const OnnxString, i64) -> i64;
    onnxc_string_concat(*const OnnxString, *const OnnxString, *mut OnnxString, i64, *mut u8) -> i32;
    onnxc_string_normalize_count(*const NormalizerParams, *const u8, *const OnnxString, i64) -> i64;
    onnxc_string_normalize_bytes(*const NormalizerParams, *const u8, *const OnnxString, i64) -> i64;
    onnxc_string_normalize(*const NormalizerParams, *const u8, *const OnnxString, i64, *mut OnnxString, *mut u8) -> i32;
    onnxc_string_split_count(*const SplitParams, *const u8, *const OnnxString, i64) -> i64;
    onnxc_string_split(*const SplitParams, *const u8, *const OnnxString, i64, *mut OnnxString, *mut i64, i64) -> i32;
    onnxc_regex_full_match(*const u32, *const OnnxString, *mut u8, i64) -> i32;
    onnxc_tfidf(*const TfIdfParams, *const i64, *const u8, *mut f32) -> i32;
    onnxc_cast_to_string(i64, *const u8, i64, *mut OnnxString, *mut u8) -> i32;
    onnxc_cast_from_string(i64, *const OnnxString, i64, *mut u8) -> i32;
    onnxc_gemm_f32(*const GemmParams, *const f32, *const f32, *const f32, *mut f32, *const Parallel) -> i32;
    onnxc_conv_f32(*const ConvParams, *const f32, *const f32, *const f32, *const f32, *mut f32, *mut f32, *const Parallel) -> i32;
    onnxc_conv_prologue_f32(*const ConvParams, *const f32, *const f32, *const f32, *const f32, *const f32, *mut f32, *const Parallel) -> i32;
    onnxc_conv_blocked_f32(*const ConvParams, *const f32, *const f32, *const f32, *const f32, *mut f32, *mut f32, *const Parallel) -> i32;
    onnxc_pool_blocked_f32(*const PoolParams, *const f32, *mut f32, *const Parallel) -> i32;
    onnxc_to_blocked_f32(*const f32, *mut f32, i64, i64, i64, *const Parallel) -> i32;
    onnxc_from_blocked_f32(*const f32, *mut f32, i64, i64, i64, *const Parallel) -> i32;
    onnxc_conv_f64(*const ConvParams, *const f64, *const f64, *const f64, *const f64, *mut f64, *mut f64, *const Parallel) -> i32;
    onnxc_pool_f32(*const PoolParams, *const f32, *mut f32, *mut i64, *const Parallel) -> i32;
    onnxc_pool_f64(*const PoolParams, *const f64, *mut f64, *mut i64, *const Parallel) -> i32;
    onnxc_batchnorm_f32(*const BatchNormParams, *const f32, *const f32, *const f32, *const f32, *const f32, *mut f32, *mut f32, *mut f32) -> i32;
    onnxc_batchnorm_f64(*const BatchNormParams, *const f64, *const f64, *const f64, *const f64, *const f64, *mut f64, *mut f64, *mut f64) -> i32;
    onnxc_lrn_f32(*const LrnParams, *const f32, *mut f32) -> i32;
    onnxc_lrn_f64(*const LrnParams, *const f64, *mut f64) -> i32;
    onnxc_elementwise_f32(*const ElementwiseParams, *mut f32, *const f32, *const f32, *const f32, *const f32, *const f32, *const f32, *const Parallel) -> i32;
    onnxc_softmax_f32(*const SoftmaxParams, *const f32, *mut f32) -> i32;
    onnxc_softmax_f64(*const SoftmaxParams, *const f64, *mut f64) -> i32;
    onnxc_reduce_f32(*const ReduceParams, *const f32, *mut f32) -> i32;
    onnxc_reduce_f64(*const ReduceParams, *const f64, *mut f64) -> i32;
    onnxc_reduce_i32(*const ReduceParams, *const i32, *mut i32) -> i32;
    onnxc_reduce_i64(*const ReduceParams, *const i64, *mut i64) -> i32;
    onnxc_argreduce_f32(*const ArgReduceParams, *const f32, *mut i64) -> i32;
    onnxc_copy_strided(*const CopyParams, *const u8, *mut u8, *const Parallel) -> i32;
    onnxc_gather(*const GatherParams, *const u8, *const u8, *mut u8) -> i32;
    onnxc_pad(*const PadParams, *const u8, *const u8, *mut u8) -> i32;

    onnxc_expf(f32) -> f32;
    onnxc_logf(f32) -> f32;
    onnxc_tanhf(f32) -> f32;
    onnxc_erff(f32) -> f32;
    onnxc_powf(f32, f32) -> f32;
    onnxc_sinf(f32) -> f32;
    onnxc_cosf(f32) -> f32;
    onnxc_tanf(f32) -> f32;
    onnxc_asinf(f32) -> f32;
    onnxc_acosf(f32) -> f32;
    onnxc_atanf(f32) -> f32;
    onnxc_sinhf(f32) -> f32;
    onnxc_coshf(f32) -> f32;
    onnxc_asinhf(f32) -> f32;
    onnxc_acoshf(f32) -> f32;
    onnxc_atanhf(f32) -> f32;
    onnxc_expm1f(f32) -> f32;
    onnxc_log1pf(f32) -> f32;
    onnxc_fmodf(f32, f32) -> f32;

    onnxc_exp(f64) -> f64;
    onnxc_log(f64) -> f64;
    onnxc_tanh(f64) -> f64;
    onnxc_erf(f64) -> f64;
    onnxc_pow(f64, f64) -> f64;
    onnxc_sin(f64) -> f64;
    onnxc_cos(f64) -> f64;
    onnxc_tan(f64) -> f64;
    onnxc_asin(f64) -> f64;
    onnxc_acos(f64) -> f64;
    onnxc_atan(f64) -> f64;
    onnxc_sinh(f64) -> f64;
    onnxc_cosh(f64) -> f64;
    onnxc_asinh(f64) -> f64;
    onnxc_acosh(f64) -> f64;
    onnxc_atanh(f64) -> f64;
    onnxc_expm1(f64) -> f64;
    onnxc_log1p(f64) -> f64;
    onnxc_fmod(f64, f64) -> f64;
    onnxc_f16_to_f32(i32) -> f32;
    onnxc_f32_to_f16(f32) -> i32;
    onnxc_bf16_to_f32(i32) -> f32;
    onnxc_f32_to_bf16(f32) -> i32;
    onnxc_widen_f32(i64, *const u16, *mut f32, i64) -> i32;
    onnxc_minifloat_to_f32(i32, i64) -> f32;
    onnxc_f32_to_minifloat(f32, i64, i64) -> i32;
    onnxc_f64_to_minifloat(f64, i64, i64) -> i32;
    onnxc_unpack(i64, *const u8, *mut u8, i64) -> i32;
    onnxc_pack(i64, *const u8, *mut u8, i64) -> i32;
    onnxc_narrow_f32(i64, *const f32, *mut u16, i64) -> i32;

    onnxc_attention(*const AttentionParams, *const u8, *const u8, *const u8, *const u8, *const u8, *const u8, *const i64, *mut u8, *mut u8, *mut u8, *mut u8, *mut u8) -> i32;
    onnxc_rotary_embedding(*const RotaryParams, *const u8, *const u8, *const u8, *const i64, *mut u8) -> i32;
    onnxc_swiglu(*const SwigluParams, *const u8, *const u8, *mut u8) -> i32;
    onnxc_causal_conv_with_state(*const CausalConvParams, *const u8, *const u8, *const u8, *const u8, *mut u8, *mut u8) -> i32;
    onnxc_linear_attention(*const LinearAttentionParams, *const u8, *const u8, *const u8, *const u8, *const u8, *const u8, *mut u8, *mut u8, *mut f32) -> i32;
    onnxc_conv_transpose_f32(*const ConvParams, *const f32, *const f32, *const f32, *mut f32, *mut f32, *const Parallel) -> i32;
    onnxc_conv_transpose_f64(*const ConvParams, *const f64, *const f64, *const f64, *mut f64, *mut f64, *const Parallel) -> i32;
    onnxc_col2im_f32(*const ConvParams, *const f32, *mut f32) -> i32;
    onnxc_col2im_f64(*const ConvParams, *const f64, *mut f64) -> i32;
    onnxc_deform_conv_f32(*const DeformConvParams, *const f32, *const f32, *const f32, *const f32, *const f32, *mut f32, *mut f32) -> i32;
    onnxc_deform_conv_f64(*const DeformConvParams, *const f64, *const f64, *const f64, *const f64, *const f64, *mut f64, *mut f64) -> i32;
    onnxc_normalize(*const NormParams, *const u8, *const u8, *const u8, *mut u8, *mut u8, *mut u8, *mut f64) -> i32;
    onnxc_max_unpool(*const UnpoolParams, *const u8, *const i64, *mut u8) -> i32;
    onnxc_roi_align_f32(*const RoiParams, *const f32, *const f32, *const i64, *mut f32) -> i32;
    onnxc_max_roi_pool_f32(*const RoiParams, *const f32, *const f32, *mut f32) -> i32;
    onnxc_gather_elements(*const ElementsParams, *const u8, *const u8, *mut u8) -> i32;
    onnxc_scatter_elements(*const ElementsParams, *mut u8, *const u8, *const u8) -> i32;
    onnxc_gather_nd(*const NdParams, *const u8, *const i64, *mut u8) -> i32;
    onnxc_scatter_nd(*const NdParams, *mut u8, *const i64, *const u8) -> i32;
    onnxc_tensor_scatter(*const TensorScatterParams, *mut u8, *const u8, *const i64) -> i32;
    onnxc_one_hot(*const OneHotParams, i64, *const u8, *const u8, *mut u8) -> i32;
    onnxc_read_count(i64, *const u8) -> i64;
    onnxc_quantize(*const QuantParams, *const u8, *const u8, *const u8, *mut u8) -> i32;
    onnxc_dequantize(*const QuantParams, *const u8, *const u8, *const u8, *mut u8) -> i32;
    onnxc_dynamic_quantize(*const f32, i64, *mut u8, *mut f32, *mut u8) -> i32;
    onnxc_qmatmul(*const QMatMulParams, *const u8, *const u8, *const u8, *const u8, *mut i32) -> i32;
    onnxc_qconv(*const ConvParams, *const [QOperand; 2], *const u8, *const u8, *const u8, *const u8, *const i32, *mut i32, *mut u8) -> i32;
    onnxc_requantize(*const RequantParams, *const i32, *const u8, *const u8, *const u8, *const u8, *mut u8) -> i32;
    onnxc_qdepthwise(*const QDepthwiseParams, *const u8, *const u8, *mut u8, *mut u8) -> i32;
    onnxc_qconv_packed(*const QConvPackedParams, *const u8, *const u8, *mut u8, *mut u8) -> i32;
    onnxc_scale_product(*const ScaleParams, *mut u8, *const f32, *const f32) -> i32;
    onnxc_qbinary(*const QBinaryParams, *const u8, *const u8, *mut u8) -> i32;
    onnxc_qlookup(*const u8, i64, *const u8, *mut u8) -> i32;
    onnxc_broadcast_dims(*const BroadcastParams, *const i64, *mut i64) -> i32;
    onnxc_broadcast(*const BroadcastParams, *const i64, *const u8, *mut u8) -> i32;
    onnxc_trilu(*const TriluParams, *const u8, *const i64, *mut u8) -> i32;
    onnxc_eye(*const EyeParams, *mut u8) -> i32;
    onnxc_cumulative(*const CumulativeParams, *const u8, *mut u8) -> i32;
    onnxc_reverse_sequence(*const ReverseSequenceParams, *const u8, *const i64, *mut u8) -> i32;
    onnxc_topk(*const TopKParams, i64, *const u8, *mut u8, *mut i64, *mut i64) -> i32;
    onnxc_count_nonzero(*const NonZeroParams, *const u8) -> i64;
    onnxc_nonzero(*const NonZeroParams, *const u8, *mut i64, i64) -> i32;
    onnxc_compress(*const SliceParams, *const u8, *const u8, i64, *mut u8, i64) -> i32;
    onnxc_unique(*const SliceParams, *const u8, *mut i64) -> i64;
    onnxc_unique_write(*const SliceParams, *const u8, *const i64, i64, *mut u8, *mut i64, *mut i64, *mut i64) -> i32;
    onnxc_nms(*const NmsParams, *const f32, *const f32, *const i64, *const f32, *const f32, *mut i64, *mut i64) -> i64;
    onnxc_range_count(i64, *const u8, *const u8, *const u8) -> i64;
    onnxc_range(i64, *const u8, *const u8, *mut u8, i64) -> i32;
    onnxc_nll_loss_f32(*const NllLossParams, *const f32, *const u8, *const f32, *mut f32) -> i32;
    onnxc_nll_loss_f64(*const NllLossParams, *const f64, *const u8, *const f64, *mut f64) -> i32;
    onnxc_optimizer_step_f32(*const OptimizerParams, *const u8, *const i64, *const f32, *const f32, *const f32, *const f32, *mut f32, *mut f32, *mut f32) -> i32;
    onnxc_tree_ensemble_f32(*const TreeParams, *const TreeNode, *const TreeLeaf, *const TreeContribution, *const f64, *const i64, *const f64, *const f32, *mut f32) -> i32;
    onnxc_label_encode(*const LabelEncodeParams, *const u8, *const u8, *const u8, *const u8, *const u8, *mut u8) -> i32;
    onnxc_ml_one_hot(*const CategoryOneHotParams, *const u8, *const u8, *const i64, *const u8, *mut f32) -> i32;
    onnxc_ml_linear(*const MlLinearParams, *const f64, *const f64, *const u8, *mut f32) -> i32;
    onnxc_ml_classify(*const ClassifyParams, *const f64, *const i64, *const f32, *mut i64, *mut f32) -> i32;
    onnxc_ml_pick_labels(*const PickLabelsParams, *const i64, *const i64, *const StringRef, *const u8, *mut u8) -> i32;
    onnxc_ml_features(*const FeaturesParams, *const f64, *const f64, *const u8, *mut u8) -> i32;
    onnxc_svm_kernels(*const SvmKernelParams, *const f32, *const u8, *mut f32) -> i32;
    onnxc_svm_regress(*const SvmRegressParams, *const f32, *const f32, *mut f32) -> i32;
    onnxc_svm_classify(*const SvmClassifyParams, *const i64, *const f32, *const f32, *const f32, *const f32, *const f32, *mut f32, *mut i64, *mut f32) -> i32;
    onnxc_ml_vectorize(*const VectorizeParams, *const u8, *mut f32) -> i32;
    onnxc_tree_ensemble_f64(*const TreeParams, *const TreeNode, *const TreeLeaf, *const TreeContribution, *const f64, *const i64, *const f64, *const f64, *mut f64) -> i32;
    onnxc_optimizer_step_f64(*const OptimizerParams, *const u8, *const i64, *const f64, *const f64, *const f64, *const f64, *mut f64, *mut f64, *mut f64) -> i32;
    onnxc_resize_f32(*const ResizeParams, *const f32, *mut f32, *mut u8) -> i32;
    onnxc_resize_prepare(*const ResizeParams, *const ResizeSizing, *const f32, *const i64, i64, *mut ResizeParams) -> i32;
    onnxc_resize_scratch(*const ResizeParams) -> i64;
    onnxc_resize_f64(*const ResizeParams, *const f64, *mut f64, *mut u8) -> i32;
    onnxc_grid_sample_f32(*const GridSampleParams, *const f32, *const f32, *mut f32) -> i32;
    onnxc_grid_sample_f64(*const GridSampleParams, *const f64, *const f64, *mut f64) -> i32;
    onnxc_affine_grid_f32(*const AffineGridParams, *const f32, *mut f32) -> i32;
    onnxc_affine_grid_f64(*const AffineGridParams, *const f64, *mut f64) -> i32;
    onnxc_rnn_f32(*const RnnParams, *const f32, *const f32, *const f32, *const f32, *const i32, *const f32, *const f32, *const f32, *mut f32, *mut f32, *mut f32, *mut f32, *const Parallel) -> i32;
    onnxc_rnn_f64(*const RnnParams, *const f64, *const f64, *const f64, *const f64, *const i32, *const f64, *const f64, *const f64, *mut f64, *mut f64, *mut f64, *mut f64, *const Parallel) -> i32;
    onnxc_dft_f32(*const DftParams, *const f32, *mut f32, *mut f64) -> i32;
    onnxc_dft_f64(*const DftParams, *const f64, *mut f64, *mut f64) -> i32;
    onnxc_stft_f32(*const StftParams, *const f32, *const f32, *mut f32, *mut f64) -> i32;
    onnxc_stft_f64(*const StftParams, *const f64, *const f64, *mut f64, *mut f64) -> i32;
    onnxc_einsum_f32(*const EinsumParams, *const f32, *const f32, *const f32, *mut f32) -> i32;
    onnxc_einsum_f64(*const EinsumParams, *const f64, *const f64, *const f64, *mut f64) -> i32;
    onnxc_det_f32(*const DetParams, *const f32, *mut f32, *mut f64) -> i32;
    onnxc_det_f64(*const DetParams, *const f64, *mut f64, *mut f64) -> i32;
    onnxc_random(*const RandomParams, *mut u8) -> i32;
    onnxc_bernoulli(*const BernoulliParams, *const u8, *mut u8) -> i32;
    onnxc_multinomial(*const MultinomialParams, *const u8, *mut u8) -> i32;
    onnxc_dropout(*const DropoutParams, *const u8, *const u8, *const u8, *mut u8, *mut u8) -> i32;
        }
    };
}

kernel_list!(kernel_table);

/// Looks a kernel up by its symbol name.
pub fn kernel(name: &str) -> Option<&'static KernelSig> {
    KERNELS.iter().find(|k| k.name == name)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_prefixed() {
        let mut seen = HashSet::new();
        for k in KERNELS {
            assert!(k.name.starts_with("onnxc_"), "{}", k.name);
            assert!(seen.insert(k.name), "duplicate {}", k.name);
            assert!(!k.address.is_null());
        }
        assert!(KERNELS.len() >= 52);
    }

    #[test]
    fn lookup_and_types() {
        let g = kernel("onnxc_gemm_f32").unwrap();
        assert_eq!(g.params, &[AbiType::Ptr; 6]);
        assert_eq!(g.ret, Some(AbiType::I32));
        let p = kernel("onnxc_powf").unwrap();
        assert_eq!(p.params, &[AbiType::F32, AbiType::F32]);
        assert_eq!(p.ret, Some(AbiType::F32));
        assert_eq!(kernel("onnxc_fmod").unwrap().ret, Some(AbiType::F64));
        assert!(kernel("onnxc_nope").is_none());
    }
}
