//! Elementwise QDQ groups in the integer domain:
//! `QuantizeLinear(Add|Mul(DequantizeLinear(a), DequantizeLinear(b)))`
//! becomes QLinearAdd/QLinearMul of `a` and `b`, and
//! `QuantizeLinear(f(DequantizeLinear(x)[, constants]))` for any other
//! elementwise `f` (Sigmoid, HardSwish, LeakyRelu, a Mul by a constant...)
//! becomes QLinearLookup, the 256 results of the group on every byte.
//!
//! Why: `quantize_static` writes SiLU, SE blocks and residual additions
//! this way (EfficientNet has 65 Sigmoid and 65 Mul groups), and run
//! literally each group converts its operands to f32 tensors and back.
//!
//! Applies when every scale and zero point is a per-tensor constant and
//! the operands are 8-bit, the elementwise node is read by the
//! QuantizeLinear alone, and (binary) B has A's shape or one element per
//! leading row of A, or the other way round (`ops::quant::binary_layout`);
//! (unary) the other inputs of `f` are one-element constants.
//!
//! A QLinearMul/QLinearAdd of `x` and a table of `x` (SiLU) becomes one
//! table of `x` in turn.
//!
//! **Exact:** QLinearAdd/QLinearMul perform the group's f32 operations per
//! element with DequantizeLinear's and QuantizeLinear's own row loops, and
//! the table is computed by compiling the group itself (all tables of a
//! graph in one JIT build) and running it on the 256 bytes; so both give
//! the group's output bit for bit (`tests`), well within the one quantum
//! `fuse_qdq` promises.

