//! f16 and bf16 through f32 kernels.
//!
//! Most kernels exist for f32 only, and the spec lets every float operator
//! compute f16/bf16 in f32. For an operator that opts in
//! ([`super::Operator::stages_halves`]) each f16/bf16 input is widened into
//! an f32 copy in the node's scratch, the operator's own lowering runs on
//! those copies (it sees f32 tensors: [`Lower::stage_input`]), and each
//! f16/bf16 output is computed into an f32 copy and then rounded to nearest
//! even into the real output. One pass over each tensor and four bytes of
//! scratch per element buy every f32 kernel for the 16-bit types; tensors of
//! other types are untouched, so mixed signatures (BatchNormalization's f16
//! input with f32 statistics) work too.

use super::{InferCx, Operator};
use crate::codegen::{types, InstBuilder, Lower, Value};
use crate::ir::DType;

fn is_half(dtype: DType) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
}

/// Scratch bytes of one staged tensor, rounded so the next one (and the
/// operator's own scratch after them) stays 64-byte aligned.
fn area(shape: &[usize]) -> usize {
    (4 * shape.iter().product::<usize>()).next_multiple_of(64)
}

/// Scratch bytes the staged copies of `op`'s f16/bf16 tensors take.
pub fn scratch_bytes(op: &dyn Operator, cx: &InferCx) -> usize {
    let inputs: usize = cx.inputs.iter().flatten().filter(|i| is_half(i.dtype)).map(|i| area(i.shape)).sum();
    let outputs: usize =
        op.infer(cx).map(|outs| outs.iter().filter(|o| is_half(o.dtype)).map(|o| area(&o.shape)).sum()).unwrap_or(0);
    inputs + outputs
}

/// Lowers `op` with its f16/bf16 tensors staged as f32.
pub fn lower(op: &dyn Operator, cx: &mut Lower) -> Result<(), String> {
    let inputs: Vec<usize> = (0..cx.input_count()).filter(|&i| cx.has_input(i)).collect();
    for i in inputs {
        let (dtype, shape) = cx.input_type(i)?;
        if is_half(dtype) {
            let copy = cx.reserve_scratch(area(&shape))?;
            let src = cx.input_ptr(i)?;
            convert(cx, "onnxc_widen_f32", dtype, src, copy, &shape)?;
            cx.stage_input(i, copy);
        }
    }
    let mut narrow = Vec::new();
    // Data-dependent outputs are allocated by the operator itself, which
    // only makes them for f32/f64 data.
    let outputs: Vec<usize> =
        (0..cx.output_count()).filter(|&k| cx.has_output(k) && !cx.output_is_dynamic(k)).collect();
    for k in outputs {
        let (dtype, shape) = cx.output_type(k)?;
        if is_half(dtype) {
            let copy = cx.reserve_scratch(area(&shape))?;
            let dst = cx.output_ptr(k)?;
            cx.stage_output(k, copy);
            narrow.push((dtype, copy, dst, shape));
        }
    }
    op.lower(cx)?;
    cx.unstage();
    for (dtype, copy, dst, shape) in narrow {
        convert(cx, "onnxc_narrow_f32", dtype, copy, dst, &shape)?;
    }
    Ok(())
}

/// Calls a buffer conversion kernel (`onnxc_{widen,narrow}_f32`).
fn convert(cx: &mut Lower, kernel: &str, dtype: DType, src: Value, dst: Value, shape: &[usize]) -> Result<(), String> {
    let elem = cx.ins().iconst(types::I64, dtype.onnx_code() as i64);
    let count = cx.ins().iconst(types::I64, shape.iter().product::<usize>() as i64);
    cx.call_checked(kernel, &[elem, src, dst, count])
}
