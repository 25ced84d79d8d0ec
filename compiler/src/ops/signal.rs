//! Signal processing: DFT, STFT, the window generators HannWindow,
//! HammingWindow, BlackmanWindow, and MelWeightMatrix.
//!
//! * DFT (opsets 17, 20): input `[..., signal, 1|2]` (real or complex, `T`
//!   f16/bf16/f32/f64; onnxc lowers f32 and f64, the 16-bit types on staged
//!   f32 copies: [`crate::codegen::staging`]), optional `dft_length`
//!   (i32/i64 scalar, a compile-time constant). Opset 17 has the `axis`
//!   attribute (default 1); opset 20 takes `axis` as optional input 2
//!   (default -2). The importer turns the attribute into a constant input 2,
//!   so `infer`/`lower` only see the input form. The axis may not be the
//!   last (complex) dim. `inverse` scales by `1/n`; `onesided` keeps
//!   `n/2+1` bins of a forward transform, and for an inverse one reads the
//!   bins as one half of a Hermitian spectrum and produces a real signal
//!   `[..., n, 1]` (numpy `irfft`; `n` defaults to `2 * (bins - 1)`).
//!   Lowered to `onnxc_dft_{f32,f64}` (naive DFT over a twiddle table in
//!   scratch).
//! * STFT (opset 17): signal `[batch, length, 1|2]`, `frame_step`, optional
//!   `window` `[frame_length]` and `frame_length` (scalars are compile-time
//!   constants); output `[batch, frames, bins, 2]` with
//!   `frames = 1 + (length - frame_length) / frame_step` and
//!   `bins = frame_length / 2 + 1` when `onesided` (default 1). Lowered to
//!   `onnxc_stft_{f32,f64}`.
//! * HannWindow, HammingWindow, BlackmanWindow (opset 17): `size` (i32/i64
//!   scalar) → `[size]` of `output_datatype` (default f32), `periodic`
//!   (default 1) dividing by `size` instead of `size - 1`.
//! * MelWeightMatrix (opset 17): `num_mel_bins`, `dft_length`,
//!   `sample_rate`, `lower_edge_hertz`, `upper_edge_hertz` →
//!   `[dft_length / 2 + 1, num_mel_bins]` of `output_datatype`.
//!
//! The output shapes of the generators depend on their inputs' values, so
//! those are compile-time constants and `infer` computes the whole result
//! (in f64, then converted), which removes the node.
//!
//! Portable mode runs DFT and STFT as the kernels' loops in generated code
//! ([`crate::codegen::signal_loops`]).

use super::elementwise::compute_type;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{signal_loops, Lower};
use crate::import::NodeImport;
use crate::ir::shape::normalize_axis;
use crate::ir::{DType, Tensor};
use onnxc_runtime::abi::signal::{DftParams, StftParams};

fn flag(cx: &NodeImport, name: &str, default: i64) -> Result<bool, String> {
    match cx.attrs.int_or(name, default)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("attribute \"{name}\" is {v}, expected 0 or 1")),
    }
}

/// Scalar (or one-element) integer input `i`'s value, if the input is given.
fn scalar_int(cx: &InferCx, i: usize, name: &str) -> Result<Option<i64>, String> {
    let Some(t) = cx.opt_const_input(i)? else {
        return Ok(None);
    };
    if t.len() != 1 {
        return Err(format!("input {name} must be a scalar, got shape {:?}", t.shape));
    }
    if t.dtype.is_float() {
        return Err(format!("input {name} is {}, expected an integer", t.dtype));
    }
    Ok(Some(t.get_i64(0)))
}

fn float_dtype(dtype: DType, what: &str) -> Result<(), String> {
    match compute_type(dtype) {
        DType::F32 | DType::F64 => Ok(()),
        _ => Err(format!("{what} is {dtype}, expected a float type")),
    }
}

/// Length of the trailing real/complex dim: whether the data is complex.
fn complex_dim(shape: &[usize], what: &str) -> Result<bool, String> {
    match shape.last() {
        Some(1) => Ok(false),
        Some(2) => Ok(true),
        _ => Err(format!("{what} has shape {shape:?}; its last dim must be 1 (real) or 2 (complex)")),
    }
}

#[derive(Clone, Debug)]
pub struct Dft {
    pub inverse: bool,
    pub onesided: bool,
}

