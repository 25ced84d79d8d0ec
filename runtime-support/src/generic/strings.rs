//! Kernels over string tensors and text features: equality, StringConcat,
//! StringNormalizer, StringSplit, RegexFullMatch and TfIdfVectorizer (over
//! integer tokens).
//!
//! A string element is an [`OnnxString`] record (`onnxc_string`: address
//! and length of UTF-8 bytes). Kernels never allocate: a kernel that makes
//! new bytes comes as a pair, one call that counts what it needs and one
//! that writes into the memory the generated code got for that count from
//! the run-time allocator. Substrings (StringSplit, unchanged strings) are
//! records pointing into the bytes they came from, which live as long as
//! the call (caller's inputs, read-only data or allocator memory).
//!
//! Constant data the compiler prepares is read-only data in two forms:
//! a *string list* (`u64 count`, `count` × `u64 len`, then the bytes back
//! to back; StringNormalizer's stopwords, StringSplit's delimiter), and a
//! *DFA table* (see [`onnxc_regex_full_match`]) built at compile time, so
//! no regular expression is parsed or compiled at run time.

use crate::abi::strings::*;
use crate::abi::{
    ELEM_BOOL, ELEM_F32, ELEM_F64, ELEM_I16, ELEM_I32, ELEM_I64, ELEM_I8, ELEM_U16, ELEM_U32, ELEM_U64, ELEM_U8,
    STATUS_INVALID_PARAMS, STATUS_NOT_A_NUMBER, STATUS_OK,
};
use crate::model::OnnxString;

pub(crate) const INVALID: i64 = -(STATUS_INVALID_PARAMS as i64);

/// The bytes of a record.
///
/// # Safety
/// `s.data` points to `s.len` readable bytes (or `len` is 0).
unsafe fn bytes<'a>(s: OnnxString) -> &'a [u8] {
    if s.len == 0 {
        &[]
    } else {
        core::slice::from_raw_parts(s.data, s.len)
    }
}

/// Element `i` of a record array.
///
/// # Safety
/// `x` holds more than `i` records.
pub(crate) unsafe fn at<'a>(x: *const OnnxString, i: usize) -> &'a [u8] {
    bytes(x.add(i).read())
}

/// A record for `b`.
fn record(b: &[u8]) -> OnnxString {
    OnnxString { data: b.as_ptr(), len: b.len() }
}

/// The entries of a string list (see the module docs), or `None` when it
/// is malformed.
///
/// # Safety
/// `list` points to a well-formed list as far as its own counts say.
unsafe fn list_entry<'a>(list: *const u8, i: usize) -> Option<&'a [u8]> {
    let count = (list as *const u64).read_unaligned() as usize;
    if i >= count {
        return None;
    }
    let lens = list.add(8) as *const u64;
    let start: usize = (0..i).map(|k| lens.add(k).read_unaligned() as usize).sum();
    let len = lens.add(i).read_unaligned() as usize;
    Some(core::slice::from_raw_parts(list.add(8 + 8 * count + start), len))
}

/// # Safety
/// As [`list_entry`].
unsafe fn list_len(list: *const u8) -> usize {
    (list as *const u64).read_unaligned() as usize
}

// ---------------------------------------------------------------------------
// Equal
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// StringConcat
// ---------------------------------------------------------------------------

/// Does the work of the C entry point [`crate::abi::onnxc_string_concat`].
pub(crate) unsafe fn string_concat(
    a: *const OnnxString,
    b: *const OnnxString,
    y: *mut OnnxString,
    n: i64,
    buf: *mut u8,
) -> i32 {
    let mut out = buf;
    for i in 0..n.max(0) as usize {
        let (x, z) = (at(a, i), at(b, i));
        let start = out;
        for part in [x, z] {
            core::ptr::copy_nonoverlapping(part.as_ptr(), out, part.len());
            out = out.add(part.len());
        }
        y.add(i).write(OnnxString { data: start, len: x.len() + z.len() });
    }
    STATUS_OK
}

// ---------------------------------------------------------------------------
// StringNormalizer
// ---------------------------------------------------------------------------

