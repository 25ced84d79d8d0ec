//! Einsum (opset 12): `equation` over any number of operands.
//!
//! Type constraints: `T` is every numeric type; onnxc lowers f32 and f64
//! with one to three operands (same type), and f16/bf16 on staged f32
//! copies ([`crate::codegen::staging`]). The equation is
//! `term,term,...[->out]` with letters `a-zA-Z` and at most one `...` per
//! term; spaces are ignored. Semantics follow numpy: a letter repeated in
//! one term walks that term's diagonal; `...` stands for the leading
//! broadcast dims (size-1 dims broadcast); without `->` the output is the
//! broadcast `...` dims then the letters used exactly once, sorted by
//! character code; letters absent from the output are summed.
//!
//! The importer parses the equation once into per-term label lists
//! ([`Einsum::terms`]); `infer`/`lower` expand `...` against the actual
//! ranks, and lowering describes the whole contraction as one strided loop
//! nest for `onnxc_einsum_{f32,f64}` (output letters first, then the summed
//! ones, each with a per-operand element stride), which handles any
//! combination of transposes, diagonals, batch dims and reductions.
//! Portable mode walks the same nest in generated code
//! ([`crate::codegen::linalg_loops`]).

use super::elementwise::compute_type;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{linalg_loops, Lower};
use crate::import::NodeImport;
use crate::ir::DType;
use onnxc_runtime::abi::linalg::{EinsumParams, EINSUM_MAX_INPUTS};
use onnxc_runtime::MAX_RANK;

/// One label of a term: a letter, or the place of the `...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Label {
    Letter(u8),
    Ellipsis,
}

#[derive(Clone, Debug)]
pub struct Einsum {
    pub terms: Vec<Vec<Label>>,
    /// `None`: implicit output.
    pub output: Option<Vec<Label>>,
}

fn parse_term(s: &str) -> Result<Vec<Label>, String> {
    let mut out = Vec::new();
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            c if c.is_ascii_alphabetic() => out.push(Label::Letter(c)),
            b'.' if bytes.get(i..i + 3) == Some(b"...") => {
                if out.contains(&Label::Ellipsis) {
                    return Err(format!("attribute \"equation\": term {s:?} has more than one \"...\""));
                }
                out.push(Label::Ellipsis);
                i += 2;
            }
            c => return Err(format!("attribute \"equation\": unexpected character {:?} in {s:?}", c as char)),
        }
        i += 1;
    }
    Ok(out)
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let eq: String = cx.attrs.string("equation")?.ok_or("attribute \"equation\" is required")?;
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms = lhs.split(',').map(parse_term).collect::<Result<Vec<_>, _>>()?;
    let output = rhs.map(parse_term).transpose()?;
    if let Some(out) = &output {
        for (i, l) in out.iter().enumerate() {
            if out[..i].contains(l) {
                return Err(format!("attribute \"equation\": output {rhs:?} repeats a label"));
            }
        }
    }
    Ok(Op::Einsum(Einsum { terms, output }))
}

/// Loop label after expanding `...`: a letter or ellipsis position `k`
/// (0 = outermost broadcast dim).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Dim {
    Broadcast(usize),
    Letter(u8),
}

/// The contraction as a loop nest: sizes, per-operand strides, output shape.
struct Plan {
    dims: Vec<usize>,
    strides: Vec<Vec<i64>>,
    out_rank: usize,
}

/// Each label's size, in order of first appearance: letters must agree,
/// broadcast dims broadcast from 1.
fn label_sizes(expanded: &[Vec<Dim>], shapes: &[&[usize]]) -> Result<Vec<(Dim, usize)>, String> {
    let mut labels: Vec<(Dim, usize)> = Vec::new();
    for (k, (dims, shape)) in expanded.iter().zip(shapes).enumerate() {
        for (&d, &size) in dims.iter().zip(shape.iter()) {
            match labels.iter_mut().find(|(l, _)| *l == d) {
                None => labels.push((d, size)),
                Some((_, s)) if *s == size || size == 1 && matches!(d, Dim::Broadcast(_)) => {}
                Some((_, s)) if *s == 1 && matches!(d, Dim::Broadcast(_)) => *s = size,
                Some((_, s)) => return Err(format!("input {k}: label {d:?} has size {size}, elsewhere {s}")),
            }
        }
    }
    Ok(labels)
}

