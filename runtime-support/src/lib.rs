//! onnxc-runtime: the kernel library that generated code calls.
#![no_std]
