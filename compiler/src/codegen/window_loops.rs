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
//! geometry, so the two paths cannot disagree on shapes. ConvInteger and
//! QLinearConv take the same walk with i32 arithmetic ([`integer_conv`]).
//! A pointwise f32 Conv is a matrix product per image and group and runs the
//! portable gemm's register tiles instead ([`pointwise_conv`]).
//!
//! DeformConv ([`deform_conv`]) folds, per output element, the group's
//! channels and taps of `w · mask · sample(x, position + offset)`, the
//! kernel's multilinear sample (a corner outside the input adds nothing,
//! so only corners inside are read), then adds the bias as its gemm does.
//!
//! RoiAlign ([`roi_align`]) pools bilinear samples per bin in f32, by the
//! kernel's rules (`generic/roi.rs`): every batch index is checked first
//! ([`super::status::INDEX_OUT_OF_RANGE`]), then per roi its grid of
//! samples (a run-time count without `sampling_ratio`), a sample outside
//! `[-1, size]` weighing 0, its four taps clamped into the plane.

use crate::codegen::quant_loops::{IntOperand, Sums};
use crate::codegen::{
    clif_type, gemm_tiles, portable_math, types, FloatCC, InstBuilder, IntCC, Level, Lower, MemFlagsData, Type, Value,
};
use crate::ir::DType;
use crate::ops::conv::Fused;
use crate::ops::elementwise::{emit_scalar, Activation, Func};
use onnxc_runtime::abi::conv::ConvParams;
use onnxc_runtime::abi::deform_conv::DeformConvParams;
use onnxc_runtime::abi::pool::{PoolParams, POOL_LP, POOL_MAX};
use onnxc_runtime::abi::roi::{RoiParams, ROI_AVG};
use onnxc_runtime::GemmParams;

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

    /// The position of the tap at kernel indices `taps` of the window at
    /// `starts` (inside the input) numbered by `strides` per dim, as an i64.
    fn numbered(&self, cx: &mut Lower, starts: &[Value], taps: &[Value], strides: &[i64]) -> Value {
        let mut at = cx.iconst(0);
        for d in 0..self.input.len() {
            let step = cx.ins().imul_imm_s(taps[d], self.dilations[d]);
            let pos = cx.ins().iadd(starts[d], step);
            let part = cx.ins().imul_imm_s(pos, strides[d]);
            at = cx.ins().iadd(at, part);
        }
        super::gather_loops::widened(cx, at)
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

/// The strides numbering positions of a plane of `dims`: row-major, or
/// column-major (MaxPool's `storage_order` 1).
fn index_strides(dims: &[i64], column_major: bool) -> Vec<i64> {
    let mut strides = vec![0; dims.len()];
    let mut s = 1;
    let order: Vec<usize> = if column_major { (0..dims.len()).collect() } else { (0..dims.len()).rev().collect() };
    for d in order {
        strides[d] = s;
        s *= dims[d];
    }
    strides
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

/// The pointers a convolution walks: X, W, the bias, the residual (which
/// walks like Y) and Y.
const X: usize = 0;
const W: usize = 1;
const B: usize = 2;
const R: usize = 3;
const Y: usize = 4;

/// Bytes per element of a convolution's X, W, bias (0: none) and Y (and
/// of the residual, when `residual`).
struct ConvBytes {
    x: i64,
    w: i64,
    bias: i64,
    y: i64,
    residual: bool,
}

/// What a convolution computes per output element over [`convolve`]'s walk.
trait ConvStep {
    /// The first accumulator of output channel `channel` (pointer-sized),
    /// `at` the pointers at the element.
    fn start(&mut self, cx: &mut Lower, channel: Value, at: &[Value]) -> Result<Value, String>;
    /// The accumulator after the tap of X's element at `x` and W's at `w`.
    fn tap(&mut self, cx: &mut Lower, acc: Value, x: Value, w: Value) -> Result<Value, String>;
    /// Stores the element's sum.
    fn finish(&mut self, cx: &mut Lower, sum: Value, channel: Value, at: &[Value]) -> Result<(), String>;
}

/// The walk of a grouped convolution `p`: a nest over the output elements
/// and, per element, the fold of `step` over the group's input channels
/// and the window's taps inside the input.
fn convolve(
    cx: &mut Lower,
    p: &ConvParams,
    bytes: ConvBytes,
    ptrs: [Value; 5],
    step: &mut dyn ConvStep,
) -> Result<(), String> {
    let g = geometry(p.spatial_rank, &p.in_spatial, &p.out_spatial, &p.kernel, &p.strides, &p.dilations, &p.pads_begin);
    let groups = p.group.max(1);
    let (cg, mg) = (p.in_channels / groups, p.out_channels / groups);
    let (in_size, out_size, ksize) = (g.input_size(), g.output_size(), g.kernel_size());
    let like_y = |step: i64| [if bytes.residual { step } else { 0 }, step];
    let level = |count: i64, x: i64, w: i64, b: i64, y: i64| {
        let [r, y] = like_y(y);
        Level::new(count as usize, vec![x, w, b, r, y])
    };
    let mut levels = vec![
        level(p.batch, p.in_channels * in_size * bytes.x, 0, 0, p.out_channels * out_size * bytes.y),
        level(groups, cg * in_size * bytes.x, mg * cg * ksize * bytes.w, mg * bytes.bias, mg * out_size * bytes.y),
        level(mg, 0, cg * ksize * bytes.w, bytes.bias, out_size * bytes.y),
    ];
    levels.extend(g.output_levels(|s| {
        let [r, y] = like_y(s * bytes.y);
        vec![0, 0, 0, r, y]
    }));
    let mut window = vec![Level::new(cg as usize, vec![in_size * bytes.x, ksize * bytes.w])];
    window.extend(g.kernel_levels(2, Some(bytes.w)));
    cx.nest(&levels, &ptrs, &mut |cx, index, at| {
        let starts = g.starts(cx, &index[3..]);
        let first = cx.ins().imul_imm_s(index[1], mg);
        let channel = cx.ins().iadd(first, index[2]);
        let init = step.start(cx, channel, at)?;
        let sum = cx.fold_nest(&window, &at[..2], &[init], &mut |cx, taps, tp, acc| {
            let (inside, offset) = g.tap(cx, &starts, &taps[1..]);
            let addr = cx.advance(tp[X], offset, bytes.x);
            let next = step.tap(cx, acc[0], addr, tp[W])?;
            Ok(vec![cx.ins().select(inside, next, acc[0])])
        })?[0];
        step.finish(cx, sum, channel, at)
    })
}

/// Conv `Y = X * W (+ B) (+ R)` with groups and the `fused` residual `R`
/// (shaped like Y) and activation, from inputs 0, 1 and optional 2 (the
/// bias) into output 0.
pub fn conv(cx: &mut Lower, dtype: DType, p: &ConvParams, fused: Fused) -> Result<(), String> {
    let size = dtype.size() as i64;
    let has_bias = cx.has_input(2);
    let ptrs = [cx.input_ptr(0)?, cx.input_ptr(1)?, cx.opt_input_ptr(2), fused.residual_ptr(cx)?, cx.output_ptr(0)?];
    let bytes = ConvBytes {
        x: size,
        w: size,
        bias: if has_bias { size } else { 0 },
        y: size,
        residual: fused.residual.is_some(),
    };
    if let Some(product) = pointwise_product(p).filter(|g| dtype == DType::F32 && gemm_tiles::applies(cx, g, has_bias))
    {
        return pointwise_conv(cx, p, &product, has_bias, fused, ptrs);
    }
    convolve(cx, p, bytes, ptrs, &mut FloatConv { dtype, has_bias, fused })
}

/// A pointwise Conv (1x1 window, unit strides, no pads) is per image and
/// group the product `W[g] @ X[n, g]` of `[M/G, C/G]` by `[C/G, spatial]`,
/// the bias a C broadcast along each row: that product, if `p` is one.
fn pointwise_product(p: &ConvParams) -> Option<GemmParams> {
    let r = p.spatial_rank.max(0) as usize;
    let unit = |d: usize| p.kernel[d] == 1 && p.strides[d] == 1 && p.pads_begin[d] == 0;
    let same = |d: usize| p.in_spatial[d] == p.out_spatial[d];
    if p.group < 1 || !(0..r).all(|d| unit(d) && same(d)) {
        return None;
    }
    let spatial: i64 = p.out_spatial[..r].iter().product();
    let (in_group, out_group) = (p.in_channels / p.group, p.out_channels / p.group);
    Some(GemmParams {
        m: out_group,
        n: spatial,
        k: in_group,
        a_row_stride: in_group,
        a_col_stride: 1,
        b_row_stride: spatial,
        b_col_stride: 1,
        c_row_stride: 1,
        c_col_stride: 0,
        alpha: 1.0,
        beta: 1.0,
        ..Default::default()
    })
}

/// A pointwise f32 Conv as one register-tiled `product` per image and
/// group ([`gemm_tiles`]), then the fused residual and activation over Y
/// in place.
fn pointwise_conv(
    cx: &mut Lower,
    p: &ConvParams,
    product: &GemmParams,
    has_bias: bool,
    fused: Fused,
    [x, w, bias, residual, y]: [Value; 5],
) -> Result<(), String> {
    const BYTES: i64 = 4;
    let (x_group, y_group) = (product.k * product.n * BYTES, product.m * product.n * BYTES);
    let image = cx.loop_begin(p.batch as usize);
    let x_image = cx.advance(x, image.index, p.group * x_group);
    let y_image = cx.advance(y, image.index, p.group * y_group);
    let group = cx.loop_begin(p.group as usize);
    let x_at = cx.advance(x_image, group.index, x_group);
    let w_at = cx.advance(w, group.index, product.m * product.k * BYTES);
    let bias_at = if has_bias { cx.advance(bias, group.index, product.m * BYTES) } else { bias };
    let y_at = cx.advance(y_image, group.index, y_group);
    gemm_tiles::product(cx, product, has_bias, [w_at, x_at, bias_at, y_at])?;
    cx.loop_end(group);
    cx.loop_end(image);
    if fused.residual.is_none() && fused.activation.is_none() {
        return Ok(());
    }
    let flags = MemFlagsData::trusted();
    let elements = Level::new((p.batch * p.out_channels * product.n) as usize, vec![BYTES, BYTES]);
    cx.nest(&[elements], &[y, residual], &mut |cx, _, at| {
        let mut v = cx.ins().load(types::F32, flags, at[0], 0);
        if fused.residual.is_some() {
            let r = cx.ins().load(types::F32, flags, at[1], 0);
            v = cx.ins().fadd(v, r);
        }
        let v = activate(cx, DType::F32, fused.activation, v)?;
        cx.ins().store(flags, v, at[0], 0);
        Ok(())
    })
}

/// Conv's float arithmetic, in the tensors' type.
struct FloatConv {
    dtype: DType,
    has_bias: bool,
    fused: Fused,
}

impl ConvStep for FloatConv {
    fn start(&mut self, cx: &mut Lower, _: Value, at: &[Value]) -> Result<Value, String> {
        let ty = clif_type(self.dtype);
        Ok(if self.has_bias { cx.ins().load(ty, MemFlagsData::trusted(), at[B], 0) } else { float_const(cx, ty, 0.0) })
    }

    fn tap(&mut self, cx: &mut Lower, acc: Value, x: Value, w: Value) -> Result<Value, String> {
        let (ty, flags) = (clif_type(self.dtype), MemFlagsData::trusted());
        let (xv, wv) = (cx.ins().load(ty, flags, x, 0), cx.ins().load(ty, flags, w, 0));
        let product = cx.ins().fmul(xv, wv);
        Ok(cx.ins().fadd(acc, product))
    }

    fn finish(&mut self, cx: &mut Lower, mut sum: Value, _: Value, at: &[Value]) -> Result<(), String> {
        let (ty, flags) = (clif_type(self.dtype), MemFlagsData::trusted());
        if self.fused.residual.is_some() {
            let r = cx.ins().load(ty, flags, at[R], 0);
            sum = cx.ins().fadd(sum, r);
        }
        let y = activate(cx, self.dtype, self.fused.activation, sum)?;
        cx.ins().store(flags, y, at[Y], 0);
        Ok(())
    }
}

/// ConvInteger / QLinearConv: `sum (x - x_zero)(w - w_zero[channel])
/// (+ bias[channel])` in wrapping i32 (a tap outside the input adds
/// nothing, as the kernel's padding by the zero point does), each sum
/// stored by `sums` into `y`.
pub fn integer_conv(
    cx: &mut Lower,
    p: &ConvParams,
    [x, w]: [&IntOperand; 2],
    bias: Option<Value>,
    sums: &Sums,
    y: Value,
) -> Result<(), String> {
    let none = cx.iconst(0);
    let ptrs = [x.data, w.data, bias.unwrap_or(none), none, y];
    let bytes = ConvBytes {
        x: x.dtype.size() as i64,
        w: w.dtype.size() as i64,
        bias: if bias.is_some() { 4 } else { 0 },
        y: sums.bytes(),
        residual: false,
    };
    convolve(cx, p, bytes, ptrs, &mut IntegerConv { x, w, sums, has_bias: bias.is_some(), zeros: (None, None) })
}

/// The integer convolution's arithmetic; `zeros` are the current output
/// channel's zero points of X and W.
struct IntegerConv<'o> {
    x: &'o IntOperand,
    w: &'o IntOperand,
    sums: &'o Sums<'o>,
    has_bias: bool,
    zeros: (Option<Value>, Option<Value>),
}

impl ConvStep for IntegerConv<'_> {
    fn start(&mut self, cx: &mut Lower, channel: Value, at: &[Value]) -> Result<Value, String> {
        self.zeros = (self.x.zero_at(cx, channel)?, self.w.zero_at(cx, channel)?);
        let flags = MemFlagsData::trusted();
        Ok(if self.has_bias { cx.ins().load(types::I32, flags, at[B], 0) } else { cx.ins().iconst(types::I32, 0) })
    }

    fn tap(&mut self, cx: &mut Lower, acc: Value, x: Value, w: Value) -> Result<Value, String> {
        let (xv, wv) = (self.x.centred(cx, x, self.zeros.0)?, self.w.centred(cx, w, self.zeros.1)?);
        let product = cx.ins().imul(xv, wv);
        Ok(cx.ins().iadd(acc, product))
    }

    fn finish(&mut self, cx: &mut Lower, sum: Value, channel: Value, at: &[Value]) -> Result<(), String> {
        let unused = cx.iconst(0);
        self.sums.store(cx, sum, [channel, unused], at[Y])
    }
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

/// MaxPool, AveragePool and LpPool: per output element, a fold of the
/// maximum (the first inside tap always taken, as the kernel does; with
/// the indices output, also its flat index in the input, the position
/// numbered column-major for `storage_order` 1, or -1 for a window without
/// an inside tap), of the sum with the count of inside taps
/// and of taps inside the explicitly padded input (`count_include_pad`),
/// or of the sum of `|x|^p` (its `p`-th root stored, both powers in the
/// data's type as the kernel takes them).
pub fn pool(cx: &mut Lower, dtype: DType, p: &PoolParams) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!(
            "pooling {dtype} has no portable lowering (f32 and f64 do, and MaxPool of i8/u8 through f32)"
        ));
    }
    let g = geometry(p.spatial_rank, &p.in_spatial, &p.out_spatial, &p.kernel, &p.strides, &p.dilations, &p.pads_begin);
    let pads_end = &p.pads_end[..g.input.len()];
    let (size, ty) = (dtype.size() as i64, clif_type(dtype));
    let ptr = cx.ptr_type();
    let flags = MemFlagsData::trusted();
    let (in_size, out_size) = (g.input_size(), g.output_size());
    let (is_max, is_lp) = (p.kind == POOL_MAX, p.kind == POOL_LP);
    let with_indices = is_max && cx.has_output(1);
    let indices = if with_indices { cx.output_ptr(1)? } else { cx.iconst(0) };
    let index_step = if with_indices { 8 } else { 0 };
    let ptrs = [cx.input_ptr(0)?, cx.output_ptr(0)?, indices];
    let plane =
        Level::new((p.batch * p.channels) as usize, vec![in_size * size, out_size * size, out_size * index_step]);
    let mut levels = vec![plane];
    levels.extend(g.output_levels(|s| vec![0, s * size, s * index_step]));
    let window = g.kernel_levels(1, None);
    let index_strides = index_strides(&g.input, p.storage_order == 1);
    cx.nest(&levels, &ptrs, &mut |cx, index, at| {
        let starts = g.starts(cx, &index[1..]);
        let zero = float_const(cx, ty, 0.0);
        let lowest = float_const(cx, ty, f64::NEG_INFINITY);
        let none = cx.ins().iconst(ptr, 0);
        let no_index = cx.ins().iconst(types::I64, -1);
        // Max: (best, taps seen, its index); average: (sum, inside taps, padded taps).
        let init = if is_max { vec![lowest, none, no_index] } else { vec![zero, none, none] };
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
                let best_at = if with_indices {
                    let at = g.numbered(cx, &starts, taps, &index_strides);
                    cx.ins().select(take, at, acc[2])
                } else {
                    acc[2]
                };
                return Ok(vec![cx.ins().select(take, v, acc[0]), seen, best_at]);
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
        if with_indices {
            let first = cx.ins().imul_imm_s(index[0], in_size);
            let first = super::gather_loops::widened(cx, first);
            let flat = cx.ins().iadd(first, acc[2]);
            let found = cx.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, acc[2], 0);
            let flat = cx.ins().select(found, flat, acc[2]);
            cx.ins().store(flags, flat, at[2], 0);
        }
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

/// Rust's `f32::max`: of a NaN and a number, the number.
fn rust_max(cx: &mut Lower, a: Value, b: Value) -> Value {
    super::dynamic_loops::rust_min_max(cx, false, a, b)
}

/// One roi's sampling geometry, all f32 but the sample counts.
struct RoiGeometry {
    /// The roi's first corner `(y, x)` and its bins' extents.
    origin: [Value; 2],
    bin: [Value; 2],
    /// Samples per bin along y and x (pointer-sized) and their product as
    /// the average's divisor (at least 1).
    grid: [Value; 2],
    count: Value,
}

impl RoiGeometry {
    fn new(cx: &mut Lower, p: &RoiParams, roi: Value) -> RoiGeometry {
        let flags = MemFlagsData::trusted();
        let scale = cx.ins().f32const(p.spatial_scale as f32);
        let offset = cx.ins().f32const(if p.half_pixel != 0 { 0.5 } else { 0.0 });
        let corner: [Value; 4] = std::array::from_fn(|k| {
            let v = cx.ins().load(types::F32, flags, roi, 4 * k as i32);
            let v = cx.ins().fmul(v, scale);
            cx.ins().fsub(v, offset)
        });
        let (x1, y1, x2, y2) = (corner[0], corner[1], corner[2], corner[3]);
        let (mut rh, mut rw) = (cx.ins().fsub(y2, y1), cx.ins().fsub(x2, x1));
        if p.half_pixel == 0 {
            let one = cx.ins().f32const(1.0);
            (rh, rw) = (rust_max(cx, rh, one), rust_max(cx, rw, one));
        }
        let per = |cx: &mut Lower, extent: Value, out: i64| {
            let out = cx.ins().f32const(out.max(1) as f32);
            let bin = cx.ins().fdiv(extent, out);
            let ptr = cx.ptr_type();
            let grid = if p.sampling_ratio > 0 {
                cx.iconst(p.sampling_ratio)
            } else {
                let up = cx.ins().ceil(bin);
                cx.ins().fcvt_to_uint_sat(ptr, up)
            };
            (bin, grid)
        };
        let (bin_h, gh) = per(cx, rh, p.out_h);
        let (bin_w, gw) = per(cx, rw, p.out_w);
        let samples = cx.ins().imul(gh, gw);
        let one = cx.iconst(1);
        let samples = cx.ins().umax(samples, one);
        let count = cx.ins().fcvt_from_uint(types::F32, samples);
        RoiGeometry { origin: [y1, x1], bin: [bin_h, bin_w], grid: [gh, gw], count }
    }

    /// Sample `i` (pointer-sized) along dim `d` of output bin `o`:
    /// `origin + o bin + (i + 0.5) bin / grid`.
    fn sample(&self, cx: &mut Lower, d: usize, o: Value, i: Value) -> Value {
        let o = cx.ins().fcvt_from_uint(types::F32, o);
        let start = cx.ins().fmul(o, self.bin[d]);
        let start = cx.ins().fadd(self.origin[d], start);
        let i = cx.ins().fcvt_from_uint(types::F32, i);
        let half = cx.ins().f32const(0.5);
        let centre = cx.ins().fadd(i, half);
        let along = cx.ins().fmul(centre, self.bin[d]);
        let grid = cx.ins().fcvt_from_uint(types::F32, self.grid[d]);
        let along = cx.ins().fdiv(along, grid);
        cx.ins().fadd(start, along)
    }
}

/// The kernel's bilinear sample at `(y, x)` of an `h x w` plane (both
/// positive) at `plane`: its four weighted taps.
fn bilinear_taps(cx: &mut Lower, [h, w]: [i64; 2], plane: Value, [y, x]: [Value; 2]) -> [Value; 4] {
    let flags = MemFlagsData::trusted();
    let ptr = cx.ptr_type();
    let minus_one = cx.ins().f32const(-1.0);
    let (fh, fw) = (cx.ins().f32const(h as f32), cx.ins().f32const(w as f32));
    let mut outside = cx.ins().iconst(types::I8, 0);
    for (v, size) in [(y, fh), (x, fw)] {
        let below = cx.ins().fcmp(FloatCC::LessThan, v, minus_one);
        let above = cx.ins().fcmp(FloatCC::GreaterThan, v, size);
        let either = cx.ins().bor(below, above);
        outside = cx.ins().bor(outside, either);
    }
    let zero = cx.ins().f32const(0.0);
    // Per dim: the low and high tap and the weight of the high one.
    let axis = |cx: &mut Lower, v: Value, size: i64| {
        let v = rust_max(cx, v, zero);
        let low = cx.ins().fcvt_to_uint_sat(ptr, v);
        let last = cx.iconst(size - 1);
        let clamped = cx.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, low, last);
        let next = cx.ins().iadd_imm_s(low, 1);
        let (low, high) = (cx.ins().select(clamped, last, low), cx.ins().select(clamped, last, next));
        let low_f = cx.ins().fcvt_from_uint(types::F32, low);
        let v = cx.ins().select(clamped, low_f, v);
        (low, high, cx.ins().fsub(v, low_f))
    };
    let (y0, y1, ly) = axis(cx, y, h);
    let (x0, x1, lx) = axis(cx, x, w);
    let one = cx.ins().f32const(1.0);
    let (hy, hx) = (cx.ins().fsub(one, ly), cx.ins().fsub(one, lx));
    let weights = [(hy, hx), (hy, lx), (ly, hx), (ly, lx)];
    let positions = [(y0, x0), (y0, x1), (y1, x0), (y1, x1)];
    let none = cx.iconst(0);
    std::array::from_fn(|k| {
        let (a, b) = weights[k];
        let weight = cx.ins().fmul(a, b);
        let weight = cx.ins().select(outside, zero, weight);
        let (row, col) = positions[k];
        let at = cx.ins().imul_imm_s(row, w);
        let at = cx.ins().iadd(at, col);
        let at = cx.ins().select(outside, none, at);
        let at = cx.advance(plane, at, 4);
        let v = cx.ins().load(types::F32, flags, at, 0);
        cx.ins().fmul(weight, v)
    })
}

