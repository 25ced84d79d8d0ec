//! Recurrent layers: RNN, GRU and LSTM, every direction, one kernel.
//!
//! Shapes (ONNX names; `D` directions, `G` gates: 1 RNN, 3 GRU, 4 LSTM):
//! X `[T, B, I]` (layout 1: `[B, T, I]`), W `[D, G*H, I]`, R `[D, G*H, H]`,
//! bias `[D, 2*G*H]` (Wb then Rb), sequence_lens `[B]` (i32), initial_h and
//! initial_c `[D, B, H]` (layout 1: `[B, D, H]`), peepholes `[D, 3*H]`
//! (i, o, f). Outputs Y `[T, D, B, H]` (layout 1: `[B, T, D, H]`), Y_h and
//! Y_c shaped like initial_h. Every optional pointer may be null. Gate
//! orders follow ONNX: GRU `z, r, h`; LSTM `i, o, f, c`.
//!
//! Nearly all the work is two matrix products, both through the crate's
//! gemm ([`GemmElem`]), in the tensors' own type (f32 models compute in f32,
//! as ONNX Runtime does):
//! - the input projection `X·Wᵀ` of every step, batch row and direction at
//!   once (W of both directions is one `[D*G*H, I]` matrix), with the
//!   biases `Wb + Rb` added by the gemm, into scratch (`gx`);
//! - at each step, the recurrent product `h·Rᵀ` of all batch rows together
//!   (`[B, H] x [H, G*H]`), over R packed into panels ([`panels`]): by the
//!   compiler when R is a constant (`packed_recurrent`, R then points to
//!   every direction's panels, see [`rnn_pack_recurrent`]), else by the
//!   kernel into scratch, once per direction.
//!   GRU without `linear_before_reset` takes it in two parts, since its h
//!   gate multiplies `r * h`, which needs the step's reset gate first.
//!
//! Between the products, [`cells`] applies the gates to each batch row.
//! Batch rows share the products, so every row runs every step; a step at
//! or past a row's sequence length leaves its state alone and writes zeros
//! to Y (a reverse direction therefore starts at a row's own last step).
//!
//! With a threaded [`Parallel`] hook, the input projection is cut into
//! column ranges (at the gemm's tile width, so each output is summed as
//! in one piece). The two directions of a bidirectional layer are
//! independent and run as two tasks, each on its own state areas; a
//! single direction instead cuts each step's recurrent product into
//! ranges of panels (at batch 1 a step streams all of R, and two cores
//! stream it from two caches). The bits are those of the serial run.
//!
//! Scratch ([`rnn_scratch_elems`] elements of the tensors' type):
//! `gx [T*B, D*G*H]`, the folded biases `[D*G*H]`, the GRU reset bias
//! `[D*H]`, and per direction the states `h` and `c` `[B, H]`,
//! `gh [B, G*H]`, the GRU rows `r * h` `[B, H]` and, unless the compiler
//! packed it, its R in panels.

mod cells;
pub(crate) mod lstm_lanes;
pub(crate) mod panels;
#[cfg(test)]
mod tests;

use super::gemm::{MatMut, MatRef};
use super::gemm_batched::gemm_by_columns;
use super::real::Real;
use crate::abi::rnn::*;
use crate::abi::{STATUS_INDEX_OUT_OF_RANGE, STATUS_INVALID_PARAMS, STATUS_OK};
use crate::isa::with_widest_vectors;
use crate::parallel::{share, Parallel};
use cells::{Activation, Cell, GateMath};
use core::slice::{from_raw_parts, from_raw_parts_mut};
use panels::{pack_parts, panels_elems, Panels, Product, PANEL};

/// Multiply-adds of a step's recurrent product per task, when there are
/// threads: R in half-MiB pieces, enough streaming to pay for a fork and
/// join each step, and small enough that 256 units (1 MiB of R, an L2)
/// split in two, each half staying in its core's cache.
const STEP_TASK_MACS: usize = 1 << 17;

/// Most tasks one step's product is cut into.
const STEP_TASKS: usize = 8;

/// The checked sizes of one call.
#[derive(Clone, Copy)]
struct Shape {
    kind: i64,
    gates: usize,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    batch_major: bool,
    linear_before_reset: bool,
    packed_recurrent: bool,
}

