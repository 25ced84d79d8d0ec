//! Calling a compiled model through its C ABI from Rust, for code compiled
//! into this process (`jit`) and for real object files loaded as shared
//! libraries (`onnxc test --via object`). The structs are the kernel
//! library's (`onnxc_runtime::model`), which mirror the generated header;
//! `codegen` writes the code that reads them. Every buffer the code sees
//! comes from a [`Placement`] (the heap, or guard pages).

use crate::buffer::{Buffer, Placement};
use crate::codegen;
use crate::ir::{DType, Dim, Graph, Tensor, TensorType, ValueId};
use crate::plan::Plan;

pub use onnxc_runtime::model::RunFn;
use onnxc_runtime::model::{AllocFn, Context, DynamicOutput, OnnxString};

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
    /// `placement` says where every buffer the code sees comes from.
    pub fn call(
        &self,
        run: RunFn,
        given: &[Tensor],
        workspace: Option<usize>,
        placement: Placement,
    ) -> Result<Vec<Tensor>, String> {
        let workspace = self.workspace(workspace, placement)?;
        self.call_in(run, given, &workspace, placement)
    }

    /// A workspace for [`Interface::call_in`]: `bytes` as in
    /// [`Interface::call`]. Reusing one across calls is what a caller of the
    /// object file does, and spares each call the page faults of fresh memory.
    pub fn workspace(&self, bytes: Option<usize>, placement: Placement) -> Result<Workspace, String> {
        let (bytes, use_hook) = match (bytes, self.sufficient_workspace_bytes) {
            (Some(n), _) => (n, false),
            (None, Some(n)) if n <= MAX_PREALLOCATED => (n, false),
            (None, _) => (self.plan_workspace_bytes, true),
        };
        let buffer = placement.zeroed(bytes, 64).map_err(|e| format!("workspace: {e}"))?;
        Ok(Workspace { buffer, use_hook })
    }

    /// [`Interface::call`] in a workspace made by [`Interface::workspace`]
    /// (possibly used by earlier calls).
    pub fn call_in(
        &self,
        run: RunFn,
        given: &[Tensor],
        workspace: &Workspace,
        placement: Placement,
    ) -> Result<Vec<Tensor>, String> {
        if given.len() != self.inputs.len() {
            return Err(format!("the model takes {} inputs, {} were given", self.inputs.len(), given.len()));
        }
        for (t, io) in given.iter().zip(&self.inputs) {
            if io.ty != TensorType::known(t.dtype, &t.shape) {
                return Err(format!("input \"{}\" must be {}, got {}{:?}", io.name, io.ty, t.dtype, t.shape));
            }
        }
        let mut outs: Vec<Output> =
            self.outputs.iter().map(|io| Output::new(io, placement)).collect::<Result<_, _>>()?;
        let (workspace_bytes, use_hook) = (workspace.buffer.len(), workspace.use_hook);
        let mut arena = HookArena { placement, blocks: Vec::new(), total: 0 };
        let ctx = Context {
            workspace: workspace.buffer.ptr(),
            workspace_bytes,
            alloc: use_hook.then_some(hook as AllocFn),
            alloc_user: &mut arena as *mut HookArena as *mut u8,
        };
        // String inputs: records pointing at each string's bytes (guarded
        // copies of them when the placement guards).
        let mut string_bytes: Vec<Buffer> = Vec::new();
        let placed: Vec<Option<Buffer>> = given
            .iter()
            .map(|t| match t.dtype {
                DType::String => string_records(t, placement, &mut string_bytes).map(Some),
                _ => placement.input(&t.data, t.dtype.size()),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("inputs: {e}"))?;
        let in_ptrs: Vec<usize> = given
            .iter()
            .zip(&placed)
            .map(|(t, p)| p.as_ref().map_or(t.data.as_ptr() as usize, |b| b.ptr() as usize))
            .collect();
        let out_ptrs: Vec<usize> = outs.iter_mut().map(|o| o.pointer() as usize).collect();
        let pointers = |p: &[usize]| placement.copy(bytemuck::cast_slice(p), std::mem::align_of::<usize>());
        let (in_ptrs, out_ptrs) = (pointers(&in_ptrs)?, pointers(&out_ptrs)?);
        // SAFETY: inputs match the compiled shapes (checked above), static
        // outputs have their full size, dynamic ones a descriptor with room
        // for their rank, and the workspace has at least the planned size.
        let status = unsafe { run(&ctx, in_ptrs.ptr() as *const *const u8, out_ptrs.ptr() as *const *mut u8) };
        if status != 0 {
            return Err(codegen::status::describe(status, &self.node_names));
        }
        outs.into_iter().zip(&self.outputs).map(|(o, io)| o.finish(io)).collect()
    }
}

/// The scratch memory of a call, and whether the call also gets the
/// allocator hook (when no workspace size bounds the data-dependent values).
pub struct Workspace {
    buffer: Buffer,
    use_hook: bool,
}

/// The `onnxc_string` records of string tensor `t`, pointing at its bytes
/// (or, when `placement` guards, at copies of them kept in `keep`).
fn string_records(t: &Tensor, placement: Placement, keep: &mut Vec<Buffer>) -> Result<Buffer, String> {
    let mut records = Vec::with_capacity(t.strings.len() * DType::String.size());
    for s in &t.strings {
        let data = match placement.input(s, 1)? {
            Some(copy) => {
                let p = copy.ptr() as *const u8;
                keep.push(copy);
                p
            }
            None => s.as_ptr(),
        };
        records.extend_from_slice(&(data as usize).to_ne_bytes());
        records.extend_from_slice(&s.len().to_ne_bytes());
    }
    placement.copy(&records, 8)
}

