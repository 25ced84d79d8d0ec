//! Recurrent layers: RNN, GRU and LSTM (one [`Rnn`] with an [`RnnKind`]).
//!
//! Inputs: X, W, R, optional B, sequence_lens, initial_h (and for LSTM
//! initial_c, P); outputs Y, Y_h (and LSTM Y_c), each optional.
//! Type constraints: `T` is f16, f32 or f64 (onnxc lowers f32 and f64, f16
//! on staged f32 copies: [`crate::codegen::staging`]); sequence_lens is i32.
//!
//! Attributes: `direction` (forward, reverse, bidirectional), `hidden_size`
//! (checked against R, which determines it), `activations` (per direction:
//! RNN f, GRU f g, LSTM f g h; defaults Tanh / Sigmoid Tanh / Sigmoid Tanh
//! Tanh; a single direction's list is reused for both directions),
//! `activation_alpha`/`activation_beta` (positional, one per listed
//! activation; missing entries take the ONNX operator's default), `clip`,
//! `layout` (opset 14: batch-major X/Y/states), GRU `linear_before_reset`
//! (opset 3), LSTM `input_forget` (the input gate becomes `1 - f`).
//! Opset 1's `output_sequence` only said whether Y is produced, which the
//! output list already says. Every variant lowers to `onnxc_rnn_{f32,f64}`
//! (in portable mode to the loops of [`crate::codegen::rnn_loops`]);
//! a sequence length outside `[0, seq_len]` stops the model with
//! INDEX_OUT_OF_RANGE. A constant f32 R may have been packed into the
//! kernel's panels by [`crate::passes::pack_rnn_weights`]
//! ([`Rnn::packed_recurrent`]); the hidden size is then W's.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::rnn_loops::{self, RnnTensors};
use crate::codegen::Lower;
use crate::import::NodeImport;
use crate::ir::dim_expr::DimExpr;
use crate::ir::shape::dims_text;
use crate::ir::DType;
use onnxc_runtime::abi::rnn::{self as k, RnnParams, RNN_ACTS};
use onnxc_runtime::rnn_scratch_elems;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnKind {
    Rnn,
    Gru,
    Lstm,
}

impl RnnKind {
    fn gates(self) -> usize {
        match self {
            RnnKind::Rnn => 1,
            RnnKind::Gru => 3,
            RnnKind::Lstm => 4,
        }
    }

    /// Activations per direction.
    fn acts(self) -> usize {
        match self {
            RnnKind::Rnn => 1,
            RnnKind::Gru => 2,
            RnnKind::Lstm => 3,
        }
    }

