//! Constant f32 recurrent weights (R of RNN, GRU and LSTM) packed at
//! compile time.
//!
//! At batch 1 a recurrent layer's time goes into streaming R at every
//! step, which the kernel reads as panels of gate columns, depth-major
//! (`generic::rnn::panels` in the kernel library). Packed per call, R
//! costs one more pass over it per direction; packed here, once, by the
//! kernel library's own `rnn_pack_recurrent`, the kernel reads the panels
//! in place from read-only data, and the layout cannot drift. The packed
//! constant replaces input 2 and the node says so (`Rnn::packed_recurrent`).
//!
//! Applies to f32 recurrent nodes with a constant R when the code calls
//! kernels at all (portable mode lowers nothing here anyway). f64 (rare)
//! and f16 (staged through f32 copies of the ONNX layout) keep R as it is,
//! and the kernel packs it per call.

use crate::ir::{DType, Graph};
use crate::ops::Op;
use onnxc_runtime::{rnn_pack_recurrent, rnn_packed_recurrent_elems, STATUS_OK};

pub fn pack_rnn_weights(graph: &mut Graph) {
    for index in 0..graph.nodes.len() {
        let node = &graph.nodes[index];
        let Op::Rnn(rnn) = &node.op else { continue };
        let Some(Some(r)) = node.inputs.get(2).copied() else { continue };
        if rnn.packed_recurrent || graph.concrete(r).map(|(dtype, _)| dtype) != Some(DType::F32) {
            continue;
        }
        let Some(values) = graph.const_value(r).and_then(|t| t.to_f32s()) else { continue };
        let shapes: Vec<Option<Vec<usize>>> =
            node.inputs.iter().map(|i| i.and_then(|v| graph.concrete(v)).map(|(_, shape)| shape)).collect();
        let refs: Vec<Option<&[usize]>> = shapes.iter().map(|s| s.as_deref()).collect();
        let Ok(params) = rnn.params_for(&refs) else { continue };
        let mut packed = vec![0.0f32; rnn_packed_recurrent_elems(&params)];
        if packed.is_empty() {
            continue;
        }
        // SAFETY: the params were checked against the shapes of R, whose
        // values these are, and `packed` holds the packed size.
        if unsafe { rnn_pack_recurrent(&params, values.as_ptr(), packed.as_mut_ptr()) } != STATUS_OK {
            continue;
        }
        super::swap_in_packed(graph, index, 2, "packed_recurrent", &packed);
        if let Op::Rnn(rnn) = &mut graph.nodes[index].op {
            rnn.packed_recurrent = true;
        }
    }
}
