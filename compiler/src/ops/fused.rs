//! FusedElementwise: a chain of elementwise operators (and inference-mode
//! BatchNormalization) evaluated in one loop over memory.
//!
//! Each operator of the chain on its own would read its whole input and
//! write its whole output; fused, every element is loaded once, carried
//! through the chain's steps in registers and stored once (four f32 lanes
//! at a time where every step allows, see `elementwise::emit_loop_at`).
//! Only `passes::fuse_elementwise` makes this node; no ONNX operator
//! imports to it.
//!
//! The running value starts as input 0 and keeps its shape and element type
//! (f32 or f64) through the chain; the other inputs broadcast into it. Each
//! step emits the instructions its unfused operator emits, in the same
//! order, so results are bit-identical to the unfused graph (a NaN stays a
//! NaN, though `fmax`/`fmin` may give it another sign in vector lanes).
//! An f32 chain whose every step the kernel library's elementwise programs
//! have runs as one program instead (`elementwise/program.rs`), as its
//! unfused nodes do, so the two still agree:
//! * [`Step::Apply`]: the function of `elementwise::emit_scalar`.
//! * [`Step::BatchNorm`]: statistics per channel (axis 1). With the kernel
//!   library, `onnxc_batchnorm`'s `x * a + b` with `a = scale / sqrt(var +
//!   epsilon)` and `b = B - mean * a` (computed here at compile time, in the
//!   element type, when the statistics are constants); in portable mode the
//!   portable lowering's `(x - mean) / sqrt(var + epsilon) * scale + B`.

use super::elementwise::{emit_loop_at, emit_scalar, fconst_like, lower_chain, Func, Operand};
use super::{InferCx, Inferred, Operator};
use crate::codegen::{InstBuilder, Lower, Value};
use crate::ir::shape::{broadcast, broadcast_strides};
use crate::ir::{DType, Tensor};
use onnxc_runtime::MINIFLOAT_SATURATE;

/// One operand of a step: the chain's running value or a node input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    Chain,
    Input(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// An elementwise function; `args` pairs each operand with the input
    /// slot it had in the unfused operator (Clip's bounds are optional).
    Apply { func: Func, args: Vec<(usize, Arg)> },
    /// Inference-mode BatchNormalization of the running value; `stats` are
    /// the inputs holding scale, B, mean and var, each `[C]`.
    BatchNorm { epsilon: f32, stats: [usize; 4] },
}

#[derive(Clone, Debug)]
pub struct FusedElementwise {
    pub steps: Vec<Step>,
}

/// The shape input `i` is read with against the chain's `shape`: its own,
/// or `[1, C, 1...]` for BatchNormalization statistics.
pub(crate) fn operand_shape(steps: &[Step], i: usize, own: &[usize], shape: &[usize]) -> Vec<usize> {
    let is_stat = steps.iter().any(|s| matches!(s, Step::BatchNorm { stats, .. } if stats.contains(&i)));
    if is_stat && shape.len() >= 2 {
        let mut s = vec![1; shape.len()];
        s[1] = own.iter().product();
        s
    } else {
        own.to_vec()
    }
}

