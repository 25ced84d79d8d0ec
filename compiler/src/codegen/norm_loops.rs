//! Portable statistics normalisations (InstanceNormalization,
//! LayerNormalization, GroupNormalization, RMSNormalization,
//! MeanVarianceNormalization, LpNormalization): loop nests over the same
//! [`NormParams`] `onnxc_normalize` takes, for portable mode.
//!
//! The nest runs the kept dims outside (one statistics group per index)
//! and the reduced dims inside, each pointer stepping by its own stride,
//! so any axis set and any broadcast of scale and bias are one walk. Per
//! group, as the kernel does, in f64: a fold for the sum (of `x`, or of
//! `|x|` / `x^2` for the modes without a mean), for the modes with a mean
//! a second fold for the squared deviations, then one pass writing
//! `(x - shift) factor scale + bias`, and the group's shift and factor to
//! the optional Mean / InvStdDev outputs. Elements are f32 or f64 (the
//! kernel's f16/bf16 inputs have no portable lowering).
//!
//! LRN ([`lrn`]) is a nest of its own over `[N, C, spatial]`: per element
//! a fold over the `size` channels of its window (a channel outside
//! `[0, C)` reads the element itself and is not added, so no address
//! leaves the input), then `x / (bias + alpha/size sum)^beta` through
//! [`super::portable_math`]'s pow, in the tensors' type as the kernel.
//!
//! BatchNormalization in training mode ([`batchnorm_training`]) is
//! `onnxc_batchnorm_*`'s per-channel walk: the batch's mean and population
//! variance summed in f64, the running statistics blended in f64, then one
//! scale and shift per channel in the tensors' type.

