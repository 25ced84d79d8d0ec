//! Tree ensembles (ai.onnx.ml TreeEnsemble): every row of `X` walks every
//! tree from its root to a leaf; the leaves' weights are aggregated per
//! target, then post-transformed.
//!
//! The compiler flattens the trees into tables (`TreeNode`, `TreeLeaf`,
//! `TreeContribution`, the membership-set values and the roots) in the
//! object's read-only data, after checking that every index is in range and
//! that no tree has a cycle. The kernel still bounds every walk by the node
//! count and checks each feature index, so a bad table cannot loop forever or
//! read outside `X`. Scores are aggregated in `X`'s type, as the reference
//! does; post transforms are computed in f64.

use super::real::Real;
use crate::abi::tree::*;
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};

pub(crate) struct Tables {
    pub(crate) nodes: *const TreeNode,
    pub(crate) leaves: *const TreeLeaf,
    pub(crate) contributions: *const TreeContribution,
    pub(crate) sets: *const f64,
    pub(crate) roots: *const i64,
    pub(crate) base_values: *const f64,
}

pub(crate) unsafe fn tree_ensemble<T: Real>(p: *const TreeParams, t: Tables, x: *const T, y: *mut T) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    let counts = [p.rows, p.features, p.targets, p.trees, p.nodes, p.leaves, p.contributions, p.set_values];
    if counts.iter().any(|&n| n < 0) || p.base_values != 0 && p.base_values != p.targets {
        return STATUS_INVALID_PARAMS;
    }
    let base_values = slice(t.base_values, p.base_values);
    let nodes = slice(t.nodes, p.nodes);
    let leaves = slice(t.leaves, p.leaves);
    let contributions = slice(t.contributions, p.contributions);
    let sets = slice(t.sets, p.set_values);
    let roots = slice(t.roots, p.trees);
    let (features, targets) = (p.features as usize, p.targets as usize);
    let start = T::from_f64(match p.aggregate {
        AGGREGATE_MIN => p.extreme,
        AGGREGATE_MAX => -p.extreme,
        _ => 0.0,
    });
    let trees = T::from_f64(p.trees as f64);
    for row in 0..p.rows as usize {
        let features_of_row = core::slice::from_raw_parts(x.add(row * features), features);
        // Aggregated in the output's own type, as the reference does.
        let scores = core::slice::from_raw_parts_mut(y.add(row * targets), targets);
        scores.fill(start);
        for &root in roots {
            let Some(leaf) = walk(nodes, sets, root, features_of_row) else { return STATUS_INVALID_PARAMS };
            let Some(leaf) = leaves.get(leaf) else { return STATUS_INVALID_PARAMS };
            let Some(list) = range(contributions, leaf.first, leaf.count) else { return STATUS_INVALID_PARAMS };
            for c in list {
                let Some(slot) = usize::try_from(c.target).ok().and_then(|k| scores.get_mut(k)) else {
                    return STATUS_INVALID_PARAMS;
                };
                let w = T::from_f64(c.weight);
                *slot = match p.aggregate {
                    AGGREGATE_MIN if w < *slot => w,
                    AGGREGATE_MAX if w > *slot => w,
                    AGGREGATE_MIN | AGGREGATE_MAX => *slot,
                    AGGREGATE_AVERAGE => *slot + w / trees,
                    _ => *slot + w,
                };
            }
        }
        for (score, &base) in scores.iter_mut().zip(base_values) {
            *score = *score + T::from_f64(base);
        }
        post_transform(p.post_transform, scores);
    }
    STATUS_OK
}

unsafe fn slice<'a, E>(ptr: *const E, len: i64) -> &'a [E] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        core::slice::from_raw_parts(ptr, len as usize)
    }
}

fn range<E>(items: &[E], first: i64, count: i64) -> Option<&[E]> {
    let first = usize::try_from(first).ok()?;
    items.get(first..first.checked_add(usize::try_from(count).ok()?)?)
}