pub fn import_dft(cx: &mut NodeImport) -> Result<Op, String> {
    if cx.opset < 20 {
        let axis = cx.attrs.int_or("axis", 1)?;
        let id = cx.add_const("dft_axis", Tensor::from_i64s(vec![], &[axis]));
        cx.inputs.resize(2, None);
        cx.inputs.push(Some(id));
    }
    Ok(Op::Dft(Dft { inverse: flag(cx, "inverse", 0)?, onesided: flag(cx, "onesided", 0)? }))
}

impl Dft {
    /// The kernel parameters and output shape for an input of `shape`.
    fn plan(&self, shape: &[usize], dft_length: Option<i64>, axis: i64) -> Result<(DftParams, Vec<usize>), String> {
        let complex = complex_dim(shape, "input")?;
        let rank = shape.len();
        let axis = normalize_axis(axis, rank)
            .filter(|&a| a + 1 < rank)
            .ok_or_else(|| format!("axis {axis} is out of range for an input of rank {rank} (not the last dim)"))?;
        let in_len = shape[axis];
        let real_out = self.inverse && self.onesided;
        let n = match dft_length {
            Some(n) if n <= 0 => return Err(format!("input dft_length is {n}, expected a positive length")),
            Some(n) => n as usize,
            None if real_out => 2 * in_len.saturating_sub(1),
            None => in_len,
        };
        let out_len = if self.onesided && !self.inverse { n / 2 + 1 } else { n };
        let mut out = shape.to_vec();
        out[axis] = out_len;
        out[rank - 1] = if real_out { 1 } else { 2 };
        let p = DftParams {
            outer: shape[..axis].iter().product::<usize>() as i64,
            in_len: in_len as i64,
            inner: shape[axis + 1..rank - 1].iter().product::<usize>() as i64,
            in_complex: complex as i64,
            n: n as i64,
            out_len: out_len as i64,
            inverse: self.inverse as i64,
            real_output: real_out as i64,
        };
        Ok((p, out))
    }
}

impl Operator for Dft {
    fn name(&self) -> &'static str {
        "DFT"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        float_dtype(x.dtype, "input")?;
        let len = scalar_int(cx, 1, "dft_length")?;
        let axis = scalar_int(cx, 2, "axis")?.unwrap_or(-2);
        let (_, shape) = self.plan(x.shape, len, axis)?;
        Ok(vec![Inferred::new(x.dtype, shape)])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let (Ok(x), Ok(len), Ok(axis)) = (cx.input(0), scalar_int(cx, 1, "dft_length"), scalar_int(cx, 2, "axis"))
        else {
            return 0;
        };
        self.plan(x.shape, len, axis.unwrap_or(-2)).map_or(0, |(p, _)| 16 * p.n as usize)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let scalar = |t: Option<&Tensor>| t.filter(|t| t.len() == 1).map(|t| t.get_i64(0));
        let len = scalar(cx.const_input(1));
        if cx.has_input(1) && len.is_none() {
            return Err("input dft_length must be a compile-time scalar".into());
        }
        let axis = scalar(cx.const_input(2)).unwrap_or(-2);
        let (p, _) = self.plan(&shape, len, axis)?;
        if cx.portable() {
            return signal_loops::dft(cx, dtype, &p);
        }
        let scratch = if p.n > 0 { cx.scratch_ptr()? } else { cx.iconst(0) };
        let params = cx.params(&p)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_dft_f32, kernels::onnxc_dft_f64, dtype),
            (params, Ptr(x), Ptr(y), Ptr(scratch)),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[derive(Clone, Debug)]
pub struct Stft {
    pub onesided: bool,
}

pub fn import_stft(cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Stft(Stft { onesided: flag(cx, "onesided", 1)? }))
}

impl Stft {
    fn plan(
        &self,
        x: &[usize],
        step: i64,
        window: Option<&[usize]>,
        frame_length: Option<i64>,
    ) -> Result<StftParams, String> {
        let complex = complex_dim(x, "input signal")?;
        let &[batch, len, _] = x else {
            return Err(format!("input signal must have rank 3, got shape {x:?}"));
        };
        if step <= 0 {
            return Err(format!("input frame_step is {step}, expected a positive step"));
        }
        let n = match (window, frame_length) {
            (Some(&[w]), Some(f)) if w as i64 != f => {
                return Err(format!("input window has length {w}, but frame_length is {f}"))
            }
            (Some(&[w]), _) => w,
            (Some(w), _) => return Err(format!("input window must have rank 1, got shape {w:?}")),
            (None, Some(f)) if f <= 0 => return Err(format!("input frame_length is {f}, expected a positive length")),
            (None, Some(f)) => f as usize,
            (None, None) => len,
        };
        if n > len || n == 0 {
            return Err(format!("frame length {n} does not fit the signal length {len}"));
        }
        if complex && self.onesided {
            return Err("attribute \"onesided\" needs a real signal".into());
        }
        let frames = 1 + (len - n) / step as usize;
        let bins = if self.onesided { n / 2 + 1 } else { n };
        Ok(StftParams {
            batch: batch as i64,
            signal_len: len as i64,
            in_complex: complex as i64,
            frame_step: step,
            frame_length: n as i64,
            frames: frames as i64,
            bins: bins as i64,
        })
    }

