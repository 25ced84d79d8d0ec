//! Control flow: If, Loop, Scan and SequenceMap, holding their subgraphs.
//!
//! A subgraph's nodes live in the same value arena as the graph around it
//! and name outer values by their `ValueId` directly, as the ONNX scoping
//! rules allow. These operators never reach code generation: inference
//! expands them (`crate::infer::expand`) — If with a condition known at compile
//! time becomes its branch, If on a run-time condition becomes both
//! branches in [`Guard`]ed ranges that the code skips or runs, Loop with a
//! known trip count and a condition that folds each iteration is unrolled,
//! Scan (whose length is its input's static axis length) too, and
//! SequenceMap over its input sequence's compile-time length. Any other
//! Loop runs at run time: [`LoopStart`] … body … [`LoopEnd`] is a range of
//! the schedule that the code repeats, its loop-carried values kept in
//! buffers that live across iterations (so they need one static type), its
//! scan outputs written row by row into buffers sized by a compile-time
//! trip count.
//!
//! Opset forms: If 1-25 (one form); Loop 1-25 (`M` and `cond` optional
//! inputs); Scan 9-25 (`scan_input_axes`/`directions`, `scan_output_axes`/
//! `directions`); Scan 8 (batched, with `sequence_lens`, scan axis 1 after
//! the batch axis) when every sequence has the full length; SequenceMap
//! 17-25.

use super::{InferCx, Inferred, Operator};
use crate::codegen::{types, InstBuilder, IntCC, Lower, MemFlagsData};
use crate::ir::attributes::{self, Attribute};
use crate::ir::{DType, Node, ValueId};

/// A subgraph: placeholder values for its formal inputs, its nodes, and
/// the values (inside, formal, outer or constant) it returns.
#[derive(Clone, Debug, Default)]
pub struct Subgraph {
    pub inputs: Vec<ValueId>,
    pub nodes: Vec<Node>,
    pub outputs: Vec<ValueId>,
}

#[derive(Clone, Debug)]
pub struct If {
    pub then_branch: Subgraph,
    pub else_branch: Subgraph,
}

/// Loop: inputs `(M?, cond?, v_initial...)`, body `(iteration, cond,
/// v...) -> (cond, v..., scan...)`, outputs `(v_final..., scan...)`.
#[derive(Clone, Debug)]
pub struct Loop {
    pub body: Subgraph,
}

/// Scan (opset 9+): inputs `(state..., scanned...)`, body `(state...,
/// slice...) -> (state..., scan slice...)`, outputs `(state..., scanned
/// outputs...)`.
#[derive(Clone, Debug)]
pub struct Scan {
    pub body: Subgraph,
    /// Scan-8: input 0 is `sequence_lens` and every other input and output
    /// has a batch axis 0 in front of the scan axis.
    pub batched: bool,
    pub num_scan_inputs: usize,
    pub input_axes: Vec<i64>,
    pub input_reverse: Vec<bool>,
    pub output_axes: Vec<i64>,
    pub output_reverse: Vec<bool>,
}

/// SequenceMap: inputs `(sequence, additional...)`, each additional one a
/// sequence of the same length or a tensor; body `(element, additional
/// element or tensor...) -> (value...)`; outputs the sequences of the
/// body's values, one per output.
#[derive(Clone, Debug)]
pub struct SequenceMap {
    pub body: Subgraph,
}

/// The subgraphs of a control-flow operator.
pub trait ControlFlow: std::fmt::Debug {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph>;

    /// Each subgraph with the name of the attribute that holds it.
    fn subgraphs(&self) -> Vec<(&'static str, &Subgraph)>;

    /// The attributes the textual mid-IR prints: every field but the
    /// subgraphs, which it prints after the node.
    fn attributes_besides_subgraphs(&self) -> Vec<Attribute> {
        let names: Vec<&str> = self.subgraphs().iter().map(|(name, _)| *name).collect();
        attributes::of_debug_except(self, &names)
    }
}

impl ControlFlow for If {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph> {
        vec![&mut self.then_branch, &mut self.else_branch]
    }
    fn subgraphs(&self) -> Vec<(&'static str, &Subgraph)> {
        vec![("then_branch", &self.then_branch), ("else_branch", &self.else_branch)]
    }
}

impl ControlFlow for Loop {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph> {
        vec![&mut self.body]
    }
    fn subgraphs(&self) -> Vec<(&'static str, &Subgraph)> {
        vec![("body", &self.body)]
    }
}

impl ControlFlow for SequenceMap {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph> {
        vec![&mut self.body]
    }
    fn subgraphs(&self) -> Vec<(&'static str, &Subgraph)> {
        vec![("body", &self.body)]
    }
}

impl ControlFlow for Scan {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph> {
        vec![&mut self.body]
    }
    fn subgraphs(&self) -> Vec<(&'static str, &Subgraph)> {
        vec![("body", &self.body)]
    }
}

macro_rules! expanded_before_inference {
    ($($ty:ty => $name:literal),*) => {$(
        impl Operator for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
                Err(format!("{} is expanded before inference", $name))
            }
            fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
                Err(format!("{} is expanded before code generation", $name))
            }
            fn attributes(&self) -> Vec<Attribute> {
                self.attributes_besides_subgraphs()
            }
        }
    )*};
}

