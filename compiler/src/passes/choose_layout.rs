//! Which convolutions run in the blocked layout (NCHWc), chosen once per
//! graph, and the reorders at the edges of the parts that do.
//!
//! The blocked convolution (`onnxc_conv_blocked_f32`) outruns the NCHW
//! kernels because its tiles read and write whole 8-channel vectors
//! (`onnxc_runtime::generic::blocked`); a reorder into or out of the
//! layout costs a pass over the tensor. So the nodes that can run blocked
//! and feed each other (a convolution's input 0 or the residual of a
//! fused Add) are grouped, and a group runs blocked only when its
//! convolutions' multiply-adds outweigh the elements it reorders
//! ([`MACS_PER_REORDERED_ELEMENT`] each): the values it reads from
//! outside, and its outputs that something else (or the graph's caller)
//! reads in NCHW. Where a whole group does not pay (or pays less), its
//! parts are weighed alone, at two finer levels: convolutions feeding
//! convolutions with the carriers that read only their values
//! (ShuffleNet's stem and its max pool: the reorder comes after the pool,
//! 4 times smaller), then convolutions feeding convolutions alone
//! (DenseNet: each 3×3 convolution blocked between two reorders, the
//! Concats that would drag every earlier feature map along kept NCHW).
//! A pointwise convolution reading a Relu stays NCHW, for
//! `fuse_conv_prologue`; so does a carrier that reads no member's output
//! (a pool after the image stem: the reorder after it is 4 times smaller).
//!
//! A blocked convolution writes a new value `[N, C/8, H, W, 8]`; where its
//! NCHW output is still read, a `FromBlocked` right after it recomputes
//! the original value, so readers outside the group are untouched. An
//! outside value a group reads gets one `ToBlocked`, just before its first
//! blocked reader. The weights are packed for the blocked kernel here, by
//! the kernel library's own packer.
//!
//! Applies to f32 2-D Conv of one group, constant weights, input and
//! output channels multiples of 8 (or an input of fewer than 8 channels,
//! an image, which the kernel reads in NCHW: a stem convolution starts a
//! group without a reorder), or depthwise of whole blocks (so that an
//! inverted-residual block runs blocked from end to end), without a
//! prologue, when the code calls kernels; between them, 2-D max/average pools (global ones too: the
//! reorder after is of one pixel), Concats along the
//! channels and elementwise nodes (inputs of the output's shape, per
//! channel, as a squeeze-excite block's scale, or scalars) carry blocked
//! values. A group never spans a guarded or
//! repeated range's marker. Runs after the rewrites that fuse into Conv
//! and before `pack_conv_weights` and `fuse_elementwise`.

use super::fuse_conv_prologue::rectifier;
use crate::ir::shape::normalize_axis;
use crate::ir::{DType, Graph, Node, Tensor, TensorType, ValueDef, ValueId};
use crate::ops::conv::{InputSlot, Layout};
use crate::ops::layout::{blocked_shape, read_as_image, Reorder};
use crate::ops::Op;
use onnxc_runtime::{
    conv_blocked_weights_elems, conv_takes_blocked, conv_takes_packed_weights, conv_takes_prologue,
    onnxc_pack_conv_weights_blocked_f32, pool_takes_blocked, ConvParams, STATUS_OK,
};
use petgraph::unionfind::UnionFind;
use std::collections::{HashMap, HashSet};

