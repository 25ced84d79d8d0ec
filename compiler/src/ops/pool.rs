//! Pooling: MaxPool (with the optional Indices output), AveragePool, LpPool
//! and their Global forms, as one [`Pool`] with a [`PoolKind`].
//!
//! Attributes by opset (absent ones take the later defaults, so one form
//! serves every version): MaxPool `storage_order` and Indices from 8,
//! `ceil_mode` and `dilations` from 10; AveragePool `count_include_pad` from
//! 7, `ceil_mode` from 10, `dilations` from 19; LpPool/GlobalLpPool `p` is a
//! float in opset 1 and an int from 2 (both read into one `f64`),
//! `ceil_mode`/`dilations` from 18. Window geometry (auto_pad, pads,
//! ceil_mode) is [`super::conv::Window`], shared with Conv.
//!
//! Type constraints: f16, f32, f64 (bf16 from opset 22; MaxPool also i8,
//! u8). f32 and f64 are lowered through `onnxc_pool_{f32,f64}`, f16/bf16
//! through the f32 kernel on staged copies ([`crate::codegen::staging`]); MaxPool on
//! i8/u8 converts to f32 in scratch (exact for 8-bit values), pools, and
//! converts back.
//!
//! Also here, the data-dependent pools (kernels in `generic/roi.rs`, every
//! index read from a tensor checked at run time):
//! * MaxUnpool (9, 11, 22): `X`, `I` (i64 flat indices into the unpooled
//!   tensor), optional `output_shape` (from 11; a compile-time input, each
//!   dim at least the inferred one, the result placed at the origin);
//!   `kernel_shape` (required), `pads`, `strides`. Output dims default to
//!   `(in - 1) * stride - pads + kernel`. Any float X (moved as bytes).
//! * RoiAlign (10, 16, 22): `X [N, C, H, W]`, `rois [R, 4]`,
//!   `batch_indices [R]` (i64); `mode` avg/max, `output_height`/`width`
//!   (1), `sampling_ratio` (0 = adaptive), `spatial_scale` (1.0),
//!   `coordinate_transformation_mode` (from 16, default half_pixel; opset
//!   10 behaves as output_half_pixel). f32, and f16/bf16 staged.
//! * MaxRoiPool (1, 22): `X [N, C, H, W]`, `rois [R, 5]` (batch index
//!   first); `pooled_shape` (required), `spatial_scale` (1.0). f32, and
//!   f16/bf16 staged.

use super::conv::{dims_array, window_size, AutoPad, Geometry, Window};
use super::elementwise::{cast, compute_type};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{clif_type, InstBuilder, Lower, MemFlagsData, Value};
use crate::import::NodeImport;
use crate::ir::dim_expr::{DimExpr, SymbolFacts};
use crate::ir::shape::dims_text;
use crate::ir::{DType, Tensor};
use onnxc_runtime::{
    PoolParams, RoiParams, UnpoolParams, MAX_RANK, MAX_SPATIAL_RANK, POOL_AVERAGE, POOL_LP, POOL_MAX, ROI_AVG, ROI_MAX,
};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PoolKind {
    Max { column_major: bool },
    Average { count_include_pad: bool },
    Lp { p: f64 },
}

#[derive(Clone, Debug)]
pub struct Pool {
    pub op_type: &'static str,
    pub kind: PoolKind,
    /// Global pools take the whole spatial extent as their window.
    pub global: bool,
    pub window: Window,
    /// Input and output are in the blocked layout (`[N, C/8, H, W, 8]`,
    /// see [`super::layout`]); set by `passes::choose_layout`.
    pub blocked: bool,
}

fn flag(cx: &NodeImport, name: &str) -> Result<bool, String> {
    match cx.attrs.int_or(name, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("attribute \"{name}\" is {v}, expected 0 or 1")),
    }
}