    fn outputs(self) -> usize {
        if self == RnnKind::Lstm {
            3
        } else {
            2
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Reverse,
    Bidirectional,
}

#[derive(Clone, Debug)]
pub struct Rnn {
    pub kind: RnnKind,
    pub direction: Direction,
    pub hidden_size: Option<usize>,
    /// `(ACT_* code, alpha, beta)` per direction and slot, `[d * RNN_ACTS + slot]`.
    pub acts: [(i64, f64, f64); 2 * RNN_ACTS],
    pub clip: Option<f64>,
    pub batch_major: bool,
    pub linear_before_reset: bool,
    pub input_forget: bool,
    /// R is a one-dimensional constant in the kernel's panel layout
    /// (`onnxc_runtime::rnn_pack_recurrent`), set only by the packing pass.
    pub packed_recurrent: bool,
}

/// An activation's kernel code and default `(alpha, beta)`.
fn activation(name: &str) -> Result<(i64, f64, f64), String> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "relu" => (k::ACT_RELU, 0.0, 0.0),
        "tanh" => (k::ACT_TANH, 0.0, 0.0),
        "sigmoid" => (k::ACT_SIGMOID, 0.0, 0.0),
        "affine" => (k::ACT_AFFINE, 1.0, 0.0),
        "leakyrelu" => (k::ACT_LEAKY_RELU, 0.01, 0.0),
        "thresholdedrelu" => (k::ACT_THRESHOLDED_RELU, 1.0, 0.0),
        "scaledtanh" => (k::ACT_SCALED_TANH, 1.0, 1.0),
        "hardsigmoid" => (k::ACT_HARD_SIGMOID, 0.2, 0.5),
        "elu" => (k::ACT_ELU, 1.0, 0.0),
        "softsign" => (k::ACT_SOFTSIGN, 0.0, 0.0),
        "softplus" => (k::ACT_SOFTPLUS, 0.0, 0.0),
        _ => return Err(format!("attribute \"activations\": unknown activation {name:?}")),
    })
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    let kind = match cx.op_type {
        "RNN" => RnnKind::Rnn,
        "GRU" => RnnKind::Gru,
        "LSTM" => RnnKind::Lstm,
        other => return Err(format!("{other} is not a recurrent operator")),
    };
    let a = &cx.attrs;
    let direction = match a.string_or("direction", "forward")?.as_str() {
        "forward" => Direction::Forward,
        "reverse" => Direction::Reverse,
        "bidirectional" => Direction::Bidirectional,
        other => {
            return Err(format!("attribute \"direction\" is {other:?}, expected forward, reverse or bidirectional"))
        }
    };
    let dirs = if direction == Direction::Bidirectional { 2 } else { 1 };
    let per_dir = kind.acts();
    let names = match a.strings("activations")? {
        Some(list) => list,
        None => {
            let defaults: &[&str] = match kind {
                RnnKind::Rnn => &["Tanh"],
                RnnKind::Gru => &["Sigmoid", "Tanh"],
                RnnKind::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            };
            defaults.iter().map(|s| s.to_string()).collect()
        }
    };
    if names.len() != per_dir && names.len() != per_dir * dirs {
        return Err(format!(
            "attribute \"activations\" lists {} functions, expected {} ({} per direction)",
            names.len(),
            per_dir * dirs,
            per_dir
        ));
    }
    let alphas = a.floats("activation_alpha")?.unwrap_or_default();
    let betas = a.floats("activation_beta")?.unwrap_or_default();
    let mut acts = [(k::ACT_TANH, 0.0, 0.0); 2 * RNN_ACTS];
    for d in 0..dirs {
        for slot in 0..per_dir {
            let pos = if names.len() == per_dir { slot } else { d * per_dir + slot };
            let (code, alpha, beta) = activation(&names[pos])?;
            let alpha = alphas.get(pos).map_or(alpha, |&v| v as f64);
            let beta = betas.get(pos).map_or(beta, |&v| v as f64);
            acts[d * RNN_ACTS + slot] = (code, alpha, beta);
        }
    }
    let hidden_size = match a.int("hidden_size")? {
        Some(h) if h <= 0 => return Err(format!("attribute \"hidden_size\" is {h}, expected a positive size")),
        h => h.map(|h| h as usize),
    };
    let clip = match a.float("clip")? {
        Some(c) if c.is_nan() || c < 0.0 => return Err(format!("attribute \"clip\" is {c}, expected >= 0")),
        c => c.map(|c| c as f64),
    };
    let flag = |name: &str| -> Result<bool, String> {
        match a.int_or(name, 0)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(format!("attribute \"{name}\" is {v}, expected 0 or 1")),
        }
    };
    Ok(Op::Rnn(Rnn {
        kind,
        direction,
        hidden_size,
        acts,
        clip,
        batch_major: flag("layout")?,
        linear_before_reset: flag("linear_before_reset")?,
        input_forget: flag("input_forget")?,
        packed_recurrent: false,
    }))
}

/// Sizes derived from the input shapes.
struct Dims {
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
}