pub fn choose_layout(graph: &mut Graph) {
    let uses = super::use_counts(graph);
    let producer = super::producers(graph);
    let region = super::regions(graph);
    let mut roles: HashMap<usize, Role> =
        (0..graph.nodes.len()).filter_map(|i| Some((i, role(graph, &uses, &producer, &region, i)?))).collect();
    if !roles.values().any(|r| matches!(r, Role::Conv(_))) {
        return;
    }
    // A carrier that reads no member's output would only move the reorder
    // from its output to its inputs, which are as large or (a pool's)
    // larger: it stays NCHW, and so may the carriers after it.
    // The member (in `roles`) producing value `v` that node `i` reads, if any.
    let member_producer = |roles: &HashMap<usize, Role>, i: usize, v: ValueId| {
        producer.get(&v).copied().filter(|p| roles.contains_key(p) && region[*p] == region[i])
    };
    loop {
        let fed = |i: usize| blocked_inputs(graph, i).into_iter().any(|v| member_producer(&roles, i, v).is_some());
        let unfed: Vec<usize> =
            roles.iter().filter(|(&i, role)| matches!(role, Role::Carrier) && !fed(i)).map(|(&i, _)| i).collect();
        if unfed.is_empty() {
            break;
        }
        unfed.iter().for_each(|i| drop(roles.remove(i)));
    }
    let linked = |i: usize, v: ValueId| member_producer(&roles, i, v);
    let is_conv = |i: usize| matches!(roles.get(&i), Some(Role::Conv(_)));
    let is_carrier = |i: usize| matches!(roles.get(&i), Some(Role::Carrier));
    let fed_by_members = |i: usize| blocked_inputs(graph, i).into_iter().all(|v| linked(i, v).is_some());
    // Three nested groupings of the members, coarse to fine: all that feed
    // each other; convolutions feeding convolutions, with the carriers that
    // read members only (a stem's pool, whose output is 4 times smaller
    // than the stem's); convolutions feeding convolutions.
    let groupings = [
        partition(graph, &roles, &linked, |_, _| true),
        partition(graph, &roles, &linked, |reader, producer| {
            (is_conv(reader) && is_conv(producer)) || (is_carrier(reader) && fed_by_members(reader))
        }),
        partition(graph, &roles, &linked, |a, b| is_conv(a) && is_conv(b)),
    ];
    let gain: Vec<HashMap<usize, i64>> = groupings
        .iter()
        .map(|grouping| gains(graph, &roles, &linked, &|i| roles.contains_key(&i).then(|| grouping.find(i))))
        .collect();
    // What the groups one level finer inside each group save at best (each
    // running blocked itself, or leaving that to its own finer groups).
    let mut finer: Vec<HashMap<usize, i64>> = vec![HashMap::new(); groupings.len()];
    let mut best: HashMap<usize, i64> = HashMap::new();
    for level in (0..groupings.len()).rev() {
        for (&group, &saved) in &best {
            *finer[level].entry(groupings[level].find(group)).or_default() += saved;
        }
        best =
            gain[level].iter().map(|(&g, &v)| (g, v.max(finer[level].get(&g).copied().unwrap_or(0)).max(0))).collect();
    }
    // A group runs blocked when it pays and pays at least what its finer
    // groups would; else its finer groups are weighed the same way.
    let chosen: HashSet<usize> = roles
        .keys()
        .copied()
        .filter(|&i| {
            groupings.iter().enumerate().any(|(level, grouping)| {
                let group = grouping.find(i);
                let (saved, below) = (gain[level][&group], finer[level].get(&group).copied().unwrap_or(0));
                saved > 0 && saved >= below
            })
        })
        .collect();
    if chosen.is_empty() {
        return;
    }
    let read_in_nchw = nchw_reads(graph, &roles, &|i| chosen.contains(&i).then_some(0));
    rewrite(graph, &roles, &chosen, &read_in_nchw);
}

/// Multiply-adds a group's convolutions must have per element it reorders
/// for the blocked layout to pay. A reorder is a pass over memory, about
/// 0.3 ns per element (a reorder of 64 × 112² floats, 3.2 MB, takes
/// 0.23 ms each way on a Zen 4 core; `onnxc bench --profile` times a
/// model's reorders); the blocked kernel saves some 10 to 30 % of the NCHW
/// one's time, 2 to 8 ps per multiply-add at about 100 GFLOP/s: 40 to 150, taken low
/// since every conv the layout takes also spares the NCHW kernel's padded
/// copy.
const MACS_PER_REORDERED_ELEMENT: i64 = 64;

/// The members joined where one feeds another (`linked(reader, value)`:
/// the member producing the value, if any) and `join(reader, producer)`.
fn partition(
    graph: &Graph,
    roles: &HashMap<usize, Role>,
    linked: &dyn Fn(usize, ValueId) -> Option<usize>,
    join: impl Fn(usize, usize) -> bool,
) -> UnionFind<usize> {
    let mut groups = UnionFind::<usize>::new(graph.nodes.len());
    for &i in roles.keys() {
        for v in blocked_inputs(graph, i) {
            if let Some(p) = linked(i, v).filter(|&p| join(i, p)) {
                groups.union(i, p);
            }
        }
    }
    groups
}

/// What running each group blocked would save, by the group of
/// `member_of`: its convolutions' multiply-adds less
/// [`MACS_PER_REORDERED_ELEMENT`] per element of the values it reorders
/// in (read from outside the group) and out (read in NCHW).
fn gains(
    graph: &Graph,
    roles: &HashMap<usize, Role>,
    linked: &dyn Fn(usize, ValueId) -> Option<usize>,
    member_of: &dyn Fn(usize) -> Option<usize>,
) -> HashMap<usize, i64> {
    let elements = |v: ValueId| graph.concrete(v).map_or(0, |(_, shape)| shape.iter().product::<usize>()) as i64;
    let mut gain: HashMap<usize, i64> = HashMap::new();
    let mut reordered_in: HashSet<(usize, ValueId)> = HashSet::new();
    for (&i, role) in roles {
        let group = member_of(i).expect("roles are members");
        let entry = gain.entry(group).or_default();
        if let Role::Conv(p) = role {
            *entry += conv_macs(p);
        }
        for v in blocked_inputs(graph, i) {
            if linked(i, v).and_then(member_of) != Some(group) && reordered_in.insert((group, v)) {
                *entry -= MACS_PER_REORDERED_ELEMENT * elements(v);
            }
        }
    }
    let produced_by: HashMap<ValueId, usize> = roles.keys().map(|&i| (graph.nodes[i].outputs[0], i)).collect();
    for v in nchw_reads(graph, roles, member_of) {
        if let Some(group) = produced_by.get(&v).copied().and_then(member_of) {
            *gain.entry(group).or_default() -= MACS_PER_REORDERED_ELEMENT * elements(v);
        }
    }
    gain
}