/// Calls `emit` with the pieces of `s` changed to `case` (valid UTF-8 is
/// mapped char by char with `core`'s Unicode case mapping; invalid UTF-8
/// stays as it is).
fn with_case(s: &[u8], case: i64, mut emit: impl FnMut(&[u8])) {
    let text = match (case, core::str::from_utf8(s)) {
        (CASE_LOWER | CASE_UPPER, Ok(text)) => text,
        _ => return emit(s),
    };
    let mut utf8 = [0u8; 4];
    for c in text.chars() {
        let mut push = |m: char| emit(m.encode_utf8(&mut utf8).as_bytes());
        if case == CASE_LOWER {
            c.to_lowercase().for_each(&mut push);
        } else {
            c.to_uppercase().for_each(&mut push);
        }
    }
}

/// True when `s` equals `word`; when not case-sensitive, when `s`
/// lower-cased equals `word` (which the compiler lower-cased).
fn same_word(s: &[u8], word: &[u8], case_sensitive: bool) -> bool {
    if case_sensitive {
        return s == word;
    }
    // Compare the lower-cased bytes piece by piece, without storing them.
    let (mut ok, mut at) = (true, 0usize);
    with_case(s, CASE_LOWER, |piece| {
        ok &= word.get(at..at + piece.len()) == Some(piece);
        at += piece.len();
    });
    ok && at == word.len()
}

/// # Safety
/// `stop` is a valid string list.
unsafe fn is_stopword(p: &NormalizerParams, stop: *const u8, s: &[u8]) -> bool {
    (0..list_len(stop)).filter_map(|k| list_entry(stop, k)).any(|w| same_word(s, w, p.case_sensitive != 0))
}

/// Does the work of the C entry point [`crate::abi::onnxc_string_normalize_count`].
pub(crate) unsafe fn string_normalize_count(
    p: *const NormalizerParams,
    stop: *const u8,
    x: *const OnnxString,
    n: i64,
) -> i64 {
    let Some(p) = p.as_ref() else {
        return INVALID;
    };
    let kept = (0..n.max(0) as usize).filter(|&i| !is_stopword(p, stop, at(x, i))).count();
    kept.max(p.empty_as_one.clamp(0, 1) as usize) as i64
}

/// Does the work of the C entry point [`crate::abi::onnxc_string_normalize_bytes`].
pub(crate) unsafe fn string_normalize_bytes(
    p: *const NormalizerParams,
    stop: *const u8,
    x: *const OnnxString,
    n: i64,
) -> i64 {
    let Some(p) = p.as_ref() else {
        return INVALID;
    };
    let mut total = 0usize;
    for i in 0..n.max(0) as usize {
        let s = at(x, i);
        if !is_stopword(p, stop, s) {
            with_case(s, p.case_change, |piece| total = total.saturating_add(piece.len()));
        }
    }
    i64::try_from(total).unwrap_or(INVALID)
}

/// Does the work of the C entry point [`crate::abi::onnxc_string_normalize`].
pub(crate) unsafe fn string_normalize(
    p: *const NormalizerParams,
    stop: *const u8,
    x: *const OnnxString,
    n: i64,
    y: *mut OnnxString,
    buf: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let (mut out, mut kept) = (buf, 0usize);
    for i in 0..n.max(0) as usize {
        let s = at(x, i);
        if is_stopword(p, stop, s) {
            continue;
        }
        let start = out;
        with_case(s, p.case_change, |piece| {
            core::ptr::copy_nonoverlapping(piece.as_ptr(), out, piece.len());
            out = out.add(piece.len());
        });
        y.add(kept).write(OnnxString { data: start, len: out.offset_from(start) as usize });
        kept += 1;
    }
    if kept == 0 && p.empty_as_one != 0 {
        y.write(record(&[]));
    }
    STATUS_OK
}

// ---------------------------------------------------------------------------
// StringSplit
// ---------------------------------------------------------------------------

/// Python's `str.split` whitespace (ASCII part).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f)
}

