//! ai.onnx.ml's map operators. ZipMap: a `[N, C]` float tensor (or `[C]`,
//! one map) and `C` class labels (`classlabels_int64s` or
//! `classlabels_strings`) become a sequence of `N` maps from label to
//! score. DictVectorizer: a map graph input becomes a `[1, V]` tensor, the
//! value of each of `V` vocabulary keys (0 where the map lacks it).
//!
//! A map never reaches code generation as a value: like a sequence
//! (`crate::ops::sequence`), ZipMap is resolved during inference into a
//! [`Composite::MapRows`] of the labels (a constant) and the scores
//! tensor. Only a graph output can hold it; inference then appends a
//! `WriteComposite` node that writes the caller's `onnxc_sequence` whose
//! elements are `onnxc_map` records (count, keys, values), each map's
//! values pointing at its row — so the scores are copied once, not
//! spread into per-entry records.
//!
//! A map graph input is a [`Composite::MapRows`] of its keys and values,
//! two `[n]` tensors whose addresses the caller's `onnxc_map` gives (the
//! entry count fixed at compile time, checked on entry,
//! `codegen::composite`); DictVectorizer becomes a [`VocabularyLookup`]
//! node on them: for every (entry, vocabulary key) pair, the value is
//! stored where the keys are equal — int64 keys compared in registers,
//! string keys by the string kernel's equality.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::{types, InstBuilder, IntCC, Level, Lower, MemFlagsData};
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
    let labels = labels(cx, "classlabels_int64s", "classlabels_strings")?;
    Ok(Op::ZipMap(ZipMap { labels }))
}

pub fn import_dict_vectorizer(cx: &mut NodeImport) -> Result<Op, String> {
    let vocabulary = labels(cx, "int64_vocabulary", "string_vocabulary")?;
    Ok(Op::DictVectorizer(DictVectorizer { vocabulary }))
}

/// Exactly one of two attributes, int64 or string keys, not empty.
fn labels(cx: &NodeImport, ints: &str, strings: &str) -> Result<Labels, String> {
    let labels = match (cx.attrs.ints(ints)?, cx.attrs.strings(strings)?) {
        (Some(l), None) => Labels::Int64(l),
        (None, Some(l)) => Labels::Strings(l),
        _ => return Err(format!("exactly one of \"{ints}\" and \"{strings}\" is required")),
    };
    if labels.len() == 0 {
        return Err(format!("\"{ints}\" / \"{strings}\" is empty"));
    }
    Ok(labels)
}

#[derive(Clone, Debug, PartialEq)]
pub struct DictVectorizer {
    pub vocabulary: Labels,
}

impl Operator for DictVectorizer {
    fn name(&self) -> &'static str {
        "DictVectorizer"
    }

    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("DictVectorizer is resolved before inference".into())
    }

    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("DictVectorizer is resolved before code generation".into())
    }
}

/// DictVectorizer's input map as a [`VocabularyLookup`] on its keys and
/// values, with the vocabulary as a constant third input.
pub(crate) fn expand_dict_vectorizer(x: &mut Expansion, node: &Node, op: &DictVectorizer) -> Result<(), Failure> {
    let map = node.inputs.first().copied().flatten().ok_or(Failure::Message("input 0 is required".into()))?;
    let out = *node.outputs.first().ok_or(Failure::Message("the node has no output".into()))?;
    let Some(Composite::MapRows { keys, values }) = x.graph.composites.get(&map).cloned() else {
        return Err(Failure::Message("input 0 is not a map graph input".into()));
    };
    let vocabulary = op.vocabulary.tensor().ok_or(Failure::Message("the vocabulary is too large".into()))?;
    let vocabulary = x.constant(&format!("{}/vocabulary", node.name), vocabulary);
    let lookup = Node {
        name: node.name.clone(),
        op: Op::VocabularyLookup(VocabularyLookup),
        inputs: vec![Some(keys), Some(values), Some(vocabulary)],
        outputs: vec![out],
    };
    x.run(vec![lookup])
}

/// `y[0, j] = values[i]` where `keys[i] == vocabulary[j]`, else 0: inputs
/// keys `[n]`, values `[n]`, vocabulary `[V]` (a constant, the keys' type);
/// output `[1, V]` of the values' type.
#[derive(Clone, Debug, PartialEq)]
pub struct VocabularyLookup;

impl Operator for VocabularyLookup {
    fn name(&self) -> &'static str {
        "VocabularyLookup"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (keys, values, vocabulary) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
        if keys.shape != values.shape || keys.shape.len() != 1 {
            return Err(format!("keys {:?} and values {:?} are not one map", keys.shape, values.shape));
        }
        if keys.dtype != vocabulary.dtype || !matches!(keys.dtype, DType::I64 | DType::String) {
            return Err(format!("map keys are {}, the vocabulary {}", keys.dtype, vocabulary.dtype));
        }
        if !matches!(values.dtype, DType::F32 | DType::F64 | DType::I64) {
            return Err(format!("map values are {}; float, double and int64 are compiled", values.dtype));
        }
        Ok(vec![Inferred::new(values.dtype, vec![1, vocabulary.shape.iter().product()])])
    }

    /// One byte: the string kernel's equality result.
    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        usize::from(cx.inputs.first().and_then(|i| i.as_ref()).is_some_and(|k| k.dtype == DType::String))
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (key_type, keys_shape) = cx.input_type(0)?;
        let (value_type, _) = cx.input_type(1)?;
        let (_, vocabulary_shape) = cx.input_type(2)?;
        let (entries, words) = (keys_shape[0], vocabulary_shape.iter().product::<usize>());
        let (key_size, size) = (key_type.size() as i64, value_type.size() as i64);
        // Values move as bits: an integer of their width.
        let bits = if size == 8 { types::I64 } else { types::I32 };
        let flags = MemFlagsData::trusted();
        let (keys, values, vocabulary, y) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.input_ptr(2)?, cx.output_ptr(0)?);
        let zero = cx.b.ins().iconst(bits, 0);
        cx.nest(&[Level::new(words, vec![size])], &[y], &mut |cx, _, at| {
            cx.b.ins().store(flags, zero, at[0], 0);
            Ok(())
        })?;
        let equal_flag = if key_type == DType::String { Some(cx.scratch_ptr()?) } else { None };
        let levels = [Level::new(entries, vec![key_size, size, 0, 0]), Level::new(words, vec![0, 0, key_size, size])];
        cx.nest(&levels, &[keys, values, vocabulary, y], &mut |cx, _, at| {
            let equal = match equal_flag {
                Some(flag) => {
                    let one = cx.iconst(1);
                    cx.call_checked("onnxc_string_equal", &[at[0], at[2], flag, one])?;
                    let byte = cx.b.ins().load(types::I8, flags, flag, 0);
                    cx.b.ins().icmp_imm_u(IntCC::NotEqual, byte, 0)
                }
                None => {
                    let key = cx.b.ins().load(types::I64, flags, at[0], 0);
                    let word = cx.b.ins().load(types::I64, flags, at[2], 0);
                    cx.b.ins().icmp(IntCC::Equal, key, word)
                }
            };
            let value = cx.b.ins().load(bits, flags, at[1], 0);
            let old = cx.b.ins().load(bits, flags, at[3], 0);
            let new = cx.b.ins().select(equal, value, old);
            cx.b.ins().store(flags, new, at[3], 0);
            Ok(())
        })
    }
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
