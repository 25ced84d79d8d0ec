//! ai.onnx.ml's map operators. ZipMap: a `[N, C]` float tensor (or `[C]`,
//! one map) and `C` class labels (`classlabels_int64s` or
//! `classlabels_strings`) become a sequence of `N` maps from label to
//! score. DictVectorizer: a map graph input becomes a `[1, V]` tensor, the
//! value of each of `V` vocabulary keys (0 where the map lacks it).
//! CastMap: a `map(int64, float)` graph input becomes its values in key
//! order (`DENSE`, `[1, n]`) or at their keys (`SPARSE`, `[1, max_map]`),
//! as float or int64.
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

use crate::codegen::kernels::{self, Ptr, I64};
use crate::codegen::{types, InstBuilder, IntCC, Level, Lower, MemFlagsData};
use crate::import::NodeImport;
use crate::infer::expand::{Expansion, Failure};
use crate::ir::{Composite, DType, Node, Tensor};
use crate::ops::{InferCx, Inferred, Op, Operator};

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

pub fn import_cast_map(cx: &mut NodeImport) -> Result<Op, String> {
    let to = match cx.attrs.string("cast_to")?.as_deref().unwrap_or("TO_FLOAT") {
        "TO_FLOAT" => DType::F32,
        "TO_INT64" => DType::I64,
        other => return Err(format!("cast_to {other:?} is not compiled yet (TO_FLOAT and TO_INT64 are)")),
    };
    let form = match cx.attrs.string("map_form")?.as_deref().unwrap_or("DENSE") {
        "DENSE" => None,
        "SPARSE" => {
            let max = cx.attrs.int_or("max_map", 1)?;
            Some(usize::try_from(max).ok().filter(|&m| m > 0).ok_or(format!("max_map {max} is not positive"))?)
        }
        other => return Err(format!("map_form {other:?} is neither DENSE nor SPARSE")),
    };
    Ok(Op::CastMap(CastMap(CastMapEntries { to, sparse_size: form })))
}

/// CastMap as imported: resolved before inference into
/// [`CastMapEntries`] on the input map's keys and values.
#[derive(Clone, Debug, PartialEq)]
pub struct CastMap(pub CastMapEntries);

impl Operator for CastMap {
    fn name(&self) -> &'static str {
        "CastMap"
    }

    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("CastMap is resolved before inference".into())
    }

    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("CastMap is resolved before code generation".into())
    }
}

/// CastMap on a map's keys and values (inputs 0 and 1): `to` is the
/// output type, `sparse_size` SPARSE's `max_map` (`None`: DENSE).
#[derive(Clone, Debug, PartialEq)]
pub struct CastMapEntries {
    pub to: DType,
    pub sparse_size: Option<usize>,
}

impl Operator for CastMapEntries {
    fn name(&self) -> &'static str {
        "CastMap"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (keys, values) = (cx.input(0)?, cx.input(1)?);
        if keys.dtype != DType::I64 || values.dtype != DType::F32 || keys.shape.len() != 1 || keys.shape != values.shape
        {
            return Err(format!(
                "input 0 must be one map(int64, float) graph input (got {} keys, {} values)",
                keys.dtype, values.dtype
            ));
        }
        Ok(vec![Inferred::new(self.to, vec![1, self.sparse_size.unwrap_or(keys.shape[0])])])
    }

    /// DENSE: each value goes to its key's rank among the keys (how many
    /// keys are smaller), found by one pass over the keys per entry; SPARSE:
    /// to its key, keys past `max_map` skipped and a negative key a status.
    /// Slots no entry fills stay 0.
    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let entries = shape[0];
        let flags = MemFlagsData::trusted();
        let (keys, values, y) = (cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?);
        let (ty, slots) = if self.to == DType::I64 { (types::I64, 8) } else { (types::F32, 4) };
        let zero = if self.to == DType::I64 { cx.b.ins().iconst(types::I64, 0) } else { cx.b.ins().f32const(0.0) };
        let size = self.sparse_size.unwrap_or(entries);
        cx.nest(&[Level::new(size, vec![slots])], &[y], &mut |cx, _, at| {
            cx.b.ins().store(flags, zero, at[0], 0);
            Ok(())
        })?;
        let to = self.to;
        let sparse_size = self.sparse_size;
        cx.nest(&[Level::new(entries, vec![8, 4])], &[keys, values], &mut |cx, _, at| {
            let key = cx.b.ins().load(types::I64, flags, at[0], 0);
            let value = cx.b.ins().load(types::F32, flags, at[1], 0);
            let value = if to == DType::I64 { cx.b.ins().fcvt_to_sint_sat(types::I64, value) } else { value };
            let slot = match sparse_size {
                Some(max) => {
                    let negative = cx.b.ins().icmp_imm_s(IntCC::SignedLessThan, key, 0);
                    cx.fail_if(negative, crate::codegen::status::INDEX_OUT_OF_RANGE);
                    // Keys past the end write to the last slot's current
                    // value instead: a store that changes nothing.
                    let inside = cx.b.ins().icmp_imm_s(IntCC::SignedLessThan, key, max as i64);
                    let last = cx.b.ins().iconst(types::I64, max as i64 - 1);
                    let slot = cx.b.ins().select(inside, key, last);
                    let at_slot = cx.b.ins().imul_imm_s(slot, slots);
                    let address = cx.b.ins().iadd(y, at_slot);
                    let old = cx.b.ins().load(ty, flags, address, 0);
                    let value = cx.b.ins().select(inside, value, old);
                    cx.b.ins().store(flags, value, address, 0);
                    return Ok(());
                }
                None => {
                    let init = cx.b.ins().iconst(types::I64, 0);
                    let ranks =
                        cx.fold_nest(&[Level::new(entries, vec![8])], &[keys], &[init], &mut |cx, _, p, acc| {
                            let other = cx.b.ins().load(types::I64, flags, p[0], 0);
                            let smaller = cx.b.ins().icmp(IntCC::SignedLessThan, other, key);
                            let one = cx.b.ins().uextend(types::I64, smaller);
                            Ok(vec![cx.b.ins().iadd(acc[0], one)])
                        })?;
                    ranks[0]
                }
            };
            let at_slot = cx.b.ins().imul_imm_s(slot, slots);
            let address = cx.b.ins().iadd(y, at_slot);
            cx.b.ins().store(flags, value, address, 0);
            Ok(())
        })
    }
}

/// CastMap's input map as its keys and values.
pub(crate) fn expand_cast_map(x: &mut Expansion, node: &Node, op: &CastMap) -> Result<(), Failure> {
    let map = node.inputs.first().copied().flatten().ok_or(Failure::Message("input 0 is required".into()))?;
    let Some(Composite::MapRows { keys, values }) = x.graph.composites.get(&map).cloned() else {
        return Err(Failure::Message("input 0 is not a map graph input".into()));
    };
    let lowered = Node {
        name: node.name.clone(),
        op: Op::CastMapEntries(op.0.clone()),
        inputs: vec![Some(keys), Some(values)],
        outputs: node.outputs.clone(),
    };
    x.run(vec![lowered])
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
                    cx.call_checked(kernels::onnxc_string_equal, (Ptr(at[0]), Ptr(at[2]), Ptr(flag), I64(one)))?;
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
