//! ai.onnx.ml TreeEnsemble (opset 5): decision-tree ensembles.
//!
//! The importer turns the attributes (parallel per-node and per-leaf arrays,
//! `nodes_modes` and the splits as tensors, membership sets as NaN-separated
//! runs in the order the MEMBER nodes appear) into the kernel's flat tables
//! (`onnxc_runtime::generic::tree`) and checks them whole: every node and
//! leaf index in range, every target below `n_targets`, no tree with a
//! cycle, one membership set per MEMBER node. At lowering the tables go to
//! read-only data and one `onnxc_tree_ensemble_{f32,f64}` call runs every
//! row through every tree; f16 inputs are staged through f32.
//!
//! A root whose true and false branches are the same leaf is a one-leaf
//! tree (the spec's degenerate case).

use crate::codegen::kernels::{self, Ptr, Ref};
use crate::codegen::{Lower, Value};
use crate::import::attrs::Attrs;
use crate::import::NodeImport;
use crate::ir::attributes::Attribute;
use crate::ir::DType;
use crate::ops::{InferCx, Inferred, Op, Operator};
use onnxc_runtime::abi::tree::{
    TreeContribution, TreeLeaf, TreeNode, TreeParams, AGGREGATE_AVERAGE, AGGREGATE_MAX, AGGREGATE_SUM, POST_NONE,
    POST_PROBIT, TREE_MEMBER,
};

#[derive(Clone, Debug)]
pub struct TreeEnsemble {
    pub nodes: Vec<TreeNode>,
    pub leaves: Vec<TreeLeaf>,
    pub contributions: Vec<TreeContribution>,
    pub sets: Vec<f64>,
    /// Each tree's root: a node index, or `-(leaf + 1)`.
    pub roots: Vec<i64>,
    pub targets: usize,
    pub aggregate: i64,
    pub post_transform: i64,
    /// Largest feature index a node reads.
    pub max_feature: Option<usize>,
    /// Added to each target's score before the post transform (empty, or
    /// one per target; the older ai.onnx.ml tree operators' `base_values`).
    pub base_values: Vec<f64>,
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let arrays = NodeArrays::parse(a)?;
    let leaf_targets = required_ints(a, "leaf_targetids")?;
    let leaf_weights = required_floats(a, "leaf_weights")?;
    if leaf_weights.len() != leaf_targets.len() {
        return Err(format!(
            "attribute \"leaf_weights\" has {} values, \"leaf_targetids\" {}",
            leaf_weights.len(),
            leaf_targets.len()
        ));
    }
    let targets = a.int("n_targets")?.ok_or("attribute \"n_targets\" is required")?;
    let targets = usize::try_from(targets).map_err(|_| format!("attribute \"n_targets\" is {targets}"))?;
    let aggregate = a.int_or("aggregate_function", AGGREGATE_SUM)?;
    if !(AGGREGATE_AVERAGE..=AGGREGATE_MAX).contains(&aggregate) {
        return Err(format!("attribute \"aggregate_function\" is {aggregate}, expected 0 to 3"));
    }
    let post_transform = a.int_or("post_transform", POST_NONE)?;
    if !(POST_NONE..=POST_PROBIT).contains(&post_transform) {
        return Err(format!("attribute \"post_transform\" is {post_transform}, expected 0 to 4"));
    }
    let members = match a.tensor("membership_values")? {
        Some(t) => t.to_f64s(),
        None => Vec::new(),
    };
    let (nodes, sets) = arrays.nodes(leaf_targets.len(), members)?;
    let roots = arrays.roots(&nodes, &required_ints(a, "tree_roots")?)?;
    check_acyclic(&nodes, &roots)?;
    let mut contributions = Vec::with_capacity(leaf_targets.len());
    for (k, (&target, &weight)) in leaf_targets.iter().zip(&leaf_weights).enumerate() {
        if target < 0 || target as usize >= targets {
            return Err(format!("leaf {k}: target id {target} is not below n_targets {targets}"));
        }
        contributions.push(TreeContribution { target, weight });
    }
    let leaves = (0..contributions.len() as i64).map(|first| TreeLeaf { first, count: 1 }).collect();
    let max_feature = nodes.iter().map(|n| n.feature as usize).max();
    Ok(Op::TreeEnsemble(TreeEnsemble {
        nodes,
        leaves,
        contributions,
        sets,
        roots,
        targets,
        aggregate,
        post_transform,
        max_feature,
        base_values: Vec::new(),
    }))
}

/// A required int list attribute.
pub(crate) fn required_ints(a: &Attrs, name: &str) -> Result<Vec<i64>, String> {
    a.ints(name)?.ok_or_else(|| format!("attribute \"{name}\" is required"))
}

/// A required tensor attribute, as f64 values.
fn required_floats(a: &Attrs, name: &str) -> Result<Vec<f64>, String> {
    Ok(a.tensor(name)?.ok_or_else(|| format!("attribute \"{name}\" (a tensor) is required"))?.to_f64s())
}

