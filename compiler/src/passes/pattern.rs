//! What the pattern fusions (normalisations, GELU) share: a [`Matcher`],
//! which reads the graph backwards from a node through values nothing else
//! reads, and [`fuse_matches`], which puts one node in the place of each
//! match.
//!
//! A match only ever takes nodes whose outputs the fused node alone
//! consumes, so removing them changes nothing else; the fused node takes
//! the place of the match's last node, after which its inputs are all
//! defined, and never joins nodes across a guarded or repeated range's
//! marker.

use super::{producers, regions, use_counts};
use crate::ir::shape::broadcast;
use crate::ir::{DType, Graph, ValueId};
use crate::ops::elementwise::Func;
use crate::ops::reduce::ReduceKind;
use crate::ops::Op;
use std::collections::HashMap;

/// A pattern found in the graph: the nodes it replaces (the last one
/// first) and the operator that computes them, with its inputs.
pub(super) struct Match {
    pub nodes: Vec<usize>,
    pub op: Op,
    pub inputs: Vec<ValueId>,
}

/// Replaces each match `find` reports at a node (its last) with one node.
pub(super) fn fuse_matches(graph: &mut Graph, find: impl Fn(&Matcher, usize) -> Option<Match>) {
    let matcher = Matcher { graph, uses: use_counts(graph), producer: producers(graph) };
    let region = regions(graph);
    let mut found = Vec::new();
    let mut removed = vec![false; graph.nodes.len()];
    for last in 0..graph.nodes.len() {
        let Some(m) = find(&matcher, last) else { continue };
        if m.nodes.iter().any(|&i| removed[i] || region[i] != region[last]) {
            continue;
        }
        m.nodes.iter().filter(|&&i| i != last).for_each(|&i| removed[i] = true);
        found.push((last, m));
    }
    for (last, mut m) in found {
        m.nodes.sort_unstable();
        let name = m.nodes.iter().map(|&i| graph.nodes[i].name.as_str()).collect::<Vec<_>>().join("+");
        let node = &mut graph.nodes[last];
        node.op = m.op;
        node.inputs = m.inputs.into_iter().map(Some).collect();
        node.name = name;
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

/// The graph with the uses and producer of each value.
pub(super) struct Matcher<'a> {
    pub graph: &'a Graph,
    uses: HashMap<ValueId, usize>,
    producer: HashMap<ValueId, usize>,
}

impl Matcher<'_> {
    /// The two or one inputs of elementwise node `i` if it computes `func`.
    pub fn elementwise<const N: usize>(&self, i: usize, func: Func) -> Option<[ValueId; N]> {
        let node = &self.graph.nodes[i];
        let Op::Elementwise(e) = &node.op else { return None };
        if e.func != func || node.inputs.len() != N {
            return None;
        }
        let mut inputs = [node.inputs[0]?; N];
        for (k, input) in node.inputs.iter().enumerate() {
            inputs[k] = (*input)?;
        }
        Some(inputs)
    }

    /// The node computing `v` if `v` is read `uses` times.
    pub fn producer_used(&self, v: ValueId, uses: usize) -> Option<usize> {
        (self.uses.get(&v) == Some(&uses)).then(|| self.producer.get(&v).copied())?
    }

    /// The node computing `v` if nothing else reads it.
    pub fn single_use(&self, v: ValueId) -> Option<usize> {
        self.producer_used(v, 1)
    }

    /// The value of a one-element constant.
    pub fn scalar(&self, v: ValueId) -> Option<f32> {
        self.graph.const_value(v).filter(|t| t.len() == 1).map(|t| t.get_f64(0) as f32)
    }

    /// The operands of node `i`, a binary `func` with a float output, as
    /// `(value, operand)` in each order where the operand broadcasts to
    /// the output in its type without widening it (a scale or a bias).
    pub fn affine(&self, i: usize, func: Func) -> Vec<(ValueId, ValueId)> {
        let Some(([a, b], (dtype, shape))) = self.elementwise(i, func).zip(self.output_type(i)) else {
            return Vec::new();
        };
        let fits = |v: ValueId| {
            self.graph.concrete(v).is_some_and(|(d, s)| d == dtype && broadcast(&s, &shape).as_ref() == Some(&shape))
        };
        let float = matches!(dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64);
        [(a, b), (b, a)].into_iter().filter(|&(_, operand)| float && fits(operand)).collect()
    }

    /// The factors of the product ending at node `i`, a `Mul` whose operands
    /// may themselves be `Mul`s nothing else reads, with the nodes taken.
    pub fn factors(&self, i: usize) -> Option<(Vec<ValueId>, Vec<usize>)> {
        let [a, b] = self.elementwise(i, Func::Mul)?;
        let (mut factors, mut nodes) = (Vec::new(), vec![i]);
        for v in [a, b] {
            let inner = self.single_use(v).and_then(|j| Some((j, self.elementwise::<2>(j, Func::Mul)?)));
            match inner {
                Some((j, operands)) => {
                    factors.extend(operands);
                    nodes.push(j);
                }
                None => factors.push(v),
            }
        }
        Some((factors, nodes))
    }

    /// The type of node `i`'s output.
    pub fn output_type(&self, i: usize) -> Option<(DType, Vec<usize>)> {
        self.graph.concrete(*self.graph.nodes[i].outputs.first()?)
    }

    /// `Sqrt(Add(v, eps))` computing `r`: `v`, epsilon and the two nodes.
    pub fn sqrt_plus_epsilon(&self, r: ValueId) -> Option<(ValueId, f32, [usize; 2])> {
        let sqrt = self.single_use(r)?;
        let [sum] = self.elementwise(sqrt, Func::Sqrt)?;
        let add = self.single_use(sum)?;
        let [a, b] = self.elementwise(add, Func::Add)?;
        let (v, epsilon) = [(a, b), (b, a)].into_iter().find_map(|(v, e)| Some((v, self.scalar(e)?)))?;
        Some((v, epsilon, [sqrt, add]))
    }

    /// Whether node `i` squares `x`: `Pow(x, 2)` or `Mul(x, x)`.
    pub fn squares(&self, i: usize, x: ValueId) -> bool {
        match (self.elementwise(i, Func::Pow), self.elementwise(i, Func::Mul)) {
            (Some([base, two]), _) => base == x && self.scalar(two) == Some(2.0),
            (_, Some([p, q])) => p == x && q == x,
            _ => false,
        }
    }

    /// Node `i` as a ReduceMean over the trailing axes from `axis` on,
    /// keeping them: `axis` and the reduced value.
    pub fn trailing_mean(&self, i: usize) -> Option<(usize, ValueId)> {
        let node = &self.graph.nodes[i];
        let Op::Reduce(reduce) = &node.op else { return None };
        let [Some(input), Some(axes)] = node.inputs[..] else { return None };
        let rank = self.graph.concrete(input)?.1.len() as i64;
        let keeps = reduce.kind == ReduceKind::Mean && reduce.keepdims;
        let axes = self.graph.const_value(axes)?.to_i64s();
        let mut axes: Vec<usize> = axes.iter().map(|&a| a.rem_euclid(rank.max(1)) as usize).collect();
        axes.sort_unstable();
        let first = *axes.first()?;
        (keeps && axes.iter().copied().eq(first..rank as usize)).then_some((first, input))
    }
}
