//! Portable ConvTranspose (every pads, output_padding, output_shape,
//! auto_pad, strides, dilations and group): direct loop nests for portable
//! mode, where `onnxc_conv_transpose_*` is not linked.
//!
//! The kernel scatters `W^T X` into the output (col2im); a loop nest
//! gathers instead, so that each output element is one fold in registers
//! and nothing is zeroed first: output position `o` along a dim takes tap
//! `k` from input position `i = (o + pad_begin - k dilation) / stride` when
//! that division is exact and `i` lies in the input. The geometry is known
//! at compile time, so, as Pad's tables do (`pad_loops`), the compiler
//! tabulates per dim and per `(o, k)` the source's element offset in the
//! input plane, or [`MISSING`]; a tap's offset is the sum of its dims'
//! entries, and it is inside when none is [`MISSING`] (their bitwise or is
//! not negative). A missing tap reads the plane's first element and is
//! not added, so no address leaves the input. The tables cost 8 bytes per
//! `(o, k)` of each dim, in read-only data.
//!
//! Per output element the fold runs the taps outside and the group's
//! input channels inside, from the bias (or zero), in the tensors' type
//! (f32 or f64; f16 and bf16 arrive as staged f32 copies).
//!
//! Col2Im, the kernel's second half alone, gathers by the same tables:
//! the block grid is the input, a block tap a kernel tap, one channel
//! per group and no weights.

use super::nest::Level;
use super::{clif_type, types, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::DType;
use onnxc_runtime::abi::conv::ConvParams;

/// A table entry for a tap that lands outside the input.
const MISSING: i64 = -1;

/// Per spatial dim, the entries `[o * kernel + k]` (see the module doc).
fn source_tables(p: &ConvParams, rank: usize) -> Vec<Vec<i64>> {
    let mut plane_stride = 1;
    let mut strides = vec![0; rank];
    for d in (0..rank).rev() {
        strides[d] = plane_stride;
        plane_stride *= p.in_spatial[d];
    }
    (0..rank)
        .map(|d| {
            let (input, stride, dilation) = (p.in_spatial[d], p.strides[d], p.dilations[d]);
            let source = |o: i64, k: i64| {
                let reach = o + p.pads_begin[d] - k * dilation;
                let exact = reach >= 0 && reach % stride == 0 && reach / stride < input;
                if exact {
                    reach / stride * strides[d]
                } else {
                    MISSING
                }
            };
            (0..p.out_spatial[d]).flat_map(|o| (0..p.kernel[d]).map(move |k| source(o, k))).collect()
        })
        .collect()
}

/// The pointers the nests walk: X, W, B, Y, then one table per dim.
const X: usize = 0;
const W: usize = 1;
const B: usize = 2;
const Y: usize = 3;
const TABLES: usize = 4;

/// ConvTranspose `Y = X *ᵀ W (+ B)` from inputs 0, 1 and optional 2 into
/// output 0, as `p` (the kernel's params) says.
pub fn conv_transpose(cx: &mut Lower, dtype: DType, p: &ConvParams) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("ConvTranspose of {dtype} has no portable lowering (f32 and f64 do)"));
    }
    let rank = p.spatial_rank.max(0) as usize;
    let (size, ty) = (dtype.size() as i64, clif_type(dtype));
    let flags = MemFlagsData::trusted();
    let groups = p.group.max(1);
    let (cg, mg) = (p.in_channels / groups, p.out_channels / groups);
    let in_size: i64 = p.in_spatial[..rank].iter().product();
    let out_size: i64 = p.out_spatial[..rank].iter().product();
    let taps: i64 = p.kernel[..rank].iter().product();
    let has_bias = cx.has_input(2);
    let mut ptrs = vec![cx.input_ptr(0)?, cx.input_ptr(1)?, cx.opt_input_ptr(2), cx.output_ptr(0)?];
    for table in source_tables(p, rank) {
        ptrs.push(cx.table(&table)?);
    }
    let bias_step = if has_bias { size } else { 0 };
    let level = |count: i64, steps: [i64; 4]| {
        let mut steps = steps.to_vec();
        steps.resize(TABLES + rank, 0);
        Level::new(count as usize, steps)
    };
    let mut levels = vec![
        level(p.batch, [p.in_channels * in_size * size, 0, 0, p.out_channels * out_size * size]),
        level(groups, [cg * in_size * size, cg * mg * taps * size, mg * bias_step, mg * out_size * size]),
        level(mg, [0, taps * size, bias_step, out_size * size]),
    ];
    let (outputs, mut window) = spatial_levels(p, rank, [Y, W, TABLES], size, size);
    levels.extend(outputs);
    window.push(level(cg, [in_size * size, mg * taps * size, 0, 0]));
    cx.nest(&levels, &ptrs, &mut |cx, _, at| {
        let init = if has_bias { cx.ins().load(ty, flags, at[B], 0) } else { zero(cx, dtype) };
        let sum = cx.fold_nest(&window, at, &[init], &mut |cx, _, tp, acc| {
            let (inside, offset) = tap(cx, &tp[TABLES..]);
            let addr = cx.advance(tp[X], offset, size);
            let xv = cx.ins().load(ty, flags, addr, 0);
            let wv = cx.ins().load(ty, flags, tp[W], 0);
            let product = cx.ins().fmul(xv, wv);
            let next = cx.ins().fadd(acc[0], product);
            Ok(vec![cx.ins().select(inside, next, acc[0])])
        })?[0];
        cx.ins().store(flags, sum, at[Y], 0);
        Ok(())
    })
}

