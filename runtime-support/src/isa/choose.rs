//! The kernel choice: the one place where an instruction-set level
//! ([`Isa`], [`ByteKernel`]) is matched to a SIMD kernel of
//! `crate::x86_64`.
//!
//! The portable code of `crate::generic` asks here at each point where a
//! SIMD kernel can take its place: the gemm drivers' micro-kernel, the
//! plane kernels of depthwise convolution and pooling, the blocked and
//! direct convolutions, the reorder's transposes, the 8-bit products, the
//! depthwise QLinearConv's rows and the recurrent layers' product over
//! packed panels and LSTM cell.
//! A function here runs the level's kernel and says so (`true`, or
//! `Some`), or leaves the work to the portable code where the level has
//! none, so a level the CPU lacks never reaches a `#[target_feature]`
//! function.

use super::{ByteKernel, Isa};
use crate::abi::conv::ConvParams;
use crate::abi::elementwise::PROGRAM_OPERANDS;
use crate::abi::pool::PoolParams;
use crate::generic::blocked::{BlockedOperands, BlockedShape};
use crate::generic::blocked_depthwise::Band;
use crate::generic::conv::ConvFinish;
use crate::generic::conv_window::ConvWindow;
use crate::generic::elementwise::{run, Program};
use crate::generic::gemm::{blocked, gemm_generic, BMatrix, MatMut, MatRef, Portable};
use crate::generic::pool::Planes;
use crate::generic::prepacked::{prepacked, BSource, FinishRow};
use crate::generic::qdepthwise::Channel;
use crate::generic::rnn::lstm_lanes::LstmRow;
use crate::generic::rnn::panels::Product;
use crate::generic::small_groups::Group;
use crate::generic::vector_math::{LaneFunction, Scalar};
use crate::parallel::Parallel;
use core::ops::Range;

/// `Y = alpha * A * B + beta * C` with `kernel`'s blocked driver and
/// micro-kernel; one the CPU lacks falls back to the portable gemm (the
/// portable micro-kernel in the blocked driver for B in strips). One or
/// two rows of a strided B take `generic::gemv`'s `few_rows` whatever the kernel.
///
/// # Safety
/// As [`crate::generic::gemm::sgemm`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_with(
    kernel: Isa,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef,
    b: impl Into<BMatrix>,
    beta: f32,
    c: Option<MatRef>,
    y: MatMut,
) {
    let b = b.into();
    if let BMatrix::Strided(b) = b {
        if crate::generic::gemv::few_rows(m, n, k, alpha, a, b, beta, c, y) {
            return;
        }
    }
    match (kernel, b) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, _) if kernel.available() => crate::x86_64::avx512::sgemm(m, n, k, alpha, a, b, beta, c, y),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2Fma, _) if kernel.available() => crate::x86_64::avx2::sgemm(m, n, k, alpha, a, b, beta, c, y),
        (_, BMatrix::Strided(b)) => gemm_generic(m, n, k, alpha, a, b, beta, c, y),
        (_, BMatrix::Strips(_)) => blocked::<Portable>(m, n, k, alpha, a, b, beta, c, y),
    }
}

/// The tile width of the micro-kernel [`sgemm_with`] runs for `kernel`:
/// where a column split of a product adds no edge tile.
pub fn sgemm_tile_columns(kernel: Isa) -> usize {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if kernel.available() => crate::x86_64::avx512::NR,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if kernel.available() => crate::x86_64::avx2::NR,
        _ => crate::generic::gemm::NR,
    }
}

/// [`prepacked`] with `kernel`'s micro-kernel; one the CPU lacks falls
/// back to the portable one.
///
/// # Safety
/// As [`prepacked`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_prepacked_with<B: BSource, F: FinishRow>(
    kernel: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    b: &B,
    y: MatMut,
    finish: &F,
    parallel: *const Parallel,
) {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if kernel.available() => {
            prepacked::<crate::x86_64::avx512::Avx512, B, F>(m, n, k, a, b, y, finish, parallel)
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if kernel.available() => {
            prepacked::<crate::x86_64::avx2::Avx2Fma, B, F>(m, n, k, a, b, y, finish, parallel)
        }
        _ => prepacked::<Portable, B, F>(m, n, k, a, b, y, finish, parallel),
    }
}

/// Depthwise convolution planes by [`Isa::best`]'s plane kernel; `false`
/// (nothing done) where it has none or the planes do not fit it.
///
/// # Safety
/// As `generic::gemm`'s `GemmElem::depthwise_planes`.
#[inline(always)]
pub(crate) unsafe fn depthwise_planes(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    planes: Range<usize>,
    finish: impl Fn(usize, &mut [f32]),
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::x86_64::depthwise::{depthwise_planes_avx2, depthwise_planes_avx512};
        match Isa::best() {
            Isa::Avx512 => return depthwise_planes_avx512(p, x, w, bias, y, planes, finish),
            Isa::Avx2Fma => return depthwise_planes_avx2(p, x, w, bias, y, planes, finish),
            Isa::Generic => {}
        }
    }
    let _ = (p, x, w, bias, y, planes, finish);
    false
}

