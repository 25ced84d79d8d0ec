//! Stage 6: where every value lives at run time.
//!
//! Graph inputs and outputs stay in the caller's buffers; constants go to
//! read-only data; every other value gets an offset in one workspace arena,
//! reused once the value is dead (liveness over the schedule, first fit).
//! View operators (Reshape and kin) alias their input instead of copying.
//! A Concat whose parts are contiguous runs of its output (every dim before
//! the axis is 1) has its parts written in place by their producers: each
//! such part lives at its offset inside the Concat's output, which is
//! allocated when the first part is produced, and the Concat copies only
//! the parts that could not be placed (DenseNet's dense blocks then never
//! copy their growing feature maps).
//! Values whose shape depends on tensor data get their memory at run time
//! from the context's allocator (by default a bump allocator over the part
//! of the workspace past the planned arena); the plan bounds that part when
//! every such value is bounded.
//!
//! A long schedule is also cut into parts of at most [`NODES_PER_PART`]
//! nodes, each generated as its own function: Cranelift's register
//! allocation grows faster than linearly with a function's size, and one
//! function per part keeps compile time linear in the node count and lets
//! the compile-time limit be checked between parts. What one part hands the
//! next (the allocator's next free byte, the address of every
//! data-dependent value, the conditions of the guarded ranges still open)
//! lives in a [`Handover`] block at the end of the arena.
//!
//! A loop that runs at run time (`LoopStart` … body … `LoopEnd`, which the
//! code repeats) changes three things: what the body reads from before the
//! loop stays alive to the loop's end, `LoopEnd`'s outputs (written all
//! through the loop) get their memory at the `LoopStart`, and no part
//! boundary falls inside a loop. Concat parts are written in place only in
//! graphs without loops.

use crate::ir::{Graph, ValueDef, ValueId};
use crate::ops::{InferCx, InputInfo, Op};
use std::collections::HashMap;
use std::ops::Range;

/// Workspace offsets are multiples of this (one cache line, any SIMD width).
pub const ALIGN: usize = 64;

/// Most nodes generated into one function (see the module docs).
pub const NODES_PER_PART: usize = 256;

/// The workspace block through which the part functions of a long schedule
/// hand their state on: 8-byte words, word 0 the allocator's next free byte.
#[derive(Clone, Debug)]
pub struct Handover {
    /// Workspace offset of word 0.
    pub offset: usize,
    /// The word holding each data-dependent value's address.
    pub dynamic: HashMap<ValueId, usize>,
    /// The word holding the condition of the guarded range open at nesting
    /// depth 0; deeper ranges follow.
    pub guards: usize,
}

impl Handover {
    /// Byte offset, in the workspace, of word `word`.
    pub fn word_offset(&self, word: usize) -> usize {
        self.offset + 8 * word
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// The caller's k-th input buffer.
    Input(usize),
    /// A tensor inside a sequence or optional input, at the address the
    /// caller's descriptor gives (checked on entry).
    InputElement,
    /// The caller's k-th output buffer.
    Output(usize),
    /// Read-only data.
    Const,
    /// Bytes at this offset of the workspace.
    Workspace(usize),
    /// The same bytes as another value (a view).
    Alias(ValueId),
    /// The bytes at this byte offset inside another value: a Concat's part
    /// written in place.
    Within(ValueId, usize),
    /// Memory from the context's allocator, sized when the shape is known
    /// at run time; a graph output's address and dims go to the caller's
    /// output descriptor.
    Dynamic,
    /// Nothing reads or writes it (left behind by a rewrite).
    Unused,
}

#[derive(Clone, Debug)]
pub struct Plan {
    /// One entry per value of the graph.
    pub locs: Vec<Loc>,
    /// Workspace offset of each node's scratch area, if it has one.
    pub scratch: Vec<Option<usize>>,
    /// Graph outputs that must be copied from another location at the end
    /// (outputs that are inputs, constants, or listed twice).
    pub output_copies: Vec<(usize, ValueId)>,
    /// Size of the planned arena: the workspace the code requires.
    pub workspace_bytes: usize,
    /// Most bytes the run-time allocations can take (each rounded up to
    /// [`ALIGN`]); `None` when some data-dependent value is unbounded.
    pub dynamic_bytes: Option<usize>,
    /// Some node takes run-time memory besides its outputs (string bytes,
    /// sequence and optional outputs).
    pub allocates_at_run_time: bool,
    /// The schedule's nodes cut into parts, one generated function each.
    pub parts: Vec<Range<usize>>,
    /// Present when there is more than one part.
    pub handover: Option<Handover>,
}

impl Plan {
    /// A workspace size with which the default allocator never runs out,
    /// when there is one.
    pub fn sufficient_workspace_bytes(&self) -> Option<usize> {
        self.dynamic_bytes.and_then(|d| self.workspace_bytes.checked_add(d))
    }

