//! The 8-bit elementwise nodes only `passes::fuse_qdq` makes of QDQ
//! groups: QLinearAdd and QLinearMul `(a, a_scale, a_zp, b, b_scale, b_zp,
//! y_scale, y_zp)` (the inputs of ONNX Runtime's operators of those names;
//! `onnxc_qbinary`) and QLinearLookup `(x)`, a unary function as the
//! 256-entry table of its results (`onnxc_qlookup`). Kernels:
//! `runtime-support/src/generic/qelementwise.rs`.
//!
//! Scales and zero points are per-tensor constants (the kernel takes them
//! as parameters); B is either A's shape or one element per leading row
//! of A (an SE block's `[N, C, 1, 1]` against `[N, C, H, W]`), or A one of
//! B's (the operands are then swapped: both operations commute).

use super::super::{InferCx, Inferred, Operator};
use crate::codegen::kernels::{self, Ptr, I64};
use crate::codegen::Lower;
use crate::ir::{DType, Tensor};
use onnxc_runtime::{QBinaryParams, QuantizedSide, ELEM_I8, ELEM_U8, QBINARY_ADD, QBINARY_MUL};

/// QLinearAdd (`mul: false`) or QLinearMul.
#[derive(Clone, Debug)]
pub struct QLinearBinary {
    pub mul: bool,
}

/// `rows x inner` of the full operand, and whether B (the one of a row
/// each) is input 0 rather than input 3, for operands of shapes `a`, `b`.
pub(crate) fn binary_layout(a: &[usize], b: &[usize]) -> Option<(usize, usize, bool)> {
    if a == b {
        return Some((1, a.iter().product(), false));
    }
    let per_row = |full: &[usize], part: &[usize]| {
        let pad = full.len().checked_sub(part.len())?;
        let padded: Vec<usize> = std::iter::repeat_n(1, pad).chain(part.iter().copied()).collect();
        let lead = padded.iter().rposition(|&d| d != 1).map_or(0, |i| i + 1);
        (padded[..lead] == full[..lead]).then(|| (full[..lead].iter().product(), full[lead..].iter().product()))
    };
    match (per_row(a, b), per_row(b, a)) {
        (Some((rows, inner)), _) => Some((rows, inner, false)),
        (None, Some((rows, inner))) => Some((rows, inner, true)),
        _ => None,
    }
}

/// The kernels' code of an 8-bit type.
fn byte_code(dtype: DType) -> Option<i64> {
    match dtype {
        DType::U8 => Some(ELEM_U8),
        DType::I8 => Some(ELEM_I8),
        _ => None,
    }
}

/// An operand or the result of type `dtype` with the constant scale and
/// zero point `scale`, `zero` (absent: 0).
fn side(dtype: DType, scale: Option<&Tensor>, zero: Option<&Tensor>, what: &str) -> Result<QuantizedSide, String> {
    let dtype = byte_code(dtype).ok_or_else(|| format!("{what} is {dtype}, expected u8 or i8"))?;
    let scale = scale
        .filter(|s| s.dtype == DType::F32 && s.len() == 1)
        .ok_or_else(|| format!("the scale of {what} must be one f32 constant"))?;
    let zero = match zero {
        None => 0,
        Some(z) if z.len() == 1 && byte_code(z.dtype) == Some(dtype) => z.to_i64s()[0],
        Some(_) => return Err(format!("the zero point of {what} must be one constant of its type")),
    };
    Ok(QuantizedSide { dtype, zero, scale: scale.get_f64(0) })
}

