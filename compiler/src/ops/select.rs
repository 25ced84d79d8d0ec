//! Operators that select by value, so their output size depends on the
//! data: NonZero, Compress, Unique and NonMaxSuppression.
//!
//! Their outputs have [`Dim::Dynamic`] dims bounded by the input's size.
//! The lowering calls a counting kernel, gets exactly that much memory from
//! the context's allocator ([`Lower::alloc_output`]), then has the kernel
//! write it (`runtime-support/src/generic/dynamic.rs`). With inputs known at
//! compile time they are folded like any other node; Compress with a
//! constant condition has a static shape and needs no allocator. In
//! portable mode all four count and write in the loops of
//! [`crate::codegen::dynamic_loops`].
//!
//! Type constraints (ONNX): NonZero (9, 13) and Unique (11) take any
//! numeric or bool tensor; Compress (9, 11) any tensor with a bool
//! condition; NonMaxSuppression (10, 11) f32 boxes and scores with optional
//! i64 `max_output_boxes_per_class` and f32 thresholds.

use super::gather::{axis_attr, dims_array, max_rank, product, split_axis};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr, Ref, I64};
use crate::codegen::{dynamic_loops, InstBuilder, Lower, Value};
use crate::import::NodeImport;
use crate::ir::{DType, Dim};
use onnxc_runtime::{NmsParams, NonZeroParams, SliceParams};

// ---------------------------------------------------------------------------
// NonZero
// ---------------------------------------------------------------------------

/// NonZero: the coordinates of the nonzero elements, `[rank, count]`.
#[derive(Clone, Debug)]
pub struct NonZero;

fn nonzero_params(dtype: DType, shape: &[usize]) -> Result<NonZeroParams, String> {
    max_rank(shape.len(), "input 0")?;
    Ok(NonZeroParams { dtype: dtype.onnx_code() as i64, rank: shape.len() as i64, dims: dims_array(shape) })
}

impl Operator for NonZero {
    fn name(&self) -> &'static str {
        "NonZero"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        nonzero_params(x.dtype, x.shape)?;
        let n = product(x.shape)? as usize;
        Ok(vec![Inferred::data_dependent(DType::I64, vec![Dim::Known(x.shape.len()), Dim::Dynamic(Some(n))])])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let p = nonzero_params(dtype, &shape)?;
        let x = cx.input_ptr(0)?;
        let rank = cx.iconst(shape.len() as i64);
        if cx.portable() {
            let count = dynamic_loops::count_nonzero(cx, dtype, x, product(&shape)? as usize)?;
            let y = cx.alloc_output(0, &[rank, count])?;
            return dynamic_loops::nonzero(cx, dtype, &shape, x, y, count);
        }
        let params = cx.params(&p)?;
        let count = cx.call_count(kernels::onnxc_count_nonzero, (params, Ptr(x)))?;
        let y = cx.alloc_output(0, &[rank, count])?;
        cx.call_checked(kernels::onnxc_nonzero, (params, Ptr(x), Ptr(y), I64(count)))
    }
}

pub fn import_nonzero(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::NonZero(NonZero))
}

// ---------------------------------------------------------------------------
// Compress
// ---------------------------------------------------------------------------

/// Compress: the slices along `axis` (of the flattened input without one)
/// whose condition entry is true.
#[derive(Clone, Debug)]
pub struct Compress {
    pub axis: Option<i64>,
}

impl Compress {
    /// The input as `[outer, len, inner]` and the condition entries that
    /// count (the first `min(len, condition length)`).
    fn layout(
        &self,
        x: (DType, &[usize]),
        cond: (DType, &[usize]),
    ) -> Result<(SliceParams, usize, Vec<usize>), String> {
        let ((dtype, shape), (cond_dtype, cond_shape)) = (x, cond);
        if cond_dtype != DType::Bool || cond_shape.len() != 1 {
            return Err(format!("input 1 (condition) must be a 1-D bool tensor, got {cond_dtype}{cond_shape:?}"));
        }
        let (outer, len, inner, out_shape) = match self.axis {
            Some(axis) => {
                let (o, l, i) = split_axis(shape, axis_attr(axis, shape.len())?)?;
                (o, l, i, shape.to_vec())
            }
            None => (1, product(shape)?, 1, vec![0]),
        };
        let p = SliceParams {
            dtype: dtype.onnx_code() as i64,
            elem_bytes: dtype.size() as i64,
            outer,
            len,
            inner,
            sorted: 0,
        };
        Ok((p, cond_shape[0].min(len as usize), out_shape))
    }

