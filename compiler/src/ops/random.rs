//! Random operators: RandomUniform, RandomNormal, RandomUniformLike,
//! RandomNormalLike, Bernoulli, Multinomial, and Dropout in training mode.
//!
//! Each node draws from its own stream of the kernel library's stateless
//! generator (`runtime-support/src/generic/random.rs`), so the generated
//! code keeps no state between runs. The stream's key is fixed at import:
//! from the node's `seed` attribute when it has one (the same seed gives
//! the same values in any model), otherwise from the node's position in the
//! imported model, so a compiled model gives the same values on every run
//! and every compilation. These operators are never constant-folded
//! ([`Operator::foldable`]): RandomUniform has no inputs at all and would
//! otherwise become one fixed tensor in read-only data.
//!
//! Type constraints (ONNX) and opset normalisation:
//! - RandomUniform, RandomNormal (1, 22): output `dtype` (default f32)
//!   f16/f32/f64 (bf16 from 22, accepted at every opset), `shape` attribute.
//! - RandomUniformLike, RandomNormalLike (1, 22): the shape of input 0 (any
//!   type); `dtype` defaults to the input's, which must then be a float.
//! - Bernoulli (15, 22): probabilities f16/f32/f64/bf16; output `dtype`
//!   (default the input's) any numeric type or bool, 1 with probability p.
//! - Multinomial (7, 22): `[batch, classes]` unnormalised log-probabilities
//!   f16/f32/f64/bf16; `sample_size` class indices per row, `dtype` i32
//!   (default) or i64.
//! - Dropout (12, 13, 22) with a `training_mode` input that is not the
//!   constant false: `ratio` (input, default 0.5) and `training_mode` are
//!   read at run time, so one compiled model serves both modes; the mask is
//!   bool. Dropout before opset 12 has no training mode; it and the
//!   constant-false form are the pass-through in `elementwise.rs`.
//!   Portable mode draws the same stream in generated code
//!   ([`crate::codegen::training_loops::dropout`]).

use super::scatter::one_bits;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{training_loops, Lower};
use crate::import::NodeImport;
use crate::ir::shape::element_count;
use crate::ir::DType;
use onnxc_runtime::{
    stream_key, BernoulliParams, DropoutParams, MultinomialParams, RandomParams, RANDOM_NORMAL, RANDOM_UNIFORM,
};

/// Marks the seeds of nodes without a `seed` attribute: above every f32
/// bit pattern, so they never collide with a float-seeded node's stream.
const UNSEEDED: u64 = 1 << 63;

/// The stream key of the node being imported: from its seed (the `seed`
/// attribute's bits) when it has one, else from its position in the model.
fn node_key(cx: &NodeImport, seed: Option<u64>) -> u64 {
    stream_key(seed.unwrap_or(UNSEEDED | cx.position() as u64))
}

/// The float `seed` attribute of the random generators.
fn float_seed(cx: &NodeImport) -> Result<Option<u64>, String> {
    Ok(cx.attrs.float("seed")?.map(|seed| u64::from(seed.to_bits())))
}

/// Element count of a checked output shape, as the kernels take it.
fn count(shape: &[usize]) -> Result<i64, String> {
    element_count(shape).and_then(|n| i64::try_from(n).ok()).ok_or_else(|| "element count overflows".into())
}

/// ONNX element code, as the kernels take it.
fn code(dtype: DType) -> i64 {
    dtype.onnx_code() as i64
}

fn require_float(what: &str, dtype: DType) -> Result<(), String> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(format!("{what} is {dtype}, expected a float type"))
    }
}

// ---------------------------------------------------------------------------
// RandomUniform, RandomNormal and their *Like forms
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    Uniform { low: f32, high: f32 },
    Normal { mean: f32, scale: f32 },
}

/// A tensor of independent samples of one distribution.
#[derive(Clone, Debug)]
pub struct RandomFill {
    pub op_type: &'static str,
    pub key: u64,
    pub distribution: Distribution,
    /// The output element type; `None` takes input 0's (the *Like forms).
    pub dtype: Option<DType>,
    /// The output shape; `None` takes input 0's (the *Like forms).
    pub shape: Option<Vec<usize>>,
}

