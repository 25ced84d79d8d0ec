//! The kernel against a plain reference, the scalar kernel it replaced:
//! one batch row through the whole sequence at a time, every gate a dot
//! product accumulated in f64. The f32 kernel runs at every instruction-set
//! level this host has, the f64 one at the best.

extern crate std;
use super::cells::activate;
use super::*;
use crate::generic::test_util::{assert_close, rand_vec, reversed, testable_isas, with_level};
use std::ptr::{null, null_mut};
use std::vec;
use std::vec::Vec;

/// Random operands of one problem and which optional ones are present.
#[derive(Clone)]
struct Case {
    p: RnnParams,
    x: Vec<f32>,
    w: Vec<f32>,
    r: Vec<f32>,
    b: Option<Vec<f32>>,
    lens: Option<Vec<i32>>,
    init_h: Option<Vec<f32>>,
    init_c: Option<Vec<f32>>,
    peep: Option<Vec<f32>>,
}

/// Y, Y_h and Y_c.
type Outputs<T> = [Vec<T>; 3];

impl Case {
    /// Every operand present (initial_c and peepholes for LSTM), default
    /// activations, forward, layout 0, full lengths.
    fn new(kind: i64, [t, b, i, h]: [usize; 4], dirs: usize) -> Case {
        let g = [1, 3, 4][kind as usize];
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
            p.act[d * RNN_ACTS] = if kind == RNN_SIMPLE { ACT_TANH } else { ACT_SIGMOID };
            p.act[d * RNN_ACTS + 1] = ACT_TANH;
            p.act[d * RNN_ACTS + 2] = ACT_TANH;
        }
        let lstm = kind == RNN_LSTM;
        Case {
            p,
            x: rand_vec(t * b * i, 1),
            w: rand_vec(dirs * g * h * i, 2),
            r: rand_vec(dirs * g * h * h, 3),
            b: Some(rand_vec(dirs * 2 * g * h, 4)),
            lens: None,
            init_h: Some(rand_vec(dirs * b * h, 5)),
            init_c: lstm.then(|| rand_vec(dirs * b * h, 6)),
            peep: lstm.then(|| rand_vec(dirs * 3 * h, 7)),
        }
    }

    /// Lengths `t, t - 1, ...` down to 0 and round again, over the batch.
    fn uneven_lengths(mut self) -> Case {
        let t = self.p.seq_len as i32;
        self.lens = Some((0..self.p.batch as i32).map(|b| t - b % (t + 1)).collect());
        self
    }

    fn output_lens(&self) -> [usize; 3] {
        let p = &self.p;
        let state = (p.directions * p.batch * p.hidden) as usize;
        [p.seq_len as usize * state, state, state]
    }

    /// The kernel in type `T` (`onnxc_rnn_f32` or `_f64`).
    fn run<T: GateMath>(&self, kernel: Kernel<T>) -> (i32, Outputs<T>) {
        self.run_with(kernel, &Parallel::SERIAL)
    }

    /// [`Case::run`] with `parallel` lent to the kernel.
    fn run_with<T: GateMath>(&self, kernel: Kernel<T>, parallel: &Parallel) -> (i32, Outputs<T>) {
        let cast = |v: &Vec<f32>| v.iter().map(|&e| T::from_f64(e as f64)).collect::<Vec<T>>();
        let opt = |v: &Option<Vec<f32>>| v.as_ref().map(cast);
        let ptr = |v: &Option<Vec<T>>| v.as_ref().map_or(null(), |v| v.as_ptr());
        let (x, w, r) = (cast(&self.x), cast(&self.w), cast(&self.r));
        let [b, init_h, init_c, peep] = [&self.b, &self.init_h, &self.init_c, &self.peep].map(opt);
        let lens = self.lens.as_ref().map_or(null(), |l| l.as_ptr());
        let mut outs = self.output_lens().map(|n| vec![T::NAN; n]);
        let mut scratch = vec![T::NAN; rnn_scratch_elems(&self.p)];
        let [y, y_h, y_c] = &mut outs;
        let y_c = if self.p.kind == RNN_LSTM { y_c.as_mut_ptr() } else { null_mut() };
        let status = unsafe {
            kernel(
                &self.p,
                x.as_ptr(),
                w.as_ptr(),
                r.as_ptr(),
                ptr(&b),
                lens,
                ptr(&init_h),
                ptr(&init_c),
                ptr(&peep),
                y.as_mut_ptr(),
                y_h.as_mut_ptr(),
                y_c,
                scratch.as_mut_ptr(),
                parallel,
            )
        };
        (status, outs)
    }
}

