//! Convolution (Conv, opsets 1 and 11; 1-D to 6-D spatial), its deformable
//! form (DeformConv), its transpose (ConvTranspose, Col2Im), and the sliding
//! window geometry ([`Window`]) that Conv and the pooling operators share.
//!
//! Conv: `X [N, C, spatial...]`, `W [M, C/group, kernel...]`, optional bias
//! `B [M]`; attributes `auto_pad` (NOTSET, SAME_UPPER, SAME_LOWER, VALID),
//! `pads`, `strides`, `dilations`, `group`, `kernel_shape` (inferred from W
//! when absent, checked against W when present). The opset versions differ
//! only in type constraints. Type constraints: f16, f32, f64 (bf16 from
//! opset 22); f32 and f64 are lowered through `onnxc_conv_{f32,f64}`
//! (im2col + gemm, with planned scratch), f16/bf16 through the f32 kernel
//! on staged copies ([`crate::codegen::staging`]), and likewise ConvTranspose and
//! Col2Im. Portable mode lowers Conv, ConvTranspose, Col2Im and DeformConv as direct loops
//! instead ([`crate::codegen::window_loops`],
//! [`crate::codegen::conv_transpose_loops`]).
//!
//! ConvTranspose (1, 11, 22): `X [N, C, D...]`, `W [C, M/group, k...]`,
//! optional `B [M]`; attributes as Conv plus `output_padding` and
//! `output_shape` (spatial dims, or all dims in old exporters). The output
//! size and padding follow the spec: an `output_shape` (or `auto_pad`
//! SAME_*, which asks for `in * stride`) fixes the output and the padding
//! is derived from it (extra at the end for SAME_UPPER, at the start
//! otherwise, possibly negative); else `pads` give `stride * (in - 1) +
//! output_padding + (k - 1) * dilation + 1 - pads`
//! (`onnxc_conv_transpose_*`: gemm `W^T X` into columns, then col2im).
//!
//! DeformConv (19, 22): Conv's `X`, `W`, optional `B` plus `offset [N,
//! offset_group * prod(kernel) * rank, out...]` (per tap and spatial dim,
//! added to the sampling position) and optional `mask [N, offset_group *
//! prod(kernel), out...]`; attributes as Conv without `auto_pad`, plus
//! `offset_group` (splits the input channels). Positions are sampled by
//! multilinear interpolation, zero outside the input
//! (`onnxc_deform_conv_{f32,f64}` in `generic/deform_conv.rs`; f16/bf16
//! staged).
//!
//! Col2Im (18): `input [N, C * prod(block), L]`, `image_shape` and
//! `block_shape` (compile-time inputs), `dilations`, `pads`, `strides`;
//! output `[N, C, image...]` (`onnxc_col2im_*`). Float types only.

