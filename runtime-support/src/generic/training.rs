//! One step of the optimizers of the `ai.onnx.preview.training` domain:
//! Adagrad, Adam, and Momentum (standard or Nesterov).
//!
//! Each call updates one optimized tensor `X` (a node with several tensors
//! calls the kernel once per tensor) from its gradient `G` and its state
//! (Adagrad: accumulated squared gradient `H`; Momentum: velocity `V`; Adam:
//! `V` and `H`); each output may alias its own input (element `i` is read
//! before it is written), given the scalar learning rate `R` (f32 or f64, by element
//! code) and the update count `T` (i64). Elementwise work is done in the
//! tensor's own type; the scalar factors derived from `R` and `T` (decayed
//! or bias-corrected learning rate) in f64.
//!
//! - Adagrad: `r' = R / (1 + T·decay)`, `g = norm·X + G`, `H' = H + g²`,
//!   `X' = X − r'·g / (√H' + ε)`.
//! - Momentum: `g = norm·X + G`, `V' = α·V + β'·g` with `β' = β` when
//!   `T > 0` and 1 at the first step; standard `X' = X − R·V'`, Nesterov
//!   `X' = X − R·(g + α·V')`.
//! - Adam: `g = norm·X + G`, `V' = α·V + (1 − α)·g`,
//!   `H' = β·H + (1 − β)·g²`, `r' = R·√(1 − β^T) / (1 − α^T)` when `T > 0`
//!   (else `R`), `X' = (1 − norm_post)·(X − r'·V' / (√H' + ε))`.

use super::convert::{is_float_elem, load_float};
use super::real::Real;
use crate::abi::training::*;
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};

