//! [`crate::generic::small_groups`]'s kernel compiled for AVX-512 (zmm,
//! 16 outputs per vector) and AVX2+FMA (ymm, 8).

use super::plane::{Ymm, Zmm};
use crate::generic::conv::ConvFinish;
use crate::generic::small_groups::Group;

/// [`Group::run`] in zmm registers.
///
/// # Safety
/// As `Group::run`; the CPU supports AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn run_avx512(group: &Group, finish: &ConvFinish) {
    group.run::<Zmm>(finish)
}

/// [`Group::run`] in ymm registers.
///
/// # Safety
/// As `Group::run`; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn run_avx2(group: &Group, finish: &ConvFinish) {
    group.run::<Ymm>(finish)
}
