//! Chains of elementwise nodes merged into one `FusedElementwise` node
//! (ops/fused.rs), evaluated in one loop with the intermediate values in
//! registers.
//!
//! CNNs put several elementwise operators between two convolutions
//! (DenseNet: BatchNormalization, a per-channel Mul and Add, Relu); each
//! alone is a full pass over memory, and together they cost more than the
//! convolution they feed. A link joins a node to the one that reads its
//! output when that output is read by it alone (not a graph output), both
//! are fusable, and the reader's result has the link value's type and
//! shape (the other operands broadcast into it). Fusable: f32/f64
//! arithmetic and activations that `elementwise::emit_scalar` computes
//! from operands of one element type (the `chains` column of their rows),
//! and inference-mode BatchNormalization with per-channel statistics.
//! Links never cross a guarded or repeated range's markers. Each maximal
//! chain of two or more nodes becomes one node at the place of its last
//! node (every operand is computed by then).

use crate::ir::{DType, Graph, Node};
use crate::ops::elementwise::Func;
use crate::ops::fused::{Arg, FusedElementwise, Step};
use crate::ops::Op;

/// A fusable node: its step (operands still node input slots) and the
/// input slots that may carry the chain's running value into it.
struct Member {
    step: Step,
    chain_slots: Vec<usize>,
}

fn member(graph: &Graph, node: &Node) -> Option<Member> {
    let [out] = node.outputs.as_slice() else { return None };
    let (dtype, shape) = graph.concrete(*out)?;
    if !matches!(dtype, DType::F32 | DType::F64) {
        return None;
    }
    let same_type = |slot: usize| {
        node.inputs.get(slot).copied().flatten().and_then(|v| graph.concrete(v)).is_some_and(|(d, _)| d == dtype)
    };
    let full = |slot: usize| {
        node.inputs.get(slot).copied().flatten().and_then(|v| graph.concrete(v)) == Some((dtype, shape.clone()))
    };
    match &node.op {
        Op::Elementwise(e) if e.func.row().chains => {
            let present: Vec<usize> = (0..node.inputs.len()).filter(|&i| node.inputs[i].is_some()).collect();
            if !present.iter().all(|&i| same_type(i)) {
                return None;
            }
            // Unary functions and Clip carry the chain in input 0 only.
            let binary = matches!(
                e.func,
                Func::Add | Func::Sub | Func::Mul | Func::Div | Func::Max | Func::Min | Func::Sum | Func::Mean
            );
            let chain_slots: Vec<usize> = present.iter().copied().filter(|&i| (binary || i == 0) && full(i)).collect();
            let args = present.iter().map(|&i| (i, Arg::Input(i))).collect();
            Some(Member { step: Step::Apply { func: e.func, args }, chain_slots })
        }
        Op::BatchNorm(bn) if bn.training.is_none() && shape.len() >= 2 => {
            let channels = [shape[1]];
            let stats_ok = (1..5).all(|i| {
                node.inputs.get(i).copied().flatten().and_then(|v| graph.concrete(v))
                    == Some((dtype, channels.to_vec()))
            });
            (stats_ok && full(0)).then(|| Member {
                step: Step::BatchNorm { epsilon: bn.epsilon, stats: [1, 2, 3, 4] },
                chain_slots: vec![0],
            })
        }
        _ => None,
    }
}

