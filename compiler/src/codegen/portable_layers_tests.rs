//! The portable lowerings of `rnn_loops`, `conv_transpose_loops`,
//! `scatter_loops`, `cumulative_loops`, LRN (`norm_loops`), Hardmax and
//! training-mode Dropout (`training_loops`) against the kernels they
//! replace, as `portable_loops_tests` does for the other families: one-node
//! graphs on awkward shapes (odd sizes, both directions, short and empty
//! sequences, groups, negative and asymmetric pads, repeated and negative
//! indices) run through the JIT with and without the kernel library.

use super::portable_loops_tests::{both, data, indices, one_node, value};
use crate::ir::{DType, Graph, Tensor, ValueDef};
use crate::ops::conv::{AutoPad, ConvTranspose, Window};
use crate::ops::norm::Lrn;
use crate::ops::random::TrainingDropout;
use crate::ops::rnn::{Direction, Rnn, RnnKind};
use crate::ops::scatter::{Cumulative, Reduction, ScatterElements, ScatterNd};
use crate::ops::softmax::{Softmax, SoftmaxKind};
use crate::ops::Op;
use crate::passes::test_graph::{assert_all_close, floats};
use onnxc_runtime::abi::rnn::*;

/// Runs `g` both ways and checks that the f32 results agree.
fn agree(g: &Graph, inputs: &[Tensor], what: &str) {
    let [kernel, portable] = both(g, inputs);
    let (kernel, portable) = (floats(&kernel.expect("kernel")), floats(&portable.expect("portable")));
    assert_all_close(&portable, &kernel, 1e-5, what);
}

const SEQ: usize = 4;
const BATCH: usize = 3;
const INPUT: usize = 5;
const HIDDEN: usize = 3;

/// A recurrent node over every optional input, Y its output; `lens` its
/// sequence lengths.
fn rnn_graph(rnn: Rnn, lens: &[i32]) -> (Graph, Vec<Tensor>) {
    let mut g = Graph::default();
    let dirs = if rnn.direction == Direction::Bidirectional { 2 } else { 1 };
    let gates = match rnn.kind {
        RnnKind::Rnn => 1,
        RnnKind::Gru => 3,
        RnnKind::Lstm => 4,
    };
    let gh = gates * HIDDEN;
    let mut shapes = vec![
        vec![SEQ, BATCH, INPUT],
        vec![dirs, gh, INPUT],
        vec![dirs, gh, HIDDEN],
        vec![dirs, 2 * gh],
        vec![BATCH],
        vec![dirs, BATCH, HIDDEN],
    ];
    if rnn.kind == RnnKind::Lstm {
        shapes.extend([vec![dirs, BATCH, HIDDEN], vec![dirs, 3 * HIDDEN]]);
    }
    let mut inputs = Vec::new();
    let mut tensors = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let dtype = if i == 4 { DType::I32 } else { DType::F32 };
        inputs.push(Some(value(&mut g, &format!("in{i}"), dtype, shape, ValueDef::Input(i))));
        tensors.push(if i == 4 {
            let bytes = lens.iter().flat_map(|l| l.to_le_bytes()).collect();
            Tensor::from_bytes(DType::I32, shape.clone(), bytes).expect("lens")
        } else {
            let mut t = data(shape);
            // Weights of a few tenths keep the gates away from saturation.
            let v: Vec<f32> = t.to_f32s().expect("f32").iter().map(|&x| x * 0.2).collect();
            t = Tensor::from_f32s(shape.clone(), &v);
            t
        });
    }
    let y = value(&mut g, "y", DType::F32, &[SEQ, dirs, BATCH, HIDDEN], ValueDef::Computed);
    one_node(&mut g, Op::Rnn(rnn), inputs, y);
    (g, tensors)
}

/// `(f, g, h)` for both directions.
fn acts(list: [(i64, f64, f64); RNN_ACTS]) -> [(i64, f64, f64); 2 * RNN_ACTS] {
    std::array::from_fn(|k| list[k % RNN_ACTS])
}

fn rnn(kind: RnnKind, direction: Direction) -> Rnn {
    let usual = match kind {
        RnnKind::Rnn => [(ACT_TANH, 0.0, 0.0); RNN_ACTS],
        _ => [(ACT_SIGMOID, 0.0, 0.0), (ACT_TANH, 0.0, 0.0), (ACT_TANH, 0.0, 0.0)],
    };
    Rnn {
        kind,
        direction,
        hidden_size: Some(HIDDEN),
        acts: acts(usual),
        clip: None,
        batch_major: false,
        linear_before_reset: false,
        input_forget: false,
        packed_recurrent: false,
    }
}

