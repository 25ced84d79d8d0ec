//! Placeholder: this family is being written.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;

#[derive(Clone, Debug)]
pub struct MatMul;

impl Operator for MatMul {
    fn name(&self) -> &'static str {
        "MatMul"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_matmul(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Gemm;

impl Operator for Gemm {
    fn name(&self) -> &'static str {
        "Gemm"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_gemm(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}