/// Reads `count` `onnxc_string` records at `records` back into a string tensor.
///
/// # Safety
/// `records` points to `count` records the model wrote; each points to
/// `len` readable bytes (its inputs, read-only data, the workspace or hook
/// memory, all alive during the call that reads them).
unsafe fn read_strings(records: *const u8, count: usize, shape: Vec<usize>, name: &str) -> Result<Tensor, String> {
    let mut strings = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: see the function's contract.
        let r = unsafe { (records as *const OnnxString).add(i).read_unaligned() };
        if r.len == 0 {
            strings.push(Vec::new());
            continue;
        }
        if r.data.is_null() || r.len > isize::MAX as usize {
            return Err(format!("output \"{name}\": the model wrote an invalid string record at {i}"));
        }
        // SAFETY: see the function's contract.
        strings.push(unsafe { std::slice::from_raw_parts(r.data, r.len) }.to_vec());
    }
    Tensor::from_strings(shape, strings).ok_or_else(|| format!("output \"{name}\" is too large"))
}

/// One output's buffer during a call.
enum Output {
    Static {
        data: Buffer,
        dtype: DType,
        shape: Vec<usize>,
    },
    /// `desc` holds one [`DynamicOutput`], `dims` the caller's dims array.
    Dynamic {
        desc: Buffer,
        dims: Buffer,
        dtype: DType,
    },
}

impl Output {
    fn new(io: &Io, placement: Placement) -> Result<Output, String> {
        let buffer = |bytes: Option<usize>, align: usize| {
            let bytes = bytes.ok_or_else(|| format!("output \"{}\" is too large", io.name))?;
            placement.zeroed(bytes, align).map_err(|e| format!("output \"{}\": {e}", io.name))
        };
        if io.ty.is_dynamic() {
            let dims = buffer(io.ty.shape.len().checked_mul(8), 8)?;
            let desc = buffer(Some(std::mem::size_of::<DynamicOutput>()), 8)?;
            // SAFETY: `desc` holds exactly one suitably aligned descriptor.
            unsafe {
                (desc.ptr() as *mut DynamicOutput)
                    .write(DynamicOutput { data: std::ptr::null_mut(), dims: dims.ptr() as *mut i64 })
            };
            return Ok(Output::Dynamic { desc, dims, dtype: io.ty.dtype });
        }
        let shape = io.ty.known_shape().ok_or_else(|| format!("output \"{}\" has no known shape", io.name))?;
        let bytes = crate::ir::shape::element_count(&shape).and_then(|n| io.ty.dtype.bytes_for(n));
        Ok(Output::Static { data: buffer(bytes, io.ty.dtype.size())?, dtype: io.ty.dtype, shape })
    }

    fn pointer(&mut self) -> *mut u8 {
        match self {
            Output::Static { data, .. } => data.ptr(),
            Output::Dynamic { desc, .. } => desc.ptr(),
        }
    }

    fn finish(self, io: &Io) -> Result<Tensor, String> {
        let (desc, dims, dtype) = match self {
            Output::Static { data, dtype: DType::String, shape } => {
                let count = data.len() / DType::String.size();
                // SAFETY: the model wrote every record of this static output.
                return unsafe { read_strings(data.ptr(), count, shape, &io.name) };
            }
            Output::Static { data, dtype, shape } => {
                let bad = || format!("output \"{}\" is too large", io.name);
                return Tensor::from_bytes(dtype, shape, data.bytes().to_vec()).ok_or_else(bad);
            }
            Output::Dynamic { desc, dims, dtype } => (desc, dims, dtype),
        };
        let dims: Vec<i64> =
            dims.bytes().chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
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
        // SAFETY: `desc` holds the descriptor the model filled.
        let data = unsafe { (desc.ptr() as *const DynamicOutput).read().data };
        if dtype == DType::String {
            let count = crate::ir::shape::element_count(&shape).ok_or_else(bad)?;
            // SAFETY: the model allocated and wrote `count` records for these dims.
            return unsafe { read_strings(data, count, shape, &io.name) };
        }
        let mut t = Tensor::zeros(dtype, shape.clone()).ok_or_else(bad)?;
        if !t.data.is_empty() {
            // SAFETY: `desc` holds the descriptor the model filled; it
            // allocated `data` for exactly these dims.
            let src = unsafe { std::slice::from_raw_parts(data, t.data.len()) };
            t.data.copy_from_slice(src);
        }
        Ok(t)
    }
}

/// The memory a [`hook`] handed out during one call, freed with it.
struct HookArena {
    placement: Placement,
    blocks: Vec<Buffer>,
    total: usize,
}

/// The allocator hook `Interface::call` passes when the workspace alone
/// cannot bound the data-dependent values.
unsafe extern "C" fn hook(user: *mut u8, bytes: usize, align: usize) -> *mut u8 {
    // SAFETY: `user` is the `HookArena` of the running call.
    let arena = unsafe { &mut *(user as *mut HookArena) };
    if arena.total.saturating_add(bytes) > HOOK_LIMIT {
        return std::ptr::null_mut();
    }
    match arena.placement.zeroed(bytes, align) {
        Ok(block) => {
            arena.total += bytes;
            let p = block.ptr();
            arena.blocks.push(block);
            p
        }
        Err(_) => std::ptr::null_mut(),
    }
}