use super::elementwise::Activation;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr, Ref};
use crate::codegen::{Lower, Value};
use crate::import::attrs::Attrs;
use crate::import::NodeImport;
use crate::ir::dim_expr::{DimExpr, SymbolFacts};
use crate::ir::shape::dims_text;
use crate::ir::{DType, Tensor, ValueId};
use onnxc_runtime::{
    conv_blocked_scratch_elems, conv_scratch_elems, conv_transpose_scratch_elems, deform_conv_scratch_elems,
    ConvParams, DeformConvParams, EPILOGUE_NONE, MAX_RANK, MAX_SPATIAL_RANK,
};

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
        let (strides, dilations, pads) = self.lists(r, kernel)?;
        let mut g = Geometry {
            out: Vec::with_capacity(r),
            kernel: kernel.to_vec(),
            strides: strides.clone(),
            dilations: dilations.clone(),
            pads_begin: vec![0; r],
            pads_end: vec![0; r],
        };
        for d in 0..r {
            let window = (kernel[d], strides[d], dilations[d]);
            let (out, pb, pe) = self.resolve_dim(d, input[d], window, (pads[d], pads[r + d]))?;
            g.out.push(out);
            g.pads_begin[d] = pb;
            g.pads_end[d] = pe;
        }
        Ok(g)
    }

    /// The output's spatial dims for `input` spatial dims given as
    /// expressions: a constant dim as [`Window::resolve`] gives it, a
    /// symbolic one as the same arithmetic over expressions
    /// ([`Window::symbolic_dim`]).
    pub fn output_dims(
        &self,
        input: &[DimExpr],
        kernel: &[usize],
        facts: &SymbolFacts,
    ) -> Result<Vec<DimExpr>, String> {
        let r = input.len();
        let (strides, dilations, pads) = self.lists(r, kernel)?;
        (0..r)
            .map(|d| {
                let (window, pads) = ((kernel[d], strides[d], dilations[d]), (pads[d], pads[r + d]));
                match input[d].as_size() {
                    Some(x) => Ok(DimExpr::from(self.resolve_dim(d, x, window, pads)?.0)),
                    None => self.symbolic_dim(d, &input[d], window, pads, facts),
                }
            })
            .collect()
    }

    /// Checks the rank and the kernel; gives the strides, dilations and
    /// pads for `r` spatial dims (defaults filled in).
    fn lists(&self, r: usize, kernel: &[usize]) -> Result<WindowLists, String> {
        if r == 0 || r > MAX_SPATIAL_RANK {
            return Err(format!("{r} spatial dims; 1 to {MAX_SPATIAL_RANK} are supported"));
        }
        if kernel.len() != r {
            return Err(format!("kernel has {} dims, the input {r} spatial dims", kernel.len()));
        }
        if let Some(&k) = kernel.iter().find(|&&k| k == 0) {
            return Err(format!("kernel dim {k} must be at least 1"));
        }
        let strides = list_or("strides", &self.strides, r, 1)?;
        let dilations = list_or("dilations", &self.dilations, r, 1)?;
        let pads = list_or("pads", &self.pads, 2 * r, 0)?;
        Ok((strides, dilations, pads))
    }

    /// [`Window::resolve_dim`]'s output size for a symbolic input size `x`:
    /// `(x + pads - span) / stride + 1`, rounded down, or up under
    /// `ceil_mode` and then capped so that the last window starts inside
    /// the input or the begin padding (`ceil((x + pb) / stride)`), which
    /// one cap does when the end padding is below the window span (an
    /// error otherwise). A size too small for the window gives a run-time
    /// shape error, not this one.
    fn symbolic_dim(
        &self,
        d: usize,
        x: &DimExpr,
        (k, s, dil): (usize, usize, usize),
        (pb, pe): (usize, usize),
        facts: &SymbolFacts,
    ) -> Result<DimExpr, String> {
        let span = window_span(d, k, dil)?;
        let overflow = || format!("spatial dim {d}: the output size of an input of {x} overflows");
        let s = i64::try_from(s).map_err(|_| overflow())?;
        let one = DimExpr::constant(1);
        let out = match self.auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => x.div_ceil(s, facts),
            AutoPad::Valid => {
                x.checked_sub(&DimExpr::from(span)).and_then(|r| r.div_floor(s, facts)?.checked_add(&one))
            }
            AutoPad::NotSet => {
                let begin = x.checked_add(&DimExpr::from(pb)).ok_or_else(overflow)?;
                let room = begin.checked_add(&DimExpr::from(pe)).and_then(|p| p.checked_sub(&DimExpr::from(span)));
                match self.ceil_mode {
                    false => room.and_then(|r| r.div_floor(s, facts)?.checked_add(&one)),
                    true if pe < span => room
                        .and_then(|r| r.div_ceil(s, facts)?.checked_add(&one))
                        .zip(begin.div_ceil(s, facts))
                        .map(|(out, cap)| out.minimum(&cap, facts)),
                    true => {
                        return Err(format!(
                            "spatial dim {d}: ceil_mode with an end padding of {pe}, not below the window of \
                             {span}, is not inferred over a symbolic dim yet"
                        ))
                    }
                }
            }
        };
        out.ok_or_else(overflow)
    }

    /// Spatial dim `d` of size `x` under `(kernel, stride, dilation)` and
    /// the `pads` attribute's `(begin, end)`: the output size and the
    /// padding `auto_pad` makes of them.
    fn resolve_dim(
        &self,
        d: usize,
        x: usize,
        (k, s, dil): (usize, usize, usize),
        (pb, pe): (usize, usize),
    ) -> Result<(usize, usize, usize), String> {
        let span = window_span(d, k, dil)?;
        window_size(x.checked_add(span), || format!("spatial dim {d}: input {x} with a window of {span}"))?;
        match self.auto_pad {
            AutoPad::NotSet => {
                let padded = window_size(x.checked_add(pb).and_then(|v| v.checked_add(pe)), || {
                    format!("spatial dim {d}: input {x} with pads {pb} and {pe} (attribute \"pads\")")
                })?;
                if padded < span {
                    return Err(format!("spatial dim {d}: window of {span} does not fit the padded input of {padded}"));
                }
                let mut out = (padded - span) / s + 1;
                if self.ceil_mode {
                    out = (padded - span).div_ceil(s) + 1;
                    // The last window must start inside the input or the
                    // begin padding.
                    if (out - 1) * s >= x + pb {
                        out -= 1;
                    }
                }
                Ok((out, pb, pe))
            }
            AutoPad::SameUpper | AutoPad::SameLower => {
                // (out - 1) * s < x, so neither sum overflows.
                let out = x.div_ceil(s);
                let total = ((out.max(1) - 1) * s + span).saturating_sub(x);
                let small = total / 2;
                let (pb, pe) =
                    if self.auto_pad == AutoPad::SameUpper { (small, total - small) } else { (total - small, small) };
                Ok((out, pb, pe))
            }
            AutoPad::Valid => {
                if x < span {
                    return Err(format!("spatial dim {d}: window of {span} does not fit the input of {x}"));
                }
                Ok(((x - span) / s + 1, 0, 0))
            }
        }
    }
}

/// A window's strides, dilations and pads (`[begin..., end...]`), defaults
/// filled in.
type WindowLists = (Vec<usize>, Vec<usize>, Vec<usize>);

/// The extent of spatial dim `d`'s window: kernel `k` at dilation `dil`.
fn window_span(d: usize, k: usize, dil: usize) -> Result<usize, String> {
    window_size((k - 1).checked_mul(dil).and_then(|v| v.checked_add(1)), || {
        format!("spatial dim {d}: kernel {k} with dilation {dil} (attribute \"dilations\")")
    })
}

/// Window arithmetic on sizes a model declares (attributes, shapes): the
/// result must exist and fit in `i64`, the kernels' type, or the node fails
/// naming `what`.
pub(crate) fn window_size(v: Option<usize>, what: impl FnOnce() -> String) -> Result<usize, String> {
    v.filter(|&v| i64::try_from(v).is_ok())
        .ok_or_else(|| format!("{} is too large: the window arithmetic overflows", what()))
}

/// Copies `v` into the front of a kernel's fixed-size dims array.
pub fn dims_array(v: &[usize]) -> [i64; MAX_RANK] {
    let mut a = [0i64; MAX_RANK];
    for (dst, &src) in a.iter_mut().zip(v) {
        *dst = src as i64;
    }
    a
}

/// `v`, or `default` repeated `len` times when `v` is empty.
fn list_or(name: &str, v: &[usize], len: usize, default: usize) -> Result<Vec<usize>, String> {
    if v.is_empty() {
        Ok(vec![default; len])
    } else if v.len() == len {
        Ok(v.to_vec())
    } else {
        Err(format!("attribute \"{name}\" has {} values, expected {len}", v.len()))
    }
}

#[derive(Clone, Debug)]
pub struct Conv {
    pub window: Window,
    pub group: usize,
    /// What passes fused in (nothing on import).
    pub fused: Fused,
    /// How the data and weights are laid out (as given on import).
    pub layout: Layout,
}

/// How a convolution's data and weights (input 1) are laid out.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Layout {
    /// NCHW data, the weights as given.
    #[default]
    Plain,
    /// NCHW data; the weights packed for the kernel (a 1-D f32 constant),
    /// `weights` their `[M, C/group, kernel...]` shape; set by
    /// `passes::pack_conv_weights`.
    Packed { weights: Vec<usize> },
    /// Input 0, the residual and the output in the blocked layout
    /// (`[N, C/8, H, W, 8]`, see [`super::layout`]; input 0 stays NCHW when
    /// it has fewer than 8 channels, `onnxc_runtime::conv_reads_nchw`), the
    /// weights packed by `onnxc_pack_conv_weights_blocked_f32`, `weights`
    /// their logical shape; set by `passes::choose_layout`.
    Blocked { weights: Vec<usize> },
}

