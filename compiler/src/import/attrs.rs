//! Typed access to a node's attributes. Every accessor checks the
//! attribute's declared type and names the attribute in its error.

use crate::ir::{DType, Tensor};
use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, SparseTensorProto};

pub struct Attrs<'a> {
    list: &'a [AttributeProto],
}

impl<'a> Attrs<'a> {
    pub fn new(list: &'a [AttributeProto]) -> Attrs<'a> {
        Attrs { list }
    }

    fn find(&self, name: &str, want: AttributeType) -> Result<Option<&'a AttributeProto>, String> {
        let Some(a) = self.list.iter().find(|a| a.name() == name) else {
            return Ok(None);
        };
        // Old models may leave `type` unset; accept them when the payload fits.
        if a.r#type.is_some() && a.r#type() != want {
            return Err(format!("attribute \"{name}\" has type {:?}, expected {:?}", a.r#type(), want));
        }
        Ok(Some(a))
    }

    pub fn has(&self, name: &str) -> bool {
        self.list.iter().any(|a| a.name() == name)
    }

    pub fn int(&self, name: &str) -> Result<Option<i64>, String> {
        Ok(self.find(name, AttributeType::Int)?.map(|a| a.i()))
    }

    pub fn int_or(&self, name: &str, default: i64) -> Result<i64, String> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    /// An element-type attribute (an ONNX data-type code) that onnxc holds.
    pub fn dtype(&self, name: &str) -> Result<Option<DType>, String> {
        match self.int(name)? {
            None => Ok(None),
            Some(code) => match i32::try_from(code).ok().map(|c| (c, DType::from_onnx(c))) {
                Some((_, Some(dtype))) => Ok(Some(dtype)),
                Some((c, None)) if DType::onnx_name(c) != "unknown" => {
                    Err(format!("attribute \"{name}\" is {}, which is not supported yet", DType::onnx_name(c)))
                }
                _ => Err(format!("attribute \"{name}\" is {code}, which is not an ONNX element type")),
            },
        }
    }

    pub fn float(&self, name: &str) -> Result<Option<f32>, String> {
        Ok(self.find(name, AttributeType::Float)?.map(|a| a.f()))
    }

    pub fn float_or(&self, name: &str, default: f32) -> Result<f32, String> {
        Ok(self.float(name)?.unwrap_or(default))
    }

    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, String> {
        Ok(self.find(name, AttributeType::Ints)?.map(|a| a.ints.clone()))
    }

    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, String> {
        Ok(self.find(name, AttributeType::Floats)?.map(|a| a.floats.clone()))
    }

    pub fn string(&self, name: &str) -> Result<Option<String>, String> {
        match self.find(name, AttributeType::String)? {
            None => Ok(None),
            Some(a) => String::from_utf8(a.s().to_vec())
                .map(Some)
                .map_err(|_| format!("attribute \"{name}\" is not valid UTF-8")),
        }
    }

    pub fn string_or(&self, name: &str, default: &str) -> Result<String, String> {
        Ok(self.string(name)?.unwrap_or_else(|| default.to_string()))
    }

    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, String> {
        match self.find(name, AttributeType::Strings)? {
            None => Ok(None),
            Some(a) => a
                .strings
                .iter()
                .map(|s| String::from_utf8(s.clone()).map_err(|_| format!("attribute \"{name}\" is not valid UTF-8")))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    }

    /// A sparse tensor attribute, as stored (`super::sparse` densifies it).
    pub fn sparse_tensor(&self, name: &str) -> Result<Option<&'a SparseTensorProto>, String> {
        match self.find(name, AttributeType::SparseTensor)? {
            None => Ok(None),
            Some(a) => {
                a.sparse_tensor.as_ref().map(Some).ok_or_else(|| format!("attribute \"{name}\" has no sparse tensor"))
            }
        }
    }

    pub fn tensor(&self, name: &str) -> Result<Option<Tensor>, String> {
        match self.find(name, AttributeType::Tensor)? {
            None => Ok(None),
            Some(a) => match &a.t {
                Some(t) => {
                    super::tensor::tensor_from_proto(t).map(Some).map_err(|e| format!("attribute \"{name}\": {e}"))
                }
                None => Err(format!("attribute \"{name}\" has no tensor")),
            },
        }
    }
}
