//! Elementwise programs: a chain of f32 functions (the steps of
//! [`ElementwiseParams`]) run over broadcast operands in vector registers.
//!
//! The compiler lowers an elementwise node, or a fused chain of them, to
//! one program when it has a step for each function; here the output is
//! walked row by row (the innermost dim, along which every operand is
//! contiguous or constant), each row in tiles of [`TILE`] elements that
//! stay in L1: the running value starts as the start operand's tile, and
//! each step updates the whole tile before the next one runs, so a step's
//! dispatch is paid once per tile and its loop is one straight vector
//! loop. A tile whose length is not a multiple of the vector width runs on
//! copies padded with zeros, so the tail gets the same instructions (and
//! bits) as the body: [`MathLanes`] guarantees the same results in every
//! lane width, so a value does not depend on where it sits in its row or
//! on the machine's vector width.
//!
//! A row is the innermost dims merged as far as every operand walks them
//! alike: contiguously, as one constant, or repeating a short contiguous
//! pattern (a per-channel operand of the blocked layout, `[N, C/8, 1, 1,
//! 8]` against `[N, C/8, H, W, 8]`: a row of `H·W·8`, not `H·W` rows of 8,
//! whose walk would cost more than their arithmetic). A repeating operand
//! is written out once per row into a tile-long copy that every tile of
//! the row reads.

use super::vector_math::{self as math, MathLanes};
use super::{advance, to_isize};
use crate::abi::elementwise::*;
use crate::abi::{MAX_RANK, STATUS_INVALID_PARAMS, STATUS_OK};
use crate::parallel::{share, Parallel};
use core::ops::Range;

/// Elements per tile: the running value and one operand stay in L1.
const TILE: usize = 256;

/// A validated program: its steps and the operand the value starts from.
pub struct Program<'p> {
    steps: &'p [ProgramStep],
    start: usize,
    dims: &'p [i64],
    strides: &'p [[i64; MAX_RANK]; PROGRAM_OPERANDS],
    /// How many innermost dims make one row, and how each operand walks it.
    row_dims: usize,
    walks: [Walk; PROGRAM_OPERANDS],
}

/// How an operand's elements follow one row of the output.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Walk {
    /// One element per output element, consecutive.
    Contiguous,
    /// One element for the whole row.
    Constant,
    /// Its first `period` consecutive elements over and over; `period`
    /// divides [`TILE`].
    Periodic(usize),
}

/// The innermost dims of `dims` that merge into one row, and how each
/// operand walks that row: a dim joins while every operand either steps
/// across it by the row so far (contiguous), or stands still on it
/// (constant, or repeating the row so far).
fn fold_row(dims: &[i64], strides: &[[i64; MAX_RANK]; PROGRAM_OPERANDS]) -> (usize, [Walk; PROGRAM_OPERANDS]) {
    let Some(last) = dims.len().checked_sub(1) else { return (0, [Walk::Constant; PROGRAM_OPERANDS]) };
    let mut walks = strides.map(|s| if s[last] == 1 { Walk::Contiguous } else { Walk::Constant });
    let mut row = dims[last];
    let mut row_dims = 1;
    for d in (0..last).rev() {
        let joined = |walk: Walk, stride: i64| match walk {
            _ if dims[d] == 1 => Some(walk),
            Walk::Contiguous if stride == row => Some(walk),
            Walk::Contiguous if stride == 0 && row > 0 && TILE.is_multiple_of(row as usize) => {
                Some(Walk::Periodic(row as usize))
            }
            Walk::Constant | Walk::Periodic(_) if stride == 0 => Some(walk),
            _ => None,
        };
        let mut next = walks;
        for (k, walk) in next.iter_mut().enumerate() {
            match joined(walks[k], strides[k][d]) {
                Some(joined) => *walk = joined,
                None => return (row_dims, walks),
            }
        }
        walks = next;
        row *= dims[d];
        row_dims += 1;
    }
    (row_dims, walks)
}

/// Outputs of at least this many elements are split over tasks when the
/// caller lends threads: a task's dispatch costs a few microseconds, the
/// cheapest step a fraction of a nanosecond per element.
const PARALLEL_ELEMENTS: usize = 1 << 15;
/// Most tasks one call is cut into.
const TASKS: usize = 8;

