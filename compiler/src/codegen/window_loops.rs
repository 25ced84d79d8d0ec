//! Portable-mode lowerings of the sliding-window operators, Conv and
//! MaxPool/AveragePool/LpPool (their Global forms included): direct
//! loop nests instead of the kernels' im2col + gemm and window walks.
//!
//! Both are one [`Lower::nest`] over the output positions and, per output
//! element, one [`Lower::fold_nest`] over the window's taps (and, for
//! Conv, the group's input channels) with the accumulators in registers.
//! A tap's input position along dim `d` is `o*stride - pad_begin +
//! k*dilation`; a tap outside the input contributes nothing (its load
//! reads the window's first element instead, so no access leaves the
//! input). The same parameter blocks the kernels take describe the
//! geometry, so the two paths cannot disagree on shapes.

use crate::codegen::{clif_type, portable_math, FloatCC, InstBuilder, IntCC, Level, Lower, MemFlagsData, Type, Value};
use crate::ir::DType;
use crate::ops::conv::Fused;
use crate::ops::elementwise::{emit_scalar, Activation, Func};
use onnxc_runtime::abi::conv::ConvParams;
use onnxc_runtime::abi::pool::{PoolParams, POOL_LP, POOL_MAX};

/// The spatial geometry shared by Conv and the pools.
struct Geometry {
    input: Vec<i64>,
    output: Vec<i64>,
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    pads_begin: Vec<i64>,
}

impl Geometry {
    fn input_size(&self) -> i64 {
        self.input.iter().product()
    }

    fn output_size(&self) -> i64 {
        self.output.iter().product()
    }

    fn kernel_size(&self) -> i64 {
        self.kernel.iter().product()
    }

    /// Levels over the output positions, advancing the pointers whose
    /// per-position byte steps `steps` gives (row-major over `output`).
    fn output_levels(&self, steps: impl Fn(i64) -> Vec<i64>) -> Vec<Level> {
        let mut stride = 1;
        let mut levels: Vec<Level> = self
            .output
            .iter()
            .rev()
            .map(|&n| {
                let level = Level::new(n as usize, steps(stride));
                stride *= n;
                level
            })
            .collect();
        levels.reverse();
        levels
    }

    /// Each window's first position along each dim, for output position `out`.
    fn starts(&self, cx: &mut Lower, out: &[Value]) -> Vec<Value> {
        out.iter()
            .enumerate()
            .map(|(d, &o)| {
                let scaled = cx.ins().imul_imm_s(o, self.strides[d]);
                cx.ins().iadd_imm_s(scaled, -self.pads_begin[d])
            })
            .collect()
    }

    /// For the tap at kernel indices `taps` of the window at `starts`:
    /// whether it lies inside the input, and its element offset in the
    /// input plane (0 when outside).
    fn tap(&self, cx: &mut Lower, starts: &[Value], taps: &[Value]) -> (Value, Value) {
        let mut valid: Option<Value> = None;
        let mut offset = cx.iconst(0);
        for d in 0..self.input.len() {
            let step = cx.ins().imul_imm_s(taps[d], self.dilations[d]);
            let pos = cx.ins().iadd(starts[d], step);
            // Negative positions compare as huge unsigned ones.
            let inside = cx.ins().icmp_imm_u(IntCC::UnsignedLessThan, pos, self.input[d]);
            valid = Some(match valid {
                Some(v) => cx.ins().band(v, inside),
                None => inside,
            });
            let scaled = cx.ins().imul_imm_s(offset, self.input[d]);
            offset = cx.ins().iadd(scaled, pos);
        }
        let valid = valid.unwrap_or_else(|| cx.ins().iconst(crate::codegen::types::I8, 1));
        let zero = cx.iconst(0);
        (valid, cx.ins().select(valid, offset, zero))
    }

    /// One level per kernel dim (no pointer steps: taps are addressed from
    /// their positions).
    fn kernel_levels(&self, pointers: usize, weight_steps: Option<i64>) -> Vec<Level> {
        let mut stride = weight_steps.unwrap_or(0);
        let mut levels: Vec<Level> = self
            .kernel
            .iter()
            .rev()
            .map(|&k| {
                let mut steps = vec![0; pointers];
                if weight_steps.is_some() {
                    steps[1] = stride;
                }
                stride *= k;
                Level::new(k as usize, steps)
            })
            .collect();
        levels.reverse();
        levels
    }
}

fn float_const(cx: &mut Lower, ty: Type, v: f64) -> Value {
    if ty == crate::codegen::types::F64 {
        cx.ins().f64const(v)
    } else {
        cx.ins().f32const(v as f32)
    }
}

fn geometry(
    rank: i64,
    input: &[i64],
    output: &[i64],
    kernel: &[i64],
    strides: &[i64],
    dilations: &[i64],
    pads: &[i64],
) -> Geometry {
    let r = rank.max(0) as usize;
    Geometry {
        input: input[..r].to_vec(),
        output: output[..r].to_vec(),
        kernel: kernel[..r].to_vec(),
        strides: strides[..r].to_vec(),
        dilations: dilations[..r].to_vec(),
        pads_begin: pads[..r].to_vec(),
    }
}

