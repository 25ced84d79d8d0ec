//! The older ai.onnx.ml tree operators, TreeEnsembleRegressor and
//! TreeEnsembleClassifier (opsets 1 and 3), which scikit-learn converters
//! emit for random forests and gradient boosting.
//!
//! Their attributes name nodes by (tree id, node id) and attach leaf
//! weights through parallel `target_*`/`class_*` lists; the importer turns
//! them into the flat tables of [`TreeEnsemble`] (`tree.rs`), checking
//! every reference: each child and each weight names a node of its tree,
//! weights sit on LEAF nodes, target/class ids are in range, no tree has a
//! cycle. A tree's root is its first node in attribute order, as in ONNX
//! Runtime. The regressor then is a [`TreeEnsemble`] with base values; the
//! classifier sums the class weights with the same kernel into scratch and
//! finishes through [`ClassifierFinish`] (ONNX Runtime's rules for two
//! classes: one class id only means the weights score class 1).
//!
//! Type constraints (ONNX): X is float, double, int64 or int32 `[N, F]`;
//! onnxc compiles float (and, for the regressor, double and float16, like
//! TreeEnsemble). Outputs: Y float `[N, n_targets]`; label int64 or string
//! `[N]` and scores float `[N, classes]`. `nodes_hitrates` is ignored.

use super::classify::{post_transform, round8, ClassLabels, ClassifierFinish};
use super::tree_ensemble::{check_acyclic, TreeEnsemble};
use crate::codegen::Lower;
use crate::import::attrs::Attrs;
use crate::import::NodeImport;
use crate::ir::DType;
use crate::ops::{InferCx, Inferred, Op, Operator};
use onnxc_runtime::abi::ml::{ClassifyParams, CLASSIFY_ARGMAX, CLASSIFY_TREE_BINARY};
use onnxc_runtime::abi::tree::{
    TreeContribution, TreeLeaf, TreeNode, AGGREGATE_AVERAGE, AGGREGATE_MAX, AGGREGATE_MIN, AGGREGATE_SUM, POST_NONE,
    POST_PROBIT, TREE_EQ, TREE_GT, TREE_GTE, TREE_LEQ, TREE_LT, TREE_NEQ,
};
use std::collections::HashMap;

fn required_ints(a: &Attrs, name: &str) -> Result<Vec<i64>, String> {
    a.ints(name)?.ok_or_else(|| format!("attribute \"{name}\" is required"))
}

/// A float list given as `{name}` (floats) or `{name}_as_tensor`.
fn float_list(a: &Attrs, name: &str) -> Result<Option<Vec<f64>>, String> {
    match (a.floats(name)?, a.tensor(&format!("{name}_as_tensor"))?) {
        (Some(v), None) => Ok(Some(v.into_iter().map(f64::from).collect())),
        (None, Some(t)) => Ok(Some(t.to_f64s())),
        (None, None) => Ok(None),
        _ => Err(format!("both \"{name}\" and \"{name}_as_tensor\" are set")),
    }
}