use super::nest::Level;
use super::{clif_type, portable_math, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::abi::norm::BatchNormParams;
use onnxc_runtime::{LrnParams, NormParams, NORM_L1, NORM_MVN, NORM_RMS, NORM_STANDARD};

/// The tensors of one normalisation (the optional ones `None` when absent).
pub struct NormTensors {
    pub x: Value,
    pub y: Value,
    pub scale: Option<Value>,
    pub bias: Option<Value>,
    pub mean_out: Option<Value>,
    pub inv_out: Option<Value>,
}

/// The element type behind an `ELEM_*` code, if portable code handles it.
fn element(code: i64, what: &str) -> Result<DType, String> {
    match i32::try_from(code).ok().and_then(DType::from_onnx) {
        Some(d @ (DType::F32 | DType::F64)) => Ok(d),
        other => Err(format!("{what} of type {other:?} has no portable lowering (f32 and f64 do)")),
    }
}

/// The positions of the pointers the nest walks.
const X: usize = 0;
const Y: usize = 1;
const SCALE: usize = 2;
const BIAS: usize = 3;
const MEAN: usize = 4;
const INV: usize = 5;

/// Loads the element of `dtype` at `at` as f64.
fn load_wide(cx: &mut Lower, dtype: DType, at: Value) -> Value {
    let v = cx.ins().load(clif_type(dtype), MemFlagsData::trusted(), at, 0);
    if dtype == DType::F64 {
        v
    } else {
        cx.ins().fpromote(types::F64, v)
    }
}

/// Stores the f64 `v` at `at` as `dtype`.
fn store_narrow(cx: &mut Lower, dtype: DType, v: Value, at: Value) {
    let v = if dtype == DType::F64 { v } else { cx.ins().fdemote(types::F32, v) };
    cx.ins().store(MemFlagsData::trusted(), v, at, 0);
}

/// The statistics of one group from its pointers `base`: `(shift, factor)`.
fn statistics(
    cx: &mut Lower,
    p: &NormParams,
    x_type: DType,
    reduced: &[Level],
    base: &[Value],
) -> Result<[Value; 2], String> {
    let with_mean = matches!(p.mode, NORM_STANDARD | NORM_MVN);
    let count: i64 = reduced.iter().map(|l| l.count as i64).product();
    let count = cx.ins().f64const(count as f64);
    let zero = cx.ins().f64const(0.0);
    let sum = cx.fold_nest(reduced, base, &[zero], &mut |cx, _, at, acc| {
        let v = load_wide(cx, x_type, at[X]);
        let term = match p.mode {
            _ if with_mean => v,
            NORM_L1 => cx.ins().fabs(v),
            _ => cx.ins().fmul(v, v),
        };
        Ok(vec![cx.ins().fadd(acc[0], term)])
    })?[0];
    let one = cx.ins().f64const(1.0);
    let epsilon = cx.ins().f64const(p.epsilon);
    if with_mean {
        let mean = cx.ins().fdiv(sum, count);
        let squares = cx.fold_nest(reduced, base, &[zero], &mut |cx, _, at, acc| {
            let v = load_wide(cx, x_type, at[X]);
            let d = cx.ins().fsub(v, mean);
            let dd = cx.ins().fmul(d, d);
            Ok(vec![cx.ins().fadd(acc[0], dd)])
        })?[0];
        let var = cx.ins().fdiv(squares, count);
        let deviation = if p.mode == NORM_MVN {
            let root = cx.ins().sqrt(var);
            cx.ins().fadd(root, epsilon)
        } else {
            let shifted = cx.ins().fadd(var, epsilon);
            cx.ins().sqrt(shifted)
        };
        return Ok([mean, cx.ins().fdiv(one, deviation)]);
    }
    let norm = match p.mode {
        NORM_RMS => {
            let mean_square = cx.ins().fdiv(sum, count);
            let shifted = cx.ins().fadd(mean_square, epsilon);
            cx.ins().sqrt(shifted)
        }
        NORM_L1 => sum,
        _ => cx.ins().sqrt(sum),
    };
    let factor = cx.ins().fdiv(one, norm);
    if p.mode == NORM_RMS {
        return Ok([zero, factor]);
    }
    // A zero L1 or L2 norm gives 0, not infinity.
    let is_zero = cx.ins().fcmp(FloatCC::Equal, norm, zero);
    Ok([zero, cx.ins().select(is_zero, zero, factor)])
}

/// Normalises `t.x` into `t.y` as `p` says (see the module doc).
pub fn normalize(cx: &mut Lower, p: &NormParams, t: &NormTensors) -> Result<(), String> {
    let rank = p.rank as usize;
    let x_type = element(p.x_elem, "input 0")?;
    let scale_type = element(p.scale_elem, "the scale")?;
    let bias_type = element(p.bias_elem, "the bias")?;
    let stat_type = element(p.stat_elem, "the statistics")?;
    if p.dims[..rank].contains(&0) {
        return Ok(());
    }
    let present = |v: Option<Value>| v.is_some() as i64;
    let sizes = [
        x_type.size() as i64,
        x_type.size() as i64,
        scale_type.size() as i64 * present(t.scale),
        bias_type.size() as i64 * present(t.bias),
        stat_type.size() as i64 * present(t.mean_out),
        stat_type.size() as i64 * present(t.inv_out),
    ];
    let (mut kept, mut reduced) = (Vec::new(), Vec::new());
    let mut x_stride = 1;
    for d in (0..rank).rev() {
        let strides = [x_stride, x_stride, p.scale_strides[d], p.bias_strides[d], p.stat_strides[d], p.stat_strides[d]];
        let steps = strides.iter().zip(sizes).map(|(s, size)| s * size).collect();
        let level = Level::new(p.dims[d] as usize, steps);
        if p.stat_strides[d] == 0 {
            reduced.insert(0, level)
        } else {
            kept.insert(0, level)
        }
        x_stride *= p.dims[d];
    }
    let null = cx.iconst(0);
    let ptrs = [
        t.x,
        t.y,
        t.scale.unwrap_or(null),
        t.bias.unwrap_or(null),
        t.mean_out.unwrap_or(null),
        t.inv_out.unwrap_or(null),
    ];
    cx.nest(&kept, &ptrs, &mut |cx, _, base| {
        let [shift, factor] = statistics(cx, p, x_type, &reduced, base)?;
        cx.nest(&reduced, base, &mut |cx, _, at| {
            let v = load_wide(cx, x_type, at[X]);
            let centred = cx.ins().fsub(v, shift);
            let mut y = cx.ins().fmul(centred, factor);
            if t.scale.is_some() {
                let s = load_wide(cx, scale_type, at[SCALE]);
                y = cx.ins().fmul(y, s);
            }
            if t.bias.is_some() {
                let b = load_wide(cx, bias_type, at[BIAS]);
                y = cx.ins().fadd(y, b);
            }
            store_narrow(cx, x_type, y, at[Y]);
            Ok(())
        })?;
        if t.mean_out.is_some() {
            store_narrow(cx, stat_type, shift, base[MEAN]);
        }
        if t.inv_out.is_some() {
            store_narrow(cx, stat_type, factor, base[INV]);
        }
        Ok(())
    })
}

/// LRN of `x` into `y` (f32 or f64) as `p` says (see the module doc).
pub fn lrn(cx: &mut Lower, p: &LrnParams, dtype: DType, x: Value, y: Value) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("LRN of {dtype} has no portable lowering (f32 and f64 do)"));
    }
    let (ty, size) = (clif_type(dtype), dtype.size() as i64);
    let flags = MemFlagsData::trusted();
    let plane = p.spatial * size;
    let levels = [
        Level::new(p.batch as usize, vec![p.channels * plane; 2]),
        Level::new(p.channels as usize, vec![plane; 2]),
        Level::new(p.spatial as usize, vec![size; 2]),
    ];
    let before = (p.size - 1) / 2;
    let window = [Level::new(p.size as usize, vec![plane])];
    let constant = |cx: &mut Lower, v: f64| match dtype {
        DType::F64 => cx.ins().f64const(v),
        _ => cx.ins().f32const(v as f32),
    };
    cx.nest(&levels, &[x, y], &mut |cx, index, at| {
        let first = cx.ins().iadd_imm_s(at[0], -before * plane);
        let zero = constant(cx, 0.0);
        let sum = cx.fold_nest(&window, &[first], &[zero], &mut |cx, k, tap, acc| {
            let channel = cx.ins().iadd(index[1], k[0]);
            let channel = cx.ins().iadd_imm_s(channel, -before);
            // A channel below 0 compares as a huge unsigned one.
            let inside = cx.ins().icmp_imm_u(IntCC::UnsignedLessThan, channel, p.channels);
            let addr = cx.ins().select(inside, tap[0], at[0]);
            let v = cx.ins().load(ty, flags, addr, 0);
            let square = cx.ins().fmul(v, v);
            let next = cx.ins().fadd(acc[0], square);
            Ok(vec![cx.ins().select(inside, next, acc[0])])
        })?[0];
        let (coef, bias, beta) = (constant(cx, p.alpha / p.size as f64), constant(cx, p.bias), constant(cx, p.beta));
        let scaled = cx.ins().fmul(coef, sum);
        let base = cx.ins().fadd(bias, scaled);
        let divisor = portable_math::apply_binary(cx.b, "pow", dtype, base, beta).ok_or("no portable pow")?;
        let v = cx.ins().load(ty, flags, at[0], 0);
        let out = cx.ins().fdiv(v, divisor);
        cx.ins().store(flags, out, at[1], 0);
        Ok(())
    })
}

