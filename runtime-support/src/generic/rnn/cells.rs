//! The gate arithmetic of one batch row at one step, on whole gate slices
//! of `H` units, after the matrix products have filled them.
//!
//! The driver ([`super`]) hands each row its input projection `gx` (this
//! step's `X·Wᵀ` plus the folded biases, `G*H` values it may overwrite)
//! and its recurrent product `gh` (`h·Rᵀ`); a cell adds them, applies the
//! activations slice by slice and updates the state in place. Every loop
//! here runs over one gate's `H` units in order, so the vector body and
//! the tail of a loop compute the same function.
//!
//! Sigmoid and Tanh, the activations of every common model, go through
//! [`GateMath`], the one place that says how a slice of them is computed
//! (for f32, the crate's vector math, within a few ulp of libm); the other
//! activations are rare and go one element at a time through [`activate`]
//! in f64.

use super::super::gemm::GemmElem;
use super::super::real::Real;
use super::lstm_lanes::LstmRow;
use super::panels::{product, Product};
use crate::abi::rnn::*;
use crate::generic::vector_math::{Sigmoid, Tanh};
use crate::isa::choose::{lstm_cell, map_in_place, recurrent_product};
use crate::isa::{with_widest_vectors, Isa};

/// The compute types of the recurrent kernel: a gemm, the product over
/// packed panels, and Sigmoid and Tanh over a slice.
pub trait GateMath: GemmElem {
    /// The recurrent product `q`, in plain loops at the widest vectors.
    ///
    /// # Safety
    /// As [`Product`].
    #[inline(always)]
    unsafe fn recurrent_product(q: &Product<Self>) {
        with_widest_vectors(
            #[inline(always)]
            || product(q),
        )
    }

    /// The whole LSTM cell of `row` in one pass of vectors, if this type
    /// and the CPU have one; false (nothing done) otherwise.
    ///
    /// # Safety
    /// As [`LstmRow`].
    #[inline(always)]
    unsafe fn lstm_in_lanes(row: &LstmRow<Self>) -> bool {
        let _ = row;
        false
    }

    /// `x = 1 / (1 + e^-x)` for each element.
    #[inline(always)]
    fn sigmoid_in_place(xs: &mut [Self]) {
        for x in xs {
            *x = Self::ONE / (Self::ONE + (-*x).exp());
        }
    }

    /// `x = tanh(x)` for each element.
    #[inline(always)]
    fn tanh_in_place(xs: &mut [Self]) {
        for x in xs {
            *x = x.tanh();
        }
    }
}

/// f32: the product and the vector math at the CPU's widest vectors.
impl GateMath for f32 {
    #[inline(always)]
    unsafe fn recurrent_product(q: &Product<f32>) {
        if !recurrent_product(Isa::best(), q) {
            product(q)
        }
    }

    #[inline(always)]
    unsafe fn lstm_in_lanes(row: &LstmRow<f32>) -> bool {
        lstm_cell(Isa::best(), row)
    }

    #[inline(always)]
    fn sigmoid_in_place(xs: &mut [f32]) {
        map_in_place::<Sigmoid>(Isa::best(), xs)
    }

    #[inline(always)]
    fn tanh_in_place(xs: &mut [f32]) {
        map_in_place::<Tanh>(Isa::best(), xs)
    }
}

/// f64: libm, element by element.
impl GateMath for f64 {}

