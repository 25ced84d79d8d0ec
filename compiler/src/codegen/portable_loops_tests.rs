//! The portable lowerings of `gather_loops` (TopK included), `scatter_loops`
//! (ReverseSequence, TensorScatter, MaxUnpool), `pad_loops`, `norm_loops` and `resize_loops` against
//! the kernels they replace (`portable_layers_tests` does the same for the
//! other families, with these helpers): one-node graphs on awkward shapes
//! (odd dims, tails, unit dims, negative indices and pads, NaN and ties)
//! run through the JIT with and without the kernel library. Data movement
//! must give the same bytes; the float computations agree within the
//! tolerance the conformance tests allow (they sum in a different order).

use crate::host::buffer::Placement;
use crate::host::call::Datum;
use crate::ir::{DType, Dim, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::conv::{AutoPad, Window};
use crate::ops::gather::{Gather, GatherElements, TopK};
use crate::ops::norm::{NormKind, Normalize};
use crate::ops::pool::MaxUnpool;
use crate::ops::resize::{AspectPolicy, Resize};
use crate::ops::scatter::{ReverseSequence, TensorScatter};
use crate::ops::shape_ops::{Pad, PadMode};
use crate::ops::Op;
use crate::passes::test_graph::{assert_all_close, floats};
use onnxc_runtime::abi::resize::*;

/// A value of `dtype` and `shape` defined by `def`.
pub(super) fn value(g: &mut Graph, name: &str, dtype: DType, shape: &[usize], def: ValueDef) -> ValueId {
    g.add_value(name, Some(TensorType::known(dtype, shape)), def)
}

/// `shape` filled with distinct, non-round f32 values.
pub(super) fn data(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.731).sin() * 3.0 + 0.25).collect();
    Tensor::from_f32s(shape.to_vec(), &v)
}

/// The graph `y = op(inputs...)` whose graph inputs are the `Input` values.
pub(super) fn one_node(g: &mut Graph, op: Op, inputs: Vec<Option<ValueId>>, output: ValueId) {
    g.inputs = inputs.iter().flatten().copied().filter(|&v| matches!(g.value(v).def, ValueDef::Input(_))).collect();
    g.outputs = vec![output];
    g.nodes.push(Node { name: "node".into(), op, inputs, outputs: vec![output] });
}

/// Runs `g` on `inputs` with and without kernels: both results (or both
/// errors).
pub(super) fn both(g: &Graph, inputs: &[Tensor]) -> [Result<Vec<u8>, String>; 2] {
    [false, true].map(|portable| {
        let plan = crate::plan::plan(g).expect("plan");
        let model = crate::jit::compile_with(g, &plan, portable, &crate::limits::Limits::default()).expect("compile");
        model.run(inputs).map(|mut out| out.remove(0).data)
    })
}

fn gather_graph(data_shape: &[usize], axis: usize, index_type: DType, indices: &[usize], elements: bool) -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, data_shape, ValueDef::Input(0));
    let i = value(&mut g, "i", index_type, indices, ValueDef::Input(1));
    let out_shape =
        if elements { indices.to_vec() } else { [&data_shape[..axis], indices, &data_shape[axis + 1..]].concat() };
    let y = value(&mut g, "y", DType::F32, &out_shape, ValueDef::Computed);
    let op = if elements {
        Op::GatherElements(GatherElements { axis: axis as i64 })
    } else {
        Op::Gather(Gather { axis: axis as i64, feature_extractor: false })
    };
    one_node(&mut g, op, vec![Some(x), Some(i)], y);
    g
}

/// Indices in `[-len, len)` (negative ones too), as `dtype`.
pub(super) fn indices(dtype: DType, shape: &[usize], len: usize, out_of_range: bool) -> Tensor {
    let n: usize = shape.iter().product();
    let mut v: Vec<i64> = (0..n).map(|k| (k * 7 % (2 * len)) as i64 - len as i64).collect();
    if out_of_range {
        v[n / 2] = len as i64;
    }
    match dtype {
        DType::I32 => {
            let bytes = v.iter().flat_map(|&k| (k as i32).to_le_bytes()).collect();
            Tensor::from_bytes(DType::I32, shape.to_vec(), bytes).expect("i32 tensor")
        }
        _ => Tensor::from_i64s(shape.to_vec(), &v),
    }
}