/// Calls `emit` with each substring of `s` split at `delim` (or, when it
/// is empty, at runs of whitespace, ignoring leading and trailing ones),
/// making at most `max_splits` splits (negative: no limit), like Python's
/// `str.split`.
fn split(s: &[u8], delim: &[u8], max_splits: i64, mut emit: impl FnMut(&[u8])) {
    let mut splits = 0i64;
    let can_split = |splits: i64| max_splits < 0 || splits < max_splits;
    if delim.is_empty() {
        let mut i = 0;
        loop {
            while i < s.len() && is_space(s[i]) {
                i += 1;
            }
            if i == s.len() {
                return;
            }
            if !can_split(splits) {
                return emit(&s[i..]);
            }
            let start = i;
            while i < s.len() && !is_space(s[i]) {
                i += 1;
            }
            emit(&s[start..i]);
            splits += 1;
        }
    }
    let mut start = 0;
    let mut i = 0;
    while i + delim.len() <= s.len() && can_split(splits) {
        if &s[i..i + delim.len()] == delim {
            emit(&s[start..i]);
            splits += 1;
            i += delim.len();
            start = i;
        } else {
            i += 1;
        }
    }
    emit(&s[start..]);
}

/// Does the work of the C entry point [`crate::abi::onnxc_string_split_count`].
pub(crate) unsafe fn string_split_count(p: *const SplitParams, delim: *const u8, x: *const OnnxString, n: i64) -> i64 {
    let (Some(p), Some(delim)) = (p.as_ref(), list_entry(delim, 0)) else {
        return INVALID;
    };
    let mut most = 0i64;
    for i in 0..n.max(0) as usize {
        let mut count = 0i64;
        split(at(x, i), delim, p.max_splits, |_| count += 1);
        most = most.max(count);
    }
    most
}

/// Does the work of the C entry point [`crate::abi::onnxc_string_split`].
pub(crate) unsafe fn string_split(
    p: *const SplitParams,
    delim: *const u8,
    x: *const OnnxString,
    n: i64,
    y: *mut OnnxString,
    lengths: *mut i64,
    width: i64,
) -> i32 {
    let (Some(p), Some(delim)) = (p.as_ref(), list_entry(delim, 0)) else {
        return STATUS_INVALID_PARAMS;
    };
    let width = width.max(0) as usize;
    for i in 0..n.max(0) as usize {
        let row = y.add(i * width);
        let mut count = 0usize;
        split(at(x, i), delim, p.max_splits, |piece| {
            if count < width {
                row.add(count).write(record(piece));
            }
            count += 1;
        });
        if count > width {
            return STATUS_INVALID_PARAMS;
        }
        for k in count..width {
            row.add(k).write(record(&[]));
        }
        *lengths.add(i) = count as i64;
    }
    STATUS_OK
}

// ---------------------------------------------------------------------------
// RegexFullMatch
// ---------------------------------------------------------------------------

/// Words before the class map in a DFA table.
pub const DFA_HEADER_WORDS: usize = 3;

/// Does the work of the C entry point [`crate::abi::onnxc_regex_full_match`].
pub(crate) unsafe fn regex_full_match(table: *const u32, x: *const OnnxString, y: *mut u8, n: i64) -> i32 {
    let word = |i: usize| table.add(i).read_unaligned();
    let (states, classes, start) = (word(0) as usize, word(1) as usize, word(2) as usize);
    if states == 0 || classes == 0 || start >= states {
        return STATUS_INVALID_PARAMS;
    }
    let class_map = DFA_HEADER_WORDS;
    let transitions = class_map + 256;
    let accepting = transitions + states * classes;
    for i in 0..n.max(0) as usize {
        let mut state = start;
        for &b in at(x, i) {
            let class = word(class_map + b as usize) as usize;
            state = word(transitions + state * classes + class) as usize;
            if state >= states {
                return STATUS_INVALID_PARAMS;
            }
        }
        *y.add(i) = (word(accepting + state) != 0) as u8;
    }
    STATUS_OK
}

// ---------------------------------------------------------------------------
// TfIdfVectorizer
// ---------------------------------------------------------------------------

