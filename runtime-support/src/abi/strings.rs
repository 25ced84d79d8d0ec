//! The C entry points and parameter structs of [`crate::generic::strings`].

use crate::abi::STATUS_OK;
use crate::generic::strings::*;
use crate::model::OnnxString;

/// `y[i] = a[i] == b[i]` (bytewise) for `n` elements.
///
/// # Safety
/// `a` and `b` hold `n` valid records, `y` has room for `n` bools.
#[no_mangle]
pub unsafe extern "C" fn onnxc_string_equal(a: *const OnnxString, b: *const OnnxString, y: *mut u8, n: i64) -> i32 {
    for i in 0..n.max(0) as usize {
        *y.add(i) = (at(a, i) == at(b, i)) as u8;
    }
    STATUS_OK
}

/// Bytes [`onnxc_string_concat`] writes for `n` pairs.
///
/// # Safety
/// `a` and `b` hold `n` valid records.
#[no_mangle]
pub unsafe extern "C" fn onnxc_string_concat_bytes(a: *const OnnxString, b: *const OnnxString, n: i64) -> i64 {
    let total = (0..n.max(0) as usize).try_fold(0usize, |t, i| t.checked_add(at(a, i).len() + at(b, i).len()));
    total.and_then(|t| i64::try_from(t).ok()).unwrap_or(INVALID)
}

/// `y[i] = a[i] + b[i]`, the bytes written to `buf` (as many as
/// [`onnxc_string_concat_bytes`] said).
///
/// # Safety
/// `a` and `b` hold `n` valid records, `y` has room for `n` records, `buf`
/// for the counted bytes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_string_concat(
    a: *const OnnxString,
    b: *const OnnxString,
    y: *mut OnnxString,
    n: i64,
    buf: *mut u8,
) -> i32 {
    string_concat(a, b, y, n, buf)
}

pub const CASE_NONE: i64 = 0;
pub const CASE_LOWER: i64 = 1;
pub const CASE_UPPER: i64 = 2;

/// Parameters of the StringNormalizer kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NormalizerParams {
    /// [`CASE_NONE`], [`CASE_LOWER`] or [`CASE_UPPER`].
    pub case_change: i64,
    /// 1: stopwords match exactly; 0: after lower-casing both sides.
    pub case_sensitive: i64,
    /// 1: when every string is a stopword the output is one empty string
    /// (the output length is data-dependent); 0: nothing is removed.
    pub empty_as_one: i64,
}

/// How many of the `n` strings of `x` StringNormalizer keeps (at least 1
/// with `empty_as_one`: when it removes them all, the output is one empty
/// string).
///
/// # Safety
/// `p` is valid, `stop` a valid string list, `x` holds `n` records.
#[no_mangle]
pub unsafe extern "C" fn onnxc_string_normalize_count(
    p: *const NormalizerParams,
    stop: *const u8,
    x: *const OnnxString,
    n: i64,
) -> i64 {
    string_normalize_count(p, stop, x, n)
}

/// Bytes [`onnxc_string_normalize`] writes.
///
/// # Safety
/// As [`onnxc_string_normalize_count`].
#[no_mangle]
pub unsafe extern "C" fn onnxc_string_normalize_bytes(
    p: *const NormalizerParams,
    stop: *const u8,
    x: *const OnnxString,
    n: i64,
) -> i64 {
    string_normalize_bytes(p, stop, x, n)
}

/// The kept strings of `x`, case-changed into `buf`, as records in `y`
/// (one empty string when none is kept).
///
/// # Safety
/// As [`onnxc_string_normalize_count`]; `y` has room for the counted
/// records and `buf` for the counted bytes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_string_normalize(
    p: *const NormalizerParams,
    stop: *const u8,
    x: *const OnnxString,
    n: i64,
    y: *mut OnnxString,
    buf: *mut u8,
) -> i32 {
    string_normalize(p, stop, x, n, y, buf)
}

/// Parameters of the StringSplit kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SplitParams {
    /// Most splits per string; negative: no limit.
    pub max_splits: i64,
}

/// The largest number of substrings any of the `n` strings of `x` splits
/// into (the output's last dim).
///
/// # Safety
/// `p` is valid, `delim` a string list of one entry, `x` holds `n` records.
#[no_mangle]
pub unsafe extern "C" fn onnxc_string_split_count(
    p: *const SplitParams,
    delim: *const u8,
    x: *const OnnxString,
    n: i64,
) -> i64 {
    string_split_count(p, delim, x, n)
}