/// Runs the program of `p` (see [`onnxc_elementwise_f32`]): the output's
/// elements, in row-major order, cut into consecutive spans, one per task.
/// An element's value does not depend on the span it falls in (every lane
/// width gives the same bits), so neither does it on the thread count.
///
/// # Safety
/// As [`onnxc_elementwise_f32`].
pub unsafe fn run_program(
    p: *const ElementwiseParams,
    y: *mut f32,
    operands: [*const f32; PROGRAM_OPERANDS],
    parallel: *const Parallel,
) -> i32 {
    let Some(program) = p.as_ref().and_then(Program::checked) else { return STATUS_INVALID_PARAMS };
    let total = program.dims.iter().map(|&d| d as usize).product::<usize>();
    let tasks = match Parallel::is_threaded(parallel) {
        true => (total / (PARALLEL_ELEMENTS / 2)).clamp(1, TASKS),
        false => 1,
    };
    let level = crate::isa::Isa::best();
    Parallel::for_each(parallel, tasks, |task| {
        crate::isa::choose::elementwise_program(level, &program, y, operands, share(total, tasks, task));
    });
    STATUS_OK
}

impl<'p> Program<'p> {
    /// The program of `p` if its rank, step count, operand indices, step
    /// codes and innermost strides are in range.
    fn checked(p: &'p ElementwiseParams) -> Option<Program<'p>> {
        let rank = usize::try_from(p.rank).ok().filter(|&r| r <= MAX_RANK)?;
        let count = usize::try_from(p.steps).ok().filter(|&n| n <= PROGRAM_STEPS)?;
        let start = usize::try_from(p.start).ok().filter(|&s| s < PROGRAM_OPERANDS)?;
        let dims = &p.dims[..rank];
        let steps = &p.program[..count];
        let operand_ok =
            |s: &ProgramStep| s.operand == OPERAND_IMMEDIATE || (0..PROGRAM_OPERANDS as i32).contains(&s.operand);
        let steps_ok = steps.iter().all(|s| known_step(s.op) && (!is_binary(s.op) || operand_ok(s)));
        let innermost_ok = rank == 0 || p.strides.iter().all(|s| matches!(s[rank - 1], 0 | 1));
        if !(dims.iter().all(|&d| d >= 0) && steps_ok && innermost_ok) {
            return None;
        }
        let (row_dims, walks) = fold_row(dims, &p.strides);
        Some(Program { steps, start, dims, strides: &p.strides, row_dims, walks })
    }
}

fn is_binary(op: i32) -> bool {
    (STEP_ADD..=STEP_MINIMUM).contains(&op)
}

fn known_step(op: i32) -> bool {
    is_binary(op) || (STEP_ABS..=STEP_POW).contains(&op)
}

/// Runs `program` with vectors `V` over the output elements `span` (row-major
/// positions): the outer dims by odometer from the span's first row, each
/// row (or the part of it inside the span) in tiles.
///
/// # Safety
/// As [`onnxc_elementwise_f32`]; `V`'s instructions are supported; `span`
/// lies within the output.
#[inline(always)]
pub unsafe fn run<V: MathLanes>(
    program: &Program,
    y: *mut f32,
    operands: [*const f32; PROGRAM_OPERANDS],
    span: Range<usize>,
) {
    if span.is_empty() {
        return;
    }
    let outer_rank = program.dims.len() - program.row_dims;
    let (outer, row) = program.dims.split_at(outer_rank);
    let row = row.iter().map(|&n| n as usize).product::<usize>();
    let outer: [usize; MAX_RANK] = core::array::from_fn(|d| outer.get(d).map_or(1, |&n| n as usize));
    let outer = &outer[..outer_rank];
    let strides: [[isize; MAX_RANK]; PROGRAM_OPERANDS] = program.strides.map(|s| to_isize(&s));
    let mut index = [0usize; MAX_RANK];
    let mut rest = span.start / row;
    for d in (0..outer.len()).rev() {
        index[d] = rest % outer[d];
        rest /= outer[d];
    }
    let mut offsets: [isize; PROGRAM_OPERANDS] =
        core::array::from_fn(|k| (0..outer.len()).map(|d| index[d] as isize * strides[k][d]).sum());
    let mut written = span.start;
    let mut skip = span.start % row;
    let mut tiles = Tiles { value: [0.0; TILE], padded: [[0.0; TILE]; PROGRAM_OPERANDS] };
    loop {
        let len = (row - skip).min(span.end - written);
        let mut repeated = [false; PROGRAM_OPERANDS];
        let rows: [Source; PROGRAM_OPERANDS] = core::array::from_fn(|k| {
            Source::of(operands[k], offsets[k], program.walks[k], skip).unwrap_or_else(|| {
                let Walk::Periodic(period) = program.walks[k] else {
                    unreachable!("only periodic walks have no source")
                };
                let copy = &mut tiles.padded[k];
                repeat_pattern::<V>(copy, operands[k].offset(offsets[k]), period, skip % period, len);
                repeated[k] = true;
                Source::Row(copy.as_ptr())
            })
        });
        run_row::<V>(program, rows, repeated, &mut tiles, y.add(written), len);
        written += len;
        skip = 0;
        let strides: [&[isize]; PROGRAM_OPERANDS] = core::array::from_fn(|k| &strides[k][..outer.len()]);
        if written == span.end || !advance(&mut index[..outer.len()], outer, strides, &mut offsets) {
            return;
        }
    }
}

/// Where a step's second value comes from in one row.
#[derive(Clone, Copy)]
enum Source {
    /// Consecutive elements from here.
    Row(*const f32),
    /// One value for the whole row.
    Value(f32),
}

impl Source {
    /// Operand `base` from element `offset` when it walks the row by `walk`
    /// from the row's element `skip` (a null, unused operand stays unread),
    /// or `None` for a periodic walk, which [`repeat_pattern`] serves.
    unsafe fn of(base: *const f32, offset: isize, walk: Walk, skip: usize) -> Option<Source> {
        match walk {
            _ if base.is_null() => Some(Source::Value(0.0)),
            Walk::Contiguous => Some(Source::Row(base.offset(offset + skip as isize))),
            Walk::Constant => Some(Source::Value(*base.offset(offset))),
            Walk::Periodic(_) => None,
        }
    }
}

/// Writes the pattern of `period` elements at `pattern`, from its element
/// `phase` on, over and over into `copy`, as far as a row of `len`
/// elements reads it in one tile of vectors `V`.
unsafe fn repeat_pattern<V: MathLanes>(
    copy: &mut [f32; TILE],
    pattern: *const f32,
    period: usize,
    phase: usize,
    len: usize,
) {
    let filled = len.next_multiple_of(V::LANES).min(TILE).max(period);
    let pattern = core::slice::from_raw_parts(pattern, period);
    copy[..period - phase].copy_from_slice(&pattern[phase..]);
    copy[period - phase..period].copy_from_slice(&pattern[..phase]);
    let mut done = period;
    while done < filled {
        let more = done.min(filled - done);
        copy.copy_within(..more, done);
        done += more;
    }
}

/// The running value of a tile, and the padded copies of its operands.
struct Tiles {
    value: [f32; TILE],
    padded: [[f32; TILE]; PROGRAM_OPERANDS],
}

/// One row of `len` elements, tile by tile; a tile whose length is not a
/// whole number of vectors runs on zero-padded copies of its operands.
/// A `repeated` operand's row is one tile that every tile reads (its
/// copy in `tiles`, already as long as any tile of the row).
/// A whole tile's last step stores straight to `y`, so a one-step program
/// reads its operand and writes its result in one pass.
#[inline(always)]
unsafe fn run_row<V: MathLanes>(
    program: &Program,
    rows: [Source; PROGRAM_OPERANDS],
    repeated: [bool; PROGRAM_OPERANDS],
    tiles: &mut Tiles,
    y: *mut f32,
    len: usize,
) {
    let mut done = 0;
    while done < len {
        let count = (len - done).min(TILE);
        let lanes = count.next_multiple_of(V::LANES);
        let mut tile: [Source; PROGRAM_OPERANDS] = core::array::from_fn(|k| match rows[k] {
            Source::Row(p) if !repeated[k] => Source::Row(p.add(done)),
            source => source,
        });
        if lanes != count {
            let copies = tile.iter_mut().zip(tiles.padded.iter_mut()).zip(repeated);
            for ((source, copy), repeated) in copies {
                if let (Source::Row(p), false) = (*source, repeated) {
                    copy[..count].copy_from_slice(core::slice::from_raw_parts(p, count));
                    copy[count..lanes].fill(0.0);
                    *source = Source::Row(copy.as_ptr());
                }
            }
            run_tile::<V>(program, &tile, tiles.value.as_mut_ptr(), tiles.value.as_mut_ptr(), lanes);
            core::ptr::copy_nonoverlapping(tiles.value.as_ptr(), y.add(done), count);
        } else {
            run_tile::<V>(program, &tile, tiles.value.as_mut_ptr(), y.add(done), lanes);
        }
        done += count;
    }
}

/// The program over one tile of `lanes` elements (a whole number of
/// vectors): each step reads the running value from where the step before
/// left it (the start operand's row itself for the first) and writes it to
/// `value`, the last step to `out`. A program without steps copies its
/// start operand.
#[inline(always)]
unsafe fn run_tile<V: MathLanes>(
    program: &Program,
    tile: &[Source; PROGRAM_OPERANDS],
    value: *mut f32,
    out: *mut f32,
    lanes: usize,
) {
    let mut current = match tile[program.start] {
        Source::Row(p) => p,
        Source::Value(x) => {
            core::slice::from_raw_parts_mut(value, lanes).fill(x);
            value as *const f32
        }
    };
    let Some((last, steps)) = program.steps.split_last() else {
        core::ptr::copy(current, out, lanes);
        return;
    };
    for step in steps {
        apply::<V>(step, current, value, lanes, operand(step, tile));
        current = value;
    }
    apply::<V>(last, current, out, lanes, operand(last, tile));
}

/// Where `step`'s second value comes from in this tile.
#[inline(always)]
fn operand(step: &ProgramStep, tile: &[Source; PROGRAM_OPERANDS]) -> Source {
    match step.operand {
        OPERAND_IMMEDIATE => Source::Value(step.alpha),
        k => tile.get(k as usize).copied().unwrap_or(Source::Value(0.0)),
    }
}

/// One step over the tile: `dst[i] = step(src[i], w[i])` (`dst` may be
/// `src`). A step of a few instructions gets a straight vector loop of its
/// own, matched once per tile: a match per vector would cost it a third of
/// its time (Relu: 0.19 against 0.13 ms over 802,816 floats, AVX2 on Zen
/// 3). The functions of dozens of instructions share one loop that matches
/// the step per vector ([`function`]), a branch that always goes the same
/// way and that their arithmetic hides (a loop each measured 5-10 %
/// slower for exp, tanh and sigmoid). The loops are macros, not closures,
/// so that they inline into the caller's `target_feature` function.
#[inline(always)]
unsafe fn apply<V: MathLanes>(step: &ProgramStep, src: *const f32, dst: *mut f32, lanes: usize, w: Source) {
    let (op, alpha, beta) = (step.op, step.alpha, step.beta);
    let zero = V::splat(0.0);
    macro_rules! unary {
        (|$v:ident| $f:expr) => {
            for i in (0..lanes).step_by(V::LANES) {
                let $v = V::load(src.add(i));
                V::store(dst.add(i), $f);
            }
        };
    }
    macro_rules! binary {
        (|$v:ident, $w:ident| $f:expr) => {
            match w {
                Source::Row(p) => {
                    for i in (0..lanes).step_by(V::LANES) {
                        let ($v, $w) = (V::load(src.add(i)), V::load(p.add(i)));
                        V::store(dst.add(i), $f);
                    }
                }
                Source::Value(x) => {
                    let $w = V::splat(x);
                    unary!(|$v| $f)
                }
            }
        };
    }
    match op {
        STEP_ADD => binary!(|v, w| V::add(v, w)),
        STEP_SUB => binary!(|v, w| V::sub(v, w)),
        STEP_SUB_FROM => binary!(|v, w| V::sub(w, v)),
        STEP_MUL => binary!(|v, w| V::mul(v, w)),
        STEP_DIV => binary!(|v, w| V::div(v, w)),
        STEP_DIV_INTO => binary!(|v, w| V::div(w, v)),
        STEP_MAXIMUM => binary!(|v, w| maximum(v, w)),
        STEP_MINIMUM => binary!(|v, w| minimum(v, w)),
        STEP_ABS => unary!(|v| V::abs(v)),
        STEP_NEG => unary!(|v| V::mul(v, V::splat(-1.0))),
        STEP_SQRT => unary!(|v| V::sqrt(v)),
        STEP_RECIPROCAL => unary!(|v| V::div(V::splat(1.0), v)),
        STEP_RELU => unary!(|v| maximum(v, zero)),
        STEP_LEAKY_RELU => unary!(|v| V::select(V::less(v, zero), V::mul(v, V::splat(alpha)), v)),
        STEP_HARD_SIGMOID => unary!(|v| clamp01(V::add(V::mul(v, V::splat(alpha)), V::splat(beta)))),
        STEP_HARD_SWISH => unary!(|v| V::mul(v, clamp01(V::add(V::mul(v, V::splat(1.0 / 6.0)), V::splat(0.5))))),
        STEP_SOFTSIGN => unary!(|v| V::div(v, V::add(V::splat(1.0), V::abs(v)))),
        _ => unary!(|v| function(op, alpha, v)),
    }
}

/// A step that is a function of many instructions, applied to `v` (the
/// identity for a code without one).
#[inline(always)]
unsafe fn function<V: MathLanes>(op: i32, alpha: f32, v: V) -> V {
    match op {
        STEP_EXP => math::exp(v),
        STEP_LOG => math::log(v),
        STEP_TANH => math::tanh(v),
        STEP_ERF => math::erf(v),
        STEP_SIGMOID => math::sigmoid(v),
        STEP_ELU => V::select(V::less(v, V::splat(0.0)), V::mul(math::exp_m1(v), V::splat(alpha)), v),
        STEP_SOFTPLUS => math::softplus(v),
        STEP_GELU => math::gelu(v),
        STEP_GELU_TANH => math::gelu_tanh(v),
        STEP_MISH => math::mish(v),
        STEP_SWISH => V::mul(v, math::sigmoid(V::mul(v, V::splat(alpha)))),
        STEP_POW => math::power(v, alpha),
        _ => v,
    }
}

/// The larger of `a` and `b`, NaN if either is.
#[inline(always)]
unsafe fn maximum<V: MathLanes>(a: V, b: V) -> V {
    V::select(V::is_nan(a), a, V::max(a, b))
}

/// The smaller of `a` and `b`, NaN if either is.
#[inline(always)]
unsafe fn minimum<V: MathLanes>(a: V, b: V) -> V {
    V::select(V::is_nan(a), a, V::min(a, b))
}

/// `v` clamped to `[0, 1]` (NaN stays NaN).
#[inline(always)]
unsafe fn clamp01<V: MathLanes>(v: V) -> V {
    minimum(maximum(v, V::splat(0.0)), V::splat(1.0))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::generic::test_util::{rand_vec, reversed, testable_isas, with_level};
    use crate::isa::Isa;
    use std::vec;
    use std::vec::Vec;

    fn step(op: i32, operand: i32, alpha: f32, beta: f32) -> ProgramStep {
        ProgramStep { op, operand, alpha, beta }
    }

    /// Params for `dims`, operand strides `strides` (unlisted operands
    /// unused), starting from operand 0.
    fn params(dims: &[i64], strides: &[&[i64]], steps: &[ProgramStep]) -> ElementwiseParams {
        let mut p = ElementwiseParams {
            rank: dims.len() as i64,
            dims: [0; MAX_RANK],
            strides: [[0; MAX_RANK]; PROGRAM_OPERANDS],
            start: 0,
            steps: steps.len() as i64,
            program: [ProgramStep::default(); PROGRAM_STEPS],
        };
        p.dims[..dims.len()].copy_from_slice(dims);
        for (k, s) in strides.iter().enumerate() {
            p.strides[k][..s.len()].copy_from_slice(s);
        }
        p.program[..steps.len()].copy_from_slice(steps);
        p
    }

    fn run_at(level: Isa, p: &ElementwiseParams, operands: &[&[f32]], len: usize) -> Vec<f32> {
        let mut y = vec![f32::NAN; len];
        let mut ptrs = [core::ptr::null(); PROGRAM_OPERANDS];
        for (k, o) in operands.iter().enumerate() {
            ptrs[k] = o.as_ptr();
        }
        let status = with_level(level, || unsafe { run_program(p, y.as_mut_ptr(), ptrs, core::ptr::null()) });
        assert_eq!(status, STATUS_OK);
        y
    }

    /// Every step code: the binary ones with a row operand, a value
    /// operand and an immediate.
    fn every_step() -> Vec<ProgramStep> {
        let binary = (STEP_ADD..=STEP_MINIMUM).flat_map(|op| [1, 2, OPERAND_IMMEDIATE].map(|k| step(op, k, 0.5, 0.0)));
        let unary = (STEP_ABS..=STEP_POW).map(|op| step(op, 0, 0.3, 0.4));
        let powers = [0.0, 1.0, 2.0, 3.0, -1.0, 0.5, -2.5, 5.0].map(|e| step(STEP_POW, 0, e, 0.0));
        binary.chain(unary).chain(powers).collect()
    }

    /// `count` values spread over `[-30, 30]`, and the special ones.
    fn awkward_values(count: usize) -> Vec<f32> {
        let specials = [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-40, -1e-40, 88.5, -100.0];
        let spread = rand_vec(count, 1).into_iter().map(|v| v * 30.0);
        specials.into_iter().chain(spread).take(count).collect()
    }

    #[test]
    fn every_vector_width_gives_the_same_bits() {
        for len in [1usize, 7, 16, 17, 255, 256, 300, 517] {
            let (x, w, c) = (awkward_values(len), rand_vec(len, 2), [0.75f32]);
            for s in every_step() {
                let p = params(&[len as i64], &[&[1], &[1], &[0]], &[s]);
                let reference = run_at(Isa::Generic, &p, &[&x, &w, &c], len);
                for level in testable_isas() {
                    let y = run_at(level, &p, &[&x, &w, &c], len);
                    let same =
                        y.iter().zip(&reference).all(|(a, b)| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan());
                    assert!(same, "step {s:?} on {} differs from generic at length {len}", level.name());
                }
            }
        }
    }

    /// exp and the steps built on it (sigmoid, swish, softplus) give every
    /// level the generic bits densely over `[-106, 90]`: subnormal results,
    /// the last normal ones and the overflow (AVX-512 scales every lane in
    /// one instruction, the others test for subnormal lanes).
    #[test]
    fn exponentials_agree_at_every_level_down_to_subnormals() {
        let x: Vec<f32> = (0..20_000).map(|i| -106.0 + i as f32 * 0.0098).collect();
        for op in [STEP_EXP, STEP_SIGMOID, STEP_SWISH, STEP_SOFTPLUS] {
            let p = params(&[x.len() as i64], &[&[1]], &[step(op, 0, 1.0, 0.0)]);
            let reference = run_at(Isa::Generic, &p, &[&x], x.len());
            for level in testable_isas() {
                let y = run_at(level, &p, &[&x], x.len());
                let same = y.iter().zip(&reference).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "step {op} on {} differs from generic", level.name());
            }
        }
    }

