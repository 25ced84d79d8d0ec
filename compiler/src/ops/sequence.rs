//! Sequences and optionals: SequenceConstruct, SequenceEmpty,
//! SequenceInsert, SequenceErase, SequenceAt, SequenceLength,
//! ConcatFromSequence, SplitToSequence, Optional, OptionalHasElement,
//! OptionalGetElement (opsets 11-25).
//!
//! Their values never reach code generation: inference (`crate::infer::expand`)
//! tracks each sequence or optional as the list of values it holds
//! ([`crate::ir::Composite`]), with positions known at compile time, and
//! turns every operator into tensor operators (Identity, Concat, Gather...)
//! or constants (SequenceLength, OptionalHasElement).
//!
//! At the ABI a sequence or optional graph input is a caller-filled
//! descriptor (`onnxc_sequence`, `onnxc_optional`, each element an
//! `onnxc_tensor`); inference binds it to a composite of one value per
//! tensor (`ValueDef::InputElement`), specialised to the element count and
//! shapes given at compile time, which the code checks on entry
//! (`codegen::composite`). A sequence or optional graph output is written
//! by a [`WriteComposite`] node that inference appends: it copies each
//! tensor into memory from the run-time allocator and fills the caller's
//! descriptor, as data-dependent outputs do — so the ABI already carries
//! lengths and shapes that only the run knows.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::{types, InstBuilder, Lower, MemFlagsData, Value};
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

/// Writes a sequence or optional graph output: its inputs are the tensors
/// it holds (none for an empty optional), its output the graph output,
/// whose caller's buffer is the `onnxc_sequence` or `onnxc_optional`
/// descriptor. Everything the descriptor points to comes from the
/// run-time allocator (`Lower::alloc_scratch`).
#[derive(Clone, Debug, PartialEq)]
pub struct WriteComposite {
    pub optional: bool,
    pub sequence: bool,
    /// An optional that holds nothing (then there are no inputs).
    pub empty: bool,
    /// A sequence of maps ([`crate::ir::Composite::MapRows`]): the inputs
    /// are the keys `[C]` and the values `[N, C]` or `[C]`, and the
    /// elements are `onnxc_map` records, one per row.
    pub maps: bool,
}

impl Operator for WriteComposite {
    fn name(&self) -> &'static str {
        "WriteComposite"
    }

    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Err("WriteComposite is made after inference".into())
    }

    fn foldable(&self) -> bool {
        false
    }

    /// The descriptors, dims and element bytes, each allocation rounded
    /// up to the allocator's alignment.
    fn run_time_bytes(&self, cx: &InferCx) -> Option<usize> {
        if self.empty {
            return Some(0);
        }
        let p = std::mem::size_of::<usize>();
        let aligned = |n: usize| n.checked_next_multiple_of(crate::plan::ALIGN);
        if self.maps {
            let [Some(keys), Some(values)] = cx.inputs.as_slice() else { return None };
            let (_, rows) = map_rows(values.shape)?;
            let keys = keys.dtype.bytes_for(crate::ir::shape::element_count(keys.shape)?)?;
            let values = values.dtype.bytes_for(crate::ir::shape::element_count(values.shape)?)?;
            let records = rows.checked_mul(MAP_WORDS * p)?;
            return [keys, values, records].iter().try_fold(0usize, |t, &b| t.checked_add(aligned(b.max(1))?));
        }
        let mut total = 0usize;
        let mut descriptors = if self.optional && self.sequence { SEQUENCE_WORDS * p } else { 0 };
        for input in &cx.inputs {
            let input = input.as_ref()?;
            descriptors = descriptors.checked_add(TENSOR_WORDS * p + 8 * input.shape.len())?;
            let bytes = input.dtype.bytes_for(crate::ir::shape::element_count(input.shape)?)?;
            total = total.checked_add(aligned(bytes.max(1))?)?;
        }
        total.checked_add(aligned(descriptors.max(1))?)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let p = cx.ptr_type().bytes() as i32;
        let flags = MemFlagsData::trusted();
        let desc = cx.output_ptr(0)?;
        if self.empty {
            let zero = cx.iconst(0);
            store_words(cx, desc, &[zero, zero]);
            return Ok(());
        }
        if self.maps {
            return write_maps(cx, desc);
        }
        let n = cx.input_count();
        let shapes: Vec<_> = (0..n)
            .map(|i| {
                cx.input_type(i).map_err(|_| {
                    format!("element {i} has a data-dependent shape, which sequence outputs do not take yet")
                })
            })
            .collect::<Result<_, _>>()?;
        let dims_total: usize = shapes.iter().map(|(_, s)| s.len()).sum();
        let own_sequence = if self.optional && self.sequence { SEQUENCE_WORDS * p as usize } else { 0 };
        let block_bytes = own_sequence + n * TENSOR_WORDS * p as usize + 8 * dims_total;
        let bytes = cx.iconst(block_bytes.max(1) as i64);
        let block = cx.alloc_scratch(bytes)?;
        // Where the tensor descriptors go: after the optional's own
        // `onnxc_sequence`, if any; the dims follow them.
        let tensors = cx.b.ins().iadd_imm_s(block, own_sequence as i64);
        if self.optional {
            let has = cx.iconst(1);
            store_words(cx, desc, &[has, block]);
        }
        if self.sequence {
            let seq = if self.optional { block } else { desc };
            let count = cx.iconst(n as i64);
            let elements = if n == 0 { cx.iconst(0) } else { tensors };
            store_words(cx, seq, &[count, elements]);
        }
        let mut dims_at = (n * TENSOR_WORDS * p as usize) as i64;
        for (i, (dtype, shape)) in shapes.iter().enumerate() {
            let tensor = cx.b.ins().iadd_imm_s(tensors, (i * TENSOR_WORDS * p as usize) as i64);
            let bytes = crate::ir::shape::element_count(shape)
                .and_then(|c| dtype.bytes_for(c))
                .ok_or_else(|| format!("input {i} is too large"))?;
            let size = cx.iconst(bytes.max(1) as i64);
            let data = cx.alloc_scratch(size)?;
            let src = cx.input_ptr(i)?;
            cx.copy_bytes(data, src, bytes);
            let dims = cx.b.ins().iadd_imm_s(tensors, dims_at);
            for (j, &d) in shape.iter().enumerate() {
                let d = cx.b.ins().iconst(types::I64, d as i64);
                cx.b.ins().store(flags, d, dims, 8 * j as i32);
            }
            let rank = cx.iconst(shape.len() as i64);
            store_words(cx, tensor, &[data, rank, dims]);
            dims_at += 8 * shape.len() as i64;
        }
        Ok(())
    }
}