/// Conv `Y = X * W (+ B) (+ R)` with groups and the `fused` residual `R`
/// (shaped like Y) and activation, from inputs 0, 1 and optional 2 (the
/// bias) into output 0.
pub fn conv(cx: &mut Lower, dtype: DType, p: &ConvParams, fused: Fused) -> Result<(), String> {
    let g = geometry(p.spatial_rank, &p.in_spatial, &p.out_spatial, &p.kernel, &p.strides, &p.dilations, &p.pads_begin);
    let (size, ty) = (dtype.size() as i64, clif_type(dtype));
    let flags = MemFlagsData::trusted();
    let groups = p.group.max(1);
    let (cg, mg) = (p.in_channels / groups, p.out_channels / groups);
    let (in_size, out_size, ksize) = (g.input_size(), g.output_size(), g.kernel_size());
    let (has_bias, has_residual) = (cx.has_input(2), fused.residual.is_some());
    // Pointers: X, W, B, R, Y; R walks like Y.
    let ptrs = [cx.input_ptr(0)?, cx.input_ptr(1)?, cx.opt_input_ptr(2), fused.residual_ptr(cx)?, cx.output_ptr(0)?];
    let bias_step = if has_bias { size } else { 0 };
    let like_y = |step: i64| [if has_residual { step } else { 0 }, step];
    let level = |count: i64, x: i64, w: i64, b: i64, y: i64| {
        let [r, y] = like_y(y);
        Level::new(count as usize, vec![x, w, b, r, y])
    };
    let mut levels = vec![
        level(p.batch, p.in_channels * in_size * size, 0, 0, p.out_channels * out_size * size),
        level(groups, cg * in_size * size, mg * cg * ksize * size, mg * bias_step, mg * out_size * size),
        level(mg, 0, cg * ksize * size, bias_step, out_size * size),
    ];
    levels.extend(g.output_levels(|s| {
        let [r, y] = like_y(s * size);
        vec![0, 0, 0, r, y]
    }));
    let mut window = vec![Level::new(cg as usize, vec![in_size * size, ksize * size])];
    window.extend(g.kernel_levels(2, Some(size)));
    cx.nest(&levels, &ptrs, &mut |cx, index, at| {
        let starts = g.starts(cx, &index[3..]);
        let init = if has_bias { cx.ins().load(ty, flags, at[2], 0) } else { float_const(cx, ty, 0.0) };
        let mut sum = cx.fold_nest(&window, &at[..2], &[init], &mut |cx, taps, tp, acc| {
            let (inside, offset) = g.tap(cx, &starts, &taps[1..]);
            let addr = cx.advance(tp[0], offset, size);
            let xv = cx.ins().load(ty, flags, addr, 0);
            let wv = cx.ins().load(ty, flags, tp[1], 0);
            let prod = cx.ins().fmul(xv, wv);
            let next = cx.ins().fadd(acc[0], prod);
            Ok(vec![cx.ins().select(inside, next, acc[0])])
        })?[0];
        if has_residual {
            let r = cx.ins().load(ty, flags, at[3], 0);
            sum = cx.ins().fadd(sum, r);
        }
        let y = activate(cx, dtype, fused.activation, sum)?;
        cx.ins().store(flags, y, at[4], 0);
        Ok(())
    })
}

/// The fused activation, times `v` when it is gated (SiLU: the Mul after
/// the Sigmoid).
fn activate(cx: &mut Lower, dtype: DType, activation: Option<Activation>, v: Value) -> Result<Value, String> {
    let Some(activation) = activation else { return Ok(v) };
    let f = activation_function(cx, dtype, activation, v)?;
    Ok(if activation.gated { cx.ins().fmul(v, f) } else { f })
}

/// The fused activation's function of `v`. Relu, LeakyRelu and Clip
/// compare as the kernels do (a NaN passes); the others are their
/// elementwise functions' code, which the kernels compute alike.
fn activation_function(cx: &mut Lower, dtype: DType, activation: Activation, v: Value) -> Result<Value, String> {
    if !matches!(activation.func, Func::Relu | Func::LeakyRelu { .. } | Func::Clip) {
        return emit_scalar(cx, activation.func, dtype, &[0], &[(v, dtype)]);
    }
    let ty = clif_type(dtype);
    let (act_a, act_b) = activation.params();
    let (a, b) = (float_const(cx, ty, act_a), float_const(cx, ty, act_b));
    let zero = float_const(cx, ty, 0.0);
    let below = |cx: &mut Lower, bound| cx.ins().fcmp(FloatCC::LessThan, v, bound);
    Ok(match activation.func {
        Func::Relu => {
            let neg = below(cx, zero);
            cx.ins().select(neg, zero, v)
        }
        Func::LeakyRelu { .. } => {
            let neg = below(cx, zero);
            let scaled = cx.ins().fmul(v, a);
            cx.ins().select(neg, scaled, v)
        }
        _ => {
            let low = below(cx, a);
            let high = cx.ins().fcmp(FloatCC::GreaterThan, v, b);
            let v2 = cx.ins().select(high, b, v);
            cx.ins().select(low, a, v2)
        }
    })
}

