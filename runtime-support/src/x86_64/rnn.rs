//! The recurrent layers' kernels of [`crate::generic::rnn`] in zmm and ymm
//! registers: the product over packed panels (the layout and the loop are
//! in its `panels` module) and the LSTM cell in one pass (`lstm_lanes`).
//! A 64-column panel is 4 zmm or 8 ymm per batch row: AVX-512 takes 4 rows
//! at a time (16 sums, the panel's 4 loads shared by them), AVX2 one (8
//! sums of its 16 registers).

use super::plane::{Ymm, Zmm};
use crate::generic::rnn::lstm_lanes::{lstm_lanes, LstmRow};
use crate::generic::rnn::panels::{product_lanes, Product};

/// The product in zmm registers.
///
/// # Safety
/// As the product's [`Product`]; the CPU supports AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn recurrent_product_avx512(q: &Product<f32>) {
    product_lanes::<Zmm, 4, 4>(q)
}

/// The product in ymm registers.
///
/// # Safety
/// As the product's [`Product`]; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn recurrent_product_avx2(q: &Product<f32>) {
    product_lanes::<Ymm, 8, 1>(q)
}

/// The LSTM cell in zmm registers.
///
/// # Safety
/// As [`LstmRow`]; the CPU supports AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn lstm_cell_avx512(row: &LstmRow<f32>) {
    lstm_lanes::<Zmm>(row)
}

/// The LSTM cell in ymm registers.
///
/// # Safety
/// As [`LstmRow`]; the CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn lstm_cell_avx2(row: &LstmRow<f32>) {
    lstm_lanes::<Ymm>(row)
}
