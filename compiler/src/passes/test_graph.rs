//! Builders for the fusion passes' unit-test graphs (f32 values and
//! constants, nodes, a 1x1 convolution on a `[1, 1, 2, 2]` input) and a
//! JIT run of such a graph, to compare its results before and after a
//! rewrite.

use crate::ir::{DType, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::conv::{Conv, Window};
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
    push_conv(g, &[0; 4], 1, x, w, c);
    c
}

/// Appends the node "conv": `y = Conv(x, w)` with `pads`, `group`, and
/// otherwise default attributes, no bias and no epilogue.
pub fn push_conv(g: &mut Graph, pads: &[usize], group: usize, x: ValueId, w: ValueId, y: ValueId) {
    let mut window = Window::parse(&crate::import::attrs::Attrs::new(&[])).expect("defaults");
    window.pads = pads.to_vec();
    let conv = Conv::new(window, group);
    g.nodes.push(Node { name: "conv".into(), op: Op::Conv(conv), inputs: vec![Some(x), Some(w)], outputs: vec![y] });
}

/// The f32 values of an output's bytes.
pub fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// A new f32 constant of `shape` holding `values`.
pub fn constant(g: &mut Graph, name: &str, shape: &[usize], values: &[f32]) -> ValueId {
    value(g, name, shape, ValueDef::Const(Tensor::from_f32s(shape.to_vec(), values)))
}

/// Appends the node `name` computing `output` with `op` from `inputs`.
pub fn push(g: &mut Graph, name: &str, op: impl Into<Op>, inputs: &[ValueId], output: ValueId) {
    let inputs = inputs.iter().map(|&v| Some(v)).collect();
    g.nodes.push(Node { name: name.into(), op: op.into(), inputs, outputs: vec![output] });
}

/// The bytes of every output of `graph` run through the JIT on `inputs`
/// (with the kernel library, or in portable mode).
pub fn run_bytes(graph: &Graph, inputs: &[Tensor], portable: bool) -> Vec<Vec<u8>> {
    let plan = crate::plan::plan(graph).expect("plan");
    let limits = crate::limits::Limits::default();
    let model = crate::jit::compile_with(graph, &plan, portable, &limits).expect("compile");
    model.run(inputs).expect("run").into_iter().map(|t| t.data).collect()
}

/// Asserts that `got` has `want`'s length and each element is within `tol`
/// of it, relative and absolute ([`onnxc_runtime::tolerance::close`]).
pub fn assert_all_close<T: Copy + Into<f64> + std::fmt::Debug>(got: &[T], want: &[T], tol: f64, context: &str) {
    assert_eq!(got.len(), want.len(), "{context}: lengths differ ({got:?} vs {want:?})");
    let close = got.iter().zip(want).all(|(&g, &w)| onnxc_runtime::tolerance::close(g.into(), w.into(), tol, tol));
    assert!(close, "{context}: {got:?} vs {want:?}");
}

/// Asserts that two runs' f32 outputs are the same bits, element by
/// element, except that any NaN equals any NaN (the sign and payload of a
/// NaN that `fmax`/`fmin` return differ between ISAs and between scalar
/// and vector instructions).
pub fn assert_same_f32s(got: &[Vec<u8>], want: &[Vec<u8>], context: &str) {
    let floats =
        |b: &[u8]| -> Vec<f32> { b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect() };
    assert_eq!(got.len(), want.len(), "{context}: output count");
    for (g, w) in got.iter().zip(want) {
        let (g, w) = (floats(g), floats(w));
        let same = g.len() == w.len()
            && g.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        assert!(same, "{context}: {g:?} vs {w:?}");
    }
}
