//! Elementwise operators on 8-bit quantized tensors, for the QDQ groups
//! `QuantizeLinear(f(DequantizeLinear(a)[, DequantizeLinear(b)]))` that
//! `passes::fuse_qdq` turns into one node: the graph would otherwise write
//! and read two f32 tensors four times the size of the bytes.
//!
//! [`qbinary`] (QLinearAdd, QLinearMul) dequantizes a run of each operand
//! into a stack buffer, adds or multiplies in f32 and quantizes the run:
//! the same f32 operations per element as DequantizeLinear, Add/Mul and
//! QuantizeLinear (it calls their own row loops), so its output is the
//! group's bit for bit. [`qlookup`] maps each byte through a 256-entry
//! table that the compiler computed by running the group itself on every
//! byte value, so it is exact as well.

use crate::abi::quant::{QBinaryParams, QuantizedSide};
use crate::abi::{ELEM_I8, ELEM_U8, STATUS_INVALID_PARAMS, STATUS_OK};
use crate::generic::quant::{dequantize_byte_row, int_range, quantize_byte_row};

/// Elements per run: two f32 buffers of this many stay in L1.
const RUN: usize = 256;

/// [`QBinaryParams::op`] of QLinearAdd.
pub const QBINARY_ADD: i64 = 0;
/// [`QBinaryParams::op`] of QLinearMul.
pub const QBINARY_MUL: i64 = 1;

impl QuantizedSide {
    /// `(signed, zero, scale)` of an 8-bit side, `None` for another type.
    fn byte_side(&self) -> Option<(bool, f32, f32)> {
        let signed = match self.dtype {
            ELEM_U8 => false,
            ELEM_I8 => true,
            _ => return None,
        };
        Some((signed, self.zero as f32, self.scale as f32))
    }
}

/// `a[i] = a[i] + b[i]` (or `·`), compiled for the widest vectors.
fn combine(mul: bool, a: &mut [f32], b: &[f32]) {
    crate::isa::with_widest_vectors(
        #[inline(always)]
        move || {
            if mul {
                a.iter_mut().zip(b).for_each(|(x, &y)| *x *= y);
            } else {
                a.iter_mut().zip(b).for_each(|(x, &y)| *x += y);
            }
        },
    )
}

