//! Portable DFT and STFT, for portable mode, where `onnxc_dft_*` and
//! `onnxc_stft_*` are not linked: the kernels' naive `O(n^2)` transforms
//! (`runtime-support/src/generic/signal.rs`), operation for operation in
//! f64, each output rounded once to the tensors' type (f32 or f64; f16
//! and bf16 arrive as staged f32 copies).
//!
//! The transform length is known at compile time, so the kernels' twiddle
//! table (`cos, sin` of `2 pi j / n`, computed by the kernels' own
//! [`twiddles`]) is read-only data instead of scratch. Bin `k` folds the
//! samples with the table index `j = k t mod n` carried along (`j += k`,
//! less `n` when it reaches `n`), so every table read is below `n`.

use super::nest::Level;
use super::{clif_type, types, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::abi::signal::{DftParams, StftParams};
use onnxc_runtime::generic::signal::twiddles;

/// The kernels' twiddle table of length `n`, placed in read-only data.
fn twiddle_table(cx: &mut Lower, n: usize) -> Result<Value, String> {
    let mut table = vec![0f64; 2 * n];
    // SAFETY: `table` holds the `2 n` doubles `twiddles` writes.
    unsafe { twiddles(n, table.as_mut_ptr()) };
    cx.table(&table)
}

/// Loads and stores of the tensors' type, widened to f64.
#[derive(Clone, Copy)]
struct Samples {
    dtype: DType,
}

impl Samples {
    fn new(dtype: DType, what: &str) -> Result<Samples, String> {
        match dtype {
            DType::F32 | DType::F64 => Ok(Samples { dtype }),
            other => Err(format!("{what} of {other} has no portable lowering (f32 and f64 do)")),
        }
    }

    fn bytes(self) -> i64 {
        self.dtype.size() as i64
    }

    fn load(self, cx: &mut Lower, at: Value, offset: i32) -> Value {
        let v = cx.ins().load(clif_type(self.dtype), MemFlagsData::trusted(), at, offset);
        if self.dtype == DType::F32 {
            cx.ins().fpromote(types::F64, v)
        } else {
            v
        }
    }

    /// Stores `v * scale` (no product when `scale` is 1).
    fn store(self, cx: &mut Lower, v: Value, scale: f64, at: Value, offset: i32) {
        let v = if scale == 1.0 {
            v
        } else {
            let s = cx.ins().f64const(scale);
            cx.ins().fmul(v, s)
        };
        let v = if self.dtype == DType::F32 { cx.ins().fdemote(types::F32, v) } else { v };
        cx.ins().store(MemFlagsData::trusted(), v, at, offset);
    }
}

/// One transform's input: `len` samples from `first`, `step` bytes apart,
/// complex (`[re, im]`) or real, each times the window's entry when there
/// is one (`window`, `Samples` apart).
struct Signal {
    samples: Samples,
    first: Value,
    step: i64,
    complex: bool,
    window: Option<Value>,
    len: usize,
}

impl Signal {
    /// Sample `(re, im)` at `at` (the window entry at `w`), as the kernels read it.
    fn read(&self, cx: &mut Lower, at: Value, w: Value) -> (Value, Value) {
        let re = self.samples.load(cx, at, 0);
        let im =
            if self.complex { self.samples.load(cx, at, self.samples.bytes() as i32) } else { cx.ins().f64const(0.0) };
        match self.window {
            Some(_) => {
                let w = self.samples.load(cx, w, 0);
                (cx.ins().fmul(re, w), cx.ins().fmul(im, w))
            }
            None => (re, im),
        }
    }

    /// Bin `k` (pointer-sized, below `n`) of the length-`n` transform:
    /// `sum_t x[t] e^{sign 2 pi i k t / n}` as `(re, im)`.
    fn bin(&self, cx: &mut Lower, table: Value, n: usize, k: Value, sign: f64) -> Result<(Value, Value), String> {
        let window = self.window.unwrap_or(self.first);
        let window_step = if self.window.is_some() { self.samples.bytes() } else { 0 };
        let taps = [Level::new(self.len.min(n), vec![self.step, window_step])];
        let (zero, start) = (cx.ins().f64const(0.0), cx.iconst(0));
        let flags = MemFlagsData::trusted();
        let sums = cx.fold_nest(&taps, &[self.first, window], &[zero, zero, start], &mut |cx, _, at, acc| {
            let entry = cx.advance(table, acc[2], 16);
            let c = cx.ins().load(types::F64, flags, entry, 0);
            let s = cx.ins().load(types::F64, flags, entry, 8);
            let s = if sign < 0.0 { cx.ins().fneg(s) } else { s };
            let (xr, xi) = self.read(cx, at[0], at[1]);
            let (rc, is) = (cx.ins().fmul(xr, c), cx.ins().fmul(xi, s));
            let re_term = cx.ins().fsub(rc, is);
            let (rs, ic) = (cx.ins().fmul(xr, s), cx.ins().fmul(xi, c));
            let im_term = cx.ins().fadd(rs, ic);
            let re = cx.ins().fadd(acc[0], re_term);
            let im = cx.ins().fadd(acc[1], im_term);
            Ok(vec![re, im, next_index(cx, acc[2], k, n)])
        })?;
        Ok((sums[0], sums[1]))
    }
}

/// `(j + by) mod n` for `j, by < n`.
fn next_index(cx: &mut Lower, j: Value, by: Value, n: usize) -> Value {
    let sum = cx.ins().iadd(j, by);
    let wrapped = cx.ins().iadd_imm_s(sum, -(n as i64));
    let past = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, sum, n as i64);
    cx.ins().select(past, wrapped, sum)
}

