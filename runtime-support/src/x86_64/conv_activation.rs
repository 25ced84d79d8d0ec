//! The epilogue activations that are not one select (HardSigmoid,
//! HardSwish, Sigmoid, Tanh, SiLU: MobileNetV3's, EfficientNet's and
//! YOLO's), on whole vectors. Left to the portable epilogue, lane by lane, they made a
//! HardSwish 1×1 layer four to six times slower than the same layer
//! without it (MobileNetV3-Large's 160 → 960 at 20², 6.9 ms against
//! 1.2 ms for the 960 → 160 after it) and kept it off the pointwise and
//! stem runs, whose asm epilogue has only a clamp.
//!
//! Such a layer's tiles and runs finish with no activation; a tile then
//! applies it to each vector in registers before the store, a run to the
//! outputs it has just stored (still in L1). The direct convolution
//! ([`super::direct_conv`]) does the same in its full tiles, which had
//! left it to rows of four pixels (MobileNetV3's HardSwish stem at the
//! AVX2 level ran at half the speed of a Relu one). Each step is the portable
//! epilogue's ([`crate::generic::conv::epilogue`]): the same products
//! and sums unfused, its clamp's compares as selects (NaN passes, `-0`
//! becomes `+0`), and the vector math's sigmoid and tanh, which give the
//! scalar lanes' bits, so the outputs are the same bits.
//!
//! SiLU (`x * sigmoid(x)`) is fused from a Sigmoid and a Mul; unfused,
//! EfficientNet-B0 wrote each such conv output, read it back for the
//! Sigmoid and the Mul and wrote it again (49 programs, 2.5 of its 14.3 ms).

use super::plane::Ymm;
use crate::abi::conv::{
    ConvParams, EPILOGUE_HARD_SIGMOID, EPILOGUE_HARD_SWISH, EPILOGUE_SIGMOID, EPILOGUE_SILU, EPILOGUE_TANH,
};
use crate::generic::vector_math;
use core::arch::x86_64::*;

/// An activation [`super::avx2::activate`] does not have.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum VectorActivation {
    /// `clamp01(v * alpha + beta)`.
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    /// `v * clamp01(v * (1/6) + 1/2)`.
    HardSwish,
    Sigmoid,
    Tanh,
    /// `v * sigmoid(v)`.
    Silu,
}

impl VectorActivation {
    /// `p`'s activation when it is one of these.
    pub(crate) fn of(p: &ConvParams) -> Option<VectorActivation> {
        Some(match p.activation {
            EPILOGUE_HARD_SIGMOID => VectorActivation::HardSigmoid { alpha: p.act_a as f32, beta: p.act_b as f32 },
            EPILOGUE_HARD_SWISH => VectorActivation::HardSwish,
            EPILOGUE_SIGMOID => VectorActivation::Sigmoid,
            EPILOGUE_TANH => VectorActivation::Tanh,
            EPILOGUE_SILU => VectorActivation::Silu,
            _ => return None,
        })
    }

    /// The activation of each lane of `v`.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn apply(self, v: __m256) -> __m256 {
        match self {
            VectorActivation::HardSigmoid { alpha, beta } => {
                clamp01(_mm256_add_ps(_mm256_mul_ps(v, _mm256_set1_ps(alpha)), _mm256_set1_ps(beta)))
            }
            VectorActivation::HardSwish => {
                let (sixth, half) = (_mm256_set1_ps((1.0f64 / 6.0) as f32), _mm256_set1_ps(0.5));
                _mm256_mul_ps(v, clamp01(_mm256_add_ps(_mm256_mul_ps(v, sixth), half)))
            }
            VectorActivation::Sigmoid => vector_math::sigmoid(Ymm(v)).0,
            VectorActivation::Tanh => vector_math::tanh(Ymm(v)).0,
            VectorActivation::Silu => _mm256_mul_ps(v, vector_math::sigmoid(Ymm(v)).0),
        }
    }

    /// The activation of `vectors` consecutive vectors from `y`, in place.
    ///
    /// # Safety
    /// `y` holds `vectors * 8` writable floats; the CPU has AVX2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn apply_in_place(self, y: *mut f32, vectors: usize) {
        for i in 0..vectors {
            let at = y.add(i * 8);
            _mm256_storeu_ps(at, self.apply(_mm256_loadu_ps(at)));
        }
    }
}

/// `v > 0 || NaN ? v : 0`, then `v < 1 || NaN ? v : 1` (the portable
/// epilogue's clamp): "not less or equal" and "not greater or equal"
/// compares are true on NaN.
#[inline(always)]
unsafe fn clamp01(v: __m256) -> __m256 {
    let (zero, one) = (_mm256_setzero_ps(), _mm256_set1_ps(1.0));
    let low = _mm256_blendv_ps(zero, v, _mm256_cmp_ps::<_CMP_NLE_UQ>(v, zero));
    _mm256_blendv_ps(one, low, _mm256_cmp_ps::<_CMP_NGE_UQ>(low, one))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::conv::EPILOGUE_NONE;
    use crate::generic::conv::epilogue;
    use crate::isa::Isa;

    /// Each activation's lanes against the portable epilogue's, bit for
    /// bit (any NaN alike), on the clamp's edges, zeros of both signs, infinities and NaN.
    #[test]
    fn vector_activations_give_the_portable_epilogues_bits() {
        if !Isa::Avx2Fma.available() {
            return;
        }
        let edges = [-3.0f32, 3.0, -2.5, 2.5, -0.0, 0.0, 1e-30, -1e-30, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
        let values: [f32; 24] = core::array::from_fn(|i| edges.get(i).copied().unwrap_or(i as f32 * 0.37 - 4.1));
        let activations =
            [EPILOGUE_HARD_SIGMOID, EPILOGUE_HARD_SWISH, EPILOGUE_SIGMOID, EPILOGUE_TANH, EPILOGUE_SILU, EPILOGUE_NONE];
        for activation in activations {
            let p = ConvParams { activation, act_a: 0.2, act_b: 0.5, ..Default::default() };
            let Some(vector) = VectorActivation::of(&p) else {
                assert_eq!(activation, EPILOGUE_NONE);
                continue;
            };
            let mut want = values;
            let mut got = values;
            unsafe {
                epilogue(&p, None, None, &mut want);
                apply_avx2(vector, &mut got);
            }
            // A NaN's sign is the hardware's or the optimiser's choice.
            let bits = |v: [f32; 24]| v.map(|v| if v.is_nan() { f32::NAN.to_bits() } else { v.to_bits() });
            assert_eq!(bits(got), bits(want), "{vector:?}");
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn apply_avx2(vector: VectorActivation, v: &mut [f32; 24]) {
        vector.apply_in_place(v.as_mut_ptr(), 3);
    }
}
