//! Code for a graph compiled once over `--dim` ranges ([`Graph::symbolic`]).
//!
//! How a symbolic dim flows through the code:
//! * **Entry.** An input of symbolic shape is passed as an `onnxc_tensor`
//!   descriptor (`inputs[k] = &desc`: data, rank, dims). Before any node
//!   runs, [`bind`] checks its rank and static dims, binds each symbol
//!   the first time a dim names it (within its `--dim` range, a multiple
//!   of its divisor) and checks every later dim against the expression
//!   it must equal; a mismatch returns `STATUS_BAD_INPUT` tagged with the
//!   input. The symbols are SSA values of the entry function from then on.
//! * **Workspace.** Inference gave every value of symbolic shape its
//!   upper bounds as its type, so the plan (offsets, the header's
//!   workspace size) is the largest case's, which holds for every smaller
//!   one: nothing about memory is computed at run time.
//! * **Nodes.** A node that touches a symbolic shape runs as rows: every
//!   symbolic dim of its output lies in a leading run of dims whose
//!   product, the row count, is an expression ([`node_rows`]); its
//!   operands either have the output's dims or are static and broadcast
//!   over the trailing dims only (MatMul: A has the rows, B is a static
//!   matrix). The lowering is the static one at the upper bounds, except
//!   that its kernel parameter block is copied to the stack and its row
//!   fields (elementwise `dims[0]`, gemm `m`, softmax `outer`, the norms'
//!   `dims[0]` and `stat_count`) written with the run-time count
//!   ([`rows_fields`]); a softmax or normalisation reduces over static
//!   trailing dims only. A lowering that calls no kernel with such a
//!   block, or more than one, is refused, naming the node.
//! * **Outputs.** An output of symbolic shape is an `onnxc_tensor` too:
//!   the caller's `data` holds the upper bound's bytes, and the code
//!   writes the dims to the caller's `dims` array ([`write_output_dims`]).

use super::{types, Block, CodegenError, FunctionBuilder, InstBuilder, IntCC, Lower, MemFlagsData, Type, Value};
use crate::ir::dim_expr::{Atom, DimExpr, SymbolicShapes};
use crate::ir::{Graph, Node, ValueId};
use crate::plan::Plan;
use cranelift_codegen::ir::{StackSlotData, StackSlotKind};
use onnxc_runtime::abi::norm::NormParams;
use onnxc_runtime::abi::softmax::SoftmaxParams;
use onnxc_runtime::elementwise::ElementwiseParams;
use onnxc_runtime::GemmParams;
use std::collections::HashMap;

/// Pointer-sized words of `onnxc_tensor`: data, rank, dims.
const DATA: usize = 0;
const RANK: usize = 1;
const DIMS: usize = 2;

/// What the entry point learnt from the inputs' descriptors.
#[derive(Default)]
pub(super) struct Bound {
    /// Each symbol's size (i64).
    pub symbols: HashMap<String, Value>,
    /// The data address of each described input and output, by position.
    pub inputs: HashMap<usize, Value>,
    pub outputs: HashMap<usize, Value>,
}

/// A node's run-time row count, for the parameter block it calls a kernel with.
pub(super) struct Rows {
    /// The count at the upper bounds, which the static lowering used.
    most: i64,
    /// The count at run time (i64).
    value: Value,
    /// Parameter blocks given the count so far.
    used: usize,
}

/// Refuses what this path does not generate yet; nothing for a static graph.
pub(super) fn check_supported(graph: &Graph, plan: &Plan, portable: bool) -> Result<(), CodegenError> {
    let Some(shapes) = &graph.symbolic else { return Ok(()) };
    let refuse = |why: &str| Err(CodegenError::Module(format!("symbolic dims: {why} is not generated yet")));
    if portable {
        return refuse("portable code");
    }
    if plan.handover.is_some() {
        return refuse("a schedule cut into parts (a loop, or a long graph)");
    }
    if plan.output_copies.iter().any(|(_, v)| shapes.dims.contains_key(v)) {
        return refuse("an output of symbolic shape that is an input, a constant or another output");
    }
    Ok(())
}