use super::super::{eliminate_dead_nodes, producers, regions, use_counts};
use super::{activation, is_byte, linear, linear_node, scalar_scale, scalar_zero, Quantized};
use crate::ir::{DType, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::elementwise::{Elementwise, Func};
use crate::ops::quant::{binary_layout, QLinearBinary, QLinearLookup};
use crate::ops::Op;
use onnxc_runtime::{onnxc_qbinary, QBinaryParams};
use std::collections::HashMap;

/// A unary group waiting for its table: the QuantizeLinear's index, the
/// DequantizeLinear of `x` and the elementwise node.
struct Unary {
    q_index: usize,
    x: usize,
    f: usize,
}

pub(super) fn fuse_elementwise_groups(graph: &mut Graph) {
    let uses = use_counts(graph);
    let producer = producers(graph);
    let region = regions(graph);
    let mut removed = vec![false; graph.nodes.len()];
    let mut unary = Vec::new();
    for q_index in 0..graph.nodes.len() {
        let Some(output) = linear_node(&graph.nodes[q_index], true) else { continue };
        let Some(&f_index) = producer.get(&output.q) else { continue };
        let f = &graph.nodes[f_index];
        let Op::Elementwise(Elementwise { func, .. }) = &f.op else { continue };
        let y_dtype = graph.concrete(graph.nodes[q_index].outputs[0]).map(|t| t.0);
        let y_fits = y_dtype.is_some_and(is_byte) && scalar_zero(graph, output.zero);
        if uses.get(&output.q) != Some(&1) || region[f_index] != region[q_index] || !y_fits {
            continue;
        }
        if scalar_scale(graph, output.scale).is_none() {
            continue;
        }
        let same_region = |v: ValueId| producer.get(&v).is_some_and(|&i| region[i] == region[f_index]);
        let operand = |v: ValueId| {
            linear(graph, &producer, v, false).filter(|d| same_region(v) && activation(graph, d).is_some())
        };
        if let Some(fused) = binary(graph, f, func, &output, y_dtype, &operand) {
            graph.nodes[q_index] = Node { outputs: graph.nodes[q_index].outputs.clone(), ..fused };
            removed[f_index] = true;
        } else if let Some(x) = unary_input(graph, f, &operand) {
            unary.push(Unary { q_index, x: producer[&x], f: f_index });
        }
    }
    for (group, table) in unary.iter().zip(tables(graph, &unary)) {
        let Some(table) = table else { continue };
        let x_q = graph.nodes[group.x].inputs[0];
        let outputs = graph.nodes[group.q_index].outputs.clone();
        let y_dtype = graph.concrete(outputs[0]).map_or(DType::U8, |t| t.0);
        let name = graph.nodes[group.f].name.clone();
        let op = Op::QLinearLookup(QLinearLookup { table, y_dtype });
        graph.nodes[group.q_index] = Node { name, op, inputs: vec![x_q], outputs };
        removed[group.f] = true;
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
    // The DequantizeLinear nodes left unread would count as readers.
    eliminate_dead_nodes(graph);
    compose_tables(graph);
}

/// QLinearAdd/QLinearMul of `x` and a table of `x` read by it alone
/// (SiLU's `x · σ(x)`) is itself a function of `x`: one table, the
/// kernel's own results on the 256 bytes and their entries. The table's
/// node is left dead.
fn compose_tables(graph: &mut Graph) {
    let (uses, producer) = (use_counts(graph), producers(graph));
    let every_byte: Vec<u8> = (0..=255).collect();
    for index in 0..graph.nodes.len() {
        let node = &graph.nodes[index];
        let Op::QLinearBinary(op) = &node.op else { continue };
        let (Some(a), Some(b)) = (node.inputs[0], node.inputs[3]) else { continue };
        let table_of = |x: ValueId, t: ValueId| {
            let lookup = &graph.nodes[*producer.get(&t)?];
            match &lookup.op {
                Op::QLinearLookup(l) if lookup.inputs == [Some(x)] && uses.get(&t) == Some(&1) => Some(l.table.clone()),
                _ => None,
            }
        };
        let (x, operands) = match (table_of(a, b), table_of(b, a)) {
            (Some(t), _) => (a, [every_byte.clone(), t]),
            (None, Some(t)) => (b, [t, every_byte.clone()]),
            _ => continue,
        };
        let (Some(ta), Some(tb), Some((y_dtype, _))) =
            (graph.concrete(a), graph.concrete(b), graph.concrete(node.outputs[0]))
        else {
            continue;
        };
        let constant = |i: usize| node.inputs.get(i).copied().flatten().and_then(|v| graph.const_value(v));
        let Ok((p, _)) = op.params([(ta.0, &ta.1), (tb.0, &tb.1)], y_dtype, &constant) else { continue };
        let p = QBinaryParams { rows: 1, inner: 256, b_per_row: 0, ..p };
        let mut table = vec![0u8; 256];
        // SAFETY: the operands and the table hold the 256 bytes `p` says.
        let status = unsafe { onnxc_qbinary(&p, operands[0].as_ptr(), operands[1].as_ptr(), table.as_mut_ptr()) };
        if status != 0 {
            continue;
        }
        let op = Op::QLinearLookup(QLinearLookup { table, y_dtype });
        graph.nodes[index] = Node { name: node.name.clone(), op, inputs: vec![Some(x)], outputs: node.outputs.clone() };
    }
}

/// QLinearAdd/QLinearMul of the Add or Mul `f` of two dequantized 8-bit
/// operands, quantized by `output` to `y_dtype` (its outputs unset).
fn binary(
    graph: &Graph,
    f: &Node,
    func: &Func,
    output: &Quantized,
    y_dtype: Option<DType>,
    operand: &dyn Fn(ValueId) -> Option<Quantized>,
) -> Option<Node> {
    let mul = match func {
        Func::Add => false,
        Func::Mul => true,
        _ => return None,
    };
    let [Some(a), Some(b)] = f.inputs[..] else { return None };
    let (a, b) = (operand(a)?, operand(b)?);
    let (a_shape, b_shape) = (graph.concrete(a.q)?.1, graph.concrete(b.q)?.1);
    let (rows, inner, _) = binary_layout(&a_shape, &b_shape)?;
    let out_shape = graph.concrete(f.outputs[0])?.1;
    let op_dtype = output.zero.and_then(|z| graph.concrete(z)).map_or(DType::U8, |t| t.0);
    (rows * inner == out_shape.iter().product::<usize>() && y_dtype == Some(op_dtype)).then_some(())?;
    let inputs = [Some(a.q), Some(a.scale), a.zero, Some(b.q), Some(b.scale), b.zero, Some(output.scale), output.zero];
    Some(Node {
        name: f.name.clone(),
        op: Op::QLinearBinary(QLinearBinary { mul }),
        inputs: inputs.to_vec(),
        outputs: vec![],
    })
}

/// The dequantized input of the elementwise `f` when its other inputs are
/// one-element constants and its output has the input's shape.
fn unary_input(graph: &Graph, f: &Node, operand: &dyn Fn(ValueId) -> Option<Quantized>) -> Option<ValueId> {
    let mut variable = f.inputs.iter().flatten().filter(|&&v| graph.const_value(v).is_none_or(|t| t.len() != 1));
    let (x, None) = (*variable.next()?, variable.next()) else { return None };
    operand(x)?;
    let (x_type, y_type) = (graph.concrete(x)?, graph.concrete(f.outputs[0])?);
    (f.outputs.len() == 1 && x_type == y_type && x_type.0 == DType::F32).then_some(x)
}

/// Each unary group's table, computed by one JIT build of every group
/// applied to the 256 bytes; all `None` if that build fails.
fn tables(graph: &Graph, groups: &[Unary]) -> Vec<Option<Vec<u8>>> {
    if groups.is_empty() {
        return vec![];
    }
    let mut g = Graph::default();
    let mut constants: HashMap<ValueId, ValueId> = HashMap::new();
    for group in groups {
        let Some(Some(x_q)) = graph.nodes[group.x].inputs.first().copied() else { return vec![None; groups.len()] };
        let x_dtype = graph.concrete(x_q).map_or(DType::U8, |t| t.0);
        let Some(every_byte) = Tensor::from_bytes(x_dtype, vec![256], (0..=255).collect()) else {
            return vec![None; groups.len()];
        };
        let every_byte = g.add_value("bytes", Some(TensorType::known(x_dtype, &[256])), ValueDef::Const(every_byte));
        // The group's own values (each group computes on its own copy),
        // the constants shared.
        let mut computed = HashMap::from([(x_q, every_byte)]);
        let mut copy = |g: &mut Graph, v: ValueId| -> ValueId {
            let value = graph.value(v);
            let cache = if matches!(value.def, ValueDef::Const(_)) { &mut constants } else { &mut computed };
            *cache.entry(v).or_insert_with(|| match &value.def {
                ValueDef::Const(t) => g.add_value(value.name.clone(), value.ty.clone(), ValueDef::Const(t.clone())),
                _ => {
                    let dtype = graph.concrete(v).map_or(DType::F32, |t| t.0);
                    g.add_value(value.name.clone(), Some(TensorType::known(dtype, &[256])), ValueDef::Computed)
                }
            })
        };
        for index in [group.x, group.f, group.q_index] {
            let node = &graph.nodes[index];
            let inputs = node.inputs.iter().map(|i| i.map(|v| copy(&mut g, v))).collect();
            let outputs: Vec<ValueId> = node.outputs.iter().map(|&v| copy(&mut g, v)).collect();
            g.nodes.push(Node { name: node.name.clone(), op: node.op.clone(), inputs, outputs });
        }
        let y = graph.nodes[group.q_index].outputs[0];
        let y = copy(&mut g, y);
        g.outputs.push(y);
    }
    let results = crate::plan::plan(&g).ok().and_then(|plan| {
        let model = crate::jit::compile_with(&g, &plan, false, &crate::limits::Limits::default()).ok()?;
        model.run(&[]).ok()
    });
    match results {
        Some(r) if r.len() == groups.len() => r.into_iter().map(|t| (t.data.len() == 256).then_some(t.data)).collect(),
        _ => vec![None; groups.len()],
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::fuse_qdq;
    use super::super::tests::bytes;
    use super::*;
    use crate::ops::quant::Linear;
    use crate::passes::test_graph::{push, run_bytes};

    pub(in crate::passes::fuse_qdq) fn linear(quantize: bool) -> Linear {
        Linear { quantize, axis: 1, block_size: 0, output_dtype: None, saturate: true }
    }

    fn func(op_type: &'static str, func: Func) -> Elementwise {
        Elementwise { op_type, func }
    }

    /// Builds QDQ groups on 8-bit graph inputs.
    pub(in crate::passes::fuse_qdq) struct Builder {
        pub g: Graph,
        inputs: Vec<Tensor>,
    }

    impl Builder {
        pub(in crate::passes::fuse_qdq) fn new() -> Builder {
            Builder { g: Graph::default(), inputs: vec![] }
        }

        pub(in crate::passes::fuse_qdq) fn constant(&mut self, t: Tensor) -> ValueId {
            let ty = Some(TensorType::known(t.dtype, &t.shape));
            self.g.add_value("c", ty, ValueDef::Const(t))
        }

        pub(in crate::passes::fuse_qdq) fn scale_zero(
            &mut self,
            scale: f32,
            dtype: DType,
            zero: u8,
        ) -> (ValueId, ValueId) {
            let s = self.constant(Tensor::from_f32s(vec![], &[scale]));
            (s, self.constant(Tensor::from_bytes(dtype, vec![], vec![zero]).unwrap()))
        }

        pub(in crate::passes::fuse_qdq) fn computed(&mut self, dtype: DType, shape: &[usize]) -> ValueId {
            self.g.add_value("v", Some(TensorType::known(dtype, shape)), ValueDef::Computed)
        }

        /// A graph input of random bytes, dequantized: the f32 value.
        pub(in crate::passes::fuse_qdq) fn dequantized_input(
            &mut self,
            dtype: DType,
            shape: &[usize],
            scale: f32,
            zero: u8,
        ) -> ValueId {
            let n = self.inputs.len();
            let x = self.g.add_value("x", Some(TensorType::known(dtype, shape)), ValueDef::Input(n));
            self.g.inputs.push(x);
            let len = shape.iter().product();
            self.inputs.push(Tensor::from_bytes(dtype, shape.to_vec(), bytes(len, 5 + n as u32)).unwrap());
            let (s, z) = self.scale_zero(scale, dtype, zero);
            let f = self.computed(DType::F32, shape);
            push(&mut self.g, "dq", linear(false), &[x, s, z], f);
            f
        }

        /// `QuantizeLinear(op(inputs))` as a graph output.
        fn quantized(&mut self, op: impl Into<Op>, inputs: &[ValueId], shape: &[usize], y: DType, zero: u8) {
            self.quantized_by(op, inputs, shape, (0.043, y, zero));
        }

        /// `QuantizeLinear(op(inputs))` by `(scale, type, zero point)`.
        pub(in crate::passes::fuse_qdq) fn quantized_by(
            &mut self,
            op: impl Into<Op>,
            inputs: &[ValueId],
            shape: &[usize],
            (scale, y, zero): (f32, DType, u8),
        ) {
            let f = self.computed(DType::F32, shape);
            push(&mut self.g, "f", op, inputs, f);
            let (s, z) = self.scale_zero(scale, y, zero);
            let q = self.computed(y, shape);
            push(&mut self.g, "q", linear(true), &[f, s, z], q);
            self.g.outputs.push(q);
        }

        /// Fuses, checks the node names and that the outputs are the
        /// group's bit for bit.
        pub(in crate::passes::fuse_qdq) fn fuses_exactly(mut self, names: &[&str]) {
            let want = run_bytes(&self.g, &self.inputs, false);
            fuse_qdq(&mut self.g, false);
            assert_eq!(crate::passes::verify(&self.g), Ok(()));
            let got: Vec<&str> = self.g.nodes.iter().map(|n| n.op.name()).collect();
            assert_eq!(got, names);
            assert_eq!(run_bytes(&self.g, &self.inputs, false), want);
        }
    }

    #[test]
    fn qdq_adds_and_muls_become_integer_nodes_bit_for_bit() {
        let full = [1, 6, 9, 7];
        for (y, a_type) in [(DType::U8, DType::U8), (DType::I8, DType::I8), (DType::U8, DType::I8)] {
            let mut b = Builder::new();
            let x = b.dequantized_input(a_type, &full, 0.031, 3);
            let r = b.dequantized_input(DType::U8, &full, 0.017, 140);
            let se = b.dequantized_input(DType::U8, &[1, 6, 1, 1], 0.0039, 0);
            b.quantized(func("Add", Func::Add), &[x, r], &full, y, 9);
            b.quantized(func("Mul", Func::Mul), &[x, se], &full, y, 0);
            b.quantized(func("Mul", Func::Mul), &[se, r], &full, y, 128);
            b.fuses_exactly(&["QLinearAdd", "QLinearMul", "QLinearMul"]);
        }
    }

    #[test]
    fn unary_qdq_groups_become_tables_bit_for_bit() {
        let shape = [2, 3, 17];
        for (x_type, y) in [(DType::U8, DType::U8), (DType::I8, DType::I8), (DType::I8, DType::U8)] {
            let mut b = Builder::new();
            let x = b.dequantized_input(x_type, &shape, 0.07, 120);
            let half = b.constant(Tensor::from_f32s(vec![1], &[0.5]));
            // Four groups reading one DequantizeLinear.
            b.quantized(func("Sigmoid", Func::Sigmoid), &[x], &shape, y, 0);
            b.quantized(func("HardSwish", Func::HardSwish), &[x], &shape, y, 20);
            b.quantized(func("LeakyRelu", Func::LeakyRelu { alpha: 0.1 }), &[x], &shape, y, 100);
            b.quantized(func("Mul", Func::Mul), &[half, x], &shape, y, 127);
            b.fuses_exactly(&["QLinearLookup"; 4]);
        }
    }

    #[test]
    fn silu_becomes_one_table_and_an_se_gate_a_qlinear_mul() {
        let (full, pooled) = ([1, 5, 6, 7], [1, 5, 1, 1]);
        for (x_type, y) in [(DType::U8, DType::U8), (DType::I8, DType::I8)] {
            let mut b = Builder::new();
            let x = b.dequantized_input(x_type, &full, 0.05, 130);
            let gate = b.dequantized_input(x_type, &pooled, 0.02, 7);
            // x · σ(x), the Sigmoid quantized in between.
            b.quantized(func("Sigmoid", Func::Sigmoid), &[x], &full, DType::U8, 0);
            let sigmoid = b.g.outputs.pop().unwrap();
            let (s, z) = b.scale_zero(1.0 / 256.0, DType::U8, 0);
            let sf = b.computed(DType::F32, &full);
            push(&mut b.g, "dq_s", linear(false), &[sigmoid, s, z], sf);
            b.quantized(func("Mul", Func::Mul), &[sf, x], &full, y, 3);
            // x · σ(gate), broadcast per channel.
            b.quantized(func("Sigmoid", Func::Sigmoid), &[gate], &pooled, DType::U8, 0);
            let gated = b.g.outputs.pop().unwrap();
            let gf = b.computed(DType::F32, &pooled);
            push(&mut b.g, "dq_g", linear(false), &[gated, s, z], gf);
            b.quantized(func("Mul", Func::Mul), &[x, gf], &full, y, 3);
            b.fuses_exactly(&["QLinearLookup", "QLinearLookup", "QLinearMul"]);
        }
    }

    #[test]
    fn groups_outside_the_kernels_stay_as_they_are() {
        let mut b = Builder::new();
        let x = b.dequantized_input(DType::U8, &[1, 4, 1, 5], 0.031, 3);
        let r = b.dequantized_input(DType::U8, &[1, 4, 5, 1], 0.017, 140);
        b.quantized(func("Add", Func::Add), &[x, r], &[1, 4, 5, 5], DType::U8, 9);
        // A second non-constant input that is no DequantizeLinear.
        let other = b.computed(DType::F32, &[1, 4, 1, 5]);
        push(&mut b.g, "sig", func("Sigmoid", Func::Sigmoid), &[x], other);
        b.quantized(func("Sub", Func::Sub), &[x, other], &[1, 4, 1, 5], DType::U8, 9);
        b.fuses_exactly(&[
            "DequantizeLinear",
            "DequantizeLinear",
            "Add",
            "QuantizeLinear",
            "Sigmoid",
            "Sub",
            "QuantizeLinear",
        ]);
    }
}
