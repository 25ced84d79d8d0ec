use super::*;

fn s(name: &str) -> DimExpr {
    DimExpr::symbol(name)
}

fn c(v: i64) -> DimExpr {
    DimExpr::constant(v)
}

fn add(a: &DimExpr, b: &DimExpr) -> DimExpr {
    a.checked_add(b).expect("no overflow")
}

fn mul(a: &DimExpr, b: &DimExpr) -> DimExpr {
    a.checked_mul(b).expect("no overflow")
}

fn none() -> SymbolFacts {
    SymbolFacts::default()
}

fn bound(name: &str, min: i64, max: Option<i64>) -> SymbolFacts {
    let mut f = SymbolFacts::default();
    f.declare(name, SymbolFact { min, max, multiple_of: 1 });
    f
}

fn at(pairs: &[(&str, i64)]) -> HashMap<String, i64> {
    pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

#[test]
fn equal_polynomials_compare_equal() {
    let (n, m) = (s("n"), s("m"));
    assert_eq!(add(&mul(&c(2), &n), &c(1)), add(&c(1), &add(&n, &n)));
    assert_eq!(mul(&n, &m), mul(&m, &n));
    // (n+1)*(n-1) = n*n - 1
    let lhs = mul(&add(&n, &c(1)), &n.checked_sub(&c(1)).unwrap());
    assert_eq!(lhs, mul(&n, &n).checked_sub(&c(1)).unwrap());
    assert_eq!(n.checked_sub(&n).unwrap(), c(0));
    assert_eq!(c(0).as_const(), Some(0));
    assert_eq!(add(&n, &c(0)).as_const(), None);
    let a = n.minimum(&m, &none());
    assert_eq!(a, m.minimum(&n, &none()), "min's operands are sorted");
    assert_eq!(a.minimum(&n, &none()), a, "min of what it holds already");
}

#[test]
fn floor_division_pulls_out_what_divides() {
    let n = s("n");
    let f = none();
    // (4n+3)/2 = 2n+1
    assert_eq!(add(&mul(&c(4), &n), &c(3)).div_floor(2, &f), Some(add(&mul(&c(2), &n), &c(1))));
    assert_eq!(c(-7).div_floor(2, &f), Some(c(-4)), "floor, not truncation");
    assert_eq!(mul(&c(6), &n).div_floor(3, &f), Some(mul(&c(2), &n)));
    // (n/2)/3 = n/6
    let nested = n.div_floor(2, &f).unwrap().div_floor(3, &f).unwrap();
    assert_eq!(nested, n.div_floor(6, &f).unwrap());
    assert_eq!(n.div_floor(0, &f), None);
    assert_eq!(n.div_floor(-2, &f), None);
    assert_eq!(n.div_floor(1, &f), Some(n.clone()));
}

#[test]
fn facts_simplify_division_min_and_max() {
    let n = s("n");
    let small = bound("n", 1, Some(3));
    assert_eq!(n.div_floor(4, &small), Some(c(0)), "n in [1,3] over 4 is 0");
    assert_eq!(n.div_floor(4, &none()).unwrap().to_string(), "n/4");
    assert_eq!(n.minimum(&c(8), &small), n);
    assert_eq!(n.maximum(&c(8), &small), c(8));
    assert_eq!(n.maximum(&c(1), &none()), n, "every symbol is at least 1");
    assert_eq!(n.minimum(&c(8), &none()).to_string(), "min(8,n)");
    assert_eq!(mul(&c(2), &n).maximum(&n, &none()), mul(&c(2), &n));
    assert_eq!(mul(&n, &n).maximum(&n, &none()).to_string(), "max(n,n*n)", "past interval arithmetic");
    let mut eights = SymbolFacts::default();
    eights.declare("n", SymbolFact { min: 8, max: None, multiple_of: 8 });
    assert_eq!(n.div_ceil(4, &eights), n.div_floor(4, &eights));
    assert_eq!(n.div_ceil(4, &none()).unwrap().to_string(), "(n+3)/4");
}

#[test]
fn evaluation_matches_the_arithmetic() {
    let (h, w) = (s("h"), s("w"));
    let f = none();
    // A convolution's output size: (h + 2 - 3)/2 + 1, and a min.
    let conv = add(&add(&h, &c(-1)).div_floor(2, &f).unwrap(), &c(1));
    let e = add(&mul(&conv, &w), &w.minimum(&c(5), &f));
    for (hv, wv) in [(1i64, 1i64), (2, 7), (9, 4), (224, 224)] {
        let want = ((hv - 1).div_euclid(2) + 1) * wv + wv.min(5);
        assert_eq!(e.eval(&at(&[("h", hv), ("w", wv)])), Some(want), "h={hv} w={wv}");
    }
    assert_eq!(e.eval(&at(&[("h", 3)])), None, "w unbound");
    assert_eq!(e.symbols(), vec!["h".to_string(), "w".to_string()]);
    let ceil = h.div_ceil(3, &f).unwrap();
    for hv in 1i64..10 {
        assert_eq!(ceil.eval(&at(&[("h", hv)])), Some((hv + 2) / 3));
    }
}

#[test]
fn overflow_is_none_never_a_panic() {
    let n = s("n");
    let big = c(i64::MAX);
    assert_eq!(big.checked_add(&c(1)), None);
    assert_eq!(mul(&n, &big).checked_scale(2), None);
    assert_eq!(c(i64::MIN).checked_neg(), None);
    assert_eq!(mul(&n, &big).eval(&at(&[("n", 2)])), None);
    assert_eq!(n.div_ceil(i64::MIN, &none()), None);
    assert_eq!(DimExpr::from(usize::MAX).checked_add(&c(1)), None);
    let huge = bound("n", 1, Some(i64::MAX));
    assert_eq!(mul(&n, &n).div_floor(2, &huge).map(|e| e.symbols()), Some(vec!["n".to_string()]));
    assert_eq!(n.div_floor(i64::MAX, &huge), Some(n.div_floor(i64::MAX, &none()).unwrap()));
}

#[test]
fn exact_division_by_a_monomial() {
    let (b, sq) = (s("b"), s("s"));
    let total = mul(&mul(&b, &sq), &c(768));
    assert_eq!(total.div_exact(&mul(&b, &c(64))), Some(mul(&sq, &c(12))));
    assert_eq!(total.div_exact(&c(768)), Some(mul(&b, &sq)));
    assert_eq!(total.div_exact(&s("h")), None);
    assert_eq!(total.div_exact(&c(5)), None);
    assert_eq!(total.div_exact(&c(0)), None);
    assert_eq!(total.div_exact(&add(&b, &c(1))), None, "a sum is no monomial");
}

#[test]
fn display_reads_as_arithmetic() {
    let (n, m) = (s("seq"), s("m"));
    let f = none();
    assert_eq!(add(&mul(&c(2), &n), &c(1)).to_string(), "2*seq+1");
    assert_eq!(c(-3).to_string(), "-3");
    assert_eq!(c(0).to_string(), "0");
    assert_eq!(add(&n.checked_neg().unwrap(), &c(4)).to_string(), "-seq+4");
    assert_eq!(add(&mul(&n, &m), &mul(&c(-2), &n)).to_string(), "m*seq-2*seq");
    let half = add(&n, &c(-1)).div_floor(2, &f).unwrap();
    assert_eq!(add(&half, &c(1)).to_string(), "(seq+1)/2");
    assert_eq!(mul(&c(3), &n.div_floor(2, &f).unwrap()).to_string(), "3*(seq/2)");
    assert_eq!(n.maximum(&m, &f).to_string(), "max(m,seq)");
}

#[test]
fn known_equal_decides_by_the_facts() {
    let n = s("n");
    assert_eq!(n.known_equal(&n, &none()), Some(true));
    assert_eq!(n.known_equal(&c(-1), &none()), Some(false));
    assert_eq!(n.known_equal(&c(4), &none()), None);
    assert_eq!(n.known_equal(&c(4), &bound("n", 5, None)), Some(false));
}

#[test]
fn a_multiple_symbol_keeps_its_factor_through_ceil_divisions() {
    let mut f = SymbolFacts::default();
    f.declare("h", SymbolFact { min: 1, max: Some(640), multiple_of: 32 });
    assert_eq!(f.get("h").min, 32);
    let h = DimExpr::symbol_with_facts("h", &f).unwrap();
    assert_eq!(h.eval(&at(&[("h", 320)])), Some(320));
    // Four stride-2 ceil divisions, then one more and doubled: the two agree.
    let mut four = h.clone();
    for _ in 0..4 {
        four = four.div_ceil(2, &f).unwrap();
    }
    let doubled = four.div_ceil(2, &f).unwrap().checked_scale(2).unwrap();
    assert_eq!(four, doubled);
    // Without the fact they differ (an odd size makes them differ).
    let plain = s("h").div_ceil(16, &none()).unwrap();
    assert_ne!(plain, plain.div_ceil(2, &none()).unwrap().checked_scale(2).unwrap());
}

#[test]
fn a_max_absorbs_a_min_of_something_no_larger() {
    let (seq, n) = (s("seq"), s("n"));
    let clamp = c(128).minimum(&seq, &none());
    assert_eq!(clamp.to_string(), "min(128,seq)", "undecided without a bound");
    assert_eq!(seq.maximum(&clamp, &none()), seq, "max(seq, min(128, seq)) is seq");
    assert_eq!(clamp.maximum(&seq, &none()), seq, "either order");
    let grown = add(&seq, &c(1));
    assert_eq!(grown.maximum(&clamp, &none()), grown, "min(128, seq) <= seq < seq+1");
    let wide = c(128).maximum(&seq, &none());
    assert_eq!(seq.minimum(&wide, &none()), seq, "min(seq, max(128, seq)) is seq");
    assert_eq!(n.maximum(&clamp, &none()).to_string(), "max(n,min(128,seq))", "no operand below n is known");
}