/// BatchNormalization in training mode over `[batch, channels, spatial]`:
/// per channel the batch's mean and population variance (f64), the
/// optional running statistics (outputs 1 and 2) `input · momentum +
/// batch · (1 - momentum)`, then `y = x a + b` with `a = scale / sqrt(var
/// + epsilon)` and `b = B - mean a`, in the tensors' type as the kernel.
pub fn batchnorm_training(cx: &mut Lower, dtype: DType, p: &BatchNormParams) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("BatchNormalization of {dtype} has no portable lowering (f32 and f64 do)"));
    }
    let (n, c, s) = (p.batch.max(0), p.channels.max(0), p.spatial.max(0));
    let (size, ty) = (dtype.size() as i64, clif_type(dtype));
    let flags = MemFlagsData::trusted();
    let mut output = |i: usize| if cx.has_output(i) { cx.output_ptr(i).map(Some) } else { Ok(None) };
    let running = [output(1)?, output(2)?];
    let none = cx.iconst(0);
    let mut ptrs = vec![cx.input_ptr(0)?, cx.output_ptr(0)?];
    for i in 1..5 {
        ptrs.push(cx.input_ptr(i)?);
    }
    ptrs.extend(running.map(|r| r.unwrap_or(none)));
    let mut steps = vec![s * size; 2];
    steps.extend([size; 6]);
    let channels = [Level::new(c as usize, steps)];
    // X and Y walk alike.
    let values = [Level::new(n as usize, vec![c * s * size; 2]), Level::new(s as usize, vec![size; 2])];
    let count = (n * s) as f64;
    let keep = p.momentum;
    let narrow = |cx: &mut Lower, v: Value| if dtype == DType::F64 { v } else { cx.ins().fdemote(types::F32, v) };
    cx.nest(&channels, &ptrs, &mut |cx, _, at| {
        let (start, total) = (cx.ins().f64const(-0.0), cx.ins().f64const(count));
        let sum = cx.fold_nest(&values, &at[..1], &[start], &mut |cx, _, x, acc| {
            let v = load_wide(cx, dtype, x[0]);
            Ok(vec![cx.ins().fadd(acc[0], v)])
        })?[0];
        let mean = cx.ins().fdiv(sum, total);
        let squares = cx.fold_nest(&values, &at[..1], &[start], &mut |cx, _, x, acc| {
            let v = load_wide(cx, dtype, x[0]);
            let d = cx.ins().fsub(v, mean);
            let d2 = cx.ins().fmul(d, d);
            Ok(vec![cx.ins().fadd(acc[0], d2)])
        })?[0];
        let var = cx.ins().fdiv(squares, total);
        for (k, batch) in [mean, var].into_iter().enumerate() {
            if running[k].is_none() {
                continue;
            }
            let input = load_wide(cx, dtype, at[4 + k]);
            let (kept, fresh) = (cx.ins().f64const(keep), cx.ins().f64const(1.0 - keep));
            let old = cx.ins().fmul(input, kept);
            let new = cx.ins().fmul(batch, fresh);
            let blended = cx.ins().fadd(old, new);
            store_narrow(cx, dtype, blended, at[6 + k]);
        }
        let (m, v) = (narrow(cx, mean), narrow(cx, var));
        let epsilon =
            if dtype == DType::F64 { cx.ins().f64const(p.epsilon) } else { cx.ins().f32const(p.epsilon as f32) };
        let (scale, bias) = (cx.ins().load(ty, flags, at[2], 0), cx.ins().load(ty, flags, at[3], 0));
        let padded = cx.ins().fadd(v, epsilon);
        let deviation = cx.ins().sqrt(padded);
        let a = cx.ins().fdiv(scale, deviation);
        let ma = cx.ins().fmul(m, a);
        let b = cx.ins().fsub(bias, ma);
        cx.nest(&values, &at[..2], &mut |cx, _, xy| {
            let x = cx.ins().load(ty, flags, xy[0], 0);
            let xa = cx.ins().fmul(x, a);
            let y = cx.ins().fadd(xa, b);
            cx.ins().store(flags, y, xy[1], 0);
            Ok(())
        })
    })
}
