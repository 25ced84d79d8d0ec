//! Normalisation: BatchNormalization, LRN, and the statistics-based family
//! lowered through one kernel ([`Normalize`]).
//!
//! * BatchNormalization (opsets 1, 6, 7, 9, 14, 15): `Y = (X - mean) /
//!   sqrt(var + epsilon) * scale + B` per channel of `X [N, C, D...]`.
//!   Opsets < 9 have `spatial` (default 1): with `spatial = 0` the four
//!   vectors are per activation (`[C, D...]`), which the kernel computes as
//!   `C * prod(D)` channels of one element each. Opsets 1-6 `is_test` and
//!   `consumed_inputs` and the momentum only matter for training. In
//!   portable mode inference is one broadcast loop, no kernel, and
//!   training [`norm_loops::batchnorm_training`].
//!   Training mode (opset 14+ `training_mode = 1`) normalises with the
//!   batch's mean and population variance per channel and writes the
//!   optional outputs `running_mean`/`running_var` as `input * momentum +
//!   batch * (1 - momentum)` (`momentum` default 0.9); the running / saved
//!   statistics outputs of older opsets are rejected with an error.
//!   Type constraints: f16, bf16, f32, f64 (opset 15 lets scale/B and the
//!   statistics differ from X); lowered through `onnxc_batchnorm_{f32,f64}`,
//!   16-bit tensors staged as f32 ([`crate::codegen::staging`]), so the types may mix
//!   as long as they all compute in f32 or all in f64.
//! * LRN (opsets 1, 13): `size` (required), `alpha` (1e-4), `beta` (0.75),
//!   `bias` (1.0) over `X [N, C, D...]`; `onnxc_lrn_{f32,f64}`, 16-bit
//!   types staged; in portable mode [`norm_loops::lrn`].
//!
//! [`Normalize`] (`onnxc_normalize`: any axis set, broadcast scale/bias,
//! statistics totalled in `f64`; X in f16, bf16, f32, f64, the affine
//! inputs any of those; `passes::fuse_layer_norm` and `fuse_rms_norm`
//! also make one of a LayerNorm or RMSNorm written out in elementwise
//! operators):
//! * InstanceNormalization (1, 6, 22): `epsilon` (1e-5); scale, B `[C]`;
//!   statistics per (n, c) over the spatial dims.
//! * LayerNormalization (17): `axis` (-1), `epsilon` (1e-5), `stash_type`
//!   (1; the element type of the optional Mean / InvStdDev outputs, shape
//!   `X[..axis] ++ [1...]`); Scale and optional B broadcast to X.
//! * GroupNormalization (18, 21): `num_groups` (required), `epsilon`;
//!   opset 18 has scale/bias per group `[G]`, 21 per channel `[C]`
//!   (`stash_type` only picks a precision; totals are always f64).
//! * RMSNormalization (23): `axis` (-1), `epsilon` (1e-5); Scale broadcasts.
//! * MeanVarianceNormalization (9, 13): `axes` ([0, 2, 3]);
//!   `(X - E[X]) / (sqrt(Var[X]) + 1e-9)` as the function body defines it.
//! * LpNormalization (1, 22): `axis` (-1), `p` (1 or 2, default 2); 0 where
//!   the norm is 0.
//!
//! In portable mode the family runs [`crate::codegen::norm_loops`] over
//! the same params instead of the kernel.

use super::elementwise::compute_type;
use super::elementwise::{emit_broadcast_loop, Operand};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::norm_loops::{self, NormTensors};
use crate::codegen::{InstBuilder, Lower};
use crate::import::NodeImport;
use crate::ir::dim_expr::DimExpr;
use crate::ir::DType;
use onnxc_runtime::{
    normalize_scratch_bytes, BatchNormParams, LrnParams, NormParams, MAX_RANK, MINIFLOAT_SATURATE, NORM_L1, NORM_L2,
    NORM_MVN, NORM_RMS, NORM_STANDARD,
};

