//! Scalar transcendental functions for elementwise code.
//!
//! Cranelift has no instructions for `exp`, `tanh`, `erf`, ... so generated
//! elementwise loops call these. They are thin C-ABI wrappers over `libm`,
//! which is `no_std` and gives the same results on every target (unlike the
//! platform C library), keeping compiled models reproducible.

macro_rules! scalar_fns {
    ($t:ty; $($name:ident => $f:ident ( $($arg:ident),+ );)*) => {
        $(
            #[doc = concat!("`libm::", stringify!($f), "` with the C ABI.")]
            #[no_mangle]
            pub extern "C" fn $name($($arg: $t),+) -> $t {
                libm::$f($($arg),+)
            }
        )*
    };
}

scalar_fns! { f32;
    onnxc_expf => expf(x);
    onnxc_logf => logf(x);
    onnxc_tanhf => tanhf(x);
    onnxc_erff => erff(x);
    onnxc_powf => powf(x, y);
    onnxc_sinf => sinf(x);
    onnxc_cosf => cosf(x);
    onnxc_tanf => tanf(x);
    onnxc_asinf => asinf(x);
    onnxc_acosf => acosf(x);
    onnxc_atanf => atanf(x);
    onnxc_sinhf => sinhf(x);
    onnxc_coshf => coshf(x);
    onnxc_asinhf => asinhf(x);
    onnxc_acoshf => acoshf(x);
    onnxc_atanhf => atanhf(x);
    onnxc_expm1f => expm1f(x);
    onnxc_log1pf => log1pf(x);
    onnxc_fmodf => fmodf(x, y);
}

scalar_fns! { f64;
    onnxc_exp => exp(x);
    onnxc_log => log(x);
    onnxc_tanh => tanh(x);
    onnxc_erf => erf(x);
    onnxc_pow => pow(x, y);
    onnxc_sin => sin(x);
    onnxc_cos => cos(x);
    onnxc_tan => tan(x);
    onnxc_asin => asin(x);
    onnxc_acos => acos(x);
    onnxc_atan => atan(x);
    onnxc_sinh => sinh(x);
    onnxc_cosh => cosh(x);
    onnxc_asinh => asinh(x);
    onnxc_acosh => acosh(x);
    onnxc_atanh => atanh(x);
    onnxc_expm1 => expm1(x);
    onnxc_log1p => log1p(x);
    onnxc_fmod => fmod(x, y);
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    fn close32(a: f32, b: f32) -> bool {
        (a - b).abs() <= 1e-6 * (1.0 + b.abs())
    }

    #[test]
    fn f32_against_std() {
        for &x in &[-0.9f32, -0.3, 0.0, 0.25, 0.7] {
            assert!(close32(onnxc_expf(x), x.exp()));
            assert!(close32(onnxc_tanhf(x), x.tanh()));
            assert!(close32(onnxc_sinf(x), x.sin()));
            assert!(close32(onnxc_cosf(x), x.cos()));
            assert!(close32(onnxc_tanf(x), x.tan()));
            assert!(close32(onnxc_asinf(x), x.asin()));
            assert!(close32(onnxc_acosf(x), x.acos()));
            assert!(close32(onnxc_atanf(x), x.atan()));
            assert!(close32(onnxc_sinhf(x), x.sinh()));
            assert!(close32(onnxc_coshf(x), x.cosh()));
            assert!(close32(onnxc_asinhf(x), x.asinh()));
            assert!(close32(onnxc_atanhf(x), x.atanh()));
            assert!(close32(onnxc_expm1f(x), x.exp_m1()));
            assert!(close32(onnxc_log1pf(x), x.ln_1p()));
            assert!(close32(onnxc_acoshf(x + 2.0), (x + 2.0).acosh()));
            assert!(close32(onnxc_logf(x + 1.0), (x + 1.0).ln()));
            assert!(close32(onnxc_powf(x + 1.0, 2.5), (x + 1.0).powf(2.5)));
            assert!(close32(onnxc_fmodf(x * 7.0, 2.0), (x * 7.0) % 2.0));
        }
        assert!(close32(onnxc_erff(0.5), 0.520_499_9));
    }

    #[test]
    fn f64_against_std() {
        for &x in &[-0.9f64, -0.3, 0.0, 0.25, 0.7] {
            let c = |a: f64, b: f64| (a - b).abs() <= 1e-14 * (1.0 + b.abs());
            assert!(c(onnxc_exp(x), x.exp()));
            assert!(c(onnxc_log(x + 1.0), (x + 1.0).ln()));
            assert!(c(onnxc_tanh(x), x.tanh()));
            assert!(c(onnxc_pow(x + 1.0, 1.5), (x + 1.0).powf(1.5)));
            assert!(c(onnxc_sin(x), x.sin()));
            assert!(c(onnxc_cos(x), x.cos()));
            assert!(c(onnxc_tan(x), x.tan()));
            assert!(c(onnxc_asin(x), x.asin()));
            assert!(c(onnxc_acos(x), x.acos()));
            assert!(c(onnxc_atan(x), x.atan()));
            assert!(c(onnxc_sinh(x), x.sinh()));
            assert!(c(onnxc_cosh(x), x.cosh()));
            assert!(c(onnxc_asinh(x), x.asinh()));
            assert!(c(onnxc_acosh(x + 2.0), (x + 2.0).acosh()));
            assert!(c(onnxc_atanh(x), x.atanh()));
            assert!(c(onnxc_expm1(x), x.exp_m1()));
            assert!(c(onnxc_log1p(x), x.ln_1p()));
            assert!(c(onnxc_fmod(x * 7.0, 2.0), (x * 7.0) % 2.0));
        }
        assert!(c_erf());
    }

    fn c_erf() -> bool {
        (onnxc_erf(0.5) - 0.520_499_877_813_046_5).abs() < 1e-15
    }
}
