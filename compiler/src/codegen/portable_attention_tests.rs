//! The portable lowerings of `attention_loops`, `attention_aux_loops` and
//! `linear_attention_loops` against the kernels they replace, as
//! `portable_loops_tests` does for the other families: one-node graphs
//! whose every output is compared, on shapes that reach the awkward paths
//! (grouped heads, a past cache, a mask shorter than the keys, causal and
//! window frontiers, padded keys, softcap, every qk output mode; rotary
//! pairs of both layouts past the rotary dim; a state carried in).

use super::portable_loops_tests::{data, value};
use crate::ir::{DType, Graph, Node, Tensor, ValueDef};
use crate::ops::attention::{Attention, CausalConvWithState, LinearAttention, RotaryEmbedding};
use crate::ops::Op;
use crate::passes::test_graph::{assert_all_close, floats};
use onnxc_runtime::abi::attention::RULE_GATED_DELTA;

/// An input of the node: its type, shape and data.
type Given = (DType, Vec<usize>, Tensor);

fn f32_input(shape: &[usize]) -> Given {
    (DType::F32, shape.to_vec(), data(shape))
}

fn i64_input(shape: &[usize], values: &[i64]) -> Given {
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    (DType::I64, shape.to_vec(), Tensor::from_bytes(DType::I64, shape.to_vec(), bytes).expect("i64 tensor"))
}

/// Runs the node `op` over `inputs` (`None`: absent) with f32 outputs of
/// `outputs`' shapes, with and without kernels, and checks that every
/// output agrees.
fn agree(op: Op, inputs: Vec<Option<Given>>, outputs: &[&[usize]], what: &str) {
    let mut g = Graph::default();
    let mut given = Vec::new();
    let mut ids = Vec::new();
    for (i, input) in inputs.into_iter().enumerate() {
        ids.push(input.map(|(dtype, shape, tensor)| {
            let id = value(&mut g, &format!("in{i}"), dtype, &shape, ValueDef::Input(given.len()));
            given.push(tensor);
            id
        }));
    }
    let outs: Vec<_> = outputs
        .iter()
        .enumerate()
        .map(|(k, s)| value(&mut g, &format!("out{k}"), DType::F32, s, ValueDef::Computed))
        .collect();
    g.inputs = ids.iter().flatten().copied().collect();
    g.outputs = outs.clone();
    g.nodes.push(Node { name: "node".into(), op, inputs: ids, outputs: outs });
    let [kernel, portable] = [false, true].map(|portable| {
        let plan = crate::plan::plan(&g).expect("plan");
        let model = crate::jit::compile_with(&g, &plan, portable, &crate::limits::Limits::default()).expect("compile");
        model.run(&given).expect("run")
    });
    assert_eq!(kernel.len(), outputs.len(), "{what}: output count");
    for (k, (want, got)) in kernel.iter().zip(&portable).enumerate() {
        assert_all_close(&floats(&got.data), &floats(&want.data), 1e-5, &format!("{what}, output {k}"));
    }
}

fn attention(is_causal: bool, heads: Option<(i64, i64)>, softcap: f32, mode: i64, window: (i64, i64)) -> Op {
    Op::Attention(Attention {
        is_causal,
        scale: Some(0.4),
        q_num_heads: heads.map(|h| h.0),
        kv_num_heads: heads.map(|h| h.1),
        softmax_precision: None,
        softcap,
        qk_matmul_output_mode: mode,
        left_window_size: window.0,
        right_window_size: window.1,
    })
}

#[test]
fn attention_with_a_past_cache_matches_the_kernel() {
    // GQA (4 query heads on 2 kv heads), 2 past + 4 new keys, an additive
    // mask over 5 of the 6 keys (the last padded with -inf, which only the
    // modes run without the causal frontier see), softcap.
    for mode in 0..4 {
        let inputs = vec![
            Some(f32_input(&[2, 4, 3, 5])),
            Some(f32_input(&[2, 2, 4, 5])),
            Some(f32_input(&[2, 2, 4, 6])),
            Some(f32_input(&[4, 3, 5])),
            Some(f32_input(&[2, 2, 2, 5])),
            Some(f32_input(&[2, 2, 2, 6])),
        ];
        let outputs: [&[usize]; 4] = [&[2, 4, 3, 6], &[2, 2, 6, 5], &[2, 2, 6, 6], &[2, 4, 3, 6]];
        let causal = mode % 2 == 0;
        let what = format!("attention, qk mode {mode}, causal {causal}");
        agree(attention(causal, None, 2.0, mode, (-1, -1)), inputs, &outputs, &what);
    }
}

#[test]
fn attention_over_padded_keys_matches_the_kernel() {
    // 3-D inputs, 6 query and 3 kv heads, nonpad_kv_seqlen cutting each
    // batch row's keys (one row to none at all), a sliding window.
    let inputs = vec![
        Some(f32_input(&[3, 4, 12])),
        Some(f32_input(&[3, 5, 6])),
        Some(f32_input(&[3, 5, 9])),
        None,
        None,
        None,
        Some(i64_input(&[3], &[5, 2, 0])),
    ];
    let outputs: [&[usize]; 1] = [&[3, 4, 18]];
    agree(attention(true, Some((6, 3)), 0.0, 0, (1, 0)), inputs, &outputs, "attention with nonpad_kv_seqlen");
}

#[test]
fn rotary_embedding_matches_the_kernel() {
    // Head size 6, rotary dim 4 (two elements copied), position ids.
    for interleaved in [false, true] {
        let op = Op::RotaryEmbedding(RotaryEmbedding { num_heads: Some(2), rotary_embedding_dim: 4, interleaved });
        let inputs = vec![
            Some(f32_input(&[2, 3, 12])),
            Some(f32_input(&[7, 2])),
            Some(f32_input(&[7, 2])),
            Some(i64_input(&[2, 3], &[0, 6, 2, 5, 1, 3])),
        ];
        agree(op, inputs, &[&[2, 3, 12]], &format!("rotary, interleaved {interleaved}"));
    }
}

#[test]
fn causal_conv_and_linear_attention_carry_their_state_as_the_kernels_do() {
    // A kernel of 4 over 2 steps: the present state takes past elements too.
    for silu in [false, true] {
        let inputs = vec![
            Some(f32_input(&[2, 3, 2])),
            Some(f32_input(&[3, 1, 4])),
            Some(f32_input(&[3])),
            Some(f32_input(&[2, 3, 3])),
        ];
        let op = Op::CausalConvWithState(CausalConvWithState { silu });
        agree(op, inputs, &[&[2, 3, 2], &[2, 3, 3]], &format!("causal conv, silu {silu}"));
    }
    // Gated delta rule, 4 query heads on 2 kv heads, per-row decay, one beta.
    let op =
        Op::LinearAttention(LinearAttention { q_num_heads: 4, kv_num_heads: 2, scale: 0.5, rule: RULE_GATED_DELTA });
    let inputs = vec![
        Some(f32_input(&[2, 3, 12])),
        Some(f32_input(&[2, 3, 6])),
        Some(f32_input(&[2, 3, 4])),
        Some(f32_input(&[2, 2, 3, 2])),
        Some(f32_input(&[2, 3, 6])),
        Some(f32_input(&[2, 3, 1])),
    ];
    agree(op, inputs, &[&[2, 3, 8], &[2, 2, 3, 2]], "gated delta linear attention");
}
