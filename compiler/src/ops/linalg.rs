//! Matrix products: MatMul (numpy `matmul` semantics) and Gemm.
//!
//! * MatMul (opsets 1, 9, 13): `Y = A @ B` with numpy batch broadcasting over
//!   the leading dims; a 1-D `A` is read as `[1, K]` and a 1-D `B` as
//!   `[K, 1]`, and that dim is dropped from the result.
//!   Type constraints: f16, bf16, f32, f64, i32, i64, u32, u64 (both inputs
//!   the same type).
//! * Gemm (opsets 1, 6, 7, 9, 11, 13): `Y = alpha * A' @ B' + beta * C` with
//!   `A'`/`B'` optionally transposed (`transA`, `transB`), `C` optional
//!   (required before opset 11) and unidirectionally broadcast to `[M, N]`.
//!   The opset < 7 `broadcast` attribute is not needed: when it is 0 the
//!   shapes are equal, which broadcasting accepts too.
//!   Type constraints: f16, bf16, f32, f64, i32, i64, u32, u64.
//!
//! * Det (opsets 11, 22): determinant of each square matrix in the last
//!   two dims of `[*, M, M]`, giving `[*]`. Type constraints: float types;
//!   onnxc lowers f32 and f64 through `onnxc_det_{f32,f64}` (LU with
//!   partial pivoting in f64 scratch), f16/bf16 through the f32 one on
//!   staged copies; portable mode runs the same elimination in generated
//!   code ([`crate::codegen::linalg_loops`]).
//!
//! MatMul and Gemm are described by one batched strided [`Problem`]: the matrix part
//! is the kernel's parameter block ([`GemmParams`]), the batch dims (after
//! dropping 1s and merging uniformly strided neighbours) are kept apart. f32
//! calls `onnxc_gemm_f32`, which takes the innermost batch dims (up to its
//! limit) while generated loops walk any outer ones; portable f32 runs
//! f32x4 register tiles ([`crate::codegen::gemm_tiles`]) where B's rows are
//! contiguous; f64, the integer types and a portable transposed B run a
//! plain Cranelift loop nest (one register fold per dot product) over the
//! same description (integer Gemm needs integral `alpha`/`beta`).
//! f16/bf16 run the f32 kernel on staged f32 copies
//! ([`crate::codegen::staging`]).

use super::elementwise::compute_type;
use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{clif_type, gemm_tiles, linalg_loops, InstBuilder, Level, Lower, MemFlagsData, Value};
use crate::import::NodeImport;
use crate::ir::dim_expr::{DimExpr, SymbolFacts};
use crate::ir::shape::{broadcast, broadcast_dims, broadcast_strides, dims_text};
use crate::ir::DType;
use onnxc_runtime::abi::linalg::DetParams;
use onnxc_runtime::{GemmParams, GEMM_MAX_BATCH_RANK};

/// `packed_b`: B's shape when input 1 is a constant the compiler packed
/// into strips (`passes::pack_gemm_weights`), the same for [`Gemm`];
/// `alpha`: a scale of the product folded into it
/// (`passes::fold_matmul_scale`), 1 as imported.
#[derive(Clone, Debug)]
pub struct MatMul {
    pub packed_b: Option<Vec<usize>>,
    pub alpha: f64,
}

impl Default for MatMul {
    fn default() -> MatMul {
        MatMul { packed_b: None, alpha: 1.0 }
    }
}

pub fn import_matmul(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::MatMul(MatMul::default()))
}

/// Input 1's shape: B's own unless it was packed (its logical shape then).
fn b_dims(cx: &InferCx, packed_b: &Option<Vec<usize>>) -> Result<Vec<DimExpr>, String> {
    match packed_b {
        Some(shape) => Ok(shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()),
        None => cx.dims(1),
    }
}

/// B's shape for lowering: its logical one when packed.
fn b_shape(cx: &Lower, packed_b: &Option<Vec<usize>>) -> Result<Vec<usize>, String> {
    match packed_b {
        Some(shape) => Ok(shape.clone()),
        None => Ok(cx.input_type(1)?.1),
    }
}

/// Marks a problem's B as packed in strips when `packed_b` says so.
fn with_strips(mut p: Problem, packed_b: &Option<Vec<usize>>) -> Problem {
    if packed_b.is_some() {
        p.matrix.b_strips = 1;
        (p.matrix.b_row_stride, p.matrix.b_col_stride) = (0, 0);
    }
    p
}