#[test]
fn gather_matches_the_kernel_for_every_index_type_and_axis() {
    for (shape, axis, idx_shape) in [(&[5, 3][..], 0, &[4][..]), (&[2, 7, 3], 1, &[3, 2]), (&[3, 5], 1, &[])] {
        for dtype in [DType::I32, DType::I64] {
            let g = gather_graph(shape, axis, dtype, idx_shape, false);
            let inputs = [data(shape), indices(dtype, idx_shape, shape[axis], false)];
            let [kernel, portable] = both(&g, &inputs);
            assert_eq!(portable, kernel, "{shape:?} axis {axis} {dtype}");
            assert!(kernel.is_ok());
        }
    }
}

#[test]
fn gather_elements_matches_the_kernel() {
    for (shape, axis, idx_shape) in [(&[4, 3][..], 0, &[5, 2][..]), (&[2, 5, 3], 1, &[2, 7, 3]), (&[3, 4], 1, &[3, 1])]
    {
        for dtype in [DType::I32, DType::I64] {
            let g = gather_graph(shape, axis, dtype, idx_shape, true);
            let inputs = [data(shape), indices(dtype, idx_shape, shape[axis], false)];
            let [kernel, portable] = both(&g, &inputs);
            assert_eq!(portable, kernel, "{shape:?} axis {axis} {dtype}");
            assert!(kernel.is_ok());
        }
    }
}

#[test]
fn an_index_out_of_range_fails_with_the_kernels_status() {
    for elements in [false, true] {
        let g = gather_graph(&[4, 3], 0, DType::I64, &[5, 3], elements);
        let [kernel, portable] = both(&g, &[data(&[4, 3]), indices(DType::I64, &[5, 3], 4, true)]);
        assert!(kernel.is_err(), "elements {elements}");
        assert_eq!(portable, kernel, "elements {elements}");
    }
}

fn pad_graph(mode: PadMode, shape: &[usize], pads: &[i64]) -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, shape, ValueDef::Input(0));
    let p =
        value(&mut g, "pads", DType::I64, &[pads.len()], ValueDef::Const(Tensor::from_i64s(vec![pads.len()], pads)));
    let value_t = Tensor::from_f32s(vec![], &[1.5]);
    let c = value(&mut g, "value", DType::F32, &[], ValueDef::Const(value_t));
    let r = shape.len();
    let out: Vec<usize> = (0..r).map(|d| (shape[d] as i64 + pads[d] + pads[d + r]) as usize).collect();
    let y = value(&mut g, "y", DType::F32, &out, ValueDef::Computed);
    one_node(&mut g, Op::Pad(Pad { mode }), vec![Some(x), Some(p), Some(c)], y);
    g
}

#[test]
fn pad_matches_the_kernel_in_every_mode() {
    let cases: [(&[usize], &[i64]); 3] =
        [(&[3, 5], &[1, 2, 2, 3]), (&[2, 3, 4], &[0, -1, 2, 1, 1, -1]), (&[1, 7], &[0, 5, 0, 6])];
    for mode in [PadMode::Constant, PadMode::Reflect, PadMode::Edge, PadMode::Wrap] {
        for (shape, pads) in cases {
            let [kernel, portable] = both(&pad_graph(mode, shape, pads), &[data(shape)]);
            assert_eq!(portable, kernel, "{mode:?} {shape:?} {pads:?}");
            assert!(kernel.is_ok());
        }
    }
}

fn norm_graph(kind: NormKind, op_type: &'static str, shape: &[usize], affine: &[usize]) -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, shape, ValueDef::Input(0));
    let scale = value(&mut g, "scale", DType::F32, affine, ValueDef::Input(1));
    let bias = value(&mut g, "bias", DType::F32, affine, ValueDef::Input(2));
    let y = value(&mut g, "y", DType::F32, shape, ValueDef::Computed);
    let op = Normalize { op_type, kind, epsilon: 1e-5, stat_dtype: DType::F32 };
    one_node(&mut g, Op::Normalize(op), vec![Some(x), Some(scale), Some(bias)], y);
    g
}

