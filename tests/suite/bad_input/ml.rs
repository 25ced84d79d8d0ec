//! ai.onnx.ml models whose attributes do not fit together: each must be
//! refused at import (or inference) with the node and what is wrong named,
//! never reach a kernel with a table it could index outside of.

use super::{check, Case};
use crate::models::{int_attr, ints_attr, model, node, typed_value, value};
use onnx_proto::*;
use prost::Message;

fn list(name: &str, kind: attribute_proto::AttributeType, fill: impl FnOnce(&mut AttributeProto)) -> AttributeProto {
    let mut a = AttributeProto { name: Some(name.into()), r#type: Some(kind as i32), ..Default::default() };
    fill(&mut a);
    a
}

fn floats_attr(name: &str, v: &[f32]) -> AttributeProto {
    list(name, attribute_proto::AttributeType::Floats, |a| a.floats = v.to_vec())
}

fn strings_attr(name: &str, v: &[&str]) -> AttributeProto {
    list(name, attribute_proto::AttributeType::Strings, |a| {
        a.strings = v.iter().map(|s| s.as_bytes().to_vec()).collect()
    })
}

/// One ai.onnx.ml node `op` on x: f32[2, 2] giving `outputs`.
fn ml_model(op: &str, attrs: Vec<AttributeProto>, outputs: Vec<ValueInfoProto>) -> Vec<u8> {
    let names: Vec<String> = outputs.iter().map(|o| o.name().to_string()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut n = node(op, "ml", &["x"], &names);
    n.domain = Some("ai.onnx.ml".into());
    n.attribute = attrs;
    let mut m = model(vec![n], vec![value("x", Some(&[2, 2]))], outputs);
    m.opset_import.push(OperatorSetIdProto { domain: Some("ai.onnx.ml".into()), version: Some(3) });
    m.encode_to_vec()
}

/// A one-split regressor tree: node 0 tests feature 0, leaves 1 and 2.
fn tree_attrs(true_child: i64, feature: i64) -> Vec<AttributeProto> {
    vec![
        ints_attr("nodes_treeids", &[0, 0, 0]),
        ints_attr("nodes_nodeids", &[0, 1, 2]),
        ints_attr("nodes_featureids", &[feature, 0, 0]),
        strings_attr("nodes_modes", &["BRANCH_LEQ", "LEAF", "LEAF"]),
        floats_attr("nodes_values", &[0.5, 0.0, 0.0]),
        ints_attr("nodes_truenodeids", &[true_child, 0, 0]),
        ints_attr("nodes_falsenodeids", &[2, 0, 0]),
    ]
}

fn regressor_weights() -> Vec<AttributeProto> {
    vec![
        ints_attr("target_treeids", &[0, 0]),
        ints_attr("target_nodeids", &[1, 2]),
        ints_attr("target_ids", &[0, 0]),
        floats_attr("target_weights", &[1.0, 2.0]),
    ]
}

const I64: i32 = 7;

pub fn cases() -> Vec<Case> {
    vec![
        check("tree child missing", &["node \"ml\"", "true branch: tree 0 has no node 5"], |_| {
            let mut attrs = tree_attrs(5, 0);
            attrs.extend(regressor_weights());
            ml_model("TreeEnsembleRegressor", attrs, vec![value("y", Some(&[2, 1]))])
        }),
        check("tree weight on a branch", &["node \"ml\"", "node 0 of tree 0 is not a LEAF"], |_| {
            let mut attrs = tree_attrs(1, 0);
            attrs.extend(regressor_weights());
            attrs[8] = ints_attr("target_nodeids", &[1, 0]);
            ml_model("TreeEnsembleRegressor", attrs, vec![value("y", Some(&[2, 1]))])
        }),
        check("tree class id out of range", &["node \"ml\"", "class id 5 is not below 2"], |_| {
            let mut attrs = tree_attrs(1, 0);
            attrs.extend([
                ints_attr("class_treeids", &[0]),
                ints_attr("class_nodeids", &[1]),
                ints_attr("class_ids", &[5]),
                floats_attr("class_weights", &[1.0]),
                ints_attr("classlabels_int64s", &[0, 1]),
            ]);
            ml_model(
                "TreeEnsembleClassifier",
                attrs,
                vec![typed_value("label", I64, Some(&[2])), value("scores", Some(&[2, 2]))],
            )
        }),
        check("tree feature past the input", &["node \"ml\"", "reads feature 7, but input 0 has 2 features"], |_| {
            let mut attrs = tree_attrs(1, 7);
            attrs.extend(regressor_weights());
            ml_model("TreeEnsembleRegressor", attrs, vec![value("y", Some(&[2, 1]))])
        }),
        check("label encoder lengths", &["node \"ml\"", "there are 2 keys but 3 values"], |_| {
            let attrs = vec![floats_attr("keys_floats", &[1.0, 2.0]), ints_attr("values_int64s", &[1, 2, 3])];
            ml_model("LabelEncoder", attrs, vec![typed_value("y", I64, Some(&[2, 2]))])
        }),
        check("label encoder duplicate key", &["node \"ml\"", "attribute \"keys\": key 1 appears twice"], |_| {
            let attrs = vec![floats_attr("keys_floats", &[2.0, 2.0]), ints_attr("values_int64s", &[1, 2])];
            ml_model("LabelEncoder", attrs, vec![typed_value("y", I64, Some(&[2, 2]))])
        }),
        check("svm coefficients", &["node \"ml\"", "there are 3 coefficients, expected 2"], |_| {
            let attrs = vec![
                ints_attr("classlabels_ints", &[0, 1]),
                ints_attr("vectors_per_class", &[1, 1]),
                floats_attr("support_vectors", &[0.0, 1.0, 1.0, 0.0]),
                floats_attr("coefficients", &[1.0, -1.0, 0.5]),
                floats_attr("rho", &[0.0]),
            ];
            ml_model(
                "SVMClassifier",
                attrs,
                vec![typed_value("label", I64, Some(&[2])), value("scores", Some(&[2, 2]))],
            )
        }),
        check("linear regressor features", &["node \"ml\"", "input 0 has 2 features"], |_| {
            let attrs = vec![floats_attr("coefficients", &[1.0, 2.0, 3.0]), int_attr("targets", 1)];
            ml_model("LinearRegressor", attrs, vec![value("y", Some(&[2, 1]))])
        }),
    ]
}
