//! Portable GridSample (and AffineGrid, which makes its grids), for
//! portable mode, where `onnxc_grid_sample_*` and `onnxc_affine_grid_*`
//! are not linked. GridSample is the kernel's rules written as one loop
//! nest over the batch and the output positions, the taps of each
//! position computed from its grid coordinates once for every channel.
//!
//! Along each spatial dim a coordinate in `[-1, 1]` maps to an input
//! position (`align_corners` choosing the corner or the half-pixel
//! convention), rounded for `nearest`; a position outside the input is
//! clamped (`border`) or bounced off the borders (`reflection`) first.
//! Each dim then has one (`nearest`), two (`linear`) or four (`cubic`,
//! Keys with `a = -0.75`) taps, whose input index is resolved by the
//! padding mode: `zeros` drops a tap outside the input, the others clamp
//! (reflection reflects it first). The output is the nested weighted sum
//! over the taps, innermost dim first, in the order the kernel adds them;
//! a dropped tap reads index 0 and is not added, so no load leaves the
//! input.

use super::{clif_type, types, FloatCC, InstBuilder, IntCC, Level, Lower, MemFlagsData, Type, Value};
use crate::ir::DType;
use onnxc_runtime::abi::resize::{
    AffineGridParams, GridSampleParams, MODE_LINEAR, MODE_NEAREST, PADDING_BORDER, PADDING_REFLECTION, PADDING_ZEROS,
};
use onnxc_runtime::generic::resize::base_coordinate;

/// The cubic coefficient of GridSample.
const CUBIC_A: f64 = -0.75;

/// One tap along a dim: the input index (in range), whether it counts,
/// and its weight.
#[derive(Clone, Copy)]
struct Tap {
    index: Value,
    counts: Value,
    weight: Value,
}

/// The geometry of one spatial dim.
struct Dim {
    len: i64,
    /// The positions inside the input: `[0, len - 1]` with aligned
    /// corners, else `[-0.5, len - 0.5]`.
    lo: f64,
    hi: f64,
}

/// Lowers GridSample of `dtype` (f32 or f64) data over `p`.
pub fn grid_sample(cx: &mut Lower, dtype: DType, p: &GridSampleParams) -> Result<(), String> {
    let k = p.rank as usize;
    let (ty, size) = (clif_type(dtype), dtype.size() as i64);
    let in_count: i64 = p.in_dims[..k].iter().product();
    let out_count: i64 = p.out_dims[..k].iter().product();
    if p.n * p.c * out_count == 0 {
        return Ok(());
    }
    if in_count == 0 {
        return Err("GridSample of an empty input to a non-empty output".into());
    }
    let align = p.align_corners != 0;
    let dims: Vec<Dim> = p.in_dims[..k]
        .iter()
        .map(|&len| {
            let (lo, hi) = if align { (0.0, len as f64 - 1.0) } else { (-0.5, len as f64 - 0.5) };
            Dim { len, lo, hi }
        })
        .collect();
    let strides: Vec<i64> = (0..k).map(|a| p.in_dims[a + 1..k].iter().product()).collect();
    let ptrs = [cx.input_ptr(0)?, cx.input_ptr(1)?, cx.output_ptr(0)?];
    let (plane, channel_out) = (in_count * size, out_count * size);
    let levels = [
        Level::new(p.n as usize, vec![p.c * plane, out_count * k as i64 * size, p.c * channel_out]),
        Level::new(out_count as usize, vec![0, k as i64 * size, size]),
    ];
    let channels = [Level::new(p.c as usize, vec![plane, 0, channel_out])];
    let flags = MemFlagsData::trusted();
    cx.nest(&levels, &ptrs, &mut |cx, _, at| {
        let mut taps = Vec::with_capacity(k);
        for (i, dim) in dims.iter().enumerate() {
            let coord = cx.ins().load(ty, flags, at[1], ((k - 1 - i) as i64 * size) as i32);
            taps.push(dim_taps(cx, p, ty, dim, coord));
        }
        cx.nest(&channels, at, &mut |cx, _, at| {
            let zero_offset = cx.ins().iconst(types::I64, 0);
            let y = weighted_sum(cx, ty, at[0], &taps, &strides, zero_offset);
            cx.ins().store(flags, y, at[2], 0);
            Ok(())
        })
    })
}

