//! The f32 LSTM cell of the usual activations (Sigmoid, Tanh, Tanh, no
//! clip) in one pass of vectors over a row's units.
//!
//! [`super::cells`] applies a cell slice by slice: an add, each activation
//! over its gate's `H` values (a call into the vector math each), then the
//! state updates, every value through L1 a few times. At batch 1 and
//! moderate `H` those passes are a good part of a step beside the
//! recurrent product. Here each vector of units loads its four gates'
//! `gx + gh`, the cell state and the peepholes once, and computes the new
//! `c` and `h` in registers. The operations are the slice path's, in its
//! order (separate multiplies and adds, the same vector math), so both
//! give the same bits; the tail that fills no whole vector goes through
//! zero-padded copies, as [`crate::generic::vector_math::map_in_place`]'s.

use crate::generic::vector_math::{sigmoid, tanh, MathLanes, MAX_LANES};

/// One batch row's LSTM cell (gates i, o, f, c of `units` each).
#[derive(Clone, Copy)]
pub(crate) struct LstmRow<T> {
    pub gx: *const T,
    pub gh: *const T,
    pub h: *mut T,
    pub c: *mut T,
    pub units: usize,
    /// For the i, o and f gates.
    pub peepholes: Option<[*const T; 3]>,
    pub input_forget: bool,
}

/// The cell of `row` in vectors `V`.
///
/// # Safety
/// The pointers hold what [`LstmRow`] says; the CPU has `V`'s instructions.
#[inline(always)]
pub(crate) unsafe fn lstm_lanes<V: MathLanes>(row: &LstmRow<f32>) {
    const { assert!(V::LANES <= MAX_LANES) };
    let body = row.units / V::LANES * V::LANES;
    for j in (0..body).step_by(V::LANES) {
        lstm_units::<V>(row, |p| V::load(p.add(j)), |p, v| V::store(p.add(j), v));
    }
    let tail = row.units - body;
    if tail > 0 {
        let load = |p: *const f32| {
            let mut padded = [0.0f32; MAX_LANES];
            core::ptr::copy_nonoverlapping(p.add(body), padded.as_mut_ptr(), tail);
            V::load(padded.as_ptr())
        };
        let store = |p: *mut f32, v: V| {
            let mut padded = [0.0f32; MAX_LANES];
            V::store(padded.as_mut_ptr(), v);
            core::ptr::copy_nonoverlapping(padded.as_ptr(), p.add(body), tail);
        };
        lstm_units::<V>(row, load, store);
    }
}

/// One vector of units: `load(p)` and `store(p, v)` reach the vector's
/// units of the slice at `p`.
#[inline(always)]
unsafe fn lstm_units<V: MathLanes>(row: &LstmRow<f32>, load: impl Fn(*const f32) -> V, store: impl Fn(*mut f32, V)) {
    let n = row.units;
    let gate = |g: usize| V::add(load(row.gx.add(g * n)), load(row.gh.add(g * n)));
    let (mut i, mut o, mut f, candidate) = (gate(0), gate(1), gate(2), gate(3));
    let c_before = load(row.c);
    if let Some([pi, _, pf]) = row.peepholes {
        i = V::add(i, V::mul(load(pi), c_before));
        f = V::add(f, V::mul(load(pf), c_before));
    }
    let f = sigmoid(f);
    let i = if row.input_forget { V::sub(V::splat(1.0), f) } else { sigmoid(i) };
    let c = V::add(V::mul(f, c_before), V::mul(i, tanh(candidate)));
    if let Some([_, po, _]) = row.peepholes {
        o = V::add(o, V::mul(load(po), c));
    }
    store(row.c, c);
    store(row.h, V::mul(sigmoid(o), tanh(c)));
}