/// Applies activation `kind` with its `alpha`/`beta` to one value, in f64.
pub fn activate(kind: i64, alpha: f64, beta: f64, x: f64) -> f64 {
    match kind {
        ACT_RELU => x.max(0.0),
        ACT_TANH => libm::tanh(x),
        ACT_SIGMOID => 1.0 / (1.0 + libm::exp(-x)),
        ACT_AFFINE => alpha * x + beta,
        ACT_LEAKY_RELU => {
            if x >= 0.0 {
                x
            } else {
                alpha * x
            }
        }
        ACT_THRESHOLDED_RELU => {
            if x > alpha {
                x
            } else {
                0.0
            }
        }
        ACT_SCALED_TANH => alpha * libm::tanh(beta * x),
        ACT_HARD_SIGMOID => (alpha * x + beta).clamp(0.0, 1.0),
        ACT_ELU => {
            if x >= 0.0 {
                x
            } else {
                alpha * libm::expm1(x)
            }
        }
        ACT_SOFTSIGN => x / (1.0 + x.abs()),
        _ => {
            // Softplus, computed without overflow.
            if x > 0.0 {
                x + libm::log1p(libm::exp(-x))
            } else {
                libm::log1p(libm::exp(x))
            }
        }
    }
}

/// One activation slot of one direction, with the clip applied to its
/// input first.
#[derive(Clone, Copy)]
pub(super) struct Activation<T> {
    kind: i64,
    alpha: f64,
    beta: f64,
    clip: Option<T>,
}

impl<T: GateMath> Activation<T> {
    /// Slot `slot` (f, g, h) of direction `d`.
    pub(super) fn new(p: &RnnParams, d: usize, slot: usize) -> Self {
        let k = d * RNN_ACTS + slot;
        let clip = (p.has_clip != 0).then(|| T::from_f64(p.clip));
        Activation { kind: p.act[k], alpha: p.alpha[k], beta: p.beta[k], clip }
    }

    /// Whether this is activation `kind` with no clip.
    pub(super) fn is(&self, kind: i64) -> bool {
        self.kind == kind && self.clip.is_none()
    }

    /// Applies the activation to every element of `xs`.
    #[inline(always)]
    pub(super) fn apply(&self, xs: &mut [T]) {
        if let Some(c) = self.clip {
            // Written as compares so that a NaN stays NaN.
            for x in xs.iter_mut() {
                *x = if *x < -c {
                    -c
                } else if *x > c {
                    c
                } else {
                    *x
                };
            }
        }
        match self.kind {
            ACT_SIGMOID => T::sigmoid_in_place(xs),
            ACT_TANH => T::tanh_in_place(xs),
            kind => {
                for x in xs {
                    *x = T::from_f64(activate(kind, self.alpha, self.beta, x.to_f64()));
                }
            }
        }
    }
}

/// `dst[j] += src[j]`.
#[inline(always)]
fn add<T: Real>(dst: &mut [T], src: &[T]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d = *d + s);
}

/// `dst[j] += weight[j] * by[j]` (a peephole).
#[inline(always)]
fn add_product<T: Real>(dst: &mut [T], weight: &[T], by: &[T]) {
    dst.iter_mut().zip(weight.iter().zip(by)).for_each(|(d, (&w, &b))| *d = *d + w * b);
}

/// What one direction's cells apply: its activations and per-unit
/// constants.
pub(super) struct Cell<'a, T> {
    pub f: Activation<T>,
    pub g: Activation<T>,
    pub h: Activation<T>,
    /// LSTM peepholes for the i, o and f gates.
    pub peepholes: Option<[&'a [T]; 3]>,
    pub input_forget: bool,
    /// GRU with `linear_before_reset` (and only then): the h gate's
    /// recurrent bias, which the reset gate scales and so cannot be folded
    /// into `gx`.
    pub reset_bias: Option<&'a [T]>,
}