#[test]
fn recurrent_layers_match_the_kernel() {
    let mut cases = Vec::new();
    for kind in [RnnKind::Rnn, RnnKind::Gru, RnnKind::Lstm] {
        for direction in [Direction::Forward, Direction::Reverse, Direction::Bidirectional] {
            cases.push(rnn(kind, direction));
        }
    }
    let mut gru = rnn(RnnKind::Gru, Direction::Bidirectional);
    gru.linear_before_reset = true;
    let mut lstm = rnn(RnnKind::Lstm, Direction::Reverse);
    (lstm.input_forget, lstm.clip) = (true, Some(0.7));
    let mut simple = rnn(RnnKind::Rnn, Direction::Forward);
    simple.acts = acts([(ACT_LEAKY_RELU, 0.3, 0.0); RNN_ACTS]);
    let mut softplus = rnn(RnnKind::Gru, Direction::Forward);
    softplus.acts = acts([(ACT_HARD_SIGMOID, 0.3, 0.4), (ACT_SOFTPLUS, 0.0, 0.0), (ACT_TANH, 0.0, 0.0)]);
    cases.extend([gru, lstm, simple, softplus]);
    for rnn in cases {
        let what = format!("{:?} {:?} {:?}", rnn.kind, rnn.direction, rnn.acts[0]);
        let (g, inputs) = rnn_graph(rnn, &[4, 2, 0]);
        agree(&g, &inputs, &what);
    }
}

#[test]
fn a_sequence_length_out_of_range_fails_with_the_kernels_status() {
    for lens in [[5, 1, 1], [1, -1, 2]] {
        let (g, inputs) = rnn_graph(rnn(RnnKind::Lstm, Direction::Forward), &lens);
        let [kernel, portable] = both(&g, &inputs);
        assert!(kernel.is_err(), "{lens:?}");
        assert_eq!(portable, kernel, "{lens:?}");
    }
}

/// One ConvTranspose: X, W and B shapes, the attributes and Y's shape.
struct TransposeCase {
    x: &'static [usize],
    w: &'static [usize],
    group: usize,
    window: Window,
    output_padding: Vec<usize>,
    y: &'static [usize],
}

fn window(auto_pad: AutoPad, strides: &[usize], dilations: &[usize], pads: &[usize]) -> Window {
    Window {
        auto_pad,
        kernel_shape: Vec::new(),
        strides: strides.to_vec(),
        dilations: dilations.to_vec(),
        pads: pads.to_vec(),
        ceil_mode: false,
    }
}

#[test]
fn conv_transpose_matches_the_kernel() {
    let cases = [
        TransposeCase {
            x: &[1, 4, 3, 5],
            w: &[4, 3, 3, 2],
            group: 2,
            window: window(AutoPad::NotSet, &[2, 3], &[1, 2], &[1, 0, 0, 1]),
            output_padding: vec![1, 0],
            y: &[1, 6, 7, 14],
        },
        TransposeCase {
            x: &[2, 3, 4],
            w: &[3, 2, 3],
            group: 1,
            window: window(AutoPad::NotSet, &[1], &[1], &[2, 1]),
            output_padding: Vec::new(),
            y: &[2, 2, 3],
        },
        TransposeCase {
            x: &[1, 1, 3, 3],
            w: &[1, 1, 3, 3],
            group: 1,
            window: window(AutoPad::SameUpper, &[2, 2], &[1, 1], &[]),
            output_padding: Vec::new(),
            y: &[1, 1, 6, 6],
        },
    ];
    for case in cases {
        let mut g = Graph::default();
        let bias_shape = [case.y[1]];
        let x = value(&mut g, "x", DType::F32, case.x, ValueDef::Input(0));
        let w = value(&mut g, "w", DType::F32, case.w, ValueDef::Input(1));
        let b = value(&mut g, "b", DType::F32, &bias_shape, ValueDef::Input(2));
        let y = value(&mut g, "y", DType::F32, case.y, ValueDef::Computed);
        let op = ConvTranspose {
            window: case.window,
            group: case.group,
            output_padding: case.output_padding,
            output_shape: Vec::new(),
            packed_weights: None,
        };
        one_node(&mut g, Op::ConvTranspose(op), vec![Some(x), Some(w), Some(b)], y);
        agree(&g, &[data(case.x), data(case.w), data(&bias_shape)], &format!("{:?}", case.x));
    }
}

/// ScatterElements (`nd` false, along axis 1) or ScatterND over data
/// `[4, 3]` with repeated indices; `out_of_range` makes one index `len`.
fn scatter_graph(nd: bool, reduction: Reduction, out_of_range: bool) -> (Graph, Vec<Tensor>) {
    let mut g = Graph::default();
    let (index_shape, update_shape, len): (&[usize], &[usize], usize) =
        if nd { (&[3, 1], &[3, 3], 4) } else { (&[4, 2], &[4, 2], 3) };
    let x = value(&mut g, "x", DType::F32, &[4, 3], ValueDef::Input(0));
    let i = value(&mut g, "i", DType::I64, index_shape, ValueDef::Input(1));
    let u = value(&mut g, "u", DType::F32, update_shape, ValueDef::Input(2));
    let y = value(&mut g, "y", DType::F32, &[4, 3], ValueDef::Computed);
    let op = if nd {
        Op::ScatterNd(ScatterNd { reduction })
    } else {
        Op::ScatterElements(ScatterElements { axis: 1, reduction })
    };
    one_node(&mut g, op, vec![Some(x), Some(i), Some(u)], y);
    let tensors = vec![data(&[4, 3]), indices(DType::I64, index_shape, len, out_of_range), data(update_shape)];
    (g, tensors)
}

