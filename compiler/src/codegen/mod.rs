//! Stage 7: mid-IR + plan → the model's Cranelift entry point (and, for a
//! schedule the plan cut into parts, one local function per part, called
//! in turn by the entry point; a part reopens the guarded ranges still
//! open from the part before, through the plan's `Handover` block).
//!
//! The generated entry point is
//! `int32_t PREFIX_run(const onnxc_context *ctx, const void *const *inputs, void *const *outputs)`:
//! it checks the caller's workspace, runs the nodes in schedule order and
//! returns 0, or a status whose low byte says what went wrong and whose
//! upper bits are the failing node's index + 1 (see [`status`]).
//! Operators emit their code through [`Lower`]: pointers to their inputs,
//! outputs and scratch, calls into the kernel library, loops, and a
//! checked early exit. In portable mode ([`Mode::portable`])
//! the kernel library is off limits: operators take their Cranelift-only
//! lowering (built from [`Lower::nest`] and [`Lower::fold_nest`]), and one
//! without it fails to compile, naming the node and operator, instead of
//! leaving an undefined symbol for the linker. This module (with `emit` and `jit`) is the only place
//! that names the Cranelift crates; operator files reach Cranelift through
//! the re-exports below. With [`Mode::profile`] (only `onnxc bench
//! --profile` asks for it) the code calls [`PROFILE_HOOK`] on entry and
//! after every node, so the time between two calls is that node's.

mod alloc;
pub mod attention_aux_loops;
pub mod attention_loops;
mod composite;
pub mod conv_transpose_loops;
pub mod cumulative_loops;
pub mod dynamic_loops;
mod footprint;
pub mod gather_loops;
pub mod gemm_tiles;
pub mod grid_sample_loops;
pub mod half_floats;
pub mod kernels;
pub mod linalg_loops;
pub mod linear_attention_loops;
pub mod minifloats;
mod nest;
pub mod norm_loops;
pub mod pad_loops;
#[cfg(test)]
mod portable_attention_tests;
#[cfg(test)]
mod portable_gemm_tests;
#[cfg(test)]
mod portable_layers_tests;
#[cfg(test)]
mod portable_loops_tests;
pub mod portable_math;
#[cfg(test)]
mod portable_quant_tests;
pub mod quant_loops;
pub mod resize_loops;
pub mod rnn_loops;
pub mod scatter_loops;
pub mod signal_loops;
pub mod staging;
pub mod status;
mod symbolic;
pub mod training_loops;
pub mod window_loops;

pub use footprint::Footprint;
pub use nest::Level;

pub use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
pub use cranelift_codegen::ir::{types, Endianness, InstBuilder, MemFlagsData, Type, Value};
pub use cranelift_frontend::FunctionBuilder;

use crate::ir::{DType, Graph, Node, ValueDef, ValueId};
use crate::limits::Limits;
use crate::plan::{Loc, Plan};
use cranelift_codegen::ir::{AbiParam, Block, FuncRef, GlobalValue, Signature, SourceLoc};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module};
use kernels::{Kernel, KernelArgs, KernelValue, Ref, I32, I64};
use onnxc_runtime::abi::AbiType;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error("{node}: {message}")]
    Op { node: String, message: String },
    #[error("code generation: {0}")]
    Module(String),
    #[error("{0}")]
    Limit(String),
}

impl From<cranelift_module::ModuleError> for CodegenError {
    fn from(e: cranelift_module::ModuleError) -> Self {
        CodegenError::Module(format!("{e:?}"))
    }
}

/// How the code is generated.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mode {
    /// No kernel-library calls: the object references only memcpy/memset.
    pub portable: bool,
    /// Calls [`PROFILE_HOOK`] on entry and after every node.
    pub profile: bool,
}

/// `void onnxc_profile_node(uint32_t index)`: called with `u32::MAX` on
/// entry and with a node's index when that node is done (profiled code only;
/// the program that runs it defines the function).
pub const PROFILE_HOOK: &str = "onnxc_profile_node";

/// Byte offsets of the fields of `onnxc_context` (see the generated header).
struct ContextLayout {
    workspace: i32,
    workspace_bytes: i32,
    alloc: i32,
    alloc_user: i32,
    /// `parallel_for` and `parallel_user`, which kernels get the address of.
    parallel: i32,
}

impl ContextLayout {
    fn for_pointer(ptr: Type) -> ContextLayout {
        let p = ptr.bytes() as i32;
        ContextLayout { workspace: 0, workspace_bytes: p, alloc: 2 * p, alloc_user: 3 * p, parallel: 4 * p }
    }
}

/// Per-function state shared by every node's lowering.
struct Env {
    inputs: Value,
    outputs: Value,
    workspace: Value,
    /// The context's `parallel_for` hook pair, for kernels that split work.
    parallel: Value,
    fail: Block,
    funcs: HashMap<String, FuncRef>,
    consts: HashMap<ValueId, GlobalValue>,
    symbol_prefix: String,
    data_count: usize,
    /// Present when the graph has data-dependent values.
    allocator: Option<alloc::Allocator>,
    /// Address of each tensor inside a sequence or optional input.
    elements: HashMap<ValueId, Value>,
    /// Address of each data-dependent value allocated so far in this
    /// function (earlier parts' are in the handover block).
    dynamic: HashMap<ValueId, Value>,
    /// Where each open guard continues when it skips its range.
    guards: Vec<Block>,
    /// The test and the exit of each open repeated range (a loop).
    repeats: Vec<(Block, Block)>,
    /// What each node costs in read-only data and which kernels it calls.
    footprint: Footprint,
    /// No kernel-library calls: the object references only memcpy/memset.
    portable: bool,
    /// [`PROFILE_HOOK`], in profiled code.
    profile_hook: Option<FuncRef>,
    /// The symbols and described inputs and outputs of a graph compiled
    /// over `--dim` ranges (empty otherwise).
    bound: symbolic::Bound,
}

