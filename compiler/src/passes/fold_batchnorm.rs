//! BatchNormalization folded into the convolution that feeds it.
//!
//! `y = scale · (conv(x, W) + b − mean) / √(var + ε) + bias` is again a
//! convolution, with each output channel m of W scaled by
//! `k[m] = scale[m] / √(var[m] + ε)` and bias `(b[m] − mean[m]) · k[m] + bias[m]`.
//! Applies when W, b and the four statistics are f32 constants, the
//! convolution's result is read by the BatchNormalization alone, and that
//! is in inference mode (training normalises with the batch's statistics).

use crate::ir::{Graph, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::Op;
use std::collections::HashMap;

pub fn fold_batchnorm_into_conv(graph: &mut Graph) {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    for v in graph.nodes.iter().flat_map(|n| n.inputs.iter().flatten()).chain(&graph.outputs) {
        *uses.entry(*v).or_default() += 1;
    }
    let producer: HashMap<ValueId, usize> =
        graph.nodes.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |&o| (o, i))).collect();
    let mut removed = vec![false; graph.nodes.len()];
    for bn_index in 0..graph.nodes.len() {
        let bn = &graph.nodes[bn_index];
        let Op::BatchNorm(norm) = &bn.op else { continue };
        if !norm.spatial || norm.training.is_some() || bn.outputs.len() != 1 {
            continue;
        }
        let Some(Some(conv_out)) = bn.inputs.first().copied() else { continue };
        let Some(&conv_index) = producer.get(&conv_out) else { continue };
        let conv = &graph.nodes[conv_index];
        if !matches!(conv.op, Op::Conv(_)) || uses.get(&conv_out) != Some(&1) || removed[conv_index] {
            continue;
        }
        let stats: Option<Vec<&Tensor>> = bn.inputs[1..].iter().map(|v| v.and_then(|v| graph.const_value(v))).collect();
        let Some(w) = conv.inputs.get(1).copied().flatten().and_then(|v| graph.const_value(v)) else { continue };
        let b = conv.inputs.get(2).copied().flatten().map(|v| graph.const_value(v));
        let (Some(stats), Some(b)) = (stats, b.map_or(Some(None), |b| b.map(Some))) else { continue };
        let Some((w2, b2)) = folded(w, b, &stats, norm.epsilon) else { continue };
        let y = bn.outputs[0];
        let name = conv.name.clone();
        let w_id = add_const(graph, format!("{name}.w_bn"), w2);
        let b_id = add_const(graph, format!("{name}.b_bn"), b2);
        let conv = &mut graph.nodes[conv_index];
        conv.inputs.truncate(1);
        conv.inputs.extend([Some(w_id), Some(b_id)]);
        conv.outputs = vec![y];
        removed[bn_index] = true;
    }
    let mut flags = removed.into_iter();
    graph.nodes.retain(|_| !flags.next().unwrap_or(false));
}

fn add_const(graph: &mut Graph, name: String, t: Tensor) -> ValueId {
    let ty = TensorType::known(t.dtype, &t.shape);
    graph.add_value(name, Some(ty), ValueDef::Const(t))
}

/// New weights and bias, or `None` when shapes or types do not fit.
fn folded(w: &Tensor, b: Option<&Tensor>, stats: &[&Tensor], epsilon: f32) -> Option<(Tensor, Tensor)> {
    let m = *w.shape.first()?;
    let [scale, bias, mean, var] = stats else { return None };
    let columns: Vec<Vec<f32>> = [*scale, *bias, *mean, *var].iter().map(|t| t.to_f32s()).collect::<Option<_>>()?;
    if columns.iter().any(|c| c.len() != m) {
        return None;
    }
    let conv_bias = match b {
        Some(b) => b.to_f32s().filter(|v| v.len() == m)?,
        None => vec![0.0; m],
    };
    let weights = w.to_f32s()?;
    let per_channel = weights.len() / m.max(1);
    let k: Vec<f32> = (0..m).map(|c| columns[0][c] / (columns[3][c] + epsilon).sqrt()).collect();
    let new_w: Vec<f32> = weights.iter().enumerate().map(|(i, &v)| v * k[i / per_channel.max(1)]).collect();
    let new_b: Vec<f32> = (0..m).map(|c| (conv_bias[c] - columns[2][c]) * k[c] + columns[1][c]).collect();
    Some((Tensor::from_f32s(w.shape.clone(), &new_w), Tensor::from_f32s(vec![m], &new_b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::{infer, Bindings};
    use crate::limits::Limits;
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

    /// x[1,2,3,3] → Conv(W[3,2,2,2], b) → BatchNormalization → Relu.
    fn model() -> ModelProto {
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
                node: vec![
                    node("Conv", &["x", "w", "b"], "c"),
                    node("BatchNormalization", &["c", "scale", "bias", "mean", "var"], "n"),
                    node("Relu", &["n"], "y"),
                ],
                initializer: vec![
                    f32_init("w", &[3, 2, 2, 2], &w),
                    f32_init("b", &[3], &[0.1, -0.2, 0.3]),
                    f32_init("scale", &[3], &[1.5, 0.5, -1.0]),
                    f32_init("bias", &[3], &[0.0, 0.25, -0.5]),
                    f32_init("mean", &[3], &[0.2, -0.1, 0.05]),
                    f32_init("var", &[3], &[0.9, 1.1, 0.3]),
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
    fn batchnorm_disappears_and_results_agree() {
        let mut reference = crate::import::import_model(&model(), &Limits::default()).expect("import");
        infer(&mut reference, &Bindings::default(), &Limits::default()).expect("infer");
        let mut folded = reference.clone();
        fold_batchnorm_into_conv(&mut folded);
        crate::passes::eliminate_dead_nodes(&mut folded);
        assert_eq!(crate::passes::verify(&folded), Ok(()));
        let ops: Vec<&str> = folded.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["Conv", "Relu"]);

        let x = Tensor::from_f32s(vec![1, 2, 3, 3], &(0..18).map(|i| (i as f32 * 0.71).cos()).collect::<Vec<_>>());
        let (want, got) = (run(&reference, &x), run(&folded, &x));
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5 + 1e-5 * w.abs(), "{got:?} vs {want:?}");
        }
    }
}