    fn axis_index(&self, rank: usize) -> usize {
        self.axis.and_then(|a| axis_attr(a, rank).ok()).unwrap_or(0)
    }
}

impl Operator for Compress {
    fn name(&self) -> &'static str {
        "Compress"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (x, cond) = (cx.input(0)?, cx.input(1)?);
        let (_, used, mut shape) = self.layout((x.dtype, x.shape), (cond.dtype, cond.shape))?;
        let (dtype, at) = (x.dtype, self.axis_index(x.shape.len()));
        if let Some(cond) = cx.input(1)?.value {
            shape[at] = (0..used).filter(|&j| cond.get_i64(j) != 0).count();
            return Ok(vec![Inferred::new(dtype, shape)]);
        }
        let mut dims: Vec<Dim> = shape.iter().map(|&d| Dim::Known(d)).collect();
        dims[at] = Dim::Dynamic(Some(used));
        Ok(vec![Inferred::data_dependent(dtype, dims)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let ((dtype, x_shape), (cond_dtype, cond_shape)) = (cx.input_type(0)?, cx.input_type(1)?);
        let (p, used, shape) = self.layout((dtype, &x_shape), (cond_dtype, &cond_shape))?;
        let (x, cond) = (cx.input_ptr(0)?, cx.input_ptr(1)?);
        let (y, count) = if cx.output_is_dynamic(0) {
            let count = if cx.portable() {
                dynamic_loops::count_nonzero(cx, DType::Bool, cond, used)?
            } else {
                let count_params = cx.params(&nonzero_params(DType::Bool, &[used])?)?;
                cx.call_count(kernels::onnxc_count_nonzero, (count_params, Ptr(cond)))?
            };
            let at = self.axis_index(x_shape.len());
            let dims: Vec<_> =
                shape.iter().enumerate().map(|(i, &d)| if i == at { count } else { cx.iconst(d as i64) }).collect();
            (cx.alloc_output(0, &dims)?, count)
        } else {
            let (_, out) = cx.output_type(0)?;
            let count = out[self.axis_index(out.len())] as i64;
            (cx.output_ptr(0)?, cx.iconst(count))
        };
        if cx.portable() {
            let layout = [p.outer, p.len, p.inner, p.elem_bytes];
            return dynamic_loops::compress(cx, layout, used, [x, cond, y], count);
        }
        let params = cx.params(&p)?;
        let cond_len = cx.iconst(cond_shape[0] as i64);
        cx.call_checked(kernels::onnxc_compress, (params, Ptr(x), Ptr(cond), I64(cond_len), Ptr(y), I64(count)))
    }
}

pub fn import_compress(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Compress(Compress { axis: cx.attrs.int("axis")? }))
}

// ---------------------------------------------------------------------------
// Unique
// ---------------------------------------------------------------------------

/// Unique: the distinct slices along `axis` (elements without one), sorted
/// or in order of first occurrence, with their first indices, the inverse
/// mapping and their counts.
#[derive(Clone, Debug)]
pub struct Unique {
    pub axis: Option<i64>,
    pub sorted: bool,
}

impl Unique {
    fn params(&self, dtype: DType, shape: &[usize]) -> Result<SliceParams, String> {
        let (outer, len, inner) = match self.axis {
            Some(axis) => split_axis(shape, axis_attr(axis, shape.len())?)?,
            None => (1, product(shape)?, 1),
        };
        Ok(SliceParams {
            dtype: dtype.onnx_code() as i64,
            elem_bytes: dtype.size() as i64,
            outer,
            len,
            inner,
            sorted: self.sorted as i64,
        })
    }
}

