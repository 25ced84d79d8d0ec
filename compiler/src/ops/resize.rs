//! Spatial resampling: Resize (opsets 10, 11, 13, 18, 19), Upsample (opsets
//! 7 and 9; deprecated), GridSample (opsets 16, 20, 22), AffineGrid (opset 20).
//!
//! Type constraints: Resize/Upsample `T` is any tensor type, scales f32,
//! sizes i64, roi float; GridSample `T1` any type with a float grid `T2`;
//! AffineGrid float `T1` with an i64 size. onnxc compiles f32 and f64 data
//! (`*_f32`/`*_f64` kernels), and f16/bf16 on staged f32 copies
//! ([`crate::codegen::staging`]); other types are reported as unsupported. Scales or
//! sizes known only at run time (f32/f64 data) make Resize's output
//! data-dependent: the params are then sized by `onnxc_resize_prepare` (the
//! same `resize_apply_sizing` the compiler runs on constants) and the output
//! and tap tables allocated at run time. roi and AffineGrid's size must be
//! constants.
//!
//! Opset normalisation, in the importers:
//! * Resize and Upsample become one [`Resize`] whose inputs are always
//!   `(X, roi, scales, sizes)`: Upsample-7's `scales` attribute becomes a
//!   constant input, and the `(X, scales)` form of Upsample-9 and Resize-10
//!   gets an empty roi slot. Before opset 11 there is no
//!   coordinate_transformation_mode: those versions resample with
//!   `asymmetric` coordinates and, for nearest, floor when upsampling and
//!   ceil when downsampling (what ONNX Runtime does). Opset 11's
//!   `tf_half_pixel_for_nn` is kept; opset 18's `antialias`, `axes` and
//!   `keep_aspect_ratio_policy` default to off/all/stretch before 18.
//! * GridSample's opset-16 mode names (`bilinear`, `bicubic`) map to the
//!   opset-20 ones (`linear`, `cubic`); opset 16 only admits 4-D inputs,
//!   later versions any spatial rank.
//!
//! Everything lowers to kernels of `runtime-support/src/generic/resize.rs`
//! whose params (per-axis sizes, scales, roi) follow the ONNX reference; in
//! portable mode Resize runs the loop nests of
//! [`crate::codegen::resize_loops`] over the same params (sized by the
//! generated code when scales or sizes come at run time), and GridSample
//! those of [`crate::codegen::grid_sample_loops`].

use super::elementwise::compute_type;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr, Ref, I64};
use crate::codegen::{resize_loops, InstBuilder, Lower, MemFlagsData};
use crate::import::NodeImport;
use crate::ir::dim_expr::DimExpr;
use crate::ir::shape::dims_text;
use crate::ir::{DType, Dim, Tensor};
use onnxc_runtime::abi::resize::*;
use onnxc_runtime::generic::resize::{resize_apply_sizing, resize_scratch_bytes};
use onnxc_runtime::MAX_RANK;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AspectPolicy {
    Stretch,
    NotLarger,
    NotSmaller,
}

#[derive(Clone, Debug)]
pub struct Resize {
    /// "Resize" or "Upsample" (for messages).
    pub op_name: &'static str,
    /// `MODE_NEAREST`, `MODE_LINEAR` or `MODE_CUBIC`.
    pub mode: i64,
    /// One of the `COORD_*` constants.
    pub coord_mode: i64,
    /// One of the `NEAREST_*` constants.
    pub nearest_mode: i64,
    pub cubic_a: f64,
    pub exclude_outside: bool,
    pub extrapolation_value: f64,
    pub antialias: bool,
    pub axes: Option<Vec<i64>>,
    pub policy: AspectPolicy,
}

fn interp_mode(name: &str) -> Result<i64, String> {
    match name {
        "nearest" => Ok(MODE_NEAREST),
        "linear" | "bilinear" | "trilinear" => Ok(MODE_LINEAR),
        "cubic" | "bicubic" => Ok(MODE_CUBIC),
        other => Err(format!("attribute \"mode\" is \"{other}\", expected nearest, linear or cubic")),
    }
}