impl<T: GateMath> Cell<'_, T> {
    /// RNN: `h = f(gx + gh)`.
    #[inline(always)]
    pub(super) fn simple(&self, gx: &mut [T], gh: &[T], h: &mut [T]) {
        add(gx, gh);
        self.f.apply(gx);
        h.copy_from_slice(gx);
    }

    /// LSTM (gates i, o, f, c): updates `c` and `h`, using `gx` for the
    /// gates' values; in one pass of vectors ([`GateMath::lstm_in_lanes`])
    /// when the activations are the usual ones.
    #[inline(always)]
    pub(super) fn lstm(&self, gx: &mut [T], gh: &[T], h: &mut [T], c: &mut [T]) {
        let usual = self.f.is(ACT_SIGMOID) && self.g.is(ACT_TANH) && self.h.is(ACT_TANH);
        let row = LstmRow {
            gx: gx.as_ptr(),
            gh: gh.as_ptr(),
            h: h.as_mut_ptr(),
            c: c.as_mut_ptr(),
            units: h.len(),
            peepholes: self.peepholes.map(|p| p.map(<[T]>::as_ptr)),
            input_forget: self.input_forget,
        };
        // SAFETY: the row's slices hold its gates (`4 * units`) and states.
        if !(usual && unsafe { T::lstm_in_lanes(&row) }) {
            self.lstm_slices(gx, gh, h, c);
        }
    }

    /// [`Cell::lstm`] slice by slice.
    #[inline(always)]
    pub(super) fn lstm_slices(&self, gx: &mut [T], gh: &[T], h: &mut [T], c: &mut [T]) {
        add(gx, gh);
        let units = h.len();
        let (i, rest) = gx.split_at_mut(units);
        let (o, rest) = rest.split_at_mut(units);
        let (f, candidate) = rest.split_at_mut(units);
        if let Some([pi, _, pf]) = self.peepholes {
            add_product(i, pi, c);
            add_product(f, pf, c);
        }
        self.f.apply(f);
        if self.input_forget {
            i.iter_mut().zip(f.iter()).for_each(|(i, &f)| *i = T::ONE - f);
        } else {
            self.f.apply(i);
        }
        self.g.apply(candidate);
        for j in 0..units {
            c[j] = f[j] * c[j] + i[j] * candidate[j];
        }
        if let Some([_, po, _]) = self.peepholes {
            add_product(o, po, c);
        }
        self.f.apply(o);
        candidate.copy_from_slice(c);
        self.h.apply(candidate);
        h.iter_mut().zip(o.iter().zip(candidate.iter())).for_each(|(h, (&o, &hc))| *h = o * hc);
    }

    /// GRU, first half: the update and reset gates `z, r = f(gx + gh)`
    /// into `gx`'s first two slices; with `linear_before_reset`, also the
    /// h gate's input `gx_h + r * (gh_h + Rb_h)`.
    #[inline(always)]
    pub(super) fn gru_gates(&self, gx: &mut [T], gh: &[T]) {
        let units = gx.len() / 3;
        add(&mut gx[..2 * units], &gh[..2 * units]);
        self.f.apply(&mut gx[..2 * units]);
        if let Some(bias) = self.reset_bias {
            let (zr, hx) = gx.split_at_mut(2 * units);
            let (r, hh) = (&zr[units..], &gh[2 * units..]);
            for j in 0..units {
                hx[j] = hx[j] + r[j] * (hh[j] + bias[j]);
            }
        }
    }

    /// GRU without `linear_before_reset`: `r * h`, the row the h gate's
    /// recurrent product is taken of.
    #[inline(always)]
    pub(super) fn gru_reset(&self, gx: &[T], h: &[T], reset: &mut [T]) {
        let r = &gx[h.len()..2 * h.len()];
        reset.iter_mut().zip(r.iter().zip(h)).for_each(|(o, (&r, &h))| *o = r * h);
    }

    /// GRU, second half: `h = (1 - z) * g(gx_h) + z * h`; without
    /// `linear_before_reset`, `gh_h` (by then `(r * h)·R_hᵀ`) is added to
    /// `gx_h` first.
    #[inline(always)]
    pub(super) fn gru_update(&self, gx: &mut [T], gh: &[T], h: &mut [T]) {
        let units = h.len();
        let (z, rest) = gx.split_at_mut(units);
        let candidate = &mut rest[units..];
        if self.reset_bias.is_none() {
            add(candidate, &gh[2 * units..]);
        }
        self.g.apply(candidate);
        for j in 0..units {
            h[j] = (T::ONE - z[j]) * candidate[j] + z[j] * h[j];
        }
    }
}
