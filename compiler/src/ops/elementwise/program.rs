//! Elementwise programs: an f32 elementwise node, or a fused chain of
//! them, whose every function has a program step (the `step` column of
//! `table.rs`) runs as one call of the kernel library's
//! `onnxc_elementwise_f32`, which evaluates exp, tanh, erf, sigmoid and
//! the rest with full-width vector math (AVX-512 or AVX2) instead of a
//! libm call per element.
//!
//! The program is planned before anything is emitted; where it cannot be
//! (portable mode, an operand or the output not f32, a function without a
//! step, Mul of the running value by itself, more operands or steps than
//! a program holds, a merged innermost dim along which an operand is
//! strided), the caller runs the loop of `broadcast_loop.rs` instead.
//! A scalar constant operand becomes the step's immediate.

use super::broadcast_loop::merge_dims;
use super::table::Step as FuncStep;
use super::Func;
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::Lower;
use crate::ir::shape::broadcast_strides;
use crate::ir::DType;
use crate::ops::fused::{self, Arg, Step};
use onnxc_runtime::elementwise::*;
use onnxc_runtime::MAX_RANK;

/// Where an operand's elements are.
enum Source {
    Input(usize),
    /// Per-channel values placed in read-only data.
    Table(Vec<f32>),
}

/// A program being planned: its operands with their strides against the
/// output, and its steps.
#[derive(Default)]
struct Plan {
    operands: Vec<(Source, Vec<i64>)>,
    steps: Vec<ProgramStep>,
}

/// Lowers the chain `steps`, whose running value starts as input 0, over
/// the output shape as one program call; `Ok(false)` (nothing emitted)
/// where it cannot run as a program.
pub fn lower_chain(cx: &mut Lower, steps: &[Step]) -> Result<bool, String> {
    let (dtype, shape) = cx.output_type(0)?;
    if cx.portable() || dtype != DType::F32 {
        return Ok(false);
    }
    let mut plan = Plan::default();
    if plan.input(cx, steps, 0, &shape)?.is_none() {
        return Ok(false);
    }
    for step in steps {
        let planned = match step {
            Step::Apply { func, args } => plan.apply(cx, steps, &shape, *func, args)?,
            Step::BatchNorm { epsilon, stats } => plan.batch_norm(cx, &shape, stats, *epsilon)?,
        };
        if !planned {
            return Ok(false);
        }
    }
    plan.emit(cx, &shape)
}

impl Plan {
    /// Input `i` as an operand (each input once), or `None` if it is not f32.
    fn input(&mut self, cx: &Lower, steps: &[Step], i: usize, shape: &[usize]) -> Result<Option<i32>, String> {
        if let Some(k) = self.operands.iter().position(|(s, _)| matches!(s, Source::Input(j) if *j == i)) {
            return Ok(Some(k as i32));
        }
        let (dtype, own) = cx.input_type(i)?;
        if dtype != DType::F32 {
            return Ok(None);
        }
        let strides = broadcast_strides(&fused::operand_shape(steps, i, &own, shape), shape);
        self.operands.push((Source::Input(i), strides));
        Ok(Some(self.operands.len() as i32 - 1))
    }

    /// The second value of a binary step: an immediate for a scalar
    /// constant, else the input's operand.
    fn value(&mut self, cx: &Lower, steps: &[Step], i: usize, shape: &[usize]) -> Result<Option<(i32, f32)>, String> {
        match cx.const_input(i) {
            Some(t) if t.dtype == DType::F32 && t.len() == 1 => Ok(Some((OPERAND_IMMEDIATE, t.get_f64(0) as f32))),
            _ => Ok(self.input(cx, steps, i, shape)?.map(|k| (k, 0.0))),
        }
    }

    fn push(&mut self, op: i32, (operand, alpha): (i32, f32), beta: f32) {
        self.steps.push(ProgramStep { op, operand, alpha, beta });
    }

