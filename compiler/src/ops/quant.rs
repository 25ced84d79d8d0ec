//! Linear quantization: QuantizeLinear and DequantizeLinear (per tensor,
//! per axis, blocked), DynamicQuantizeLinear, MatMulInteger, ConvInteger,
//! QLinearMatMul and QLinearConv.
//!
//! Type constraints (ONNX, opsets 10 to 25): quantized tensors are
//! u8/i8/u16/i16, packed int4/uint4/int2/uint2 (which the kernels address
//! themselves), or float8/float4 (rounded per Cast's rules, `saturate`
//! included, with the zero point added as a float); the float side is f32, f16 or bf16 (QuantizeLinear also takes i32), with
//! scales of the float type. The integer products accumulate in i32 after
//! subtracting zero points (`onnxc_qmatmul`, `onnxc_qconv`, the latter with
//! its im2col matrix in the node's scratch after the accumulators); the QLinear
//! forms then requantize those accumulators into the output type
//! (`onnxc_requantize`). Kernels: `runtime-support/src/generic/quant.rs`.
//! A QLinearConv of 8-bit types with constant weights instead runs as one
//! call that also requantizes, its constants packed at compile time:
//! `depthwise`, else `packed` (dense); the scaled MatMulInteger that
//! `passes::fuse_qdq` makes converts its sums to f32 in place
//! (`onnxc_scale_product`). QLinearAdd, QLinearMul and QLinearLookup,
//! which that pass makes of elementwise QDQ groups, are in `elementwise`.
//! Portable mode lowers Quantize/DequantizeLinear (over the same
//! `QuantParams`), DynamicQuantizeLinear and the integer products (not the
//! scaled one) by `codegen::quant_loops`, the convolutions' walk by
//! `codegen::window_loops`.

mod depthwise;
mod elementwise;
mod packed;

pub(crate) use elementwise::binary_layout;
pub use elementwise::{QLinearBinary, QLinearLookup};

use super::conv::Conv;
use super::gather::{axis_attr, product};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr, I64};
use crate::codegen::quant_loops::{
    integer_matmul, lower_dynamic_quantize, lower_linear, IntOperand, LinearTypes, Requantize, Sums,
};
use crate::codegen::window_loops::integer_conv;
use crate::codegen::Lower;
use crate::import::NodeImport;
use crate::ir::shape::{broadcast, broadcast_strides, element_count};
use crate::ir::{DType, Tensor};
use onnxc_runtime::{
    onnxc_dequantize, qconv_packed_scratch_bytes, qconv_scratch_bytes, qdepthwise_scratch_bytes, QConvPackedParams,
    QDepthwiseParams, QMatMulParams, QOperand, QuantParams, RequantParams, ScaleParams, MAX_RANK, MINIFLOAT_SATURATE,
};

/// The types the integer products take.
fn is_quantized(dtype: DType) -> bool {
    matches!(dtype, DType::U8 | DType::I8 | DType::U16 | DType::I16)
}

/// The types Quantize/DequantizeLinear take: the integer products' and
/// the packed and float8/float4 ones.
fn is_linear_quantized(dtype: DType) -> bool {
    is_quantized(dtype) || dtype.is_packed() || (dtype.is_minifloat() && dtype != DType::F8E8M0)
}

