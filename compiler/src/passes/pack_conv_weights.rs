//! Constant f32 convolution weights packed at compile time.
//!
//! The convolution kernel multiplies the weights, as gemm's A operand, by
//! panels of the im2col matrix. Packing A into the micro-kernel's panel
//! layout costs about a tenth of a gemm when done per call; done here, once,
//! by the kernel library's own `onnxc_pack_conv_weights_f32`, the kernel reads
//! the panels in place from read-only data and the first inference does no
//! start-up work. The packed constant replaces input 1 and the Conv keeps
//! the logical weight shape (`conv::Layout::Packed`).
//!
//! Applies to f32 Conv with a constant weight that the kernel runs as a gemm
//! (not the direct depthwise kernel), and to f32 ConvTranspose with a
//! constant weight (`W_g^T` packed for `onnxc_pack_conv_transpose_weights_f32`,
//! the node keeping the logical shape in `ConvTranspose::packed_weights`),
//! when the code calls kernels at all (portable mode lowers both as loops
//! over the ONNX layout). Runs after the rewrites that change weights
//! (BatchNormalization folding).

use crate::ir::{Graph, Tensor};
use crate::ops::conv::Layout;
use crate::ops::Op;
use onnxc_runtime::{
    conv_packed_weights_elems, conv_takes_packed_weights, conv_transpose_packed_weights_elems,
    conv_transpose_takes_packed_weights, onnxc_pack_conv_transpose_weights_f32, onnxc_pack_conv_weights_f32,
    ConvParams, STATUS_OK,
};

/// `(params, weights, packed)` → status: a kernel library packing entry.
type PackFn = unsafe extern "C" fn(*const ConvParams, *const f32, *mut f32) -> i32;

pub fn pack_conv_weights(graph: &mut Graph) {
    for index in 0..graph.nodes.len() {
        let Some((x_shape, weights)) = super::f32_input_and_weights(graph, index) else { continue };
        let packing = match &graph.nodes[index].op {
            Op::Conv(conv) if conv.layout == Layout::Plain => conv
                .params(&x_shape, &weights.shape)
                .ok()
                .filter(conv_takes_packed_weights)
                .map(|p| (p, conv_packed_weights_elems(&p), onnxc_pack_conv_weights_f32 as PackFn)),
            Op::ConvTranspose(t) if t.packed_weights.is_none() => {
                t.params(&x_shape, &weights.shape).ok().filter(conv_transpose_takes_packed_weights).map(|p| {
                    (p, conv_transpose_packed_weights_elems(&p), onnxc_pack_conv_transpose_weights_f32 as PackFn)
                })
            }
            _ => None,
        };
        let Some(packed) = packing.and_then(|(p, len, pack)| packed(weights, &p, len, pack)) else { continue };
        let logical = weights.shape.clone();
        super::swap_in_packed(graph, index, 1, "packed_weights", &packed);
        match &mut graph.nodes[index].op {
            Op::Conv(conv) => conv.layout = Layout::Packed { weights: logical },
            Op::ConvTranspose(t) => t.packed_weights = Some(logical),
            _ => {}
        }
    }
}