type Kernel<T> = unsafe extern "C" fn(
    *const RnnParams,
    *const T,
    *const T,
    *const T,
    *const T,
    *const i32,
    *const T,
    *const T,
    *const T,
    *mut T,
    *mut T,
    *mut T,
    *mut T,
    *const Parallel,
) -> i32;

/// The reference: every output of `case` in f64.
fn reference(case: &Case) -> Outputs<f64> {
    let p = &case.p;
    let s = Shape::new(p).unwrap();
    let mut outs = case.output_lens().map(|n| vec![0.0; n]);
    for d in 0..s.dirs {
        let backwards = if s.dirs == 2 { d == 1 } else { p.reverse != 0 };
        for b in 0..s.batch {
            let len = case.lens.as_ref().map_or(s.seq, |l| l[b] as usize);
            let at = s.state_offset(d, b);
            let init = |v: &Option<Vec<f32>>| -> Vec<f64> {
                (0..s.hidden).map(|j| v.as_ref().map_or(0.0, |v| v[at + j] as f64)).collect()
            };
            let (mut h, mut c) = (init(&case.init_h), init(&case.init_c));
            for n in 0..s.seq {
                let tt = if backwards { s.seq - 1 - n } else { n };
                if tt < len {
                    let x = &case.x[s.x_row(tt, b) * s.input..][..s.input];
                    reference_step(case, &s, d, x, &mut h, &mut c);
                    outs[0][s.y_offset(tt, d, b)..][..s.hidden].copy_from_slice(&h);
                }
            }
            outs[1][at..][..s.hidden].copy_from_slice(&h);
            outs[2][at..][..s.hidden].copy_from_slice(&c);
        }
    }
    outs
}

/// One step of one batch row in direction `d`, updating `h` and `c`.
fn reference_step(case: &Case, s: &Shape, d: usize, x: &[f32], h: &mut [f64], c: &mut [f64]) {
    let (p, hs, gw) = (&case.p, s.hidden, s.gate_width());
    let bias = |k: usize| case.b.as_ref().map_or(0.0, |b| b[2 * d * gw + k] as f64);
    let dot = |a: &[f64], row: &[f32]| a.iter().zip(row).map(|(&a, &w)| a * w as f64).sum::<f64>();
    let w_row = |g: usize| &case.w[(d * gw + g) * s.input..][..s.input];
    let r_row = |g: usize| &case.r[(d * gw + g) * hs..][..hs];
    let x: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let gx: Vec<f64> = (0..gw).map(|g| dot(&x, w_row(g)) + bias(g)).collect();
    let mut gh: Vec<f64> = (0..gw).map(|g| dot(h, r_row(g)) + bias(gw + g)).collect();
    let act = |slot: usize, v: f64| {
        let k = d * RNN_ACTS + slot;
        let v = if p.has_clip != 0 { v.clamp(-p.clip, p.clip) } else { v };
        activate(p.act[k], p.alpha[k], p.beta[k], v)
    };
    let pre = |gh: &[f64], g: usize, j: usize| gx[g * hs + j] + gh[g * hs + j];
    match p.kind {
        RNN_SIMPLE => (0..hs).for_each(|j| h[j] = act(0, pre(&gh, 0, j))),
        RNN_GRU => {
            let z: Vec<f64> = (0..hs).map(|j| act(0, pre(&gh, 0, j))).collect();
            let r: Vec<f64> = (0..hs).map(|j| act(0, pre(&gh, 1, j))).collect();
            let candidate: Vec<f64> = if p.linear_before_reset != 0 {
                (0..hs).map(|j| act(1, gx[2 * hs + j] + r[j] * gh[2 * hs + j])).collect()
            } else {
                let reset: Vec<f64> = (0..hs).map(|j| r[j] * h[j]).collect();
                (2 * hs..gw).for_each(|g| gh[g] = dot(&reset, r_row(g)) + bias(gw + g));
                (0..hs).map(|j| act(1, pre(&gh, 2, j))).collect()
            };
            (0..hs).for_each(|j| h[j] = (1.0 - z[j]) * candidate[j] + z[j] * h[j]);
        }
        _ => {
            let peep = |k: usize, j: usize| case.peep.as_ref().map_or(0.0, |v| v[(3 * d + k) * hs + j] as f64);
            for j in 0..hs {
                let f = act(0, pre(&gh, 2, j) + peep(2, j) * c[j]);
                let i = if p.input_forget != 0 { 1.0 - f } else { act(0, pre(&gh, 0, j) + peep(0, j) * c[j]) };
                c[j] = f * c[j] + i * act(1, pre(&gh, 3, j));
                h[j] = act(0, pre(&gh, 1, j) + peep(1, j) * c[j]) * act(2, c[j]);
            }
        }
    }
}