    /// True when the code needs the run-time allocator.
    pub fn has_dynamic_values(&self) -> bool {
        self.allocates_at_run_time || self.locs.contains(&Loc::Dynamic)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("memory plan: {0}")]
pub struct PlanError(pub String);

fn bytes_of(graph: &Graph, v: ValueId) -> Result<usize, PlanError> {
    let (dtype, shape) =
        graph.concrete(v).ok_or_else(|| PlanError(format!("value \"{}\" has no known shape", graph.value(v).name)))?;
    crate::ir::shape::element_count(&shape)
        .and_then(|n| dtype.bytes_for(n))
        .ok_or_else(|| PlanError(format!("value \"{}\" is too large", graph.value(v).name)))
}

/// Builds the inference view of a node's inputs (used for scratch sizing).
pub fn infer_cx<'a>(
    graph: &'a Graph,
    node: &crate::ir::Node,
    shapes: &'a [Option<(crate::ir::DType, Vec<usize>)>],
) -> InferCx<'a> {
    InferCx {
        inputs: node
            .inputs
            .iter()
            .zip(shapes)
            .map(|(v, s)| {
                let (v, (dtype, shape)) = (v.as_ref()?, s.as_ref()?);
                Some(InputInfo { dtype: *dtype, shape, value: graph.const_value(*v) })
            })
            .collect(),
        output_count: node.outputs.len(),
        missing_values: Default::default(),
        max_fold_bytes: 0,
        exprs: Vec::new(),
        facts: None,
    }
}

pub fn plan(graph: &Graph) -> Result<Plan, PlanError> {
    let mut locs: Vec<Option<Loc>> = vec![None; graph.values.len()];
    let mut run_time = RunTimeMemory::for_dynamic_values(graph, &mut locs);
    place_sources(graph, &mut locs);
    let output_copies = place_outputs(graph, &mut locs)?;
    alias_views(graph, &mut locs);
    let loops = loop_ranges(graph);
    if loops.is_empty() {
        place_concat_parts(graph, &mut locs);
    }
    let lifetimes = Lifetimes::new(graph, &locs, &loops, &output_copies);
    let (arena, scratch) = allocate(graph, &mut locs, &lifetimes, &mut run_time)?;
    let locs = finish_locations(graph, locs)?;
    let parts = cut_into_parts(graph.nodes.len(), &loops);
    let mut workspace_bytes = arena.high_water;
    let handover = (parts.len() > 1).then(|| append_handover(graph, &locs, &mut workspace_bytes));
    Ok(Plan {
        locs,
        scratch,
        output_copies,
        workspace_bytes,
        dynamic_bytes: run_time.bytes,
        allocates_at_run_time: run_time.allocates,
        parts,
        handover,
    })
}

/// What the plan learns of the memory taken from the run-time allocator.
struct RunTimeMemory {
    /// Some node or value needs the allocator besides data-dependent values.
    allocates: bool,
    /// Most bytes it hands out, `None` when unbounded.
    bytes: Option<usize>,
}

impl RunTimeMemory {
    /// Marks the computed values of data-dependent shape [`Loc::Dynamic`]
    /// and sums their largest sizes (each rounded up to [`ALIGN`]).
    fn for_dynamic_values(graph: &Graph, locs: &mut [Option<Loc>]) -> RunTimeMemory {
        let allocates = graph.nodes.iter().any(|n| n.op.allocates_at_run_time());
        let mut bytes = (!allocates).then_some(0usize);
        for (i, value) in graph.values.iter().enumerate() {
            if let (ValueDef::Computed, Some(ty)) = (&value.def, &value.ty) {
                if ty.is_dynamic() {
                    locs[i] = Some(Loc::Dynamic);
                    bytes = bytes
                        .zip(ty.max_bytes())
                        .and_then(|(total, b)| total.checked_add(b.div_ceil(ALIGN).checked_mul(ALIGN)?));
                }
            }
        }
        RunTimeMemory { allocates, bytes }
    }