impl Operator for RandomFill {
    fn name(&self) -> &'static str {
        self.op_type
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let (dtype, shape) = match (self.dtype, &self.shape) {
            (Some(dtype), Some(shape)) => (dtype, shape.clone()),
            (dtype, _) => {
                let like = cx.input(0)?;
                (dtype.unwrap_or(like.dtype), like.shape.to_vec())
            }
        };
        require_float("the output element type", dtype)?;
        count(&shape)?;
        Ok(vec![Inferred::new(dtype, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.output_type(0)?;
        let (distribution, a, b) = match self.distribution {
            Distribution::Uniform { low, high } => (RANDOM_UNIFORM, low, high),
            Distribution::Normal { mean, scale } => (RANDOM_NORMAL, mean, scale),
        };
        let p = RandomParams {
            key: self.key as i64,
            count: count(&shape)?,
            elem: code(dtype),
            distribution,
            a: a.into(),
            b: b.into(),
        };
        let params = cx.params(&p)?;
        let y = cx.output_ptr(0)?;
        cx.call_checked(kernels::onnxc_random, (params, Ptr(y)))
    }

    fn foldable(&self) -> bool {
        false
    }
}

/// The op_types [`import_fill`] builds.
const FILLS: [&str; 4] = ["RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike"];

pub fn import_fill(cx: &mut NodeImport) -> Result<Op, String> {
    let op_type =
        FILLS.into_iter().find(|&f| f == cx.op_type).ok_or_else(|| format!("{} is not a random fill", cx.op_type))?;
    let a = &cx.attrs;
    let distribution = if op_type.starts_with("RandomUniform") {
        Distribution::Uniform { low: a.float_or("low", 0.0)?, high: a.float_or("high", 1.0)? }
    } else {
        Distribution::Normal { mean: a.float_or("mean", 0.0)?, scale: a.float_or("scale", 1.0)? }
    };
    let dtype = a.dtype("dtype")?;
    let (dtype, shape) = if op_type.ends_with("Like") {
        (dtype, None)
    } else {
        let shape = a.ints("shape")?.ok_or("attribute \"shape\" is required")?;
        let shape = shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("attribute \"shape\" has a negative dim {d}")))
            .collect::<Result<Vec<_>, _>>()?;
        (Some(dtype.unwrap_or(DType::F32)), Some(shape))
    };
    Ok(Op::RandomFill(RandomFill { op_type, key: node_key(cx, float_seed(cx)?), distribution, dtype, shape }))
}

// ---------------------------------------------------------------------------
// Bernoulli
// ---------------------------------------------------------------------------

/// Bernoulli: `y[i] = 1` with probability `x[i]`, else 0.
#[derive(Clone, Debug)]
pub struct Bernoulli {
    pub key: u64,
    /// The output element type; `None` takes the input's.
    pub dtype: Option<DType>,
}

impl Operator for Bernoulli {
    fn name(&self) -> &'static str {
        "Bernoulli"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        require_float("input 0 (probabilities)", x.dtype)?;
        Ok(vec![Inferred::new(self.dtype.unwrap_or(x.dtype), x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (p_dtype, shape) = cx.input_type(0)?;
        let (dtype, _) = cx.output_type(0)?;
        let p = BernoulliParams {
            key: self.key as i64,
            count: count(&shape)?,
            p_elem: code(p_dtype),
            elem_bytes: dtype.size() as i64,
            one: one_bits(dtype),
        };
        let params = cx.params(&p)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(kernels::onnxc_bernoulli, (params, Ptr(x), Ptr(y)))
    }

    fn foldable(&self) -> bool {
        false
    }
}

pub fn import_bernoulli(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Bernoulli(Bernoulli { key: node_key(cx, float_seed(cx)?), dtype: cx.attrs.dtype("dtype")? }))
}

// ---------------------------------------------------------------------------
// Multinomial
// ---------------------------------------------------------------------------

/// Multinomial: `samples` class indices per row of `[batch, classes]`
/// log-probabilities.
#[derive(Clone, Debug)]
pub struct Multinomial {
    pub key: u64,
    /// i32 or i64.
    pub dtype: DType,
    pub samples: usize,
}

impl Operator for Multinomial {
    fn name(&self) -> &'static str {
        "Multinomial"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        require_float("input 0", x.dtype)?;
        match x.shape {
            [batch, classes] if *classes > 0 => Ok(vec![Inferred::new(self.dtype, vec![*batch, self.samples])]),
            _ => Err(format!("input 0 has shape {:?}, expected [batch, classes] with classes > 0", x.shape)),
        }
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (x_dtype, shape) = cx.input_type(0)?;
        let p = MultinomialParams {
            key: self.key as i64,
            batch: shape[0] as i64,
            classes: shape[1] as i64,
            samples: self.samples as i64,
            x_elem: code(x_dtype),
            index_elem: code(self.dtype),
        };
        let params = cx.params(&p)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(kernels::onnxc_multinomial, (params, Ptr(x), Ptr(y)))
    }