impl Rnn {
    fn dims(&self, shapes: &[Option<&[usize]>]) -> Result<Dims, String> {
        let get = |i: usize| shapes.get(i).copied().flatten();
        let (Some(x), Some(w), Some(r)) = (get(0), get(1), get(2)) else {
            return Err("inputs X, W and R are required".into());
        };
        let &[a, b, input] = x else {
            return Err(format!("input X must have rank 3, got shape {x:?}"));
        };
        let (seq, batch) = if self.batch_major { (b, a) } else { (a, b) };
        let dirs = if self.direction == Direction::Bidirectional { 2 } else { 1 };
        let g = self.kind.gates();
        let want = |name: &str, got: &[usize], want: &[usize]| -> Result<(), String> {
            if got != want {
                return Err(format!("input {name} has shape {got:?}, expected {want:?}"));
            }
            Ok(())
        };
        let hidden = match (self.packed_recurrent, r, w) {
            (true, _, &[_, gh, _]) => gh / g,
            (true, _, _) => return Err(format!("input W must have rank 3, got shape {w:?}")),
            (false, &[_, _, hidden], _) => hidden,
            (false, _, _) => return Err(format!("input R must have rank 3, got shape {r:?}")),
        };
        if let Some(h) = self.hidden_size {
            if h != hidden {
                return Err(format!("attribute \"hidden_size\" is {h}, but R has shape {r:?}"));
            }
        }
        if !self.packed_recurrent {
            want("R", r, &[dirs, g * hidden, hidden])?;
        }
        want("W", w, &[dirs, g * hidden, input])?;
        if let Some(b) = get(3) {
            want("B", b, &[dirs, 2 * g * hidden])?;
        }
        if let Some(l) = get(4) {
            want("sequence_lens", l, &[batch])?;
        }
        let state = if self.batch_major { [batch, dirs, hidden] } else { [dirs, batch, hidden] };
        if let Some(h) = get(5) {
            want("initial_h", h, &state)?;
        }
        if self.kind == RnnKind::Lstm {
            if let Some(c) = get(6) {
                want("initial_c", c, &state)?;
            }
            if let Some(p) = get(7) {
                want("P", p, &[dirs, 3 * hidden])?;
            }
        }
        Ok(Dims { seq, batch, input, hidden, dirs })
    }

    /// [`Rnn::dims`] of an inferring node's inputs.
    fn infer_dims(&self, cx: &InferCx) -> Result<Dims, String> {
        let shapes: Vec<Option<&[usize]>> = cx.inputs.iter().map(|i| i.as_ref().map(|i| i.shape)).collect();
        self.dims(&shapes)
    }

    /// Y's shape, then the states' (`seq` and `batch` sizes or, in
    /// symbolic inference, expressions).
    fn output_shapes<T: Clone>(&self, seq: T, batch: T, dirs: T, hidden: T) -> Vec<Vec<T>> {
        let (b, d, h) = (batch.clone(), dirs.clone(), hidden.clone());
        let y = if self.batch_major { vec![b, seq, d, h] } else { vec![seq, d, b, h] };
        let mut out = vec![y, self.state_shape(batch, dirs, hidden)];
        if self.kind == RnnKind::Lstm {
            out.push(out[1].clone());
        }
        out
    }

    fn state_shape<T>(&self, batch: T, dirs: T, hidden: T) -> Vec<T> {
        if self.batch_major {
            vec![batch, dirs, hidden]
        } else {
            vec![dirs, batch, hidden]
        }
    }