/// `v` as a constant of the float type `ty`.
fn constant(cx: &mut Lower, ty: Type, v: f64) -> Value {
    if ty == types::F64 {
        cx.ins().f64const(v)
    } else {
        cx.ins().f32const(v as f32)
    }
}

fn to_f64(cx: &mut Lower, v: Value) -> Value {
    if cx.b.func.dfg.value_type(v) == types::F64 {
        v
    } else {
        cx.ins().fpromote(types::F64, v)
    }
}

fn from_f64(cx: &mut Lower, ty: Type, v: Value) -> Value {
    if ty == types::F64 {
        v
    } else {
        cx.ins().fdemote(ty, v)
    }
}

/// The taps along `dim` of the grid coordinate `coord`.
fn dim_taps(cx: &mut Lower, p: &GridSampleParams, ty: Type, dim: &Dim, coord: Value) -> Vec<Tap> {
    let (one, two) = (constant(cx, ty, 1.0), constant(cx, ty, 2.0));
    let (len, last) = (constant(cx, ty, dim.len as f64), constant(cx, ty, dim.len as f64 - 1.0));
    let shifted = cx.ins().fadd(coord, one);
    let mut v = if p.align_corners != 0 {
        let half = cx.ins().fdiv(shifted, two);
        cx.ins().fmul(half, last)
    } else {
        let scaled = cx.ins().fmul(shifted, len);
        let scaled = cx.ins().fsub(scaled, one);
        cx.ins().fdiv(scaled, two)
    };
    if p.mode == MODE_NEAREST {
        v = cx.ins().nearest(v);
    }
    if p.padding != PADDING_ZEROS {
        let wide = to_f64(cx, v);
        let (lo, hi) = (cx.ins().f64const(dim.lo), cx.ins().f64const(dim.hi));
        let below = cx.ins().fcmp(FloatCC::LessThan, wide, lo);
        let above = cx.ins().fcmp(FloatCC::GreaterThan, wide, hi);
        let outside = cx.ins().bor(below, above);
        let moved = if p.padding == PADDING_BORDER {
            let (first, last) = (cx.ins().f64const(0.0), cx.ins().f64const(dim.len as f64 - 1.0));
            let clamped = cx.ins().fmax(wide, first);
            cx.ins().fmin(clamped, last)
        } else {
            reflect(cx, wide, dim)
        };
        let moved = from_f64(cx, ty, moved);
        v = cx.ins().select(outside, moved, v);
    }
    let start = if p.mode == MODE_NEAREST { v } else { cx.ins().floor(v) };
    let first = cx.ins().fcvt_to_sint_sat(types::I64, start);
    let at = |cx: &mut Lower, j: i64| {
        let index = cx.ins().iadd_imm_s(first, j);
        resolve(cx, p, dim, index)
    };
    match p.mode {
        MODE_NEAREST => {
            let (index, counts) = at(cx, 0);
            vec![Tap { index, counts, weight: one }]
        }
        MODE_LINEAR => {
            let t = cx.ins().fsub(v, start);
            let rest = cx.ins().fsub(one, t);
            let ((i0, c0), (i1, c1)) = (at(cx, 0), at(cx, 1));
            vec![Tap { index: i0, counts: c0, weight: rest }, Tap { index: i1, counts: c1, weight: t }]
        }
        _ => {
            let t = cx.ins().fsub(v, start);
            let t = to_f64(cx, t);
            (0..4)
                .map(|j| {
                    let distance = cx.ins().f64const(1.0 - j as f64);
                    let x = cx.ins().fadd(t, distance);
                    let weight = cubic_weight(cx, x, CUBIC_A);
                    let weight = from_f64(cx, ty, weight);
                    let (index, counts) = at(cx, j - 1);
                    Tap { index, counts, weight }
                })
                .collect()
        }
    }
}