/// Pooling planes by `kernel`'s plane kernel; `false` (nothing done) where
/// it has none or the planes do not fit it.
///
/// # Safety
/// As `generic::pool`'s `PoolElem::pool_planes_simd`.
pub(crate) unsafe fn pool_planes(kernel: Isa, p: &PoolParams, x: *const f32, y: *mut f32, planes: Planes) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::x86_64::pool::{pool_planes_avx2, pool_planes_avx512};
        match kernel {
            Isa::Avx512 if kernel.available() => return pool_planes_avx512(p, x, y, planes),
            Isa::Avx2Fma if kernel.available() => return pool_planes_avx2(p, x, y, planes),
            _ => {}
        }
    }
    let _ = (kernel, p, x, y, planes);
    false
}

/// A blocked (NCHW8c) convolution by `kernel`'s tiles, through Winograd's
/// transforms when `winograd`; `false` (nothing done) for the portable
/// level.
///
/// # Safety
/// As [`crate::abi::onnxc_conv_blocked_f32`], on checked params and shape.
pub(crate) unsafe fn blocked_conv(
    kernel: Isa,
    p: &ConvParams,
    s: &BlockedShape,
    o: BlockedOperands,
    scratch: *mut f32,
    parallel: *const Parallel,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if kernel != Isa::Generic && kernel.available() {
        use crate::x86_64::blocked_conv::gathered;
        if crate::generic::winograd::conv_takes_winograd(p) {
            crate::x86_64::blocked_conv::winograd(p, s, o, scratch, parallel, kernel);
        } else if let Some(chunk) = gathered::chunk(p, s).filter(|_| kernel == Isa::Avx512 && !scratch.is_null()) {
            gathered::conv(p, s, o, scratch, parallel, chunk);
        } else {
            crate::x86_64::blocked_conv::conv(p, s, o, parallel, kernel);
        }
        return true;
    }
    let _ = (kernel, p, s, o, scratch, parallel);
    false
}

/// An 8x8 transpose of floats (`src` rows `src_stride` apart into `dst`
/// rows `dst_stride` apart) for [`Isa::best`], if it has one.
pub(crate) fn transpose8x8() -> Option<unsafe fn(*const f32, usize, *mut f32, usize)> {
    #[cfg(target_arch = "x86_64")]
    if Isa::best() != Isa::Generic {
        return Some(crate::x86_64::transpose::transpose8x8);
    }
    None
}

/// Whether convolutions take the direct kernel ([`direct_conv`]) for the
/// windows it fits: where the gemm it replaces is the AVX2 one.
pub(crate) fn direct_conv_runs() -> bool {
    cfg!(target_arch = "x86_64") && Isa::best() == Isa::Avx2Fma
}

/// The direct convolution of one group: `m` output channels of weights `a`
/// (packed as gemm A panels) over the input `x` placed for `window`.
///
/// # Safety
/// [`direct_conv_runs`] said so, and the operands are as for
/// `x86_64::direct_conv::conv`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn direct_conv(
    window: &ConvWindow,
    x: *const f32,
    m: usize,
    a: *const f32,
    y: *mut f32,
    finish: &ConvFinish,
    parallel: *const Parallel,
) {
    #[cfg(target_arch = "x86_64")]
    crate::x86_64::direct_conv::conv(window, x, m, a, y, finish, parallel);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (window, x, m, a, y, finish, parallel);
}

/// One band of a blocked depthwise convolution
/// ([`crate::generic::blocked_depthwise`]) with `level`'s tiles; a level
/// the CPU lacks runs the portable loops.
///
/// # Safety
/// As [`Band::run_portable`].
pub(crate) unsafe fn blocked_depthwise_band(level: Isa, band: &Band) {
    match level {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if level.available() => crate::x86_64::blocked_depthwise::band_avx512(band),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if level.available() => crate::x86_64::blocked_depthwise::band_avx2(band),
        _ => band.run_portable(),
    }
}

/// One group of a convolution of small groups
/// ([`crate::generic::small_groups`]) with `level`'s vectors; a level the
/// CPU lacks runs it one lane at a time.
///
/// # Safety
/// As [`Group::run`].
pub(crate) unsafe fn small_group(level: Isa, group: &Group, finish: &ConvFinish) {
    match level {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if level.available() => crate::x86_64::small_groups::run_avx512(group, finish),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if level.available() => crate::x86_64::small_groups::run_avx2(group, finish),
        _ => group.run::<Scalar>(finish),
    }
}

