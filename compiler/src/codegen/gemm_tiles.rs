//! The register-tiled f32 matrix product of portable mode, where the gemm
//! kernels are not linked: one dot product per output element in one
//! register loads two operands per multiply-add, so a portable model ran
//! a hundred times slower than the kernel path. Here a tile of up to 4
//! rows by 8 columns of Y lives in eight f32x4 accumulators; per depth
//! step each row's A element is loaded once and splatted, B's row segment
//! is loaded as two vectors, and every load feeds four multiply-adds.
//!
//! The columns run in panels of 8 (then one of 4, then the last 1-3 as
//! scalars), and each panel walks all the rows, 4 at a time and then the
//! 1-3 left: the panel's strip of B stays in cache across the rows. Every
//! tile's shape is known at compile time, so no load or store reaches past
//! a row or a column of A, B, C or Y.
//!
//! Each element sums its depth in order, then `alpha * sum + beta * C`
//! like the scalar nest (the bias after the whole sum); the product and
//! sum fuse into `fma` only when the target has the instruction (aarch64;
//! x86-64 when its flags say FMA), so the bits are the scalar nest's
//! elsewhere. B must run contiguously along its rows (`b_col_stride` 1,
//! not packed in strips) and C's columns contiguously or broadcast: a
//! transposed B keeps the scalar nest.

use super::{types, InstBuilder, Lower, MemFlagsData, Type, Value};
use onnxc_runtime::GemmParams;

/// Rows of the full tile.
const TILE_ROWS: usize = 4;
/// f32x4 vectors across the full tile (8 columns).
const TILE_VECTORS: usize = 2;
/// f32 lanes of one vector.
const LANES: usize = 4;
const F32_BYTES: i64 = 4;

/// Whether [`product`] can run `p`: a target with f32x4 vectors, B's rows
/// contiguous and unpacked, C's columns contiguous or broadcast.
pub fn applies(cx: &Lower, p: &GemmParams, has_c: bool) -> bool {
    cx.has_f32x4() && p.b_strips == 0 && p.b_col_stride == 1 && (!has_c || matches!(p.c_col_stride, 0 | 1))
}

/// `Y = alpha * A @ B (+ beta * C)` for one `m x n` matrix of `p` (its
/// batch fields unused), Y contiguous; `ptrs` = [A, B, C, Y].
pub fn product(cx: &mut Lower, p: &GemmParams, has_c: bool, ptrs: [Value; 4]) -> Result<(), String> {
    let tiles = Tiles { p, has_c, fused: cx.has_fma(), ptrs };
    tiles.emit(cx)
}

/// A tile's width: `count` values of type `ty` (f32x4 or f32) side by side.
#[derive(Clone, Copy)]
struct Width {
    count: usize,
    ty: Type,
}

impl Width {
    fn lanes(self) -> usize {
        self.ty.lane_count() as usize
    }

    fn columns(self) -> usize {
        self.count * self.lanes()
    }
}

struct Tiles<'p> {
    p: &'p GemmParams,
    has_c: bool,
    /// Multiply-adds fuse (the target has the instruction).
    fused: bool,
    /// A, B, C, Y.
    ptrs: [Value; 4],
}

