//! Convolution (ONNX Conv) as im2col + gemm.
//!
//! For each image and group the kernel lays the receptive fields out as the
//! columns of a `[C/group * prod(kernel), prod(out_spatial)]` matrix in the
//! caller-provided scratch buffer (padding reads as 0), then one gemm with
//! the group's weights `[M/group, C/group * prod(kernel)]` produces the
//! group's output channels, the bias riding along as a broadcast C operand.
//! Pointwise convolutions (all kernel dims 1, stride 1, no padding) skip
//! im2col and multiply the input directly. This trades scratch memory for
//! reusing the blocked gemm. With weights packed at compile time the im2col
//! matrix is generated straight into the gemm's B panels instead, and on
//! AVX2 hosts 2-D windows skip it altogether for the direct kernel
//! ([`crate::x86_64::direct_conv`]), which reads the input in place or from
//! a zero-padded copy ([`super::conv_window`]).
//!
//! The transposed direction (ConvTranspose, Col2Im) is in
//! [`super::conv_transpose`].
//!
//! Every kernel is generic over the compute type; f32 and f64 are exported
//! (the gemm is the SIMD one for f32, the portable blocked one for f64).

use super::conv_window::ConvWindow;
use super::gemm::{GemmElem, MatMut, MatRef};
use super::pool::{window_fits, MAX_SPATIAL_RANK};
use super::prepacked::{
    pack_a, packed_a_len, sgemm_prepacked, BSource, FinishRow, TileActivation, TileEnd, MAX_BLOCK_COLUMNS,
};
use super::real::Real;
use super::vector_math::{LaneFunction, Sigmoid, Silu, Tanh};
use super::{checked_rank, product, to_usize};
use crate::abi::conv::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};
use crate::isa::{prefetch_floats, Isa};
use crate::parallel::{share, Parallel};
use core::ops::Range;

/// The epilogue's activation when it is a compare and a select (which SIMD
/// tiles apply in registers), else `None`.
pub(crate) fn tile_activation(p: &ConvParams) -> Option<TileActivation> {
    let (a, b) = (p.act_a as f32, p.act_b as f32);
    match p.activation {
        EPILOGUE_NONE => Some(TileActivation::None),
        EPILOGUE_RELU => Some(TileActivation::Clamp { lo: 0.0, hi: f32::INFINITY }),
        EPILOGUE_CLIP => Some(TileActivation::Clamp { lo: a, hi: b }),
        EPILOGUE_LEAKY_RELU => Some(TileActivation::Leaky { slope: a }),
        _ => None,
    }
}

/// The fused tail of a finished output row or block, in one pass:
/// `out = activation((out + bias) + residual)`, each step in the order the
/// separate operators compute it (so the sum is bit-identical); `residual`
/// points at the block's part of the residual.
///
/// The activations use the same comparisons as the separate operators (NaN
/// passes through, Relu keeps -0), each a branch-free select so that the
/// loop vectorises. Sigmoid, HardSigmoid, HardSwish, Tanh and SiLU do the
/// separate operators' arithmetic step by step (the same sigmoid and tanh
/// as theirs, [`super::vector_math`]'s, their clamp as `fmax`/`fmin`: NaN propagates, and
/// `max(-0, 0)` is `+0`), so the results are the same bits.
#[inline(always)]
pub(crate) unsafe fn epilogue<T: Real>(p: &ConvParams, bias: Option<T>, residual: Option<*const T>, out: &mut [T]) {
    let residual = residual.map(|r| core::slice::from_raw_parts(r, out.len()));
    let (a, b) = (T::from_f64(p.act_a), T::from_f64(p.act_b));
    let (zero, one) = (T::ZERO, T::ONE);
    let clamp01 = |v: T| {
        let v = if v > zero || v.is_nan() { v } else { zero };
        if v < one || v.is_nan() {
            v
        } else {
            one
        }
    };
    match p.activation {
        EPILOGUE_RELU => fused(out, bias, residual, |v| if v < zero { zero } else { v }),
        EPILOGUE_LEAKY_RELU => fused(out, bias, residual, |v| if v < zero { v * a } else { v }),
        EPILOGUE_CLIP => fused(out, bias, residual, |v| {
            let high = if v > b { b } else { v };
            if v < a {
                a
            } else {
                high
            }
        }),
        EPILOGUE_SIGMOID => mapped::<T, Sigmoid>(out, bias, residual, |v| v.sigmoid()),
        EPILOGUE_HARD_SIGMOID => fused(out, bias, residual, |v| clamp01(v * a + b)),
        EPILOGUE_HARD_SWISH => {
            let (sixth, half) = (T::from_f64(1.0 / 6.0), T::from_f64(0.5));
            fused(out, bias, residual, |v| v * clamp01(v * sixth + half))
        }
        EPILOGUE_TANH => mapped::<T, Tanh>(out, bias, residual, |v| v.tanh()),
        EPILOGUE_SILU => mapped::<T, Silu>(out, bias, residual, |v| v * v.sigmoid()),
        _ if bias.is_some() || residual.is_some() => fused(out, bias, residual, |v| v),
        _ => {}
    }
}

/// [`fused`] with an activation the host's vectors compute (Sigmoid, Tanh,
/// SiLU) where the type has them: the sums first, then `F` over `out`.
/// One lane at a time, as [`Real`]'s `scalar` is (its FMA libm's, in
/// software), EfficientNet-B0's first fused SiLU depthwise layer (32 ×
/// 112²) took 35 ms.
#[inline(always)]
fn mapped<T: Real, F: LaneFunction>(out: &mut [T], bias: Option<T>, residual: Option<&[T]>, scalar: impl Fn(T) -> T) {
    if bias.is_some() || residual.is_some() {
        fused(out, bias, residual, |v| v);
    }
    if !T::map_lanes::<F>(out) {
        out.iter_mut().for_each(|v| *v = scalar(*v));
    }
}

/// One loop of [`epilogue`] per combination of operands present.
#[inline(always)]
fn fused<T: Real>(out: &mut [T], bias: Option<T>, residual: Option<&[T]>, activation: impl Fn(T) -> T) {
    match (bias, residual) {
        (None, None) => out.iter_mut().for_each(|v| *v = activation(*v)),
        (Some(b), None) => out.iter_mut().for_each(|v| *v = activation(*v + b)),
        (None, Some(r)) => out.iter_mut().zip(r).for_each(|(v, &r)| *v = activation(*v + r)),
        (Some(b), Some(r)) => out.iter_mut().zip(r).for_each(|(v, &r)| *v = activation(*v + b + r)),
    }
}

/// Sizes derived from validated params.
pub(crate) struct ConvShape {
    pub rank: usize,
    pub c_per_group: usize,
    pub m_per_group: usize,
    pub in_size: usize,
    pub out_size: usize,
    pub taps: usize,
    pub pointwise: bool,
}

pub(crate) fn validate(p: &ConvParams) -> Option<ConvShape> {
    let rank = checked_rank(p.spatial_rank, MAX_SPATIAL_RANK, &p.in_spatial)?;
    if rank == 0
        || p.batch < 0
        || p.in_channels < 0
        || p.out_channels < 0
        || p.group < 1
        || p.in_channels % p.group != 0
        || p.out_channels % p.group != 0
    {
        return None;
    }
    let dims_ok = (0..rank).all(|d| {
        p.out_spatial[d] >= 0
            && p.kernel[d] >= 1
            && p.strides[d] >= 1
            && p.dilations[d] >= 1
            && window_fits(p.out_spatial[d], p.kernel[d], p.strides[d], p.dilations[d], p.pads_begin[d])
    });
    if !dims_ok {
        return None;
    }
    let pointwise = (0..rank).all(|d| p.kernel[d] == 1 && p.strides[d] == 1 && p.pads_begin[d] == 0)
        && p.in_spatial[..rank] == p.out_spatial[..rank];
    Some(ConvShape {
        rank,
        c_per_group: (p.in_channels / p.group) as usize,
        m_per_group: (p.out_channels / p.group) as usize,
        in_size: product(&p.in_spatial[..rank])?,
        out_size: product(&p.out_spatial[..rank])?,
        taps: product(&p.kernel[..rank])?,
        pointwise,
    })
}

