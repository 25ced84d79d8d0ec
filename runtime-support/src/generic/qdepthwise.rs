//! Depthwise QLinearConv (one input and one output channel per group, 2-D,
//! equal strides) in one pass per channel, requantization included: the
//! im2col product of `quant::qconv_with` multiplies a one-row weight
//! matrix per group, where every byte kernel idles, and then writes i32
//! accumulators that `requantize` reads again.
//!
//! Per channel:
//!
//! 1. the input plane is copied into `scratch` with its padding (as the
//!    input's zero point) and a slack of pad bytes behind it, i8 inputs
//!    flipped to u8 (`x ^ 0x80 = x + 128`, so `x - zx = x' - (zx + 128)`).
//!    Its row pitch is the padded width `pitch`, so output `(oy, ox)` reads
//!    its taps at `s · (oy · pitch + ox) + tap offset`: one *virtual row*
//!    of `out_h · pitch` outputs with stride `s`, of which the last
//!    `pitch - out_w` of each `pitch` are discarded. That keeps the vectors
//!    full on the narrow late planes (7 x 7: 7 of every 9 lanes useful
//!    instead of 7 of 32) and needs no edge code;
//! 2. the virtual row, in blocks of [`BLOCK`] outputs, is
//!    `offset[c] + Σ_t x'[t] · w'[c][t]` in i32, with `w' = w - zw[c]` as
//!    i16 (packed at compile time by [`pack_qdepthwise`], two taps per i32
//!    word for `vpmaddwd`/`vpdpwssd`) and `offset[c] = bias[c] - zx'·Σ_t
//!    w'[c][t]`, so the sum equals `Σ (x - zx)(w - zw) + bias` modulo 2^32,
//!    the reference's wrapping sum; then requantized as
//!    `quant::requantize_byte_row` does (f64 `acc · scale + zero`, clamped,
//!    rounded half to even), into a virtual output row in `scratch`;
//! 3. the `out_w` real outputs of each row are copied to `y`.
//!
//! Every kernel (`x86_64::qdepthwise`, or [`generic_rows`]) computes the
//! same exact integer sums and the same f64 operations in the same order,
//! so the output is `qconv_with` + `requantize`'s bit for bit at every ISA
//! level (`tests`).

use super::quant::requantize_byte_row;
use crate::abi::quant::QDepthwiseParams;
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};
use crate::isa::ByteKernel;

/// Outputs per block of the virtual row: the widest kernel's (AVX-512, 32
/// i16 lanes); the scratch is sized by it whatever the kernel.
pub const BLOCK: usize = 32;
/// The most taps (`kernel_h · kernel_w`) the kernel takes.
pub const MAX_TAPS: usize = 64;

/// The per-channel requantization: `saturate(rint(acc · scale + zero))`
/// into `[lo, hi]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Requant {
    pub scale: f64,
    pub zero: f64,
    pub lo: f64,
    pub hi: f64,
}

/// One channel's work for a row kernel: the padded plane, the tap offsets
/// into it (an even count, the last repeated when the taps are odd, its
/// weight 0), the weight pairs, and the requantization.
pub(crate) struct Channel<'a> {
    pub plane: *const u8,
    pub taps: &'a [usize],
    pub pairs: &'a [i32],
    pub stride: usize,
    /// Virtual outputs to compute: a multiple of [`BLOCK`].
    pub len: usize,
    pub offset: i32,
    pub requant: Requant,
}

/// The sizes derived from [`QDepthwiseParams`], checked.
struct Geometry {
    in_h: usize,
    in_w: usize,
    out_h: usize,
    out_w: usize,
    pitch: usize,
    /// Bytes of the padded plane, slack included.
    plane: usize,
    /// Bytes of the virtual output row (a multiple of [`BLOCK`]).
    virtual_len: usize,
    /// Tap offsets, padded to an even count.
    taps: [usize; MAX_TAPS],
    pairs: usize,
}

