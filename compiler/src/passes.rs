//! Stage 5: graph rewrites, run in order by [`run`]. Today: dead-code
//! elimination (nodes none of whose outputs reach a graph output).

use crate::ir::Graph;
use std::collections::HashSet;

pub fn run(graph: &mut Graph) {
    eliminate_dead_nodes(graph);
}

/// Removes nodes whose outputs are neither graph outputs nor read by a
/// live node.
pub fn eliminate_dead_nodes(graph: &mut Graph) {
    let mut live: HashSet<_> = graph.outputs.iter().copied().collect();
    let mut keep = vec![false; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate().rev() {
        if node.outputs.iter().any(|o| live.contains(o)) {
            keep[i] = true;
            live.extend(node.inputs.iter().flatten().copied());
        }
    }
    let mut k = keep.into_iter();
    graph.nodes.retain(|_| k.next().unwrap_or(false));
}
