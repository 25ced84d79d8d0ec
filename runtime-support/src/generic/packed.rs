//! Sub-byte elements: int4/uint4/float4e2m1 (two to a byte) and
//! int2/uint2 (four to a byte), packed the ONNX way — element `i` sits in
//! byte `i / per_byte` at bit `(i % per_byte) * bits`, the first element in
//! the low bits, and a tensor's last byte is padded with zeros. Kernels
//! that read or write such tensors go through [`load_packed`] and
//! [`store_packed`].

use crate::abi::{ELEM_F4E2M1, ELEM_I2, ELEM_I4, ELEM_U2, ELEM_U4};

/// Bits per element of a packed type, `None` for other codes.
pub fn packed_bits(elem: i64) -> Option<u32> {
    match elem {
        ELEM_I4 | ELEM_U4 | ELEM_F4E2M1 => Some(4),
        ELEM_I2 | ELEM_U2 => Some(2),
        _ => None,
    }
}

/// Element `i` of a packed tensor: sign-extended for int4/int2, the raw
/// bit pattern for uint4/uint2/float4e2m1; `None` for other codes.
///
/// # Safety
/// `p` holds at least `i + 1` elements of `elem`.
#[inline]
pub unsafe fn load_packed(p: *const u8, i: usize, elem: i64) -> Option<i32> {
    let bits = packed_bits(elem)?;
    let per_byte = (8 / bits) as usize;
    let byte = *p.add(i / per_byte) as u32;
    let raw = (byte >> ((i % per_byte) as u32 * bits)) & ((1 << bits) - 1);
    Some(match elem {
        ELEM_I4 | ELEM_I2 => ((raw << (32 - bits)) as i32) >> (32 - bits),
        _ => raw as i32,
    })
}

/// Stores the low bits of `v` as element `i` of a packed tensor, leaving
/// its neighbours alone; nothing for other codes.
///
/// # Safety
/// `p` holds at least `i + 1` elements of `elem`.
#[inline]
pub unsafe fn store_packed(p: *mut u8, i: usize, elem: i64, v: i32) {
    let Some(bits) = packed_bits(elem) else {
        return;
    };
    let per_byte = (8 / bits) as usize;
    let shift = (i % per_byte) as u32 * bits;
    let mask = ((1u32 << bits) - 1) << shift;
    let at = p.add(i / per_byte);
    *at = ((*at as u32 & !mask) | ((v as u32) << shift & mask)) as u8;
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn elements_pack_low_bits_first() {
        let mut buf = [0u8; 2];
        for (i, v) in [-8, 7, -1, 2].into_iter().enumerate() {
            unsafe { store_packed(buf.as_mut_ptr(), i, ELEM_I4, v) };
        }
        // -8 = 0b1000 low, 7 = 0b0111 high; -1 = 0b1111, 2 = 0b0010.
        assert_eq!(buf, [0x78, 0x2f]);
        let back: Vec<i32> = (0..4).map(|i| unsafe { load_packed(buf.as_ptr(), i, ELEM_I4).unwrap() }).collect();
        assert_eq!(back, [-8, 7, -1, 2]);
        assert_eq!(unsafe { load_packed(buf.as_ptr(), 0, ELEM_U4) }, Some(8));
        let mut two = [0u8; 1];
        for (i, v) in [1, -2, 3, -1].into_iter().enumerate() {
            unsafe { store_packed(two.as_mut_ptr(), i, ELEM_I2, v) };
        }
        // 01, 10, 11, 11 from the low bits up.
        assert_eq!(two, [0b1111_1001]);
        let back: Vec<i32> = (0..4).map(|i| unsafe { load_packed(two.as_ptr(), i, ELEM_I2).unwrap() }).collect();
        assert_eq!(back, [1, -2, -1, -1]);
        assert_eq!(unsafe { load_packed(two.as_ptr(), 1, ELEM_U2) }, Some(2));
        assert_eq!(unsafe { load_packed(two.as_ptr(), 0, crate::abi::ELEM_U8) }, None);
    }
}