impl Layout {
    /// The weights' logical shape when input 1 holds them packed.
    pub fn packed_weights(&self) -> Option<&[usize]> {
        match self {
            Layout::Plain => None,
            Layout::Packed { weights } | Layout::Blocked { weights } => Some(weights),
        }
    }

    /// Whether the data is in the blocked layout.
    pub fn is_blocked(&self) -> bool {
        matches!(self, Layout::Blocked { .. })
    }
}

/// The parts passes fuse into a convolution, each applied where the kernel
/// already holds the data. A part that reads a tensor names the node input
/// holding it: the tensor stays a node input like X and W, so the memory
/// plan, the schedule and `passes::verify` see every value a Conv reads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Fused {
    /// Applied to each output element as the kernel stores it (after the
    /// bias and the residual); set by `passes::fuse_conv_activation`.
    pub activation: Option<Activation>,
    /// A tensor of the output's type and shape added before the
    /// activation; set by `passes::fuse_conv_add`.
    pub residual: Option<InputSlot>,
    /// f32 `[2 * C]`, a scale then a shift per input channel: the input
    /// goes through `max(x * scale + shift, 0)` as the kernel packs it
    /// (pointwise, packed weights only); set by `passes::fuse_conv_prologue`.
    pub prologue: Option<InputSlot>,
}

/// The index of the node input that holds a fused part's tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputSlot(pub usize);

impl Fused {
    /// The fused parts' tensors are what the kernel reads (`p`: its
    /// parameters, `shape`: the output's), and no input past the bias is
    /// anything else.
    fn check_inputs(&self, cx: &InferCx, p: &ConvParams, shape: &[usize]) -> Result<(), String> {
        let x = cx.input(0)?.dtype;
        if let Some(InputSlot(i)) = self.prologue {
            let pro = cx.input(i)?;
            let want = [2 * p.in_channels as usize];
            if pro.dtype != DType::F32 || x != DType::F32 || pro.shape != want {
                return Err(format!("prologue is {}{:?}, expected f32{want:?}", pro.dtype, pro.shape));
            }
        }
        if let Some(InputSlot(i)) = self.residual {
            let r = cx.input(i)?;
            if r.dtype != x || r.shape != shape {
                return Err(format!("residual is {}{:?}, expected {x}{shape:?}", r.dtype, r.shape));
            }
        }
        let fused = |i: usize| [self.residual, self.prologue].contains(&Some(InputSlot(i)));
        match (3..cx.inputs.len()).find(|&i| cx.inputs[i].is_some() && !fused(i)) {
            Some(i) => Err(format!("input {i} is unexpected: the inputs are X, W and an optional bias")),
            None => Ok(()),
        }
    }

    /// The residual's address, or null without one.
    pub fn residual_ptr(&self, cx: &mut Lower) -> Result<Value, String> {
        match self.residual {
            Some(InputSlot(i)) => cx.input_ptr(i),
            None => Ok(cx.iconst(0)),
        }
    }
}

impl InputSlot {
    /// Appends `value` to a Conv node's `inputs`, after X, W and the bias
    /// (present or not), and returns its slot.
    pub fn append(inputs: &mut Vec<Option<ValueId>>, value: ValueId) -> InputSlot {
        inputs.resize(inputs.len().max(3), None);
        inputs.push(Some(value));
        InputSlot(inputs.len() - 1)
    }
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Conv(Conv::parse(cx)?))
}

impl Conv {
    /// Conv's attributes (shared with the quantized convolutions).
    pub(crate) fn parse(cx: &NodeImport) -> Result<Conv, String> {
        let window = Window::parse(&cx.attrs)?;
        if window.ceil_mode {
            return Err(format!("{} has no attribute \"ceil_mode\"", cx.op_type));
        }
        Ok(Conv::new(window, parse_count(cx, "group")?))
    }

    /// A convolution as imported: nothing fused, weights as given, NCHW.
    pub fn new(window: Window, group: usize) -> Conv {
        Conv { window, group, fused: Fused::default(), layout: Layout::Plain }
    }

    /// The kernel parameters (which fix the output shape) for X and W shapes.
    pub(crate) fn params(&self, x: &[usize], w: &[usize]) -> Result<ConvParams, String> {
        if x.len() < 3 {
            return Err(format!("input 0 has shape {x:?}, expected [N, C, spatial...] with at least one spatial dim"));
        }
        let (n, c) = (x[0], x[1]);
        let kernel = self.check_weights(x.len(), c, w)?;
        let (m, g) = (w[0], self.group);
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
            activation: self.fused.activation.map_or(EPILOGUE_NONE, |a| a.code()),
            act_a: self.fused.activation.map_or(0.0, |a| a.params().0),
            act_b: self.fused.activation.map_or(0.0, |a| a.params().1),
            residual: self.fused.residual.is_some() as i64,
            packed_weights: self.layout.packed_weights().is_some() as i64,
        })
    }

    /// Checks W against an input of rank `rank` and `c` channels; gives
    /// the kernel's spatial dims.
    fn check_weights<'w>(&self, rank: usize, c: usize, w: &'w [usize]) -> Result<&'w [usize], String> {
        if w.len() != rank {
            return Err(format!("weights have shape {w:?}, expected rank {rank} like the input"));
        }
        let (m, cg, g) = (w[0], w[1], self.group);
        if !c.is_multiple_of(g) || !m.is_multiple_of(g) || cg.checked_mul(g) != Some(c) {
            return Err(format!("channels do not match: input has {c}, weights {m}x{cg}, group {g}"));
        }
        let kernel = &w[2..];
        if !self.window.kernel_shape.is_empty() && self.window.kernel_shape != kernel {
            return Err(format!(
                "attribute \"kernel_shape\" is {:?}, the weights' kernel is {kernel:?}",
                self.window.kernel_shape
            ));
        }
        Ok(kernel)
    }

    pub(crate) fn output_shape(p: &ConvParams) -> Vec<usize> {
        let r = p.spatial_rank as usize;
        [p.batch, p.out_channels].iter().chain(&p.out_spatial[..r]).map(|&d| d as usize).collect()
    }
}

