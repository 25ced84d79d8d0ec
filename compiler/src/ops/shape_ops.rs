//! Placeholder: this family is being written.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;

#[derive(Clone, Debug)]
pub struct Reshape;

impl Operator for Reshape {
    fn name(&self) -> &'static str {
        "Reshape"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_reshape(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Transpose;

impl Operator for Transpose {
    fn name(&self) -> &'static str {
        "Transpose"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_transpose(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Concat;

impl Operator for Concat {
    fn name(&self) -> &'static str {
        "Concat"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_concat(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Split;

impl Operator for Split {
    fn name(&self) -> &'static str {
        "Split"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_split(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Slice;

impl Operator for Slice {
    fn name(&self) -> &'static str {
        "Slice"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_slice(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Expand;

impl Operator for Expand {
    fn name(&self) -> &'static str {
        "Expand"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_expand(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Pad;

impl Operator for Pad {
    fn name(&self) -> &'static str {
        "Pad"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_pad(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Shape;

impl Operator for Shape {
    fn name(&self) -> &'static str {
        "Shape"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_shape(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Size;

impl Operator for Size {
    fn name(&self) -> &'static str {
        "Size"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_size(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct ConstantOfShape;

impl Operator for ConstantOfShape {
    fn name(&self) -> &'static str {
        "ConstantOfShape"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_constant_of_shape(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Range;

impl Operator for Range {
    fn name(&self) -> &'static str {
        "Range"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_range(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

#[derive(Clone, Debug)]
pub struct Tile;

impl Operator for Tile {
    fn name(&self) -> &'static str {
        "Tile"
    }
    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("not implemented yet".into())
    }
    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("not implemented yet".into())
    }
}

pub fn import_tile(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

pub fn import_flatten(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

pub fn import_squeeze(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}

pub fn import_unsqueeze(_cx: &mut NodeImport) -> Result<Op, String> {
    Err("not implemented yet".into())
}