pub(crate) unsafe fn step<T: Real>(
    p: *const OptimizerParams,
    rate: *const u8,
    count: *const i64,
    [x, g, s1, s2]: [*const T; 4],
    [x_out, s1_out, s2_out]: [*mut T; 3],
) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    let adam = p.kind == OPTIMIZER_ADAM;
    let needs_second = |ptr: bool| ptr || !adam;
    if p.len < 0
        || !(OPTIMIZER_ADAGRAD..=OPTIMIZER_ADAM).contains(&p.kind)
        || !is_float_elem(p.rate_elem)
        || [rate.is_null(), count.is_null(), x.is_null(), g.is_null(), s1.is_null()].contains(&true)
        || [x_out.is_null(), s1_out.is_null()].contains(&true)
        || !needs_second(!s2.is_null() && !s2_out.is_null())
    {
        return STATUS_INVALID_PARAMS;
    }
    let r = load_float(rate, p.rate_elem, 0);
    let t = *count;
    let c = |v: f64| T::from_f64(v);
    let norm = c(p.norm_coefficient);
    for i in 0..p.len as usize {
        let xi = *x.add(i);
        let gi = norm * xi + *g.add(i);
        match p.kind {
            OPTIMIZER_ADAGRAD => {
                let rate = c(r / (1.0 + t as f64 * p.decay_factor));
                let h = *s1.add(i) + gi * gi;
                *s1_out.add(i) = h;
                *x_out.add(i) = xi - rate * gi / (h.sqrt() + c(p.epsilon));
            }
            OPTIMIZER_MOMENTUM | OPTIMIZER_NESTEROV => {
                let beta = if t > 0 { p.beta } else { 1.0 };
                let v = c(p.alpha) * *s1.add(i) + c(beta) * gi;
                *s1_out.add(i) = v;
                let direction = if p.kind == OPTIMIZER_NESTEROV { gi + c(p.alpha) * v } else { v };
                *x_out.add(i) = xi - c(r) * direction;
            }
            _ => {
                let v = c(p.alpha) * *s1.add(i) + c(1.0 - p.alpha) * gi;
                let h = c(p.beta) * *s2.add(i) + c(1.0 - p.beta) * gi * gi;
                *s1_out.add(i) = v;
                *s2_out.add(i) = h;
                let rate = if t > 0 {
                    r * libm::sqrt(1.0 - libm::pow(p.beta, t as f64)) / (1.0 - libm::pow(p.alpha, t as f64))
                } else {
                    r
                };
                let moved = xi - c(rate) * (v / (h.sqrt() + c(p.epsilon)));
                *x_out.add(i) = c(1.0 - p.norm_coefficient_post) * moved;
            }
        }
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::ELEM_F64;

    fn run(kind: i64, t: i64, x: f64, g: f64, s1: f64, s2: f64) -> (f64, f64, f64) {
        let p = OptimizerParams {
            kind,
            len: 1,
            rate_elem: ELEM_F64,
            alpha: 0.9,
            beta: 0.5,
            epsilon: 1e-6,
            decay_factor: 0.25,
            norm_coefficient: 0.1,
            norm_coefficient_post: 0.01,
        };
        let r = 0.5f64;
        let (mut xo, mut s1o, mut s2o) = (0.0f64, 0.0f64, 0.0f64);
        let status = unsafe {
            onnxc_optimizer_step_f64(&p, (&r as *const f64).cast(), &t, &x, &g, &s1, &s2, &mut xo, &mut s1o, &mut s2o)
        };
        assert_eq!(status, STATUS_OK);
        (xo, s1o, s2o)
    }

    #[test]
    fn adagrad_decays_the_rate_and_accumulates_squares() {
        // g = 0.1·2 + 1 = 1.2; H' = 3 + 1.44; rate = 0.5 / (1 + 4·0.25).
        let (x, h, _) = run(OPTIMIZER_ADAGRAD, 4, 2.0, 1.0, 3.0, 0.0);
        assert!((h - 4.44).abs() < 1e-12);
        assert!((x - (2.0 - 0.25 * 1.2 / (4.44f64.sqrt() + 1e-6))).abs() < 1e-12);
    }

    #[test]
    fn momentum_takes_the_whole_gradient_on_the_first_step() {
        let (x, v, _) = run(OPTIMIZER_MOMENTUM, 0, 2.0, 1.0, 3.0, 0.0);
        assert!((v - (0.9 * 3.0 + 1.2)).abs() < 1e-12);
        assert!((x - (2.0 - 0.5 * v)).abs() < 1e-12);
        let (x, v, _) = run(OPTIMIZER_NESTEROV, 1, 2.0, 1.0, 3.0, 0.0);
        assert!((v - (0.9 * 3.0 + 0.5 * 1.2)).abs() < 1e-12);
        assert!((x - (2.0 - 0.5 * (1.2 + 0.9 * v))).abs() < 1e-12);
    }

    #[test]
    fn adam_corrects_the_bias_after_the_first_step() {
        let (x, v, h) = run(OPTIMIZER_ADAM, 2, 2.0, 1.0, 3.0, 4.0);
        assert!((v - (0.9 * 3.0 + 0.1 * 1.2)).abs() < 1e-12);
        assert!((h - (0.5 * 4.0 + 0.5 * 1.44)).abs() < 1e-12);
        let rate = 0.5 * (1.0f64 - 0.25).sqrt() / (1.0 - 0.81);
        assert!((x - 0.99 * (2.0 - rate * v / (h.sqrt() + 1e-6))).abs() < 1e-12);
    }

    #[test]
    fn adam_without_its_second_state_is_refused() {
        let p = OptimizerParams { kind: OPTIMIZER_ADAM, len: 1, rate_elem: ELEM_F64, ..Default::default() };
        let (r, t, v) = (0.5f64, 1i64, 1.0f64);
        let mut out = [0.0f64; 2];
        let o = out.as_mut_ptr();
        let status = unsafe {
            onnxc_optimizer_step_f64(
                &p,
                (&r as *const f64).cast(),
                &t,
                &v,
                &v,
                &v,
                core::ptr::null(),
                o,
                o.add(1),
                core::ptr::null_mut(),
            )
        };
        assert_eq!(status, STATUS_INVALID_PARAMS);
    }
}
