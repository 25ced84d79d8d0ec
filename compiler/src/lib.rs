//! onnxc: ONNX model → native object file.
