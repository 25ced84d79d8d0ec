//! AVX-512 VNNI 8-bit products: `raw[r][c] = Σ_q a[r][q] · b[q][c]` with A
//! read as unsigned and B as signed bytes, summed in i32 by `vpdpbusd`
//! (four products per lane per instruction, no saturation), the core of
//! the integer-product operators on CPUs that have it.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes only, so the other
//! signednesses are reached by flipping the top bit (`x ^ 0x80` turns a u8
//! `v` into the i8 `v - 128` and an i8 `s` into the u8 `s + 128`); the
//! caller folds those offsets, like the zero points, into corrections by
//! row and column sums (`generic::qproduct`). B is packed [`COLS`] columns
//! by [`DEPTH`] rows at a time into an 8 KiB stack buffer, four depth steps
//! per lane, zero-padded, so the kernel needs no scratch memory and never
//! reads past either operand. Each A quad broadcast feeds two `vpdpbusd`
//! (32 columns), and [`ROWS`] rows share each load of packed B.

use core::arch::x86_64::*;

/// Columns per block: two zmm of 16 i32 sums.
const COLS: usize = 32;
/// Depth of one packed B slice (32 x 256 bytes on the stack).
const DEPTH: usize = 256;
/// Rows sharing each packed B load: sixteen independent sums, enough to
/// cover `vpdpbusd`'s latency at two per cycle (four rows' eight were
/// latency-bound), in 16 of the 32 zmm registers.
const ROWS: usize = 8;

/// Writes `raw` (`m x n`, row-major) = `(a ^ a_flip) · (b ^ b_flip)` for
/// `a` `m x k` and `b` `k x n`, both row-major bytes; `a` is then read as
/// unsigned and `b` as signed. `k` must be at least 1.
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
        let lanes = |first: usize| -> __mmask16 {
            let w = width.saturating_sub(first).min(16);
            if w == 16 {
                0xffff
            } else {
                (1u16 << w) - 1
            }
        };
        let masks = [lanes(0), lanes(16)];
        for q0 in (0..k).step_by(DEPTH) {
            let depth = DEPTH.min(k - q0);
            pack_b(&mut packed, b, n, c0, width, q0, depth, b_flip);
            let block = Block { packed: &packed, a: a.add(q0), k, depth, a_flip, masks, accumulate: q0 > 0 };
            let mut r = 0;
            while r < m {
                let out = raw.add(r * n + c0);
                // Tails by halving groups: 8, then 4, 2, 1 rows.
                r += match m - r {
                    1 => block.rows::<1>(r * k, out, n),
                    2 | 3 => block.rows::<2>(r * k, out, n),
                    4..ROWS => block.rows::<{ ROWS / 2 }>(r * k, out, n),
                    _ => block.rows::<ROWS>(r * k, out, n),
                };
            }
        }
    }
}

/// One packed B slice and what the rows multiplying it share.
struct Block<'a> {
    packed: &'a [u32],
    /// A advanced to the slice's first depth step.
    a: *const u8,
    k: usize,
    depth: usize,
    a_flip: u8,
    /// Lanes inside the matrix of the two column vectors.
    masks: [__mmask16; 2],
    /// Add to `raw` (a later depth slice) rather than overwrite it.
    accumulate: bool,
}

impl Block<'_> {
    /// `R` rows starting at A offset `row` into `out` (row stride `n`);
    /// returns `R`.
    #[inline(always)]
    unsafe fn rows<const R: usize>(&self, row: usize, out: *mut i32, n: usize) -> usize {
        let flips = _mm512_set1_epi8(self.a_flip as i8);
        let mut acc = [[_mm512_setzero_si512(); 2]; R];
        if self.accumulate {
            for (i, sums) in acc.iter_mut().enumerate() {
                for (h, sum) in sums.iter_mut().enumerate() {
                    *sum = _mm512_maskz_loadu_epi32(self.masks[h], out.add(i * n + 16 * h));
                }
            }
        }
        for g in 0..self.depth.div_ceil(4) {
            let words = self.packed.as_ptr().add(g * COLS) as *const __m512i;
            let (low, high) = (_mm512_loadu_si512(words), _mm512_loadu_si512(words.add(1)));
            for (i, sums) in acc.iter_mut().enumerate() {
                let src = self.a.add(row + i * self.k + 4 * g);
                let quad = _mm512_xor_si512(broadcast_quad(src, self.depth - 4 * g), flips);
                sums[0] = _mm512_dpbusd_epi32(sums[0], quad, low);
                sums[1] = _mm512_dpbusd_epi32(sums[1], quad, high);
            }
        }
        for (i, sums) in acc.iter().enumerate() {
            for (h, sum) in sums.iter().enumerate() {
                _mm512_mask_storeu_epi32(out.add(i * n + 16 * h), self.masks[h], *sum);
            }
        }
        R
    }
}

/// Up to four bytes from `p` (`left` of them readable, zero-padded)
/// broadcast to every i32 lane.
#[inline(always)]
unsafe fn broadcast_quad(p: *const u8, left: usize) -> __m512i {
    _mm512_set1_epi32(super::read_quad(p, left))
}

/// Packs `b[q0..q0+depth][c0..c0+width]` (flipped by `flip`) as groups of
/// four depth steps per column: word `g·32 + col` holds rows `4g..4g+4`.
/// Padding (columns past `width`, rows past `depth`) is 0, which adds 0.
/// Whole quads of 16 columns go by vectors.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512vnni")]
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
    let flips = _mm_set1_epi8(flip as i8);
    for g in 0..depth.div_ceil(4) {
        let words = &mut packed[g * COLS..(g + 1) * COLS];
        for (half, first) in [0, 16].into_iter().enumerate() {
            let words = &mut words[16 * half..16 * half + 16];
            if width >= first + 16 && 4 * g + 4 <= depth {
                let row = |t: usize| {
                    let p = b.add((q0 + 4 * g + t) * n + c0 + first) as *const __m128i;
                    _mm_xor_si128(_mm_loadu_si128(p), flips)
                };
                let [r0, r1, r2, r3] = [0, 1, 2, 3].map(row);
                // Byte pairs of rows (0, 1) and (2, 3), then pairs of pairs:
                // the four bytes of each column in row order.
                let (low01, high01) = (_mm_unpacklo_epi8(r0, r1), _mm_unpackhi_epi8(r0, r1));
                let (low23, high23) = (_mm_unpacklo_epi8(r2, r3), _mm_unpackhi_epi8(r2, r3));
                let out = words.as_mut_ptr() as *mut __m128i;
                _mm_storeu_si128(out, _mm_unpacklo_epi16(low01, low23));
                _mm_storeu_si128(out.add(1), _mm_unpackhi_epi16(low01, low23));
                _mm_storeu_si128(out.add(2), _mm_unpacklo_epi16(high01, high23));
                _mm_storeu_si128(out.add(3), _mm_unpackhi_epi16(high01, high23));
                continue;
            }
            for (j, word) in words.iter_mut().enumerate() {
                let col = first + j;
                let mut bytes = [0u8; 4];
                if col < width {
                    for (t, byte) in bytes.iter_mut().enumerate() {
                        let q = 4 * g + t;
                        if q < depth {
                            *byte = *b.add((q0 + q) * n + c0 + col) ^ flip;
                        }
                    }
                }
                *word = u32::from_ne_bytes(bytes);
            }
        }
    }
}