    #[test]
    fn steps_compute_their_functions() {
        let sigmoid = |x: f64| 1.0 / (1.0 + libm::exp(-x));
        type Reference = fn(f64) -> f64;
        let cases: [(i32, Reference); 8] = [
            (STEP_EXP, libm::exp),
            (STEP_TANH, libm::tanh),
            (STEP_ERF, libm::erf),
            (STEP_SQRT, libm::sqrt),
            (STEP_ABS, f64::abs),
            (STEP_NEG, |x| -x),
            (STEP_RELU, |x| x.max(0.0)),
            (STEP_SIGMOID, sigmoid),
        ];
        let x: Vec<f32> = (0..301).map(|i| (i as f32 - 150.0) / 17.0).collect();
        for (op, f) in cases {
            let p = params(&[x.len() as i64], &[&[1]], &[step(op, 0, 0.0, 0.0)]);
            for level in testable_isas() {
                let y = run_at(level, &p, &[&x], x.len());
                for (&xi, &yi) in x.iter().zip(&y) {
                    let want = f(xi as f64);
                    let ok = (yi as f64 - want).abs() <= 1e-6 * want.abs().max(1.0) || (want.is_nan() && yi.is_nan());
                    assert!(ok, "step {op} at {xi}: {yi}, want {want}");
                }
            }
        }
    }

