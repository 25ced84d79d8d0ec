//! Inference-mode normalisation: BatchNormalization and LRN.
//!
//! * BatchNormalization (opsets 1, 6, 7, 9, 14, 15): `Y = (X - mean) /
//!   sqrt(var + epsilon) * scale + B` per channel of `X [N, C, D...]`.
//!   Opsets < 9 have `spatial` (default 1): with `spatial = 0` the four
//!   vectors are per activation (`[C, D...]`), which the kernel computes as
//!   `C * prod(D)` channels of one element each. Opsets 1-6 `is_test` and
//!   `consumed_inputs` and all `momentum`s only matter for training.
//!   Training (opset 14+ `training_mode = 1`, or asking for the running /
//!   saved statistics outputs of older opsets) is rejected with an error.
//!   Type constraints: f16, bf16, f32, f64 (opset 15 lets the statistics
//!   differ); only all-f32 is lowered (`onnxc_batchnorm_f32`).
//! * LRN (opsets 1, 13): `size` (required), `alpha` (1e-4), `beta` (0.75),
//!   `bias` (1.0) over `X [N, C, D...]`; f32 only (`onnxc_lrn_f32`).

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::Lower;
use crate::import::NodeImport;
use crate::ir::DType;
use onnxc_runtime::{BatchNormParams, LrnParams};

/// `(N, C, prod(D))` of an `[N, C, D...]` input of f32.
fn split_nc(cx: &InferCx) -> Result<(usize, usize, usize), String> {
    let x = cx.input(0)?;
    if x.dtype != DType::F32 {
        return Err(format!("element type {} is not supported", x.dtype));
    }
    match x.shape {
        [n, c, rest @ ..] => Ok((*n, *c, rest.iter().product())),
        _ => Err(format!("input 0 has shape {:?}, expected [N, C, ...]", x.shape)),
    }
}

#[derive(Clone, Debug)]
pub struct BatchNorm {
    pub epsilon: f32,
    /// Per-channel statistics (`spatial = 1`, the only form from opset 9).
    pub spatial: bool,
}

pub fn import_batchnorm(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    if cx.opset >= 14 && a.int_or("training_mode", 0)? != 0 {
        return Err("training_mode = 1 is not supported (inference only)".into());
    }
    if cx.output_count > 1 {
        return Err(format!(
            "{} outputs requested: the running/saved statistics outputs are training-only and not supported",
            cx.output_count
        ));
    }
    let spatial = if cx.opset < 9 {
        match a.int_or("spatial", 1)? {
            0 => false,
            1 => true,
            v => return Err(format!("attribute \"spatial\" is {v}, expected 0 or 1")),
        }
    } else {
        true
    };
    Ok(Op::BatchNorm(BatchNorm { epsilon: a.float_or("epsilon", 1e-5)?, spatial }))
}

impl BatchNorm {
    /// Kernel parameters for input `x` whose statistics have shape `stats`.
    fn params(&self, x: &[usize], stats: &[usize]) -> Result<BatchNormParams, String> {
        let (n, c, rest) = match x {
            [n, c, rest @ ..] => (*n, *c, rest),
            _ => return Err(format!("input 0 has shape {x:?}, expected [N, C, ...]")),
        };
        let s: usize = rest.iter().product();
        // Per-activation statistics ([C, D...], spatial = 0 before opset 9)
        // are C * prod(D) channels of one element each.
        let (channels, spatial) = if stats == [c] {
            (c, s)
        } else if !self.spatial && stats == &x[1..] {
            (c * s, 1)
        } else {
            return Err(format!(
                "statistics have shape {stats:?}, expected [{c}]{}",
                if self.spatial { "" } else { " or the input's [C, D...]" }
            ));
        };
        Ok(BatchNormParams {
            batch: n as i64,
            channels: channels as i64,
            spatial: spatial as i64,
            epsilon: self.epsilon as f64,
        })
    }
}

impl Operator for BatchNorm {
    fn name(&self) -> &'static str {
        "BatchNormalization"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        split_nc(cx)?;
        let x = cx.input(0)?;
        let stats = cx.input(1)?.shape;
        for (i, name) in ["scale", "B", "input_mean", "input_var"].iter().enumerate() {
            let t = cx.input(i + 1)?;
            if t.dtype != DType::F32 {
                return Err(format!("input {} ({name}) is {}, expected f32", i + 1, t.dtype));
            }
            if t.shape != stats {
                return Err(format!("input {} ({name}) has shape {:?}, scale has {stats:?}", i + 1, t.shape));
            }
        }
        self.params(x.shape, stats)?;
        Ok(vec![Inferred::new(x.dtype, x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, x) = cx.input_type(0)?;
        let (_, stats) = cx.input_type(1)?;
        let p = self.params(&x, &stats)?;
        let params = cx.params(&p)?;
        let mut args = vec![params];
        for i in 0..5 {
            args.push(cx.input_ptr(i)?);
        }
        args.push(cx.output_ptr(0)?);
        cx.call_checked("onnxc_batchnorm_f32", &args)
    }
}

#[derive(Clone, Debug)]
pub struct Lrn {
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub bias: f32,
}

pub fn import_lrn(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let size = a.int("size")?.ok_or("attribute \"size\" is required")?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s >= 1)
        .ok_or_else(|| format!("attribute \"size\" is {size}, expected >= 1"))?;
    Ok(Op::Lrn(Lrn {
        size,
        alpha: a.float_or("alpha", 1e-4)?,
        beta: a.float_or("beta", 0.75)?,
        bias: a.float_or("bias", 1.0)?,
    }))
}

impl Operator for Lrn {
    fn name(&self) -> &'static str {
        "LRN"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        split_nc(cx)?;
        let x = cx.input(0)?;
        Ok(vec![Inferred::new(x.dtype, x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, x) = cx.input_type(0)?;
        let (n, c) = match x.as_slice() {
            [n, c, ..] => (*n, *c),
            _ => return Err("input 0 must have rank at least 2".into()),
        };
        let p = LrnParams {
            batch: n as i64,
            channels: c as i64,
            spatial: x[2..].iter().product::<usize>() as i64,
            size: self.size as i64,
            alpha: self.alpha as f64,
            beta: self.beta as f64,
            bias: self.bias as f64,
        };
        let params = cx.params(&p)?;
        let xp = cx.input_ptr(0)?;
        let yp = cx.output_ptr(0)?;
        cx.call_checked("onnxc_lrn_f32", &[params, xp, yp])
    }
}
