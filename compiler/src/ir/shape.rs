//! Shapes. A dim is a known size, a symbolic one (an expression over
//! named symbols, [`DimExpr`]), or a data-dependent extent. Symbols are
//! bound to sizes before inference (`--dim`, `--shape`, or the inputs given
//! to `run`/`test`) unless inference is symbolic (`onnxc info`), which
//! keeps them and infers expressions. Data-dependent dims (NonZero's count,
//! TopK with a run-time K) stay unknown until the generated code computes
//! them; their values get memory from the context's allocator.

use super::dim_expr::{DimExpr, SymbolFacts};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    Known(usize),
    /// Never a constant: a constant expression is `Known`
    /// ([`Dim::from_expr`]).
    Sym(DimExpr),
    /// Computed at run time from tensor data; `Some(n)` when it can never
    /// exceed `n`.
    Dynamic(Option<usize>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: super::DType,
    pub shape: Vec<Dim>,
}

impl Dim {
    /// The dim as an expression; `None` for a data-dependent one.
    pub fn expr(&self) -> Option<DimExpr> {
        match self {
            Dim::Known(n) => Some(DimExpr::from(*n)),
            Dim::Sym(e) => Some(e.clone()),
            Dim::Dynamic(_) => None,
        }
    }

    /// `Known` for a constant (`None` for a negative one), else `Sym`.
    pub fn from_expr(e: DimExpr) -> Option<Dim> {
        match e.as_const() {
            Some(_) => e.as_size().map(Dim::Known),
            None => Some(Dim::Sym(e)),
        }
    }

    /// The symbol's name, for a dim that is one symbol (as graph inputs
    /// declare them).
    pub fn symbol(&self) -> Option<&str> {
        match self {
            Dim::Sym(e) => e.as_symbol(),
            Dim::Known(_) | Dim::Dynamic(_) => None,
        }
    }
}

impl TensorType {
    pub fn known(dtype: super::DType, shape: &[usize]) -> TensorType {
        TensorType { dtype, shape: shape.iter().map(|&d| Dim::Known(d)).collect() }
    }

    /// The shape as sizes, when every dim is known.
    pub fn known_shape(&self) -> Option<Vec<usize>> {
        self.shape
            .iter()
            .map(|d| match d {
                Dim::Known(n) => Some(*n),
                Dim::Sym(_) | Dim::Dynamic(_) => None,
            })
            .collect()
    }

    /// True when some dim is only known at run time.
    pub fn is_dynamic(&self) -> bool {
        self.shape.iter().any(|d| matches!(d, Dim::Dynamic(_)))
    }

    /// The most bytes a value of this type can take, when every dim is
    /// known or bounded; `None` when unbounded or past `usize`.
    pub fn max_bytes(&self) -> Option<usize> {
        let count = self.shape.iter().try_fold(1usize, |acc, d| match d {
            Dim::Known(n) | Dim::Dynamic(Some(n)) => acc.checked_mul(*n),
            Dim::Sym(_) | Dim::Dynamic(None) => None,
        })?;
        self.dtype.bytes_for(count)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Sym(e) => write!(f, "{e}"),
            Dim::Dynamic(Some(n)) => write!(f, "?<={n}"),
            Dim::Dynamic(None) => f.write_str("?"),
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// Number of elements of a concrete shape, `None` on overflow.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Row-major element strides of a concrete shape.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// Numpy-style broadcast of two shapes, `None` when they are incompatible.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out.push(match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        });
    }
    Some(out)
}

/// [`broadcast`] over dim expressions. Where one dim is symbolic and the
/// other a constant other than 1, the result is the constant (the symbol
/// is 1 or that constant); two different symbolic dims give their max
/// (one is 1 or both are equal). `None` when constants disagree.
pub fn broadcast_dims(a: &[DimExpr], b: &[DimExpr], facts: &SymbolFacts) -> Option<Vec<DimExpr>> {
    let rank = a.len().max(b.len());
    let one = DimExpr::constant(1);
    let at = |s: &[DimExpr], i: usize| if i + s.len() >= rank { s[i + s.len() - rank].clone() } else { one.clone() };
    (0..rank)
        .map(|i| {
            let (da, db) = (at(a, i), at(b, i));
            match (da.as_const(), db.as_const()) {
                _ if da == db => Some(da),
                (Some(1), _) => Some(db),
                (_, Some(1)) => Some(da),
                (Some(_), Some(_)) => None,
                (Some(_), None) => Some(da),
                (None, Some(_)) => Some(db),
                (None, None) => Some(da.maximum(&db, facts)),
            }
        })
        .collect()
}

/// The number of elements of dims given as expressions; `None` on overflow.
pub fn dims_product(dims: &[DimExpr]) -> Option<DimExpr> {
    dims.iter().try_fold(DimExpr::constant(1), |acc, d| acc.checked_mul(d))
}

/// Dims for messages, as a `Vec<usize>` prints: `[2, seq, 3]`.
pub fn dims_text(dims: &[DimExpr]) -> String {
    format!("[{}]", dims.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
}

/// Element strides that read `shape` as if broadcast to `target` (stride 0
/// along broadcast dims). `shape` must broadcast to `target`.
pub fn broadcast_strides(shape: &[usize], target: &[usize]) -> Vec<i64> {
    let own = contiguous_strides(shape);
    let lead = target.len() - shape.len();
    (0..target.len()).map(|i| if i < lead || shape[i - lead] == 1 { 0 } else { own[i - lead] as i64 }).collect()
}

/// Normalises a possibly negative axis against `rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[2, 1, 4], &[3, 1]), Some(vec![2, 3, 4]));
        assert_eq!(broadcast(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast(&[2], &[3]), None);
        assert_eq!(broadcast_strides(&[3, 1], &[2, 3, 4]), vec![0, 1, 0]);
    }

    #[test]
    fn negative_axes_wrap_once() {
        assert_eq!(normalize_axis(-1, 3), Some(2));
        assert_eq!(normalize_axis(3, 3), None);
        assert_eq!(normalize_axis(-4, 3), None);
    }
}
