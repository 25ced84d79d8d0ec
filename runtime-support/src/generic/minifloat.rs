//! The ONNX float formats narrower than 16 bits: float8 E4M3FN, E4M3FNUZ,
//! E5M2, E5M2FNUZ and E8M0, and float4 E2M1 (whose nibbles are packed two
//! to a byte by the tensors that hold them; here it travels alone, in the
//! low bits). Generated code stores them as raw bit patterns and computes
//! in f32, calling [`onnxc_minifloat_to_f32`] on load and
//! [`onnxc_f32_to_minifloat`] on store, as it does for f16.
//!
//! Narrowing follows the Cast specification: round to nearest even on the
//! target's mantissa width; with `saturate` (the default) infinities and
//! values whose rounding exceeds the largest finite value become that value
//! (with their sign); without it they become infinity (E5M2) or NaN (the
//! others). The FNUZ formats have no negative zero (a negative value that
//! rounds to zero gives +0) and one NaN, 0x80. E2M1 has neither infinity
//! nor NaN, so it always saturates and NaN becomes zero. E8M0 is a power of
//! two `2^(code - 127)` (code 255 is NaN) with no sign and no zero; its
//! rounding mode is Cast's `round_mode` (up, down, nearest with ties up),
//! magnitudes below 2^-127 (zero included) clamp to 2^-127 when saturating
//! and, like overflow, become NaN when not. Widening is exact.
//!
//! The narrowing works on f64 so a double is rounded once; f32 and f16
//! widen to it exactly first.

use crate::abi::minifloat::*;
use crate::abi::{ELEM_F4E2M1, ELEM_F8E4M3FN, ELEM_F8E4M3FNUZ, ELEM_F8E5M2, ELEM_F8E5M2FNUZ, ELEM_F8E8M0};

const ROUND_MASK: i64 = 6;

/// How the values beyond the largest finite one are encoded.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Specials {
    /// E4M3FN: no infinity; NaN is every bit of exponent and mantissa set.
    NanOnly,
    /// E5M2: IEEE-like infinity and NaNs.
    Ieee,
    /// FNUZ: no infinity, no -0, the single NaN 0x80.
    Fnuz,
    /// E2M1: neither infinity nor NaN.
    None,
}

/// A sign/exponent/mantissa format of at most 8 bits (the compiler's
/// portable conversions encode the same rules from it).
#[derive(Clone, Copy, Debug)]
pub struct Format {
    pub man_bits: u32,
    pub bias: i32,
    /// Bit pattern of the largest finite magnitude.
    pub max: u32,
    /// The sign bit.
    pub sign: u32,
    pub specials: Specials,
}

/// The format of element code `elem`, `None` for E8M0 and other codes.
pub fn minifloat_format(elem: i64) -> Option<Format> {
    let f = |man_bits, bias, max, sign, specials| Format { man_bits, bias, max, sign, specials };
    Some(match elem {
        ELEM_F8E4M3FN => f(3, 7, 0x7e, 0x80, Specials::NanOnly),
        ELEM_F8E4M3FNUZ => f(3, 8, 0x7f, 0x80, Specials::Fnuz),
        ELEM_F8E5M2 => f(2, 15, 0x7b, 0x80, Specials::Ieee),
        ELEM_F8E5M2FNUZ => f(2, 16, 0x7f, 0x80, Specials::Fnuz),
        ELEM_F4E2M1 => f(1, 1, 0x7, 0x8, Specials::None),
        _ => return None,
    })
}

/// True for the element codes this module converts.
pub fn is_minifloat_elem(elem: i64) -> bool {
    elem == ELEM_F8E8M0 || minifloat_format(elem).is_some()
}

