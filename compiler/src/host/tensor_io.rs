//! Reading and writing values for `run` and `test`: ONNX `TensorProto`
//! files (`.pb`) and numpy `.npy` files (little-endian, C order) for
//! tensors, and the backend test data's `SequenceProto` and
//! `OptionalProto` files for sequences and optionals of tensors (and
//! sequences of `MapProto`s for sequences of maps). A `.pb`
//! file does not say which message it holds, so the reader is told what
//! the model declares at that position.

use crate::host::call::{Datum, Map};
use crate::import::tensor::{tensor_from_proto, tensor_to_proto};
use crate::ir::{CompositeType, DType, Tensor};
use onnx_proto::{MapProto, OptionalProto, SequenceProto};
use prost::Message;
use std::path::Path;

/// A value read from a file, with the name the file gives it (if any).
pub struct NamedDatum {
    pub name: Option<String>,
    pub datum: Datum,
}

/// `elem_type` of `SequenceProto` and `OptionalProto`: a tensor, a sequence.
const ELEM_TENSOR: i32 = 1;
const ELEM_SEQUENCE: i32 = 3;
const ELEM_MAP: i32 = 4;

/// Reads a tensor, or (`composite`: what the model declares there) a
/// sequence or optional.
pub fn read_datum(path: &Path, composite: Option<&CompositeType>) -> Result<NamedDatum, String> {
    let at = |e: String| format!("{}: {e}", path.display());
    let bytes = std::fs::read(path).map_err(|e| at(e.to_string()))?;
    let named = |name: &str, datum| NamedDatum { name: Some(name.to_string()).filter(|n| !n.is_empty()), datum };
    match composite {
        None if path.extension().is_some_and(|e| e == "npy") => {
            read_npy(&bytes).map(|t| NamedDatum { name: None, datum: Datum::Tensor(t) }).map_err(at)
        }
        None => {
            let proto =
                onnx_proto::TensorProto::decode(bytes.as_slice()).map_err(|e| at(format!("not a TensorProto: {e}")))?;
            Ok(named(proto.name(), Datum::Tensor(tensor_from_proto(&proto).map_err(at)?)))
        }
        Some(ty) if ty.optional => {
            let proto =
                OptionalProto::decode(bytes.as_slice()).map_err(|e| at(format!("not an OptionalProto: {e}")))?;
            Ok(named(proto.name(), optional_from_proto(&proto).map_err(at)?))
        }
        Some(ty) if ty.map_key.is_some() && !ty.sequence => {
            let proto = MapProto::decode(bytes.as_slice()).map_err(|e| at(format!("not a MapProto: {e}")))?;
            Ok(named(proto.name(), Datum::Map(map_from_proto(&proto).map_err(at)?)))
        }
        Some(ty) if ty.map_key.is_some() => {
            let proto = SequenceProto::decode(bytes.as_slice()).map_err(|e| at(format!("not a SequenceProto: {e}")))?;
            Ok(named(proto.name(), Datum::Maps(maps_from_proto(&proto).map_err(at)?)))
        }
        Some(_) => {
            let proto = SequenceProto::decode(bytes.as_slice()).map_err(|e| at(format!("not a SequenceProto: {e}")))?;
            Ok(named(proto.name(), Datum::Sequence(sequence_from_proto(&proto).map_err(at)?)))
        }
    }
}

fn sequence_from_proto(p: &SequenceProto) -> Result<Vec<Tensor>, String> {
    let nested = !p.sparse_tensor_values.is_empty()
        || !p.sequence_values.is_empty()
        || !p.map_values.is_empty()
        || !p.optional_values.is_empty();
    if nested || !matches!(p.elem_type(), 0 | ELEM_TENSOR) {
        return Err("only sequences of tensors are supported".into());
    }
    p.tensor_values.iter().map(tensor_from_proto).collect()
}

/// A sequence of `MapProto`s, each as its keys and its values (the
/// values' tensors concatenated: `from_dict` writes one scalar tensor per
/// entry).
fn maps_from_proto(p: &SequenceProto) -> Result<Vec<Map>, String> {
    if !p.tensor_values.is_empty() || !matches!(p.elem_type(), 0 | ELEM_MAP) {
        return Err("not a sequence of maps".into());
    }
    p.map_values.iter().map(map_from_proto).collect()
}

