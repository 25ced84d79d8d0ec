//! Constant tensors held by the compiler: initializers, folded values, and
//! the inputs/outputs that `run` and `test` exchange with compiled code.
//! Data is stored as little-endian bytes exactly as the generated code sees
//! it, so a constant is written to read-only data without conversion.
//! String tensors are the exception: their elements are byte strings kept
//! in `strings` (and `data` is empty), because the records the generated
//! code sees hold addresses that exist only once the bytes are placed.

use super::DType;

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
    /// The elements of a [`DType::String`] tensor (empty for other types).
    pub strings: Vec<Vec<u8>>,
}

impl Tensor {
    /// A tensor from raw bytes; `None` when the byte count does not match.
    /// A tensor from raw bytes; `None` when the byte count does not match
    /// (and for strings, which have no byte form: see [`Tensor::from_strings`]).
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, data: Vec<u8>) -> Option<Tensor> {
        let count = super::shape::element_count(&shape)?;
        (dtype != DType::String && dtype.bytes_for(count)? == data.len()).then_some(Tensor {
            dtype,
            shape,
            data,
            strings: Vec::new(),
        })
    }

    /// A string tensor; `None` when the element count does not match.
    pub fn from_strings(shape: Vec<usize>, strings: Vec<Vec<u8>>) -> Option<Tensor> {
        (super::shape::element_count(&shape)? == strings.len()).then_some(Tensor {
            dtype: DType::String,
            shape,
            data: Vec::new(),
            strings,
        })
    }

    /// Zeros, or empty strings.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Option<Tensor> {
        let count = super::shape::element_count(&shape)?;
        if dtype == DType::String {
            return Tensor::from_strings(shape, vec![Vec::new(); count]);
        }
        Some(Tensor { dtype, shape, data: vec![0; dtype.bytes_for(count)?], strings: Vec::new() })
    }

    pub fn from_i64s(shape: Vec<usize>, values: &[i64]) -> Tensor {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor { dtype: DType::I64, shape, data, strings: Vec::new() }
    }

    pub fn from_f32s(shape: Vec<usize>, values: &[f32]) -> Tensor {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor { dtype: DType::F32, shape, data, strings: Vec::new() }
    }

    pub fn len(&self) -> usize {
        if self.dtype == DType::String {
            return self.strings.len();
        }
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the tensor holds (for strings: their bytes plus one record each).
    pub fn byte_size(&self) -> usize {
        self.data.len() + self.strings.iter().map(|s| s.len() + DType::String.size()).sum::<usize>()
    }

    /// Element `i` widened to f64 (exact for every integer below 2^53).
    pub fn get_f64(&self, i: usize) -> f64 {
        if self.dtype.is_minifloat() {
            return onnxc_runtime::onnxc_minifloat_to_f32(self.get_bits(i) as i32, self.dtype.onnx_code() as i64)
                as f64;
        }
        let s = self.dtype.size();
        let Some(b) = self.data.get(i * s..(i + 1) * s) else {
            return 0.0; // a string tensor: never read as numbers
        };
        match self.dtype {
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::F64 => f64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
            DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            DType::BF16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            _ => self.get_i64(i) as f64,
        }
    }

    /// The bits of element `i` of a one-byte or packed type (sign-extended
    /// for int4/int2).
    fn get_bits(&self, i: usize) -> i64 {
        let bits = self.dtype.bits();
        if bits >= 8 {
            return self.data[i] as i64;
        }
        let per_byte = 8 / bits;
        let raw = (self.data[i / per_byte] >> ((i % per_byte) * bits)) & ((1 << bits) - 1);
        match self.dtype {
            DType::I4 | DType::I2 => ((raw << (8 - bits)) as i8 >> (8 - bits)) as i64,
            _ => raw as i64,
        }
    }

    /// Element `i` as i64 (floats truncate; u64 above i64::MAX wraps).
    pub fn get_i64(&self, i: usize) -> i64 {
        if self.dtype == DType::String {
            // Strings are never read as numbers (no shape input takes them).
            return 0;
        }
        if self.dtype.is_minifloat() {
            return self.get_f64(i) as i64;
        }
        if self.dtype.is_packed() {
            return self.get_bits(i);
        }
        let s = self.dtype.size();
        let b = &self.data[i * s..(i + 1) * s];
        match self.dtype {
            DType::I8 => b[0] as i8 as i64,
            DType::U8 | DType::Bool => b[0] as i64,
            DType::I16 => i16::from_le_bytes([b[0], b[1]]) as i64,
            DType::U16 => u16::from_le_bytes([b[0], b[1]]) as i64,
            DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            DType::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            DType::I64 | DType::U64 => i64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
            _ => self.get_f64(i) as i64,
        }
    }

    /// All elements as i64, for shape-carrying constants (axes, pads, sizes).
    pub fn to_i64s(&self) -> Vec<i64> {
        (0..self.len()).map(|i| self.get_i64(i)).collect()
    }

    pub fn to_f64s(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.get_f64(i)).collect()
    }

    /// The values of an f32 tensor (`None` for other types).
    pub fn to_f32s(&self) -> Option<Vec<f32>> {
        (self.dtype == DType::F32)
            .then(|| self.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}
