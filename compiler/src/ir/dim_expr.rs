//! Symbolic dims: a dim as an integer expression over named symbols.
//!
//! An expression is kept in one canonical form, so that two expressions
//! equal as polynomials compare equal (`seq*2+1 == 1+2*seq`): a sum of
//! monomials with nonzero integer coefficients (a `BTreeMap` from monomial
//! to coefficient, the constant under the empty monomial), each monomial a
//! sorted product of atoms. An atom is a symbol, or what a polynomial
//! cannot say: a floor division by a positive constant, a min or a max.
//! Ceil division is floor division of `e + d - 1`, so it has no atom of
//! its own.
//!
//! Constructors simplify as they build, with [`SymbolFacts`]: every
//! symbol is at least 1 (a dim of 0 makes the tensor empty, which the code
//! for the nonempty case handles as a run-time shape anyway), and may have
//! a declared upper bound and a known divisor. Floor division pulls out
//! the terms whose coefficients the divisor divides (`(4*n+3)/2` is
//! `2*n+1`), nests (`(e/a)/b` is `e/(a*b)`), and vanishes when the rest is
//! known to lie in `[0, d)`; ceil division equals floor division when the
//! facts say the dividend is a multiple of the divisor; min and max pick
//! their operand when interval arithmetic over the facts orders the two.
//! Interval arithmetic is not complete: each occurrence of a symbol
//! ranges on its own, so it bounds `n*n - n` by nothing and `max(n*n, n)`
//! stays an atom — correct, only less simple.
//!
//! All arithmetic is checked: an operation that would overflow `i64`
//! returns `None`, and the callers report the dim as too large. Nothing
//! here panics on any input.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// A dim: an integer polynomial over [`Atom`]s, in canonical form.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DimExpr {
    /// Monomial → coefficient; never a zero coefficient. The constant term
    /// is under the empty monomial.
    terms: BTreeMap<Monomial, i64>,
}

/// A sorted product of atoms (repeated for powers); empty for the constant.
type Monomial = Vec<Atom>;

/// What a monomial multiplies: a symbol or an expression a polynomial
/// cannot hold.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom {
    Symbol(String),
    /// `floor(e / d)`, `d >= 2`.
    FloorDiv(Box<DimExpr>, i64),
    /// The least of at least two operands, sorted, none itself a `Min`.
    Min(Vec<DimExpr>),
    /// The greatest of at least two operands, sorted, none itself a `Max`.
    Max(Vec<DimExpr>),
}

/// What is known of one symbol, besides being at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolFact {
    pub min: i64,
    pub max: Option<i64>,
    /// The symbol is a multiple of this (1: nothing known).
    pub multiple_of: i64,
}

impl Default for SymbolFact {
    fn default() -> SymbolFact {
        SymbolFact { min: 1, max: None, multiple_of: 1 }
    }
}

/// The facts about every symbol that has some; any other symbol is at
/// least 1 and nothing more is known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolFacts {
    facts: BTreeMap<String, SymbolFact>,
}

impl SymbolFacts {
    /// No facts: every symbol is at least 1.
    pub fn none() -> &'static SymbolFacts {
        static NONE: SymbolFacts = SymbolFacts { facts: BTreeMap::new() };
        &NONE
    }

    /// Declares `name`'s range (its lower bound raised to 1, then to a
    /// multiple of the divisor) and divisor.
    pub fn declare(&mut self, name: &str, fact: SymbolFact) {
        let multiple_of = fact.multiple_of.max(1);
        let min = fact.min.max(1);
        let min = min.checked_add(multiple_of - 1).map_or(min, |m| m / multiple_of * multiple_of);
        let fact = SymbolFact { min, multiple_of, ..fact };
        self.facts.insert(name.to_string(), fact);
    }

    pub fn get(&self, name: &str) -> SymbolFact {
        self.facts.get(name).copied().unwrap_or_default()
    }

    pub fn is_declared(&self, name: &str) -> bool {
        self.facts.contains_key(name)
    }

    /// The symbols with facts, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, SymbolFact)> {
        self.facts.iter().map(|(k, &f)| (k.as_str(), f))
    }
}

/// A graph compiled once for every size its symbols' `--dim` ranges
/// allow (`infer::dynamic`): the facts, and the dims of each value that
/// has a symbolic one, as expressions. Those values' types hold each
/// dim's upper bound, so the memory plan sizes them for the largest case.
#[derive(Clone, Debug, Default)]
pub struct SymbolicShapes {
    pub facts: SymbolFacts,
    pub dims: HashMap<super::ValueId, Vec<DimExpr>>,
}

