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
use super::tree_ensemble::{check_acyclic, required_ints, TreeEnsemble};
use crate::codegen::Lower;
use crate::import::attrs::Attrs;
use crate::import::NodeImport;
use crate::ir::attributes::{self, Attribute};
use crate::ir::DType;
use crate::ops::{InferCx, Inferred, Op, Operator};
use onnxc_runtime::abi::ml::{ClassifyParams, CLASSIFY_ARGMAX, CLASSIFY_TREE_BINARY};
use onnxc_runtime::abi::tree::{
    TreeContribution, TreeLeaf, TreeNode, AGGREGATE_AVERAGE, AGGREGATE_MAX, AGGREGATE_MIN, AGGREGATE_SUM, POST_NONE,
    POST_PROBIT, TREE_EQ, TREE_GT, TREE_GTE, TREE_LEQ, TREE_LT, TREE_NEQ,
};
use std::collections::HashMap;

/// A float list given as `{name}` (floats) or `{name}_as_tensor`.
fn float_list(a: &Attrs, name: &str) -> Result<Option<Vec<f64>>, String> {
    match (a.floats(name)?, a.tensor(&format!("{name}_as_tensor"))?) {
        (Some(v), None) => Ok(Some(v.into_iter().map(f64::from).collect())),
        (None, Some(t)) => Ok(Some(t.to_f64s())),
        (None, None) => Ok(None),
        _ => Err(format!("both \"{name}\" and \"{name}_as_tensor\" are set")),
    }
}

/// The per-node attributes, one entry per node in attribute order.
struct NodeTable {
    tree_ids: Vec<i64>,
    node_ids: Vec<i64>,
    features: Vec<i64>,
    true_ids: Vec<i64>,
    false_ids: Vec<i64>,
    missing: Vec<i64>,
    values: Vec<f64>,
    /// The comparison of a branch, `None` for a LEAF.
    modes: Vec<Option<i64>>,
}

impl NodeTable {
    fn parse(a: &Attrs) -> Result<NodeTable, String> {
        let tree_ids = required_ints(a, "nodes_treeids")?;
        let count = tree_ids.len();
        let per_node = |name: &str, len: usize| -> Result<(), String> {
            if len == count {
                Ok(())
            } else {
                Err(format!("attribute \"{name}\" has {len} values, expected {count} (one per node)"))
            }
        };
        let ints = |name: &str| -> Result<Vec<i64>, String> {
            let v = required_ints(a, name)?;
            per_node(name, v.len()).map(|_| v)
        };
        let (node_ids, features) = (ints("nodes_nodeids")?, ints("nodes_featureids")?);
        let (true_ids, false_ids) = (ints("nodes_truenodeids")?, ints("nodes_falsenodeids")?);
        let missing = match a.ints("nodes_missing_value_tracks_true")? {
            Some(v) => per_node("nodes_missing_value_tracks_true", v.len()).map(|_| v)?,
            None => vec![0; count],
        };
        let values = float_list(a, "nodes_values")?.unwrap_or_default();
        per_node("nodes_values", values.len())?;
        let modes = a.strings("nodes_modes")?.ok_or("attribute \"nodes_modes\" is required")?;
        per_node("nodes_modes", modes.len())?;
        let modes = modes.iter().enumerate().map(|(i, m)| node_mode(i, m)).collect::<Result<Vec<_>, _>>()?;
        Ok(NodeTable { tree_ids, node_ids, features, true_ids, false_ids, missing, values, modes })
    }
}

/// The kernel's comparison for a `nodes_modes` value, `None` for LEAF.
fn node_mode(i: usize, mode: &str) -> Result<Option<i64>, String> {
    match mode {
        "BRANCH_LEQ" => Ok(Some(TREE_LEQ)),
        "BRANCH_LT" => Ok(Some(TREE_LT)),
        "BRANCH_GTE" => Ok(Some(TREE_GTE)),
        "BRANCH_GT" => Ok(Some(TREE_GT)),
        "BRANCH_EQ" => Ok(Some(TREE_EQ)),
        "BRANCH_NEQ" => Ok(Some(TREE_NEQ)),
        "LEAF" => Ok(None),
        other => Err(format!("node {i}: nodes_modes value \"{other}\" is not a node mode")),
    }
}

/// Where each (tree, node) went: branches and leaves are numbered apart,
/// in attribute order.
struct Numbering {
    position: HashMap<(i64, i64), usize>,
    branch_index: Vec<i64>,
    leaf_index: Vec<i64>,
    branches: usize,
    leaves: usize,
}

