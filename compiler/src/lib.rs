//! onnxc: ONNX model → native object file.
//!
//! The pipeline, one module per stage (see ARCHITECTURE.md):
//! `load` → `check` → `import` → `infer` → `passes` → `plan` → `codegen` →
//! `emit` (object, header, archive, Rust module) or `jit` (run in this
//! process). [`Build`] is the same pipeline for Cargo build scripts.

pub mod build_script;
pub mod check;
pub mod codegen;
pub mod driver;
pub mod emit;
pub mod host;
pub mod import;
pub mod infer;
pub mod ir;
pub mod jit;
pub mod limits;
pub mod load;
pub mod ops;
pub mod passes;
pub mod plan;

pub use build_script::{Build, BuildError, Built};
