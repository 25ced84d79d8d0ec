//! Portable QuantizeLinear and DequantizeLinear, for portable mode, where
//! `onnxc_quantize` and `onnxc_dequantize` are not linked: one loop over
//! the `[outer, len, inner]` view of the tensor, each element reading its
//! scale and zero point entry `o * so + (j / block) * sj + i * si` (the
//! kernels' `QuantParams`, which the operator fills either way), and the
//! kernels' element rules:
//! * quantize: `q = x / scale` in f32, rounded to the float input's type
//!   when that is 16-bit; integers store `rint(q) + zero` saturated to
//!   their range (NaN stores 0), float8/float4 store `q + zero` narrowed
//!   by Cast's rules with the node's `saturate`;
//! * dequantize: `(x - zero) * scale` in f32, rounded to the output type.
//!
//! DynamicQuantizeLinear is two loops: a fold for the range of the input
//! widened to include 0 (NaN skipped), then the u8 quantization with the
//! scale and zero point the kernel derives from it.
//!
//! Elements are addressed by index, so packed (int4/uint4/int2/uint2,
//! float4) tensors are read and written in place: a store keeps the
//! neighbours sharing its byte, and the padding of the last byte is
//! cleared first.
//!
//! The integer products (MatMulInteger, QLinearMatMul here; ConvInteger
//! and QLinearConv in [`super::window_loops`]) fold each output element's
//! `(a - za)(b - zb)` in wrapping i32, as the kernels' sums are, and
//! either store the i32 or requantize it at once by the kernel's rule
//! ([`Requantize`]), so no accumulator buffer is needed.

use super::{half_floats, minifloats, types, FloatCC, InstBuilder, Level, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::{QMatMulParams, QuantParams, RequantParams};

/// The element types of a QuantizeLinear or DequantizeLinear node.
pub struct LinearTypes {
    /// Input 0 and the output.
    pub x: DType,
    pub y: DType,
    pub scale: DType,
    /// The zero point's (the quantized side's) type, when it is given.
    pub zero_point: Option<DType>,
}

/// Lowers QuantizeLinear (`quantize`) or DequantizeLinear over `p`.
pub fn lower_linear(cx: &mut Lower, quantize: bool, p: &QuantParams, t: &LinearTypes) -> Result<(), String> {
    let (x, scale, y) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?);
    let zero_point = if cx.has_input(2) { Some(cx.input_ptr(2)?) } else { None };
    let sizes = [p.outer, p.len, p.inner].map(|n| usize::try_from(n).unwrap_or(0));
    let count = sizes.iter().product::<usize>();
    clear_padding(cx, t.y, y, count);
    let block = p.block.max(1);
    let levels = sizes.map(|n| Level::new(n, vec![]));
    cx.nest(&levels, &[], &mut |cx, index, _| {
        let (o, j, i) = (index[0], index[1], index[2]);
        let row = cx.ins().imul_imm_s(o, p.len);
        let row = cx.ins().iadd(row, j);
        let element = cx.ins().imul_imm_s(row, p.inner);
        let element = cx.ins().iadd(element, i);
        let entry = cx.ins().imul_imm_s(o, p.so);
        let block_index = cx.ins().udiv_imm_u(j, block);
        let along = cx.ins().imul_imm_s(block_index, p.sj);
        let entry = cx.ins().iadd(entry, along);
        let across = cx.ins().imul_imm_s(i, p.si);
        let entry = cx.ins().iadd(entry, across);
        let s = load(cx, t.scale, scale, entry)?;
        let zero = match (zero_point, t.zero_point) {
            (Some(zp), Some(dtype)) => Some((load(cx, dtype, zp, entry)?, dtype)),
            _ => None,
        };
        let v = load(cx, t.x, x, element)?;
        if quantize {
            let q = quantized(cx, t, v, s, zero, p.saturate)?;
            store_code(cx, t.y, y, element, q);
        } else {
            let v = if is_integer(t.x) { cx.ins().fcvt_from_sint(types::F32, v) } else { v };
            let v = match zero {
                Some((z, dtype)) => {
                    let z = if is_integer(dtype) { cx.ins().fcvt_from_sint(types::F32, z) } else { z };
                    cx.ins().fsub(v, z)
                }
                None => v,
            };
            let value = cx.ins().fmul(v, s);
            store_float(cx, t.y, y, element, value);
        }
        Ok(())
    })
}