#[test]
fn normalisations_match_the_kernel() {
    let cases: [(NormKind, &str, &[usize], &[usize]); 4] = [
        (NormKind::Layer { axis: -1 }, "LayerNormalization", &[3, 5, 7], &[7]),
        (NormKind::Layer { axis: 1 }, "LayerNormalization", &[3, 5, 7], &[5, 1]),
        (NormKind::Instance, "InstanceNormalization", &[2, 3, 5, 3], &[3]),
        (NormKind::Group { groups: 2, per_channel: true }, "GroupNormalization", &[2, 4, 7], &[4]),
    ];
    for (kind, op_type, shape, affine) in cases {
        let g = norm_graph(kind, op_type, shape, affine);
        let [kernel, portable] = both(&g, &[data(shape), data(affine), data(affine)]);
        let (kernel, portable) = (floats(&kernel.expect("kernel")), floats(&portable.expect("portable")));
        assert_all_close(&portable, &kernel, 1e-5, &format!("{op_type} {shape:?}"));
    }
}

/// A Resize of `mode` and `coord_mode`, the other attributes at their defaults.
fn resize_op(mode: i64, coord_mode: i64, antialias: bool) -> Resize {
    Resize {
        op_name: "Resize",
        mode,
        coord_mode,
        nearest_mode: NEAREST_ROUND_PREFER_FLOOR,
        cubic_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
        antialias,
        axes: None,
        policy: AspectPolicy::Stretch,
    }
}

fn resize_graph(mode: i64, coord_mode: i64, shape: &[usize], scales: &[f32], antialias: bool) -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, shape, ValueDef::Input(0));
    let s =
        value(&mut g, "s", DType::F32, &[scales.len()], ValueDef::Const(Tensor::from_f32s(vec![scales.len()], scales)));
    let out: Vec<usize> = shape.iter().zip(scales).map(|(&n, &k)| (n as f32 * k).floor() as usize).collect();
    let y = value(&mut g, "y", DType::F32, &out, ValueDef::Computed);
    one_node(&mut g, Op::Resize(resize_op(mode, coord_mode, antialias)), vec![Some(x), None, Some(s), None], y);
    g
}

#[test]
fn resize_matches_the_kernel() {
    let shape = [1, 2, 5, 7];
    for mode in [MODE_NEAREST, MODE_LINEAR, MODE_CUBIC] {
        for coord_mode in [COORD_HALF_PIXEL, COORD_ALIGN_CORNERS, COORD_ASYMMETRIC] {
            for (scales, antialias) in [([1.0, 1.0, 1.8, 2.5], false), ([1.0, 1.0, 0.6, 0.45], true)] {
                let g = resize_graph(mode, coord_mode, &shape, &scales, antialias);
                let [kernel, portable] = both(&g, &[data(&shape)]);
                let (kernel, portable) = (floats(&kernel.expect("kernel")), floats(&portable.expect("portable")));
                assert_all_close(&portable, &kernel, 1e-5, &format!("mode {mode} coord {coord_mode} {scales:?}"));
            }
        }
    }
}

/// Resize `op` of an f32 `shape` by the scales (f32) or sizes (i64)
/// `given`: graph input 1 when `out` is `None` (the output's dims are then
/// data-dependent), else a constant resizing to `out`. A
/// tf_crop_and_resize roi is a constant.
fn resize_by_graph(op: Resize, shape: &[usize], given: &Tensor, out: Option<&[usize]>) -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, shape, ValueDef::Input(0));
    let def = if out.is_some() { ValueDef::Const(given.clone()) } else { ValueDef::Input(1) };
    let s = value(&mut g, "s", given.dtype, &given.shape, def);
    let roi = (op.coord_mode == COORD_TF_CROP_AND_RESIZE).then(|| {
        let n = given.len();
        let roi = Tensor::from_f32s(vec![2 * n], &[vec![0.1f32; n], vec![1.2f32; n]].concat());
        value(&mut g, "roi", DType::F32, &[2 * n], ValueDef::Const(roi))
    });
    let dims = match out {
        Some(out) => out.iter().map(|&d| Dim::Known(d)).collect(),
        None => vec![Dim::Dynamic(None); shape.len()],
    };
    let y = g.add_value("y", Some(TensorType { dtype: DType::F32, shape: dims }), ValueDef::Computed);
    let inputs =
        if given.dtype == DType::F32 { vec![Some(x), roi, Some(s), None] } else { vec![Some(x), roi, None, Some(s)] };
    one_node(&mut g, Op::Resize(op), inputs, y);
    g
}