impl Geometry {
    fn of(p: &QDepthwiseParams) -> Option<Geometry> {
        let dims = [p.batch, p.channels, p.in_h, p.in_w, p.out_h, p.out_w, p.pad_top, p.pad_left];
        let [_, _, in_h, in_w, out_h, out_w, _, _] = dims.map(|v| usize::try_from(v).ok());
        let positive = [p.kernel_h, p.kernel_w, p.stride, p.dilation_h, p.dilation_w].map(|v| usize::try_from(v).ok());
        let [Some(kh), Some(kw), Some(s), Some(dh), Some(dw)] = positive else { return None };
        if dims.iter().any(|&v| v < 0) || [kh, kw, s, dh, dw].contains(&0) || kh * kw > MAX_TAPS {
            return None;
        }
        let (in_h, in_w, out_h, out_w) = (in_h?, in_w?, out_h?, out_w?);
        let pitch = (out_w.max(1) - 1) * s + (kw - 1) * dw + 1;
        let rows = (out_h.max(1) - 1) * s + (kh - 1) * dh + 1;
        let virtual_len = ((out_h.max(1) - 1) * pitch + out_w).next_multiple_of(BLOCK);
        let count = kh * kw;
        let mut taps = [0usize; MAX_TAPS];
        for (t, tap) in taps.iter_mut().enumerate().take(count.next_multiple_of(2)) {
            let t = t.min(count - 1);
            *tap = (t / kw) * dh * pitch + (t % kw) * dw;
        }
        // The last block's widest read (a u16 word at stride 2) stays inside.
        let plane = (rows * pitch).max(s * virtual_len + taps[count - 1] + 2);
        Some(Geometry { in_h, in_w, out_h, out_w, pitch, plane, virtual_len, taps, pairs: count.div_ceil(2) })
    }
}

/// Scratch bytes [`crate::abi::onnxc_qdepthwise`] needs: one padded plane
/// and one virtual output row (0 for invalid params).
pub fn qdepthwise_scratch_bytes(p: &QDepthwiseParams) -> usize {
    Geometry::of(p).map_or(0, |g| g.plane + g.virtual_len)
}

/// Bytes [`pack_qdepthwise`] writes: per channel an f64 scale, an i32
/// offset and the weight pairs, in three arrays.
pub fn qdepthwise_packed_bytes(p: &QDepthwiseParams) -> usize {
    let pairs = (p.kernel_h.max(0) * p.kernel_w.max(0)) as usize;
    p.channels.max(0) as usize * (8 + 4 + 4 * pairs.div_ceil(2))
}

/// The constant operands of a QLinearConv that one call convolves and
/// requantizes: depthwise ([`pack_qdepthwise`]) or dense
/// (`qconv_packed::pack_qconv`).
pub struct QConvConstants<'a> {
    /// `[channels, in_channels / group, kernel...]` bytes, i8 when `w_signed`.
    pub w: &'a [u8],
    pub w_signed: bool,
    /// The weight zero point: one entry or one per channel.
    pub w_zero: &'a [i32],
    /// One entry per channel, or empty.
    pub bias: &'a [i32],
    pub x_scale: f32,
    /// One entry or one per channel.
    pub w_scale: &'a [f32],
    pub y_scale: f32,
}

