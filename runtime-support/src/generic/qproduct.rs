//! The integer product behind MatMulInteger, QLinearMatMul, ConvInteger and
//! QLinearConv: `acc[r][c] = Σ_q (a[r][q] - za) · (b[q][c] - zb)` in i32
//! with wrapping arithmetic (int32 numpy's), the zero points per tensor or
//! per row of A / column of B.
//!
//! [`reference_product`] is the definition in plain loops, for every
//! integer width. When both operands are 8-bit, [`integer_product`] instead
//! computes the raw product of the bytes with the fastest [`ByteKernel`]
//! (AVX-512 VNNI, AVX2, or portable loops) and fixes the zero points up
//! afterwards. The SIMD kernels multiply A as unsigned by B as signed
//! bytes, so they read `a' = a + oa` and `b' = b - ob`, with `oa`/`ob` 128
//! (reached by flipping the top bit) or 0 by type; with `ZA = za + oa` and
//! `ZB = zb - ob`,
//!
//! `Σ(a - za)(b - zb) = Σ(a' - ZA)(b' - ZB) = Σa'b' - ZB·Σa' - ZA·Σb' + k·ZA·ZB`.
//!
//! This is an identity over the integers, and every term is evaluated in
//! wrapping i32 arithmetic, i.e. modulo 2^32, as the reference's sum is:
//! the result is the reference's bit for bit whatever the data, depth or
//! overflow (the kernels' own sums are exact modulo 2^32, see their docs).

use super::quant::load_int;
use crate::abi::{ELEM_I16, ELEM_I8, ELEM_U16, ELEM_U8};
use crate::isa::ByteKernel;

/// One operand of an integer product: a row-major matrix of `dtype`
/// elements (u8, i8, u16 or i16) and its zero point.
#[derive(Clone, Copy, Debug)]
pub struct IntMatrix {
    pub data: *const u8,
    pub dtype: i64,
    /// The zero point (one element of `dtype`, or one per row of A / column
    /// of B when `zp_indexed`); null for 0.
    pub zp: *const u8,
    pub zp_indexed: bool,
    /// With `zp_indexed`, row/column `i` uses zero point entry
    /// `zp_first + i` (a convolution group's first output channel).
    pub zp_first: usize,
}

impl IntMatrix {
    /// The zero point of row (A) or column (B) `i`.
    unsafe fn zero(&self, i: usize) -> i32 {
        if self.zp.is_null() {
            return 0;
        }
        load_int(self.zp, if self.zp_indexed { self.zp_first + i } else { 0 }, self.dtype).unwrap_or(0)
    }

    fn is_byte(&self) -> bool {
        matches!(self.dtype, ELEM_U8 | ELEM_I8)
    }
}

/// Bytes per element of the integer types the products take.
pub(crate) fn int_bytes(dtype: i64) -> Option<usize> {
    match dtype {
        ELEM_U8 | ELEM_I8 => Some(1),
        ELEM_U16 | ELEM_I16 => Some(2),
        _ => None,
    }
}

/// `acc` (`m x n`, row-major) = `(A - za) · (B - zb)` for `a` `m x k` and
/// `b` `k x n`, through `kernel` when both operands are 8-bit (the generic
/// one if `kernel` is not available here), else the reference loops.
///
/// # Safety
/// The operands hold `m·k` and `k·n` elements of their types and their
/// zero points the entries they index; `acc` holds `m·n` i32s.
pub unsafe fn integer_product(kernel: ByteKernel, [m, k, n]: [usize; 3], a: IntMatrix, b: IntMatrix, acc: *mut i32) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        core::slice::from_raw_parts_mut(acc, m * n).fill(0);
    } else if a.is_byte() && b.is_byte() {
        byte_product(kernel, [m, k, n], &a, &b, acc);
    } else {
        reference_product([m, k, n], &a, &b, acc);
    }
}

/// [`integer_product`] by the definition, for any integer types.
pub(crate) unsafe fn reference_product([m, k, n]: [usize; 3], a: &IntMatrix, b: &IntMatrix, acc: *mut i32) {
    for r in 0..m {
        let za = a.zero(r);
        for c in 0..n {
            let zb = b.zero(c);
            let mut sum = 0i32;
            for q in 0..k {
                let x = load_int(a.data, r * k + q, a.dtype).unwrap_or(0) - za;
                let y = load_int(b.data, q * n + c, b.dtype).unwrap_or(0) - zb;
                sum = sum.wrapping_add(x.wrapping_mul(y));
            }
            *acc.add(r * n + c) = sum;
        }
    }
}

