//! Convolution (Conv, opsets 1 and 11; 1-D to 6-D spatial), and the sliding
//! window geometry ([`Window`]) that Conv and the pooling operators share.
//!
//! Conv: `X [N, C, spatial...]`, `W [M, C/group, kernel...]`, optional bias
//! `B [M]`; attributes `auto_pad` (NOTSET, SAME_UPPER, SAME_LOWER, VALID),
//! `pads`, `strides`, `dilations`, `group`, `kernel_shape` (inferred from W
//! when absent, checked against W when present). The opset versions differ
//! only in type constraints. Type constraints: f16, f32, f64; only f32 is
//! lowered (`onnxc_conv_f32`, im2col + gemm, with planned scratch).

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::attrs::Attrs;
use crate::import::NodeImport;
use crate::ir::DType;
use onnxc_runtime::{conv_scratch_elems, ConvParams, MAX_RANK, MAX_SPATIAL_RANK};

/// How the spatial padding is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AutoPad {
    /// Explicit `pads` (default all zero).
    NotSet,
    /// Output `ceil(in / stride)`, extra padding at the end.
    SameUpper,
    /// Output `ceil(in / stride)`, extra padding at the beginning.
    SameLower,
    /// No padding.
    Valid,
}

/// Sliding-window attributes of Conv and the pools, parsed once. Empty
/// vectors mean "the default for every spatial dim".
#[derive(Clone, Debug)]
pub struct Window {
    pub auto_pad: AutoPad,
    pub kernel_shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    /// `[begin..., end...]`, as in the `pads` attribute.
    pub pads: Vec<usize>,
    pub ceil_mode: bool,
}

/// The window geometry resolved against one input's spatial shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    pub out: Vec<usize>,
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads_begin: Vec<usize>,
    pub pads_end: Vec<usize>,
}

fn positive_list(a: &Attrs, name: &str) -> Result<Vec<usize>, String> {
    let list = a.ints(name)?.unwrap_or_default();
    list.iter()
        .map(|&v| {
            usize::try_from(v)
                .ok()
                .filter(|&v| v >= 1)
                .ok_or_else(|| format!("attribute \"{name}\" has {v}, expected values >= 1"))
        })
        .collect()
}

impl Window {
    /// Parses `auto_pad`, `kernel_shape`, `strides`, `dilations`, `pads` and
    /// `ceil_mode` (absent attributes take their defaults).
    pub fn parse(a: &Attrs) -> Result<Window, String> {
        let auto_pad = match a.string_or("auto_pad", "NOTSET")?.as_str() {
            "NOTSET" | "" => AutoPad::NotSet,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            "VALID" => AutoPad::Valid,
            other => {
                return Err(format!(
                    "attribute \"auto_pad\" is \"{other}\", expected NOTSET, SAME_UPPER, SAME_LOWER or VALID"
                ))
            }
        };
        let pads = a.ints("pads")?.unwrap_or_default();
        let pads = pads
            .iter()
            .map(|&v| usize::try_from(v).map_err(|_| format!("attribute \"pads\" has {v}, expected values >= 0")))
            .collect::<Result<Vec<_>, _>>()?;
        let ceil_mode = match a.int_or("ceil_mode", 0)? {
            0 => false,
            1 => true,
            v => return Err(format!("attribute \"ceil_mode\" is {v}, expected 0 or 1")),
        };
        Ok(Window {
            auto_pad,
            kernel_shape: positive_list(a, "kernel_shape")?,
            strides: positive_list(a, "strides")?,
            dilations: positive_list(a, "dilations")?,
            pads,
            ceil_mode,
        })
    }

    /// Resolves the geometry for `input` spatial dims and `kernel` (the
    /// kernel shape: from the attribute or, for Conv, from W).
    pub fn resolve(&self, input: &[usize], kernel: &[usize]) -> Result<Geometry, String> {
        let r = input.len();
        if r == 0 || r > MAX_SPATIAL_RANK {
            return Err(format!("{r} spatial dims; 1 to {MAX_SPATIAL_RANK} are supported"));
        }
        let list = |name: &str, v: &[usize], len: usize| -> Result<Vec<usize>, String> {
            if v.is_empty() {
                Ok(vec![if name == "pads" { 0 } else { 1 }; len])
            } else if v.len() == len {
                Ok(v.to_vec())
            } else {
                Err(format!("attribute \"{name}\" has {} values, expected {len}", v.len()))
            }
        };
        if kernel.len() != r {
            return Err(format!("kernel has {} dims, the input {r} spatial dims", kernel.len()));
        }
        if let Some(&k) = kernel.iter().find(|&&k| k == 0) {
            return Err(format!("kernel dim {k} must be at least 1"));
        }
        let strides = list("strides", &self.strides, r)?;
        let dilations = list("dilations", &self.dilations, r)?;
        let pads = list("pads", &self.pads, 2 * r)?;
        let mut g = Geometry {
            out: Vec::with_capacity(r),
            kernel: kernel.to_vec(),
            strides: strides.clone(),
            dilations: dilations.clone(),
            pads_begin: vec![0; r],
            pads_end: vec![0; r],
        };
        for d in 0..r {
            let (x, s) = (input[d], strides[d]);
            let span = (kernel[d] - 1) * dilations[d] + 1;
            let out = match self.auto_pad {
                AutoPad::NotSet => {
                    let (pb, pe) = (pads[d], pads[r + d]);
                    g.pads_begin[d] = pb;
                    g.pads_end[d] = pe;
                    let padded = x + pb + pe;
                    if padded < span {
                        return Err(format!(
                            "spatial dim {d}: window of {span} does not fit the padded input of {padded}"
                        ));
                    }
                    let mut out = (padded - span) / s + 1;
                    if self.ceil_mode {
                        out = (padded - span).div_ceil(s) + 1;
                        // The last window must start inside the input or
                        // the begin padding.
                        if (out - 1) * s >= x + pb {
                            out -= 1;
                        }
                    }
                    out
                }
                AutoPad::SameUpper | AutoPad::SameLower => {
                    let out = x.div_ceil(s);
                    let total = ((out.max(1) - 1) * s + span).saturating_sub(x);
                    let small = total / 2;
                    let (pb, pe) = if self.auto_pad == AutoPad::SameUpper {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    };
                    g.pads_begin[d] = pb;
                    g.pads_end[d] = pe;
                    out
                }
                AutoPad::Valid => {
                    if x < span {
                        return Err(format!("spatial dim {d}: window of {span} does not fit the input of {x}"));
                    }
                    (x - span) / s + 1
                }
            };
            g.out.push(out);
        }
        Ok(g)
    }
}