/// LpPool's `p`: a float attribute in opset 1, an int later.
fn lp_norm(cx: &NodeImport) -> Result<f64, String> {
    let p = if cx.opset < 2 { cx.attrs.float_or("p", 2.0)? as f64 } else { cx.attrs.int_or("p", 2)? as f64 };
    if p <= 0.0 {
        return Err(format!("attribute \"p\" is {p}, expected a positive value"));
    }
    Ok(p)
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let (op_type, global): (&'static str, bool) = match cx.op_type {
        "MaxPool" => ("MaxPool", false),
        "AveragePool" => ("AveragePool", false),
        "LpPool" => ("LpPool", false),
        "GlobalMaxPool" => ("GlobalMaxPool", true),
        "GlobalAveragePool" => ("GlobalAveragePool", true),
        "GlobalLpPool" => ("GlobalLpPool", true),
        other => return Err(format!("{other} is not a pooling operator")),
    };
    let kind = match op_type {
        "MaxPool" | "GlobalMaxPool" => PoolKind::Max { column_major: flag(cx, "storage_order")? },
        "AveragePool" | "GlobalAveragePool" => PoolKind::Average { count_include_pad: flag(cx, "count_include_pad")? },
        _ => PoolKind::Lp { p: lp_norm(cx)? },
    };
    let window = Window::parse(&cx.attrs)?;
    if !global && window.kernel_shape.is_empty() {
        return Err("attribute \"kernel_shape\" is required".into());
    }
    if cx.output_count > 1 && op_type != "MaxPool" {
        return Err(format!("{op_type} has one output"));
    }
    Ok(Op::Pool(Pool { op_type, kind, global, window, blocked: false }))
}

impl Pool {
    /// MaxPool on 8-bit integers runs the f32 kernel on converted copies.
    fn via_f32(&self, dtype: DType) -> bool {
        matches!(self.kind, PoolKind::Max { .. }) && matches!(dtype, DType::I8 | DType::U8)
    }

    fn geometry(&self, spatial: &[usize]) -> Result<Geometry, String> {
        if self.global {
            let r = spatial.len();
            if r > MAX_SPATIAL_RANK {
                return Err(format!("{r} spatial dims; at most {MAX_SPATIAL_RANK} are supported"));
            }
            return Ok(Geometry {
                out: vec![1; r],
                kernel: spatial.to_vec(),
                strides: vec![1; r],
                dilations: vec![1; r],
                pads_begin: vec![0; r],
                pads_end: vec![0; r],
            });
        }
        self.effective_window().resolve(spatial, &self.window.kernel_shape)
    }