/// Checks that input 0, of shape `shape`, is an `[N, C, D...]` float
/// tensor.
fn split_nc(cx: &InferCx, shape: &[usize]) -> Result<(), String> {
    let x = cx.input(0)?;
    if !x.dtype.is_float() {
        return Err(format!("element type {} is not supported", x.dtype));
    }
    match shape {
        [_, _, ..] => Ok(()),
        _ => Err(format!("input 0 has shape {shape:?}, expected [N, C, ...]")),
    }
}

/// The shape the checks of a normalisation see for input dims `dims`:
/// each symbolic dim as 1, which is sound where the checks only count
/// such a dim or broadcast over it (a 1 broadcasts as any size does, and
/// a scale of another size fails against it as against a symbol); the
/// `known` first dims must be constants (the channels, which statistics
/// and groups are checked against).
fn symbols_as_one(dims: &[DimExpr], known: usize) -> Result<Vec<usize>, String> {
    if let Some(i) = dims.iter().take(known).skip(1).position(|d| d.as_size().is_none()) {
        return Err(format!("dim {} of input 0 is {}, which must be known", i + 1, dims[i + 1]));
    }
    Ok(dims.iter().map(|d| d.as_size().unwrap_or(1)).collect())
}

#[derive(Clone, Debug)]
pub struct BatchNorm {
    pub epsilon: f32,
    /// Per-channel statistics (`spatial = 1`, the only form from opset 9).
    pub spatial: bool,
    /// Training mode, with its momentum.
    pub training: Option<f32>,
}

pub fn import_batchnorm(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let training = match (cx.opset >= 14, a.int_or("training_mode", 0)?) {
        (_, 0) => None,
        (true, 1) => Some(a.float_or("momentum", 0.9)?),
        (_, v) => return Err(format!("attribute \"training_mode\" is {v}, expected 0 or 1")),
    };
    if training.is_none() && cx.output_count > 1 {
        return Err(format!(
            "{} outputs requested: the running/saved statistics outputs are training-only and not supported",
            cx.output_count
        ));
    }
    let spatial = if cx.opset < 9 {
        match a.int_or("spatial", 1)? {
            0 => false,
            1 => true,
            v => return Err(format!("attribute \"spatial\" is {v}, expected 0 or 1")),
        }
    } else {
        true
    };
    if training.is_some() && cx.output_count > 3 {
        return Err(format!("{} outputs requested, training mode has 3", cx.output_count));
    }
    Ok(Op::BatchNorm(BatchNorm { epsilon: a.float_or("epsilon", 1e-5)?, spatial, training }))
}

impl BatchNorm {
    /// Kernel parameters for input `x` whose statistics have shape `stats`.
    fn params(&self, x: &[usize], stats: &[usize]) -> Result<BatchNormParams, String> {
        let (n, c, rest) = match x {
            [n, c, rest @ ..] => (*n, *c, rest),
            _ => return Err(format!("input 0 has shape {x:?}, expected [N, C, ...]")),
        };
        let s: usize = rest.iter().product();
        // Per-activation statistics ([C, D...], spatial = 0 before opset 9)
        // are C * prod(D) channels of one element each.
        let (channels, spatial) = if stats == [c] {
            (c, s)
        } else if !self.spatial && stats == &x[1..] {
            (c * s, 1)
        } else {
            return Err(format!(
                "statistics have shape {stats:?}, expected [{c}]{}",
                if self.spatial { "" } else { " or the input's [C, D...]" }
            ));
        };
        Ok(BatchNormParams {
            batch: n as i64,
            channels: channels as i64,
            spatial: spatial as i64,
            epsilon: self.epsilon as f64,
            training: self.training.is_some() as i64,
            momentum: self.training.unwrap_or(0.0) as f64,
        })
    }
}

