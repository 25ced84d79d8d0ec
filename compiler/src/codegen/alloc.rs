//! Memory for values whose shape is computed at run time (NonZero's count,
//! TopK with a run-time K, ...). The plan cannot place them, so their
//! producer asks for memory once it knows their dims: from the caller's
//! `alloc` hook when the context has one, otherwise from a bump allocator
//! over the workspace past the planned arena. Both are checked: a hook that
//! returns NULL, a size that overflows, or a workspace that is too small
//! leaves the model with [`status::OUT_OF_MEMORY`], never with a write out
//! of bounds. A graph output's address and dims are written to the
//! caller's `onnxc_dynamic_output` descriptor.

use super::{status, types, AbiParam, InstBuilder, IntCC, Lower, MemFlagsData, Value};
use crate::plan::{Loc, ALIGN};
use cranelift_frontend::{FunctionBuilder, Variable};

/// The allocation state of one call of the model.
pub(super) struct Allocator {
    /// Next free byte of the workspace.
    pub(super) bump: Variable,
    /// One past the workspace's last byte.
    end: Value,
    /// The context's `alloc` hook (null: use the workspace).
    hook: Value,
    user: Value,
}

impl Allocator {
    /// Allocates from `start` (the first byte past the arena, or where an
    /// earlier part stopped) to `end` when `hook` is null.
    pub(super) fn new(b: &mut FunctionBuilder, start: Value, end: Value, hook: Value, user: Value) -> Allocator {
        let bump = b.declare_var(b.func.dfg.value_type(start));
        b.def_var(bump, start);
        Allocator { bump, end, hook, user }
    }
}

/// Offsets of the fields of `onnxc_dynamic_output` (see the header).
const DESCRIPTOR_DATA: i32 = 0;

impl Lower<'_, '_> {
    /// True when output `i`'s shape is computed at run time.
    pub fn output_is_dynamic(&self, i: usize) -> bool {
        self.node.outputs.get(i).is_some_and(|&v| self.plan.locs[v.index()] == Loc::Dynamic)
    }

    /// Gets memory for data-dependent output `i` whose dims (pointer-sized
    /// integers) are now known, records them, and returns its address.
    /// Call it at the node's top level, not inside a loop, so the address
    /// dominates the code that reads the value.
    pub fn alloc_output(&mut self, i: usize, dims: &[Value]) -> Result<Value, String> {
        let v = *self.node.outputs.get(i).ok_or_else(|| format!("output {i} does not exist"))?;
        if self.plan.locs[v.index()] != Loc::Dynamic {
            return Err(format!("output {i} has a shape known at compile time"));
        }
        let ty = self.graph.value(v).ty.as_ref().ok_or_else(|| format!("output {i} has no type"))?;
        if ty.shape.len() != dims.len() {
            return Err(format!("output {i} has rank {}, {} dims were given", ty.shape.len(), dims.len()));
        }
        let mut bytes = self.iconst(ty.dtype.size() as i64);
        for &d in dims {
            let (product, overflow) = self.b.ins().umul_overflow(bytes, d);
            self.fail_if(overflow, status::OUT_OF_MEMORY);
            bytes = product;
        }
        let data = self.allocate(bytes)?;
        self.env.dynamic.insert(v, data);
        if let Some(word) = self.plan.handover.as_ref().and_then(|h| Some(h.word_offset(*h.dynamic.get(&v)?))) {
            self.b.ins().store(MemFlagsData::trusted(), data, self.env.workspace, word as i32);
        }
        if let Some(k) = self.graph.outputs.iter().position(|&o| o == v) {
            self.write_descriptor(k, data, dims);
        }
        Ok(data)
    }

    /// Scratch memory whose size is only known at run time (a
    /// pointer-sized value), from the same allocator; it is never freed
    /// during the call, so the plan treats such a model as unbounded.
    pub fn alloc_scratch(&mut self, bytes: Value) -> Result<Value, String> {
        self.allocate(bytes)
    }

    /// `bytes` bytes aligned to [`ALIGN`], from the hook or the workspace.
    fn allocate(&mut self, bytes: Value) -> Result<Value, String> {
        let a = self.env.allocator.as_ref().ok_or("the plan has no data-dependent values")?;
        let (bump, end, hook, user) = (a.bump, a.end, a.hook, a.user);
        let ptr = self.ptr_type();
        let from_hook = self.b.create_block();
        let from_workspace = self.b.create_block();
        let done = self.b.create_block();
        let address = self.b.append_block_param(done, ptr);
        self.b.ins().brif(hook, from_hook, &[], from_workspace, &[]);

        self.b.switch_to_block(from_hook);
        let mut sig = self.module.make_signature();
        sig.params.extend([AbiParam::new(ptr); 3]);
        sig.returns.push(AbiParam::new(ptr));
        let sig = self.b.import_signature(sig);
        let is_zero = self.b.ins().icmp_imm_u(IntCC::Equal, bytes, 0);
        let one = self.iconst(1);
        let asked = self.b.ins().select(is_zero, one, bytes);
        let align = self.iconst(ALIGN as i64);
        let call = self.b.ins().call_indirect(sig, hook, &[user, asked, align]);
        let p = self.b.inst_results(call)[0];
        self.b.ins().jump(done, &[p.into()]);

        self.b.switch_to_block(from_workspace);
        let next = self.b.use_var(bump);
        let bumped = self.b.ins().iadd_imm_s(next, ALIGN as i64 - 1);
        let p = self.b.ins().band_imm_s(bumped, -(ALIGN as i64));
        let past_end = self.b.ins().icmp(IntCC::UnsignedGreaterThan, p, end);
        let room = self.b.ins().isub(end, p);
        let too_big = self.b.ins().icmp(IntCC::UnsignedGreaterThan, bytes, room);
        let short = self.b.ins().bor(past_end, too_big);
        self.fail_if(short, status::OUT_OF_MEMORY);
        let new_next = self.b.ins().iadd(p, bytes);
        self.b.def_var(bump, new_next);
        self.b.ins().jump(done, &[p.into()]);

        self.b.switch_to_block(done);
        self.fail_if_null(address);
        Ok(address)
    }

    fn fail_if_null(&mut self, p: Value) {
        let null = self.b.ins().icmp_imm_u(IntCC::Equal, p, 0);
        self.fail_if(null, status::OUT_OF_MEMORY);
    }

    /// Stores a data-dependent graph output's address and dims into the
    /// caller's descriptor `outputs[k]`.
    fn write_descriptor(&mut self, k: usize, data: Value, dims: &[Value]) {
        let ptr = self.ptr_type();
        let flags = MemFlagsData::trusted();
        let desc = self.b.ins().load(ptr, flags, self.env.outputs, (k * ptr.bytes() as usize) as i32);
        self.b.ins().store(flags, data, desc, DESCRIPTOR_DATA);
        let dims_ptr = self.b.ins().load(ptr, flags, desc, ptr.bytes() as i32);
        for (j, &d) in dims.iter().enumerate() {
            let d64 = if ptr == types::I64 { d } else { self.b.ins().uextend(types::I64, d) };
            self.b.ins().store(flags, d64, dims_ptr, (j * 8) as i32);
        }
    }
}
