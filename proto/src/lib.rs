//! The ONNX schema (IR version 14) as prost types.
//!
//! Our own `.proto` text lives in `proto/onnx.proto`; it keeps ONNX's field
//! numbers so any conforming model decodes. Only the compiler's `load`,
//! `check` and `import` stages see these types.

#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/onnx.rs"));

pub use prost::Message;
