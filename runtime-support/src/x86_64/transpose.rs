//! Float transposes in registers: 8×8 in ymm, 16×16 in zmm. The reorders
//! into and out of the blocked layout ([`crate::generic::blocked`]) take
//! one per 8 pixels of a channel block, instead of 64 scalar moves with a
//! stride; the channels-in-lanes depthwise kernel
//! ([`super::depthwise_lanes`]) one per vector of pixels.

use core::arch::x86_64::*;

/// Writes the transpose of the 8×8 block at `src` (rows `src_stride`
/// floats apart) to `dst` (rows `dst_stride` floats apart).
///
/// # Safety
/// The 8 rows of 8 floats at `src` are readable and those at `dst`
/// writable; the CPU has AVX.
#[target_feature(enable = "avx")]
pub(crate) unsafe fn transpose8x8(src: *const f32, src_stride: usize, dst: *mut f32, dst_stride: usize) {
    let rows = transpose8(core::array::from_fn(|i| _mm256_loadu_ps(src.add(i * src_stride))));
    for (i, row) in rows.into_iter().enumerate() {
        _mm256_storeu_ps(dst.add(i * dst_stride), row);
    }
}

/// The transpose of 8 rows of 8 floats: element `j` of row `i` becomes
/// element `i` of row `j`. Written without closures, which would not take
/// the target features of the AVX function it is inlined into.
#[inline(always)]
pub(crate) unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // Pairs of rows interleaved, then pairs of pairs (column `j` of each
    // quad's four rows in 128-bit halves), then the halves swapped.
    let mut t = [_mm256_setzero_ps(); 8];
    for i in (0..8).step_by(2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    let mut u = [_mm256_setzero_ps(); 8];
    for quad in [0, 4] {
        for half in 0..2 {
            let (a, b) = (t[quad + half], t[quad + 2 + half]);
            u[quad + 2 * half] = _mm256_shuffle_ps::<0x44>(a, b);
            u[quad + 2 * half + 1] = _mm256_shuffle_ps::<0xEE>(a, b);
        }
    }
    let mut out = [_mm256_setzero_ps(); 8];
    for i in 0..4 {
        out[i] = _mm256_permute2f128_ps::<0x20>(u[i], u[4 + i]);
        out[4 + i] = _mm256_permute2f128_ps::<0x31>(u[i], u[4 + i]);
    }
    out
}

/// The transpose of 16 rows of 16 floats, as [`transpose8`] (and without
/// closures for the same reason), in AVX-512F.
#[inline(always)]
pub(crate) unsafe fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    // In each 128-bit lane, as in `transpose8`: pairs of rows interleaved,
    // then pairs of pairs, so that `u[4q + j]`'s lane `l` is column
    // `4l + j` of rows `4q..4q + 4`.
    let mut t = [_mm512_setzero_ps(); 16];
    for i in (0..16).step_by(2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    let mut u = [_mm512_setzero_ps(); 16];
    for quad in (0..16).step_by(4) {
        for half in 0..2 {
            let (a, b) = (t[quad + half], t[quad + 2 + half]);
            u[quad + 2 * half] = _mm512_shuffle_ps::<0x44>(a, b);
            u[quad + 2 * half + 1] = _mm512_shuffle_ps::<0xEE>(a, b);
        }
    }
    // Then the 128-bit lanes: `v[8h + 2j]` holds lanes 0-1 of column `j`
    // in quads `2h` and `2h + 1`, `v[8h + 2j + 1]` lanes 2-3...
    let mut v = [_mm512_setzero_ps(); 16];
    for h in 0..2 {
        for j in 0..4 {
            let (a, b) = (u[8 * h + j], u[8 * h + 4 + j]);
            v[8 * h + 2 * j] = _mm512_shuffle_f32x4::<0x44>(a, b);
            v[8 * h + 2 * j + 1] = _mm512_shuffle_f32x4::<0xEE>(a, b);
        }
    }
    // ... and column `4l + j` takes lane `l` of each of the four quads.
    let mut out = [_mm512_setzero_ps(); 16];
    for j in 0..4 {
        for high in 0..2 {
            let (a, b) = (v[2 * j + high], v[8 + 2 * j + high]);
            out[8 * high + j] = _mm512_shuffle_f32x4::<0x88>(a, b);
            out[8 * high + 4 + j] = _mm512_shuffle_f32x4::<0xDD>(a, b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::Isa;

    /// Both transposes against the index arithmetic.
    #[test]
    fn transposes_swap_rows_and_columns() {
        let m: [f32; 256] = core::array::from_fn(|i| i as f32);
        let testable = crate::generic::test_util::testable_isas();
        if testable.contains(&Isa::Avx512) {
            let got = unsafe { wide(&m) };
            for (i, row) in got.iter().enumerate() {
                assert!(row.iter().enumerate().all(|(j, &v)| v == m[j * 16 + i]), "row {i}: {row:?}");
            }
        }
        if testable.contains(&Isa::Avx2Fma) {
            let mut got = [0.0f32; 64];
            unsafe { transpose8x8(m.as_ptr(), 8, got.as_mut_ptr(), 8) };
            assert!(got.iter().enumerate().all(|(k, &v)| v == m[k % 8 * 8 + k / 8]), "{got:?}");
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn wide(m: &[f32; 256]) -> [[f32; 16]; 16] {
        let rows = transpose16(core::array::from_fn(|i| _mm512_loadu_ps(m.as_ptr().add(16 * i))));
        let mut out = [[0.0f32; 16]; 16];
        for (o, r) in out.iter_mut().zip(rows) {
            _mm512_storeu_ps(o.as_mut_ptr(), r);
        }
        out
    }
}
