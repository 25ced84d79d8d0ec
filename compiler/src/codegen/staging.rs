//! f16/bf16 through f32 kernels, and packed sub-byte tensors through wide
//! ones.
//!
//! Most kernels exist for f32 only, and the spec lets every float operator
//! compute f16/bf16 in f32. For an operator that opts in
//! ([`crate::ops::Operator::stages_halves`]) each f16/bf16 input is widened into
//! an f32 copy in the node's scratch, the operator's own lowering runs on
//! those copies (it sees f32 tensors: [`Lower::stage_input`]), and each
//! f16/bf16 output is computed into an f32 copy and then rounded to nearest
//! even into the real output. One pass over each tensor and four bytes of
//! scratch per element buy every f32 kernel for the 16-bit types; tensors of
//! other types are untouched, so mixed signatures (BatchNormalization's f16
//! input with f32 statistics) work too.
//!
//! Packed types (int4/uint4/int2/uint2, float4e2m1: two or four elements a
//! byte) cannot be addressed element by element at all, so an operator that
//! takes them ([`crate::ops::Operator::stages_packed`]) gets the same treatment:
//! the integers unpack into i32 copies (sign-extended for the signed ones)
//! and float4 into f32, and its outputs are packed back after — integers
//! keep their low bits (Cast's wrap-around), float4 rounds to nearest even
//! and saturates (`onnxc_unpack`, `onnxc_pack`). Operators whose code
//! addresses packed bytes itself say
//! [`crate::ops::Operator::reads_packed`] (Identity, the reshaping views,
//! Shape, Size, Quantize/DequantizeLinear); `Op::infer` rejects packed
//! tensors for every other operator.
//!
//! In portable mode f16/bf16 convert by [`half_floats`]' instruction
//! sequences instead of the kernels, and packed tensors a byte at a time
//! in a loop (float4 by [`minifloats`]), with the kernels' rules.
//!
//! f64 needs no staging: it has kernels of its own (`codegen::kernels::by_dtype`
//! picks the `_f32` or `_f64` form). Nor does float8: elementwise code
//! widens each loaded bit pattern to f32 and narrows it on store (Cast's
//! `saturate` and `round_mode`).

use crate::codegen::kernels::{self, Kernel, Ptr, I32, I64};
use crate::codegen::{half_floats, minifloats, types, InstBuilder, Level, Lower, MemFlagsData, Value};
use crate::ir::DType;
use crate::ops::{InferCx, Operator};
use onnxc_runtime::MINIFLOAT_SATURATE;

/// The type `dtype` is staged as for `op`, when it is staged.
fn staged_type(op: &dyn Operator, dtype: DType) -> Option<DType> {
    match dtype {
        DType::F16 | DType::BF16 if op.stages_halves() => Some(DType::F32),
        DType::F4E2M1 if op.stages_packed() => Some(DType::F32),
        d if d.is_packed() && op.stages_packed() => Some(DType::I32),
        _ => None,
    }
}

/// The kernels that widen a staged `dtype` into its copy and narrow it back.
fn conversion_kernels(dtype: DType) -> (Conversion, Conversion) {
    if dtype.is_packed() {
        (kernels::onnxc_unpack, kernels::onnxc_pack)
    } else {
        (kernels::onnxc_widen_f32, kernels::onnxc_narrow_f32)
    }
}

/// A kernel converting `count` elements of type `elem` between a tensor and
/// its staged copy: `(elem, src, dst, count) -> status`.
type Conversion = Kernel<(I64, Ptr, Ptr, I64), I32>;

/// Scratch bytes of one staged tensor (four per element), rounded so the
/// next one (and the operator's own scratch after them) stays 64-byte
/// aligned.
fn area(shape: &[usize]) -> usize {
    (4 * shape.iter().product::<usize>()).next_multiple_of(64)
}

/// True when `op` stages anything at all.
pub fn stages(op: &dyn Operator) -> bool {
    op.stages_halves() || op.stages_packed()
}

/// Scratch bytes the staged copies of `op`'s tensors take.
pub fn scratch_bytes(op: &dyn Operator, cx: &InferCx) -> usize {
    let staged = |dtype: DType| staged_type(op, dtype).is_some();
    let inputs: usize = cx.inputs.iter().flatten().filter(|i| staged(i.dtype)).map(|i| area(i.shape)).sum();
    let outputs: usize =
        op.infer(cx).map(|outs| outs.iter().filter(|o| staged(o.dtype)).map(|o| area(&o.shape)).sum()).unwrap_or(0);
    inputs + outputs
}

/// Lowers `op` with its staged tensors replaced by their wide copies.
pub fn lower(op: &dyn Operator, cx: &mut Lower) -> Result<(), String> {
    let inputs: Vec<usize> = (0..cx.input_count()).filter(|&i| cx.has_input(i)).collect();
    for i in inputs {
        let (dtype, shape) = cx.input_type(i)?;
        if let Some(wide) = staged_type(op, dtype) {
            let copy = cx.reserve_scratch(area(&shape))?;
            let src = cx.input_ptr(i)?;
            convert(cx, Direction::Widen, dtype, src, copy, &shape)?;
            cx.stage_input(i, copy, wide);
        }
    }
    let mut narrow = Vec::new();
    // Data-dependent outputs are allocated by the operator itself, which
    // only makes them for f32/f64 data.
    let outputs: Vec<usize> =
        (0..cx.output_count()).filter(|&k| cx.has_output(k) && !cx.output_is_dynamic(k)).collect();
    for k in outputs {
        let (dtype, shape) = cx.output_type(k)?;
        if let Some(wide) = staged_type(op, dtype) {
            let copy = cx.reserve_scratch(area(&shape))?;
            let dst = cx.output_ptr(k)?;
            cx.stage_output(k, copy, wide);
            narrow.push((dtype, copy, dst, shape));
        }
    }
    op.lower(cx)?;
    cx.unstage();
    for (dtype, copy, dst, shape) in narrow {
        convert(cx, Direction::Narrow, dtype, copy, dst, &shape)?;
    }
    Ok(())
}

