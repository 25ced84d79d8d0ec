//! The loop every elementwise lowering runs: `out[i] = body(operands[i]...)`
//! over the broadcast output shape, adjacent dims merged where every operand
//! steps uniformly across them, and the innermost loop in f32x4 lanes where
//! the body allows (the same instructions on the same elements, so the same
//! bits). `fused.rs` runs whole chains of functions through the same loop.

use super::cast::{narrow, scalar_type, widen};
use crate::codegen::{clif_type, types, Endianness, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::ir::shape::contiguous_strides;
use crate::ir::DType;
use onnxc_runtime::MINIFLOAT_SATURATE;

/// One input of a broadcast loop: which node input, its type, its element
/// strides against the output shape.
pub struct Operand {
    pub index: usize,
    pub dtype: DType,
    pub strides: Vec<i64>,
}

type Body<'b> = dyn FnMut(&mut Lower, &[(Value, DType)]) -> Result<Value, String> + 'b;

/// Emits `out[i] = body(operands[i]...)` over `out_shape`, with operands
/// read through broadcast strides; `out` is the output type and how a
/// float8 output narrows. With `lanes`, the body computes f32 lanes exactly
/// as one f32 (see [`emit_loop_at`]).
pub fn emit_broadcast_loop(
    cx: &mut Lower,
    out_shape: &[usize],
    out: (DType, i64),
    operands: &[Operand],
    lanes: bool,
    body: &mut Body,
) -> Result<(), String> {
    let mut bases = Vec::with_capacity(operands.len() + 1);
    for o in operands {
        bases.push(cx.input_ptr(o.index)?);
    }
    bases.push(cx.output_ptr(0)?);
    emit_loop_at(cx, out_shape, out, operands, &bases, lanes, body)
}

/// [`emit_broadcast_loop`] with the operands' addresses given (`bases`:
/// one per operand, then output 0's); the operands' `index` is not read.
///
/// When `lanes` says the body may be given vectors, every operand is f32
/// or bool (given as a lane mask, all ones where true: Where's condition),
/// the output is f32, the innermost loop (after merging) is contiguous or
/// broadcast for every operand, and the target has 128-bit vectors, that
/// loop runs four elements per step (the body gets `f32x4` values, a
/// broadcast operand splatted once before the loop) and the last few one
/// at a time: the same operations on the same elements, so the same bits
/// (a NaN that `fmax`/`fmin` return may differ in sign).
pub fn emit_loop_at(
    cx: &mut Lower,
    out_shape: &[usize],
    out: (DType, i64),
    operands: &[Operand],
    bases: &[Value],
    lanes: bool,
    body: &mut Body,
) -> Result<(), String> {
    let operand_strides: Vec<&[i64]> = operands.iter().map(|o| o.strides.as_slice()).collect();
    let (dims, strides) = merge_dims(out_shape, &operand_strides);
    let mut sizes: Vec<i64> = operands.iter().map(|o| o.dtype.size() as i64).collect();
    sizes.push(out.0.size() as i64);
    let vector = lanes
        && cx.has_f32x4()
        && out.0 == DType::F32
        && operands.iter().all(|o| matches!(o.dtype, DType::F32 | DType::Bool))
        && dims.last().is_some_and(|&n| n >= F32_LANES)
        && strides.iter().all(|s| matches!(s.last(), Some(0 | 1)));
    let nest = Nest { dims, strides, sizes, operands, out, vector };
    nest.emit(cx, 0, bases, body)
}

/// `out_shape` with adjacent dims merged where every operand (by its
/// element strides against `out_shape`) and the contiguous output step
/// uniformly across them: the merged dims, and per operand, then the
/// output, the element stride of each merged dim.
pub fn merge_dims(out_shape: &[usize], operand_strides: &[&[i64]]) -> (Vec<usize>, Vec<Vec<i64>>) {
    let out_strides: Vec<i64> = contiguous_strides(out_shape).iter().map(|&s| s as i64).collect();
    let mut dims: Vec<usize> = Vec::new();
    let mut strides: Vec<Vec<i64>> = vec![Vec::new(); operand_strides.len() + 1];
    for d in 0..out_shape.len() {
        let all: Vec<i64> = operand_strides.iter().map(|s| s[d]).chain([out_strides[d]]).collect();
        let mergeable = !dims.is_empty()
            && strides
                .iter()
                .zip(&all)
                .all(|(s, &cur)| s.last().is_some_and(|&prev| prev == cur * out_shape[d] as i64));
        if mergeable {
            let last = dims.len() - 1;
            dims[last] *= out_shape[d];
            for (s, &cur) in strides.iter_mut().zip(&all) {
                *s.last_mut().expect("merged dims have a stride") = cur;
            }
        } else {
            dims.push(out_shape[d]);
            for (s, &cur) in strides.iter_mut().zip(&all) {
                s.push(cur);
            }
        }
    }
    (dims, strides)
}

/// f32 values in one 128-bit vector.
const F32_LANES: usize = 4;

/// The merged loop nest of [`emit_loop_at`].
struct Nest<'o> {
    dims: Vec<usize>,
    /// Per operand, then the output: element stride per level.
    strides: Vec<Vec<i64>>,
    /// Per operand, then the output: element bytes.
    sizes: Vec<i64>,
    operands: &'o [Operand],
    out: (DType, i64),
    /// The innermost level runs four f32 lanes at a time.
    vector: bool,
}