/// MaxPool (without the indices output), AveragePool and LpPool: per
/// output element, a fold of the maximum (the first inside tap always
/// taken, as the kernel does), of the sum with the count of inside taps
/// and of taps inside the explicitly padded input (`count_include_pad`),
/// or of the sum of `|x|^p` (its `p`-th root stored, both powers in the
/// data's type as the kernel takes them).
pub fn pool(cx: &mut Lower, dtype: DType, p: &PoolParams) -> Result<(), String> {
    let g = geometry(p.spatial_rank, &p.in_spatial, &p.out_spatial, &p.kernel, &p.strides, &p.dilations, &p.pads_begin);
    let pads_end = &p.pads_end[..g.input.len()];
    let (size, ty) = (dtype.size() as i64, clif_type(dtype));
    let ptr = cx.ptr_type();
    let flags = MemFlagsData::trusted();
    let (in_size, out_size) = (g.input_size(), g.output_size());
    let ptrs = [cx.input_ptr(0)?, cx.output_ptr(0)?];
    let mut levels = vec![Level::new((p.batch * p.channels) as usize, vec![in_size * size, out_size * size])];
    levels.extend(g.output_levels(|s| vec![0, s * size]));
    let window = g.kernel_levels(1, None);
    let (is_max, is_lp) = (p.kind == POOL_MAX, p.kind == POOL_LP);
    cx.nest(&levels, &ptrs, &mut |cx, index, at| {
        let starts = g.starts(cx, &index[1..]);
        let zero = float_const(cx, ty, 0.0);
        let lowest = float_const(cx, ty, f64::NEG_INFINITY);
        let none = cx.ins().iconst(ptr, 0);
        // Max: (best, taps seen); average: (sum, inside taps, padded taps).
        let init = if is_max { vec![lowest, none] } else { vec![zero, none, none] };
        let acc = cx.fold_nest(&window, &at[..1], &init, &mut |cx, taps, tp, acc| {
            let (inside, offset) = g.tap(cx, &starts, taps);
            let addr = cx.advance(tp[0], offset, size);
            let v = cx.ins().load(ty, flags, addr, 0);
            let counted = cx.ins().iadd_imm_s(acc[1], 1);
            let seen = cx.ins().select(inside, counted, acc[1]);
            if is_max {
                let greater = cx.ins().fcmp(FloatCC::GreaterThan, v, acc[0]);
                let first = cx.ins().icmp_imm_u(IntCC::Equal, acc[1], 0);
                let take = cx.ins().bor(greater, first);
                let take = cx.ins().band(take, inside);
                return Ok(vec![cx.ins().select(take, v, acc[0]), seen]);
            }
            let term = if is_lp {
                let magnitude = cx.ins().fabs(v);
                let p_norm = float_const(cx, ty, p.p_norm);
                portable_math::apply_binary(cx.b, "pow", dtype, magnitude, p_norm).ok_or("no portable pow")?
            } else {
                v
            };
            let added = cx.ins().fadd(acc[0], term);
            let sum = cx.ins().select(inside, added, acc[0]);
            // Inside the padded input: -pad_begin <= pos < in + pad_end.
            let mut padded = cx.ins().iconst(crate::codegen::types::I8, 1);
            for d in 0..g.input.len() {
                let step = cx.ins().imul_imm_s(taps[d], g.dilations[d]);
                let pos = cx.ins().iadd(starts[d], step);
                let shifted = cx.ins().iadd_imm_s(pos, g.pads_begin[d]);
                let span = g.input[d] + g.pads_begin[d] + pads_end[d];
                let ok = cx.ins().icmp_imm_u(IntCC::UnsignedLessThan, shifted, span);
                padded = cx.ins().band(padded, ok);
            }
            let counted = cx.ins().iadd_imm_s(acc[2], 1);
            let padded_count = cx.ins().select(padded, counted, acc[2]);
            Ok(vec![sum, seen, padded_count])
        })?;
        let y = if is_max {
            acc[0]
        } else if is_lp {
            let inverse = if dtype == DType::F64 { 1.0 / p.p_norm } else { (1.0 / p.p_norm as f32) as f64 };
            let root = float_const(cx, ty, inverse);
            portable_math::apply_binary(cx.b, "pow", dtype, acc[0], root).ok_or("no portable pow")?
        } else {
            let n = if p.count_include_pad != 0 { acc[2] } else { acc[1] };
            let n = cx.ins().fcvt_from_uint(ty, n);
            cx.ins().fdiv(acc[0], n)
        };
        cx.ins().store(flags, y, at[1], 0);
        Ok(())
    })
}
