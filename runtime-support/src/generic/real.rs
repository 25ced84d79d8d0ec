//! The float compute types (f32, f64) that generic kernels are written
//! over: arithmetic, the few transcendental functions they need (libm;
//! f32 tanh and sigmoid are [`super::vector_math`]'s, so a kernel's fused
//! activation gives the bits of the elementwise programs), and exact
//! conversion through f64.

use super::vector_math::{self, LaneFunction, Scalar};
use crate::isa::Isa;
use core::ops::{Add, Div, Mul, Neg, Sub};

/// A compute type: f32 or f64.
pub trait Real:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INF: Self;
    const NAN: Self;
    fn is_nan(self) -> bool {
        self.partial_cmp(&self).is_none()
    }
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn tanh(self) -> Self;
    /// `1 / (1 + e^-x)`.
    fn sigmoid(self) -> Self;
    fn sqrt(self) -> Self;
    fn floor(self) -> Self;
    /// Round half to even.
    fn rint(self) -> Self;
    fn abs(self) -> Self;
    fn powf(self, e: Self) -> Self;
    /// `xs[i] = F(xs[i])` with the host's widest vectors (the bits of `F`
    /// on one lane, whose FMA is libm's, in software, several times
    /// slower); `false`, nothing done, for a type with no lane functions.
    fn map_lanes<F: LaneFunction>(xs: &mut [Self]) -> bool;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const NEG_INF: f32 = f32::NEG_INFINITY;
    const NAN: f32 = f32::NAN;
    fn exp(self) -> f32 {
        libm::expf(self)
    }
    fn ln(self) -> f32 {
        libm::logf(self)
    }
    fn tanh(self) -> f32 {
        // SAFETY: one lane needs no CPU feature.
        unsafe { vector_math::tanh(Scalar(self)) }.0
    }
    fn sigmoid(self) -> f32 {
        // SAFETY: as for `tanh`.
        unsafe { vector_math::sigmoid(Scalar(self)) }.0
    }
    fn sqrt(self) -> f32 {
        libm::sqrtf(self)
    }
    fn floor(self) -> f32 {
        libm::floorf(self)
    }
    fn rint(self) -> f32 {
        libm::rintf(self)
    }
    fn abs(self) -> f32 {
        libm::fabsf(self)
    }
    fn powf(self, e: f32) -> f32 {
        libm::powf(self, e)
    }
    fn map_lanes<F: LaneFunction>(xs: &mut [f32]) -> bool {
        crate::isa::choose::map_in_place::<F>(Isa::best(), xs);
        true
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const NEG_INF: f64 = f64::NEG_INFINITY;
    const NAN: f64 = f64::NAN;
    fn exp(self) -> f64 {
        libm::exp(self)
    }
    fn ln(self) -> f64 {
        libm::log(self)
    }
    fn tanh(self) -> f64 {
        libm::tanh(self)
    }
    fn sigmoid(self) -> f64 {
        1.0 / (1.0 + libm::exp(-self))
    }
    fn sqrt(self) -> f64 {
        libm::sqrt(self)
    }
    fn floor(self) -> f64 {
        libm::floor(self)
    }
    fn rint(self) -> f64 {
        libm::rint(self)
    }
    fn abs(self) -> f64 {
        libm::fabs(self)
    }
    fn powf(self, e: f64) -> f64 {
        libm::pow(self, e)
    }
    fn map_lanes<F: LaneFunction>(_: &mut [f64]) -> bool {
        false
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
}