/// The output of `g` run in portable mode on `inputs`, every buffer
/// against guard pages; with `arena_only`, the workspace is the plan's
/// arena and no allocator hook serves data-dependent values.
pub(super) fn portable_guarded(g: &Graph, inputs: &[Tensor], arena_only: bool) -> Result<Tensor, String> {
    let plan = crate::plan::plan(g).expect("plan");
    let model = crate::jit::compile_with(g, &plan, true, &crate::limits::Limits::default()).expect("compile");
    let workspace = arena_only.then_some(model.interface().plan_workspace_bytes);
    let given: Vec<Datum> = inputs.iter().cloned().map(Datum::Tensor).collect();
    let mut out = model.run_data(&given, workspace, Placement::Guarded)?;
    Ok(out.remove(0).into_tensor().expect("a tensor"))
}

#[test]
fn run_time_resize_matches_the_kernel_and_the_constant_case() {
    // Against the kernel within rounding (it sums planes in another
    // order), exactly for nearest; and the same bits as the portable
    // lowering of the same scales or sizes as constants, whose taps the
    // kernel's fill_taps computes.
    let shape = [1, 2, 5, 7];
    let sizings = [
        (None, Tensor::from_f32s(vec![4], &[1.0, 1.0, 1.7, 0.6])),
        (None, Tensor::from_f32s(vec![4], &[1.0, 1.0, 0.55, 0.4])),
        (None, Tensor::from_i64s(vec![4], &[1, 2, 9, 4])),
        (Some(vec![3, 2]), Tensor::from_i64s(vec![2], &[3, 8])),
    ];
    for mode in [MODE_NEAREST, MODE_LINEAR, MODE_CUBIC] {
        for coord_mode in 0..=COORD_TF_HALF_PIXEL_FOR_NN {
            // Bits 0 and 1: antialias, exclude_outside; the whole: nearest_mode.
            for flags in 0..=NEAREST_SIMPLE {
                for (axes, given) in &sizings {
                    let mut op = resize_op(mode, coord_mode, flags & 1 != 0 && mode != MODE_NEAREST);
                    (op.exclude_outside, op.axes) = (flags & 2 != 0, axes.clone());
                    (op.nearest_mode, op.cubic_a, op.extrapolation_value) = (flags, -0.5, 2.5);
                    let context = format!("mode {mode} coord {coord_mode} flags {flags} {given:?}");
                    let g = resize_by_graph(op.clone(), &shape, given, None);
                    let inputs = [data(&shape), given.clone()];
                    let [kernel, portable] = both(&g, &inputs);
                    let (kernel, portable) = (kernel.expect("kernel"), portable.expect("portable"));
                    if mode == MODE_NEAREST {
                        assert_eq!(portable, kernel, "{context}");
                    }
                    assert_all_close(&floats(&portable), &floats(&kernel), 1e-5, &context);
                    let run_time = portable_guarded(&g, &inputs, false).expect("run-time");
                    let constant = resize_by_graph(op, &shape, given, Some(&run_time.shape));
                    let constant = portable_guarded(&constant, &inputs[..1], false).expect("constant");
                    assert_eq!(run_time.data, constant.data, "{context}");
                }
            }
        }
    }
}

#[test]
fn run_time_resize_keeps_the_aspect_ratio_as_the_kernel_does() {
    let shape = [1, 2, 5, 7];
    for policy in [AspectPolicy::NotLarger, AspectPolicy::NotSmaller] {
        for sizes in [[9, 4], [2, 20]] {
            let mut op = resize_op(MODE_LINEAR, COORD_HALF_PIXEL, false);
            (op.policy, op.axes) = (policy, Some(vec![2, 3]));
            let sizes = Tensor::from_i64s(vec![2], &sizes);
            let [kernel, portable] = both(&resize_by_graph(op, &shape, &sizes, None), &[data(&shape), sizes.clone()]);
            let (kernel, portable) = (floats(&kernel.expect("kernel")), floats(&portable.expect("portable")));
            assert_all_close(&portable, &kernel, 1e-5, &format!("{policy:?} {sizes:?}"));
        }
    }
}