pub fn import_resize(cx: &mut NodeImport) -> Result<Op, String> {
    let upsample = cx.op_type == "Upsample";
    let op_name = if upsample { "Upsample" } else { "Resize" };
    let mode = interp_mode(&cx.attrs.string_or("mode", "nearest")?)?;
    let legacy = upsample || cx.opset < 11;
    if legacy {
        // (X, scales) or, for Upsample-7, X with a `scales` attribute.
        let scales = match cx.attrs.floats("scales")? {
            Some(s) => Some(cx.add_const("scales", Tensor::from_f32s(vec![s.len()], &s))),
            None => cx.inputs.get(1).copied().flatten(),
        };
        let scales = scales.ok_or_else(|| format!("{op_name}: the scales input (or attribute) is required"))?;
        cx.inputs = vec![cx.inputs.first().copied().flatten(), None, Some(scales)];
        if mode == MODE_CUBIC {
            return Err(format!("{op_name}-{}: mode \"cubic\" needs opset 11", cx.opset));
        }
        return Ok(Op::Resize(Resize {
            op_name,
            mode,
            coord_mode: COORD_ASYMMETRIC,
            nearest_mode: NEAREST_SIMPLE,
            cubic_a: -0.75,
            exclude_outside: false,
            extrapolation_value: 0.0,
            antialias: false,
            axes: None,
            policy: AspectPolicy::Stretch,
        }));
    }
    let coord_mode = match cx.attrs.string_or("coordinate_transformation_mode", "half_pixel")?.as_str() {
        "half_pixel" => COORD_HALF_PIXEL,
        "half_pixel_symmetric" => COORD_HALF_PIXEL_SYMMETRIC,
        "pytorch_half_pixel" => COORD_PYTORCH_HALF_PIXEL,
        "align_corners" => COORD_ALIGN_CORNERS,
        "asymmetric" => COORD_ASYMMETRIC,
        "tf_crop_and_resize" => COORD_TF_CROP_AND_RESIZE,
        "tf_half_pixel_for_nn" => COORD_TF_HALF_PIXEL_FOR_NN,
        other => return Err(format!("attribute \"coordinate_transformation_mode\" is \"{other}\", which is unknown")),
    };
    let nearest_mode = match cx.attrs.string_or("nearest_mode", "round_prefer_floor")?.as_str() {
        "round_prefer_floor" => NEAREST_ROUND_PREFER_FLOOR,
        "round_prefer_ceil" => NEAREST_ROUND_PREFER_CEIL,
        "floor" => NEAREST_FLOOR,
        "ceil" => NEAREST_CEIL,
        other => return Err(format!("attribute \"nearest_mode\" is \"{other}\", which is unknown")),
    };
    let policy = match cx.attrs.string_or("keep_aspect_ratio_policy", "stretch")?.as_str() {
        "stretch" => AspectPolicy::Stretch,
        "not_larger" => AspectPolicy::NotLarger,
        "not_smaller" => AspectPolicy::NotSmaller,
        other => return Err(format!("attribute \"keep_aspect_ratio_policy\" is \"{other}\", which is unknown")),
    };
    let antialias = cx.attrs.int_or("antialias", 0)? != 0;
    if antialias && mode == MODE_NEAREST {
        return Err("attribute \"antialias\" is set, which mode \"nearest\" does not support".into());
    }
    Ok(Op::Resize(Resize {
        op_name,
        mode,
        coord_mode,
        nearest_mode,
        cubic_a: cx.attrs.float_or("cubic_coeff_a", -0.75)? as f64,
        exclude_outside: cx.attrs.int_or("exclude_outside", 0)? != 0,
        extrapolation_value: cx.attrs.float_or("extrapolation_value", 0.0)? as f64,
        antialias,
        axes: cx.attrs.ints("axes")?,
        policy,
    }))
}