pub fn fuse_elementwise(graph: &mut Graph) {
    let uses = super::use_counts(graph);
    let producer = super::producers(graph);
    let region = super::regions(graph);
    let members: Vec<Option<Member>> = graph.nodes.iter().map(|n| member(graph, n)).collect();
    // The chain slot through which each node continues its predecessor's chain.
    let mut link_slot: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    let mut next: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    for q in 0..graph.nodes.len() {
        let Some(m) = &members[q] else { continue };
        for &slot in &m.chain_slots {
            let Some(v) = graph.nodes[q].inputs[slot] else { continue };
            let Some(&p) = producer.get(&v) else { continue };
            if members[p].is_some() && next[p].is_none() && uses.get(&v) == Some(&1) && region[p] == region[q] {
                next[p] = Some(q);
                link_slot[q] = Some(slot);
                break;
            }
        }
    }
    let mut replaced: Vec<Option<Node>> = vec![None; graph.nodes.len()];
    let mut removed = vec![false; graph.nodes.len()];
    for head in 0..graph.nodes.len() {
        if link_slot[head].is_some() || next[head].is_none() {
            continue;
        }
        let mut chain = vec![head];
        while let Some(q) = next[*chain.last().unwrap_or(&head)] {
            chain.push(q);
        }
        let first_slot = members[head].as_ref().and_then(|m| m.chain_slots.first().copied());
        let Some(first_slot) = first_slot else { continue };
        let mut inputs = vec![graph.nodes[head].inputs[first_slot]];
        let mut steps = Vec::with_capacity(chain.len());
        for &n in &chain {
            let Some(m) = &members[n] else { continue };
            let chain_slot = link_slot[n].unwrap_or(first_slot);
            let node_inputs = &graph.nodes[n].inputs;
            // The fused node's input that slot `slot` of node `n` becomes.
            let mut input = |slot: usize| {
                inputs.push(node_inputs[slot]);
                inputs.len() - 1
            };
            steps.push(match &m.step {
                Step::Apply { func, args } => {
                    let args = args
                        .iter()
                        .map(|&(slot, _)| (slot, if slot == chain_slot { Arg::Chain } else { Arg::Input(input(slot)) }))
                        .collect();
                    Step::Apply { func: *func, args }
                }
                Step::BatchNorm { epsilon, stats } => Step::BatchNorm { epsilon: *epsilon, stats: stats.map(input) },
            });
        }
        let tail = *chain.last().unwrap_or(&head);
        let name = chain.iter().map(|&n| graph.nodes[n].name.as_str()).collect::<Vec<_>>().join("+");
        replaced[tail] = Some(Node {
            name,
            op: Op::FusedElementwise(FusedElementwise { steps }),
            inputs,
            outputs: graph.nodes[tail].outputs.clone(),
        });
        for &n in &chain[..chain.len() - 1] {
            removed[n] = true;
        }
    }
    for (i, node) in replaced.into_iter().enumerate() {
        if let Some(node) = node {
            graph.nodes[i] = node;
        }
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, ValueDef, ValueId};
    use crate::ops::elementwise::Elementwise;
    use crate::ops::norm::BatchNorm;
    use crate::passes::test_graph::{assert_same_f32s, constant, push, run_bytes, value};

    fn apply(op_type: &'static str, func: Func) -> Op {
        Elementwise { op_type, func }.into()
    }

    const SHAPE: [usize; 4] = [1, 3, 2, 5];

    /// Deterministic inputs with both signs, zeros of both signs, a NaN,
    /// an infinity and a range wide enough for every activation to bend.
    fn input(seed: f32) -> Tensor {
        let values: Vec<f32> = (0..30).map(|i| ((i as f32 + seed) * 0.73).sin() * 4.0).collect();
        let mut values = values;
        values[3] = 0.0;
        values[7] = -0.0;
        values[12] = f32::NAN;
        values[21] = f32::INFINITY;
        Tensor::from_f32s(SHAPE.to_vec(), &values)
    }

    /// `x → BatchNormalization → Mul(·, m[3,1,1]) → Sub(k[3,1,1], ·) → Relu
    /// → Sigmoid → Max(·, z) → Clip(·, -0.5, 0.75) → LeakyRelu → y`, with
    /// `z` a second full-size input, and when `tap` the Sub's result also a
    /// graph output (so the chain is cut there).
    fn graph(tap: bool) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &SHAPE, ValueDef::Input(0));
        let z = value(&mut g, "z", &SHAPE, ValueDef::Input(1));
        let stats: Vec<ValueId> = [[1.5, 0.5, -1.0], [0.0, 0.25, -0.5], [0.2, -0.1, 0.05], [0.9, 1.1, 0.3]]
            .iter()
            .enumerate()
            .map(|(i, v)| constant(&mut g, &format!("stat{i}"), &[3], v))
            .collect();
        let m = constant(&mut g, "m", &[3, 1, 1], &[0.7, -1.3, 2.1]);
        let k = constant(&mut g, "k", &[3, 1, 1], &[0.1, 0.2, -0.3]);
        let (lo, hi) = (constant(&mut g, "lo", &[], &[-0.5]), constant(&mut g, "hi", &[], &[0.75]));
        let names = ["bn", "mul", "sub", "relu", "sigmoid", "max", "clip", "leaky"];
        let v: Vec<ValueId> =
            names.iter().map(|n| value(&mut g, &format!("{n}_out"), &SHAPE, ValueDef::Computed)).collect();
        let bn = BatchNorm { epsilon: 1e-5, spatial: true, training: None };
        push(&mut g, "bn", bn, &[x, stats[0], stats[1], stats[2], stats[3]], v[0]);
        push(&mut g, "mul", apply("Mul", Func::Mul), &[v[0], m], v[1]);
        push(&mut g, "sub", apply("Sub", Func::Sub), &[k, v[1]], v[2]);
        push(&mut g, "relu", apply("Relu", Func::Relu), &[v[2]], v[3]);
        push(&mut g, "sigmoid", apply("Sigmoid", Func::Sigmoid), &[v[3]], v[4]);
        push(&mut g, "max", apply("Max", Func::Max), &[v[4], z], v[5]);
        push(&mut g, "clip", apply("Clip", Func::Clip), &[v[5], lo, hi], v[6]);
        push(&mut g, "leaky", apply("LeakyRelu", Func::LeakyRelu { alpha: 0.1 }), &[v[6]], v[7]);
        g.inputs = vec![x, z];
        g.outputs = vec![v[7]];
        if tap {
            g.outputs.push(v[2]);
        }
        g
    }

    fn fused(g: &Graph) -> Graph {
        let mut rewritten = g.clone();
        fuse_elementwise(&mut rewritten);
        assert_eq!(crate::passes::verify(&rewritten), Ok(()));
        rewritten
    }

    fn same_bits(before: &Graph, after: &Graph) {
        let inputs = [input(0.0), input(11.0)];
        for portable in [false, true] {
            let (want, got) = (run_bytes(before, &inputs, portable), run_bytes(after, &inputs, portable));
            assert_same_f32s(&got, &want, &format!("portable: {portable}"));
        }
    }

    #[test]
    fn a_chain_becomes_one_node_computing_the_same_bits() {
        let g = graph(false);
        let after = fused(&g);
        assert_eq!(after.nodes.len(), 1);
        assert_eq!(after.nodes[0].name, "bn+mul+sub+relu+sigmoid+max+clip+leaky");
        let Op::FusedElementwise(f) = &after.nodes[0].op else { panic!("not fused: {:?}", after.nodes[0].op) };
        assert_eq!(f.steps.len(), 8);
        assert_eq!(f.steps[0], Step::BatchNorm { epsilon: 1e-5, stats: [1, 2, 3, 4] });
        // Sub keeps its operand order: the constant first, the chain second.
        assert_eq!(f.steps[2], Step::Apply { func: Func::Sub, args: vec![(0, Arg::Input(6)), (1, Arg::Chain)] });
        assert_eq!(after.nodes[0].inputs[0], g.inputs.first().copied());
        assert_eq!(after.nodes[0].outputs, g.outputs);
        same_bits(&g, &after);
    }

    #[test]
    fn a_value_read_elsewhere_ends_a_chain() {
        let g = graph(true);
        let after = fused(&g);
        let names: Vec<&str> = after.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["bn+mul+sub", "relu+sigmoid+max+clip+leaky"]);
        same_bits(&g, &after);
    }

    #[test]
    fn a_broadcasting_first_operand_does_not_carry_the_chain() {
        // Add(m[3,1,1], x) then Relu: the Add's chain operand is x, in slot 1.
        let mut g = Graph::default();
        let x = value(&mut g, "x", &SHAPE, ValueDef::Input(0));
        let m = constant(&mut g, "m", &[3, 1, 1], &[0.7, -1.3, 2.1]);
        let (a, y) = (value(&mut g, "a", &SHAPE, ValueDef::Computed), value(&mut g, "y", &SHAPE, ValueDef::Computed));
        push(&mut g, "add", apply("Add", Func::Add), &[m, x], a);
        push(&mut g, "relu", apply("Relu", Func::Relu), &[a], y);
        g.inputs = vec![x];
        g.outputs = vec![y];
        let after = fused(&g);
        let Op::FusedElementwise(f) = &after.nodes[0].op else { panic!("not fused: {:?}", after.nodes[0].op) };
        assert_eq!(after.nodes[0].inputs, [Some(x), Some(m)]);
        assert_eq!(f.steps[0], Step::Apply { func: Func::Add, args: vec![(0, Arg::Input(1)), (1, Arg::Chain)] });
        let inputs = [input(3.0)];
        assert_same_f32s(&run_bytes(&after, &inputs, false), &run_bytes(&g, &inputs, false), "Add, Relu");
    }
}