/// Builds the [`TreeEnsemble`] tables from the node attributes and the
/// weights `{prefix}_treeids/_nodeids/_ids/_weights` with `targets` ids.
fn forest(a: &Attrs, prefix: &str, targets: usize) -> Result<TreeEnsemble, String> {
    let tree_ids = required_ints(a, "nodes_treeids")?;
    let count = tree_ids.len();
    let per_node = |name: &str, v: Vec<i64>| -> Result<Vec<i64>, String> {
        if v.len() != count {
            return Err(format!("attribute \"{name}\" has {} values, expected {count} (one per node)", v.len()));
        }
        Ok(v)
    };
    let node_ids = per_node("nodes_nodeids", required_ints(a, "nodes_nodeids")?)?;
    let features = per_node("nodes_featureids", required_ints(a, "nodes_featureids")?)?;
    let true_ids = per_node("nodes_truenodeids", required_ints(a, "nodes_truenodeids")?)?;
    let false_ids = per_node("nodes_falsenodeids", required_ints(a, "nodes_falsenodeids")?)?;
    let missing = match a.ints("nodes_missing_value_tracks_true")? {
        Some(v) => per_node("nodes_missing_value_tracks_true", v)?,
        None => vec![0; count],
    };
    let values = float_list(a, "nodes_values")?.unwrap_or_default();
    if values.len() != count {
        return Err(format!("attribute \"nodes_values\" has {} values, expected {count} (one per node)", values.len()));
    }
    let modes = a.strings("nodes_modes")?.ok_or("attribute \"nodes_modes\" is required")?;
    if modes.len() != count {
        return Err(format!("attribute \"nodes_modes\" has {} values, expected {count} (one per node)", modes.len()));
    }
    let modes = modes
        .iter()
        .enumerate()
        .map(|(i, m)| match m.as_str() {
            "BRANCH_LEQ" => Ok(Some(TREE_LEQ)),
            "BRANCH_LT" => Ok(Some(TREE_LT)),
            "BRANCH_GTE" => Ok(Some(TREE_GTE)),
            "BRANCH_GT" => Ok(Some(TREE_GT)),
            "BRANCH_EQ" => Ok(Some(TREE_EQ)),
            "BRANCH_NEQ" => Ok(Some(TREE_NEQ)),
            "LEAF" => Ok(None),
            other => Err(format!("node {i}: nodes_modes value \"{other}\" is not a node mode")),
        })
        .collect::<Result<Vec<_>, _>>()?;

    // (tree, node) → attribute position; branches and leaves numbered apart.
    let mut position = HashMap::new();
    let (mut branch_index, mut leaf_index) = (vec![0i64; count], vec![0i64; count]);
    let (mut branches, mut leaves) = (0i64, 0i64);
    for i in 0..count {
        if position.insert((tree_ids[i], node_ids[i]), i).is_some() {
            return Err(format!("node {i}: tree {} has two nodes with id {}", tree_ids[i], node_ids[i]));
        }
        if modes[i].is_some() {
            branch_index[i] = branches;
            branches += 1;
        } else {
            leaf_index[i] = leaves;
            leaves += 1;
        }
    }
    let reference = |tree: i64, node: i64, what: &str| -> Result<i64, String> {
        let &j = position.get(&(tree, node)).ok_or_else(|| format!("{what}: tree {tree} has no node {node}"))?;
        Ok(if modes[j].is_some() { branch_index[j] } else { -(leaf_index[j] + 1) })
    };

    // Weights, grouped by leaf in leaf order.
    let w_trees = required_ints(a, &format!("{prefix}_treeids"))?;
    let w_nodes = required_ints(a, &format!("{prefix}_nodeids"))?;
    let w_ids = required_ints(a, &format!("{prefix}_ids"))?;
    let w_values = float_list(a, &format!("{prefix}_weights"))?.unwrap_or_default();
    if [w_nodes.len(), w_ids.len(), w_values.len()].iter().any(|&n| n != w_trees.len()) {
        return Err(format!("the \"{prefix}_*\" attributes do not have one value each per weight"));
    }
    let mut per_leaf = vec![Vec::new(); leaves as usize];
    for k in 0..w_trees.len() {
        let what = format!("weight {k}");
        let leaf = reference(w_trees[k], w_nodes[k], &what)?;
        if leaf >= 0 {
            return Err(format!("{what}: node {} of tree {} is not a LEAF", w_nodes[k], w_trees[k]));
        }
        let target = w_ids[k];
        if target < 0 || target as usize >= targets {
            return Err(format!("{what}: {prefix} id {target} is not below {targets}"));
        }
        per_leaf[(-(leaf + 1)) as usize].push(TreeContribution { target, weight: w_values[k] });
    }
    let mut contributions = Vec::new();
    let leaves: Vec<TreeLeaf> = per_leaf
        .into_iter()
        .map(|list| {
            let leaf = TreeLeaf { first: contributions.len() as i64, count: list.len() as i64 };
            contributions.extend(list);
            leaf
        })
        .collect();

    let mut nodes = Vec::with_capacity(branches as usize);
    let mut roots = Vec::new();
    let mut seen_trees = Vec::new();
    for i in 0..count {
        if !seen_trees.contains(&tree_ids[i]) {
            seen_trees.push(tree_ids[i]);
            roots.push(reference(tree_ids[i], node_ids[i], "root")?);
        }
        let Some(mode) = modes[i] else { continue };
        if features[i] < 0 {
            return Err(format!("node {i}: feature id {} is negative", features[i]));
        }
        nodes.push(TreeNode {
            split: values[i],
            feature: features[i],
            mode,
            missing_true: (missing[i] != 0) as i64,
            on_true: reference(tree_ids[i], true_ids[i], &format!("node {i}: true branch"))?,
            on_false: reference(tree_ids[i], false_ids[i], &format!("node {i}: false branch"))?,
            set_start: 0,
            set_len: 0,
        });
    }
    check_acyclic(&nodes, &roots)?;
    let max_feature = nodes.iter().map(|n| n.feature as usize).max();
    Ok(TreeEnsemble {
        nodes,
        leaves,
        contributions,
        sets: Vec::new(),
        roots,
        targets,
        aggregate: AGGREGATE_SUM,
        post_transform: POST_NONE,
        max_feature,
        base_values: Vec::new(),
    })
}