/// RoiAlign of input 0 (`[batch, channels, h, w]` f32) over the rois of
/// input 1 (`[num_rois, 4]`, `(x1, y1, x2, y2)`) and their batch indices
/// (input 2) into output 0 (`[num_rois, channels, out_h, out_w]`).
pub fn roi_align(cx: &mut Lower, p: &RoiParams) -> Result<(), String> {
    let flags = MemFlagsData::trusted();
    let [batch, c, h, w, rois, oh, ow] =
        [p.batch, p.channels, p.height, p.width, p.num_rois, p.out_h, p.out_w].map(|v| v.max(0));
    let (x, roi, indices, y) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.input_ptr(2)?, cx.output_ptr(0)?);
    cx.nest(&[Level::new(rois as usize, vec![8])], &[indices], &mut |cx, _, at| {
        let b = cx.ins().load(types::I64, flags, at[0], 0);
        let outside = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, b, batch);
        cx.fail_if(outside, super::status::INDEX_OUT_OF_RANGE);
        Ok(())
    })?;
    let (plane, bin) = (h * w * 4, oh * ow * 4);
    let levels = [Level::new(rois as usize, vec![16, 8, c * bin])];
    let is_avg = p.mode == ROI_AVG;
    cx.nest(&levels, &[roi, indices, y], &mut |cx, _, at| {
        let g = RoiGeometry::new(cx, p, at[0]);
        let b = cx.ins().load(types::I64, flags, at[1], 0);
        let b = super::gather_loops::pointer_sized(cx, b);
        let first_plane = cx.ins().imul_imm_s(b, c * plane);
        let first_plane = cx.ins().iadd(x, first_plane);
        let bins = [
            Level::new(c as usize, vec![plane, bin]),
            Level::new(oh as usize, vec![0, ow * 4]),
            Level::new(ow as usize, vec![0, 4]),
        ];
        cx.nest(&bins, &[first_plane, at[2]], &mut |cx, o, bp| {
            let (zero, fresh) = (cx.ins().f32const(0.0), cx.ins().iconst(types::I8, 1));
            let acc = cx.fold_dynamic(g.grid[0], &[zero, fresh], &mut |cx, iy, acc| {
                let yy = g.sample(cx, 0, o[1], iy);
                cx.fold_dynamic(g.grid[1], acc, &mut |cx, ix, acc| {
                    let xx = g.sample(cx, 1, o[2], ix);
                    let v = if h * w == 0 { [zero; 4] } else { bilinear_taps(cx, [h, w], bp[0], [yy, xx]) };
                    if is_avg {
                        let s = cx.ins().fadd(v[0], v[1]);
                        let s = cx.ins().fadd(s, v[2]);
                        let s = cx.ins().fadd(s, v[3]);
                        return Ok(vec![cx.ins().fadd(acc[0], s), acc[1]]);
                    }
                    let m = rust_max(cx, v[0], v[1]);
                    let m = rust_max(cx, m, v[2]);
                    let m = rust_max(cx, m, v[3]);
                    let larger = rust_max(cx, acc[0], m);
                    let next = cx.ins().select(acc[1], m, larger);
                    let seen = cx.ins().iconst(types::I8, 0);
                    Ok(vec![next, seen])
                })
            })?;
            let out = if is_avg { cx.ins().fdiv(acc[0], g.count) } else { acc[0] };
            cx.ins().store(flags, out, bp[1], 0);
            Ok(())
        })
    })
}