/// The operands every [`ConvKernel`] passes its kernel, made (in this
/// order) before the ones of its own.
struct ConvOperands {
    params: Ref<ConvParams>,
    x: Ptr,
    w: Ptr,
    bias: Ptr,
    scratch: Ptr,
}

/// What Conv and ConvTranspose share: `(X, W, optional B) → Y` through one
/// kernel (an `_f32` and an `_f64` variant) that takes [`ConvParams`] and an
/// optional scratch area.
trait ConvKernel {
    /// Calls the kernel's variant for `dtype` with the shared operands and
    /// its own (Conv's residual and `parallel_for`).
    fn call_kernel(&self, cx: &mut Lower, dtype: DType, operands: ConvOperands) -> Result<(), String>;
    /// What passes fused in (see [`Conv::fused`]).
    fn fused(&self) -> Fused {
        Fused::default()
    }
    /// Whether the data is in the blocked layout (see [`Layout::Blocked`]).
    fn is_blocked(&self) -> bool {
        false
    }
    /// Its portable-mode lowering: direct loops
    /// ([`crate::codegen::window_loops`], [`crate::codegen::conv_transpose_loops`]).
    fn lower_portable(&self, cx: &mut Lower, dtype: DType, p: &ConvParams) -> Result<(), String>;
    fn conv_params(&self, x: &[usize], w: &[usize]) -> Result<ConvParams, String>;
    /// The output dims for input dims `x` of which some is symbolic (its
    /// channels known) and weights of shape `w`.
    fn symbolic_output(&self, x: &[DimExpr], w: &[usize], facts: &SymbolFacts) -> Result<Vec<DimExpr>, String>;
    fn scratch_elems(p: &ConvParams) -> usize;

    fn infer_conv(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (x, w) = (cx.input(0)?, cx.input(1)?);
        if !x.dtype.is_float() {
            return Err(format!("element type {} is not supported", x.dtype));
        }
        if w.dtype != x.dtype {
            return Err(format!("weights are {}, expected {}", w.dtype, x.dtype));
        }
        let dims = cx.dims(0)?;
        if dims.iter().any(|d| d.as_size().is_none()) {
            return self.infer_symbolic_conv(cx, &dims);
        }
        let p = self.conv_params(x.shape, w.shape)?;
        if let Some(b) = cx.opt_input(2) {
            if b.dtype != x.dtype || b.shape != [p.out_channels as usize] {
                return Err(format!("bias is {}{:?}, expected {}[{}]", b.dtype, b.shape, x.dtype, p.out_channels));
            }
        }
        let mut shape = Conv::output_shape(&p);
        if self.is_blocked() {
            if x.dtype != DType::F32 {
                return Err(format!("a blocked convolution needs f32, not {}", x.dtype));
            }
            shape = super::layout::blocked_shape(&shape).ok_or("the output channels are not whole blocks")?;
        }
        self.fused().check_inputs(cx, &p, &shape)?;
        Ok(vec![Inferred::new(x.dtype, shape)])
    }

    /// Symbolic inference: the output dims as expressions of input 0's
    /// (before any pass, so nothing is fused or blocked yet).
    fn infer_symbolic_conv(&self, cx: &InferCx, dims: &[DimExpr]) -> Result<Vec<Inferred>, String> {
        if self.is_blocked() || self.fused() != Fused::default() {
            return Err("a fused or blocked convolution is not inferred over symbolic dims".into());
        }
        if dims.len() < 3 || dims[1].as_size().is_none() {
            return Err(format!("input 0 is {}, expected [N, C, spatial...] with C known", dims_text(dims)));
        }
        let (x, w) = (cx.input(0)?, cx.input(1)?);
        let shape = self.symbolic_output(dims, w.shape, cx.facts())?;
        if let Some(b) = cx.opt_input(2) {
            if b.dtype != x.dtype || cx.dims(2)? != shape[1..2] {
                return Err(format!("bias is {}{:?}, expected {}[{}]", b.dtype, b.shape, x.dtype, shape[1]));
            }
        }
        Ok(vec![Inferred::of_dims(x.dtype, shape)?])
    }

    fn conv_scratch_bytes(&self, cx: &InferCx) -> usize {
        let (Ok(x), Ok(w)) = (cx.input(0), cx.input(1)) else {
            return 0;
        };
        if self.is_blocked() {
            return self.conv_params(x.shape, w.shape).map_or(0, |p| conv_blocked_scratch_elems(&p) * 4);
        }
        // f16/bf16 run the f32 kernel, so only f64 needs 8 bytes.
        let size = if x.dtype == DType::F64 { 8 } else { 4 };
        self.conv_params(x.shape, w.shape).map_or(0, |p| Self::scratch_elems(&p) * size)
    }

    fn lower_conv(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, x) = cx.input_type(0)?;
        let (_, w) = cx.input_type(1)?;
        let p = self.conv_params(&x, &w)?;
        if cx.portable() {
            if p.packed_weights == 1 {
                return Err("the weights were packed for the kernel library, which portable code does not call".into());
            }
            return self.lower_portable(cx, dtype, &p);
        }
        if let Some(prologue) = self.fused().prologue {
            return lower_with_prologue(cx, dtype, &p, self.fused(), prologue);
        }
        if self.is_blocked() {
            let scratch = Ptr(if conv_blocked_scratch_elems(&p) > 0 { cx.scratch_ptr()? } else { cx.iconst(0) });
            let params = cx.params(&p)?;
            let (x, w, bias) = (Ptr(cx.input_ptr(0)?), Ptr(cx.input_ptr(1)?), Ptr(cx.opt_input_ptr(2)));
            let residual = Ptr(self.fused().residual_ptr(cx)?);
            let (y, parallel) = (Ptr(cx.output_ptr(0)?), cx.parallel_ptr());
            let args = (params, x, w, bias, residual, y, scratch, parallel);
            return cx.call_checked(kernels::onnxc_conv_blocked_f32, args);
        }
        let scratch = Ptr(if Self::scratch_elems(&p) > 0 { cx.scratch_ptr()? } else { cx.iconst(0) });
        let params = cx.params(&p)?;
        let (x, w, bias) = (Ptr(cx.input_ptr(0)?), Ptr(cx.input_ptr(1)?), Ptr(cx.opt_input_ptr(2)));
        self.call_kernel(cx, dtype, ConvOperands { params, x, w, bias, scratch })
    }
}

