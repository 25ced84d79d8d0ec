//! Compiles a planned graph into this process with cranelift-jit and runs
//! it. Serves `run`, `test`, `bench` and compile-time constant folding; the
//! code is exactly what the object file would contain.

use crate::codegen::{self, CodegenError};
use crate::ir::{DType, Graph, Node, Tensor, ValueDef};
use crate::plan::{self, Plan};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};

/// The generated code's view of the caller's context (`onnxc_context` in
/// the C header): field order and types must match `codegen`.
#[repr(C)]
pub struct RunContext {
    pub workspace: *mut u8,
    pub workspace_bytes: usize,
    pub alloc: Option<unsafe extern "C" fn(*mut u8, usize, usize) -> *mut u8>,
    pub alloc_user: *mut u8,
}

pub type RunFn = unsafe extern "C" fn(*const RunContext, *const *const u8, *const *mut u8) -> i32;

/// A model compiled into this process.
pub struct JitModel {
    module: Option<JITModule>,
    run: RunFn,
    workspace_bytes: usize,
    inputs: Vec<(String, DType, Vec<usize>)>,
    outputs: Vec<(String, DType, Vec<usize>)>,
    node_names: Vec<String>,
}

impl Drop for JitModel {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: `run` is not reachable once the model is dropped.
            unsafe { module.free_memory() };
        }
    }
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

fn io_types(graph: &Graph, ids: &[crate::ir::ValueId]) -> Result<Vec<(String, DType, Vec<usize>)>, String> {
    ids.iter()
        .map(|&v| {
            let (dtype, shape) =
                graph.concrete(v).ok_or_else(|| format!("value \"{}\" has no known shape", graph.value(v).name))?;
            Ok((graph.value(v).name.clone(), dtype, shape))
        })
        .collect()
}

/// JIT-compiles a graph that went through `infer` and `plan`.
pub fn compile(graph: &Graph, plan: &Plan) -> Result<JitModel, CodegenError> {
    let isa = host_isa().map_err(CodegenError::Module)?;
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    for k in onnxc_runtime::abi::KERNELS {
        builder.symbol(k.name, k.address);
    }
    let mut module = JITModule::new(builder);
    let id = codegen::define_model(&mut module, graph, plan, "onnxc_jit_run")?;
    module.finalize_definitions()?;
    let code = module.get_finalized_function(id);
    // SAFETY: `define_model` gave the function exactly the `RunFn` signature.
    let run = unsafe { std::mem::transmute::<*const u8, RunFn>(code) };
    Ok(JitModel {
        module: Some(module),
        run,
        workspace_bytes: plan.workspace_bytes,
        inputs: io_types(graph, &graph.inputs).map_err(CodegenError::Module)?,
        outputs: io_types(graph, &graph.outputs).map_err(CodegenError::Module)?,
        node_names: graph.nodes.iter().map(|n| n.label()).collect(),
    })
}

/// Calls compiled code through its C ABI with checked inputs; shared by the
/// JIT and by models loaded from a shared library.
pub fn call_model(
    run: RunFn,
    workspace_bytes: usize,
    inputs: &[(String, DType, Vec<usize>)],
    outputs: &[(String, DType, Vec<usize>)],
    node_names: &[String],
    given: &[Tensor],
) -> Result<Vec<Tensor>, String> {
    if given.len() != inputs.len() {
        return Err(format!("the model takes {} inputs, {} were given", inputs.len(), given.len()));
    }
    for (t, (name, dtype, shape)) in given.iter().zip(inputs) {
        if t.dtype != *dtype || &t.shape != shape {
            return Err(format!("input \"{name}\" must be {dtype}{shape:?}, got {}{:?}", t.dtype, t.shape));
        }
    }
    let mut outs: Vec<Tensor> = outputs
        .iter()
        .map(|(name, dtype, shape)| {
            Tensor::zeros(*dtype, shape.clone()).ok_or_else(|| format!("output \"{name}\" is too large"))
        })
        .collect::<Result<_, _>>()?;
    // 64-byte aligned workspace from u64 words (+ 64 bytes of slack).
    let mut workspace = vec![0u64; workspace_bytes.div_ceil(8) + 8];
    let base = workspace.as_mut_ptr() as *mut u8;
    let aligned = unsafe { base.add(base.align_offset(64)) };
    let ctx = RunContext { workspace: aligned, workspace_bytes, alloc: None, alloc_user: std::ptr::null_mut() };
    let in_ptrs: Vec<*const u8> = given.iter().map(|t| t.data.as_ptr()).collect();
    let out_ptrs: Vec<*mut u8> = outs.iter_mut().map(|t| t.data.as_mut_ptr()).collect();
    // SAFETY: buffers match the shapes the code was compiled for (checked
    // above), and the workspace has the planned size.
    let status = unsafe { run(&ctx, in_ptrs.as_ptr(), out_ptrs.as_ptr()) };
    if status != 0 {
        return Err(codegen::status::describe(status, node_names));
    }
    Ok(outs)
}

impl JitModel {
    pub fn inputs(&self) -> &[(String, DType, Vec<usize>)] {
        &self.inputs
    }

    pub fn outputs(&self) -> &[(String, DType, Vec<usize>)] {
        &self.outputs
    }

    /// Runs the model on `inputs` (in graph-input order).
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        call_model(self.run, self.workspace_bytes, &self.inputs, &self.outputs, &self.node_names, inputs)
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