/// Declares and defines `symbol` (the model's run function) in `module`;
/// returns it with what each node cost in code and read-only data, generated
/// as `mode` says. A plan with several
/// parts gets one local function per part, which `symbol` calls in turn;
/// `limits`' compile-time clock is checked before each.
pub fn define_model<M: Module>(
    module: &mut M,
    graph: &Graph,
    plan: &Plan,
    symbol: &str,
    mode: Mode,
    limits: &Limits,
) -> Result<(FuncId, Footprint), CodegenError> {
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    for _ in 0..3 {
        sig.params.push(AbiParam::new(ptr));
    }
    sig.returns.push(AbiParam::new(types::I32));
    let func_id = module.declare_function(symbol, Linkage::Export, &sig)?;
    symbolic::check_supported(graph, plan, mode.portable)?;
    if ptr != types::I64 && graph.values.iter().any(|v| v.ty.as_ref().is_some_and(|t| t.dtype == DType::String)) {
        return Err(CodegenError::Module("string tensors need a 64-bit target (onnxc_string is 16 bytes)".into()));
    }
    let (const_data, footprint) = define_constants(module, graph, plan, symbol)?;
    let mut function = Function {
        ctx: module.make_context(),
        fctx: FunctionBuilderContext::new(),
        sig,
        graph,
        plan,
        const_data: &const_data,
        carried: Carried { footprint, data_count: 0 },
        symbol,
        mode,
    };
    let mut parts = Vec::new();
    let mut open_guards = 0;
    if plan.handover.is_some() {
        for (k, nodes) in plan.parts.iter().enumerate() {
            limits
                .check_time(&format!("code generation, at {}", graph.nodes[nodes.start].label()))
                .map_err(CodegenError::Limit)?;
            let id = module.declare_function(&format!("{symbol}.part{k}"), Linkage::Local, &function.sig)?;
            open_guards = function.define(module, id, Body::Part { nodes: nodes.clone(), open_guards })?;
            parts.push(id);
        }
    }
    unclosed_guards(open_guards)?;
    limits.check_time("code generation").map_err(CodegenError::Limit)?;
    let body = if parts.is_empty() { Body::Whole } else { Body::Entry { parts: &parts } };
    function.define(module, func_id, body)?;
    Ok((func_id, function.carried.footprint))
}

/// Puts every constant the code reads into read-only data, one object each,
/// and starts the footprint with their sizes.
fn define_constants<M: Module>(
    module: &mut M,
    graph: &Graph,
    plan: &Plan,
    symbol: &str,
) -> Result<(BTreeMap<ValueId, DataId>, Footprint), CodegenError> {
    let mut const_data: BTreeMap<ValueId, DataId> = BTreeMap::new();
    let mut footprint = Footprint::new(graph.nodes.len());
    // Each constant with the index of the node that reads it first (None:
    // copied straight to an output).
    for (v, reader) in constant_reads(graph, plan, 0..graph.nodes.len(), true) {
        if let (ValueDef::Const(t), false) = (&graph.value(v).def, const_data.contains_key(&v)) {
            footprint.add_data(reader, t.byte_size().max(1));
            let id = module.declare_data(&format!("{symbol}.const{}", v.0), Linkage::Local, false, false)?;
            let mut desc = DataDescription::new();
            if t.dtype == DType::String {
                string_records(module, &mut desc, &format!("{symbol}.const{}.bytes", v.0), &t.strings)?;
            } else {
                // Zero-sized data still gets one byte so its address is valid.
                let bytes = if t.data.is_empty() { vec![0u8] } else { t.data.clone() };
                desc.define(bytes.into_boxed_slice());
            }
            desc.set_align(64);
            module.define_data(id, &desc)?;
            const_data.insert(v, id);
        }
    }
    Ok((const_data, footprint))
}

/// The values the nodes in `nodes` read (with the reading node's index),
/// and with `copies` those the plan copies to outputs (with `None`).
fn constant_reads<'g>(
    graph: &'g Graph,
    plan: &'g Plan,
    nodes: Range<usize>,
    copies: bool,
) -> impl Iterator<Item = (ValueId, Option<usize>)> + 'g {
    let copied = if copies { &plan.output_copies[..] } else { &[] };
    graph.nodes[nodes.clone()]
        .iter()
        .zip(nodes)
        .flat_map(|(n, i)| n.inputs.iter().flatten().map(move |&v| (v, Some(i))))
        .chain(copied.iter().map(|&(_, v)| (v, None)))
}

/// What the functions of one model are built from.
struct Function<'g> {
    ctx: cranelift_codegen::Context,
    fctx: FunctionBuilderContext,
    sig: Signature,
    graph: &'g Graph,
    plan: &'g Plan,
    const_data: &'g BTreeMap<ValueId, DataId>,
    carried: Carried,
    symbol: &'g str,
    mode: Mode,
}

/// What one function's lowering passes on to the next.
struct Carried {
    footprint: Footprint,
    /// Parameter blocks made so far (their symbols are numbered).
    data_count: usize,
}

/// What a generated function does.
enum Body<'p> {
    /// The entry point running every node (a plan with one part).
    Whole,
    /// One part of a longer schedule, entered with `open_guards` guarded
    /// ranges open (their conditions are in the handover block).
    Part { nodes: Range<usize>, open_guards: usize },
    /// The entry point of a plan with several parts: checks the context,
    /// calls each part and stops at the first failure.
    Entry { parts: &'p [FuncId] },
}