fn is_scale(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

fn code(dtype: DType) -> i64 {
    dtype.onnx_code() as i64
}

// ---------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear
// ---------------------------------------------------------------------------

/// QuantizeLinear (`quantize`) or DequantizeLinear.
#[derive(Clone, Debug)]
pub struct Linear {
    pub quantize: bool,
    pub axis: i64,
    pub block_size: i64,
    pub output_dtype: Option<DType>,
    /// QuantizeLinear's `saturate` (float8 outputs only).
    pub saturate: bool,
}

impl Linear {
    fn name_of(&self) -> &'static str {
        if self.quantize {
            "QuantizeLinear"
        } else {
            "DequantizeLinear"
        }
    }

    /// Kernel params and the output type for input 0's type, the scale's
    /// and the zero point's.
    fn params(
        &self,
        x: (DType, &[usize]),
        scale: (DType, &[usize]),
        zp: Option<DType>,
    ) -> Result<(QuantParams, DType), String> {
        let ((x_dtype, shape), (scale_dtype, scale_shape)) = (x, scale);
        if !is_scale(scale_dtype) {
            return Err(format!("the scale is {scale_dtype}, expected f32, f16 or bf16"));
        }
        let (float_dtype, int_dtype, out) = if self.quantize {
            if !matches!(x_dtype, DType::F32 | DType::F16 | DType::BF16 | DType::I32) {
                return Err(format!("input 0 is {x_dtype}, expected f32, f16, bf16 or i32"));
            }
            let out = zp.or(self.output_dtype).unwrap_or(DType::U8);
            if self.output_dtype.is_some_and(|d| Some(d) != zp && zp.is_some()) {
                return Err(format!("attribute \"output_dtype\" differs from the zero point's type {out}"));
            }
            (x_dtype, out, out)
        } else {
            if zp.is_some_and(|z| z != x_dtype) {
                return Err(format!("the zero point is {}, input 0 is {x_dtype}", zp.unwrap_or(x_dtype)));
            }
            let out = self.output_dtype.unwrap_or(scale_dtype);
            if !is_scale(out) {
                return Err(format!("the output type {out} is not f32, f16 or bf16"));
            }
            if !is_linear_quantized(x_dtype) && x_dtype != DType::I32 {
                return Err(format!("input 0 is {x_dtype}, which is not a quantized type"));
            }
            (out, x_dtype, out)
        };
        if self.quantize && !is_linear_quantized(int_dtype) {
            return Err(format!("quantizing to {int_dtype} is not supported"));
        }
        let mut p = QuantParams {
            float_dtype: code(float_dtype),
            int_dtype: code(int_dtype),
            scale_dtype: code(scale_dtype),
            block: 1,
            saturate: if self.saturate { MINIFLOAT_SATURATE } else { 0 },
            ..Default::default()
        };
        let entries = product(scale_shape)?;
        if entries == 1 && scale_shape.len() <= 1 {
            p.len = product(shape)?;
            (p.outer, p.inner) = (1, 1);
            return Ok((p, out));
        }
        let axis = axis_attr(self.axis, shape.len())?;
        (p.outer, p.len, p.inner) = super::gather::split_axis(shape, axis)?;
        if self.block_size <= 0 {
            if scale_shape != [shape[axis]] {
                return Err(format!(
                    "the scale has shape {scale_shape:?}, expected [{}] along axis {axis}",
                    shape[axis]
                ));
            }
            p.sj = 1;
            return Ok((p, out));
        }
        let blocks = shape[axis].div_ceil(self.block_size as usize);
        let mut want = shape.to_vec();
        want[axis] = blocks;
        if scale_shape != want {
            return Err(format!(
                "the scale has shape {scale_shape:?}, expected {want:?} for block_size {}",
                self.block_size
            ));
        }
        (p.block, p.so, p.sj, p.si) = (self.block_size, blocks as i64 * p.inner, p.inner, 1);
        Ok((p, out))
    }
}

fn types<'a>(cx: &InferCx<'a>) -> Vec<Option<(DType, &'a [usize])>> {
    cx.inputs.iter().map(|i| i.as_ref().map(|i| (i.dtype, i.shape))).collect()
}

impl Operator for Linear {
    fn name(&self) -> &'static str {
        self.name_of()
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (x, scale) = (cx.input(0)?, cx.input(1)?);
        let zp = cx.opt_input(2).map(|z| z.dtype);
        let (_, out) = self.params((x.dtype, x.shape), (scale.dtype, scale.shape), zp)?;
        if let Some(z) = cx.opt_input(2) {
            // A one-element zero point of rank 0 or 1 is per tensor either way.
            let per_tensor = |shape: &[usize]| shape.len() <= 1 && shape.iter().product::<usize>() == 1;
            if z.shape != scale.shape && !(per_tensor(z.shape) && per_tensor(scale.shape)) {
                return Err(format!("the zero point has shape {:?}, the scale {:?}", z.shape, scale.shape));
            }
        }
        Ok(vec![Inferred::new(out, x.shape.to_vec())])
    }

    /// The kernels address int4/int2/float4 elements themselves.
    fn reads_packed(&self) -> bool {
        true
    }

    /// A DequantizeLinear of constants stays a node through inference, so
    /// that `passes::fuse_qdq` still sees the integer weights behind a
    /// product; that pass folds the ones it does not fuse
    /// ([`Linear::dequantize_constant`]).
    fn foldable(&self) -> bool {
        self.quantize
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (x, scale) = (cx.input_type(0)?, cx.input_type(1)?);
        let zp = cx.input_type(2).ok().map(|(d, _)| d);
        let (p, y_dtype) = self.params((x.0, &x.1), (scale.0, &scale.1), zp)?;
        if cx.portable() {
            let element_types = LinearTypes { x: x.0, y: y_dtype, scale: scale.0, zero_point: zp };
            return lower_linear(cx, self.quantize, &p, &element_types);
        }
        let params = cx.params(&p)?;
        let (x, scale, zero_point) = (Ptr(cx.input_ptr(0)?), Ptr(cx.input_ptr(1)?), Ptr(cx.opt_input_ptr(2)));
        let y = Ptr(cx.output_ptr(0)?);
        let kernel = if self.quantize { kernels::onnxc_quantize } else { kernels::onnxc_dequantize };
        cx.call_checked(kernel, (params, x, scale, zero_point, y))
    }
}