    /// Plans `func` applied with `args`; false if it has no step here.
    fn apply(
        &mut self,
        cx: &Lower,
        steps: &[Step],
        shape: &[usize],
        func: Func,
        args: &[(usize, Arg)],
    ) -> Result<bool, String> {
        let chain_first = matches!(args.first(), Some((0, Arg::Chain)));
        match (func.row().step, args) {
            (FuncStep::Unary(op), [(0, Arg::Chain)]) => {
                let (op, alpha, beta) = unary_attributes(func, op);
                self.push(op, (OPERAND_IMMEDIATE, alpha), beta);
            }
            (FuncStep::Binary(first, second), [a, b]) => {
                let (op, other) = if chain_first { (first, b.1) } else { (second, a.1) };
                let Arg::Input(i) = other else { return Ok(false) };
                let Some(value) = self.value(cx, steps, i, shape)? else { return Ok(false) };
                self.push(op, value, 0.0);
            }
            (FuncStep::Power, [(0, Arg::Chain), (1, Arg::Input(i))]) => {
                let Some(e) = cx.const_input(*i).filter(|t| t.len() == 1) else { return Ok(false) };
                self.push(STEP_POW, (OPERAND_IMMEDIATE, e.get_f64(0) as f32), 0.0);
            }
            (FuncStep::Bounds, [(0, Arg::Chain), bounds @ ..]) => {
                for &(slot, bound) in bounds {
                    let Arg::Input(i) = bound else { return Ok(false) };
                    let Some(value) = self.value(cx, steps, i, shape)? else { return Ok(false) };
                    self.push(if slot == 1 { STEP_MAXIMUM } else { STEP_MINIMUM }, value, 0.0);
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Plans inference-mode BatchNormalization with constant statistics as
    /// `v * a + b` per channel (the coefficients `onnxc_batchnorm` uses).
    fn batch_norm(&mut self, cx: &Lower, shape: &[usize], stats: &[usize; 4], epsilon: f32) -> Result<bool, String> {
        let Some(fused::Coefficients::F32(a, b)) = fused::kernel_coefficients(cx, stats, epsilon)? else {
            return Ok(false);
        };
        for (op, table) in [(STEP_MUL, a), (STEP_ADD, b)] {
            let mut per_channel = vec![1; shape.len()];
            per_channel[1] = table.len();
            self.operands.push((Source::Table(table), broadcast_strides(&per_channel, shape)));
            self.push(op, (self.operands.len() as i32 - 1, 0.0), 0.0);
        }
        Ok(true)
    }

    /// The program's params, if it fits them: dims merged, and every
    /// operand contiguous or constant along the innermost one.
    fn params(&self, shape: &[usize]) -> Option<ElementwiseParams> {
        if self.operands.len() > PROGRAM_OPERANDS || self.steps.len() > PROGRAM_STEPS {
            return None;
        }
        let operand_strides: Vec<&[i64]> = self.operands.iter().map(|(_, s)| s.as_slice()).collect();
        let (dims, strides) = merge_dims(shape, &operand_strides);
        let innermost_ok = strides.iter().all(|s| s.last().is_none_or(|&l| matches!(l, 0 | 1)));
        if dims.len() > MAX_RANK || !innermost_ok {
            return None;
        }
        let mut p = ElementwiseParams {
            rank: dims.len() as i64,
            dims: [0; MAX_RANK],
            strides: [[0; MAX_RANK]; PROGRAM_OPERANDS],
            start: 0,
            steps: self.steps.len() as i64,
            program: [ProgramStep::default(); PROGRAM_STEPS],
        };
        for (d, &n) in dims.iter().enumerate() {
            p.dims[d] = n as i64;
        }
        for (k, s) in strides.iter().take(self.operands.len()).enumerate() {
            p.strides[k][..s.len()].copy_from_slice(s);
        }
        p.program[..self.steps.len()].copy_from_slice(&self.steps);
        Some(p)
    }

    /// Emits the kernel call; false (nothing emitted) if the program does
    /// not fit its params.
    fn emit(self, cx: &mut Lower, shape: &[usize]) -> Result<bool, String> {
        let Some(p) = self.params(shape) else { return Ok(false) };
        let params = cx.params(&p)?;
        let mut pointers = [0; PROGRAM_OPERANDS].map(|_| None);
        for (k, (source, _)) in self.operands.iter().enumerate() {
            pointers[k] = Some(match source {
                Source::Input(i) => cx.input_ptr(*i)?,
                Source::Table(values) => cx.table(values)?,
            });
        }
        let [a, b, c, d, e, f] = pointers.map(|p| Ptr(p.unwrap_or_else(|| cx.iconst(0))));
        let y = Ptr(cx.output_ptr(0)?);
        let parallel = cx.parallel_ptr();
        cx.call_checked(kernels::onnxc_elementwise_f32, (params, y, a, b, c, d, e, f, parallel))?;
        Ok(true)
    }
}

/// A unary function's step code and attributes: Gelu's tanh form is its
/// own step.
fn unary_attributes(func: Func, op: i32) -> (i32, f32, f32) {
    match func {
        Func::LeakyRelu { alpha } | Func::Elu { alpha } | Func::Swish { alpha } => (op, alpha, 0.0),
        Func::HardSigmoid { alpha, beta } => (op, alpha, beta),
        Func::Gelu { tanh: true } => (STEP_GELU_TANH, 0.0, 0.0),
        _ => (op, 0.0, 0.0),
    }
}