expanded_before_inference!(If => "If", Loop => "Loop", Scan => "Scan", SequenceMap => "SequenceMap");

/// Opens a guarded range of the schedule: the nodes up to the matching
/// [`EndGuard`] run only when input 0 (a bool scalar) is `when`. A
/// run-time If becomes `Guard(c, true) then… EndGuard Guard(c, false)
/// else… EndGuard` and a Where per output.
#[derive(Clone, Debug)]
pub struct Guard {
    pub when: bool,
}

/// Closes the innermost open [`Guard`].
#[derive(Clone, Debug)]
pub struct EndGuard;

impl Operator for Guard {
    fn name(&self) -> &'static str {
        "Guard"
    }

    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Ok(Vec::new())
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        cx.begin_guard(0, self.when)
    }

    fn foldable(&self) -> bool {
        false
    }
}

impl Operator for EndGuard {
    fn name(&self) -> &'static str {
        "EndGuard"
    }

    fn infer(&self, _cx: &InferCx) -> Result<Vec<Inferred>, String> {
        Ok(Vec::new())
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        cx.end_guard()
    }

    fn foldable(&self) -> bool {
        false
    }
}

/// Opens a loop run at run time. Inputs `(M?, cond?, v_initial...)`;
/// outputs the loop's state `(iteration, cond, v...)`: an int64 counter
/// from 0, the bool condition and the loop-carried values, which the body
/// reads and [`LoopEnd`] overwrites for the next iteration. The range
/// repeats while `iteration < M` (when `M` is given) and `cond` holds.
#[derive(Clone, Debug)]
pub struct LoopStart;

/// Closes the innermost [`LoopStart`]. Inputs `(iteration, cond, v...)`
/// (the state), then the body's `(cond, v..., scan...)`; outputs
/// `(v_final..., scan_final...)`. Scan outputs are `trip_count` rows, one
/// written per iteration (the plan gives them their memory at the
/// LoopStart, since the loop writes them throughout).
#[derive(Clone, Debug)]
pub struct LoopEnd {
    pub carried: usize,
    pub trip_count: usize,
}

impl Operator for LoopStart {
    fn name(&self) -> &'static str {
        "LoopStart"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let mut out = vec![Inferred::new(DType::I64, vec![]), Inferred::new(DType::Bool, vec![])];
        for i in 2..cx.inputs.len() {
            let v = cx.input(i)?;
            out.push(Inferred::new(v.dtype, v.shape.to_vec()));
        }
        Ok(out)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let flags = MemFlagsData::trusted();
        let iteration = cx.output_ptr(0)?;
        let zero = cx.ins().iconst(types::I64, 0);
        cx.ins().store(flags, zero, iteration, 0);
        let cond = cx.output_ptr(1)?;
        let initial = if cx.has_input(1) {
            let given = cx.input_ptr(1)?;
            cx.ins().load(types::I8, flags, given, 0)
        } else {
            cx.ins().iconst(types::I8, 1)
        };
        cx.ins().store(flags, initial, cond, 0);
        for i in 2..cx.input_count() {
            let bytes = cx.input_bytes(i)?;
            let (to, from) = (cx.output_ptr(i)?, cx.input_ptr(i)?);
            cx.copy_bytes(to, from, bytes);
        }
        let limit = if cx.has_input(0) { Some(cx.input_ptr(0)?) } else { None };
        cx.begin_repeat(limit, iteration, cond);
        Ok(())
    }

    fn foldable(&self) -> bool {
        false
    }
}

impl LoopEnd {
    /// How many scan outputs a node with `inputs` inputs has.
    fn scans(&self, inputs: usize) -> usize {
        inputs.saturating_sub(3 + 2 * self.carried)
    }
}

