//! Subcommand implementations. Library stages return typed errors; here
//! they become messages and exit codes.

pub mod compile;
pub mod info;
pub mod object_runner;
pub mod profile;
pub mod run;
pub mod test;

use crate::{LimitArgs, ShapeArgs};
use onnxc::infer::{Bindings, CompositeShape};
use onnxc::ir::dim_expr::SymbolFact;
use onnxc::limits::Limits;

/// Parses `--shape NAME=AxB` and `--dim SYM=N` (or `SYM=LO..HI`, `SYM=..HI`,
/// `SYM=LO..HI%K`).
pub fn bindings(args: &ShapeArgs) -> Result<Bindings, String> {
    let mut b = Bindings::default();
    for s in &args.shapes {
        let (name, dims) = s.rsplit_once('=').ok_or_else(|| format!("--shape {s}: expected NAME=AxBxC"))?;
        let shape = |dims: &str| -> Result<Vec<usize>, String> {
            if dims.is_empty() {
                return Ok(Vec::new());
            }
            dims.split('x')
                .map(|d| d.parse::<usize>().map_err(|_| format!("--shape {s}: \"{d}\" is not a size")))
                .collect()
        };
        // A sequence input: its elements' shapes, comma-separated ("[]":
        // empty); an optional input: "none" when it holds nothing.
        let composite = match dims {
            "none" => Some(CompositeShape::Absent),
            "[]" => Some(CompositeShape::Sequence(Vec::new())),
            d if d.contains(',') => Some(CompositeShape::Sequence(d.split(',').map(shape).collect::<Result<_, _>>()?)),
            _ => None,
        };
        match composite {
            Some(c) => b.composites.insert(name.to_string(), c).map(|_| ()),
            None => b.shapes.insert(name.to_string(), shape(dims)?).map(|_| ()),
        };
    }
    for s in &args.dims {
        let (name, given) = s.rsplit_once('=').ok_or_else(|| format!("--dim {s}: expected SYM=N or SYM=LO..HI"))?;
        match given.split_once("..") {
            None => {
                b.dims.insert(name.to_string(), dim_size(s, given)?);
            }
            Some((lo, hi)) => {
                b.facts.declare(name, dim_range(s, lo, hi)?);
            }
        }
    }
    Ok(b)
}

fn dim_size(arg: &str, n: &str) -> Result<usize, String> {
    n.parse::<usize>().map_err(|_| format!("--dim {arg}: \"{n}\" is not a size"))
}

/// `LO..HI` (`LO` empty: 1) as the symbol's bounds, `LO..HI%K` a
/// multiple of `K` in them.
fn dim_range(arg: &str, lo: &str, hi: &str) -> Result<SymbolFact, String> {
    let (hi, multiple_of) = match hi.split_once('%') {
        None => (hi, 1),
        Some((hi, k)) => (hi, dim_size(arg, k)?.try_into().map_err(|_| format!("--dim {arg}: {k} is too large"))?),
    };
    if multiple_of < 1 {
        return Err(format!("--dim {arg}: a divisor must be at least 1"));
    }
    let bound = |n: &str| -> Result<i64, String> {
        let n = dim_size(arg, n)?;
        i64::try_from(n).map_err(|_| format!("--dim {arg}: {n} is too large"))
    };
    let min = if lo.is_empty() { 1 } else { bound(lo)? };
    let max = bound(hi)?;
    if min < 1 || max < min || ((min - 1) / multiple_of + 1).checked_mul(multiple_of).is_none_or(|m| m > max) {
        return Err(format!("--dim {arg}: a range of sizes needs 1 <= LO <= HI, with a multiple of K in it"));
    }
    Ok(SymbolFact { min, max: Some(max), multiple_of })
}

/// The default limits with the `--max-*` overrides applied.
pub fn limits(args: &LimitArgs) -> Result<Limits, String> {
    let mut l = Limits::default();
    let size = |v: u64, flag: &str| usize::try_from(v).map_err(|_| format!("{flag} {v}: too large for this machine"));
    if let Some(v) = args.max_file_bytes {
        l.max_file_bytes = v;
    }
    if let Some(v) = args.max_tensor_bytes {
        l.max_tensor_bytes = v;
    }
    if let Some(v) = args.max_external_bytes {
        l.max_external_bytes = v;
    }
    if let Some(v) = args.max_fold_bytes {
        l.max_fold_bytes = size(v, "--max-fold-bytes")?;
    }
    if let Some(v) = args.max_fold_total {
        l.max_fold_total_bytes = size(v, "--max-fold-total")?;
    }
    if let Some(v) = args.max_function_depth {
        l.max_function_depth = v;
    }
    if let Some(v) = args.max_subgraph_depth {
        l.max_subgraph_depth = v;
    }
    if let Some(v) = args.max_nodes {
        l.max_nodes = v;
    }
    if let Some(v) = args.max_compile_seconds {
        l.max_compile_time = std::time::Duration::from_secs(v);
    }
    Ok(l)
}