impl Linear {
    /// This DequantizeLinear of the constants `x`, `scale` and `zero_point`,
    /// evaluated now by the kernel the node would call.
    pub(crate) fn dequantize_constant(
        &self,
        x: &Tensor,
        scale: &Tensor,
        zp: Option<&Tensor>,
    ) -> Result<Tensor, String> {
        let (p, out) = self.params((x.dtype, &x.shape), (scale.dtype, &scale.shape), zp.map(|z| z.dtype))?;
        let len = element_count(&x.shape).ok_or("the input size overflows")?;
        let mut y = vec![0u8; out.bytes_for(len).ok_or("the output size overflows")?];
        let zp = zp.map_or(core::ptr::null(), |z| z.data.as_ptr());
        // SAFETY: `params` checked the shapes the kernel reads by, the
        // tensors hold their elements, and `y` the output's bytes.
        let status = unsafe { onnxc_dequantize(&p, x.data.as_ptr(), scale.data.as_ptr(), zp, y.as_mut_ptr()) };
        if status != 0 {
            return Err(format!("{} failed with status {status}", self.name_of()));
        }
        Tensor::from_bytes(out, x.shape.clone(), y).ok_or_else(|| "the output size does not match".into())
    }
}

pub fn import_linear(cx: &mut NodeImport) -> Result<Op, String> {
    let quantize = cx.op_type == "QuantizeLinear";
    Ok(Op::Linear(Linear {
        saturate: cx.attrs.int_or("saturate", 1)? != 0,
        quantize,
        axis: cx.attrs.int_or("axis", 1)?,
        block_size: cx.attrs.int_or("block_size", 0)?,
        output_dtype: cx.attrs.dtype("output_dtype")?,
    }))
}

// ---------------------------------------------------------------------------
// DynamicQuantizeLinear
// ---------------------------------------------------------------------------

/// DynamicQuantizeLinear: u8 quantization with the scale and zero point
/// computed from the input's range.
#[derive(Clone, Debug)]
pub struct DynamicQuantize;

impl Operator for DynamicQuantize {
    fn name(&self) -> &'static str {
        "DynamicQuantizeLinear"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if x.dtype != DType::F32 {
            return Err(format!("input 0 is {}, expected f32", x.dtype));
        }
        Ok(vec![
            Inferred::new(DType::U8, x.shape.to_vec()),
            Inferred::new(DType::F32, vec![]),
            Inferred::new(DType::U8, vec![]),
        ])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        if cx.portable() {
            return lower_dynamic_quantize(cx, shape.iter().product());
        }
        let n = I64(cx.iconst(product(&shape)?));
        let x = Ptr(cx.input_ptr(0)?);
        let (y, scale, zero_point) = (Ptr(cx.output_ptr(0)?), Ptr(cx.output_ptr(1)?), Ptr(cx.output_ptr(2)?));
        cx.call_checked(kernels::onnxc_dynamic_quantize, (x, n, y, scale, zero_point))
    }
}

pub fn import_dynamic(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::DynamicQuantize(DynamicQuantize))
}

// ---------------------------------------------------------------------------
// Integer products
// ---------------------------------------------------------------------------