    /// The window, without `ceil_mode` under `auto_pad`: the reference
    /// ignores it there; so do we.
    fn effective_window(&self) -> std::borrow::Cow<'_, Window> {
        if self.window.ceil_mode && self.window.auto_pad != AutoPad::NotSet {
            let mut w = self.window.clone();
            w.ceil_mode = false;
            return std::borrow::Cow::Owned(w);
        }
        std::borrow::Cow::Borrowed(&self.window)
    }

    /// Symbolic inference: the output dims for input dims of which some
    /// is symbolic (not blocked: passes have not run).
    fn symbolic_output(&self, x: &[DimExpr], facts: &SymbolFacts) -> Result<Vec<DimExpr>, String> {
        if x.len() < 2 || (!self.global && x.len() < 3) {
            return Err(format!("input 0 is {}, expected [N, C, spatial...]", dims_text(x)));
        }
        if self.blocked {
            return Err("a blocked pool is not inferred over symbolic dims".into());
        }
        let spatial = match self.global {
            true => vec![DimExpr::constant(1); x.len() - 2],
            false => self.effective_window().output_dims(&x[2..], &self.window.kernel_shape, facts)?,
        };
        Ok(x[..2].iter().cloned().chain(spatial).collect())
    }

    /// The kernel parameters for input shape `x` (blocked when the pool is).
    pub(crate) fn params(&self, x: &[usize]) -> Result<PoolParams, String> {
        if self.blocked {
            let x = super::layout::unblocked_shape(x)
                .ok_or_else(|| format!("input 0 has shape {x:?}, which is not blocked"))?;
            return self.layout_params(&x);
        }
        self.layout_params(x)
    }

    fn layout_params(&self, x: &[usize]) -> Result<PoolParams, String> {
        if x.len() < 2 || (!self.global && x.len() < 3) {
            return Err(format!("input 0 has shape {x:?}, expected [N, C, spatial...]"));
        }
        let g = self.geometry(&x[2..])?;
        let (kind, count_include_pad, p_norm, storage_order) = match self.kind {
            PoolKind::Max { column_major } => (POOL_MAX, 0, 0.0, column_major as i64),
            PoolKind::Average { count_include_pad } => (POOL_AVERAGE, count_include_pad as i64, 0.0, 0),
            PoolKind::Lp { p } => (POOL_LP, 0, p, 0),
        };
        Ok(PoolParams {
            kind,
            batch: x[0] as i64,
            channels: x[1] as i64,
            spatial_rank: g.out.len() as i64,
            in_spatial: dims_array(&x[2..]),
            out_spatial: dims_array(&g.out),
            kernel: dims_array(&g.kernel),
            strides: dims_array(&g.strides),
            dilations: dims_array(&g.dilations),
            pads_begin: dims_array(&g.pads_begin),
            pads_end: dims_array(&g.pads_end),
            count_include_pad,
            p_norm,
            storage_order,
        })
    }
}

impl Operator for Pool {
    fn name(&self) -> &'static str {
        self.op_type
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !x.dtype.is_float() && !self.via_f32(x.dtype) {
            return Err(format!("element type {} is not supported", x.dtype));
        }
        let dims = cx.dims(0)?;
        if dims.iter().any(|d| d.as_size().is_none()) {
            let shape = self.symbolic_output(&dims, cx.facts())?;
            let mut out = vec![Inferred::of_dims(x.dtype, shape.clone())?];
            if cx.output_count > 1 {
                out.push(Inferred::of_dims(DType::I64, shape)?);
            }
            return Ok(out);
        }
        let p = self.params(x.shape)?;
        let r = p.spatial_rank as usize;
        let (n, c) = (p.batch as usize, p.channels as usize);
        let mut shape: Vec<usize> = [n, c].into_iter().chain(p.out_spatial[..r].iter().map(|&d| d as usize)).collect();
        if self.blocked {
            if x.dtype != DType::F32 || cx.output_count > 1 {
                return Err("a blocked pool needs f32 and has one output".into());
            }
            shape = super::layout::blocked_shape(&shape).ok_or("the channels are not whole blocks")?;
        }
        let mut out = vec![Inferred::new(x.dtype, shape.clone())];
        if cx.output_count > 1 {
            out.push(Inferred::new(DType::I64, shape));
        }
        Ok(out)
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        match cx.input(0) {
            Ok(x) if self.via_f32(x.dtype) => {
                self.params(x.shape).map_or(0, |p| 4 * (element_count(x.shape) + out_count(&p)))
            }
            _ => 0,
        }
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, x) = cx.input_type(0)?;
        let p = self.params(&x)?;
        if cx.portable() && !self.via_f32(dtype) {
            return crate::codegen::window_loops::pool(cx, dtype, &p);
        }
        let xp = cx.input_ptr(0)?;
        let yp = cx.output_ptr(0)?;
        if self.blocked {
            let params = cx.params(&p)?;
            let parallel = cx.parallel_ptr();
            return cx.call_checked(kernels::onnxc_pool_blocked_f32, (params, Ptr(xp), Ptr(yp), parallel));
        }
        let ip = if cx.has_output(1) { cx.output_ptr(1)? } else { cx.iconst(0) };
        if !self.via_f32(dtype) {
            let params = cx.params(&p)?;
            let parallel = cx.parallel_ptr();
            return cx.call_checked(
                kernels::by_dtype(kernels::onnxc_pool_f32, kernels::onnxc_pool_f64, dtype),
                (params, Ptr(xp), Ptr(yp), Ptr(ip), parallel),
            );
        }
        let (n_in, n_out) = (element_count(&x), out_count(&p));
        let xf = cx.scratch_ptr()?;
        let yf = cx.ins().iadd_imm_s(xf, 4 * n_in as i64);
        convert(cx, xp, dtype, xf, DType::F32, n_in)?;
        if cx.portable() {
            cx.stage_input(0, xf, DType::F32);
            cx.stage_output(0, yf, DType::F32);
            crate::codegen::window_loops::pool(cx, DType::F32, &p)?;
            cx.unstage();
        } else {
            let (params, parallel) = (cx.params(&p)?, cx.parallel_ptr());
            cx.call_checked(kernels::onnxc_pool_f32, (params, Ptr(xf), Ptr(yf), Ptr(ip), parallel))?;
        }
        convert(cx, yf, DType::F32, yp, dtype, n_out)
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

