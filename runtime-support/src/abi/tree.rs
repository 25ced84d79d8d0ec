//! The C entry points and parameter structs of [`crate::generic::tree`].

use crate::generic::tree::*;

pub const TREE_LEQ: i64 = 0;
pub const TREE_LT: i64 = 1;
pub const TREE_GTE: i64 = 2;
pub const TREE_GT: i64 = 3;
pub const TREE_EQ: i64 = 4;
pub const TREE_NEQ: i64 = 5;
pub const TREE_MEMBER: i64 = 6;
pub const AGGREGATE_AVERAGE: i64 = 0;
pub const AGGREGATE_SUM: i64 = 1;
pub const AGGREGATE_MIN: i64 = 2;
pub const AGGREGATE_MAX: i64 = 3;
pub const POST_NONE: i64 = 0;
pub const POST_SOFTMAX: i64 = 1;
pub const POST_LOGISTIC: i64 = 2;
pub const POST_SOFTMAX_ZERO: i64 = 3;
pub const POST_PROBIT: i64 = 4;

/// One branching node. `on_true`/`on_false` are a node index (≥ 0) or a leaf
/// `k` encoded as `-(k + 1)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TreeNode {
    pub split: f64,
    pub feature: i64,
    /// One of the `TREE_*` comparisons.
    pub mode: i64,
    /// 1 when a NaN feature takes the true branch.
    pub missing_true: i64,
    pub on_true: i64,
    pub on_false: i64,
    /// `TREE_MEMBER`: the set is `sets[set_start .. set_start + set_len]`.
    pub set_start: i64,
    pub set_len: i64,
}

/// A leaf: its contributions are `contributions[first .. first + count]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TreeLeaf {
    pub first: i64,
    pub count: i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TreeContribution {
    pub target: i64,
    pub weight: f64,
}

/// Sizes of the tables and what to do with the leaves' weights.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TreeParams {
    pub rows: i64,
    pub features: i64,
    pub targets: i64,
    pub trees: i64,
    pub nodes: i64,
    pub leaves: i64,
    pub contributions: i64,
    pub set_values: i64,
    /// One of the `AGGREGATE_*` functions.
    pub aggregate: i64,
    /// One of the `POST_*` transforms.
    pub post_transform: i64,
    /// Start value of a MIN (its negation: of a MAX) aggregation: the
    /// largest finite value of the output type.
    pub extreme: f64,
    /// Entries of `base_values` (0 or `targets`), added to the aggregated
    /// scores before the post transform (the older TreeEnsembleRegressor's
    /// and TreeEnsembleClassifier's `base_values`).
    pub base_values: i64,
}

/// `x` is `[rows, features]`, `y` `[rows, targets]`; `nodes`, `leaves`,
/// `contributions`, `sets`, `roots` and `base_values` are the tables
/// [`TreeParams`] counts.
#[no_mangle]
pub unsafe extern "C" fn onnxc_tree_ensemble_f32(
    p: *const TreeParams,
    nodes: *const TreeNode,
    leaves: *const TreeLeaf,
    contributions: *const TreeContribution,
    sets: *const f64,
    roots: *const i64,
    base_values: *const f64,
    x: *const f32,
    y: *mut f32,
) -> i32 {
    tree_ensemble(p, Tables { nodes, leaves, contributions, sets, roots, base_values }, x, y)
}

/// [`onnxc_tree_ensemble_f32`] for `f64`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_tree_ensemble_f64(
    p: *const TreeParams,
    nodes: *const TreeNode,
    leaves: *const TreeLeaf,
    contributions: *const TreeContribution,
    sets: *const f64,
    roots: *const i64,
    base_values: *const f64,
    x: *const f64,
    y: *mut f64,
) -> i32 {
    tree_ensemble(p, Tables { nodes, leaves, contributions, sets, roots, base_values }, x, y)
}
