//! Sequences and optionals: SequenceConstruct, SequenceEmpty,
//! SequenceInsert, SequenceErase, SequenceAt, SequenceLength,
//! ConcatFromSequence, SplitToSequence, Optional, OptionalHasElement,
//! OptionalGetElement (opsets 11-25).
//!
//! Their values never reach code generation: inference (`crate::expand`)
//! tracks each sequence or optional as the list of values it holds
//! ([`crate::ir::Composite`]), with positions known at compile time, and
//! turns every operator into tensor operators (Identity, Concat, Gather...)
//! or constants (SequenceLength, OptionalHasElement). Sequence or optional
//! graph inputs and outputs are not compiled yet.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;

#[derive(Clone, Debug, PartialEq)]
pub enum SequenceOp {
    Construct,
    Empty,
    Insert,
    Erase,
    At,
    Length,
    ConcatFrom { axis: i64, new_axis: bool },
    SplitTo { axis: i64, keepdims: bool },
    MakeOptional,
    HasElement,
    GetElement,
}

impl Operator for SequenceOp {
    fn name(&self) -> &'static str {
        match self {
            SequenceOp::Construct => "SequenceConstruct",
            SequenceOp::Empty => "SequenceEmpty",
            SequenceOp::Insert => "SequenceInsert",
            SequenceOp::Erase => "SequenceErase",
            SequenceOp::At => "SequenceAt",
            SequenceOp::Length => "SequenceLength",
            SequenceOp::ConcatFrom { .. } => "ConcatFromSequence",
            SequenceOp::SplitTo { .. } => "SplitToSequence",
            SequenceOp::MakeOptional => "Optional",
            SequenceOp::HasElement => "OptionalHasElement",
            SequenceOp::GetElement => "OptionalGetElement",
        }
    }

    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err(format!("{} is resolved before inference", self.name()))
    }

    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err(format!("{} is resolved before code generation", self.name()))
    }
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let flag = |name: &str, default: i64| -> Result<bool, String> { Ok(cx.attrs.int_or(name, default)? != 0) };
    Ok(Op::Sequence(match cx.op_type {
        "SequenceConstruct" => SequenceOp::Construct,
        "SequenceEmpty" => SequenceOp::Empty,
        "SequenceInsert" => SequenceOp::Insert,
        "SequenceErase" => SequenceOp::Erase,
        "SequenceAt" => SequenceOp::At,
        "SequenceLength" => SequenceOp::Length,
        "ConcatFromSequence" => SequenceOp::ConcatFrom {
            axis: cx.attrs.int("axis")?.ok_or("attribute \"axis\" is required")?,
            new_axis: flag("new_axis", 0)?,
        },
        "SplitToSequence" => SequenceOp::SplitTo { axis: cx.attrs.int_or("axis", 0)?, keepdims: flag("keepdims", 1)? },
        "Optional" => SequenceOp::MakeOptional,
        "OptionalHasElement" => SequenceOp::HasElement,
        _ => SequenceOp::GetElement,
    }))
}