/// A Conv with a prologue ([`Fused::prologue`]): `onnxc_conv_prologue_f32`,
/// which needs f32, packed weights and a pointwise window.
fn lower_with_prologue(
    cx: &mut Lower,
    dtype: DType,
    p: &ConvParams,
    fused: Fused,
    InputSlot(prologue): InputSlot,
) -> Result<(), String> {
    if dtype != DType::F32 || p.packed_weights != 1 {
        return Err("a prologue needs f32 and weights packed for the kernel library".into());
    }
    let params = cx.params(p)?;
    let (x, w, bias) = (Ptr(cx.input_ptr(0)?), Ptr(cx.input_ptr(1)?), Ptr(cx.opt_input_ptr(2)));
    let residual = Ptr(fused.residual_ptr(cx)?);
    let (prologue, y, parallel) = (Ptr(cx.input_ptr(prologue)?), Ptr(cx.output_ptr(0)?), cx.parallel_ptr());
    cx.call_checked(kernels::onnxc_conv_prologue_f32, (params, x, w, bias, residual, prologue, y, parallel))
}

/// The `Operator` impl of a [`ConvKernel`] type.
macro_rules! conv_operator {
    ($ty:ty, $name:literal) => {
        impl Operator for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
                self.infer_conv(cx)
            }
            fn infers_symbolically(&self) -> bool {
                true
            }
            fn scratch_bytes(&self, cx: &InferCx) -> usize {
                self.conv_scratch_bytes(cx)
            }
            fn lower(&self, cx: &mut Lower) -> Result<(), String> {
                self.lower_conv(cx)
            }
            fn stages_halves(&self) -> bool {
                true
            }
        }
    };
}

impl ConvKernel for Conv {
    fn call_kernel(&self, cx: &mut Lower, dtype: DType, o: ConvOperands) -> Result<(), String> {
        let residual = Ptr(self.fused.residual_ptr(cx)?);
        let (y, parallel) = (Ptr(cx.output_ptr(0)?), cx.parallel_ptr());
        let kernel = kernels::by_dtype(kernels::onnxc_conv_f32, kernels::onnxc_conv_f64, dtype);
        cx.call_checked(kernel, (o.params, o.x, o.w, o.bias, residual, y, o.scratch, parallel))
    }
    fn lower_portable(&self, cx: &mut Lower, dtype: DType, p: &ConvParams) -> Result<(), String> {
        crate::codegen::window_loops::conv(cx, dtype, p, self.fused())
    }
    fn fused(&self) -> Fused {
        self.fused
    }
    fn conv_params(&self, x: &[usize], w: &[usize]) -> Result<ConvParams, String> {
        let w = self.layout.packed_weights().unwrap_or(w);
        if self.layout.is_blocked() {
            let x = match super::layout::unblocked_shape(x) {
                Some(x) => x,
                None if super::layout::read_as_image(x) => x.to_vec(),
                None => return Err(format!("input 0 has shape {x:?}, which is not blocked")),
            };
            return self.params(&x, w);
        }
        self.params(x, w)
    }
    fn is_blocked(&self) -> bool {
        self.layout.is_blocked()
    }
    fn symbolic_output(&self, x: &[DimExpr], w: &[usize], facts: &SymbolFacts) -> Result<Vec<DimExpr>, String> {
        let c = x[1].as_size().ok_or("the input channels must be known")?;
        let kernel = self.check_weights(x.len(), c, w)?;
        let out = self.window.output_dims(&x[2..], kernel, facts)?;
        Ok([x[0].clone(), DimExpr::from(w[0])].into_iter().chain(out).collect())
    }
    fn scratch_elems(p: &ConvParams) -> usize {
        conv_scratch_elems(p)
    }
}
conv_operator!(Conv, "Conv");

#[derive(Clone, Debug)]
pub struct DeformConv {
    /// The sliding window and `group`, as Conv's (there is no `auto_pad`).
    pub conv: Conv,
    pub offset_group: usize,
}

pub fn import_deform_conv(cx: &mut NodeImport) -> Result<Op, String> {
    let window = Window::parse(&cx.attrs)?;
    let conv = Conv::new(window, parse_count(cx, "group")?);
    Ok(Op::DeformConv(DeformConv { conv, offset_group: parse_count(cx, "offset_group")? }))
}

impl DeformConv {
    /// Kernel parameters from the shapes of X, W, offset and the optional mask.
    fn params(
        &self,
        x: &[usize],
        w: &[usize],
        offset: &[usize],
        mask: Option<&[usize]>,
    ) -> Result<DeformConvParams, String> {
        let conv = self.conv.params(x, w)?;
        let og = self.offset_group;
        if !x[1].is_multiple_of(og) {
            return Err(format!("{} input channels do not split into offset_group = {og}", x[1]));
        }
        let r = x.len() - 2;
        let taps: usize = w[2..].iter().product();
        let out = &Conv::output_shape(&conv)[2..];
        let expect =
            |per_tap: usize| -> Vec<usize> { [x[0], og * taps * per_tap].iter().chain(out).copied().collect() };
        if offset != expect(r) {
            return Err(format!("input 2 (offset) has shape {offset:?}, expected {:?}", expect(r)));
        }
        if let Some(mask) = mask.filter(|&m| m != expect(1)) {
            return Err(format!("input 4 (mask) has shape {mask:?}, expected {:?}", expect(1)));
        }
        Ok(DeformConvParams { conv, offset_group: og as i64 })
    }
}