/// Element types either product lowers (f16/bf16 arrive staged as f32).
fn check_dtype(dtype: DType) -> Result<(), String> {
    match dtype {
        DType::F32 | DType::F64 | DType::I32 | DType::I64 | DType::U32 | DType::U64 => Ok(()),
        other => Err(format!("element type {other} is not supported")),
    }
}

/// Same-type check of input `i` against input 0's type.
fn check_same(cx: &InferCx, i: usize, want: DType) -> Result<(), String> {
    let t = cx.input(i)?.dtype;
    if t != want {
        return Err(format!("input {i} is {t}, expected {want} like input 0"));
    }
    Ok(())
}

/// Drops size-1 batch dims and merges adjacent batch dims along which every
/// operand steps uniformly, so deep broadcasts fit the kernel's batch rank.
/// `strides[s][d]` is operand `s`'s element stride along batch dim `d`.
fn compact_batch(dims: &[usize], strides: &[Vec<i64>]) -> (Vec<usize>, Vec<Vec<i64>>) {
    let mut out_dims: Vec<usize> = Vec::new();
    let mut out_strides: Vec<Vec<i64>> = vec![Vec::new(); strides.len()];
    for (d, &size) in dims.iter().enumerate() {
        if size == 1 {
            continue;
        }
        let mergeable = out_dims.last().is_some()
            && strides.iter().zip(&out_strides).all(|(s, o)| o.last().is_some_and(|&prev| prev == s[d] * size as i64));
        if let (true, Some(last)) = (mergeable, out_dims.last_mut()) {
            *last *= size;
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                if let Some(prev) = o.last_mut() {
                    *prev = s[d];
                }
            }
        } else {
            out_dims.push(size);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s[d]);
            }
        }
    }
    (out_dims, out_strides)
}

/// A batched strided matrix product: `matrix` describes one `m x n` problem
/// (its batch fields unused), `batch` the batch dims with the element
/// strides of A, B and C along each (Y is contiguous).
#[derive(Clone, Debug)]
struct Problem {
    matrix: GemmParams,
    batch: Vec<usize>,
    /// `[A, B, C]` strides per batch dim.
    strides: [Vec<i64>; 3],
}

impl Problem {
    fn new(matrix: GemmParams, dims: &[usize], strides: &[Vec<i64>]) -> Problem {
        let (batch, s) = compact_batch(dims, strides);
        let get = |i: usize| s.get(i).cloned().unwrap_or_else(|| vec![0; batch.len()]);
        let mut problem = Problem { matrix, strides: [get(0), get(1), get(2)], batch };
        problem.fold_rows();
        problem
    }

    /// Folds inner batch dims over which B stays put into the rows: a
    /// `[1, 56, 56, 96] @ [96, 384]` (a Linear over an NHWC map, as in
    /// ConvNeXt) is one `3136 x 96` by `96 x 384` product, not 56 products
    /// of 56 rows that each re-pack and re-read all of B. Applies when A's
    /// and C's rows run on uniformly across the dim (Y's always do: it is
    /// contiguous).
    fn fold_rows(&mut self) {
        while let Some(&size) = self.batch.last() {
            let d = self.batch.len() - 1;
            let p = &self.matrix;
            let rows_run_on = |stride: i64, row_stride: i64| stride == p.m * row_stride;
            let foldable = self.strides[1][d] == 0
                && rows_run_on(self.strides[0][d], p.a_row_stride)
                && rows_run_on(self.strides[2][d], p.c_row_stride);
            if !foldable {
                return;
            }
            self.matrix.m *= size as i64;
            self.batch.pop();
            self.strides.iter_mut().for_each(|s| {
                s.pop();
            });
        }
    }

    /// The kernel's parameter block for the batch dims from `from` on.
    fn kernel_params(&self, from: usize) -> GemmParams {
        let mut p = self.matrix;
        let dims = &self.batch[from..];
        p.batch_rank = dims.len() as i64;
        for (d, &size) in dims.iter().enumerate() {
            p.batch_dims[d] = size as i64;
            p.a_batch_strides[d] = self.strides[0][from + d];
            p.b_batch_strides[d] = self.strides[1][from + d];
            p.c_batch_strides[d] = self.strides[2][from + d];
        }
        p
    }
}