/// (is constant, shape) of Resize's scales and sizes inputs, when present.
fn sizing_inputs<'a>(cx: &'a InferCx) -> [Option<(bool, &'a [usize])>; 2] {
    [2, 3].map(|i| cx.opt_input(i).map(|t| (t.value.is_some(), t.shape)))
}

/// A scales/sizes/roi input that is present and not empty.
fn given(t: Option<&Tensor>) -> Option<&Tensor> {
    t.filter(|t| !t.is_empty())
}

impl Resize {
    /// The axes the scales or sizes input covers.
    fn axes(&self, rank: usize) -> Result<Vec<usize>, String> {
        let Some(list) = &self.axes else {
            return Ok((0..rank).collect());
        };
        let mut axes = Vec::new();
        for &a in list {
            let axis = crate::ir::shape::normalize_axis(a, rank)
                .ok_or_else(|| format!("attribute \"axes\" holds {a}, out of range for rank {rank}"))?;
            if axes.contains(&axis) {
                return Err(format!("attribute \"axes\" repeats axis {a}"));
            }
            axes.push(axis);
        }
        Ok(axes)
    }

    fn sizing(&self, axes: &[usize]) -> ResizeSizing {
        let mut s = ResizeSizing {
            axes_len: axes.len() as i64,
            policy: match self.policy {
                AspectPolicy::Stretch => POLICY_STRETCH,
                AspectPolicy::NotLarger => POLICY_NOT_LARGER,
                AspectPolicy::NotSmaller => POLICY_NOT_SMALLER,
            },
            ..Default::default()
        };
        for (slot, &a) in s.axes.iter_mut().zip(axes) {
            *slot = a as i64;
        }
        s
    }

    /// The kernel params before sizing: dims (output = input), modes, roi.
    fn template(&self, x: &[usize], roi: Option<&Tensor>, axes: &[usize]) -> Result<ResizeParams, String> {
        let rank = x.len();
        if rank > MAX_RANK {
            return Err(format!("input 0 has rank {rank}, at most {MAX_RANK} is supported"));
        }
        let mut p = ResizeParams {
            rank: rank as i64,
            mode: self.mode,
            coord_mode: self.coord_mode,
            nearest_mode: self.nearest_mode,
            exclude_outside: self.exclude_outside as i64,
            antialias: self.antialias as i64,
            cubic_a: self.cubic_a,
            extrapolation_value: self.extrapolation_value,
            ..Default::default()
        };
        for (a, &d) in x.iter().enumerate() {
            p.in_dims[a] = d as i64;
            p.out_dims[a] = d as i64;
            p.scales[a] = 1.0;
            p.roi_end[a] = 1.0;
        }
        if self.coord_mode == COORD_TF_CROP_AND_RESIZE {
            let roi =
                given(roi).ok_or("coordinate_transformation_mode tf_crop_and_resize needs a constant roi input")?;
            if roi.len() != 2 * axes.len() {
                return Err(format!("input roi has {} values, expected {}", roi.len(), 2 * axes.len()));
            }
            for (i, &a) in axes.iter().enumerate() {
                p.roi_start[a] = roi.get_f64(i);
                p.roi_end[a] = roi.get_f64(axes.len() + i);
            }
        }
        Ok(p)
    }

    /// The kernel params for input shape `x` and the constant roi, scales
    /// and sizes inputs (sized by the same code the run-time path uses).
    fn params(
        &self,
        x: &[usize],
        roi: Option<&Tensor>,
        scales: Option<&Tensor>,
        sizes: Option<&Tensor>,
    ) -> Result<ResizeParams, String> {
        let axes = self.axes(x.len())?;
        let mut p = self.template(x, roi, &axes)?;
        let (scales, sizes) = match (given(scales), given(sizes)) {
            (Some(s), _) => (Some((0..s.len()).map(|i| s.get_f64(i) as f32).collect::<Vec<_>>()), Vec::new()),
            (None, Some(s)) if s.dtype != DType::I64 => {
                return Err(format!("input sizes is {}, expected i64", s.dtype))
            }
            (None, Some(s)) => (None, (0..s.len()).map(|i| s.get_i64(i)).collect()),
            (None, None) => return Err(format!("{}: one of the scales and sizes inputs is required", self.op_name)),
        };
        let which = if scales.is_some() { "scales" } else { "sizes" };
        resize_apply_sizing(&mut p, &self.sizing(&axes), scales.as_deref(), &sizes)
            .map_err(|e| format!("input {which}: {e}"))?;
        Ok(p)
    }

    fn params_from(&self, cx: &InferCx) -> Result<ResizeParams, String> {
        let x = cx.input(0)?;
        // Empty inputs stand for omitted ones; roi matters only for tf_crop_and_resize.
        let value = |i: usize| match cx.opt_input(i) {
            Some(info) if !info.shape.contains(&0) => cx.opt_const_input(i),
            _ => Ok(None),
        };
        let roi = if self.coord_mode == COORD_TF_CROP_AND_RESIZE { value(1)? } else { None };
        self.params(x.shape, roi, value(2)?, value(3)?)
    }

    /// Symbolic inference: input dims `dims`, some symbolic, resized by
    /// constant whole-number scales (upsampling by 2, as detectors do):
    /// `floor(dim * scale)` is then `dim * scale` exactly. Other scales,
    /// and sizes, are not inferred over symbolic dims yet.
    fn symbolic_dims(&self, cx: &InferCx, mut dims: Vec<DimExpr>) -> Result<Vec<DimExpr>, String> {
        if self.coord_mode == COORD_TF_CROP_AND_RESIZE {
            return Err("tf_crop_and_resize is not inferred over symbolic dims yet".into());
        }
        let shape = dims_text(&dims);
        let unsupported = || format!("{} over {shape} needs constant whole-number scales", self.op_name);
        let scales = cx.opt_input(2).and_then(|t| t.value).filter(|t| !t.is_empty()).ok_or_else(unsupported)?;
        let axes = self.axes(dims.len())?;
        if scales.len() != axes.len() {
            return Err(format!("input scales has {} values, expected {}", scales.len(), axes.len()));
        }
        for (i, &a) in axes.iter().enumerate() {
            let scale = scales.get_f64(i);
            let whole = (scale >= 1.0 && scale.fract() == 0.0 && scale <= i64::MAX as f64).then_some(scale as i64);
            let scaled = whole.and_then(|k| dims[a].checked_scale(k)).ok_or_else(unsupported)?;
            dims[a] = scaled;
        }
        Ok(dims)
    }

    /// The run-time scales (input 2) or sizes (input 3): whichever is given
    /// and not empty, when it is not a constant.
    fn run_time_sizing_input(&self, inputs: [Option<(bool, &[usize])>; 2]) -> Option<usize> {
        let present = |i: usize| inputs[i - 2].filter(|(_, shape)| !shape.contains(&0));
        let chosen = if present(2).is_some() { 2 } else { 3 };
        present(chosen).filter(|(is_const, _)| !is_const).map(|_| chosen)
    }

    /// Lowering with sizes known only at run time: prepare the params in
    /// scratch, allocate the output and the tap tables, resize (portable:
    /// all of it in [`resize_loops::resize_run_time`]).
    fn lower_run_time(&self, cx: &mut Lower, sizing_input: usize) -> Result<(), String> {
        let (dtype, x_shape) = cx.input_type(0)?;
        let axes = self.axes(x_shape.len())?;
        let template = self.template(&x_shape, cx.const_input(1), &axes)?;
        let (_, given_shape) = cx.input_type(sizing_input)?;
        let values = cx.input_ptr(sizing_input)?;
        if cx.portable() {
            let len = given_shape.iter().product();
            let given = resize_loops::RunTimeSizing { values, from_scales: sizing_input == 2, len };
            let x = cx.input_ptr(0)?;
            return resize_loops::resize_run_time(cx, &template, &self.sizing(&axes), &given, dtype, x);
        }
        let (template, sizing) = (cx.params(&template)?, cx.params(&self.sizing(&axes))?);
        let null = cx.iconst(0);
        let (scales, sizes) = if sizing_input == 2 { (values, null) } else { (null, values) };
        let len = cx.iconst(given_shape.iter().product::<usize>() as i64);
        let p = Ref::<ResizeParams>::to(cx.scratch_ptr()?);
        cx.call_checked(kernels::onnxc_resize_prepare, (template, sizing, Ptr(scales), Ptr(sizes), I64(len), p))?;
        let ptr = cx.ptr_type();
        let out_dims = std::mem::offset_of!(ResizeParams, out_dims);
        let dims: Vec<_> = (0..x_shape.len())
            .map(|a| cx.ins().load(ptr, MemFlagsData::trusted(), p.value(), (out_dims + 8 * a) as i32))
            .collect();
        let y = cx.alloc_output(0, &dims)?;
        let scratch_bytes = cx.call_count(kernels::onnxc_resize_scratch, (p,))?;
        let taps = cx.alloc_scratch(scratch_bytes)?;
        let x = cx.input_ptr(0)?;
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_resize_f32, kernels::onnxc_resize_f64, dtype),
            (p, Ptr(x), Ptr(y), Ptr(taps)),
        )
    }
}