impl Operator for DeformConv {
    fn name(&self) -> &'static str {
        "DeformConv"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !x.dtype.is_float() {
            return Err(format!("element type {} is not supported", x.dtype));
        }
        for (i, name) in [(1, "W"), (2, "offset"), (3, "B"), (4, "mask")] {
            if let Some(t) = cx.opt_input(i).filter(|t| t.dtype != x.dtype) {
                return Err(format!("input {i} ({name}) is {}, expected {} like X", t.dtype, x.dtype));
            }
        }
        let mask = cx.opt_input(4).map(|m| m.shape);
        let p = self.params(x.shape, cx.input(1)?.shape, cx.input(2)?.shape, mask)?;
        if let Some(b) = cx.opt_input(3).filter(|b| b.shape != [p.conv.out_channels as usize]) {
            return Err(format!("input 3 (B) has shape {:?}, expected [{}]", b.shape, p.conv.out_channels));
        }
        Ok(vec![Inferred::new(x.dtype, Conv::output_shape(&p.conv))])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let (Ok(x), Ok(w), Ok(offset)) = (cx.input(0), cx.input(1), cx.input(2)) else {
            return 0;
        };
        let size = if x.dtype == DType::F64 { 8 } else { 4 };
        let mask = cx.opt_input(4).map(|m| m.shape);
        self.params(x.shape, w.shape, offset.shape, mask).map_or(0, |p| deform_conv_scratch_elems(&p) * size)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, x) = cx.input_type(0)?;
        let mask = if cx.has_input(4) { Some(cx.input_type(4)?.1) } else { None };
        let p = self.params(&x, &cx.input_type(1)?.1, &cx.input_type(2)?.1, mask.as_deref())?;
        if cx.portable() {
            return crate::codegen::window_loops::deform_conv(cx, dtype, &p);
        }
        let scratch = Ptr(if deform_conv_scratch_elems(&p) > 0 { cx.scratch_ptr()? } else { cx.iconst(0) });
        let params = cx.params(&p)?;
        let (x, w, offset) = (Ptr(cx.input_ptr(0)?), Ptr(cx.input_ptr(1)?), Ptr(cx.input_ptr(2)?));
        let (bias, mask, y) = (Ptr(cx.opt_input_ptr(3)), Ptr(cx.opt_input_ptr(4)), Ptr(cx.output_ptr(0)?));
        let kernel = kernels::by_dtype(kernels::onnxc_deform_conv_f32, kernels::onnxc_deform_conv_f64, dtype);
        cx.call_checked(kernel, (params, x, w, offset, bias, mask, y, scratch))
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[derive(Clone, Debug)]
pub struct ConvTranspose {
    pub window: Window,
    pub group: usize,
    pub output_padding: Vec<usize>,
    pub output_shape: Vec<usize>,
    /// The logical weight shape, when input 1 holds the weights packed by
    /// `onnxc_pack_conv_transpose_weights_f32` (`passes::pack_conv_weights`).
    pub packed_weights: Option<Vec<usize>>,
}

/// A count attribute (`group`, `offset_group`): default 1, at least 1.
fn parse_count(cx: &NodeImport, name: &str) -> Result<usize, String> {
    let v = cx.attrs.int_or(name, 1)?;
    usize::try_from(v).ok().filter(|&g| g >= 1).ok_or_else(|| format!("attribute \"{name}\" is {v}, expected >= 1"))
}

fn nonneg_list(a: &Attrs, name: &str) -> Result<Vec<usize>, String> {
    let list = a.ints(name)?.unwrap_or_default();
    list.iter()
        .map(|&v| usize::try_from(v).map_err(|_| format!("attribute \"{name}\" has {v}, expected values >= 0")))
        .collect()
}

pub fn import_conv_transpose(cx: &mut NodeImport) -> Result<Op, String> {
    let window = Window::parse(&cx.attrs)?;
    if window.ceil_mode {
        return Err("ConvTranspose has no attribute \"ceil_mode\"".into());
    }
    Ok(Op::ConvTranspose(ConvTranspose {
        window,
        group: parse_count(cx, "group")?,
        output_padding: nonneg_list(&cx.attrs, "output_padding")?,
        output_shape: nonneg_list(&cx.attrs, "output_shape")?,
        packed_weights: None,
    }))
}

impl ConvTranspose {
    /// The kernel's params for input `x` and weights `w` in the ONNX
    /// layout (`packed_weights` 0).
    pub fn params(&self, x: &[usize], w: &[usize]) -> Result<ConvParams, String> {
        if x.len() < 3 || w.len() != x.len() {
            return Err(format!("input {x:?} and weights {w:?}: expected [N, C, D...] and [C, M/group, k...]"));
        }
        let r = x.len() - 2;
        if r > MAX_SPATIAL_RANK {
            return Err(format!("{r} spatial dims; at most {MAX_SPATIAL_RANK} are supported"));
        }
        let (n, c, g) = (x[0], x[1], self.group);
        if w[0] != c || c % g != 0 {
            return Err(format!("channels do not match: input has {c}, weights {w:?}, group {g}"));
        }
        let kernel = &w[2..];
        if !self.window.kernel_shape.is_empty() && self.window.kernel_shape != kernel {
            return Err(format!(
                "attribute \"kernel_shape\" is {:?}, the weights' kernel is {kernel:?}",
                self.window.kernel_shape
            ));
        }
        let strides = list_or("strides", &self.window.strides, r, 1)?;
        let dilations = list_or("dilations", &self.window.dilations, r, 1)?;
        let out_pad = list_or("output_padding", &self.output_padding, r, 0)?;
        // stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1
        let natural = |d: usize| -> Result<i64, String> {
            let (s, k, dil, op) = (strides[d], kernel[d], dilations[d], out_pad[d]);
            let n = (x[2 + d].max(1) - 1)
                .checked_mul(s)
                .zip((k - 1).checked_mul(dil))
                .and_then(|(a, b)| a.checked_add(b)?.checked_add(op)?.checked_add(1));
            let what = || format!("spatial dim {d}: stride {s}, output_padding {op}, kernel {k} and dilation {dil}");
            Ok(window_size(n, what)? as i64)
        };
        let out_channels = window_size(w[1].checked_mul(g), || format!("weights {w:?} with group {g}"))?;
        let (out, pads_begin) = match self.target_spatial(x, &strides)? {
            Some(target) => (target.iter().map(|&v| v as i64).collect(), self.pads_for(&target, &natural)?),
            None => self.out_from_pads(r, &natural)?,
        };
        let mut p = ConvParams {
            batch: n as i64,
            in_channels: c as i64,
            out_channels: out_channels as i64,
            group: g as i64,
            spatial_rank: r as i64,
            in_spatial: dims_array(&x[2..]),
            kernel: dims_array(kernel),
            strides: dims_array(&strides),
            dilations: dims_array(&dilations),
            ..Default::default()
        };
        p.out_spatial[..r].copy_from_slice(&out);
        p.pads_begin[..r].copy_from_slice(&pads_begin);
        Ok(p)
    }