impl Function<'_> {
    /// Builds and defines function `id`; returns how many guarded ranges
    /// are still open at its end (a part's are continued by the next).
    fn define<M: Module>(&mut self, module: &mut M, id: FuncId, body: Body) -> Result<usize, CodegenError> {
        let (graph, plan) = (self.graph, self.plan);
        self.ctx.func.signature = self.sig.clone();
        let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
        let carried = std::mem::replace(&mut self.carried, Carried { footprint: Footprint::new(0), data_count: 0 });
        let setup = Setup { graph, plan, const_data: self.const_data, symbol: self.symbol, mode: self.mode };
        let (mut env, context) = setup.open(&mut b, module, &body, carried)?;
        if self.mode.profile {
            env.profile_hook = Some(declare_profile_hook(&mut b, module, matches!(body, Body::Part { .. }))?);
        }
        reopen_guards(&mut b, &mut env, plan, &body);
        let nodes = body.nodes(graph);
        for (index, node) in nodes.clone().zip(&graph.nodes[nodes]) {
            // Tags the node's instructions, to measure its code afterwards.
            b.set_srcloc(SourceLoc::new(index as u32 + 1));
            let mut cx = Lower {
                b: &mut b,
                module,
                graph,
                plan,
                node,
                index,
                env: &mut env,
                staged: Staged::default(),
                rows: None,
            };
            let rows = symbolic::node_rows(graph, node);
            rows.and_then(|r| r.map_or(Ok(()), |(rows, most)| cx.set_rows(&rows, most)))
                .and_then(|()| node.op.lower(&mut cx))
                .and_then(|()| cx.check_rows_used())
                .map_err(|message| CodegenError::Op { node: node.label(), message })?;
            if let Some(hook) = env.profile_hook {
                let index = b.ins().iconst(types::I32, index as i64);
                b.ins().call(hook, &[index]);
            }
        }
        b.set_srcloc(SourceLoc::default());
        let open_guards = env.guards.len();
        close_body(&mut b, module, &mut env, plan, &body, context)?;
        if !matches!(body, Body::Part { .. }) {
            copy_outputs(&mut b, module, &env, graph, plan);
            let ptr = module.target_config().pointer_type();
            symbolic::write_output_dims(&mut b, ptr, graph, env.outputs, &env.bound);
        }
        let zero = b.ins().iconst(types::I32, 0);
        b.ins().return_(&[zero]);
        b.switch_to_block(env.fail);
        let code = b.block_params(env.fail)[0];
        b.ins().return_(&[code]);
        b.seal_all_blocks();
        b.finalize(module.target_config());
        module.define_function(id, &mut self.ctx).map_err(|e| CodegenError::Module(format!("{e:?}")))?;
        let mut footprint = env.footprint;
        if let Some(code) = self.ctx.compiled_code() {
            footprint.measure_code(code.code_info().total_size as usize, code.buffer.get_srclocs_sorted());
        }
        self.carried = Carried { footprint, data_count: env.data_count };
        module.clear_context(&mut self.ctx);
        Ok(open_guards)
    }
}

impl Body<'_> {
    /// The schedule's nodes this function lowers.
    fn nodes(&self, graph: &Graph) -> Range<usize> {
        match self {
            Body::Whole => 0..graph.nodes.len(),
            Body::Part { nodes, .. } => nodes.clone(),
            Body::Entry { .. } => 0..0,
        }
    }
}

/// What [`Setup::open`] builds a function's [`Env`] from.
struct Setup<'g> {
    graph: &'g Graph,
    plan: &'g Plan,
    const_data: &'g BTreeMap<ValueId, DataId>,
    symbol: &'g str,
    mode: Mode,
}

impl Setup<'_> {
    /// The entry block: the context checked (or, in a part, its workspace
    /// read), the constants the nodes read declared, the run-time allocator
    /// set up and the composite inputs' tensors found; returns the lowering
    /// environment and the context parameter.
    fn open<M: Module>(
        &self,
        b: &mut FunctionBuilder,
        module: &mut M,
        body: &Body,
        carried: Carried,
    ) -> Result<(Env, Value), CodegenError> {
        let ptr = module.target_config().pointer_type();
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (context, inputs, outputs) = (params[0], params[1], params[2]);
        let fail = b.create_block();
        b.append_block_param(fail, types::I32);
        let layout = ContextLayout::for_pointer(ptr);
        let workspace = match body {
            // The entry point checked the context already.
            Body::Part { .. } => b.ins().load(ptr, MemFlagsData::trusted(), context, layout.workspace),
            Body::Whole | Body::Entry { .. } => check_context(b, ptr, context, self.plan, fail),
        };
        let part = matches!(body, Body::Part { .. });
        let mut consts = HashMap::new();
        for (v, _) in constant_reads(self.graph, self.plan, body.nodes(self.graph), !part) {
            if let Some(&data) = self.const_data.get(&v) {
                consts.entry(v).or_insert_with(|| module.declare_data_in_func(data, b.func));
            }
        }
        let allocator = self.plan.has_dynamic_values().then(|| self.allocator(b, ptr, context, workspace, body));
        // Every function takes the addresses of the tensors in sequence and
        // optional inputs; the entry point's checks fail first.
        let elements = composite::check_inputs(b, ptr, self.graph, inputs, fail)?;
        let bound = symbolic::bind(b, ptr, self.graph, (inputs, outputs), fail)?;
        let parallel = b.ins().iadd_imm_s(context, layout.parallel as i64);
        let env = Env {
            elements,
            inputs,
            outputs,
            workspace,
            parallel,
            fail,
            funcs: HashMap::new(),
            consts,
            symbol_prefix: self.symbol.to_string(),
            data_count: carried.data_count,
            allocator,
            dynamic: HashMap::new(),
            guards: Vec::new(),
            repeats: Vec::new(),
            footprint: carried.footprint,
            portable: self.mode.portable,
            profile_hook: None,
            bound,
        };
        Ok((env, context))
    }

    /// The run-time allocator over the workspace past the planned arena; a
    /// part continues from the handover block's next free byte, which the
    /// entry point of several parts initialises.
    fn allocator(
        &self,
        b: &mut FunctionBuilder,
        ptr: Type,
        context: Value,
        workspace: Value,
        body: &Body,
    ) -> alloc::Allocator {
        let layout = ContextLayout::for_pointer(ptr);
        let have = b.ins().load(ptr, MemFlagsData::trusted(), context, layout.workspace_bytes);
        let hook = b.ins().load(ptr, MemFlagsData::trusted(), context, layout.alloc);
        let user = b.ins().load(ptr, MemFlagsData::trusted(), context, layout.alloc_user);
        let start = match (body, &self.plan.handover) {
            (Body::Part { .. }, Some(h)) => {
                b.ins().load(ptr, MemFlagsData::trusted(), workspace, h.word_offset(0) as i32)
            }
            _ => b.ins().iadd_imm_s(workspace, self.plan.workspace_bytes as i64),
        };
        if let (Body::Entry { .. }, Some(h)) = (body, &self.plan.handover) {
            b.ins().store(MemFlagsData::trusted(), start, workspace, h.word_offset(0) as i32);
        }
        let end = b.ins().iadd(workspace, have);
        alloc::Allocator::new(b, start, end, hook, user)
    }
}