/// The output dims of `A @ B`: 1-D operands promoted to matrices (their
/// added dim dropped again), batch dims broadcast.
fn matmul_dims(a: &[DimExpr], b: &[DimExpr], facts: &SymbolFacts) -> Result<Vec<DimExpr>, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul inputs must have rank at least 1".into());
    }
    let one = DimExpr::constant(1);
    let a2 = if a.len() == 1 { vec![one.clone(), a[0].clone()] } else { a.to_vec() };
    let b2 = if b.len() == 1 { vec![b[0].clone(), one] } else { b.to_vec() };
    let (m, k) = (&a2[a2.len() - 2], &a2[a2.len() - 1]);
    let (kb, n) = (&b2[b2.len() - 2], &b2[b2.len() - 1]);
    if k != kb {
        return Err(format!("inner dims differ: A is {}, B is {} ({k} vs {kb})", dims_text(a), dims_text(b)));
    }
    let (a_batch, b_batch) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let mut shape = broadcast_dims(a_batch, b_batch, facts)
        .ok_or_else(|| format!("batch dims {} and {} do not broadcast", dims_text(a_batch), dims_text(b_batch)))?;
    if a.len() > 1 {
        shape.push(m.clone());
    }
    if b.len() > 1 {
        shape.push(n.clone());
    }
    Ok(shape)
}

/// The problem description of `A @ B`, whose shapes [`matmul_dims`] accepted.
fn matmul_problem(a: &[usize], b: &[usize]) -> Result<Problem, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul inputs must have rank at least 1".into());
    }
    // Promote 1-D operands to matrices.
    let a2: Vec<usize> = if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() };
    let b2: Vec<usize> = if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        return Err(format!("inner dims differ: A is {a:?}, B is {b:?} ({k} vs {kb})"));
    }
    let (a_batch, b_batch) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch = broadcast(a_batch, b_batch)
        .ok_or_else(|| format!("batch dims {a_batch:?} and {b_batch:?} do not broadcast"))?;
    let mat = |s: Vec<i64>, size: usize| -> Vec<i64> { s.iter().map(|&v| v * size as i64).collect() };
    let strides = vec![mat(broadcast_strides(a_batch, &batch), m * k), mat(broadcast_strides(b_batch, &batch), k * n)];
    let p = GemmParams {
        m: m as i64,
        n: n as i64,
        k: k as i64,
        a_row_stride: k as i64,
        a_col_stride: 1,
        b_row_stride: n as i64,
        b_col_stride: 1,
        alpha: 1.0,
        beta: 0.0,
        ..Default::default()
    };
    Ok(Problem::new(p, &batch, &strides))
}

impl Operator for MatMul {
    fn name(&self) -> &'static str {
        "MatMul"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let a = cx.input(0)?;
        check_dtype(compute_type(a.dtype))?;
        check_same(cx, 1, a.dtype)?;
        let shape = matmul_dims(&cx.dims(0)?, &b_dims(cx, &self.packed_b)?, cx.facts())?;
        Ok(vec![Inferred::of_dims(a.dtype, shape)?])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, a) = cx.input_type(0)?;
        let b = b_shape(cx, &self.packed_b)?;
        let mut p = with_strips(matmul_problem(&a, &b)?, &self.packed_b);
        p.matrix.alpha = self.alpha;
        emit_gemm(cx, dtype, &p, false)
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[derive(Clone, Debug)]
pub struct Gemm {
    pub alpha: f32,
    pub beta: f32,
    pub trans_a: bool,
    pub trans_b: bool,
    pub packed_b: Option<Vec<usize>>,
}

pub fn import_gemm(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let flag = |name: &str| -> Result<bool, String> {
        match a.int_or(name, 0)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(format!("attribute \"{name}\" is {v}, expected 0 or 1")),
        }
    };
    Ok(Op::Gemm(Gemm {
        alpha: a.float_or("alpha", 1.0)?,
        beta: a.float_or("beta", 1.0)?,
        trans_a: flag("transA")?,
        trans_b: flag("transB")?,
        packed_b: None,
    }))
}