/// The multilinear sample of the plane at `plane` (`dims`, row-major) at
/// the real position `pos` (of `ty`), as the kernel's `sample`: each of the
/// `2^rank` corners around it weighted by its fractions, those outside
/// the plane skipped (and not read).
fn multilinear(cx: &mut Lower, ty: Type, dims: &[i64], plane: Value, pos: &[Value]) -> Value {
    let flags = MemFlagsData::trusted();
    let size = ty.bytes() as i64;
    let (one, zero) = (float_const(cx, ty, 1.0), float_const(cx, ty, 0.0));
    let floors: Vec<(Value, Value)> = pos
        .iter()
        .map(|&v| {
            let f = cx.ins().floor(v);
            let wide = if ty == types::F64 { f } else { cx.ins().fpromote(types::F64, f) };
            (cx.ins().fcvt_to_sint_sat(types::I64, wide), cx.ins().fsub(v, f))
        })
        .collect();
    let mut acc = zero;
    for corner in 0..1usize << dims.len() {
        let mut weight = one;
        let mut at = cx.ins().iconst(types::I64, 0);
        let mut inside = cx.ins().iconst(types::I8, 1);
        for (d, &(low, frac)) in floors.iter().enumerate() {
            let up = (corner >> d) & 1 == 1;
            let i = if up { saturating_increment(cx, low) } else { low };
            let ok = cx.ins().icmp_imm_u(IntCC::UnsignedLessThan, i, dims[d]);
            inside = cx.ins().band(inside, ok);
            let factor = if up { frac } else { cx.ins().fsub(one, frac) };
            weight = cx.ins().fmul(weight, factor);
            let scaled = cx.ins().imul_imm_s(at, dims[d]);
            at = cx.ins().iadd(scaled, i);
        }
        let (read, next) = (cx.b.create_block(), cx.b.create_block());
        let sum = cx.b.append_block_param(next, ty);
        cx.ins().brif(inside, read, &[], next, &[acc.into()]);
        cx.b.switch_to_block(read);
        let at = super::gather_loops::pointer_sized(cx, at);
        let addr = cx.advance(plane, at, size);
        let v = cx.ins().load(ty, flags, addr, 0);
        let term = cx.ins().fmul(weight, v);
        let added = cx.ins().fadd(acc, term);
        cx.ins().jump(next, &[added.into()]);
        cx.b.switch_to_block(next);
        acc = sum;
    }
    acc
}