    fn plan_cx(&self, cx: &InferCx) -> Result<StftParams, String> {
        let x = cx.input(0)?;
        let step = scalar_int(cx, 1, "frame_step")?.ok_or("input frame_step is required")?;
        let window = cx.opt_input(2).map(|w| w.shape);
        self.plan(x.shape, step, window, scalar_int(cx, 3, "frame_length")?)
    }
}

impl Operator for Stft {
    fn name(&self) -> &'static str {
        "STFT"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        float_dtype(x.dtype, "input signal")?;
        if let Some(w) = cx.opt_input(2) {
            if w.dtype != x.dtype {
                return Err(format!("input window is {}, expected {} like the signal", w.dtype, x.dtype));
            }
        }
        let p = self.plan_cx(cx)?;
        Ok(vec![Inferred::new(x.dtype, [p.batch, p.frames, p.bins, 2].map(|d| d as usize).to_vec())])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        self.plan_cx(cx).map_or(0, |p| 16 * p.frame_length as usize)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, x) = cx.input_type(0)?;
        let scalar = |t: Option<&Tensor>| t.filter(|t| t.len() == 1).map(|t| t.get_i64(0));
        let step = scalar(cx.const_input(1)).ok_or("input frame_step must be a compile-time scalar")?;
        let window = if cx.has_input(2) { Some(cx.input_type(2)?.1) } else { None };
        let frame_length = scalar(cx.const_input(3));
        let p = self.plan(&x, step, window.as_deref(), frame_length)?;
        if cx.portable() {
            return signal_loops::stft(cx, dtype, &p);
        }
        let scratch = cx.scratch_ptr()?;
        let params = cx.params(&p)?;
        let (x, w, y) = (cx.input_ptr(0)?, cx.opt_input_ptr(2), cx.output_ptr(0)?);
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_stft_f32, kernels::onnxc_stft_f64, dtype),
            (params, Ptr(x), Ptr(w), Ptr(y), Ptr(scratch)),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowKind {
    Hann,
    Hamming,
    Blackman,
}

/// A window generator or MelWeightMatrix: computed at compile time.
#[derive(Clone, Debug)]
pub struct Generator {
    /// `None` for MelWeightMatrix.
    pub window: Option<WindowKind>,
    pub periodic: bool,
    pub dtype: DType,
}

pub fn import_generator(cx: &mut NodeImport) -> Result<Op, String> {
    let window = match cx.op_type {
        "HannWindow" => Some(WindowKind::Hann),
        "HammingWindow" => Some(WindowKind::Hamming),
        "BlackmanWindow" => Some(WindowKind::Blackman),
        "MelWeightMatrix" => None,
        other => return Err(format!("{other} is not a signal generator")),
    };
    let code = cx.attrs.int_or("output_datatype", 1)?;
    let dtype = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|&d| d != DType::Bool)
        .ok_or_else(|| format!("attribute \"output_datatype\" is {code}, not a supported numeric type"))?;
    Ok(Op::SignalGenerator(Generator { window, periodic: flag(cx, "periodic", 1)?, dtype }))
}

/// `values` as a tensor of `dtype` (floats rounded, integers truncated).
fn tensor_from_f64s(dtype: DType, shape: Vec<usize>, values: &[f64]) -> Result<Tensor, String> {
    let data: Vec<u8> = match dtype {
        DType::F64 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F32 => values.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
        DType::F16 => values.iter().flat_map(|&v| half::f16::from_f64(v).to_le_bytes()).collect(),
        DType::BF16 => values.iter().flat_map(|&v| half::bf16::from_f64(v).to_le_bytes()).collect(),
        _ => {
            let size = dtype.size();
            values.iter().flat_map(|&v| (v as i64).to_le_bytes().into_iter().take(size)).collect()
        }
    };
    Tensor::from_bytes(dtype, shape, data).ok_or_else(|| "internal error: tensor size mismatch".into())
}