impl Shape {
    fn new(p: &RnnParams) -> Option<Shape> {
        let gates = match p.kind {
            RNN_SIMPLE => 1,
            RNN_GRU => 3,
            RNN_LSTM => 4,
            _ => return None,
        };
        let dims = [p.seq_len, p.batch, p.input_size, p.hidden, p.directions];
        if dims.iter().any(|&d| d < 0) || !(1..=2).contains(&p.directions) {
            return None;
        }
        let [seq, batch, input, hidden, dirs] = dims.map(|d| d as usize);
        let linear_before_reset = p.kind == RNN_GRU && p.linear_before_reset != 0;
        Some(Shape {
            kind: p.kind,
            gates,
            seq,
            batch,
            input,
            hidden,
            dirs,
            batch_major: p.layout != 0,
            linear_before_reset,
            packed_recurrent: p.packed_recurrent != 0,
        })
    }

    /// Columns of one direction's gates: `G*H`.
    fn gate_width(&self) -> usize {
        self.gates * self.hidden
    }

    /// Columns of `gx`: every direction's gates.
    fn gx_width(&self) -> usize {
        self.dirs * self.gate_width()
    }

    /// The row of X (and of `gx`) holding step `tt` of batch row `b`.
    fn x_row(&self, tt: usize, b: usize) -> usize {
        if self.batch_major {
            b * self.seq + tt
        } else {
            tt * self.batch + b
        }
    }

    /// Offset of Y's row for step `tt`, direction `d`, batch row `b`.
    fn y_offset(&self, tt: usize, d: usize, b: usize) -> usize {
        let row =
            if self.batch_major { (b * self.seq + tt) * self.dirs + d } else { (tt * self.dirs + d) * self.batch + b };
        row * self.hidden
    }

    /// Offset of a state tensor's row for direction `d`, batch row `b`.
    fn state_offset(&self, d: usize, b: usize) -> usize {
        let row = if self.batch_major { b * self.dirs + d } else { d * self.batch + b };
        row * self.hidden
    }

    /// Whether the h gate's product waits for the reset gate (GRU without
    /// `linear_before_reset`).
    fn resets_first(&self) -> bool {
        self.kind == RNN_GRU && !self.linear_before_reset
    }

    /// The recurrent product's parts `(first gate column, columns)`, each
    /// packed on its own; the second is empty but for [`Shape::resets_first`].
    fn product_parts(&self) -> [(usize, usize); 2] {
        let (h, gw) = (self.hidden, self.gate_width());
        if self.resets_first() {
            [(0, 2 * h), (2 * h, h)]
        } else {
            [(0, gw), (gw, 0)]
        }
    }

    /// Elements of one direction's R in panels.
    fn packed_direction_elems(&self) -> usize {
        self.product_parts().iter().fold(0, |sum, &(_, cols)| sum.saturating_add(panels_elems(cols, self.hidden)))
    }

    /// Scratch elements, in the order of [`Work::carve`].
    fn scratch_parts(&self) -> [usize; 8] {
        let gx = self.seq.saturating_mul(self.batch).saturating_mul(self.gx_width());
        let [state_h, state_c, gh, reset, packed] = self.direction_parts();
        let d = self.dirs;
        [gx, self.gx_width(), d * self.hidden, d * state_h, d * state_c, d * gh, d * reset, d * packed]
    }

    /// Elements of each direction's own state areas (`h`, `c`, `gh`,
    /// `reset`, packed R), one set per direction so that the two
    /// directions can run at once.
    fn direction_parts(&self) -> [usize; 5] {
        let (b, h, gw) = (self.batch, self.hidden, self.gate_width());
        let packed = if self.packed_recurrent { 0 } else { self.packed_direction_elems() };
        [b * h, b * h, b * gw, b * h, packed]
    }
}

/// Scratch elements [`onnxc_rnn_f32`] (and `_f64`) needs for `p`; 0 for
/// params it refuses.
pub fn rnn_scratch_elems(p: &RnnParams) -> usize {
    Shape::new(p).map_or(0, |s| s.scratch_parts().iter().fold(0, |sum, &n| sum.saturating_add(n)))
}

/// Elements of R (every direction) packed by [`rnn_pack_recurrent`] for
/// `p`, whatever its `packed_recurrent`; 0 for params it refuses.
pub fn rnn_packed_recurrent_elems(p: &RnnParams) -> usize {
    Shape::new(p).map_or(0, |s| s.packed_direction_elems().saturating_mul(s.dirs))
}

/// Packs R (`[D, G*H, H]`) into `dst` as the kernel reads it with
/// `packed_recurrent` set: each direction's panels after the other's.
///
/// # Safety
/// `r` holds R for `p` and `dst` [`rnn_packed_recurrent_elems`] elements.
pub unsafe fn rnn_pack_recurrent<T: Real>(p: &RnnParams, r: *const T, dst: *mut T) -> i32 {
    let Some(s) = Shape::new(p) else {
        return STATUS_INVALID_PARAMS;
    };
    for d in 0..s.dirs {
        let r = r.add(d * s.gate_width() * s.hidden);
        pack_parts(r, &s.product_parts(), s.hidden, dst.add(d * s.packed_direction_elems()));
    }
    STATUS_OK
}

