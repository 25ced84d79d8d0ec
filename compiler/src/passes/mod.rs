//! Stage 5: graph rewrites, run in order by [`run`], and the verifier that
//! checks the mid-IR's invariants between them (in debug builds and tests).
//! Each rewrite is a plain function in its own file; a rewrite never makes
//! the code worse.

use crate::ir::{DType, Graph, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::Op;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::{HashMap, HashSet};

mod affine;
mod choose_layout;
mod fold_affine;
mod fold_matmul_scale;
mod fuse_conv_activation;
mod fuse_conv_add;
mod fuse_conv_prologue;
mod fuse_elementwise;
mod fuse_gelu;
mod fuse_layer_norm;
mod fuse_matmul_add;
mod fuse_qdq;
mod fuse_rms_norm;
mod gemm_by_splat;
mod pack_conv_weights;
mod pack_gemm_weights;
mod pack_rnn_weights;
mod pattern;
#[cfg(test)]
pub(crate) mod test_graph;

pub use choose_layout::choose_layout;
pub use fold_affine::fold_affine_into_conv;
pub use fold_matmul_scale::fold_matmul_scale;
pub use fuse_conv_activation::fuse_conv_activation;
pub use fuse_conv_add::fuse_conv_add;
pub use fuse_conv_prologue::fuse_conv_prologue;
pub use fuse_elementwise::fuse_elementwise;
pub use fuse_gelu::fuse_gelu;
pub use fuse_layer_norm::fuse_layer_norm;
pub use fuse_matmul_add::fuse_matmul_add;
pub use fuse_qdq::fuse_qdq;
pub use fuse_rms_norm::fuse_rms_norm;
pub use gemm_by_splat::gemm_by_splat;
pub use pack_conv_weights::pack_conv_weights;
pub use pack_gemm_weights::pack_gemm_weights;
pub use pack_rnn_weights::pack_rnn_weights;

/// Every rewrite, in order. `portable` code calls no kernels, so nothing
/// is laid out for them (weights stay in the ONNX layout) and nothing is
/// fused into them that their loops would not do.
pub fn run(graph: &mut Graph, portable: bool) {
    eliminate_dead_nodes(graph);
    // The rewrites read static shapes; a graph compiled for a range of
    // sizes holds upper bounds there, which they would take for sizes.
    if graph.symbolic.is_some() {
        return;
    }
    fuse_qdq(graph, portable);
    fold_affine_into_conv(graph);
    fuse_conv_add(graph);
    fuse_conv_activation(graph);
    fuse_matmul_add(graph);
    gemm_by_splat(graph);
    fold_matmul_scale(graph);
    if !portable {
        fuse_layer_norm(graph); // first: a written-out LayerNorm ends in RMS of its deviations
        fuse_rms_norm(graph);
        fuse_gelu(graph);
        choose_layout(graph);
        pack_conv_weights(graph);
        pack_gemm_weights(graph);
        pack_rnn_weights(graph);
        fuse_conv_prologue(graph);
    }
    fuse_elementwise(graph);
    eliminate_dead_nodes(graph);
    debug_assert_eq!(verify(graph), Ok(()));
}

/// Checks the mid-IR invariants: every value has exactly one definition
/// (graph input, constant or one node output), nodes only read values
/// defined earlier in the schedule, the data-flow graph is acyclic, and
/// every graph output is defined.
pub fn verify(graph: &Graph) -> Result<(), String> {
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for &out in &node.outputs {
            if !matches!(graph.value(out).def, ValueDef::Computed) || producer.insert(out, i).is_some() {
                return Err(format!(
                    "{}: output \"{}\" is defined more than once",
                    node.label(),
                    graph.value(out).name
                ));
            }
        }
    }
    let mut flow: DiGraph<usize, ()> = DiGraph::new();
    let indices: Vec<NodeIndex> = (0..graph.nodes.len()).map(|i| flow.add_node(i)).collect();
    for (i, node) in graph.nodes.iter().enumerate() {
        for &input in node.inputs.iter().flatten() {
            match (&graph.value(input).def, producer.get(&input)) {
                (ValueDef::Computed, Some(&p)) if p < i => {
                    flow.add_edge(indices[p], indices[i], ());
                }
                (ValueDef::Computed, _) => {
                    return Err(format!(
                        "{}: reads \"{}\" before it is computed",
                        node.label(),
                        graph.value(input).name
                    ))
                }
                _ => {}
            }
        }
    }
    petgraph::algo::toposort(&flow, None).map_err(|_| "the data-flow graph has a cycle".to_string())?;
    for &out in &graph.outputs {
        if matches!(graph.value(out).def, ValueDef::Computed) && !producer.contains_key(&out) {
            return Err(format!("graph output \"{}\" is not computed", graph.value(out).name));
        }
    }
    Ok(())
}