    /// The spatial output the attributes fix, if they do: `output_shape`
    /// (spatial dims, or all dims in old exporters), or `in * stride` for
    /// `auto_pad` SAME_*.
    fn target_spatial(&self, x: &[usize], strides: &[usize]) -> Result<Option<Vec<usize>>, String> {
        let r = x.len() - 2;
        Ok(match self.output_shape.len() {
            0 if matches!(self.window.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) => Some(
                (0..r)
                    .map(|d| {
                        let what = || format!("spatial dim {d}: input {} with stride {}", x[2 + d], strides[d]);
                        window_size(x[2 + d].checked_mul(strides[d]), what)
                    })
                    .collect::<Result<_, _>>()?,
            ),
            0 => None,
            len if len == r => Some(self.output_shape.clone()),
            len if len == r + 2 => Some(self.output_shape[2..].to_vec()),
            len => return Err(format!("attribute \"output_shape\" has {len} values, expected {r}")),
        })
    }

    /// The begin padding that gives the `target` output from the
    /// `natural` one (extra at the end for SAME_UPPER, at the start
    /// otherwise; possibly negative).
    fn pads_for(&self, target: &[usize], natural: &dyn Fn(usize) -> Result<i64, String>) -> Result<Vec<i64>, String> {
        (0..target.len())
            .map(|d| {
                // Both are below 2^63: the difference cannot overflow.
                let total = natural(d)? - target[d] as i64;
                Ok(if self.window.auto_pad == AutoPad::SameUpper {
                    total.div_euclid(2)
                } else {
                    total - total.div_euclid(2)
                })
            })
            .collect()
    }

    /// The output the `pads` attribute gives (none for VALID), and its
    /// begin padding.
    fn out_from_pads(
        &self,
        r: usize,
        natural: &dyn Fn(usize) -> Result<i64, String>,
    ) -> Result<(Vec<i64>, Vec<i64>), String> {
        let pads = if self.window.auto_pad == AutoPad::Valid {
            vec![0; 2 * r]
        } else {
            list_or("pads", &self.window.pads, 2 * r, 0)?
        };
        let out = (0..r)
            .map(|d| {
                let (pb, pe) = (pads[d], pads[r + d]);
                let what = || format!("spatial dim {d}: pads {pb} and {pe} (attribute \"pads\")");
                Ok(natural(d)? - window_size(pb.checked_add(pe), what)? as i64)
            })
            .collect::<Result<Vec<_>, String>>()?;
        if let Some(d) = out.iter().position(|&o| o < 0) {
            return Err(format!("spatial dim {d}: the padding exceeds the output size"));
        }
        Ok((out, pads[..r].iter().map(|&p| p as i64).collect()))
    }
}