/// The input index of tap position `index` (i64) by the padding mode, in
/// range, and whether the tap counts (only `zeros` drops any).
fn resolve(cx: &mut Lower, p: &GridSampleParams, dim: &Dim, index: Value) -> (Value, Value) {
    if p.padding == PADDING_ZEROS {
        let inside = cx.ins().icmp_imm_u(IntCC::UnsignedLessThan, index, dim.len);
        let zero = cx.ins().iconst(types::I64, 0);
        return (cx.ins().select(inside, index, zero), inside);
    }
    let index = if p.padding == PADDING_REFLECTION {
        let position = cx.ins().fcvt_from_sint(types::F64, index);
        let reflected = reflect(cx, position, dim);
        cx.ins().fcvt_to_sint_sat(types::I64, reflected)
    } else {
        index
    };
    let (zero, last) = (cx.ins().iconst(types::I64, 0), cx.ins().iconst(types::I64, dim.len - 1));
    let index = cx.ins().smax(index, zero);
    let index = cx.ins().smin(index, last);
    (index, cx.ins().iconst(types::I8, 1))
}

/// The f64 `x` reflected into `[dim.lo, dim.hi]` by bouncing off the
/// borders: `n` whole widths and the remainder `r` past the border it
/// crossed, counted from that border for even `n`, from the other one
/// for odd `n`.
fn reflect(cx: &mut Lower, x: Value, dim: &Dim) -> Value {
    let width = dim.hi - dim.lo;
    if width <= 0.0 {
        return cx.ins().f64const(dim.lo);
    }
    let (lo, hi, range) = (cx.ins().f64const(dim.lo), cx.ins().f64const(dim.hi), cx.ins().f64const(width));
    let below = cx.ins().fcmp(FloatCC::LessThan, x, lo);
    let above = cx.ins().fcmp(FloatCC::GreaterThan, x, hi);
    let past_lo = cx.ins().fsub(lo, x);
    let past_hi = cx.ins().fsub(x, hi);
    let past = cx.ins().select(below, past_lo, past_hi);
    let widths = cx.ins().fdiv(past, range);
    let n = cx.ins().trunc(widths);
    let whole = cx.ins().fmul(n, range);
    let r = cx.ins().fsub(past, whole);
    let half = cx.ins().f64const(0.5);
    let half_n = cx.ins().fmul(n, half);
    let half_floor = cx.ins().trunc(half_n);
    let even = cx.ins().fcmp(FloatCC::Equal, half_n, half_floor);
    let (lo_plus, hi_minus) = (cx.ins().fadd(lo, r), cx.ins().fsub(hi, r));
    // Below: even counts up from lo, odd down from hi; above the reverse.
    let from_below = cx.ins().select(even, lo_plus, hi_minus);
    let from_above = cx.ins().select(even, hi_minus, lo_plus);
    let bounced = cx.ins().select(below, from_below, from_above);
    let outside = cx.ins().bor(below, above);
    cx.ins().select(outside, bounced, x)
}

/// Keys' cubic convolution weight of coefficient `a` at the f64 distance
/// `x` (the kernels' `cubic_weight`, also Resize's portable one).
pub(super) fn cubic_weight(cx: &mut Lower, x: Value, a: f64) -> Value {
    let x = cx.ins().fabs(x);
    let c = |cx: &mut Lower, v: f64| cx.ins().f64const(v);
    // ((a + 2) x - (a + 3)) x x + 1
    let (c1, c2, one) = (c(cx, a + 2.0), c(cx, a + 3.0), c(cx, 1.0));
    let near = cx.ins().fmul(c1, x);
    let near = cx.ins().fsub(near, c2);
    let near = cx.ins().fmul(near, x);
    let near = cx.ins().fmul(near, x);
    let near = cx.ins().fadd(near, one);
    // ((a x - 5 a) x + 8 a) x - 4 a
    let (ca, c5, c8, c4) = (c(cx, a), c(cx, 5.0 * a), c(cx, 8.0 * a), c(cx, 4.0 * a));
    let far = cx.ins().fmul(ca, x);
    let far = cx.ins().fsub(far, c5);
    let far = cx.ins().fmul(far, x);
    let far = cx.ins().fadd(far, c8);
    let far = cx.ins().fmul(far, x);
    let far = cx.ins().fsub(far, c4);
    let (zero, two) = (c(cx, 0.0), c(cx, 2.0));
    let is_near = cx.ins().fcmp(FloatCC::LessThanOrEqual, x, one);
    let is_far = cx.ins().fcmp(FloatCC::LessThan, x, two);
    let outer = cx.ins().select(is_far, far, zero);
    cx.ins().select(is_near, near, outer)
}