/// QuantizeLinear's code for the f32 (or i32) input `v`, f32 scale `s`
/// and zero point `zero` (i32, or f32 for float8/float4).
fn quantized(
    cx: &mut Lower,
    t: &LinearTypes,
    v: Value,
    s: Value,
    zero: Option<(Value, DType)>,
    saturate: i64,
) -> Result<Value, String> {
    let v = if t.x == DType::I32 { cx.ins().fcvt_from_sint(types::F32, v) } else { v };
    let q = cx.ins().fdiv(v, s);
    let q = rounded_to(cx, t.x, q);
    if t.y.is_minifloat() {
        let q = match zero {
            Some((z, _)) => cx.ins().fadd(q, z),
            None => q,
        };
        return minifloats::narrow(cx.b, t.y, q, saturate);
    }
    let q = cx.ins().fpromote(types::F64, q);
    let rounded = cx.ins().nearest(q);
    let shifted = match zero {
        Some((z, _)) => {
            let z = cx.ins().fcvt_from_sint(types::F64, z);
            cx.ins().fadd(rounded, z)
        }
        None => rounded,
    };
    saturated(cx, t.y, shifted)
}

/// The f32 `v` rounded to the 16-bit float `dtype` (and widened back), as
/// the kernels' arithmetic on 16-bit floats rounds after each operation;
/// `v` itself for f32.
fn rounded_to(cx: &mut Lower, dtype: DType, v: Value) -> Value {
    if matches!(dtype, DType::F16 | DType::BF16) {
        let bits = half_floats::narrow(cx.b, dtype, v);
        half_floats::widen(cx.b, dtype, bits)
    } else {
        v
    }
}

/// The integer code of the (integral) f64 `v` saturated to `dtype`'s range.
fn saturated(cx: &mut Lower, dtype: DType, v: Value) -> Result<Value, String> {
    let (lo, hi) = range(dtype).ok_or_else(|| format!("quantizing to {dtype} is not supported"))?;
    let (lo, hi) = (cx.ins().f64const(lo), cx.ins().f64const(hi));
    // fmax/fmin carry a NaN through; the saturating conversion makes it 0.
    let clamped = cx.ins().fmax(v, lo);
    let clamped = cx.ins().fmin(clamped, hi);
    Ok(cx.ins().fcvt_to_sint_sat(types::I32, clamped))
}

fn is_integer(dtype: DType) -> bool {
    !dtype.is_float() && !dtype.is_minifloat()
}

/// The range of a quantized integer type.
fn range(dtype: DType) -> Option<(f64, f64)> {
    let bits = dtype.bits() as i32;
    match dtype {
        DType::U8 | DType::U16 | DType::U4 | DType::U2 => Some((0.0, 2f64.powi(bits) - 1.0)),
        DType::I8 | DType::I16 | DType::I4 | DType::I2 => Some((-(2f64.powi(bits - 1)), 2f64.powi(bits - 1) - 1.0)),
        _ => None,
    }
}

/// Elements per byte of a packed type and the shift from an element index
/// to its byte.
fn packing(dtype: DType) -> (i64, i64) {
    let per_byte = (8 / dtype.bits()) as i64;
    (per_byte, per_byte.trailing_zeros() as i64)
}

/// The address of element `index` of `dtype` at `base`, for whole bytes.
fn address(cx: &mut Lower, dtype: DType, base: Value, index: Value) -> Value {
    let offset = cx.ins().imul_imm_s(index, dtype.size() as i64);
    cx.ins().iadd(base, offset)
}

/// The byte holding packed element `index`, and the element's bit offset in it.
fn packed_place(cx: &mut Lower, dtype: DType, base: Value, index: Value) -> (Value, Value) {
    let (per_byte, log) = packing(dtype);
    let byte = cx.ins().ushr_imm_u(index, log);
    let at = cx.ins().iadd(base, byte);
    let slot = cx.ins().band_imm_u(index, per_byte - 1);
    let shift = cx.ins().imul_imm_s(slot, dtype.bits() as i64);
    let shift = cx.ins().ireduce(types::I32, shift);
    (at, shift)
}

