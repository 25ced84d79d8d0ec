//! Dense QLinearConv with constant 8-bit weights in one call, requantization
//! included: what `quant::qconv_with` followed by `quant::requantize` does,
//! without the per-call work that depends on the weights alone or the
//! passes over the i32 sums.
//!
//! [`pack_qconv`] runs at compile time. It stores the weights flipped to
//! unsigned (`w' = w ^ 0x80 = w + 128` for i8, as the byte kernels read A;
//! row-major, the layout they broadcast from), and per output channel `m`
//! the combined scale `x_scale · w_scale[m] / y_scale` (in f32, as
//! `requantize` computes it, held as f64), `ZA[m] = zw[m] + oa` and
//! `offset[m] = bias[m] - ZB·Σ_q w'[m][q] + K·ZA[m]·ZB`, where `K` is the
//! depth (input channels per group × taps) and `ZB = zx - ob` the input's
//! zero point as the kernels read the input (`x' = x ^ 0x80 = x - 128`
//! for u8, so `ob` is 128 for u8 and 0 for i8; `oa` likewise for i8
//! weights). By `qproduct`'s identity,
//!
//! `Σ(w - zw)(x - zx) + bias = Σ w'x' + offset[m] - ZA[m]·Σ_q x'[q][c]`
//!
//! modulo 2^32, the reference's wrapping sum. Per image and group, the call
//! lays out the im2col matrix (not for 1x1 stride-1 unpadded convolutions,
//! which read the input itself; padding reads as the input's zero point),
//! takes the raw byte product `Σ w'x'` into scratch through the chosen
//! [`ByteKernel`], and then, by chunks of columns, the column sums of `x'`,
//! and each row's corrected sums requantized by
//! `quant::requantize_byte_row` straight into the output (f64 `acc · scale
//! + zero`, clamped to `[y_min, y_max]`, rounded half to even). Every step
//! is exact or the same f64 operations as `requantize`'s, so the output is
//! `qconv_with` + `requantize`'s bit for bit at every ISA level (`tests`).

use super::conv::{im2col, validate, ConvShape};
use super::qdepthwise::QConvConstants;
use super::qproduct::{column_sums, raw_byte_product, COLUMN_CHUNK};
use super::quant::requantize_byte_row;
use crate::abi::quant::QConvPackedParams;
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};
use crate::isa::ByteKernel;

/// Bytes of the per-channel entries [`pack_qconv`] writes before the
/// weights: an f64 scale, the i32 offset and the i32 `ZA`.
const CHANNEL_BYTES: usize = 16;

/// The convolution's shape and the depth of its product, checked.
fn shape(p: &QConvPackedParams) -> Option<(ConvShape, usize)> {
    let s = validate(&p.conv)?;
    let depth = s.c_per_group * s.taps;
    Some((s, depth))
}

/// Bytes [`pack_qconv`] writes: the per-channel entries, then the weights.
pub fn qconv_packed_bytes(p: &QConvPackedParams) -> usize {
    shape(p).map_or(0, |(_, depth)| p.conv.out_channels as usize * (CHANNEL_BYTES + depth))
}

/// Scratch bytes [`crate::abi::onnxc_qconv_packed`] needs: one group's raw
/// i32 sums, then its im2col matrix (none for 1x1 convolutions).
pub fn qconv_packed_scratch_bytes(p: &QConvPackedParams) -> usize {
    shape(p).map_or(0, |(s, depth)| {
        let columns = if s.pointwise { 0 } else { depth * s.out_size };
        4 * s.m_per_group * s.out_size + columns
    })
}

/// The bits a byte kernel flips to read `signed` (i8) as u8 (`unsigned_side`)
/// or u8 as i8.
fn flip(signed: bool, unsigned_side: bool) -> u8 {
    if signed == unsigned_side {
        0x80
    } else {
        0
    }
}

