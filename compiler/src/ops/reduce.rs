//! Placeholder: this family is being written.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;

#[derive(Clone, Debug)]
pub struct Reduce;

impl Operator for Reduce {
    fn name(&self) -> &'static str {
        "Reduce"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct ArgReduce;

impl Operator for ArgReduce {
    fn name(&self) -> &'static str {
        "ArgReduce"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_arg(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}