/// Does the work of the C entry point [`crate::abi::onnxc_tfidf`].
pub(crate) unsafe fn tfidf(p: *const TfIdfParams, table: *const i64, x: *const u8, y: *mut f32) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if p.rows < 0 || p.cols < 0 || p.out_cols < 0 || p.max_skip < 0 || p.ngrams < 0 || !matches!(p.token_bytes, 4 | 8) {
        return STATUS_INVALID_PARAMS;
    }
    let (rows, cols, out_cols) = (p.rows as usize, p.cols as usize, p.out_cols as usize);
    let token = |i: usize| -> i64 {
        if p.token_bytes == 4 {
            (x as *const i32).add(i).read_unaligned() as i64
        } else {
            (x as *const i64).add(i).read_unaligned()
        }
    };
    for r in 0..rows {
        let row = y.add(r * out_cols);
        for c in 0..out_cols {
            *row.add(c) = 0.0;
        }
        let mut entry = table;
        for _ in 0..p.ngrams {
            let (n, column, weight) = (*entry, *entry.add(1), f64::from_bits(*entry.add(2) as u64));
            let Some(n) = usize::try_from(n).ok().filter(|&n| n > 0) else {
                return STATUS_INVALID_PARAMS;
            };
            let Some(column) = usize::try_from(column).ok().filter(|&c| c < out_cols) else {
                return STATUS_INVALID_PARAMS;
            };
            let grams = entry.add(3);
            let skips = if n == 1 { 0 } else { p.max_skip as usize };
            let mut count = 0usize;
            for skip in 0..=skips {
                let span = (n - 1) * (skip + 1);
                for start in (0..cols).take_while(|&s| s + span < cols) {
                    if (0..n).all(|j| token(r * cols + start + j * (skip + 1)) == *grams.add(j)) {
                        count += 1;
                    }
                }
            }
            let value = match p.mode {
                TFIDF_TF => count as f64,
                TFIDF_IDF => (count > 0) as u8 as f64 * weight,
                TFIDF_TFIDF => count as f64 * weight,
                _ => return STATUS_INVALID_PARAMS,
            };
            *row.add(column) += value as f32;
            entry = grams.add(n);
        }
    }
    STATUS_OK
}

// ---------------------------------------------------------------------------
// Cast to and from string
// ---------------------------------------------------------------------------

/// Bytes each element of [`onnxc_cast_to_string`] may take in its buffer
/// (the longest f64 text, `-2.2250738585072014e-308`, is 24).
pub const NUMBER_TEXT_BYTES: usize = 32;

/// `core::fmt` into a fixed buffer (which is always large enough).
struct Text<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl core::fmt::Write for Text<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        self.buf.get_mut(self.len..end).ok_or(core::fmt::Error)?.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A float as numpy's `astype(str)` (the ONNX reference) writes it: the
/// shortest digits that read back as the same value of its type,
/// positional when `1e-4 <= |v| < positional_below` (1e6 for f32, 1e16 for
/// f64: `1.0`, `0.0001`), else scientific with a signed exponent of at
/// least two digits (`1e-07`, `1.5e+16`); `nan`, `inf`, `-inf`.
fn write_float(out: &mut Text, shortest_exp: core::fmt::Arguments, v: f64, positional_below: f64) -> core::fmt::Result {
    use core::fmt::Write;
    if v.is_nan() {
        return out.write_str("nan");
    }
    if v.is_infinite() {
        return out.write_str(if v < 0.0 { "-inf" } else { "inf" });
    }
    // `{:e}` gives the shortest round-trip digits: `-1.2345e-7`.
    let mut sci = [0u8; NUMBER_TEXT_BYTES];
    let mut t = Text { buf: &mut sci, len: 0 };
    t.write_fmt(shortest_exp)?;
    let len = t.len;
    let text = core::str::from_utf8(&sci[..len]).map_err(|_| core::fmt::Error)?;
    let (mantissa, exp) = text.split_once('e').ok_or(core::fmt::Error)?;
    let exp: i32 = exp.parse().map_err(|_| core::fmt::Error)?;
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    // The mantissa's digits without its point (fewer than the buffer holds).
    let mut digit_buf = [0u8; NUMBER_TEXT_BYTES];
    let mut count = 0;
    for (slot, b) in digit_buf.iter_mut().zip(mantissa.bytes().filter(u8::is_ascii_digit)) {
        *slot = b;
        count += 1;
    }
    let digits = core::str::from_utf8(&digit_buf[..count]).map_err(|_| core::fmt::Error)?;
    out.write_str(sign)?;
    let abs = v.abs();
    if abs == 0.0 || (1e-4..positional_below).contains(&abs) {
        if exp < 0 {
            out.write_str("0.")?;
            for _ in 0..(-exp - 1) {
                out.write_str("0")?;
            }
            return out.write_str(digits);
        }
        let point = exp as usize + 1;
        if digits.len() <= point {
            out.write_str(digits)?;
            for _ in digits.len()..point {
                out.write_str("0")?;
            }
            return out.write_str(".0");
        }
        out.write_str(&digits[..point])?;
        out.write_str(".")?;
        return out.write_str(&digits[point..]);
    }
    out.write_str(&digits[..1])?;
    if digits.len() > 1 {
        out.write_str(".")?;
        out.write_str(&digits[1..])?;
    }
    write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
}