/// The operands, each optional one null when absent.
struct Io<T> {
    x: *const T,
    w: *const T,
    r: *const T,
    b: *const T,
    init_h: *const T,
    init_c: *const T,
    peep: *const T,
    y: *mut T,
    y_h: *mut T,
    y_c: *mut T,
    lens: *const i32,
}

/// The scratch areas (see the module doc).
struct Work<T> {
    gx: *mut T,
    bias: *mut T,
    reset_bias: *mut T,
    h: *mut T,
    c: *mut T,
    gh: *mut T,
    reset: *mut T,
    packed: *mut T,
}

impl<T> Work<T> {
    unsafe fn carve(s: &Shape, scratch: *mut T) -> Self {
        let mut at = scratch;
        let parts = s.scratch_parts().map(|n| {
            let part = at;
            at = at.add(n);
            part
        });
        let [gx, bias, reset_bias, h, c, gh, reset, packed] = parts;
        Work { gx, bias, reset_bias, h, c, gh, reset, packed }
    }

    /// The areas direction `d` works in: its own set of state areas.
    unsafe fn direction(&self, s: &Shape, d: usize) -> Self {
        let [h, c, gh, reset, packed] = s.direction_parts().map(|n| d * n);
        Work {
            h: self.h.add(h),
            c: self.c.add(c),
            gh: self.gh.add(gh),
            reset: self.reset.add(reset),
            packed: self.packed.add(packed),
            gx: self.gx,
            bias: self.bias,
            reset_bias: self.reset_bias,
        }
    }
}

pub(crate) unsafe fn rnn<T: GateMath>(
    p: *const RnnParams,
    ptrs: [*const T; 7],
    outs: [*mut T; 3],
    lens: *const i32,
    scratch: *mut T,
    parallel: *const Parallel,
) -> i32 {
    let Some(p) = p.as_ref() else {
        return STATUS_INVALID_PARAMS;
    };
    let Some(s) = Shape::new(p) else {
        return STATUS_INVALID_PARAMS;
    };
    let [x, w, r, b, init_h, init_c, peep] = ptrs;
    let [y, y_h, y_c] = outs;
    if x.is_null() || w.is_null() || r.is_null() {
        return STATUS_INVALID_PARAMS;
    }
    // Validate every sequence length first so no output is half written.
    if !lens.is_null() && (0..s.batch).any(|b| !(0..=s.seq as i64).contains(&(*lens.add(b) as i64))) {
        return STATUS_INDEX_OUT_OF_RANGE;
    }
    if s.batch == 0 || s.hidden == 0 {
        return STATUS_OK;
    }
    let io = Io { x, w, r, b, init_h, init_c, peep, y, y_h, y_c, lens };
    let work = Work::carve(&s, scratch);
    fold_biases(&s, &io, &work);
    project_inputs(&s, &io, &work, parallel);
    // The directions are independent: two tasks when there are threads.
    // One direction lends the threads to its steps' products instead.
    let steps_parallel = if s.dirs == 1 { parallel } else { core::ptr::null() };
    Parallel::for_each(parallel, s.dirs, |d| run_direction(p, &s, &io, &work.direction(&s, d), d, steps_parallel));
    STATUS_OK
}

/// Fills `work.bias` with `Wb + Rb` per gate column, and for GRU with
/// `linear_before_reset` the h gate's `Rb` into `work.reset_bias` instead.
unsafe fn fold_biases<T: GateMath>(s: &Shape, io: &Io<T>, work: &Work<T>) {
    let (gw, h) = (s.gate_width(), s.hidden);
    let bias = |k: usize| if io.b.is_null() { T::ZERO } else { *io.b.add(k) };
    for d in 0..s.dirs {
        for g in 0..gw {
            let (wb, rb) = (bias(2 * d * gw + g), bias((2 * d + 1) * gw + g));
            let unfolded = s.linear_before_reset && g >= 2 * h;
            *work.bias.add(d * gw + g) = if unfolded { wb } else { wb + rb };
            if unfolded {
                *work.reset_bias.add(d * h + g - 2 * h) = rb;
            }
        }
    }
}