/// Checks each described input on entry and binds the symbols; loads the
/// outputs' data addresses.
pub(super) fn bind(
    b: &mut FunctionBuilder,
    ptr: Type,
    graph: &Graph,
    (inputs, outputs): (Value, Value),
    fail: Block,
) -> Result<Bound, CodegenError> {
    let mut bound = Bound::default();
    let Some(shapes) = &graph.symbolic else { return Ok(bound) };
    let word = |b: &mut FunctionBuilder, at: Value, i: usize| {
        b.ins().load(ptr, MemFlagsData::trusted(), at, (i * ptr.bytes() as usize) as i32)
    };
    for (k, &v) in graph.inputs.iter().enumerate() {
        let Some(dims) = shapes.dims.get(&v) else { continue };
        let code = ((k as i64 + 1) << 8) | super::status::BAD_INPUT as i64;
        let fail_if = |b: &mut FunctionBuilder, cond: Value| {
            let code = b.ins().iconst(types::I32, code);
            let cont = b.create_block();
            b.ins().brif(cond, fail, &[code.into()], cont, &[]);
            b.switch_to_block(cont);
        };
        let desc = word(b, inputs, k);
        let null = b.ins().icmp_imm_u(IntCC::Equal, desc, 0);
        fail_if(b, null);
        let rank = word(b, desc, RANK);
        let wrong = b.ins().icmp_imm_u(IntCC::NotEqual, rank, dims.len() as i64);
        fail_if(b, wrong);
        let (data, at) = (word(b, desc, DATA), word(b, desc, DIMS));
        for p in [data, at] {
            let null = b.ins().icmp_imm_u(IntCC::Equal, p, 0);
            fail_if(b, null);
        }
        for (i, e) in dims.iter().enumerate() {
            let given = b.ins().load(types::I64, MemFlagsData::trusted(), at, 8 * i as i32);
            if let Some(s) = binding_symbol(e, &bound) {
                let fact = shapes.facts.get(&s);
                let low = b.ins().icmp_imm_s(IntCC::SignedLessThan, given, fact.min);
                let high = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, given, fact.max.unwrap_or(i64::MAX));
                let rest = b.ins().srem_imm_s(given, fact.multiple_of);
                let off = b.ins().icmp_imm_s(IntCC::NotEqual, rest, 0);
                let outside = b.ins().bor(low, high);
                let outside = b.ins().bor(outside, off);
                fail_if(b, outside);
                bound.symbols.insert(s, given);
            }
            let want = eval(b, e, &bound.symbols).map_err(CodegenError::Module)?;
            let differ = b.ins().icmp(IntCC::NotEqual, given, want);
            fail_if(b, differ);
        }
        bound.inputs.insert(k, data);
    }
    for (k, &v) in graph.outputs.iter().enumerate() {
        if shapes.dims.contains_key(&v) {
            let desc = word(b, outputs, k);
            let data = word(b, desc, DATA);
            bound.outputs.insert(k, data);
        }
    }
    Ok(bound)
}

/// The symbol a dim binds when it is the first to name it: a dim that is
/// one symbol, or a multiple `K*floor(SYM/K)` of one (a `%K` range).
fn binding_symbol(e: &DimExpr, bound: &Bound) -> Option<String> {
    let [s] = &e.symbols()[..] else { return None };
    let alone = e.as_symbol().is_some() || e.terms().count() == 1 && e.terms().all(|(atoms, _)| atoms.len() == 1);
    (alone && !bound.symbols.contains_key(s)).then(|| s.clone())
}

/// `e` at run time (i64), from the bound symbols.
pub(super) fn eval(b: &mut FunctionBuilder, e: &DimExpr, symbols: &HashMap<String, Value>) -> Result<Value, String> {
    let mut sum = b.ins().iconst(types::I64, 0);
    for (atoms, c) in e.terms() {
        let mut product = b.ins().iconst(types::I64, c);
        for a in atoms {
            let v = eval_atom(b, a, symbols)?;
            product = b.ins().imul(product, v);
        }
        sum = b.ins().iadd(sum, product);
    }
    Ok(sum)
}

fn eval_atom(b: &mut FunctionBuilder, a: &Atom, symbols: &HashMap<String, Value>) -> Result<Value, String> {
    Ok(match a {
        Atom::Symbol(s) => *symbols.get(s).ok_or_else(|| format!("symbol \"{s}\" is not bound by any input"))?,
        Atom::FloorDiv(e, d) => {
            // Rounds toward minus infinity, where sdiv rounds toward zero.
            let x = eval(b, e, symbols)?;
            let q = b.ins().sdiv_imm_s(x, *d);
            let r = b.ins().srem_imm_s(x, *d);
            let below = b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
            let down = b.ins().iadd_imm_s(q, -1);
            b.ins().select(below, down, q)
        }
        Atom::Min(v) | Atom::Max(v) => {
            let mut acc = eval(b, &v[0], symbols)?;
            for e in &v[1..] {
                let x = eval(b, e, symbols)?;
                acc = if matches!(a, Atom::Min(_)) { b.ins().smin(acc, x) } else { b.ins().smax(acc, x) };
            }
            acc
        }
    })
}

