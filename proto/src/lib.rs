//! The ONNX schema (IR version 14) as prost types.
//!
//! Our own `.proto` text lives in `proto/onnx.proto`; it keeps ONNX's field
//! numbers so any conforming model decodes. In the compiler only `load`,
//! `check`, `import`, the `driver` that chains them, `host::tensor_io` and
//! the CLI see these types; no stage after `import` does.

#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/onnx.rs"));

pub use prost::Message;