/// The 8-bit product: the raw product of the flipped bytes, then the
/// zero-point corrections of the module doc. `k >= 1`.
unsafe fn byte_product(kernel: ByteKernel, [m, k, n]: [usize; 3], a: &IntMatrix, b: &IntMatrix, acc: *mut i32) {
    let a_flip = if a.dtype == ELEM_I8 { 0x80u8 } else { 0 };
    let b_flip = if b.dtype == ELEM_U8 { 0x80u8 } else { 0 };
    let (a_bytes, b_bytes) = (a.data, b.data);
    raw_byte_product(kernel, [m, k, n], a_bytes, a_flip, b_bytes, b_flip, acc);
    // `a' = a ^ a_flip` read unsigned is `a + oa`; `b' = b ^ b_flip` read
    // signed is `b - ob`.
    let (oa, ob) = (a_flip as i32, b_flip as i32);
    let ki = k as i32;
    // Column sums by chunks on the stack; row sums once per chunk.
    // Compiled for the widest vectors.
    crate::isa::with_widest_vectors(
        #[inline(always)]
        move || {
            let mut col_sums = [0i32; COLUMN_CHUNK];
            for c0 in (0..n).step_by(COLUMN_CHUNK) {
                let width = COLUMN_CHUNK.min(n - c0);
                let sums = &mut col_sums[..width];
                column_sums([k, n], b_bytes, b_flip, c0, sums);
                // `ZB` by column, read once per chunk.
                let mut col_zeros = [0i32; COLUMN_CHUNK];
                let zbs = &mut col_zeros[..width];
                for (j, zb) in zbs.iter_mut().enumerate() {
                    *zb = b.zero(c0 + j).wrapping_sub(ob);
                }
                for r in 0..m {
                    let row = core::slice::from_raw_parts(a_bytes.add(r * k), k);
                    let row_sum = row.iter().fold(0i32, |s, &v| s.wrapping_add((v ^ a_flip) as i32));
                    let za = a.zero(r).wrapping_add(oa);
                    let out = core::slice::from_raw_parts_mut(acc.add(r * n + c0), width);
                    for ((o, &col_sum), &zb) in out.iter_mut().zip(sums.iter()).zip(zbs.iter()) {
                        *o = o
                            .wrapping_sub(zb.wrapping_mul(row_sum))
                            .wrapping_sub(za.wrapping_mul(col_sum))
                            .wrapping_add(ki.wrapping_mul(za).wrapping_mul(zb));
                    }
                }
            }
        },
    )
}

/// Columns whose sums the corrections hold on the stack at a time.
pub(crate) const COLUMN_CHUNK: usize = 256;

/// `raw` (`m x n`) = `(a ^ a_flip) · (b ^ b_flip)`, A read unsigned and B
/// signed, through `kernel` (the portable loops if this CPU lacks it).
/// `k >= 1`.
///
/// # Safety
/// `a` holds `m·k` bytes, `b` `k·n`, `raw` `m·n` i32s.
pub(crate) unsafe fn raw_byte_product(
    kernel: ByteKernel,
    [m, k, n]: [usize; 3],
    a: *const u8,
    a_flip: u8,
    b: *const u8,
    b_flip: u8,
    raw: *mut i32,
) {
    if !crate::isa::choose::byte_product(kernel, [m, k, n], a, a_flip, b, b_flip, raw) {
        portable_u8i8([m, k, n], a, a_flip, b, b_flip, raw);
    }
}

/// `sums[j]` = the sum over the `k` rows of `b` (`k x n` bytes, flipped by
/// `b_flip` and read signed) of column `c0 + j`, accumulated row by row (so
/// the loop runs along memory) and compiled for the widest vectors: with
/// the baseline's SSE2 these sums of bytes cost a sixth of a pointwise
/// convolution's product.
///
/// # Safety
/// `b` holds `k·n` bytes and `c0 + sums.len() <= n`.
pub(crate) unsafe fn column_sums([k, n]: [usize; 2], b: *const u8, b_flip: u8, c0: usize, sums: &mut [i32]) {
    crate::isa::with_widest_vectors(
        #[inline(always)]
        move || {
            sums.fill(0);
            for q in 0..k {
                let row = core::slice::from_raw_parts(b.add(q * n + c0), sums.len());
                for (s, &v) in sums.iter_mut().zip(row) {
                    *s = s.wrapping_add((v ^ b_flip) as i8 as i32);
                }
            }
        },
    )
}

