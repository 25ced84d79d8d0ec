//! Linear quantization: QuantizeLinear, DequantizeLinear,
//! DynamicQuantizeLinear, and the integer products behind MatMulInteger,
//! ConvInteger, QLinearMatMul and QLinearConv.
//!
//! Quantized values are 8- or 16-bit integers; products accumulate exactly
//! in i32 after subtracting the zero points (the product itself, with its
//! SIMD paths for 8-bit operands, is [`super::qproduct`]; convolutions
//! multiply the weights by an im2col matrix in the node's scratch, whose
//! padding reads as the input's zero point and so adds 0), and the QLinear
//! operators requantize the accumulators with the combined scale computed
//! in the scales' own float type, adding the output zero point before
//! rounding half to even and saturating — the ONNX reference's order of
//! operations.
//! Scales and zero points are per tensor, per axis or per block: element
//! `(o, j, i)` of a tensor viewed as `[outer, len, inner]` around the axis
//! uses entry `o * so + (j / block) * sj + i * si` (see [`QuantParams`]).

use super::conv::{conv_scratch_elems, im2col, validate};
use super::qproduct::{int_bytes, integer_product, IntMatrix};
use crate::abi::conv::ConvParams;
use crate::abi::minifloat::{onnxc_f32_to_minifloat, onnxc_minifloat_to_f32};
use crate::abi::quant::*;
use crate::abi::{
    ELEM_BF16, ELEM_F16, ELEM_F32, ELEM_F4E2M1, ELEM_F64, ELEM_I16, ELEM_I2, ELEM_I32, ELEM_I4, ELEM_I8, ELEM_U16,
    ELEM_U2, ELEM_U4, ELEM_U8, MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK,
};
use crate::generic::convert::{is_float_elem, load_float, store_float, Bf16, F16};
use crate::generic::minifloat::is_minifloat_elem;
use crate::generic::packed::{load_packed, store_packed};
use crate::isa::ByteKernel;

/// An integer element of a quantized type (int4/int2 packed), widened to
/// i32.
pub(crate) unsafe fn load_int(p: *const u8, i: usize, dtype: i64) -> Option<i32> {
    Some(match dtype {
        ELEM_U8 => *p.add(i) as i32,
        ELEM_I8 => *p.add(i) as i8 as i32,
        ELEM_U16 => (p as *const u16).add(i).read_unaligned() as i32,
        ELEM_I16 => (p as *const i16).add(i).read_unaligned() as i32,
        ELEM_I32 => (p as *const i32).add(i).read_unaligned(),
        ELEM_I4 | ELEM_U4 | ELEM_I2 | ELEM_U2 => load_packed(p, i, dtype)?,
        _ => return None,
    })
}

/// The range of a quantized integer type.
pub(crate) fn int_range(dtype: i64) -> Option<(f64, f64)> {
    Some(match dtype {
        ELEM_U8 => (0.0, 255.0),
        ELEM_I8 => (-128.0, 127.0),
        ELEM_U16 => (0.0, 65535.0),
        ELEM_I16 => (-32768.0, 32767.0),
        ELEM_U4 => (0.0, 15.0),
        ELEM_I4 => (-8.0, 7.0),
        ELEM_U2 => (0.0, 3.0),
        ELEM_I2 => (-2.0, 1.0),
        _ => return None,
    })
}

/// Stores `v` (already rounded) saturated to `dtype`'s range.
unsafe fn store_saturated(p: *mut u8, i: usize, dtype: i64, v: f64) {
    let Some((lo, hi)) = int_range(dtype) else {
        return;
    };
    let v = v.clamp(lo, hi) as i32;
    match dtype {
        ELEM_U8 => *p.add(i) = v as u8,
        ELEM_I8 => *p.add(i) = v as i8 as u8,
        ELEM_U16 => (p as *mut u16).add(i).write_unaligned(v as u16),
        ELEM_I16 => (p as *mut i16).add(i).write_unaligned(v as i16),
        _ => store_packed(p, i, dtype, v),
    }
}

/// `libm::rint(v)` as far as [`store_saturated`] into `range` can tell:
/// clamping to one past the range first changes nothing after the store's
/// clamp (NaN stays NaN, stored as 0), and keeps `|v| < 2^51`, where adding
/// and subtracting `1.5 · 2^52` rounds to nearest, ties to even (the
/// default rounding mode), in two additions instead of a library call.
fn rint_in_range(v: f64, (lo, hi): (f64, f64)) -> f64 {
    (v.clamp(lo - 1.0, hi + 1.0) + ROUNDER) - ROUNDER
}

/// `1.5 · 2^52`: adding it to an f64 `|v| < 2^51` rounds `v` to an integer,
/// half to even, and leaves that integer's two's complement in the low
/// bits of the mantissa.
pub(crate) const ROUNDER: f64 = 6_755_399_441_055_744.0;

/// Element `i` of a float8 or (packed) float4 tensor, widened to f32.
unsafe fn load_minifloat(p: *const u8, i: usize, dtype: i64) -> f32 {
    let bits = load_packed(p, i, dtype).unwrap_or_else(|| *p.add(i) as i32);
    onnxc_minifloat_to_f32(bits, dtype)
}

/// Stores `v` as element `i` of a float8 or (packed) float4 tensor
/// (`mode` as [`onnxc_f32_to_minifloat`] takes it).
unsafe fn store_minifloat(p: *mut u8, i: usize, dtype: i64, v: f32, mode: i64) {
    let bits = onnxc_f32_to_minifloat(v, dtype, mode);
    if dtype == ELEM_F4E2M1 {
        store_packed(p, i, dtype, bits);
    } else {
        *p.add(i) = bits as u8;
    }
}

