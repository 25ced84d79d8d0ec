//! AVX2 8-bit products for CPUs without AVX-512 VNNI: the same contract as
//! [`super::vnni::product_u8i8`] (`raw[r][c] = Σ_q a[r][q] · b[q][c]`, A
//! read as unsigned and B as signed bytes after their flips, wrapping i32
//! sums), so `generic::qproduct` applies the same zero-point corrections.
//!
//! Why not `vpmaddubsw`: it multiplies u8 by i8 and adds the two products
//! of a pair into an i16 with *saturation*, and 255·127·2 = 64770 (or
//! 255·(-128)·2 = -65280) does not fit in i16, so it is not exact for
//! arbitrary data. This kernel widens both operands to i16 first and uses
//! `vpmaddwd`, which adds the two i16·i16 products of a pair into an i32:
//!
//! * A's bytes become i16 in `[0, 255]` (`vpshufb` zero-extends a broadcast
//!   quad into two pairs), B's become i16 in `[-128, 127]` (sign-extended
//!   while packing);
//! * each product lies in `[-32640, 32385]` and a pair sum in
//!   `[-65280, 64770]`, far inside i32, so `vpmaddwd` is exact (its one
//!   wrapping case, both pairs `-32768 · -32768`, cannot occur);
//! * the pair sums are accumulated by `vpaddd`, which wraps modulo 2^32
//!   exactly as the reference's `wrapping_add`, and a sum modulo 2^32 does
//!   not depend on its order.
//!
//! So every output equals the reference's i32 value bit for bit. B is
//! packed [`COLS`] columns by [`DEPTH`] rows at a time into an 8 KiB stack
//! buffer (i16 pairs, zero-padded past the edges, so padding adds 0 and
//! nothing is read past either operand); no scratch memory is needed.
//!
//! Each tile of [`ROWS`] rows of A is widened (flipped, zero-extended to
//! i16, the depth padded with zeros to whole quads) into a 2 KiB stack
//! buffer before its inner loop, so that loop is two broadcast loads and
//! four `vpmaddwd` + `vpaddd` per row and quad: with the flip and the
//! widening shuffles inside it, the eight sums, four B vectors and the
//! shuffle constants did not fit the 16 ymm registers and the sums were
//! spilled to the stack on every step (half the speed, on Zen 3).

use core::arch::x86_64::*;

/// Columns per block: two ymm of 8 i32 sums.
const COLS: usize = 16;
/// Depth of one packed B slice (a multiple of 4).
const DEPTH: usize = 256;
/// Rows sharing each packed B load.
const ROWS: usize = 4;
/// i32 words of one packed quad of depth steps: low pairs then high pairs
/// of the [`COLS`] columns.
const QUAD_WORDS: usize = 2 * COLS;

/// Writes `raw` (`m x n`, row-major) = `(a ^ a_flip) · (b ^ b_flip)` for
/// `a` `m x k` and `b` `k x n`, both row-major bytes; `a` is then read as
/// unsigned and `b` as signed. `k` must be at least 1.
///
/// # Safety
/// The CPU must have AVX2; `a` holds `m·k` bytes, `b` `k·n`, `raw` `m·n`
/// i32s.
#[target_feature(enable = "avx2")]
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
    let mut packed = [0i32; QUAD_WORDS * DEPTH / 4];
    let mut wide = [0i16; ROWS * DEPTH];
    for c0 in (0..n).step_by(COLS) {
        let width = COLS.min(n - c0);
        let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let lanes = |first: usize| _mm256_cmpgt_epi32(_mm256_set1_epi32(width as i32 - first as i32), lane);
        let masks = [lanes(0), lanes(8)];
        for q0 in (0..k).step_by(DEPTH) {
            let depth = DEPTH.min(k - q0);
            pack_b(&mut packed, b, n, c0, width, q0, depth, b_flip);
            let block = Block { packed: &packed, a: a.add(q0), k, depth, a_flip, width, masks, accumulate: q0 > 0 };
            let mut r = 0;
            while r < m {
                let out = raw.add(r * n + c0);
                match m - r {
                    1 => block.rows::<1>(&mut wide, r * k, out, n),
                    2 => block.rows::<2>(&mut wide, r * k, out, n),
                    3 => block.rows::<3>(&mut wide, r * k, out, n),
                    _ => block.rows::<ROWS>(&mut wide, r * k, out, n),
                }
                r += ROWS;
            }
        }
    }
}

/// One packed B slice and what the rows multiplying it share.
struct Block<'a> {
    packed: &'a [i32],
    /// A advanced to the slice's first depth step.
    a: *const u8,
    k: usize,
    depth: usize,
    a_flip: u8,
    width: usize,
    /// Lanes `< width` of the two column vectors.
    masks: [__m256i; 2],
    /// Add to `raw` (a later depth slice) rather than overwrite it.
    accumulate: bool,
}

