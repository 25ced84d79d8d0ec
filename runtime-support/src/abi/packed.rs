//! The C entry points and parameter structs of [`crate::generic::packed`].

use crate::generic::packed::*;

/// Unpacks `count` elements of packed type `elem` into `dst`: i32 values
/// for the integer types, f32 for float4e2m1 (staging, see the compiler's
/// `ops/staging.rs`).
///
/// # Safety
/// `src` holds `count` packed elements, `dst` room for `count` 4-byte ones.
#[no_mangle]
pub unsafe extern "C" fn onnxc_unpack(elem: i64, src: *const u8, dst: *mut u8, count: i64) -> i32 {
    unpack(elem, src, dst, count)
}

/// Packs `count` wide values (as [`onnxc_unpack`] makes them) into `dst`:
/// integers keep their low bits, f32 rounds to float4e2m1 (nearest even,
/// saturating). The padding bits of the last byte are zeroed.
///
/// # Safety
/// `src` holds `count` 4-byte elements, `dst` room for `count` packed ones.
#[no_mangle]
pub unsafe extern "C" fn onnxc_pack(elem: i64, src: *const u8, dst: *mut u8, count: i64) -> i32 {
    pack(elem, src, dst, count)
}