/// `i + 1`, saturating at `i64::MAX` (the kernel's `saturating_add`).
fn saturating_increment(cx: &mut Lower, i: Value) -> Value {
    let next = cx.ins().iadd_imm_s(i, 1);
    let at_top = cx.ins().icmp_imm_s(IntCC::Equal, i, i64::MAX);
    cx.ins().select(at_top, i, next)
}

/// The pointers DeformConv walks.
const DEFORM_X: usize = 0;
const DEFORM_W: usize = 1;
const DEFORM_OFFSET: usize = 2;
const DEFORM_MASK: usize = 3;
const DEFORM_BIAS: usize = 4;
const DEFORM_Y: usize = 5;

/// DeformConv of X (input 0), W (1) and the offsets (2), with the optional
/// bias (3) and mask (4), into output 0, as `p` (the kernel's params) says.
pub fn deform_conv(cx: &mut Lower, dtype: DType, p: &DeformConvParams) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("DeformConv of {dtype} has no portable lowering (f32 and f64 do)"));
    }
    let c = &p.conv;
    let g = geometry(c.spatial_rank, &c.in_spatial, &c.out_spatial, &c.kernel, &c.strides, &c.dilations, &c.pads_begin);
    let rank = g.input.len();
    let (size, ty) = (dtype.size() as i64, clif_type(dtype));
    let flags = MemFlagsData::trusted();
    let groups = c.group.max(1);
    let (cg, mg) = (c.in_channels / groups, c.out_channels / groups);
    let (in_size, out_size, taps) = (g.input_size(), g.output_size(), g.kernel_size());
    let offset_groups = p.offset_group.max(1);
    let per_offset_group = (c.in_channels / offset_groups).max(1);
    let (has_mask, has_bias) = (cx.has_input(4), cx.has_input(3));
    let ptrs = [
        cx.input_ptr(0)?,
        cx.input_ptr(1)?,
        cx.input_ptr(2)?,
        cx.opt_input_ptr(4),
        cx.opt_input_ptr(3),
        cx.output_ptr(0)?,
    ];
    let mask_step = |step: i64| if has_mask { step } else { 0 };
    let batch = vec![
        c.in_channels * in_size * size,
        0,
        offset_groups * taps * rank as i64 * out_size * size,
        mask_step(offset_groups * taps * out_size * size),
        0,
        c.out_channels * out_size * size,
    ];
    let channel = vec![0, cg * taps * size, 0, 0, if has_bias { size } else { 0 }, out_size * size];
    let mut levels = vec![Level::new(c.batch as usize, batch), Level::new(c.out_channels as usize, channel)];
    levels.extend(g.output_levels(|s| vec![0, 0, s * size, mask_step(s * size), 0, s * size]));
    let mut window = vec![Level::new(cg as usize, vec![in_size * size, taps * size])];
    window.extend(g.kernel_levels(2, Some(size)));
    let tap_strides = index_strides(&g.kernel, false);
    cx.nest(&levels, &ptrs, &mut |cx, index, at| {
        let starts = g.starts(cx, &index[2..]);
        let group = cx.ins().udiv_imm_u(index[1], mg.max(1));
        let first = cx.ins().imul_imm_s(group, cg);
        let x = cx.advance(at[DEFORM_X], first, in_size * size);
        let init = float_const(cx, ty, 0.0);
        let sum = cx.fold_nest(&window, &[x, at[DEFORM_W]], &[init], &mut |cx, k, tp, acc| {
            let ch = cx.ins().iadd(first, k[0]);
            let offset_group = cx.ins().udiv_imm_u(ch, per_offset_group);
            let mut tap = cx.ins().imul_imm_s(offset_group, taps);
            for d in 0..rank {
                let part = cx.ins().imul_imm_s(k[1 + d], tap_strides[d]);
                tap = cx.ins().iadd(tap, part);
            }
            let pos: Vec<Value> = (0..rank)
                .map(|d| {
                    let step = cx.ins().imul_imm_s(k[1 + d], g.dilations[d]);
                    let base = cx.ins().iadd(starts[d], step);
                    let base = cx.ins().fcvt_from_sint(ty, base);
                    let entry = cx.ins().imul_imm_s(tap, rank as i64);
                    let entry = cx.ins().iadd_imm_s(entry, d as i64);
                    let addr = cx.advance(at[DEFORM_OFFSET], entry, out_size * size);
                    let shift = cx.ins().load(ty, flags, addr, 0);
                    cx.ins().fadd(base, shift)
                })
                .collect();
            let mut col = multilinear(cx, ty, &g.input, tp[0], &pos);
            if has_mask {
                let addr = cx.advance(at[DEFORM_MASK], tap, out_size * size);
                let m = cx.ins().load(ty, flags, addr, 0);
                col = cx.ins().fmul(m, col);
            }
            let w = cx.ins().load(ty, flags, tp[1], 0);
            let product = cx.ins().fmul(w, col);
            Ok(vec![cx.ins().fadd(acc[0], product)])
        })?[0];
        let y = if has_bias {
            let b = cx.ins().load(ty, flags, at[DEFORM_BIAS], 0);
            cx.ins().fadd(sum, b)
        } else {
            sum
        };
        cx.ins().store(flags, y, at[DEFORM_Y], 0);
        Ok(())
    })
}
