//! Gather: picks slices of `data` along `axis` at the positions in
//! `indices` (opsets 1, 11, 13; the versions differ only in documentation
//! and in allowing negative indices, which every version here accepts).
//!
//! Type constraints: `data` any element type (the kernel moves
//! `elem_bytes`-sized elements), `indices` i32 or i64. Output shape is
//! `data.shape[..axis] ++ indices.shape ++ data.shape[axis+1..]`.
//! Lowering calls `onnxc_gather`, which checks every index against
//! `[-axis_len, axis_len)` before writing and reports a violation as the
//! status `INDEX_OUT_OF_RANGE`.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;
use crate::ir::shape::{element_count, normalize_axis};
use crate::ir::DType;
use onnxc_runtime::GatherParams;

#[derive(Clone, Debug)]
pub struct Gather {
    pub axis: i64,
}

impl Gather {
    fn axis(&self, rank: usize) -> Result<usize, String> {
        normalize_axis(self.axis, rank)
            .ok_or_else(|| format!("attribute \"axis\" {} is out of range for data of rank {rank}", self.axis))
    }
}

fn index_bytes(dtype: DType) -> Result<i64, String> {
    match dtype {
        DType::I32 => Ok(4),
        DType::I64 => Ok(8),
        other => Err(format!("input 1 (indices) must be i32 or i64, got {other}")),
    }
}

fn product(dims: &[usize]) -> Result<i64, String> {
    element_count(dims).and_then(|n| i64::try_from(n).ok()).ok_or_else(|| "element count overflows".to_string())
}

impl Operator for Gather {
    fn name(&self) -> &'static str {
        "Gather"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let data = cx.input(0)?;
        let indices = cx.input(1)?;
        index_bytes(indices.dtype)?;
        let axis = self.axis(data.shape.len())?;
        let mut shape = data.shape[..axis].to_vec();
        shape.extend_from_slice(indices.shape);
        shape.extend_from_slice(&data.shape[axis + 1..]);
        product(&shape)?;
        Ok(vec![Inferred::new(data.dtype, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (idx_type, idx_shape) = cx.input_type(1)?;
        let axis = self.axis(shape.len())?;
        let p = GatherParams {
            elem_bytes: dtype.size() as i64,
            outer: product(&shape[..axis])?,
            axis_len: shape[axis] as i64,
            inner: product(&shape[axis + 1..])?,
            n_indices: product(&idx_shape)?,
            index_bytes: index_bytes(idx_type)?,
        };
        let params = cx.params(&p)?;
        let data = cx.input_ptr(0)?;
        let indices = cx.input_ptr(1)?;
        let out = cx.output_ptr(0)?;
        cx.call_checked("onnxc_gather", &[params, data, indices, out])
    }
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Gather(Gather { axis: cx.attrs.int_or("axis", 0)? }))
}