/// Writes element `i` of `x` (element code `elem`) as text.
///
/// # Safety
/// `x` holds more than `i` elements of that type.
unsafe fn write_number(out: &mut Text, elem: i64, x: *const u8, i: usize) -> Option<()> {
    use core::fmt::Write;
    let r = match elem {
        ELEM_F32 => {
            let v = (x as *const f32).add(i).read_unaligned();
            write_float(out, format_args!("{v:e}"), v as f64, 1e6)
        }
        ELEM_F64 => {
            let v = (x as *const f64).add(i).read_unaligned();
            write_float(out, format_args!("{v:e}"), v, 1e16)
        }
        ELEM_BOOL => out.write_str(if *x.add(i) != 0 { "True" } else { "False" }),
        ELEM_I8 => write!(out, "{}", *(x as *const i8).add(i)),
        ELEM_U8 => write!(out, "{}", *x.add(i)),
        ELEM_I16 => write!(out, "{}", (x as *const i16).add(i).read_unaligned()),
        ELEM_U16 => write!(out, "{}", (x as *const u16).add(i).read_unaligned()),
        ELEM_I32 => write!(out, "{}", (x as *const i32).add(i).read_unaligned()),
        ELEM_U32 => write!(out, "{}", (x as *const u32).add(i).read_unaligned()),
        ELEM_I64 => write!(out, "{}", (x as *const i64).add(i).read_unaligned()),
        ELEM_U64 => write!(out, "{}", (x as *const u64).add(i).read_unaligned()),
        _ => return None,
    };
    r.ok()
}

/// Does the work of the C entry point [`crate::abi::onnxc_cast_to_string`].
pub(crate) unsafe fn cast_to_string(elem: i64, x: *const u8, n: i64, y: *mut OnnxString, buf: *mut u8) -> i32 {
    for i in 0..n.max(0) as usize {
        let slot = core::slice::from_raw_parts_mut(buf.add(i * NUMBER_TEXT_BYTES), NUMBER_TEXT_BYTES);
        let mut out = Text { buf: slot, len: 0 };
        if write_number(&mut out, elem, x, i).is_none() {
            return STATUS_INVALID_PARAMS;
        }
        y.add(i).write(OnnxString { data: buf.add(i * NUMBER_TEXT_BYTES), len: out.len });
    }
    STATUS_OK
}

/// Parses `s` (ASCII whitespace around it ignored) as element code `elem`
/// and stores it at `y`; `None` when it is not such a number.
///
/// # Safety
/// `y` has room for one element of that type.
unsafe fn store_parsed(elem: i64, s: &[u8], y: *mut u8) -> Option<()> {
    let text = core::str::from_utf8(s).ok()?.trim_matches(|c: char| c.is_ascii_whitespace());
    macro_rules! int {
        ($t:ty) => {
            (y as *mut $t).write_unaligned(text.strip_prefix('+').unwrap_or(text).parse::<$t>().ok()?)
        };
    }
    match elem {
        // Rust's float syntax: digits, `inf`, `infinity`, `nan` (any case).
        ELEM_F32 => (y as *mut f32).write_unaligned(text.parse().ok()?),
        ELEM_F64 => (y as *mut f64).write_unaligned(text.parse().ok()?),
        ELEM_I8 => int!(i8),
        ELEM_U8 => int!(u8),
        ELEM_I16 => int!(i16),
        ELEM_U16 => int!(u16),
        ELEM_I32 => int!(i32),
        ELEM_U32 => int!(u32),
        ELEM_I64 => int!(i64),
        ELEM_U64 => int!(u64),
        _ => return None,
    }
    Some(())
}

