//! Portable Gather and GatherElements (and ArrayFeatureExtractor, which is
//! a Gather): loop nests reading `data` at run-time indices, for portable
//! mode, where `onnxc_gather`/`onnxc_gather_elements` are not linked.
//!
//! Every index is checked first, in one flat pass over `indices`, before
//! anything is written, as the kernels do: an index outside `[-len, len)`
//! leaves the model with [`status::INDEX_OUT_OF_RANGE`] and the output
//! untouched. Only then does the copy nest run, wrapping each (known
//! valid) negative index by `len`; no address it forms can leave `data`.
//! Elements of 1, 2, 4, 8 or 16 bytes move as one load and store (the
//! common Gather of embeddings moves rows through memcpy), so any element
//! type, strings included, is handled.

use super::nest::Level;
use super::{status, types, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use onnxc_runtime::{ElementsParams, GatherParams};

impl Lower<'_, '_> {
    /// The i32 or i64 index at `at` (`index_bytes` 4 or 8), sign-extended to i64.
    fn load_index(&mut self, at: Value, index_bytes: i64) -> Value {
        let flags = MemFlagsData::trusted();
        match index_bytes {
            4 => self.b.ins().sload32(flags, at, 0),
            _ => self.b.ins().load(types::I64, flags, at, 0),
        }
    }

    /// Leaves the model with [`status::INDEX_OUT_OF_RANGE`] unless every one
    /// of the `count` indices from `indices` lies in `[-len, len)`.
    pub(super) fn check_indices(
        &mut self,
        indices: Value,
        count: i64,
        index_bytes: i64,
        len: i64,
    ) -> Result<(), String> {
        let all = [Level::new(count as usize, vec![index_bytes])];
        self.nest(&all, &[indices], &mut |cx, _, at| {
            let k = cx.load_index(at[0], index_bytes);
            // `k + len` in `[0, 2 len)` as an unsigned number is the range
            // test; a `k` so large that the sum wraps is out of it too.
            let shifted = cx.b.ins().iadd_imm_s(k, len);
            let outside = cx.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, shifted, 2 * len);
            cx.fail_if(outside, status::INDEX_OUT_OF_RANGE);
            Ok(())
        })
    }

    /// The checked index at `at` as a byte offset `wrapped * stride` into
    /// the data, negative indices counting from `len`.
    pub(super) fn index_offset(&mut self, at: Value, index_bytes: i64, len: i64, stride: i64) -> Value {
        let k = self.load_index(at, index_bytes);
        let negative = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, k, 0);
        let wrapped = self.b.ins().iadd_imm_s(k, len);
        let k = self.b.ins().select(negative, wrapped, k);
        let ptr = self.ptr_type();
        let k = if ptr == types::I64 { k } else { self.b.ins().ireduce(ptr, k) };
        self.b.ins().imul_imm_s(k, stride)
    }

    /// Copies `bytes` from `src` to `dst`: one load and store when that is
    /// a register's width, else memcpy.
    pub fn copy_run(&mut self, dst: Value, src: Value, bytes: i64) {
        let flags = MemFlagsData::trusted();
        let ty = match bytes {
            1 => types::I8,
            2 => types::I16,
            4 => types::I32,
            8 => types::I64,
            16 => types::I128,
            _ => return self.copy_bytes(dst, src, bytes as usize),
        };
        let v = self.b.ins().load(ty, flags, src, 0);
        self.b.ins().store(flags, v, dst, 0);
    }
}

/// Gather: for every `(outer, index)` the `inner` elements of `data` at
/// that index along the axis.
pub fn gather(cx: &mut Lower, p: &GatherParams, data: Value, indices: Value, out: Value) -> Result<(), String> {
    let run = p.inner * p.elem_bytes;
    if p.outer * p.n_indices * run == 0 {
        return Ok(());
    }
    cx.check_indices(indices, p.n_indices, p.index_bytes, p.axis_len)?;
    let levels = [
        Level::new(p.outer as usize, vec![p.axis_len * run, 0, p.n_indices * run]),
        Level::new(p.n_indices as usize, vec![0, p.index_bytes, run]),
    ];
    cx.nest(&levels, &[data, indices, out], &mut |cx, _, at| {
        let offset = cx.index_offset(at[1], p.index_bytes, p.axis_len, run);
        let src = cx.ins().iadd(at[0], offset);
        cx.copy_run(at[2], src, run);
        Ok(())
    })
}

/// GatherElements: `out[i] = data[i with i[axis] = indices[i]]`, one nest
/// over the index dims walking indices and output contiguously and data by
/// its own strides (none along the axis, which the index supplies).
pub fn gather_elements(
    cx: &mut Lower,
    p: &ElementsParams,
    data: Value,
    indices: Value,
    out: Value,
) -> Result<(), String> {
    let rank = p.rank as usize;
    let (data_dims, index_dims) = (&p.data_dims[..rank], &p.index_dims[..rank]);
    let count: i64 = index_dims.iter().product();
    if count == 0 {
        return Ok(());
    }
    let axis = p.axis as usize;
    cx.check_indices(indices, count, p.index_bytes, data_dims[axis])?;
    let row_major = |dims: &[i64], unit: i64| {
        let mut strides = vec![unit; dims.len()];
        for d in (0..dims.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * dims[d + 1];
        }
        strides
    };
    let data_strides = row_major(data_dims, p.elem_bytes);
    let index_strides = row_major(index_dims, p.index_bytes);
    let out_strides = row_major(index_dims, p.elem_bytes);
    let levels: Vec<Level> = (0..rank)
        .map(|d| {
            let data_step = if d == axis { 0 } else { data_strides[d] };
            Level::new(index_dims[d] as usize, vec![data_step, index_strides[d], out_strides[d]])
        })
        .collect();
    cx.nest(&levels, &[data, indices, out], &mut |cx, _, at| {
        let offset = cx.index_offset(at[1], p.index_bytes, data_dims[axis], data_strides[axis]);
        let src = cx.ins().iadd(at[0], offset);
        cx.copy_run(at[2], src, p.elem_bytes);
        Ok(())
    })
}