fn element_count(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Elements of the pool's output.
fn out_count(p: &PoolParams) -> usize {
    let r = usize::try_from(p.spatial_rank).unwrap_or(0);
    let spatial: i64 = p.out_spatial.iter().take(r).product();
    (p.batch * p.channels * spatial).max(0) as usize
}

/// `dst[i] = cast(src[i])` for `count` contiguous elements.
fn convert(cx: &mut Lower, src: Value, from: DType, dst: Value, to: DType, count: usize) -> Result<(), String> {
    let flags = MemFlagsData::trusted();
    let l = cx.loop_begin(count);
    let s = cx.ins().imul_imm_s(l.index, from.size() as i64);
    let s = cx.ins().iadd(src, s);
    let d = cx.ins().imul_imm_s(l.index, to.size() as i64);
    let d = cx.ins().iadd(dst, d);
    let v = cx.ins().load(clif_type(from), flags, s, 0);
    let v = cast(cx, v, from, to)?;
    cx.ins().store(flags, v, d, 0);
    cx.loop_end(l);
    Ok(())
}

#[derive(Clone, Debug)]
pub struct MaxUnpool {
    pub window: Window,
}

pub fn import_max_unpool(cx: &mut NodeImport) -> Result<Op, String> {
    let window = Window::parse(&cx.attrs)?;
    if window.kernel_shape.is_empty() {
        return Err("attribute \"kernel_shape\" is required".into());
    }
    Ok(Op::MaxUnpool(MaxUnpool { window }))
}

impl MaxUnpool {
    /// The unpooled shape the indices address, and the output shape.
    fn shapes(&self, x: &[usize], output_shape: Option<&Tensor>) -> Result<(Vec<usize>, Vec<usize>), String> {
        let k = &self.window.kernel_shape;
        let r = k.len();
        if x.len() != r + 2 || x.len() > MAX_RANK {
            return Err(format!("input 0 has shape {x:?}, expected [N, C] and {r} spatial dims (kernel_shape)"));
        }
        let strides = if self.window.strides.is_empty() { vec![1; r] } else { self.window.strides.clone() };
        let pads = if self.window.pads.is_empty() { vec![0; 2 * r] } else { self.window.pads.clone() };
        if strides.len() != r || pads.len() != 2 * r {
            return Err(format!("attributes \"strides\"/\"pads\" must have {r}/{} values", 2 * r));
        }
        let mut dims = x[..2].to_vec();
        for d in 0..r {
            let (s, kd) = (strides[d], k[d]);
            let full = window_size((x[2 + d].max(1) - 1).checked_mul(s).and_then(|v| v.checked_add(kd)), || {
                format!("spatial dim {d}: input {} with stride {s} and kernel {kd}", x[2 + d])
            })?;
            let (pb, pe) = (pads[d], pads[r + d]);
            let dim = pb
                .checked_add(pe)
                .and_then(|p| full.checked_sub(p))
                .ok_or_else(|| format!("spatial dim {d}: pads {pb} and {pe} exceed the unpooled size {full}"))?;
            dims.push(dim);
        }
        let out = match output_shape {
            None => dims.clone(),
            Some(t) => {
                let v = t.to_i64s();
                let out: Vec<usize> = v.iter().map(|&d| usize::try_from(d).unwrap_or(0)).collect();
                if out.len() != dims.len() || out.iter().zip(&dims).any(|(o, d)| o < d) || v.iter().any(|&d| d < 0) {
                    return Err(format!("output_shape {v:?} must have rank {} and dims at least {dims:?}", dims.len()));
                }
                out
            }
        };
        Ok((dims, out))
    }
}

impl Operator for MaxUnpool {
    fn name(&self) -> &'static str {
        "MaxUnpool"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (x, i) = (cx.input(0)?, cx.input(1)?);
        if !x.dtype.is_float() {
            return Err(format!("element type {} is not supported", x.dtype));
        }
        if i.dtype != DType::I64 || i.shape != x.shape {
            return Err(format!("indices are {}{:?}, expected i64{:?}", i.dtype, i.shape, x.shape));
        }
        let (_, out) = self.shapes(x.shape, cx.opt_const_input(2)?)?;
        Ok(vec![Inferred::new(x.dtype, out)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, x) = cx.input_type(0)?;
        let output_shape = if cx.has_input(2) {
            Some(cx.const_input(2).ok_or("input 2 (output_shape) must be a constant")?.clone())
        } else {
            None
        };
        let (dims, out) = self.shapes(&x, output_shape.as_ref())?;
        let p = UnpoolParams {
            rank: dims.len() as i64,
            dims: dims_array(&dims),
            out_dims: dims_array(&out),
            count: element_count(&x) as i64,
            elem_size: dtype.size() as i64,
        };
        let (xp, ip, yp) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?);
        if cx.portable() {
            return crate::codegen::scatter_loops::max_unpool(cx, &p, [xp, ip, yp]);
        }
        let params = cx.params(&p)?;
        cx.call_checked(kernels::onnxc_max_unpool, (params, Ptr(xp), Ptr(ip), Ptr(yp)))
    }
}