/// A convolution's multiply-adds.
fn conv_macs(p: &ConvParams) -> i64 {
    let spatial = |v: &[i64]| v[..p.spatial_rank as usize].iter().product::<i64>();
    p.batch * p.out_channels * (p.in_channels / p.group.max(1)) * spatial(&p.kernel) * spatial(&p.out_spatial)
}

/// How a node takes part in the blocked layout.
enum Role {
    /// A convolution the blocked kernel runs, with its params.
    Conv(Box<ConvParams>),
    /// A node that carries blocked values between convolutions: a pool
    /// the blocked pooling kernel runs, or a Concat along the channels.
    Carrier,
}

/// Node `i`'s role when it can run blocked (`uses`: how many times each
/// value is read).
fn role(
    graph: &Graph,
    uses: &HashMap<ValueId, usize>,
    producer: &HashMap<ValueId, usize>,
    region: &[usize],
    i: usize,
) -> Option<Role> {
    let node = &graph.nodes[i];
    let f32_shape = |slot: usize| match graph.concrete(node.inputs.get(slot).copied()??)? {
        (DType::F32, shape) => Some(shape),
        _ => None,
    };
    match &node.op {
        Op::Conv(conv) if conv.fused.prologue.is_none() && conv.layout == Layout::Plain => {
            let weights = graph.const_value(node.inputs.get(1).copied()??)?;
            if weights.dtype != DType::F32 {
                return None;
            }
            let p = conv.params(&f32_shape(0)?, &weights.shape).ok()?;
            // A pointwise conv reading a Relu read by nothing else keeps
            // NCHW: `fuse_conv_prologue` applies the Relu (and the affine
            // maps before it) as the conv packs its input, which saves a
            // pass over the input, more than the layout would.
            let packed = ConvParams { packed_weights: 1, ..p };
            let prologue = conv_takes_prologue(&packed)
                && conv_takes_packed_weights(&packed)
                && rectifier(graph, uses, producer, region, i).is_some();
            (conv_takes_blocked(&p) && !prologue).then(|| Role::Conv(Box::new(p)))
        }
        Op::Pool(pool) if !pool.blocked && node.outputs.len() == 1 => {
            let p = pool.params(&f32_shape(0)?).ok()?;
            pool_takes_blocked(&p).then_some(Role::Carrier)
        }
        // Outputs past the first (Dropout's mask) must be unread.
        Op::Elementwise(_) if node.outputs.iter().skip(1).all(|v| !uses.contains_key(v)) => {
            let shape = graph.concrete(node.outputs[0]).filter(|(d, _)| *d == DType::F32)?.1;
            blocked_shape(&shape)?;
            // Each input is f32 of the output's shape or per channel (read
            // blocked, and reordered by the f32 kernels), or a scalar.
            let fits = |slot: usize| match node.inputs[slot] {
                Some(v) => graph.concrete(v).is_some_and(|(d, s)| {
                    (d == DType::F32 && read_blocked(&s, &shape)) || s.iter().product::<usize>() == 1
                }),
                None => true,
            };
            (0..node.inputs.len()).all(fits).then_some(Role::Carrier)
        }
        Op::Concat(concat) => {
            let shapes: Option<Vec<Vec<usize>>> = (0..node.inputs.len()).map(f32_shape).collect();
            let shapes = shapes?;
            let channels_axis = normalize_axis(concat.axis, 4) == Some(1);
            let whole_blocks = shapes.iter().all(|s| blocked_shape(s).is_some());
            (channels_axis && whole_blocks).then_some(Role::Carrier)
        }
        _ => None,
    }
}

