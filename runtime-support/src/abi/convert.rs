//! The C entry points and parameter structs of [`crate::generic::convert`].

use crate::generic::convert::*;

/// binary16 bits → f32 (exact).
#[no_mangle]
pub extern "C" fn onnxc_f16_to_f32(h: i32) -> f32 {
    f16_to_f32(h)
}

/// f32 → binary16 bits, rounding to nearest even; overflow gives ±inf,
/// NaN stays a (quiet) NaN.
#[no_mangle]
pub extern "C" fn onnxc_f32_to_f16(x: f32) -> i32 {
    f32_to_f16(x)
}

/// bfloat16 bits → f32 (exact).
#[no_mangle]
pub extern "C" fn onnxc_bf16_to_f32(h: i32) -> f32 {
    f32::from_bits((h as u32 & 0xffff) << 16)
}

/// f32 → bfloat16 bits, rounding to nearest even; NaN stays a quiet NaN.
#[no_mangle]
pub extern "C" fn onnxc_f32_to_bf16(x: f32) -> i32 {
    f32_to_bf16(x)
}

/// `dst[i] = src[i]` widened to f32 for `count` elements of type `elem`
/// (`ELEM_F16` or `ELEM_BF16`).
#[no_mangle]
pub unsafe extern "C" fn onnxc_widen_f32(elem: i64, src: *const u16, dst: *mut f32, count: i64) -> i32 {
    widen_f32(elem, src, dst, count)
}

/// `dst[i] = src[i]` rounded to `elem` (`ELEM_F16` or `ELEM_BF16`, nearest
/// even) for `count` elements.
#[no_mangle]
pub unsafe extern "C" fn onnxc_narrow_f32(elem: i64, src: *const f32, dst: *mut u16, count: i64) -> i32 {
    narrow_f32(elem, src, dst, count)
}
