//! Builders for the fusion passes' unit-test graphs: f32 values and a
//! 1x1 convolution on a `[1, 1, 2, 2]` input.

use crate::ir::{DType, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::conv::{Activation, Conv, Window};
use crate::ops::Op;

/// A new f32 value of static `shape`.
pub fn value(g: &mut Graph, name: &str, shape: &[usize], def: ValueDef) -> ValueId {
    g.add_value(name, Some(TensorType::known(DType::F32, shape)), def)
}

/// Appends `c = Conv(x, w)` with the one-tap filter `w = [[[[weight]]]]`,
/// no bias and no epilogue; returns `c` (`[1, 1, 2, 2]`).
pub fn conv_1x1(g: &mut Graph, x: ValueId, weight: f32) -> ValueId {
    let w = value(g, "w", &[1, 1, 1, 1], ValueDef::Const(Tensor::from_f32s(vec![1, 1, 1, 1], &[weight])));
    let c = value(g, "c", &[1, 1, 2, 2], ValueDef::Computed);
    let window = Window::parse(&crate::import::attrs::Attrs::new(&[])).expect("defaults");
    let conv = Conv { window, group: 1, activation: Activation::None, residual: false, packed_weights: None };
    g.nodes.push(Node { name: "conv".into(), op: Op::Conv(conv), inputs: vec![Some(x), Some(w)], outputs: vec![c] });
    c
}