fn window_values(kind: WindowKind, size: usize, periodic: bool) -> Vec<f64> {
    let n = if periodic { size as f64 } else { size as f64 - 1.0 };
    let tau = 2.0 * std::f64::consts::PI;
    (0..size)
        .map(|i| {
            let x = i as f64 / n;
            match kind {
                WindowKind::Hann => (std::f64::consts::PI * x).sin().powi(2),
                WindowKind::Hamming => {
                    let alpha = 25.0 / 46.0;
                    alpha - (1.0 - alpha) * (tau * x).cos()
                }
                // Summed in the reference's order: its centre tap is exactly 1,
                // which matters when the window is truncated to integers.
                WindowKind::Blackman => -0.5 * (tau * x).cos() + 0.08 * (2.0 * tau * x).cos() + 0.42,
            }
        })
        .collect()
}

/// MelWeightMatrix's `[dft_length / 2 + 1, mel_bins]` triangular filters.
fn mel_values(mel_bins: usize, dft_length: usize, rate: f64, low: f64, high: f64) -> Result<Vec<f64>, String> {
    let spec_bins = dft_length / 2 + 1;
    let to_mel = |hz: f64| 2595.0 * (hz / 700.0).ln_1p() / std::f64::consts::LN_10;
    let (low_mel, high_mel) = (to_mel(low), to_mel(high));
    let step = (high_mel - low_mel) / (mel_bins + 2) as f64;
    let points: Vec<i64> = (0..mel_bins + 2)
        .map(|i| {
            let mel = i as f64 * step + low_mel;
            let hz = 700.0 * (mel / 2595.0 * std::f64::consts::LN_10).exp_m1();
            (((dft_length + 1) as f64 * hz) / rate).floor() as i64
        })
        .collect();
    let mut out = vec![0.0; spec_bins * mel_bins];
    let mut set = |j: i64, i: usize, v: f64| -> Result<(), String> {
        let j = usize::try_from(j).ok().filter(|&j| j < spec_bins).ok_or_else(|| {
            format!("frequency bin {j} falls outside the {spec_bins} spectrogram bins (check the edge frequencies)")
        })?;
        out[j * mel_bins + i] = v;
        Ok(())
    };
    for i in 0..mel_bins {
        let (lo, center, hi) = (points[i], points[i + 1], points[i + 2]);
        if center == lo {
            set(center, i, 1.0)?;
        } else {
            for j in lo..=center {
                set(j, i, (j - lo) as f64 / (center - lo) as f64)?;
            }
        }
        if hi > center {
            for j in center..hi {
                set(j, i, (hi - j) as f64 / (hi - center) as f64)?;
            }
        }
    }
    Ok(out)
}

impl Generator {
    fn compute(&self, cx: &InferCx) -> Result<Tensor, String> {
        let count = |i: usize, name: &str| -> Result<usize, String> {
            let v = scalar_int(cx, i, name)?.ok_or_else(|| format!("input {name} is required"))?;
            usize::try_from(v).map_err(|_| format!("input {name} is {v}, expected a nonnegative count"))
        };
        if let Some(kind) = self.window {
            let size = count(0, "size")?;
            return tensor_from_f64s(self.dtype, vec![size], &window_values(kind, size, self.periodic));
        }
        let mel_bins = count(0, "num_mel_bins")?;
        let dft_length = count(1, "dft_length")?;
        let rate = count(2, "sample_rate")?;
        if rate == 0 {
            return Err("input sample_rate is 0".into());
        }
        let float = |i: usize, name: &str| -> Result<f64, String> {
            let t = cx.const_input(i)?;
            if t.len() != 1 {
                return Err(format!("input {name} must be a scalar, got shape {:?}", t.shape));
            }
            Ok(t.get_f64(0))
        };
        let (low, high) = (float(3, "lower_edge_hertz")?, float(4, "upper_edge_hertz")?);
        let values = mel_values(mel_bins, dft_length, rate as f64, low, high)?;
        tensor_from_f64s(self.dtype, vec![dft_length / 2 + 1, mel_bins], &values)
    }
}

impl Operator for Generator {
    fn name(&self) -> &'static str {
        match self.window {
            Some(WindowKind::Hann) => "HannWindow",
            Some(WindowKind::Hamming) => "HammingWindow",
            Some(WindowKind::Blackman) => "BlackmanWindow",
            None => "MelWeightMatrix",
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let t = self.compute(cx)?;
        Ok(vec![Inferred::constant(t)])
    }

    fn lower(&self, _cx: &mut Lower) -> Result<(), String> {
        Err("internal error: the generator's value is computed at compile time".into())
    }
}
