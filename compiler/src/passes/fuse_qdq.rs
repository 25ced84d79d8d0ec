//! Quantized convolutions in the integer domain: a QDQ group
//! `QuantizeLinear(Conv(DequantizeLinear(x_q), DequantizeLinear(W_q)[,
//! DequantizeLinear(B_q)]))` becomes one QLinearConv of `x_q` and `W_q`.
//!
//! Why: ONNX Runtime's `quantize_static` (QDQ format) writes every quantized
//! operator as that group, and run literally it pays the fp32 convolution
//! plus a conversion on each side, slower than the fp32 model. The integer
//! form multiplies the bytes (VNNI/AVX2 byte kernels) and requantizes the
//! i32 sums once (round half to even, then saturation, as QuantizeLinear
//! specifies); with the constant weights this pass requires, the lowering
//! packs them and their corrections at compile time and requantizes in the
//! same call (`ops::quant`'s `packed` and `depthwise`).
//!
//! Applies when `x`'s scale and zero point and the output's are per-tensor
//! f32/8-bit constants, `W_q` is a constant 8-bit tensor whose scale (and
//! zero point) is per tensor or per output channel (axis 0), and the bias,
//! if any, is the dequantized i32 `B_q` whose scale is exactly
//! `x_scale · w_scale` per channel (what the quantizer writes), so `B_q` is
//! added to the sums unchanged. The Conv must be read by the
//! QuantizeLinear alone; the DequantizeLinear of `x_q` may feed others.
//!
//! **Accuracy bound:** the result is within one quantum of the QDQ
//! reference (float Conv between DequantizeLinear and QuantizeLinear). The
//! integer sum is exact; the reference's float sum and the requantization
//! scale `x_scale · w_scale / y_scale` each round, which can move a value
//! lying within a few ulps of a rounding midpoint to the neighbouring
//! integer, never further (`tests` check it on random data).
//!
//! Elementwise groups (Add, Mul, and unary functions as tables) become
//! QLinearAdd, QLinearMul and QLinearLookup, exactly (`elementwise`).
//!
//! Data movement between equal quantizations stays on the bytes, exactly
//! (`movement`).
//!
//! quantize_dynamic's `MatMulInteger → Cast → Mul [→ Add]` chains become
//! one scaled product, exactly (`dynamic`).
//!
//! Because inference leaves DequantizeLinear of constants unfolded (so this
//! pass can see `W_q`), the pass then folds every DequantizeLinear left
//! with constant inputs, in every mode.

mod dynamic;
mod elementwise;
mod movement;

