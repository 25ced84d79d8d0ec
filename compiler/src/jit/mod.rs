//! Compiles a planned graph into this process and runs it. Serves `run`,
//! `test`, `bench` and compile-time constant folding; the code is exactly
//! what the object file would contain, placed by [`loader`].

mod loader;

use crate::codegen::{self, CodegenError};
use crate::host::buffer::Placement;
use crate::host::call::{Datum, Interface, RunFn};
use crate::ir::{Graph, Node, Tensor, ValueDef};
use crate::limits::Limits;
use crate::plan::{self, Plan};
use cranelift_codegen::settings::{self, Configurable};
use loader::{LoadedCode, MemoryModule};

/// A model compiled into this process. `run` points into `_code`, which
/// keeps it mapped; finished code keeps no state between calls (no mutable
/// globals, every byte it writes is in the caller's buffers), so calls may
/// overlap.
pub struct JitModel {
    _code: LoadedCode,
    run: RunFn,
    interface: Interface,
}

pub fn host_isa() -> Result<std::sync::Arc<dyn cranelift_codegen::isa::TargetIsa>, String> {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| f.set(k, v).map_err(|e| format!("{k}: {e}"));
    set(&mut flags, "opt_level", "speed")?;
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    let isa = cranelift_native::builder().map_err(|e| e.to_string())?;
    isa.finish(settings::Flags::new(flags)).map_err(|e| e.to_string())
}

/// JIT-compiles a graph that went through `infer` and `plan`.
pub fn compile(graph: &Graph, plan: &Plan) -> Result<JitModel, CodegenError> {
    compile_with(graph, plan, false, &Limits::default())
}

/// [`compile`], in portable mode when `portable` (no kernel-library calls),
/// stopping once `limits`' compile time is spent.
pub fn compile_with(graph: &Graph, plan: &Plan, portable: bool, limits: &Limits) -> Result<JitModel, CodegenError> {
    compile_in(graph, plan, codegen::Mode { portable, profile: false }, limits)
}

/// [`compile`] with every node's time charged through [`crate::host::profile`].
pub fn compile_profiled(graph: &Graph, plan: &Plan, limits: &Limits) -> Result<JitModel, CodegenError> {
    compile_in(graph, plan, codegen::Mode { portable: false, profile: true }, limits)
}

fn compile_in(graph: &Graph, plan: &Plan, mode: codegen::Mode, limits: &Limits) -> Result<JitModel, CodegenError> {
    let mut module = MemoryModule::new(host_isa().map_err(CodegenError::Module)?, Box::new(kernel_address));
    let (id, _) = codegen::define_model(&mut module, graph, plan, "onnxc_jit_run", mode, limits)?;
    let code = module.load().map_err(CodegenError::Module)?;
    // SAFETY: `define_model` gave the function exactly the `RunFn` signature.
    let run = unsafe { std::mem::transmute::<*const u8, RunFn>(code.function(id)) };
    let interface = Interface::of(graph, plan).map_err(CodegenError::Module)?;
    Ok(JitModel { _code: code, run, interface })
}

/// The symbols compiled code imports: the kernels and the profiling hook.
fn kernel_address(name: &str) -> Option<*const u8> {
    if name == codegen::PROFILE_HOOK {
        return Some(crate::host::profile::onnxc_profile_node as *const u8);
    }
    let kernels = onnxc_runtime::abi::KERNELS.iter().chain(onnxc_runtime_std::KERNELS);
    kernels.into_iter().find(|k| k.name == name).map(|k| k.address)
}

impl JitModel {
    pub fn interface(&self) -> &Interface {
        &self.interface
    }

