//! The one rule by which the project's tests say that a computed float
//! agrees with the expected one: `onnxc test` (and so the conformance
//! ratchet), the kernels' unit tests and the fuzz targets all call
//! [`close`].
//!
//! The special values are judged before the formula, because the formula
//! cannot judge them: when the expected value is an infinity the bound
//! `atol + rtol·|want|` is infinite too, and every finite result would
//! pass. So a NaN matches only a NaN, an infinity only the same infinity,
//! and only two finite values are compared by distance.

/// Whether `got` agrees with `want`: both NaN; the same infinity; or both
/// finite with `|got - want| <= atol + rtol·|want|`.
pub fn close(got: f64, want: f64, rtol: f64, atol: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    if got.is_infinite() || want.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= atol + rtol * want.abs()
}

#[cfg(test)]
mod tests {
    use super::close;
    const INF: f64 = f64::INFINITY;

    #[test]
    fn an_infinity_matches_only_itself() {
        assert!(close(INF, INF, 1e-3, 1e-7) && close(-INF, -INF, 1e-3, 1e-7));
        for got in [0.0, 57344.0, f64::MAX, -INF, f64::NAN] {
            assert!(!close(got, INF, 1e-3, 1e-7), "{got} passed for inf");
            assert!(!close(-got, -INF, 1e-3, 1e-7), "{} passed for -inf", -got);
        }
        assert!(!close(INF, f64::MAX, 1e-3, 1e-7), "inf passed for a finite value");
    }

    #[test]
    fn a_nan_matches_only_a_nan() {
        assert!(close(f64::NAN, -f64::NAN, 0.0, 0.0));
        for other in [0.0, 1.0, INF, -INF] {
            assert!(!close(f64::NAN, other, 1.0, 1.0), "NaN passed for {other}");
            assert!(!close(other, f64::NAN, 1.0, 1.0), "{other} passed for NaN");
        }
    }

    #[test]
    fn finite_values_within_the_bound() {
        assert!(close(1.001, 1.0, 1e-3, 0.0) && !close(1.0011, 1.0, 1e-3, 0.0));
        assert!(close(-0.0, 0.0, 0.0, 0.0) && close(1e-8, 0.0, 0.0, 1e-7));
        assert!(!close(2e-7, 0.0, 1e-3, 1e-7));
    }
}
