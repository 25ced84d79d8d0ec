//! Loop nests: the one structure behind every lowering that is a plain
//! Cranelift loop instead of a kernel call (integer products, inline
//! reductions, and all of portable mode: MatMul, Gemm, Conv, pools,
//! Softmax, reductions).
//!
//! A nest is a list of [`Level`]s: a trip count and, for each pointer the
//! caller walks, the bytes it advances per step. [`Lower::nest`] calls its
//! body once per index tuple with the pointers advanced and the indices
//! (callers that need positions, e.g. a convolution's bounds checks, use
//! them). [`Lower::fold_nest`] does the same while carrying accumulators
//! in registers (block parameters) rather than memory: a dot product,
//! a window's maximum, a softmax row's sum are each one fold;
//! [`Lower::fold_dynamic`] folds over a count known only at run time.

use super::{Lower, Type, Value};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{BlockArg, InstBuilder};

/// One loop of a nest: `count` steps, pointer `i` advancing `steps[i]` bytes each.
#[derive(Clone, Debug)]
pub struct Level {
    pub count: usize,
    pub steps: Vec<i64>,
}

impl Level {
    pub fn new(count: usize, steps: Vec<i64>) -> Level {
        Level { count, steps }
    }
}

/// The body of [`Lower::nest`]: indices (one per level) and pointers.
pub type NestBody<'b> = dyn FnMut(&mut Lower, &[Value], &[Value]) -> Result<(), String> + 'b;

/// The body of [`Lower::fold_dynamic`]: the index and the current
/// accumulators; returns the next ones.
pub type IndexFoldBody<'b> = dyn FnMut(&mut Lower, Value, &[Value]) -> Result<Vec<Value>, String> + 'b;

/// The body of [`Lower::fold_nest`]: indices, pointers and the current
/// accumulators; returns the next accumulators (same count and types).
pub type FoldBody<'b> = dyn FnMut(&mut Lower, &[Value], &[Value], &[Value]) -> Result<Vec<Value>, String> + 'b;

impl Lower<'_, '_> {
    /// `ptr + index * step` (no code for a zero step).
    pub fn advance(&mut self, ptr: Value, index: Value, step: i64) -> Value {
        if step == 0 {
            return ptr;
        }
        let off = self.b.ins().imul_imm_s(index, step);
        self.b.ins().iadd(ptr, off)
    }

    fn advance_all(&mut self, ptrs: &[Value], index: Value, steps: &[i64]) -> Vec<Value> {
        ptrs.iter().enumerate().map(|(i, &p)| self.advance(p, index, steps.get(i).copied().unwrap_or(0))).collect()
    }

    /// Runs `body` for every index tuple of `levels` (outermost first).
    pub fn nest(&mut self, levels: &[Level], ptrs: &[Value], body: &mut NestBody) -> Result<(), String> {
        self.nest_from(levels, ptrs, &mut Vec::new(), body)
    }

    fn nest_from(
        &mut self,
        levels: &[Level],
        ptrs: &[Value],
        indices: &mut Vec<Value>,
        body: &mut NestBody,
    ) -> Result<(), String> {
        let Some((level, rest)) = levels.split_first() else {
            return body(self, indices, ptrs);
        };
        let l = self.loop_begin(level.count);
        let inner = self.advance_all(ptrs, l.index, &level.steps);
        indices.push(l.index);
        self.nest_from(rest, &inner, indices, body)?;
        indices.pop();
        self.loop_end(l);
        Ok(())
    }

    /// Folds `body` over every index tuple of `levels`, starting from
    /// `init`; returns the final accumulators.
    pub fn fold_nest(
        &mut self,
        levels: &[Level],
        ptrs: &[Value],
        init: &[Value],
        body: &mut FoldBody,
    ) -> Result<Vec<Value>, String> {
        self.fold_from(levels, ptrs, &mut Vec::new(), init, body)
    }

    fn fold_from(
        &mut self,
        levels: &[Level],
        ptrs: &[Value],
        indices: &mut Vec<Value>,
        acc: &[Value],
        body: &mut FoldBody,
    ) -> Result<Vec<Value>, String> {
        let Some((level, rest)) = levels.split_first() else {
            return body(self, indices, ptrs, acc);
        };
        let count = self.iconst(level.count as i64);
        self.fold_loop(count, acc, &mut |cx, index, carried| {
            let inner = cx.advance_all(ptrs, index, &level.steps);
            indices.push(index);
            let next = cx.fold_from(rest, &inner, indices, carried, body);
            indices.pop();
            next
        })
    }

    /// [`Lower::fold_nest`] of one loop of a run-time `count` (pointer-sized)
    /// walking no pointers: `body(index, acc)` gives the next accumulators.
    pub fn fold_dynamic(
        &mut self,
        count: Value,
        init: &[Value],
        body: &mut IndexFoldBody,
    ) -> Result<Vec<Value>, String> {
        self.fold_loop(count, init, body)
    }

    /// The loop of a fold: `index` from 0 while below `count`, the
    /// accumulators in block parameters.
    fn fold_loop(&mut self, count: Value, acc: &[Value], body: &mut IndexFoldBody) -> Result<Vec<Value>, String> {
        let ptr = self.ptr_type();
        let types: Vec<Type> = acc.iter().map(|&v| self.b.func.dfg.value_type(v)).collect();
        let (header, step, exit) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        let index = self.b.append_block_param(header, ptr);
        let carried: Vec<Value> = types.iter().map(|&t| self.b.append_block_param(header, t)).collect();
        let results: Vec<Value> = types.iter().map(|&t| self.b.append_block_param(exit, t)).collect();
        let zero = self.b.ins().iconst(ptr, 0);
        let args: Vec<BlockArg> = [zero].iter().chain(acc).map(|&v| v.into()).collect();
        self.b.ins().jump(header, &args);
        self.b.switch_to_block(header);
        let done = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, index, count);
        let out: Vec<BlockArg> = carried.iter().map(|&v| v.into()).collect();
        self.b.ins().brif(done, exit, &out, step, &[]);
        self.b.switch_to_block(step);
        let next = body(self, index, &carried)?;
        if next.len() != carried.len() {
            return Err(format!("a fold body returned {} accumulators, expected {}", next.len(), carried.len()));
        }
        let following = self.b.ins().iadd_imm_s(index, 1);
        let args: Vec<BlockArg> = [following].iter().chain(&next).map(|&v| v.into()).collect();
        self.b.ins().jump(header, &args);
        self.b.switch_to_block(exit);
        Ok(results)
    }
}