impl Operator for Resize {
    fn name(&self) -> &'static str {
        self.op_name
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !x.dtype.is_float() {
            return Err(format!("input 0 is {}, only float types are supported yet", x.dtype));
        }
        let dims = cx.dims(0)?;
        if dims.iter().any(|d| d.as_size().is_none()) {
            return Ok(vec![Inferred::of_dims(x.dtype, self.symbolic_dims(cx, dims)?)?]);
        }
        if let Some(i) = self.run_time_sizing_input(sizing_inputs(cx)) {
            let (given, axes) = (cx.input(i)?, self.axes(x.shape.len())?);
            let want = if i == 2 { DType::F32 } else { DType::I64 };
            if given.dtype != want {
                return Err(format!("input {i} is {}, expected {want}", given.dtype));
            }
            if !matches!(x.dtype, DType::F32 | DType::F64) {
                return Err(format!("run-time scales or sizes with {} data are not compiled yet", x.dtype));
            }
            if self.coord_mode == COORD_TF_CROP_AND_RESIZE {
                self.template(x.shape, Some(cx.const_input(1)?), &axes)?;
            }
            let dims = (0..x.shape.len())
                .map(|a| if axes.contains(&a) { Dim::Dynamic(None) } else { Dim::Known(x.shape[a]) })
                .collect();
            return Ok(vec![Inferred::data_dependent(x.dtype, dims)]);
        }
        let p = self.params_from(cx)?;
        let out = p.out_dims[..x.shape.len()].iter().map(|&d| d as usize).collect();
        Ok(vec![Inferred::new(x.dtype, out)])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        if self.run_time_sizing_input(sizing_inputs(cx)).is_some() {
            return std::mem::size_of::<ResizeParams>();
        }
        self.params_from(cx).map_or(0, |p| resize_scratch_bytes(&p))
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        if cx.output_is_dynamic(0) {
            let inputs = [2, 3].map(|i| cx.input_type(i).ok().map(|(_, s)| (cx.const_input(i).is_some(), s)));
            let i = self
                .run_time_sizing_input([0, 1].map(|k| inputs[k].as_ref().map(|(c, s)| (*c, s.as_slice()))))
                .ok_or("no run-time scales or sizes")?;
            return self.lower_run_time(cx, i);
        }
        let (dtype, x_shape) = cx.input_type(0)?;
        let p = self.params(x_shape.as_slice(), cx.const_input(1), cx.const_input(2), cx.const_input(3))?;
        if cx.portable() {
            let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
            return resize_loops::resize(cx, &p, dtype, x, y);
        }
        let scratch = if resize_scratch_bytes(&p) > 0 { cx.scratch_ptr()? } else { cx.iconst(0) };
        let params = cx.params(&p)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_resize_f32, kernels::onnxc_resize_f64, dtype),
            (params, Ptr(x), Ptr(y), Ptr(scratch)),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[derive(Clone, Debug)]