impl Operator for BatchNorm {
    fn name(&self) -> &'static str {
        "BatchNormalization"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let dims = cx.dims(0)?;
        let x_shape = symbols_as_one(&dims, if self.spatial { 2 } else { dims.len() })?;
        split_nc(cx, &x_shape)?;
        let x = cx.input(0)?;
        let stats = cx.input(1)?.shape;
        let compute = compute_type(x.dtype);
        for (i, name) in ["scale", "B", "input_mean", "input_var"].iter().enumerate() {
            let t = cx.input(i + 1)?;
            if compute_type(t.dtype) != compute {
                return Err(format!(
                    "input {} ({name}) is {}, X is {}: mixing f64 with other types",
                    i + 1,
                    t.dtype,
                    x.dtype
                ));
            }
            if t.shape != stats {
                return Err(format!("input {} ({name}) has shape {:?}, scale has {stats:?}", i + 1, t.shape));
            }
        }
        self.params(&x_shape, stats)?;
        let mut out = vec![Inferred::of_dims(x.dtype, dims)?];
        for i in 1..cx.output_count {
            out.push(Inferred::new(cx.input(2 + i)?.dtype, stats.to_vec()));
        }
        Ok(out)
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, x) = cx.input_type(0)?;
        let (_, stats) = cx.input_type(1)?;
        let p = self.params(&x, &stats)?;
        if cx.portable() && p.training == 0 {
            return batchnorm_portable(cx, dtype, &p, self.epsilon);
        }
        if cx.portable() {
            return norm_loops::batchnorm_training(cx, dtype, &p);
        }
        let params = cx.params(&p)?;
        let (x, scale, bias) = (Ptr(cx.input_ptr(0)?), Ptr(cx.input_ptr(1)?), Ptr(cx.input_ptr(2)?));
        let (mean, var, y) = (Ptr(cx.input_ptr(3)?), Ptr(cx.input_ptr(4)?), Ptr(cx.output_ptr(0)?));
        let mut output = |i| if cx.has_output(i) { cx.output_ptr(i).map(Ptr) } else { Ok(Ptr(cx.iconst(0))) };
        let (running_mean, running_var) = (output(1)?, output(2)?);
        let kernel = kernels::by_dtype(kernels::onnxc_batchnorm_f32, kernels::onnxc_batchnorm_f64, dtype);
        cx.call_checked(kernel, (params, x, scale, bias, mean, var, y, running_mean, running_var))
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

/// Inference-mode BatchNormalization as one broadcast loop over the input
/// viewed as `[batch, channels, spatial]`, the statistics stepping along
/// the channels: `(x - mean) / sqrt(var + epsilon) * scale + B`.
fn batchnorm_portable(cx: &mut Lower, dtype: DType, p: &BatchNormParams, epsilon: f32) -> Result<(), String> {
    let shape = [p.batch as usize, p.channels as usize, p.spatial as usize];
    let x = Operand { index: 0, dtype, strides: vec![p.channels * p.spatial, p.spatial, 1] };
    let mut operands = vec![x];
    for index in 1..5 {
        operands.push(Operand { index, dtype: cx.input_type(index)?.0, strides: vec![0, 1, 0] });
    }
    emit_broadcast_loop(cx, &shape, (dtype, MINIFLOAT_SATURATE), &operands, false, &mut |cx, args| {
        let [(x, _), (scale, _), (bias, _), (mean, _), (var, _)] = args else {
            return Err("BatchNormalization takes five inputs".into());
        };
        let eps = if dtype == DType::F64 { cx.ins().f64const(epsilon as f64) } else { cx.ins().f32const(epsilon) };
        let var = cx.ins().fadd(*var, eps);
        let deviation = cx.ins().sqrt(var);
        let centred = cx.ins().fsub(*x, *mean);
        let normalised = cx.ins().fdiv(centred, deviation);
        let scaled = cx.ins().fmul(normalised, *scale);
        Ok(cx.ins().fadd(scaled, *bias))
    })
}