/// Declares [`PROFILE_HOOK`] in the function; the entry point (not a part)
/// calls it first with `u32::MAX`, the start of a run.
fn declare_profile_hook<M: Module>(
    b: &mut FunctionBuilder,
    module: &mut M,
    part: bool,
) -> Result<FuncRef, CodegenError> {
    let mut hook = Signature::new(module.target_config().default_call_conv);
    hook.params.push(AbiParam::new(types::I32));
    let id = module.declare_function(PROFILE_HOOK, Linkage::Import, &hook)?;
    let hook = module.declare_func_in_func(id, b.func);
    if !part {
        let start = b.ins().iconst(types::I32, u32::MAX as i64);
        b.ins().call(hook, &[start]);
    }
    Ok(hook)
}

/// A part reopens the guarded ranges the previous part left open, from
/// their conditions in the handover block.
fn reopen_guards(b: &mut FunctionBuilder, env: &mut Env, plan: &Plan, body: &Body) {
    if let (Body::Part { open_guards, .. }, Some(h)) = (body, &plan.handover) {
        for depth in 0..*open_guards {
            let flag =
                b.ins().load(types::I8, MemFlagsData::trusted(), env.workspace, h.word_offset(h.guards + depth) as i32);
            let (run, skip) = (b.create_block(), b.create_block());
            b.ins().brif(flag, run, &[], skip, &[]);
            b.switch_to_block(run);
            env.guards.push(skip);
        }
    }
}

/// After the nodes: a part closes its open ranges (the next part reopens
/// them) and hands on the allocator's next free byte; the entry point of
/// several parts calls each, stopping at the first failure.
fn close_body<M: Module>(
    b: &mut FunctionBuilder,
    module: &mut M,
    env: &mut Env,
    plan: &Plan,
    body: &Body,
    context: Value,
) -> Result<(), CodegenError> {
    match body {
        Body::Part { .. } => {
            while let Some(skip) = env.guards.pop() {
                b.ins().jump(skip, &[]);
                b.switch_to_block(skip);
            }
            if let (Some(a), Some(h)) = (&env.allocator, &plan.handover) {
                let next = b.use_var(a.bump);
                b.ins().store(MemFlagsData::trusted(), next, env.workspace, h.word_offset(0) as i32);
            }
        }
        Body::Whole => unclosed_guards(env.guards.len())?,
        Body::Entry { parts } => {
            for &part in *parts {
                let callee = module.declare_func_in_func(part, b.func);
                let call = b.ins().call(callee, &[context, env.inputs, env.outputs]);
                let status = b.inst_results(call)[0];
                let next = b.create_block();
                b.ins().brif(status, env.fail, &[status.into()], next, &[]);
                b.switch_to_block(next);
            }
        }
    }
    Ok(())
}

/// Copies the graph outputs placed elsewhere (inputs, constants, outputs
/// listed twice) into the caller's buffers.
fn copy_outputs<M: Module>(b: &mut FunctionBuilder, module: &M, env: &Env, graph: &Graph, plan: &Plan) {
    let ptr = module.target_config().pointer_type();
    for &(k, v) in &plan.output_copies {
        let src = value_ptr(b, ptr, plan, env, v);
        let dst = b.ins().load(ptr, MemFlagsData::trusted(), env.outputs, (k * ptr.bytes() as usize) as i32);
        let n = b.ins().iconst(ptr, value_bytes(graph, v) as i64);
        b.call_memcpy(module.target_config(), dst, src, n);
    }
}

/// Fails when the schedule ends with guarded ranges still open.
fn unclosed_guards(open: usize) -> Result<(), CodegenError> {
    match open {
        0 => Ok(()),
        n => Err(CodegenError::Module(format!("{n} guarded ranges are not closed"))),
    }
}

/// Checks the caller's context (the workspace must be large enough and
/// 8-byte aligned, else `fail` with [`status::BAD_CONTEXT`]); returns the
/// workspace's address.
fn check_context(b: &mut FunctionBuilder, ptr: Type, context: Value, plan: &Plan, fail: Block) -> Value {
    let layout = ContextLayout::for_pointer(ptr);
    let workspace = b.ins().load(ptr, MemFlagsData::trusted(), context, layout.workspace);
    let have = b.ins().load(ptr, MemFlagsData::trusted(), context, layout.workspace_bytes);
    let too_small = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, have, plan.workspace_bytes as i64);
    let low_bits = b.ins().band_imm_u(workspace, 7);
    let misaligned = b.ins().icmp_imm_u(IntCC::NotEqual, low_bits, 0);
    let bad = b.ins().bor(too_small, misaligned);
    let code = b.ins().iconst(types::I32, status::BAD_CONTEXT as i64);
    let ok = b.create_block();
    b.ins().brif(bad, fail, &[code.into()], ok, &[]);
    b.switch_to_block(ok);
    workspace
}