pub struct GridSample {
    pub mode: i64,
    /// `PADDING_ZEROS`, `PADDING_BORDER` or `PADDING_REFLECTION`.
    pub padding: i64,
    pub align_corners: bool,
    /// Opset 16 admits only 4-D inputs.
    pub only_2d: bool,
}

pub fn import_grid_sample(cx: &mut NodeImport) -> Result<Op, String> {
    let default_mode = if cx.opset < 20 { "bilinear" } else { "linear" };
    let padding = match cx.attrs.string_or("padding_mode", "zeros")?.as_str() {
        "zeros" => PADDING_ZEROS,
        "border" => PADDING_BORDER,
        "reflection" => PADDING_REFLECTION,
        other => {
            return Err(format!("attribute \"padding_mode\" is \"{other}\", expected zeros, border or reflection"))
        }
    };
    Ok(Op::GridSample(GridSample {
        mode: interp_mode(&cx.attrs.string_or("mode", default_mode)?)?,
        padding,
        align_corners: cx.attrs.int_or("align_corners", 0)? != 0,
        only_2d: cx.opset < 20,
    }))
}

impl GridSample {
    fn params(&self, x: &[usize], grid: &[usize]) -> Result<GridSampleParams, String> {
        let k = x.len().saturating_sub(2);
        if x.len() < 3 || k > MAX_RANK || (self.only_2d && k != 2) {
            let want = if self.only_2d { "4 (opset 16)".to_string() } else { format!("3 to {}", MAX_RANK + 2) };
            return Err(format!("input 0 has rank {}, expected {want}", x.len()));
        }
        if grid.len() != k + 2 || grid[0] != x[0] || grid[k + 1] != k {
            return Err(format!("input 1 (grid) has shape {grid:?}, expected [{}, ..{k} dims.., {k}]", x[0]));
        }
        let mut p = GridSampleParams {
            n: x[0] as i64,
            c: x[1] as i64,
            rank: k as i64,
            mode: self.mode,
            padding: self.padding,
            align_corners: self.align_corners as i64,
            ..Default::default()
        };
        for i in 0..k {
            p.in_dims[i] = x[i + 2] as i64;
            p.out_dims[i] = grid[i + 1] as i64;
            if x[i + 2] == 0 && grid[i + 1] != 0 {
                return Err(format!("input 0 has an empty spatial dim {} to sample from", i + 2));
            }
        }
        Ok(p)
    }
}

