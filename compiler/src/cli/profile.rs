//! The report of `onnxc bench --profile`: each node's median time over the
//! timed runs (medians, because a shared machine's noise comes in bursts
//! that a mean would spread over every node), largest first, then the same
//! times summed by operator. Convolutions also get their shape and rate,
//! which is what is compared against the kernel benches.

use onnxc::ir::{Graph, Node};
use onnxc::ops::Op;
use std::collections::BTreeMap;

/// Prints the report for `runs`, each the nanoseconds per node of one run.
pub fn print(graph: &Graph, runs: &[Vec<u64>]) {
    let medians: Vec<f64> = (0..graph.nodes.len())
        .map(|node| {
            let mut times: Vec<u64> = runs.iter().map(|run| run[node]).collect();
            times.sort_unstable();
            times.get(times.len() / 2).map_or(0.0, |&ns| ns as f64 / 1e6)
        })
        .collect();
    let total: f64 = medians.iter().sum();
    let mut order: Vec<usize> = (0..medians.len()).collect();
    order.sort_by(|&x, &y| medians[y].total_cmp(&medians[x]));
    println!("per node, median of {} runs (sum {total:.2} ms):", runs.len());
    println!("{:>9} {:>6} {:>6}  {:<18} {:<28} shape", "ms", "%", "cum %", "op", "node");
    let mut cumulative = 0.0;
    for node in order {
        let ms = medians[node];
        cumulative += ms;
        let n = &graph.nodes[node];
        println!(
            "{ms:>9.3} {:>6.1} {:>6.1}  {:<18} {:<28} {}",
            percent(ms, total),
            percent(cumulative, total),
            n.op.name(),
            n.name,
            shape_and_rate(graph, n, ms)
        );
    }
    let mut by_op: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for (n, ms) in graph.nodes.iter().zip(&medians) {
        let entry = by_op.entry(n.op.name()).or_default();
        entry.0 += ms;
        entry.1 += 1;
    }
    let mut by_op: Vec<_> = by_op.into_iter().collect();
    by_op.sort_by(|x, y| y.1 .0.total_cmp(&x.1 .0));
    println!("per operator:");
    for (op, (ms, count)) in by_op {
        println!("{ms:>9.3} {:>6.1}  {op} ({count} nodes)", percent(ms, total));
    }
}

fn percent(part: f64, total: f64) -> f64 {
    if total > 0.0 {
        100.0 * part / total
    } else {
        0.0
    }
}

/// The output's shape; for a convolution also its input, weights, strides,
/// group and GFLOP/s at `ms`.
fn shape_and_rate(graph: &Graph, node: &Node, ms: f64) -> String {
    let shape = |v: Option<onnxc::ir::ValueId>| {
        v.and_then(|v| graph.value(v).ty.as_ref()).and_then(|t| t.known_shape()).unwrap_or_default()
    };
    let dims = |s: &[usize]| s.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
    let output = shape(node.outputs.first().copied());
    let Op::Conv(conv) = &node.op else {
        return dims(&output);
    };
    let input = shape(node.inputs.first().copied().flatten());
    let weights =
        conv.layout.packed_weights().map_or_else(|| shape(node.inputs.get(1).copied().flatten()), <[usize]>::to_vec);
    let per_output: usize = weights.iter().skip(1).product();
    let flops = 2.0 * (output.iter().product::<usize>() * per_output) as f64;
    let rate = if ms > 0.0 { flops / (ms * 1e6) } else { 0.0 };
    let strides = dims(&conv.window.strides);
    format!("{} <- {} w {} s{strides} g{} {rate:.1} GFLOP/s", dims(&output), dims(&input), dims(&weights), conv.group)
}