impl Operator for QLinearBinary {
    fn name(&self) -> &'static str {
        if self.mul {
            "QLinearMul"
        } else {
            "QLinearAdd"
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (a, b) = (cx.input(0)?, cx.input(3)?);
        let (rows, inner, swapped) = binary_layout(a.shape, b.shape)
            .ok_or_else(|| format!("operands of shapes {:?} and {:?} are not supported", a.shape, b.shape))?;
        let y = cx.opt_input(7).map_or(DType::U8, |z| z.dtype);
        let full = if swapped { b.shape } else { a.shape };
        debug_assert_eq!(rows * inner, full.iter().product::<usize>());
        Ok(vec![Inferred::new(y, full.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let ((a_dtype, a), (b_dtype, b)) = (cx.input_type(0)?, cx.input_type(3)?);
        let (y_dtype, _) = cx.output_type(0)?;
        let (p, swapped) = self.params([(a_dtype, &a), (b_dtype, &b)], y_dtype, &|i| cx.const_input(i))?;
        let params = cx.params(&p)?;
        let mut inputs = [cx.input_ptr(0)?, cx.input_ptr(3)?];
        if swapped {
            inputs.reverse();
        }
        let y = cx.output_ptr(0)?;
        cx.call_checked(kernels::onnxc_qbinary, (params, Ptr(inputs[0]), Ptr(inputs[1]), Ptr(y)))
    }
}

impl QLinearBinary {
    /// The kernel's params for operands of these types and shapes, the
    /// result's type and the constant inputs `constant(slot)`, and whether
    /// the kernel takes the operands swapped.
    pub(crate) fn params<'t>(
        &self,
        [(a_dtype, a), (b_dtype, b)]: [(DType, &[usize]); 2],
        y_dtype: DType,
        constant: &dyn Fn(usize) -> Option<&'t Tensor>,
    ) -> Result<(QBinaryParams, bool), String> {
        let (rows, inner, swapped) = binary_layout(a, b).ok_or("the operands' shapes are not supported")?;
        let mut sides =
            [side(a_dtype, constant(1), constant(2), "input a")?, side(b_dtype, constant(4), constant(5), "input b")?];
        if swapped {
            sides.reverse();
        }
        let p = QBinaryParams {
            op: if self.mul { QBINARY_MUL } else { QBINARY_ADD },
            rows: rows as i64,
            inner: inner as i64,
            b_per_row: (a != b) as i64,
            a: sides[0],
            b: sides[1],
            y: side(y_dtype, constant(6), constant(7), "the output")?,
        };
        Ok((p, swapped))
    }
}

/// An 8-bit unary function as the table of its results: byte `v` of the
/// input becomes `table[v]`.
#[derive(Clone, Debug)]
pub struct QLinearLookup {
    pub table: Vec<u8>,
    pub y_dtype: DType,
}

impl Operator for QLinearLookup {
    fn name(&self) -> &'static str {
        "QLinearLookup"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if byte_code(x.dtype).is_none() || byte_code(self.y_dtype).is_none() || self.table.len() != 256 {
            return Err(format!("a table of {} entries maps {} to {}", self.table.len(), x.dtype, self.y_dtype));
        }
        Ok(vec![Inferred::new(self.y_dtype, x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let table = cx.data_bytes(&self.table)?;
        let n = I64(cx.iconst(shape.iter().product::<usize>() as i64));
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(kernels::onnxc_qlookup, (Ptr(table), n, Ptr(x), Ptr(y)))
    }
}

#[cfg(test)]
mod tests {
    use super::binary_layout;

    #[test]
    fn the_layout_finds_equal_shapes_and_one_element_per_row() {
        assert_eq!(binary_layout(&[1, 8, 5, 5], &[1, 8, 5, 5]), Some((1, 200, false)));
        assert_eq!(binary_layout(&[2, 8, 5, 5], &[2, 8, 1, 1]), Some((16, 25, false)));
        assert_eq!(binary_layout(&[1, 8, 1, 1], &[1, 8, 5, 5]), Some((8, 25, true)));
        assert_eq!(binary_layout(&[1, 8, 5, 5], &[8, 1, 1]), Some((8, 25, false)));
        assert_eq!(binary_layout(&[2, 3], &[]), Some((1, 6, false)));
        assert_eq!(binary_layout(&[2, 8, 5, 5], &[8, 1, 1]), None);
        assert_eq!(binary_layout(&[1, 8, 5, 5], &[1, 1, 5, 5]), None);
        assert_eq!(binary_layout(&[1, 8, 1, 5], &[1, 8, 5, 1]), None);
    }
}
