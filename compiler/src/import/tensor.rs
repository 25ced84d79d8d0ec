//! `TensorProto` ↔ [`Tensor`]: the typed data fields and `raw_data` both
//! become little-endian bytes; `string_data` becomes [`Tensor::strings`]. External data was resolved by `load`.

use crate::ir::{DType, Tensor};
use onnx_proto::TensorProto;

pub fn tensor_from_proto(t: &TensorProto) -> Result<Tensor, String> {
    let dtype = DType::from_onnx(t.data_type()).ok_or_else(|| {
        format!("tensor \"{}\": element type {} is not supported yet", t.name(), DType::onnx_name(t.data_type()))
    })?;
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("tensor \"{}\": negative dim {d}", t.name())))
        .collect::<Result<Vec<_>, _>>()?;
    let count = crate::ir::shape::element_count(&shape)
        .ok_or_else(|| format!("tensor \"{}\": element count overflows", t.name()))?;
    if dtype == DType::String {
        return Tensor::from_strings(shape, t.string_data.clone()).ok_or_else(|| {
            format!("tensor \"{}\": string_data holds a different number of elements than its dims ({count})", t.name())
        });
    }
    let data: Vec<u8> = if let Some(raw) = &t.raw_data {
        raw.clone()
    } else {
        match dtype {
            DType::F32 => t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::F64 => t.double_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::I64 => t.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::U64 => t.uint64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::U32 => t.uint64_data.iter().flat_map(|&v| (v as u32).to_le_bytes()).collect(),
            DType::I32 => t.int32_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => {
                t.int32_data.iter().flat_map(|&v| (v as u16).to_le_bytes()).collect()
            }
            // One byte an element, or (packed types) one byte of packed
            // elements an entry, as `load` checked.
            DType::I8
            | DType::U8
            | DType::Bool
            | DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::U4
            | DType::I4
            | DType::F4E2M1
            | DType::U2
            | DType::I2 => t.int32_data.iter().map(|&v| v as u8).collect(),
            DType::String => Vec::new(),
        }
    };
    let (got, need) = (data.len(), dtype.bytes_for(count));
    Tensor::from_bytes(dtype, shape, data).ok_or_else(|| match need {
        Some(need) => format!(
            "tensor \"{}\": data holds {got} bytes, its dims ({count} elements of {dtype}) need {need}",
            t.name()
        ),
        None => format!("tensor \"{}\": {count} elements of {dtype} overflow the address space", t.name()),
    })
}

pub fn tensor_to_proto(name: &str, t: &Tensor) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        dims: t.shape.iter().map(|&d| d as i64).collect(),
        data_type: Some(t.dtype.onnx_code()),
        raw_data: (t.dtype != DType::String).then(|| t.data.clone()),
        string_data: t.strings.clone(),
        ..Default::default()
    }
}