/// `weights` packed by `pack` for `p` into `len` floats, if it succeeds.
fn packed(weights: &Tensor, p: &ConvParams, len: usize, pack: PackFn) -> Option<Vec<f32>> {
    let values = weights.to_f32s()?;
    let mut packed = vec![0.0f32; len];
    // SAFETY: the params were checked against these shapes, `values`
    // holds the weights and `packed` the packed size for the params.
    let status = unsafe { pack(p, values.as_ptr(), packed.as_mut_ptr()) };
    (status == STATUS_OK && len > 0).then_some(packed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, ValueDef, ValueId};
    use crate::ops::conv::{ConvTranspose, Window};
    use crate::passes::test_graph::{assert_all_close, push_conv, value};

    /// x[1,4,5,5] → Conv(W[10,2,3,3], group 2) → y[1,10,3,3]: two groups of
    /// five output channels, so each packed group is one padded panel.
    fn graph() -> (Graph, ValueId) {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 4, 5, 5], ValueDef::Input(0));
        let weights: Vec<f32> = (0..180).map(|i| (i as f32 * 0.37).sin()).collect();
        let w = value(&mut g, "w", &[10, 2, 3, 3], ValueDef::Const(Tensor::from_f32s(vec![10, 2, 3, 3], &weights)));
        let y = value(&mut g, "y", &[1, 10, 3, 3], ValueDef::Computed);
        push_conv(&mut g, &[0; 4], 2, x, w, y);
        g.inputs.push(x);
        g.outputs.push(y);
        (g, w)
    }

    fn run(graph: &Graph, x: &Tensor) -> Vec<f64> {
        let plan = crate::plan::plan(graph).expect("plan");
        let model = crate::jit::compile(graph, &plan).expect("compile");
        model.run(std::slice::from_ref(x)).expect("run")[0].to_f64s()
    }

    #[test]
    fn weights_are_packed_and_the_result_kept() {
        let (reference, w) = graph();
        let mut packed = reference.clone();
        pack_conv_weights(&mut packed);
        assert_eq!(crate::passes::verify(&packed), Ok(()));
        let node = &packed.nodes[0];
        let Op::Conv(conv) = &node.op else { panic!("not a conv: {:?}", node.op) };
        assert_eq!(conv.layout, Layout::Packed { weights: vec![10, 2, 3, 3] });
        let new_w = node.inputs[1].expect("weights");
        assert_ne!(new_w, w);
        // Two groups, each 5 rows padded to one 8-row panel, 2 * 9 deep.
        assert_eq!(packed.const_value(new_w).map(|t| t.shape.clone()), Some(vec![2 * 8 * 18]));

        let x = Tensor::from_f32s(vec![1, 4, 5, 5], &(0..100).map(|i| (i as f32 * 0.71).cos()).collect::<Vec<_>>());
        let (want, got) = (run(&reference, &x), run(&packed, &x));
        assert_all_close(&got, &want, 1e-5, "packed vs reference");
    }

    /// x[1,6,4,4] → ConvTranspose(W[6,5,4,4], stride 2, pads 1, group 2) →
    /// y[1,10,8,8]: each group's `W_g^T` (5 * 16 rows, 3 deep) packed as
    /// ten 8-row panels, and the result kept.
    #[test]
    fn transposed_weights_are_packed_and_the_result_kept() {
        let mut reference = Graph::default();
        let g = &mut reference;
        let x = value(g, "x", &[1, 6, 4, 4], ValueDef::Input(0));
        let weights: Vec<f32> = (0..480).map(|i| (i as f32 * 0.29).sin()).collect();
        let w = value(g, "w", &[6, 5, 4, 4], ValueDef::Const(Tensor::from_f32s(vec![6, 5, 4, 4], &weights)));
        let y = value(g, "y", &[1, 10, 8, 8], ValueDef::Computed);
        let mut window = Window::parse(&crate::import::attrs::Attrs::new(&[])).expect("defaults");
        (window.strides, window.pads) = (vec![2, 2], vec![1; 4]);
        let op = ConvTranspose { window, group: 2, output_padding: vec![], output_shape: vec![], packed_weights: None };
        crate::passes::test_graph::push(g, "deconv", Op::ConvTranspose(op), &[x, w], y);
        g.inputs.push(x);
        g.outputs.push(y);
        let mut packed = reference.clone();
        pack_conv_weights(&mut packed);
        assert_eq!(crate::passes::verify(&packed), Ok(()));
        let node = &packed.nodes[0];
        let Op::ConvTranspose(t) = &node.op else { panic!("not a ConvTranspose: {:?}", node.op) };
        assert_eq!(t.packed_weights, Some(vec![6, 5, 4, 4]));
        let new_w = node.inputs[1].expect("weights");
        assert_eq!(packed.const_value(new_w).map(|t| t.shape.clone()), Some(vec![2 * 80 * 3]));

        let x = Tensor::from_f32s(vec![1, 6, 4, 4], &(0..96).map(|i| (i as f32 * 0.43).cos()).collect::<Vec<_>>());
        let (want, got) = (run(&reference, &x), run(&packed, &x));
        assert_all_close(&got, &want, 1e-5, "packed vs reference");
    }
}
