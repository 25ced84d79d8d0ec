//! `SparseTensorProto` → a dense [`Tensor`]: sparse initializers and
//! Constant's `sparse_value` become ordinary constants, so no later stage
//! knows sparse tensors.
//!
//! The IR spec's rules, all checked (the message names the tensor): the
//! values are a 1-D `[NNZ]` tensor; the indices are i64, either `[NNZ]`
//! linearized indices or `[NNZ, rank]` index tuples; every index lies in
//! the dense shape; they appear in ascending order without duplication
//! (lexicographic for tuples, which is the order of their linearized
//! form). Positions without a value are zero, or the empty string. The
//! dense size is checked against `--max-tensor-bytes` before anything is
//! allocated, since a few bytes of sparse data can describe a huge tensor.

use super::tensor::tensor_from_proto;
use crate::ir::{DType, Tensor};
use onnx_proto::SparseTensorProto;

/// The dense tensor `s` describes.
pub fn densify(s: &SparseTensorProto, max_tensor_bytes: u64) -> Result<Tensor, String> {
    let name = s.values.as_ref().map_or("", |v| v.name());
    densify_checked(s, max_tensor_bytes).map_err(|e| format!("sparse tensor \"{name}\": {e}"))
}

fn densify_checked(s: &SparseTensorProto, max_tensor_bytes: u64) -> Result<Tensor, String> {
    let values = tensor_from_proto(s.values.as_ref().ok_or("no values")?)?;
    let indices = tensor_from_proto(s.indices.as_ref().ok_or("no indices")?)?;
    let shape = s
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dim {d} in dims {:?}", s.dims)))
        .collect::<Result<Vec<_>, _>>()?;
    if values.shape.len() != 1 {
        return Err(format!("values must be 1-D [NNZ], got dims {:?}", values.shape));
    }
    if values.dtype.is_packed() {
        return Err(format!("values of {} (packed sub-byte elements) are not supported yet", values.dtype));
    }
    let nnz = values.shape[0];
    let dense_count = crate::ir::shape::element_count(&shape).ok_or("the dense element count overflows")?;
    let dense_bytes = match values.dtype {
        DType::String => Some(dense_count.saturating_mul(16)),
        dtype => dtype.bytes_for(dense_count),
    };
    if dense_bytes.is_none_or(|b| b as u64 > max_tensor_bytes) {
        return Err(format!(
            "the dense tensor ({dense_count} elements of {}) exceeds --max-tensor-bytes {max_tensor_bytes}",
            values.dtype
        ));
    }
    let positions = linear_positions(&indices, nnz, &shape)?;
    if values.dtype == DType::String {
        let mut strings = vec![Vec::new(); dense_count];
        for (&at, value) in positions.iter().zip(&values.strings) {
            strings[at] = value.clone();
        }
        return Tensor::from_strings(shape, strings).ok_or_else(|| "string values do not fit the dims".into());
    }
    let size = values.dtype.size();
    let mut data = vec![0u8; dense_count * size];
    for (k, &at) in positions.iter().enumerate() {
        data[at * size..(at + 1) * size].copy_from_slice(&values.data[k * size..(k + 1) * size]);
    }
    Tensor::from_bytes(values.dtype, shape, data).ok_or_else(|| "the dense data does not fit the dims".into())
}

