//! Elementwise functions over shape elements, in symbolic inference.
//!
//! Exporters compute shapes with integer arithmetic on Shape's output:
//! `Gather → Mul → Concat` to merge axes, `Equal(s, -1) → Where` to replace
//! the `-1` of a Reshape target by a dim. When an input holds symbolic
//! elements ([`InferCx::symbolic_elements`]) and the others are constants,
//! these functions compute the output's elements as expressions, so the
//! shapes computed from them stay symbolic instead of data-dependent.
//! Booleans are 0 and 1. Where the facts do not decide a result (Equal of
//! two expressions that may or may not agree, division of a value that may
//! be negative) there are no elements: the output is data-dependent, as
//! without this.

use super::Func;
use crate::ir::dim_expr::{DimExpr, SymbolFacts};
use crate::ir::{DType, Tensor};
use crate::ops::{InferCx, Inferred};

/// Most elements computed as expressions: shape vectors are short.
const MAX_ELEMENTS: usize = 64;

/// `inferred` (the output of `func` over `cx`'s inputs) with its elements
/// as expressions when some input has symbolic ones and all can be computed.
pub(super) fn with_symbolic_elements(func: Func, cx: &InferCx, inferred: Inferred) -> Inferred {
    let present: Vec<usize> = (0..cx.inputs.len()).filter(|&i| cx.opt_input(i).is_some()).collect();
    if !present.iter().any(|&i| cx.symbolic_elements(i).is_some()) {
        return inferred;
    }
    if inferred.runtime_shape.is_some() {
        return inferred;
    }
    let count = inferred.shape.iter().product();
    let Some(elements) = compute(func, cx, &present, count) else { return inferred };
    if inferred.dtype != DType::Bool {
        return inferred.with_elements(Some(elements));
    }
    let bytes: Option<Vec<u8>> = elements.iter().map(|e| e.as_const().map(|v| u8::from(v != 0))).collect();
    match bytes.and_then(|b| Tensor::from_bytes(DType::Bool, inferred.shape.clone(), b)) {
        Some(t) => Inferred::constant(t),
        None => inferred.with_elements(Some(elements)),
    }
}

/// The output's `count` elements, each input broadcast from one element
/// or taken element by element.
fn compute(func: Func, cx: &InferCx, present: &[usize], count: usize) -> Option<Vec<DimExpr>> {
    if count > MAX_ELEMENTS {
        return None;
    }
    let operands: Vec<Vec<DimExpr>> = present.iter().map(|&i| input_elements(cx, i)).collect::<Option<_>>()?;
    if operands.iter().any(|o| o.len() != 1 && o.len() != count) {
        return None;
    }
    let facts = cx.facts();
    (0..count)
        .map(|k| {
            let args: Vec<&DimExpr> = operands.iter().map(|o| &o[if o.len() == 1 { 0 } else { k }]).collect();
            apply(func, &args, facts)
        })
        .collect()
}

/// Input `i`'s elements: symbolic ones, or a small integer or bool
/// constant's; `None` for anything else (the input is then not read).
fn input_elements(cx: &InferCx, i: usize) -> Option<Vec<DimExpr>> {
    if let Some(e) = cx.symbolic_elements(i) {
        return Some(e);
    }
    let t = cx.opt_input(i)?.value?;
    let numeric = t.dtype.is_int() || t.dtype == DType::Bool;
    (numeric && t.len() <= MAX_ELEMENTS).then(|| (0..t.len()).map(|k| DimExpr::constant(t.get_i64(k))).collect())
}

/// `func` on one element of each operand.
fn apply(func: Func, args: &[&DimExpr], facts: &SymbolFacts) -> Option<DimExpr> {
    match (func, args) {
        (Func::Identity | Func::Cast { to: DType::I64, .. }, [a]) => Some((*a).clone()),
        (Func::Add, [a, b]) => a.checked_add(b),
        (Func::Sub, [a, b]) => a.checked_sub(b),
        (Func::Mul, [a, b]) => a.checked_mul(b),
        (Func::Div, [a, b]) => divide(a, b, facts),
        (Func::Mod { .. }, [a, b]) => {
            let d = b.as_const()?;
            a.checked_sub(&divide(a, b, facts)?.checked_scale(d)?)
        }
        (Func::Max, [first, rest @ ..]) => Some(rest.iter().fold((*first).clone(), |m, e| m.maximum(e, facts))),
        (Func::Min, [first, rest @ ..]) => Some(rest.iter().fold((*first).clone(), |m, e| m.minimum(e, facts))),
        (Func::Equal, [a, b]) => a.known_equal(b, facts).map(|eq| DimExpr::constant(i64::from(eq))),
        (Func::Where, [c, x, y]) => match c.as_const()? {
            0 => Some((*y).clone()),
            _ => Some((*x).clone()),
        },
        _ => None,
    }
}

/// Integer division (truncating): exact division by an expression, or
/// floor division of a nonnegative value by a positive constant (the two
/// agree there).
fn divide(a: &DimExpr, b: &DimExpr, facts: &SymbolFacts) -> Option<DimExpr> {
    match b.as_const() {
        Some(d) if d > 0 && a.is_nonnegative(facts) => a.div_floor(d, facts),
        Some(_) => None,
        None => a.div_exact(b),
    }
}