/// Where the inputs of an integer product are: MatMulInteger/ConvInteger
/// `(A, B, a_zp, b_zp)`, QLinear* `(a, a_scale, a_zp, b, b_scale, b_zp,
/// y_scale, y_zp[, bias])`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Slots {
    a: usize,
    b: usize,
    a_zp: usize,
    b_zp: usize,
    /// `(a_scale, b_scale, y_scale, y_zp)` of the QLinear forms.
    requant: Option<[usize; 4]>,
    bias: Option<usize>,
    /// `(scale, bias)` of the scaled MatMulInteger: its f32 output is
    /// `acc · scale (+ bias)`, each of one entry or one per column.
    scaled: Option<[usize; 2]>,
}

const INTEGER: Slots = Slots { a: 0, b: 1, a_zp: 2, b_zp: 3, requant: None, bias: None, scaled: None };
const QLINEAR: Slots = Slots { a: 0, b: 3, a_zp: 2, b_zp: 5, requant: Some([1, 4, 6, 7]), bias: Some(8), scaled: None };
const SCALED: Slots = Slots { scaled: Some([4, 5]), ..INTEGER };

/// MatMulInteger / QLinearMatMul (`conv: None`), ConvInteger / QLinearConv.
#[derive(Clone, Debug)]
pub struct IntegerProduct {
    pub op_name: &'static str,
    slots: Slots,
    pub conv: Option<Conv>,
}

/// A quantized operand and whether its zero point is indexed (`len`
/// entries) rather than per tensor.
fn operand(dtype: DType, zp: Option<&[usize]>, len: usize, what: &str) -> Result<QOperand, String> {
    if !is_quantized(dtype) {
        return Err(format!("{what} is {dtype}, expected u8, i8, u16 or i16"));
    }
    let indexed = match zp.map(element_count) {
        None | Some(Some(1)) => false,
        Some(Some(n)) if n == len && zp.is_some_and(|s| s.len() == 1) => true,
        _ => return Err(format!("the zero point of {what} has shape {zp:?}, expected one value or {len}")),
    };
    Ok(QOperand { dtype: code(dtype), zp_indexed: indexed as i64 })
}

/// The integer problem, its output shape, and the requantization layout.
enum Problem {
    MatMul(Box<QMatMulParams>),
    Conv(Box<onnxc_runtime::ConvParams>, [QOperand; 2]),
}

impl IntegerProduct {
    fn problem(&self, t: &[Option<(DType, &[usize])>]) -> Result<(Problem, Vec<usize>, RequantParams), String> {
        let get = |i: usize| t.get(i).copied().flatten();
        let need = |i: usize| get(i).ok_or_else(|| format!("input {i} is required"));
        let s = self.slots;
        let ((a_dtype, a), (b_dtype, b)) = (need(s.a)?, need(s.b)?);
        let zp = |i: usize| get(i).map(|(_, shape)| shape);
        let mut requant =
            RequantParams { scale_dtype: 0, y_dtype: 0, outer: 1, len: 1, inner: 1, ..Default::default() };
        let (problem, shape) = match &self.conv {
            Some(conv) => {
                let p = conv.params(a, b)?;
                let m = p.out_channels as usize;
                let ops = [operand(a_dtype, zp(s.a_zp), 1, "input x")?, operand(b_dtype, zp(s.b_zp), m, "input w")?];
                let shape = Conv::output_shape(&p);
                (requant.outer, requant.len, requant.inner) = (shape[0] as i64, m as i64, product(&shape[2..])?);
                (Problem::Conv(Box::new(p), ops), shape)
            }
            None => {
                let (q, shape) = matmul(a, b)?;
                let q = QMatMulParams {
                    a: operand(a_dtype, zp(s.a_zp), q.m as usize, "input A")?,
                    b: operand(b_dtype, zp(s.b_zp), q.n as usize, "input B")?,
                    ..q
                };
                (requant.outer, requant.len, requant.inner) = (product(&shape)? / (q.m * q.n).max(1), q.m, q.n);
                (Problem::MatMul(Box::new(q)), shape)
            }
        };
        if let Some([a_scale, b_scale, y_scale, y_zp]) = s.requant {
            let (scale_dtype, a_scale) = need(a_scale)?;
            let (b_scale_dtype, b_scale) = need(b_scale)?;
            let (y_scale_dtype, _) = need(y_scale)?;
            if !is_scale(scale_dtype) || b_scale_dtype != scale_dtype || y_scale_dtype != scale_dtype {
                return Err("the scales must share one float type".into());
            }
            let y_dtype = get(y_zp).map_or(a_dtype, |(d, _)| d);
            if !is_quantized(y_dtype) {
                return Err(format!("the output type {y_dtype} is not u8, i8, u16 or i16"));
            }
            let per = |shape: &[usize], len: i64| shape.len() == 1 && shape[0] as i64 == len && len != 1;
            requant.scale_dtype = code(scale_dtype);
            requant.y_dtype = code(y_dtype);
            requant.a_indexed = (self.conv.is_none() && per(a_scale, requant.len)) as i64;
            requant.b_index = match (&self.conv, per(b_scale, requant.len), per(b_scale, requant.inner)) {
                (Some(_), true, _) => 1,
                (None, _, true) => 2,
                _ => 0,
            };
        }
        Ok((problem, shape, requant))
    }

