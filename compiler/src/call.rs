//! Calling a compiled model through its C ABI from Rust, for code compiled
//! into this process (`jit`) and for real object files loaded as shared
//! libraries (`onnxc test --via object`). The structs are the kernel
//! library's (`onnxc_runtime::model`), which mirror the generated header;
//! `codegen` writes the code that reads them.

use crate::codegen;
use crate::ir::{DType, Dim, Graph, Tensor, TensorType, ValueId};
use crate::plan::Plan;

pub use onnxc_runtime::model::RunFn;
use onnxc_runtime::model::{AllocFn, Context, DynamicOutput};

/// A graph input or output as the caller sees it.
#[derive(Clone, Debug)]
pub struct Io {
    pub name: String,
    pub ty: TensorType,
}

/// What a caller needs to know to call a compiled model.
#[derive(Clone, Debug)]
pub struct Interface {
    pub inputs: Vec<Io>,
    pub outputs: Vec<Io>,
    pub plan_workspace_bytes: usize,
    pub sufficient_workspace_bytes: Option<usize>,
    pub node_names: Vec<String>,
}

/// Workspaces above this size are not preallocated; the hook serves the
/// data-dependent values instead.
const MAX_PREALLOCATED: usize = 1 << 30;

/// Total memory the Rust-side allocator hook hands out per call.
const HOOK_LIMIT: usize = 4 << 30;

impl Interface {
    pub fn of(graph: &Graph, plan: &Plan) -> Result<Interface, String> {
        let io = |ids: &[ValueId]| -> Result<Vec<Io>, String> {
            ids.iter()
                .map(|&v| {
                    let value = graph.value(v);
                    let ty = value.ty.clone().ok_or_else(|| format!("value \"{}\" has no type", value.name))?;
                    if ty.known_shape().is_none() && !ty.is_dynamic() {
                        return Err(format!("value \"{}\" has no known shape ({ty})", value.name));
                    }
                    Ok(Io { name: value.name.clone(), ty })
                })
                .collect()
        };
        Ok(Interface {
            inputs: io(&graph.inputs)?,
            outputs: io(&graph.outputs)?,
            plan_workspace_bytes: plan.workspace_bytes,
            sufficient_workspace_bytes: plan.sufficient_workspace_bytes(),
            node_names: graph.nodes.iter().map(|n| n.label()).collect(),
        })
    }

    /// Calls `run` on `given` (checked against the input types). Static
    /// outputs go to fresh buffers; data-dependent ones are copied out of
    /// the workspace or of the memory a Rust allocator hook handed out.
    /// `workspace`: `None` picks a size that always suffices (or a hook
    /// when none does); `Some(n)` gives exactly `n` bytes and no hook.
    pub fn call(&self, run: RunFn, given: &[Tensor], workspace: Option<usize>) -> Result<Vec<Tensor>, String> {
        if given.len() != self.inputs.len() {
            return Err(format!("the model takes {} inputs, {} were given", self.inputs.len(), given.len()));
        }
        for (t, io) in given.iter().zip(&self.inputs) {
            if io.ty != TensorType::known(t.dtype, &t.shape) {
                return Err(format!("input \"{}\" must be {}, got {}{:?}", io.name, io.ty, t.dtype, t.shape));
            }
        }
        let mut outs: Vec<Output> = self.outputs.iter().map(Output::new).collect::<Result<_, _>>()?;
        let (workspace_bytes, use_hook) = match (workspace, self.sufficient_workspace_bytes) {
            (Some(n), _) => (n, false),
            (None, Some(n)) if n <= MAX_PREALLOCATED => (n, false),
            (None, _) => (self.plan_workspace_bytes, true),
        };
        // 64-byte aligned workspace from u64 words (+ 64 bytes of slack).
        let mut workspace = vec![0u64; workspace_bytes.div_ceil(8) + 8];
        let base = workspace.as_mut_ptr() as *mut u8;
        let aligned = unsafe { base.add(base.align_offset(64)) };
        let mut arena = HookArena::default();
        let ctx = Context {
            workspace: aligned,
            workspace_bytes,
            alloc: use_hook.then_some(hook as AllocFn),
            alloc_user: &mut arena as *mut HookArena as *mut u8,
        };
        let in_ptrs: Vec<*const u8> = given.iter().map(|t| t.data.as_ptr()).collect();
        let out_ptrs: Vec<*mut u8> = outs.iter_mut().map(Output::pointer).collect();
        // SAFETY: inputs match the compiled shapes (checked above), static
        // outputs have their full size, dynamic ones a descriptor with room
        // for their rank, and the workspace has at least the planned size.
        let status = unsafe { run(&ctx, in_ptrs.as_ptr(), out_ptrs.as_ptr()) };
        if status != 0 {
            return Err(codegen::status::describe(status, &self.node_names));
        }
        outs.into_iter().zip(&self.outputs).map(|(o, io)| o.finish(io)).collect()
    }
}

