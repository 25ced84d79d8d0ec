//! The optimizers of the `ai.onnx.preview.training` domain (opset 1):
//! Adagrad, Adam and Momentum (`mode` standard or nesterov).
//!
//! Inputs: the learning rate `R` (f32/f64 scalar), the update count `T`
//! (i64 scalar), then the `n` optimized tensors `X1..Xn`, their gradients
//! `G1..Gn` and their state tensors (Adagrad `H1..Hn`, Momentum `V1..Vn`,
//! Adam `V1..Vn` then `H1..Hn`); outputs the new `X`s, then the new states
//! in the same order. `n` follows from the input count. Each tensor is one
//! call of `onnxc_optimizer_step_{f32,f64}`, whose comment has the update
//! rules (in portable mode the loops of
//! [`crate::codegen::training_loops`]). The domain's `Gradient` is
//! expanded into its backward pass during inference (`gradient.rs`).

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{training_loops, Lower};
use crate::import::NodeImport;
use crate::ir::DType;
use onnxc_runtime::abi::training::{
    OptimizerParams, OPTIMIZER_ADAGRAD, OPTIMIZER_ADAM, OPTIMIZER_MOMENTUM, OPTIMIZER_NESTEROV,
};

#[derive(Clone, Debug)]
pub struct Optimizer {
    /// The `OPTIMIZER_*` kind and the attributes, in the kernel's form
    /// (`len` and `rate_elem` are filled in at lowering).
    pub params: OptimizerParams,
}

impl Optimizer {
    /// The `n` tensors' steps as the loops of [`training_loops`].
    fn lower_portable(&self, cx: &mut Lower, n: usize) -> Result<(), String> {
        let rate_dtype = cx.input_type(0)?.0;
        let (rate, count) = (cx.input_ptr(0)?, cx.input_ptr(1)?);
        for k in 0..n {
            let (dtype, shape) = cx.input_type(2 + k)?;
            let len = shape.iter().product::<usize>() as i64;
            let p = OptimizerParams { len, ..self.params };
            let second = self.states() == 2;
            let (s2, s2_out) = if second {
                (cx.input_ptr(2 + 3 * n + k)?, cx.output_ptr(2 * n + k)?)
            } else {
                (cx.iconst(0), cx.iconst(0))
            };
            let buffers = training_loops::StepBuffers {
                inputs: [cx.input_ptr(2 + k)?, cx.input_ptr(2 + n + k)?, cx.input_ptr(2 + 2 * n + k)?, s2],
                outputs: [cx.output_ptr(k)?, cx.output_ptr(n + k)?, s2_out],
            };
            training_loops::optimizer_step(cx, &p, dtype, (rate_dtype, rate, count), &buffers)?;
        }
        Ok(())
    }
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let f = |name: &str, default: f32| a.float_or(name, default).map(f64::from);
    let required = |name: &str| -> Result<f64, String> {
        a.float(name)?.map(f64::from).ok_or_else(|| format!("attribute \"{name}\" is required"))
    };
    let params = match cx.op_type {
        "Adagrad" => OptimizerParams {
            kind: OPTIMIZER_ADAGRAD,
            decay_factor: f("decay_factor", 0.0)?,
            epsilon: f("epsilon", 0.0)?,
            norm_coefficient: f("norm_coefficient", 0.0)?,
            ..Default::default()
        },
        "Adam" => OptimizerParams {
            kind: OPTIMIZER_ADAM,
            alpha: f("alpha", 0.9)?,
            beta: f("beta", 0.999)?,
            epsilon: f("epsilon", 0.0)?,
            norm_coefficient: f("norm_coefficient", 0.0)?,
            norm_coefficient_post: f("norm_coefficient_post", 0.0)?,
            ..Default::default()
        },
        "Momentum" => {
            let kind = match a.string("mode")?.as_deref() {
                Some("standard") => OPTIMIZER_MOMENTUM,
                Some("nesterov") => OPTIMIZER_NESTEROV,
                Some(other) => return Err(format!("attribute \"mode\" is \"{other}\", expected standard or nesterov")),
                None => return Err("attribute \"mode\" is required".into()),
            };
            OptimizerParams {
                kind,
                alpha: required("alpha")?,
                beta: required("beta")?,
                norm_coefficient: required("norm_coefficient")?,
                ..Default::default()
            }
        }
        other => return Err(format!("{other} is not an optimizer")),
    };
    Ok(Op::Optimizer(Optimizer { params }))
}

