//! Portable CumSum and CumProd: one fold per `(outer, inner)` position
//! along the axis, over the same [`CumulativeParams`] `onnxc_cumulative`
//! takes, for portable mode.
//!
//! As the kernel: the running value starts at 0 (or 1), each step stores
//! it after (inclusive) or before (`exclusive`) taking in the element, and
//! `reverse` walks the axis from its end (the pointers start at the last
//! element and step back). Integers wrap; floats compute in their own type
//! (f32, f64; 16-bit floats have no portable lowering).

use super::nest::Level;
use super::{clif_type, InstBuilder, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::abi::indexing::CumulativeParams;

/// CumSum (or CumProd) of `x` into `y` as `p` says.
pub fn cumulative(cx: &mut Lower, p: &CumulativeParams, x: Value, y: Value) -> Result<(), String> {
    let dtype = match i32::try_from(p.dtype).ok().and_then(DType::from_onnx) {
        Some(d) if d.is_int() || matches!(d, DType::F32 | DType::F64) => d,
        other => return Err(format!("a cumulative sum or product of {other:?} has no portable lowering")),
    };
    if p.outer * p.len * p.inner == 0 {
        return Ok(());
    }
    let (ty, eb) = (clif_type(dtype), p.elem_bytes);
    let flags = MemFlagsData::trusted();
    let axis_step = p.inner * eb;
    let levels = [Level::new(p.outer as usize, vec![p.len * axis_step; 2]), Level::new(p.inner as usize, vec![eb; 2])];
    let (first, step) = if p.reverse != 0 { ((p.len - 1) * axis_step, -axis_step) } else { (0, axis_step) };
    let along = [Level::new(p.len as usize, vec![step; 2])];
    let start = if p.product != 0 { 1 } else { 0 };
    cx.nest(&levels, &[x, y], &mut |cx, _, base| {
        let ptrs = [cx.ins().iadd_imm_s(base[0], first), cx.ins().iadd_imm_s(base[1], first)];
        let init = match dtype {
            DType::F32 => cx.ins().f32const(start as f32),
            DType::F64 => cx.ins().f64const(start as f64),
            _ => cx.ins().iconst(ty, start),
        };
        cx.fold_nest(&along, &ptrs, &[init], &mut |cx, _, at, acc| {
            let v = cx.ins().load(ty, flags, at[0], 0);
            let next = match (dtype.is_float(), p.product != 0) {
                (true, true) => cx.ins().fmul(acc[0], v),
                (true, false) => cx.ins().fadd(acc[0], v),
                (false, true) => cx.ins().imul(acc[0], v),
                (false, false) => cx.ins().iadd(acc[0], v),
            };
            let stored = if p.exclusive != 0 { acc[0] } else { next };
            cx.ins().store(flags, stored, at[1], 0);
            Ok(vec![next])
        })?;
        Ok(())
    })
}