/// `2^k` for `k` in the normal f32 range.
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// Does the work of the C entry point [`crate::abi::onnxc_minifloat_to_f32`].
pub(crate) fn minifloat_to_f32(bits: i32, elem: i64) -> f32 {
    let bits = bits as u32 & 0xff;
    if elem == ELEM_F8E8M0 {
        return match bits {
            0xff => f32::NAN,
            // 2^-127 is an f32 subnormal.
            0 => f32::from_bits(1 << 22),
            e => f32::from_bits(e << 23),
        };
    }
    let Some(f) = minifloat_format(elem) else {
        return f32::NAN;
    };
    let bits = bits & (f.sign | (f.sign - 1));
    let magnitude = bits & (f.sign - 1);
    let exp = magnitude >> f.man_bits;
    let man = magnitude & ((1 << f.man_bits) - 1);
    let top_exp = (f.sign - 1) >> f.man_bits;
    let special = match f.specials {
        Specials::Fnuz if bits == 0x80 => Some(f32::NAN),
        Specials::NanOnly if magnitude == 0x7f => Some(f32::NAN),
        Specials::Ieee if exp == top_exp => Some(if man == 0 { f32::INFINITY } else { f32::NAN }),
        _ => None,
    };
    let value = special.unwrap_or_else(|| {
        if exp == 0 {
            man as f32 * pow2(1 - f.bias - f.man_bits as i32)
        } else {
            ((1 << f.man_bits) | man) as f32 * pow2(exp as i32 - f.bias - f.man_bits as i32)
        }
    });
    if bits & f.sign != 0 {
        -value
    } else {
        value
    }
}

/// `value >> shift` rounded to nearest even on the dropped bits (also the
/// f16 conversion's rounding).
pub(crate) fn round_shifted(value: u64, shift: u32) -> u64 {
    if shift == 0 {
        return value;
    }
    if shift > 63 {
        return 0;
    }
    let kept = value >> shift;
    let dropped = value & ((1 << shift) - 1);
    let halfway = 1 << (shift - 1);
    if dropped > halfway || (dropped == halfway && kept & 1 == 1) {
        kept + 1
    } else {
        kept
    }
}

/// Does the work of the C entry point [`crate::abi::onnxc_f64_to_minifloat`].
pub(crate) fn f64_to_minifloat(x: f64, elem: i64, mode: i64) -> i32 {
    let saturate = mode & MINIFLOAT_SATURATE != 0;
    if elem == ELEM_F8E8M0 {
        return to_e8m0(x, saturate, mode & ROUND_MASK) as i32;
    }
    let Some(f) = minifloat_format(elem) else {
        return 0;
    };
    let sign = if x.is_sign_negative() { f.sign } else { 0 };
    let nan = match f.specials {
        Specials::Fnuz => 0x80,
        Specials::None => 0,
        _ => sign | 0x7f,
    };
    if x.is_nan() {
        return nan as i32;
    }
    let overflow = if saturate || f.specials == Specials::None {
        sign | f.max
    } else if f.specials == Specials::Ieee {
        sign | 0x7c
    } else {
        nan
    };
    if x.is_infinite() {
        return overflow as i32;
    }
    let bits = x.abs().to_bits();
    let exp = (bits >> 52) as i32;
    // f64 subnormals are far below every format's smallest value.
    let magnitude = if exp == 0 {
        0
    } else {
        let sig = (bits & ((1 << 52) - 1)) | (1 << 52);
        let e = exp - 1023;
        let min_exp = 1 - f.bias;
        if e >= min_exp {
            // Normal: keep `man_bits` below the leading one; a carry out of
            // the mantissa steps the exponent, as the addition encodes.
            let rounded = round_shifted(sig, 52 - f.man_bits);
            (((e - min_exp) as u64) << f.man_bits) + rounded
        } else {
            // Subnormal: multiples of 2^(min_exp - man_bits); rounding up
            // to 1 << man_bits gives the smallest normal.
            round_shifted(sig, 52 - f.man_bits + (min_exp - e) as u32)
        }
    };
    if magnitude > f.max as u64 {
        return overflow as i32;
    }
    if magnitude == 0 && f.specials == Specials::Fnuz {
        return 0;
    }
    (sign | magnitude as u32) as i32
}