/// `v` rounded to `dtype` (f32 arithmetic on 16-bit floats rounds after
/// every operation, as numpy does).
fn round_to(v: f32, dtype: i64) -> f32 {
    match dtype {
        ELEM_F16 => F16::from_f32(v).to_f32(),
        ELEM_BF16 => Bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// Element `i` of a scale or float tensor, as f32 (`None` for other types).
unsafe fn load_f32(p: *const u8, i: usize, dtype: i64) -> Option<f32> {
    (is_float_elem(dtype) && dtype != ELEM_F64).then(|| load_float(p, dtype, i as isize) as f32)
}

// ---------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear
// ---------------------------------------------------------------------------

impl QuantParams {
    /// (outer, len, inner, block) when consistent.
    fn sizes(&self) -> Option<(usize, usize, usize, usize)> {
        let [o, l, i, b] = [self.outer, self.len, self.inner, self.block].map(|v| usize::try_from(v).ok());
        let (o, l, i, b) = (o?, l?, i?, b?);
        (b > 0 && self.so >= 0 && self.sj >= 0 && self.si >= 0).then_some((o, l, i, b))
    }

    /// Calls `f(element, parameter entry)` for every element.
    fn for_each(&self, mut f: impl FnMut(usize, usize)) -> Option<()> {
        let (outer, len, inner, block) = self.sizes()?;
        let (so, sj, si) = (self.so as usize, self.sj as usize, self.si as usize);
        for o in 0..outer {
            for j in 0..len {
                for i in 0..inner {
                    f((o * len + j) * inner + i, o * so + (j / block) * sj + i * si);
                }
            }
        }
        Some(())
    }
}

/// Runs of elements that share one scale and zero point entry: the whole
/// tensor per tensor, else rows of `inner` elements.
struct ByteRows {
    outer: usize,
    len: usize,
    inner: usize,
    block: usize,
    so: usize,
    sj: usize,
}

impl ByteRows {
    /// Calls `f(first element, run length, entry)` for every run.
    fn for_each(&self, mut f: impl FnMut(usize, usize, usize)) {
        if self.so == 0 && self.sj == 0 {
            return f(0, self.outer * self.len * self.inner, 0);
        }
        for o in 0..self.outer {
            for j in 0..self.len {
                f((o * self.len + j) * self.inner, self.inner, o * self.so + (j / self.block) * self.sj);
            }
        }
    }
}

/// The runs of an f32 <-> u8/i8 conversion with f32 scales whose entry does
/// not change along `inner` (per tensor or per axis: the fast loops), or
/// `None` for the element loop.
fn byte_rows(p: &QuantParams) -> Option<ByteRows> {
    let (outer, len, inner, block) = p.sizes()?;
    let simple = p.float_dtype == ELEM_F32 && p.scale_dtype == ELEM_F32 && matches!(p.int_dtype, ELEM_U8 | ELEM_I8);
    (simple && p.si == 0).then_some(ByteRows { outer, len, inner, block, so: p.so as usize, sj: p.sj as usize })
}

/// QuantizeLinear of one run to u8/i8 (`range` the type's): `x / scale`
/// in f32, rounded half to even by adding and subtracting `1.5 · 2^23`
/// (exact after a clamp just past the range, which keeps `|q| < 2^22` and
/// changes nothing the saturation would not), plus the zero point (after
/// rounding: ties go to even before the shift, as in the element loop),
/// clamped — all small integers, exact in f32 — and stored as the low
/// byte of `v + 1.5 · 2^23`'s bits (the integer's two's complement): the
/// bits of the element loop's `store_saturated(rint(x / scale) + zero)`
/// (NaN stores 0) in f32 lanes only. Measured traps, 6 ns an element
/// each: constants captured by reference under a condition (LLVM loaded
/// them with a gather per vector; the closure takes them by value and
/// computes both sides of the NaN select), and `as i32` (Rust's saturating
/// conversion went lane by lane).
pub(crate) fn quantize_byte_row(x: &[f32], scale: f32, zero: f64, (lo, hi): (f64, f64), out: &mut [u8]) {
    const ROUNDER_F32: f32 = 12_582_912.0; // 1.5 * 2^23
    let (below, above) = ((lo - zero - 1.0) as f32, (hi - zero + 1.0) as f32);
    let (zero, lo, hi) = (zero as f32, lo as f32, hi as f32);
    crate::isa::with_widest_vectors(
        #[inline(always)]
        move || {
            for (o, &v) in out.iter_mut().zip(x) {
                let q = v / scale;
                let rounded = (q.max(below).min(above) + ROUNDER_F32) - ROUNDER_F32;
                let clamped = (rounded + zero).max(lo).min(hi);
                *o = if q.is_nan() { 0 } else { (clamped + ROUNDER_F32).to_bits() as u8 };
            }
        },
    )
}

/// DequantizeLinear of one u8 (or `signed` i8) run to f32: `(x - zero) ·
/// scale` in f32, as the element loop computes it, compiled for the
/// widest vectors.
pub(crate) fn dequantize_byte_row(x: &[u8], signed: bool, zero: f32, scale: f32, out: &mut [f32]) {
    crate::isa::with_widest_vectors(
        #[inline(always)]
        move || {
            for (o, &v) in out.iter_mut().zip(x) {
                let v = if signed { v as i8 as f32 } else { v as f32 };
                *o = (v - zero) * scale;
            }
        },
    )
}

/// Does the work of the C entry point [`crate::abi::onnxc_quantize`].
pub(crate) unsafe fn quantize(p: *const QuantParams, x: *const u8, scale: *const u8, zp: *const u8, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let minifloat = is_minifloat_elem(p.int_dtype);
    if !minifloat && int_range(p.int_dtype).is_none() || load_f32(scale, 0, p.scale_dtype).is_none() {
        return STATUS_INVALID_PARAMS;
    }
    if let Some(rows) = byte_rows(p) {
        let zero_of = |entry: usize| if zp.is_null() { 0 } else { load_int(zp, entry, p.int_dtype).unwrap_or(0) };
        let range = int_range(p.int_dtype).unwrap_or((0.0, 0.0));
        rows.for_each(|start, len, entry| {
            let x = core::slice::from_raw_parts((x as *const f32).add(start), len);
            let y = core::slice::from_raw_parts_mut(y.add(start), len);
            let scale = (scale as *const f32).add(entry).read_unaligned();
            quantize_byte_row(x, scale, zero_of(entry) as f64, range, y);
        });
        return STATUS_OK;
    }
    let float_is_int = p.float_dtype == ELEM_I32;
    let mut ok = true;
    let done = p.for_each(|e, s| {
        let v = if float_is_int { load_int(x, e, ELEM_I32).map(|v| v as f32) } else { load_f32(x, e, p.float_dtype) };
        let (Some(v), Some(scale)) = (v, load_f32(scale, s, p.scale_dtype)) else {
            ok = false;
            return;
        };
        let q = round_to(v / scale, p.float_dtype);
        if minifloat {
            let zero = if zp.is_null() { 0.0 } else { load_minifloat(zp, s, p.int_dtype) };
            store_minifloat(y, e, p.int_dtype, q + zero, p.saturate);
            return;
        }
        let zero = if zp.is_null() { 0 } else { load_int(zp, s, p.int_dtype).unwrap_or(0) };
        store_saturated(y, e, p.int_dtype, libm::rint(q as f64) + zero as f64);
    });
    if done.is_some() && ok {
        STATUS_OK
    } else {
        STATUS_INVALID_PARAMS
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_dequantize`].
pub(crate) unsafe fn dequantize(
    p: *const QuantParams,
    x: *const u8,
    scale: *const u8,
    zp: *const u8,
    y: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let minifloat = is_minifloat_elem(p.int_dtype);
    if !minifloat && load_int(x, 0, p.int_dtype).is_none() && p.len > 0 || load_f32(scale, 0, p.scale_dtype).is_none() {
        return STATUS_INVALID_PARAMS;
    }
    if let Some(rows) = byte_rows(p) {
        let signed = p.int_dtype == ELEM_I8;
        let zero_of = |entry: usize| if zp.is_null() { 0 } else { load_int(zp, entry, p.int_dtype).unwrap_or(0) };
        rows.for_each(|start, len, entry| {
            let x = core::slice::from_raw_parts(x.add(start), len);
            let y = core::slice::from_raw_parts_mut((y as *mut f32).add(start), len);
            let scale = (scale as *const f32).add(entry).read_unaligned();
            dequantize_byte_row(x, signed, zero_of(entry) as f32, scale, y);
        });
        return STATUS_OK;
    }
    let done = p.for_each(|e, s| {
        let (v, zero) = if minifloat {
            (load_minifloat(x, e, p.int_dtype), if zp.is_null() { 0.0 } else { load_minifloat(zp, s, p.int_dtype) })
        } else {
            let zero = if zp.is_null() { 0 } else { load_int(zp, s, p.int_dtype).unwrap_or(0) };
            (load_int(x, e, p.int_dtype).unwrap_or(0) as f32, zero as f32)
        };
        let scale = load_f32(scale, s, p.scale_dtype).unwrap_or(0.0);
        store_float(y, p.float_dtype, e as isize, ((v - zero) * scale) as f64);
    });
    if done.is_some() {
        STATUS_OK
    } else {
        STATUS_INVALID_PARAMS
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_dynamic_quantize`]:
/// the range by [`widened_range`], then [`quantize_byte_row`], whose
/// `saturate(rint(x / s) + zero)` is the definition's
/// `clamp(rintf(x / s) + zero, 0, 255)` bit for bit.
pub(crate) unsafe fn dynamic_quantize(x: *const f32, n: i64, y: *mut u8, scale: *mut f32, zp: *mut u8) -> i32 {
    let Ok(n) = usize::try_from(n) else {
        return STATUS_INVALID_PARAMS;
    };
    let x = core::slice::from_raw_parts(x, n);
    let (lo, hi) = widened_range(x);
    let s = (if hi == lo { 1.0 } else { hi - lo }) / 255.0;
    let zero = libm::rintf((0.0 - lo / s).clamp(0.0, 255.0));
    quantize_byte_row(x, s, zero as f64, (0.0, 255.0), core::slice::from_raw_parts_mut(y, n));
    scale.write_unaligned(s);
    *zp = zero as u8;
    STATUS_OK
}

/// `(min(0, x...), max(0, x...))`, NaN ignored, as the folds `if v < m`
/// and `if v > m` from 0 find them: in [`LANES`] independent lanes (so the
/// loop vectorises), then across the lanes. The order does not matter: a
/// lane starts at +0 and only takes strictly smaller (larger) values, so
/// no lane holds -0 in place of +0.
fn widened_range(x: &[f32]) -> (f32, f32) {
    const LANES: usize = 16;
    let (mut lo, mut hi) = ([0.0f32; LANES], [0.0f32; LANES]);
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder();
    crate::isa::with_widest_vectors(
        #[inline(always)]
        || {
            for chunk in chunks {
                for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(chunk) {
                    *l = if v < *l { v } else { *l };
                    *h = if v > *h { v } else { *h };
                }
            }
        },
    );
    let fold = |init: f32, lanes: &[f32], pick: fn(f32, f32) -> bool| {
        lanes.iter().chain(tail).fold(init, |m, &v| if pick(v, m) { v } else { m })
    };
    (fold(0.0, &lo, |v, m| v < m), fold(0.0, &hi, |v, m| v > m))
}

// ---------------------------------------------------------------------------
// Integer products
// ---------------------------------------------------------------------------

/// Does the work of the C entry point [`crate::abi::onnxc_qmatmul`].
pub(crate) unsafe fn qmatmul(
    p: *const QMatMulParams,
    a: *const u8,
    b: *const u8,
    a_zp: *const u8,
    b_zp: *const u8,
    acc: *mut i32,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let [Ok(m), Ok(k), Ok(n), Ok(rank)] = [p.m, p.k, p.n, p.batch_rank].map(usize::try_from) else {
        return STATUS_INVALID_PARAMS;
    };
    if rank > MAX_RANK
        || p.batch_dims[..rank].iter().any(|&d| d < 0)
        || load_int(a, 0, p.a.dtype).is_none() && m * k > 0
    {
        return STATUS_INVALID_PARAMS;
    }
    if load_int(b, 0, p.b.dtype).is_none() && k * n > 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (Some(ea), Some(eb)) = (int_bytes(p.a.dtype), int_bytes(p.b.dtype)) else {
        return STATUS_INVALID_PARAMS;
    };
    let batches: usize = p.batch_dims[..rank].iter().map(|&d| d as usize).product();
    let mut idx = [0usize; MAX_RANK];
    for t in 0..batches {
        let offset =
            |strides: &[i64; MAX_RANK]| idx[..rank].iter().zip(strides).map(|(&i, &s)| i * s as usize).sum::<usize>();
        let operand = |data: *const u8, at: usize, q: &QOperand, zp: *const u8| IntMatrix {
            data: data.wrapping_add(at),
            dtype: q.dtype,
            zp,
            zp_indexed: q.zp_indexed != 0,
            zp_first: 0,
        };
        let a_batch = operand(a, offset(&p.a_strides) * ea, &p.a, a_zp);
        let b_batch = operand(b, offset(&p.b_strides) * eb, &p.b, b_zp);
        integer_product(ByteKernel::best(), [m, k, n], a_batch, b_batch, acc.add(t * m * n));
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < p.batch_dims[d] as usize {
                break;
            }
            idx[d] = 0;
        }
    }
    STATUS_OK
}

/// Scratch bytes [`onnxc_qconv`] needs for these params and input type:
/// the im2col matrix of one group of one image (0 for pointwise
/// convolutions, which read the input directly, and for invalid params).
pub fn qconv_scratch_bytes(p: &ConvParams, x_dtype: i64) -> usize {
    int_bytes(x_dtype).map_or(0, |bytes| conv_scratch_elems(p) * bytes)
}

/// `acc = conv(X - x_zp, W - w_zp) (+ bias)` in i32 (wrapping): for each
/// image and group, the receptive fields laid out as an im2col matrix in
/// `scratch` ([`qconv_scratch_bytes`]; padding reads as the input's zero
/// point, so it contributes 0 as the ONNX reference's zero padding of
/// `X - x_zp` does), then one [`integer_product`] with the group's weights
/// (rows = output channels, so a per-channel weight zero point is a
/// per-row one), then the bias.
///
/// # Safety
/// The pointers hold what `p` describes; `acc` is the convolution output;
/// `x_zp`, `w_zp` and `bias` may be null.
#[allow(clippy::too_many_arguments)]
pub unsafe fn qconv_with(
    kernel: ByteKernel,
    p: *const ConvParams,
    ops: *const [QOperand; 2],
    x: *const u8,
    w: *const u8,
    x_zp: *const u8,
    w_zp: *const u8,
    bias: *const i32,
    acc: *mut i32,
    scratch: *mut u8,
) -> i32 {
    let (Some(p), Some([xq, wq])) = (p.as_ref(), ops.as_ref()) else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(s) = validate(p) else {
        return STATUS_INVALID_PARAMS;
    };
    let (Some(ex), Some(ew)) = (int_bytes(xq.dtype), int_bytes(wq.dtype)) else {
        return STATUS_INVALID_PARAMS;
    };
    if xq.zp_indexed != 0 || scratch.is_null() && qconv_scratch_bytes(p, xq.dtype) > 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (cg, mg, kdim) = (s.c_per_group, s.m_per_group, s.c_per_group * s.taps);
    let (cin, cout) = (p.in_channels as usize, p.out_channels as usize);
    // The zero point's bits, which padding reads as.
    let pad = if x_zp.is_null() { 0 } else { load_int(x_zp, 0, xq.dtype).unwrap_or(0) };
    for n in 0..p.batch as usize {
        for g in 0..p.group as usize {
            let xg = x.add((n * cin + g * cg) * s.in_size * ex);
            let cols = if s.pointwise {
                xg
            } else {
                match ex {
                    1 => im2col(p, &s, xg, scratch, pad as u8),
                    _ => im2col(p, &s, xg as *const u16, scratch as *mut u16, pad as u16),
                }
                scratch as *const u8
            };
            let weights = IntMatrix {
                data: w.add(g * mg * kdim * ew),
                dtype: wq.dtype,
                zp: w_zp,
                zp_indexed: wq.zp_indexed != 0,
                zp_first: g * mg,
            };
            let columns = IntMatrix { data: cols, dtype: xq.dtype, zp: x_zp, zp_indexed: false, zp_first: 0 };
            let out = acc.add((n * cout + g * mg) * s.out_size);
            integer_product(kernel, [mg, kdim, s.out_size], weights, columns, out);
            if bias.is_null() || s.out_size == 0 {
                continue;
            }
            let bias = core::slice::from_raw_parts(bias.add(g * mg), mg);
            let sums = core::slice::from_raw_parts_mut(out, mg * s.out_size);
            crate::isa::with_widest_vectors(
                #[inline(always)]
                move || {
                    for (row, &b) in sums.chunks_exact_mut(s.out_size).zip(bias) {
                        row.iter_mut().for_each(|v| *v = v.wrapping_add(b));
                    }
                },
            );
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_scale_product`]:
/// each i32 of `y` (rows of `cols`) becomes the f32 `acc as f32 · scale[c]
/// (+ bias[c])` in place, the entries per column or one for all — the
/// bits of ONNX's `Cast(to f32)`, `Mul` and `Add` one after the other.
/// The buffer is read and written as one `u32` slice (no aliasing of an
/// i32 and an f32 view).
pub(crate) unsafe fn scale_product(p: *const ScaleParams, y: *mut u8, scale: *const f32, bias: *const f32) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let [Ok(rows), Ok(cols), Ok(scales), Ok(biases)] = [p.rows, p.cols, p.scale_len, p.bias_len].map(usize::try_from)
    else {
        return STATUS_INVALID_PARAMS;
    };
    let entries_fit = |len: usize| len == 1 || len == cols;
    if !entries_fit(scales) || !(biases == 0 || entries_fit(biases)) || cols == 0 {
        return if rows * cols == 0 { STATUS_OK } else { STATUS_INVALID_PARAMS };
    }
    let scale = core::slice::from_raw_parts(scale, scales);
    let bias = if biases == 0 { &[][..] } else { core::slice::from_raw_parts(bias, biases) };
    let words = core::slice::from_raw_parts_mut(y as *mut u32, rows * cols);
    let mut column = [0f32; 256];
    let mut offset = [0f32; 256];
    for c0 in (0..cols).step_by(column.len()) {
        let width = column.len().min(cols - c0);
        let at = |v: &[f32], c: usize| v[if v.len() == 1 { 0 } else { c0 + c }];
        for c in 0..width {
            column[c] = at(scale, c);
            offset[c] = if bias.is_empty() { 0.0 } else { at(bias, c) };
        }
        for r in 0..rows {
            let row = &mut words[r * cols + c0..][..width];
            scale_row(row, &column[..width], (!bias.is_empty()).then_some(&offset[..width]));
        }
    }
    STATUS_OK
}

/// One row's part of [`scale_product`], compiled for the widest vectors.
fn scale_row(row: &mut [u32], scale: &[f32], bias: Option<&[f32]>) {
    crate::isa::with_widest_vectors(
        #[inline(always)]
        move || match bias {
            Some(bias) => {
                for ((w, &s), &b) in row.iter_mut().zip(scale).zip(bias) {
                    *w = ((*w as i32 as f32) * s + b).to_bits();
                }
            }
            None => {
                for (w, &s) in row.iter_mut().zip(scale) {
                    *w = ((*w as i32 as f32) * s).to_bits();
                }
            }
        },
    )
}

/// Does the work of the C entry point [`crate::abi::onnxc_requantize`].
pub(crate) unsafe fn requantize(
    p: *const RequantParams,
    acc: *const i32,
    a_scale: *const u8,
    b_scale: *const u8,
    y_scale: *const u8,
    y_zp: *const u8,
    y: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let [Ok(outer), Ok(len), Ok(inner)] = [p.outer, p.len, p.inner].map(usize::try_from) else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(ys) = load_f32(y_scale, 0, p.scale_dtype) else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(range) = int_range(p.y_dtype) else {
        return STATUS_INVALID_PARAMS;
    };
    let zero = if y_zp.is_null() { 0 } else { load_int(y_zp, 0, p.y_dtype).unwrap_or(0) };
    let dt = p.scale_dtype;
    // The combined scale of row `j`, column `i`; computed once per row
    // unless B's scale is per column.
    let scale_at = |j: usize, i: usize| {
        let sa = load_f32(a_scale, if p.a_indexed != 0 { j } else { 0 }, dt).unwrap_or(0.0);
        let at = match p.b_index {
            1 => j,
            2 => i,
            _ => 0,
        };
        let sb = load_f32(b_scale, at, dt).unwrap_or(0.0);
        round_to(round_to(sa * sb, dt) / ys, dt) as f64
    };
    for o in 0..outer {
        for j in 0..len {
            let row_scale = (p.b_index != 2).then(|| scale_at(j, 0));
            let base = (o * len + j) * inner;
            // The byte rows' fast path takes finite scales only.
            if let (Some(scale), ELEM_U8 | ELEM_I8) = (row_scale.filter(|s| s.is_finite()), p.y_dtype) {
                let row = core::slice::from_raw_parts(acc.add(base), inner);
                let out = core::slice::from_raw_parts_mut(y.add(base), inner);
                requantize_byte_row(row, scale, zero as f64, range, out);
                continue;
            }
            for i in 0..inner {
                let scale = row_scale.unwrap_or_else(|| scale_at(j, i));
                let v = *acc.add(base + i) as f64 * scale + zero as f64;
                store_saturated(y, base + i, p.y_dtype, rint_in_range(v, range));
            }
        }
    }
    STATUS_OK
}

/// One row of u8 or i8 outputs (`range` the type's) with one finite
/// combined scale: `acc · scale + zero` clamped to the range, then rounded
/// half to even by [`rint_in_range`]'s addition of `1.5 · 2^52`, after
/// which the integer is the low bits of the mantissa: its low byte is the
/// u8 or the i8's two's complement. The bits of [`store_saturated`]
/// (clamping before rounding or after gives the same integer) in a loop
/// with no scalar conversion, compiled for the widest vectors.
pub(crate) fn requantize_byte_row(acc: &[i32], scale: f64, zero: f64, (lo, hi): (f64, f64), out: &mut [u8]) {
    crate::isa::with_widest_vectors(
        #[inline(always)]
        move || {
            for (o, &a) in out.iter_mut().zip(acc) {
                let v = (a as f64 * scale + zero).max(lo).min(hi);
                *o = (v + ROUNDER).to_bits() as u8;
            }
        },
    )
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{rand_bytes, unravel};
    use std::vec;
    use std::vec::Vec;

    /// The convolution of ONNX's definition: padded taps skipped (`X - x_zp`
    /// padded with 0), the per-channel weight zero point of channel `m`.
    #[allow(clippy::too_many_arguments)]
    fn direct_qconv(
        p: &ConvParams,
        [xq, wq]: [QOperand; 2],
        x: &[u8],
        w: &[u8],
        x_zp: &[u8],
        w_zp: &[u8],
        bias: Option<&[i32]>,
    ) -> Vec<i32> {
        let r = p.spatial_rank as usize;
        let dims = |f: &[i64; MAX_RANK]| f[..r].iter().map(|&v| v as usize).collect::<Vec<_>>();
        let (inp, outp, kern) = (dims(&p.in_spatial), dims(&p.out_spatial), dims(&p.kernel));
        let size = |d: &[usize]| d.iter().product::<usize>();
        let (in_size, out_size, taps) = (size(&inp), size(&outp), size(&kern));
        let (cin, cout, group) = (p.in_channels as usize, p.out_channels as usize, p.group as usize);
        let (cg, mg) = (cin / group, cout / group);
        let int = |data: &[u8], i: usize, dtype: i64| unsafe { load_int(data.as_ptr(), i, dtype).unwrap() };
        let zx = if x_zp.is_empty() { 0 } else { int(x_zp, 0, xq.dtype) };
        let mut acc = vec![0i32; p.batch as usize * cout * out_size];
        for n in 0..p.batch as usize {
            for m in 0..cout {
                let zw = if w_zp.is_empty() { 0 } else { int(w_zp, if wq.zp_indexed != 0 { m } else { 0 }, wq.dtype) };
                for out in 0..out_size {
                    let o = unravel(out, &outp);
                    let mut sum = bias.map_or(0, |b| b[m]);
                    for t in 0..taps {
                        let k = unravel(t, &kern);
                        let mut at = 0usize;
                        let inside = (0..r).all(|d| {
                            let pos = (o[d] * p.strides[d] as usize + k[d] * p.dilations[d] as usize) as i64
                                - p.pads_begin[d];
                            at = at * inp[d] + pos.max(0) as usize;
                            (0..inp[d] as i64).contains(&pos)
                        });
                        for c in (0..cg).filter(|_| inside) {
                            let xv = int(x, (n * cin + m / mg * cg + c) * in_size + at, xq.dtype) - zx;
                            let wv = int(w, (m * cg + c) * taps + t, wq.dtype) - zw;
                            sum = sum.wrapping_add(xv.wrapping_mul(wv));
                        }
                    }
                    acc[(n * cout + m) * out_size + out] = sum;
                }
            }
        }
        acc
    }

    /// (channels in, out, group, input, kernel, strides, dilations, pads
    /// begin, pads end).
    type ConvCase<'a> =
        (usize, usize, usize, &'a [usize], &'a [usize], &'a [usize], &'a [usize], &'a [usize], &'a [usize]);

    fn conv_params((cin, cout, group, input, kernel, strides, dilations, begin, end): ConvCase) -> ConvParams {
        let mut p = ConvParams {
            batch: 2,
            in_channels: cin as i64,
            out_channels: cout as i64,
            group: group as i64,
            spatial_rank: input.len() as i64,
            ..Default::default()
        };
        for d in 0..input.len() {
            let span = dilations[d] * (kernel[d] - 1) + 1;
            p.out_spatial[d] = ((input[d] + begin[d] + end[d] - span) / strides[d] + 1) as i64;
            (p.in_spatial[d], p.kernel[d], p.strides[d]) = (input[d] as i64, kernel[d] as i64, strides[d] as i64);
            (p.dilations[d], p.pads_begin[d]) = (dilations[d] as i64, begin[d] as i64);
        }
        p
    }

    #[test]
    fn qconv_matches_the_direct_loops_with_every_kernel() {
        let cases: [ConvCase; 8] = [
            (3, 4, 1, &[7, 9], &[3, 3], &[1, 1], &[1, 1], &[1, 1], &[1, 1]),
            (4, 6, 2, &[9, 8], &[3, 2], &[2, 1], &[2, 1], &[2, 0], &[1, 3]),
            (6, 6, 6, &[5, 6], &[3, 3], &[2, 2], &[1, 1], &[1, 1], &[1, 1]), // depthwise
            (5, 7, 1, &[6, 5], &[1, 1], &[1, 1], &[1, 1], &[0, 0], &[0, 0]), // pointwise
            (2, 3, 1, &[3, 3], &[3, 3], &[3, 3], &[1, 1], &[3, 3], &[3, 3]), // windows all padding
            (3, 2, 1, &[17], &[4], &[3], &[2], &[2], &[1]),
            (4, 4, 2, &[5, 4, 6], &[2, 3, 3], &[1, 2, 1], &[1, 1, 2], &[1, 1, 0], &[0, 1, 2]),
            (8, 20, 1, &[9, 11], &[3, 3], &[1, 1], &[1, 1], &[1, 1], &[1, 1]),
        ];
        let types =
            [(ELEM_U8, ELEM_I8), (ELEM_U8, ELEM_U8), (ELEM_I8, ELEM_I8), (ELEM_I8, ELEM_U8), (ELEM_U16, ELEM_I16)];
        for (seed, case) in cases.into_iter().enumerate() {
            let p = conv_params(case);
            let (cin, cout, group, input, kernel, ..) = case;
            let bytes_of = |t: i64| int_bytes(t).unwrap();
            let out_size: usize = (0..input.len()).map(|d| p.out_spatial[d] as usize).product();
            let bias: Vec<i32> =
                rand_bytes(4 * cout, 9).chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
            for (x_type, w_type) in types {
                let (ex, ew) = (bytes_of(x_type), bytes_of(w_type));
                let x = rand_bytes(2 * cin * input.iter().product::<usize>() * ex, 1 + seed as u32);
                let w = rand_bytes(cout * cin / group * kernel.iter().product::<usize>() * ew, 2 + seed as u32);
                let (x_zp, w_zp) = (rand_bytes(ex, 3), rand_bytes(cout * ew, 4));
                let mut scratch = vec![0u8; qconv_scratch_bytes(&p, x_type)];
                for (indexed, with_zp, with_bias) in [(0, true, true), (1, true, false), (0, false, false)] {
                    let ops =
                        [QOperand { dtype: x_type, zp_indexed: 0 }, QOperand { dtype: w_type, zp_indexed: indexed }];
                    let (xz, wz): (&[u8], &[u8]) = if with_zp { (&x_zp, &w_zp) } else { (&[], &[]) };
                    let bias = with_bias.then_some(&bias[..]);
                    let want = direct_qconv(&p, ops, &x, &w, xz, wz, bias);
                    for kernel in crate::generic::qproduct::tests::kernels() {
                        let mut got = vec![i32::MIN; 2 * cout * out_size];
                        let ptr = |v: &[u8]| if v.is_empty() { core::ptr::null() } else { v.as_ptr() };
                        let status = unsafe {
                            qconv_with(
                                kernel,
                                &p,
                                &ops,
                                x.as_ptr(),
                                w.as_ptr(),
                                ptr(xz),
                                ptr(wz),
                                bias.map_or(core::ptr::null(), |b| b.as_ptr()),
                                got.as_mut_ptr(),
                                scratch.as_mut_ptr(),
                            )
                        };
                        assert_eq!(status, STATUS_OK);
                        assert_eq!(
                            got,
                            want,
                            "case {seed}, {} types {x_type}/{w_type}, indexed {indexed}",
                            kernel.name()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn qconv_refuses_a_missing_scratch_and_an_indexed_input_zero_point() {
        let p = conv_params((1, 1, 1, &[4, 4], &[3, 3], &[1, 1], &[1, 1], &[1, 1], &[1, 1]));
        let ops = [QOperand { dtype: ELEM_U8, zp_indexed: 0 }, QOperand { dtype: ELEM_I8, zp_indexed: 0 }];
        let (x, w, mut acc) = ([0u8; 32], [0u8; 9], [0i32; 32]);
        let z = core::ptr::null();
        let run = |ops: &[QOperand; 2], scratch: *mut u8, acc: &mut [i32]| unsafe {
            onnxc_qconv(&p, ops, x.as_ptr(), w.as_ptr(), z, z, z as *const i32, acc.as_mut_ptr(), scratch)
        };
        assert_eq!(run(&ops, core::ptr::null_mut(), &mut acc), STATUS_INVALID_PARAMS);
        let mut scratch = vec![0u8; qconv_scratch_bytes(&p, ELEM_U8)];
        let indexed = [QOperand { zp_indexed: 1, ..ops[0] }, ops[1]];
        assert_eq!(run(&indexed, scratch.as_mut_ptr(), &mut acc), STATUS_INVALID_PARAMS);
        assert_eq!(run(&ops, scratch.as_mut_ptr(), &mut acc), STATUS_OK);
    }

    #[test]
    fn the_byte_runs_convert_as_the_element_loop_does() {
        // Ties of x / scale, both ends, NaN and infinities.
        let mut x: Vec<f32> = (-3000..3000).map(|v| v as f32 * 0.125).collect();
        x.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30, -1e30, 0.0, -0.0]);
        for (dtype, zero) in [(ELEM_U8, 0i32), (ELEM_U8, 131), (ELEM_I8, -3), (ELEM_I8, 0)] {
            let range = int_range(dtype).unwrap();
            for scale in [0.25f32, 0.1, -0.5, 3.0, 1e-20] {
                let mut got = vec![0u8; x.len()];
                quantize_byte_row(&x, scale, zero as f64, range, &mut got);
                for (&v, &g) in x.iter().zip(&got) {
                    let mut want = 0u8;
                    unsafe { store_saturated(&mut want, 0, dtype, libm::rint((v / scale) as f64) + zero as f64) };
                    assert_eq!(g, want, "x {v}, scale {scale}, type {dtype}, zero {zero}");
                }
                let mut back = vec![0f32; got.len()];
                dequantize_byte_row(&got, dtype == ELEM_I8, zero as f32, scale, &mut back);
                for (&q, &b) in got.iter().zip(&back) {
                    let q = if dtype == ELEM_I8 { q as i8 as f32 } else { q as f32 };
                    assert_eq!(b.to_bits(), ((q - zero as f32) * scale).to_bits());
                }
            }
        }
    }

    #[test]
    fn scale_product_gives_cast_mul_add_bits() {
        // Columns past the 256-entry chunk and a tail; sums beyond 2^24
        // (where the cast rounds); scale and bias per column or one.
        let (rows, cols) = (3, 300);
        let acc: Vec<i32> =
            (0..rows * cols).map(|i| (i as i32 - 450).wrapping_mul(91_231) ^ (i as i32) << 20).collect();
        let per_column: Vec<f32> = (0..cols).map(|c| 0.001 + c as f32 * 1.7e-5).collect();
        let bias: Vec<f32> = (0..cols).map(|c| c as f32 * 0.25 - 30.1).collect();
        for (scale, bias) in [(&per_column[..], &bias[..]), (&per_column[..1], &bias[..1]), (&per_column[..], &[][..])]
        {
            let at = |v: &[f32], c: usize| v[if v.len() == 1 { 0 } else { c }];
            let want: Vec<u32> = acc
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    let product = a as f32 * at(scale, i % cols);
                    if bias.is_empty() { product } else { at(bias, i % cols) + product }.to_bits()
                })
                .collect();
            let mut y: Vec<u32> = acc.iter().map(|&a| a as u32).collect();
            let p = ScaleParams {
                rows: rows as i64,
                cols: cols as i64,
                scale_len: scale.len() as i64,
                bias_len: bias.len() as i64,
            };
            let bias_ptr = if bias.is_empty() { core::ptr::null() } else { bias.as_ptr() };
            let status = unsafe { scale_product(&p, y.as_mut_ptr() as *mut u8, scale.as_ptr(), bias_ptr) };
            assert_eq!((status, y), (STATUS_OK, want), "scale {} bias {}", scale.len(), bias.len());
        }
    }

    #[test]
    fn dynamic_quantize_matches_its_definition() {
        // Ties of x / s, NaN, infinities' neighbours, signed zeros, all-positive
        // and all-negative runs, lengths around the lanes.
        let base: Vec<f32> = (0..1000).map(|v| (v as f32 - 613.0) * 0.0625).collect();
        let mut special = base.clone();
        special.extend([f32::NAN, -0.0, 0.0, 1e30, -1e-30]);
        let positive: Vec<f32> = base.iter().map(|v| v.abs() + 0.5).collect();
        let negative: Vec<f32> = positive.iter().map(|v| -v).collect();
        for x in [&base[..], &special, &positive[..37], &negative[..15], &[], &[-0.0f32, -0.0]] {
            let hi = x.iter().fold(0.0f32, |m, &v| if v > m { v } else { m });
            let lo = x.iter().fold(0.0f32, |m, &v| if v < m { v } else { m });
            let s = (if hi == lo { 1.0 } else { hi - lo }) / 255.0;
            let zero = libm::rintf((0.0 - lo / s).clamp(0.0, 255.0));
            let want: Vec<u8> = x.iter().map(|&v| (libm::rintf(v / s) + zero).clamp(0.0, 255.0) as u8).collect();
            let (mut got, mut scale, mut zp) = (vec![0u8; x.len()], 0f32, 0u8);
            let status = unsafe { dynamic_quantize(x.as_ptr(), x.len() as i64, got.as_mut_ptr(), &mut scale, &mut zp) };
            assert_eq!(
                (status, got, scale.to_bits(), zp),
                (STATUS_OK, want, s.to_bits(), zero as u8),
                "{} values",
                x.len()
            );
        }
    }

    #[test]
    fn the_byte_row_stores_what_the_element_loop_stores() {
        // Ties (scale 1/2), values past both ends, negative scales.
        let acc: Vec<i32> = (-70_000..70_000).step_by(7).chain([i32::MIN, i32::MAX, 0, 1, -1]).collect();
        for scale in [0.5, -0.5, 0.01, 1.0 / 3.0, 1e-9, 1e9, -3e7, f64::MAX] {
            for (dtype, zero) in [(ELEM_U8, 0.0), (ELEM_U8, 131.0), (ELEM_I8, -3.0), (ELEM_I8, 0.0)] {
                let range = int_range(dtype).unwrap();
                let mut got = vec![0u8; acc.len()];
                requantize_byte_row(&acc, scale, zero, range, &mut got);
                for (&a, &g) in acc.iter().zip(&got) {
                    let mut want = 0u8;
                    unsafe { store_saturated(&mut want, 0, dtype, rint_in_range(a as f64 * scale + zero, range)) };
                    assert_eq!(g, want, "acc {a}, scale {scale}, type {dtype}, zero {zero}");
                }
            }
        }
    }

    #[test]
    fn rint_in_range_stores_what_rint_stores() {
        let mut values = vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e300, 2f64.powi(53) + 2.0];
        // Every tie and its neighbours around both ends of each range.
        for t in -70_000..70_000 {
            let v = t as f64 * 0.5;
            values.extend([v, v + 1e-9, v - 1e-9, v * 1.000_000_1]);
        }
        for dtype in [ELEM_U8, ELEM_I8, ELEM_U16, ELEM_I16] {
            let range = int_range(dtype).unwrap();
            for &v in &values {
                let (mut want, mut got) = ([0u8; 2], [0u8; 2]);
                unsafe {
                    store_saturated(want.as_mut_ptr(), 0, dtype, libm::rint(v));
                    store_saturated(got.as_mut_ptr(), 0, dtype, rint_in_range(v, range));
                }
                assert_eq!(got, want, "{v} as type {dtype}");
            }
        }
    }

    #[test]
    fn quantize_rounds_half_to_even_and_saturates() {
        let x = [0.5f32, 1.5, 2.5, -300.0, 300.0];
        let scale = 1.0f32;
        let zp = 0u8;
        let p = QuantParams {
            float_dtype: ELEM_F32,
            int_dtype: ELEM_I8,
            scale_dtype: ELEM_F32,
            outer: 1,
            len: 5,
            inner: 1,
            block: 1,
            ..Default::default()
        };
        let mut y = [0i8; 5];
        let status = unsafe {
            onnxc_quantize(
                &p,
                x.as_ptr() as *const u8,
                &scale as *const f32 as *const u8,
                &zp,
                y.as_mut_ptr() as *mut u8,
            )
        };
        assert_eq!((status, y), (STATUS_OK, [0, 2, 2, -128, 127]));
    }

    #[test]
    fn qmatmul_subtracts_zero_points() {
        let a: [u8; 4] = [1, 2, 3, 4];
        let b: [u8; 4] = [5, 6, 7, 8];
        let (za, zb) = (1u8, 5u8);
        let p = QMatMulParams {
            a: QOperand { dtype: ELEM_U8, zp_indexed: 0 },
            b: QOperand { dtype: ELEM_U8, zp_indexed: 0 },
            m: 2,
            k: 2,
            n: 2,
            ..Default::default()
        };
        let mut acc = [0i32; 4];
        let status = unsafe { onnxc_qmatmul(&p, a.as_ptr(), b.as_ptr(), &za, &zb, acc.as_mut_ptr()) };
        // (A - 1) = [[0,1],[2,3]], (B - 5) = [[0,1],[2,3]].
        assert_eq!((status, acc), (STATUS_OK, [2, 3, 6, 11]));
    }
}
