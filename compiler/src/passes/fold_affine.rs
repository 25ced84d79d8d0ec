//! A per-channel affine chain after a convolution folded into its weights
//! and bias.
//!
//! `y = conv(x, W) + b` followed by maps `v -> v * mul[m] + add[m]` per
//! output channel m ([`super::affine`]: inference BatchNormalization, and
//! the Mul and Add by per-channel constants that Caffe2 exporters write
//! after it) is again a convolution: composed into one `scale` and
//! `shift`, its weights are W with output channel m scaled by `scale[m]`
//! and its bias `b[m] * scale[m] + shift[m]` — the same values up to
//! rounding. So the activation after the chain can then fuse into the
//! convolution's epilogue. Applies when W and b are f32 constants and each
//! value of the chain has the convolution's shape and is read only by the
//! next node, all in one guarded or repeated range.

use super::affine::{affine_step, compose, Step};
use crate::ir::{DType, Graph, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::Op;

pub fn fold_affine_into_conv(graph: &mut Graph) {
    let uses = super::use_counts(graph);
    let region = super::regions(graph);
    // The node reading each value, when exactly one node does.
    let mut reader = std::collections::HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for &v in node.inputs.iter().flatten() {
            reader.insert(v, i);
        }
    }
    let mut removed = vec![false; graph.nodes.len()];
    for conv_index in 0..graph.nodes.len() {
        let conv = &graph.nodes[conv_index];
        if !matches!(conv.op, Op::Conv(_)) || removed[conv_index] || conv.outputs.len() != 1 {
            continue;
        }
        let Some((DType::F32, shape)) = graph.concrete(conv.outputs[0]) else { continue };
        let Some(&channels) = shape.get(1) else { continue };
        let Some(w) = conv.inputs.get(1).copied().flatten().and_then(|v| graph.const_value(v)) else { continue };
        let b = match conv.inputs.get(2).copied().flatten() {
            Some(b) => match graph.const_value(b) {
                Some(b) => Some(b),
                None => continue,
            },
            None => None,
        };
        // Walk down from the conv through the chain.
        let (mut y, mut chain, mut steps) = (conv.outputs[0], Vec::new(), Vec::<Step>::new());
        while let Some(&i) = reader.get(&y) {
            let node = &graph.nodes[i];
            let single_read = uses.get(&y) == Some(&1) && !graph.outputs.contains(&y);
            if !single_read || region[i] != region[conv_index] || node.outputs.len() != 1 {
                break;
            }
            let Some((input, step)) = affine_step(graph, node, shape.len(), channels) else { break };
            let out = node.outputs[0];
            if input != y || graph.concrete(out).as_ref() != Some(&(DType::F32, shape.clone())) {
                break;
            }
            chain.push(i);
            steps.push(step);
            y = out;
        }
        if chain.is_empty() {
            continue;
        }
        let (scale, shift) = compose(&steps, channels);
        let Some((w2, b2)) = folded(w, b, &scale, &shift) else { continue };
        let name = graph.nodes[conv_index].name.clone();
        let w_id = add_const(graph, format!("{name}.w_affine"), w2);
        let b_id = add_const(graph, format!("{name}.b_affine"), b2);
        let conv = &mut graph.nodes[conv_index];
        conv.inputs.truncate(1);
        conv.inputs.extend([Some(w_id), Some(b_id)]);
        conv.outputs = vec![y];
        chain.into_iter().for_each(|i| removed[i] = true);
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

fn add_const(graph: &mut Graph, name: String, t: Tensor) -> ValueId {
    let ty = TensorType::known(t.dtype, &t.shape);
    graph.add_value(name, Some(ty), ValueDef::Const(t))
}

/// Weights with output channel m scaled by `scale[m]`, and the bias
/// `b[m] * scale[m] + shift[m]`; `None` when shapes or types do not fit.
fn folded(w: &Tensor, b: Option<&Tensor>, scale: &[f32], shift: &[f32]) -> Option<(Tensor, Tensor)> {
    let m = *w.shape.first()?;
    if scale.len() != m {
        return None;
    }
    let conv_bias = match b {
        Some(b) => b.to_f32s().filter(|v| v.len() == m)?,
        None => vec![0.0; m],
    };
    let weights = w.to_f32s()?;
    let per_channel = weights.len() / m.max(1);
    let new_w: Vec<f32> = weights.iter().enumerate().map(|(i, &v)| v * scale[i / per_channel.max(1)]).collect();
    let new_b: Vec<f32> = (0..m).map(|c| conv_bias[c] * scale[c] + shift[c]).collect();
    Some((Tensor::from_f32s(w.shape.clone(), &new_w), Tensor::from_f32s(vec![m], &new_b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::{infer, Bindings};
    use crate::limits::Limits;
    use crate::passes::test_graph::assert_all_close;
    use onnx_proto::*;

    fn f32_init(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
        TensorProto {
            name: Some(name.into()),
            dims: dims.to_vec(),
            data_type: Some(1),
            float_data: values.to_vec(),
            ..Default::default()
        }
    }

    fn io(name: &str, dims: &[i64]) -> ValueInfoProto {
        use tensor_shape_proto::{dimension, Dimension};
        ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: Some(1),
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| Dimension { value: Some(dimension::Value::DimValue(d)), denotation: None })
                            .collect(),
                    }),
                })),
                denotation: None,
            }),
            ..Default::default()
        }
    }

    /// x[1,2,3,3] → Conv(W[3,2,2,2], b) → BatchNormalization (→ Mul by
    /// [3,1,1] → Add of [1,3,1,1], when `caffe2`) → Relu.
    fn model(caffe2: bool) -> ModelProto {
        let node = |op: &str, ins: &[&str], out: &str| NodeProto {
            op_type: Some(op.into()),
            name: Some(op.to_lowercase()),
            input: ins.iter().map(|s| s.to_string()).collect(),
            output: vec![out.into()],
            ..Default::default()
        };
        let w: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
        ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
            graph: Some(GraphProto {
                node: if caffe2 {
                    vec![
                        node("Conv", &["x", "w", "b"], "c"),
                        node("BatchNormalization", &["c", "scale", "bias", "mean", "var"], "n"),
                        node("Mul", &["k", "n"], "scaled"),
                        node("Add", &["scaled", "t"], "shifted"),
                        node("Relu", &["shifted"], "y"),
                    ]
                } else {
                    vec![
                        node("Conv", &["x", "w", "b"], "c"),
                        node("BatchNormalization", &["c", "scale", "bias", "mean", "var"], "n"),
                        node("Relu", &["n"], "y"),
                    ]
                },
                initializer: vec![
                    f32_init("w", &[3, 2, 2, 2], &w),
                    f32_init("b", &[3], &[0.1, -0.2, 0.3]),
                    f32_init("scale", &[3], &[1.5, 0.5, -1.0]),
                    f32_init("bias", &[3], &[0.0, 0.25, -0.5]),
                    f32_init("mean", &[3], &[0.2, -0.1, 0.05]),
                    f32_init("var", &[3], &[0.9, 1.1, 0.3]),
                    f32_init("k", &[3, 1, 1], &[2.0, -0.5, 0.75]),
                    f32_init("t", &[1, 3, 1, 1], &[0.3, 0.1, -0.2]),
                ],
                input: vec![io("x", &[1, 2, 3, 3])],
                output: vec![io("y", &[1, 3, 2, 2])],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn run(graph: &Graph, x: &Tensor) -> Vec<f64> {
        let plan = crate::plan::plan(graph).expect("plan");
        let model = crate::jit::compile(graph, &plan).expect("compile");
        model.run(std::slice::from_ref(x)).expect("run")[0].to_f64s()
    }

    #[test]
    fn the_affine_chain_disappears_and_results_agree() {
        for caffe2 in [false, true] {
            let mut reference = crate::import::import_model(&model(caffe2), &Limits::default()).expect("import");
            infer(&mut reference, &Bindings::default(), &Limits::default()).expect("infer");
            let mut folded = reference.clone();
            fold_affine_into_conv(&mut folded);
            crate::passes::eliminate_dead_nodes(&mut folded);
            assert_eq!(crate::passes::verify(&folded), Ok(()));
            let ops: Vec<&str> = folded.nodes.iter().map(|n| n.op.name()).collect();
            assert_eq!(ops, ["Conv", "Relu"], "caffe2 {caffe2}");

            let x = (0..18).map(|i| (i as f32 * 0.71).cos()).collect::<Vec<_>>();
            let x = Tensor::from_f32s(vec![1, 2, 3, 3], &x);
            let (want, got) = (run(&reference, &x), run(&folded, &x));
            assert!(want.iter().any(|&w| w != 0.0));
            assert_all_close(&got, &want, 1e-5, &format!("caffe2 {caffe2}"));
        }
    }

    #[test]
    fn a_chain_value_read_twice_stays() {
        let mut model = model(true);
        let graph = model.graph.as_mut().expect("graph");
        graph.output.push(io("scaled", &[1, 3, 2, 2]));
        let mut g = crate::import::import_model(&model, &Limits::default()).expect("import");
        infer(&mut g, &Bindings::default(), &Limits::default()).expect("infer");
        fold_affine_into_conv(&mut g);
        crate::passes::eliminate_dead_nodes(&mut g);
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["Conv", "Add", "Relu"], "BatchNormalization and Mul fold, Add stays");
    }
}