    /// Scratch bytes of the QLinear forms' i32 accumulators and of a
    /// convolution's im2col matrix (`onnxc_qconv`).
    fn scratch_parts(&self, problem: &Problem, shape: &[usize]) -> [usize; 2] {
        let acc = if self.slots.requant.is_some() { shape.iter().product::<usize>() * 4 } else { 0 };
        let columns = match problem {
            Problem::Conv(p, [x, _]) => qconv_scratch_bytes(p, x.dtype),
            Problem::MatMul(_) => 0,
        };
        [acc, columns]
    }

    fn out_dtype(&self, t: &[Option<(DType, &[usize])>]) -> DType {
        match self.slots.requant {
            Some([.., y_zp]) => t.get(y_zp).copied().flatten().map_or(DType::U8, |(d, _)| d),
            None if self.slots.scaled.is_some() => DType::F32,
            None => DType::I32,
        }
    }

    /// The scaled form's [`ScaleParams`] for the output `shape`, its scale
    /// and bias checked (f32, one entry or one per column).
    fn scale_params(&self, t: &[Option<(DType, &[usize])>], shape: &[usize]) -> Result<Option<ScaleParams>, String> {
        let Some([scale, bias]) = self.slots.scaled else { return Ok(None) };
        let cols = shape.last().copied().unwrap_or(1) as i64;
        let entries = |i: usize, what: &str| -> Result<i64, String> {
            let Some((dtype, s)) = t.get(i).copied().flatten() else { return Ok(0) };
            let count = product(s)?;
            if dtype != DType::F32 || count != 1 && count != cols {
                return Err(format!("the {what} is {dtype}{s:?}, expected f32 of 1 or {cols} entries"));
            }
            Ok(count)
        };
        let (scale_len, bias_len) = (entries(scale, "scale")?, entries(bias, "bias")?);
        if scale_len == 0 {
            return Err("the scale is required".into());
        }
        let rows = product(shape)? / cols.max(1);
        Ok(Some(ScaleParams { rows, cols, scale_len, bias_len }))
    }
}

/// `[..., m, k] x [..., k, n]` with broadcast batch dims (1-D operands
/// promoted as MatMul does).
fn matmul(a: &[usize], b: &[usize]) -> Result<(QMatMulParams, Vec<usize>), String> {
    if a.is_empty() || b.is_empty() {
        return Err("the inputs must have rank at least 1".into());
    }
    let a2: Vec<usize> = if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() };
    let b2: Vec<usize> = if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() };
    let (m, k, kb, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        return Err(format!("inner dims differ: A is {a:?}, B is {b:?}"));
    }
    let (ab, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch = broadcast(ab, bb).ok_or_else(|| format!("batch dims {ab:?} and {bb:?} do not broadcast"))?;
    if batch.len() > MAX_RANK {
        return Err(format!("{} batch dims; at most {MAX_RANK} are supported", batch.len()));
    }
    let mut p =
        QMatMulParams { m: m as i64, k: k as i64, n: n as i64, batch_rank: batch.len() as i64, ..Default::default() };
    for (d, ((&size, sa), sb)) in
        batch.iter().zip(broadcast_strides(ab, &batch)).zip(broadcast_strides(bb, &batch)).enumerate()
    {
        p.batch_dims[d] = size as i64;
        p.a_strides[d] = sa * (m * k) as i64;
        p.b_strides[d] = sb * (k * n) as i64;
    }
    let mut shape = batch;
    if a.len() > 1 {
        shape.push(m);
    }
    if b.len() > 1 {
        shape.push(n);
    }
    element_count(&shape).ok_or("the output size overflows")?;
    Ok((p, shape))
}