impl Optimizer {
    /// State tensors per optimized tensor.
    fn states(&self) -> usize {
        if self.params.kind == OPTIMIZER_ADAM {
            2
        } else {
            1
        }
    }

    /// The number of optimized tensors, from the input and output counts.
    fn tensors(&self, inputs: usize, outputs: usize) -> Result<usize, String> {
        let per_tensor = 2 + self.states();
        let n = inputs.saturating_sub(2) / per_tensor;
        if n == 0 || inputs != 2 + n * per_tensor {
            return Err(format!("{inputs} inputs: expected R, T and {per_tensor} inputs per optimized tensor"));
        }
        if outputs != n * (1 + self.states()) {
            return Err(format!("{outputs} outputs: expected {} for {n} optimized tensors", n * (1 + self.states())));
        }
        Ok(n)
    }
}

impl Operator for Optimizer {
    fn name(&self) -> &'static str {
        match self.params.kind {
            OPTIMIZER_ADAGRAD => "Adagrad",
            OPTIMIZER_ADAM => "Adam",
            _ => "Momentum",
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let n = self.tensors(cx.inputs.len(), cx.output_count)?;
        let rate = cx.input(0)?;
        if !matches!(rate.dtype, DType::F32 | DType::F64) || !rate.shape.is_empty() {
            return Err(format!("input 0 (R) is {}{:?}, expected an f32 or f64 scalar", rate.dtype, rate.shape));
        }
        let count = cx.input(1)?;
        if count.dtype != DType::I64 || !count.shape.is_empty() {
            return Err(format!("input 1 (T) is {}{:?}, expected an i64 scalar", count.dtype, count.shape));
        }
        let mut xs = Vec::with_capacity(n);
        for k in 0..n {
            let x = cx.input(2 + k)?;
            if !matches!(x.dtype, DType::F32 | DType::F64) {
                return Err(format!("input {} is {}, expected f32 or f64", 2 + k, x.dtype));
            }
            for group in 1..2 + self.states() {
                let i = 2 + group * n + k;
                let other = cx.input(i)?;
                if other.dtype != x.dtype || other.shape != x.shape {
                    return Err(format!(
                        "input {i} is {}{:?}, expected {}{:?} like input {}",
                        other.dtype,
                        other.shape,
                        x.dtype,
                        x.shape,
                        2 + k
                    ));
                }
            }
            xs.push(Inferred::new(x.dtype, x.shape.to_vec()));
        }
        Ok((0..1 + self.states()).flat_map(|_| xs.iter().cloned()).collect())
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let n = self.tensors(cx.input_count(), cx.output_count())?;
        if cx.portable() {
            return self.lower_portable(cx, n);
        }
        let rate_elem = i64::from(cx.input_type(0)?.0.onnx_code());
        let rate = Ptr(cx.input_ptr(0)?);
        let count = Ptr(cx.input_ptr(1)?);
        let null = Ptr(cx.iconst(0));
        for k in 0..n {
            let (dtype, shape) = cx.input_type(2 + k)?;
            let len = shape.iter().product::<usize>() as i64;
            let params = cx.params(&OptimizerParams { len, rate_elem, ..self.params })?;
            let x = Ptr(cx.input_ptr(2 + k)?);
            let g = Ptr(cx.input_ptr(2 + n + k)?);
            let s1 = Ptr(cx.input_ptr(2 + 2 * n + k)?);
            let x_out = Ptr(cx.output_ptr(k)?);
            let s1_out = Ptr(cx.output_ptr(n + k)?);
            let (s2, s2_out) = if self.states() == 2 {
                (Ptr(cx.input_ptr(2 + 3 * n + k)?), Ptr(cx.output_ptr(2 * n + k)?))
            } else {
                (null, null)
            };
            let args = (params, rate, count, x, g, s1, s2, x_out, s1_out, s2_out);
            let kernel = kernels::by_dtype(kernels::onnxc_optimizer_step_f32, kernels::onnxc_optimizer_step_f64, dtype);
            cx.call_checked(kernel, args)?;
        }
        Ok(())
    }
}
