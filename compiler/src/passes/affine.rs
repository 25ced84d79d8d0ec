//! Per-channel affine maps `v -> v * mul[c] + add[c]` as graphs write
//! them: an inference BatchNormalization, or a Mul or Add by a constant
//! that holds one value per channel (`[C, 1, 1]`, `[1, C, 1, 1]`, a
//! scalar...; exporters from Caffe2 write a normalisation's scale and
//! bias that way). Both ends of a convolution take a chain of them: its
//! weights and bias after it (`fold_affine`), its input packing before it
//! (`fuse_conv_prologue`).

use crate::ir::{Graph, Node, Tensor, ValueId};
use crate::ops::elementwise::Func;
use crate::ops::Op;

/// One per-channel affine map `v -> v * mul[c] + add[c]`.
pub struct Step {
    mul: Vec<f32>,
    add: Vec<f32>,
}

impl Step {
    /// `x * scale + shift` followed by this step, as a new scale and shift.
    fn apply(&self, c: usize, scale: f32, shift: f32) -> (f32, f32) {
        (scale * self.mul[c], shift * self.mul[c] + self.add[c])
    }
}

/// `steps`, in the order they are applied, as one `scale` and `shift` per
/// channel.
pub fn compose<'a>(steps: impl IntoIterator<Item = &'a Step>, channels: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut scale, mut shift) = (vec![1.0f32; channels], vec![0.0f32; channels]);
    for step in steps {
        for c in 0..channels {
            (scale[c], shift[c]) = step.apply(c, scale[c], shift[c]);
        }
    }
    (scale, shift)
}

/// The affine step `node` computes and the value it reads, when it is an
/// inference BatchNormalization or a Mul/Add by a per-channel constant.
pub fn affine_step(graph: &Graph, node: &Node, rank: usize, channels: usize) -> Option<(ValueId, Step)> {
    let values = |v: &Option<ValueId>, statistic: bool| {
        v.and_then(|v| graph.const_value(v)).and_then(|t| per_channel(t, rank, channels, statistic))
    };
    let constant = |v: &Option<ValueId>| values(v, false);
    match (&node.op, node.inputs.as_slice()) {
        (Op::BatchNorm(norm), [Some(x), stats @ ..]) if norm.spatial && norm.training.is_none() => {
            let stats: Vec<Vec<f32>> = stats.iter().map(|v| values(v, true)).collect::<Option<_>>()?;
            let [gamma, beta, mean, var]: [Vec<f32>; 4] = stats.try_into().ok()?;
            let k: Vec<f32> = (0..channels).map(|c| gamma[c] / (var[c] + norm.epsilon).sqrt()).collect();
            let add = (0..channels).map(|c| beta[c] - mean[c] * k[c]).collect();
            (node.outputs.len() == 1).then_some((*x, Step { mul: k, add }))
        }
        (Op::Elementwise(e), [a, b]) if matches!(e.func, Func::Mul | Func::Add | Func::Sum) => {
            let (x, values) = match (constant(a), constant(b)) {
                (None, Some(v)) => (a.as_ref()?, v),
                (Some(v), None) => (b.as_ref()?, v),
                _ => return None,
            };
            let step = match e.func {
                Func::Mul => Step { mul: values, add: vec![0.0; channels] },
                _ => Step { mul: vec![1.0; channels], add: values },
            };
            Some((*x, step))
        }
        _ => None,
    }
}

/// A constant's values per channel (axis 1 of a rank-`rank` tensor): a
/// BatchNormalization `statistic` (`[C]`), or an operand that broadcasts
/// along every other axis (`[C, 1, 1]`, `[1, C, 1, 1]`, a single value).
fn per_channel(t: &Tensor, rank: usize, channels: usize, statistic: bool) -> Option<Vec<f32>> {
    let values = t.to_f32s()?;
    let dims = &t.shape;
    if statistic {
        return (dims.len() == 1 && values.len() == channels).then_some(values);
    }
    if dims.len() > rank || !dims.iter().enumerate().all(|(i, &d)| d == 1 || rank - dims.len() + i == 1) {
        return None;
    }
    match values.len() {
        1 => Some(vec![values[0]; channels]),
        n if n == channels => Some(values),
        _ => None,
    }
}