/// `gx = X·Wᵀ + bias` for every step, batch row and direction: one gemm,
/// cut into column ranges when there are threads and it is large.
unsafe fn project_inputs<T: GateMath>(s: &Shape, io: &Io<T>, work: &Work<T>, parallel: *const Parallel) {
    let (rows, width, depth) = (s.seq * s.batch, s.gx_width(), s.input);
    let x = MatRef { ptr: io.x, rs: depth as isize, cs: 1 };
    let w_t = MatRef { ptr: io.w, rs: 1, cs: depth as isize };
    let bias = MatRef { ptr: work.bias as *const T, rs: 0, cs: 1 };
    let gx = MatMut { ptr: work.gx, rs: width as isize, cs: 1 };
    gemm_by_columns((rows, width, depth), T::ONE, x, w_t, T::ONE, Some(bias), gx, parallel);
}

/// `out[b][..cols] = a[b]·R[first..first + cols]ᵀ` for every batch row
/// and product part `part` (`first`, `cols`), where `a` holds `H`-wide
/// rows and `out` rows `G*H` apart; with threads, ranges of its panels
/// as tasks once each holds [`STEP_TASK_MACS`].
unsafe fn recurrent_product<T: GateMath>(
    s: &Shape,
    dir: &Direction<T>,
    part: usize,
    a: *const T,
    out: *mut T,
    parallel: *const Parallel,
) {
    let q = Product { panels: dir.parts[part], rows: s.batch, a, out, out_stride: s.gate_width() };
    let panels = q.panel_count();
    let macs = (panels * PANEL).saturating_mul(q.panels.depth).saturating_mul(q.rows);
    let tasks = match Parallel::is_threaded(parallel) {
        true => (macs / STEP_TASK_MACS).clamp(1, panels.clamp(1, STEP_TASKS)),
        false => 1,
    };
    Parallel::for_each(parallel, tasks, |task| T::recurrent_product(&q.of_panels(share(panels, tasks, task))));
}

/// One direction: where it starts, its R in panels and its cells.
struct Direction<'a, T> {
    index: usize,
    backwards: bool,
    parts: [Panels<T>; 2],
    cell: Cell<'a, T>,
}

impl<T: GateMath> Direction<'_, T> {
    /// Direction `d`, with R packed into scratch unless the compiler did.
    unsafe fn new(p: &RnnParams, s: &Shape, io: &Io<T>, work: &Work<T>, d: usize) -> Self {
        let h = s.hidden;
        let lstm_peepholes = s.kind == RNN_LSTM && !io.peep.is_null();
        let peepholes = lstm_peepholes.then(|| [0, 1, 2].map(|k| from_raw_parts(io.peep.add((3 * d + k) * h), h)));
        let reset_bias = s.linear_before_reset.then(|| from_raw_parts(work.reset_bias.add(d * h) as *const T, h));
        let cell = Cell {
            f: Activation::new(p, d, 0),
            g: Activation::new(p, d, 1),
            h: Activation::new(p, d, 2),
            peepholes,
            input_forget: p.input_forget != 0,
            reset_bias,
        };
        let backwards = if s.dirs == 2 { d == 1 } else { p.reverse != 0 };
        let parts = s.product_parts();
        let mut at = if s.packed_recurrent {
            io.r.add(d * s.packed_direction_elems())
        } else {
            pack_parts(io.r.add(d * s.gate_width() * h), &parts, h, work.packed);
            work.packed as *const T
        };
        let parts = parts.map(|(_, cols)| {
            let panels = Panels { ptr: at, cols, depth: h };
            at = at.add(panels_elems(cols, h));
            panels
        });
        Direction { index: d, backwards, parts, cell }
    }
}

/// Runs direction `d` through the sequence, from its initial states to
/// its final ones, its steps' products split over `parallel`'s threads.
unsafe fn run_direction<T: GateMath>(
    p: &RnnParams,
    s: &Shape,
    io: &Io<T>,
    work: &Work<T>,
    d: usize,
    parallel: *const Parallel,
) {
    let dir = Direction::new(p, s, io, work, d);
    load_states(s, io, work, d);
    for n in 0..s.seq {
        let tt = if dir.backwards { s.seq - 1 - n } else { n };
        step(s, io, work, &dir, tt, parallel);
        write_step(s, io, work, d, tt);
    }
    store_states(s, io, work, d);
}

/// Whether batch row `b` has a step `tt`.
unsafe fn active<T>(io: &Io<T>, b: usize, tt: usize) -> bool {
    io.lens.is_null() || tt < *io.lens.add(b) as usize
}