/// Number of scratch elements (of the kernel's type) [`onnxc_conv_f32`]
/// needs for these params (0 for invalid params).
pub fn conv_scratch_elems(p: &ConvParams) -> usize {
    match validate(p) {
        Some(s) if !s.pointwise && p.packed_weights == 0 => s.c_per_group * s.taps * s.out_size,
        // Whichever CPU runs it, a direct kernel may need a padded input.
        Some(s) => ConvWindow::of(p, &s).map_or(0, |w| w.scratch_elems()),
        None => 0,
    }
}

/// The im2col matrix of one group of one image, generated on demand: row
/// `c * taps + t` holds input channel `c` under kernel tap `t` (row-major
/// over the kernel dims), column `j` output position `j` (row-major); a
/// tap outside the input reads `pad` (0 for the float kernels; the
/// quantized ones pass the input's zero point, `generic::quant`).
pub(crate) struct Im2col<T> {
    x: *const T,
    pad: T,
    rank: usize,
    taps: usize,
    in_size: usize,
    in_dims: [usize; MAX_RANK],
    in_strides: [isize; MAX_RANK],
    out_dims: [usize; MAX_RANK],
    kernel: [usize; MAX_RANK],
    strides: [isize; MAX_RANK],
    dilations: [isize; MAX_RANK],
    pads: [isize; MAX_RANK],
}

impl<T: Copy> Im2col<T> {
    /// The matrix of the group whose first input channel starts at `x`.
    pub(crate) fn new(p: &ConvParams, s: &ConvShape, x: *const T, pad: T) -> Self {
        let in_dims = to_usize(&p.in_spatial);
        let mut in_strides = [0isize; MAX_RANK];
        let mut step = 1isize;
        for d in (0..s.rank).rev() {
            in_strides[d] = step;
            step *= in_dims[d] as isize;
        }
        Im2col {
            x,
            pad,
            rank: s.rank,
            taps: s.taps,
            in_size: s.in_size,
            in_dims,
            in_strides,
            out_dims: to_usize(&p.out_spatial),
            kernel: to_usize(&p.kernel),
            strides: p.strides.map(|v| v as isize),
            dilations: p.dilations.map(|v| v as isize),
            pads: p.pads_begin.map(|v| v as isize),
        }
    }

    /// Writes `row`'s columns `j0..j0 + len` to `dst`, walking the output
    /// positions a line (last output dim) at a time: per line the range of
    /// columns whose input is inside the image is computed once, copied (or
    /// gathered with the stride), and the rest zero-filled.
    #[inline(always)]
    pub(crate) unsafe fn row_segment(&self, row: usize, j0: usize, len: usize, dst: *mut T) {
        let last = self.rank - 1;
        let (c, mut t) = (row / self.taps, row % self.taps);
        let mut k = [0usize; MAX_RANK];
        for d in (0..self.rank).rev() {
            k[d] = t % self.kernel[d];
            t /= self.kernel[d];
        }
        let mut o = [0usize; MAX_RANK];
        let mut rest = j0;
        for d in (0..self.rank).rev() {
            o[d] = rest % self.out_dims[d];
            rest /= self.out_dims[d];
        }
        let xc = self.x.add(c * self.in_size);
        let (s_last, width) = (self.strides[last], self.out_dims[last]);
        let first = k[last] as isize * self.dilations[last] - self.pads[last];
        let in_last = self.in_dims[last] as isize;
        // Output columns [lo, hi) of a line that read inside the input line
        // (the same for every line of this row).
        // In i128: a stride or padding near the i64 range must not wrap.
        let (first_w, s_w, width_w) = (first as i128, s_last as i128, width as i128);
        let lo = if first_w >= 0 { 0 } else { ((-first_w - 1) / s_w + 1).min(width_w) as usize };
        let last_in = in_last as i128 - 1 - first_w;
        let hi_inside = if last_in < 0 { lo } else { (last_in / s_w + 1).clamp(lo as i128, width_w) as usize };
        let mut written = 0;
        while written < len {
            let mut base = 0isize;
            let mut inside = true;
            for d in 0..last {
                let pos = o[d] as isize * self.strides[d] - self.pads[d] + k[d] as isize * self.dilations[d];
                inside &= pos >= 0 && pos < self.in_dims[d] as isize;
                base += pos * self.in_strides[d];
            }
            let hi = if inside { hi_inside } else { lo };
            let (from, to) = (o[last], width.min(o[last] + len - written));
            let out = core::slice::from_raw_parts_mut(dst.add(written), to - from);
            let (lo, hi) = (lo.clamp(from, to), hi.clamp(from, to));
            out[..lo - from].fill(self.pad);
            out[hi - from..].fill(self.pad);
            if hi > lo {
                let src = xc.offset(base + (first_w + lo as i128 * s_w) as isize);
                let inner = &mut out[lo - from..hi - from];
                match s_last {
                    1 => inner.copy_from_slice(core::slice::from_raw_parts(src, hi - lo)),
                    2 => gather::<T, 2>(inner, src, 2),
                    _ => gather::<T, 0>(inner, src, s_last),
                }
            }
            written += to - from;
            // Next line (row-major over the outer output dims).
            o[last] = 0;
            for d in (0..last).rev() {
                o[d] += 1;
                if o[d] < self.out_dims[d] {
                    break;
                }
                o[d] = 0;
            }
        }
    }
}

/// `out[i] = src[i * stride]`; `STRIDE`, when not 0, is the stride as a
/// constant, so that the loop vectorises (shuffles, not a gather per lane).
#[inline(always)]
unsafe fn gather<T: Copy, const STRIDE: isize>(out: &mut [T], src: *const T, stride: isize) {
    let stride = if STRIDE == 0 { stride } else { STRIDE };
    for (i, v) in out.iter_mut().enumerate() {
        *v = *src.offset(i as isize * stride);
    }
}

/// The im2col matrix, packed straight into B panels through a row buffer.
impl BSource for Im2col<f32> {
    #[inline(always)]
    unsafe fn pack(&self, kc: usize, nc: usize, row0: usize, col0: usize, nr: usize, dst: *mut f32) {
        let mut line = core::mem::MaybeUninit::<[f32; MAX_BLOCK_COLUMNS]>::uninit();
        let line = line.as_mut_ptr() as *mut f32;
        for l in 0..kc {
            self.row_segment(row0 + l, col0, nc, line);
            for (p, j) in (0..nc).step_by(nr).enumerate() {
                let cols = nr.min(nc - j);
                let panel_row = dst.add((p * kc + l) * nr);
                if cols == nr {
                    // A copy of constant length (`nr` is the kernel's), inlined.
                    core::ptr::copy_nonoverlapping(line.add(j), panel_row, nr);
                } else {
                    core::ptr::copy_nonoverlapping(line.add(j), panel_row, cols);
                    core::slice::from_raw_parts_mut(panel_row.add(cols), nr - cols).fill(0.0);
                }
            }
        }
    }
}