#[test]
fn run_time_resize_refuses_what_does_not_fit_as_the_kernel_does() {
    // A negative size, a size product that overflows, an output larger
    // than the allocator gives, a zero, a NaN, an infinite and a huge
    // scale: the run fails with the kernel path's status; against guard
    // pages with only the plan's arena, too, nothing is written outside.
    let shape = [1, 2, 5, 7];
    let refused = [
        Tensor::from_i64s(vec![4], &[1, 2, -1, 4]),
        Tensor::from_i64s(vec![4], &[1, 2, 1 << 40, 1 << 40]),
        Tensor::from_i64s(vec![4], &[1, 2, 50_000, 50_000]),
        Tensor::from_f32s(vec![4], &[1.0, 1.0, 0.0, 2.0]),
        Tensor::from_f32s(vec![4], &[1.0, 1.0, f32::NAN, 2.0]),
        Tensor::from_f32s(vec![4], &[1.0, 1.0, f32::INFINITY, 2.0]),
        Tensor::from_f32s(vec![4], &[1.0, 1.0, 1e12, 1.0]),
    ];
    for given in refused {
        let g = resize_by_graph(resize_op(MODE_LINEAR, COORD_HALF_PIXEL, false), &shape, &given, None);
        let inputs = [data(&shape), given.clone()];
        let [kernel, portable] = both(&g, &inputs);
        let (kernel, portable) = (kernel.expect_err("kernel"), portable.expect_err("portable"));
        assert_eq!(portable, kernel, "{given:?}");
        portable_guarded(&g, &inputs, true).expect_err("arena only");
    }
    // Sizes that fit the allocator but not the arena alone.
    let sizes = Tensor::from_i64s(vec![4], &[1, 2, 40, 70]);
    let g = resize_by_graph(resize_op(MODE_CUBIC, COORD_HALF_PIXEL, false), &shape, &sizes, None);
    let inputs = [data(&shape), sizes];
    assert_eq!(portable_guarded(&g, &inputs, false).expect("with the hook").shape, [1, 2, 40, 70]);
    portable_guarded(&g, &inputs, true).expect_err("arena only");
}

/// TopK of constant `k` along axis 1 of `x`; the graph's output is the
/// values (`indices` false) or the indices.
fn topk_graph(shape: &[usize], k: usize, largest: bool, indices: bool) -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, shape, ValueDef::Input(0));
    let k_value = value(&mut g, "k", DType::I64, &[1], ValueDef::Const(Tensor::from_i64s(vec![1], &[k as i64])));
    let out_shape = [shape[0], k];
    let values = value(&mut g, "values", DType::F32, &out_shape, ValueDef::Computed);
    let positions = value(&mut g, "indices", DType::I64, &out_shape, ValueDef::Computed);
    one_node(&mut g, Op::TopK(TopK { axis: 1, largest }), vec![Some(x), Some(k_value)], values);
    g.nodes[0].outputs.push(positions);
    if indices {
        g.outputs = vec![positions];
    }
    g
}

#[test]
fn topk_orders_nan_first_and_ties_by_index_as_the_kernel_does() {
    let nan = f32::NAN;
    let rows: [f32; 24] = [
        1.0, nan, 3.0, 3.0, -0.0, 0.0, //
        2.0, 2.0, 2.0, 2.0, 2.0, 2.0, //
        nan, -1.0, nan, 5.0, -7.0, 5.0, //
        0.5, -0.5, 4.0, -4.0, 8.0, -8.0,
    ];
    let x = Tensor::from_f32s(vec![4, 6], &rows);
    for (k, largest, indices) in
        [(4, true, true), (4, false, true), (6, true, false), (3, false, false), (0, true, true)]
    {
        let [kernel, portable] = both(&topk_graph(&[4, 6], k, largest, indices), std::slice::from_ref(&x));
        assert!(kernel.is_ok(), "k {k} largest {largest}");
        assert_eq!(portable, kernel, "k {k} largest {largest} indices {indices}");
    }
}