impl Einsum {
    fn plan(&self, shapes: &[&[usize]]) -> Result<Plan, String> {
        if shapes.len() != self.terms.len() {
            return Err(format!(
                "attribute \"equation\" has {} terms, but the node has {} inputs",
                self.terms.len(),
                shapes.len()
            ));
        }
        let (expanded, ell_rank) = self.expand_ellipses(shapes)?;
        let labels = label_sizes(&expanded, shapes)?;
        let out = self.output_dims(&expanded, &labels, ell_rank)?;
        let mut order = out.clone();
        order.extend(labels.iter().map(|(d, _)| *d).filter(|d| !out.contains(d)));
        if order.len() > MAX_RANK {
            return Err(format!("the equation has {} distinct dims, at most {MAX_RANK} are supported", order.len()));
        }
        let size_of = |d: &Dim| labels.iter().find(|(l, _)| l == d).map_or(1, |(_, s)| *s);
        let dims: Vec<usize> = order.iter().map(size_of).collect();
        let mut strides = Vec::new();
        for (exp, shape) in expanded.iter().zip(shapes) {
            let contiguous = crate::ir::shape::contiguous_strides(shape);
            let mut s = vec![0i64; order.len()];
            for ((d, &size), &st) in exp.iter().zip(shape.iter()).zip(&contiguous) {
                if size == 1 && size_of(d) != 1 {
                    continue; // broadcast
                }
                if let Some(pos) = order.iter().position(|o| o == d) {
                    s[pos] += st as i64;
                }
            }
            strides.push(s);
        }
        Ok(Plan { dims, strides, out_rank: out.len() })
    }

    /// Each term with its `...` expanded to its broadcast dims
    /// (right-aligned), and the number of broadcast dims.
    fn expand_ellipses(&self, shapes: &[&[usize]]) -> Result<(Vec<Vec<Dim>>, usize), String> {
        let mut ell_rank = 0;
        for (k, (term, shape)) in self.terms.iter().zip(shapes).enumerate() {
            let letters = term.iter().filter(|l| **l != Label::Ellipsis).count();
            let has_ell = term.contains(&Label::Ellipsis);
            if shape.len() < letters || (!has_ell && shape.len() != letters) {
                return Err(format!("input {k} has rank {}, but its term has {letters} letters", shape.len()));
            }
            ell_rank = ell_rank.max(shape.len() - letters);
        }
        let mut expanded: Vec<Vec<Dim>> = Vec::new();
        for (term, shape) in self.terms.iter().zip(shapes) {
            // The `...` label itself is one of `term.len()`; checked above to fit.
            let e = if term.contains(&Label::Ellipsis) { shape.len() + 1 - term.len() } else { 0 };
            let mut dims = Vec::new();
            for l in term {
                match l {
                    Label::Letter(c) => dims.push(Dim::Letter(*c)),
                    Label::Ellipsis => dims.extend((0..e).map(|j| Dim::Broadcast(ell_rank - e + j))),
                }
            }
            expanded.push(dims);
        }
        Ok((expanded, ell_rank))
    }

    /// The output's dims: as the equation says, or implicitly the
    /// broadcast dims then the letters used once, sorted.
    fn output_dims(&self, expanded: &[Vec<Dim>], labels: &[(Dim, usize)], ell_rank: usize) -> Result<Vec<Dim>, String> {
        let Some(out) = &self.output else {
            let mut v: Vec<Dim> = (0..ell_rank).map(Dim::Broadcast).collect();
            let mut once: Vec<Dim> = labels
                .iter()
                .map(|(d, _)| *d)
                .filter(|d| matches!(d, Dim::Letter(_)))
                .filter(|d| expanded.iter().flatten().filter(|e| *e == d).count() == 1)
                .collect();
            once.sort();
            v.extend(once);
            return Ok(v);
        };
        let mut v = Vec::new();
        for l in out {
            match l {
                Label::Letter(c) => {
                    if !labels.iter().any(|(d, _)| *d == Dim::Letter(*c)) {
                        return Err(format!("output letter {:?} appears in no input", *c as char));
                    }
                    v.push(Dim::Letter(*c));
                }
                Label::Ellipsis => v.extend((0..ell_rank).map(Dim::Broadcast)),
            }
        }
        Ok(v)
    }