/// Packs `wt` for [`crate::abi::onnxc_qdepthwise`] into `out`
/// ([`qdepthwise_packed_bytes`]): scales `x_scale · w_scale[c] / y_scale`
/// computed in f32 as `requantize` does, offsets (module doc), pairs.
/// `false` when the sizes disagree.
pub fn pack_qdepthwise(p: &QDepthwiseParams, wt: &QConvConstants, out: &mut [u8]) -> bool {
    let (channels, taps) = (p.channels.max(0) as usize, (p.kernel_h.max(0) * p.kernel_w.max(0)) as usize);
    let fits = |len: usize| len == 1 || len == channels;
    if out.len() != qdepthwise_packed_bytes(p) || wt.w.len() != channels * taps || !fits(wt.w_scale.len()) {
        return false;
    }
    if !fits(wt.w_zero.len()) || !wt.bias.is_empty() && wt.bias.len() != channels {
        return false;
    }
    let x_zero = p.x_zero as i32 + if p.x_signed != 0 { 128 } else { 0 };
    let (scales, rest) = out.split_at_mut(8 * channels);
    let (offsets, pairs) = rest.split_at_mut(4 * channels);
    let pairs_per_channel = taps.div_ceil(2);
    for c in 0..channels {
        let at = |v: &[i32]| v[if v.len() == 1 { 0 } else { c }];
        let scale = (wt.x_scale * wt.w_scale[if wt.w_scale.len() == 1 { 0 } else { c }] / wt.y_scale) as f64;
        scales[8 * c..8 * c + 8].copy_from_slice(&scale.to_ne_bytes());
        let weight = |t: usize| {
            let w = wt.w[c * taps + t];
            (if wt.w_signed { w as i8 as i32 } else { w as i32 }) - at(wt.w_zero)
        };
        let sum = (0..taps).fold(0i32, |s, t| s.wrapping_add(weight(t)));
        let bias = if wt.bias.is_empty() { 0 } else { wt.bias[c] };
        let offset = bias.wrapping_sub(x_zero.wrapping_mul(sum));
        offsets[4 * c..4 * c + 4].copy_from_slice(&offset.to_ne_bytes());
        for q in 0..pairs_per_channel {
            let second = if 2 * q + 1 < taps { weight(2 * q + 1) } else { 0 };
            let word = (weight(2 * q) as u16 as u32) | (second as u16 as u32) << 16;
            let at = 4 * (c * pairs_per_channel + q);
            pairs[at..at + 4].copy_from_slice(&word.to_ne_bytes());
        }
    }
    true
}

/// The depthwise convolution of the module doc with `kernel`'s row kernel
/// (the portable one where the CPU lacks it or for strides above 2).
///
/// # Safety
/// `x` and `y` hold the tensors `p` describes, `packed` what
/// [`pack_qdepthwise`] wrote for `p`, `scratch` [`qdepthwise_scratch_bytes`].
pub unsafe fn qdepthwise_with(
    kernel: ByteKernel,
    p: &QDepthwiseParams,
    x: *const u8,
    packed: *const u8,
    y: *mut u8,
    scratch: *mut u8,
) -> i32 {
    let Some(g) = Geometry::of(p) else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(requant) = output_range(p) else {
        return STATUS_INVALID_PARAMS;
    };
    let channels = p.channels as usize;
    let (scales, offsets) = (packed as *const f64, packed.add(8 * channels) as *const i32);
    let pairs = packed.add(12 * channels) as *const i32;
    let plane = core::slice::from_raw_parts_mut(scratch, g.plane);
    let outputs = core::slice::from_raw_parts_mut(scratch.add(g.plane), g.virtual_len);
    let flip = if p.x_signed != 0 { 0x80u8 } else { 0 };
    let pad = (p.x_zero as u8) ^ flip;
    for image in 0..p.batch as usize {
        for c in 0..channels {
            let index = image * channels + c;
            let input = core::slice::from_raw_parts(x.add(index * g.in_h * g.in_w), g.in_h * g.in_w);
            fill_plane(p, &g, input, flip, pad, plane);
            let channel = Channel {
                plane: plane.as_ptr(),
                taps: &g.taps[..2 * g.pairs],
                pairs: core::slice::from_raw_parts(pairs.add(c * g.pairs), g.pairs),
                stride: p.stride as usize,
                len: g.virtual_len,
                offset: offsets.add(c).read_unaligned(),
                requant: Requant { scale: scales.add(c).read_unaligned(), ..requant },
            };
            if !crate::isa::choose::qdepthwise_rows(kernel, &channel, outputs.as_mut_ptr()) {
                generic_rows(&channel, outputs);
            }
            let out = y.add(index * g.out_h * g.out_w);
            for oy in 0..g.out_h {
                core::ptr::copy_nonoverlapping(outputs.as_ptr().add(oy * g.pitch), out.add(oy * g.out_w), g.out_w);
            }
        }
    }
    STATUS_OK
}

