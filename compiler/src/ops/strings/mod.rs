//! Operators over string tensors and text: StringConcat, StringNormalizer,
//! StringSplit, RegexFullMatch, TfIdfVectorizer (integer tokens), and the
//! string forms of Equal and Cast (called from `elementwise.rs`).
//!
//! A string element is a 16-byte `onnxc_string` record, so shape operators
//! move strings like any other element; these operators call the kernels of
//! `runtime-support/src/generic/strings.rs`. A string constant is a
//! read-only object of records whose addresses are relocations into an
//! object of bytes (`codegen`). New bytes (StringConcat, case changes) come
//! from the run-time allocator after a counting call
//! ([`Operator::allocates_at_run_time`], which leaves the plan's dynamic
//! part unbounded); substrings point into the bytes they came from.
//! Attributes become read-only data the kernels read: string lists, and for
//! RegexFullMatch a DFA table built by [`crate::ops::strings::regex`], so
//! no regular expression is compiled at run time.
//!
//! Type constraints (ONNX): StringConcat (20) and RegexFullMatch (20) take
//! string tensors (RegexFullMatch gives bool); StringNormalizer (10) a 1-D
//! `[C]` or 2-D `[1, C]` string tensor; StringSplit (20) any string tensor,
//! giving the substrings (one more dim, padded with "") and their counts.
//! TfIdfVectorizer (9) takes int32/int64 `[C]` or `[N, C]` tokens (string
//! tokens, `pool_strings`, are rejected for now) and gives f32 `[out]` or
//! `[N, out]`. StringNormalizer's `locale` is accepted but case changes are `core`'s
//! Unicode case mapping whatever the locale.

pub mod regex;

use super::shape_ops::{emit_strided_copy, StridedCopy};
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr, I64};
use crate::codegen::{Lower, Value};
use crate::import::NodeImport;
use crate::ir::shape::{broadcast, broadcast_strides};
use crate::ir::{DType, Dim};
use onnxc_runtime::{
    NormalizerParams, SplitParams, TfIdfParams, CASE_LOWER, CASE_NONE, CASE_UPPER, NUMBER_TEXT_BYTES, TFIDF_IDF,
    TFIDF_TF, TFIDF_TFIDF,
};

const RECORD: usize = 16;

fn string_input(cx: &InferCx, i: usize) -> Result<Vec<usize>, String> {
    let x = cx.input(i)?;
    if x.dtype != DType::String {
        return Err(format!("input {i} must be a string tensor, got {}", x.dtype));
    }
    Ok(x.shape.to_vec())
}

/// A string list in the layout the kernels read: `u64` count, a `u64`
/// length each, then the bytes back to back.
fn string_list(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = (items.len() as u64).to_le_bytes().to_vec();
    out.extend(items.iter().flat_map(|s| (s.len() as u64).to_le_bytes()));
    out.extend(items.iter().flatten());
    out
}

/// The broadcast output shape of two string inputs.
fn binary_shape(cx: &InferCx) -> Result<Vec<usize>, String> {
    let (a, b) = (string_input(cx, 0)?, string_input(cx, 1)?);
    broadcast(&a, &b).ok_or_else(|| format!("shapes {a:?} and {b:?} do not broadcast"))
}

/// Scratch for the broadcast copies of the inputs of a binary string op.
fn binary_scratch(cx: &InferCx) -> usize {
    let Ok(out) = binary_shape(cx) else {
        return 0;
    };
    let n: usize = out.iter().product();
    (0..2).filter(|&i| cx.input(i).is_ok_and(|x| x.shape != out.as_slice())).count() * n * RECORD
}

/// The address of input `i` read densely as `out_shape`: the input itself,
/// or its broadcast copy in the node's scratch.
fn dense_input(cx: &mut Lower, i: usize, out_shape: &[usize]) -> Result<Value, String> {
    let (_, shape) = cx.input_type(i)?;
    let src = cx.input_ptr(i)?;
    if shape == out_shape {
        return Ok(src);
    }
    let n: usize = out_shape.iter().product();
    let dst = cx.reserve_scratch(n * RECORD)?;
    let copy = StridedCopy::to_dense(out_shape.to_vec(), broadcast_strides(&shape, out_shape), 0);
    emit_strided_copy(cx, DType::String, src, dst, &copy)?;
    Ok(dst)
}

