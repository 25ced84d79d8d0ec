//! The C entry points and parameter structs of [`crate::generic::ml`].

use crate::generic::ml::*;

pub const KEY_INT: i64 = 0;
pub const KEY_FLOAT: i64 = 1;
pub const KEY_STRING: i64 = 2;

/// A string in a blob: `blob[offset .. offset + len]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct StringRef {
    pub offset: i64,
    pub len: i64,
}

/// How to find elements of `x` among sorted keys.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LookupParams {
    /// Elements of `x`.
    pub count: i64,
    /// `KEY_INT` (keys are sorted i64), `KEY_FLOAT` (sorted f64, no NaN) or
    /// `KEY_STRING` (sorted [`StringRef`]s into the key blob).
    pub key_kind: i64,
    /// Element code of `x` (ints: i16/i32/i64; floats: f16/f32/f64).
    pub x_elem: i64,
    pub keys: i64,
    /// `KEY_FLOAT`: the entry a NaN element maps to (`keys`, the one past
    /// the sorted keys), or -1.
    pub nan_entry: i64,
    /// Bytes in the key blob.
    pub key_blob: i64,
}

pub const VALUE_BYTES: i64 = 0;
pub const VALUE_STRING: i64 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LabelEncodeParams {
    pub lookup: LookupParams,
    /// `VALUE_BYTES`: `values` holds one element of `value_size` bytes per
    /// entry (the sorted keys, the NaN key if any) and the default last;
    /// `VALUE_STRING`: as many [`StringRef`]s into the value blob.
    pub value_kind: i64,
    pub value_size: i64,
    pub value_blob: i64,
}