#[test]
fn scatters_match_the_kernel_under_every_reduction() {
    for nd in [false, true] {
        for reduction in [Reduction::None, Reduction::Add, Reduction::Mul, Reduction::Max, Reduction::Min] {
            let (g, inputs) = scatter_graph(nd, reduction, false);
            let [kernel, portable] = both(&g, &inputs);
            assert!(kernel.is_ok());
            assert_eq!(portable, kernel, "nd {nd} {reduction:?}");
        }
    }
}

#[test]
fn a_scatter_index_out_of_range_fails_with_the_kernels_status() {
    for nd in [false, true] {
        let (g, inputs) = scatter_graph(nd, Reduction::None, true);
        let [kernel, portable] = both(&g, &inputs);
        assert!(kernel.is_err(), "nd {nd}");
        assert_eq!(portable, kernel, "nd {nd}");
    }
}

#[test]
fn lrn_and_hardmax_match_the_kernel() {
    let shape = [2, 5, 3, 1];
    for op in [
        Op::Lrn(Lrn { size: 3, alpha: 1e-2, beta: 0.75, bias: 1.5 }),
        Op::Lrn(Lrn { size: 4, alpha: 0.3, beta: 0.6, bias: 2.0 }),
        Op::Softmax(Softmax { kind: SoftmaxKind::Hardmax, axis: 1, coerce_2d: false }),
        Op::Softmax(Softmax { kind: SoftmaxKind::Hardmax, axis: -1, coerce_2d: false }),
    ] {
        let mut g = Graph::default();
        let x = value(&mut g, "x", DType::F32, &shape, ValueDef::Input(0));
        let y = value(&mut g, "y", DType::F32, &shape, ValueDef::Computed);
        let what = format!("{op:?}");
        one_node(&mut g, op, vec![Some(x)], y);
        agree(&g, &[data(&shape)], &what);
    }
}

#[test]
fn cumulative_sums_and_products_match_the_kernel() {
    let shape = [3, 4, 2];
    for dtype in [DType::F32, DType::I64] {
        for (product, exclusive, reverse) in
            [(false, false, false), (false, true, true), (true, false, true), (true, true, false)]
        {
            let mut g = Graph::default();
            let x = value(&mut g, "x", dtype, &shape, ValueDef::Input(0));
            let axis = value(&mut g, "axis", DType::I64, &[], ValueDef::Const(Tensor::from_i64s(vec![], &[1])));
            let y = value(&mut g, "y", dtype, &shape, ValueDef::Computed);
            one_node(&mut g, Op::Cumulative(Cumulative { product, exclusive, reverse }), vec![Some(x), Some(axis)], y);
            let input = if dtype == DType::F32 { data(&shape) } else { indices(DType::I64, &shape, 5, false) };
            let [kernel, portable] = both(&g, &[input]);
            assert!(kernel.is_ok());
            assert_eq!(portable, kernel, "{dtype} product {product} exclusive {exclusive} reverse {reverse}");
        }
    }
}

fn dropout_graph() -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, &[3, 7], ValueDef::Input(0));
    let ratio = value(&mut g, "ratio", DType::F32, &[], ValueDef::Input(1));
    let training = value(&mut g, "training", DType::Bool, &[], ValueDef::Input(2));
    let y = value(&mut g, "y", DType::F32, &[3, 7], ValueDef::Computed);
    one_node(
        &mut g,
        Op::TrainingDropout(TrainingDropout { key: 0x1234_5678_9abc }),
        vec![Some(x), Some(ratio), Some(training)],
        y,
    );
    g
}

#[test]
fn dropout_draws_the_kernels_stream_and_refuses_its_ratios() {
    for (ratio, training, valid) in [(0.3, 1, true), (0.0, 1, true), (0.7, 0, true), (1.0, 1, false), (-0.1, 1, false)]
    {
        let flag = Tensor::from_bytes(DType::Bool, vec![], vec![training]).expect("bool scalar");
        let inputs = [data(&[3, 7]), Tensor::from_f32s(vec![], &[ratio]), flag];
        let [kernel, portable] = both(&dropout_graph(), &inputs);
        assert_eq!(kernel.is_ok(), valid, "ratio {ratio}, training {training}");
        assert_eq!(portable, kernel, "ratio {ratio}, training {training}");
    }
}