fn lower_types(cx: &Lower) -> Vec<Option<(DType, Vec<usize>)>> {
    (0..cx.input_count()).map(|i| cx.input_type(i).ok()).collect()
}

fn borrowed(t: &[Option<(DType, Vec<usize>)>]) -> Vec<Option<(DType, &[usize])>> {
    t.iter().map(|o| o.as_ref().map(|(d, s)| (*d, s.as_slice()))).collect()
}

impl Operator for IntegerProduct {
    fn name(&self) -> &'static str {
        self.op_name
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let t = types(cx);
        if let Some((dtype, shape)) = self.slots.bias.and_then(|i| t.get(i).copied().flatten()) {
            if dtype != DType::I32 || shape.len() != 1 {
                return Err(format!("the bias is {dtype}{shape:?}, expected 1-D i32"));
            }
        }
        let (_, shape, _) = self.problem(&t)?;
        self.scale_params(&t, &shape)?;
        Ok(vec![Inferred::new(self.out_dtype(&t), shape)])
    }

    /// The i32 accumulators of the QLinear forms, then a convolution's
    /// im2col matrix.
    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let t = types(cx);
        let constant = |i: usize| cx.inputs.get(i).and_then(Option::as_ref).and_then(|i| i.value);
        if let Some(p) = self.depthwise(&t, &constant) {
            return qdepthwise_scratch_bytes(&p);
        }
        if let Some(p) = self.packed(&t, &constant) {
            return qconv_packed_scratch_bytes(&p);
        }
        self.problem(&t).map_or(0, |(problem, shape, _)| {
            let [acc, columns] = self.scratch_parts(&problem, &shape);
            acc + columns
        })
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let owned = lower_types(cx);
        let t = borrowed(&owned);
        if cx.portable() && self.slots.scaled.is_none() {
            return self.lower_portable(cx, &t);
        }
        let consts: Vec<Option<Tensor>> = (0..cx.input_count()).map(|i| cx.const_input(i).cloned()).collect();
        if let Some(p) = self.depthwise(&t, &|i| consts.get(i).and_then(Option::as_ref)) {
            let packed = depthwise::pack(&p, &|i| consts.get(i).and_then(Option::as_ref))?;
            return lower_depthwise(cx, &p, &packed);
        }
        if let Some(p) = self.packed(&t, &|i| consts.get(i).and_then(Option::as_ref)) {
            let packed = packed::pack(&p, &|i| consts.get(i).and_then(Option::as_ref))?;
            return lower_packed(cx, &p, &packed);
        }
        let (problem, shape, requant) = self.problem(&t)?;
        let s = self.slots;
        let [acc_bytes, column_bytes] = self.scratch_parts(&problem, &shape);
        let acc = if s.requant.is_some() { cx.reserve_scratch(acc_bytes)? } else { cx.output_ptr(0)? };
        let (a, b, a_zp, b_zp) =
            (cx.input_ptr(s.a)?, cx.input_ptr(s.b)?, cx.opt_input_ptr(s.a_zp), cx.opt_input_ptr(s.b_zp));
        match problem {
            Problem::MatMul(q) => {
                let params = cx.params(&*q)?;
                cx.call_checked(kernels::onnxc_qmatmul, (params, Ptr(a), Ptr(b), Ptr(a_zp), Ptr(b_zp), Ptr(acc)))?;
            }
            Problem::Conv(p, ops) => {
                let (params, ops) = (cx.params(&*p)?, cx.params(&ops)?);
                let bias = cx.opt_input_ptr(s.bias.unwrap_or(usize::MAX));
                let columns = cx.reserve_scratch(column_bytes)?;
                cx.call_checked(
                    kernels::onnxc_qconv,
                    (params, ops, Ptr(a), Ptr(b), Ptr(a_zp), Ptr(b_zp), Ptr(bias), Ptr(acc), Ptr(columns)),
                )?;
            }
        }
        if let (Some(p), Some([scale, bias])) = (self.scale_params(&t, &shape)?, s.scaled) {
            let (params, y) = (cx.params(&p)?, cx.output_ptr(0)?);
            let (scale, bias) = (cx.input_ptr(scale)?, cx.opt_input_ptr(bias));
            return cx.call_checked(kernels::onnxc_scale_product, (params, Ptr(y), Ptr(scale), Ptr(bias)));
        }
        let Some([a_scale, b_scale, y_scale, y_zp]) = s.requant else {
            return Ok(());
        };
        let params = cx.params(&requant)?;
        let args = (
            params,
            Ptr(acc),
            Ptr(cx.input_ptr(a_scale)?),
            Ptr(cx.input_ptr(b_scale)?),
            Ptr(cx.input_ptr(y_scale)?),
            Ptr(cx.opt_input_ptr(y_zp)),
            Ptr(cx.output_ptr(0)?),
        );
        cx.call_checked(kernels::onnxc_requantize, args)
    }
}

