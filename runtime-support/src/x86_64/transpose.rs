//! 8×8 float transposes in ymm registers: the reorders into and out of
//! the blocked layout ([`crate::generic::blocked`]) are one per 8 pixels of
//! a channel block, instead of 64 scalar moves with a stride.

use core::arch::x86_64::*;

/// Writes the transpose of the 8×8 block at `src` (rows `src_stride`
/// floats apart) to `dst` (rows `dst_stride` floats apart).
///
/// # Safety
/// The 8 rows of 8 floats at `src` are readable and those at `dst`
/// writable; the CPU has AVX.
#[target_feature(enable = "avx")]
pub(crate) unsafe fn transpose8x8(src: *const f32, src_stride: usize, dst: *mut f32, dst_stride: usize) {
    let r: [__m256; 8] = core::array::from_fn(|i| _mm256_loadu_ps(src.add(i * src_stride)));
    // Pairs of rows interleaved, then pairs of pairs, then the halves swapped.
    let t: [__m256; 8] = core::array::from_fn(|i| {
        let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(a, b)
        } else {
            _mm256_unpackhi_ps(a, b)
        }
    });
    let u: [__m256; 8] = core::array::from_fn(|i| {
        // Column j of the quad's four rows (and column j + 4 in the high half).
        let (quad, j) = (i / 4 * 4, i % 4);
        let (a, b) = (t[quad + j / 2], t[quad + 2 + j / 2]);
        if j % 2 == 0 {
            _mm256_shuffle_ps::<0x44>(a, b)
        } else {
            _mm256_shuffle_ps::<0xEE>(a, b)
        }
    });
    for i in 0..8 {
        // Row i of the result: lanes 0-3 from u[i % 4], lanes 4-7 from u[4 + i % 4], low or high halves.
        let (a, b) = (u[i % 4], u[4 + i % 4]);
        let row = if i < 4 { _mm256_permute2f128_ps::<0x20>(a, b) } else { _mm256_permute2f128_ps::<0x31>(a, b) };
        _mm256_storeu_ps(dst.add(i * dst_stride), row);
    }
}
