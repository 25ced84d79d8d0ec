//! Random kernels: RandomUniform/RandomNormal (and their *Like forms),
//! Bernoulli, Multinomial and Dropout in training mode.
//!
//! The generator is stateless and counter-based, so generated code stays
//! re-entrant with no mutable globals: element `i` of a node's stream is
//! `mix(key + (i + 1) * GOLDEN)`, the SplitMix64 sequence indexed directly
//! (SplitMix64 passes BigCrush). The compiler fixes each node's key at
//! compile time with [`stream_key`] (from the node's `seed` attribute, or
//! from its position in the model), so a compiled model gives the same
//! values on every run. Normal deviates come from Box–Muller on pairs of
//! the uniform stream: elements `2k` and `2k + 1` are the cosine and sine
//! halves of pair `k`. Values are computed in f64 and rounded to the
//! element type (ONNX codes; f32, f64, f16, bf16).

use super::convert::{is_float_elem, load_float, store_float};
use crate::abi::random::*;
use crate::abi::{ELEM_F32, ELEM_F64, ELEM_I32, ELEM_I64, STATUS_INVALID_PARAMS, STATUS_OK};

/// SplitMix64's increment (public for the compiler's portable Dropout,
/// which generates the same stream).
pub const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function: a bijection on u64 with full avalanche.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The generator key for `seed`: seeds that differ in any bit give
/// unrelated streams.
pub fn stream_key(seed: u64) -> u64 {
    mix(mix(seed ^ GOLDEN))
}