/// Copies `v` into the front of a kernel's fixed-size dims array.
pub fn dims_array(v: &[usize]) -> [i64; MAX_RANK] {
    let mut a = [0i64; MAX_RANK];
    for (dst, &src) in a.iter_mut().zip(v) {
        *dst = src as i64;
    }
    a
}

#[derive(Clone, Debug)]
pub struct Conv {
    pub window: Window,
    pub group: usize,
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let window = Window::parse(&cx.attrs)?;
    if window.ceil_mode {
        return Err("Conv has no attribute \"ceil_mode\"".into());
    }
    let group = cx.attrs.int_or("group", 1)?;
    let group = usize::try_from(group)
        .ok()
        .filter(|&g| g >= 1)
        .ok_or_else(|| format!("attribute \"group\" is {group}, expected >= 1"))?;
    Ok(Op::Conv(Conv { window, group }))
}

impl Conv {
    /// The kernel parameters (which fix the output shape) for X and W shapes.
    fn params(&self, x: &[usize], w: &[usize]) -> Result<ConvParams, String> {
        if x.len() < 3 {
            return Err(format!("input 0 has shape {x:?}, expected [N, C, spatial...] with at least one spatial dim"));
        }
        if w.len() != x.len() {
            return Err(format!("weights have shape {w:?}, expected rank {} like the input", x.len()));
        }
        let (n, c) = (x[0], x[1]);
        let (m, cg) = (w[0], w[1]);
        let g = self.group;
        if c % g != 0 || m % g != 0 || cg * g != c {
            return Err(format!("channels do not match: input has {c}, weights {m}x{cg}, group {g}"));
        }
        let kernel = &w[2..];
        if !self.window.kernel_shape.is_empty() && self.window.kernel_shape != kernel {
            return Err(format!(
                "attribute \"kernel_shape\" is {:?}, the weights' kernel is {kernel:?}",
                self.window.kernel_shape
            ));
        }
        let geo = self.window.resolve(&x[2..], kernel)?;
        Ok(ConvParams {
            batch: n as i64,
            in_channels: c as i64,
            out_channels: m as i64,
            group: g as i64,
            spatial_rank: geo.out.len() as i64,
            in_spatial: dims_array(&x[2..]),
            out_spatial: dims_array(&geo.out),
            kernel: dims_array(&geo.kernel),
            strides: dims_array(&geo.strides),
            dilations: dims_array(&geo.dilations),
            pads_begin: dims_array(&geo.pads_begin),
        })
    }

    fn output_shape(p: &ConvParams) -> Vec<usize> {
        let r = p.spatial_rank as usize;
        [p.batch, p.out_channels].iter().chain(&p.out_spatial[..r]).map(|&d| d as usize).collect()
    }
}

impl Operator for Conv {
    fn name(&self) -> &'static str {
        "Conv"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (x, w) = (cx.input(0)?, cx.input(1)?);
        if x.dtype != DType::F32 {
            return Err(format!("element type {} is not supported", x.dtype));
        }
        if w.dtype != x.dtype {
            return Err(format!("weights are {}, expected {}", w.dtype, x.dtype));
        }
        let p = self.params(x.shape, w.shape)?;
        if let Some(b) = cx.opt_input(2) {
            if b.dtype != x.dtype || b.shape != [p.out_channels as usize] {
                return Err(format!("bias is {}{:?}, expected {}[{}]", b.dtype, b.shape, x.dtype, p.out_channels));
            }
        }
        Ok(vec![Inferred::new(x.dtype, Self::output_shape(&p))])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let (Ok(x), Ok(w)) = (cx.input(0), cx.input(1)) else {
            return 0;
        };
        self.params(x.shape, w.shape).map_or(0, |p| conv_scratch_elems(&p) * 4)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, x) = cx.input_type(0)?;
        let (_, w) = cx.input_type(1)?;
        let p = self.params(&x, &w)?;
        let scratch = if conv_scratch_elems(&p) > 0 { cx.scratch_ptr()? } else { cx.iconst(0) };
        let params = cx.params(&p)?;
        let xp = cx.input_ptr(0)?;
        let wp = cx.input_ptr(1)?;
        let bp = cx.opt_input_ptr(2);
        let yp = cx.output_ptr(0)?;
        cx.call_checked("onnxc_conv_f32", &[params, xp, wp, bp, yp, scratch])
    }
}