#[derive(Clone, Debug)]
pub struct Lrn {
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub bias: f32,
}

pub fn import_lrn(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let size = a.int("size")?.ok_or("attribute \"size\" is required")?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s >= 1)
        .ok_or_else(|| format!("attribute \"size\" is {size}, expected >= 1"))?;
    Ok(Op::Lrn(Lrn {
        size,
        alpha: a.float_or("alpha", 1e-4)?,
        beta: a.float_or("beta", 0.75)?,
        bias: a.float_or("bias", 1.0)?,
    }))
}

impl Operator for Lrn {
    fn name(&self) -> &'static str {
        "LRN"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let dims = cx.dims(0)?;
        split_nc(cx, &symbols_as_one(&dims, 2)?)?;
        Ok(vec![Inferred::of_dims(cx.input(0)?.dtype, dims)?])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, x) = cx.input_type(0)?;
        let (n, c) = match x.as_slice() {
            [n, c, ..] => (*n, *c),
            _ => return Err("input 0 must have rank at least 2".into()),
        };
        let p = LrnParams {
            batch: n as i64,
            channels: c as i64,
            spatial: x[2..].iter().product::<usize>() as i64,
            size: self.size as i64,
            alpha: self.alpha as f64,
            beta: self.beta as f64,
            bias: self.bias as f64,
        };
        let dtype = cx.input_type(0)?.0;
        if cx.portable() {
            let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
            return norm_loops::lrn(cx, &p, dtype, x, y);
        }
        let params = cx.params(&p)?;
        let xp = Ptr(cx.input_ptr(0)?);
        let yp = Ptr(cx.output_ptr(0)?);
        let kernel = kernels::by_dtype(kernels::onnxc_lrn_f32, kernels::onnxc_lrn_f64, dtype);
        cx.call_checked(kernel, (params, xp, yp))
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum NormKind {
    Instance,
    Layer {
        axis: i64,
    },
    /// `per_channel`: scale/bias are `[C]` (opset 21) rather than `[G]` (18).
    Group {
        groups: usize,
        per_channel: bool,
    },
    Rms {
        axis: i64,
    },
    MeanVariance {
        axes: Vec<i64>,
    },
    Lp {
        axis: i64,
        p: i64,
    },
}

#[derive(Clone, Debug)]
pub struct Normalize {
    pub op_type: &'static str,
    pub kind: NormKind,
    pub epsilon: f32,
    /// Element type of LayerNormalization's Mean / InvStdDev outputs.
    pub stat_dtype: DType,
}

pub fn import_normalize(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let epsilon = a.float_or("epsilon", 1e-5)?;
    let (op_type, kind, epsilon): (&'static str, NormKind, f32) = match cx.op_type {
        "InstanceNormalization" => ("InstanceNormalization", NormKind::Instance, epsilon),
        "LayerNormalization" => ("LayerNormalization", NormKind::Layer { axis: a.int_or("axis", -1)? }, epsilon),
        "RMSNormalization" => ("RMSNormalization", NormKind::Rms { axis: a.int_or("axis", -1)? }, epsilon),
        "GroupNormalization" => {
            let g = a.int("num_groups")?.ok_or("attribute \"num_groups\" is required")?;
            let groups = usize::try_from(g)
                .ok()
                .filter(|&g| g >= 1)
                .ok_or_else(|| format!("attribute \"num_groups\" is {g}, expected >= 1"))?;
            ("GroupNormalization", NormKind::Group { groups, per_channel: cx.opset >= 21 }, epsilon)
        }
        "MeanVarianceNormalization" => {
            let axes = a.ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
            ("MeanVarianceNormalization", NormKind::MeanVariance { axes }, 1e-9)
        }
        "LpNormalization" => {
            let p = a.int_or("p", 2)?;
            if p != 1 && p != 2 {
                return Err(format!("attribute \"p\" is {p}, expected 1 or 2"));
            }
            ("LpNormalization", NormKind::Lp { axis: a.int_or("axis", -1)?, p }, 0.0)
        }
        other => return Err(format!("{other} is not a normalisation operator")),
    };
    let stash = a.int_or("stash_type", 1)?;
    let stat_dtype = i32::try_from(stash)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| d.is_float())
        .ok_or_else(|| format!("attribute \"stash_type\" is {stash}, expected a float type"))?;
    let outputs = if matches!(kind, NormKind::Layer { .. }) { 3 } else { 1 };
    if cx.output_count > outputs {
        return Err(format!("{op_type} has {outputs} output(s), {} requested", cx.output_count));
    }
    Ok(Op::Normalize(Normalize { op_type, kind, epsilon, stat_dtype }))
}