fn reverse_sequence_graph(shape: &[usize]) -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, shape, ValueDef::Input(0));
    let lens = value(&mut g, "lens", DType::I64, &[shape[1]], ValueDef::Input(1));
    let y = value(&mut g, "y", DType::F32, shape, ValueDef::Computed);
    one_node(
        &mut g,
        Op::ReverseSequence(ReverseSequence { batch_axis: 1, time_axis: 0 }),
        vec![Some(x), Some(lens)],
        y,
    );
    g
}

#[test]
fn reverse_sequence_refuses_a_length_past_the_time_axis_as_the_kernel_does() {
    let shape = [4, 3, 2];
    for (lens, valid) in [([4, 0, 2], true), ([1, 5, 2], false), ([-1, 2, 2], false)] {
        let inputs = [data(&shape), Tensor::from_i64s(vec![3], &lens)];
        let [kernel, portable] = both(&reverse_sequence_graph(&shape), &inputs);
        assert_eq!(kernel.is_ok(), valid, "{lens:?}");
        assert_eq!(portable, kernel, "{lens:?}");
    }
}

fn tensor_scatter_graph(circular: bool) -> Graph {
    let mut g = Graph::default();
    let cache = value(&mut g, "cache", DType::F32, &[2, 4, 3], ValueDef::Input(0));
    let update = value(&mut g, "update", DType::F32, &[2, 2, 3], ValueDef::Input(1));
    let write = value(&mut g, "write", DType::I64, &[2], ValueDef::Input(2));
    let y = value(&mut g, "y", DType::F32, &[2, 4, 3], ValueDef::Computed);
    let op = Op::TensorScatter(TensorScatter { axis: 1, circular });
    one_node(&mut g, op, vec![Some(cache), Some(update), Some(write)], y);
    g
}

#[test]
fn tensor_scatter_refuses_a_linear_run_past_the_cache_as_the_kernel_does() {
    for circular in [false, true] {
        for (write, valid) in [([0, 2], true), ([3, 1], circular), ([-1, 0], circular), ([i64::MAX, 0], circular)] {
            let inputs = [data(&[2, 4, 3]), data(&[2, 2, 3]), Tensor::from_i64s(vec![2], &write)];
            let [kernel, portable] = both(&tensor_scatter_graph(circular), &inputs);
            assert_eq!(kernel.is_ok(), valid, "circular {circular}, {write:?}");
            assert_eq!(portable, kernel, "circular {circular}, {write:?}");
        }
    }
}

fn max_unpool_graph() -> Graph {
    let mut g = Graph::default();
    let x = value(&mut g, "x", DType::F32, &[1, 2, 2, 2], ValueDef::Input(0));
    let i = value(&mut g, "i", DType::I64, &[1, 2, 2, 2], ValueDef::Input(1));
    let y = value(&mut g, "y", DType::F32, &[1, 2, 4, 4], ValueDef::Computed);
    let window = Window {
        auto_pad: AutoPad::NotSet,
        kernel_shape: vec![2, 2],
        strides: vec![2, 2],
        dilations: vec![],
        pads: vec![],
        ceil_mode: false,
    };
    one_node(&mut g, Op::MaxUnpool(MaxUnpool { window }), vec![Some(x), Some(i)], y);
    g
}

#[test]
fn max_unpool_refuses_an_index_outside_the_unpooled_tensor_as_the_kernel_does() {
    for (bad, valid) in [(None, true), (Some(32), false), (Some(-1), false)] {
        let mut index = vec![0, 5, 10, 15, 16, 21, 26, 31];
        if let Some(v) = bad {
            index[3] = v;
        }
        let inputs = [data(&[1, 2, 2, 2]), Tensor::from_i64s(vec![1, 2, 2, 2], &index)];
        let [kernel, portable] = both(&max_unpool_graph(), &inputs);
        assert_eq!(kernel.is_ok(), valid, "{bad:?}");
        assert_eq!(portable, kernel, "{bad:?}");
    }
}