/// RoiAlign and MaxRoiPool.
#[derive(Clone, Debug)]
pub struct RoiPool {
    pub op_type: &'static str,
    /// `ROI_AVG` or `ROI_MAX` (RoiAlign); MaxRoiPool always takes the max.
    pub mode: i64,
    pub out_h: usize,
    pub out_w: usize,
    pub sampling_ratio: usize,
    pub spatial_scale: f32,
    pub half_pixel: bool,
}

pub fn import_roi(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let spatial_scale = a.float_or("spatial_scale", 1.0)?;
    let size = |name: &str, v: i64| {
        usize::try_from(v).ok().filter(|&v| v >= 1).ok_or_else(|| format!("attribute \"{name}\" is {v}, expected >= 1"))
    };
    if cx.op_type == "MaxRoiPool" {
        let shape = a.ints("pooled_shape")?.ok_or("attribute \"pooled_shape\" is required")?;
        let [h, w] = shape[..] else {
            return Err(format!("attribute \"pooled_shape\" is {shape:?}, expected 2 values"));
        };
        return Ok(Op::RoiPool(RoiPool {
            op_type: "MaxRoiPool",
            mode: ROI_MAX,
            out_h: size("pooled_shape", h)?,
            out_w: size("pooled_shape", w)?,
            sampling_ratio: 0,
            spatial_scale,
            half_pixel: false,
        }));
    }
    let mode = match a.string_or("mode", "avg")?.as_str() {
        "avg" => ROI_AVG,
        "max" => ROI_MAX,
        other => return Err(format!("attribute \"mode\" is \"{other}\", expected avg or max")),
    };
    let default_ctm = if cx.opset >= 16 { "half_pixel" } else { "output_half_pixel" };
    let half_pixel = match a.string_or("coordinate_transformation_mode", default_ctm)?.as_str() {
        "half_pixel" => true,
        "output_half_pixel" => false,
        other => {
            return Err(format!(
                "attribute \"coordinate_transformation_mode\" is \"{other}\", expected half_pixel or output_half_pixel"
            ))
        }
    };
    let ratio = a.int_or("sampling_ratio", 0)?;
    Ok(Op::RoiPool(RoiPool {
        op_type: "RoiAlign",
        mode,
        out_h: size("output_height", a.int_or("output_height", 1)?)?,
        out_w: size("output_width", a.int_or("output_width", 1)?)?,
        sampling_ratio: usize::try_from(ratio)
            .map_err(|_| format!("attribute \"sampling_ratio\" is {ratio}, expected >= 0"))?,
        spatial_scale,
        half_pixel,
    }))
}