/// E8M0 code of `|x|` with rounding `round` (a `MINIFLOAT_ROUND_*`).
fn to_e8m0(x: f64, saturate: bool, round: i64) -> u32 {
    const NAN: u32 = 0xff;
    if x.is_nan() {
        return NAN;
    }
    let a = x.abs();
    if a.is_infinite() {
        return if saturate { 0xfe } else { NAN };
    }
    let bits = a.to_bits();
    // Normalise subnormals: value = 1.frac × 2^e.
    let (e, frac) = if bits >> 52 == 0 {
        if bits == 0 {
            return if saturate { 0 } else { NAN };
        }
        let shift = bits.leading_zeros() - 11;
        (-1022 - shift as i64, (bits << shift) & ((1 << 52) - 1))
    } else {
        ((bits >> 52) as i64 - 1023, bits & ((1 << 52) - 1))
    };
    let up = match round {
        MINIFLOAT_ROUND_DOWN => false,
        MINIFLOAT_ROUND_NEAREST => frac >= 1 << 51,
        _ => frac != 0,
    };
    let e = e + up as i64;
    if e > 127 {
        if saturate {
            0xfe
        } else {
            NAN
        }
    } else if e < -127 {
        if saturate {
            0
        } else {
            NAN
        }
    } else {
        (e + 127) as u32
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    const FLOAT8: [i64; 4] = [ELEM_F8E4M3FN, ELEM_F8E4M3FNUZ, ELEM_F8E5M2, ELEM_F8E5M2FNUZ];
    const SAT: i64 = MINIFLOAT_SATURATE;

    fn codes(elem: i64) -> core::ops::Range<i32> {
        0..if elem == ELEM_F4E2M1 { 16 } else { 256 }
    }

    #[test]
    fn decodes_the_landmarks_of_each_format() {
        // (format, largest finite, smallest subnormal, smallest normal)
        let landmarks = [
            (ELEM_F8E4M3FN, 448.0, 2f32.powi(-9), 2f32.powi(-6)),
            (ELEM_F8E4M3FNUZ, 240.0, 2f32.powi(-10), 2f32.powi(-7)),
            (ELEM_F8E5M2, 57344.0, 2f32.powi(-16), 2f32.powi(-14)),
            (ELEM_F8E5M2FNUZ, 57344.0, 2f32.powi(-17), 2f32.powi(-15)),
            (ELEM_F4E2M1, 6.0, 0.5, 1.0),
        ];
        for (elem, max, tiny, normal) in landmarks {
            let values: Vec<f32> = codes(elem).map(|c| onnxc_minifloat_to_f32(c, elem)).collect();
            let finite: Vec<f32> = values.iter().copied().filter(|v| v.is_finite()).collect();
            let largest = finite.iter().fold(0f32, |m, &v| m.max(v));
            let positive_min = finite.iter().filter(|&&v| v > 0.0).fold(f32::INFINITY, |m, &v| m.min(v));
            assert_eq!((largest, positive_min), (max, tiny), "format {elem}");
            assert_eq!(onnxc_minifloat_to_f32(1 << minifloat_format(elem).unwrap().man_bits, elem), normal);
            // Negation flips the sign bit, except for FNUZ's NaN.
            let sign = minifloat_format(elem).unwrap().sign as i32;
            for c in 1..sign {
                let (p, n) = (values[c as usize], values[(c | sign) as usize]);
                if p.is_nan() {
                    assert!(n.is_nan());
                } else {
                    assert_eq!(-p, n, "format {elem} code {c:#x}");
                }
            }
        }
        assert!(onnxc_minifloat_to_f32(0x80, ELEM_F8E4M3FNUZ).is_nan());
        assert!(onnxc_minifloat_to_f32(0x80, ELEM_F8E5M2FNUZ).is_nan());
        assert!(onnxc_minifloat_to_f32(0x7f, ELEM_F8E4M3FN).is_nan());
        assert!(onnxc_minifloat_to_f32(0xff, ELEM_F8E4M3FN).is_nan());
        assert_eq!(onnxc_minifloat_to_f32(0x80, ELEM_F8E4M3FN).to_bits(), (-0f32).to_bits());
        assert_eq!(onnxc_minifloat_to_f32(0x7c, ELEM_F8E5M2), f32::INFINITY);
        assert_eq!(onnxc_minifloat_to_f32(0xfc, ELEM_F8E5M2), f32::NEG_INFINITY);
        assert!(onnxc_minifloat_to_f32(0x7d, ELEM_F8E5M2).is_nan());
        // Counting NaN codes: E4M3FN 2, FNUZ 1, E5M2 6, E2M1 none.
        for (elem, nans) in [(ELEM_F8E4M3FN, 2), (ELEM_F8E4M3FNUZ, 1), (ELEM_F8E5M2, 6), (ELEM_F4E2M1, 0)] {
            assert_eq!(codes(elem).filter(|&c| onnxc_minifloat_to_f32(c, elem).is_nan()).count(), nans);
        }
    }

    /// The code a search over every finite code picks for `x`: the nearest
    /// value of the same sign, the even code on a tie (codes of one sign
    /// ascend with the magnitude, so "even" is the low bit); a zero result
    /// takes the sign of `x` where the format has a negative zero.
    fn nearest_by_search(x: f64, elem: i64) -> i32 {
        let mut best: Option<(f64, i32)> = None;
        for c in codes(elem) {
            let v = onnxc_minifloat_to_f32(c, elem) as f64;
            if !v.is_finite() || (v != 0.0 && (v < 0.0) != (x < 0.0)) {
                continue;
            }
            let d = (v - x).abs();
            best = match best {
                Some((bd, bc)) if bd < d || (bd == d && bc & 1 == 0) => Some((bd, bc)),
                _ => Some((d, c)),
            };
        }
        let c = best.expect("every format has a zero").1;
        let f = minifloat_format(elem).unwrap();
        if onnxc_minifloat_to_f32(c, elem) != 0.0 {
            c
        } else if x.is_sign_negative() && f.specials != Specials::Fnuz {
            f.sign as i32
        } else {
            0
        }
    }

    fn lcg(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *state >> 11
    }

    #[test]
    fn narrowing_rounds_to_the_nearest_even_code() {
        let mut state = 7u64;
        for elem in FLOAT8.into_iter().chain([ELEM_F4E2M1]) {
            let f = minifloat_format(elem).unwrap();
            let max = onnxc_minifloat_to_f32(f.max as i32, elem) as f64;
            let mut samples: Vec<f64> = Vec::new();
            // Every value, every midpoint between neighbours, and just
            // around each midpoint.
            let mut values: Vec<f64> = codes(elem)
                .map(|c| onnxc_minifloat_to_f32(c, elem) as f64)
                .filter(|v| v.is_finite() && *v >= 0.0)
                .collect();
            values.sort_by(|a, b| a.partial_cmp(b).unwrap());
            for w in values.windows(2) {
                let mid = (w[0] + w[1]) / 2.0;
                samples.extend([w[0], mid, mid * (1.0 + 1e-12), mid * (1.0 - 1e-12)]);
            }
            for _ in 0..2000 {
                samples.push((lcg(&mut state) % 1_000_000) as f64 / 1_000_000.0 * max);
            }
            for x in samples.iter().flat_map(|&x| [x, -x]) {
                let want = nearest_by_search(x, elem);
                let got = onnxc_f64_to_minifloat(x, elem, SAT);
                assert_eq!(got, want, "format {elem}: {x:e}");
                assert_eq!(onnxc_f64_to_minifloat(x, elem, 0), want, "format {elem}, no saturation: {x:e}");
            }
        }
    }

    #[test]
    fn zeros_keep_their_sign_except_in_fnuz() {
        for elem in FLOAT8.into_iter().chain([ELEM_F4E2M1]) {
            let f = minifloat_format(elem).unwrap();
            assert_eq!(onnxc_f32_to_minifloat(0.0, elem, SAT), 0);
            let neg = onnxc_f32_to_minifloat(-0.0, elem, SAT);
            let tiny = onnxc_f32_to_minifloat(-1e-30, elem, SAT);
            let want = if f.specials == Specials::Fnuz { 0 } else { f.sign as i32 };
            assert_eq!((neg, tiny), (want, want), "format {elem}");
        }
    }

    #[test]
    fn out_of_range_values_follow_the_saturate_tables() {
        // (format, saturated max, non-saturated overflow of +x, of -x)
        let cases = [
            (ELEM_F8E4M3FN, 0x7e, 0x7f, 0xff),
            (ELEM_F8E4M3FNUZ, 0x7f, 0x80, 0x80),
            (ELEM_F8E5M2, 0x7b, 0x7c, 0xfc),
            (ELEM_F8E5M2FNUZ, 0x7f, 0x80, 0x80),
        ];
        for (elem, max, over, neg_over) in cases {
            let top = onnxc_minifloat_to_f32(max, elem) as f64;
            let sign = 0x80;
            // Just under the midpoint to the next (unrepresentable) step
            // still rounds down to the max; beyond it overflows.
            let step = top - onnxc_minifloat_to_f32(max - 1, elem) as f64;
            for x in [top + step * 0.51, top + step, 1e30, f64::INFINITY] {
                assert_eq!(onnxc_f64_to_minifloat(x, elem, SAT), max, "format {elem}: {x}");
                assert_eq!(onnxc_f64_to_minifloat(-x, elem, SAT), max | sign, "format {elem}: -{x}");
                assert_eq!(onnxc_f64_to_minifloat(x, elem, 0), over, "format {elem}: {x}");
                assert_eq!(onnxc_f64_to_minifloat(-x, elem, 0), neg_over, "format {elem}: -{x}");
            }
            assert_eq!(onnxc_f64_to_minifloat(top + step * 0.49, elem, 0), max);
            let nan = onnxc_f64_to_minifloat(f64::NAN, elem, SAT);
            assert!(onnxc_minifloat_to_f32(nan, elem).is_nan());
        }
        // E2M1 saturates whatever the flag; NaN has no code and becomes 0.
        assert_eq!(onnxc_f32_to_minifloat(7.0, ELEM_F4E2M1, 0), 0x7);
        assert_eq!(onnxc_f32_to_minifloat(f32::NEG_INFINITY, ELEM_F4E2M1, SAT), 0xf);
        assert_eq!(onnxc_f32_to_minifloat(f32::NAN, ELEM_F4E2M1, SAT), 0);
    }

    #[test]
    fn e8m0_is_a_power_of_two_with_three_roundings() {
        for code in 0..255 {
            let v = onnxc_minifloat_to_f32(code, ELEM_F8E8M0) as f64;
            assert_eq!(v, 2f64.powi(code - 127));
            for round in [MINIFLOAT_ROUND_UP, MINIFLOAT_ROUND_DOWN, MINIFLOAT_ROUND_NEAREST] {
                assert_eq!(onnxc_f64_to_minifloat(v, ELEM_F8E8M0, SAT | round), code);
            }
        }
        assert!(onnxc_minifloat_to_f32(0xff, ELEM_F8E8M0).is_nan());
        let e8 = |x: f64, mode: i64| onnxc_f64_to_minifloat(x, ELEM_F8E8M0, mode);
        // 1.1: up to 2, down to 1, nearest to 1; 1.5 is the tie (goes up).
        assert_eq!([e8(1.1, SAT), e8(1.1, SAT | 2), e8(1.1, SAT | 4)], [128, 127, 127]);
        assert_eq!([e8(1.5, SAT | 4), e8(1.4999, SAT | 4)], [128, 127]);
        // The sign is ignored.
        assert_eq!(e8(-4.0, SAT), 129);
        // Overflow and underflow clamp when saturating, else NaN.
        assert_eq!([e8(f64::MAX, SAT), e8(f64::MAX, 0), e8(f64::INFINITY, SAT)], [254, 255, 254]);
        assert_eq!([e8(0.0, SAT), e8(0.0, 0), e8(1e-300, SAT | 2), e8(1e-300, 2)], [0, 255, 0, 255]);
        // 2^-127 is an f32 subnormal; a value just above rounds up to 2^-126.
        let tiny = 2f64.powi(-127);
        assert_eq!([e8(tiny, SAT), e8(tiny * 1.25, SAT)], [0, 1]);
        assert_eq!(e8(f64::NAN, SAT), 255);
    }
}
