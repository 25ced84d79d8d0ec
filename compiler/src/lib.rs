//! onnxc: ONNX model → native object file.
pub mod check;
pub mod load;