/// Both inputs of a binary string op, dense at the output's shape, and the
/// element count.
fn binary_operands(cx: &mut Lower) -> Result<(Value, Value, Value), String> {
    let (_, out_shape) = cx.output_type(0)?;
    let a = dense_input(cx, 0, &out_shape)?;
    let b = dense_input(cx, 1, &out_shape)?;
    let n = cx.iconst(out_shape.iter().product::<usize>() as i64);
    Ok((a, b, n))
}

/// Equal on string tensors (bytewise), for `elementwise::Elementwise`.
pub fn lower_equal(cx: &mut Lower) -> Result<(), String> {
    let (a, b, n) = binary_operands(cx)?;
    let y = cx.output_ptr(0)?;
    cx.call_checked(kernels::onnxc_string_equal, (Ptr(a), Ptr(b), Ptr(y), I64(n)))
}

/// Scratch that [`lower_equal`] needs.
pub fn equal_scratch(cx: &InferCx) -> usize {
    binary_scratch(cx)
}

/// Rejects the Casts involving strings that onnxc does not compile: to
/// string from bool, integers, f32 and f64; from string to integers, f32
/// and f64 (f16/bf16 and string to bool are not supported yet).
pub fn check_cast(from: DType, to: DType) -> Result<(), String> {
    let ok = match (from, to) {
        (DType::String, DType::String) => true,
        (DType::String, t) => t.is_int() || matches!(t, DType::F32 | DType::F64),
        (f, DType::String) => f.is_int() || matches!(f, DType::F32 | DType::F64 | DType::Bool),
        _ => true,
    };
    ok.then_some(()).ok_or_else(|| format!("Cast from {from} to {to} is not supported yet"))
}

/// Cast to or from string, for `elementwise::Elementwise`: numbers become
/// text in memory from the run-time allocator; text is parsed, and a
/// string that is not a number fails the node (status 6).
pub fn lower_cast(cx: &mut Lower) -> Result<(), String> {
    let ((from, shape), (to, _)) = (cx.input_type(0)?, cx.output_type(0)?);
    let n: usize = shape.iter().product();
    let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
    if from == to {
        cx.copy_bytes(y, x, n * RECORD);
        return Ok(());
    }
    let count = cx.iconst(n as i64);
    if to == DType::String {
        let elem = cx.iconst(from.onnx_code() as i64);
        let bytes = cx.iconst(n.checked_mul(NUMBER_TEXT_BYTES).ok_or("the tensor is too large")? as i64);
        let buf = cx.alloc_scratch(bytes)?;
        cx.call_checked(kernels::onnxc_cast_to_string, (I64(elem), Ptr(x), I64(count), Ptr(y), Ptr(buf)))
    } else {
        let elem = cx.iconst(to.onnx_code() as i64);
        cx.call_checked(kernels::onnxc_cast_from_string, (I64(elem), Ptr(x), I64(count), Ptr(y)))
    }
}

// ---------------------------------------------------------------------------
// StringConcat
// ---------------------------------------------------------------------------

/// StringConcat: `y = a + b` elementwise, with broadcasting.
#[derive(Clone, Debug)]
pub struct StringConcat;

impl Operator for StringConcat {
    fn name(&self) -> &'static str {
        "StringConcat"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Ok(vec![Inferred::new(DType::String, binary_shape(cx)?)])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        binary_scratch(cx)
    }

    fn allocates_at_run_time(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (a, b, n) = binary_operands(cx)?;
        let bytes = cx.call_count(kernels::onnxc_string_concat_bytes, (Ptr(a), Ptr(b), I64(n)))?;
        let buf = cx.alloc_scratch(bytes)?;
        let y = cx.output_ptr(0)?;
        cx.call_checked(kernels::onnxc_string_concat, (Ptr(a), Ptr(b), Ptr(y), I64(n), Ptr(buf)))
    }
}

