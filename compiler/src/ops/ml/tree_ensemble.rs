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
//!
//! Portable mode compiles the checked tables into branches instead
//! ([`TreeEnsemble::emit_portable`]): per row, each tree's nodes become
//! blocks (made when first reached, so shared subtrees are emitted once)
//! comparing the feature in f64 as the kernel does (NaN takes
//! `missing_true`), each leaf adding its weights in the output's type by
//! the aggregation; the post transforms other than NONE, which need the
//! kernel's f64 exp and erf, are refused.

use crate::codegen::kernels::{self, Ptr, Ref};
use crate::codegen::{clif_type, types, FloatCC, InstBuilder, Level, Lower, MemFlagsData, Value};
use crate::import::attrs::Attrs;
use crate::import::NodeImport;
use crate::ir::attributes::Attribute;
use crate::ir::DType;
use crate::ops::{InferCx, Inferred, Op, Operator};
use onnxc_runtime::abi::tree::{
    TreeContribution, TreeLeaf, TreeNode, TreeParams, AGGREGATE_AVERAGE, AGGREGATE_MAX, AGGREGATE_MIN, AGGREGATE_SUM,
    POST_NONE, POST_PROBIT, TREE_EQ, TREE_GT, TREE_GTE, TREE_LEQ, TREE_LT, TREE_MEMBER, TREE_NEQ,
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
        if cx.portable() {
            return self.emit_portable(cx, dtype, shape, x, y, extreme);
        }
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

/// A tree's blocks, made when first jumped to (`B` is the code
/// generator's block type), and the ones made but not yet emitted.
struct TreeBlocks<B> {
    nodes: Vec<Option<B>>,
    leaves: Vec<Option<B>>,
    work: Vec<(i64, B)>,
}

impl<B: Copy> TreeBlocks<B> {
    /// The block of branch target `to` (a node, or `-(leaf + 1)`).
    fn at(&mut self, to: i64, make: &mut dyn FnMut() -> B) -> Result<B, String> {
        let slot = match usize::try_from(to) {
            Ok(node) => self.nodes.get_mut(node),
            Err(_) => usize::try_from(-(to + 1)).ok().and_then(|leaf| self.leaves.get_mut(leaf)),
        };
        let slot = slot.ok_or_else(|| format!("branch target {to} is outside the tree tables"))?;
        if let Some(b) = *slot {
            return Ok(b);
        }
        let b = make();
        *slot = Some(b);
        self.work.push((to, b));
        Ok(b)
    }
}

impl TreeEnsemble {
    /// Portable mode's rows through the trees (see the module doc).
    fn emit_portable(
        &self,
        cx: &mut Lower,
        dtype: DType,
        shape: &[usize],
        x: Value,
        y: Value,
        extreme: f64,
    ) -> Result<(), String> {
        if self.post_transform != POST_NONE {
            return Err(format!("post transform {} has no portable lowering (NONE does)", self.post_transform));
        }
        if !matches!(dtype, DType::F32 | DType::F64) {
            return Err(format!("TreeEnsemble of {dtype} has no portable lowering (f32 and f64 do)"));
        }
        let (size, ty) = (dtype.size() as i64, clif_type(dtype));
        let (rows, features, targets) = (shape[0], shape[1] as i64, self.targets as i64);
        let start = match self.aggregate {
            AGGREGATE_MIN => extreme,
            AGGREGATE_MAX => -extreme,
            _ => 0.0,
        };
        let constant = |cx: &mut Lower, v: f64| {
            if dtype == DType::F64 {
                cx.ins().f64const(v)
            } else {
                cx.ins().f32const(v as f32)
            }
        };
        let flags = MemFlagsData::trusted();
        let levels = [Level::new(rows, vec![features * size, targets * size])];
        cx.nest(&levels, &[x, y], &mut |cx, _, at| {
            let first = constant(cx, start);
            for t in 0..targets {
                cx.ins().store(flags, first, at[1], (t * size) as i32);
            }
            for &root in &self.roots {
                self.emit_tree(cx, dtype, root, at)?;
            }
            for (t, &base) in self.base_values.iter().enumerate() {
                let slot = cx.ins().load(ty, flags, at[1], (t as i64 * size) as i32);
                let base = constant(cx, base);
                let sum = cx.ins().fadd(slot, base);
                cx.ins().store(flags, sum, at[1], (t as i64 * size) as i32);
            }
            Ok(())
        })
    }

    /// One tree from `root` for the row at `at[0]`, its leaf's weights
    /// aggregated into the scores at `at[1]`.
    fn emit_tree(&self, cx: &mut Lower, dtype: DType, root: i64, at: &[Value]) -> Result<(), String> {
        let (size, ty) = (dtype.size() as i64, clif_type(dtype));
        let flags = MemFlagsData::trusted();
        let mut blocks =
            TreeBlocks { nodes: vec![None; self.nodes.len()], leaves: vec![None; self.leaves.len()], work: vec![] };
        let done = cx.b.create_block();
        let entry = blocks.at(root, &mut || cx.b.create_block())?;
        cx.ins().jump(entry, &[]);
        while let Some((to, block)) = blocks.work.pop() {
            cx.b.switch_to_block(block);
            let Ok(n) = usize::try_from(to) else {
                let leaf = self.leaves[(-(to + 1)) as usize];
                let (first, count) = (leaf.first.max(0) as usize, leaf.count.max(0) as usize);
                let list = self
                    .contributions
                    .get(first..first + count)
                    .ok_or("a leaf's contributions are outside the table")?;
                for c in list {
                    let offset = (c.target * size) as i32;
                    let slot = cx.ins().load(ty, flags, at[1], offset);
                    let next = self.aggregated(cx, dtype, slot, c.weight);
                    cx.ins().store(flags, next, at[1], offset);
                }
                cx.ins().jump(done, &[]);
                continue;
            };
            let node = self.nodes[n];
            let v = cx.ins().load(ty, flags, at[0], (node.feature * size) as i32);
            let v = if dtype == DType::F64 { v } else { cx.ins().fpromote(types::F64, v) };
            let split = cx.ins().f64const(node.split);
            let taken = match node.mode {
                TREE_MEMBER => {
                    let (first, len) = (node.set_start.max(0) as usize, node.set_len.max(0) as usize);
                    let set = self.sets.get(first..first + len).ok_or("a membership set is outside the table")?;
                    let mut any = cx.ins().iconst(types::I8, 0);
                    for &member in set {
                        let member = cx.ins().f64const(member);
                        let equal = cx.ins().fcmp(FloatCC::Equal, v, member);
                        any = cx.ins().bor(any, equal);
                    }
                    any
                }
                mode => {
                    let cc = match mode {
                        TREE_LEQ => FloatCC::LessThanOrEqual,
                        TREE_LT => FloatCC::LessThan,
                        TREE_GTE => FloatCC::GreaterThanOrEqual,
                        TREE_GT => FloatCC::GreaterThan,
                        TREE_EQ => FloatCC::Equal,
                        TREE_NEQ => FloatCC::NotEqual,
                        other => return Err(format!("node {n} has the unknown mode {other}")),
                    };
                    cx.ins().fcmp(cc, v, split)
                }
            };
            let nan = cx.ins().fcmp(FloatCC::Unordered, v, v);
            let missing = cx.ins().iconst(types::I8, (node.missing_true != 0) as i64);
            let taken = cx.ins().select(nan, missing, taken);
            let on_true = blocks.at(node.on_true, &mut || cx.b.create_block())?;
            let on_false = blocks.at(node.on_false, &mut || cx.b.create_block())?;
            cx.ins().brif(taken, on_true, &[], on_false, &[]);
        }
        cx.b.switch_to_block(done);
        Ok(())
    }

    /// The score `slot` after a leaf's `weight`, by the aggregation, in the
    /// output's type as the kernel computes it.
    fn aggregated(&self, cx: &mut Lower, dtype: DType, slot: Value, weight: f64) -> Value {
        let trees = self.roots.len() as f64;
        let (w, share) = if dtype == DType::F64 {
            (cx.ins().f64const(weight), cx.ins().f64const(weight / trees))
        } else {
            (cx.ins().f32const(weight as f32), cx.ins().f32const(weight as f32 / trees as f32))
        };
        match self.aggregate {
            AGGREGATE_MIN => {
                let below = cx.ins().fcmp(FloatCC::LessThan, w, slot);
                cx.ins().select(below, w, slot)
            }
            AGGREGATE_MAX => {
                let above = cx.ins().fcmp(FloatCC::GreaterThan, w, slot);
                cx.ins().select(above, w, slot)
            }
            AGGREGATE_AVERAGE => cx.ins().fadd(slot, share),
            _ => cx.ins().fadd(slot, w),
        }
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
