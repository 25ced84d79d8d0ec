//! Conversions between f32 and the 16-bit float formats (IEEE binary16 and
//! bfloat16), bit-exact with round-to-nearest-even. Generated code stores
//! f16/bf16 tensors as raw 16-bit patterns and computes in f32; it calls
//! these to widen on load and narrow on store. The 16-bit pattern travels in
//! the low half of an `i32` (C ABI integer promotion).
//!
//! Kernels that take any float element type by its ONNX code read and write
//! elements through [`load_float`] and [`store_float`], computing in f64.
//! [`onnxc_widen_f32`] and [`onnxc_narrow_f32`] convert whole buffers: they
//! stage the f16/bf16 tensors of operators whose kernels exist only for f32
//! (widen the inputs into scratch, run the f32 kernel, narrow its results).

use super::minifloat::round_shifted;
use crate::abi::convert::*;
use crate::abi::{ELEM_BF16, ELEM_F16, ELEM_F32, ELEM_F64, STATUS_INVALID_PARAMS, STATUS_OK};

/// An IEEE binary16 element, as stored in a tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(transparent)]
pub struct F16(pub u16);

/// A bfloat16 element, as stored in a tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl F16 {
    pub fn to_f32(self) -> f32 {
        onnxc_f16_to_f32(self.0 as i32)
    }
    pub fn from_f32(v: f32) -> F16 {
        F16(onnxc_f32_to_f16(v) as u16)
    }
}

