//! ai.onnx.ml's ZipMap: a `[N, C]` float tensor (or `[C]`, one map) and
//! `C` class labels (`classlabels_int64s` or `classlabels_strings`) become
//! a sequence of `N` maps from label to score.
//!
//! A map never reaches code generation as a value: like a sequence
//! (`crate::ops::sequence`), ZipMap is resolved during inference into a
//! [`Composite::MapRows`] of the labels (a constant) and the scores
//! tensor. Only a graph output can hold it; inference then appends a
//! `WriteComposite` node that writes the caller's `onnxc_sequence` whose
//! elements are `onnxc_map` records (count, keys, values), each map's
//! values pointing at its row — so the scores are copied once, not
//! spread into per-entry records.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::expand::{Expansion, Failure};
use crate::import::NodeImport;
use crate::ir::{Composite, DType, Node, Tensor};

#[derive(Clone, Debug, PartialEq)]
pub struct ZipMap {
    /// The keys, one per column: int64 or string.
    pub labels: Labels,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Labels {
    Int64(Vec<i64>),
    Strings(Vec<String>),
}

impl Labels {
    fn len(&self) -> usize {
        match self {
            Labels::Int64(l) => l.len(),
            Labels::Strings(l) => l.len(),
        }
    }

    fn tensor(&self) -> Option<Tensor> {
        match self {
            Labels::Int64(l) => Some(Tensor::from_i64s(vec![l.len()], l)),
            Labels::Strings(l) => {
                Tensor::from_strings(vec![l.len()], l.iter().map(|s| s.as_bytes().to_vec()).collect())
            }
        }
    }
}

impl Operator for ZipMap {
    fn name(&self) -> &'static str {
        "ZipMap"
    }

    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("ZipMap is resolved before inference".into())
    }

    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("ZipMap is resolved before code generation".into())
    }
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let labels = match (cx.attrs.ints("classlabels_int64s")?, cx.attrs.strings("classlabels_strings")?) {
        (Some(l), None) => Labels::Int64(l),
        (None, Some(l)) => Labels::Strings(l),
        _ => return Err("exactly one of \"classlabels_int64s\" and \"classlabels_strings\" is required".into()),
    };
    if labels.len() == 0 {
        return Err("the class labels are empty".into());
    }
    Ok(Op::ZipMap(ZipMap { labels }))
}

/// Binds ZipMap's output to the labels and the scores tensor, after
/// checking that the scores are `[N, C]` or `[C]` floats with one column
/// per label.
pub(crate) fn expand(x: &mut Expansion, node: &Node, op: &ZipMap) -> Result<(), Failure> {
    let scores = node.inputs.first().copied().flatten().ok_or(Failure::Message("input 0 is required".into()))?;
    let out = *node.outputs.first().ok_or(Failure::Message("the node has no output".into()))?;
    let Some((dtype, shape)) = x.graph.concrete(scores) else {
        return Err(Failure::Message("input 0 has no shape known at compile time".into()));
    };
    if dtype != DType::F32 {
        return Err(Failure::Message(format!("input 0 is {dtype}, ZipMap takes float")));
    }
    let columns = match shape.as_slice() {
        [c] | [_, c] => *c,
        _ => return Err(Failure::Message(format!("input 0 has shape {shape:?}, ZipMap takes [N, C] or [C]"))),
    };
    if columns != op.labels.len() {
        return Err(Failure::Message(format!(
            "input 0 has {columns} columns but there are {} class labels",
            op.labels.len()
        )));
    }
    let labels = op.labels.tensor().ok_or(Failure::Message("the class labels are too large".into()))?;
    let keys = x.constant(&format!("{}/labels", node.name), labels);
    x.graph.composites.insert(out, Composite::MapRows { keys, values: scores });
    Ok(())
}