/// Describes a constant string tensor: its bytes in one read-only object
/// `bytes_symbol`, and `desc` as its `onnxc_string` records, whose `data`
/// fields are relocations to those bytes (resolved by the JIT or the linker).
fn string_records<M: Module>(
    module: &mut M,
    desc: &mut DataDescription,
    bytes_symbol: &str,
    strings: &[Vec<u8>],
) -> Result<(), CodegenError> {
    let bytes_id = module.declare_data(bytes_symbol, Linkage::Local, false, false)?;
    let mut bytes_desc = DataDescription::new();
    let mut all: Vec<u8> = strings.concat();
    all.push(0); // never empty, so its address is valid
    bytes_desc.define(all.into_boxed_slice());
    module.define_data(bytes_id, &bytes_desc)?;
    let bytes = module.declare_data_in_data(bytes_id, desc);
    let record = DType::String.size();
    let mut records = vec![0u8; (strings.len() * record).max(1)];
    let mut at = 0usize;
    for (i, s) in strings.iter().enumerate() {
        let offset = u32::try_from(i * record).map_err(|_| CodegenError::Module("string constant too large".into()))?;
        desc.write_data_addr(offset, bytes, at as i64);
        records[i * record + 8..(i + 1) * record].copy_from_slice(&(s.len() as u64).to_le_bytes());
        at += s.len();
    }
    desc.define(records.into_boxed_slice());
    Ok(())
}

fn value_bytes(graph: &Graph, v: ValueId) -> usize {
    graph.concrete(v).and_then(|(dtype, shape)| dtype.bytes_for(crate::ir::shape::element_count(&shape)?)).unwrap_or(0)
}

fn value_ptr(b: &mut FunctionBuilder, ptr: Type, plan: &Plan, env: &Env, v: ValueId) -> Value {
    let slot = |k: usize| (k * ptr.bytes() as usize) as i32;
    match plan.locs[v.index()] {
        Loc::Input(k) if env.bound.inputs.contains_key(&k) => env.bound.inputs[&k],
        Loc::Input(k) => b.ins().load(ptr, MemFlagsData::trusted(), env.inputs, slot(k)),
        // Checked on entry, before any node runs.
        Loc::InputElement => env.elements.get(&v).copied().unwrap_or_else(|| b.ins().iconst(ptr, 0)),
        Loc::Output(k) if env.bound.outputs.contains_key(&k) => env.bound.outputs[&k],
        Loc::Output(k) => b.ins().load(ptr, MemFlagsData::trusted(), env.outputs, slot(k)),
        Loc::Const => {
            let gv = env.consts[&v];
            b.ins().symbol_value(ptr, gv)
        }
        Loc::Workspace(off) => b.ins().iadd_imm_s(env.workspace, off as i64),
        Loc::Alias(src) => value_ptr(b, ptr, plan, env, src),
        Loc::Within(whole, offset) => {
            let base = value_ptr(b, ptr, plan, env, whole);
            b.ins().iadd_imm_s(base, offset as i64)
        }
        // Allocated by its producer before anything addresses it: in this
        // function, or in an earlier part, which left the address behind.
        Loc::Dynamic => {
            match (env.dynamic.get(&v), plan.handover.as_ref().and_then(|h| Some(h.word_offset(*h.dynamic.get(&v)?)))) {
                (Some(&p), _) => p,
                (None, Some(offset)) => b.ins().load(ptr, MemFlagsData::trusted(), env.workspace, offset as i32),
                (None, None) => b.ins().iconst(ptr, 0),
            }
        }
        // Never asked for: lowerings only address their own inputs/outputs.
        Loc::Unused => b.ins().iconst(ptr, 0),
    }
}

/// What one operator's lowering sees: its node, where its values live, and
/// helpers to emit code.
pub struct Lower<'a, 'f> {
    pub b: &'a mut FunctionBuilder<'f>,
    module: &'a mut dyn Module,
    graph: &'a Graph,
    plan: &'a Plan,
    node: &'a Node,
    index: usize,
    env: &'a mut Env,
    staged: Staged,
    /// The run-time row count of a node of symbolic shape ([`symbolic`]).
    rows: Option<symbolic::Rows>,
}

/// Inputs and outputs redirected to wider copies in the node's scratch (see
/// `ops::staging`): the lowering sees them with the copy's type (f32 for
/// f16/bf16/float4, i32 for int4/int2) at the staged address.
#[derive(Default)]
struct Staged {
    inputs: HashMap<usize, (Value, DType)>,
    outputs: HashMap<usize, (Value, DType)>,
    /// Bytes at the start of the scratch area already handed out.
    scratch_used: usize,
}

/// An open counted loop (see [`Lower::loop_begin`]).
pub struct Loop {
    header: Block,
    exit: Block,
    /// The induction variable, 0..count, pointer-sized.
    pub index: Value,
}

