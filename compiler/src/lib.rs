//! onnxc: ONNX model → native object file.
//!
//! The pipeline, one module per stage (see ARCHITECTURE.md):
//! `load` → `check` → `import` → `infer` → `passes` → `plan` → `codegen` →
//! `emit` (object, header, archive) or `jit` (run in this process).

pub mod buffer;
pub mod call;
pub mod check;
pub mod codegen;
pub mod driver;
pub mod emit;
pub mod import;
pub mod infer;
pub mod ir;
pub mod jit;
pub mod limits;
pub mod load;
pub mod ops;
pub mod passes;
pub mod plan;
pub mod tensor_io;