pub fn import_concat(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::StringConcat(StringConcat))
}

// ---------------------------------------------------------------------------
// StringNormalizer
// ---------------------------------------------------------------------------

/// StringNormalizer: drops stopwords, then changes case.
#[derive(Clone, Debug)]
pub struct StringNormalizer {
    pub case_change: i64,
    pub case_sensitive: bool,
    /// Lower-cased when not case-sensitive.
    pub stopwords: Vec<Vec<u8>>,
}

impl StringNormalizer {
    fn params(&self) -> NormalizerParams {
        NormalizerParams {
            case_change: self.case_change,
            case_sensitive: self.case_sensitive as i64,
            empty_as_one: !self.stopwords.is_empty() as i64,
        }
    }
}

impl Operator for StringNormalizer {
    fn name(&self) -> &'static str {
        "StringNormalizer"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let shape = string_input(cx, 0)?;
        let c = match shape.as_slice() {
            [c] | [1, c] => *c,
            _ => return Err(format!("input 0 must be [C] or [1, C], got {shape:?}")),
        };
        if self.stopwords.is_empty() {
            return Ok(vec![Inferred::new(DType::String, shape)]);
        }
        // Stopwords make the length data-dependent: all removed gives [""].
        let mut dims: Vec<Dim> = shape.iter().map(|&d| Dim::Known(d)).collect();
        if let Some(last) = dims.last_mut() {
            *last = Dim::Dynamic(Some(c.max(1)));
        }
        Ok(vec![Inferred::data_dependent(DType::String, dims)])
    }

    fn allocates_at_run_time(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let params = cx.params(&self.params())?;
        let stop = cx.data_bytes(&string_list(&self.stopwords))?;
        let x = cx.input_ptr(0)?;
        let n = cx.iconst(shape.iter().product::<usize>() as i64);
        let y = if cx.output_is_dynamic(0) {
            let count = cx.call_count(kernels::onnxc_string_normalize_count, (params, Ptr(stop), Ptr(x), I64(n)))?;
            let mut dims: Vec<Value> = shape.iter().map(|&d| cx.iconst(d as i64)).collect();
            if let Some(last) = dims.last_mut() {
                *last = count;
            }
            cx.alloc_output(0, &dims)?
        } else {
            cx.output_ptr(0)?
        };
        let bytes = cx.call_count(kernels::onnxc_string_normalize_bytes, (params, Ptr(stop), Ptr(x), I64(n)))?;
        let buf = cx.alloc_scratch(bytes)?;
        cx.call_checked(kernels::onnxc_string_normalize, (params, Ptr(stop), Ptr(x), I64(n), Ptr(y), Ptr(buf)))
    }
}

pub fn import_normalizer(cx: &mut NodeImport) -> Result<Op, String> {
    let case_change = match cx.attrs.string_or("case_change_action", "NONE")?.as_str() {
        "NONE" => CASE_NONE,
        "LOWER" => CASE_LOWER,
        "UPPER" => CASE_UPPER,
        other => return Err(format!("attribute \"case_change_action\" is {other:?}, expected NONE, LOWER or UPPER")),
    };
    let case_sensitive = cx.attrs.int_or("is_case_sensitive", 0)? != 0;
    let stopwords = cx
        .attrs
        .strings("stopwords")?
        .unwrap_or_default()
        .into_iter()
        .map(|w| if case_sensitive { w } else { w.to_lowercase() }.into_bytes())
        .collect();
    Ok(Op::StringNormalizer(StringNormalizer { case_change, case_sensitive, stopwords }))
}

// ---------------------------------------------------------------------------
// StringSplit
// ---------------------------------------------------------------------------

/// StringSplit: each string's substrings along a new last dim, padded with
/// "", and their counts.
#[derive(Clone, Debug)]
pub struct StringSplit {
    /// Empty: split at runs of whitespace.
    pub delimiter: Vec<u8>,
    /// Negative: no limit.
    pub max_splits: i64,
}