/// Packs `wt` for [`crate::abi::onnxc_qconv_packed`] into `out`
/// ([`qconv_packed_bytes`]), as the module doc says. `false` when the sizes
/// disagree or a combined scale is not finite (which `requantize` handles
/// by its element loop, so the caller keeps the general path).
pub fn pack_qconv(p: &QConvPackedParams, wt: &QConvConstants, out: &mut [u8]) -> bool {
    let Some((_, depth)) = shape(p) else { return false };
    let channels = p.conv.out_channels as usize;
    let fits = |len: usize| len == 1 || len == channels;
    if out.len() != qconv_packed_bytes(p) || wt.w.len() != channels * depth || !fits(wt.w_scale.len()) {
        return false;
    }
    if !fits(wt.w_zero.len()) || !wt.bias.is_empty() && wt.bias.len() != channels {
        return false;
    }
    let (a_flip, b_flip) = (flip(wt.w_signed, true), flip(p.x_signed != 0, false));
    let zb = (p.x_zero as i32).wrapping_sub(b_flip as i32);
    let (entries, weights) = out.split_at_mut(CHANNEL_BYTES * channels);
    for m in 0..channels {
        let at = |v: &[f32]| v[if v.len() == 1 { 0 } else { m }];
        let scale = (wt.x_scale * at(wt.w_scale) / wt.y_scale) as f64;
        if !scale.is_finite() {
            return false;
        }
        let row = &mut weights[m * depth..(m + 1) * depth];
        for (o, &w) in row.iter_mut().zip(&wt.w[m * depth..]) {
            *o = w ^ a_flip;
        }
        let row_sum = row.iter().fold(0i32, |s, &v| s.wrapping_add(v as i32));
        let za = wt.w_zero[if wt.w_zero.len() == 1 { 0 } else { m }].wrapping_add(a_flip as i32);
        let bias = if wt.bias.is_empty() { 0 } else { wt.bias[m] };
        let offset =
            bias.wrapping_sub(zb.wrapping_mul(row_sum)).wrapping_add((depth as i32).wrapping_mul(za).wrapping_mul(zb));
        let entry = &mut entries[CHANNEL_BYTES * m..CHANNEL_BYTES * (m + 1)];
        entry[..8].copy_from_slice(&scale.to_ne_bytes());
        entry[8..12].copy_from_slice(&offset.to_ne_bytes());
        entry[12..].copy_from_slice(&za.to_ne_bytes());
    }
    true
}

/// The convolution of the module doc with `kernel`'s byte product (the
/// portable one where the CPU lacks it).
///
/// # Safety
/// `x` and `y` hold the tensors `p` describes, `packed` what [`pack_qconv`]
/// wrote for `p`, `scratch` [`qconv_packed_scratch_bytes`], 4-byte aligned.
pub unsafe fn qconv_packed_with(
    kernel: ByteKernel,
    p: &QConvPackedParams,
    x: *const u8,
    packed: *const u8,
    y: *mut u8,
    scratch: *mut u8,
) -> i32 {
    let Some((s, depth)) = shape(p) else {
        return STATUS_INVALID_PARAMS;
    };
    let byte = |v: i64| (-128..=255).contains(&v);
    let range_fits = byte(p.y_zero) && byte(p.y_min) && byte(p.y_max) && p.y_min <= p.y_max;
    if !range_fits || !byte(p.x_zero) || scratch.align_offset(4) != 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (cin, cout, mg) = (p.conv.in_channels as usize, p.conv.out_channels as usize, s.m_per_group);
    let raw = scratch as *mut i32;
    let columns = scratch.add(4 * mg * s.out_size);
    let b_flip = flip(p.x_signed != 0, false);
    let weights = packed.add(CHANNEL_BYTES * cout);
    for n in 0..p.conv.batch as usize {
        for g in 0..p.conv.group as usize {
            let xg = x.add((n * cin + g * s.c_per_group) * s.in_size);
            let cols = if s.pointwise {
                xg
            } else {
                im2col(&p.conv, &s, xg, columns, p.x_zero as u8);
                columns as *const u8
            };
            let sums = core::slice::from_raw_parts_mut(raw, mg * s.out_size);
            if depth == 0 {
                sums.fill(0);
            } else {
                raw_byte_product(kernel, [mg, depth, s.out_size], weights.add(g * mg * depth), 0, cols, b_flip, raw);
            }
            let first = g * mg;
            let out = y.add((n * cout + first) * s.out_size);
            let finish = Finish { p, entries: packed.add(CHANNEL_BYTES * first), out_size: s.out_size };
            finish.rows(sums, [depth, s.out_size], cols, b_flip, out);
        }
    }
    STATUS_OK
}