/// The leaf a row reaches from `root`; `None` for a malformed table.
fn walk<T: Real>(nodes: &[TreeNode], sets: &[f64], root: i64, x: &[T]) -> Option<usize> {
    let mut at = root;
    for _ in 0..=nodes.len() {
        if at < 0 {
            return usize::try_from(-(at + 1)).ok();
        }
        let node = nodes.get(usize::try_from(at).ok()?)?;
        let v = x.get(usize::try_from(node.feature).ok()?)?.to_f64();
        let taken = if v.is_nan() {
            node.missing_true != 0
        } else {
            match node.mode {
                TREE_LEQ => v <= node.split,
                TREE_LT => v < node.split,
                TREE_GTE => v >= node.split,
                TREE_GT => v > node.split,
                TREE_EQ => v == node.split,
                TREE_NEQ => v != node.split,
                TREE_MEMBER => range(sets, node.set_start, node.set_len)?.contains(&v),
                _ => return None,
            }
        };
        at = if taken { node.on_true } else { node.on_false };
    }
    None
}

/// The spec's post transforms over one row of scores (computed in f64).
pub(crate) fn post_transform<T: Real>(kind: i64, scores: &mut [T]) {
    let map =
        |scores: &mut [T], f: &dyn Fn(f64) -> f64| scores.iter_mut().for_each(|s| *s = T::from_f64(f(s.to_f64())));
    match kind {
        POST_SOFTMAX | POST_SOFTMAX_ZERO => {
            let zero_stays = kind == POST_SOFTMAX_ZERO;
            let max = scores.iter().fold(f64::NEG_INFINITY, |m, s| m.max(s.to_f64()));
            let term = |s: f64| if zero_stays && s == 0.0 { 0.0 } else { libm::exp(s - max) };
            let total: f64 = scores.iter().map(|s| term(s.to_f64())).sum();
            if total > 0.0 {
                map(scores, &|s| term(s) / total);
            }
        }
        POST_LOGISTIC => map(scores, &|s| 1.0 / (1.0 + libm::exp(-s))),
        POST_PROBIT => map(scores, &|s| core::f64::consts::SQRT_2 * inverse_erf(2.0 * s - 1.0)),
        _ => {}
    }
}