impl IntegerProduct {
    /// Portable mode: the product's loops with the sums stored as i32 or
    /// requantized at once ([`crate::codegen::quant_loops`]).
    fn lower_portable(&self, cx: &mut Lower, t: &[Option<(DType, &[usize])>]) -> Result<(), String> {
        let (problem, _, rule) = self.problem(t)?;
        let s = self.slots;
        let dtype =
            |i: usize| t.get(i).copied().flatten().map(|(d, _)| d).ok_or_else(|| format!("input {i} is required"));
        let optional = |cx: &mut Lower, i: usize| if cx.has_input(i) { cx.input_ptr(i).map(Some) } else { Ok(None) };
        let operand = |cx: &mut Lower, data: usize, zero: usize, q: QOperand| -> Result<IntOperand, String> {
            let zero_ptr = optional(cx, zero)?;
            Ok(IntOperand {
                data: cx.input_ptr(data)?,
                dtype: dtype(data)?,
                zero: zero_ptr,
                zero_indexed: q.zp_indexed != 0,
            })
        };
        let ops = match &problem {
            Problem::MatMul(q) => [q.a, q.b],
            Problem::Conv(_, ops) => *ops,
        };
        let (a, b) = (operand(cx, s.a, s.a_zp, ops[0])?, operand(cx, s.b, s.b_zp, ops[1])?);
        let requantize = match s.requant {
            Some([a_scale, b_scale, y_scale, y_zp]) => Some(Requantize {
                rule,
                scale_dtype: dtype(a_scale)?,
                y_dtype: self.out_dtype(t),
                scales: [cx.input_ptr(a_scale)?, cx.input_ptr(b_scale)?, cx.input_ptr(y_scale)?],
                y_zero: optional(cx, y_zp)?,
            }),
            None => None,
        };
        let sums = requantize.as_ref().map_or(Sums::Int32, Sums::Requantized);
        let y = cx.output_ptr(0)?;
        match problem {
            Problem::MatMul(q) => integer_matmul(cx, &q, [&a, &b], &sums, y),
            Problem::Conv(p, _) => {
                let bias = match s.bias {
                    Some(i) => optional(cx, i)?,
                    None => None,
                };
                integer_conv(cx, &p, [&a, &b], bias, &sums, y)
            }
        }
    }
}

/// One `onnxc_qdepthwise` call with the packed constants.
fn lower_depthwise(cx: &mut Lower, p: &QDepthwiseParams, packed: &[u8]) -> Result<(), String> {
    let (params, packed) = (cx.params(p)?, cx.data_bytes(packed)?);
    let scratch = cx.reserve_scratch(qdepthwise_scratch_bytes(p))?;
    let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
    cx.call_checked(kernels::onnxc_qdepthwise, (params, Ptr(x), Ptr(packed), Ptr(y), Ptr(scratch)))
}

/// One `onnxc_qconv_packed` call with the packed constants.
fn lower_packed(cx: &mut Lower, p: &QConvPackedParams, packed: &[u8]) -> Result<(), String> {
    let (params, packed) = (cx.params(p)?, cx.data_bytes(packed)?);
    let scratch = cx.reserve_scratch(qconv_packed_scratch_bytes(p))?;
    let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
    cx.call_checked(kernels::onnxc_qconv_packed, (params, Ptr(x), Ptr(packed), Ptr(y), Ptr(scratch)))
}