impl Operator for Unique {
    fn name(&self) -> &'static str {
        "Unique"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        let p = self.params(x.dtype, x.shape)?;
        let len = p.len as usize;
        let y = match self.axis {
            Some(axis) => {
                let at = axis_attr(axis, x.shape.len())?;
                let mut dims: Vec<Dim> = x.shape.iter().map(|&d| Dim::Known(d)).collect();
                dims[at] = Dim::Dynamic(Some(len));
                dims
            }
            None => vec![Dim::Dynamic(Some(len))],
        };
        let per_unique = || Inferred::data_dependent(DType::I64, vec![Dim::Dynamic(Some(len))]);
        Ok(vec![Inferred::data_dependent(x.dtype, y), per_unique(), Inferred::new(DType::I64, vec![len]), per_unique()])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        cx.opt_input(0).and_then(|x| self.params(x.dtype, x.shape).ok()).map_or(0, |p| 3 * 8 * p.len as usize)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let p = self.params(dtype, &shape)?;
        let x = cx.input_ptr(0)?;
        let scratch = if p.len > 0 { cx.scratch_ptr()? } else { cx.iconst(0) };
        // The kernels' parameter block's address (both calls read it).
        let params = if cx.portable() { None } else { Some(cx.params(&p)?.value()) };
        let count = match params {
            Some(params) => cx.call_count(kernels::onnxc_unique, (Ref::to(params), Ptr(x), Ptr(scratch)))?,
            None => dynamic_loops::unique_count(cx, &p, dtype, x, scratch)?,
        };
        let y_dims: Vec<_> = match self.axis {
            Some(axis) => {
                let at = axis_attr(axis, shape.len())?;
                shape.iter().enumerate().map(|(i, &d)| if i == at { count } else { cx.iconst(d as i64) }).collect()
            }
            None => vec![count],
        };
        let y = cx.alloc_output(0, &y_dims)?;
        let indices = if cx.has_output(1) { Some(cx.alloc_output(1, &[count])?) } else { None };
        let inverse = if cx.has_output(2) { Some(cx.output_ptr(2)?) } else { None };
        let counts = if cx.has_output(3) { Some(cx.alloc_output(3, &[count])?) } else { None };
        let Some(params) = params else {
            let out = dynamic_loops::UniqueOutputs { y, indices, inverse, counts };
            dynamic_loops::unique_write(cx, &p, x, scratch, count, &out);
            return Ok(());
        };
        let [indices, inverse, counts] = [indices, inverse, counts].map(|o| o.unwrap_or_else(|| cx.iconst(0)));
        cx.call_checked(
            kernels::onnxc_unique_write,
            (Ref::to(params), Ptr(x), Ptr(scratch), I64(count), Ptr(y), Ptr(indices), Ptr(inverse), Ptr(counts)),
        )
    }
}

pub fn import_unique(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Unique(Unique { axis: cx.attrs.int("axis")?, sorted: super::gather::flag(cx, "sorted", true)? }))
}

// ---------------------------------------------------------------------------
// NonMaxSuppression
// ---------------------------------------------------------------------------

/// NonMaxSuppression: per batch and class, the boxes kept by greedy
/// suppression, best score first, as `[selected, 3]` (batch, class, box).
#[derive(Clone, Debug)]
pub struct NonMaxSuppression {
    pub center_point_box: bool,
}