impl Block<'_> {
    /// `R` rows starting at A offset `row` into `out` (row stride `n`),
    /// widened into `wide` first.
    #[inline(always)]
    unsafe fn rows<const R: usize>(&self, wide: &mut [i16; ROWS * DEPTH], row: usize, out: *mut i32, n: usize) {
        for i in 0..R {
            widen_row(self.a.add(row + i * self.k), self.depth, self.a_flip, &mut wide[i * DEPTH..(i + 1) * DEPTH]);
        }
        let full = self.width == COLS;
        let mut acc = [[_mm256_setzero_si256(); 2]; R];
        if self.accumulate {
            for (i, sums) in acc.iter_mut().enumerate() {
                for (h, sum) in sums.iter_mut().enumerate() {
                    let p = out.add(i * n + 8 * h) as *const i32;
                    *sum = if full {
                        _mm256_loadu_si256(p as *const __m256i)
                    } else {
                        _mm256_maskload_epi32(p, self.masks[h])
                    };
                }
            }
        }
        let pairs = wide.as_ptr() as *const i32;
        for g in 0..self.depth.div_ceil(4) {
            let words = self.packed.as_ptr().add(g * QUAD_WORDS) as *const __m256i;
            let (low0, low1) = (_mm256_loadu_si256(words), _mm256_loadu_si256(words.add(1)));
            let (high0, high1) = (_mm256_loadu_si256(words.add(2)), _mm256_loadu_si256(words.add(3)));
            for (i, sums) in acc.iter_mut().enumerate() {
                // The i16 pairs of depth steps (4g, 4g+1) and (4g+2, 4g+3).
                let quad = pairs.add(i * DEPTH / 2 + 2 * g);
                let (pairs_low, pairs_high) =
                    (_mm256_set1_epi32(quad.read_unaligned()), _mm256_set1_epi32(quad.add(1).read_unaligned()));
                let add = |sum: __m256i, lo: __m256i, hi: __m256i| {
                    let s = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs_low, lo));
                    _mm256_add_epi32(s, _mm256_madd_epi16(pairs_high, hi))
                };
                sums[0] = add(sums[0], low0, high0);
                sums[1] = add(sums[1], low1, high1);
            }
        }
        for (i, sums) in acc.iter().enumerate() {
            for (h, sum) in sums.iter().enumerate() {
                let p = out.add(i * n + 8 * h);
                if full {
                    _mm256_storeu_si256(p as *mut __m256i, *sum);
                } else {
                    _mm256_maskstore_epi32(p, self.masks[h], *sum);
                }
            }
        }
    }
}

/// `wide[..]` = the `depth` bytes at `src` flipped by `flip` and
/// zero-extended to i16, then zeros up to the next whole quad (the inner
/// loop reads whole quads). Sixteen bytes at a time by vectors.
#[inline(always)]
unsafe fn widen_row(src: *const u8, depth: usize, flip: u8, wide: &mut [i16]) {
    let flips = _mm_set1_epi8(flip as i8);
    let mut q = 0;
    while q + 16 <= depth {
        let bytes = _mm_xor_si128(_mm_loadu_si128(src.add(q) as *const __m128i), flips);
        _mm256_storeu_si256(wide.as_mut_ptr().add(q) as *mut __m256i, _mm256_cvtepu8_epi16(bytes));
        q += 16;
    }
    for (j, w) in wide[q..depth.next_multiple_of(4)].iter_mut().enumerate() {
        *w = if q + j < depth { (*src.add(q + j) ^ flip) as i16 } else { 0 };
    }
}

/// Packs `b[q0..q0+depth][c0..c0+width]` (flipped by `flip`, sign-extended
/// to i16) by quads of depth steps: word `g·32 + col` holds rows
/// `(4g, 4g+1)` of column `col` as an i16 pair, word `g·32 + 16 + col`
/// rows `(4g+2, 4g+3)`. Padding (columns past `width`, rows past `depth`)
/// is 0, which adds 0. Whole quads of all 16 columns go by vectors.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2")]
unsafe fn pack_b(
    packed: &mut [i32],
    b: *const u8,
    n: usize,
    c0: usize,
    width: usize,
    q0: usize,
    depth: usize,
    flip: u8,
) {
    let at = |q: usize, col: usize| -> u16 {
        if q < depth && col < width {
            (*b.add((q0 + q) * n + c0 + col) ^ flip) as i8 as i16 as u16
        } else {
            0
        }
    };
    let flips = _mm_set1_epi8(flip as i8);
    let row = |q: usize| {
        let bytes = _mm_loadu_si128(b.add((q0 + q) * n + c0) as *const __m128i);
        _mm256_cvtepi8_epi16(_mm_xor_si128(bytes, flips))
    };
    for g in 0..depth.div_ceil(4) {
        let words = &mut packed[g * QUAD_WORDS..(g + 1) * QUAD_WORDS];
        let q = 4 * g;
        if width == COLS && q + 4 <= depth {
            for (half, t) in [(0, q), (COLS, q + 2)] {
                let (first, second) = (row(t), row(t + 1));
                // In-lane interleaves give columns 0-3 and 8-11 (low),
                // 4-7 and 12-15 (high); the lane permutes put them in order.
                let (low, high) = (_mm256_unpacklo_epi16(first, second), _mm256_unpackhi_epi16(first, second));
                let out = words.as_mut_ptr().add(half) as *mut __m256i;
                _mm256_storeu_si256(out, _mm256_permute2x128_si256::<0x20>(low, high));
                _mm256_storeu_si256(out.add(1), _mm256_permute2x128_si256::<0x31>(low, high));
            }
            continue;
        }
        for col in 0..COLS {
            words[col] = (at(q, col) as u32 | (at(q + 1, col) as u32) << 16) as i32;
            words[COLS + col] = (at(q + 2, col) as u32 | (at(q + 3, col) as u32) << 16) as i32;
        }
    }
}