    fn shapes<'a>(cx: &'a InferCx) -> Result<Vec<&'a [usize]>, String> {
        (0..cx.inputs.len()).map(|i| cx.input(i).map(|x| x.shape)).collect()
    }
}

impl Operator for Einsum {
    fn name(&self) -> &'static str {
        "Einsum"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !matches!(compute_type(x.dtype), DType::F32 | DType::F64) {
            return Err(format!("input 0 is {}, only float types are supported", x.dtype));
        }
        for i in 1..cx.inputs.len() {
            if cx.input(i)?.dtype != x.dtype {
                return Err(format!("input {i} is {}, expected {} like input 0", cx.input(i)?.dtype, x.dtype));
            }
        }
        if cx.inputs.len() > EINSUM_MAX_INPUTS {
            return Err(format!("{} operands, at most {EINSUM_MAX_INPUTS} are supported", cx.inputs.len()));
        }
        let p = self.plan(&Self::shapes(cx)?)?;
        Ok(vec![Inferred::new(x.dtype, p.dims[..p.out_rank].to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let n = cx.input_count();
        let mut shapes = Vec::new();
        for i in 0..n {
            shapes.push(cx.input_type(i)?.1);
        }
        let dtype = cx.input_type(0)?.0;
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        let plan = self.plan(&refs)?;
        let mut p = EinsumParams {
            inputs: n as i64,
            rank: plan.dims.len() as i64,
            out_rank: plan.out_rank as i64,
            ..Default::default()
        };
        for (d, &size) in plan.dims.iter().enumerate() {
            p.dims[d] = size as i64;
        }
        for (k, s) in plan.strides.iter().enumerate() {
            p.strides[k][..s.len()].copy_from_slice(s);
        }
        if cx.portable() {
            return linalg_loops::einsum(cx, dtype, &p);
        }
        let params = cx.params(&p)?;
        let mut operand = |i| if i < n { cx.input_ptr(i).map(Ptr) } else { Ok(Ptr(cx.iconst(0))) };
        let (a, b, c) = (operand(0)?, operand(1)?, operand(2)?);
        let y = Ptr(cx.output_ptr(0)?);
        let kernel = kernels::by_dtype(kernels::onnxc_einsum_f32, kernels::onnxc_einsum_f64, dtype);
        cx.call_checked(kernel, (params, a, b, c, y))
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn einsum(eq: &str) -> Einsum {
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq, None),
        };
        Einsum {
            terms: lhs.split(',').map(|t| parse_term(t).unwrap()).collect(),
            output: rhs.map(|r| parse_term(r).unwrap()),
        }
    }

    #[test]
    fn implicit_output_sorts_single_letters() {
        // "ba,ca" -> "bc"; a is summed.
        let p = einsum("ba,ca").plan(&[&[2, 3], &[4, 3]]).unwrap();
        assert_eq!((p.dims.as_slice(), p.out_rank), (&[2, 4, 3][..], 2));
        assert_eq!(p.strides, vec![vec![3, 0, 1], vec![0, 3, 1]]);
    }

    #[test]
    fn diagonal_and_ellipsis_broadcast() {
        // "...ii->...i": batch [5, 1] against nothing; the diagonal adds strides.
        let p = einsum("...ii->...i").plan(&[&[5, 2, 3, 3]]).unwrap();
        assert_eq!(p.dims, vec![5, 2, 3]);
        assert_eq!(p.strides, vec![vec![18, 9, 4]]);
        // "...ij,...jk" with batch dims [2, 1] and [3]: broadcast to [2, 3].
        let p = einsum("...ij,...jk").plan(&[&[2, 1, 4, 5], &[3, 5, 6]]).unwrap();
        assert_eq!(p.dims, vec![2, 3, 4, 6, 5]);
        assert_eq!(p.strides, vec![vec![20, 0, 5, 0, 1], vec![0, 30, 0, 1, 6]]);
        assert!(einsum("ij,jk").plan(&[&[2, 3], &[4, 5]]).is_err());
        assert!(einsum("ij->k").plan(&[&[2, 3]]).is_err());
    }
}
