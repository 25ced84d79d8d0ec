//! Sparse tensors through the CLI: a sparse initializer in each index form
//! (linearized `[NNZ]` and `[NNZ, rank]` tuples) and a Constant's
//! `sparse_value` densified (zeros elsewhere) and computed with. Malformed
//! sparse data is in the bad-input corpus (`bad_input/tensors.rs`).

use crate::common::run_model;
use crate::models::{f32s, floats, int64s, model, node, value};
use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::*;

/// f32 values at `indices` (of dims `index_dims`) of a 2x3 tensor `w`.
fn sparse_w(values: &[f32], indices: &[i64], index_dims: &[i64]) -> SparseTensorProto {
    let indices = int64s("w_indices", index_dims, indices);
    SparseTensorProto {
        values: Some(floats("w", &[values.len() as i64], values)),
        indices: Some(indices),
        dims: vec![2, 3],
    }
}

/// `y = x + w`, x and y f32[2, 3].
fn add_w(nodes: Vec<NodeProto>) -> ModelProto {
    let mut all = nodes;
    all.push(node("Add", "add", &["x", "w"], &["y"]));
    model(all, vec![value("x", Some(&[2, 3]))], vec![value("y", Some(&[2, 3]))])
}

fn x() -> TensorProto {
    floats("x", &[2, 3], &[1.0; 6])
}

#[test]
fn sparse_initializers_are_densified_in_both_index_forms() {
    for (indices, dims) in [(&[1, 5][..], &[2][..]), (&[0, 1, 1, 2][..], &[2, 2][..])] {
        let mut m = add_w(vec![]);
        m.graph.as_mut().unwrap().sparse_initializer.push(sparse_w(&[10.0, 20.0], indices, dims));
        let out = run_model(&m, &[x()]).unwrap_or_else(|o| panic!("{}", o.stderr));
        assert_eq!(f32s(&out[0]), [1.0, 11.0, 1.0, 1.0, 1.0, 21.0], "indices {indices:?}");
    }
}

#[test]
fn a_constant_sparse_value_is_densified() {
    let mut constant = node("Constant", "c", &[], &["w"]);
    constant.attribute.push(AttributeProto {
        name: Some("sparse_value".into()),
        r#type: Some(AttributeType::SparseTensor as i32),
        sparse_tensor: Some(sparse_w(&[-1.0], &[3], &[1])),
        ..Default::default()
    });
    let out = run_model(&add_w(vec![constant]), &[x()]).unwrap_or_else(|o| panic!("{}", o.stderr));
    assert_eq!(f32s(&out[0]), [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]);
}