    /// Adds a node's [`crate::ops::Operator::run_time_bytes`].
    fn add_node(&mut self, node_bytes: Option<usize>) {
        match node_bytes {
            Some(0) => {}
            Some(b) => {
                self.allocates = true;
                self.bytes = self.bytes.and_then(|total| total.checked_add(b));
            }
            None => {
                self.allocates = true;
                self.bytes = None;
            }
        }
    }
}

/// Graph inputs, their composite elements and constants stay where the
/// caller or the read-only data put them.
fn place_sources(graph: &Graph, locs: &mut [Option<Loc>]) {
    for (i, value) in graph.values.iter().enumerate() {
        match value.def {
            ValueDef::Input(k) => locs[i] = Some(Loc::Input(k)),
            ValueDef::InputElement { .. } => locs[i] = Some(Loc::InputElement),
            ValueDef::Const(_) => locs[i] = Some(Loc::Const),
            ValueDef::Computed => {}
        }
    }
}

/// Computes each graph output into the caller's buffer; returns the
/// outputs copied there at the end (already placed elsewhere).
fn place_outputs(graph: &Graph, locs: &mut [Option<Loc>]) -> Result<Vec<(usize, ValueId)>, PlanError> {
    let mut output_copies = Vec::new();
    for (k, &v) in graph.outputs.iter().enumerate() {
        match locs[v.index()] {
            None => locs[v.index()] = Some(Loc::Output(k)),
            Some(Loc::Dynamic) if graph.outputs[..k].contains(&v) => {
                return Err(PlanError(format!(
                    "output \"{}\" has a data-dependent shape and is listed twice",
                    graph.value(v).name
                )))
            }
            Some(Loc::Dynamic) => {}
            Some(_) => output_copies.push((k, v)),
        }
    }
    Ok(output_copies)
}

/// Views alias their input unless they must write a caller's buffer.
fn alias_views(graph: &Graph, locs: &mut [Option<Loc>]) {
    for node in &graph.nodes {
        if node.op.is_view() {
            if let (Some(&out), Some(Some(src))) = (node.outputs.first(), node.inputs.first()) {
                if locs[out.index()].is_none() {
                    locs[out.index()] = Some(Loc::Alias(*src));
                }
            }
        }
    }
}

/// The value whose memory `v` shares (through views and in-place Concat
/// parts), `v` itself when it has its own.
fn root(locs: &[Option<Loc>], mut v: ValueId) -> ValueId {
    while let Some(Loc::Alias(src) | Loc::Within(src, _)) = locs[v.index()] {
        v = src;
    }
    v
}

/// When each value's memory is taken and given back, by node index.
struct Lifetimes {
    /// Last node index at which each (root) value is read.
    last_use: Vec<Option<usize>>,
    /// The node whose outputs get their memory at each node: its own, and
    /// at a LoopStart its LoopEnd's (written all through the loop).
    allocate_at: Vec<Vec<usize>>,
    /// Concats holding parts in place whose memory is taken at each node,
    /// before they are produced: where their first part is.
    early: Vec<Vec<ValueId>>,
}

impl Lifetimes {
    fn new(graph: &Graph, locs: &[Option<Loc>], loops: &[(usize, usize)], copies: &[(usize, ValueId)]) -> Lifetimes {
        let n_nodes = graph.nodes.len();
        let mut produced_at = vec![None::<usize>; graph.values.len()];
        for (i, node) in graph.nodes.iter().enumerate() {
            for &out in &node.outputs {
                produced_at[out.index()].get_or_insert(i);
            }
        }
        let last_use = last_uses(graph, locs, loops, copies, &produced_at);
        let mut allocate_at: Vec<Vec<usize>> = (0..n_nodes).map(|i| vec![i]).collect();
        for &(start, end) in loops {
            allocate_at[end].clear();
            allocate_at[start].push(end);
        }
        let early = early_concats(locs, &produced_at, n_nodes);
        Lifetimes { last_use, allocate_at, early }
    }
}