impl Operator for StringSplit {
    fn name(&self) -> &'static str {
        "StringSplit"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let shape = string_input(cx, 0)?;
        let mut dims: Vec<Dim> = shape.iter().map(|&d| Dim::Known(d)).collect();
        dims.push(Dim::Dynamic(None));
        Ok(vec![Inferred::data_dependent(DType::String, dims), Inferred::new(DType::I64, shape)])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        // Room for the counts when the node's second output is unused.
        cx.input(0).map_or(0, |x| x.shape.iter().product::<usize>() * 8)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let params = cx.params(&SplitParams { max_splits: self.max_splits })?;
        let delim = cx.data_bytes(&string_list(std::slice::from_ref(&self.delimiter)))?;
        let x = cx.input_ptr(0)?;
        let n = cx.iconst(shape.iter().product::<usize>() as i64);
        let width = cx.call_count(kernels::onnxc_string_split_count, (params, Ptr(delim), Ptr(x), I64(n)))?;
        let mut dims: Vec<Value> = shape.iter().map(|&d| cx.iconst(d as i64)).collect();
        dims.push(width);
        let y = cx.alloc_output(0, &dims)?;
        let lengths = if cx.has_output(1) { cx.output_ptr(1)? } else { cx.scratch_ptr()? };
        cx.call_checked(
            kernels::onnxc_string_split,
            (params, Ptr(delim), Ptr(x), I64(n), Ptr(y), Ptr(lengths), I64(width)),
        )
    }
}

pub fn import_split(cx: &mut NodeImport) -> Result<Op, String> {
    let delimiter = cx.attrs.string("delimiter")?.unwrap_or_default().into_bytes();
    let max_splits = match cx.attrs.int("maxsplit")? {
        None => -1,
        Some(m) if m >= 0 => m,
        Some(m) => return Err(format!("attribute \"maxsplit\" is {m}, expected a non-negative count")),
    };
    Ok(Op::StringSplit(StringSplit { delimiter, max_splits }))
}

// ---------------------------------------------------------------------------
// RegexFullMatch
// ---------------------------------------------------------------------------

/// RegexFullMatch: whether each whole string matches `pattern` (RE2
/// syntax), through a DFA built at import.
#[derive(Clone, Debug)]
pub struct RegexFullMatch {
    /// The table `onnxc_regex_full_match` walks.
    pub table: Vec<u8>,
}

impl Operator for RegexFullMatch {
    fn name(&self) -> &'static str {
        "RegexFullMatch"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Ok(vec![Inferred::new(DType::Bool, string_input(cx, 0)?)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let table = cx.data_bytes(&self.table)?;
        let x = cx.input_ptr(0)?;
        let y = cx.output_ptr(0)?;
        let n = cx.iconst(shape.iter().product::<usize>() as i64);
        cx.call_checked(kernels::onnxc_regex_full_match, (Ptr(table), Ptr(x), Ptr(y), I64(n)))
    }
}

pub fn import_regex(cx: &mut NodeImport) -> Result<Op, String> {
    let pattern = cx.attrs.string("pattern")?.ok_or("attribute \"pattern\" is required")?;
    let dfa = regex::compile(&pattern).map_err(|e| format!("attribute \"pattern\" ({pattern:?}): {e}"))?;
    Ok(Op::RegexFullMatch(RegexFullMatch { table: dfa.table() }))
}

// ---------------------------------------------------------------------------
// TfIdfVectorizer
// ---------------------------------------------------------------------------

/// TfIdfVectorizer over integer tokens: n-gram counts per row, weighted.
#[derive(Clone, Debug)]
pub struct TfIdfVectorizer {
    pub params: TfIdfParams,
    /// The n-grams the node counts, in the table layout of `onnxc_tfidf`.
    pub table: Vec<i64>,
}

impl Operator for TfIdfVectorizer {
    fn name(&self) -> &'static str {
        "TfIdfVectorizer"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !matches!(x.dtype, DType::I32 | DType::I64) {
            return Err(format!("input 0 is {}; only int32 and int64 tokens are supported yet", x.dtype));
        }
        let out = self.params.out_cols as usize;
        match x.shape {
            [_] => Ok(vec![Inferred::new(DType::F32, vec![out])]),
            [n, _] => Ok(vec![Inferred::new(DType::F32, vec![*n, out])]),
            s => Err(format!("input 0 must be [C] or [N, C], got {s:?}")),
        }
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (rows, cols) = match shape.as_slice() {
            [c] => (1, *c),
            [n, c] => (*n, *c),
            s => return Err(format!("input 0 must be [C] or [N, C], got {s:?}")),
        };
        let p = TfIdfParams { rows: rows as i64, cols: cols as i64, token_bytes: dtype.size() as i64, ..self.params };
        let params = cx.params(&p)?;
        let table: Vec<u8> = self.table.iter().flat_map(|w| w.to_le_bytes()).collect();
        let table = cx.data_bytes(&table)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(kernels::onnxc_tfidf, (params, Ptr(table), Ptr(x), Ptr(y)))
    }
}