/// The requantization's zero and range (the scale is per channel), checked
/// against the output's type.
fn output_range(p: &QDepthwiseParams) -> Option<Requant> {
    let byte = |v: i64| (-128..=255).contains(&v);
    let fits = byte(p.y_zero) && byte(p.y_min) && byte(p.y_max) && p.y_min <= p.y_max && p.y_max - p.y_min <= 255;
    fits.then_some(Requant { scale: 0.0, zero: p.y_zero as f64, lo: p.y_min as f64, hi: p.y_max as f64 })
}

/// Lays one input plane out padded in `plane` (module doc, step 1): input
/// `(iy, ix)` at plane row `iy + pad_top`, column `ix + pad_left`, where
/// those are inside it.
fn fill_plane(p: &QDepthwiseParams, g: &Geometry, input: &[u8], flip: u8, pad: u8, plane: &mut [u8]) {
    plane.fill(pad);
    let (top, left) = (p.pad_top as usize, p.pad_left as usize);
    let width = g.in_w.min(g.pitch.saturating_sub(left));
    let rows = (g.plane / g.pitch).saturating_sub(top).min(g.in_h);
    for (iy, row) in input.chunks_exact(g.in_w.max(1)).take(rows).enumerate() {
        let out = &mut plane[(iy + top) * g.pitch + left..][..width];
        for (o, &v) in out.iter_mut().zip(row) {
            *o = v ^ flip;
        }
    }
}