/// Which way a staged tensor is converted.
#[derive(Clone, Copy, PartialEq)]
enum Direction {
    /// Into the wide copy.
    Widen,
    /// Back from the wide copy.
    Narrow,
}

/// Converts a staged tensor: by a buffer conversion kernel
/// (`onnxc_{widen,narrow}_f32`, `onnxc_{unpack,pack}`), or in portable mode
/// by loops of instructions.
fn convert(
    cx: &mut Lower,
    direction: Direction,
    dtype: DType,
    src: Value,
    dst: Value,
    shape: &[usize],
) -> Result<(), String> {
    let count = shape.iter().product::<usize>();
    if cx.portable() && matches!(dtype, DType::F16 | DType::BF16) {
        return convert_halves(cx, direction, dtype, src, dst, count);
    }
    if cx.portable() && dtype.is_packed() {
        return convert_packed(cx, direction, dtype, src, dst, count);
    }
    let (widen, narrow) = conversion_kernels(dtype);
    let kernel = if direction == Direction::Widen { widen } else { narrow };
    let elem = I64(cx.ins().iconst(types::I64, dtype.onnx_code() as i64));
    let count = I64(cx.ins().iconst(types::I64, count as i64));
    cx.call_checked(kernel, (elem, Ptr(src), Ptr(dst), count))
}

/// `count` f16/bf16 elements to f32 or back, one at a time.
fn convert_halves(
    cx: &mut Lower,
    direction: Direction,
    dtype: DType,
    src: Value,
    dst: Value,
    count: usize,
) -> Result<(), String> {
    let steps = if direction == Direction::Widen { vec![2, 4] } else { vec![4, 2] };
    let flags = MemFlagsData::trusted();
    cx.nest(&[Level::new(count, steps)], &[src, dst], &mut |cx, _, at| {
        if direction == Direction::Widen {
            let h = cx.ins().uload16(types::I32, flags, at[0], 0);
            let x = half_floats::widen(cx.b, dtype, h);
            cx.ins().store(flags, x, at[1], 0);
        } else {
            let x = cx.ins().load(types::F32, flags, at[0], 0);
            let h = half_floats::narrow(cx.b, dtype, x);
            cx.ins().istore16(flags, h, at[1], 0);
        }
        Ok(())
    })
}

/// `count` packed elements to their i32 (f32 for float4) copies or back, a
/// byte of two or four elements at a time, then the last, partly filled
/// byte (its padding zero).
fn convert_packed(
    cx: &mut Lower,
    direction: Direction,
    dtype: DType,
    src: Value,
    dst: Value,
    count: usize,
) -> Result<(), String> {
    let per_byte = 8 / dtype.bits();
    let (packed, wide) = if direction == Direction::Widen { (src, dst) } else { (dst, src) };
    let full = count / per_byte;
    let wide_step = (4 * per_byte) as i64;
    cx.nest(&[Level::new(full, vec![1, wide_step])], &[packed, wide], &mut |cx, _, at| {
        convert_byte(cx, direction, dtype, at[0], at[1], per_byte)
    })?;
    let rest = count % per_byte;
    if rest > 0 {
        let last = cx.ins().iadd_imm_s(packed, full as i64);
        let last_wide = cx.ins().iadd_imm_s(wide, full as i64 * wide_step);
        convert_byte(cx, direction, dtype, last, last_wide, rest)?;
    }
    Ok(())
}

/// The first `n` elements of the packed byte at `byte` to or from the
/// four-byte elements at `wide`: signed integers sign-extend, float4
/// widens exactly and narrows saturating, the others keep their low bits
/// (as `onnxc_unpack` and `onnxc_pack` do).
fn convert_byte(
    cx: &mut Lower,
    direction: Direction,
    dtype: DType,
    byte: Value,
    wide: Value,
    n: usize,
) -> Result<(), String> {
    let flags = MemFlagsData::trusted();
    let bits = dtype.bits() as i64;
    let mask = (1 << bits) - 1;
    if direction == Direction::Widen {
        let packed = cx.ins().uload8(types::I32, flags, byte, 0);
        for j in 0..n as i64 {
            let raw = cx.ins().ushr_imm_u(packed, j * bits);
            let raw = cx.ins().band_imm_u(raw, mask);
            let element = match dtype {
                DType::F4E2M1 => minifloats::widen(cx.b, dtype, raw)?,
                DType::I4 | DType::I2 => {
                    let top = cx.ins().ishl_imm_u(raw, 32 - bits);
                    cx.ins().sshr_imm_u(top, 32 - bits)
                }
                _ => raw,
            };
            cx.ins().store(flags, element, wide, (4 * j) as i32);
        }
    } else {
        let mut packed = cx.ins().iconst(types::I32, 0);
        for j in 0..n as i64 {
            let element = if dtype == DType::F4E2M1 {
                let x = cx.ins().load(types::F32, flags, wide, (4 * j) as i32);
                minifloats::narrow(cx.b, dtype, x, MINIFLOAT_SATURATE)?
            } else {
                cx.ins().load(types::I32, flags, wide, (4 * j) as i32)
            };
            let low = cx.ins().band_imm_u(element, mask);
            let placed = cx.ins().ishl_imm_u(low, j * bits);
            packed = cx.ins().bor(packed, placed);
        }
        cx.ins().istore8(flags, packed, byte, 0);
    }
    Ok(())
}