/// Last node index at which each (root) value is read: by a node, at the
/// end (`n_nodes`) by an output copy, and at a loop's end for what its body
/// reads from before the loop (the body runs again after its last node).
fn last_uses(
    graph: &Graph,
    locs: &[Option<Loc>],
    loops: &[(usize, usize)],
    output_copies: &[(usize, ValueId)],
    produced_at: &[Option<usize>],
) -> Vec<Option<usize>> {
    let mut last_use = vec![None::<usize>; graph.values.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        for v in node.inputs.iter().flatten().chain(&node.outputs) {
            let r = root(locs, *v).index();
            last_use[r] = Some(last_use[r].map_or(i, |u: usize| u.max(i)));
        }
    }
    for &(_, v) in output_copies {
        last_use[root(locs, v).index()] = Some(graph.nodes.len());
    }
    for &(start, end) in loops {
        for node in &graph.nodes[start..=end] {
            for v in node.inputs.iter().flatten() {
                let r = root(locs, *v).index();
                if produced_at[r].is_none_or(|p| p < start) {
                    last_use[r] = Some(last_use[r].map_or(end, |u| u.max(end)));
                }
            }
        }
    }
    last_use
}

/// Per node, the Concats holding parts in place that get their memory
/// there: where their first part (maybe a part of a part) is produced,
/// when that comes before the Concat itself.
fn early_concats(locs: &[Option<Loc>], produced_at: &[Option<usize>], n_nodes: usize) -> Vec<Vec<ValueId>> {
    let mut first_write: HashMap<usize, usize> = HashMap::new();
    for (v, at) in produced_at.iter().enumerate() {
        if let (Some(at), Some(Loc::Within(..))) = (*at, locs[v]) {
            let r = root(locs, ValueId(v as u32)).index();
            let earliest = first_write.entry(r).or_insert(at);
            *earliest = (*earliest).min(at);
        }
    }
    let mut early: Vec<Vec<ValueId>> = vec![Vec::new(); n_nodes];
    for (&r, &at) in &first_write {
        if produced_at[r].is_some_and(|p| at < p) {
            early[at].push(ValueId(r as u32));
        }
    }
    early
}

/// Walks the schedule giving each unplaced value an arena block from the
/// node where it gets memory to its last use, and each node its scratch
/// area; returns the arena and the scratch offsets.
fn allocate(
    graph: &Graph,
    locs: &mut [Option<Loc>],
    lifetimes: &Lifetimes,
    run_time: &mut RunTimeMemory,
) -> Result<(Arena, Vec<Option<usize>>), PlanError> {
    let n_nodes = graph.nodes.len();
    let mut arena = Arena::default();
    let mut offsets = vec![None::<usize>; graph.values.len()];
    let mut scratch = vec![None; n_nodes];
    let mut frees: Vec<Vec<ValueId>> = vec![Vec::new(); n_nodes + 1];
    for (i, node) in graph.nodes.iter().enumerate() {
        let outputs = lifetimes.allocate_at[i].iter().flat_map(|&k| &graph.nodes[k].outputs);
        for &out in lifetimes.early[i].iter().chain(outputs) {
            if locs[out.index()].is_none() {
                let off = arena.alloc(bytes_of(graph, out)?);
                offsets[out.index()] = Some(off);
                locs[out.index()] = Some(Loc::Workspace(off));
                let end = lifetimes.last_use[out.index()].unwrap_or(i).max(i);
                frees[end].push(out);
            }
        }
        let shapes: Vec<_> = node.inputs.iter().map(|v| v.and_then(|v| graph.concrete(v))).collect();
        let cx = infer_cx(graph, node, &shapes);
        let scratch_bytes = node.op.scratch_bytes(&cx);
        run_time.add_node(node.op.run_time_bytes(&cx));
        if scratch_bytes > 0 {
            let off = arena.alloc(scratch_bytes);
            scratch[i] = Some(off);
            arena.free(off);
        }
        for v in std::mem::take(&mut frees[i]) {
            if let Some(off) = offsets[v.index()] {
                arena.free(off);
            }
        }
    }
    Ok((arena, scratch))
}

/// Every value's location: [`Loc::Unused`] for one nothing reads or
/// writes, an error for one that is read but has no producer.
fn finish_locations(graph: &Graph, mut locs: Vec<Option<Loc>>) -> Result<Vec<Loc>, PlanError> {
    let mut referenced = vec![false; graph.values.len()];
    for v in graph.nodes.iter().flat_map(|n| n.inputs.iter().flatten().chain(&n.outputs)).chain(&graph.outputs) {
        referenced[v.index()] = true;
    }
    for (l, used) in locs.iter_mut().zip(referenced) {
        if l.is_none() && !used {
            *l = Some(Loc::Unused);
        }
    }
    locs.into_iter()
        .enumerate()
        .map(|(i, l)| l.ok_or_else(|| PlanError(format!("value \"{}\" has no producer", graph.values[i].name))))
        .collect()
}