/// `case` with R packed as the compiler packs a constant one.
fn with_packed_r(case: &Case) -> Case {
    let mut r = vec![f32::NAN; rnn_packed_recurrent_elems(&case.p)];
    assert_eq!(unsafe { rnn_pack_recurrent(&case.p, case.r.as_ptr(), r.as_mut_ptr()) }, STATUS_OK);
    Case { r, p: RnnParams { packed_recurrent: 1, ..case.p }, ..case.clone() }
}

/// The f32 kernel at every level and the f64 kernel against the
/// reference, each with R as it lies and packed ahead (the same bits).
fn check(case: &Case) {
    let want = reference(case);
    let outputs = if case.p.kind == RNN_LSTM { 3 } else { 2 };
    let packed = with_packed_r(case);
    for isa in testable_isas() {
        let (status, got) = with_level(isa, || case.run::<f32>(onnxc_rnn_f32));
        assert_eq!(status, STATUS_OK);
        for k in 0..outputs {
            let want: Vec<f32> = want[k].iter().map(|&v| v as f32).collect();
            assert_close(&got[k], &want, 2e-5);
        }
        let (status, got_packed) = with_level(isa, || packed.run::<f32>(onnxc_rnn_f32));
        assert_eq!(status, STATUS_OK);
        let bits =
            |o: &Outputs<f32>| o.iter().map(|v| v.iter().map(|x| x.to_bits()).collect()).collect::<Vec<Vec<_>>>();
        assert_eq!(bits(&got_packed), bits(&got), "packed R");
        let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
        let (status, got_threaded) = with_level(isa, || case.run_with::<f32>(onnxc_rnn_f32, &threaded));
        assert_eq!(status, STATUS_OK);
        assert_eq!(bits(&got_threaded), bits(&got), "directions as tasks");
    }
    for case in [case, &packed] {
        let (status, got) = case.run::<f64>(onnxc_rnn_f64);
        assert_eq!(status, STATUS_OK);
        for k in 0..outputs {
            for (g, w) in got[k].iter().zip(&want[k]) {
                assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "f64: got {g}, want {w}");
            }
        }
    }
}

/// [`check`] on `kind` at `dims` in every direction and layout, each
/// case changed by `tweak` first.
fn check_every_direction(kind: i64, dims: [usize; 4], tweak: impl Fn(&mut Case)) {
    for (dirs, reverse) in [(1, 0), (1, 1), (2, 0)] {
        for layout in [0, 1] {
            let mut case = Case::new(kind, dims, dirs);
            case.p.reverse = reverse;
            case.p.layout = layout;
            tweak(&mut case);
            check(&case);
        }
    }
}

/// `[steps, batch, input, hidden]`: one of everything, odd sizes that are
/// not a multiple of a vector or of a panel (37, 130 units: gate columns
/// across panels), one to five batch rows (the product's row groups and
/// their remainder), a deep input.
const SIZES: [[usize; 4]; 8] = [
    [1, 1, 1, 1],
    [3, 1, 5, 17],
    [4, 2, 3, 9],
    [5, 3, 7, 33],
    [2, 5, 16, 8],
    [3, 4, 150, 20],
    [3, 1, 4, 37],
    [2, 5, 3, 130],
];

/// The options every kind has: uneven lengths (one of them 0), a clip, no
/// bias, initial states or peepholes.
fn common_options() -> [fn(&mut Case); 3] {
    [
        |c| *c = c.clone().uneven_lengths(),
        |c| {
            c.p.has_clip = 1;
            c.p.clip = 0.7;
        },
        |c| {
            c.b = None;
            c.init_h = None;
            c.init_c = None;
            c.peep = None;
        },
    ]
}

#[test]
fn lstm_matches_reference() {
    for dims in SIZES {
        check_every_direction(RNN_LSTM, dims, |_| {});
    }
    for tweak in common_options() {
        check_every_direction(RNN_LSTM, [4, 5, 3, 9], tweak);
    }
    check_every_direction(RNN_LSTM, [4, 3, 3, 9], |c| c.p.input_forget = 1);
}

/// Layers big enough that, with threads, the input projection is cut
/// into column ranges and a single direction's step products into panel
/// ranges (520 units: a ragged last panel; GRU's two parts cut apart):
/// [`check`] holds the threaded bits to the serial ones. The weights are
/// scaled by 1/√fan-in, as trained layers are, so the gates do not sit
/// at the f32 sums' rounding against the f64 reference.
#[test]
fn large_layers_split_over_tasks() {
    for kind in [RNN_LSTM, RNN_GRU] {
        let mut case = Case::new(kind, [3, 2, 600, 520], 1);
        for (weights, fan_in) in [(&mut case.w, 600f32), (&mut case.r, 520.0)] {
            weights.iter_mut().for_each(|v| *v /= fan_in.sqrt());
        }
        check(&case);
    }
}

