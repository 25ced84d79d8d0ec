//! Sequence, optional and map graph inputs, checked on entry. The caller
//! passes `inputs[k]` as an `onnxc_sequence`, `onnxc_optional` or `onnxc_map`
//! descriptor (see the header); the code was specialised to the element
//! count, shapes and presence given at compile time, so before any node
//! runs it compares the descriptor with them — presence, count, each
//! element's rank and dims, no NULL where bytes are read — and returns
//! `STATUS_BAD_INPUT` tagged with the input's index otherwise. Only then
//! are the element addresses taken, so nothing reads past what the caller
//! described.

use super::{types, Block, CodegenError, FunctionBuilder, InstBuilder, IntCC, MemFlagsData, Type, Value};
use crate::ir::{Composite, Graph, ValueId};
use crate::ops::sequence::TENSOR_WORDS;
use std::collections::HashMap;

/// Checks every sequence or optional input's descriptor; returns the
/// address of each tensor they hold (`ValueDef::InputElement` values).
pub(super) fn check_inputs(
    b: &mut FunctionBuilder,
    ptr: Type,
    graph: &Graph,
    inputs: Value,
    fail: Block,
) -> Result<HashMap<ValueId, Value>, CodegenError> {
    let mut addresses = HashMap::new();
    for (k, &input) in graph.inputs.iter().enumerate() {
        let Some(composite) = graph.composites.get(&input) else { continue };
        let mut check = Check { b: &mut *b, ptr, fail, code: ((k as i64 + 1) << 8) | super::status::BAD_INPUT as i64 };
        let desc = check.load(inputs, k);
        check.fail_if_null(desc);
        match composite {
            Composite::MapRows { keys, values } => check.map(graph, desc, [*keys, *values], &mut addresses)?,
            Composite::Sequence(items) => check.sequence(graph, desc, items, &mut addresses)?,
            Composite::Optional(held) => {
                let has = check.load(desc, 0);
                let wrong = check.b.ins().icmp_imm_u(held_cc(held.is_some()), has, 0);
                check.fail_if(wrong);
                if let Some(inner) = held {
                    let value = check.load(desc, 1);
                    check.fail_if_null(value);
                    match graph.composites.get(inner) {
                        Some(Composite::Sequence(items)) => check.sequence(graph, value, items, &mut addresses)?,
                        _ => check.tensor(graph, value, *inner, &mut addresses)?,
                    }
                }
            }
        }
    }
    Ok(addresses)
}

/// The comparison that is true when `has_value` is wrong.
fn held_cc(held: bool) -> IntCC {
    if held {
        IntCC::Equal
    } else {
        IntCC::NotEqual
    }
}

struct Check<'a, 'f> {
    b: &'a mut FunctionBuilder<'f>,
    ptr: Type,
    fail: Block,
    code: i64,
}

impl Check<'_, '_> {
    /// Pointer-sized word `i` at `at`.
    fn load(&mut self, at: Value, i: usize) -> Value {
        self.b.ins().load(self.ptr, MemFlagsData::trusted(), at, (i * self.ptr.bytes() as usize) as i32)
    }

    fn fail_if(&mut self, cond: Value) {
        let code = self.b.ins().iconst(types::I32, self.code);
        let cont = self.b.create_block();
        self.b.ins().brif(cond, self.fail, &[code.into()], cont, &[]);
        self.b.switch_to_block(cont);
    }

    fn fail_if_null(&mut self, p: Value) {
        let null = self.b.ins().icmp_imm_u(IntCC::Equal, p, 0);
        self.fail_if(null);
    }

    fn fail_unless_equal(&mut self, v: Value, want: i64) {
        let wrong = self.b.ins().icmp_imm_u(IntCC::NotEqual, v, want);
        self.fail_if(wrong);
    }

    /// An `onnxc_sequence` at `seq` holding exactly `items`.
    fn sequence(
        &mut self,
        graph: &Graph,
        seq: Value,
        items: &[ValueId],
        addresses: &mut HashMap<ValueId, Value>,
    ) -> Result<(), CodegenError> {
        let count = self.load(seq, 0);
        self.fail_unless_equal(count, items.len() as i64);
        if items.is_empty() {
            return Ok(());
        }
        let elements = self.load(seq, 1);
        self.fail_if_null(elements);
        for (i, &item) in items.iter().enumerate() {
            let offset = (i * TENSOR_WORDS * self.ptr.bytes() as usize) as i64;
            let tensor = self.b.ins().iadd_imm_s(elements, offset);
            self.tensor(graph, tensor, item, addresses)?;
        }
        Ok(())
    }

    /// An `onnxc_map` at `m` (count, keys, values) with as many entries as
    /// `parts`, its keys and values tensors, hold.
    fn map(
        &mut self,
        graph: &Graph,
        m: Value,
        parts: [ValueId; 2],
        addresses: &mut HashMap<ValueId, Value>,
    ) -> Result<(), CodegenError> {
        let entries = match graph.concrete(parts[0]) {
            Some((_, shape)) => shape.first().copied().unwrap_or(0),
            None => return Err(CodegenError::Module("a map input has no known entry count".into())),
        };
        let count = self.load(m, 0);
        self.fail_unless_equal(count, entries as i64);
        for (word, part) in [1, 2].into_iter().zip(parts) {
            let data = self.load(m, word);
            if entries > 0 {
                self.fail_if_null(data);
            }
            addresses.insert(part, data);
        }
        Ok(())
    }

    /// An `onnxc_tensor` at `t` with `v`'s rank and dims.
    fn tensor(
        &mut self,
        graph: &Graph,
        t: Value,
        v: ValueId,
        addresses: &mut HashMap<ValueId, Value>,
    ) -> Result<(), CodegenError> {
        let Some((dtype, shape)) = graph.concrete(v) else {
            return Err(CodegenError::Module(format!("input element \"{}\" has no known shape", graph.value(v).name)));
        };
        let rank = self.load(t, 1);
        self.fail_unless_equal(rank, shape.len() as i64);
        if !shape.is_empty() {
            let dims = self.load(t, 2);
            self.fail_if_null(dims);
            for (j, &d) in shape.iter().enumerate() {
                let given = self.b.ins().load(types::I64, MemFlagsData::trusted(), dims, 8 * j as i32);
                let given = if self.ptr == types::I64 { given } else { self.b.ins().ireduce(self.ptr, given) };
                self.fail_unless_equal(given, d as i64);
            }
        }
        let data = self.load(t, 0);
        if crate::ir::shape::element_count(&shape).and_then(|n| dtype.bytes_for(n)).is_some_and(|b| b > 0) {
            self.fail_if_null(data);
        }
        addresses.insert(v, data);
        Ok(())
    }
}