/// The kernel's view of one normalisation: dims, which are reduced, and the
/// strides of scale and bias (0 where they broadcast).
struct NormLayout {
    dims: Vec<usize>,
    reduced: Vec<bool>,
    scale: Vec<i64>,
    bias: Vec<i64>,
}

fn norm_axis(axis: i64, rank: usize, what: &str) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r.max(1) {
        return Err(format!("attribute \"{what}\" is {axis}, expected a value in [{}, {})", -r, r.max(1)));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize }.min(rank))
}

/// Strides of a tensor of shape `p` broadcast (unidirectionally, aligned
/// to the right) to `x`.
fn broadcast_strides(p: &[usize], x: &[usize], what: &str) -> Result<Vec<i64>, String> {
    if p.len() > x.len() {
        return Err(format!("{what} has shape {p:?}, not broadcastable to the input's {x:?}"));
    }
    let lead = x.len() - p.len();
    let mut strides = vec![0i64; x.len()];
    let mut st = 1i64;
    for d in (0..p.len()).rev() {
        if p[d] == x[lead + d] && p[d] != 1 {
            strides[lead + d] = st;
        } else if p[d] != 1 {
            return Err(format!("{what} has shape {p:?}, not broadcastable to the input's {x:?}"));
        }
        st *= p[d] as i64;
    }
    Ok(strides)
}

impl Normalize {
    fn has_bias(&self) -> bool {
        matches!(self.kind, NormKind::Instance | NormKind::Layer { .. } | NormKind::Group { .. })
    }

    fn has_scale(&self) -> bool {
        self.has_bias() || matches!(self.kind, NormKind::Rms { .. })
    }

    fn layout(&self, x: &[usize], scale: Option<&[usize]>, bias: Option<&[usize]>) -> Result<NormLayout, String> {
        let r = x.len();
        let per_dim = |dims: &[usize], reduced: Vec<bool>| -> Result<NormLayout, String> {
            let scale = scale.map(|s| broadcast_strides(s, dims, "scale")).transpose()?.unwrap_or(vec![0; r]);
            let bias = bias.map(|b| broadcast_strides(b, dims, "bias")).transpose()?.unwrap_or(vec![0; r]);
            Ok(NormLayout { dims: dims.to_vec(), reduced, scale, bias })
        };
        match &self.kind {
            NormKind::Layer { axis } | NormKind::Rms { axis } => {
                let a = norm_axis(*axis, r, "axis")?;
                per_dim(x, (0..r).map(|d| d >= a).collect())
            }
            NormKind::Lp { axis, .. } => {
                let a = norm_axis(*axis, r, "axis")?;
                per_dim(x, (0..r).map(|d| d == a).collect())
            }
            NormKind::MeanVariance { axes } => {
                let mut reduced = vec![false; r];
                for &axis in axes {
                    reduced[norm_axis(axis, r, "axes")?] = true;
                }
                per_dim(x, reduced)
            }
            NormKind::Instance | NormKind::Group { .. } => {
                let (n, c, s) = match x {
                    [n, c, rest @ ..] => (*n, *c, rest.iter().product::<usize>()),
                    _ => return Err(format!("input 0 has shape {x:?}, expected [N, C, ...]")),
                };
                let (g, per_channel) = match self.kind {
                    NormKind::Group { groups, per_channel } => (groups, per_channel),
                    _ => (c, true),
                };
                if c % g != 0 {
                    return Err(format!("{c} channels do not split into {g} groups"));
                }
                let want = if per_channel { c } else { g };
                for (i, (what, t)) in [("scale", scale), ("bias", bias)].into_iter().enumerate() {
                    if let Some(t) = t {
                        if t != [want] {
                            return Err(format!("input {} ({what}) has shape {t:?}, expected [{want}]", i + 1));
                        }
                    }
                }
                let strides = if per_channel { vec![0, (c / g) as i64, 1, 0] } else { vec![0, 1, 0, 0] };
                Ok(NormLayout {
                    dims: vec![n, g, c / g, s],
                    reduced: vec![false, false, true, true],
                    scale: strides.clone(),
                    bias: strides,
                })
            }
        }
    }