impl ConvKernel for ConvTranspose {
    fn call_kernel(&self, cx: &mut Lower, dtype: DType, o: ConvOperands) -> Result<(), String> {
        let (y, parallel) = (Ptr(cx.output_ptr(0)?), cx.parallel_ptr());
        let kernel = kernels::by_dtype(kernels::onnxc_conv_transpose_f32, kernels::onnxc_conv_transpose_f64, dtype);
        cx.call_checked(kernel, (o.params, o.x, o.w, o.bias, y, o.scratch, parallel))
    }
    fn lower_portable(&self, cx: &mut Lower, dtype: DType, p: &ConvParams) -> Result<(), String> {
        crate::codegen::conv_transpose_loops::conv_transpose(cx, dtype, p)
    }
    fn conv_params(&self, x: &[usize], w: &[usize]) -> Result<ConvParams, String> {
        let p = self.params(x, self.packed_weights.as_deref().unwrap_or(w))?;
        Ok(ConvParams { packed_weights: self.packed_weights.is_some() as i64, ..p })
    }
    /// `output_shape` as given, `in * stride` for SAME_*, else
    /// `stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1
    /// - pads` over the expressions.
    fn symbolic_output(&self, x: &[DimExpr], w: &[usize], _facts: &SymbolFacts) -> Result<Vec<DimExpr>, String> {
        let (r, c, g) = (x.len() - 2, x[1].as_size().ok_or("the input channels must be known")?, self.group);
        if w.len() != x.len() || w[0] != c || !c.is_multiple_of(g) {
            return Err(format!("channels do not match: input has {c}, weights {w:?}, group {g}"));
        }
        let out_channels = window_size(w[1].checked_mul(g), || format!("weights {w:?} with group {g}"))?;
        let head = [x[0].clone(), DimExpr::from(out_channels)];
        match self.output_shape.len() {
            0 => {}
            len if len == r || len == r + 2 => {
                let spatial = self.output_shape[len - r..].iter().map(|&d| DimExpr::from(d));
                return Ok(head.into_iter().chain(spatial).collect());
            }
            len => return Err(format!("attribute \"output_shape\" has {len} values, expected {r}")),
        }
        let strides = list_or("strides", &self.window.strides, r, 1)?;
        let dilations = list_or("dilations", &self.window.dilations, r, 1)?;
        let out_pad = list_or("output_padding", &self.output_padding, r, 0)?;
        let pads = match self.window.auto_pad {
            AutoPad::Valid | AutoPad::SameUpper | AutoPad::SameLower => vec![0; 2 * r],
            AutoPad::NotSet => list_or("pads", &self.window.pads, 2 * r, 0)?,
        };
        let same = matches!(self.window.auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
        let spatial = (0..r).map(|d| {
            let stride = i64::try_from(strides[d]).ok()?;
            if same {
                return x[2 + d].checked_scale(stride);
            }
            let span = i64::try_from(window_span(d, w[2 + d], dilations[d]).ok()?).ok()?;
            let fixed = span.checked_add(i64::try_from(out_pad[d]).ok()?)?.checked_sub(stride)?;
            let padding = i64::try_from(pads[d].checked_add(pads[r + d])?).ok()?;
            x[2 + d].checked_scale(stride)?.checked_add(&DimExpr::constant(fixed.checked_sub(padding)?))
        });
        let spatial = spatial.collect::<Option<Vec<_>>>().ok_or("the output size overflows")?;
        Ok(head.into_iter().chain(spatial).collect())
    }
    fn scratch_elems(p: &ConvParams) -> usize {
        conv_transpose_scratch_elems(p)
    }
}
conv_operator!(ConvTranspose, "ConvTranspose");

#[derive(Clone, Debug)]
pub struct Col2Im {
    pub dilations: Vec<usize>,
    pub pads: Vec<usize>,
    pub strides: Vec<usize>,
}

pub fn import_col2im(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    Ok(Op::Col2Im(Col2Im {
        dilations: positive_list(a, "dilations")?,
        pads: nonneg_list(a, "pads")?,
        strides: positive_list(a, "strides")?,
    }))
}

impl Col2Im {
    fn params(&self, x: &[usize], image: &Tensor, block: &Tensor) -> Result<ConvParams, String> {
        let dims = |t: &Tensor, what: &str| -> Result<Vec<usize>, String> {
            t.to_i64s()
                .iter()
                .map(|&v| usize::try_from(v).ok().filter(|&v| v >= 1))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{what} must hold positive values"))
        };
        let (image, block) = (dims(image, "image_shape")?, dims(block, "block_shape")?);
        let r = image.len();
        if r == 0 || r > MAX_SPATIAL_RANK || block.len() != r {
            return Err(format!(
                "image_shape {image:?} and block_shape {block:?}: expected 1 to {MAX_SPATIAL_RANK} equal-length dims"
            ));
        }
        let [n, cb, l] = x else {
            return Err(format!("input has shape {x:?}, expected [N, C * prod(block_shape), L]"));
        };
        let taps =
            window_size(block.iter().try_fold(1usize, |a, &b| a.checked_mul(b)), || format!("block_shape {block:?}"))?;
        if cb % taps != 0 {
            return Err(format!("input dim 1 ({cb}) is not a multiple of prod(block_shape) = {taps}"));
        }
        let strides = list_or("strides", &self.strides, r, 1)?;
        let dilations = list_or("dilations", &self.dilations, r, 1)?;
        let pads = list_or("pads", &self.pads, 2 * r, 0)?;
        let mut grid = Vec::with_capacity(r);
        for d in 0..r {
            let (k, dil, x) = (block[d], dilations[d], image[d]);
            let span = window_size((k - 1).checked_mul(dil).and_then(|v| v.checked_add(1)), || {
                format!("spatial dim {d}: block {k} with dilation {dil} (attribute \"dilations\")")
            })?;
            let (pb, pe) = (pads[d], pads[r + d]);
            let padded = window_size(x.checked_add(pb).and_then(|v| v.checked_add(pe)), || {
                format!("spatial dim {d}: image {x} with pads {pb} and {pe} (attribute \"pads\")")
            })?;
            if padded < span {
                return Err(format!("spatial dim {d}: block of {span} does not fit the padded image of {padded}"));
            }
            grid.push((padded - span) / strides[d] + 1);
        }
        if grid.iter().try_fold(1usize, |a, &b| a.checked_mul(b)) != Some(*l) {
            return Err(format!("input dim 2 is {l}, unlike the block grid {grid:?}"));
        }
        let c = cb / taps;
        Ok(ConvParams {
            batch: *n as i64,
            in_channels: c as i64,
            out_channels: c as i64,
            group: 1,
            spatial_rank: r as i64,
            in_spatial: dims_array(&grid),
            out_spatial: dims_array(&image),
            kernel: dims_array(&block),
            strides: dims_array(&strides),
            dilations: dims_array(&dilations),
            pads_begin: dims_array(&pads[..r]),
            ..Default::default()
        })
    }
}

impl Operator for Col2Im {
    fn name(&self) -> &'static str {
        "Col2Im"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !x.dtype.is_float() {
            return Err(format!("element type {} is not supported", x.dtype));
        }
        let p = self.params(x.shape, cx.const_input(1)?, cx.const_input(2)?)?;
        Ok(vec![Inferred::new(x.dtype, Conv::output_shape(&p))])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, x) = cx.input_type(0)?;
        let image = cx.const_input(1).ok_or("input 1 (image_shape) must be a constant")?.clone();
        let block = cx.const_input(2).ok_or("input 2 (block_shape) must be a constant")?.clone();
        let p = self.params(&x, &image, &block)?;
        if cx.portable() {
            return crate::codegen::conv_transpose_loops::col2im(cx, dtype, &p);
        }
        let params = cx.params(&p)?;
        let xp = cx.input_ptr(0)?;
        let yp = cx.output_ptr(0)?;
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_col2im_f32, kernels::onnxc_col2im_f64, dtype),
            (params, Ptr(xp), Ptr(yp)),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::InputInfo;

    /// Conv's inference on f32 inputs of `shapes` (`None`: absent).
    fn infer(conv: &Conv, shapes: &[Option<&[usize]>]) -> Result<Vec<usize>, String> {
        let cx = InferCx {
            inputs: shapes.iter().map(|s| s.map(|shape| InputInfo { dtype: DType::F32, shape, value: None })).collect(),
            output_count: 1,
            missing_values: Default::default(),
            max_fold_bytes: 0,
            exprs: Vec::new(),
            facts: None,
        };
        Ok(conv.infer(&cx)?.remove(0).shape)
    }

    #[test]
    fn a_residual_is_read_from_its_slot_and_no_other_input_follows_the_bias() {
        let mut conv = Conv::new(Window::parse(&Attrs::new(&[])).expect("defaults"), 1);
        let (x, w): (&[usize], &[usize]) = (&[1, 1, 2, 2], &[1, 1, 1, 1]);
        let with_residual = |r: &'static [usize]| [Some(x), Some(w), None, Some(r)];
        let refused = infer(&conv, &with_residual(&[1, 1, 2, 2])).expect_err("an input past the bias");
        assert!(refused.contains("input 3 is unexpected"), "{refused}");
        conv.fused.residual = Some(InputSlot(3));
        assert_eq!(infer(&conv, &with_residual(&[1, 1, 2, 2])), Ok(vec![1, 1, 2, 2]));
        let refused = infer(&conv, &with_residual(&[1, 1, 1, 2])).expect_err("a residual of another shape");
        assert!(refused.starts_with("residual is f32[1, 1, 1, 2]"), "{refused}");
    }
}
