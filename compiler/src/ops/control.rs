//! Control flow: If, Loop, Scan and SequenceMap, holding their subgraphs.
//!
//! A subgraph's nodes live in the same value arena as the graph around it
//! and name outer values by their `ValueId` directly, as the ONNX scoping
//! rules allow. These operators never reach code generation: inference
//! expands them (`crate::expand`) — If with a condition known at compile
//! time becomes its branch, If on a run-time condition becomes both
//! branches in [`Guard`]ed ranges that the code skips or runs, Loop with a
//! known trip count and a condition that folds each iteration is unrolled,
//! Scan (whose length is its input's static axis length) too, and
//! SequenceMap over its input sequence's compile-time length. Loops whose
//! length depends on run-time data are reported as not compiled yet.
//!
//! Opset forms: If 1-25 (one form); Loop 1-25 (`M` and `cond` optional
//! inputs); Scan 9-25 (`scan_input_axes`/`directions`, `scan_output_axes`/
//! `directions`); Scan 8 (batched, with `sequence_lens`, scan axis 1 after
//! the batch axis) when every sequence has the full length; SequenceMap
//! 17-25.

use super::{InferCx, Inferred, Operator};
use crate::codegen::Lower;
use crate::ir::{Node, ValueId};

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
pub trait ControlFlow {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph>;
}

impl ControlFlow for If {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph> {
        vec![&mut self.then_branch, &mut self.else_branch]
    }
}

impl ControlFlow for Loop {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph> {
        vec![&mut self.body]
    }
}

impl ControlFlow for SequenceMap {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph> {
        vec![&mut self.body]
    }
}

impl ControlFlow for Scan {
    fn subgraphs_mut(&mut self) -> Vec<&mut Subgraph> {
        vec![&mut self.body]
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
