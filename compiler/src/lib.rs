//! onnxc: ONNX model → native object file.
pub mod load;