impl Gemm {
    /// `(M, N, params)` from the shapes of A, B and (optional) C.
    fn problem(&self, a: &[usize], b: &[usize], c: Option<&[usize]>) -> Result<Problem, String> {
        let (&[a0, a1], &[b0, b1]) = (a, b) else {
            return Err(format!("A and B must be matrices, got shapes {a:?} and {b:?}"));
        };
        let (m, k) = if self.trans_a { (a1, a0) } else { (a0, a1) };
        let (kb, n) = if self.trans_b { (b1, b0) } else { (b0, b1) };
        if k != kb {
            return Err(format!(
                "inner dims differ: A' is {m}x{k}, B' is {kb}x{n} (transA={}, transB={})",
                self.trans_a as u8, self.trans_b as u8
            ));
        }
        let mut p = GemmParams {
            m: m as i64,
            n: n as i64,
            k: k as i64,
            a_row_stride: if self.trans_a { 1 } else { a1 as i64 },
            a_col_stride: if self.trans_a { a1 as i64 } else { 1 },
            b_row_stride: if self.trans_b { 1 } else { b1 as i64 },
            b_col_stride: if self.trans_b { b1 as i64 } else { 1 },
            alpha: self.alpha as f64,
            beta: self.beta as f64,
            ..Default::default()
        };
        if let Some(c) = c {
            let ok = c.len() <= 2 && broadcast(c, &[m, n]).is_some_and(|s| s == [m, n]);
            if !ok {
                return Err(format!("C has shape {c:?}, which does not broadcast to [{m}, {n}]"));
            }
            let s = broadcast_strides(c, &[m, n]);
            p.c_row_stride = s[0];
            p.c_col_stride = s[1];
        }
        Ok(Problem::new(p, &[], &[]))
    }
}

impl Gemm {
    /// Symbolic inference: `[M, N]` for A and B dims of which some is
    /// symbolic, C broadcasting to it.
    fn symbolic_dims(
        &self,
        [a, b]: &[Vec<DimExpr>; 2],
        c: Option<&[DimExpr]>,
        facts: &SymbolFacts,
    ) -> Result<Vec<DimExpr>, String> {
        let ([a0, a1], [b0, b1]) = (&a[..], &b[..]) else {
            return Err(format!("A and B must be matrices, got {} and {}", dims_text(a), dims_text(b)));
        };
        let (m, k) = if self.trans_a { (a1, a0) } else { (a0, a1) };
        let (kb, n) = if self.trans_b { (b1, b0) } else { (b0, b1) };
        if k != kb {
            return Err(format!("inner dims differ: A' is {m}x{k}, B' is {kb}x{n}"));
        }
        let out = vec![m.clone(), n.clone()];
        if let Some(c) = c {
            if c.len() > 2 || broadcast_dims(c, &out, facts).as_ref() != Some(&out) {
                return Err(format!("C is {}, which does not broadcast to {}", dims_text(c), dims_text(&out)));
            }
        }
        Ok(out)
    }
}

impl Operator for Gemm {
    fn name(&self) -> &'static str {
        "Gemm"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let a = cx.input(0)?;
        let b = match &self.packed_b {
            Some(shape) => shape.as_slice(),
            None => cx.input(1)?.shape,
        };
        check_dtype(compute_type(a.dtype))?;
        check_same(cx, 1, a.dtype)?;
        let c = cx.opt_input(2);
        if c.is_some() {
            check_same(cx, 2, a.dtype)?;
        }
        if a.dtype.is_int() {
            for (name, v) in [("alpha", self.alpha), ("beta", self.beta)] {
                if v.fract() != 0.0 {
                    return Err(format!("attribute \"{name}\" is {v}, integer Gemm needs an integral value"));
                }
            }
        }
        let dims = [cx.dims(0)?, b_dims(cx, &self.packed_b)?];
        if dims.iter().flatten().any(|d| d.as_size().is_none()) {
            let c = c.map(|_| cx.dims(2)).transpose()?;
            return Ok(vec![Inferred::of_dims(a.dtype, self.symbolic_dims(&dims, c.as_deref(), cx.facts())?)?]);
        }
        let p = self.problem(a.shape, b, c.map(|c| c.shape))?;
        let (m, n) = (p.matrix.m as usize, p.matrix.n as usize);
        Ok(vec![Inferred::new(a.dtype, vec![m, n])])
    }

    fn infers_symbolically(&self) -> bool {
        true
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, a) = cx.input_type(0)?;
        let b = b_shape(cx, &self.packed_b)?;
        let c = if cx.has_input(2) { Some(cx.input_type(2)?.1) } else { None };
        let p = with_strips(self.problem(&a, &b, c.as_deref())?, &self.packed_b);
        emit_gemm(cx, dtype, &p, c.is_some())
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