impl Operator for FusedElementwise {
    fn name(&self) -> &'static str {
        "FusedElementwise"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !matches!(x.dtype, DType::F32 | DType::F64) {
            return Err(format!("element type {} is not supported", x.dtype));
        }
        for step in &self.steps {
            let inputs: Vec<usize> = match step {
                Step::Apply { args, .. } => {
                    args.iter().filter_map(|a| if let (_, Arg::Input(i)) = a { Some(*i) } else { None }).collect()
                }
                Step::BatchNorm { stats, .. } => {
                    if x.shape.len() < 2 {
                        return Err(format!("BatchNormalization of shape {:?}, expected [N, C, ...]", x.shape));
                    }
                    for &i in stats {
                        if cx.input(i)?.shape != [x.shape[1]] {
                            return Err(format!(
                                "input {i} has shape {:?}, expected [{}]",
                                cx.input(i)?.shape,
                                x.shape[1]
                            ));
                        }
                    }
                    stats.to_vec()
                }
            };
            for i in inputs {
                let input = cx.input(i)?;
                if input.dtype != x.dtype {
                    return Err(format!("input {i} is {}, expected {}", input.dtype, x.dtype));
                }
                let shape = operand_shape(&self.steps, i, input.shape, x.shape);
                if broadcast(x.shape, &shape).as_deref() != Some(x.shape) {
                    return Err(format!("input {i} of shape {:?} does not broadcast to {:?}", input.shape, x.shape));
                }
            }
        }
        Ok(vec![Inferred::new(x.dtype, x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        if lower_chain(cx, &self.steps)? {
            return Ok(());
        }
        let (dtype, shape) = cx.output_type(0)?;
        let mut loop_inputs = LoopInputs::default();
        let chain = loop_inputs.input(cx, &self.steps, 0, &shape)?;
        let mut plan = Vec::with_capacity(self.steps.len());
        for step in &self.steps {
            plan.push(match step {
                Step::Apply { func, args } => {
                    let mut slots = Vec::with_capacity(args.len());
                    for &(slot, arg) in args {
                        slots.push((
                            slot,
                            match arg {
                                Arg::Chain => None,
                                Arg::Input(i) => Some(loop_inputs.input(cx, &self.steps, i, &shape)?),
                            },
                        ));
                    }
                    Planned::Apply(*func, slots)
                }
                Step::BatchNorm { epsilon, stats } => {
                    let coefficients = kernel_coefficients(cx, stats, *epsilon)?;
                    match coefficients {
                        Some(Coefficients::F32(a, b)) => {
                            let a = loop_inputs.table(cx, &a, DType::F32, &shape)?;
                            let b = loop_inputs.table(cx, &b, DType::F32, &shape)?;
                            Planned::Affine(a, b)
                        }
                        Some(Coefficients::F64(a, b)) => {
                            let a = loop_inputs.table(cx, &a, DType::F64, &shape)?;
                            let b = loop_inputs.table(cx, &b, DType::F64, &shape)?;
                            Planned::Affine(a, b)
                        }
                        None => {
                            let mut at = [0; 4];
                            for (k, &i) in stats.iter().enumerate() {
                                at[k] = loop_inputs.input(cx, &self.steps, i, &shape)?;
                            }
                            Planned::BatchNorm(*epsilon, at)
                        }
                    }
                }
            });
        }
        let lanes = self.steps.iter().all(|s| match s {
            Step::Apply { func, .. } => func.row().lanes,
            Step::BatchNorm { .. } => true,
        });
        let portable = cx.portable();
        let mut bases = loop_inputs.bases;
        bases.push(cx.output_ptr(0)?);
        emit_loop_at(cx, &shape, (dtype, MINIFLOAT_SATURATE), &loop_inputs.operands, &bases, lanes, &mut |cx, args| {
            let mut v = args[chain].0;
            for step in &plan {
                v = match step {
                    Planned::Apply(func, slots) => {
                        let present: Vec<usize> = slots.iter().map(|s| s.0).collect();
                        let operands: Vec<(Value, DType)> =
                            slots.iter().map(|s| s.1.map_or((v, dtype), |k| args[k])).collect();
                        emit_scalar(cx, *func, dtype, &present, &operands)?
                    }
                    Planned::Affine(a, b) => {
                        let scaled = cx.ins().fmul(v, args[*a].0);
                        cx.ins().fadd(scaled, args[*b].0)
                    }
                    Planned::BatchNorm(epsilon, [scale, bias, mean, var]) => {
                        let [scale, bias, mean, var] = [scale, bias, mean, var].map(|&k| args[k].0);
                        batchnorm(cx, portable, *epsilon, v, [scale, bias, mean, var])
                    }
                };
            }
            Ok(v)
        })
    }
}

/// A step with its operands resolved to loop operand positions.
enum Planned {
    /// The function, and per operand its slot and loop operand (`None`: the
    /// running value).
    Apply(Func, Vec<(usize, Option<usize>)>),
    /// `v * a + b` with per-channel tables `a`, `b`.
    Affine(usize, usize),
    BatchNorm(f32, [usize; 4]),
}

/// The loop's operands: node inputs (each once) and compile-time tables.
#[derive(Default)]
struct LoopInputs {
    operands: Vec<Operand>,
    bases: Vec<Value>,
    /// Node input → loop operand position.
    of_input: Vec<(usize, usize)>,
}

impl LoopInputs {
    fn input(&mut self, cx: &mut Lower, steps: &[Step], i: usize, shape: &[usize]) -> Result<usize, String> {
        if let Some(&(_, k)) = self.of_input.iter().find(|(input, _)| *input == i) {
            return Ok(k);
        }
        let (dtype, own) = cx.input_type(i)?;
        let strides = broadcast_strides(&operand_shape(steps, i, &own, shape), shape);
        self.operands.push(Operand { index: i, dtype, strides });
        self.bases.push(cx.input_ptr(i)?);
        self.of_input.push((i, self.operands.len() - 1));
        Ok(self.operands.len() - 1)
    }

    /// A per-channel table placed in read-only data.
    fn table<P: bytemuck::Pod>(
        &mut self,
        cx: &mut Lower,
        items: &[P],
        dtype: DType,
        shape: &[usize],
    ) -> Result<usize, String> {
        if shape.len() < 2 {
            return Err(format!("BatchNormalization of shape {shape:?}, expected [N, C, ...]"));
        }
        let mut per_channel = vec![1; shape.len()];
        per_channel[1] = items.len();
        let strides = broadcast_strides(&per_channel, shape);
        self.bases.push(cx.table(items)?);
        self.operands.push(Operand { index: usize::MAX, dtype, strides });
        Ok(self.operands.len() - 1)
    }
}

pub(crate) enum Coefficients {
    F32(Vec<f32>, Vec<f32>),
    F64(Vec<f64>, Vec<f64>),
}

/// `onnxc_batchnorm`'s per-channel `a = scale / sqrt(var + epsilon)` and
/// `b = B - mean * a`, in the element type, when the kernel library is
/// used and the statistics are constants.
pub(crate) fn kernel_coefficients(
    cx: &Lower,
    stats: &[usize; 4],
    epsilon: f32,
) -> Result<Option<Coefficients>, String> {
    if cx.portable() {
        return Ok(None);
    }
    let Some(tensors) = stats.iter().map(|&i| cx.const_input(i)).collect::<Option<Vec<&Tensor>>>() else {
        return Ok(None);
    };
    let [scale, bias, mean, var] = tensors.as_slice() else { return Err("four statistics expected".into()) };
    let channels = scale.len();
    Ok(Some(match scale.dtype {
        DType::F32 => {
            let at = |t: &Tensor, c: usize| t.get_f64(c) as f32;
            let eps = epsilon as f64 as f32;
            let a: Vec<f32> = (0..channels).map(|c| at(scale, c) / (at(var, c) + eps).sqrt()).collect();
            let b = (0..channels).map(|c| at(bias, c) - at(mean, c) * a[c]).collect();
            Coefficients::F32(a, b)
        }
        DType::F64 => {
            let eps = epsilon as f64;
            let a: Vec<f64> = (0..channels).map(|c| scale.get_f64(c) / (var.get_f64(c) + eps).sqrt()).collect();
            let b = (0..channels).map(|c| bias.get_f64(c) - mean.get_f64(c) * a[c]).collect();
            Coefficients::F64(a, b)
        }
        other => return Err(format!("BatchNormalization on {other} is not fused")),
    }))
}

/// BatchNormalization of `x` from statistics loaded in the loop: the
/// kernel's formula, or the portable lowering's in portable mode.
fn batchnorm(cx: &mut Lower, portable: bool, epsilon: f32, x: Value, [scale, bias, mean, var]: [Value; 4]) -> Value {
    let eps = fconst_like(cx, x, epsilon as f64);
    let var = cx.ins().fadd(var, eps);
    let deviation = cx.ins().sqrt(var);
    if portable {
        let centred = cx.ins().fsub(x, mean);
        let normalised = cx.ins().fdiv(centred, deviation);
        let scaled = cx.ins().fmul(normalised, scale);
        return cx.ins().fadd(scaled, bias);
    }
    let a = cx.ins().fdiv(scale, deviation);
    let shift = cx.ins().fmul(mean, a);
    let b = cx.ins().fsub(bias, shift);
    let scaled = cx.ins().fmul(x, a);
    cx.ins().fadd(scaled, b)
}