/// For each node, the number of guarded or repeated range markers
/// (Guard, EndGuard, LoopStart, LoopEnd) up to it: a rewrite that moves or
/// merges nodes keeps them within one number, never across a marker.
pub fn regions(graph: &Graph) -> Vec<usize> {
    let mut markers = 0;
    let mut region = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        if matches!(node.op, Op::Guard(_) | Op::EndGuard(_) | Op::LoopStart(_) | Op::LoopEnd(_)) {
            markers += 1;
        }
        region.push(markers);
    }
    region
}

/// Node `index`'s f32 data input (0) shape and constant weights (input
/// 1), when it has both: where the weight-packing passes start.
pub(crate) fn f32_input_and_weights(graph: &Graph, index: usize) -> Option<(Vec<usize>, &Tensor)> {
    let node = &graph.nodes[index];
    let (Some(Some(x)), Some(Some(w))) = (node.inputs.first().copied(), node.inputs.get(1).copied()) else {
        return None;
    };
    match (graph.concrete(x), graph.const_value(w)) {
        (Some((DType::F32, x_shape)), Some(weights)) => Some((x_shape, weights)),
        _ => None,
    }
}

/// Puts `packed`, a constant laid out by a kernel library packer, in place
/// of input `slot` of node `node`, as a new f32 value named after the old
/// one with `suffix`: what the weight-packing passes share.
pub(crate) fn swap_in_packed(graph: &mut Graph, node: usize, slot: usize, suffix: &str, packed: &[f32]) {
    let Some(Some(old)) = graph.nodes[node].inputs.get(slot).copied() else { return };
    let tensor = Tensor::from_f32s(vec![packed.len()], packed);
    let name = format!("{}.{suffix}", graph.value(old).name);
    let ty = TensorType::known(DType::F32, &tensor.shape);
    let packed_id = graph.add_value(name, Some(ty), ValueDef::Const(tensor));
    graph.nodes[node].inputs[slot] = Some(packed_id);
}

/// How many times each value is read: by nodes, and as a graph output.
pub fn use_counts(graph: &Graph) -> HashMap<ValueId, usize> {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    for v in graph.nodes.iter().flat_map(|n| n.inputs.iter().flatten()).chain(&graph.outputs) {
        *uses.entry(*v).or_default() += 1;
    }
    uses
}

/// The index of the node computing each value.
pub fn producers(graph: &Graph) -> HashMap<ValueId, usize> {
    graph.nodes.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |&o| (o, i))).collect()
}

/// Removes nodes whose outputs are neither graph outputs nor read by a
/// live node. Nodes without outputs (guard markers) stay.
pub fn eliminate_dead_nodes(graph: &mut Graph) {
    let mut live: HashSet<_> = graph.outputs.iter().copied().collect();
    let mut keep = vec![false; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate().rev() {
        if node.outputs.is_empty() || node.outputs.iter().any(|o| live.contains(o)) {
            keep[i] = true;
            live.extend(node.inputs.iter().flatten().copied());
        }
    }
    let mut k = keep.into_iter();
    graph.nodes.retain(|_| k.next().unwrap_or(false));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Node, Tensor};
    use crate::ops::elementwise::{Elementwise, Func};

    fn relu() -> crate::ops::Op {
        Elementwise { op_type: "Relu", func: Func::Relu }.into()
    }

    /// x -> relu -> a -> relu -> y, plus an unused relu(x) -> dead.
    fn chain() -> Graph {
        let mut g = Graph::default();
        let x = g.add_value("x", None, ValueDef::Input(0));
        let a = g.add_value("a", None, ValueDef::Computed);
        let y = g.add_value("y", None, ValueDef::Computed);
        let dead = g.add_value("dead", None, ValueDef::Computed);
        g.inputs = vec![x];
        g.outputs = vec![y];
        g.nodes = vec![
            Node { name: "n1".into(), op: relu(), inputs: vec![Some(x)], outputs: vec![a] },
            Node { name: "unused".into(), op: relu(), inputs: vec![Some(x)], outputs: vec![dead] },
            Node { name: "n2".into(), op: relu(), inputs: vec![Some(a)], outputs: vec![y] },
        ];
        g
    }

    #[test]
    fn dead_nodes_are_removed_and_the_result_verifies() {
        let mut g = chain();
        assert_eq!(verify(&g), Ok(()));
        eliminate_dead_nodes(&mut g);
        let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["n1", "n2"]);
        assert_eq!(verify(&g), Ok(()));
    }

    #[test]
    fn the_verifier_rejects_reads_before_definition_and_double_definitions() {
        let mut g = chain();
        g.nodes.swap(0, 2);
        assert!(verify(&g).unwrap_err().contains("before it is computed"));
        let mut g = chain();
        let a = g.nodes[0].outputs[0];
        g.nodes[1].outputs = vec![a];
        assert!(verify(&g).unwrap_err().contains("defined more than once"));
        let mut g = chain();
        let x = g.inputs[0];
        g.value_mut(x).def = ValueDef::Const(Tensor::from_f32s(vec![], &[1.0]));
        assert_eq!(verify(&g), Ok(()));
    }
}
