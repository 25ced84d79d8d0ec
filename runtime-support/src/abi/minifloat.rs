//! The C entry points and parameter structs of [`crate::generic::minifloat`].

use crate::generic::minifloat::*;

/// `mode` bit of [`onnxc_f32_to_minifloat`]: clamp out-of-range values.
pub const MINIFLOAT_SATURATE: i64 = 1;

/// `mode` bits 1–2: E8M0 rounding, `up` (the default) …
pub const MINIFLOAT_ROUND_UP: i64 = 0;

/// … `down` …
pub const MINIFLOAT_ROUND_DOWN: i64 = 2;

/// … or `nearest` (ties up).
pub const MINIFLOAT_ROUND_NEAREST: i64 = 4;

/// The value of bit pattern `bits` (low bits of the `i32`) of format `elem`
/// (NaN for an unknown code).
#[no_mangle]
pub extern "C" fn onnxc_minifloat_to_f32(bits: i32, elem: i64) -> f32 {
    minifloat_to_f32(bits, elem)
}

/// `x` as bit pattern of format `elem` (see the module docs for `mode`);
/// 0 for an unknown code.
#[no_mangle]
pub extern "C" fn onnxc_f64_to_minifloat(x: f64, elem: i64, mode: i64) -> i32 {
    f64_to_minifloat(x, elem, mode)
}

/// [`onnxc_f64_to_minifloat`] of an f32 (exact widening).
#[no_mangle]
pub extern "C" fn onnxc_f32_to_minifloat(x: f32, elem: i64, mode: i64) -> i32 {
    onnxc_f64_to_minifloat(x as f64, elem, mode)
}