impl Tiles<'_> {
    /// The column panels: 8 wide in a loop, then one 4 wide, then scalars.
    fn emit(&self, cx: &mut Lower) -> Result<(), String> {
        let n = self.p.n as usize;
        let full = Width { count: TILE_VECTORS, ty: types::F32X4 };
        let panels = n / full.columns();
        if panels > 0 {
            let l = cx.loop_begin(panels);
            let col = cx.ins().imul_imm_s(l.index, full.columns() as i64);
            self.rows(cx, col, full)?;
            cx.loop_end(l);
        }
        let mut done = panels * full.columns();
        if n - done >= LANES {
            let col = cx.iconst(done as i64);
            self.rows(cx, col, Width { count: 1, ty: types::F32X4 })?;
            done += LANES;
        }
        if n > done {
            let col = cx.iconst(done as i64);
            self.rows(cx, col, Width { count: n - done, ty: types::F32 })?;
        }
        Ok(())
    }

    /// One column panel from column `col` over all the rows: 4 at a time
    /// in a loop, then the rest as one tile.
    fn rows(&self, cx: &mut Lower, col: Value, width: Width) -> Result<(), String> {
        let m = self.p.m as usize;
        let blocks = m / TILE_ROWS;
        if blocks > 0 {
            let l = cx.loop_begin(blocks);
            let row = cx.ins().imul_imm_s(l.index, TILE_ROWS as i64);
            self.tile(cx, row, TILE_ROWS, col, width)?;
            cx.loop_end(l);
        }
        let rest = m - blocks * TILE_ROWS;
        if rest > 0 {
            let row = cx.iconst((blocks * TILE_ROWS) as i64);
            self.tile(cx, row, rest, col, width)?;
        }
        Ok(())
    }

    /// The tile of `rows` rows from `row` and `width` from column `col`.
    fn tile(&self, cx: &mut Lower, row: Value, rows: usize, col: Value, width: Width) -> Result<(), String> {
        let p = self.p;
        let [a, b, c, y] = self.ptrs;
        let a = cx.advance(a, row, p.a_row_stride * F32_BYTES);
        let b = cx.advance(b, col, F32_BYTES);
        let c = cx.advance(c, row, p.c_row_stride * F32_BYTES);
        let c = cx.advance(c, col, p.c_col_stride * F32_BYTES);
        let y = cx.advance(y, row, p.n * F32_BYTES);
        let y = cx.advance(y, col, F32_BYTES);
        let sums = self.sums(cx, a, b, rows, width)?;
        for r in 0..rows {
            for u in 0..width.count {
                let sum = sums[r * width.count + u];
                let (c_at, y_at) = (r as i64 * p.c_row_stride, r as i64 * p.n);
                let column = (u * width.lanes()) as i64;
                let v = self.epilogue(cx, sum, width.ty, c, c_at + column * p.c_col_stride);
                store(cx, v, y, y_at + column);
            }
        }
        Ok(())
    }

    /// The tile's depth loop: the accumulators (row-major, `width.count`
    /// per row) after all `k` steps, the A and B pointers carried along.
    fn sums(&self, cx: &mut Lower, a: Value, b: Value, rows: usize, width: Width) -> Result<Vec<Value>, String> {
        let p = self.p;
        let zero = cx.ins().f32const(0.0);
        let zero = splat(cx, width.ty, zero);
        let mut init = vec![a, b];
        init.resize(2 + rows * width.count, zero);
        let k = cx.iconst(p.k);
        let mut sums = cx.fold_dynamic(k, &init, &mut |cx, _, carried| {
            let (a, b) = (carried[0], carried[1]);
            let b_row: Vec<Value> =
                (0..width.count).map(|u| load(cx, width.ty, b, (u * width.lanes()) as i64)).collect();
            let mut next = vec![cx.ins().iadd_imm_s(a, p.a_col_stride * F32_BYTES)];
            next.push(cx.ins().iadd_imm_s(b, p.b_row_stride * F32_BYTES));
            for r in 0..rows {
                let a_elem = load(cx, types::F32, a, r as i64 * p.a_row_stride);
                let a_elem = splat(cx, width.ty, a_elem);
                for (u, &b_vec) in b_row.iter().enumerate() {
                    let acc = carried[2 + r * width.count + u];
                    next.push(self.multiply_add(cx, a_elem, b_vec, acc));
                }
            }
            Ok(next)
        })?;
        sums.drain(..2);
        Ok(sums)
    }

    fn multiply_add(&self, cx: &mut Lower, x: Value, y: Value, acc: Value) -> Value {
        if self.fused {
            return cx.ins().fma(x, y, acc);
        }
        let prod = cx.ins().fmul(x, y);
        cx.ins().fadd(acc, prod)
    }

    /// `alpha * sum (+ beta * C)`, C read `at` elements from `c`.
    fn epilogue(&self, cx: &mut Lower, sum: Value, ty: Type, c: Value, at: i64) -> Value {
        let p = self.p;
        let v = scale(cx, sum, ty, p.alpha);
        if !self.has_c {
            return v;
        }
        let cv = if p.c_col_stride == 0 && ty.is_vector() {
            let one = load(cx, types::F32, c, at);
            splat(cx, ty, one)
        } else {
            load(cx, ty, c, at)
        };
        let cv = scale(cx, cv, ty, p.beta);
        cx.ins().fadd(v, cv)
    }
}

/// `v * factor` (no code for 1).
fn scale(cx: &mut Lower, v: Value, ty: Type, factor: f64) -> Value {
    if factor == 1.0 {
        return v;
    }
    let f = cx.ins().f32const(factor as f32);
    let f = splat(cx, ty, f);
    cx.ins().fmul(v, f)
}

/// `v` in every lane of `ty` (itself for a scalar).
fn splat(cx: &mut Lower, ty: Type, v: Value) -> Value {
    if ty.is_vector() {
        cx.ins().splat(ty, v)
    } else {
        v
    }
}

/// The address `elements` f32 past `base` as a base and a load or store
/// offset (which must fit an i32).
fn address(cx: &mut Lower, base: Value, elements: i64) -> (Value, i32) {
    match i32::try_from(elements * F32_BYTES) {
        Ok(offset) => (base, offset),
        Err(_) => (cx.ins().iadd_imm_s(base, elements * F32_BYTES), 0),
    }
}

/// Vectors need not be aligned; every address is inside its tensor.
fn flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

fn load(cx: &mut Lower, ty: Type, base: Value, elements: i64) -> Value {
    let (at, offset) = address(cx, base, elements);
    cx.ins().load(ty, flags(), at, offset)
}

fn store(cx: &mut Lower, v: Value, base: Value, elements: i64) {
    let (at, offset) = address(cx, base, elements);
    cx.ins().store(flags(), v, at, offset);
}
