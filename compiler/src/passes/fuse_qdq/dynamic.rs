//! quantize_dynamic's products in one node: `MatMulInteger(x_q, W, x_zp,
//! w_zp) → Cast(to f32) → Mul(·, scale) [→ Add(·, bias)]` becomes one
//! scaled MatMulInteger (`IntegerProduct::scaled_matmul`), whose kernel
//! converts the i32 sums to f32, multiplies and adds in place
//! (`onnxc_scale_product`) instead of three elementwise passes over the
//! output and an i32 tensor between them.
//!
//! Applies when each intermediate is read by the next node alone, in the
//! same region, and the scale and bias are f32 of one entry or one per
//! output column (`[n]`, or `[1, ..., n]`) so that broadcasting them
//! leaves the product's shape. **Exact:** the kernel performs the same f32
//! conversion, multiplication and addition per element as the three
//! nodes, so the output is theirs bit for bit (`tests`).

use super::super::{regions, use_counts};
use crate::ir::{DType, Graph, Node, ValueId};
use crate::ops::elementwise::{Elementwise, Func};
use crate::ops::quant::IntegerProduct;
use crate::ops::Op;
use std::collections::HashMap;

/// The elementwise node `index` if it computes `func`'s kind.
fn elementwise<'g>(graph: &'g Graph, index: usize, name: &str) -> Option<&'g Node> {
    let node = &graph.nodes[index];
    matches!(&node.op, Op::Elementwise(Elementwise { op_type, .. }) if *op_type == name).then_some(node)
}

/// Whether `v` is an f32 operand that broadcasts along the columns of the
/// product `shape` without growing it.
fn column_operand(graph: &Graph, v: ValueId, shape: &[usize]) -> bool {
    let Some((dtype, s)) = graph.concrete(v) else { return false };
    let count: usize = s.iter().product();
    let n = shape.last().copied().unwrap_or(1);
    let columns = s.last() == Some(&n) && count == n && s.len() <= shape.len();
    dtype == DType::F32 && (count == 1 && s.len() <= shape.len() || columns)
}

/// The other input of the two-input node `node` than `v`.
fn other(node: &Node, v: ValueId) -> Option<ValueId> {
    match node.inputs[..] {
        [Some(a), Some(b)] if a == v => Some(b),
        [Some(a), Some(b)] if b == v => Some(a),
        _ => None,
    }
}