/// The raw product `(a ^ a_flip) · (b ^ b_flip)`, A unsigned and B signed,
/// by plain loops: each row of the output accumulates scaled rows of B, a
/// loop along memory that the compiler vectorises. Products are at most
/// 255·128 in magnitude; the sums wrap as the reference's do.
unsafe fn portable_u8i8([m, k, n]: [usize; 3], a: *const u8, a_flip: u8, b: *const u8, b_flip: u8, raw: *mut i32) {
    for r in 0..m {
        let out = core::slice::from_raw_parts_mut(raw.add(r * n), n);
        out.fill(0);
        for q in 0..k {
            let x = (*a.add(r * k + q) ^ a_flip) as i32;
            let row = core::slice::from_raw_parts(b.add(q * n), n);
            for (o, &v) in out.iter_mut().zip(row) {
                *o = o.wrapping_add(x * (v ^ b_flip) as i8 as i32);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{isa_runs_here, rand_bytes as bytes};
    use std::vec;
    use std::vec::Vec;

    /// The kernels this CPU has (each one checked separately, not only the
    /// best); see [`isa_runs_here`] for those it lacks.
    pub(crate) fn kernels() -> Vec<ByteKernel> {
        let runs = |k: &ByteKernel| *k == ByteKernel::Generic || isa_runs_here(k.name(), k.available());
        ByteKernel::ALL.into_iter().filter(runs).collect()
    }

    fn matrix(data: &[u8], dtype: i64, zp: &[u8], indexed: bool) -> IntMatrix {
        let zp = if zp.is_empty() { core::ptr::null() } else { zp.as_ptr() };
        IntMatrix { data: data.as_ptr(), dtype, zp, zp_indexed: indexed, zp_first: 0 }
    }

    /// Checks every available kernel against the reference on one problem,
    /// for all four signedness pairs and per-tensor, per-row/column and
    /// absent zero points.
    fn check_all(m: usize, k: usize, n: usize, a: &[u8], b: &[u8], a_zp: &[u8], b_zp: &[u8]) {
        for (a_type, b_type) in [(ELEM_U8, ELEM_I8), (ELEM_U8, ELEM_U8), (ELEM_I8, ELEM_I8), (ELEM_I8, ELEM_U8)] {
            for zps in 0..3 {
                let (za, zb): (&[u8], &[u8]) = match zps {
                    0 => (&[], &[]),
                    1 => (&a_zp[..1], &b_zp[..1]),
                    _ => (a_zp, b_zp),
                };
                let (am, bm) = (matrix(a, a_type, za, zps == 2), matrix(b, b_type, zb, zps == 2));
                let mut want = vec![0i32; m * n];
                unsafe { reference_product([m, k, n], &am, &bm, want.as_mut_ptr()) };
                for kernel in kernels() {
                    let mut got = vec![i32::MIN; m * n];
                    unsafe { integer_product(kernel, [m, k, n], am, bm, got.as_mut_ptr()) };
                    assert_eq!(got, want, "{} {m}x{k}x{n}, types {a_type}/{b_type}, zero points {zps}", kernel.name());
                }
            }
        }
    }

    #[test]
    fn the_best_kernel_is_tested() {
        assert!(kernels().contains(&ByteKernel::best()));
    }

    #[test]
    fn every_kernel_matches_the_reference_on_random_data() {
        // Row tails (VNNI's groups of 8, 4, 2 and 1 rows, AVX2's 4), column
        // tails (16) and depth tails (4, 256), the correction chunk of 256
        // columns, and a single element.
        for &(m, k, n) in
            &[(1, 1, 1), (5, 3, 17), (9, 259, 33), (4, 512, 16), (7, 6, 40), (3, 1, 300), (6, 513, 7), (17, 64, 31)]
        {
            let (a, b) = (bytes(m * k, 7 + m as u32), bytes(k * n, 11 + n as u32));
            check_all(m, k, n, &a, &b, &bytes(m, 3), &bytes(n, 5));
        }
    }

    #[test]
    fn every_kernel_is_exact_on_extreme_values() {
        // All 0xff (255 as u8, -1 as i8) or all 0x80 (128, -128) times
        // all 0x80, 0x7f (127), 0x00 or 0xff, with zero points at both
        // ends of the range, over depths long enough that the i32 sums wrap
        // (255 * 128 * 70000 > 2^31).
        for (&(m, k, n), a_fill) in [(3, 70_001, 5), (5, 1027, 19)].iter().flat_map(|s| [(s, 0xffu8), (s, 0x80)]) {
            let a = vec![a_fill; m * k];
            for fill in [0x80u8, 0x7f, 0x00, 0xff] {
                let b = vec![fill; k * n];
                for (za, zb) in [(0u8, 0u8), (255, 0x80), (0x80, 0x7f)] {
                    check_all(m, k, n, &a, &b, &vec![za; m], &vec![zb; n]);
                }
            }
        }
    }

    #[test]
    fn an_empty_depth_gives_zeros() {
        let mut acc = [7i32; 6];
        let a = matrix(&[], ELEM_U8, &[], false);
        for kernel in kernels() {
            unsafe { integer_product(kernel, [2, 0, 3], a, a, acc.as_mut_ptr()) };
            assert_eq!(acc, [0; 6]);
        }
    }

    #[test]
    fn sixteen_bit_operands_take_the_reference_loops() {
        let a: [u16; 4] = [1, 2, 3, 4];
        let b: [i16; 4] = [-5, 6, 7, -8];
        let zb = [1i16];
        let am = IntMatrix {
            data: a.as_ptr() as *const u8,
            dtype: ELEM_U16,
            zp: core::ptr::null(),
            zp_indexed: false,
            zp_first: 0,
        };
        let bm = IntMatrix {
            data: b.as_ptr() as *const u8,
            dtype: ELEM_I16,
            zp: zb.as_ptr() as *const u8,
            zp_indexed: false,
            zp_first: 0,
        };
        let mut acc = [0i32; 4];
        unsafe { integer_product(ByteKernel::best(), [2, 2, 2], am, bm, acc.as_mut_ptr()) };
        // [[1,2],[3,4]] x [[-6,5],[6,-9]]
        assert_eq!(acc, [6, -13, 6, -21]);
    }
}