/// The output positions' levels (row-major, pointer `y` stepping `size`
/// bytes per element) and the taps' (row-major, pointer `taps` stepping
/// `tap_bytes` per tap); each also steps its dim's table, the pointer at
/// `tables + d`: by a row of `kernel` entries per output position, by one
/// entry per tap.
fn spatial_levels(
    p: &ConvParams,
    rank: usize,
    [y, taps, tables]: [usize; 3],
    size: i64,
    tap_bytes: i64,
) -> (Vec<Level>, Vec<Level>) {
    let width = tables + rank;
    let (mut outputs, mut window) = (Vec::new(), Vec::new());
    let mut out_stride: i64 = p.out_spatial[..rank].iter().product();
    let mut tap_stride: i64 = p.kernel[..rank].iter().product();
    for d in 0..rank {
        out_stride /= p.out_spatial[d];
        tap_stride /= p.kernel[d];
        let mut steps = vec![0; width];
        (steps[y], steps[tables + d]) = (out_stride * size, 8 * p.kernel[d]);
        outputs.push(Level::new(p.out_spatial[d] as usize, steps));
        let mut steps = vec![0; width];
        (steps[taps], steps[tables + d]) = (tap_stride * tap_bytes, 8);
        window.push(Level::new(p.kernel[d] as usize, steps));
    }
    (outputs, window)
}

/// Col2Im from input 0 (`[N, C * taps, L]`, the columns of the block grid
/// `p.in_spatial`) into output 0 (`[N, C, image]`, `p.out_spatial`), as
/// `p` (the kernel's params, `kernel` the block) says: per image element,
/// the fold of the column entries whose block covers it, by the same
/// tables as ConvTranspose (the grid is its input, one channel per group).
pub fn col2im(cx: &mut Lower, dtype: DType, p: &ConvParams) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("Col2Im of {dtype} has no portable lowering (f32 and f64 do)"));
    }
    const COLUMNS: usize = 0;
    const IMAGE: usize = 1;
    const COL2IM_TABLES: usize = 2;
    let rank = p.spatial_rank.max(0) as usize;
    let (size, ty) = (dtype.size() as i64, clif_type(dtype));
    let grid: i64 = p.in_spatial[..rank].iter().product();
    let image: i64 = p.out_spatial[..rank].iter().product();
    let taps: i64 = p.kernel[..rank].iter().product();
    let mut ptrs = vec![cx.input_ptr(0)?, cx.output_ptr(0)?];
    for table in source_tables(p, rank) {
        ptrs.push(cx.table(&table)?);
    }
    let level = |count: i64, columns: i64, image: i64| {
        let mut steps = vec![columns, image];
        steps.resize(COL2IM_TABLES + rank, 0);
        Level::new(count as usize, steps)
    };
    let channel_bytes = (taps * grid * size, image * size);
    let mut levels = vec![
        level(p.batch, p.in_channels * channel_bytes.0, p.in_channels * channel_bytes.1),
        level(p.in_channels, channel_bytes.0, channel_bytes.1),
    ];
    let (outputs, window) = spatial_levels(p, rank, [IMAGE, COLUMNS, COL2IM_TABLES], size, grid * size);
    levels.extend(outputs);
    let flags = MemFlagsData::trusted();
    cx.nest(&levels, &ptrs, &mut |cx, _, at| {
        let init = zero(cx, dtype);
        let sum = cx.fold_nest(&window, at, &[init], &mut |cx, _, tp, acc| {
            let (inside, offset) = tap(cx, &tp[COL2IM_TABLES..]);
            let addr = cx.advance(tp[COLUMNS], offset, size);
            let v = cx.ins().load(ty, flags, addr, 0);
            let next = cx.ins().fadd(acc[0], v);
            Ok(vec![cx.ins().select(inside, next, acc[0])])
        })?[0];
        cx.ins().store(flags, sum, at[IMAGE], 0);
        Ok(())
    })
}

fn zero(cx: &mut Lower, dtype: DType) -> Value {
    if dtype == DType::F64 {
        cx.ins().f64const(0.0)
    } else {
        cx.ins().f32const(0.0)
    }
}

/// From the table entries at `entries` (one per dim): whether the tap is
/// inside the input, and its element offset in the plane (0 when not).
fn tap(cx: &mut Lower, entries: &[Value]) -> (Value, Value) {
    let flags = MemFlagsData::trusted();
    let mut offset = cx.ins().iconst(types::I64, 0);
    let mut any = offset;
    for &entry in entries {
        let v = cx.ins().load(types::I64, flags, entry, 0);
        offset = cx.ins().iadd(offset, v);
        any = cx.ins().bor(any, v);
    }
    let inside = cx.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, any, 0);
    let ptr = cx.ptr_type();
    let offset = if ptr == types::I64 { offset } else { cx.ins().ireduce(ptr, offset) };
    let zero = cx.iconst(0);
    (inside, cx.ins().select(inside, offset, zero))
}
