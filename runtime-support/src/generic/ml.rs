//! ai.onnx.ml kernels besides the tree walk (`tree.rs`) and the SVMs
//! (`svm.rs`): keyed lookups (LabelEncoder, CategoryMapper, OneHotEncoder),
//! linear models, the classifiers' last step (base values, binary cases,
//! post transform, winning class), class labels, and the per-feature
//! transforms Scaler, Normalizer, Imputer and FeatureVectorizer.
//!
//! Lookups never scan: the compiler sorts the keys at compile time and the
//! kernel binary-searches them (numbers as i64 or f64, strings bytewise,
//! with a NaN key kept apart since it has no place in an order). Strings
//! the compiler prepares are [`StringRef`]s into one byte blob; a string
//! output is a record pointing into that blob, which is read-only data.
//!
//! Numbers are read whatever their input type (f32, f64, i32, i64) and
//! computed in f64; score outputs are f32, as ONNX Runtime gives them.
//! The classifier rules for two classes follow ONNX Runtime's, which the
//! spec leaves open: see [`onnxc_ml_classify`].

use super::convert::load_float;
use super::tree::post_transform;
use crate::abi::ml::*;
use crate::abi::tree::{POST_LOGISTIC, POST_PROBIT};
use crate::abi::{
    ELEM_F16, ELEM_F32, ELEM_F64, ELEM_I16, ELEM_I32, ELEM_I64, STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS,
    STATUS_OK,
};
use crate::model::OnnxString;

/// The sorted keys of one lookup, borrowed from the kernel's arguments.
struct Keys<'a> {
    p: &'a LookupParams,
    table: *const u8,
    blob: &'a [u8],
}

impl Keys<'_> {
    unsafe fn new<'a>(p: &'a LookupParams, table: *const u8, blob: *const u8) -> Option<Keys<'a>> {
        if p.count < 0 || p.keys < 0 || p.key_blob < 0 || p.nan_entry != -1 && p.nan_entry != p.keys {
            return None;
        }
        let keys = Keys { p, table, blob: slice(blob, p.key_blob) };
        if p.key_kind == KEY_STRING {
            let refs = slice(table as *const StringRef, p.keys);
            if refs.iter().any(|r| string_at(keys.blob, *r).is_none()) {
                return None;
            }
        }
        Some(keys)
    }

    /// The entry of element `i` of `x`, `None` when it is not a key.
    unsafe fn find(&self, x: *const u8, i: usize) -> Option<usize> {
        let n = self.p.keys;
        match self.p.key_kind {
            KEY_INT => {
                let v = match self.p.x_elem {
                    ELEM_I16 => *(x as *const i16).add(i) as i64,
                    ELEM_I32 => *(x as *const i32).add(i) as i64,
                    _ => *(x as *const i64).add(i),
                };
                slice(self.table as *const i64, n).binary_search(&v).ok()
            }
            KEY_FLOAT => {
                let v = load_float(x, self.p.x_elem, i as isize);
                if v.is_nan() {
                    return usize::try_from(self.p.nan_entry).ok();
                }
                let keys = slice(self.table as *const f64, n);
                keys.binary_search_by(|k| k.partial_cmp(&v).unwrap_or(core::cmp::Ordering::Less)).ok()
            }
            _ => {
                let s = (x as *const OnnxString).add(i).read();
                let v = if s.len == 0 { &[][..] } else { core::slice::from_raw_parts(s.data, s.len) };
                let keys = slice(self.table as *const StringRef, n);
                keys.binary_search_by(|k| string_at(self.blob, *k).unwrap_or(&[]).cmp(v)).ok()
            }
        }
    }
}

fn string_at(blob: &[u8], r: StringRef) -> Option<&[u8]> {
    let start = usize::try_from(r.offset).ok()?;
    blob.get(start..start.checked_add(usize::try_from(r.len).ok()?)?)
}

pub(crate) unsafe fn slice<'a, E>(ptr: *const E, len: i64) -> &'a [E] {
    if len <= 0 || ptr.is_null() {
        &[]
    } else {
        core::slice::from_raw_parts(ptr, len as usize)
    }
}