/// Writes the dims of each output of symbolic shape to its descriptor.
pub(super) fn write_output_dims(b: &mut FunctionBuilder, ptr: Type, graph: &Graph, outputs: Value, bound: &Bound) {
    let Some(shapes) = &graph.symbolic else { return };
    for (k, v) in graph.outputs.iter().enumerate() {
        let Some(dims) = shapes.dims.get(v) else { continue };
        let desc = b.ins().load(ptr, MemFlagsData::trusted(), outputs, (k * ptr.bytes() as usize) as i32);
        let at = b.ins().load(ptr, MemFlagsData::trusted(), desc, (DIMS * ptr.bytes() as usize) as i32);
        for (i, e) in dims.iter().enumerate() {
            // Every symbol comes from an input's dims, so `bind` bound it.
            let n = eval(b, e, &bound.symbols).unwrap_or_else(|_| b.ins().iconst(types::I64, 0));
            b.ins().store(MemFlagsData::trusted(), n, at, 8 * i as i32);
        }
    }
}

/// The dims of `v` as expressions (constants for a static value).
fn dims_of(graph: &Graph, shapes: &SymbolicShapes, v: ValueId) -> Vec<DimExpr> {
    match shapes.dims.get(&v) {
        Some(d) => d.clone(),
        None => graph.concrete(v).map(|(_, s)| s.into_iter().map(DimExpr::from).collect()).unwrap_or_default(),
    }
}

/// The row count of a node that touches a symbolic shape (`None` for one
/// that does not), with its value at the upper bounds; an error saying
/// why the node's shapes are not rows and static columns.
pub(super) fn node_rows(graph: &Graph, node: &Node) -> Result<Option<(DimExpr, i64)>, String> {
    let Some(shapes) = &graph.symbolic else { return Ok(None) };
    let symbolic = |v: &ValueId| shapes.dims.contains_key(v);
    if !node.inputs.iter().flatten().chain(&node.outputs).any(symbolic) {
        return Ok(None);
    }
    let read = |v: &ValueId| graph.outputs.contains(v) || graph.nodes.iter().any(|n| n.inputs.contains(&Some(*v)));
    let (Some(&out), false) = (node.outputs.first(), node.outputs.iter().skip(1).any(read)) else {
        return Err("symbolic dims: a node with more than one output read is not compiled yet".into());
    };
    let dims = dims_of(graph, shapes, out);
    let last_symbolic = dims.iter().rposition(|d| d.as_const().is_none()).ok_or("the output has no symbolic dim")?;
    let lead = last_symbolic + 1;
    let matrix = matches!(node.op, crate::ops::Op::MatMul(_));
    if matrix && lead == dims.len() {
        return Err("symbolic dims: MatMul's output columns must be static".into());
    }
    if reduced_from(node, dims.len())?.is_some_and(|axis| axis < lead) {
        return Err("symbolic dims: a reduction over a symbolic dim is not compiled yet".into());
    }
    for (i, v) in node.inputs.iter().enumerate() {
        let Some(v) = v else { continue };
        let operand = dims_of(graph, shapes, *v);
        let fits = match (symbolic(v), matrix) {
            (true, true) => i == 0 && operand[..operand.len() - 1] == dims[..dims.len() - 1],
            (true, false) => operand == dims,
            (false, true) => i == 1 && operand.len() == 2,
            (false, false) => {
                let pad = dims.len().saturating_sub(operand.len());
                operand.len() <= dims.len()
                    && operand.iter().take(lead.saturating_sub(pad)).all(|d| d.as_const() == Some(1))
            }
        };
        if !fits {
            return Err(format!(
                "symbolic dims: input {i} is not compiled yet: an operand must have the output's rows, or be static \
                 and broadcast over its trailing static dims{}",
                if matrix { " (MatMul: A with the rows, B a static matrix)" } else { "" }
            ));
        }
    }
    let rows_end = if matrix { dims.len() - 1 } else { lead };
    let rows = dims[..rows_end].iter().try_fold(DimExpr::constant(1), |p, d| p.checked_mul(d)).ok_or("too large")?;
    let (_, most) = graph.concrete(out).ok_or("the output has no upper bounds")?;
    let most =
        most[..rows_end].iter().try_fold(1i64, |p, &d| p.checked_mul(i64::try_from(d).ok()?)).ok_or("too large")?;
    Ok(Some((rows, most)))
}