    /// The statistics' shape as LayerNormalization outputs it.
    fn stat_shape(&self, x: &[DimExpr]) -> Result<Vec<DimExpr>, String> {
        let axis = match self.kind {
            NormKind::Layer { axis } => norm_axis(axis, x.len(), "axis")?,
            _ => x.len(),
        };
        Ok(x.iter().enumerate().map(|(d, v)| if d < axis { v.clone() } else { DimExpr::constant(1) }).collect())
    }

    fn params(
        &self,
        x: (DType, &[usize]),
        scale: Option<(DType, &[usize])>,
        bias: Option<(DType, &[usize])>,
    ) -> Result<NormParams, String> {
        let l = self.layout(x.1, scale.map(|s| s.1), bias.map(|b| b.1))?;
        // Drop unit dims, then merge neighbours that step uniformly.
        let mut dims: Vec<usize> = Vec::new();
        let mut reduced: Vec<bool> = Vec::new();
        let mut strides: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
        for d in 0..l.dims.len() {
            let cur = [l.scale[d], l.bias[d]];
            if l.dims[d] == 1 {
                continue;
            }
            if let Some(&last_r) = reduced.last() {
                let mergeable = last_r == l.reduced[d]
                    && strides.iter().zip(cur).all(|(s, c)| s.last() == Some(&(c * l.dims[d] as i64)));
                if mergeable {
                    let k = dims.len() - 1;
                    dims[k] *= l.dims[d];
                    for (s, c) in strides.iter_mut().zip(cur) {
                        s[k] = c;
                    }
                    continue;
                }
            }
            dims.push(l.dims[d]);
            reduced.push(l.reduced[d]);
            for (s, c) in strides.iter_mut().zip(cur) {
                s.push(c);
            }
        }
        if dims.len() > MAX_RANK {
            return Err(format!("{} dims after merging; at most {MAX_RANK} are supported", dims.len()));
        }
        let mut p = NormParams {
            mode: match self.kind {
                NormKind::Rms { .. } => NORM_RMS,
                NormKind::MeanVariance { .. } => NORM_MVN,
                NormKind::Lp { p: 1, .. } => NORM_L1,
                NormKind::Lp { .. } => NORM_L2,
                _ => NORM_STANDARD,
            },
            rank: dims.len() as i64,
            x_elem: x.0.onnx_code() as i64,
            scale_elem: scale.map_or(x.0, |s| s.0).onnx_code() as i64,
            bias_elem: bias.map_or(x.0, |b| b.0).onnx_code() as i64,
            stat_elem: self.stat_dtype.onnx_code() as i64,
            epsilon: self.epsilon as f64,
            ..Default::default()
        };
        let mut st = 1i64;
        for d in (0..dims.len()).rev() {
            p.dims[d] = dims[d] as i64;
            p.scale_strides[d] = strides[0][d];
            p.bias_strides[d] = strides[1][d];
            if !reduced[d] {
                p.stat_strides[d] = st;
                st *= dims[d] as i64;
            }
        }
        p.stat_count = st;
        Ok(p)
    }
}