    /// Symbolic inference: the outputs for an X of symbolic steps or
    /// batch. The weights are checked by [`Rnn::dims`] against an X of
    /// one step and one batch row; the inputs sized by the batch
    /// (sequence_lens, initial_h, initial_c) against the expressions.
    fn infer_symbolic(&self, cx: &InferCx, x: &[DimExpr]) -> Result<Vec<Vec<DimExpr>>, String> {
        let [a, b, input] = x else {
            return Err(format!("input X must have rank 3, got {}", dims_text(x)));
        };
        let input = input.as_size().ok_or_else(|| format!("input X's feature dim {input} must be known"))?;
        let (seq, batch) = if self.batch_major { (b, a) } else { (a, b) };
        let mut shapes: Vec<Option<&[usize]>> = cx.inputs.iter().map(|i| i.as_ref().map(|i| i.shape)).collect();
        let one_step = [1, 1, input];
        shapes[0] = Some(&one_step);
        for slot in shapes.iter_mut().skip(4).take(3) {
            *slot = None;
        }
        let d = self.dims(&shapes)?;
        let (dirs, hidden) = (DimExpr::from(d.dirs), DimExpr::from(d.hidden));
        let state = self.state_shape(batch.clone(), dirs.clone(), hidden.clone());
        let lstm = self.kind == RnnKind::Lstm;
        let expected =
            [(4, "sequence_lens", vec![batch.clone()]), (5, "initial_h", state.clone()), (6, "initial_c", state)];
        for (i, name, want) in expected.into_iter().filter(|&(i, ..)| i != 6 || lstm) {
            if cx.opt_input(i).is_some() && cx.dims(i)? != want {
                let got = cx.dims(i)?;
                return Err(format!("input {name} is {}, expected {}", dims_text(&got), dims_text(&want)));
            }
        }
        Ok(self.output_shapes(seq.clone(), batch.clone(), dirs, hidden))
    }

    /// The kernel's params for the node's input shapes.
    pub fn params_for(&self, shapes: &[Option<&[usize]>]) -> Result<RnnParams, String> {
        Ok(self.params(&self.dims(shapes)?))
    }

    fn params(&self, d: &Dims) -> RnnParams {
        let mut p = RnnParams {
            kind: match self.kind {
                RnnKind::Rnn => k::RNN_SIMPLE,
                RnnKind::Gru => k::RNN_GRU,
                RnnKind::Lstm => k::RNN_LSTM,
            },
            seq_len: d.seq as i64,
            batch: d.batch as i64,
            input_size: d.input as i64,
            hidden: d.hidden as i64,
            directions: d.dirs as i64,
            reverse: (self.direction == Direction::Reverse) as i64,
            layout: self.batch_major as i64,
            linear_before_reset: self.linear_before_reset as i64,
            input_forget: self.input_forget as i64,
            packed_recurrent: self.packed_recurrent as i64,
            has_clip: self.clip.is_some() as i64,
            clip: self.clip.unwrap_or(0.0),
            ..Default::default()
        };
        for (i, &(code, alpha, beta)) in self.acts.iter().enumerate() {
            p.act[i] = code;
            p.alpha[i] = alpha;
            p.beta[i] = beta;
        }
        p
    }
}