/// Does the work of the C entry point [`crate::abi::onnxc_cast_from_string`].
pub(crate) unsafe fn cast_from_string(elem: i64, x: *const OnnxString, n: i64, y: *mut u8) -> i32 {
    let size = match elem {
        ELEM_I8 | ELEM_U8 => 1,
        ELEM_I16 | ELEM_U16 => 2,
        ELEM_I32 | ELEM_U32 | ELEM_F32 => 4,
        ELEM_I64 | ELEM_U64 | ELEM_F64 => 8,
        _ => return STATUS_INVALID_PARAMS,
    };
    for i in 0..n.max(0) as usize {
        if store_parsed(elem, at(x, i), y.add(i * size)).is_none() {
            return STATUS_NOT_A_NUMBER;
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(s: &str, delim: &str, max: i64) -> [usize; 2] {
        let mut count = 0;
        let mut total = 0;
        split(s.as_bytes(), delim.as_bytes(), max, |p| {
            count += 1;
            total += p.len();
        });
        [count, total]
    }

    #[test]
    fn split_follows_python() {
        assert_eq!(pieces("o-n-n--x-", "-", -1), [6, 4]);
        assert_eq!(pieces("  hello   world !", "", -1), [3, 11]);
        assert_eq!(pieces("the quick brown fox", "", 2), [3, 17]);
        assert_eq!(pieces("", "", -1), [0, 0]);
        assert_eq!(pieces("", ".", -1), [1, 0]);
    }

    /// Element 0 of `bytes` as text, compared with `want`.
    fn text_is(elem: i64, bytes: &[u8], want: &str) {
        let mut buf = [0u8; NUMBER_TEXT_BYTES];
        let mut out = Text { buf: &mut buf, len: 0 };
        // SAFETY: `bytes` holds one element of type `elem`.
        unsafe { write_number(&mut out, elem, bytes.as_ptr(), 0) }.expect("a number");
        let len = out.len;
        assert_eq!(core::str::from_utf8(&buf[..len]), Ok(want));
    }

    #[test]
    fn numbers_print_like_numpy() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e-7, "1e-07"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "1e-04"), // below 1e-4 once widened to f64
            (0.00012, "0.00012"),
            (999999.94, "999999.94"),
            (1e6, "1e+06"),
            (123456790.0, "1.2345679e+08"),
            (f32::NAN, "nan"),
            (f32::NEG_INFINITY, "-inf"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
        ];
        for (v, want) in cases {
            text_is(ELEM_F32, &f32::to_le_bytes(v), want);
        }
        text_is(ELEM_F64, &0.1f64.to_le_bytes(), "0.1");
        text_is(ELEM_F64, &16777217.0f64.to_le_bytes(), "16777217.0");
        text_is(ELEM_F64, &1e16f64.to_le_bytes(), "1e+16");
        text_is(ELEM_F64, &f64::MIN_POSITIVE.to_le_bytes(), "2.2250738585072014e-308");
        text_is(ELEM_I64, &i64::MIN.to_le_bytes(), "-9223372036854775808");
        text_is(ELEM_BOOL, &[1], "True");
    }

    #[test]
    fn strings_parse_to_numbers() {
        let parse = |elem: i64, s: &str| -> Option<[u8; 8]> {
            let mut y = [0u8; 8];
            // SAFETY: `y` holds any one element.
            unsafe { store_parsed(elem, s.as_bytes(), y.as_mut_ptr()) }.map(|_| y)
        };
        assert_eq!(parse(ELEM_F32, " 1.5 ").map(|y| f32::from_le_bytes([y[0], y[1], y[2], y[3]])), Some(1.5));
        assert!(parse(ELEM_F32, "NaN").is_some_and(|y| f32::from_le_bytes([y[0], y[1], y[2], y[3]]).is_nan()));
        assert_eq!(parse(ELEM_F64, "-INF").map(f64::from_le_bytes), Some(f64::NEG_INFINITY));
        assert_eq!(parse(ELEM_I8, "-128").map(|y| y[0] as i8), Some(-128));
        assert!(parse(ELEM_I8, "128").is_none());
        assert!(parse(ELEM_I32, "1.5").is_none());
        assert!(parse(ELEM_F32, "abc").is_none());
    }

    #[test]
    fn case_insensitive_stopwords() {
        assert!(same_word("Monday".as_bytes(), b"monday", false));
        assert!(!same_word("Monday".as_bytes(), b"monday", true));
        assert!(!same_word("Mondays".as_bytes(), b"monday", false));
    }
}