impl Operator for GridSample {
    fn name(&self) -> &'static str {
        "GridSample"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (x, grid) = (cx.input(0)?, cx.input(1)?);
        let compute = compute_type(x.dtype);
        if !x.dtype.is_float() || compute_type(grid.dtype) != compute {
            return Err(format!(
                "X is {} and grid {}: both must be float, f64 for both or neither",
                x.dtype, grid.dtype
            ));
        }
        self.params(x.shape, grid.shape)?;
        let k = x.shape.len() - 2;
        let out = x.shape[..2].iter().chain(&grid.shape[1..=k]).copied().collect();
        Ok(vec![Inferred::new(x.dtype, out)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, x_shape) = cx.input_type(0)?;
        let p = self.params(&x_shape, &cx.input_type(1)?.1)?;
        if cx.portable() {
            return crate::codegen::grid_sample_loops::grid_sample(cx, dtype, &p);
        }
        let params = cx.params(&p)?;
        let (x, grid, y) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?);
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_grid_sample_f32, kernels::onnxc_grid_sample_f64, dtype),
            (params, Ptr(x), Ptr(grid), Ptr(y)),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[derive(Clone, Debug)]
pub struct AffineGrid {
    pub align_corners: bool,
}

pub fn import_affine_grid(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::AffineGrid(AffineGrid { align_corners: cx.attrs.int_or("align_corners", 0)? != 0 }))
}

impl AffineGrid {
    fn params(&self, theta: &[usize], size: &Tensor) -> Result<AffineGridParams, String> {
        let size = size.to_i64s();
        let k = size.len().saturating_sub(2);
        if !(2..=3).contains(&k) {
            return Err(format!("input 1 (size) has {} values, expected 4 ([N, C, H, W]) or 5", size.len()));
        }
        if size.iter().any(|&d| d < 0) {
            return Err(format!("input 1 (size) is {size:?}, with a negative dim"));
        }
        if theta != [size[0] as usize, k, k + 1] {
            return Err(format!("input 0 (theta) has shape {theta:?}, expected [{}, {k}, {}]", size[0], k + 1));
        }
        let mut p = AffineGridParams {
            n: size[0],
            rank: k as i64,
            align_corners: self.align_corners as i64,
            ..Default::default()
        };
        p.dims[..k].copy_from_slice(&size[2..]);
        Ok(p)
    }

    fn out_shape(p: &AffineGridParams) -> Vec<usize> {
        let k = p.rank as usize;
        std::iter::once(p.n).chain(p.dims[..k].iter().copied()).chain([p.rank]).map(|d| d as usize).collect()
    }
}

impl Operator for AffineGrid {
    fn name(&self) -> &'static str {
        "AffineGrid"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let theta = cx.input(0)?;
        if !theta.dtype.is_float() {
            return Err(format!("input 0 (theta) is {}, expected a float type", theta.dtype));
        }
        let p = self.params(theta.shape, cx.const_input(1)?)?;
        let shape = Self::out_shape(&p);
        crate::ir::shape::element_count(&shape).ok_or("the output size overflows")?;
        Ok(vec![Inferred::new(theta.dtype, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, theta_shape) = cx.input_type(0)?;
        let size = cx.const_input(1).ok_or("input 1 (size) must be a compile-time constant")?.clone();
        let p = self.params(&theta_shape, &size)?;
        let (theta, grid) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        if cx.portable() {
            return crate::codegen::grid_sample_loops::affine_grid(cx, dtype, &p, theta, grid);
        }
        let params = cx.params(&p)?;
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_affine_grid_f32, kernels::onnxc_affine_grid_f64, dtype),
            (params, Ptr(theta), Ptr(grid)),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}