/// Writes the im2col matrix of one group of one image into `col`, padding
/// as `pad` (see [`Im2col`]).
pub(crate) unsafe fn im2col<T: Copy>(p: &ConvParams, s: &ConvShape, x: *const T, col: *mut T, pad: T) {
    let matrix = Im2col::new(p, s, x, pad);
    for row in 0..s.c_per_group * s.taps {
        matrix.row_segment(row, 0, s.out_size, col.add(row * s.out_size));
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_conv_f32`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn conv_f32(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    residual: *const f32,
    y: *mut f32,
    scratch: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    match prepare(p, residual) {
        Ok((p, s, residual)) if p.packed_weights == 1 => {
            conv_prepacked(
                p,
                &s,
                x,
                w,
                bias,
                residual,
                None,
                y,
                scratch,
                parallel,
                crate::isa::choose::direct_conv_runs(),
            );
            STATUS_OK
        }
        Err(status) => status,
        Ok(_) => conv(p, x, w, bias, residual, y, scratch, parallel),
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_conv_prologue_f32`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn conv_prologue_f32(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    residual: *const f32,
    prologue: *const f32,
    y: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    match prepare(p, residual) {
        Ok((p, s, residual)) if conv_takes_prologue(p) && !prologue.is_null() => {
            let channels = ChannelPrologue { scale: prologue, shift: prologue.add(p.in_channels as usize) };
            let no_scratch = core::ptr::null_mut();
            conv_prepacked(p, &s, x, w, bias, residual, Some(channels), y, no_scratch, parallel, false);
            STATUS_OK
        }
        Err(status) => status,
        Ok(_) => STATUS_INVALID_PARAMS,
    }
}

/// The per-input-channel `max(x * scale + shift, 0)` of
/// [`onnxc_conv_prologue_f32`].
#[derive(Clone, Copy)]
struct ChannelPrologue {
    scale: *const f32,
    shift: *const f32,
}

/// A pointwise convolution's input (channel rows of `row_len` pixels)
/// through a [`ChannelPrologue`], packed as B panels.
struct PrologueInput {
    x: *const f32,
    row_len: usize,
    channels: ChannelPrologue,
}

impl BSource for PrologueInput {
    #[inline(always)]
    unsafe fn pack(&self, kc: usize, nc: usize, row0: usize, col0: usize, nr: usize, dst: *mut f32) {
        for l in 0..kc {
            let c = row0 + l;
            let (scale, shift) = (*self.channels.scale.add(c), *self.channels.shift.add(c));
            let src = core::slice::from_raw_parts(self.x.add(c * self.row_len + col0), nc);
            for (p, chunk) in src.chunks(nr).enumerate() {
                let panel = core::slice::from_raw_parts_mut(dst.add((p * kc + l) * nr), nr);
                for (d, &v) in panel.iter_mut().zip(chunk) {
                    let t = v * scale + shift;
                    *d = if t < 0.0 { 0.0 } else { t };
                }
                panel[chunk.len()..].fill(0.0);
            }
        }
    }
}

/// The checked params of a Conv call, its shape and its residual operand;
/// `Err` is the status to return at once (`STATUS_OK` when there is no
/// output to compute).
unsafe fn prepare<'a, T>(
    p: *const ConvParams,
    residual: *const T,
) -> Result<(&'a ConvParams, ConvShape, Option<*const T>), i32> {
    let p = p.as_ref().ok_or(STATUS_INVALID_PARAMS)?;
    let s = validate(p).ok_or(STATUS_INVALID_PARAMS)?;
    if !(EPILOGUE_NONE..=EPILOGUE_SILU).contains(&p.activation) || !(0..=1).contains(&p.packed_weights) {
        return Err(STATUS_INVALID_PARAMS);
    }
    if p.packed_weights == 1 && is_depthwise_2d(&s) {
        return Err(STATUS_INVALID_PARAMS);
    }
    let residual = match p.residual {
        0 => None,
        1 if !residual.is_null() => Some(residual),
        _ => return Err(STATUS_INVALID_PARAMS),
    };
    if s.out_size == 0 || s.m_per_group == 0 {
        return Err(STATUS_OK);
    }
    Ok((p, s, residual))
}

/// Whether the direct depthwise kernel runs (one input and one output
/// channel per group, 2-D, or 1-D as planes one row high).
fn is_depthwise_2d(s: &ConvShape) -> bool {
    s.rank <= 2 && s.c_per_group == 1 && s.m_per_group == 1
}

/// 1-D convolution `p` as 2-D convolution of planes one row high.
fn as_rows(p: &ConvParams) -> ConvParams {
    let mut rows = *p;
    rows.spatial_rank = 2;
    for field in [&mut rows.in_spatial, &mut rows.out_spatial, &mut rows.kernel, &mut rows.strides, &mut rows.dilations]
    {
        field.copy_within(0..1, 1);
        field[0] = 1;
    }
    rows.pads_begin.copy_within(0..1, 1);
    rows.pads_begin[0] = 0;
    rows
}

/// Whether [`onnxc_conv_prologue_f32`] can take these params: valid, packed
/// weights, and a pointwise window (the input is packed as it lies).
pub fn conv_takes_prologue(p: &ConvParams) -> bool {
    p.packed_weights == 1 && validate(p).is_some_and(|s| s.pointwise)
}

/// Whether [`onnxc_conv_f32`] can take these params with pre-packed weights
/// (valid, and the convolution runs as a gemm).
pub fn conv_takes_packed_weights(p: &ConvParams) -> bool {
    validate(p).is_some_and(|s| !is_depthwise_2d(&s))
}

/// Floats of the weights packed by [`onnxc_pack_conv_weights_f32`] (0 when
/// the params cannot take packed weights).
pub fn conv_packed_weights_elems(p: &ConvParams) -> usize {
    match validate(p) {
        Some(s) if !is_depthwise_2d(&s) => p.group as usize * packed_a_len(s.m_per_group, s.c_per_group * s.taps),
        _ => 0,
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_pack_conv_weights_f32`].
pub(crate) unsafe fn pack_conv_weights_f32(p: *const ConvParams, w: *const f32, dst: *mut f32) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(s) = validate(p).filter(|s| !is_depthwise_2d(s)) else {
        return STATUS_INVALID_PARAMS;
    };
    let kdim = s.c_per_group * s.taps;
    let per_group = packed_a_len(s.m_per_group, kdim);
    for g in 0..p.group as usize {
        let a = MatRef { ptr: w.add(g * s.m_per_group * kdim), rs: kdim as isize, cs: 1 };
        pack_a(s.m_per_group, kdim, a, dst.add(g * per_group));
    }
    STATUS_OK
}

/// The tail of a convolution on one finished row segment of a group's
/// output: the bias, then a fused residual and activation ([`epilogue`]).
pub(crate) struct ConvFinish<'a> {
    pub(crate) p: &'a ConvParams,
    /// The group's first bias, if any.
    bias: Option<*const f32>,
    /// The residual of the group's first output channel, if any.
    residual: Option<*const f32>,
    row_stride: usize,
}

impl ConvFinish<'_> {
    /// [`FinishRow::tile_end`]'s bias and residual with no activation, for
    /// a kernel that applies the activation itself (one `tile_end` lacks).
    #[inline(always)]
    pub(crate) fn unactivated_end(&self, i0: usize, j0: usize) -> TileEnd {
        TileEnd {
            bias: self.bias.map_or(core::ptr::null(), |b| b.wrapping_add(i0)),
            residual: self.residual.map_or(core::ptr::null(), |r| r.wrapping_add(i0 * self.row_stride + j0)),
            residual_rs: self.row_stride as isize,
            activation: TileActivation::None,
        }
    }
}

impl FinishRow for ConvFinish<'_> {
    #[inline(always)]
    fn finish(&self, i: usize, j0: usize, row: &mut [f32]) {
        // SAFETY: `conv_prepacked` points `bias` and `residual` at the
        // group's operands, which hold row `i` of the output block.
        unsafe {
            let bias = self.bias.map(|b| *b.add(i));
            epilogue(self.p, bias, self.residual.map(|r| r.add(i * self.row_stride + j0)), row);
        }
    }

    /// Bias, residual and the activations that are a compare and a select.
    #[inline(always)]
    fn tile_end(&self, i0: usize, j0: usize) -> Option<TileEnd> {
        Some(TileEnd { activation: tile_activation(self.p)?, ..self.unactivated_end(i0, j0) })
    }

    /// The residual rows: far apart in a tensor the size of the output,
    /// they miss the caches, and the hardware prefetchers do not follow
    /// a tile's short row segments.
    #[inline(always)]
    fn prefetch(&self, i: usize, j0: usize, len: usize) {
        if let Some(r) = self.residual {
            prefetch_floats(r.wrapping_add(i * self.row_stride + j0), len);
        }
    }
}

/// f32 convolution on weights packed by [`onnxc_pack_conv_weights_f32`]: per
/// image and group one [`sgemm_prepacked`] whose B is the input (pointwise,
/// maybe through a `prologue`) or its im2col matrix packed on the fly, or,
/// where `direct` and the window fits, the direct kernel on 2-D windows
/// ([`crate::x86_64::direct_conv`], the input placed in `scratch`); the
/// bias, residual and activation applied per finished tile, the work split
/// over `parallel`. `direct` allows the direct kernel.
#[allow(clippy::too_many_arguments)]
unsafe fn conv_prepacked(
    p: &ConvParams,
    s: &ConvShape,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    residual: Option<*const f32>,
    prologue: Option<ChannelPrologue>,
    y: *mut f32,
    scratch: *mut f32,
    parallel: *const Parallel,
    direct: bool,
) {
    let window = ConvWindow::of(p, s).filter(|_| direct);
    let kdim = s.c_per_group * s.taps;
    let per_group = packed_a_len(s.m_per_group, kdim);
    let (cin, cout) = (p.in_channels as usize, p.out_channels as usize);
    let finish_of = |n: usize, g: usize| group_finish(p, s, bias, residual, n, g);
    if prologue.is_none() && super::small_groups::takes(p, s) {
        super::small_groups::conv(Isa::best(), p, s, x, w, y, &finish_of, parallel);
        return;
    }
    // The gemm's tiles leave a vector-math activation to a pass over the
    // group's output (see [`activate_separately`]).
    let after_gemm = window.is_none() && maps_lanes(p.activation);
    let tiles_params = ConvParams { activation: EPILOGUE_NONE, ..*p };
    let group = |n: usize, g: usize, parallel: *const Parallel| {
        let xg = x.add((n * cin + g * s.c_per_group) * s.in_size);
        let first_channel = n * cout + g * s.m_per_group;
        let out = MatMut { ptr: y.add(first_channel * s.out_size), rs: s.out_size as isize, cs: 1 };
        let tiles = if after_gemm { &tiles_params } else { p };
        let finish = group_finish(tiles, s, bias, residual, n, g);
        let a = w.add(g * per_group);
        if let (true, Some(channels)) = (s.pointwise, prologue) {
            let group_channels = ChannelPrologue {
                scale: channels.scale.add(g * s.c_per_group),
                shift: channels.shift.add(g * s.c_per_group),
            };
            let b = PrologueInput { x: xg, row_len: s.in_size, channels: group_channels };
            sgemm_prepacked(s.m_per_group, s.out_size, kdim, a, &b, out, &finish, parallel);
        } else if let Some(window) = &window {
            crate::isa::choose::direct_conv(
                window,
                window.place(xg, scratch, parallel),
                s.m_per_group,
                a,
                out.ptr,
                &finish,
                parallel,
            );
        } else if s.pointwise {
            let b = MatRef { ptr: xg, rs: s.in_size as isize, cs: 1 };
            sgemm_prepacked(s.m_per_group, s.out_size, kdim, a, &b, out, &finish, parallel);
        } else {
            let im2col = Im2col::new(p, s, xg, 0.0);
            sgemm_prepacked(s.m_per_group, s.out_size, kdim, a, &im2col, out, &finish, parallel);
        }
        if after_gemm {
            activate_separately(p, out.ptr, s.m_per_group * s.out_size, parallel);
        }
    };
    let (batch, groups) = (p.batch as usize, p.group as usize);
    // Small groups (ShuffleNet's grouped 1x1 layers, under a million
    // multiply-adds each) are too small to split; the groups are split
    // instead, each run whole by one thread (same bits: a group's gemm
    // sums in the same order however it is split). Not with the direct
    // kernel, whose groups share the scratch.
    let small = s.m_per_group * s.out_size * kdim <= SMALL_GROUP_MACS;
    if small && batch * groups > 1 && window.is_none() {
        Parallel::for_each(parallel, batch * groups, |task| group(task / groups, task % groups, core::ptr::null()));
        return;
    }
    for n in 0..batch {
        for g in 0..groups {
            group(n, g, parallel);
        }
    }
}

/// The finish of group `g` of image `n` under `p`: its first bias and the
/// residual of its first output channel.
unsafe fn group_finish<'a>(
    p: &'a ConvParams,
    s: &ConvShape,
    bias: *const f32,
    residual: Option<*const f32>,
    n: usize,
    g: usize,
) -> ConvFinish<'a> {
    let first_channel = n * p.out_channels as usize + g * s.m_per_group;
    ConvFinish {
        p,
        bias: (!bias.is_null()).then(|| bias.add(g * s.m_per_group)),
        residual: residual.map(|r| r.add(first_channel * s.out_size)),
        row_stride: s.out_size,
    }
}

/// Whether [`epilogue`] computes `activation` with the vector math
/// ([`mapped`]).
pub(crate) fn maps_lanes(activation: i64) -> bool {
    matches!(activation, EPILOGUE_SIGMOID | EPILOGUE_TANH | EPILOGUE_SILU)
}

/// `p`'s activation over the `len` floats from `y` (a finished output: a
/// group's, or a whole blocked one), split over `parallel`. In the gemm's
/// finish it would map each
/// tile row's few vectors in a call of its own: EfficientNet-B0's 16 → 96
/// SiLU layer at 112² took 1.7 ms that way, against 0.63 ms for the
/// convolution alone and 0.52 ms for the SiLU as a separate pass.
pub(crate) unsafe fn activate_separately(p: &ConvParams, y: *mut f32, len: usize, parallel: *const Parallel) {
    let vectors = len.div_ceil(16);
    let parts = vectors.div_ceil(SEPARATE_TASK_VECTORS).min(CHANNEL_TASKS);
    Parallel::for_each(parallel, parts, |part| {
        let range = share(vectors, parts, part);
        let (start, end) = (range.start * 16, len.min(range.end * 16));
        epilogue(p, None, None, core::slice::from_raw_parts_mut(y.add(start), end - start));
    });
}

/// Fewest 16-float vectors per task of [`activate_separately`].
const SEPARATE_TASK_VECTORS: usize = 4096;

/// Multiply-adds of a group's gemm below which [`conv_prepacked`] splits
/// the groups over the threads rather than each group's gemm.
const SMALL_GROUP_MACS: usize = 1 << 20;

/// The convolution on weights as given: the direct depthwise kernel (its
/// channels split over `parallel`), or im2col into `scratch` and a gemm per
/// image and group.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn conv<T: GemmElem>(
    p: *const ConvParams,
    x: *const T,
    w: *const T,
    bias: *const T,
    residual: *const T,
    y: *mut T,
    scratch: *mut T,
    parallel: *const Parallel,
) -> i32 {
    let (p, s, residual) = match prepare(p, residual) {
        Ok(ready) => ready,
        Err(status) => return status,
    };
    if p.packed_weights == 1 {
        return STATUS_INVALID_PARAMS;
    }
    if is_depthwise_2d(&s) {
        let rows = as_rows(p);
        let (p, s) = match validate(&rows) {
            Some(s2) if s.rank == 1 => (&rows, s2),
            _ => (p, s),
        };
        depthwise_2d(p, &s, x, w, bias, residual, y, parallel);
        return STATUS_OK;
    }
    let kdim = s.c_per_group * s.taps;
    let groups = p.group as usize;
    let (cin, cout) = (p.in_channels as usize, p.out_channels as usize);
    for n in 0..p.batch as usize {
        for g in 0..groups {
            let xg = x.add((n * cin + g * s.c_per_group) * s.in_size);
            let b = if s.pointwise {
                MatRef { ptr: xg, rs: s.in_size as isize, cs: 1 }
            } else {
                im2col(p, &s, xg, scratch, T::ZERO);
                MatRef { ptr: scratch, rs: s.out_size as isize, cs: 1 }
            };
            let a = MatRef { ptr: w.add(g * s.m_per_group * kdim), rs: kdim as isize, cs: 1 };
            let c = (!bias.is_null()).then(|| MatRef { ptr: bias.add(g * s.m_per_group), rs: 1, cs: 0 });
            let out =
                MatMut { ptr: y.add((n * cout + g * s.m_per_group) * s.out_size), rs: s.out_size as isize, cs: 1 };
            T::gemm(s.m_per_group, s.out_size, kdim, T::ONE, a, b, T::ONE, c, out);
            let offset = (n * cout + g * s.m_per_group) * s.out_size;
            let block = core::slice::from_raw_parts_mut(out.ptr, s.m_per_group * s.out_size);
            epilogue(p, None, residual.map(|r| r.add(offset)), block);
        }
    }
    STATUS_OK
}

/// A 2-D depthwise convolution (one input and one output channel per
/// group), directly, its channel planes split over `parallel`
/// ([`GemmElem::depthwise_planes`] where the type and CPU have a SIMD
/// kernel, else [`depthwise_plane_portable`]), the epilogue on each
/// finished plane. A GEMM per channel (M = 1, K = taps) would spend its
/// time packing.
#[allow(clippy::too_many_arguments)]
unsafe fn depthwise_2d<T: GemmElem>(
    p: &ConvParams,
    s: &ConvShape,
    x: *const T,
    w: *const T,
    bias: *const T,
    residual: Option<*const T>,
    y: *mut T,
    parallel: *const Parallel,
) {
    let channels = (p.batch * p.out_channels) as usize;
    let finish = |nc: usize, out: &mut [T]| epilogue(p, None, residual.map(|r| r.add(nc * s.out_size)), out);
    let some_planes = |planes: Range<usize>| {
        if T::depthwise_planes(p, x, w, bias, y, planes.clone(), finish) {
            return;
        }
        for nc in planes {
            let c = nc % p.out_channels as usize;
            let init = if bias.is_null() { T::ZERO } else { *bias.add(c) };
            let yc = y.add(nc * s.out_size);
            depthwise_plane_portable(p, x.add(nc * s.in_size), w.add(c * s.taps), init, yc);
            finish(nc, core::slice::from_raw_parts_mut(yc, s.out_size));
        }
    };
    // Whole groups of planes per task, for the kernels that take a
    // vector's worth of channels at a time.
    let groups = channels.div_ceil(PLANE_GROUP);
    let parts = groups.min(CHANNEL_TASKS);
    Parallel::for_each(parallel, parts, |part| {
        let range = share(groups, parts, part);
        some_planes(range.start * PLANE_GROUP..channels.min(range.end * PLANE_GROUP))
    });
}

/// Planes a task of [`depthwise_2d`] takes a multiple of (but for the
/// last): the x86 kernels for small planes compute 16 (or 8) channels at
/// once, one in each lane.
const PLANE_GROUP: usize = 16;

/// One channel plane of [`depthwise_2d`], portably: for each kernel tap,
/// the range of output columns whose input column is inside the image is
/// computed once, and the row update over it is a strided multiply-add.
///
/// # Safety
/// `p` is validated and depthwise 2-D; `x`, `w` and `y` hold the plane,
/// filter and output.
pub(crate) unsafe fn depthwise_plane_portable<T: Real>(p: &ConvParams, x: *const T, w: *const T, bias: T, y: *mut T) {
    let [ih, iw] = [p.in_spatial[0], p.in_spatial[1]];
    let [oh, ow] = [p.out_spatial[0] as usize, p.out_spatial[1] as usize];
    let [kh, kw] = [p.kernel[0] as usize, p.kernel[1] as usize];
    let [sh, sw] = [p.strides[0], p.strides[1]];
    let [dh, dw] = [p.dilations[0], p.dilations[1]];
    let [ph, pw] = [p.pads_begin[0], p.pads_begin[1]];
    // Output columns `[lo, hi)` whose input column for tap column `c` is inside.
    let columns = |c: usize| -> (usize, usize) {
        let offset = c as i64 * dw - pw;
        // Both ends within the row: with a large padding the first column
        // inside the input can lie past the last output column.
        let lo = if offset >= 0 { 0 } else { ((-offset + sw - 1) / sw).min(ow as i64) };
        let hi = if iw - 1 - offset < 0 { 0 } else { ((iw - 1 - offset) / sw + 1).min(ow as i64) };
        (lo as usize, (hi.max(lo)) as usize)
    };
    let out = core::slice::from_raw_parts_mut(y, oh * ow);
    out.fill(bias);
    for r in 0..oh {
        let row = &mut out[r * ow..(r + 1) * ow];
        for a in 0..kh {
            let in_row = r as i64 * sh - ph + a as i64 * dh;
            if in_row < 0 || in_row >= ih {
                continue;
            }
            let xr = x.add(in_row as usize * iw as usize);
            for b in 0..kw {
                let weight = *w.add(a * kw + b);
                let (lo, hi) = columns(b);
                let start = b as i64 * dw - pw;
                for (o, v) in row[lo..hi].iter_mut().enumerate() {
                    let col = ((lo + o) as i64 * sw + start) as usize;
                    *v = *v + weight * *xr.add(col);
                }
            }
        }
    }
}

/// Tasks the plane-at-a-time kernels (depthwise convolution, pooling)
/// split their channels into.
pub(crate) const CHANNEL_TASKS: usize = 8;

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec, reversed, testable_isas, unravel, with_level};
    use crate::isa::Isa;
    use core::ptr::null;
    use std::vec;
    use std::vec::Vec;

    pub(crate) struct Case {
        pub(crate) batch: usize,
        pub(crate) cin: usize,
        pub(crate) cout: usize,
        pub(crate) group: usize,
        pub(crate) input: Vec<usize>,
        pub(crate) kernel: Vec<usize>,
        pub(crate) strides: Vec<usize>,
        pub(crate) dilations: Vec<usize>,
        pub(crate) pads: Vec<(usize, usize)>,
    }

    pub(crate) fn params(c: &Case) -> ConvParams {
        let r = c.input.len();
        let mut p = ConvParams {
            batch: c.batch as i64,
            in_channels: c.cin as i64,
            out_channels: c.cout as i64,
            group: c.group as i64,
            spatial_rank: r as i64,
            ..Default::default()
        };
        for d in 0..r {
            p.in_spatial[d] = c.input[d] as i64;
            p.kernel[d] = c.kernel[d] as i64;
            p.strides[d] = c.strides[d] as i64;
            p.dilations[d] = c.dilations[d] as i64;
            p.pads_begin[d] = c.pads[d].0 as i64;
            let span = c.dilations[d] * (c.kernel[d] - 1) + 1;
            let padded = c.input[d] + c.pads[d].0 + c.pads[d].1;
            p.out_spatial[d] = if padded < span { 0 } else { ((padded - span) / c.strides[d] + 1) as i64 };
        }
        p
    }

    /// Direct convolution, straight from the definition.
    fn reference(p: &ConvParams, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
        let r = p.spatial_rank as usize;
        let ind: Vec<usize> = (0..r).map(|d| p.in_spatial[d] as usize).collect();
        let outd: Vec<usize> = (0..r).map(|d| p.out_spatial[d] as usize).collect();
        let kd: Vec<usize> = (0..r).map(|d| p.kernel[d] as usize).collect();
        let (in_size, out_size, taps) =
            (ind.iter().product::<usize>(), outd.iter().product::<usize>(), kd.iter().product::<usize>());
        let (cin, cout, g) = (p.in_channels as usize, p.out_channels as usize, p.group as usize);
        let (cpg, mpg) = (cin / g, cout / g);
        let mut y = vec![0.0f32; p.batch as usize * cout * out_size];
        for n in 0..p.batch as usize {
            for m in 0..cout {
                let grp = m / mpg;
                for o in 0..out_size {
                    let oc = unravel(o, &outd);
                    let mut acc = bias.map_or(0.0, |b| b[m] as f64);
                    for c in 0..cpg {
                        for t in 0..taps {
                            let kc = unravel(t, &kd);
                            let mut off = 0usize;
                            let mut inside = true;
                            for d in 0..r {
                                let pos = (oc[d] * p.strides[d] as usize + kc[d] * p.dilations[d] as usize) as i64
                                    - p.pads_begin[d];
                                if pos < 0 || pos >= ind[d] as i64 {
                                    inside = false;
                                }
                                off = off * ind[d] + pos.max(0) as usize;
                            }
                            if inside {
                                let xv = x[(n * cin + grp * cpg + c) * in_size + off];
                                let wv = w[(m * cpg + c) * taps + t];
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                    y[(n * cout + m) * out_size + o] = acc as f32;
                }
            }
        }
        y
    }

    fn check(c: Case) {
        let p = params(&c);
        let r = c.input.len();
        let x = rand_vec(c.batch * c.cin * c.input.iter().product::<usize>(), 1);
        let w = rand_vec(c.cout * (c.cin / c.group) * c.kernel.iter().product::<usize>(), 2);
        let bias = rand_vec(c.cout, 3);
        let out_n = c.batch * c.cout * (0..r).map(|d| p.out_spatial[d] as usize).product::<usize>();
        // As given, and (where the kernel takes them) with pre-packed weights.
        let mut packed_w = vec![f32::NAN; conv_packed_weights_elems(&p)];
        let packed = ConvParams { packed_weights: 1, ..p };
        if conv_takes_packed_weights(&p) {
            assert_eq!(unsafe { onnxc_pack_conv_weights_f32(&p, w.as_ptr(), packed_w.as_mut_ptr()) }, STATUS_OK);
        }
        let layouts = [(p, &w), (packed, &packed_w)];
        for (p, w) in layouts.into_iter().take(if conv_takes_packed_weights(&p) { 2 } else { 1 }) {
            let mut scratch = vec![f32::NAN; conv_scratch_elems(&p)];
            for b in [Some(&bias[..]), None] {
                let want = reference(&p, &x, &layouts[0].1[..], b);
                let mut got = vec![f32::NAN; out_n];
                let bp = b.map_or(core::ptr::null(), |b| b.as_ptr());
                let st = unsafe {
                    onnxc_conv_f32(
                        &p,
                        x.as_ptr(),
                        w.as_ptr(),
                        bp,
                        null(),
                        got.as_mut_ptr(),
                        scratch.as_mut_ptr(),
                        null(),
                    )
                };
                assert_eq!(st, STATUS_OK);
                assert_close(&got, &want, 1e-4);
                // A fused residual Add + Relu: bit-identical to the conv, then the Add, then the Relu.
                let residual = rand_vec(out_n, 5);
                let want: Vec<f32> =
                    got.iter().zip(&residual).map(|(&c, &r)| if c + r < 0.0 { 0.0 } else { c + r }).collect();
                let fused = ConvParams { residual: 1, activation: EPILOGUE_RELU, ..p };
                let st = unsafe {
                    let (rp, sp) = (residual.as_ptr(), scratch.as_mut_ptr());
                    onnxc_conv_f32(&fused, x.as_ptr(), w.as_ptr(), bp, rp, got.as_mut_ptr(), sp, null())
                };
                assert_eq!((st, got), (STATUS_OK, want));
            }
        }
        // f64: the same im2col with the portable gemm, to f64 precision.
        let wide = |v: &[f32]| v.iter().map(|&v| v as f64).collect::<Vec<_>>();
        let (x64, w64, b64) = (wide(&x), wide(&w), wide(&bias));
        let mut scratch64 = vec![f64::NAN; conv_scratch_elems(&p)];
        let mut got = vec![f64::NAN; out_n];
        let st = unsafe {
            onnxc_conv_f64(
                &p,
                x64.as_ptr(),
                w64.as_ptr(),
                b64.as_ptr(),
                null(),
                got.as_mut_ptr(),
                scratch64.as_mut_ptr(),
                null(),
            )
        };
        assert_eq!(st, STATUS_OK);
        assert_close(&got.iter().map(|&v| v as f32).collect::<Vec<_>>(), &reference(&p, &x, &w, Some(&bias)), 1e-6);
    }

    #[allow(clippy::too_many_arguments)] // one positional row per test case reads best
    pub(crate) fn case2d(
        cin: usize,
        cout: usize,
        group: usize,
        hw: (usize, usize),
        k: (usize, usize),
        s: usize,
        d: usize,
        pads: [usize; 4],
    ) -> Case {
        Case {
            batch: 2,
            cin,
            cout,
            group,
            input: vec![hw.0, hw.1],
            kernel: vec![k.0, k.1],
            strides: vec![s, s],
            dilations: vec![d, d],
            pads: vec![(pads[0], pads[2]), (pads[1], pads[3])],
        }
    }

    #[test]
    fn conv2d_variants() {
        check(case2d(3, 4, 1, (7, 9), (3, 3), 1, 1, [1, 1, 1, 1]));
        check(case2d(3, 5, 1, (8, 7), (3, 2), 2, 1, [1, 0, 2, 1]));
        check(case2d(4, 6, 2, (9, 9), (3, 3), 1, 2, [2, 2, 2, 2]));
        check(case2d(6, 6, 6, (5, 6), (3, 3), 2, 1, [1, 1, 1, 1])); // depthwise
        check(case2d(4, 4, 4, (7, 8), (3, 3), 1, 2, [2, 1, 0, 3])); // depthwise, dilated
        check(case2d(3, 3, 3, (5, 5), (5, 5), 3, 1, [4, 4, 4, 4])); // depthwise, mostly padding
                                                                    // Depthwise with a leading padding so wide that tap 0 reaches the
                                                                    // input only past the last output column (found by fuzzing).
        check(case2d(2, 2, 2, (1, 1), (3, 3), 1, 1, [6, 6, 0, 0]));
        check(case2d(5, 7, 1, (6, 5), (1, 1), 1, 1, [0, 0, 0, 0])); // pointwise
        check(case2d(2, 3, 1, (4, 4), (1, 1), 2, 1, [0, 0, 0, 0])); // strided 1x1
        check(case2d(1, 1, 1, (1, 1), (1, 1), 1, 1, [0, 0, 0, 0]));
        check(case2d(3, 130, 1, (13, 11), (5, 5), 1, 1, [2, 2, 2, 2])); // many output channels
        check(case2d(2, 2, 1, (3, 3), (3, 3), 3, 1, [3, 3, 3, 3])); // windows all padding
        check(case2d(0, 3, 1, (4, 4), (3, 3), 1, 1, [1, 1, 1, 1])); // no input channels: the bias
    }

    /// A fused SiLU gives the bits of the convolution (with its bias and
    /// residual) then `v * sigmoid(v)`, at every ISA level, on each path:
    /// depthwise planes wide and narrow (SIMD rows, lanes), strided, the
    /// direct window, pointwise, grouped and im2col, weights as given and packed.
    #[test]
    fn silu_epilogue_gives_the_bits_of_the_conv_then_sigmoid_and_mul() {
        let cases = [
            case2d(9, 9, 9, (21, 37), (3, 3), 1, 1, [1, 1, 1, 1]),
            case2d(12, 12, 12, (9, 5), (5, 5), 2, 1, [2, 2, 2, 2]),
            case2d(16, 16, 16, (19, 19), (3, 3), 2, 1, [0, 1, 0, 1]),
            case2d(5, 19, 1, (11, 13), (3, 3), 1, 1, [1, 1, 1, 1]),
            case2d(13, 21, 1, (7, 9), (1, 1), 1, 1, [0, 0, 0, 0]),
            case2d(6, 10, 2, (8, 7), (3, 2), 2, 1, [1, 0, 2, 1]),
            case2d(3, 7, 1, (6, 5), (2, 2), 1, 2, [0, 1, 0, 1]),
        ];
        for c in cases {
            let p = params(&c);
            let x: Vec<f32> =
                rand_vec(c.batch * c.cin * c.input.iter().product::<usize>(), 1).iter().map(|v| v * 6.0).collect();
            let w = rand_vec(c.cout * (c.cin / c.group) * c.kernel.iter().product::<usize>(), 2);
            let (bias, out_n) = (rand_vec(c.cout, 3), c.batch * c.cout * validate(&p).unwrap().out_size);
            let residual = rand_vec(out_n, 4);
            let mut packed = vec![f32::NAN; conv_packed_weights_elems(&p)];
            let layouts = if conv_takes_packed_weights(&p) {
                assert_eq!(unsafe { onnxc_pack_conv_weights_f32(&p, w.as_ptr(), packed.as_mut_ptr()) }, STATUS_OK);
                vec![(p, &w), (ConvParams { packed_weights: 1, ..p }, &packed)]
            } else {
                vec![(p, &w)]
            };
            for level in testable_isas() {
                for (p, w) in &layouts {
                    for fused_residual in [0, 1] {
                        let p = ConvParams { residual: fused_residual, ..*p };
                        let operands = [&x[..], &w[..], &bias, &residual];
                        let plain = ConvParams { activation: EPILOGUE_NONE, ..p };
                        let silu = ConvParams { activation: EPILOGUE_SILU, ..p };
                        let run = |p: &ConvParams| with_level(level, || run_f32(p, operands, out_n));
                        let (plain, silu) = (run(&plain), run(&silu));
                        let want: Vec<u32> = plain.iter().map(|&v| (v * v.sigmoid()).to_bits()).collect();
                        let got: Vec<u32> = silu.iter().map(|v| v.to_bits()).collect();
                        let what = (level.name(), &c.kernel, c.group, p.packed_weights, fused_residual);
                        assert!(got == want, "{what:?}");
                    }
                }
            }
        }
    }

    /// `p` on `[x, w, bias, residual]` through [`onnxc_conv_f32`]: its `out_n` outputs.
    fn run_f32(p: &ConvParams, [x, w, bias, residual]: [&[f32]; 4], out_n: usize) -> Vec<f32> {
        let (mut y, mut scratch) = (vec![f32::NAN; out_n], vec![f32::NAN; conv_scratch_elems(p)]);
        let (xp, wp, bp, rp) = (x.as_ptr(), w.as_ptr(), bias.as_ptr(), residual.as_ptr());
        let st = unsafe { onnxc_conv_f32(p, xp, wp, bp, rp, y.as_mut_ptr(), scratch.as_mut_ptr(), null()) };
        assert_eq!(st, STATUS_OK);
        y
    }

    /// The prologue kernel gives the bits of the packed convolution on the
    /// input transformed first, per channel, with groups, two images and
    /// NaN/infinite inputs; other windows or unpacked weights are refused.
    #[test]
    fn prologue_matches_the_transformed_input() {
        for c in [case2d(6, 40, 1, (9, 7), (1, 1), 1, 1, [0; 4]), case2d(6, 4, 2, (3, 5), (1, 1), 1, 1, [0; 4])] {
            let p = ConvParams { packed_weights: 1, ..params(&c) };
            let in_size: usize = c.input.iter().product();
            let mut x = rand_vec(c.batch * c.cin * in_size, 1);
            (x[3], x[10]) = (f32::NAN, f32::INFINITY);
            let w = rand_vec(c.cout * c.cin / c.group, 2);
            let mut packed = vec![f32::NAN; conv_packed_weights_elems(&p)];
            assert_eq!(unsafe { onnxc_pack_conv_weights_f32(&params(&c), w.as_ptr(), packed.as_mut_ptr()) }, STATUS_OK);
            let (scale, shift) = (rand_vec(c.cin, 3), rand_vec(c.cin, 4));
            let transformed: Vec<f32> = x
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let t = v * scale[i / in_size % c.cin] + shift[i / in_size % c.cin];
                    if t < 0.0 {
                        0.0
                    } else {
                        t
                    }
                })
                .collect();
            let bias = rand_vec(c.cout, 5);
            let out_n = c.batch * c.cout * in_size;
            let (mut want, mut got) = (vec![f32::NAN; out_n], vec![f32::NAN; out_n]);
            let prologue = [scale, shift].concat();
            let (xp, wp, bp) = (x.as_ptr(), packed.as_ptr(), bias.as_ptr());
            let mut scratch = vec![0.0; conv_scratch_elems(&p)];
            unsafe {
                let st = onnxc_conv_f32(
                    &p,
                    transformed.as_ptr(),
                    wp,
                    bp,
                    null(),
                    want.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                    null(),
                );
                assert_eq!(st, STATUS_OK);
                let st = onnxc_conv_prologue_f32(&p, xp, wp, bp, null(), prologue.as_ptr(), got.as_mut_ptr(), null());
                assert_eq!(st, STATUS_OK);
            }
            assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan()));
            let unpacked = params(&c);
            let st = unsafe {
                onnxc_conv_prologue_f32(&unpacked, xp, wp, bp, null(), prologue.as_ptr(), got.as_mut_ptr(), null())
            };
            assert_eq!(st, STATUS_INVALID_PARAMS);
        }
        let strided = ConvParams { packed_weights: 1, ..params(&case2d(2, 3, 1, (4, 4), (1, 1), 2, 1, [0; 4])) };
        let (x, w, pro, mut y) = (vec![0.0f32; 32], vec![0.0f32; 64], vec![0.0f32; 4], vec![0.0f32; 12]);
        let st = unsafe {
            onnxc_conv_prologue_f32(
                &strided,
                x.as_ptr(),
                w.as_ptr(),
                null(),
                null(),
                pro.as_ptr(),
                y.as_mut_ptr(),
                null(),
            )
        };
        assert_eq!(st, STATUS_INVALID_PARAMS);
    }

    #[test]
    fn conv1d_and_3d() {
        // A stride of i64::MAX with leading padding: the im2col line bounds
        // once overflowed (found by fuzzing `compile_run`).
        check(Case {
            batch: 1,
            cin: 4,
            cout: 1,
            group: 1,
            input: vec![5],
            kernel: vec![3],
            strides: vec![i64::MAX as usize],
            dilations: vec![1],
            pads: vec![(2, 0)],
        });
        check(Case {
            batch: 1,
            cin: 3,
            cout: 2,
            group: 1,
            input: vec![17],
            kernel: vec![4],
            strides: vec![3],
            dilations: vec![2],
            pads: vec![(2, 1)],
        });
        check(Case {
            batch: 2,
            cin: 4,
            cout: 4,
            group: 2,
            input: vec![5, 4, 6],
            kernel: vec![2, 3, 3],
            strides: vec![1, 2, 1],
            dilations: vec![1, 1, 2],
            pads: vec![(1, 0), (1, 1), (0, 2)],
        });
        // 1-D depthwise runs as planes one row high.
        for (kernel, stride, dilation, pads) in [(9, 1, 1, (4, 4)), (5, 2, 2, (2, 1)), (3, 1, 1, (0, 0))] {
            check(Case {
                batch: 2,
                cin: 33,
                cout: 33,
                group: 33,
                input: vec![101],
                kernel: vec![kernel],
                strides: vec![stride],
                dilations: vec![dilation],
                pads: vec![pads],
            });
        }
    }

    /// The direct kernel gives the bits of the im2col gemm it replaces:
    /// one to nine weight panels (whole and partial channel blocks), pixel
    /// counts off the tile, several depth slices, strides, dilation,
    /// padding on any side, a pointwise window, two images and groups, each
    /// fused finish (in tiles and row by row), threads. The kernel runs
    /// where AVX2 is the best level, which this test forces on any host
    /// that has AVX2.
    #[test]
    fn direct_kernel_matches_the_gemm_bits() {
        if !testable_isas().contains(&Isa::Avx2Fma) {
            return;
        }
        with_level(Isa::Avx2Fma, || {
            assert!(crate::isa::choose::direct_conv_runs());
            direct_kernel_cases();
        });
    }

    fn direct_kernel_cases() {
        let cases = [
            case2d(3, 5, 1, (7, 9), (3, 3), 1, 1, [1, 1, 1, 1]),
            case2d(40, 64, 1, (9, 10), (3, 3), 1, 1, [1, 1, 1, 1]),
            case2d(6, 144, 2, (11, 7), (3, 2), 2, 1, [0, 1, 2, 0]),
            case2d(8, 16, 1, (8, 8), (3, 3), 1, 2, [2, 2, 2, 2]),
            case2d(5, 24, 1, (10, 10), (1, 1), 2, 1, [0, 0, 0, 0]),
            case2d(3, 40, 1, (15, 15), (7, 7), 2, 1, [3, 3, 3, 3]),
            case2d(2, 8, 1, (3, 3), (3, 3), 3, 1, [3, 3, 3, 3]),
            case2d(16, 40, 2, (7, 7), (1, 1), 1, 1, [0, 0, 0, 0]), // pointwise, on a small plane
        ];
        let finishes = [
            (EPILOGUE_NONE, 0),
            (EPILOGUE_RELU, 1),
            (EPILOGUE_CLIP, 0),
            (EPILOGUE_LEAKY_RELU, 1),
            (EPILOGUE_SIGMOID, 1),
            (EPILOGUE_HARD_SWISH, 0),
            (EPILOGUE_HARD_SIGMOID, 1),
            (EPILOGUE_TANH, 0),
            (EPILOGUE_SILU, 1),
        ];
        for c in cases {
            let p = ConvParams { packed_weights: 1, act_a: -0.25, act_b: 0.5, ..params(&c) };
            let s = validate(&p).unwrap();
            let x = rand_vec(c.batch * c.cin * c.input.iter().product::<usize>(), 1);
            let w = rand_vec(c.cout * (c.cin / c.group) * c.kernel.iter().product::<usize>(), 2);
            let bias = rand_vec(c.cout, 3);
            let out_n = c.batch * c.cout * s.out_size;
            let residual = rand_vec(out_n, 4);
            let mut packed = vec![f32::NAN; conv_packed_weights_elems(&p)];
            assert_eq!(unsafe { onnxc_pack_conv_weights_f32(&p, w.as_ptr(), packed.as_mut_ptr()) }, STATUS_OK);
            for (activation, fused_residual) in finishes {
                let p = ConvParams { activation, residual: fused_residual, ..p };
                let run = |direct: bool, parallel: Parallel| {
                    let (mut y, mut scratch) = (vec![f32::NAN; out_n], vec![f32::NAN; conv_scratch_elems(&p)]);
                    let r = (fused_residual == 1).then_some(residual.as_ptr());
                    let (xp, wp, bp, sp) = (x.as_ptr(), packed.as_ptr(), bias.as_ptr(), scratch.as_mut_ptr());
                    unsafe { conv_prepacked(&p, &s, xp, wp, bp, r, None, y.as_mut_ptr(), sp, &parallel, direct) };
                    y
                };
                let gemm = run(false, Parallel::SERIAL);
                let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
                for direct in [run(true, Parallel::SERIAL), run(true, threaded)] {
                    let same = gemm.iter().zip(&direct).all(|(g, d)| g.to_bits() == d.to_bits());
                    assert!(same, "{:?} activation {activation}", c.kernel);
                }
            }
        }
    }

    /// Small groups are split over the threads, each group's gemm run
    /// whole: the same bits as serial, pointwise (with and without a
    /// fused residual) and through im2col, with two images.
    #[test]
    fn small_groups_split_over_threads_give_the_serial_bits() {
        for c in [
            case2d(16, 24, 4, (7, 7), (1, 1), 1, 1, [0, 0, 0, 0]),
            case2d(8, 264, 4, (9, 8), (3, 3), 1, 1, [1, 1, 1, 1]),
        ] {
            for fused_residual in [0, 1] {
                let p =
                    ConvParams { packed_weights: 1, activation: EPILOGUE_RELU, residual: fused_residual, ..params(&c) };
                let s = validate(&p).unwrap();
                let x = rand_vec(c.batch * c.cin * c.input.iter().product::<usize>(), 1);
                let w = rand_vec(c.cout * (c.cin / c.group) * c.kernel.iter().product::<usize>(), 2);
                let (bias, out_n) = (rand_vec(c.cout, 3), c.batch * c.cout * s.out_size);
                let residual = rand_vec(out_n, 4);
                let mut packed = vec![f32::NAN; conv_packed_weights_elems(&p)];
                assert_eq!(unsafe { onnxc_pack_conv_weights_f32(&p, w.as_ptr(), packed.as_mut_ptr()) }, STATUS_OK);
                let run = |parallel: Parallel| {
                    let (mut y, mut scratch) = (vec![f32::NAN; out_n], vec![f32::NAN; conv_scratch_elems(&p)]);
                    let r = (fused_residual == 1).then_some(residual.as_ptr());
                    let (xp, wp, bp, sp) = (x.as_ptr(), packed.as_ptr(), bias.as_ptr(), scratch.as_mut_ptr());
                    unsafe { conv_prepacked(&p, &s, xp, wp, bp, r, None, y.as_mut_ptr(), sp, &parallel, false) };
                    y
                };
                let serial = run(Parallel::SERIAL);
                let threaded = run(Parallel { run: Some(reversed), user: core::ptr::null_mut() });
                assert!(serial.iter().all(|v| !v.is_nan()));
                assert!(serial.iter().zip(&threaded).all(|(a, b)| a.to_bits() == b.to_bits()), "{:?}", c.kernel);
            }
        }
    }

    #[test]
    fn scratch_and_validation() {
        let p = params(&case2d(4, 6, 2, (9, 9), (3, 3), 1, 1, [0, 0, 0, 0]));
        assert_eq!(conv_scratch_elems(&p), 2 * 9 * 49);
        let pw = params(&case2d(4, 6, 2, (9, 9), (1, 1), 1, 1, [0, 0, 0, 0]));
        assert_eq!(conv_scratch_elems(&pw), 0);
        // Packed weights: a padded input copy for the direct kernel (2 channels
        // per group of 11 x 11), none when the windows stay inside the input.
        let padded = params(&case2d(4, 6, 2, (9, 9), (3, 3), 1, 1, [1, 1, 1, 1]));
        assert_eq!(conv_scratch_elems(&ConvParams { packed_weights: 1, ..padded }), 2 * 11 * 11);
        assert_eq!(conv_scratch_elems(&ConvParams { packed_weights: 1, ..p }), 0);
        // Stride-1 windows with more than 3 MiB of output take the gemm (no
        // copy): 64 channels of 112 x 112 do, 32 channels or stride 2 do not.
        let large = |cout, stride| {
            let p = params(&case2d(1, cout, 1, (112, 112), (3, 3), stride, 1, [1, 1, 1, 1]));
            conv_scratch_elems(&ConvParams { packed_weights: 1, ..p })
        };
        assert_eq!((large(64, 1), large(32, 1), large(64, 2)), (0, 114 * 114, 113 * 113));
        let mut bad = p;
        bad.group = 4; // 6 output channels not divisible by 4
        assert_eq!(conv_scratch_elems(&bad), 0);
        let z = core::ptr::null_mut();
        assert_eq!(unsafe { onnxc_conv_f32(&bad, z, z, z, z, z, z, null()) }, STATUS_INVALID_PARAMS);
        bad = p;
        bad.spatial_rank = 7;
        assert_eq!(unsafe { onnxc_conv_f32(&bad, z, z, z, z, z, z, null()) }, STATUS_INVALID_PARAMS);
        // A residual Add without the residual operand, or an unknown flag.
        let (x, w, mut y) = ([0.0f32; 4 * 81 * 2], [0.0f32; 6 * 2 * 9], [0.0f32; 6 * 49 * 2]);
        let mut scratch = vec![0.0f32; conv_scratch_elems(&p)];
        for flag in [1, 2] {
            bad = ConvParams { residual: flag, ..p };
            let st = unsafe {
                onnxc_conv_f32(&bad, x.as_ptr(), w.as_ptr(), z, z, y.as_mut_ptr(), scratch.as_mut_ptr(), null())
            };
            assert_eq!(st, STATUS_INVALID_PARAMS);
        }
    }
}