    /// Runs the model on tensor `inputs` (in graph-input order) when all
    /// its inputs and outputs are tensors.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        let given: Vec<Datum> = inputs.iter().cloned().map(Datum::Tensor).collect();
        let outputs = self.interface.call(self.run, &given, None, Placement::Heap)?;
        outputs
            .into_iter()
            .map(|d| d.into_tensor().ok_or_else(|| "an output is a sequence or optional".to_string()))
            .collect()
    }

    /// Runs on any inputs (tensors, sequences, optionals), with a
    /// workspace of exactly `workspace` bytes and no allocator hook when
    /// given, and every buffer from `placement` (e.g. against guard pages).
    pub fn run_data(
        &self,
        inputs: &[Datum],
        workspace: Option<usize>,
        placement: Placement,
    ) -> Result<Vec<Datum>, String> {
        self.interface.call(self.run, inputs, workspace, placement)
    }

    /// Runs in `workspace` (from `interface().workspace`), which the caller
    /// keeps across calls.
    pub fn run_in(&self, inputs: &[Datum], workspace: &crate::host::call::Workspace) -> Result<Vec<Datum>, String> {
        self.interface.call_in(self.run, inputs, workspace, Placement::Heap)
    }

    /// A call on `inputs` in `workspace` to run repeatedly, its inputs
    /// placed and outputs allocated once ([`crate::host::call::Interface::prepare`]).
    pub fn prepare<'a>(
        &'a self,
        inputs: &[Datum],
        workspace: &'a crate::host::call::Workspace,
    ) -> Result<crate::host::call::PreparedCall<'a>, String> {
        self.interface.prepare(self.run, inputs, workspace, Placement::Heap)
    }
}

/// Evaluates one node whose inputs are all constants (constant folding).
pub fn eval_node(graph: &Graph, node: &Node) -> Result<Vec<Tensor>, String> {
    let mut g = Graph::default();
    let mut inputs = Vec::new();
    for input in &node.inputs {
        inputs.push(match input {
            None => None,
            Some(v) => {
                let value = graph.value(*v);
                Some(g.add_value(value.name.clone(), value.ty.clone(), value.def.clone()))
            }
        });
    }
    let outputs: Vec<_> = node
        .outputs
        .iter()
        .map(|&v| {
            let value = graph.value(v);
            g.add_value(value.name.clone(), value.ty.clone(), ValueDef::Computed)
        })
        .collect();
    g.outputs = outputs.clone();
    g.nodes.push(Node { name: node.name.clone(), op: node.op.clone(), inputs, outputs });
    let plan = plan::plan(&g).map_err(|e| e.to_string())?;
    let model = compile(&g, &plan).map_err(|e| e.to_string())?;
    model.run(&[])
}

/// A function `f64 -> f64` compiled into this process from the instructions
/// a closure emits: unit tests of an instruction sequence (such as
/// `ops::portable_math`) run exactly the code the compiler generates,
/// without a model around it.
#[cfg(test)]
pub struct ScalarFn {
    _code: LoadedCode,
    f: extern "C" fn(f64) -> f64,
}

#[cfg(test)]
impl ScalarFn {
    /// Compiles `body`, which gets the argument and returns the result.
    pub fn compile(
        body: impl FnOnce(&mut codegen::FunctionBuilder, codegen::Value) -> codegen::Value,
    ) -> Result<ScalarFn, CodegenError> {
        use codegen::{types, InstBuilder};
        use cranelift_codegen::ir::AbiParam;
        use cranelift_module::{Linkage, Module};
        let isa = host_isa().map_err(CodegenError::Module)?;
        let mut module = MemoryModule::new(isa, Box::new(|_: &str| None));
        let mut ctx = module.make_context();
        ctx.func.signature.params.push(AbiParam::new(types::F64));
        ctx.func.signature.returns.push(AbiParam::new(types::F64));
        let id = module.declare_function("onnxc_scalar", Linkage::Local, &ctx.func.signature)?;
        let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
        let mut b = codegen::FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let x = b.block_params(entry)[0];
        let y = body(&mut b, x);
        b.ins().return_(&[y]);
        b.finalize(module.target_config());
        module.define_function(id, &mut ctx)?;
        let code = module.load().map_err(CodegenError::Module)?;
        // SAFETY: the function was declared with one f64 parameter and one
        // f64 result, in the host's C calling convention.
        let f = unsafe { std::mem::transmute::<*const u8, extern "C" fn(f64) -> f64>(code.function(id)) };
        Ok(ScalarFn { _code: code, f })
    }

    pub fn call(&self, x: f64) -> f64 {
        (self.f)(x)
    }
}