/// Places the [`Handover`] block at the end of the workspace, which grows
/// by its size: a word for the allocator, one per data-dependent value and
/// one per level of guarded-range nesting.
fn append_handover(graph: &Graph, locs: &[Loc], workspace_bytes: &mut usize) -> Handover {
    let dynamic: HashMap<ValueId, usize> = (0..locs.len())
        .filter(|&i| locs[i] == Loc::Dynamic)
        .enumerate()
        .map(|(k, i)| (ValueId(i as u32), 1 + k))
        .collect();
    let guards = 1 + dynamic.len();
    let words = guards + guard_depth(graph);
    let offset = *workspace_bytes;
    *workspace_bytes += (8 * words).div_ceil(ALIGN) * ALIGN;
    Handover { offset, dynamic, guards }
}

/// Places the parts of each Concat that can be written in place (see the
/// module doc): a part must be a static value computed into the workspace
/// (not a graph input, output, constant or view), placed in no other
/// Concat, and the Concat's output must be a static workspace value whose
/// dims before the axis are all 1. Called only for graphs without loops
/// (a loop body's values are written again on every iteration).
fn place_concat_parts(graph: &Graph, locs: &mut [Option<Loc>]) {
    for node in &graph.nodes {
        let (Op::Concat(concat), Some(&out)) = (&node.op, node.outputs.first()) else {
            continue;
        };
        let Some((dtype, shape)) = graph.concrete(out) else {
            continue;
        };
        let axis = match crate::ir::shape::normalize_axis(concat.axis, shape.len()) {
            Some(axis) if shape[..axis].iter().all(|&d| d == 1) => axis,
            _ => continue,
        };
        if locs[out.index()].is_some() {
            continue;
        }
        let inner: usize = shape[axis + 1..].iter().product();
        let mut offset = 0usize;
        for &part in &node.inputs {
            let Some((part, (_, part_shape))) = part.and_then(|v| Some((v, graph.concrete(v)?))) else {
                break; // a part of unknown size: the offsets of the rest are unknown too
            };
            let Some(bytes) = dtype.bytes_for(part_shape.get(axis).copied().unwrap_or(0) * inner) else {
                break;
            };
            let computed = matches!(graph.value(part).def, ValueDef::Computed);
            if computed && locs[part.index()].is_none() && bytes > 0 {
                locs[part.index()] = Some(Loc::Within(out, offset));
            }
            offset += bytes;
        }
    }
}

/// The schedule cut into parts of about [`NODES_PER_PART`] nodes, never
/// inside a loop (its back edge must stay in one function).
fn cut_into_parts(n_nodes: usize, loops: &[(usize, usize)]) -> Vec<Range<usize>> {
    let mut parts = Vec::new();
    let mut start = 0;
    while start < n_nodes {
        let mut end = (start + NODES_PER_PART).min(n_nodes);
        while let Some(&(_, last)) = loops.iter().find(|&&(s, e)| s < end && end <= e) {
            end = last + 1;
        }
        parts.push(start..end);
        start = end;
    }
    if parts.is_empty() {
        parts.push(0..0);
    }
    parts
}

/// The (LoopStart, LoopEnd) index pairs of the schedule's loops.
fn loop_ranges(graph: &Graph) -> Vec<(usize, usize)> {
    let (mut open, mut ranges) = (Vec::new(), Vec::new());
    for (i, node) in graph.nodes.iter().enumerate() {
        match node.op {
            Op::LoopStart(_) => open.push(i),
            Op::LoopEnd(_) => ranges.extend(open.pop().map(|s| (s, i))),
            _ => {}
        }
    }
    ranges
}