/// Step `tt` of every batch row: the recurrent products and the cells.
unsafe fn step<T: GateMath>(
    s: &Shape,
    io: &Io<T>,
    work: &Work<T>,
    dir: &Direction<T>,
    tt: usize,
    parallel: *const Parallel,
) {
    let h = s.hidden;
    let cell = &dir.cell;
    let rows = Rows { s, io, work, d: dir.index, tt };
    let reset_first = s.resets_first();
    recurrent_product(s, dir, 0, work.h, work.gh, parallel);
    match s.kind {
        RNN_SIMPLE => rows.each(
            #[inline(always)]
            |row| cell.simple(row.gx, row.gh, row.h),
        ),
        RNN_LSTM => rows.each(
            #[inline(always)]
            |row| cell.lstm(row.gx, row.gh, row.h, row.c),
        ),
        _ => {
            rows.each(
                #[inline(always)]
                |row| {
                    cell.gru_gates(row.gx, row.gh);
                    if reset_first {
                        cell.gru_reset(row.gx, row.h, row.reset);
                    }
                },
            );
            if reset_first {
                recurrent_product(s, dir, 1, work.reset, work.gh.add(2 * h), parallel);
            }
            rows.each(
                #[inline(always)]
                |row| cell.gru_update(row.gx, row.gh, row.h),
            );
        }
    }
}

/// One batch row's parts of the scratch at one step.
struct Row<'a, T> {
    /// Its input projection for this direction: `G*H` values.
    gx: &'a mut [T],
    gh: &'a [T],
    h: &'a mut [T],
    c: &'a mut [T],
    reset: &'a mut [T],
}

/// The batch rows of step `tt` in direction `d`.
struct Rows<'a, T> {
    s: &'a Shape,
    io: &'a Io<T>,
    work: &'a Work<T>,
    d: usize,
    tt: usize,
}

impl<T: GateMath> Rows<'_, T> {
    /// Runs `body` (inlined: mark the closure `#[inline(always)]`) on each
    /// row that has this step, compiled for the widest vectors.
    #[inline(always)]
    unsafe fn each(&self, body: impl Fn(Row<T>)) {
        let (s, work) = (self.s, self.work);
        let (h, gw) = (s.hidden, s.gate_width());
        with_widest_vectors(
            #[inline(always)]
            || {
                for b in (0..s.batch).filter(|&b| active(self.io, b, self.tt)) {
                    body(Row {
                        gx: from_raw_parts_mut(work.gx.add(s.x_row(self.tt, b) * s.gx_width() + self.d * gw), gw),
                        gh: from_raw_parts(work.gh.add(b * gw), gw),
                        h: from_raw_parts_mut(work.h.add(b * h), h),
                        c: from_raw_parts_mut(work.c.add(b * h), h),
                        reset: from_raw_parts_mut(work.reset.add(b * h), h),
                    });
                }
            },
        )
    }
}

/// Sets the states of direction `d` from initial_h and initial_c (zeros
/// where absent), and the GRU reset rows to zero, so that a row past its
/// length enters the reset product as zeros.
unsafe fn load_states<T: GateMath>(s: &Shape, io: &Io<T>, work: &Work<T>, d: usize) {
    let h = s.hidden;
    for b in 0..s.batch {
        let at = s.state_offset(d, b);
        for (state, init) in [(work.h, io.init_h), (work.c, io.init_c)] {
            let row = from_raw_parts_mut(state.add(b * h), h);
            if init.is_null() {
                row.fill(T::ZERO);
            } else {
                row.copy_from_slice(from_raw_parts(init.add(at), h));
            }
        }
        from_raw_parts_mut(work.reset.add(b * h), h).fill(T::ZERO);
    }
}

/// Y's rows of step `tt` in direction `d`: the new `h`, or zeros for a
/// row past its length.
unsafe fn write_step<T: GateMath>(s: &Shape, io: &Io<T>, work: &Work<T>, d: usize, tt: usize) {
    if io.y.is_null() {
        return;
    }
    let h = s.hidden;
    for b in 0..s.batch {
        let dst = from_raw_parts_mut(io.y.add(s.y_offset(tt, d, b)), h);
        if active(io, b, tt) {
            dst.copy_from_slice(from_raw_parts(work.h.add(b * h), h));
        } else {
            dst.fill(T::ZERO);
        }
    }
}

/// Y_h and Y_c of direction `d`: its final states.
unsafe fn store_states<T: GateMath>(s: &Shape, io: &Io<T>, work: &Work<T>, d: usize) {
    let h = s.hidden;
    for b in 0..s.batch {
        let at = s.state_offset(d, b);
        for (out, state) in [(io.y_h, work.h), (io.y_c, work.c)] {
            if !out.is_null() {
                from_raw_parts_mut(out.add(at), h).copy_from_slice(from_raw_parts(state.add(b * h), h));
            }
        }
    }
}