/// The first dim a softmax or normalisation reduces over.
fn reduced_from(node: &Node, rank: usize) -> Result<Option<usize>, String> {
    use crate::ops::norm::NormKind;
    Ok(match &node.op {
        crate::ops::Op::Softmax(s) => Some(s.axis_for(rank)?),
        crate::ops::Op::Normalize(n) => match n.kind {
            NormKind::Layer { axis } | NormKind::Rms { axis } => {
                let axis = if axis < 0 { axis + rank as i64 } else { axis };
                Some(usize::try_from(axis).map_err(|_| "attribute \"axis\" is out of range")?)
            }
            _ => None,
        },
        _ => None,
    })
}

/// The row fields of a kernel parameter block that takes a row count:
/// each one's byte offset and the value the static lowering wrote (the
/// rows at the upper bounds times a static factor).
fn rows_fields<P: bytemuck::Pod>(p: &P) -> Option<Vec<(usize, i64)>> {
    use std::mem::offset_of;
    let any = p as &dyn std::any::Any;
    if let Some(g) = any.downcast_ref::<GemmParams>() {
        return (g.batch_rank == 0).then(|| vec![(offset_of!(GemmParams, m), g.m)]);
    }
    if let Some(s) = any.downcast_ref::<SoftmaxParams>() {
        return Some(vec![(offset_of!(SoftmaxParams, outer), s.outer)]);
    }
    if let Some(n) = any.downcast_ref::<NormParams>() {
        return (n.rank >= 1).then(|| {
            vec![(offset_of!(NormParams, dims), n.dims[0]), (offset_of!(NormParams, stat_count), n.stat_count)]
        });
    }
    let e = any.downcast_ref::<ElementwiseParams>()?;
    (e.rank >= 1).then(|| vec![(offset_of!(ElementwiseParams, dims), e.dims[0])])
}

impl Lower<'_, '_> {
    /// Sets the run-time row count of the node being lowered.
    pub(super) fn set_rows(&mut self, rows: &DimExpr, most: i64) -> Result<(), String> {
        let value = eval(self.b, rows, &self.env.bound.symbols)?;
        self.rows = Some(Rows { most, value, used: 0 });
        Ok(())
    }

    /// After the lowering: it gave the row count to exactly one block.
    pub(super) fn check_rows_used(&self) -> Result<(), String> {
        match &self.rows {
            Some(r) if r.used != 1 => Err(format!(
                "symbolic dims: {} is lowered here without one kernel call that takes a run-time row count",
                self.node.op.name()
            )),
            _ => Ok(()),
        }
    }

    /// `p` in a stack copy whose row field holds the run-time count, when
    /// the node runs at run-time sizes; `None` otherwise.
    pub(super) fn params_at_run_time<P: bytemuck::Pod>(&mut self, p: &P) -> Result<Option<Value>, String> {
        let Some(rows) = &self.rows else { return Ok(None) };
        let (most, count) = (rows.most, rows.value);
        let name = self.node.op.name();
        let fields = rows_fields(p)
            .ok_or_else(|| format!("symbolic dims: {name}'s kernel parameters take no run-time row count yet"))?;
        if most < 1 || fields.iter().any(|&(_, written)| written % most != 0) {
            return Err(format!("symbolic dims: {name}'s parameters do not hold its rows in their first dim"));
        }
        let template = self.table(std::slice::from_ref(p))?;
        let size = std::mem::size_of::<P>();
        let slot_bytes = u32::try_from(size).map_err(|_| "the parameter block is too large")?;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, slot_bytes, 4));
        let ptr = self.ptr_type();
        let copy = self.b.ins().stack_addr(ptr, slot, 0);
        self.copy_bytes(copy, template, size);
        for (offset, written) in fields {
            let n = self.b.ins().imul_imm_s(count, written / most);
            self.b.ins().store(MemFlagsData::trusted(), n, copy, offset as i32);
        }
        if let Some(r) = self.rows.as_mut() {
            r.used += 1;
        }
        Ok(Some(copy))
    }
}