impl Normalize {
    /// Portable mode: [`norm_loops::normalize`] over the kernel's params.
    fn lower_portable(&self, cx: &mut Lower, p: &NormParams, scale: bool, bias: bool) -> Result<(), String> {
        let (mean, inv) = (cx.has_output(1), cx.has_output(2));
        let t = NormTensors {
            x: cx.input_ptr(0)?,
            y: cx.output_ptr(0)?,
            scale: if scale { Some(cx.input_ptr(1)?) } else { None },
            bias: if bias { Some(cx.input_ptr(2)?) } else { None },
            mean_out: if mean { Some(cx.output_ptr(1)?) } else { None },
            inv_out: if inv { Some(cx.output_ptr(2)?) } else { None },
        };
        norm_loops::normalize(cx, p, &t)
    }
}

fn is_float_elem(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

impl Operator for Normalize {
    fn name(&self) -> &'static str {
        self.op_type
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        let dims = cx.dims(0)?;
        let grouped = matches!(self.kind, NormKind::Instance | NormKind::Group { .. });
        let x_shape = symbols_as_one(&dims, if grouped { 2 } else { 0 })?;
        let scale = if self.has_scale() { Some(cx.input(1)?) } else { None };
        let bias = if self.has_bias() { cx.opt_input(2) } else { None };
        for (i, t) in [(0, Some(x)), (1, scale), (2, bias)] {
            if let Some(t) = t {
                if !is_float_elem(t.dtype) {
                    return Err(format!("input {i} is {}, expected a float type", t.dtype));
                }
            }
        }
        self.params((x.dtype, &x_shape), scale.map(|t| (t.dtype, t.shape)), bias.map(|t| (t.dtype, t.shape)))?;
        let mut out = vec![Inferred::of_dims(x.dtype, dims.clone())?];
        for _ in 1..cx.output_count {
            out.push(Inferred::of_dims(self.stat_dtype, self.stat_shape(&dims)?)?);
        }
        Ok(out)
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let Ok(x) = cx.input(0) else {
            return 0;
        };
        let t = |i: usize| cx.opt_input(i).map(|t| (t.dtype, t.shape));
        let scale = if self.has_scale() { t(1) } else { None };
        let bias = if self.has_bias() { t(2) } else { None };
        self.params((x.dtype, x.shape), scale, bias).map_or(0, |p| normalize_scratch_bytes(&p))
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let x = cx.input_type(0)?;
        let scale = if self.has_scale() { Some(cx.input_type(1)?) } else { None };
        let bias = if self.has_bias() && cx.has_input(2) { Some(cx.input_type(2)?) } else { None };
        let p =
            self.params((x.0, &x.1), scale.as_ref().map(|t| (t.0, &t.1[..])), bias.as_ref().map(|t| (t.0, &t.1[..])))?;
        if cx.portable() {
            return self.lower_portable(cx, &p, scale.is_some(), bias.is_some());
        }
        let scratch = if normalize_scratch_bytes(&p) > 0 { cx.scratch_ptr()? } else { cx.iconst(0) };
        let params = cx.params(&p)?;
        let xp = cx.input_ptr(0)?;
        let sp = if scale.is_some() { cx.input_ptr(1)? } else { cx.iconst(0) };
        let bp = if bias.is_some() { cx.input_ptr(2)? } else { cx.iconst(0) };
        let yp = cx.output_ptr(0)?;
        let mut stats = Vec::new();
        for k in 1..3 {
            stats.push(if cx.has_output(k) { cx.output_ptr(k)? } else { cx.iconst(0) });
        }
        cx.call_checked(
            kernels::onnxc_normalize,
            (params, Ptr(xp), Ptr(sp), Ptr(bp), Ptr(yp), Ptr(stats[0]), Ptr(stats[1]), Ptr(scratch)),
        )
    }
}
