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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Tensor, ValueDef};
    use crate::ops::rnn::{Direction, Rnn, RnnKind};
    use crate::passes::test_graph::{assert_same_f32s, constant, push, run_bytes, value};
    use onnxc_runtime::abi::rnn::{ACT_SIGMOID, ACT_TANH, RNN_ACTS};

    const SEQ: usize = 5;
    const INPUT: usize = 3;
    const HIDDEN: usize = 6;

    /// A bidirectional layer of `kind` on a constant W and R, `X` `[5, 1, 3]`.
    fn graph(kind: RnnKind, linear_before_reset: bool) -> Graph {
        let gates = match kind {
            RnnKind::Rnn => 1,
            RnnKind::Gru => 3,
            RnnKind::Lstm => 4,
        };
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[SEQ, 1, INPUT], ValueDef::Input(0));
        let wave = |len: usize, f: f32| (0..len).map(|i| (i as f32 * f).sin() * 0.5).collect::<Vec<_>>();
        let w = constant(&mut g, "w", &[2, gates * HIDDEN, INPUT], &wave(2 * gates * HIDDEN * INPUT, 0.37));
        let r = constant(&mut g, "r", &[2, gates * HIDDEN, HIDDEN], &wave(2 * gates * HIDDEN * HIDDEN, 0.53));
        let y = value(&mut g, "y", &[SEQ, 2, 1, HIDDEN], ValueDef::Computed);
        let mut acts = [(ACT_TANH, 0.0, 0.0); 2 * RNN_ACTS];
        for d in 0..2 {
            acts[d * RNN_ACTS] = (if kind == RnnKind::Rnn { ACT_TANH } else { ACT_SIGMOID }, 0.0, 0.0);
        }
        let rnn = Rnn {
            kind,
            direction: Direction::Bidirectional,
            hidden_size: Some(HIDDEN),
            acts,
            clip: None,
            batch_major: false,
            linear_before_reset,
            input_forget: false,
            packed_recurrent: false,
        };
        push(&mut g, "rnn", Op::Rnn(rnn), &[x, w, r], y);
        g.inputs.push(x);
        g.outputs.push(y);
        g
    }

    /// R is replaced by its packed panels, the node flagged, and the
    /// result keeps its bits (the kernel packs an unpacked R the same way).
    #[test]
    fn recurrent_weights_are_packed_and_the_bits_kept() {
        let x = Tensor::from_f32s(
            vec![SEQ, 1, INPUT],
            &(0..SEQ * INPUT).map(|i| (i as f32 * 0.71).cos()).collect::<Vec<_>>(),
        );
        for (kind, linear_before_reset) in
            [(RnnKind::Lstm, false), (RnnKind::Gru, true), (RnnKind::Gru, false), (RnnKind::Rnn, false)]
        {
            let reference = graph(kind, linear_before_reset);
            let mut packed = reference.clone();
            pack_rnn_weights(&mut packed);
            assert_eq!(crate::passes::verify(&packed), Ok(()));
            let node = &packed.nodes[0];
            let Op::Rnn(rnn) = &node.op else { panic!("not a recurrent node: {:?}", node.op) };
            assert!(rnn.packed_recurrent, "{kind:?} not packed");
            let r = node.inputs[2].expect("R");
            assert_ne!(Some(r), reference.nodes[0].inputs[2]);
            assert_eq!(packed.const_value(r).map(|t| t.shape.len()), Some(1));
            let context = format!("{kind:?} packed vs per call");
            assert_same_f32s(
                &run_bytes(&packed, std::slice::from_ref(&x), false),
                &run_bytes(&reference, std::slice::from_ref(&x), false),
                &context,
            );
        }
    }

    /// An R that is a graph input is left alone.
    #[test]
    fn an_input_r_is_not_packed() {
        let mut g = graph(RnnKind::Lstm, false);
        let r = g.nodes[0].inputs[2].expect("R");
        g.value_mut(r).def = ValueDef::Input(1);
        g.inputs.push(r);
        pack_rnn_weights(&mut g);
        let Op::Rnn(rnn) = &g.nodes[0].op else { panic!() };
        assert!(!rnn.packed_recurrent);
        assert_eq!(g.nodes[0].inputs[2], Some(r));
    }
}