/// Element `i` of a number tensor of code `elem`, as f64.
pub(crate) unsafe fn load_number(x: *const u8, elem: i64, i: usize) -> f64 {
    match elem {
        ELEM_I64 => *(x as *const i64).add(i) as f64,
        ELEM_I32 => *(x as *const i32).add(i) as f64,
        ELEM_F16 | ELEM_F32 | ELEM_F64 => load_float(x, elem, i as isize),
        _ => f64::NAN,
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_label_encode`].
pub(crate) unsafe fn label_encode(
    p: *const LabelEncodeParams,
    keys: *const u8,
    key_blob: *const u8,
    values: *const u8,
    value_blob: *const u8,
    x: *const u8,
    y: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    let Some(lookup) = Keys::new(&p.lookup, keys, key_blob) else { return STATUS_INVALID_PARAMS };
    // The sorted keys, the NaN key if there is one, then the default.
    let entries = p.lookup.keys as usize + (p.lookup.nan_entry >= 0) as usize + 1;
    let blob = slice(value_blob, p.value_blob);
    if p.value_kind == VALUE_STRING {
        let refs = slice(values as *const StringRef, entries as i64);
        if refs.len() != entries || refs.iter().any(|r| string_at(blob, *r).is_none()) {
            return STATUS_INVALID_PARAMS;
        }
        for i in 0..p.lookup.count as usize {
            let r = refs[lookup.find(x, i).unwrap_or(entries - 1)];
            let s = string_at(blob, r).unwrap_or(&[]);
            (y as *mut OnnxString).add(i).write(OnnxString { data: s.as_ptr(), len: s.len() });
        }
        return STATUS_OK;
    }
    let size = match usize::try_from(p.value_size) {
        Ok(s @ 1..=8) => s,
        _ => return STATUS_INVALID_PARAMS,
    };
    for i in 0..p.lookup.count as usize {
        let entry = lookup.find(x, i).unwrap_or(entries - 1);
        core::ptr::copy_nonoverlapping(values.add(entry * size), y.add(i * size), size);
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_ml_one_hot`].
pub(crate) unsafe fn ml_one_hot(
    p: *const CategoryOneHotParams,
    keys: *const u8,
    key_blob: *const u8,
    positions: *const i64,
    x: *const u8,
    y: *mut f32,
) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    let Some(lookup) = Keys::new(&p.lookup, keys, key_blob) else { return STATUS_INVALID_PARAMS };
    let width = p.lookup.keys as usize;
    let positions = slice(positions, p.lookup.keys);
    if positions.iter().any(|&k| k < 0 || k as usize >= width) {
        return STATUS_INVALID_PARAMS;
    }
    for i in 0..p.lookup.count as usize {
        let row = core::slice::from_raw_parts_mut(y.add(i * width), width);
        row.fill(0.0);
        match lookup.find(x, i) {
            Some(k) => row[positions[k] as usize] = 1.0,
            None if p.zeros == 0 => return STATUS_INDEX_OUT_OF_RANGE,
            None => {}
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_ml_linear`].
pub(crate) unsafe fn ml_linear(
    p: *const MlLinearParams,
    coefficients: *const f64,
    intercepts: *const f64,
    x: *const u8,
    y: *mut f32,
) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    if p.rows < 0 || p.features < 0 || p.targets < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (features, targets) = (p.features as usize, p.targets as usize);
    let coefficients = slice(coefficients, p.features * p.targets);
    let intercepts = slice(intercepts, p.targets);
    for r in 0..p.rows as usize {
        let row = core::slice::from_raw_parts_mut(y.add(r * targets), targets);
        for (t, out) in row.iter_mut().enumerate() {
            let mut sum = intercepts.get(t).copied().unwrap_or(0.0);
            for f in 0..features {
                sum += load_number(x, p.x_elem, r * features + f) * coefficients[t * features + f];
            }
            *out = sum as f32;
        }
        post_transform(p.post_transform, row);
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_ml_classify`].
pub(crate) unsafe fn ml_classify(
    p: *const ClassifyParams,
    base: *const f64,
    scored: *const i64,
    s: *const f32,
    label: *mut i64,
    z: *mut f32,
) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    if p.rows < 0 || p.classes < 1 || p.base_len < 0 || p.base_len > p.classes {
        return STATUS_INVALID_PARAMS;
    }
    let classes = p.classes as usize;
    let base = slice(base, p.base_len);
    let scored = slice(scored, p.classes);
    let out_cols = if p.mode == CLASSIFY_ARGMAX { classes } else { 2 };
    if p.mode == CLASSIFY_TREE_BINARY && classes != 2 || p.mode == CLASSIFY_LINEAR_BINARY && classes != 1 {
        return STATUS_INVALID_PARAMS;
    }
    for r in 0..p.rows as usize {
        let row = core::slice::from_raw_parts(s.add(r * classes), classes);
        let out = core::slice::from_raw_parts_mut(z.add(r * out_cols), out_cols);
        let winner = match p.mode {
            CLASSIFY_ARGMAX => {
                let mut best: Option<(usize, f32)> = None;
                for (k, (&v, o)) in row.iter().zip(out.iter_mut()).enumerate() {
                    *o = v + base.get(k).copied().unwrap_or(0.0) as f32;
                    let can_win = scored.get(k).is_some_and(|&c| c != 0) || !base.is_empty();
                    if can_win && best.is_none_or(|(_, b)| *o > b) {
                        best = Some((k, *o));
                    }
                }
                post_transform(p.post_transform, out);
                best.map_or(0, |(k, _)| k)
            }
            CLASSIFY_LINEAR_BINARY => {
                // Only LOGISTIC applies to the one score (ONNX Runtime).
                let mut v = [row[0]];
                if p.post_transform == POST_LOGISTIC {
                    post_transform(POST_LOGISTIC, &mut v);
                }
                out.copy_from_slice(&[1.0 - v[0], v[0]]);
                (row[0] > 0.0) as usize
            }
            _ => tree_binary(p, base, row, out),
        };
        *label.add(r) = winner as i64;
    }
    STATUS_OK
}

/// One row of [`CLASSIFY_TREE_BINARY`]; returns the class index.
fn tree_binary(p: &ClassifyParams, base: &[f64], row: &[f32], out: &mut [f32]) -> usize {
    let b = |k: usize| base.get(k).copied().unwrap_or(0.0) as f32;
    let second = p.second_scored != 0;
    let (mut s0, mut s1) = (row[0], row[1]);
    let mut two = second;
    // How the second column is made when one score remains.
    let mut derive = if base.is_empty() { Derive::Negate } else { Derive::None };
    match base.len() {
        2 if second => {
            s1 = b(1) + s0;
            s0 = -s1;
        }
        2 => {
            s0 += b(0);
            s1 += b(1);
            two = true;
        }
        1 => s0 += b(0),
        _ => {}
    }
    let positive = if second { s1 } else { s0 };
    let winner = if p.single_class != 0 {
        let (threshold, on_win) = if p.all_positive != 0 { (0.5, Derive::Complement) } else { (0.0, Derive::Negate) };
        derive = on_win;
        (positive > threshold) as usize
    } else {
        (positive > 0.0) as usize
    };
    if two {
        out.copy_from_slice(&[s0, s1]);
        post_transform(p.post_transform, out);
        return winner;
    }
    out.copy_from_slice(&match (p.post_transform, derive) {
        (POST_PROBIT, _) => {
            let mut v = [s0];
            post_transform(POST_PROBIT, &mut v);
            [v[0], 0.0]
        }
        (_, Derive::Complement) => [1.0 - s0, s0],
        (POST_LOGISTIC, Derive::Negate) => {
            let mut v = [-s0, s0];
            post_transform(POST_LOGISTIC, &mut v);
            v
        }
        (_, Derive::Negate) => [-s0, s0],
        (_, Derive::None) => [s0, 0.0],
    });
    winner
}

#[derive(Clone, Copy)]
enum Derive {
    None,
    Complement,
    Negate,
}

/// Does the work of the C entry point [`crate::abi::onnxc_ml_pick_labels`].
pub(crate) unsafe fn ml_pick_labels(
    p: *const PickLabelsParams,
    index: *const i64,
    ints: *const i64,
    strings: *const StringRef,
    blob: *const u8,
    y: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    if p.count < 0 || p.labels < 0 || p.blob < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let blob = slice(blob, p.blob);
    for i in 0..p.count as usize {
        let k = *index.add(i);
        let Some(k) = usize::try_from(k).ok().filter(|&k| k < p.labels as usize) else {
            return STATUS_INVALID_PARAMS;
        };
        if p.kind == LABELS_STRING {
            let Some(s) = string_at(blob, *strings.add(k)) else { return STATUS_INVALID_PARAMS };
            (y as *mut OnnxString).add(i).write(OnnxString { data: s.as_ptr(), len: s.len() });
        } else {
            *(y as *mut i64).add(i) = *ints.add(k);
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_ml_features`].
pub(crate) unsafe fn ml_features(
    p: *const FeaturesParams,
    a: *const f64,
    b: *const f64,
    x: *const u8,
    y: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    if p.rows < 0 || p.features < 0 || !matches!(p.a_len, 0 | 1) && p.a_len != p.features {
        return STATUS_INVALID_PARAMS;
    }
    if !matches!(p.b_len, 0 | 1) && p.b_len != p.features {
        return STATUS_INVALID_PARAMS;
    }
    let features = p.features as usize;
    let (a, b) = (slice(a, p.a_len), slice(b, p.b_len));
    let per_feature = |t: &[f64], f: usize, default: f64| match t.len() {
        0 => default,
        1 => t[0],
        _ => t[f],
    };
    for r in 0..p.rows as usize {
        let at = |f: usize| load_number(x, p.x_elem, r * features + f);
        let norm = match p.mode {
            FEATURES_NORMALIZE_MAX => (0..features).map(at).fold(f64::from(f32::MIN), f64::max),
            FEATURES_NORMALIZE_L1 => (0..features).map(|f| at(f).abs()).sum(),
            FEATURES_NORMALIZE_L2 => (0..features).map(|f| at(f) * at(f)).sum(),
            _ => 0.0,
        };
        for f in 0..features {
            let v = at(f);
            let out = match p.mode {
                FEATURES_SCALE => (v - per_feature(a, f, 0.0)) * per_feature(b, f, 1.0),
                FEATURES_IMPUTE => {
                    let missing = if p.replaced.is_nan() { v.is_nan() } else { v == p.replaced };
                    if missing {
                        per_feature(a, f, v)
                    } else {
                        v
                    }
                }
                _ if norm == 0.0 => v,
                FEATURES_NORMALIZE_L2 => libm::sqrt(v * v / norm).copysign(if v < 0.0 { -1.0 } else { 1.0 }),
                _ => v / norm,
            };
            let i = r * features + f;
            match p.y_elem {
                ELEM_I64 => *(y as *mut i64).add(i) = out as i64,
                ELEM_F64 => *(y as *mut f64).add(i) = out,
                _ => *(y as *mut f32).add(i) = out as f32,
            }
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_ml_vectorize`].
pub(crate) unsafe fn ml_vectorize(p: *const VectorizeParams, x: *const u8, y: *mut f32) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    let sizes = [p.rows, p.in_columns, p.take, p.out_columns, p.offset];
    if sizes.iter().any(|&n| n < 0) || p.offset.checked_add(p.take).is_none_or(|end| end > p.out_columns) {
        return STATUS_INVALID_PARAMS;
    }
    let (columns, take) = (p.in_columns as usize, p.take as usize);
    for r in 0..p.rows as usize {
        let out = core::slice::from_raw_parts_mut(y.add(r * p.out_columns as usize + p.offset as usize), take);
        for (c, o) in out.iter_mut().enumerate() {
            *o = if c < columns { load_number(x, p.x_elem, r * columns + c) as f32 } else { 0.0 };
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::tree::POST_NONE;

    fn lookup(key_kind: i64, x_elem: i64, count: usize, keys: usize, nan_entry: i64, key_blob: usize) -> LookupParams {
        LookupParams { count: count as i64, key_kind, x_elem, keys: keys as i64, nan_entry, key_blob: key_blob as i64 }
    }

    #[test]
    fn label_encoder_finds_sorted_keys_and_falls_back_to_the_default() {
        // keys 3, 7, 10 → values 30, 70, 100; default -1.
        let keys = [3i64, 7, 10];
        let values = [30i64, 70, 100, -1];
        let x = [7i32, 4, 10, 3];
        let p = LabelEncodeParams {
            lookup: lookup(KEY_INT, ELEM_I32, 4, 3, -1, 0),
            value_kind: VALUE_BYTES,
            value_size: 8,
            value_blob: 0,
        };
        let mut y = [0i64; 4];
        let status = unsafe {
            onnxc_label_encode(
                &p,
                keys.as_ptr().cast(),
                [].as_ptr(),
                values.as_ptr().cast(),
                [].as_ptr(),
                x.as_ptr().cast(),
                y.as_mut_ptr().cast(),
            )
        };
        assert_eq!((status, y), (STATUS_OK, [70, -1, 100, 30]));

        // Float keys 0.5, 2.0 and NaN (entry 2) → strings "a", "b", "nan", default "?".
        let keys = [0.5f64, 2.0];
        let blob = b"abnan?";
        let refs = [
            StringRef { offset: 0, len: 1 },
            StringRef { offset: 1, len: 1 },
            StringRef { offset: 2, len: 3 },
            StringRef { offset: 5, len: 1 },
        ];
        let x = [2.0f32, f32::NAN, 1.0, 0.5];
        let p = LabelEncodeParams {
            lookup: lookup(KEY_FLOAT, ELEM_F32, 4, 2, 2, 0),
            value_kind: VALUE_STRING,
            value_size: 16,
            value_blob: blob.len() as i64,
        };
        let mut y = [OnnxString { data: core::ptr::null(), len: 0 }; 4];
        let status = unsafe {
            onnxc_label_encode(
                &p,
                keys.as_ptr().cast(),
                [].as_ptr(),
                refs.as_ptr().cast(),
                blob.as_ptr(),
                x.as_ptr().cast(),
                y.as_mut_ptr().cast(),
            )
        };
        assert_eq!(status, STATUS_OK);
        let text: [&[u8]; 4] = y.map(|s| unsafe { core::slice::from_raw_parts(s.data, s.len) });
        assert_eq!(text, [&b"b"[..], b"nan", b"?", b"a"]);
    }

    #[test]
    fn a_string_key_outside_its_blob_is_refused() {
        let refs = [StringRef { offset: 2, len: 5 }];
        let p = LabelEncodeParams {
            lookup: lookup(KEY_STRING, 8, 0, 1, -1, 3),
            value_kind: VALUE_BYTES,
            value_size: 8,
            value_blob: 0,
        };
        let status = unsafe {
            onnxc_label_encode(
                &p,
                refs.as_ptr().cast(),
                b"abc".as_ptr(),
                [0i64; 2].as_ptr().cast(),
                [].as_ptr(),
                [].as_ptr(),
                [].as_mut_ptr(),
            )
        };
        assert_eq!(status, STATUS_INVALID_PARAMS);
    }

    #[test]
    fn two_tree_classes_follow_onnx_runtime() {
        // One class id with positive weights (a random forest's form): the
        // score is class 1's probability.
        let p = ClassifyParams {
            rows: 2,
            classes: 2,
            mode: CLASSIFY_TREE_BINARY,
            post_transform: POST_NONE,
            single_class: 1,
            all_positive: 1,
            ..Default::default()
        };
        let s = [0.75f32, 0.0, 0.25, 0.0];
        let (mut label, mut z) = ([0i64; 2], [0f32; 4]);
        let status = unsafe {
            onnxc_ml_classify(&p, [].as_ptr(), [1i64, 0].as_ptr(), s.as_ptr(), label.as_mut_ptr(), z.as_mut_ptr())
        };
        assert_eq!((status, label, z), (STATUS_OK, [1, 0], [0.25, 0.75, 0.75, 0.25]));
        // Mixed signs and LOGISTIC (gradient boosting): a base value, then
        // the logistic of -s and s.
        let p = ClassifyParams { rows: 1, post_transform: POST_LOGISTIC, base_len: 1, all_positive: 0, ..p };
        let status = unsafe {
            onnxc_ml_classify(
                &p,
                [0.5].as_ptr(),
                [1i64, 0].as_ptr(),
                [-1.5f32, 0.0].as_ptr(),
                label.as_mut_ptr(),
                z.as_mut_ptr(),
            )
        };
        let expected = 1.0 / (1.0 + libm::exp(1.0)) as f32;
        assert_eq!((status, label[0]), (STATUS_OK, 0));
        assert!((z[1] - expected).abs() < 1e-7 && (z[0] + z[1] - 1.0).abs() < 1e-6);
    }

    #[test]
    fn feature_transforms() {
        let x = [3.0f32, -4.0, f32::NAN, 1.0];
        let mut y = [0f32; 4];
        let mut run = |mode, a: &[f64], b: &[f64], replaced| {
            let p = FeaturesParams {
                rows: 2,
                features: 2,
                x_elem: ELEM_F32,
                y_elem: ELEM_F32,
                mode,
                a_len: a.len() as i64,
                b_len: b.len() as i64,
                replaced,
            };
            let status =
                unsafe { onnxc_ml_features(&p, a.as_ptr(), b.as_ptr(), x.as_ptr().cast(), y.as_mut_ptr().cast()) };
            assert_eq!(status, STATUS_OK);
            y
        };
        let l2 = run(FEATURES_NORMALIZE_L2, &[], &[], 0.0);
        assert!((l2[0] - 0.6).abs() < 1e-7 && (l2[1] + 0.8).abs() < 1e-7);
        assert_eq!(run(FEATURES_IMPUTE, &[9.0, 8.0], &[], f64::NAN), [3.0, -4.0, 9.0, 1.0]);
        assert_eq!(run(FEATURES_SCALE, &[1.0], &[2.0, 0.5], 0.0)[..2], [4.0, -2.5]);
    }
}