/// Does the work of the C entry point [`crate::abi::onnxc_qbinary`]: `y =
/// quantize(dequantize(a) op dequantize(b))` over `rows x inner` elements,
/// `b` one element per row when `b_per_row`, else one per element.
///
/// # Safety
/// `a` and `y` hold `rows · inner` bytes, `b` `rows` or `rows · inner`.
pub(crate) unsafe fn qbinary(p: *const QBinaryParams, a: *const u8, b: *const u8, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    let (Some(sa), Some(sb), Some(sy)) = (p.a.byte_side(), p.b.byte_side(), p.y.byte_side()) else {
        return STATUS_INVALID_PARAMS;
    };
    let (Ok(rows), Ok(inner), Some(range)) = (usize::try_from(p.rows), usize::try_from(p.inner), int_range(p.y.dtype))
    else {
        return STATUS_INVALID_PARAMS;
    };
    if !matches!(p.op, QBINARY_ADD | QBINARY_MUL) || p.b_per_row > 1 || p.b_per_row < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (mut fa, mut fb) = ([0f32; RUN], [0f32; RUN]);
    for r in 0..rows {
        let row_b = (p.b_per_row == 1).then(|| {
            let v = *b.add(r);
            let v = if sb.0 { v as i8 as f32 } else { v as f32 };
            (v - sb.1) * sb.2
        });
        for start in (0..inner).step_by(RUN) {
            let len = RUN.min(inner - start);
            let at = r * inner + start;
            dequantize_byte_row(core::slice::from_raw_parts(a.add(at), len), sa.0, sa.1, sa.2, &mut fa[..len]);
            match row_b {
                Some(v) => fb[..len].fill(v),
                None => {
                    let bytes = core::slice::from_raw_parts(b.add(at), len);
                    dequantize_byte_row(bytes, sb.0, sb.1, sb.2, &mut fb[..len]);
                }
            }
            combine(p.op == QBINARY_MUL, &mut fa[..len], &fb[..len]);
            let out = core::slice::from_raw_parts_mut(y.add(at), len);
            quantize_byte_row(&fa[..len], sy.2, sy.1 as f64, range, out);
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_qlookup`]: `y[i]
/// = table[x[i]]` for `n` bytes.
///
/// # Safety
/// `table` holds 256 bytes, `x` and `y` `n`.
pub(crate) unsafe fn qlookup(table: *const u8, n: i64, x: *const u8, y: *mut u8) -> i32 {
    let Ok(n) = usize::try_from(n) else { return STATUS_INVALID_PARAMS };
    if table.is_null() {
        return STATUS_INVALID_PARAMS;
    }
    let table = &*(table as *const [u8; 256]);
    let (x, y) = (core::slice::from_raw_parts(x, n), core::slice::from_raw_parts_mut(y, n));
    y.iter_mut().zip(x).for_each(|(o, &v)| *o = table[v as usize]);
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{rand_bytes, testable_isas, with_level};
    use std::vec;
    use std::vec::Vec;

    fn side(dtype: i64, zero: i64, scale: f32) -> QuantizedSide {
        QuantizedSide { dtype, zero, scale: scale as f64 }
    }

    fn value(dtype: i64, byte: u8) -> f32 {
        if dtype == ELEM_I8 {
            byte as i8 as f32
        } else {
            byte as f32
        }
    }

    /// The group element by element: DequantizeLinear's `(q - zero) ·
    /// scale`, the f32 operation, QuantizeLinear's `rint(v / scale) +
    /// zero` saturated.
    fn reference(p: &QBinaryParams, a: &[u8], b: &[u8]) -> Vec<u8> {
        let inner = p.inner as usize;
        let deq = |s: &QuantizedSide, q: u8| (value(s.dtype, q) - s.zero as f32) * s.scale as f32;
        let (lo, hi) = int_range(p.y.dtype).unwrap();
        (0..a.len())
            .map(|i| {
                let bv = b[if p.b_per_row == 1 { i / inner } else { i }];
                let (x, y) = (deq(&p.a, a[i]), deq(&p.b, bv));
                let v = if p.op == QBINARY_MUL { x * y } else { x + y };
                let q = ((v / p.y.scale as f32).round_ties_even() as f64 + p.y.zero as f64).clamp(lo, hi);
                q as i32 as u8
            })
            .collect()
    }

    #[test]
    fn qbinary_is_the_dequantize_op_quantize_group_bit_for_bit() {
        let sides = [
            (side(ELEM_U8, 131, 0.021), side(ELEM_U8, 7, 0.013), side(ELEM_U8, 120, 0.037)),
            (side(ELEM_I8, -3, 0.05), side(ELEM_U8, 0, 0.0041), side(ELEM_I8, 5, 0.002)),
            (side(ELEM_U8, 255, 0.1), side(ELEM_I8, -128, 0.3), side(ELEM_U8, 0, 0.25)),
        ];
        // Runs of RUN and a tail, per-row operands, a single row.
        for (rows, inner) in [(1, 1000), (3, 257), (40, 49), (7, 1)] {
            for (s, (sa, sb, sy)) in sides.iter().enumerate() {
                for (op, b_per_row) in [(QBINARY_ADD, 0), (QBINARY_MUL, 0), (QBINARY_ADD, 1), (QBINARY_MUL, 1)] {
                    let p = QBinaryParams { op, rows, inner, b_per_row, a: *sa, b: *sb, y: *sy };
                    let n = (rows * inner) as usize;
                    let a = rand_bytes(n, 3 + s as u32);
                    let b = rand_bytes(if b_per_row == 1 { rows as usize } else { n }, 17 + op as u32);
                    let want = reference(&p, &a, &b);
                    for level in testable_isas() {
                        let mut got = vec![0u8; n];
                        let status =
                            with_level(level, || unsafe { qbinary(&p, a.as_ptr(), b.as_ptr(), got.as_mut_ptr()) });
                        assert_eq!(status, STATUS_OK);
                        assert_eq!(got, want, "{rows}x{inner}, sides {s}, op {op}, per row {b_per_row}, {level:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn qbinary_refuses_other_types_and_ops() {
        let good = QBinaryParams {
            op: QBINARY_ADD,
            rows: 1,
            inner: 1,
            b_per_row: 0,
            a: side(ELEM_U8, 0, 1.0),
            b: side(ELEM_U8, 0, 1.0),
            y: side(ELEM_U8, 0, 1.0),
        };
        let (a, mut y) = ([1u8], [0u8]);
        for bad in [QBinaryParams { op: 2, ..good }, QBinaryParams { y: side(crate::abi::ELEM_I16, 0, 1.0), ..good }] {
            assert_eq!(unsafe { qbinary(&bad, a.as_ptr(), a.as_ptr(), y.as_mut_ptr()) }, STATUS_INVALID_PARAMS);
        }
        assert_eq!(unsafe { qbinary(&good, a.as_ptr(), a.as_ptr(), y.as_mut_ptr()) }, STATUS_OK);
        assert_eq!(y, [2]);
    }

    #[test]
    fn qlookup_maps_each_byte_through_the_table() {
        let table: Vec<u8> = (0..=255u8).map(|v| v.wrapping_mul(37) ^ 0x5a).collect();
        let x = rand_bytes(1001, 9);
        let mut y = vec![0u8; x.len()];
        assert_eq!(unsafe { qlookup(table.as_ptr(), x.len() as i64, x.as_ptr(), y.as_mut_ptr()) }, STATUS_OK);
        assert!(y.iter().zip(&x).all(|(&o, &v)| o == table[v as usize]));
    }
}
