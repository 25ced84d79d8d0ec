//! Small ONNX models built in code for the tests (no binary blobs).

use onnx_proto::tensor_shape_proto::{dimension, Dimension};
use onnx_proto::type_proto::{self, Tensor as TensorTypeProto};
use onnx_proto::*;

/// A float tensor value; `dims` entries < 0 become symbolic dims named
/// `d0`, `d1`... after their position; `None` leaves the shape out.
pub fn value(name: &str, dims: Option<&[i64]>) -> ValueInfoProto {
    typed_value(name, 1, dims)
}

/// [`value`] with ONNX element type `elem_type` (1 f32, 7 i64, 9 bool...).
pub fn typed_value(name: &str, elem_type: i32, dims: Option<&[i64]>) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(TensorTypeProto {
                elem_type: Some(elem_type),
                shape: dims.map(|d| TensorShapeProto {
                    dim: d
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| Dimension {
                            value: Some(if n < 0 {
                                dimension::Value::DimParam(format!("d{i}"))
                            } else {
                                dimension::Value::DimValue(n)
                            }),
                            denotation: None,
                        })
                        .collect(),
                }),
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Float as i32),
        f: Some(v),
        ..Default::default()
    }
}

pub fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

pub fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// A tensor of ONNX element type `data_type` from its little-endian bytes.
pub fn raw_tensor(name: &str, data_type: i32, dims: &[i64], raw: Vec<u8>) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(data_type),
        raw_data: Some(raw),
        ..Default::default()
    }
}

/// An f32 tensor with `float_data`.
pub fn floats(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(1),
        float_data: v.to_vec(),
        ..Default::default()
    }
}

/// The values of an f32 tensor `onnxc run` wrote (raw data) or a test made.
pub fn f32s(t: &TensorProto) -> Vec<f32> {
    match &t.raw_data {
        Some(raw) => f32s_of_bytes(raw),
        None => t.float_data.clone(),
    }
}

/// Little-endian f32 bytes (raw tensor data, the C programs' `.bin` files)
/// as values.
pub fn f32s_of_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// `values` as little-endian f32 bytes.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The values of an int64 tensor `onnxc run` wrote (raw data) or a test made.
pub fn i64s(t: &TensorProto) -> Vec<i64> {
    match &t.raw_data {
        Some(raw) => raw.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes"))).collect(),
        None => t.int64_data.clone(),
    }
}

pub fn int64s(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(7),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

pub fn model(nodes: Vec<NodeProto>, inputs: Vec<ValueInfoProto>, outputs: Vec<ValueInfoProto>) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto {
            name: Some("main".into()),
            node: nodes,
            input: inputs,
            output: outputs,
            ..Default::default()
        }),
        ..Default::default()
    }
}
