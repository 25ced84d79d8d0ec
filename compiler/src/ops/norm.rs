//! Placeholder: this family is being written.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;

#[derive(Clone, Debug)]
pub struct BatchNorm;

impl Operator for BatchNorm {
    fn name(&self) -> &'static str {
        "BatchNorm"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_batchnorm(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Lrn;

impl Operator for Lrn {
    fn name(&self) -> &'static str {
        "Lrn"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_lrn(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}