/// A closed range of integers, either end possibly unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Interval {
    lo: Option<i64>,
    hi: Option<i64>,
}

impl Interval {
    const ALL: Interval = Interval { lo: None, hi: None };

    fn point(v: i64) -> Interval {
        Interval { lo: Some(v), hi: Some(v) }
    }

    fn add(self, o: Interval) -> Interval {
        let sum = |a: Option<i64>, b: Option<i64>| a?.checked_add(b?);
        Interval { lo: sum(self.lo, o.lo), hi: sum(self.hi, o.hi) }
    }

    /// The product of two intervals, over the ends extended with the
    /// infinities; a product past `i64` makes the result unbounded.
    fn mul(self, o: Interval) -> Interval {
        let ends = |i: Interval| [i.lo.map_or(End::NegInf, End::At), i.hi.map_or(End::PosInf, End::At)];
        let mut products = Vec::with_capacity(4);
        for a in ends(self) {
            for b in ends(o) {
                let Some(p) = a.mul(b) else { return Interval::ALL };
                products.push(p);
            }
        }
        let lo = products.iter().min().and_then(|e| e.finite());
        let hi = products.iter().max().and_then(|e| e.finite());
        Interval { lo, hi }
    }

    fn scale(self, c: i64) -> Interval {
        self.mul(Interval::point(c))
    }
}

/// An end of an [`Interval`]: a number or an infinity (variants in
/// increasing order, so the derived `Ord` is the numbers' order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum End {
    NegInf,
    At(i64),
    PosInf,
}

impl End {
    fn sign(self) -> i64 {
        match self {
            End::NegInf => -1,
            End::At(v) => v.signum(),
            End::PosInf => 1,
        }
    }

    /// `None` on overflow. An infinity times 0 is 0: the finite end of an
    /// interval is reached, the infinite one only approached.
    fn mul(self, o: End) -> Option<End> {
        match (self, o) {
            (End::At(a), End::At(b)) => a.checked_mul(b).map(End::At),
            _ => Some(match self.sign() * o.sign() {
                0 => End::At(0),
                1 => End::PosInf,
                _ => End::NegInf,
            }),
        }
    }

    fn finite(self) -> Option<i64> {
        match self {
            End::At(v) => Some(v),
            End::NegInf | End::PosInf => None,
        }
    }
}

impl DimExpr {
    pub fn constant(v: i64) -> DimExpr {
        let mut terms = BTreeMap::new();
        if v != 0 {
            terms.insert(Vec::new(), v);
        }
        DimExpr { terms }
    }

    pub fn symbol(name: &str) -> DimExpr {
        DimExpr::atom(Atom::Symbol(name.to_string()))
    }

    fn atom(a: Atom) -> DimExpr {
        DimExpr { terms: BTreeMap::from([(vec![a], 1)]) }
    }