/// `erf⁻¹(x)`: Winitzki's closed-form approximation (a = 0.147, about 1e-3
/// relative error), refined by three Newton steps on libm's `erf`.
fn inverse_erf(x: f64) -> f64 {
    if x <= -1.0 {
        return f64::NEG_INFINITY;
    }
    if x >= 1.0 {
        return f64::INFINITY;
    }
    const A: f64 = 0.147;
    let ln = libm::log((1.0 - x) * (1.0 + x));
    let b = 2.0 / (core::f64::consts::PI * A) + ln / 2.0;
    let mut r = libm::sqrt(libm::sqrt(b * b - ln / A) - b).copysign(x);
    for _ in 0..3 {
        let err = libm::erf(r) - x;
        r -= err / (core::f64::consts::FRAC_2_SQRT_PI * libm::exp(-r * r));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x[0] <= 0.5 ? leaf 0 (target 0 += 1) : (x[1] in {2, 3} ? leaf 1 : leaf 2).
    fn tables() -> ([TreeNode; 2], [TreeLeaf; 3], [TreeContribution; 3], [f64; 2]) {
        let nodes = [
            TreeNode { split: 0.5, feature: 0, mode: TREE_LEQ, on_true: -1, on_false: 1, ..Default::default() },
            TreeNode {
                feature: 1,
                mode: TREE_MEMBER,
                on_true: -2,
                on_false: -3,
                set_start: 0,
                set_len: 2,
                ..Default::default()
            },
        ];
        let leaves =
            [TreeLeaf { first: 0, count: 1 }, TreeLeaf { first: 1, count: 1 }, TreeLeaf { first: 2, count: 1 }];
        let contributions = [
            TreeContribution { target: 0, weight: 1.0 },
            TreeContribution { target: 1, weight: 2.0 },
            TreeContribution { target: 1, weight: -4.0 },
        ];
        (nodes, leaves, contributions, [2.0, 3.0])
    }

    fn predict(x: &[f32], aggregate: i64, post: i64, roots: &[i64]) -> (i32, [f32; 2]) {
        let (nodes, leaves, contributions, sets) = tables();
        let p = TreeParams {
            rows: 1,
            features: 2,
            targets: 2,
            trees: roots.len() as i64,
            nodes: 2,
            leaves: 3,
            contributions: 3,
            set_values: 2,
            aggregate,
            post_transform: post,
            extreme: f32::MAX as f64,
            base_values: 0,
        };
        let mut y = [0f32; 2];
        let status = unsafe {
            onnxc_tree_ensemble_f32(
                &p,
                nodes.as_ptr(),
                leaves.as_ptr(),
                contributions.as_ptr(),
                sets.as_ptr(),
                roots.as_ptr(),
                [].as_ptr(),
                x.as_ptr(),
                y.as_mut_ptr(),
            )
        };
        (status, y)
    }

    #[test]
    fn rows_reach_the_leaf_their_features_choose() {
        assert_eq!(predict(&[0.25, 0.0], AGGREGATE_SUM, POST_NONE, &[0]), (STATUS_OK, [1.0, 0.0]));
        assert_eq!(predict(&[0.75, 3.0], AGGREGATE_SUM, POST_NONE, &[0]), (STATUS_OK, [0.0, 2.0]));
        assert_eq!(predict(&[0.75, 4.0], AGGREGATE_SUM, POST_NONE, &[0, 1]), (STATUS_OK, [0.0, -8.0]));
        assert_eq!(predict(&[0.75, 4.0], AGGREGATE_AVERAGE, POST_NONE, &[0, 1]), (STATUS_OK, [0.0, -4.0]));
        // MIN leaves an untouched target at the largest finite value.
        assert_eq!(predict(&[0.75, 4.0], AGGREGATE_MIN, POST_NONE, &[1]), (STATUS_OK, [f32::MAX, -4.0]));
        // A NaN feature goes to the false branch unless the node says otherwise.
        assert_eq!(predict(&[f32::NAN, 2.0], AGGREGATE_SUM, POST_NONE, &[0]), (STATUS_OK, [0.0, 2.0]));
    }

    #[test]
    fn post_transforms_follow_the_spec() {
        let (_, y) = predict(&[0.25, 0.0], AGGREGATE_SUM, POST_LOGISTIC, &[0]);
        assert!((y[0] - 1.0 / (1.0 + (-1.0f32).exp())).abs() < 1e-6 && (y[1] - 0.5).abs() < 1e-7);
        let (_, y) = predict(&[0.25, 0.0], AGGREGATE_SUM, POST_SOFTMAX, &[0]);
        assert!((y[0] + y[1] - 1.0).abs() < 1e-6 && y[0] > y[1]);
        let (_, y) = predict(&[0.25, 0.0], AGGREGATE_SUM, POST_SOFTMAX_ZERO, &[0]);
        assert_eq!(y, [1.0, 0.0]);
        for p in [0.025, 0.5, 0.9, 0.999] {
            let mut s = [p];
            post_transform(POST_PROBIT, &mut s);
            let back: f64 = 0.5 * (1.0 + libm::erf(s[0] / core::f64::consts::SQRT_2));
            assert!((back - p).abs() < 1e-12, "probit({p}) = {}", s[0]);
        }
    }

    #[test]
    fn a_cycle_or_a_bad_index_is_refused() {
        // A root past the table.
        assert_eq!(predict(&[0.75, 4.0], AGGREGATE_SUM, POST_NONE, &[5]).0, STATUS_INVALID_PARAMS);
        let looping = [TreeNode { mode: TREE_LEQ, on_true: 0, on_false: 0, ..Default::default() }];
        assert_eq!(walk(&looping, &[], 0, &[0.0f32]), None);
        let bad_feature = [TreeNode { feature: 3, on_true: -1, on_false: -1, ..Default::default() }];
        assert_eq!(walk(&bad_feature, &[], 0, &[0.0f32]), None);
    }
}