impl Nest<'_> {
    fn emit(&self, cx: &mut Lower, level: usize, ptrs: &[Value], body: &mut Body) -> Result<(), String> {
        if level == self.dims.len() {
            return self.element(cx, ptrs, body);
        }
        if self.vector && level + 1 == self.dims.len() {
            return self.innermost_in_lanes(cx, ptrs, body);
        }
        let l = cx.loop_begin(self.dims[level]);
        let inner = self.advance(cx, ptrs, level, l.index, 1);
        self.emit(cx, level + 1, &inner, body)?;
        cx.loop_end(l);
        Ok(())
    }

    /// Each pointer moved `index * count` steps along `level`.
    fn advance(&self, cx: &mut Lower, ptrs: &[Value], level: usize, index: Value, count: i64) -> Vec<Value> {
        let mut moved = Vec::with_capacity(ptrs.len());
        for (t, &p) in ptrs.iter().enumerate() {
            let step = self.strides[t][level] * self.sizes[t] * count;
            moved.push(cx.advance(p, index, step));
        }
        moved
    }

    /// `out = body(operands)` for the one element the pointers address.
    fn element(&self, cx: &mut Lower, ptrs: &[Value], body: &mut Body) -> Result<(), String> {
        let mut args = Vec::with_capacity(self.operands.len());
        for (o, &p) in self.operands.iter().zip(ptrs) {
            let raw = cx.b.ins().load(clif_type(o.dtype), MemFlagsData::trusted(), p, 0);
            args.push((widen(cx, raw, o.dtype)?, scalar_type(o.dtype)));
        }
        let result = body(cx, &args)?;
        let result = narrow(cx, result, self.out.0, self.out.1)?;
        let out = *ptrs.last().ok_or("no output pointer")?;
        cx.b.ins().store(MemFlagsData::trusted(), result, out, 0);
        Ok(())
    }

    /// The innermost level in f32x4 steps, then its remainder one by one.
    fn innermost_in_lanes(&self, cx: &mut Lower, ptrs: &[Value], body: &mut Body) -> Result<(), String> {
        let level = self.dims.len() - 1;
        let count = self.dims[level];
        let steps = count / F32_LANES;
        let vector = types::F32X4;
        // Unaligned and not trapping: the data is only 4-byte aligned.
        let flags = MemFlagsData::new().with_notrap();
        let mut splats = Vec::with_capacity(self.operands.len());
        for (t, (&p, o)) in ptrs.iter().zip(self.operands).enumerate() {
            splats.push(if self.strides[t][level] == 0 {
                Some(match o.dtype {
                    DType::Bool => splat_mask(cx, p),
                    _ => {
                        let one = cx.b.ins().load(types::F32, MemFlagsData::trusted(), p, 0);
                        cx.b.ins().splat(vector, one)
                    }
                })
            } else {
                None
            });
        }
        let l = cx.loop_begin(steps);
        let at = self.advance(cx, ptrs, level, l.index, F32_LANES as i64);
        let mut args = Vec::with_capacity(self.operands.len());
        for ((splat, &p), o) in splats.iter().zip(&at).zip(self.operands) {
            let v = match (splat, o.dtype) {
                (Some(v), _) => *v,
                (None, DType::Bool) => {
                    let word = cx.b.ins().load(types::I32, flags, p, 0);
                    mask_of_bytes(cx, word)
                }
                (None, _) => cx.b.ins().load(vector, flags, p, 0),
            };
            args.push((v, o.dtype));
        }
        let result = body(cx, &args)?;
        let out = *at.last().ok_or("no output pointer")?;
        cx.b.ins().store(flags, result, out, 0);
        cx.loop_end(l);
        let done = cx.iconst((steps * F32_LANES) as i64);
        let rest = self.advance(cx, ptrs, level, done, 1);
        let l = cx.loop_begin(count % F32_LANES);
        let at = self.advance(cx, &rest, level, l.index, 1);
        self.element(cx, &at, body)?;
        cx.loop_end(l);
        Ok(())
    }
}