/// The input slots node `i` reads blocked when it runs blocked: a
/// convolution's X and residual, a pool's input, every part of a Concat,
/// an elementwise node's inputs shaped like its output.
fn blocked_slots(graph: &Graph, node: &Node) -> Vec<usize> {
    match &node.op {
        Op::Conv(conv) => {
            // An image is read in NCHW.
            let image = node.inputs[0].and_then(|x| graph.concrete(x)).is_some_and(|(_, s)| read_as_image(&s));
            let x = (!image).then_some(0);
            x.into_iter().chain(conv.fused.residual.map(|InputSlot(i)| i)).collect()
        }
        Op::Pool(_) => vec![0],
        Op::Elementwise(_) => {
            let Some((_, shape)) = graph.concrete(node.outputs[0]) else { return Vec::new() };
            let blocked =
                |v: Option<ValueId>| v.and_then(|v| graph.concrete(v)).is_some_and(|t| read_blocked(&t.1, &shape));
            (0..node.inputs.len()).filter(|&slot| blocked(node.inputs[slot])).collect()
        }
        _ => (0..node.inputs.len()).collect(),
    }
}

/// Whether an elementwise node of output `shape` reads an input of shape
/// `input` blocked: one of the output's shape, or one value per channel
/// (`[N or 1, C, 1, 1]`, a squeeze-excite block's scale), which blocked is
/// `[N or 1, C/8, 1, 1, 8]` and broadcasts over the blocked output alike.
fn read_blocked(input: &[usize], shape: &[usize]) -> bool {
    let per_channel = |n: usize, c: usize| matches!(*shape, [sn, sc, _, _] if (n == 1 || n == sn) && c == sc);
    input == shape || matches!(*input, [n, c, 1, 1] if c > 1 && per_channel(n, c))
}

/// The values in node `i`'s blocked slots.
fn blocked_inputs(graph: &Graph, i: usize) -> Vec<ValueId> {
    let node = &graph.nodes[i];
    blocked_slots(graph, node).into_iter().filter_map(|slot| node.inputs.get(slot).copied().flatten()).collect()
}

/// The members' outputs that are read in NCHW: as graph outputs, or by
/// any node but a member of the same group (by `member_of`) in a blocked slot.
fn nchw_reads(
    graph: &Graph,
    roles: &HashMap<usize, Role>,
    member_of: &dyn Fn(usize) -> Option<usize>,
) -> HashSet<ValueId> {
    let group_of: HashMap<ValueId, usize> =
        roles.keys().filter_map(|&i| Some((graph.nodes[i].outputs[0], member_of(i)?))).collect();
    let mut read: HashSet<ValueId> = graph.outputs.iter().copied().filter(|v| group_of.contains_key(v)).collect();
    for (i, node) in graph.nodes.iter().enumerate() {
        let reader = member_of(i);
        let slots = if reader.is_some() { blocked_slots(graph, node) } else { Vec::new() };
        for (slot, v) in node.inputs.iter().enumerate() {
            let Some(&group) = v.as_ref().and_then(|v| group_of.get(v)) else { continue };
            if !(slots.contains(&slot) && reader == Some(group)) {
                read.extend(*v);
            }
        }
    }
    read
}

/// Makes the `chosen` nodes blocked, with their reorders.
fn rewrite(graph: &mut Graph, roles: &HashMap<usize, Role>, chosen: &HashSet<usize>, read_in_nchw: &HashSet<ValueId>) {
    // Each member's blocked output, by its NCHW output; each outside
    // value's reorder, by the value and the guarded or repeated range it
    // was made in (a reorder made in one range may not run for another).
    let mut blocked: HashMap<ValueId, ValueId> = HashMap::new();
    let mut reordered: HashMap<(ValueId, usize), ValueId> = HashMap::new();
    let region = super::regions(graph);
    let nodes = std::mem::take(&mut graph.nodes);
    for (i, mut node) in nodes.into_iter().enumerate() {
        if !chosen.contains(&i) {
            graph.nodes.push(node);
            continue;
        }
        for slot in blocked_slots(graph, &node) {
            let Some(v) = node.inputs.get(slot).copied().flatten() else { continue };
            let v_blocked = match blocked.get(&v).or_else(|| reordered.get(&(v, region[i]))) {
                Some(&b) => b,
                None => {
                    let b = add_blocked_value(graph, v);
                    graph.nodes.push(reorder(graph, true, v, b));
                    reordered.insert((v, region[i]), b);
                    b
                }
            };
            node.inputs[slot] = Some(v_blocked);
        }
        let y = node.outputs[0];
        let y_blocked = add_blocked_value(graph, y);
        blocked.insert(y, y_blocked);
        node.outputs[0] = y_blocked;
        // Unread further outputs take the layout too, to keep their shapes.
        for out in node.outputs.iter_mut().skip(1) {
            *out = add_blocked_value(graph, *out);
        }
        if let Some(Role::Conv(p)) = roles.get(&i) {
            let w = node.inputs[1].expect("a convolution has weights");
            let (packed, logical) = pack_weights(graph, w, p);
            node.inputs[1] = Some(packed);
            if let Op::Conv(conv) = &mut node.op {
                conv.layout = Layout::Blocked { weights: logical };
            }
        }
        match &mut node.op {
            Op::Pool(pool) => pool.blocked = true,
            // The channels' axis, 1 in both layouts.
            Op::Concat(concat) => concat.axis = 1,
            _ => {}
        }
        graph.nodes.push(node);
        if read_in_nchw.contains(&y) {
            graph.nodes.push(reorder(graph, false, y_blocked, y));
        }
    }
}

