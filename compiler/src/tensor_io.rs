//! Reading and writing tensors for `run` and `test`: ONNX `TensorProto`
//! files (`.pb`) and numpy `.npy` files (little-endian, C order).

use crate::import::tensor::{tensor_from_proto, tensor_to_proto};
use crate::ir::{DType, Tensor};
use prost::Message;
use std::path::Path;

/// A tensor read from a file, with the name the file gives it (if any).
pub struct NamedTensor {
    pub name: Option<String>,
    pub tensor: Tensor,
}

pub fn read_tensor(path: &Path) -> Result<NamedTensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let is_npy = path.extension().is_some_and(|e| e == "npy");
    if is_npy {
        return read_npy(&bytes)
            .map(|tensor| NamedTensor { name: None, tensor })
            .map_err(|e| format!("{}: {e}", path.display()));
    }
    let proto = onnx_proto::TensorProto::decode(bytes.as_slice())
        .map_err(|e| format!("{}: not a TensorProto: {e}", path.display()))?;
    let tensor = tensor_from_proto(&proto).map_err(|e| format!("{}: {e}", path.display()))?;
    let name = Some(proto.name().to_string()).filter(|n| !n.is_empty());
    Ok(NamedTensor { name, tensor })
}

pub fn write_tensor_pb(path: &Path, name: &str, t: &Tensor) -> Result<(), String> {
    std::fs::write(path, tensor_to_proto(name, t).encode_to_vec()).map_err(|e| format!("{}: {e}", path.display()))
}

fn npy_dtype(descr: &str) -> Option<DType> {
    let code = descr.trim_start_matches(['<', '|', '=']);
    Some(match code {
        "f4" => DType::F32,
        "f8" => DType::F64,
        "f2" => DType::F16,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "b1" => DType::Bool,
        _ => return None,
    })
}

/// Parses a version 1–3 `.npy` file holding a C-ordered little-endian array.
pub fn read_npy(bytes: &[u8]) -> Result<Tensor, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = bytes
        .get(start..start + header_len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or("truncated .npy header")?;
    let field = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}'"))? + key.len() + 2;
        Some(header[at..].trim_start_matches([':', ' ']))
    };
    let descr =
        field("descr").and_then(|s| s.strip_prefix('\'')).and_then(|s| s.split('\'').next()).ok_or("no descr")?;
    if descr.starts_with('>') {
        return Err("big-endian .npy data is not supported".into());
    }
    if descr.trim_start_matches(['<', '|', '=']).starts_with(['O', 'U', 'S']) {
        return Err(format!("string .npy arrays (dtype {descr}) are not supported: give string tensors as .pb files"));
    }
    let dtype = npy_dtype(descr).ok_or_else(|| format!("unsupported .npy dtype {descr}"))?;
    if field("fortran_order").is_some_and(|s| s.starts_with("True")) {
        return Err("Fortran-ordered .npy data is not supported".into());
    }
    let shape_text =
        field("shape").and_then(|s| s.strip_prefix('(')).and_then(|s| s.split(')').next()).ok_or("no shape")?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| format!("bad dim {s}")))
        .collect::<Result<Vec<_>, _>>()?;
    let data = bytes[start + header_len..].to_vec();
    Tensor::from_bytes(dtype, shape, data).ok_or_else(|| "data size does not match the shape".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_v1_npy_file() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1), }";
        let mut h = header.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend((h.len() as u16).to_le_bytes());
        bytes.extend(h.as_bytes());
        bytes.extend(1.5f32.to_le_bytes());
        bytes.extend((-2f32).to_le_bytes());
        let t = read_npy(&bytes).unwrap();
        assert_eq!(t.shape, vec![2, 1]);
        assert_eq!(t.to_f64s(), vec![1.5, -2.0]);
    }
}