/// The f32x4 lane mask of four bools (the bytes of `word`, in memory
/// order): all ones in a lane whose byte is nonzero.
fn mask_of_bytes(cx: &mut Lower, word: Value) -> Value {
    let little = MemFlagsData::new().with_endianness(Endianness::Little);
    let words = cx.b.ins().scalar_to_vector(types::I32X4, word);
    let bytes = cx.b.ins().bitcast(types::I8X16, little, words);
    let halves = cx.b.ins().swiden_low(bytes);
    let lanes = cx.b.ins().swiden_low(halves);
    let zero = cx.b.ins().iconst(types::I32, 0);
    let zeros = cx.b.ins().splat(types::I32X4, zero);
    let mask = cx.b.ins().icmp(IntCC::NotEqual, lanes, zeros);
    cx.b.ins().bitcast(types::F32X4, little, mask)
}

/// The f32x4 lane mask of the one bool at `p`, in every lane.
fn splat_mask(cx: &mut Lower, p: Value) -> Value {
    let byte = cx.b.ins().load(types::I8, MemFlagsData::trusted(), p, 0);
    let word = cx.b.ins().uextend(types::I32, byte);
    let spread = cx.b.ins().imul_imm_u(word, 0x0101_0101);
    mask_of_bytes(cx, spread)
}

/// Writes 1 (true) to every element of output `k`.
pub(super) fn fill_ones(cx: &mut Lower, k: usize) -> Result<(), String> {
    let (dtype, shape) = cx.output_type(k)?;
    let one = match scalar_type(dtype) {
        DType::F32 => cx.ins().f32const(1.0),
        DType::F64 => cx.ins().f64const(1.0),
        t => cx.ins().iconst(clif_type(t), 1),
    };
    let one = narrow(cx, one, dtype, MINIFLOAT_SATURATE)?;
    let base = cx.output_ptr(k)?;
    let l = cx.loop_begin(shape.iter().product());
    let offset = cx.ins().imul_imm_s(l.index, dtype.size() as i64);
    let at = cx.ins().iadd(base, offset);
    cx.ins().store(MemFlagsData::trusted(), one, at, 0);
    cx.loop_end(l);
    Ok(())
}