fn base_values(a: &Attrs, allowed: &[usize]) -> Result<Vec<f64>, String> {
    let v = float_list(a, "base_values")?.unwrap_or_default();
    if !v.is_empty() && !allowed.contains(&v.len()) {
        return Err(format!("attribute \"base_values\" has {} values, expected {allowed:?}", v.len()));
    }
    Ok(v)
}

pub fn import_regressor(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let targets = a.int_or("n_targets", 1)?;
    let targets =
        usize::try_from(targets).ok().filter(|&n| n > 0).ok_or(format!("attribute \"n_targets\" is {targets}"))?;
    let mut ensemble = forest(a, "target", targets)?;
    ensemble.aggregate = match a.string_or("aggregate_function", "SUM")?.as_str() {
        "AVERAGE" => AGGREGATE_AVERAGE,
        "SUM" => AGGREGATE_SUM,
        "MIN" => AGGREGATE_MIN,
        "MAX" => AGGREGATE_MAX,
        other => {
            return Err(format!("attribute \"aggregate_function\" is \"{other}\", expected AVERAGE, SUM, MIN or MAX"))
        }
    };
    // One target takes no post transform but PROBIT (ONNX Runtime).
    let post = post_transform(a)?;
    ensemble.post_transform = if targets == 1 && post != POST_PROBIT { POST_NONE } else { post };
    ensemble.base_values = base_values(a, &[targets])?;
    Ok(Op::TreeEnsemble(ensemble))
}

/// TreeEnsembleClassifier.
#[derive(Clone, Debug)]
pub struct TreeClassifier {
    /// Sums the class weights (no base values, no post transform).
    pub forest: TreeEnsemble,
    pub finish: ClassifierFinish,
}

pub fn import_classifier(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let labels = ClassLabels::import(a, "classlabels_int64s")?;
    let classes = labels.count();
    if classes < 2 {
        return Err(format!("there are {classes} class labels, expected at least 2"));
    }
    let forest = forest(a, "class", classes)?;
    let base_values = base_values(a, &[1, 2, classes])?;
    let mut scored = vec![0i64; classes];
    for c in &forest.contributions {
        scored[c.target as usize] = 1;
    }
    let binary = classes == 2;
    if !binary && base_values.len() == 1 {
        return Err(format!("attribute \"base_values\" has 1 value, expected {classes}"));
    }
    let params = ClassifyParams {
        rows: 0,
        classes: classes as i64,
        mode: if binary { CLASSIFY_TREE_BINARY } else { CLASSIFY_ARGMAX },
        post_transform: post_transform(a)?,
        base_len: base_values.len() as i64,
        second_scored: scored[1],
        single_class: (scored.iter().sum::<i64>() == 1) as i64,
        all_positive: forest.contributions.iter().all(|c| c.weight >= 0.0) as i64,
    };
    let finish = ClassifierFinish { labels, params, base_values, scored, score_columns: classes };
    Ok(Op::TreeClassifier(TreeClassifier { forest, finish }))
}

impl Operator for TreeClassifier {
    fn name(&self) -> &'static str {
        "TreeEnsembleClassifier"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if x.dtype != DType::F32 {
            return Err(format!("input 0 is {}; only float inputs are supported yet", x.dtype));
        }
        let [rows, features] = *x.shape else {
            return Err(format!("input 0 has shape {:?}, expected [N, features]", x.shape));
        };
        if let Some(f) = self.forest.max_feature.filter(|&f| f >= features) {
            return Err(format!("a node reads feature {f}, but input 0 has {features} features"));
        }
        Ok(self.finish.infer(cx, rows))
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let rows = cx.input(0).map_or(0, |x| x.shape.first().copied().unwrap_or(0));
        round8(rows * self.forest.targets * 4) + self.finish.scratch_bytes(rows)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let rows = shape[0];
        let raw = cx.reserve_scratch(round8(rows * self.forest.targets * 4))?;
        let x = cx.input_ptr(0)?;
        self.forest.emit(cx, dtype, &shape, x, raw)?;
        self.finish.lower(cx, raw, rows)
    }
}