/// How deep guarded ranges nest in the schedule.
fn guard_depth(graph: &Graph) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for node in &graph.nodes {
        match node.op {
            Op::Guard(_) => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            Op::EndGuard(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// First-fit allocator over one growing arena.
#[derive(Default)]
struct Arena {
    /// Live blocks as (offset, size), sorted by offset.
    live: Vec<(usize, usize)>,
    high_water: usize,
}

impl Arena {
    fn alloc(&mut self, bytes: usize) -> usize {
        let size = bytes.max(1).div_ceil(ALIGN) * ALIGN;
        let mut start = 0;
        let mut at = self.live.len();
        for (i, &(off, len)) in self.live.iter().enumerate() {
            if off >= start + size {
                at = i;
                break;
            }
            start = start.max(off + len);
        }
        self.live.insert(at, (start, size));
        self.high_water = self.high_water.max(start + size);
        start
    }

    fn free(&mut self, offset: usize) {
        self.live.retain(|&(off, _)| off != offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dense block in small: `c1 = Concat(a, b)`, `c2 = Concat(c1, e, a)`
    /// with `e` computed from `c1`, and `y = Relu(c2)` the graph output.
    /// `a` and `b` are written inside `c1`, `c1` and `e` inside `c2`; `a`
    /// is placed once (in `c1`) and copied into `c2`. The results are the
    /// copying Concats'.
    #[test]
    fn concat_parts_are_written_in_place() {
        use crate::ir::Tensor;
        use crate::ops::elementwise::{Elementwise, Func};
        use crate::ops::shape_ops::Concat;
        use crate::passes::test_graph::{push, value};
        let mut g = Graph::default();
        let relu = || Elementwise { op_type: "Relu", func: Func::Relu };
        let neg = || Elementwise { op_type: "Neg", func: Func::Neg };
        let x = value(&mut g, "x", &[1, 1, 2, 2], ValueDef::Input(0));
        let a = value(&mut g, "a", &[1, 1, 2, 2], ValueDef::Computed);
        let b = value(&mut g, "b", &[1, 1, 2, 2], ValueDef::Computed);
        let c1 = value(&mut g, "c1", &[1, 2, 2, 2], ValueDef::Computed);
        let e = value(&mut g, "e", &[1, 2, 2, 2], ValueDef::Computed);
        let c2 = value(&mut g, "c2", &[1, 5, 2, 2], ValueDef::Computed);
        let y = value(&mut g, "y", &[1, 5, 2, 2], ValueDef::Computed);
        push(&mut g, "a", Op::Elementwise(relu()), &[x], a);
        push(&mut g, "b", Op::Elementwise(neg()), &[a], b);
        push(&mut g, "c1", Op::Concat(Concat { axis: 1 }), &[a, b], c1);
        push(&mut g, "e", Op::Elementwise(neg()), &[c1], e);
        push(&mut g, "c2", Op::Concat(Concat { axis: -3 }), &[c1, e, a], c2);
        push(&mut g, "y", Op::Elementwise(relu()), &[c2], y);
        g.inputs.push(x);
        g.outputs.push(y);

        let p = plan(&g).expect("plan");
        assert_eq!(p.locs[a.index()], Loc::Within(c1, 0));
        assert_eq!(p.locs[b.index()], Loc::Within(c1, 16));
        assert_eq!(p.locs[c1.index()], Loc::Within(c2, 0));
        assert_eq!(p.locs[e.index()], Loc::Within(c2, 32));
        assert!(matches!(p.locs[c2.index()], Loc::Workspace(_)));
        // c2's buffer (80 bytes, from `a` on) is the whole workspace: `y`
        // is in the caller's buffer, everything else inside c2.
        assert_eq!(p.workspace_bytes, 128);

        let xs = [-1.0f32, 2.0, -3.0, 4.0];
        let got = crate::passes::test_graph::run_bytes(&g, &[Tensor::from_f32s(vec![1, 1, 2, 2], &xs)], false);
        let a: Vec<f32> = xs.iter().map(|v| v.max(0.0)).collect();
        let b: Vec<f32> = a.iter().map(|v| -v).collect();
        let c1: Vec<f32> = a.iter().chain(&b).copied().collect();
        let e: Vec<f32> = c1.iter().map(|v| -v).collect();
        let want: Vec<f32> = c1.iter().chain(&e).chain(&a).map(|v| v.max(0.0)).collect();
        let got: Vec<f32> = got[0].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn arena_reuses_freed_space_first_fit() {
        let mut a = Arena::default();
        let x = a.alloc(100);
        let y = a.alloc(10);
        assert_eq!((x, y), (0, 128));
        a.free(x);
        assert_eq!(a.alloc(64), 0);
        assert_eq!(a.alloc(64), 64);
        assert_eq!(a.alloc(1), 192);
        assert_eq!(a.high_water, 256);
    }
}