impl Operator for LoopEnd {
    fn name(&self) -> &'static str {
        "LoopEnd"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let n = self.carried;
        if cx.inputs.len() < 3 + 2 * n {
            return Err(format!("{} inputs for {n} loop-carried values", cx.inputs.len()));
        }
        let mut out = Vec::new();
        for j in 0..n {
            let (state, next) = (cx.input(2 + j)?, cx.input(3 + n + j)?);
            if (state.dtype, state.shape) != (next.dtype, next.shape) {
                return Err(format!(
                    "loop-carried value {j} is {:?}{:?} before an iteration and {:?}{:?} after; a loop run at run time needs one static type",
                    state.dtype, state.shape, next.dtype, next.shape
                ));
            }
            out.push(Inferred::new(state.dtype, state.shape.to_vec()));
        }
        for k in 0..self.scans(cx.inputs.len()) {
            let row = cx.input(3 + 2 * n + k)?;
            let mut shape = vec![self.trip_count];
            shape.extend_from_slice(row.shape);
            out.push(Inferred::new(row.dtype, shape));
        }
        Ok(out)
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        // Room to stage the next state when it shares bytes with this one.
        (0..self.carried)
            .filter_map(|j| cx.input(2 + j).ok())
            .filter_map(|v| crate::ir::shape::element_count(v.shape).and_then(|n| v.dtype.bytes_for(n)))
            .sum()
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let n = self.carried;
        let flags = MemFlagsData::trusted();
        let cond = cx.input_ptr(1)?;
        let next_cond = cx.input_ptr(2 + n)?;
        let byte = cx.ins().load(types::I8, flags, next_cond, 0);
        // The next values may be views of the current ones (a swap, say):
        // then they go through the scratch first, like a parallel assignment.
        let sizes = (0..n).map(|j| cx.input_bytes(2 + j)).collect::<Result<Vec<_>, _>>()?;
        let shares = (0..n).any(|j| (0..n).any(|i| cx.inputs_share_bytes(2 + i, 3 + n + j)));
        let staging = if shares { Some(cx.scratch_ptr()?) } else { None };
        let mut at = 0i64;
        for (j, &bytes) in sizes.iter().enumerate() {
            let next = cx.input_ptr(3 + n + j)?;
            match staging {
                Some(scratch) => {
                    let spot = cx.ins().iadd_imm_s(scratch, at);
                    cx.copy_bytes(spot, next, bytes);
                    at += bytes as i64;
                }
                None => {
                    let state = cx.input_ptr(2 + j)?;
                    cx.copy_bytes(state, next, bytes);
                }
            }
        }
        if let Some(scratch) = staging {
            let mut at = 0i64;
            for (j, &bytes) in sizes.iter().enumerate() {
                let (state, spot) = (cx.input_ptr(2 + j)?, cx.ins().iadd_imm_s(scratch, at));
                cx.copy_bytes(state, spot, bytes);
                at += bytes as i64;
            }
        }
        cx.ins().store(flags, byte, cond, 0);
        let iteration = cx.input_ptr(0)?;
        let i = cx.ins().load(types::I64, flags, iteration, 0);
        let ptr = cx.ptr_type();
        for k in 0..self.scans(cx.input_count()) {
            let row_bytes = cx.input_bytes(3 + 2 * n + k)?;
            // The loop header stopped the loop at trip_count rows.
            let guard = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, i, self.trip_count as i64);
            cx.fail_if(guard, crate::codegen::status::INDEX_OUT_OF_RANGE);
            let offset = cx.ins().imul_imm_s(i, row_bytes as i64);
            let offset = if ptr == types::I64 { offset } else { cx.ins().ireduce(ptr, offset) };
            let (rows, row) = (cx.output_ptr(n + k)?, cx.input_ptr(3 + 2 * n + k)?);
            let dst = cx.ins().iadd(rows, offset);
            cx.copy_bytes(dst, row, row_bytes);
        }
        let next_i = cx.ins().iadd_imm_s(i, 1);
        cx.ins().store(flags, next_i, iteration, 0);
        cx.end_repeat()?;
        for (j, &bytes) in sizes.iter().enumerate() {
            let (to, from) = (cx.output_ptr(j)?, cx.input_ptr(2 + j)?);
            cx.copy_bytes(to, from, bytes);
        }
        Ok(())
    }

    fn foldable(&self) -> bool {
        false
    }
}