    #[test]
    fn operands_broadcast_along_outer_and_inner_dims() {
        // [2, 3, 5]: x - bias[3, 1] then / scale[5], then max with 0.1.
        let x = rand_vec(30, 3);
        let (bias, scale) = ([0.5f32, -1.0, 2.0], [1.0f32, 2.0, 4.0, 8.0, 16.0]);
        let steps =
            [step(STEP_SUB, 1, 0.0, 0.0), step(STEP_DIV, 2, 0.0, 0.0), step(STEP_MAXIMUM, OPERAND_IMMEDIATE, 0.1, 0.0)];
        let p = params(&[2, 3, 5], &[&[15, 5, 1], &[0, 1, 0], &[0, 0, 1]], &steps);
        for level in testable_isas() {
            let y = run_at(level, &p, &[&x, &bias, &scale], 30);
            for (i, &yi) in y.iter().enumerate() {
                let want = ((x[i] - bias[i / 5 % 3]) / scale[i % 5]).max(0.1);
                assert_eq!(yi, want, "{} at {i}", level.name());
            }
        }
    }

    /// `x[n, cb, h, w, c] · s[n, cb, 0, 0, c] + b[cb]`, the blocked layout's
    /// per-channel scale: the pattern of 8 repeats along rows of `h·w·8`
    /// (several tiles and a tail), also when spans start inside a row.
    #[test]
    fn per_channel_operands_of_the_blocked_layout_repeat_along_the_row() {
        let dims = [2i64, 3, 5, 9, 8];
        let len = dims.iter().product::<i64>() as usize;
        let x = rand_vec(len, 6);
        let (scale, bias) = (rand_vec(2 * 3 * 8, 7), [0.25f32, -0.5, 1.5]);
        let steps = [step(STEP_MUL, 1, 0.0, 0.0), step(STEP_ADD, 2, 0.0, 0.0), step(STEP_TANH, 0, 0.0, 0.0)];
        let p = params(&dims, &[&[1080, 360, 72, 8, 1], &[24, 8, 0, 0, 1], &[0, 1, 0, 0, 0]], &steps);
        let program = Program::checked(&p).expect("valid");
        assert_eq!((program.row_dims, program.walks[1]), (3, Walk::Periodic(8)));
        let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
        let ptrs = core::array::from_fn(|k| {
            [x.as_ptr(), scale.as_ptr(), bias.as_ptr()].get(k).copied().unwrap_or(core::ptr::null())
        });
        for level in testable_isas() {
            let y = run_at(level, &p, &[&x, &scale, &bias], len);
            for (i, &yi) in y.iter().enumerate() {
                let (n, cb, c) = (i / 1080, i / 360 % 3, i % 8);
                let v = crate::generic::vector_math::Scalar(x[i] * scale[n * 24 + cb * 8 + c] + bias[cb]);
                // SAFETY: the one-lane functions are plain arithmetic.
                let want = unsafe { math::tanh(v) }.0;
                assert_eq!(yi.to_bits(), want.to_bits(), "{} at {i}", level.name());
            }
            let mut split = vec![f32::NAN; len];
            let status = with_level(level, || unsafe { run_program(&p, split.as_mut_ptr(), ptrs, &threaded) });
            assert_eq!(status, STATUS_OK);
            assert!(split.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()), "{}: split differs", level.name());
        }
    }

    /// Dims merge into a row only while every operand walks them alike.
    #[test]
    fn rows_fold_while_operands_walk_alike() {
        let strides = |rows: &[&[i64]]| {
            let mut s = [[0i64; MAX_RANK]; PROGRAM_OPERANDS];
            for (k, r) in rows.iter().enumerate() {
                s[k][..r.len()].copy_from_slice(r);
            }
            s
        };
        // Contiguous twice: one row of 12.
        assert_eq!(fold_row(&[3, 4], &strides(&[&[4, 1], &[0, 0]])).0, 2);
        // A pattern longer than a tile cannot repeat from a tile-long copy.
        let (dims, long) = ([3i64, 512], strides(&[&[512, 1], &[0, 1]]));
        assert_eq!(fold_row(&dims, &long).0, 1);
        // A per-row constant that changes from row to row stops the fold.
        assert_eq!(fold_row(&[3, 4], &strides(&[&[4, 1], &[1, 0]])).0, 1);
        // Rank 0: an empty row.
        assert_eq!(fold_row(&[], &strides(&[])).0, 0);
    }

    #[test]
    fn chains_over_many_tiles_write_in_place_and_copy_without_steps() {
        // SiLU as two steps (sigmoid, times the start operand) over rows of
        // whole tiles and a tail, the output on top of the start operand.
        let len = 2 * TILE + 37;
        let x = rand_vec(len, 4).into_iter().map(|v| v * 8.0).collect::<Vec<_>>();
        let silu = [step(STEP_SIGMOID, 0, 0.0, 0.0), step(STEP_MUL, 0, 0.0, 0.0)];
        let p = params(&[len as i64], &[&[1]], &silu);
        let copy = params(&[len as i64], &[&[1]], &[]);
        for level in testable_isas() {
            let apart = run_at(level, &p, &[&x], len);
            let mut shared = x.clone();
            let ptrs = core::array::from_fn(|k| if k == 0 { shared.as_ptr() } else { core::ptr::null() });
            let status = with_level(level, || unsafe { run_program(&p, shared.as_mut_ptr(), ptrs, core::ptr::null()) });
            assert_eq!(status, STATUS_OK);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&apart), bits(&shared), "{}: in place differs", level.name());
            for (i, (&y, &xi)) in apart.iter().zip(&x).enumerate() {
                let want = xi / (1.0 + (-xi).exp());
                assert!((y - want).abs() <= 1e-6 * want.abs().max(1.0), "{} at {i}: {y} vs {want}", level.name());
            }
            assert_eq!(bits(&run_at(level, &copy, &[&x], len)), bits(&x), "{}: copy", level.name());
        }
    }

    #[test]
    fn spans_split_over_tasks_give_the_serial_bits() {
        // [3, 50001] with a row operand and one broadcast along the rows:
        // spans start and end inside rows.
        let (rows, len) = (3usize, 50_001usize);
        let x = rand_vec(rows * len, 5).into_iter().map(|v| v * 6.0).collect::<Vec<_>>();
        let bias = [0.5f32, -1.5, 2.0];
        let steps = [step(STEP_ADD, 1, 0.0, 0.0), step(STEP_TANH, 0, 0.0, 0.0), step(STEP_MUL, 0, 0.0, 0.0)];
        let p = params(&[rows as i64, len as i64], &[&[len as i64, 1], &[1, 0]], &steps);
        let threaded = Parallel { run: Some(reversed), user: core::ptr::null_mut() };
        let ptrs = core::array::from_fn(|k| [x.as_ptr(), bias.as_ptr()].get(k).copied().unwrap_or(core::ptr::null()));
        for level in testable_isas() {
            let serial = run_at(level, &p, &[&x, &bias], rows * len);
            let mut split = vec![f32::NAN; rows * len];
            let status = with_level(level, || unsafe { run_program(&p, split.as_mut_ptr(), ptrs, &threaded) });
            assert_eq!(status, STATUS_OK);
            let same = serial.iter().zip(&split).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{}: split over tasks differs", level.name());
        }
    }

    #[test]
    fn maximum_and_relu_keep_nan() {
        let x = [f32::NAN, 1.0, -1.0, f32::NAN];
        let w = [0.0, f32::NAN, 0.0, f32::NAN];
        let p = params(&[4], &[&[1], &[1]], &[step(STEP_MAXIMUM, 1, 0.0, 0.0), step(STEP_RELU, 0, 0.0, 0.0)]);
        let y = run_at(Isa::best(), &p, &[&x, &w], 4);
        assert!(y[0].is_nan() && y[1].is_nan() && y[3].is_nan());
        assert_eq!(y[2], 0.0);
    }

    #[test]
    fn bad_params_are_refused() {
        let good = params(&[4], &[&[1]], &[step(STEP_EXP, 0, 0.0, 0.0)]);
        let mut strided = good;
        strided.strides[0][0] = 2;
        let mut operand = params(&[4], &[&[1]], &[step(STEP_ADD, 9, 0.0, 0.0)]);
        let mut unknown = good;
        unknown.program[0].op = 99;
        operand.start = 0;
        let mut steps = good;
        steps.steps = PROGRAM_STEPS as i64 + 1;
        for p in [strided, operand, unknown, steps] {
            let x = [0f32; 4];
            let mut y = [0f32; 4];
            let ptrs = [x.as_ptr(); PROGRAM_OPERANDS];
            assert_eq!(unsafe { run_program(&p, y.as_mut_ptr(), ptrs, core::ptr::null()) }, STATUS_INVALID_PARAMS);
        }
        assert_eq!(
            unsafe { run_program(core::ptr::null(), core::ptr::null_mut(), [core::ptr::null(); 6], core::ptr::null()) },
            STATUS_INVALID_PARAMS
        );
    }
}
