//! Element types. The ONNX `TensorProto.DataType` codes are kept as the
//! discriminants so conversion at the proto edge is a table lookup.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    U8,
    I8,
    U16,
    I16,
    I32,
    I64,
    Bool,
    F16,
    F64,
    U32,
    U64,
    BF16,
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    F8E8M0,
    /// Sub-byte types, packed: see [`DType::bits`].
    U4,
    I4,
    F4E2M1,
    U2,
    I2,
    /// A UTF-8 string: an `onnxc_string` record `{const uint8_t *data;
    /// size_t len}` (64-bit targets), so shape operators move strings as
    /// 16-byte elements; the bytes live in the caller's input, read-only
    /// data or memory from the run-time allocator.
    String,
}

impl DType {
    /// The ONNX data-type code, or `None` for types onnxc cannot hold yet
    /// (complex).
    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            16 => DType::BF16,
            17 => DType::F8E4M3FN,
            18 => DType::F8E4M3FNUZ,
            19 => DType::F8E5M2,
            20 => DType::F8E5M2FNUZ,
            21 => DType::U4,
            22 => DType::I4,
            23 => DType::F4E2M1,
            24 => DType::F8E8M0,
            25 => DType::U2,
            26 => DType::I2,
            8 => DType::String,
            _ => return None,
        })
    }

    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
            DType::F8E4M3FN => 17,
            DType::F8E4M3FNUZ => 18,
            DType::F8E5M2 => 19,
            DType::F8E5M2FNUZ => 20,
            DType::U4 => 21,
            DType::I4 => 22,
            DType::F4E2M1 => 23,
            DType::F8E8M0 => 24,
            DType::U2 => 25,
            DType::I2 => 26,
            DType::String => 8,
        }
    }

    /// Name of an ONNX data-type code, for messages about types we reject.
    pub fn onnx_name(code: i32) -> &'static str {
        const NAMES: [&str; 27] = [
            "UNDEFINED",
            "FLOAT",
            "UINT8",
            "INT8",
            "UINT16",
            "INT16",
            "INT32",
            "INT64",
            "STRING",
            "BOOL",
            "FLOAT16",
            "DOUBLE",
            "UINT32",
            "UINT64",
            "COMPLEX64",
            "COMPLEX128",
            "BFLOAT16",
            "FLOAT8E4M3FN",
            "FLOAT8E4M3FNUZ",
            "FLOAT8E5M2",
            "FLOAT8E5M2FNUZ",
            "UINT4",
            "INT4",
            "FLOAT4E2M1",
            "FLOAT8E8M0",
            "UINT2",
            "INT2",
        ];
        usize::try_from(code).ok().and_then(|i| NAMES.get(i)).copied().unwrap_or("unknown")
    }

    /// Bits per element. The sub-byte types are packed the ONNX way:
    /// element `i` in byte `i * bits / 8`, the first in the low bits, the
    /// last byte padded ([`DType::bytes_for`]).
    pub fn bits(self) -> usize {
        match self {
            DType::U2 | DType::I2 => 2,
            DType::U4 | DType::I4 | DType::F4E2M1 => 4,
            _ => 8 * self.size(),
        }
    }

    /// True for the packed sub-byte types, which only the operators that
    /// say so ([`crate::ops::Operator::handles_packed`]) accept.
    pub fn is_packed(self) -> bool {
        self.bits() < 8
    }

    /// Bytes of `count` elements (rounded up for packed types).
    pub fn bytes_for(self, count: usize) -> Option<usize> {
        Some(count.checked_mul(self.bits())?.div_ceil(8))
    }

    /// Bytes per element; a packed type's elements share bytes, so its
    /// byte counts come from [`DType::bytes_for`], never from this.
    pub fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::F8E8M0 => 1,
            DType::U4 | DType::I4 | DType::F4E2M1 | DType::U2 | DType::I2 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::String => 16,
        }
    }

    /// The float formats narrower than 16 bits (float8, float4), stored as
    /// bit patterns and computed in f32 (`onnxc_runtime::minifloat`).
    /// Not [`DType::is_float`]: operators opt in to them one by one.
    pub fn is_minifloat(self) -> bool {
        matches!(
            self,
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::F8E8M0 | DType::F4E2M1
        )
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
            DType::F16 => "f16",
            DType::F64 => "f64",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::BF16 => "bf16",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::F8E8M0 => "f8e8m0",
            DType::U4 => "u4",
            DType::I4 => "i4",
            DType::F4E2M1 => "f4e2m1",
            DType::U2 => "u2",
            DType::I2 => "i2",
            DType::String => "string",
        }
    }

    /// The C type the generated header uses for this element type.
    pub fn c_name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::F64 => "double",
            DType::U8 | DType::Bool => "uint8_t",
            // Bit patterns; the packed types are bytes holding 2 or 4.
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::F8E8M0 => "uint8_t",
            DType::U4 | DType::I4 | DType::F4E2M1 | DType::U2 | DType::I2 => "uint8_t",
            DType::I8 => "int8_t",
            DType::U16 | DType::F16 | DType::BF16 => "uint16_t",
            DType::I16 => "int16_t",
            DType::I32 => "int32_t",
            DType::I64 => "int64_t",
            DType::U32 => "uint32_t",
            DType::U64 => "uint64_t",
            DType::String => "onnxc_string",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_packed_sizes_round_up() {
        assert!((17..=26).all(|code| DType::from_onnx(code).is_some()), "float8, float4, int4, int2");
        for d in (0..=26).filter_map(DType::from_onnx) {
            assert_eq!(DType::from_onnx(d.onnx_code()), Some(d));
            assert_eq!(d.bytes_for(8), Some(d.bits()), "8 elements of {d}");
        }
        // Three int4 and five uint2 take two bytes; a float8 is a byte.
        assert_eq!(
            [DType::I4.bytes_for(3), DType::U2.bytes_for(5), DType::F8E5M2.bytes_for(3)],
            [Some(2), Some(2), Some(3)]
        );
        assert_eq!(DType::F32.bytes_for(usize::MAX), None);
    }
}