/// The portable row kernel: each block's sums tap by tap, then
/// [`requantize_byte_row`].
pub(crate) fn generic_rows(ch: &Channel, out: &mut [u8]) {
    let plane = unsafe { core::slice::from_raw_parts(ch.plane, ch.stride * ch.len + ch.taps[ch.taps.len() - 1] + 1) };
    let Requant { scale, zero, lo, hi } = ch.requant;
    let mut acc = [0i32; BLOCK];
    for v0 in (0..ch.len).step_by(BLOCK) {
        acc.fill(ch.offset);
        for (t, &tap) in ch.taps.iter().enumerate() {
            let w = (ch.pairs[t / 2] >> (16 * (t % 2))) as i16 as i32;
            let base = tap + ch.stride * v0;
            for (j, a) in acc.iter_mut().enumerate() {
                *a = a.wrapping_add(plane[base + ch.stride * j] as i32 * w);
            }
        }
        requantize_byte_row(&acc, scale, zero, (lo, hi), &mut out[v0..v0 + BLOCK]);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::conv::ConvParams;
    use crate::abi::quant::{QOperand, RequantParams};
    use crate::abi::{ELEM_F32, ELEM_I8, ELEM_U8};
    use crate::generic::qproduct::tests::kernels;
    use crate::generic::quant::{qconv_scratch_bytes, qconv_with, requantize};
    use crate::generic::test_util::rand_bytes;
    use std::vec;
    use std::vec::Vec;

    /// (channels, input h, w, kernel h, w, stride, dilation h, w, pads
    /// top, left, bottom, right).
    type Case = (usize, usize, usize, usize, usize, usize, usize, usize, usize, usize, usize, usize);

    fn params(c: Case, x_signed: bool, y_signed: bool) -> (QDepthwiseParams, ConvParams) {
        let (ch, ih, iw, kh, kw, s, dh, dw, pt, pl, pb, pr) = c;
        let oh = (ih + pt + pb - dh * (kh - 1) - 1) / s + 1;
        let ow = (iw + pl + pr - dw * (kw - 1) - 1) / s + 1;
        let (y_zero, y_min, y_max) = if y_signed { (-7, -128, 127) } else { (131, 0, 255) };
        let q = QDepthwiseParams {
            batch: 2,
            channels: ch as i64,
            in_h: ih as i64,
            in_w: iw as i64,
            out_h: oh as i64,
            out_w: ow as i64,
            kernel_h: kh as i64,
            kernel_w: kw as i64,
            stride: s as i64,
            dilation_h: dh as i64,
            dilation_w: dw as i64,
            pad_top: pt as i64,
            pad_left: pl as i64,
            x_signed: x_signed as i64,
            x_zero: if x_signed { -3 } else { 119 },
            y_zero,
            y_min,
            y_max,
        };
        let mut conv = ConvParams {
            batch: 2,
            in_channels: ch as i64,
            out_channels: ch as i64,
            group: ch as i64,
            spatial_rank: 2,
            ..Default::default()
        };
        for (d, (i, o, k, dil, pad)) in [(ih, oh, kh, dh, pt), (iw, ow, kw, dw, pl)].into_iter().enumerate() {
            (conv.in_spatial[d], conv.out_spatial[d], conv.kernel[d]) = (i as i64, o as i64, k as i64);
            (conv.strides[d], conv.dilations[d], conv.pads_begin[d]) = (s as i64, dil as i64, pad as i64);
        }
        (q, conv)
    }

    /// The two-step reference: `qconv_with`'s i32 sums, then `requantize`.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        conv: &ConvParams,
        q: &QDepthwiseParams,
        x: &[u8],
        w: &[u8],
        w_zero: &[u8],
        bias: &[i32],
        scales: [&[f32]; 3],
        w_signed: bool,
    ) -> Vec<u8> {
        let x_type = if q.x_signed != 0 { ELEM_I8 } else { ELEM_U8 };
        let w_type = if w_signed { ELEM_I8 } else { ELEM_U8 };
        let y_type = if q.y_min < 0 { ELEM_I8 } else { ELEM_U8 };
        let ops = [
            QOperand { dtype: x_type, zp_indexed: 0 },
            QOperand { dtype: w_type, zp_indexed: (w_zero.len() > 1) as i64 },
        ];
        let out_size = (q.out_h * q.out_w) as usize;
        let channels = q.channels as usize;
        let mut acc = vec![0i32; 2 * channels * out_size];
        let mut scratch = vec![0u8; qconv_scratch_bytes(conv, x_type)];
        let x_zero = [q.x_zero as u8];
        let status = unsafe {
            qconv_with(
                ByteKernel::Generic,
                conv,
                &ops,
                x.as_ptr(),
                w.as_ptr(),
                x_zero.as_ptr(),
                w_zero.as_ptr(),
                bias.as_ptr(),
                acc.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(status, STATUS_OK);
        let r = RequantParams {
            scale_dtype: ELEM_F32,
            y_dtype: y_type,
            outer: 2,
            len: channels as i64,
            inner: out_size as i64,
            a_indexed: 0,
            b_index: (scales[1].len() > 1) as i64,
        };
        let mut y = vec![0u8; acc.len()];
        let y_zero = [q.y_zero as u8];
        let [xs, ws, ys] = scales.map(|s| s.as_ptr() as *const u8);
        assert_eq!(unsafe { requantize(&r, acc.as_ptr(), xs, ws, ys, y_zero.as_ptr(), y.as_mut_ptr()) }, STATUS_OK);
        y
    }

    #[test]
    fn every_kernel_matches_the_im2col_product_and_requantize() {
        let cases: [Case; 9] = [
            (3, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1),
            (5, 12, 13, 3, 3, 2, 1, 1, 1, 1, 1, 1),
            (2, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1),
            (4, 15, 17, 5, 5, 2, 1, 1, 2, 2, 2, 2),
            (3, 9, 10, 7, 7, 1, 1, 1, 3, 3, 3, 3),
            (2, 11, 9, 3, 5, 1, 2, 1, 0, 2, 3, 1),
            (1, 3, 40, 1, 1, 1, 1, 1, 0, 0, 0, 0),
            (2, 10, 9, 3, 3, 3, 1, 2, 1, 0, 0, 2),
            (1, 2, 2, 3, 3, 1, 1, 1, 2, 2, 2, 2),
        ];
        for (seed, case) in cases.into_iter().enumerate() {
            for (x_signed, w_signed, y_signed, per_channel) in [
                (false, true, false, true),
                (true, true, true, false),
                (false, false, true, true),
                (true, false, false, false),
            ] {
                let (q, conv) = params(case, x_signed, y_signed);
                let (channels, taps) = (case.0, case.3 * case.4);
                let seed = seed as u32 * 16;
                let x = rand_bytes(2 * channels * case.1 * case.2, 1 + seed);
                let w = rand_bytes(channels * taps, 2 + seed);
                let w_zero_bytes = rand_bytes(if per_channel { channels } else { 1 }, 3 + seed);
                let w_zero: Vec<i32> =
                    w_zero_bytes.iter().map(|&b| if w_signed { b as i8 as i32 } else { b as i32 }).collect();
                let bias: Vec<i32> = (0..channels as i32).map(|c| c * 7919 - 20_000).collect();
                let w_scale: Vec<f32> = (0..w_zero.len()).map(|c| 0.0031 + 0.0007 * c as f32).collect();
                let (x_scale, y_scale) = ([0.0213f32], [0.0517f32]);
                let want = reference(&conv, &q, &x, &w, &w_zero_bytes, &bias, [&x_scale, &w_scale, &y_scale], w_signed);
                let wt = QConvConstants {
                    w: &w,
                    w_signed,
                    w_zero: &w_zero,
                    bias: &bias,
                    x_scale: x_scale[0],
                    w_scale: &w_scale,
                    y_scale: y_scale[0],
                };
                let mut packed = vec![0u8; qdepthwise_packed_bytes(&q)];
                assert!(pack_qdepthwise(&q, &wt, &mut packed));
                let mut scratch = vec![0u8; qdepthwise_scratch_bytes(&q)];
                for kernel in kernels() {
                    let mut got = vec![0u8; want.len()];
                    let status = unsafe {
                        qdepthwise_with(kernel, &q, x.as_ptr(), packed.as_ptr(), got.as_mut_ptr(), scratch.as_mut_ptr())
                    };
                    assert_eq!(status, STATUS_OK);
                    assert_eq!(
                        got,
                        want,
                        "{} case {case:?} signed x {x_signed} w {w_signed} y {y_signed}",
                        kernel.name()
                    );
                }
            }
        }
    }

    #[test]
    fn a_narrowed_range_clamps_as_a_fused_relu() {
        let (mut q, _) = params((2, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1), false, false);
        q.y_min = q.y_zero;
        let w = rand_bytes(18, 5);
        let wt = QConvConstants {
            w: &w,
            w_signed: true,
            w_zero: &[0],
            bias: &[],
            x_scale: 0.02,
            w_scale: &[0.01],
            y_scale: 0.01,
        };
        let mut packed = vec![0u8; qdepthwise_packed_bytes(&q)];
        assert!(pack_qdepthwise(&q, &wt, &mut packed));
        let x = rand_bytes(2 * 2 * 36, 6);
        let mut scratch = vec![0u8; qdepthwise_scratch_bytes(&q)];
        let mut y = vec![0u8; 2 * 2 * 36];
        for kernel in kernels() {
            let status = unsafe {
                qdepthwise_with(kernel, &q, x.as_ptr(), packed.as_ptr(), y.as_mut_ptr(), scratch.as_mut_ptr())
            };
            assert_eq!(status, STATUS_OK);
            assert!(y.iter().all(|&v| v as i64 >= q.y_zero), "{}", kernel.name());
            assert!(y.iter().any(|&v| v as i64 == q.y_zero));
        }
    }

    #[test]
    fn bad_params_are_refused() {
        let (q, _) = params((1, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1), false, false);
        let z = core::ptr::null_mut();
        for bad in [
            QDepthwiseParams { stride: 0, ..q },
            QDepthwiseParams { kernel_h: 9, kernel_w: 9, ..q },
            QDepthwiseParams { y_max: 300, ..q },
        ] {
            assert_eq!(unsafe { qdepthwise_with(ByteKernel::Generic, &bad, z, z, z, z) }, STATUS_INVALID_PARAMS);
        }
    }
}