/// The sum over the tap combinations of `taps` (one list per dim, the
/// first dim outermost) at element `offset` of the plane at `plane`.
fn weighted_sum(cx: &mut Lower, ty: Type, plane: Value, taps: &[Vec<Tap>], strides: &[i64], offset: Value) -> Value {
    let Some((row, rest)) = taps.split_first() else {
        let bytes = cx.ins().imul_imm_s(offset, ty.bytes() as i64);
        let at = cx.ins().iadd(plane, bytes);
        return cx.ins().load(ty, MemFlagsData::trusted(), at, 0);
    };
    let mut acc = constant(cx, ty, 0.0);
    for tap in row {
        let step = cx.ins().imul_imm_s(tap.index, strides[0]);
        let inner_offset = cx.ins().iadd(offset, step);
        let inner = weighted_sum(cx, ty, plane, rest, &strides[1..], inner_offset);
        let term = cx.ins().fmul(tap.weight, inner);
        let added = cx.ins().fadd(acc, term);
        acc = cx.ins().select(tap.counts, added, acc);
    }
    acc
}

/// AffineGrid of `dtype` (f32 or f64): every output point's homogeneous
/// base coordinates (innermost dim first, then 1) are compile-time
/// constants, placed in read-only data; each grid value is the f64 sum of
/// one row of `theta` times them, in the kernel's order.
pub fn affine_grid(
    cx: &mut Lower,
    dtype: DType,
    p: &AffineGridParams,
    theta: Value,
    grid: Value,
) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("AffineGrid of {dtype} has no portable lowering (f32 and f64 do)"));
    }
    let k = p.rank as usize;
    let dims: Vec<usize> = p.dims[..k].iter().map(|&d| d as usize).collect();
    let count: usize = dims.iter().product();
    if p.n == 0 || count == 0 {
        return Ok(());
    }
    let mut table = Vec::with_capacity(count * (k + 1));
    let mut idx = vec![0usize; k];
    for _ in 0..count {
        table.extend((0..k).map(|i| base_coordinate(idx[k - 1 - i], dims[k - 1 - i], p.align_corners != 0).to_bits()));
        table.push(1f64.to_bits());
        for a in (0..k).rev() {
            idx[a] += 1;
            if idx[a] < dims[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    let bases = cx.table(&table)?;
    let (eb, row) = (dtype.size() as i64, (k + 1) as i64);
    let levels = [
        Level::new(p.n as usize, vec![k as i64 * row * eb, 0, (count * k) as i64 * eb]),
        Level::new(count, vec![0, row * 8, k as i64 * eb]),
        Level::new(k, vec![row * eb, 0, eb]),
    ];
    let ty = clif_type(dtype);
    let flags = MemFlagsData::trusted();
    cx.nest(&levels, &[theta, bases, grid], &mut |cx, _, at| {
        let start = cx.ins().f64const(-0.0);
        let terms = [Level::new(k + 1, vec![eb, 8])];
        let sum = cx.fold_nest(&terms, &[at[0], at[1]], &[start], &mut |cx, _, t, acc| {
            let coefficient = cx.ins().load(ty, flags, t[0], 0);
            let coefficient =
                if dtype == DType::F64 { coefficient } else { cx.ins().fpromote(types::F64, coefficient) };
            let base = cx.ins().load(types::F64, flags, t[1], 0);
            let term = cx.ins().fmul(coefficient, base);
            Ok(vec![cx.ins().fadd(acc[0], term)])
        })?[0];
        let v = if dtype == DType::F64 { sum } else { cx.ins().fdemote(types::F32, sum) };
        cx.ins().store(flags, v, at[2], 0);
        Ok(())
    })
}