pub fn import_tfidf(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let min_n = a.int("min_gram_length")?.ok_or("attribute \"min_gram_length\" is required")?;
    let max_n = a.int("max_gram_length")?.ok_or("attribute \"max_gram_length\" is required")?;
    let max_skip = a.int("max_skip_count")?.ok_or("attribute \"max_skip_count\" is required")?;
    if min_n < 1 || max_n < min_n || max_skip < 0 {
        return Err(format!(
            "attributes min_gram_length {min_n}, max_gram_length {max_n}, max_skip_count {max_skip} are inconsistent"
        ));
    }
    let mode = match a.string("mode")?.ok_or("attribute \"mode\" is required")?.as_str() {
        "TF" => TFIDF_TF,
        "IDF" => TFIDF_IDF,
        "TFIDF" => TFIDF_TFIDF,
        other => return Err(format!("attribute \"mode\" is {other:?}, expected TF, IDF or TFIDF")),
    };
    if a.has("pool_strings") {
        return Err("attribute \"pool_strings\": string tokens are not supported yet (only pool_int64s)".into());
    }
    let pool = a.ints("pool_int64s")?.ok_or("attribute \"pool_int64s\" is required")?;
    let starts = a.ints("ngram_counts")?.ok_or("attribute \"ngram_counts\" is required")?;
    let indexes = a.ints("ngram_indexes")?.ok_or("attribute \"ngram_indexes\" is required")?;
    let weights = a.floats("weights")?;
    if weights.as_ref().is_some_and(|w| w.len() != indexes.len()) {
        return Err("attribute \"weights\" must have one weight per entry of \"ngram_indexes\"".into());
    }
    let mut table = Vec::new();
    let mut gram = 0usize;
    let mut ngrams = 0i64;
    for (k, &start) in starts.iter().enumerate() {
        let n = k + 1;
        let end = starts.get(k + 1).copied().unwrap_or(pool.len() as i64);
        let (start, end) = (usize::try_from(start).ok(), usize::try_from(end).ok());
        let items = match (start, end) {
            (Some(s), Some(e)) if s <= e && e <= pool.len() && (e - s) % n == 0 => &pool[s..e],
            _ => {
                return Err(format!(
                    "attribute \"ngram_counts\" entry {k} does not split \"pool_int64s\" into {n}-grams"
                ))
            }
        };
        for tokens in items.chunks(n) {
            let column = *indexes.get(gram).ok_or("attribute \"ngram_indexes\" has fewer entries than the pool")?;
            if column < 0 {
                return Err(format!("attribute \"ngram_indexes\" has a negative entry {column}"));
            }
            let weight = weights.as_ref().map_or(1.0, |w| w[gram] as f64);
            if (min_n..=max_n).contains(&(n as i64)) {
                table.extend([n as i64, column, weight.to_bits() as i64]);
                table.extend_from_slice(tokens);
                ngrams += 1;
            }
            gram += 1;
        }
    }
    let out_cols = indexes.iter().max().map_or(0, |&m| m + 1);
    let params = TfIdfParams { mode, max_skip, out_cols, ngrams, ..Default::default() };
    Ok(Op::TfIdfVectorizer(TfIdfVectorizer { params, table }))
}