impl IntegerProduct {
    /// The dense kernel's params when this is a QLinearConv it takes and the
    /// depthwise one does not ([`packed`]).
    fn packed(&self, t: &[Option<(DType, &[usize])>], constant: depthwise::Constant) -> Option<QConvPackedParams> {
        if self.slots != QLINEAR || self.depthwise(t, constant).is_some() {
            return None;
        }
        let (conv, (x_dtype, x), (_, w)) = (self.conv.as_ref()?, t.first().copied()??, t.get(3).copied()??);
        let p = conv.params(x, w).ok()?;
        let present = |i: usize| t.get(i).is_some_and(Option::is_some);
        packed::packed_params(&p, x_dtype, self.out_dtype(t), constant, &present)
    }

    /// The depthwise kernel's params when this is a QLinearConv it takes
    /// ([`depthwise`]), `constant(i)` giving input `i`'s value if known.
    fn depthwise(&self, t: &[Option<(DType, &[usize])>], constant: depthwise::Constant) -> Option<QDepthwiseParams> {
        let (conv, (x_dtype, x), (_, w)) = (self.conv.as_ref()?, t.first().copied()??, t.get(3).copied()??);
        let p = conv.params(x, w).ok()?;
        let present = |i: usize| t.get(i).is_some_and(Option::is_some);
        depthwise::depthwise_params(self, &p, x_dtype, self.out_dtype(t), constant, &present)
    }

    /// QLinearConv with `conv`'s window and groups: what `passes::fuse_qdq`
    /// makes of a quantized Conv.
    pub fn qlinear_conv(conv: Conv) -> IntegerProduct {
        IntegerProduct { op_name: "QLinearConv", slots: QLINEAR, conv: Some(conv) }
    }

    pub fn matmul_integer() -> IntegerProduct {
        IntegerProduct { op_name: "MatMulInteger", slots: INTEGER, conv: None }
    }

    pub fn is_matmul_integer(&self) -> bool {
        self.slots == INTEGER && self.conv.is_none()
    }

    /// MatMulInteger `(A, B, a_zp, b_zp, scale[, bias])` with the f32
    /// output `acc · scale (+ bias)`: what `passes::fuse_qdq` makes of
    /// quantize_dynamic's MatMulInteger → Cast → Mul [→ Add].
    pub fn scaled_matmul() -> IntegerProduct {
        IntegerProduct { op_name: "ScaledMatMulInteger", slots: SCALED, conv: None }
    }
}

pub fn import_integer(cx: &mut NodeImport) -> Result<Op, String> {
    let (op_name, slots, conv): (&'static str, Slots, bool) = match cx.op_type {
        "MatMulInteger" => return Ok(Op::IntegerProduct(IntegerProduct::matmul_integer())),
        "ConvInteger" => ("ConvInteger", INTEGER, true),
        "QLinearMatMul" => ("QLinearMatMul", Slots { bias: None, ..QLINEAR }, false),
        _ => ("QLinearConv", QLINEAR, true),
    };
    let conv = if conv { Some(Conv::parse(cx)?) } else { None };
    Ok(Op::IntegerProduct(IntegerProduct { op_name, slots, conv }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_scales_index_by_block() {
        let lin = Linear { quantize: true, axis: 1, block_size: 2, output_dtype: None, saturate: true };
        let (p, out) = lin.params((DType::F32, &[2, 5]), (DType::F32, &[2, 3]), Some(DType::I8)).unwrap();
        assert_eq!(out, DType::I8);
        assert_eq!((p.outer, p.len, p.inner, p.block, p.so, p.sj, p.si), (2, 5, 1, 2, 3, 1, 1));
        assert!(lin.params((DType::F32, &[2, 5]), (DType::F32, &[2, 2]), None).is_err());
    }

    #[test]
    fn matmul_broadcasts_batch_dims() {
        let (p, shape) = matmul(&[2, 1, 3, 4], &[5, 4, 6]).unwrap();
        assert_eq!(shape, vec![2, 5, 3, 6]);
        assert_eq!((p.batch_rank, p.a_strides[..2].to_vec(), p.b_strides[..2].to_vec()), (2, vec![12, 0], vec![0, 24]));
    }
}