impl Operator for Rnn {
    fn name(&self) -> &'static str {
        match self.kind {
            RnnKind::Rnn => "RNN",
            RnnKind::Gru => "GRU",
            RnnKind::Lstm => "LSTM",
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !x.dtype.is_float() {
            return Err(format!("input X is {}, expected a float type", x.dtype));
        }
        let float_inputs: &[usize] = if self.kind == RnnKind::Lstm { &[1, 2, 3, 5, 6, 7] } else { &[1, 2, 3, 5] };
        for &i in float_inputs {
            if let Some(t) = cx.opt_input(i) {
                if t.dtype != x.dtype {
                    return Err(format!("input {i} is {}, expected {} like X", t.dtype, x.dtype));
                }
            }
        }
        if let Some(l) = cx.opt_input(4) {
            if l.dtype != DType::I32 {
                return Err(format!("input sequence_lens is {}, expected i32", l.dtype));
            }
        }
        if cx.output_count > self.kind.outputs() {
            return Err(format!("{} has at most {} outputs", self.name(), self.kind.outputs()));
        }
        let x_dims = cx.dims(0)?;
        if x_dims.iter().any(|d| d.as_size().is_none()) {
            let shapes = self.infer_symbolic(cx, &x_dims)?;
            return shapes.into_iter().take(cx.output_count).map(|s| Inferred::of_dims(x.dtype, s)).collect();
        }
        let d = self.infer_dims(cx)?;
        let shapes = self.output_shapes(d.seq, d.batch, d.dirs, d.hidden);
        Ok(shapes.into_iter().take(cx.output_count).map(|s| Inferred::new(x.dtype, s)).collect())
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let (Ok(x), Ok(d)) = (cx.input(0), self.infer_dims(cx)) else {
            return 0;
        };
        // f16 and bf16 run on staged f32 copies.
        let element = if x.dtype == DType::F64 { 8 } else { 4 };
        rnn_scratch_elems(&self.params(&d)).saturating_mul(element)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let mut shapes = Vec::new();
        for i in 0..cx.input_count() {
            shapes.push(if cx.has_input(i) { Some(cx.input_type(i)?.1) } else { None });
        }
        let dtype = cx.input_type(0)?.0;
        let refs: Vec<Option<&[usize]>> = shapes.iter().map(|s| s.as_deref()).collect();
        let params = self.params_for(&refs)?;
        if cx.portable() {
            return self.lower_portable(cx, dtype, &params);
        }
        let scratch = Ptr(if rnn_scratch_elems(&params) > 0 { cx.scratch_ptr()? } else { cx.iconst(0) });
        let params = cx.params(&params)?;
        let [x, w, r, b, lens, initial_h] = std::array::from_fn(|i| Ptr(cx.opt_input_ptr(i)));
        let lstm = self.kind == RnnKind::Lstm;
        let [initial_c, peepholes] = [6, 7].map(|i| Ptr(if lstm { cx.opt_input_ptr(i) } else { cx.iconst(0) }));
        let mut output = |i| if cx.has_output(i) { cx.output_ptr(i).map(Ptr) } else { Ok(Ptr(cx.iconst(0))) };
        let (y, y_h, y_c) = (output(0)?, output(1)?, output(2)?);
        let kernel = kernels::by_dtype(kernels::onnxc_rnn_f32, kernels::onnxc_rnn_f64, dtype);
        let parallel = cx.parallel_ptr();
        cx.call_checked(
            kernel,
            (params, x, w, r, b, lens, initial_h, initial_c, peepholes, y, y_h, y_c, scratch, parallel),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

impl Rnn {
    /// Portable mode: [`rnn_loops::rnn`] over the kernel's params, in the
    /// scratch planned for the kernel.
    fn lower_portable(&self, cx: &mut Lower, dtype: DType, params: &RnnParams) -> Result<(), String> {
        let needs_scratch = params.batch > 0 && params.hidden > 0;
        if needs_scratch && rnn_loops::scratch_elems(params) > rnn_scratch_elems(params) {
            return Err("the portable recurrent loops need more scratch than was planned".into());
        }
        let scratch = if needs_scratch { cx.scratch_ptr()? } else { cx.iconst(0) };
        let input = |cx: &mut Lower, i: usize| cx.has_input(i).then(|| cx.opt_input_ptr(i));
        let output = |cx: &mut Lower, i: usize| if cx.has_output(i) { cx.output_ptr(i).map(Some) } else { Ok(None) };
        let lstm = self.kind == RnnKind::Lstm;
        let t = RnnTensors {
            x: cx.input_ptr(0)?,
            w: cx.input_ptr(1)?,
            r: cx.input_ptr(2)?,
            bias: input(cx, 3),
            lens: input(cx, 4),
            initial_h: input(cx, 5),
            initial_c: if lstm { input(cx, 6) } else { None },
            peepholes: if lstm { input(cx, 7) } else { None },
            y: output(cx, 0)?,
            y_h: output(cx, 1)?,
            y_c: if lstm { output(cx, 2)? } else { None },
            scratch,
        };
        rnn_loops::rnn(cx, params, dtype, &t)
    }
}