/// Element `index` of `dtype` at `base`: integers as i32 (sign-extended
/// where signed), floats of every width as f32.
fn load(cx: &mut Lower, dtype: DType, base: Value, index: Value) -> Result<Value, String> {
    let flags = MemFlagsData::trusted();
    if dtype.is_packed() {
        let (at, shift) = packed_place(cx, dtype, base, index);
        let byte = cx.ins().uload8(types::I32, flags, at, 0);
        let raw = cx.ins().ushr(byte, shift);
        let bits = dtype.bits() as i64;
        let raw = cx.ins().band_imm_u(raw, (1 << bits) - 1);
        return Ok(match dtype {
            DType::F4E2M1 => minifloats::widen(cx.b, dtype, raw)?,
            DType::I4 | DType::I2 => {
                let top = cx.ins().ishl_imm_u(raw, 32 - bits);
                cx.ins().sshr_imm_u(top, 32 - bits)
            }
            _ => raw,
        });
    }
    let at = address(cx, dtype, base, index);
    Ok(match dtype {
        d if d.is_minifloat() => {
            let code = cx.ins().uload8(types::I32, flags, at, 0);
            minifloats::widen(cx.b, d, code)?
        }
        DType::F16 | DType::BF16 => {
            let bits = cx.ins().uload16(types::I32, flags, at, 0);
            half_floats::widen(cx.b, dtype, bits)
        }
        DType::F32 => cx.ins().load(types::F32, flags, at, 0),
        DType::U8 => cx.ins().uload8(types::I32, flags, at, 0),
        DType::I8 => cx.ins().sload8(types::I32, flags, at, 0),
        DType::U16 => cx.ins().uload16(types::I32, flags, at, 0),
        DType::I16 => cx.ins().sload16(types::I32, flags, at, 0),
        DType::I32 => cx.ins().load(types::I32, flags, at, 0),
        d => return Err(format!("{d} elements have no portable QuantizeLinear/DequantizeLinear")),
    })
}

/// Stores the code `bits` (an integer's or a float8/float4's, in the low
/// bits of an i32) as element `index` of `dtype` at `base`.
fn store_code(cx: &mut Lower, dtype: DType, base: Value, index: Value, bits: Value) {
    let flags = MemFlagsData::trusted();
    if dtype.is_packed() {
        let (at, shift) = packed_place(cx, dtype, base, index);
        let mask = cx.ins().iconst(types::I32, (1 << dtype.bits()) - 1);
        let mask = cx.ins().ishl(mask, shift);
        let placed = cx.ins().ishl(bits, shift);
        let placed = cx.ins().band(placed, mask);
        let old = cx.ins().uload8(types::I32, flags, at, 0);
        let kept = cx.ins().band_not(old, mask);
        let byte = cx.ins().bor(kept, placed);
        cx.ins().istore8(flags, byte, at, 0);
        return;
    }
    let at = address(cx, dtype, base, index);
    if dtype.size() == 2 {
        cx.ins().istore16(flags, bits, at, 0);
    } else {
        cx.ins().istore8(flags, bits, at, 0);
    }
}

/// Stores the f32 `value` as element `index` of the float type `dtype`
/// (f16/bf16 rounded to nearest even).
fn store_float(cx: &mut Lower, dtype: DType, base: Value, index: Value, value: Value) {
    let flags = MemFlagsData::trusted();
    let at = address(cx, dtype, base, index);
    if matches!(dtype, DType::F16 | DType::BF16) {
        let bits = half_floats::narrow(cx.b, dtype, value);
        cx.ins().istore16(flags, bits, at, 0);
    } else {
        cx.ins().store(flags, value, at, 0);
    }
}

/// Clears the last byte of a packed tensor of `count` elements when part
/// of it is padding (the element stores keep the bits they do not own).
fn clear_padding(cx: &mut Lower, dtype: DType, base: Value, count: usize) {
    if !dtype.is_packed() {
        return;
    }
    let per_byte = packing(dtype).0 as usize;
    if !count.is_multiple_of(per_byte) {
        let zero = cx.ins().iconst(types::I8, 0);
        cx.ins().store(MemFlagsData::trusted(), zero, base, (count / per_byte) as i32);
    }
}