impl NonMaxSuppression {
    /// From the inputs' types (`None` for omitted ones).
    fn params(&self, inputs: &[Option<(DType, &[usize])>]) -> Result<NmsParams, String> {
        let input = |i: usize| inputs.get(i).copied().flatten().ok_or_else(|| format!("input {i} is required"));
        let ((boxes_dtype, boxes), (scores_dtype, scores)) = (input(0)?, input(1)?);
        if boxes_dtype != DType::F32 || scores_dtype != DType::F32 {
            return Err(format!("boxes and scores must be f32, got {boxes_dtype} and {scores_dtype}"));
        }
        let (&[b, n, four], &[sb, c, sn]) = (boxes, scores) else {
            return Err(format!(
                "boxes {boxes:?} must be [batches, boxes, 4], scores {scores:?} [batches, classes, boxes]"
            ));
        };
        if four != 4 || sb != b || sn != n {
            return Err(format!("boxes {boxes:?} and scores {scores:?} do not match"));
        }
        for (i, want) in [(2, DType::I64), (3, DType::F32), (4, DType::F32)] {
            if let Some((dtype, shape)) = inputs.get(i).copied().flatten() {
                if dtype != want || product(shape)? != 1 {
                    return Err(format!("input {i} must be one {want} value, got {dtype}{shape:?}"));
                }
            }
        }
        product(&[b, c, n, 3, 8])?;
        Ok(NmsParams {
            batches: b as i64,
            classes: c as i64,
            boxes: n as i64,
            center_point_box: self.center_point_box as i64,
        })
    }

    /// Bytes for every possible selection (`[b * c * n, 3]` i64s).
    fn selection_bytes(p: &NmsParams) -> usize {
        (p.batches * p.classes * p.boxes * 3 * 8) as usize
    }
}

impl Operator for NonMaxSuppression {
    fn name(&self) -> &'static str {
        "NonMaxSuppression"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let p = self.params(&input_types(cx))?;
        let per_class = match cx.opt_input(2).and_then(|t| t.value) {
            Some(t) => (t.get_i64(0).max(0) as usize).min(p.boxes as usize),
            None => p.boxes as usize,
        };
        let most = p.batches as usize * p.classes as usize * per_class;
        Ok(vec![Inferred::data_dependent(DType::I64, vec![Dim::Dynamic(Some(most)), Dim::Known(3)])])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        self.params(&input_types(cx)).map_or(0, |p| Self::selection_bytes(&p) + 2 * 8 * p.boxes as usize)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let types: Vec<_> = (0..5).map(|i| cx.input_type(i).ok()).collect();
        let p = self.params(&types.iter().map(|t| t.as_ref().map(|(d, s)| (*d, s.as_slice()))).collect::<Vec<_>>())?;
        let selected = cx.scratch_ptr()?;
        let work = cx.ins().iadd_imm_s(selected, Self::selection_bytes(&p) as i64);
        let count = if cx.portable() {
            let optional =
                |cx: &mut Lower, i: usize| if cx.has_input(i) { cx.input_ptr(i).map(Some) } else { Ok(None) };
            let inputs = dynamic_loops::NmsInputs {
                boxes: cx.input_ptr(0)?,
                scores: cx.input_ptr(1)?,
                max_out: optional(cx, 2)?,
                iou: optional(cx, 3)?,
                score_threshold: optional(cx, 4)?,
            };
            dynamic_loops::nms(cx, &p, &inputs, selected, work)?
        } else {
            self.call_kernel(cx, &p, selected, work)?
        };
        let three = cx.iconst(3);
        let y = cx.alloc_output(0, &[count, three])?;
        let bytes = cx.ins().imul_imm_s(count, 24);
        cx.copy_bytes_dynamic(y, selected, bytes);
        Ok(())
    }
}

impl NonMaxSuppression {
    /// `onnxc_nms` into `selected`; returns the count.
    fn call_kernel(&self, cx: &mut Lower, p: &NmsParams, selected: Value, work: Value) -> Result<Value, String> {
        let params = cx.params(p)?;
        let args: Vec<_> = (0..5).map(|i| cx.opt_input_ptr(i)).collect();
        cx.call_count(
            kernels::onnxc_nms,
            (params, Ptr(args[0]), Ptr(args[1]), Ptr(args[2]), Ptr(args[3]), Ptr(args[4]), Ptr(selected), Ptr(work)),
        )
    }
}

fn input_types<'a>(cx: &'a InferCx) -> Vec<Option<(DType, &'a [usize])>> {
    cx.inputs.iter().map(|i| i.as_ref().map(|i| (i.dtype, i.shape))).collect()
}

pub fn import_nms(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::NonMaxSuppression(NonMaxSuppression {
        center_point_box: super::gather::flag(cx, "center_point_box", false)?,
    }))
}
