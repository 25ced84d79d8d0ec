//! Recurrent layers: RNN, GRU and LSTM, every direction, one kernel.
//!
//! Shapes (ONNX names; `D` directions, `G` gates: 1 RNN, 3 GRU, 4 LSTM):
//! X `[T, B, I]` (layout 1: `[B, T, I]`), W `[D, G*H, I]`, R `[D, G*H, H]`,
//! bias `[D, 2*G*H]` (Wb then Rb), sequence_lens `[B]` (i32), initial_h and
//! initial_c `[D, B, H]` (layout 1: `[B, D, H]`), peepholes `[D, 3*H]`
//! (i, o, f). Outputs Y `[T, D, B, H]` (layout 1: `[B, T, D, H]`), Y_h and
//! Y_c shaped like initial_h. Every optional pointer may be null.
//!
//! Gate orders follow ONNX: GRU `z, r, h`; LSTM `i, o, f, c`. Batch rows are
//! independent, so the kernel runs each row through the whole sequence
//! before the next one; steps at or past a row's sequence length write zeros
//! to Y and leave the state alone. Arithmetic is in `f64`; scratch holds
//! `11 * H` doubles.

use super::real::Real;
use crate::abi::rnn::*;
use crate::abi::{STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS, STATUS_OK};

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + libm::exp(-x))
    } else {
        let e = libm::exp(x);
        e / (1.0 + e)
    }
}

