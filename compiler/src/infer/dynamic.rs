//! Graphs compiled once for every size in their `--dim` ranges.
//!
//! A graph input's symbol given a range (`--dim seq=1..128`) stays
//! symbolic through inference, which makes every shape an expression of
//! the symbols. Here, once inference is done, the graph is settled for
//! code generation: each value with a symbolic dim keeps its dims as
//! expressions in [`Graph::symbolic`], and its type takes each dim's upper
//! bound over the ranges, so that the memory plan sizes every value (and
//! the header's workspace) for the largest case, and offsets planned for
//! the largest case hold for every smaller one. The code then reads the
//! symbols from the inputs' dims on entry and computes what depends on
//! them at run time (`codegen::symbolic`).
//!
//! Only some operators have code that takes run-time sizes; the first
//! node that reads or writes a value of symbolic shape through another
//! operator is refused here, by name. The passes do not run on such a
//! graph (they read static shapes).

use super::InferError;
use crate::ir::dim_expr::{SymbolFacts, SymbolicShapes};
use crate::ir::{Dim, Graph, Node, ValueId};
use crate::ops::Op;

/// Records the symbolic dims of `graph` and gives their values the upper
/// bounds as types; an error naming the first node whose operator cannot
/// run at run-time sizes, or a value whose dim has no upper bound.
pub fn settle(graph: &mut Graph, facts: &SymbolFacts) -> Result<(), InferError> {
    crate::passes::eliminate_dead_nodes(graph);
    let symbolic = |g: &Graph, v: ValueId| g.value(v).ty.as_ref().is_some_and(|t| t.shape.iter().any(is_symbolic));
    for node in &graph.nodes {
        let touches = node.inputs.iter().flatten().chain(&node.outputs).any(|&v| symbolic(graph, v));
        if touches && !runs_at_run_time_sizes(node) {
            return Err(InferError::new(vec![format!(
                "{}: {} is not compiled for symbolic dims yet (it reads or writes a value of symbolic shape): \
                 give one size per symbol, --dim SYM=N",
                node.label(),
                node.op.name()
            )]));
        }
    }
    if let Some(&v) = graph.composites.keys().find(|&&v| graph.composite_tensors(v).iter().any(|&t| symbolic(graph, t)))
    {
        return Err(InferError::new(vec![format!(
            "\"{}\": sequences and optionals of symbolic shape are not compiled yet",
            graph.value(v).name
        )]));
    }
    let mut dims = std::collections::HashMap::new();
    for k in 0..graph.values.len() {
        let value = &mut graph.values[k];
        let Some(ty) = value.ty.as_mut().filter(|t| t.shape.iter().any(is_symbolic)) else { continue };
        let exprs: Vec<_> = ty.shape.iter().filter_map(Dim::expr).collect();
        if exprs.len() != ty.shape.len() {
            return Err(InferError::new(vec![format!(
                "value \"{}\" is {ty}: data-dependent and symbolic dims together are not compiled yet",
                value.name
            )]));
        }
        for (i, (d, e)) in ty.shape.iter_mut().zip(&exprs).enumerate() {
            let most = e.upper_bound(facts).and_then(|m| usize::try_from(m).ok()).ok_or_else(|| {
                InferError::new(vec![format!(
                    "value \"{}\" dim {i} ({e}) has no upper bound over the --dim ranges",
                    value.name
                )])
            })?;
            *d = Dim::Known(most);
        }
        dims.insert(ValueId(k as u32), exprs);
    }
    graph.symbolic = Some(SymbolicShapes { facts: facts.clone(), dims });
    Ok(())
}

fn is_symbolic(d: &Dim) -> bool {
    matches!(d, Dim::Sym(_))
}

/// Operators whose lowering takes a run-time row count
/// (`codegen::symbolic`): elementwise functions, MatMul, the softmax
/// family and LayerNormalization/RMSNormalization.
fn runs_at_run_time_sizes(node: &Node) -> bool {
    use crate::ops::norm::NormKind;
    match &node.op {
        Op::Elementwise(_) | Op::MatMul(_) | Op::Softmax(_) => true,
        Op::Normalize(n) => matches!(n.kind, NormKind::Layer { .. } | NormKind::Rms { .. }),
        _ => false,
    }
}