use super::{eliminate_dead_nodes, producers, regions, use_counts};
use crate::ir::{DType, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::conv::{Conv, Layout};
use crate::ops::quant::{IntegerProduct, Linear};
use crate::ops::Op;
use std::collections::HashMap;

pub fn fuse_qdq(graph: &mut Graph, portable: bool) {
    if !portable {
        fuse_qdq_convs(graph);
        elementwise::fuse_elementwise_groups(graph);
        movement::fuse_data_movement(graph);
        dynamic::fuse_scaled_products(graph);
        eliminate_dead_nodes(graph);
    }
    fold_constant_dequantizes(graph);
}

/// `(q, scale, zero point)` of a DequantizeLinear/QuantizeLinear node.
struct Quantized {
    q: ValueId,
    scale: ValueId,
    zero: Option<ValueId>,
}

/// The node computing `v` when it is a DequantizeLinear (`quantize:
/// false`) or QuantizeLinear, with its inputs.
fn linear(graph: &Graph, producer: &HashMap<ValueId, usize>, v: ValueId, quantize: bool) -> Option<Quantized> {
    let node = &graph.nodes[*producer.get(&v)?];
    linear_node(node, quantize)
}

fn linear_node(node: &Node, quantize: bool) -> Option<Quantized> {
    let Op::Linear(l) = &node.op else { return None };
    if l.quantize != quantize || l.block_size > 0 {
        return None;
    }
    let q = (*node.inputs.first()?)?;
    let scale = (*node.inputs.get(1)?)?;
    Some(Quantized { q, scale, zero: node.inputs.get(2).copied().flatten() })
}

fn is_byte(dtype: DType) -> bool {
    matches!(dtype, DType::U8 | DType::I8)
}

/// A one-element f32 constant (rank 0 or 1).
fn scalar_scale(graph: &Graph, v: ValueId) -> Option<f32> {
    let t = graph.const_value(v)?;
    (t.dtype == DType::F32 && t.len() == 1 && t.shape.len() <= 1).then(|| t.get_f64(0) as f32)
}

/// A per-tensor 8-bit zero point (absent counts as one), constant.
fn scalar_zero(graph: &Graph, zero: Option<ValueId>) -> bool {
    zero.is_none_or(|z| graph.const_value(z).is_some_and(|t| is_byte(t.dtype) && t.len() == 1 && t.shape.len() <= 1))
}

/// The activation side: `x_q` 8-bit with per-tensor constant scale and
/// zero point; its scale.
fn activation(graph: &Graph, side: &Quantized) -> Option<f32> {
    let (dtype, _) = graph.concrete(side.q)?;
    (is_byte(dtype) && scalar_zero(graph, side.zero)).then_some(())?;
    scalar_scale(graph, side.scale)
}

/// The weight side: a constant 8-bit `W_q` (`[M, ...]`) with a constant
/// f32 scale per tensor or per output channel (and a zero point of the
/// same shape); the scale of each of the `M` channels.
fn weight(graph: &Graph, dq: &Node, side: &Quantized) -> Option<Vec<f32>> {
    let Op::Linear(l) = &dq.op else { return None };
    let w = graph.const_value(side.q)?;
    let scale = graph.const_value(side.scale)?;
    let channels = *w.shape.first()?;
    if !is_byte(w.dtype) || scale.dtype != DType::F32 || w.shape.len() < 2 {
        return None;
    }
    let per_channel = scale.shape == [channels] && channels > 1;
    if per_channel && l.axis != 0 || !per_channel && (scale.len() != 1 || scale.shape.len() > 1) {
        return None;
    }
    if let Some(z) = side.zero {
        let zero = graph.const_value(z)?;
        (is_byte(zero.dtype) && zero.shape == scale.shape).then_some(())?;
    }
    Some((0..channels).map(|c| scale.get_f64(if per_channel { c } else { 0 }) as f32).collect())
}

/// The bias side: the dequantized constant i32 `B_q` (`[M]`) whose scale
/// is `x_scale · w_scale[c]` bit for bit and whose zero point is 0.
fn bias(graph: &Graph, side: &Quantized, x_scale: f32, w_scales: &[f32]) -> Option<ValueId> {
    let b = graph.const_value(side.q)?;
    let scale = graph.const_value(side.scale)?;
    let zero_is_0 = side.zero.is_none_or(|z| graph.const_value(z).is_some_and(|t| t.to_i64s().iter().all(|&v| v == 0)));
    if b.dtype != DType::I32 || b.shape != [w_scales.len()] || scale.dtype != DType::F32 || !zero_is_0 {
        return None;
    }
    let at = |c: usize| scale.get_f64(if scale.len() == 1 { 0 } else { c }) as f32;
    let exact = (scale.len() == 1 || scale.len() == w_scales.len())
        && w_scales.iter().enumerate().all(|(c, &ws)| at(c).to_bits() == (x_scale * ws).to_bits());
    exact.then_some(side.q)
}

/// The QLinearConv inputs `[x_q, x_scale, x_zp, w_q, w_scale, w_zp,
/// y_scale, y_zp, bias]` for the Conv node `conv_index` read by
/// QuantizeLinear `output`, or `None` when the group does not qualify.
fn qlinear_inputs(
    graph: &Graph,
    producer: &HashMap<ValueId, usize>,
    conv: &Node,
    output: &Quantized,
) -> Option<Vec<Option<ValueId>>> {
    let Op::Conv(c) = &conv.op else { return None };
    if c.layout != Layout::Plain || c.fused != Default::default() {
        return None;
    }
    let x = linear(graph, producer, (*conv.inputs.first()?)?, false)?;
    let w_value = (*conv.inputs.get(1)?)?;
    let w_node = &graph.nodes[*producer.get(&w_value)?];
    let w = linear_node(w_node, false)?;
    let x_scale = activation(graph, &x)?;
    let w_scales = weight(graph, w_node, &w)?;
    let b = match conv.inputs.get(2).copied().flatten() {
        Some(v) => Some(bias(graph, &linear(graph, producer, v, false)?, x_scale, &w_scales)?),
        None => None,
    };
    scalar_scale(graph, output.scale)?;
    scalar_zero(graph, output.zero).then_some(())?;
    let inputs = [x.q, x.scale].map(Some).into_iter().chain([x.zero, Some(w.q), Some(w.scale), w.zero]);
    Some(inputs.chain([Some(output.scale), output.zero, b]).collect())
}

fn fuse_qdq_convs(graph: &mut Graph) {
    let uses = use_counts(graph);
    let producer = producers(graph);
    let region = regions(graph);
    let mut removed = vec![false; graph.nodes.len()];
    for q_index in 0..graph.nodes.len() {
        let Some(output) = linear_node(&graph.nodes[q_index], true) else { continue };
        let Some(&conv_index) = producer.get(&output.q) else { continue };
        let conv = &graph.nodes[conv_index];
        let y_dtype = graph.concrete(graph.nodes[q_index].outputs[0]).map(|t| t.0);
        if uses.get(&output.q) != Some(&1) || region[conv_index] != region[q_index] || !y_dtype.is_some_and(is_byte) {
            continue;
        }
        let Some(inputs) = qlinear_inputs(graph, &producer, conv, &output) else { continue };
        let Op::Conv(c) = &conv.op else { continue };
        let fused = Node {
            name: conv.name.clone(),
            op: Op::IntegerProduct(IntegerProduct::qlinear_conv(Conv::clone(c))),
            inputs,
            outputs: graph.nodes[q_index].outputs.clone(),
        };
        graph.nodes[q_index] = fused;
        removed[conv_index] = true;
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

/// Folds each DequantizeLinear whose inputs are all constants into its
/// result (inference leaves them, see the module doc), and the views of
/// those results (an Identity or Reshape of a shared weight: inference
/// folds views of constants, and the plan expects no view of one).
fn fold_constant_dequantizes(graph: &mut Graph) {
    let mut keep = Vec::with_capacity(graph.nodes.len());
    for index in 0..graph.nodes.len() {
        let node = &graph.nodes[index];
        let folded = match &node.op {
            Op::Linear(l @ Linear { quantize: false, .. }) => dequantized_constant(graph, l, node),
            op if op.is_view() => constant_view(graph, node),
            _ => None,
        };
        keep.push(folded.is_none());
        let Some(value) = folded else { continue };
        let output = node.outputs[0];
        let v = graph.value_mut(output);
        (v.ty, v.def) = (Some(TensorType::known(value.dtype, &value.shape)), ValueDef::Const(value));
    }
    let mut flags = keep.into_iter();
    graph.nodes.retain(|_| flags.next().unwrap_or(true));
}

/// A view's output of a constant input 0: its bytes under the output's shape.
fn constant_view(graph: &Graph, node: &Node) -> Option<Tensor> {
    let input = graph.const_value((*node.inputs.first()?)?)?;
    let [output] = node.outputs[..] else { return None };
    let (dtype, shape) = graph.concrete(output)?;
    (dtype == input.dtype).then_some(())?;
    Tensor::from_bytes(dtype, shape, input.data.clone())
}

fn dequantized_constant(graph: &Graph, l: &Linear, node: &Node) -> Option<Tensor> {
    let input = |i: usize| node.inputs.get(i).copied().flatten().map(|v| graph.const_value(v));
    let (Some(Some(x)), Some(Some(scale))) = (input(0), input(1)) else { return None };
    let zero = match input(2) {
        Some(Some(z)) => Some(z),
        Some(None) => return None,
        None => None,
    };
    l.dequantize_constant(x, scale, zero).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::Func;
    use crate::passes::test_graph::{push, push_conv, run_bytes};

    /// A QDQ convolution group's shapes and quantization.
    struct Group {
        channels: usize,
        outputs: usize,
        kernel: usize,
        group: usize,
        per_channel: bool,
        bias: bool,
        y_dtype: DType,
    }

    pub(super) fn bytes(len: usize, seed: u32) -> Vec<u8> {
        let mut s = seed.wrapping_mul(2_654_435_761) | 1;
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 24) as u8
            })
            .collect()
    }

    fn constant(g: &mut Graph, name: &str, t: Tensor) -> ValueId {
        g.add_value(name, Some(TensorType::known(t.dtype, &t.shape)), ValueDef::Const(t))
    }

    fn computed(g: &mut Graph, name: &str, dtype: DType, shape: &[usize]) -> ValueId {
        g.add_value(name, Some(TensorType::known(dtype, shape)), ValueDef::Computed)
    }

    fn linear(quantize: bool, axis: i64) -> Linear {
        Linear { quantize, axis, block_size: 0, output_dtype: None, saturate: true }
    }

    /// `y = QuantizeLinear(Conv(DQ(x), DQ(w), DQ(b)))` on a u8 `[1, C, 7, 6]`
    /// input, as `quantize_static` writes it: bias scale `x_scale · w_scale`.
    fn qdq_conv(s: &Group) -> Graph {
        let mut g = Graph::default();
        let (m, cg, k) = (s.outputs, s.channels / s.group, s.kernel);
        let x = g.add_value("x", Some(TensorType::known(DType::U8, &[1, s.channels, 7, 6])), ValueDef::Input(0));
        let x_scale = 0.021f32;
        let scale_of = |c: usize| 0.002 + 0.0013 * (c % 5) as f32;
        let w_scales: Vec<f32> = (0..if s.per_channel { m } else { 1 }).map(scale_of).collect();
        let scale_shape = if s.per_channel { vec![m] } else { vec![] };
        let xs = constant(&mut g, "x_scale", Tensor::from_f32s(vec![], &[x_scale]));
        let xz = constant(&mut g, "x_zp", Tensor::from_bytes(DType::U8, vec![], vec![131]).unwrap());
        let wq = Tensor::from_bytes(DType::I8, vec![m, cg, k, k], bytes(m * cg * k * k, 3)).unwrap();
        let wq = constant(&mut g, "w_q", wq);
        let ws = constant(&mut g, "w_scale", Tensor::from_f32s(scale_shape.clone(), &w_scales));
        let zeros = Tensor::from_bytes(DType::I8, scale_shape.clone(), vec![0; w_scales.len()]).unwrap();
        let wz = constant(&mut g, "w_zp", zeros);
        let (xf, wf) = (
            computed(&mut g, "xf", DType::F32, &[1, s.channels, 7, 6]),
            computed(&mut g, "wf", DType::F32, &[m, cg, k, k]),
        );
        push(&mut g, "dq_x", linear(false, 1), &[x, xs, xz], xf);
        push(&mut g, "dq_w", linear(false, 0), &[wq, ws, wz], wf);
        let (oh, ow) = (7 + 2 * (k / 2) - k + 1, 6 + 2 * (k / 2) - k + 1);
        let c = computed(&mut g, "c", DType::F32, &[1, m, oh, ow]);
        push_conv(&mut g, &[k / 2; 4], s.group, xf, wf, c);
        if s.bias {
            let b: Vec<u8> = (0..m as i32).flat_map(|c| (c * 997 - 3000).to_le_bytes()).collect();
            let bq = constant(&mut g, "b_q", Tensor::from_bytes(DType::I32, vec![m], b).unwrap());
            let b_scales: Vec<f32> = (0..m).map(|c| x_scale * w_scales[if s.per_channel { c } else { 0 }]).collect();
            let bs = constant(&mut g, "b_scale", Tensor::from_f32s(vec![m], &b_scales));
            let bf = computed(&mut g, "bf", DType::F32, &[m]);
            push(&mut g, "dq_b", linear(false, 0), &[bq, bs], bf);
            let conv = g.nodes.len() - 2;
            g.nodes.swap(conv, conv + 1); // the bias' DequantizeLinear before the Conv
            g.nodes[conv + 1].inputs.push(Some(bf));
        }
        let ys = constant(&mut g, "y_scale", Tensor::from_f32s(vec![], &[0.04]));
        let yz = constant(&mut g, "y_zp", Tensor::from_bytes(s.y_dtype, vec![], vec![7]).unwrap());
        let y = computed(&mut g, "y", s.y_dtype, &[1, m, oh, ow]);
        push(&mut g, "q_y", linear(true, 1), &[c, ys, yz], y);
        g.inputs.push(x);
        g.outputs.push(y);
        g
    }

    const GROUPS: [Group; 4] = [
        Group { channels: 5, outputs: 6, kernel: 3, group: 1, per_channel: true, bias: true, y_dtype: DType::U8 },
        Group { channels: 5, outputs: 6, kernel: 1, group: 1, per_channel: false, bias: false, y_dtype: DType::U8 },
        Group { channels: 6, outputs: 6, kernel: 3, group: 6, per_channel: true, bias: true, y_dtype: DType::I8 },
        Group { channels: 4, outputs: 8, kernel: 3, group: 2, per_channel: false, bias: true, y_dtype: DType::I8 },
    ];

    #[test]
    fn a_qdq_conv_becomes_a_qlinear_conv_within_one_quantum() {
        for s in &GROUPS {
            let mut g = qdq_conv(s);
            let x = Tensor::from_bytes(DType::U8, vec![1, s.channels, 7, 6], bytes(s.channels * 42, 11)).unwrap();
            let want = run_bytes(&g, std::slice::from_ref(&x), false);
            fuse_qdq(&mut g, false);
            assert_eq!(crate::passes::verify(&g), Ok(()));
            let names: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
            assert_eq!(names, ["QLinearConv"], "group {}", s.group);
            let got = run_bytes(&g, &[x], false);
            let signed = s.y_dtype == DType::I8;
            let value = |b: u8| if signed { b as i8 as i32 } else { b as i32 };
            let far = got[0].iter().zip(&want[0]).filter(|(a, b)| value(**a).abs_diff(value(**b)) > 1).count();
            assert_eq!(far, 0, "group {}: {far} values more than one quantum away", s.group);
        }
    }

    #[test]
    fn portable_mode_folds_the_weights_and_keeps_the_float_conv() {
        let mut g = qdq_conv(&GROUPS[0]);
        let x = Tensor::from_bytes(DType::U8, vec![1, 5, 7, 6], bytes(5 * 42, 11)).unwrap();
        let want = run_bytes(&g, std::slice::from_ref(&x), false);
        fuse_qdq(&mut g, true);
        let names: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(names, ["DequantizeLinear", "Conv", "QuantizeLinear"]);
        assert_eq!(run_bytes(&g, &[x], false), want);
    }

    #[test]
    fn dequantized_constants_and_their_views_fold() {
        let mut g = Graph::default();
        let x = g.add_value("x", Some(TensorType::known(DType::F32, &[4])), ValueDef::Input(0));
        let wq = constant(&mut g, "w_q", Tensor::from_bytes(DType::I8, vec![4], vec![0x80, 0xff, 0, 0x7f]).unwrap());
        let ws = constant(&mut g, "w_scale", Tensor::from_f32s(vec![], &[0.25]));
        let (w, view, y) = (
            computed(&mut g, "w", DType::F32, &[4]),
            computed(&mut g, "view", DType::F32, &[4]),
            computed(&mut g, "y", DType::F32, &[4]),
        );
        push(&mut g, "dq", linear(false, 1), &[wq, ws], w);
        let identity = crate::ops::elementwise::Elementwise { op_type: "Identity", func: Func::Identity };
        push(&mut g, "identity", identity, &[w], view);
        push(&mut g, "add", crate::ops::elementwise::Elementwise { op_type: "Add", func: Func::Add }, &[x, view], y);
        (g.inputs, g.outputs) = (vec![x], vec![y]);
        let x = Tensor::from_f32s(vec![4], &[1.0, 2.0, 3.0, 4.0]);
        let want = run_bytes(&g, std::slice::from_ref(&x), false);
        fuse_qdq(&mut g, false);
        let names: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(names, ["Add"]);
        assert_eq!(g.const_value(view).and_then(Tensor::to_f32s), Some(vec![-32.0, -0.25, 0.0, 31.75]));
        assert_eq!(run_bytes(&g, &[x], false), want);
    }

    #[test]
    fn a_bias_of_another_scale_keeps_the_group_as_it_is() {
        let mut g = qdq_conv(&GROUPS[0]);
        let scale = g.values.iter().position(|v| v.name == "b_scale").unwrap();
        if let ValueDef::Const(t) = &mut g.values[scale].def {
            t.data[..4].copy_from_slice(&0.5f32.to_le_bytes());
        }
        fuse_qdq(&mut g, false);
        assert!(g.nodes.iter().any(|n| matches!(n.op, Op::Conv(_))));
    }
}