/// Emits `Y = alpha * A @ B (+ beta * C)` for the problem `p`, reading A, B
/// and C from inputs 0, 1, 2 and writing output 0 contiguously.
fn emit_gemm(cx: &mut Lower, dtype: DType, p: &Problem, has_c: bool) -> Result<(), String> {
    let a = cx.input_ptr(0)?;
    let b = cx.input_ptr(1)?;
    let c = if has_c { cx.input_ptr(2)? } else { cx.iconst(0) };
    let y = cx.output_ptr(0)?;
    check_dtype(dtype)?;
    let rank = p.batch.len();
    let loops = LoopGemm {
        p,
        dtype,
        has_c,
        size: dtype.size() as i64,
        // f32: the kernel takes the innermost batch dims (not in portable mode).
        kernel_from: (dtype == DType::F32 && !cx.portable()).then(|| rank.saturating_sub(GEMM_MAX_BATCH_RANK)),
    };
    loops.batch(cx, 0, [a, b, c, y])
}

/// The loop nest over a [`Problem`]: batch loops down to `kernel_from` (then
/// one f32 kernel call), or all the way down to scalar loops.
struct LoopGemm<'p> {
    p: &'p Problem,
    dtype: DType,
    has_c: bool,
    size: i64,
    kernel_from: Option<usize>,
}