/// The linearized position of each of the `nnz` values, checked in range
/// and strictly ascending.
fn linear_positions(indices: &Tensor, nnz: usize, shape: &[usize]) -> Result<Vec<usize>, String> {
    if indices.dtype != DType::I64 {
        return Err(format!("indices must be int64, got {}", indices.dtype));
    }
    let rank = shape.len();
    let tuples = match indices.shape.as_slice() {
        [n] if *n == nnz => false,
        [n, r] if *n == nnz && *r == rank => true,
        other => {
            return Err(format!(
                "indices have dims {other:?}; with {nnz} values and rank {rank} they must be [{nnz}] or [{nnz}, {rank}]"
            ))
        }
    };
    let dense_count = crate::ir::shape::element_count(shape).unwrap_or(0);
    let mut positions = Vec::with_capacity(nnz);
    for k in 0..nnz {
        let at =
            if tuples {
                let mut at = 0usize;
                for (axis, &dim) in shape.iter().enumerate() {
                    let i = indices.get_i64(k * rank + axis);
                    let i = usize::try_from(i).ok().filter(|&i| i < dim).ok_or_else(|| {
                        format!("index {k} has {i} on axis {axis}, outside [0, {dim}) of dims {shape:?}")
                    })?;
                    at = at * dim + i;
                }
                at
            } else {
                let i = indices.get_i64(k);
                usize::try_from(i).ok().filter(|&i| i < dense_count).ok_or_else(|| {
                    format!("linearized index {k} is {i}, outside [0, {dense_count}) of dims {shape:?}")
                })?
            };
        if positions.last().is_some_and(|&before| before >= at) {
            return Err(format!("index {k} is not after index {}: indices must ascend without duplicates", k - 1));
        }
        positions.push(at);
    }
    Ok(positions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_proto::TensorProto;

    fn sparse(values: &[f32], indices: &[i64], index_dims: &[i64], dims: &[i64]) -> SparseTensorProto {
        SparseTensorProto {
            values: Some(TensorProto {
                name: Some("w".into()),
                data_type: Some(1),
                dims: vec![values.len() as i64],
                float_data: values.to_vec(),
                ..Default::default()
            }),
            indices: Some(TensorProto {
                data_type: Some(7),
                dims: index_dims.to_vec(),
                int64_data: indices.to_vec(),
                ..Default::default()
            }),
            dims: dims.to_vec(),
        }
    }

    fn floats(t: &Tensor) -> Vec<f32> {
        t.data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
    }

    #[test]
    fn both_index_forms_densify() {
        let linear = densify(&sparse(&[1.0, 2.0], &[1, 5], &[2], &[2, 3]), 1 << 20).unwrap();
        let tuples = densify(&sparse(&[1.0, 2.0], &[0, 1, 1, 2], &[2, 2], &[2, 3]), 1 << 20).unwrap();
        for t in [linear, tuples] {
            assert_eq!(t.shape, vec![2, 3]);
            assert_eq!(floats(&t), vec![0.0, 1.0, 0.0, 0.0, 0.0, 2.0]);
        }
    }

    #[test]
    fn bad_sparse_data_is_an_error_naming_the_tensor() {
        let cases = [
            (sparse(&[1.0], &[6], &[1], &[2, 3]), "linearized index 0 is 6, outside [0, 6)"),
            (sparse(&[1.0], &[0, 3], &[1, 2], &[2, 3]), "index 0 has 3 on axis 1"),
            (sparse(&[1.0, 2.0], &[4, 2], &[2], &[2, 3]), "index 1 is not after index 0"),
            (sparse(&[1.0, 2.0], &[2, 2], &[2], &[2, 3]), "index 1 is not after index 0"),
            (sparse(&[1.0, 2.0], &[1, 0, 0, 2], &[2, 2], &[2, 3]), "index 1 is not after index 0"),
            (sparse(&[1.0, 2.0], &[1, 2, 3], &[3], &[2, 3]), "must be [2] or [2, 2]"),
            (sparse(&[1.0], &[0, 0, 0], &[1, 3], &[2, 3]), "must be [1] or [1, 2]"),
            (sparse(&[1.0], &[-1], &[1], &[2, 3]), "outside"),
            (sparse(&[1.0], &[0], &[1], &[1 << 40, 1 << 20]), "exceeds --max-tensor-bytes"),
        ];
        for (s, needle) in cases {
            let e = densify(&s, 1 << 20).unwrap_err();
            assert!(e.starts_with("sparse tensor \"w\": ") && e.contains(needle), "{e}");
        }
        let mut no_indices = sparse(&[1.0], &[0], &[1], &[2]);
        no_indices.indices = None;
        assert!(densify(&no_indices, 1 << 20).unwrap_err().contains("no indices"));
    }
}