impl Numbering {
    fn new(table: &NodeTable) -> Result<Numbering, String> {
        let count = table.tree_ids.len();
        let mut n = Numbering {
            position: HashMap::new(),
            branch_index: vec![0; count],
            leaf_index: vec![0; count],
            branches: 0,
            leaves: 0,
        };
        for i in 0..count {
            let (tree, node) = (table.tree_ids[i], table.node_ids[i]);
            if n.position.insert((tree, node), i).is_some() {
                return Err(format!("node {i}: tree {tree} has two nodes with id {node}"));
            }
            if table.modes[i].is_some() {
                n.branch_index[i] = n.branches as i64;
                n.branches += 1;
            } else {
                n.leaf_index[i] = n.leaves as i64;
                n.leaves += 1;
            }
        }
        Ok(n)
    }

    /// A reference to node `node` of tree `tree` as [`TreeNode`] holds
    /// it: a branch index, or `-(leaf + 1)`.
    fn reference(&self, table: &NodeTable, tree: i64, node: i64, what: &str) -> Result<i64, String> {
        let &j = self.position.get(&(tree, node)).ok_or_else(|| format!("{what}: tree {tree} has no node {node}"))?;
        Ok(if table.modes[j].is_some() { self.branch_index[j] } else { -(self.leaf_index[j] + 1) })
    }
}

/// Builds the [`TreeEnsemble`] tables from the node attributes and the
/// weights `{prefix}_treeids/_nodeids/_ids/_weights` with `targets` ids.
fn forest(a: &Attrs, prefix: &str, targets: usize) -> Result<TreeEnsemble, String> {
    let table = NodeTable::parse(a)?;
    let numbering = Numbering::new(&table)?;
    let (leaves, contributions) = leaf_weights(a, prefix, targets, &table, &numbering)?;
    let (nodes, roots) = branch_nodes(&table, &numbering)?;
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

/// The leaves' weights, grouped by leaf in leaf order: each weight must
/// name a LEAF and a target below `targets`.
fn leaf_weights(
    a: &Attrs,
    prefix: &str,
    targets: usize,
    table: &NodeTable,
    numbering: &Numbering,
) -> Result<(Vec<TreeLeaf>, Vec<TreeContribution>), String> {
    let w_trees = required_ints(a, &format!("{prefix}_treeids"))?;
    let w_nodes = required_ints(a, &format!("{prefix}_nodeids"))?;
    let w_ids = required_ints(a, &format!("{prefix}_ids"))?;
    let w_values = float_list(a, &format!("{prefix}_weights"))?.unwrap_or_default();
    if [w_nodes.len(), w_ids.len(), w_values.len()].iter().any(|&n| n != w_trees.len()) {
        return Err(format!("the \"{prefix}_*\" attributes do not have one value each per weight"));
    }
    let mut per_leaf = vec![Vec::new(); numbering.leaves];
    for k in 0..w_trees.len() {
        let what = format!("weight {k}");
        let leaf = numbering.reference(table, w_trees[k], w_nodes[k], &what)?;
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
    let leaves = per_leaf
        .into_iter()
        .map(|list| {
            let leaf = TreeLeaf { first: contributions.len() as i64, count: list.len() as i64 };
            contributions.extend(list);
            leaf
        })
        .collect();
    Ok((leaves, contributions))
}

/// The branch nodes in order, and each tree's root (its first node in
/// attribute order).
fn branch_nodes(table: &NodeTable, numbering: &Numbering) -> Result<(Vec<TreeNode>, Vec<i64>), String> {
    let mut nodes = Vec::with_capacity(numbering.branches);
    let (mut roots, mut seen_trees) = (Vec::new(), Vec::new());
    let reference = |tree: i64, node: i64, what: &str| numbering.reference(table, tree, node, what);
    for i in 0..table.tree_ids.len() {
        let tree = table.tree_ids[i];
        if !seen_trees.contains(&tree) {
            seen_trees.push(tree);
            roots.push(reference(tree, table.node_ids[i], "root")?);
        }
        let Some(mode) = table.modes[i] else { continue };
        if table.features[i] < 0 {
            return Err(format!("node {i}: feature id {} is negative", table.features[i]));
        }
        nodes.push(TreeNode {
            split: table.values[i],
            feature: table.features[i],
            mode,
            missing_true: (table.missing[i] != 0) as i64,
            on_true: reference(tree, table.true_ids[i], &format!("node {i}: true branch"))?,
            on_false: reference(tree, table.false_ids[i], &format!("node {i}: false branch"))?,
            set_start: 0,
            set_len: 0,
        });
    }
    Ok((nodes, roots))
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

    fn attributes(&self) -> Vec<Attribute> {
        let mut summary = self.forest.summary();
        summary.extend(attributes::of_debug_except(self, &["forest"]));
        summary
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