/// A `MapProto`'s keys and values.
fn map_from_proto(m: &MapProto) -> Result<Map, String> {
    let n = m.keys.len().max(m.string_keys.len());
    let keys = match DType::from_onnx(m.key_type()) {
        Some(DType::String) => Tensor::from_strings(vec![n], m.string_keys.clone()),
        Some(DType::I64) => Some(Tensor::from_i64s(vec![n], &m.keys)),
        _ => None,
    }
    .ok_or("map keys must be int64 or strings")?;
    let parts = m.values.as_ref().map(sequence_from_proto).transpose()?.unwrap_or_default();
    let dtype = parts.first().map_or(DType::F32, |t| t.dtype);
    if parts.iter().any(|t| t.dtype != dtype || t.dtype == DType::String) {
        return Err("map values must be numeric tensors of one type".into());
    }
    let data: Vec<u8> = parts.iter().flat_map(|t| t.data.iter().copied()).collect();
    let count = parts.iter().map(|t| t.len()).sum();
    let values = Tensor::from_bytes(dtype, vec![count], data).ok_or("map values do not fit their type")?;
    if count != n {
        return Err(format!("a map has {n} keys and {count} values"));
    }
    Ok(Map { keys, values })
}

fn maps_to_proto(name: &str, maps: &[Map]) -> SequenceProto {
    SequenceProto {
        name: Some(name.to_string()),
        elem_type: Some(ELEM_MAP),
        map_values: maps.iter().map(|m| map_to_proto("", m)).collect(),
        ..Default::default()
    }
}

fn map_to_proto(name: &str, m: &Map) -> MapProto {
    let mut p = MapProto {
        name: Some(name.to_string()).filter(|n| !n.is_empty()),
        key_type: Some(m.keys.dtype.onnx_code()),
        ..Default::default()
    };
    match m.keys.dtype {
        DType::String => p.string_keys = m.keys.strings.clone(),
        _ => p.keys = (0..m.keys.len()).map(|i| m.keys.get_i64(i)).collect(),
    }
    let size = m.values.dtype.size();
    let scalars =
        m.values.data.chunks_exact(size).filter_map(|b| Tensor::from_bytes(m.values.dtype, vec![], b.to_vec()));
    p.values = Some(sequence_to_proto("", &scalars.collect::<Vec<_>>()));
    p
}

fn optional_from_proto(p: &OptionalProto) -> Result<Datum, String> {
    let inner = match (p.elem_type(), &p.tensor_value, &p.sequence_value) {
        (0, ..) => None,
        (ELEM_TENSOR, Some(t), _) => Some(Datum::Tensor(tensor_from_proto(t)?)),
        (ELEM_SEQUENCE, _, Some(s)) => Some(Datum::Sequence(sequence_from_proto(s)?)),
        (e, ..) => return Err(format!("optionals of element kind {e} are not supported")),
    };
    Ok(Datum::Optional(inner.map(Box::new)))
}

fn sequence_to_proto(name: &str, items: &[Tensor]) -> SequenceProto {
    SequenceProto {
        name: Some(name.to_string()),
        elem_type: Some(ELEM_TENSOR),
        tensor_values: items.iter().map(|t| tensor_to_proto("", t)).collect(),
        ..Default::default()
    }
}

/// Writes `d` as the `.pb` message the backend test data uses for it.
pub fn write_datum_pb(path: &Path, name: &str, d: &Datum) -> Result<(), String> {
    let bytes = match d {
        Datum::Tensor(t) => tensor_to_proto(name, t).encode_to_vec(),
        Datum::Sequence(items) => sequence_to_proto(name, items).encode_to_vec(),
        Datum::Maps(maps) => maps_to_proto(name, maps).encode_to_vec(),
        Datum::Map(m) => map_to_proto(name, m).encode_to_vec(),
        Datum::Optional(inner) => {
            let mut p = OptionalProto { name: Some(name.to_string()), elem_type: Some(0), ..Default::default() };
            match inner.as_deref() {
                None => {}
                Some(Datum::Tensor(t)) => {
                    p.elem_type = Some(ELEM_TENSOR);
                    p.tensor_value = Some(tensor_to_proto("", t));
                }
                Some(Datum::Sequence(items)) => {
                    p.elem_type = Some(ELEM_SEQUENCE);
                    p.sequence_value = Some(sequence_to_proto("", items));
                }
                Some(Datum::Optional(_) | Datum::Maps(_) | Datum::Map(_)) => {
                    return Err(format!("{}: optionals of this kind are not written", path.display()))
                }
            }
            p.encode_to_vec()
        }
    };
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
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
