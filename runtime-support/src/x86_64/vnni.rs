//! AVX-512 VNNI 8-bit products: `raw[r][c] = Σ_q a[r][q] · b[q][c]` with A
//! read as unsigned and B as signed bytes, summed in i32 by `vpdpbusd`
//! (four products per lane per instruction, no saturation), the core of
//! MatMulInteger and QLinearMatMul.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes only, so the other
//! signednesses are reached by flipping the top bit (`x ^ 0x80` turns a u8
//! `v` into the i8 `v - 128` and an i8 `s` into the u8 `s + 128`); the
//! caller folds those offsets, like the zero points, into corrections by
//! row and column sums (`generic::quant`). B is packed 16 columns by
//! [`DEPTH`] rows at a time into a 4 KiB stack buffer, four depth steps per
//! lane, zero-padded, so the kernel needs no scratch memory and never
//! reads past either operand.

use core::arch::x86_64::*;

/// Columns per block: one zmm of 16 i32 sums.
const COLS: usize = 16;
/// Depth of one packed B slice (16 x 256 bytes on the stack).
const DEPTH: usize = 256;
/// Rows sharing each packed B load.
const ROWS: usize = 4;

/// Writes `raw` (`m x n`, row-major) = `(a ^ a_flip) · (b ^ b_flip)` for
/// `a` `m x k` and `b` `k x n`, both row-major bytes; `a` is then read as
/// unsigned and `b` as signed.
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512 VNNI; `a` holds `m·k` bytes, `b`
/// `k·n`, `raw` `m·n` i32s.
#[target_feature(enable = "avx512f,avx512vnni")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn product_u8i8(
    m: usize,
    n: usize,
    k: usize,
    a: *const u8,
    a_flip: u8,
    b: *const u8,
    b_flip: u8,
    raw: *mut i32,
) {
    let mut packed = [0u32; COLS * DEPTH / 4];
    for c0 in (0..n).step_by(COLS) {
        let width = COLS.min(n - c0);
        let lanes: __mmask16 = if width == COLS { 0xffff } else { (1u16 << width) - 1 };
        for q0 in (0..k).step_by(DEPTH) {
            let depth = DEPTH.min(k - q0);
            let groups = depth.div_ceil(4);
            pack_b(&mut packed, b, n, c0, width, q0, depth, b_flip);
            let a_flips = u32::from_ne_bytes([a_flip; 4]);
            let mut r = 0;
            while r < m {
                let rows = ROWS.min(m - r);
                let mut acc = [_mm512_setzero_si512(); ROWS];
                for (i, sum) in acc.iter_mut().enumerate().take(rows) {
                    if q0 > 0 {
                        *sum = _mm512_maskz_loadu_epi32(lanes, raw.add((r + i) * n + c0));
                    }
                }
                for g in 0..groups {
                    let slice = _mm512_loadu_si512(packed.as_ptr().add(g * COLS) as *const __m512i);
                    for (i, sum) in acc.iter_mut().enumerate().take(rows) {
                        let quad = load_quad(a.add((r + i) * k + q0 + 4 * g), depth - 4 * g) ^ a_flips;
                        *sum = _mm512_dpbusd_epi32(*sum, _mm512_set1_epi32(quad as i32), slice);
                    }
                }
                for (i, sum) in acc.iter().enumerate().take(rows) {
                    _mm512_mask_storeu_epi32(raw.add((r + i) * n + c0), lanes, *sum);
                }
                r += rows;
            }
        }
    }
}

/// Up to four bytes from `p` (`left` of them readable), zero-padded.
#[inline(always)]
unsafe fn load_quad(p: *const u8, left: usize) -> u32 {
    if left >= 4 {
        return (p as *const u32).read_unaligned();
    }
    let mut bytes = [0u8; 4];
    core::ptr::copy_nonoverlapping(p, bytes.as_mut_ptr(), left);
    u32::from_ne_bytes(bytes)
}

/// Packs `b[q0..q0+depth][c0..c0+width]` (flipped by `flip`) as groups of
/// four depth steps per column: word `g·16 + col` holds rows `4g..4g+4`.
/// Padding (columns past `width`, rows past `depth`) is 0, which adds 0.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn pack_b(
    packed: &mut [u32],
    b: *const u8,
    n: usize,
    c0: usize,
    width: usize,
    q0: usize,
    depth: usize,
    flip: u8,
) {
    for g in 0..depth.div_ceil(4) {
        for col in 0..COLS {
            let mut bytes = [0u8; 4];
            if col < width {
                for (t, byte) in bytes.iter_mut().enumerate() {
                    let q = 4 * g + t;
                    if q < depth {
                        *byte = *b.add((q0 + q) * n + c0 + col) ^ flip;
                    }
                }
            }
            packed[g * COLS + col] = u32::from_ne_bytes(bytes);
        }
    }
}