/// The per-node attributes, one entry per node.
struct NodeArrays {
    features: Vec<i64>,
    splits: Vec<f64>,
    modes: Vec<i64>,
    true_ids: Vec<i64>,
    false_ids: Vec<i64>,
    /// Nonzero where the matching id is a leaf index.
    true_leafs: Vec<i64>,
    false_leafs: Vec<i64>,
    missing: Vec<i64>,
}

impl NodeArrays {
    fn parse(a: &Attrs) -> Result<NodeArrays, String> {
        let features = required_ints(a, "nodes_featureids")?;
        let count = features.len();
        let per_node = |name: &str, values: Vec<i64>| -> Result<Vec<i64>, String> {
            if values.len() != count {
                return Err(format!(
                    "attribute \"{name}\" has {} values, expected {count} (one per node)",
                    values.len()
                ));
            }
            Ok(values)
        };
        let splits = required_floats(a, "nodes_splits")?;
        if splits.len() != count {
            return Err(format!(
                "attribute \"nodes_splits\" has {} values, expected {count} (one per node)",
                splits.len()
            ));
        }
        let ints = |name: &str| per_node(name, required_ints(a, name)?);
        let modes = per_node("nodes_modes", required_floats(a, "nodes_modes")?.iter().map(|&m| m as i64).collect())?;
        let (true_ids, false_ids) = (ints("nodes_truenodeids")?, ints("nodes_falsenodeids")?);
        let (true_leafs, false_leafs) = (ints("nodes_trueleafs")?, ints("nodes_falseleafs")?);
        let missing = match a.ints("nodes_missing_value_tracks_true")? {
            Some(v) => per_node("nodes_missing_value_tracks_true", v)?,
            None => vec![0; count],
        };
        Ok(NodeArrays { features, splits, modes, true_ids, false_ids, true_leafs, false_leafs, missing })
    }

    /// The kernel's nodes, each branch a node or `-(leaf + 1)` checked
    /// against the `leaf_count` leaves, and the MEMBER nodes' sets taken
    /// in turn from `members` (NaN-separated).
    fn nodes(&self, leaf_count: usize, members: Vec<f64>) -> Result<(Vec<TreeNode>, Vec<f64>), String> {
        let count = self.features.len();
        let reference = |id: i64, leaf: i64, what: &str| -> Result<i64, String> {
            let limit = if leaf != 0 { leaf_count } else { count };
            if id < 0 || id as usize >= limit {
                let kind = if leaf != 0 { "leaf" } else { "node" };
                return Err(format!("{what} {id} is not a {kind} index (there are {limit})"));
            }
            Ok(if leaf != 0 { -(id + 1) } else { id })
        };
        let mut members = members.into_iter();
        let (mut sets, mut nodes) = (Vec::new(), Vec::with_capacity(count));
        for i in 0..count {
            let mode = self.modes[i];
            if !(0..=TREE_MEMBER).contains(&mode) {
                return Err(format!("node {i}: nodes_modes value {mode} is not a comparison (0 to {TREE_MEMBER})"));
            }
            if self.features[i] < 0 {
                return Err(format!("node {i}: feature id {} is negative", self.features[i]));
            }
            let set_start = sets.len() as i64;
            let set_len = if mode == TREE_MEMBER { member_set(i, &mut members, &mut sets)? } else { 0 };
            nodes.push(TreeNode {
                split: self.splits[i],
                feature: self.features[i],
                mode,
                missing_true: (self.missing[i] != 0) as i64,
                on_true: reference(self.true_ids[i], self.true_leafs[i], &format!("node {i}: true branch"))?,
                on_false: reference(self.false_ids[i], self.false_leafs[i], &format!("node {i}: false branch"))?,
                set_start,
                set_len,
            });
        }
        if members.any(|v| !v.is_nan()) {
            return Err("attribute \"membership_values\" has more sets than there are MEMBER nodes".into());
        }
        Ok((nodes, sets))
    }

    /// Each tree's root: the `tree_roots` node, or the leaf of a one-leaf
    /// tree (both branches the same leaf).
    fn roots(&self, nodes: &[TreeNode], tree_roots: &[i64]) -> Result<Vec<i64>, String> {
        let count = self.features.len();
        let mut roots = Vec::new();
        for &r in tree_roots {
            let i =
                usize::try_from(r).ok().filter(|&i| i < count).ok_or_else(|| format!("tree root {r} is not a node"))?;
            let one_leaf = self.true_leafs[i] != 0 && self.false_leafs[i] != 0 && self.true_ids[i] == self.false_ids[i];
            roots.push(if one_leaf { nodes[i].on_true } else { r });
        }
        Ok(roots)
    }
}

/// Moves MEMBER node `i`'s set, up to the next NaN, from `members` to
/// `sets`; returns its length.
fn member_set(i: usize, members: &mut impl Iterator<Item = f64>, sets: &mut Vec<f64>) -> Result<i64, String> {
    let (mut closed, mut len) = (false, 0);
    for v in members.by_ref() {
        if v.is_nan() {
            closed = true;
            break;
        }
        sets.push(v);
        len += 1;
    }
    if !closed && len == 0 {
        return Err(format!("node {i}: attribute \"membership_values\" has no set left for this MEMBER node"));
    }
    Ok(len)
}