/// A new value holding `v` blocked.
fn add_blocked_value(graph: &mut Graph, v: ValueId) -> ValueId {
    let (dtype, shape) = graph.concrete(v).expect("candidates' values have known shapes");
    let shape = blocked_shape(&shape).expect("candidates' channels are whole blocks");
    let name = format!("{}.blocked", graph.value(v).name);
    graph.add_value(name, Some(TensorType::known(dtype, &shape)), ValueDef::Computed)
}

/// The node reordering `from` into `to`.
fn reorder(graph: &Graph, to_blocked: bool, from: ValueId, to: ValueId) -> Node {
    let op = Reorder { to_blocked };
    let name = format!("{}.{}", graph.value(from).name, crate::ops::Operator::name(&op));
    Node { name, op: Op::Reorder(op), inputs: vec![Some(from)], outputs: vec![to] }
}

/// Weights `w` packed for the blocked kernel, as a new constant, and their
/// logical shape.
fn pack_weights(graph: &mut Graph, w: ValueId, p: &ConvParams) -> (ValueId, Vec<usize>) {
    let weights = graph.const_value(w).expect("candidates' weights are constant");
    let values = weights.to_f32s().expect("candidates' weights are f32");
    let logical = weights.shape.clone();
    let mut packed = vec![0.0f32; conv_blocked_weights_elems(p)];
    // SAFETY: `conv_takes_blocked` accepted `p`, `values` holds its
    // weights and `packed` the packed size.
    let status = unsafe { onnxc_pack_conv_weights_blocked_f32(p, values.as_ptr(), packed.as_mut_ptr()) };
    assert_eq!(status, STATUS_OK, "the blocked packer refused params it takes");
    let tensor = Tensor::from_f32s(vec![packed.len()], &packed);
    let name = format!("{}.blocked_weights", graph.value(w).name);
    let ty = TensorType::known(DType::F32, &tensor.shape);
    (graph.add_value(name, Some(ty), ValueDef::Const(tensor)), logical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::conv::Window;
    use crate::ops::elementwise::{Elementwise, Func};
    use crate::ops::pool::{Pool, PoolKind};
    use crate::ops::shape_ops::Concat;
    use crate::passes::test_graph::{assert_all_close, constant, floats, push, push_conv, run_bytes, value};

    /// Appends `y = Conv(x)` with `channels` out of `[1, c, 5, 5]` and a
    /// `k`×`k` kernel padded to keep the size.
    fn conv(g: &mut Graph, name: &str, x: ValueId, channels: [usize; 2], k: usize) -> ValueId {
        let [c, m] = channels;
        let weights: Vec<f32> = (0..m * c * k * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let w = constant(g, &format!("{name}.w"), &[m, c, k, k], &weights);
        let y = value(g, name, &[1, m, 5, 5], ValueDef::Computed);
        push_conv(g, &[k / 2; 4], 1, x, w, y);
        y
    }

    /// Appends `pooled = MaxPool(x)`, 2×2 stride 2 padded at the end, from
    /// `[1, channels, 5, 5]` to `[1, channels, 3, 3]`.
    fn max_pool(g: &mut Graph, x: ValueId, channels: usize) -> ValueId {
        let mut window = Window::parse(&crate::import::attrs::Attrs::new(&[])).expect("defaults");
        (window.kernel_shape, window.strides, window.pads) = (vec![2, 2], vec![2, 2], vec![0, 0, 1, 1]);
        let pool = Pool {
            op_type: "MaxPool",
            kind: PoolKind::Max { column_major: false },
            global: false,
            window,
            blocked: false,
        };
        let pooled = value(g, "pooled", &[1, channels, 3, 3], ValueDef::Computed);
        push(g, "pool", pool, &[x], pooled);
        pooled
    }

    /// x → conv a (8 → 16, 3×3) → conv b (16 → 8, 1×1, plus x as its
    /// residual) → conv c (8 → 8, 3×3) → Relu → y; `convs` of them (1 to
    /// 3). The Relu runs blocked too, on the rank-5 value.
    fn graph(convs: usize) -> Graph {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 8, 5, 5], ValueDef::Input(0));
        g.inputs.push(x);
        let mut last = conv(&mut g, "a", x, [8, 16], 3);
        if convs > 1 {
            last = conv(&mut g, "b", last, [16, 8], 1);
            let node = g.nodes.last_mut().expect("b");
            let slot = InputSlot::append(&mut node.inputs, x);
            if let Op::Conv(conv) = &mut node.op {
                conv.fused.residual = Some(slot);
            }
        }
        if convs > 2 {
            last = conv(&mut g, "c", last, [8, 8], 3);
        }
        let channels = g.concrete(last).expect("shape").1[1];
        let y = value(&mut g, "y", &[1, channels, 5, 5], ValueDef::Computed);
        push(&mut g, "relu", Elementwise { op_type: "Relu", func: Func::Relu }, &[last], y);
        g.outputs.push(y);
        g
    }

    #[test]
    fn a_chain_of_convolutions_runs_blocked_between_two_reorders() {
        let reference = graph(3);
        let mut g = reference.clone();
        choose_layout(&mut g);
        assert_eq!(super::super::verify(&g), Ok(()));
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["ToBlocked", "Conv", "Conv", "Conv", "Relu", "FromBlocked"]);
        let x_blocked = g.nodes[0].outputs[0];
        assert_eq!(g.concrete(x_blocked).map(|t| t.1), Some(vec![1, 1, 5, 5, 8]));
        for node in &g.nodes[1..4] {
            let Op::Conv(conv) = &node.op else { unreachable!() };
            assert!(conv.layout.is_blocked());
        }
        // Conv b reads conv a's blocked output, and x blocked as its residual.
        assert_eq!(g.nodes[2].inputs[0], Some(g.nodes[1].outputs[0]));
        assert_eq!(g.nodes[2].inputs[3], Some(x_blocked));
        assert_runs_alike(&reference, &g, &[1, 8, 5, 5]);
    }

    /// x → convs a and b (8 → 8 each) → Concat → MaxPool 2×2 → conv c
    /// (16 → 8, 3×3) → Relu → y: the Concat and the pool carry blocked values.
    #[test]
    fn concats_and_pools_between_convolutions_stay_blocked() {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 8, 5, 5], ValueDef::Input(0));
        g.inputs.push(x);
        let a = conv(&mut g, "a", x, [8, 8], 3);
        let b = conv(&mut g, "b", x, [8, 8], 1);
        let joined = value(&mut g, "joined", &[1, 16, 5, 5], ValueDef::Computed);
        push(&mut g, "concat", Concat { axis: -3 }, &[a, b], joined);
        let pooled = max_pool(&mut g, joined, 16);
        let weights: Vec<f32> = (0..8 * 16 * 9).map(|i| (i as f32 * 0.29).cos()).collect();
        let w = constant(&mut g, "c.w", &[8, 16, 3, 3], &weights);
        let c = value(&mut g, "c", &[1, 8, 3, 3], ValueDef::Computed);
        push_conv(&mut g, &[1; 4], 1, pooled, w, c);
        let y = value(&mut g, "y", &[1, 8, 3, 3], ValueDef::Computed);
        push(&mut g, "relu", Elementwise { op_type: "Relu", func: Func::Relu }, &[c], y);
        g.outputs.push(y);

        let reference = g.clone();
        choose_layout(&mut g);
        assert_eq!(super::super::verify(&g), Ok(()));
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["ToBlocked", "Conv", "Conv", "Concat", "MaxPool", "Conv", "Relu", "FromBlocked"]);
        assert!(matches!(&g.nodes[3].op, Op::Concat(Concat { axis: 1 })));
        assert!(matches!(&g.nodes[4].op, Op::Pool(Pool { blocked: true, .. })));
        assert_eq!(g.concrete(g.nodes[4].outputs[0]).map(|t| t.1), Some(vec![1, 2, 3, 3, 8]));
        assert_runs_alike(&reference, &g, &[1, 8, 5, 5]);
    }

    /// Appends `name = GlobalAveragePool(x)`, `[1, channels, 1, 1]`.
    fn global_average_pool(g: &mut Graph, name: &str, x: ValueId, channels: usize) -> ValueId {
        let window = Window::parse(&crate::import::attrs::Attrs::new(&[])).expect("defaults");
        let kind = PoolKind::Average { count_include_pad: false };
        let pool = Pool { op_type: "GlobalAveragePool", kind, global: true, window, blocked: false };
        let pooled = value(g, name, &[1, channels, 1, 1], ValueDef::Computed);
        push(g, "pool", pool, &[x], pooled);
        pooled
    }

    /// x → conv a (8 → 16, 3×3) → GlobalAveragePool → y: the pool runs
    /// blocked, so the reorder out is of one pixel, not of the conv's map.
    #[test]
    fn a_global_pool_after_convolutions_runs_blocked() {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 8, 5, 5], ValueDef::Input(0));
        g.inputs.push(x);
        let a = conv(&mut g, "a", x, [8, 16], 3);
        let y = global_average_pool(&mut g, "y", a, 16);
        g.outputs.push(y);

        let reference = g.clone();
        choose_layout(&mut g);
        assert_eq!(super::super::verify(&g), Ok(()));
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["ToBlocked", "Conv", "GlobalAveragePool", "FromBlocked"]);
        assert!(matches!(&g.nodes[2].op, Op::Pool(Pool { blocked: true, .. })));
        assert_eq!(g.concrete(g.nodes[3].inputs[0].expect("pooled")).map(|t| t.1), Some(vec![1, 2, 1, 1, 8]));
        assert_runs_alike(&reference, &g, &[1, 8, 5, 5]);
    }

    /// x → conv a (8 → 16, 3×3) → squeeze-excite (GlobalAveragePool, 1×1
    /// conv, Sigmoid, then Mul of the scale `[1, 16, 1, 1]` and a's map) →
    /// conv c (16 → 8) → y: the scale is read blocked, per channel, so the
    /// block runs blocked from end to end.
    #[test]
    fn a_squeeze_excite_scale_keeps_the_block_blocked() {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 8, 5, 5], ValueDef::Input(0));
        g.inputs.push(x);
        let a = conv(&mut g, "a", x, [8, 16], 3);
        let squeezed = global_average_pool(&mut g, "squeezed", a, 16);
        let weights: Vec<f32> = (0..16 * 16).map(|i| (i as f32 * 0.13).sin()).collect();
        let w = constant(&mut g, "fc.w", &[16, 16, 1, 1], &weights);
        let excited = value(&mut g, "excited", &[1, 16, 1, 1], ValueDef::Computed);
        push_conv(&mut g, &[0; 4], 1, squeezed, w, excited);
        let scale = value(&mut g, "scale", &[1, 16, 1, 1], ValueDef::Computed);
        push(&mut g, "sigmoid", Elementwise { op_type: "Sigmoid", func: Func::Sigmoid }, &[excited], scale);
        let scaled = value(&mut g, "scaled", &[1, 16, 5, 5], ValueDef::Computed);
        push(&mut g, "mul", Elementwise { op_type: "Mul", func: Func::Mul }, &[scale, a], scaled);
        let y = conv(&mut g, "c", scaled, [16, 8], 1);
        g.outputs.push(y);

        let reference = g.clone();
        choose_layout(&mut g);
        assert_eq!(super::super::verify(&g), Ok(()));
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["ToBlocked", "Conv", "GlobalAveragePool", "Conv", "Sigmoid", "Mul", "Conv", "FromBlocked"]);
        let mul = &g.nodes[5];
        assert_eq!(mul.inputs[0], Some(g.nodes[4].outputs[0]), "the scale comes blocked from the Sigmoid");
        assert_eq!(g.concrete(mul.inputs[0].expect("scale")).map(|t| t.1), Some(vec![1, 2, 1, 1, 8]));
        assert_runs_alike(&reference, &g, &[1, 8, 5, 5]);
    }

    /// Runs both graphs on one input of `shape`: the results agree within
    /// rounding (the blocked kernels sum in another order).
    fn assert_runs_alike(reference: &Graph, rewritten: &Graph, shape: &[usize]) {
        let len = shape.iter().product();
        let x: Vec<f32> = (0..len).map(|i| (i as f32 * 0.71).cos()).collect();
        let x = Tensor::from_f32s(shape.to_vec(), &x);
        let want = floats(&run_bytes(reference, std::slice::from_ref(&x), false)[0]);
        let got = floats(&run_bytes(rewritten, std::slice::from_ref(&x), false)[0]);
        assert_all_close(&got, &want, 1e-4, "rewritten vs reference");
    }

    /// One conv (28 800 multiply-adds) would need 600 elements reordered:
    /// less than [`MACS_PER_REORDERED_ELEMENT`] each.
    #[test]
    fn convolutions_too_small_for_their_reorders_stay_nchw() {
        let mut g = graph(1);
        choose_layout(&mut g);
        assert!(g.nodes.iter().all(|n| !matches!(
            &n.op,
            Op::Reorder(_) | Op::Conv(crate::ops::conv::Conv { layout: Layout::Blocked { .. }, .. })
        )));
    }

    fn op_names(g: &Graph) -> Vec<&'static str> {
        g.nodes.iter().map(|n| n.op.name()).collect()
    }

    fn blocked_convs(g: &Graph) -> Vec<bool> {
        g.nodes
            .iter()
            .filter_map(|n| if let Op::Conv(c) = &n.op { Some(c.layout.is_blocked()) } else { None })
            .collect()
    }

    /// x → conv a (8 → 16) → conv c (16 → 8) → Concat with a wide input
    /// (64 channels) → y: the whole group would reorder the wide input in
    /// and the Concat out, more than its convs save; the two convs alone
    /// pay, so they run blocked and the Concat stays NCHW.
    #[test]
    fn a_group_that_does_not_pay_leaves_its_paying_convolutions_blocked() {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 8, 5, 5], ValueDef::Input(0));
        let wide = value(&mut g, "wide", &[1, 64, 5, 5], ValueDef::Input(1));
        g.inputs.extend([x, wide]);
        let a = conv(&mut g, "a", x, [8, 16], 3);
        let c = conv(&mut g, "c", a, [16, 8], 3);
        let y = value(&mut g, "y", &[1, 72, 5, 5], ValueDef::Computed);
        push(&mut g, "concat", Concat { axis: 1 }, &[wide, c], y);
        g.outputs.push(y);
        choose_layout(&mut g);
        assert_eq!(super::super::verify(&g), Ok(()));
        assert_eq!(op_names(&g), ["ToBlocked", "Conv", "Conv", "FromBlocked", "Concat"]);
    }

    /// An image x (3 channels) → stem conv (3 → 16) → MaxPool 2×2 (to
    /// 3×3) → Concat with a wide input (64 channels) → y: the whole group
    /// would reorder the wide input in, and the stem alone its output out,
    /// more than the stem saves; with the pool, only the pool's output (4
    /// times smaller) is reordered, which pays.
    #[test]
    fn a_stem_and_the_pool_it_alone_feeds_run_blocked() {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 3, 5, 5], ValueDef::Input(0));
        let wide = value(&mut g, "wide", &[1, 64, 3, 3], ValueDef::Input(1));
        g.inputs.extend([x, wide]);
        let stem = conv(&mut g, "stem", x, [3, 16], 3);
        let pooled = max_pool(&mut g, stem, 16);
        let y = value(&mut g, "y", &[1, 80, 3, 3], ValueDef::Computed);
        push(&mut g, "concat", Concat { axis: 1 }, &[wide, pooled], y);
        g.outputs.push(y);
        choose_layout(&mut g);
        assert_eq!(super::super::verify(&g), Ok(()));
        assert_eq!(op_names(&g), ["Conv", "MaxPool", "FromBlocked", "Concat"]);
        assert_eq!(blocked_convs(&g), [true]);
    }

    /// An image x (3 channels) → conv a (3 → 16) → conv b (16 → 8) → y:
    /// conv a reads x in NCHW and writes the blocked layout, so only the
    /// output is reordered.
    #[test]
    fn a_stem_convolution_reads_its_image_in_nchw() {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 3, 5, 5], ValueDef::Input(0));
        g.inputs.push(x);
        let a = conv(&mut g, "a", x, [3, 16], 3);
        let y = conv(&mut g, "b", a, [16, 8], 3);
        g.outputs.push(y);
        let reference = g.clone();
        choose_layout(&mut g);
        assert_eq!(super::super::verify(&g), Ok(()));
        assert_eq!(op_names(&g), ["Conv", "Conv", "FromBlocked"]);
        assert_eq!(blocked_convs(&g), [true, true]);
        assert_eq!(g.nodes[0].inputs[0], Some(x));
        assert_runs_alike(&reference, &g, &[1, 3, 5, 5]);
    }

    /// x → Relu → conv a (8 → 16, 1×1) → conv b (16 → 16) → conv c (16 →
    /// 8) → y: conv a keeps NCHW for `fuse_conv_prologue` to take the
    /// Relu; b and c run blocked.
    #[test]
    fn a_pointwise_convolution_after_a_relu_keeps_nchw_for_its_prologue() {
        let mut g = Graph::default();
        let x = value(&mut g, "x", &[1, 8, 5, 5], ValueDef::Input(0));
        g.inputs.push(x);
        let rectified = value(&mut g, "rectified", &[1, 8, 5, 5], ValueDef::Computed);
        push(&mut g, "relu", Elementwise { op_type: "Relu", func: Func::Relu }, &[x], rectified);
        let a = conv(&mut g, "a", rectified, [8, 16], 1);
        let b = conv(&mut g, "b", a, [16, 16], 3);
        let y = conv(&mut g, "c", b, [16, 8], 3);
        g.outputs.push(y);
        let reference = g.clone();
        choose_layout(&mut g);
        assert_eq!(super::super::verify(&g), Ok(()));
        assert_eq!(op_names(&g), ["Relu", "Conv", "ToBlocked", "Conv", "Conv", "FromBlocked"]);
        assert_eq!(blocked_convs(&g), [false, true, true]);
        assert_runs_alike(&reference, &g, &[1, 8, 5, 5]);
    }
}