/// Applies activation `kind` with its `alpha`/`beta`.
pub fn activate(kind: i64, alpha: f64, beta: f64, x: f64) -> f64 {
    match kind {
        ACT_RELU => x.max(0.0),
        ACT_TANH => libm::tanh(x),
        ACT_SIGMOID => sigmoid(x),
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

/// One direction: its index and read-only views of its weights (element
/// offsets applied).
struct Weights<T> {
    dir: usize,
    w: *const T,
    r: *const T,
    b: *const T,
    peep: *const T,
}

struct Shape {
    kind: i64,
    g: usize,
    i: usize,
    h: usize,
}

/// `sum_k a[k] * row[k]` with `row` in `T`.
#[inline]
unsafe fn dot<T: Real>(a: *const f64, row: *const T, n: usize) -> f64 {
    let mut s = 0.0;
    for k in 0..n {
        s += *a.add(k) * (*row.add(k)).to_f64();
    }
    s
}

#[inline]
unsafe fn dot_t<T: Real>(x: *const T, row: *const T, n: usize) -> f64 {
    let mut s = 0.0;
    for k in 0..n {
        s += (*x.add(k)).to_f64() * (*row.add(k)).to_f64();
    }
    s
}

/// One time step for one batch row: updates `h` (and `c`) from input row `x`.
/// `s` is the scratch: `gx[4H] gh[4H] tmp[H]`.
unsafe fn step<T: Real>(
    p: &RnnParams,
    sh: &Shape,
    wt: &Weights<T>,
    x: *const T,
    h: *mut f64,
    c: *mut f64,
    s: *mut f64,
) {
    let (hs, gh_n) = (sh.h, sh.g * sh.h);
    let gx = s;
    let gh = s.add(4 * hs);
    let tmp = s.add(8 * hs);
    let bias = |k: usize| if wt.b.is_null() { 0.0 } else { (*wt.b.add(k)).to_f64() };
    for g in 0..gh_n {
        *gx.add(g) = dot_t(x, wt.w.add(g * sh.i), sh.i) + bias(g);
        *gh.add(g) = dot(h, wt.r.add(g * hs), hs) + bias(gh_n + g);
    }
    let act = |slot: usize, v: f64| {
        let k = wt.dir * RNN_ACTS + slot;
        let v = if p.has_clip != 0 { v.clamp(-p.clip, p.clip) } else { v };
        activate(p.act[k], p.alpha[k], p.beta[k], v)
    };
    let pre = |g: usize, j: usize| *gx.add(g * hs + j) + *gh.add(g * hs + j);
    match sh.kind {
        RNN_SIMPLE => {
            for j in 0..hs {
                *h.add(j) = act(0, pre(0, j));
            }
        }
        RNN_GRU => {
            // z into gx[0..H], r into gx[H..2H].
            for j in 0..hs {
                *tmp.add(j) = act(0, pre(0, j)); // z
                *gx.add(hs + j) = act(0, pre(1, j)); // r
            }
            for j in 0..hs {
                *gx.add(j) = *tmp.add(j);
            }
            if p.linear_before_reset == 0 {
                // gh_h = (r * h) R_h^T + Rb_h.
                for j in 0..hs {
                    *tmp.add(j) = *gx.add(hs + j) * *h.add(j);
                }
                for j in 0..hs {
                    let g = 2 * hs + j;
                    *gh.add(g) = dot(tmp, wt.r.add(g * hs), hs) + bias(gh_n + g);
                }
                for j in 0..hs {
                    *tmp.add(j) = act(1, pre(2, j));
                }
            } else {
                for j in 0..hs {
                    let v = *gx.add(2 * hs + j) + *gx.add(hs + j) * *gh.add(2 * hs + j);
                    *tmp.add(j) = act(1, v);
                }
            }
            for j in 0..hs {
                let z = *gx.add(j);
                *h.add(j) = (1.0 - z) * *tmp.add(j) + z * *h.add(j);
            }
        }
        _ => {
            let peep = |k: usize, j: usize| if wt.peep.is_null() { 0.0 } else { (*wt.peep.add(k * hs + j)).to_f64() };
            for j in 0..hs {
                let cp = *c.add(j);
                let f = act(0, pre(2, j) + peep(2, j) * cp);
                let i = if p.input_forget != 0 { 1.0 - f } else { act(0, pre(0, j) + peep(0, j) * cp) };
                let cc = act(1, pre(3, j));
                let cn = f * cp + i * cc;
                let o = act(0, pre(1, j) + peep(1, j) * cn);
                *c.add(j) = cn;
                *h.add(j) = o * act(2, cn);
            }
        }
    }
}

pub(crate) unsafe fn rnn<T: Real>(
    p: *const RnnParams,
    ptrs: [*const T; 7],
    outs: [*mut T; 3],
    lens: *const i32,
    scratch: *mut f64,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let dims = [p.seq_len, p.batch, p.input_size, p.hidden, p.directions];
    let g = match p.kind {
        RNN_SIMPLE => 1,
        RNN_GRU => 3,
        RNN_LSTM => 4,
        _ => return STATUS_INVALID_PARAMS,
    };
    if dims.iter().any(|&d| d < 0) || !(1..=2).contains(&p.directions) {
        return STATUS_INVALID_PARAMS;
    }
    let [t, batch, i, h, dirs] = dims.map(|d| d as usize);
    let sh = Shape { kind: p.kind, g, i, h };
    let [x, w, r, b, init_h, init_c, peep] = ptrs;
    let [y, y_h, y_c] = outs;
    if x.is_null() || w.is_null() || r.is_null() {
        return STATUS_INVALID_PARAMS;
    }
    // Validate every sequence length first so no output is half written.
    if !lens.is_null() {
        for bi in 0..batch {
            let l = *lens.add(bi);
            if l < 0 || l as usize > t {
                return STATUS_INDEX_OUT_OF_RANGE;
            }
        }
    }
    let layout1 = p.layout != 0;
    // Offset of state [d, b, :] (layout 0) or [b, d, :] (layout 1).
    let state_at = |d: usize, bi: usize| if layout1 { (bi * dirs + d) * h } else { (d * batch + bi) * h };
    let hs = scratch;
    let cs = scratch.add(h);
    let work = scratch.add(2 * h);
    for d in 0..dirs {
        let backwards = if dirs == 2 { d == 1 } else { p.reverse != 0 };
        let off = |ptr: *const T, per_dir: usize| if ptr.is_null() { ptr } else { ptr.add(d * per_dir) };
        let wt = Weights {
            dir: d,
            w: off(w, g * h * i),
            r: off(r, g * h * h),
            b: off(b, 2 * g * h),
            peep: off(peep, 3 * h),
        };
        for bi in 0..batch {
            let len = if lens.is_null() { t } else { *lens.add(bi) as usize };
            let st = state_at(d, bi);
            for j in 0..h {
                *hs.add(j) = if init_h.is_null() { 0.0 } else { (*init_h.add(st + j)).to_f64() };
                *cs.add(j) = if init_c.is_null() { 0.0 } else { (*init_c.add(st + j)).to_f64() };
            }
            for n in 0..t {
                let tt = if backwards { t - 1 - n } else { n };
                let y_row = if layout1 { ((bi * t + tt) * dirs + d) * h } else { ((tt * dirs + d) * batch + bi) * h };
                if tt >= len {
                    if !y.is_null() {
                        for j in 0..h {
                            *y.add(y_row + j) = T::from_f64(0.0);
                        }
                    }
                    continue;
                }
                let x_row = if layout1 { (bi * t + tt) * i } else { (tt * batch + bi) * i };
                step(p, &sh, &wt, x.add(x_row), hs, cs, work);
                if !y.is_null() {
                    for j in 0..h {
                        *y.add(y_row + j) = T::from_f64(*hs.add(j));
                    }
                }
            }
            for j in 0..h {
                if !y_h.is_null() {
                    *y_h.add(st + j) = T::from_f64(*hs.add(j));
                }
                if !y_c.is_null() {
                    *y_c.add(st + j) = T::from_f64(*cs.add(j));
                }
            }
        }
    }
    STATUS_OK
}

/// Scratch doubles [`onnxc_rnn_f32`] needs for `hidden` units.
pub const fn rnn_scratch_doubles(hidden: usize) -> usize {
    11 * hidden
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{assert_close, rand_vec};
    use std::ptr::{null, null_mut};
    use std::vec;
    use std::vec::Vec;

    fn params(kind: i64, t: usize, b: usize, i: usize, h: usize, dirs: usize) -> RnnParams {
        let mut p = RnnParams {
            kind,
            seq_len: t as i64,
            batch: b as i64,
            input_size: i as i64,
            hidden: h as i64,
            directions: dirs as i64,
            ..Default::default()
        };
        for d in 0..2 {
            p.act[d * 3] = if kind == RNN_SIMPLE { ACT_TANH } else { ACT_SIGMOID };
            p.act[d * 3 + 1] = ACT_TANH;
            p.act[d * 3 + 2] = ACT_TANH;
        }
        p
    }

    fn sig(x: f32) -> f32 {
        1.0 / (1.0 + (-x).exp())
    }

    /// Naive single-direction LSTM with peepholes, forward in time.
    #[test]
    fn lstm_matches_naive() {
        let (t, b, i, h) = (3, 2, 4, 3);
        let x = rand_vec(t * b * i, 1);
        let w = rand_vec(4 * h * i, 2);
        let r = rand_vec(4 * h * h, 3);
        let bias = rand_vec(8 * h, 4);
        let peep = rand_vec(3 * h, 5);
        let p = params(RNN_LSTM, t, b, i, h, 1);
        let mut y = vec![0f32; t * b * h];
        let (mut yh, mut yc) = (vec![0f32; b * h], vec![0f32; b * h]);
        let mut s = vec![0f64; rnn_scratch_doubles(h)];
        let st = unsafe {
            onnxc_rnn_f32(
                &p,
                x.as_ptr(),
                w.as_ptr(),
                r.as_ptr(),
                bias.as_ptr(),
                null(),
                null(),
                null(),
                peep.as_ptr(),
                y.as_mut_ptr(),
                yh.as_mut_ptr(),
                yc.as_mut_ptr(),
                s.as_mut_ptr(),
            )
        };
        assert_eq!(st, 0);
        let mut want = vec![0f32; t * b * h];
        for bi in 0..b {
            let (mut hp, mut cp) = (vec![0f32; h], vec![0f32; h]);
            for tt in 0..t {
                let xr = &x[(tt * b + bi) * i..][..i];
                let gate = |g: usize, j: usize| {
                    let row = g * h + j;
                    let mut v = bias[row] + bias[4 * h + row];
                    v += (0..i).map(|k| xr[k] * w[row * i + k]).sum::<f32>();
                    v += (0..h).map(|k| hp[k] * r[row * h + k]).sum::<f32>();
                    v
                };
                let mut hn = vec![0f32; h];
                let mut cn = vec![0f32; h];
                for j in 0..h {
                    let ig = sig(gate(0, j) + peep[j] * cp[j]);
                    let fg = sig(gate(2, j) + peep[2 * h + j] * cp[j]);
                    let cc = gate(3, j).tanh();
                    cn[j] = fg * cp[j] + ig * cc;
                    let og = sig(gate(1, j) + peep[h + j] * cn[j]);
                    hn[j] = og * cn[j].tanh();
                }
                hp = hn;
                cp = cn;
                want[(tt * b + bi) * h..][..h].copy_from_slice(&hp);
            }
            assert_close(&yh[bi * h..][..h], &hp, 1e-5);
            assert_close(&yc[bi * h..][..h], &cp, 1e-5);
        }
        assert_close(&y, &want, 1e-5);
    }

    /// Reverse GRU over a shortened sequence: zeros past the length, and the
    /// bidirectional second half equals a reverse run.
    #[test]
    fn gru_reverse_and_lengths() {
        let (t, b, i, h) = (4, 2, 2, 3);
        let x = rand_vec(t * b * i, 7);
        let w = rand_vec(2 * 3 * h * i, 8);
        let r = rand_vec(2 * 3 * h * h, 9);
        let lens = [2i32, 4];
        let run = |p: &RnnParams, dirs: usize| -> (Vec<f32>, Vec<f32>) {
            let mut y = vec![0f32; t * dirs * b * h];
            let mut yh = vec![0f32; dirs * b * h];
            let mut s = vec![0f64; rnn_scratch_doubles(h)];
            let st = unsafe {
                onnxc_rnn_f32(
                    p,
                    x.as_ptr(),
                    w.as_ptr(),
                    r.as_ptr(),
                    null(),
                    lens.as_ptr(),
                    null(),
                    null(),
                    null(),
                    y.as_mut_ptr(),
                    yh.as_mut_ptr(),
                    null_mut(),
                    s.as_mut_ptr(),
                )
            };
            assert_eq!(st, 0);
            (y, yh)
        };
        let bi = run(&params(RNN_GRU, t, b, i, h, 2), 2);
        let rev = RnnParams { reverse: 1, ..params(RNN_GRU, t, b, i, h, 1) };
        // The reverse-only run uses direction 0's weights: shift to direction 1's.
        let w1 = &w[3 * h * i..];
        let r1 = &r[3 * h * h..];
        let mut y = vec![0f32; t * b * h];
        let mut yh = vec![0f32; b * h];
        let mut s = vec![0f64; rnn_scratch_doubles(h)];
        let st = unsafe {
            onnxc_rnn_f32(
                &rev,
                x.as_ptr(),
                w1.as_ptr(),
                r1.as_ptr(),
                null(),
                lens.as_ptr(),
                null(),
                null(),
                null(),
                y.as_mut_ptr(),
                yh.as_mut_ptr(),
                null_mut(),
                s.as_mut_ptr(),
            )
        };
        assert_eq!(st, 0);
        for tt in 0..t {
            assert_close(&bi.0[(tt * 2 + 1) * b * h..][..b * h], &y[tt * b * h..][..b * h], 1e-6);
        }
        assert_close(&bi.1[b * h..], &yh, 1e-6);
        // Batch row 0 has length 2: steps 2 and 3 are zero.
        for tt in 2..t {
            assert!(y[tt * b * h..][..h].iter().all(|&v| v == 0.0));
        }
        let bad = [5i32, 1];
        let mut y = vec![0f32; t * b * h];
        let st = unsafe {
            onnxc_rnn_f32(
                &rev,
                x.as_ptr(),
                w1.as_ptr(),
                r1.as_ptr(),
                null(),
                bad.as_ptr(),
                null(),
                null(),
                null(),
                y.as_mut_ptr(),
                null_mut(),
                null_mut(),
                s.as_mut_ptr(),
            )
        };
        assert_eq!(st, STATUS_INDEX_OUT_OF_RANGE);
    }
}