/// Fails when following branches from some root comes back to a node on the
/// current path (the kernel would otherwise stop such a walk at run time).
pub(crate) fn check_acyclic(nodes: &[TreeNode], roots: &[i64]) -> Result<(), String> {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; nodes.len()];
    for &root in roots.iter().filter(|&&r| r >= 0) {
        // (node, children visited so far)
        let mut stack = vec![(root as usize, 0u8)];
        state[root as usize] = ON_PATH;
        while let Some(&mut (n, ref mut visited)) = stack.last_mut() {
            let next = match *visited {
                0 => nodes[n].on_true,
                1 => nodes[n].on_false,
                _ => {
                    state[n] = DONE;
                    stack.pop();
                    continue;
                }
            };
            *visited += 1;
            if next < 0 {
                continue;
            }
            let m = next as usize;
            match state[m] {
                ON_PATH => return Err(format!("the tree with root {root} has a cycle through node {m}")),
                NEW => {
                    state[m] = ON_PATH;
                    stack.push((m, 0));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

impl TreeEnsemble {
    /// The kernel call computing `y` (`[rows, targets]`) from `x` (`shape`,
    /// `[rows, features]` of `dtype`).
    pub fn emit(&self, cx: &mut Lower, dtype: DType, shape: &[usize], x: Value, y: Value) -> Result<(), String> {
        let extreme = if dtype == DType::F64 { f64::MAX } else { f64::from(f32::MAX) };
        let p = TreeParams {
            rows: shape[0] as i64,
            features: shape[1] as i64,
            targets: self.targets as i64,
            trees: self.roots.len() as i64,
            nodes: self.nodes.len() as i64,
            leaves: self.leaves.len() as i64,
            contributions: self.contributions.len() as i64,
            set_values: self.sets.len() as i64,
            aggregate: self.aggregate,
            post_transform: self.post_transform,
            extreme,
            base_values: self.base_values.len() as i64,
        };
        let params = cx.params(&p)?;
        let nodes = Ref::to(cx.table(&self.nodes)?);
        let leaves = Ref::to(cx.table(&self.leaves)?);
        let contributions = Ref::to(cx.table(&self.contributions)?);
        let sets = Ptr(cx.table(&self.sets)?);
        let roots = Ptr(cx.table(&self.roots)?);
        let base_values = Ptr(cx.table(&self.base_values)?);
        let args = (params, nodes, leaves, contributions, sets, roots, base_values, Ptr(x), Ptr(y));
        let kernel = kernels::by_dtype(kernels::onnxc_tree_ensemble_f32, kernels::onnxc_tree_ensemble_f64, dtype);
        cx.call_checked(kernel, args)
    }
}

impl TreeEnsemble {
    /// What the textual mid-IR shows of it: sizes and modes, not tables.
    pub(crate) fn summary(&self) -> Vec<Attribute> {
        vec![
            Attribute::new("trees", self.roots.len()),
            Attribute::new("nodes", self.nodes.len()),
            Attribute::new("leaves", self.leaves.len()),
            Attribute::new("targets", self.targets),
            Attribute::new("aggregate", self.aggregate),
            Attribute::new("post_transform", self.post_transform),
        ]
    }
}

impl Operator for TreeEnsemble {
    fn name(&self) -> &'static str {
        "TreeEnsemble"
    }

    fn attributes(&self) -> Vec<Attribute> {
        self.summary()
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !matches!(x.dtype, DType::F32 | DType::F64 | DType::F16) {
            return Err(format!("input 0 is {}, expected a float type", x.dtype));
        }
        let [rows, features] = *x.shape else {
            return Err(format!("input 0 has shape {:?}, expected [N, features]", x.shape));
        };
        if let Some(f) = self.max_feature.filter(|&f| f >= features) {
            return Err(format!("a node reads feature {f}, but input 0 has {features} features"));
        }
        Ok(vec![Inferred::new(x.dtype, vec![rows, self.targets])])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        self.emit(cx, dtype, &shape, x, y)
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnxc_runtime::abi::tree::TREE_NEQ;

    fn branch(on_true: i64, on_false: i64) -> TreeNode {
        TreeNode { mode: TREE_NEQ, on_true, on_false, ..Default::default() }
    }

    #[test]
    fn shared_subtrees_pass_and_cycles_fail() {
        // 0 → 1, 2; 1 → 2, leaf; 2 → leaves: a DAG, fine.
        let dag = [branch(1, 2), branch(2, -1), branch(-1, -2)];
        assert!(check_acyclic(&dag, &[0]).is_ok());
        let cycle = [branch(1, -1), branch(-1, 0)];
        assert!(check_acyclic(&cycle, &[0]).unwrap_err().contains("cycle through node 0"));
        let self_loop = [branch(0, -1)];
        assert!(check_acyclic(&self_loop, &[0]).is_err());
    }
}