/// Splits each of the `n` strings of `x` into row `i` of `y` (`width`
/// records, padded with empty strings) and its count into `lengths[i]`.
/// The substrings point into `x`'s bytes.
///
/// # Safety
/// As [`onnxc_string_split_count`]; `width` is at least what it returned,
/// `y` has room for `n * width` records and `lengths` for `n` i64s.
#[no_mangle]
pub unsafe extern "C" fn onnxc_string_split(
    p: *const SplitParams,
    delim: *const u8,
    x: *const OnnxString,
    n: i64,
    y: *mut OnnxString,
    lengths: *mut i64,
    width: i64,
) -> i32 {
    string_split(p, delim, x, n, y, lengths, width)
}

/// Walks the DFA `table` over each of the `n` strings of `x`; `y[i]` is
/// whether it accepts the whole string.
///
/// The table is little-endian u32 words: `states`, `classes`, `start`;
/// 256 words mapping each byte to its class; `states * classes` words of
/// transitions (row per state); `states` words, nonzero where the state
/// accepts at the end of the input. The compiler builds it
/// (`compiler/src/regex.rs`) and folds into each state what the
/// anchors and word boundaries need to know about the previous byte.
///
/// # Safety
/// `table` is a well-formed table whose transitions are below `states`,
/// `x` holds `n` records, `y` has room for `n` bools.
#[no_mangle]
pub unsafe extern "C" fn onnxc_regex_full_match(table: *const u32, x: *const OnnxString, y: *mut u8, n: i64) -> i32 {
    regex_full_match(table, x, y, n)
}

pub const TFIDF_TF: i64 = 0;
pub const TFIDF_IDF: i64 = 1;
pub const TFIDF_TFIDF: i64 = 2;

/// Parameters of [`onnxc_tfidf`]. The n-gram table is i64 words, per
/// n-gram: `n`, its output column, its weight (f64 bits), then its `n`
/// tokens; the compiler keeps only n-grams with `n` in the node's
/// `[min_gram_length, max_gram_length]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TfIdfParams {
    /// [`TFIDF_TF`], [`TFIDF_IDF`] or [`TFIDF_TFIDF`].
    pub mode: i64,
    pub max_skip: i64,
    /// Input rows (1 for a 1-D input) and tokens per row.
    pub rows: i64,
    pub cols: i64,
    /// Output columns.
    pub out_cols: i64,
    /// 4 (i32 tokens) or 8 (i64 tokens).
    pub token_bytes: i64,
    /// Number of n-grams in the table.
    pub ngrams: i64,
}

/// TfIdfVectorizer: counts, in each row of `x`, every n-gram of the table
/// with every skip distance in `0..=max_skip` (once for unigrams), and
/// writes the weighted counts to the `[rows, out_cols]` f32 tensor `y`.
///
/// # Safety
/// `p` is valid, `table` holds the n-grams it counts, `x` holds
/// `rows * cols` tokens, `y` has room for `rows * out_cols` f32s.
#[no_mangle]
pub unsafe extern "C" fn onnxc_tfidf(p: *const TfIdfParams, table: *const i64, x: *const u8, y: *mut f32) -> i32 {
    tfidf(p, table, x, y)
}

/// Cast to string: `y[i]` is element `i` of `x` (element code `elem`:
/// bool, integers, f32, f64) as text, written to `buf`, which has
/// [`NUMBER_TEXT_BYTES`] per element.
///
/// # Safety
/// `x` holds `n` elements, `y` has room for `n` records, `buf` for
/// `n * NUMBER_TEXT_BYTES` bytes.
#[no_mangle]
pub unsafe extern "C" fn onnxc_cast_to_string(
    elem: i64,
    x: *const u8,
    n: i64,
    y: *mut OnnxString,
    buf: *mut u8,
) -> i32 {
    cast_to_string(elem, x, n, y, buf)
}

/// Cast from string: parses each of the `n` strings of `x` as element code
/// `elem` (integers, f32, f64) into `y`; [`crate::abi::STATUS_NOT_A_NUMBER`] when one
/// is not a number of that type (out of range included).
///
/// # Safety
/// `x` holds `n` records, `y` has room for `n` elements of that type.
#[no_mangle]
pub unsafe extern "C" fn onnxc_cast_from_string(elem: i64, x: *const OnnxString, n: i64, y: *mut u8) -> i32 {
    cast_from_string(elem, x, n, y)
}