impl Bf16 {
    pub fn to_f32(self) -> f32 {
        onnxc_bf16_to_f32(self.0 as i32)
    }
    pub fn from_f32(v: f32) -> Bf16 {
        Bf16(onnxc_f32_to_bf16(v) as u16)
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_f16_to_f32`].
pub(crate) fn f16_to_f32(h: i32) -> f32 {
    let h = h as u32 & 0xffff;
    let sign = (h & 0x8000) << 16;
    let exp = (h >> 10) & 0x1f;
    let man = h & 0x3ff;
    let bits = match exp {
        0 if man == 0 => sign,
        // Subnormal: man × 2^-24, exact in f32.
        0 => sign | (man as f32 * (1.0 / 16_777_216.0)).to_bits(),
        31 => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Does the work of the C entry point [`crate::abi::onnxc_f32_to_f16`].
pub(crate) fn f32_to_f16(x: f32) -> i32 {
    let bits = x.to_bits();
    let sign = (bits >> 16) & 0x8000;
    let abs = bits & 0x7fff_ffff;
    let half = if abs > 0x7f80_0000 {
        0x7e00 | ((abs >> 13) & 0x3ff)
    } else if abs >= 0x477f_f000 {
        // 65520 and above round to infinity.
        0x7c00
    } else if abs < 0x3880_0000 {
        // Below the smallest normal (2^-14): a subnormal or zero.
        if abs < 0x3300_0000 {
            0
        } else {
            let e = abs >> 23;
            let m = (abs & 0x7f_ffff) | 0x80_0000;
            let shift = 126 - e;
            round_shifted(u64::from(m), shift) as u32
        }
    } else {
        let rebased = abs - (112 << 23);
        round_shifted(u64::from(rebased), 13) as u32
    };
    (sign | half) as i32
}

/// Does the work of the C entry point [`crate::abi::onnxc_f32_to_bf16`].
pub(crate) fn f32_to_bf16(x: f32) -> i32 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as i32;
    }
    let rounding = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(rounding) >> 16) as i32
}

/// True for the float element codes [`load_float`] and [`store_float`] know.
pub(crate) fn is_float_elem(elem: i64) -> bool {
    matches!(elem, ELEM_F32 | ELEM_F64 | ELEM_F16 | ELEM_BF16)
}

/// Element `i` of a float tensor of element code `elem` (f32 when the code
/// is not one of [`is_float_elem`]'s), widened to f64.
#[inline(always)]
pub(crate) unsafe fn load_float(ptr: *const u8, elem: i64, i: isize) -> f64 {
    match elem {
        ELEM_F64 => *(ptr as *const f64).offset(i),
        ELEM_F16 => onnxc_f16_to_f32(*(ptr as *const u16).offset(i) as i32) as f64,
        ELEM_BF16 => onnxc_bf16_to_f32(*(ptr as *const u16).offset(i) as i32) as f64,
        _ => *(ptr as *const f32).offset(i) as f64,
    }
}

/// Stores `v`, rounded to the element type `elem`, as element `i`.
#[inline(always)]
pub(crate) unsafe fn store_float(ptr: *mut u8, elem: i64, i: isize, v: f64) {
    match elem {
        ELEM_F64 => *(ptr as *mut f64).offset(i) = v,
        ELEM_F16 => *(ptr as *mut u16).offset(i) = onnxc_f32_to_f16(v as f32) as u16,
        ELEM_BF16 => *(ptr as *mut u16).offset(i) = onnxc_f32_to_bf16(v as f32) as u16,
        _ => *(ptr as *mut f32).offset(i) = v as f32,
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_widen_f32`].
pub(crate) unsafe fn widen_f32(elem: i64, src: *const u16, dst: *mut f32, count: i64) -> i32 {
    let widen = match elem {
        ELEM_F16 => onnxc_f16_to_f32,
        ELEM_BF16 => onnxc_bf16_to_f32,
        _ => return STATUS_INVALID_PARAMS,
    };
    for i in 0..count.max(0) as usize {
        *dst.add(i) = widen(*src.add(i) as i32);
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_narrow_f32`].
pub(crate) unsafe fn narrow_f32(elem: i64, src: *const f32, dst: *mut u16, count: i64) -> i32 {
    let narrow = match elem {
        ELEM_F16 => onnxc_f32_to_f16,
        ELEM_BF16 => onnxc_f32_to_bf16,
        _ => return STATUS_INVALID_PARAMS,
    };
    for i in 0..count.max(0) as usize {
        *dst.add(i) = narrow(*src.add(i)) as u16;
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_convert_like_the_scalars() {
        let src: [u16; 5] = [0x3c00, 0xc000, 0x7bff, 0x0001, 0x7e00];
        for elem in [ELEM_F16, ELEM_BF16] {
            let mut wide = [0.0f32; 5];
            let mut back = [0u16; 5];
            unsafe {
                assert_eq!(onnxc_widen_f32(elem, src.as_ptr(), wide.as_mut_ptr(), 5), STATUS_OK);
                assert_eq!(onnxc_narrow_f32(elem, wide.as_ptr(), back.as_mut_ptr(), 5), STATUS_OK);
            }
            assert_eq!(back, src);
            let scalar = if elem == ELEM_F16 { onnxc_f16_to_f32 } else { onnxc_bf16_to_f32 };
            assert_eq!(wide[1], scalar(0xc000));
        }
        let st = unsafe { onnxc_widen_f32(1, core::ptr::null(), core::ptr::null_mut(), 0) };
        assert_eq!(st, STATUS_INVALID_PARAMS);
    }

    #[test]
    fn f16_round_trips_every_pattern() {
        for h in 0..=0xffffu32 {
            let f = onnxc_f16_to_f32(h as i32);
            let want = half::f16::from_bits(h as u16).to_f32();
            if want.is_nan() {
                assert!(f.is_nan(), "widening {h:#06x}");
            } else {
                assert_eq!(f.to_bits(), want.to_bits(), "widening {h:#06x}");
                assert_eq!(onnxc_f32_to_f16(f) as u32, h, "narrowing {h:#06x}");
            }
        }
    }

    #[test]
    fn f32_to_f16_rounds_like_the_reference() {
        let mut x = 0x1234_5678u32;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let f = f32::from_bits(x);
            let want = half::f16::from_f32(f);
            let got = onnxc_f32_to_f16(f) as u16;
            if f.is_nan() {
                assert!(half::f16::from_bits(got).is_nan());
            } else {
                assert_eq!(got, want.to_bits(), "{f:e}");
            }
        }
    }

    #[test]
    fn bf16_rounds_like_the_reference() {
        let mut x = 0x9e37_79b9u32;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let f = f32::from_bits(x);
            let got = onnxc_f32_to_bf16(f) as u16;
            if f.is_nan() {
                assert!(onnxc_bf16_to_f32(got as i32).is_nan());
            } else {
                assert_eq!(got, half::bf16::from_f32(f).to_bits(), "{f:e}");
                assert_eq!(onnxc_bf16_to_f32(got as i32).to_bits(), half::bf16::from_bits(got).to_f32().to_bits());
            }
        }
    }
}