/// What requantizing one group's sums needs.
struct Finish<'a> {
    p: &'a QConvPackedParams,
    /// The group's first channel's packed entries.
    entries: *const u8,
    out_size: usize,
}

impl Finish<'_> {
    /// Each row of `sums` (`out_size` columns) corrected by its offset and
    /// `ZA` times the column sums of `cols` (`depth x out_size`), then
    /// requantized into `out`, by chunks of [`COLUMN_CHUNK`] columns.
    unsafe fn rows(&self, sums: &mut [i32], [depth, width]: [usize; 2], cols: *const u8, b_flip: u8, out: *mut u8) {
        let range = (self.p.y_min as f64, self.p.y_max as f64);
        let zero = self.p.y_zero as f64;
        let mut col_sums = [0i32; COLUMN_CHUNK];
        for c0 in (0..width).step_by(COLUMN_CHUNK) {
            let chunk = COLUMN_CHUNK.min(width - c0);
            let col_sums = &mut col_sums[..chunk];
            column_sums([depth, width], cols, b_flip, c0, col_sums);
            for (r, row) in sums.chunks_exact_mut(self.out_size).enumerate() {
                let entry = self.entries.add(CHANNEL_BYTES * r);
                let scale = (entry as *const f64).read_unaligned();
                let offset = (entry.add(8) as *const i32).read_unaligned();
                let za = (entry.add(12) as *const i32).read_unaligned();
                let row = &mut row[c0..c0 + chunk];
                correct(row, col_sums, offset, za);
                let y = core::slice::from_raw_parts_mut(out.add(r * self.out_size + c0), chunk);
                requantize_byte_row(row, scale, zero, range, y);
            }
        }
    }
}