/// One output's buffer during a call.
enum Output {
    Static(Tensor),
    Dynamic { desc: Box<DynamicOutput>, dims: Vec<i64>, dtype: DType },
}

impl Output {
    fn new(io: &Io) -> Result<Output, String> {
        if io.ty.is_dynamic() {
            let mut dims = vec![0i64; io.ty.shape.len()];
            let desc = Box::new(DynamicOutput { data: std::ptr::null_mut(), dims: dims.as_mut_ptr() });
            return Ok(Output::Dynamic { desc, dims, dtype: io.ty.dtype });
        }
        let shape = io.ty.known_shape().ok_or_else(|| format!("output \"{}\" has no known shape", io.name))?;
        Tensor::zeros(io.ty.dtype, shape)
            .map(Output::Static)
            .ok_or_else(|| format!("output \"{}\" is too large", io.name))
    }

    fn pointer(&mut self) -> *mut u8 {
        match self {
            Output::Static(t) => t.data.as_mut_ptr(),
            Output::Dynamic { desc, .. } => &mut **desc as *mut DynamicOutput as *mut u8,
        }
    }

    fn finish(self, io: &Io) -> Result<Tensor, String> {
        let (desc, dims, dtype) = match self {
            Output::Static(t) => return Ok(t),
            Output::Dynamic { desc, dims, dtype } => (desc, dims, dtype),
        };
        let bad = || format!("output \"{}\": the model reported an invalid shape {dims:?}", io.name);
        let shape: Vec<usize> =
            dims.iter().map(|&d| usize::try_from(d).map_err(|_| bad())).collect::<Result<_, _>>()?;
        for (d, want) in shape.iter().zip(&io.ty.shape) {
            match want {
                Dim::Known(n) if d != n => return Err(bad()),
                Dim::Dynamic(Some(n)) if d > n => return Err(bad()),
                _ => {}
            }
        }
        let mut t = Tensor::zeros(dtype, shape.clone()).ok_or_else(bad)?;
        if !t.data.is_empty() {
            // SAFETY: the model allocated `data` for exactly these dims.
            let src = unsafe { std::slice::from_raw_parts(desc.data, t.data.len()) };
            t.data.copy_from_slice(src);
        }
        Ok(t)
    }
}

/// The memory a [`hook`] handed out during one call, freed with it.
#[derive(Default)]
struct HookArena {
    blocks: Vec<Vec<u64>>,
    total: usize,
}

/// The allocator hook `Interface::call` passes when the workspace alone
/// cannot bound the data-dependent values.
unsafe extern "C" fn hook(user: *mut u8, bytes: usize, align: usize) -> *mut u8 {
    // SAFETY: `user` is the `HookArena` of the running call.
    let arena = unsafe { &mut *(user as *mut HookArena) };
    let words = bytes.div_ceil(8).saturating_add(align.div_ceil(8));
    if align > 4096 || arena.total.saturating_add(words * 8) > HOOK_LIMIT {
        return std::ptr::null_mut();
    }
    let mut block = vec![0u64; words];
    let base = block.as_mut_ptr() as *mut u8;
    let p = unsafe { base.add(base.align_offset(align)) };
    arena.total += words * 8;
    arena.blocks.push(block);
    p
}