impl RoiPool {
    fn roi_cols(&self) -> usize {
        if self.op_type == "MaxRoiPool" {
            5
        } else {
            4
        }
    }

    fn params(&self, x: &[usize], rois: &[usize]) -> Result<RoiParams, String> {
        let [n, c, h, w] = *x else {
            return Err(format!("input 0 has shape {x:?}, expected [N, C, H, W]"));
        };
        let cols = self.roi_cols();
        let [num_rois, k] = *rois else {
            return Err(format!("rois have shape {rois:?}, expected [num_rois, {cols}]"));
        };
        if k != cols {
            return Err(format!("rois have shape {rois:?}, expected [num_rois, {cols}]"));
        }
        Ok(RoiParams {
            batch: n as i64,
            channels: c as i64,
            height: h as i64,
            width: w as i64,
            num_rois: num_rois as i64,
            out_h: self.out_h as i64,
            out_w: self.out_w as i64,
            sampling_ratio: self.sampling_ratio as i64,
            mode: self.mode,
            half_pixel: self.half_pixel as i64,
            spatial_scale: self.spatial_scale as f64,
        })
    }
}

impl Operator for RoiPool {
    fn name(&self) -> &'static str {
        self.op_type
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (x, rois) = (cx.input(0)?, cx.input(1)?);
        if compute_type(x.dtype) != DType::F32 || compute_type(rois.dtype) != DType::F32 {
            return Err(format!("element types {}/{} are not supported (f32, f16, bf16 only)", x.dtype, rois.dtype));
        }
        let p = self.params(x.shape, rois.shape)?;
        if self.op_type == "RoiAlign" {
            let b = cx.input(2)?;
            if b.dtype != DType::I64 || b.shape != [p.num_rois as usize] {
                return Err(format!("batch_indices are {}{:?}, expected i64[{}]", b.dtype, b.shape, p.num_rois));
            }
        }
        Ok(vec![Inferred::new(x.dtype, vec![p.num_rois as usize, x.shape[1], self.out_h, self.out_w])])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, x) = cx.input_type(0)?;
        let (_, rois) = cx.input_type(1)?;
        let p = self.params(&x, &rois)?;
        if cx.portable() && self.op_type == "RoiAlign" {
            return crate::codegen::window_loops::roi_align(cx, &p);
        }
        let params = cx.params(&p)?;
        let xp = cx.input_ptr(0)?;
        let rp = cx.input_ptr(1)?;
        let yp = cx.output_ptr(0)?;
        if self.op_type == "MaxRoiPool" {
            return cx.call_checked(kernels::onnxc_max_roi_pool_f32, (params, Ptr(xp), Ptr(rp), Ptr(yp)));
        }
        let bp = cx.input_ptr(2)?;
        cx.call_checked(kernels::onnxc_roi_align_f32, (params, Ptr(xp), Ptr(rp), Ptr(bp), Ptr(yp)))
    }

    fn stages_halves(&self) -> bool {
        true
    }
}