/// `row[j] += offset - za · col_sums[j]`, wrapping, at the widest vectors.
fn correct(row: &mut [i32], col_sums: &[i32], offset: i32, za: i32) {
    crate::isa::with_widest_vectors(
        #[inline(always)]
        move || {
            for (v, &c) in row.iter_mut().zip(col_sums) {
                *v = v.wrapping_add(offset).wrapping_sub(za.wrapping_mul(c));
            }
        },
    )
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
    use std::format;
    use std::vec;
    use std::vec::Vec;

    /// (channels in, out, group, input, kernel, stride, pad) of a
    /// convolution with equal pads on both sides and dilation 1.
    type Case<'a> = (usize, usize, usize, &'a [usize], &'a [usize], usize, usize);

    fn conv_params((cin, cout, group, input, kernel, stride, pad): Case) -> ConvParams {
        let mut p = ConvParams {
            batch: 2,
            in_channels: cin as i64,
            out_channels: cout as i64,
            group: group as i64,
            spatial_rank: input.len() as i64,
            ..Default::default()
        };
        for d in 0..input.len() {
            p.out_spatial[d] = ((input[d] + 2 * pad - kernel[d]) / stride + 1) as i64;
            (p.in_spatial[d], p.kernel[d], p.strides[d]) = (input[d] as i64, kernel[d] as i64, stride as i64);
            (p.dilations[d], p.pads_begin[d]) = (1, pad as i64);
        }
        p
    }

    /// The operands of one test: bytes, zero points, bias and scales.
    struct Operands {
        x: Vec<u8>,
        w: Vec<u8>,
        w_zero: Vec<u8>,
        bias: Vec<i32>,
        w_scale: Vec<f32>,
    }

    const X_SCALE: f32 = 0.0213;
    const Y_SCALE: f32 = 0.0517;

    /// The two-step reference: `qconv_with`'s i32 sums, then `requantize`.
    fn reference(q: &QConvPackedParams, ops: &Operands, w_signed: bool) -> Vec<u8> {
        let x_type = if q.x_signed != 0 { ELEM_I8 } else { ELEM_U8 };
        let w_type = if w_signed { ELEM_I8 } else { ELEM_U8 };
        let y_type = if q.y_min < 0 { ELEM_I8 } else { ELEM_U8 };
        let types = [
            QOperand { dtype: x_type, zp_indexed: 0 },
            QOperand { dtype: w_type, zp_indexed: (ops.w_zero.len() > 1) as i64 },
        ];
        let s = validate(&q.conv).unwrap();
        let cout = q.conv.out_channels as usize;
        let mut acc = vec![0i32; 2 * cout * s.out_size];
        let mut scratch = vec![0u8; qconv_scratch_bytes(&q.conv, x_type)];
        let x_zero = [q.x_zero as u8];
        let status = unsafe {
            qconv_with(
                ByteKernel::Generic,
                &q.conv,
                &types,
                ops.x.as_ptr(),
                ops.w.as_ptr(),
                x_zero.as_ptr(),
                ops.w_zero.as_ptr(),
                if ops.bias.is_empty() { core::ptr::null() } else { ops.bias.as_ptr() },
                acc.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(status, STATUS_OK);
        let r = RequantParams {
            scale_dtype: ELEM_F32,
            y_dtype: y_type,
            outer: 2,
            len: cout as i64,
            inner: s.out_size as i64,
            a_indexed: 0,
            b_index: (ops.w_scale.len() > 1) as i64,
        };
        let mut y = vec![0u8; acc.len()];
        let y_zero = [q.y_zero as u8];
        let scales = [&[X_SCALE][..], &ops.w_scale, &[Y_SCALE]].map(|s| s.as_ptr() as *const u8);
        let status =
            unsafe { requantize(&r, acc.as_ptr(), scales[0], scales[1], scales[2], y_zero.as_ptr(), y.as_mut_ptr()) };
        assert_eq!(status, STATUS_OK);
        y
    }

    /// Packs `ops` and runs every kernel this CPU has, each against `want`.
    fn check_every_kernel(q: &QConvPackedParams, ops: &Operands, w_signed: bool, want: &[u8], what: &str) {
        let w_zero: Vec<i32> = ops.w_zero.iter().map(|&b| if w_signed { b as i8 as i32 } else { b as i32 }).collect();
        let constants = QConvConstants {
            w: &ops.w,
            w_signed,
            w_zero: &w_zero,
            bias: &ops.bias,
            x_scale: X_SCALE,
            w_scale: &ops.w_scale,
            y_scale: Y_SCALE,
        };
        let mut packed = vec![0u8; qconv_packed_bytes(q)];
        assert!(pack_qconv(q, &constants, &mut packed));
        // i32 words, so the scratch is aligned.
        let mut scratch = vec![0u32; qconv_packed_scratch_bytes(q).div_ceil(4)];
        for kernel in kernels() {
            let mut got = vec![0u8; want.len()];
            let scratch = scratch.as_mut_ptr() as *mut u8;
            let status =
                unsafe { qconv_packed_with(kernel, q, ops.x.as_ptr(), packed.as_ptr(), got.as_mut_ptr(), scratch) };
            assert_eq!(status, STATUS_OK);
            assert_eq!(got, want, "{} {what}", kernel.name());
        }
    }

    #[test]
    fn every_kernel_matches_the_im2col_product_and_requantize() {
        // 3x3 padded, strided 5x5 grouped, pointwise (more than 256 output
        // columns: two correction chunks), 20 output channels (row tails of
        // 8, 4), 1-D, and a 3-D window.
        let cases: [Case; 6] = [
            (3, 4, 1, &[7, 9], &[3, 3], 1, 1),
            (4, 6, 2, &[11, 10], &[5, 5], 2, 2),
            (5, 7, 1, &[17, 19], &[1, 1], 1, 0),
            (8, 20, 1, &[9, 11], &[3, 3], 1, 1),
            (3, 2, 1, &[17], &[4], 3, 1),
            (4, 4, 2, &[5, 4, 6], &[2, 3, 3], 1, 1),
        ];
        for (seed, case) in cases.into_iter().enumerate() {
            for (x_signed, w_signed, y_signed, per_channel) in [
                (false, true, false, true),
                (true, true, true, false),
                (false, false, true, true),
                (true, false, false, false),
            ] {
                let conv = conv_params(case);
                let (y_zero, y_min, y_max) = if y_signed { (-7, -128, 127) } else { (131, 0, 255) };
                let x_zero = if x_signed { -3 } else { 119 };
                let q = QConvPackedParams { conv, x_signed: x_signed as i64, x_zero, y_zero, y_min, y_max };
                let (cin, cout, group, input, kernel, ..) = case;
                let seed = seed as u32 * 16;
                let depth = cin / group * kernel.iter().product::<usize>();
                let ops = Operands {
                    x: rand_bytes(2 * cin * input.iter().product::<usize>(), 1 + seed),
                    w: rand_bytes(cout * depth, 2 + seed),
                    w_zero: rand_bytes(if per_channel { cout } else { 1 }, 3 + seed),
                    bias: if per_channel { (0..cout as i32).map(|c| c * 7919 - 20_000).collect() } else { vec![] },
                    w_scale: (0..if per_channel { cout } else { 1 }).map(|c| 0.0031 + 0.0007 * c as f32).collect(),
                };
                let want = reference(&q, &ops, w_signed);
                let what = format!("case {case:?} signed x {x_signed} w {w_signed} y {y_signed}");
                check_every_kernel(&q, &ops, w_signed, &want, &what);
            }
        }
    }

    #[test]
    fn a_narrowed_range_clamps_as_a_fused_relu() {
        let conv = conv_params((4, 5, 1, &[6, 6], &[3, 3], 1, 1));
        let q = QConvPackedParams { conv, x_signed: 0, x_zero: 120, y_zero: 100, y_min: 100, y_max: 255 };
        let ops = Operands {
            x: rand_bytes(2 * 4 * 36, 5),
            w: rand_bytes(5 * 36, 6),
            w_zero: vec![0],
            bias: vec![],
            w_scale: vec![0.01],
        };
        let full = reference(&QConvPackedParams { y_min: 0, ..q }, &ops, true);
        assert!(full.iter().any(|&v| v < 100), "the case must reach below the narrowed range");
        let want: Vec<u8> = full.iter().map(|&v| v.max(100)).collect();
        check_every_kernel(&q, &ops, true, &want, "relu range");
    }

    #[test]
    fn bad_params_and_constants_are_refused() {
        let conv = conv_params((2, 2, 1, &[4, 4], &[3, 3], 1, 1));
        let q = QConvPackedParams { conv, x_signed: 0, x_zero: 0, y_zero: 0, y_min: 0, y_max: 255 };
        let z = core::ptr::null_mut();
        let mut bad_conv = q;
        bad_conv.conv.group = 0;
        for bad in [bad_conv, QConvPackedParams { y_max: 300, ..q }, QConvPackedParams { x_zero: -200, ..q }] {
            assert_eq!(unsafe { qconv_packed_with(ByteKernel::Generic, &bad, z, z, z, z) }, STATUS_INVALID_PARAMS);
        }
        let w = [0u8; 36];
        let constants = QConvConstants {
            w: &w,
            w_signed: true,
            w_zero: &[0],
            bias: &[],
            x_scale: 1.0,
            w_scale: &[1.0],
            y_scale: 0.0,
        };
        let mut packed = vec![0u8; qconv_packed_bytes(&q)];
        assert!(!pack_qconv(&q, &constants, &mut packed), "an infinite scale");
        let short = QConvConstants { w: &w[..35], y_scale: 1.0, ..constants };
        assert!(!pack_qconv(&q, &short, &mut packed), "too few weights");
        assert!(pack_qconv(&q, &QConvConstants { y_scale: 1.0, ..constants }, &mut packed));
    }
}