/// Lowers DynamicQuantizeLinear of `count` f32 elements: `y` (u8), the
/// scale `(hi - lo) / 255` (1 / 255 for an all-zero range) and the zero
/// point `rint(clamp(-lo / scale, 0, 255))`.
pub fn lower_dynamic_quantize(cx: &mut Lower, count: usize) -> Result<(), String> {
    let flags = MemFlagsData::trusted();
    let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
    let (scale_out, zero_out) = (cx.output_ptr(1)?, cx.output_ptr(2)?);
    let every = [Level::new(count, vec![4, 1])];
    let zero = cx.ins().f32const(0.0);
    let range = cx.fold_nest(&every, &[x], &[zero, zero], &mut |cx, _, at, acc| {
        let v = cx.ins().load(types::F32, flags, at[0], 0);
        let below = cx.ins().fcmp(FloatCC::LessThan, v, acc[0]);
        let above = cx.ins().fcmp(FloatCC::GreaterThan, v, acc[1]);
        Ok(vec![cx.ins().select(below, v, acc[0]), cx.ins().select(above, v, acc[1])])
    })?;
    let (lo, hi) = (range[0], range[1]);
    let width = cx.ins().fsub(hi, lo);
    let flat = cx.ins().fcmp(FloatCC::Equal, hi, lo);
    let one = cx.ins().f32const(1.0);
    let width = cx.ins().select(flat, one, width);
    let top = cx.ins().f32const(255.0);
    let scale = cx.ins().fdiv(width, top);
    let shift = cx.ins().fdiv(lo, scale);
    let shift = cx.ins().fsub(zero, shift);
    let shift = clamp_to_byte(cx, shift);
    let zero_point = cx.ins().nearest(shift);
    cx.ins().store(flags, scale, scale_out, 0);
    let code = cx.ins().fcvt_to_uint_sat(types::I32, zero_point);
    cx.ins().istore8(flags, code, zero_out, 0);
    cx.nest(&every, &[x, y], &mut |cx, _, at| {
        let v = cx.ins().load(types::F32, flags, at[0], 0);
        let q = cx.ins().fdiv(v, scale);
        let rounded = cx.ins().nearest(q);
        let shifted = cx.ins().fadd(rounded, zero_point);
        let clamped = clamp_to_byte(cx, shifted);
        let code = cx.ins().fcvt_to_uint_sat(types::I32, clamped);
        cx.ins().istore8(flags, code, at[1], 0);
        Ok(())
    })
}

/// The f32 `v` clamped to `[0, 255]` (NaN stays NaN, which the saturating
/// conversion after makes 0).
fn clamp_to_byte(cx: &mut Lower, v: Value) -> Value {
    let (lo, hi) = (cx.ins().f32const(0.0), cx.ins().f32const(255.0));
    let v = cx.ins().fmax(v, lo);
    cx.ins().fmin(v, hi)
}

/// One operand of an integer product: its elements (u8, i8, u16 or i16)
/// and its zero point, per tensor or (`zero_indexed`) one per row of A,
/// column of B or output channel of W.
pub struct IntOperand {
    pub data: Value,
    pub dtype: DType,
    pub zero: Option<Value>,
    pub zero_indexed: bool,
}

impl IntOperand {
    /// The zero point of row, column or channel `entry` (pointer-sized).
    pub fn zero_at(&self, cx: &mut Lower, entry: Value) -> Result<Option<Value>, String> {
        let Some(zp) = self.zero else { return Ok(None) };
        let entry = if self.zero_indexed { entry } else { cx.iconst(0) };
        load(cx, self.dtype, zp, entry).map(Some)
    }

    /// The element at `at` minus `zero`, as i32.
    pub fn centred(&self, cx: &mut Lower, at: Value, zero: Option<Value>) -> Result<Value, String> {
        let first = cx.iconst(0);
        let v = load(cx, self.dtype, at, first)?;
        Ok(match zero {
            Some(z) => cx.ins().isub(v, z),
            None => v,
        })
    }
}

/// The QLinear forms' requantization of an i32 sum, the kernel's: the
/// combined scale `a_scale · b_scale / y_scale` in the scales' type (f32,
/// or rounded to f16/bf16 after each operation), then `sum · scale +
/// y_zero` in f64, rounded half to even and saturated to the output type.
pub struct Requantize {
    /// Which scale entries a sum reads (`a_indexed`, `b_index`).
    pub rule: RequantParams,
    pub scale_dtype: DType,
    pub y_dtype: DType,
    /// `[a_scale, b_scale, y_scale]`.
    pub scales: [Value; 3],
    pub y_zero: Option<Value>,
}