/// Element `i` of the stream `key`, uniform on `[0, 1)` with 53 random bits.
fn uniform(key: u64, i: u64) -> f64 {
    let bits = mix(key.wrapping_add(i.wrapping_add(1).wrapping_mul(GOLDEN)));
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Element `i` of a standard normal stream (Box–Muller on uniform pairs).
fn normal(key: u64, i: u64) -> f64 {
    let pair = i & !1;
    // 1 - u is in (0, 1], so the logarithm is finite.
    let radius = libm::sqrt(-2.0 * libm::log(1.0 - uniform(key, pair)));
    let angle = 2.0 * core::f64::consts::PI * uniform(key, pair + 1);
    radius * if i & 1 == 0 { libm::cos(angle) } else { libm::sin(angle) }
}

/// The largest value of float element type `elem` below `x` (finite):
/// where a uniform sample rounded up to the excluded bound lands instead.
unsafe fn largest_below(elem: i64, x: f64) -> f64 {
    let mut word = 0u64;
    store_float(&mut word as *mut u64 as *mut u8, elem, 0, x);
    let rounded = load_float(&word as *const u64 as *const u8, elem, 0);
    if rounded < x {
        return rounded;
    }
    // One step down in sign-magnitude order, at the element's width.
    let sign = match elem {
        ELEM_F64 => 1 << 63,
        ELEM_F32 => 1 << 31,
        _ => 1 << 15,
    };
    let below = if word & sign != 0 {
        word + 1
    } else if word == 0 {
        sign | 1
    } else {
        word - 1
    };
    load_float(&below as *const u64 as *const u8, elem, 0)
}

/// Does the work of the C entry point [`crate::abi::onnxc_random`].
pub(crate) unsafe fn random(p: *const RandomParams, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if !is_float_elem(p.elem) || p.count < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let key = p.key as u64;
    match p.distribution {
        RANDOM_UNIFORM => {
            let cap = largest_below(p.elem, p.b);
            for i in 0..p.count {
                let at = i as isize;
                store_float(y, p.elem, at, p.a + (p.b - p.a) * uniform(key, i as u64));
                if p.a < p.b && load_float(y, p.elem, at) >= p.b {
                    store_float(y, p.elem, at, cap);
                }
            }
        }
        RANDOM_NORMAL => {
            for i in 0..p.count {
                store_float(y, p.elem, i as isize, p.a + p.b * normal(key, i as u64));
            }
        }
        _ => return STATUS_INVALID_PARAMS,
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_bernoulli`].
pub(crate) unsafe fn bernoulli(p: *const BernoulliParams, probs: *const u8, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    if !is_float_elem(p.p_elem) || p.count < 0 || !matches!(p.elem_bytes, 1 | 2 | 4 | 8) {
        return STATUS_INVALID_PARAMS;
    }
    let eb = p.elem_bytes as usize;
    let one = p.one.to_le_bytes();
    for i in 0..p.count as usize {
        let hit = uniform(p.key as u64, i as u64) < load_float(probs, p.p_elem, i as isize);
        let src = if hit { one } else { [0; 8] };
        core::ptr::copy_nonoverlapping(src.as_ptr(), y.add(i * eb), eb);
    }
    STATUS_OK
}

/// The class of row `x[base..base + classes]` that `target` (in `[0,
/// total weight)`) falls in, the weights being `exp(x[c] - max)`. Rounding
/// that leaves `target` past the end picks the last class with any weight.
unsafe fn draw_class(x: *const u8, elem: i64, base: usize, classes: usize, max: f64, target: f64) -> usize {
    let mut sum = 0.0;
    let mut last = 0;
    for c in 0..classes {
        let w = libm::exp(load_float(x, elem, (base + c) as isize) - max);
        if w > 0.0 {
            last = c;
        }
        sum += w;
        if target < sum {
            return c;
        }
    }
    last
}

/// Does the work of the C entry point [`crate::abi::onnxc_multinomial`].
pub(crate) unsafe fn multinomial(p: *const MultinomialParams, x: *const u8, y: *mut u8) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let index_ok = matches!(p.index_elem, ELEM_I32 | ELEM_I64);
    if !is_float_elem(p.x_elem) || !index_ok || p.batch < 0 || p.classes < 1 || p.samples < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (classes, samples) = (p.classes as usize, p.samples as usize);
    for b in 0..p.batch as usize {
        let base = b * classes;
        let weight = |c: usize| load_float(x, p.x_elem, (base + c) as isize);
        let max = (0..classes).map(weight).fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = (0..classes).map(|c| libm::exp(weight(c) - max)).sum();
        for s in 0..samples {
            let at = b * samples + s;
            let target = uniform(p.key as u64, at as u64) * total;
            let class = draw_class(x, p.x_elem, base, classes, max, target);
            if p.index_elem == ELEM_I32 {
                (y as *mut i32).add(at).write_unaligned(class as i32);
            } else {
                (y as *mut i64).add(at).write_unaligned(class as i64);
            }
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_dropout`].
pub(crate) unsafe fn dropout(
    p: *const DropoutParams,
    x: *const u8,
    ratio: *const u8,
    training: *const u8,
    y: *mut u8,
    mask: *mut u8,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let ratio_ok = ratio.is_null() || is_float_elem(p.ratio_elem);
    if !is_float_elem(p.elem) || !ratio_ok || training.is_null() || p.count < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let r = match (*training != 0, ratio.is_null()) {
        (false, _) => 0.0,
        (true, true) => p.ratio,
        (true, false) => load_float(ratio, p.ratio_elem, 0),
    };
    if !(0.0..1.0).contains(&r) {
        return STATUS_INVALID_PARAMS;
    }
    for i in 0..p.count as usize {
        let keep = r == 0.0 || uniform(p.key as u64, i as u64) >= r;
        let at = i as isize;
        // As the reference computes it: a dropped -x gives -0.
        let kept = load_float(x, p.elem, at) * if keep { 1.0 } else { 0.0 };
        store_float(y, p.elem, at, kept / (1.0 - r));
        if !mask.is_null() {
            *mask.add(i) = keep as u8;
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::abi::{ELEM_BF16, ELEM_F16};
    use std::vec;
    use std::vec::Vec;

    fn bytes<T>(v: &[T]) -> *const u8 {
        v.as_ptr() as *const u8
    }

    /// Mean and standard deviation.
    fn moments(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        (mean, (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt())
    }

    fn fill_f32(p: &RandomParams) -> Vec<f64> {
        let mut y = vec![0.0f32; p.count as usize];
        assert_eq!(unsafe { onnxc_random(p, y.as_mut_ptr() as *mut u8) }, STATUS_OK);
        y.iter().map(|&v| v as f64).collect()
    }

    #[test]
    fn uniform_and_normal_have_their_moments() {
        let n = 200_000;
        let key = stream_key(7) as i64;
        let p = RandomParams { key, count: n, elem: ELEM_F32, distribution: RANDOM_UNIFORM, a: -2.0, b: 6.0 };
        let u = fill_f32(&p);
        assert!(u.iter().all(|&v| (-2.0..6.0).contains(&v)));
        let (mean, std) = moments(&u);
        // Uniform on [-2, 6): mean 2, std 8 / sqrt(12); errors ~ 0.005.
        assert!((mean - 2.0).abs() < 0.05 && (std - 8.0 / 12f64.sqrt()).abs() < 0.05, "{mean} {std}");
        let g = fill_f32(&RandomParams { distribution: RANDOM_NORMAL, a: 1.5, b: 0.5, ..p });
        let (mean, std) = moments(&g);
        assert!((mean - 1.5).abs() < 0.01 && (std - 0.5).abs() < 0.01, "{mean} {std}");
    }

    #[test]
    fn streams_are_deterministic_and_keyed() {
        let p = RandomParams { key: stream_key(1) as i64, count: 64, elem: ELEM_F32, ..Default::default() };
        let p = RandomParams { b: 1.0, ..p };
        assert_eq!(fill_f32(&p), fill_f32(&p));
        assert_ne!(fill_f32(&p), fill_f32(&RandomParams { key: stream_key(2) as i64, ..p }));
    }

    #[test]
    fn uniform_stays_below_high_in_every_type() {
        // In f16 and bf16 about one sample in 2^12 (2^9) rounds up to 1.
        for elem in [ELEM_F16, ELEM_BF16, ELEM_F32, ELEM_F64] {
            let mut y = vec![0u64; 100_000];
            let p = RandomParams { key: 3, count: y.len() as i64, elem, a: 0.0, b: 1.0, ..Default::default() };
            assert_eq!(unsafe { onnxc_random(&p, y.as_mut_ptr() as *mut u8) }, STATUS_OK);
            let v: Vec<f64> = (0..p.count).map(|i| unsafe { load_float(bytes(&y), elem, i as isize) }).collect();
            assert!(v.iter().all(|&v| (0.0..1.0).contains(&v)), "element type {elem}");
            assert!(v.iter().any(|&v| v > 0.99), "element type {elem}");
        }
        assert_eq!(unsafe { largest_below(ELEM_F32, 0.0) }, -f32::from_bits(1) as f64);
        assert_eq!(unsafe { largest_below(ELEM_F32, -1.0) }, -1.0000001192092896);
        assert_eq!(unsafe { largest_below(ELEM_F32, 0.1) }, 0.09999999403953552);
    }

    #[test]
    fn bernoulli_hits_with_the_given_probability() {
        let probs: Vec<f64> = (0..100_000).map(|i| [0.0, 0.25, 1.0][i % 3]).collect();
        let mut y = vec![0i32; probs.len()];
        let p = BernoulliParams { key: 5, count: y.len() as i64, p_elem: ELEM_F64, elem_bytes: 4, one: 1 };
        assert_eq!(unsafe { onnxc_bernoulli(&p, bytes(&probs), y.as_mut_ptr() as *mut u8) }, STATUS_OK);
        let rate = |k: usize| y.iter().skip(k).step_by(3).sum::<i32>() as f64 / (y.len() / 3) as f64;
        assert_eq!((rate(0), rate(2)), (0.0, 1.0));
        assert!((rate(1) - 0.25).abs() < 0.01, "{}", rate(1));
    }

    #[test]
    fn multinomial_follows_the_softmax() {
        let logits = [0.0f32, 2f32.ln(), f32::NEG_INFINITY, 0.0];
        let (classes, samples) = (4, 40_000);
        let mut y = vec![0i64; samples];
        let p = MultinomialParams {
            key: 9,
            batch: 1,
            classes,
            samples: samples as i64,
            x_elem: ELEM_F32,
            index_elem: ELEM_I64,
        };
        assert_eq!(unsafe { onnxc_multinomial(&p, bytes(&logits), y.as_mut_ptr() as *mut u8) }, STATUS_OK);
        let share = |c: i64| y.iter().filter(|&&k| k == c).count() as f64 / samples as f64;
        // Weights 1 : 2 : 0 : 1.
        assert!((share(0) - 0.25).abs() < 0.01 && (share(1) - 0.5).abs() < 0.01, "{} {}", share(0), share(1));
        assert_eq!(share(2), 0.0);
        assert!(y.iter().all(|&k| (0..classes).contains(&k)));
    }

    #[test]
    fn dropout_scales_survivors_and_reports_the_mask() {
        let x: Vec<f32> = (0..10_000).map(|i| i as f32 - 5000.0).collect();
        let (mut y, mut mask) = (vec![0.0f32; x.len()], vec![0u8; x.len()]);
        let p = DropoutParams { key: 4, count: x.len() as i64, elem: ELEM_F32, ratio_elem: 0, ratio: 0.75 };
        let run = |training: u8, y: &mut [f32], mask: &mut [u8]| unsafe {
            let (y, m) = (y.as_mut_ptr() as *mut u8, mask.as_mut_ptr());
            onnxc_dropout(&p, bytes(&x), core::ptr::null(), &training, y, m)
        };
        assert_eq!(run(1, &mut y, &mut mask), STATUS_OK);
        for i in 0..x.len() {
            assert_eq!(y[i], if mask[i] == 1 { x[i] * 4.0 } else { 0.0 }, "element {i}");
        }
        let kept = mask.iter().filter(|&&m| m == 1).count() as f64 / x.len() as f64;
        assert!((kept - 0.25).abs() < 0.03, "{kept}");
        assert_eq!(run(0, &mut y, &mut mask), STATUS_OK);
        assert!(y == x && mask.iter().all(|&m| m == 1));
        let bad = DropoutParams { ratio: 1.0, ..p };
        let status = unsafe {
            onnxc_dropout(&bad, bytes(&x), core::ptr::null(), &1, y.as_mut_ptr() as *mut u8, mask.as_mut_ptr())
        };
        assert_eq!(status, STATUS_INVALID_PARAMS);
    }
}