impl<'f> Lower<'_, 'f> {
    pub fn ptr_type(&self) -> Type {
        self.module.target_config().pointer_type()
    }

    /// Shorthand for `self.b.ins()`.
    pub fn ins(&mut self) -> cranelift_frontend::FuncInstBuilder<'_, 'f> {
        self.b.ins()
    }

    pub fn node(&self) -> &Node {
        self.node
    }

    /// True when the kernel library is not available (portable mode): the
    /// lowering must emit its work in Cranelift alone.
    pub fn portable(&self) -> bool {
        self.env.portable
    }

    /// True when the target has 128-bit float vectors (x86-64 SSE2,
    /// aarch64 NEON): elementwise loops may then run four f32 at a time.
    pub fn has_f32x4(&self) -> bool {
        matches!(
            self.module.isa().triple().architecture,
            target_lexicon::Architecture::X86_64 | target_lexicon::Architecture::Aarch64(_)
        )
    }

    /// True when the target fuses a multiply and an add into one
    /// instruction (aarch64; x86-64 when its flags say FMA), so `fma` is
    /// an instruction, not a library call.
    pub fn has_fma(&self) -> bool {
        self.module.isa().has_native_fma()
    }

    fn input_id(&self, i: usize) -> Result<ValueId, String> {
        self.node.inputs.get(i).copied().flatten().ok_or_else(|| format!("input {i} is required"))
    }

    pub fn has_input(&self, i: usize) -> bool {
        self.node.inputs.get(i).copied().flatten().is_some()
    }

    pub fn input_count(&self) -> usize {
        self.node.inputs.len()
    }

    pub fn output_count(&self) -> usize {
        self.node.outputs.len()
    }

    /// True when output `i` is present and something reads it (a node or
    /// the caller). Lowerings write their optional outputs only then: an
    /// unread one (Dropout's mask, MaxPool's indices) is nobody's business.
    pub fn has_output(&self, i: usize) -> bool {
        self.node.outputs.get(i).is_some_and(|&v| {
            !self.graph.value(v).name.is_empty()
                && (self.graph.outputs.contains(&v) || self.graph.nodes.iter().any(|n| n.inputs.contains(&Some(v))))
        })
    }

    /// Element type and shape of input `i` (its copy's type once staged).
    pub fn input_type(&self, i: usize) -> Result<(DType, Vec<usize>), String> {
        let v = self.input_id(i)?;
        let (dtype, shape) = self.graph.concrete(v).ok_or_else(|| format!("input {i} has no known shape"))?;
        Ok((self.staged.inputs.get(&i).map_or(dtype, |s| s.1), shape))
    }

    /// Element type and shape of output `i` (its copy's type once staged).
    pub fn output_type(&self, i: usize) -> Result<(DType, Vec<usize>), String> {
        let v = *self.node.outputs.get(i).ok_or_else(|| format!("output {i} does not exist"))?;
        let (dtype, shape) = self.graph.concrete(v).ok_or_else(|| format!("output {i} has no known shape"))?;
        Ok((self.staged.outputs.get(&i).map_or(dtype, |s| s.1), shape))
    }

    /// The compile-time value of input `i`, if it is a constant (and not
    /// staged: a staged input's constant bytes are not its f32 copy's).
    pub fn const_input(&self, i: usize) -> Option<&crate::ir::Tensor> {
        if self.staged.inputs.contains_key(&i) {
            return None;
        }
        self.node.inputs.get(i).copied().flatten().and_then(|v| self.graph.const_value(v))
    }

    fn ptr(&mut self, v: ValueId) -> Value {
        let ptr = self.ptr_type();
        value_ptr(self.b, ptr, self.plan, self.env, v)
    }

    /// Address of input `i`'s first element (of its f32 copy once staged).
    pub fn input_ptr(&mut self, i: usize) -> Result<Value, String> {
        let v = self.input_id(i)?;
        Ok(match self.staged.inputs.get(&i) {
            Some(&(staged, _)) => staged,
            None => self.ptr(v),
        })
    }

    /// Address of input `i`, or a null pointer when it is omitted.
    pub fn opt_input_ptr(&mut self, i: usize) -> Value {
        match self.input_ptr(i) {
            Ok(p) => p,
            Err(_) => self.iconst(0),
        }
    }

    /// Address of output `i`'s first element (of its f32 copy once staged).
    pub fn output_ptr(&mut self, i: usize) -> Result<Value, String> {
        let v = *self.node.outputs.get(i).ok_or_else(|| format!("output {i} does not exist"))?;
        Ok(match self.staged.outputs.get(&i) {
            Some(&(staged, _)) => staged,
            None => self.ptr(v),
        })
    }

    /// From now on input `i` reads as `dtype` at `ptr` (see [`Staged`]).
    pub fn stage_input(&mut self, i: usize, ptr: Value, dtype: DType) {
        self.staged.inputs.insert(i, (ptr, dtype));
    }

    /// From now on output `i` writes as `dtype` at `ptr` (see [`Staged`]).
    pub fn stage_output(&mut self, i: usize, ptr: Value, dtype: DType) {
        self.staged.outputs.insert(i, (ptr, dtype));
    }

    /// Ends the redirections: inputs and outputs are the node's own again.
    pub fn unstage(&mut self) {
        self.staged = Staged::default();
    }

    /// True when input `i` was written in place inside output 0 (a
    /// Concat's part, see [`crate::plan`]), so there is nothing to copy.
    pub fn input_is_in_output(&self, i: usize) -> bool {
        let (input, output) = (self.node.inputs.get(i).copied().flatten(), self.node.outputs.first());
        input
            .zip(output)
            .is_some_and(|(v, &out)| matches!(self.plan.locs[v.index()], Loc::Within(whole, _) if whole == out))
    }

    /// True when output 0 of a view operator needs its bytes copied (the
    /// plan could not alias it, e.g. because it is a graph output).
    pub fn view_needs_copy(&self) -> bool {
        self.node.outputs.first().is_some_and(|&v| !matches!(self.plan.locs[v.index()], Loc::Alias(_)))
    }

    /// Address of this node's scratch area (planned from `scratch_bytes`),
    /// past any part handed out by [`Lower::reserve_scratch`].
    /// The address of the context's `parallel_for` hook pair
    /// (`onnxc_runtime::Parallel`), for kernels that split their work.
    pub fn parallel_ptr(&self) -> Ref<onnxc_runtime::Parallel> {
        Ref::to(self.env.parallel)
    }

    pub fn scratch_ptr(&mut self) -> Result<Value, String> {
        let off = self.plan.scratch[self.index].ok_or("no scratch area was planned")?;
        Ok(self.b.ins().iadd_imm_s(self.env.workspace, (off + self.staged.scratch_used) as i64))
    }

    /// Takes the next `bytes` of the scratch area for the caller; later
    /// [`Lower::scratch_ptr`] calls start after them. Asking for 0 bytes
    /// (an empty tensor's copy) gives a null pointer.
    pub fn reserve_scratch(&mut self, bytes: usize) -> Result<Value, String> {
        if bytes == 0 {
            return Ok(self.iconst(0));
        }
        let ptr = self.scratch_ptr()?;
        self.staged.scratch_used += bytes;
        Ok(ptr)
    }

    pub fn iconst(&mut self, v: i64) -> Value {
        let ptr = self.ptr_type();
        self.b.ins().iconst(ptr, v)
    }

    /// Places a kernel's parameter block in read-only data; returns its address.
    pub fn params<P: bytemuck::Pod>(&mut self, p: &P) -> Result<Ref<P>, String> {
        if let Some(copy) = self.params_at_run_time(p)? {
            return Ok(Ref::to(copy));
        }
        self.table(std::slice::from_ref(p)).map(Ref::to)
    }

    /// Places a table of plain records (a kernel's compiled lookup data) in
    /// read-only data; returns its address (valid even when it is empty).
    pub fn table<P: bytemuck::Pod>(&mut self, items: &[P]) -> Result<Value, String> {
        self.data_bytes(bytemuck::cast_slice(items))
    }

    /// Places bytes the compiler prepared for a kernel (a table, a string
    /// list) in read-only data, 16-byte aligned; returns their address
    /// (valid even when there are none).
    pub fn data_bytes(&mut self, bytes: &[u8]) -> Result<Value, String> {
        self.env.data_count += 1;
        let name = format!("{}.params{}", self.env.symbol_prefix, self.env.data_count);
        let id = self.module.declare_data(&name, Linkage::Local, false, false).map_err(|e| format!("{e:?}"))?;
        let mut desc = DataDescription::new();
        let bytes = if bytes.is_empty() { vec![0u8] } else { bytes.to_vec() };
        self.env.footprint.add_data(Some(self.index), bytes.len());
        desc.define(bytes.into_boxed_slice());
        desc.set_align(16);
        self.module.define_data(id, &desc).map_err(|e| format!("{e:?}"))?;
        let gv = self.module.declare_data_in_func(id, self.b.func);
        let ptr = self.ptr_type();
        Ok(self.b.ins().symbol_value(ptr, gv))
    }

    fn kernel_ref<A: KernelArgs, R: KernelValue>(&mut self, kernel: Kernel<A, R>) -> Result<FuncRef, String> {
        if let Some(&f) = self.env.funcs.get(kernel.name) {
            return Ok(f);
        }
        let (params, ret) = kernel.abi();
        let ptr = self.ptr_type();
        let abi = |t: AbiType| match t {
            AbiType::Ptr => ptr,
            AbiType::I32 => types::I32,
            AbiType::I64 => types::I64,
            AbiType::F32 => types::F32,
            AbiType::F64 => types::F64,
        };
        let mut s = Signature::new(self.module.target_config().default_call_conv);
        s.params.extend(params.iter().map(|&t| AbiParam::new(abi(t))));
        s.returns.push(AbiParam::new(abi(ret)));
        let id = self.module.declare_function(kernel.name, Linkage::Import, &s).map_err(|e| format!("{e:?}"))?;
        let f = self.module.declare_func_in_func(id, self.b.func);
        self.env.funcs.insert(kernel.name.to_string(), f);
        Ok(f)
    }

    /// Calls a function of the kernel library; returns its result. In
    /// portable mode this is the error that names the operator (and, for
    /// the kernels that need std, says that the target has none).
    pub fn call<A: KernelArgs, R: KernelValue>(&mut self, kernel: Kernel<A, R>, args: A) -> Result<Value, String> {
        let name = kernel.name;
        if self.env.portable && needs_std(name) {
            return Err(format!(
                "{} needs std (the kernel {name} of libonnxc_runtime_std.a), which onnxc only provides for the host, \
                 not in portable mode",
                self.node.op.name()
            ));
        }
        if self.env.portable {
            return Err(format!(
                "{} has no portable lowering yet (it needs the kernel library's {name})",
                self.node.op.name()
            ));
        }
        let f = self.kernel_ref(kernel)?;
        self.env.footprint.add_kernel(self.index, name);
        let call = self.b.ins().call(f, &args.values());
        Ok(self.b.inst_results(call)[0])
    }

    /// Calls a kernel that returns a status and leaves the model with it
    /// (tagged with this node) when it is nonzero.
    pub fn call_checked<A: KernelArgs>(&mut self, kernel: Kernel<A, I32>, args: A) -> Result<(), String> {
        let status = self.call(kernel, args)?;
        self.fail_if_nonzero(status);
        Ok(())
    }

    /// Calls a counting kernel (it returns a count, or `-status` when it
    /// fails) and leaves the model on failure; returns the count as a
    /// pointer-sized integer.
    pub fn call_count<A: KernelArgs>(&mut self, kernel: Kernel<A, I64>, args: A) -> Result<Value, String> {
        let n = self.call(kernel, args)?;
        let negative = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
        let status = self.b.ins().ineg(n);
        let status = self.b.ins().ireduce(types::I32, status);
        let zero = self.b.ins().iconst(types::I32, 0);
        let status = self.b.ins().select(negative, status, zero);
        self.fail_if_nonzero(status);
        let ptr = self.ptr_type();
        Ok(if ptr == types::I64 { n } else { self.b.ins().ireduce(ptr, n) })
    }

    /// Leaves the model with `status` (an i32 kernel status) when it is nonzero.
    pub fn fail_if_nonzero(&mut self, status: Value) {
        let tagged = self.b.ins().bor_imm_s(status, ((self.index as i64) + 1) << 8);
        let cont = self.b.create_block();
        self.b.ins().brif(status, self.env.fail, &[tagged.into()], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// Leaves the model with `code` when `cond` (any integer) is nonzero.
    pub fn fail_if(&mut self, cond: Value, code: i32) {
        let tagged = self.b.ins().iconst(types::I32, (code as i64) | (((self.index as i64) + 1) << 8));
        let cont = self.b.create_block();
        self.b.ins().brif(cond, self.env.fail, &[tagged.into()], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// Runs the following nodes, up to [`Lower::end_guard`], only when the
    /// bool scalar input `i` is `when`.
    pub fn begin_guard(&mut self, i: usize, when: bool) -> Result<(), String> {
        let cond = self.input_ptr(i)?;
        let byte = self.b.ins().load(types::I8, MemFlagsData::trusted(), cond, 0);
        let cc = if when { IntCC::NotEqual } else { IntCC::Equal };
        let taken = self.b.ins().icmp_imm_u(cc, byte, 0);
        if let Some(h) = &self.plan.handover {
            // A later part may have to reopen this range.
            let word = h.word_offset(h.guards + self.env.guards.len()) as i32;
            self.b.ins().store(MemFlagsData::trusted(), taken, self.env.workspace, word);
        }
        let (run, skip) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(taken, run, &[], skip, &[]);
        self.b.switch_to_block(run);
        self.env.guards.push(skip);
        Ok(())
    }

    /// Closes the innermost [`Lower::begin_guard`].
    pub fn end_guard(&mut self) -> Result<(), String> {
        let skip = self.env.guards.pop().ok_or("no guarded range is open")?;
        self.b.ins().jump(skip, &[]);
        self.b.switch_to_block(skip);
        Ok(())
    }

    /// Bytes of input `i` (of its static shape).
    pub fn input_bytes(&self, i: usize) -> Result<usize, String> {
        let (dtype, shape) = self.input_type(i)?;
        crate::ir::shape::element_count(&shape)
            .and_then(|n| dtype.bytes_for(n))
            .ok_or_else(|| format!("input {i} is too large"))
    }

    /// True when inputs `a` and `b` are the same bytes (one value, or views
    /// of one value).
    pub fn inputs_share_bytes(&self, a: usize, b: usize) -> bool {
        let root = |i: usize| {
            let mut v = self.node.inputs.get(i).copied().flatten()?;
            while let Loc::Alias(src) = self.plan.locs[v.index()] {
                v = src;
            }
            Some(v)
        };
        root(a).is_some() && root(a) == root(b)
    }

    /// Opens a range of the schedule that repeats while the int64 at
    /// `iteration` is below the int64 at `limit` (when given) and the bool
    /// at `cond` is true; the range ends at [`Lower::end_repeat`], which
    /// goes back to the test.
    pub fn begin_repeat(&mut self, limit: Option<Value>, iteration: Value, cond: Value) {
        let flags = MemFlagsData::trusted();
        let (test, body, exit) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().jump(test, &[]);
        self.b.switch_to_block(test);
        let byte = self.b.ins().load(types::I8, flags, cond, 0);
        let mut go = self.b.ins().icmp_imm_u(IntCC::NotEqual, byte, 0);
        if let Some(limit) = limit {
            let (i, m) =
                (self.b.ins().load(types::I64, flags, iteration, 0), self.b.ins().load(types::I64, flags, limit, 0));
            let below = self.b.ins().icmp(IntCC::SignedLessThan, i, m);
            go = self.b.ins().band(go, below);
        }
        self.b.ins().brif(go, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        self.env.repeats.push((test, exit));
    }

    /// Closes the innermost [`Lower::begin_repeat`]: back to its test, and
    /// the code that follows runs once the loop is done.
    pub fn end_repeat(&mut self) -> Result<(), String> {
        let (test, exit) = self.env.repeats.pop().ok_or("no repeated range is open")?;
        self.b.ins().jump(test, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// Copies `bytes` bytes from `src` to `dst`.
    pub fn copy_bytes(&mut self, dst: Value, src: Value, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let n = self.iconst(bytes as i64);
        self.copy_bytes_dynamic(dst, src, n);
    }

    /// Copies a run-time number of bytes (a pointer-sized value).
    pub fn copy_bytes_dynamic(&mut self, dst: Value, src: Value, bytes: Value) {
        let config = self.module.target_config();
        self.b.call_memcpy(config, dst, src, bytes);
    }

    /// Opens `for index in 0..count`; emit the body, then call [`Lower::loop_end`].
    pub fn loop_begin(&mut self, count: usize) -> Loop {
        self.open_loop(&mut |b, index| b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, index, count as i64))
    }

    /// [`Lower::loop_begin`] for a count known only at run time (a
    /// pointer-sized value).
    pub fn loop_begin_dynamic(&mut self, count: Value) -> Loop {
        self.open_loop(&mut |b, index| b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, index, count))
    }

    /// Opens a counted loop that ends when `done(index)` is nonzero.
    fn open_loop(&mut self, done: &mut dyn FnMut(&mut FunctionBuilder<'f>, Value) -> Value) -> Loop {
        let ptr = self.ptr_type();
        let header = self.b.create_block();
        let body = self.b.create_block();
        let exit = self.b.create_block();
        let index = self.b.append_block_param(header, ptr);
        let zero = self.b.ins().iconst(ptr, 0);
        self.b.ins().jump(header, &[zero.into()]);
        self.b.switch_to_block(header);
        let done = done(self.b, index);
        self.b.ins().brif(done, exit, &[], body, &[]);
        self.b.switch_to_block(body);
        Loop { header, exit, index }
    }

    pub fn loop_end(&mut self, l: Loop) {
        let next = self.b.ins().iadd_imm_s(l.index, 1);
        self.b.ins().jump(l.header, &[next.into()]);
        self.b.switch_to_block(l.exit);
    }
}

/// True for the kernels of `onnxc-runtime-std` (ImageDecoder's): they need
/// std, so only the host's `libonnxc_runtime_std.a` has them.
pub fn needs_std(kernel: &str) -> bool {
    onnxc_runtime_std::kernel(kernel).is_some()
}

/// The Cranelift type that holds one element of `dtype` in registers and memory.
pub fn clif_type(dtype: DType) -> Type {
    match dtype {
        DType::F32 => types::F32,
        DType::F64 => types::F64,
        DType::I64 | DType::U64 => types::I64,
        DType::I32 | DType::U32 => types::I32,
        DType::I16 | DType::U16 | DType::F16 | DType::BF16 => types::I16,
        DType::I8 | DType::U8 | DType::Bool => types::I8,
        // Bit patterns (see `ops::elementwise::widen`); packed types are
        // only ever addressed as bytes.
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::F8E8M0 => types::I8,
        DType::U4 | DType::I4 | DType::U2 | DType::I2 | DType::F4E2M1 => types::I8,
        // An `onnxc_string` record moves as one 16-byte unit.
        DType::String => types::I128,
    }
}