/// LabelEncoder (and CategoryMapper): `y[i]` is the value of `x[i]`'s key,
/// or the default.
#[no_mangle]
pub unsafe extern "C" fn onnxc_label_encode(
    p: *const LabelEncodeParams,
    keys: *const u8,
    key_blob: *const u8,
    values: *const u8,
    value_blob: *const u8,
    x: *const u8,
    y: *mut u8,
) -> i32 {
    label_encode(p, keys, key_blob, values, value_blob, x, y)
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CategoryOneHotParams {
    pub lookup: LookupParams,
    /// 0: an element that is no category fails the node.
    pub zeros: i64,
}

/// OneHotEncoder: `y[i, positions[k]] = 1` where `x[i]` is sorted key `k`
/// (`y` is `[count, keys]` f32, zeros elsewhere).
#[no_mangle]
pub unsafe extern "C" fn onnxc_ml_one_hot(
    p: *const CategoryOneHotParams,
    keys: *const u8,
    key_blob: *const u8,
    positions: *const i64,
    x: *const u8,
    y: *mut f32,
) -> i32 {
    ml_one_hot(p, keys, key_blob, positions, x, y)
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MlLinearParams {
    pub rows: i64,
    pub features: i64,
    pub targets: i64,
    pub x_elem: i64,
    /// Applied to each row of scores (`POST_*` of `tree.rs`).
    pub post_transform: i64,
}

/// LinearRegressor and LinearClassifier's scores:
/// `y[r, t] = intercepts[t] + sum_f x[r, f] * coefficients[t, f]`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_ml_linear(
    p: *const MlLinearParams,
    coefficients: *const f64,
    intercepts: *const f64,
    x: *const u8,
    y: *mut f32,
) -> i32 {
    ml_linear(p, coefficients, intercepts, x, y)
}

/// The classifier's last step picks the highest score among the classes
/// that can score.
pub const CLASSIFY_ARGMAX: i64 = 0;

/// TreeEnsembleClassifier with two classes (ONNX Runtime's rules).
pub const CLASSIFY_TREE_BINARY: i64 = 1;

/// LinearClassifier with one score column and two labels.
pub const CLASSIFY_LINEAR_BINARY: i64 = 2;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ClassifyParams {
    pub rows: i64,
    /// Score columns in `s`: the classes, or 1 for `CLASSIFY_LINEAR_BINARY`.
    pub classes: i64,
    /// `CLASSIFY_*`.
    pub mode: i64,
    pub post_transform: i64,
    /// Base values added to the scores: 0, 1 or `classes` of them.
    pub base_len: i64,
    /// `CLASSIFY_TREE_BINARY`: 1 when some leaf scores class 1.
    pub second_scored: i64,
    /// `CLASSIFY_TREE_BINARY`: 1 when the leaves name a single class.
    pub single_class: i64,
    /// `CLASSIFY_TREE_BINARY`: 1 when no leaf weight is negative.
    pub all_positive: i64,
}

/// A classifier's labels (as class indices) and scores from the raw scores
/// `s` (`[rows, classes]`): `z` is `[rows, classes]`, or `[rows, 2]` in the
/// binary modes. `scored[k]` says whether class `k` can win the argmax.
///
/// Two tree classes: the base values are added as ONNX Runtime does (two
/// base values with class 1 scored make the scores `(-(b1 + s0), b1 + s0)`);
/// when only one score column remains, the label is class 1 when that
/// score passes 0.5 (all weights positive) or 0 (mixed signs), and the
/// second column is derived from it: `1 - s`, or with mixed signs the
/// logistic of `-s` and `s` (or `-s` and `s` without LOGISTIC).
#[no_mangle]
pub unsafe extern "C" fn onnxc_ml_classify(
    p: *const ClassifyParams,
    base: *const f64,
    scored: *const i64,
    s: *const f32,
    label: *mut i64,
    z: *mut f32,
) -> i32 {
    ml_classify(p, base, scored, s, label, z)
}

pub const LABELS_INT: i64 = 0;
pub const LABELS_STRING: i64 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PickLabelsParams {
    pub count: i64,
    pub labels: i64,
    /// `LABELS_INT` (`ints`) or `LABELS_STRING` (`strings` into `blob`).
    pub kind: i64,
    pub blob: i64,
}

/// `y[i] = labels[index[i]]`: i64 labels, or string records into `blob`.
/// `index` and `y` may be the same i64 buffer.
#[no_mangle]
pub unsafe extern "C" fn onnxc_ml_pick_labels(
    p: *const PickLabelsParams,
    index: *const i64,
    ints: *const i64,
    strings: *const StringRef,
    blob: *const u8,
    y: *mut u8,
) -> i32 {
    ml_pick_labels(p, index, ints, strings, blob, y)
}

pub const FEATURES_SCALE: i64 = 0;
pub const FEATURES_NORMALIZE_MAX: i64 = 1;
pub const FEATURES_NORMALIZE_L1: i64 = 2;
pub const FEATURES_NORMALIZE_L2: i64 = 3;
pub const FEATURES_IMPUTE: i64 = 4;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct FeaturesParams {
    pub rows: i64,
    pub features: i64,
    pub x_elem: i64,
    /// Element code of `y`: f32, or (Imputer) the input's.
    pub y_elem: i64,
    /// `FEATURES_*`.
    pub mode: i64,
    /// Entries of `a` and `b`: 1 (the same for every feature) or `features`.
    pub a_len: i64,
    pub b_len: i64,
    /// Imputer: the value to replace (NaN: NaN elements).
    pub replaced: f64,
}

/// Per-feature transforms over `[rows, features]`:
/// Scaler `(x - a[f]) * b[f]`; Normalizer dividing each row by its max, L1
/// or L2 norm (unchanged when that is 0; L2 as `sign(x) sqrt(x² / Σx²)`);
/// Imputer `a[f]` in place of the replaced value.
#[no_mangle]
pub unsafe extern "C" fn onnxc_ml_features(
    p: *const FeaturesParams,
    a: *const f64,
    b: *const f64,
    x: *const u8,
    y: *mut u8,
) -> i32 {
    ml_features(p, a, b, x, y)
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct VectorizeParams {
    pub rows: i64,
    /// Columns of `x`.
    pub in_columns: i64,
    /// Columns this input fills in `y`: `x`'s first ones, then zeros.
    pub take: i64,
    pub out_columns: i64,
    /// `y` column of this input's first.
    pub offset: i64,
    pub x_elem: i64,
}

/// FeatureVectorizer, one input: `y[r, offset + c] = x[r, c]` as f32 for
/// `c < take` (0 past `x`'s columns).
#[no_mangle]
pub unsafe extern "C" fn onnxc_ml_vectorize(p: *const VectorizeParams, x: *const u8, y: *mut f32) -> i32 {
    ml_vectorize(p, x, y)
}