impl LoopGemm<'_> {
    /// `base + index * stride` elements.
    fn step(&self, cx: &mut Lower, base: Value, index: Value, stride: i64) -> Value {
        if stride == 0 {
            return base;
        }
        let off = cx.ins().imul_imm_s(index, stride * self.size);
        cx.ins().iadd(base, off)
    }

    /// Loops over batch dim `level` (then the matrix), ptrs = [A, B, C, Y].
    fn batch(&self, cx: &mut Lower, level: usize, ptrs: [Value; 4]) -> Result<(), String> {
        if self.kernel_from == Some(level) {
            let params = cx.params(&self.p.kernel_params(level))?;
            let [a, b, c, y] = ptrs;
            let parallel = cx.parallel_ptr();
            return cx.call_checked(kernels::onnxc_gemm_f32, (params, Ptr(a), Ptr(b), Ptr(c), Ptr(y), parallel));
        }
        let dims = &self.p.batch;
        let Some(&size) = dims.get(level) else {
            return self.matrix(cx, ptrs);
        };
        let m = &self.p.matrix;
        // Y is contiguous: batch dim `level` steps over the dims after it.
        let y_stride = (dims[level + 1..].iter().product::<usize>() as i64) * m.m * m.n;
        let l = cx.loop_begin(size);
        let s = &self.p.strides;
        let next = [
            self.step(cx, ptrs[0], l.index, s[0][level]),
            self.step(cx, ptrs[1], l.index, s[1][level]),
            self.step(cx, ptrs[2], l.index, s[2][level]),
            self.step(cx, ptrs[3], l.index, y_stride),
        ];
        self.batch(cx, level + 1, next)?;
        cx.loop_end(l);
        Ok(())
    }

    fn mul_const(&self, cx: &mut Lower, v: Value, factor: f64) -> Value {
        if factor == 1.0 {
            return v;
        }
        let ty = clif_type(self.dtype);
        match self.dtype {
            DType::F64 => {
                let f = cx.ins().f64const(factor);
                cx.ins().fmul(v, f)
            }
            DType::F32 => {
                let f = cx.ins().f32const(factor as f32);
                cx.ins().fmul(v, f)
            }
            _ => {
                let f = cx.ins().iconst(ty, factor as i64);
                cx.ins().imul(v, f)
            }
        }
    }

    fn add(&self, cx: &mut Lower, x: Value, y: Value) -> Value {
        if self.dtype.is_float() {
            cx.ins().fadd(x, y)
        } else {
            cx.ins().iadd(x, y)
        }
    }

    /// One `m x n` product: register tiles for f32 where they apply, else
    /// each dot product accumulates in a register.
    fn matrix(&self, cx: &mut Lower, [a, b, c, y]: [Value; 4]) -> Result<(), String> {
        let p = &self.p.matrix;
        if self.dtype == DType::F32 && gemm_tiles::applies(cx, p, self.has_c) {
            return gemm_tiles::product(cx, p, self.has_c, [a, b, c, y]);
        }
        let ty = clif_type(self.dtype);
        let flags = MemFlagsData::trusted();
        let li = cx.loop_begin(p.m as usize);
        let a_row = self.step(cx, a, li.index, p.a_row_stride);
        let c_row = self.step(cx, c, li.index, p.c_row_stride);
        let y_row = self.step(cx, y, li.index, p.n);
        let lj = cx.loop_begin(p.n as usize);
        let b_col = self.step(cx, b, lj.index, p.b_col_stride);
        let zero = match self.dtype {
            DType::F64 => cx.ins().f64const(0.0),
            DType::F32 => cx.ins().f32const(0.0),
            _ => cx.ins().iconst(ty, 0),
        };
        let k = Level::new(p.k as usize, vec![p.a_col_stride * self.size, p.b_row_stride * self.size]);
        let sum = cx.fold_nest(&[k], &[a_row, b_col], &[zero], &mut |cx, _, at, acc| {
            let av = cx.ins().load(ty, flags, at[0], 0);
            let bv = cx.ins().load(ty, flags, at[1], 0);
            let prod = if self.dtype.is_float() { cx.ins().fmul(av, bv) } else { cx.ins().imul(av, bv) };
            Ok(vec![self.add(cx, acc[0], prod)])
        })?;
        let mut v = self.mul_const(cx, sum[0], p.alpha);
        if self.has_c {
            let c_at = self.step(cx, c_row, lj.index, p.c_col_stride);
            let cv = cx.ins().load(ty, flags, c_at, 0);
            let cv = self.mul_const(cx, cv, p.beta);
            v = self.add(cx, v, cv);
        }
        let y_at = self.step(cx, y_row, lj.index, 1);
        cx.ins().store(flags, v, y_at, 0);
        cx.loop_end(lj);
        cx.loop_end(li);
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct Det;

pub fn import_det(_cx: &mut NodeImport) -> Result<Op, String> {
    Ok(Op::Det(Det))
}

/// `(batch, n)` of Det's input, which must be `[*, n, n]`.
fn det_dims(shape: &[usize]) -> Result<(usize, usize), String> {
    match shape {
        [batch @ .., m, n] if m == n => Ok((batch.iter().product(), *n)),
        _ => Err(format!("input X must be [*, M, M], got shape {shape:?}")),
    }
}

impl Operator for Det {
    fn name(&self) -> &'static str {
        "Det"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if !x.dtype.is_float() {
            return Err(format!("input X is {}, expected a float type", x.dtype));
        }
        det_dims(x.shape)?;
        Ok(vec![Inferred::new(x.dtype, x.shape[..x.shape.len() - 2].to_vec())])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        cx.input(0).ok().and_then(|x| det_dims(x.shape).ok()).map_or(0, |(_, n)| n * n * 8)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (batch, n) = det_dims(&shape)?;
        let scratch = if n > 0 { cx.scratch_ptr()? } else { cx.iconst(0) };
        if cx.portable() {
            return linalg_loops::det(cx, dtype, batch, n, scratch);
        }
        let params = cx.params(&DetParams { batch: batch as i64, n: n as i64 })?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(
            kernels::by_dtype(kernels::onnxc_det_f32, kernels::onnxc_det_f64, dtype),
            (params, Ptr(x), Ptr(y), Ptr(scratch)),
        )
    }

    fn stages_halves(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Linear over an NHWC map folds its batch into the rows; a batched
    /// B, or an A broadcast over the batch, keeps the batch.
    #[test]
    fn broadcast_b_folds_into_rows() {
        let p = matmul_problem(&[1, 56, 56, 96], &[96, 384]).unwrap();
        assert!(p.batch.is_empty());
        assert_eq!((p.matrix.m, p.matrix.n, p.matrix.k), (3136, 384, 96));

        let p = matmul_problem(&[2, 3, 5, 4], &[3, 4, 7]).unwrap();
        assert_eq!(p.batch, [2, 3]);
        assert_eq!(p.matrix.m, 5);

        let p = matmul_problem(&[5, 4], &[3, 4, 7]).unwrap();
        assert_eq!(p.batch, [3]);
        assert_eq!(p.matrix.m, 5);
    }

    /// Only the inner batch dims over which B stays put fold.
    #[test]
    fn outer_batched_b_keeps_its_dim() {
        let p = matmul_problem(&[2, 3, 5, 4], &[2, 1, 4, 7]).unwrap();
        assert_eq!(p.batch, [2]);
        assert_eq!((p.matrix.m, p.strides[0][0], p.strides[1][0]), (15, 60, 28));
    }
}