/// Pointer-sized words of `onnxc_tensor` (data, rank, dims),
/// `onnxc_sequence` (count, elements) and `onnxc_map` (count, keys,
/// values); `onnxc_optional` is (has_value, value).
pub const TENSOR_WORDS: usize = 3;
pub const SEQUENCE_WORDS: usize = 2;
pub const MAP_WORDS: usize = 3;

/// The columns and rows of a map sequence's values: `[N, C]` is `N` maps
/// of `C` entries, `[C]` one map.
pub fn map_rows(shape: &[usize]) -> Option<(usize, usize)> {
    match *shape {
        [c] => Some((c, 1)),
        [n, c] => Some((c, n)),
        _ => None,
    }
}

/// The caller's `onnxc_sequence` at `desc` gets one `onnxc_map` per row:
/// the keys and values are copied once into allocator memory, every map
/// pointing at the shared keys and at its own row.
fn write_maps(cx: &mut Lower, desc: Value) -> Result<(), String> {
    let p = cx.ptr_type().bytes() as i64;
    let (key_type, keys_shape) = cx.input_type(0)?;
    let (value_type, values_shape) = cx.input_type(1)?;
    let (columns, rows) = map_rows(&values_shape).ok_or("the values are neither [N, C] nor [C]")?;
    if keys_shape != [columns] {
        return Err(format!("{} keys for maps of {columns} entries", keys_shape.len()));
    }
    let copy = |cx: &mut Lower, i: usize, bytes: usize| -> Result<Value, String> {
        let size = cx.iconst(bytes.max(1) as i64);
        let data = cx.alloc_scratch(size)?;
        let src = cx.input_ptr(i)?;
        cx.copy_bytes(data, src, bytes);
        Ok(data)
    };
    let too_large = || "the map values are too large".to_string();
    let keys = copy(cx, 0, key_type.bytes_for(columns).ok_or_else(too_large)?)?;
    let row_bytes = value_type.bytes_for(columns).ok_or_else(too_large)?;
    let values = copy(cx, 1, row_bytes.checked_mul(rows).ok_or_else(too_large)?)?;
    let records_bytes = cx.iconst((rows * MAP_WORDS) as i64 * p);
    let records = cx.alloc_scratch(records_bytes)?;
    let count = cx.iconst(columns as i64);
    let rows_level = crate::codegen::Level::new(rows, vec![MAP_WORDS as i64 * p, row_bytes as i64]);
    cx.nest(&[rows_level], &[records, values], &mut |cx, _, at| {
        store_words(cx, at[0], &[count, keys, at[1]]);
        Ok(())
    })?;
    let n = cx.iconst(rows as i64);
    store_words(cx, desc, &[n, records]);
    Ok(())
}

fn store_words(cx: &mut Lower, at: Value, words: &[Value]) {
    let p = cx.ptr_type().bytes() as i32;
    for (i, &w) in words.iter().enumerate() {
        cx.b.ins().store(MemFlagsData::trusted(), w, at, i as i32 * p);
    }
}
