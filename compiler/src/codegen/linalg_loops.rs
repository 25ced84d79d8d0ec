//! Portable Einsum and Det, for portable mode, where `onnxc_einsum_*` and
//! `onnxc_det_*` are not linked; both follow their kernels
//! (`runtime-support/src/generic/linalg.rs`) operation for operation.
//!
//! Einsum walks the kernel's own description, [`EinsumParams`]: a nest
//! over the output letters (the output contiguous, each operand stepping
//! by its element stride along the letter), and per output element a fold
//! over the summed letters. As in the kernel, each term is the product of
//! the operands in f64 and the sum is f64, rounded once to the output's
//! type (f32 or f64; f16 and bf16 arrive as staged f32 copies).
//!
//! Det is the kernel's LU elimination with partial pivoting, per matrix in
//! the f64 scratch: per column, the first row of the largest magnitude at
//! or below the diagonal is the pivot (a NaN never wins), its row swapped
//! up (negating the determinant), the determinant multiplied by it, and
//! the rows below reduced by it (a row whose factor is 0 left alone). A
//! zero pivot makes the determinant 0 and skips the remaining columns.
//! Every address is a row and column below `n`, so none leaves the matrix.

use super::nest::Level;
use super::{clif_type, types, FloatCC, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::abi::linalg::EinsumParams;

/// The loads and stores of an f32 or f64 tensor, widened to f64.
#[derive(Clone, Copy)]
struct Real {
    dtype: DType,
}

impl Real {
    fn new(dtype: DType, what: &str) -> Result<Real, String> {
        match dtype {
            DType::F32 | DType::F64 => Ok(Real { dtype }),
            other => Err(format!("{what} of {other} has no portable lowering (f32 and f64 do)")),
        }
    }

    fn bytes(self) -> i64 {
        self.dtype.size() as i64
    }

    fn load(self, cx: &mut Lower, at: Value) -> Value {
        let v = cx.ins().load(clif_type(self.dtype), MemFlagsData::trusted(), at, 0);
        if self.dtype == DType::F32 {
            cx.ins().fpromote(types::F64, v)
        } else {
            v
        }
    }

    fn store(self, cx: &mut Lower, v: Value, at: Value) {
        let v = if self.dtype == DType::F32 { cx.ins().fdemote(types::F32, v) } else { v };
        cx.ins().store(MemFlagsData::trusted(), v, at, 0);
    }
}

/// Einsum of the `p.inputs` operands (inputs 0..) into output 0.
pub fn einsum(cx: &mut Lower, dtype: DType, p: &EinsumParams) -> Result<(), String> {
    let real = Real::new(dtype, "Einsum")?;
    let (inputs, rank, out_rank) = (p.inputs as usize, p.rank as usize, p.out_rank as usize);
    let out_count: i64 = p.dims[..out_rank].iter().product();
    if out_count == 0 {
        return Ok(());
    }
    let mut ptrs = (0..inputs).map(|i| cx.input_ptr(i)).collect::<Result<Vec<_>, _>>()?;
    ptrs.push(cx.output_ptr(0)?);
    let operand_steps = |d: usize| -> Vec<i64> { (0..inputs).map(|k| p.strides[k][d] * real.bytes()).collect() };
    let mut y_stride = out_count;
    let outputs: Vec<Level> = (0..out_rank)
        .map(|d| {
            y_stride /= p.dims[d];
            let mut steps = operand_steps(d);
            steps.push(y_stride * real.bytes());
            Level::new(p.dims[d] as usize, steps)
        })
        .collect();
    let summed: Vec<Level> = (out_rank..rank).map(|d| Level::new(p.dims[d] as usize, operand_steps(d))).collect();
    cx.nest(&outputs, &ptrs, &mut |cx, _, at| {
        let zero = cx.ins().f64const(0.0);
        let sum = cx.fold_nest(&summed, &at[..inputs], &[zero], &mut |cx, _, operands, acc| {
            let mut product = cx.ins().f64const(1.0);
            for &x in operands {
                let v = real.load(cx, x);
                product = cx.ins().fmul(product, v);
            }
            Ok(vec![cx.ins().fadd(acc[0], product)])
        })?[0];
        real.store(cx, sum, at[inputs]);
        Ok(())
    })
}

/// Det of the `batch` contiguous `n x n` matrices of input 0 into output 0,
/// each eliminated in `scratch` (`n * n` f64).
pub fn det(cx: &mut Lower, dtype: DType, batch: usize, n: usize, scratch: Value) -> Result<(), String> {
    let real = Real::new(dtype, "Det")?;
    let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
    let matrix = Level::new(batch, vec![(n * n) as i64 * real.bytes(), real.bytes()]);
    cx.nest(&[matrix], &[x, y], &mut |cx, _, at| {
        let widen = Level::new(n * n, vec![real.bytes(), 8]);
        cx.nest(&[widen], &[at[0], scratch], &mut |cx, _, e| {
            let v = real.load(cx, e[0]);
            cx.ins().store(MemFlagsData::trusted(), v, e[1], 0);
            Ok(())
        })?;
        let one = cx.ins().f64const(1.0);
        let running = cx.ins().iconst(types::I8, 0);
        let lu = Lu { n, a: scratch };
        let columns = Level::new(n, vec![]);
        let d = cx.fold_nest(&[columns], &[], &[one, running], &mut |cx, col, _, acc| {
            lu.eliminate_column(cx, col[0], acc[0], acc[1])
        })?[0];
        real.store(cx, d, at[1]);
        Ok(())
    })
}

/// One matrix under elimination: `n x n` f64 at `a`.
struct Lu {
    n: usize,
    a: Value,
}

impl Lu {
    /// The address of element `(r, c)`.
    fn at(&self, cx: &mut Lower, r: Value, c: Value) -> Value {
        let row = cx.ins().imul_imm_s(r, self.n as i64);
        let element = cx.ins().iadd(row, c);
        cx.advance(self.a, element, 8)
    }

    fn load(&self, cx: &mut Lower, r: Value, c: Value) -> Value {
        let at = self.at(cx, r, c);
        cx.ins().load(types::F64, MemFlagsData::trusted(), at, 0)
    }

    /// Opens `for i in from + 1..n` (a pointer-sized `from < n`: rows or
    /// columns after it); returns the loop and `i`.
    fn after(&self, cx: &mut Lower, from: Value) -> (super::Loop, Value) {
        let n = cx.iconst(self.n as i64);
        let left = cx.ins().isub(n, from);
        let count = cx.ins().iadd_imm_s(left, -1);
        let l = cx.loop_begin_dynamic(count);
        let first = cx.ins().iadd_imm_s(from, 1);
        let i = cx.ins().iadd(first, l.index);
        (l, i)
    }

    /// Column `col` of the elimination from the determinant `d` so far
    /// (`stopped` nonzero once a zero pivot ended it); returns both after it.
    fn eliminate_column(&self, cx: &mut Lower, col: Value, d: Value, stopped: Value) -> Result<Vec<Value>, String> {
        let (work, pivoted, join) = (cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
        let d_out = cx.b.append_block_param(join, types::F64);
        let stopped_out = cx.b.append_block_param(join, types::I8);
        cx.ins().brif(stopped, join, &[d.into(), stopped.into()], work, &[]);
        cx.b.switch_to_block(work);
        let piv = self.pivot_row(cx, col);
        let pv = self.load(cx, piv, col);
        let zero = cx.ins().f64const(0.0);
        let singular = cx.ins().fcmp(FloatCC::Equal, pv, zero);
        let stop = cx.ins().iconst(types::I8, 1);
        cx.ins().brif(singular, join, &[zero.into(), stop.into()], pivoted, &[]);
        cx.b.switch_to_block(pivoted);
        let swapped = cx.ins().icmp(IntCC::NotEqual, piv, col);
        let columns = Level::new(self.n, vec![]);
        cx.nest(&[columns], &[], &mut |cx, c, _| {
            let (upper, lower) = (self.at(cx, col, c[0]), self.at(cx, piv, c[0]));
            let flags = MemFlagsData::trusted();
            let (u, l) = (cx.ins().load(types::F64, flags, upper, 0), cx.ins().load(types::F64, flags, lower, 0));
            cx.ins().store(flags, l, upper, 0);
            cx.ins().store(flags, u, lower, 0);
            Ok(())
        })?;
        let negated = cx.ins().fneg(d);
        let signed = cx.ins().select(swapped, negated, d);
        let d_next = cx.ins().fmul(signed, pv);
        self.reduce_rows_below(cx, col, pv);
        let running = cx.ins().iconst(types::I8, 0);
        cx.ins().jump(join, &[d_next.into(), running.into()]);
        cx.b.switch_to_block(join);
        Ok(vec![d_out, stopped_out])
    }

    /// The first row at or below `col` whose entry in column `col` has the
    /// largest magnitude.
    fn pivot_row(&self, cx: &mut Lower, col: Value) -> Value {
        let first = self.load(cx, col, col);
        let best = cx.ins().fabs(first);
        let ptr = cx.ptr_type();
        let (header, body, done) = (cx.b.create_block(), cx.b.create_block(), cx.b.create_block());
        let (r, piv, magnitude) = (
            cx.b.append_block_param(header, ptr),
            cx.b.append_block_param(header, ptr),
            cx.b.append_block_param(header, types::F64),
        );
        let start = cx.ins().iadd_imm_s(col, 1);
        cx.ins().jump(header, &[start.into(), col.into(), best.into()]);
        cx.b.switch_to_block(header);
        let end = cx.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, r, self.n as i64);
        cx.ins().brif(end, done, &[], body, &[]);
        cx.b.switch_to_block(body);
        let v = self.load(cx, r, col);
        let v = cx.ins().fabs(v);
        let larger = cx.ins().fcmp(FloatCC::GreaterThan, v, magnitude);
        let (piv_next, magnitude_next) = (cx.ins().select(larger, r, piv), cx.ins().select(larger, v, magnitude));
        let r_next = cx.ins().iadd_imm_s(r, 1);
        cx.ins().jump(header, &[r_next.into(), piv_next.into(), magnitude_next.into()]);
        cx.b.switch_to_block(done);
        piv
    }

    /// `row r -= (a[r][col] / pv) row col` over the columns after `col`,
    /// for each row below `col` whose factor is not 0.
    fn reduce_rows_below(&self, cx: &mut Lower, col: Value, pv: Value) {
        let (rows, r) = self.after(cx, col);
        let below = self.load(cx, r, col);
        let f = cx.ins().fdiv(below, pv);
        let zero = cx.ins().f64const(0.0);
        let nonzero = cx.ins().fcmp(FloatCC::NotEqual, f, zero);
        let (reduce, next) = (cx.b.create_block(), cx.b.create_block());
        cx.ins().brif(nonzero, reduce, &[], next, &[]);
        cx.b.switch_to_block(reduce);
        let (columns, c) = self.after(cx, col);
        let target = self.at(cx, r, c);
        let flags = MemFlagsData::trusted();
        let v = cx.ins().load(types::F64, flags, target, 0);
        let pivot_v = self.load(cx, col, c);
        let scaled = cx.ins().fmul(f, pivot_v);
        let reduced = cx.ins().fsub(v, scaled);
        cx.ins().store(flags, reduced, target, 0);
        cx.loop_end(columns);
        cx.ins().jump(next, &[]);
        cx.b.switch_to_block(next);
        cx.loop_end(rows);
    }
}