pub(super) fn fuse_scaled_products(graph: &mut Graph) {
    let (uses, region) = (use_counts(graph), regions(graph));
    let mut reader: HashMap<ValueId, usize> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for v in node.inputs.iter().flatten() {
            reader.insert(*v, i);
        }
    }
    let single = |v: ValueId| reader.get(&v).copied().filter(|_| uses.get(&v) == Some(&1));
    let mut removed = vec![false; graph.nodes.len()];
    for product in 0..graph.nodes.len() {
        let Op::IntegerProduct(p) = &graph.nodes[product].op else { continue };
        let Some((_, shape)) = graph.concrete(graph.nodes[product].outputs[0]) else { continue };
        let shape = shape.to_vec();
        let cast = match single(graph.nodes[product].outputs[0]) {
            Some(c) if p.is_matmul_integer() && region[c] == region[product] => c,
            _ => continue,
        };
        let to_f32 = elementwise(graph, cast, "Cast").is_some_and(|n| {
            matches!(n.op, Op::Elementwise(Elementwise { func: Func::Cast { to: DType::F32, .. }, .. }))
        });
        let Some(mul) = single(graph.nodes[cast].outputs[0]).filter(|_| to_f32) else { continue };
        let cast_out = graph.nodes[cast].outputs[0];
        let Some(scale) = elementwise(graph, mul, "Mul").and_then(|n| other(n, cast_out)) else { continue };
        if region[mul] != region[product] || !column_operand(graph, scale, &shape) {
            continue;
        }
        let mul_out = graph.nodes[mul].outputs[0];
        let add = single(mul_out).filter(|&a| region[a] == region[product]);
        let bias = add.and_then(|a| elementwise(graph, a, "Add")).and_then(|n| other(n, mul_out));
        let bias = bias.filter(|&b| column_operand(graph, b, &shape));
        let last = if bias.is_some() { add.unwrap_or(mul) } else { mul };
        let mut inputs = graph.nodes[product].inputs.clone();
        inputs.resize(4, None);
        inputs.extend([Some(scale), bias]);
        let fused = Node {
            name: graph.nodes[product].name.clone(),
            op: Op::IntegerProduct(IntegerProduct::scaled_matmul()),
            inputs,
            outputs: graph.nodes[last].outputs.clone(),
        };
        graph.nodes[last] = fused;
        for index in [product, cast, mul].into_iter().filter(|&i| i != last) {
            removed[index] = true;
        }
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, TensorType, ValueDef};
    use crate::ops::quant::DynamicQuantize;
    use crate::passes::test_graph::{push, run_bytes};

    fn value(g: &mut Graph, name: &str, dtype: DType, shape: &[usize]) -> ValueId {
        g.add_value(name, Some(TensorType::known(dtype, shape)), ValueDef::Computed)
    }

    fn constant(g: &mut Graph, name: &str, t: Tensor) -> ValueId {
        g.add_value(name, Some(TensorType::known(t.dtype, &t.shape)), ValueDef::Const(t))
    }

    fn binary(op_type: &'static str, func: Func) -> Elementwise {
        Elementwise { op_type, func }
    }

    /// quantize_dynamic's `DynamicQuantizeLinear → MatMulInteger → Cast →
    /// Mul(x_scale · w_scale) [→ Add(bias)]` on `[1, 5, 16] x [16, 8]`,
    /// the weight scale per tensor or per column.
    fn dynamic_matmul(per_column: bool, with_bias: bool) -> Graph {
        let mut g = Graph::default();
        let x = g.add_value("x", Some(TensorType::known(DType::F32, &[1, 5, 16])), ValueDef::Input(0));
        let (xq, xs, xz) = (
            value(&mut g, "xq", DType::U8, &[1, 5, 16]),
            value(&mut g, "xs", DType::F32, &[]),
            value(&mut g, "xz", DType::U8, &[]),
        );
        g.nodes.push(Node {
            name: "dql".into(),
            op: Op::DynamicQuantize(DynamicQuantize),
            inputs: vec![Some(x)],
            outputs: vec![xq, xs, xz],
        });
        let w: Vec<u8> = (0..128u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        let w = constant(&mut g, "w", Tensor::from_bytes(DType::I8, vec![16, 8], w).unwrap());
        let wz = constant(&mut g, "wz", Tensor::from_bytes(DType::I8, vec![], vec![0]).unwrap());
        let acc = value(&mut g, "acc", DType::I32, &[1, 5, 8]);
        push(&mut g, "mmi", IntegerProduct::matmul_integer(), &[xq, w, xz, wz], acc);
        let cast = value(&mut g, "cast", DType::F32, &[1, 5, 8]);
        push(&mut g, "cast", binary("Cast", Func::cast_to(DType::F32)), &[acc], cast);
        let ws: Vec<f32> = (0..if per_column { 8 } else { 1 }).map(|c| 0.0071 + 0.0013 * c as f32).collect();
        let ws_shape = if per_column { vec![8] } else { vec![] };
        let ws = constant(&mut g, "ws", Tensor::from_f32s(ws_shape.clone(), &ws));
        let scale = value(&mut g, "scale", DType::F32, &ws_shape);
        push(&mut g, "scales", binary("Mul", Func::Mul), &[xs, ws], scale);
        let y = value(&mut g, "y", DType::F32, &[1, 5, 8]);
        if with_bias {
            let scaled = value(&mut g, "scaled", DType::F32, &[1, 5, 8]);
            push(&mut g, "mul", binary("Mul", Func::Mul), &[cast, scale], scaled);
            let b: Vec<f32> = (0..8).map(|c| c as f32 * 0.37 - 1.1).collect();
            let b = constant(&mut g, "b", Tensor::from_f32s(vec![8], &b));
            push(&mut g, "add", binary("Add", Func::Add), &[b, scaled], y);
        } else {
            push(&mut g, "mul", binary("Mul", Func::Mul), &[scale, cast], y);
        }
        (g.inputs, g.outputs) = (vec![x], vec![y]);
        g
    }

    #[test]
    fn the_scaled_product_gives_the_three_nodes_bits() {
        let x: Vec<f32> = (0..80).map(|i| ((i * 37 % 101) as f32 - 40.0) * 0.031).collect();
        let x = Tensor::from_f32s(vec![1, 5, 16], &x);
        for (per_column, with_bias) in [(false, true), (true, true), (true, false)] {
            let mut g = dynamic_matmul(per_column, with_bias);
            let want = run_bytes(&g, std::slice::from_ref(&x), false);
            fuse_scaled_products(&mut g);
            assert_eq!(crate::passes::verify(&g), Ok(()));
            let names: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
            assert_eq!(names, ["DynamicQuantizeLinear", "Mul", "ScaledMatMulInteger"]);
            assert_eq!(
                run_bytes(&g, std::slice::from_ref(&x), false),
                want,
                "per column {per_column}, bias {with_bias}"
            );
        }
    }

    #[test]
    fn a_product_read_twice_stays_as_it_is() {
        let mut g = dynamic_matmul(false, true);
        let acc = g.values.iter().position(|v| v.name == "acc").unwrap();
        g.outputs.push(ValueId(acc as u32));
        fuse_scaled_products(&mut g);
        assert!(g.nodes.iter().any(|n| n.op.name() == "MatMulInteger"));
    }
}