/// DFT along the middle axis of input 0 (`[outer, in_len, inner, 1|2]`)
/// into output 0, as `p` (the kernel's params) says.
pub fn dft(cx: &mut Lower, dtype: DType, p: &DftParams) -> Result<(), String> {
    let samples = Samples::new(dtype, "DFT")?;
    let [outer, in_len, inner, n, out_len] = [p.outer, p.in_len, p.inner, p.n, p.out_len].map(|d| d.max(0) as usize);
    if outer * inner * out_len == 0 {
        return Ok(());
    }
    let real_out = p.inverse != 0 && p.real_output != 0;
    if out_len > n || (real_out && out_len != n) {
        return Err(format!("DFT of length {n} cannot give {out_len} bins"));
    }
    let (ci, co) = (if p.in_complex != 0 { 2 } else { 1 }, if real_out { 1 } else { 2 });
    let eb = samples.bytes();
    let scale = if p.inverse != 0 { 1.0 / n as f64 } else { 1.0 };
    let table = twiddle_table(cx, n)?;
    let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
    let inner_bytes = |c: i64| inner as i64 * c * eb;
    let lanes = [
        Level::new(outer, vec![in_len as i64 * inner_bytes(ci), out_len as i64 * inner_bytes(co)]),
        Level::new(inner, vec![ci * eb, co * eb]),
    ];
    let bins = [Level::new(out_len, vec![0, inner_bytes(co)])];
    cx.nest(&lanes, &[x, y], &mut |cx, _, lane| {
        let signal =
            Signal { samples, first: lane[0], step: inner_bytes(ci), complex: ci == 2, window: None, len: in_len };
        cx.nest(&bins, &[lane[0], lane[1]], &mut |cx, k, at| {
            if real_out {
                let v = hermitian_sample(cx, &signal, table, n, k[0])?;
                samples.store(cx, v, scale, at[1], 0);
            } else {
                let sign = if p.inverse != 0 { 1.0 } else { -1.0 };
                let (re, im) = signal.bin(cx, table, n, k[0], sign)?;
                samples.store(cx, re, scale, at[1], 0);
                samples.store(cx, im, scale, at[1], eb as i32);
            }
            Ok(())
        })
    })
}

/// Sample `t` of the inverse real transform of the one-sided bins of
/// `signal`: `sum_k Re(x[k] e^{2 pi i k t / n})`, bins `0 < k < n/2`
/// counted twice (they stand for bin `n - k` too).
fn hermitian_sample(cx: &mut Lower, signal: &Signal, table: Value, n: usize, t: Value) -> Result<Value, String> {
    let bins = signal.len.min(n / 2 + 1);
    let taps = [Level::new(bins, vec![signal.step])];
    let (zero, start) = (cx.ins().f64const(0.0), cx.iconst(0));
    let flags = MemFlagsData::trusted();
    Ok(cx.fold_nest(&taps, &[signal.first], &[zero, start], &mut |cx, k, at, acc| {
        let entry = cx.advance(table, acc[1], 16);
        let c = cx.ins().load(types::F64, flags, entry, 0);
        let s = cx.ins().load(types::F64, flags, entry, 8);
        let (xr, xi) = signal.read(cx, at[0], at[0]);
        let (rc, is) = (cx.ins().fmul(xr, c), cx.ins().fmul(xi, s));
        let v = cx.ins().fsub(rc, is);
        let doubled = cx.ins().fadd(v, v);
        let first = cx.ins().icmp_imm_u(IntCC::Equal, k[0], 0);
        let twice_k = cx.ins().iadd(k[0], k[0]);
        let middle = cx.ins().icmp_imm_u(IntCC::Equal, twice_k, n as i64);
        let once = cx.ins().bor(first, middle);
        let term = cx.ins().select(once, v, doubled);
        let sum = cx.ins().fadd(acc[0], term);
        Ok(vec![sum, next_index(cx, acc[1], t, n)])
    })?[0])
}

/// STFT of input 0 (`[batch, signal_len, 1|2]`) with the optional window
/// (input 2) into output 0 (`[batch, frames, bins, 2]`), as `p` says.
pub fn stft(cx: &mut Lower, dtype: DType, p: &StftParams) -> Result<(), String> {
    let samples = Samples::new(dtype, "STFT")?;
    let [batch, signal_len, step, n, frames, bins] =
        [p.batch, p.signal_len, p.frame_step, p.frame_length, p.frames, p.bins].map(|d| d.max(0) as usize);
    if batch * frames * bins == 0 {
        return Ok(());
    }
    let ci = if p.in_complex != 0 { 2 } else { 1 };
    let eb = samples.bytes();
    let table = twiddle_table(cx, n)?;
    let window = if cx.has_input(2) { Some(cx.input_ptr(2)?) } else { None };
    let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
    let levels = [
        Level::new(batch, vec![signal_len as i64 * ci * eb, (frames * bins) as i64 * 2 * eb]),
        Level::new(frames, vec![step as i64 * ci * eb, bins as i64 * 2 * eb]),
        Level::new(bins, vec![0, 2 * eb]),
    ];
    cx.nest(&levels, &[x, y], &mut |cx, k, at| {
        let signal = Signal { samples, first: at[0], step: ci * eb, complex: ci == 2, window, len: n };
        let (re, im) = signal.bin(cx, table, n, k[2], -1.0)?;
        samples.store(cx, re, 1.0, at[1], 0);
        samples.store(cx, im, 1.0, at[1], eb as i32);
        Ok(())
    })
}