    /// The value, when the expression is a constant.
    pub fn as_const(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The name, when the expression is one symbol.
    pub fn as_symbol(&self) -> Option<&str> {
        match self.single_atom()? {
            Atom::Symbol(s) => Some(s),
            _ => None,
        }
    }

    /// The constant as a size, when it is one and not negative.
    pub fn as_size(&self) -> Option<usize> {
        self.as_const().and_then(|v| usize::try_from(v).ok())
    }

    pub fn checked_add(&self, o: &DimExpr) -> Option<DimExpr> {
        let mut terms = self.terms.clone();
        for (m, &c) in &o.terms {
            let sum = terms.get(m).copied().unwrap_or(0).checked_add(c)?;
            if sum == 0 {
                terms.remove(m);
            } else {
                terms.insert(m.clone(), sum);
            }
        }
        Some(DimExpr { terms })
    }

    pub fn checked_neg(&self) -> Option<DimExpr> {
        self.checked_scale(-1)
    }

    pub fn checked_sub(&self, o: &DimExpr) -> Option<DimExpr> {
        self.checked_add(&o.checked_neg()?)
    }

    /// The product by a constant.
    pub fn checked_scale(&self, k: i64) -> Option<DimExpr> {
        if k == 0 {
            return Some(DimExpr::default());
        }
        let terms = self.terms.iter().map(|(m, &c)| Some((m.clone(), c.checked_mul(k)?))).collect::<Option<_>>()?;
        Some(DimExpr { terms })
    }

    pub fn checked_mul(&self, o: &DimExpr) -> Option<DimExpr> {
        let mut product = DimExpr::default();
        for (ma, &ca) in &self.terms {
            for (mb, &cb) in &o.terms {
                let mut m: Monomial = ma.iter().chain(mb).cloned().collect();
                m.sort();
                let term = DimExpr { terms: BTreeMap::from([(m, ca.checked_mul(cb)?)]) };
                product = product.checked_add(&term)?;
            }
        }
        Some(product)
    }

    /// `floor(self / d)` for `d >= 1` (`None` for `d < 1` or on overflow).
    pub fn div_floor(&self, d: i64, facts: &SymbolFacts) -> Option<DimExpr> {
        if d < 1 {
            return None;
        }
        if d == 1 {
            return Some(self.clone());
        }
        // self = d*quotient + rest, every coefficient of rest in [0, d).
        let (mut quotient, mut rest) = (DimExpr::default(), DimExpr::default());
        for (m, &c) in &self.terms {
            let single = |c: i64| DimExpr { terms: BTreeMap::from([(m.clone(), c)]) };
            quotient = quotient.checked_add(&single(c.div_euclid(d)))?;
            if c.rem_euclid(d) != 0 {
                rest = rest.checked_add(&single(c.rem_euclid(d)))?;
            }
        }
        let rest_range = rest.range(facts);
        let rest_over_d = if rest_range.lo.is_some_and(|l| l >= 0) && rest_range.hi.is_some_and(|h| h < d) {
            DimExpr::default()
        } else if let Some(v) = rest.as_const() {
            DimExpr::constant(v.div_euclid(d))
        } else if let Some((inner, e)) = rest.single_floor_div() {
            // floor(floor(x / e) / d) = floor(x / (e*d)).
            inner.div_floor(e.checked_mul(d)?, facts)?
        } else {
            DimExpr::atom(Atom::FloorDiv(Box::new(rest), d))
        };
        quotient.checked_add(&rest_over_d)
    }

    /// `ceil(self / d)` for `d >= 1`: `floor(self / d)` when the facts say
    /// `self` is a multiple of `d`, else `floor((self + d - 1) / d)`.
    pub fn div_ceil(&self, d: i64, facts: &SymbolFacts) -> Option<DimExpr> {
        if d >= 1 && self.known_divisor(facts).is_some_and(|k| k % d == 0) {
            return self.div_floor(d, facts);
        }
        self.checked_add(&DimExpr::constant(d.checked_sub(1)?))?.div_floor(d, facts)
    }

    /// `self / o` when it is exact as polynomials: `o` a single monomial
    /// whose atoms every term of `self` holds and whose coefficient
    /// divides theirs (`6*b*s / (2*s)` is `3*b`); `None` otherwise.
    pub fn div_exact(&self, o: &DimExpr) -> Option<DimExpr> {
        let [(divisor, &k)] = o.terms.iter().collect::<Vec<_>>()[..] else { return None };
        if k == 0 {
            return None;
        }
        let mut terms = BTreeMap::new();
        for (m, &c) in &self.terms {
            if c % k != 0 {
                return None;
            }
            let mut left = m.clone();
            for a in divisor {
                let at = left.iter().position(|x| x == a)?;
                left.remove(at);
            }
            terms.insert(left, c / k);
        }
        Some(DimExpr { terms })
    }

    /// Whether the facts show the value is never negative.
    pub fn is_nonnegative(&self, facts: &SymbolFacts) -> bool {
        self.range(facts).lo.is_some_and(|l| l >= 0)
    }

    /// Whether the two are equal for every value of the symbols the facts
    /// allow: `Some(true)` when they are the same expression, `Some(false)`
    /// when their difference's range excludes 0, `None` when undecided.
    pub fn known_equal(&self, o: &DimExpr, facts: &SymbolFacts) -> Option<bool> {
        let gap = self.checked_sub(o)?.range(facts);
        match gap {
            Interval { lo: Some(0), hi: Some(0) } => Some(true),
            _ if gap.lo.is_some_and(|l| l > 0) || gap.hi.is_some_and(|h| h < 0) => Some(false),
            _ => None,
        }
    }

    /// Symbol `name` as the facts shape it: `m*floor(name/m)` when it is
    /// known a multiple of `m > 1`, so that arithmetic over the atom
    /// `floor(name/m)` sees the factor (`(m*k+1)/2` is `(m/2)*k`) and
    /// two exact divisions of it compare equal.
    pub fn symbol_with_facts(name: &str, facts: &SymbolFacts) -> Option<DimExpr> {
        let m = facts.get(name).multiple_of;
        DimExpr::symbol(name).div_floor(m, facts)?.checked_scale(m)
    }

    pub fn minimum(&self, o: &DimExpr, facts: &SymbolFacts) -> DimExpr {
        self.extremum(o, facts, true)
    }

    pub fn maximum(&self, o: &DimExpr, facts: &SymbolFacts) -> DimExpr {
        self.extremum(o, facts, false)
    }

    /// The min (`least`) or max of two expressions: one of them when the
    /// facts order them, else a flattened, sorted `Min`/`Max` atom.
    fn extremum(&self, o: &DimExpr, facts: &SymbolFacts, least: bool) -> DimExpr {
        if let Some(gap) = o.checked_sub(self) {
            let r = gap.range(facts);
            let (self_le, self_ge) = (r.lo.is_some_and(|l| l >= 0), r.hi.is_some_and(|h| h <= 0));
            if self_le || self_ge {
                return if self_le == least { self.clone() } else { o.clone() };
            }
        }
        for (a, other) in [(self, o), (o, self)] {
            if a.absorbs(other, facts, least) {
                return a.clone();
            }
        }
        let operands = |e: &DimExpr| match e.single_atom() {
            Some(Atom::Min(v)) if least => v.clone(),
            Some(Atom::Max(v)) if !least => v.clone(),
            _ => vec![e.clone()],
        };
        let mut all = operands(self);
        all.extend(operands(o));
        all.sort();
        all.dedup();
        match all.len() {
            1 => all.remove(0),
            _ if least => DimExpr::atom(Atom::Min(all)),
            _ => DimExpr::atom(Atom::Max(all)),
        }
    }

    /// Absorption: `max(a, min(.., e, ..))` is `a` when the facts say
    /// `e <= a` (the min is at most `e`), and `min(a, max(.., e, ..))` is
    /// `a` when `e >= a`; so `max(seq, min(128, seq))`, a position table's
    /// clamp, is `seq` whatever seq's bounds.
    fn absorbs(&self, other: &DimExpr, facts: &SymbolFacts, least: bool) -> bool {
        let operands = match other.single_atom() {
            Some(Atom::Max(v)) if least => v,
            Some(Atom::Min(v)) if !least => v,
            _ => return false,
        };
        let beyond = |e: &DimExpr| if least { e.checked_sub(self) } else { self.checked_sub(e) };
        operands.iter().any(|e| beyond(e).is_some_and(|gap| gap.is_nonnegative(facts)))
    }

    /// The value with every symbol bound (`None`: a symbol unbound, or
    /// overflow).
    pub fn eval(&self, bindings: &HashMap<String, i64>) -> Option<i64> {
        self.terms.iter().try_fold(0i64, |sum, (m, &c)| {
            let product = m.iter().try_fold(c, |p, a| p.checked_mul(a.eval(bindings)?))?;
            sum.checked_add(product)
        })
    }

    /// The largest value the facts allow, when they bound it.
    pub fn upper_bound(&self, facts: &SymbolFacts) -> Option<i64> {
        self.range(facts).hi
    }

    /// The terms: each monomial's atoms (none for the constant) and its
    /// coefficient, for code that evaluates the expression at run time.
    pub fn terms(&self) -> impl Iterator<Item = (&[Atom], i64)> {
        self.terms.iter().map(|(m, &c)| (m.as_slice(), c))
    }

    /// The symbols the expression uses, sorted, each once.
    pub fn symbols(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_symbols(&mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect_symbols(&self, out: &mut Vec<String>) {
        for a in self.terms.keys().flatten() {
            match a {
                Atom::Symbol(s) => out.push(s.clone()),
                Atom::FloorDiv(e, _) => e.collect_symbols(out),
                Atom::Min(v) | Atom::Max(v) => v.iter().for_each(|e| e.collect_symbols(out)),
            }
        }
    }

    /// Where the value lies, by interval arithmetic over the facts.
    fn range(&self, facts: &SymbolFacts) -> Interval {
        self.terms.iter().fold(Interval::point(0), |sum, (m, &c)| {
            let product = m.iter().fold(Interval::point(1), |p, a| p.mul(a.range(facts)));
            sum.add(product.scale(c))
        })
    }

    /// A positive number the value is known to be a multiple of: the gcd
    /// over the terms of coefficient × the divisors the facts give.
    fn known_divisor(&self, facts: &SymbolFacts) -> Option<i64> {
        self.terms.iter().try_fold(0i64, |g, (m, &c)| {
            let divisor = m.iter().try_fold(c.checked_abs()?, |p, a| match a {
                Atom::Symbol(s) => p.checked_mul(facts.get(s).multiple_of),
                _ => Some(p),
            })?;
            Some(gcd(g, divisor))
        })
    }

    fn single_atom(&self) -> Option<&Atom> {
        match self.terms.iter().next() {
            Some((m, 1)) if self.terms.len() == 1 && m.len() == 1 => m.first(),
            _ => None,
        }
    }

    fn single_floor_div(&self) -> Option<(&DimExpr, i64)> {
        match self.single_atom()? {
            Atom::FloorDiv(e, d) => Some((e, *d)),
            _ => None,
        }
    }
}

impl Atom {
    fn eval(&self, bindings: &HashMap<String, i64>) -> Option<i64> {
        match self {
            Atom::Symbol(s) => bindings.get(s).copied(),
            Atom::FloorDiv(e, d) => Some(e.eval(bindings)?.div_euclid(*d)),
            Atom::Min(v) => v.iter().map(|e| e.eval(bindings)).collect::<Option<Vec<_>>>()?.into_iter().min(),
            Atom::Max(v) => v.iter().map(|e| e.eval(bindings)).collect::<Option<Vec<_>>>()?.into_iter().max(),
        }
    }

    fn range(&self, facts: &SymbolFacts) -> Interval {
        let ranges = |v: &[DimExpr]| v.iter().map(|e| e.range(facts)).collect::<Vec<_>>();
        match self {
            Atom::Symbol(s) => {
                let f = facts.get(s);
                Interval { lo: Some(f.min), hi: f.max }
            }
            Atom::FloorDiv(e, d) => {
                let r = e.range(facts);
                Interval { lo: r.lo.map(|l| l.div_euclid(*d)), hi: r.hi.map(|h| h.div_euclid(*d)) }
            }
            // The least is at least every operand's least (all bounded
            // below) and at most any operand's greatest; the greatest the
            // other way round.
            Atom::Min(v) => {
                let r = ranges(v);
                let lo = r.iter().map(|i| i.lo).collect::<Option<Vec<_>>>().and_then(|l| l.into_iter().min());
                Interval { lo, hi: r.iter().filter_map(|i| i.hi).min() }
            }
            Atom::Max(v) => {
                let r = ranges(v);
                let hi = r.iter().map(|i| i.hi).collect::<Option<Vec<_>>>().and_then(|h| h.into_iter().max());
                Interval { lo: r.iter().filter_map(|i| i.lo).max(), hi }
            }
        }
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    i64::try_from(a).unwrap_or(1)
}

impl From<usize> for DimExpr {
    /// A size past `i64` cannot be a dim of a tensor in memory; it becomes
    /// `i64::MAX`, which every later operation reports as overflow.
    fn from(n: usize) -> DimExpr {
        DimExpr::constant(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl fmt::Display for DimExpr {
    /// Terms in canonical order with the constant last: `2*seq+1`,
    /// `(h-1)/2+1`, `min(n,8)`, `-n+4`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        let constant = self.terms.get(&Vec::new()).copied();
        let variable = self.terms.iter().filter(|(m, _)| !m.is_empty());
        for (i, (m, &c)) in variable.enumerate() {
            match (i, c) {
                (0, -1) => f.write_str("-")?,
                (0, 1) => {}
                (_, 1) => f.write_str("+")?,
                (_, -1) => f.write_str("-")?,
                (0, _) => write!(f, "{c}*")?,
                (_, c) if c < 0 => write!(f, "{c}*")?,
                (_, c) => write!(f, "+{c}*")?,
            }
            let alone = m.len() == 1 && c == 1;
            for (k, a) in m.iter().enumerate() {
                if k > 0 {
                    f.write_str("*")?;
                }
                a.write(f, alone)?;
            }
        }
        match constant {
            Some(c) if c < 0 || self.terms.len() == 1 => write!(f, "{c}"),
            Some(c) => write!(f, "+{c}"),
            None => Ok(()),
        }
    }
}

impl Atom {
    /// A division is parenthesised inside a product (`2*(n/3)`), its
    /// dividend when it is a sum (`(h-1)/2`).
    fn write(&self, f: &mut fmt::Formatter<'_>, alone: bool) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, name: &str, v: &[DimExpr]| {
            let parts: Vec<String> = v.iter().map(ToString::to_string).collect();
            write!(f, "{name}({})", parts.join(","))
        };
        match self {
            Atom::Symbol(s) => f.write_str(s),
            Atom::FloorDiv(e, d) => {
                let dividend = if e.terms.len() > 1 || e.terms.values().any(|&c| c != 1) {
                    format!("({e})")
                } else {
                    e.to_string()
                };
                if alone {
                    write!(f, "{dividend}/{d}")
                } else {
                    write!(f, "({dividend}/{d})")
                }
            }
            Atom::Min(v) => list(f, "min", v),
            Atom::Max(v) => list(f, "max", v),
        }
    }
}

#[cfg(test)]
mod tests;
