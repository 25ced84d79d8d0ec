//! Portable Pad (all four modes): one loop nest over the output, for
//! portable mode, where `onnxc_pad` is not linked.
//!
//! Where an output coordinate reads from depends on its dim alone, and the
//! shapes and pads are known at compile time, so the compiler tabulates,
//! per dim, each output coordinate's source offset in bytes with the
//! kernel's own rule (`onnxc_runtime::generic::copy::pad_source`: cropping
//! by negative pads, then constant, reflect, edge or wrap), or [`PADDED`]
//! for the constant. An element's source is the sum of its coordinates'
//! entries, or the constant value when any entry is [`PADDED`] (their
//! bitwise or is negative). Every offset in a table lies inside the input,
//! so no address leaves it; the tables cost 8 bytes per output coordinate
//! of each dim, in read-only data.

use super::nest::Level;
use super::{types, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use onnxc_runtime::generic::copy::pad_source;
use onnxc_runtime::PadParams;

/// A table entry for a coordinate that reads the constant value.
const PADDED: i64 = -1;

/// The per-dim tables, concatenated: entry `o` of dim `d` is output
/// coordinate `o`'s source offset in bytes, or [`PADDED`].
fn source_tables(p: &PadParams, rank: usize) -> Vec<i64> {
    let mut stride = p.elem_bytes;
    let mut strides = vec![0; rank];
    for d in (0..rank).rev() {
        strides[d] = stride;
        stride *= p.in_dims[d];
    }
    let mut table = Vec::new();
    for (d, &stride) in strides.iter().enumerate() {
        let pad_end = p.out_dims[d] - p.in_dims[d] - p.pads_begin[d];
        let source = |o| pad_source(o, p.pads_begin[d], p.in_dims[d], pad_end, p.mode);
        table.extend((0..p.out_dims[d]).map(|o| source(o).map_or(PADDED, |i| i * stride)));
    }
    table
}

/// Pad `x` into `y` as `p` says; `value` points to the constant element
/// (zero bytes when the node has none).
pub fn pad(cx: &mut Lower, p: &PadParams, x: Value, value: Option<Value>, y: Value) -> Result<(), String> {
    let (rank, eb) = (p.rank as usize, p.elem_bytes);
    if p.out_dims[..rank].contains(&0) {
        return Ok(());
    }
    let value = match value {
        Some(v) => v,
        None => cx.data_bytes(&vec![0u8; eb as usize])?,
    };
    let table = source_tables(p, rank);
    let table_ptr = cx.table(&table)?;
    // Pointers: each dim's table, then the output (row-major).
    let mut ptrs = Vec::with_capacity(rank + 1);
    let mut start = 0;
    for d in 0..rank {
        ptrs.push(cx.ins().iadd_imm_s(table_ptr, 8 * start));
        start += p.out_dims[d];
    }
    ptrs.push(y);
    let mut out_stride = eb;
    let mut levels = vec![Level::new(0, Vec::new()); rank];
    for d in (0..rank).rev() {
        let mut steps = vec![0; rank + 1];
        steps[d] = 8;
        steps[rank] = out_stride;
        levels[d] = Level::new(p.out_dims[d] as usize, steps);
        out_stride *= p.out_dims[d];
    }
    cx.nest(&levels, &ptrs, &mut |cx, _, at| {
        let flags = MemFlagsData::trusted();
        let mut offset = cx.iconst(0);
        let mut any = cx.iconst(0);
        for &entry in &at[..rank] {
            let e = cx.ins().load(types::I64, flags, entry, 0);
            offset = cx.ins().iadd(offset, e);
            any = cx.ins().bor(any, e);
        }
        let padded = cx.ins().icmp_imm_s(IntCC::SignedLessThan, any, 0);
        let inside = cx.ins().iadd(x, offset);
        let src = cx.ins().select(padded, value, inside);
        cx.copy_run(at[rank], src, eb);
        Ok(())
    })
}
