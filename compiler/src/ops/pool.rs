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
//! Type constraints: f16, f32, f64 (MaxPool also i8, u8). f32 is lowered
//! through `onnxc_pool_f32`; MaxPool on i8/u8 converts to f32 in scratch
//! (exact for 8-bit values), pools, and converts back.

use super::conv::{dims_array, AutoPad, Geometry, Window};
use super::elementwise::cast;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::{clif_type, InstBuilder, Lower, MemFlagsData, Value};
use crate::import::NodeImport;
use crate::ir::DType;
use onnxc_runtime::{PoolParams, MAX_SPATIAL_RANK, POOL_AVERAGE, POOL_LP, POOL_MAX};

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
    Ok(Op::Pool(Pool { op_type, kind, global, window }))
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
        if self.window.ceil_mode && self.window.auto_pad != AutoPad::NotSet {
            // The reference ignores ceil_mode with auto_pad; so do we.
            let mut w = self.window.clone();
            w.ceil_mode = false;
            return w.resolve(spatial, &self.window.kernel_shape);
        }
        self.window.resolve(spatial, &self.window.kernel_shape)
    }

    fn params(&self, x: &[usize]) -> Result<PoolParams, String> {
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
        if x.dtype != DType::F32 && !self.via_f32(x.dtype) {
            return Err(format!("element type {} is not supported", x.dtype));
        }
        let p = self.params(x.shape)?;
        let r = p.spatial_rank as usize;
        let shape: Vec<usize> =
            x.shape[..2].iter().copied().chain(p.out_spatial[..r].iter().map(|&d| d as usize)).collect();
        let mut out = vec![Inferred::new(x.dtype, shape.clone())];
        if cx.output_count > 1 {
            out.push(Inferred::new(DType::I64, shape));
        }
        Ok(out)
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
        let params = cx.params(&p)?;
        let xp = cx.input_ptr(0)?;
        let yp = cx.output_ptr(0)?;
        let ip = if cx.has_output(1) { cx.output_ptr(1)? } else { cx.iconst(0) };
        if !self.via_f32(dtype) {
            return cx.call_checked("onnxc_pool_f32", &[params, xp, yp, ip]);
        }
        let (n_in, n_out) = (element_count(&x), out_count(&p));
        let xf = cx.scratch_ptr()?;
        let yf = cx.ins().iadd_imm_s(xf, 4 * n_in as i64);
        convert(cx, xp, dtype, xf, DType::F32, n_in)?;
        cx.call_checked("onnxc_pool_f32", &[params, xf, yf, ip])?;
        convert(cx, yf, DType::F32, yp, dtype, n_out)
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