/// The raw 8-bit product `raw[i][j] = sum_l (a[i][l] ^ a_flip) as u8 *
/// (b[l][j] ^ b_flip) as i8` by `kernel`; `false` (nothing done) where the
/// CPU lacks it or it is the portable one.
///
/// # Safety
/// As `x86_64::vnni::product_u8i8`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn byte_product(
    kernel: ByteKernel,
    [m, k, n]: [usize; 3],
    a: *const u8,
    a_flip: u8,
    b: *const u8,
    b_flip: u8,
    raw: *mut i32,
) -> bool {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        ByteKernel::Vnni if kernel.available() => crate::x86_64::vnni::product_u8i8(m, n, k, a, a_flip, b, b_flip, raw),
        #[cfg(target_arch = "x86_64")]
        ByteKernel::Avx2 if kernel.available() => {
            crate::x86_64::avx2_int8::product_u8i8(m, n, k, a, a_flip, b, b_flip, raw)
        }
        _ => {
            let _ = (m, k, n, a, a_flip, b, b_flip, raw);
            return false;
        }
    }
    true
}

/// One channel of the depthwise QLinearConv (`generic::qdepthwise`) by
/// `kernel`'s row kernel; `false` (nothing done) for the portable one, a
/// kernel the CPU lacks, or strides above 2.
///
/// # Safety
/// As `x86_64::qdepthwise::rows_vnni`, without its CPU requirement.
pub(crate) unsafe fn qdepthwise_rows(kernel: ByteKernel, ch: &Channel, out: *mut u8) -> bool {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        ByteKernel::Vnni if kernel.available() && ch.stride <= 2 => crate::x86_64::qdepthwise::rows_vnni(ch, out),
        #[cfg(target_arch = "x86_64")]
        ByteKernel::Avx2 if kernel.available() && ch.stride <= 2 => crate::x86_64::qdepthwise::rows_avx2(ch, out),
        _ => {
            let _ = (ch, out);
            return false;
        }
    }
    true
}

/// The output elements `span` of the elementwise `program` with `level`'s
/// vectors; a level the CPU lacks runs them one lane at a time.
///
/// # Safety
/// As [`crate::abi::onnxc_elementwise_f32`].
pub unsafe fn elementwise_program(
    level: Isa,
    program: &Program,
    y: *mut f32,
    operands: [*const f32; PROGRAM_OPERANDS],
    span: Range<usize>,
) {
    match level {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if level.available() => crate::x86_64::math_lanes::run_program_avx512(program, y, operands, span),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if level.available() => crate::x86_64::math_lanes::run_program_avx2(program, y, operands, span),
        _ => run::<Scalar>(program, y, operands, span),
    }
}

/// Softmax rows ([`crate::generic::softmax::softmax_rows`]) with `level`'s
/// vectors; a level the CPU lacks runs them one lane at a time.
///
/// # Safety
/// As `softmax_rows`.
pub unsafe fn softmax_rows(level: Isa, x: *const f32, y: *mut f32, rows: usize, len: usize, log: bool) {
    match level {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if level.available() => crate::x86_64::math_lanes::softmax_rows_avx512(x, y, rows, len, log),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if level.available() => crate::x86_64::math_lanes::softmax_rows_avx2(x, y, rows, len, log),
        _ => crate::generic::softmax::softmax_rows::<Scalar>(x, y, rows, len, log),
    }
}

/// `xs[i] = F(xs[i])` with `level`'s vectors; a level the CPU lacks runs
/// it one lane at a time (the same bits).
pub fn map_in_place<F: LaneFunction>(level: Isa, xs: &mut [f32]) {
    // SAFETY: a level reaches its kernel only where the CPU has it.
    unsafe {
        match level {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 if level.available() => crate::x86_64::math_lanes::map_in_place_avx512::<F>(xs),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma if level.available() => crate::x86_64::math_lanes::map_in_place_avx2::<F>(xs),
            _ => crate::generic::vector_math::map_in_place::<Scalar, F>(xs),
        }
    }
}

/// The recurrent layers' product over packed panels with `level`'s
/// vectors; `false` (nothing done) for the portable level.
///
/// # Safety
/// As the product's [`Product`].
pub(crate) unsafe fn recurrent_product(level: Isa, q: &Product<f32>) -> bool {
    #[cfg(target_arch = "x86_64")]
    match level {
        Isa::Avx512 if level.available() => {
            crate::x86_64::rnn::recurrent_product_avx512(q);
            return true;
        }
        Isa::Avx2Fma if level.available() => {
            crate::x86_64::rnn::recurrent_product_avx2(q);
            return true;
        }
        _ => {}
    }
    let _ = (level, q);
    false
}

/// The f32 LSTM cell of the usual activations in one pass of `level`'s
/// vectors; `false` (nothing done) for the portable level.
///
/// # Safety
/// As [`LstmRow`].
pub(crate) unsafe fn lstm_cell(level: Isa, row: &LstmRow<f32>) -> bool {
    #[cfg(target_arch = "x86_64")]
    match level {
        Isa::Avx512 if level.available() => {
            crate::x86_64::rnn::lstm_cell_avx512(row);
            return true;
        }
        Isa::Avx2Fma if level.available() => {
            crate::x86_64::rnn::lstm_cell_avx2(row);
            return true;
        }
        _ => {}
    }
    let _ = (level, row);
    false
}