/// Where an integer product's sums go.
pub enum Sums<'r> {
    /// The i32 output itself (MatMulInteger, ConvInteger).
    Int32,
    Requantized(&'r Requantize),
}

impl Sums<'_> {
    /// Bytes per output element.
    pub fn bytes(&self) -> i64 {
        match self {
            Sums::Int32 => 4,
            Sums::Requantized(r) => r.y_dtype.size() as i64,
        }
    }

    /// Stores the sum of output row (or channel) `row`, column `col` at `at`.
    pub fn store(&self, cx: &mut Lower, sum: Value, [row, col]: [Value; 2], at: Value) -> Result<(), String> {
        let Sums::Requantized(r) = self else {
            cx.ins().store(MemFlagsData::trusted(), sum, at, 0);
            return Ok(());
        };
        let first = cx.iconst(0);
        let a_entry = if r.rule.a_indexed != 0 { row } else { first };
        let b_entry = match r.rule.b_index {
            1 => row,
            2 => col,
            _ => first,
        };
        let [a_scale, b_scale, y_scale] = r.scales;
        let sa = load(cx, r.scale_dtype, a_scale, a_entry)?;
        let sb = load(cx, r.scale_dtype, b_scale, b_entry)?;
        let ys = load(cx, r.scale_dtype, y_scale, first)?;
        let scale = cx.ins().fmul(sa, sb);
        let scale = rounded_to(cx, r.scale_dtype, scale);
        let scale = cx.ins().fdiv(scale, ys);
        let scale = rounded_to(cx, r.scale_dtype, scale);
        let scale = cx.ins().fpromote(types::F64, scale);
        let v = cx.ins().fcvt_from_sint(types::F64, sum);
        let v = cx.ins().fmul(v, scale);
        let v = match r.y_zero {
            Some(zp) => {
                let z = load(cx, r.y_dtype, zp, first)?;
                let z = cx.ins().fcvt_from_sint(types::F64, z);
                cx.ins().fadd(v, z)
            }
            None => v,
        };
        let v = cx.ins().nearest(v);
        let code = saturated(cx, r.y_dtype, v)?;
        store_code(cx, r.y_dtype, at, first, code);
        Ok(())
    }
}

/// MatMulInteger / QLinearMatMul: the batched `[m, k] x [k, n]` products
/// `q` describes (A's zero point per row, B's per column), each sum stored
/// by `sums` into `y` (contiguous).
pub fn integer_matmul(
    cx: &mut Lower,
    q: &QMatMulParams,
    [a, b]: [&IntOperand; 2],
    sums: &Sums,
    y: Value,
) -> Result<(), String> {
    let rank = q.batch_rank.max(0) as usize;
    let batch = &q.batch_dims[..rank];
    let count = batch.iter().product::<i64>() * q.m * q.n;
    if count == 0 {
        return Ok(());
    }
    let (ea, eb, ey) = (a.dtype.size() as i64, b.dtype.size() as i64, sums.bytes());
    let mut y_stride = count * ey;
    let mut levels: Vec<Level> = (0..rank)
        .map(|d| {
            y_stride /= batch[d];
            Level::new(batch[d] as usize, vec![q.a_strides[d] * ea, q.b_strides[d] * eb, y_stride])
        })
        .collect();
    levels.push(Level::new(q.m as usize, vec![q.k * ea, 0, q.n * ey]));
    levels.push(Level::new(q.n as usize, vec![0, eb, ey]));
    let depth = [Level::new(q.k as usize, vec![ea, q.n * eb])];
    cx.nest(&levels, &[a.data, b.data, y], &mut |cx, index, at| {
        let (row, col) = (index[rank], index[rank + 1]);
        let (za, zb) = (a.zero_at(cx, row)?, b.zero_at(cx, col)?);
        let init = cx.ins().iconst(types::I32, 0);
        let sum = cx.fold_nest(&depth, &at[..2], &[init], &mut |cx, _, p, acc| {
            let (x, w) = (a.centred(cx, p[0], za)?, b.centred(cx, p[1], zb)?);
            let product = cx.ins().imul(x, w);
            Ok(vec![cx.ins().iadd(acc[0], product)])
        })?[0];
        sums.store(cx, sum, [row, col], at[2])
    })
}
