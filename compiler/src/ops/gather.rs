//! Placeholder: this family is being written.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;

#[derive(Clone, Debug)]
pub struct Gather;

impl Operator for Gather {
    fn name(&self) -> &'static str {
        "Gather"
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
