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
//! (not the direct depthwise kernel), when the code calls kernels at all
//! (portable mode lowers Conv as loops over the ONNX layout). Runs after the
//! rewrites that change weights (BatchNormalization folding).

use crate::ir::{DType, Graph};
use crate::ops::conv::Layout;
use crate::ops::Op;
use onnxc_runtime::{conv_packed_weights_elems, conv_takes_packed_weights, onnxc_pack_conv_weights_f32, STATUS_OK};

pub fn pack_conv_weights(graph: &mut Graph) {
    for index in 0..graph.nodes.len() {
        let node = &graph.nodes[index];
        let Op::Conv(conv) = &node.op else { continue };
        let (Some(Some(x)), Some(Some(w))) = (node.inputs.first().copied(), node.inputs.get(1).copied()) else {
            continue;
        };
        let Some(weights) = graph.const_value(w) else { continue };
        let Some(values) = weights.to_f32s() else { continue };
        let Some((DType::F32, x_shape)) = graph.concrete(x) else { continue };
        if conv.layout != Layout::Plain {
            continue;
        }
        let Ok(params) = conv.params(&x_shape, &weights.shape) else { continue };
        if !conv_takes_packed_weights(&params) {
            continue;
        }
        let mut packed = vec![0.0f32; conv_packed_weights_elems(&params)];
        // SAFETY: the params are valid for these shapes (`params` checked
        // them), `values` holds the weights and `packed` the packed size.
        let status = unsafe { onnxc_pack_conv_weights_f32(&params, values.as_ptr(), packed.as_mut_ptr()) };
        if status != STATUS_OK {
            continue;
        }
        let logical = weights.shape.clone();
        super::swap_in_packed(graph, index, 1, "packed_weights", &packed);
        if let Op::Conv(conv) = &mut graph.nodes[index].op {
            conv.layout = Layout::Packed { weights: logical };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, ValueDef, ValueId};
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
}