#[test]
fn gru_matches_reference() {
    for linear_before_reset in [0, 1] {
        let lbr = |c: &mut Case| c.p.linear_before_reset = linear_before_reset;
        for dims in SIZES {
            check_every_direction(RNN_GRU, dims, lbr);
        }
        for tweak in common_options() {
            check_every_direction(RNN_GRU, [4, 5, 3, 9], |c| {
                lbr(c);
                tweak(c);
            });
        }
    }
}

#[test]
fn rnn_matches_reference() {
    for dims in SIZES {
        check_every_direction(RNN_SIMPLE, dims, |_| {});
    }
    for tweak in common_options() {
        check_every_direction(RNN_SIMPLE, [4, 5, 3, 9], tweak);
    }
}

/// Activations other than Sigmoid and Tanh, different per direction, with
/// their coefficients.
#[test]
fn other_activations_match_reference() {
    let lists = [[ACT_RELU, ACT_LEAKY_RELU, ACT_HARD_SIGMOID], [ACT_SOFTSIGN, ACT_ELU, ACT_SCALED_TANH]];
    for kind in [RNN_SIMPLE, RNN_GRU, RNN_LSTM] {
        check_every_direction(kind, [3, 2, 4, 5], |c| {
            for (d, list) in lists.iter().enumerate() {
                for (slot, &act) in list.iter().enumerate() {
                    c.p.act[d * RNN_ACTS + slot] = act;
                    c.p.alpha[d * RNN_ACTS + slot] = 0.3;
                    c.p.beta[d * RNN_ACTS + slot] = 0.6;
                }
            }
        });
    }
}

fn sig(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The reference itself against the LSTM equations written out (forward,
/// with peepholes and biases, zero initial states).
#[test]
fn lstm_matches_equations() {
    let (t, b, i, h) = (3, 2, 4, 3);
    let case = Case { init_h: None, init_c: None, ..Case::new(RNN_LSTM, [t, b, i, h], 1) };
    let (x, w, r) = (&case.x, &case.w, &case.r);
    let (bias, peep) = (case.b.as_ref().unwrap(), case.peep.as_ref().unwrap());
    let got = reference(&case);
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
                cn[j] = fg * cp[j] + ig * gate(3, j).tanh();
                let og = sig(gate(1, j) + peep[h + j] * cn[j]);
                hn[j] = og * cn[j].tanh();
            }
            (hp, cp) = (hn, cn);
            let y: Vec<f32> = got[0][(tt * b + bi) * h..][..h].iter().map(|&v| v as f32).collect();
            assert_close(&y, &hp, 1e-5);
        }
    }
}

/// A sequence length outside `[0, seq_len]` writes nothing.
#[test]
fn refuses_a_length_past_the_sequence() {
    let mut case = Case::new(RNN_GRU, [4, 2, 2, 3], 1);
    case.lens = Some(vec![5, 1]);
    let (status, outs) = case.run::<f32>(onnxc_rnn_f32);
    assert_eq!(status, STATUS_INDEX_OUT_OF_RANGE);
    assert!(outs[0].iter().all(|v| v.is_nan()));
}

/// The LSTM cell in one pass of vectors gives the slice path's bits at
/// every level, for widths with and without a tail, with peepholes and the
/// coupled input gate.
#[test]
fn lstm_cell_in_lanes_matches_slices() {
    use super::cells::{Activation, Cell};
    let p = Case::new(RNN_LSTM, [1, 1, 1, 1], 1).p;
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for units in [1, 7, 16, 37, 130] {
        let peep = rand_vec(3 * units, 9);
        let gh = rand_vec(4 * units, 2);
        for (peepholes, input_forget) in [(false, false), (true, false), (true, true)] {
            let cell = Cell {
                f: Activation::new(&p, 0, 0),
                g: Activation::new(&p, 0, 1),
                h: Activation::new(&p, 0, 2),
                peepholes: peepholes.then(|| [0, 1, 2].map(|k| &peep[k * units..][..units])),
                input_forget,
                reset_bias: None,
            };
            for isa in testable_isas() {
                let (mut gx, mut h, mut c) = (rand_vec(4 * units, 1), rand_vec(units, 3), rand_vec(units, 4));
                let (mut gx_s, mut h_s, mut c_s) = (gx.clone(), h.clone(), c.clone());
                with_level(isa, || {
                    cell.lstm(&mut gx, &gh, &mut h, &mut c);
                    cell.lstm_slices(&mut gx_s, &gh, &mut h_s, &mut c_s);
                });
                assert_eq!((bits(&h), bits(&c)), (bits(&h_s), bits(&c_s)), "{isa:?}, {units} units");
            }
        }
    }
}