    fn foldable(&self) -> bool {
        false
    }
}

pub fn import_multinomial(cx: &mut NodeImport) -> Result<Op, String> {
    let dtype = cx.attrs.dtype("dtype")?.unwrap_or(DType::I32);
    if !matches!(dtype, DType::I32 | DType::I64) {
        return Err(format!("attribute \"dtype\" is {dtype}, expected int32 or int64"));
    }
    let samples = cx.attrs.int_or("sample_size", 1)?;
    let samples = usize::try_from(samples).map_err(|_| format!("attribute \"sample_size\" is negative ({samples})"))?;
    Ok(Op::Multinomial(Multinomial { key: node_key(cx, float_seed(cx)?), dtype, samples }))
}

// ---------------------------------------------------------------------------
// Dropout in training mode
// ---------------------------------------------------------------------------

/// The dropout ratio when the `ratio` input is omitted.
const DEFAULT_RATIO: f64 = 0.5;

/// Dropout whose `training_mode` (input 2) is known only at run time.
#[derive(Clone, Debug)]
pub struct TrainingDropout {
    pub key: u64,
}

/// Input `i`, when present, must hold one element of an accepted type.
fn check_scalar(cx: &InferCx, i: usize, what: &str, ok: fn(DType) -> bool) -> Result<(), String> {
    match cx.opt_input(i) {
        Some(v) if !ok(v.dtype) || v.shape.iter().product::<usize>() != 1 => {
            Err(format!("input {i} ({what}) is {}{:?}, expected one element", v.dtype, v.shape))
        }
        _ => Ok(()),
    }
}

impl Operator for TrainingDropout {
    fn name(&self) -> &'static str {
        "Dropout"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        require_float("input 0", x.dtype)?;
        check_scalar(cx, 1, "ratio", DType::is_float)?;
        check_scalar(cx, 2, "training_mode", |t| t == DType::Bool)?;
        let mut outputs = vec![Inferred::new(x.dtype, x.shape.to_vec())];
        if cx.output_count > 1 {
            outputs.push(Inferred::new(DType::Bool, x.shape.to_vec()));
        }
        Ok(outputs)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let ratio_elem = if cx.has_input(1) { code(cx.input_type(1)?.0) } else { 0 };
        let p = DropoutParams {
            key: self.key as i64,
            count: count(&shape)?,
            elem: code(dtype),
            ratio_elem,
            ratio: DEFAULT_RATIO,
        };
        if cx.portable() {
            let ratio = if cx.has_input(1) { Some((cx.input_ptr(1)?, cx.input_type(1)?.0)) } else { None };
            let mask = if cx.has_output(1) { Some(cx.output_ptr(1)?) } else { None };
            let (x, training, y) = (cx.input_ptr(0)?, cx.input_ptr(2)?, cx.output_ptr(0)?);
            let t = training_loops::DropoutTensors { dtype, x, ratio, training, y, mask };
            return training_loops::dropout(cx, &p, &t);
        }
        let params = cx.params(&p)?;
        let (x, ratio, training) = (cx.input_ptr(0)?, cx.opt_input_ptr(1), cx.input_ptr(2)?);
        let y = cx.output_ptr(0)?;
        let mask = if cx.has_output(1) { cx.output_ptr(1)? } else { cx.iconst(0) };
        cx.call_checked(kernels::onnxc_dropout, (params, Ptr(x), Ptr(ratio), Ptr(training), Ptr(y), Ptr(mask)))
    }

    fn foldable(&self) -> bool {
        false
    }
}

/// Dropout: training mode when `training_mode` is given and not the
/// constant false, else the elementwise pass-through.
pub fn import_dropout(cx: &mut NodeImport) -> Result<Op, String> {
    let training = cx.inputs.get(2).copied().flatten().is_some();
    let never = cx.const_input(2).is_some_and(|t| t.to_i64s().iter().all(|&v| v == 0));
    if !training || never {
        return super::elementwise::import(cx);
    }
    // Dropout's seed is an int.
    let seed = cx.attrs.int("seed")?.map(|seed| seed as u64);
    Ok(Op::TrainingDropout(TrainingDropout { key: node_key(cx, seed) }))
}
