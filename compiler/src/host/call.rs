//! Calling a compiled model through its C ABI from Rust, for code compiled
//! into this process (`jit`) and for real object files loaded as shared
//! libraries (`onnxc test --via object`). The structs are the kernel
//! library's (`onnxc_runtime::model`), which mirror the generated header;
//! `codegen` writes the code that reads them. Every buffer the code sees
//! comes from a [`Placement`] (the heap, or guard pages).
//!
//! Values ([`Datum`]: a tensor, sequence, optional, map or sequence of
//! maps) are checked against what the model declares, descriptors are
//! built for the composite ones, and data-dependent, sequence, optional
//! and map outputs are read back from their descriptors. `bench` keeps one
//! [`Workspace`] and one [`PreparedCall`] (inputs placed, outputs
//! allocated once) across calls, as callers of an object file do.

use crate::codegen;
use crate::host::buffer::{Buffer, Placement};
use crate::ir::dim_expr::DimExpr;
use crate::ir::{Composite, CompositeType, DType, Dim, Graph, Tensor, TensorType, ValueId};
use crate::plan::Plan;

pub use onnxc_runtime::model::RunFn;
use onnxc_runtime::model::{AllocFn, Context, DynamicOutput, OnnxString};
use onnxc_runtime::Parallel;

/// A value passed to or returned by a model: a tensor, a sequence of
/// tensors, or an optional tensor or sequence.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    Tensor(Tensor),
    Sequence(Vec<Tensor>),
    Optional(Option<Box<Datum>>),
    /// A sequence of maps (ZipMap's output).
    Maps(Vec<Map>),
    /// One map (DictVectorizer's input).
    Map(Map),
}

/// One map: its keys (int64 or string) and the value of each, two
/// one-dimensional tensors of the same length.
#[derive(Clone, Debug, PartialEq)]
pub struct Map {
    pub keys: Tensor,
    pub values: Tensor,
}

impl Datum {
    /// The tensor, if this is one.
    pub fn into_tensor(self) -> Option<Tensor> {
        match self {
            Datum::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// A short description for messages: `f32[2, 3]`, `seq(2)`, `optional(none)`.
    pub fn describe(&self) -> String {
        match self {
            Datum::Tensor(t) => format!("{}{:?}", t.dtype, t.shape),
            Datum::Sequence(items) => format!("seq({})", items.len()),
            Datum::Optional(None) => "optional(none)".into(),
            Datum::Optional(Some(d)) => format!("optional({})", d.describe()),
            Datum::Maps(maps) => format!("seq({} maps)", maps.len()),
            Datum::Map(m) => format!("map({}, {}; {} entries)", m.keys.dtype, m.values.dtype, m.keys.len()),
        }
    }
}

/// A graph input or output as the caller sees it.
#[derive(Clone, Debug)]
pub struct Io {
    pub name: String,
    pub kind: IoKind,
}

#[derive(Clone, Debug)]
pub enum IoKind {
    Tensor(TensorType),
    /// A sequence or optional, passed as its descriptor; `held` are the
    /// shapes of the tensors it holds as compiled (`None`: an empty
    /// optional).
    Composite {
        ty: CompositeType,
        held: Option<Vec<Vec<usize>>>,
    },
    /// A tensor of symbolic shape (a graph compiled over `--dim` ranges),
    /// passed as an `onnxc_tensor` descriptor: its dims as expressions and
    /// their upper bounds.
    Symbolic {
        dtype: DType,
        dims: Vec<DimExpr>,
        most: Vec<usize>,
    },
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
                    if let (Some(ty), Some(composite)) = (graph.port_types.get(&v), graph.composites.get(&v)) {
                        let held = (*composite != Composite::Optional(None)).then(|| {
                            graph
                                .composite_tensors(v)
                                .iter()
                                .map(|&t| graph.concrete(t).map(|c| c.1).unwrap_or_default())
                                .collect()
                        });
                        return Ok(Io { name: value.name.clone(), kind: IoKind::Composite { ty: ty.clone(), held } });
                    }
                    let ty = value.ty.clone().ok_or_else(|| format!("value \"{}\" has no type", value.name))?;
                    if let Some(dims) = graph.symbolic.as_ref().and_then(|s| s.dims.get(&v)) {
                        let (dtype, most) = (ty.dtype, ty.known_shape().unwrap_or_default());
                        let kind = IoKind::Symbolic { dtype, dims: dims.clone(), most };
                        return Ok(Io { name: value.name.clone(), kind });
                    }
                    if ty.known_shape().is_none() && !ty.is_dynamic() {
                        return Err(format!("value \"{}\" has no known shape ({ty})", value.name));
                    }
                    Ok(Io { name: value.name.clone(), kind: IoKind::Tensor(ty) })
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
        given: &[Datum],
        workspace: Option<usize>,
        placement: Placement,
    ) -> Result<Vec<Datum>, String> {
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
        Ok(Workspace { buffer, use_hook, parallel: Parallel::SERIAL })
    }

    /// [`Interface::call`] in a workspace made by [`Interface::workspace`]
    /// (possibly used by earlier calls).
    pub fn call_in(
        &self,
        run: RunFn,
        given: &[Datum],
        workspace: &Workspace,
        placement: Placement,
    ) -> Result<Vec<Datum>, String> {
        let mut call = self.prepare(run, given, workspace, placement)?;
        call.run()?;
        call.finish()
    }

    /// A call of `run` on `given` (checked against the input types) whose
    /// inputs are placed and outputs allocated once, to be run any number
    /// of times: what a caller of the object file does, passing the same
    /// buffers to every call (`onnxc bench` times this).
    pub fn prepare<'a>(
        &'a self,
        run: RunFn,
        given: &[Datum],
        workspace: &'a Workspace,
        placement: Placement,
    ) -> Result<PreparedCall<'a>, String> {
        if given.len() != self.inputs.len() {
            return Err(format!("the model takes {} inputs, {} were given", self.inputs.len(), given.len()));
        }
        for (d, io) in given.iter().zip(&self.inputs) {
            check_input(d, io)?;
        }
        let mut outs: Vec<Output> =
            self.outputs.iter().map(|io| Output::new(io, placement)).collect::<Result<_, _>>()?;
        // Every buffer the inputs' addresses point into, kept for the calls.
        let mut inputs: Vec<Buffer> = Vec::new();
        let in_ptrs: Vec<usize> = given
            .iter()
            .zip(&self.inputs)
            .map(|(d, io)| match (&io.kind, d) {
                (IoKind::Symbolic { .. }, Datum::Tensor(t)) => place_described(t, placement, &mut inputs),
                _ => place_datum(d, placement, &mut inputs),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("inputs: {e}"))?;
        let out_ptrs: Vec<usize> = outs.iter_mut().map(|o| o.pointer() as usize).collect();
        let pointers = |p: &[usize]| placement.copy(bytemuck::cast_slice(p), std::mem::align_of::<usize>());
        let (in_ptrs, out_ptrs) = (pointers(&in_ptrs)?, pointers(&out_ptrs)?);
        let arena = HookArena { placement, blocks: Vec::new(), total: 0 };
        Ok(PreparedCall { interface: self, run, workspace, _inputs: inputs, outs, in_ptrs, out_ptrs, arena })
    }
}

/// A call prepared by [`Interface::prepare`]: its inputs placed, its
/// outputs allocated, its workspace chosen.
pub struct PreparedCall<'a> {
    interface: &'a Interface,
    run: RunFn,
    workspace: &'a Workspace,
    /// The buffers the input pointers point into.
    _inputs: Vec<Buffer>,
    outs: Vec<Output>,
    in_ptrs: Buffer,
    out_ptrs: Buffer,
    /// What the allocator hook handed out in the last run (data-dependent
    /// outputs point into it until the next run).
    arena: HookArena,
}

impl PreparedCall<'_> {
    /// Runs the model once, into the prepared outputs.
    pub fn run(&mut self) -> Result<(), String> {
        self.arena = HookArena { placement: self.arena.placement, blocks: Vec::new(), total: 0 };
        let (workspace, interface) = (self.workspace, self.interface);
        let ctx = Context {
            workspace: workspace.buffer.ptr(),
            workspace_bytes: workspace.buffer.len(),
            alloc: workspace.use_hook.then_some(hook as AllocFn),
            alloc_user: &mut self.arena as *mut HookArena as *mut u8,
            parallel: workspace.parallel,
        };
        // SAFETY: inputs match the compiled shapes (checked when prepared),
        // static outputs have their full size, dynamic ones a descriptor with
        // room for their rank, and the workspace has at least the planned size.
        let status =
            unsafe { (self.run)(&ctx, self.in_ptrs.ptr() as *const *const u8, self.out_ptrs.ptr() as *const *mut u8) };
        if status != 0 {
            let inputs: Vec<String> = interface.inputs.iter().map(|io| io.name.clone()).collect();
            return Err(codegen::status::describe(status, &interface.node_names, &inputs));
        }
        Ok(())
    }

    /// The outputs of the last run.
    pub fn finish(self) -> Result<Vec<Datum>, String> {
        let PreparedCall { interface, outs, arena, .. } = self;
        let outputs = outs.into_iter().zip(&interface.outputs).map(|(o, io)| o.finish(io)).collect();
        drop(arena);
        outputs
    }
}

/// Refuses a value whose kind or element type differs from the
/// compiled input's (the model checks a composite's count and dims itself).
fn check_input(d: &Datum, io: &Io) -> Result<(), String> {
    let fits = match (&io.kind, d) {
        (IoKind::Tensor(ty), Datum::Tensor(t)) => *ty == TensorType::known(t.dtype, &t.shape),
        (IoKind::Symbolic { dtype, dims, most }, Datum::Tensor(t)) if *dtype == t.dtype => {
            return symbolic_dims_fit(&io.name, dims, most, &t.shape, "input")
        }
        (IoKind::Composite { ty, .. }, Datum::Map(m)) => {
            !ty.sequence
                && ty.map_key == Some(m.keys.dtype)
                && m.values.dtype == ty.dtype
                && m.values.len() == m.keys.len()
        }
        (IoKind::Composite { ty, .. }, _) if ty.map_key.is_some() => false,
        (IoKind::Composite { ty, .. }, d) => {
            let tensors_of = |items: &[Tensor]| items.iter().all(|t| t.dtype == ty.dtype);
            match (ty.optional, ty.sequence, d) {
                (false, true, Datum::Sequence(items)) => tensors_of(items),
                (true, _, Datum::Optional(None)) => true,
                (true, false, Datum::Optional(Some(inner))) => {
                    matches!(&**inner, Datum::Tensor(t) if t.dtype == ty.dtype)
                }
                (true, true, Datum::Optional(Some(inner))) => {
                    matches!(&**inner, Datum::Sequence(items) if tensors_of(items))
                }
                _ => false,
            }
        }
        _ => false,
    };
    if fits {
        return Ok(());
    }
    let want = match &io.kind {
        IoKind::Tensor(ty) => ty.to_string(),
        IoKind::Composite { ty, .. } => ty.to_string(),
        IoKind::Symbolic { dtype, dims, .. } => format!("{dtype}{}", crate::ir::shape::dims_text(dims)),
    };
    Err(format!("input \"{}\" must be {want}, got {}", io.name, d.describe()))
}

/// The address to pass for `d`: a tensor's bytes, or a descriptor
/// (`onnxc_sequence`, `onnxc_optional`, `onnxc_tensor`, `onnxc_map`) built in
/// buffers from `placement`, all kept in `keep`.
fn place_datum(d: &Datum, placement: Placement, keep: &mut Vec<Buffer>) -> Result<usize, String> {
    let words = |w: &[usize], keep: &mut Vec<Buffer>| place_words(w, placement, keep);
    let tensor_words = |t: &Tensor, keep: &mut Vec<Buffer>| tensor_words(t, placement, keep);
    match d {
        Datum::Tensor(t) => place_tensor(t, placement, keep),
        Datum::Sequence(items) => {
            let mut elements = Vec::with_capacity(items.len() * 3);
            for t in items {
                elements.extend(tensor_words(t, keep)?);
            }
            let at = if items.is_empty() { 0 } else { words(&elements, keep)? };
            words(&[items.len(), at], keep)
        }
        Datum::Maps(_) => Err("sequences of maps are not model inputs".into()),
        Datum::Map(m) => {
            let keys = place_tensor(&m.keys, placement, keep)?;
            let values = place_tensor(&m.values, placement, keep)?;
            words(&[m.keys.len(), keys, values], keep)
        }
        Datum::Optional(None) => words(&[0, 0], keep),
        Datum::Optional(Some(inner)) => {
            let value = match &**inner {
                Datum::Tensor(t) => {
                    let w = tensor_words(t, keep)?;
                    words(&w, keep)?
                }
                other => place_datum(other, placement, keep)?,
            };
            words(&[1, value], keep)
        }
    }
}

/// Pointer-sized words placed from `placement` (kept in `keep`); their address.
fn place_words(w: &[usize], placement: Placement, keep: &mut Vec<Buffer>) -> Result<usize, String> {
    let b = placement.copy(bytemuck::cast_slice(w), std::mem::align_of::<usize>())?;
    let p = b.ptr() as usize;
    keep.push(b);
    Ok(p)
}

/// The words of an `onnxc_tensor` describing `t`, its bytes and dims placed.
fn tensor_words(t: &Tensor, placement: Placement, keep: &mut Vec<Buffer>) -> Result<[usize; 3], String> {
    let data = place_tensor(t, placement, keep)?;
    let dims: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
    let dims = placement.copy(bytemuck::cast_slice(&dims), 8)?;
    let at = dims.ptr() as usize;
    keep.push(dims);
    Ok([data, t.shape.len(), at])
}

/// The address of an `onnxc_tensor` describing `t` (an input of symbolic shape).
fn place_described(t: &Tensor, placement: Placement, keep: &mut Vec<Buffer>) -> Result<usize, String> {
    let w = tensor_words(t, placement, keep)?;
    place_words(&w, placement, keep)
}

/// Whether `shape` fits the symbolic dims of an input or output: the same
/// rank, the static dims, and no dim past its upper bound (the model
/// checks the ranges and the symbols' agreement of inputs itself).
fn symbolic_dims_fit(name: &str, dims: &[DimExpr], most: &[usize], shape: &[usize], what: &str) -> Result<(), String> {
    if shape.len() != dims.len() {
        return Err(format!("{what} \"{name}\" has rank {}, the model takes rank {}", shape.len(), dims.len()));
    }
    for (i, ((d, &m), &n)) in dims.iter().zip(most).zip(shape).enumerate() {
        let fits = match d.as_size() {
            Some(k) => n == k,
            None => n <= m,
        };
        if !fits {
            return Err(format!("{what} \"{name}\" dim {i} is {n}, outside what {d} allows (at most {m})"));
        }
    }
    Ok(())
}

/// The address of tensor `t`'s bytes as the model reads them: string
/// records pointing at each string's bytes, guarded copies when the
/// placement guards.
fn place_tensor(t: &Tensor, placement: Placement, keep: &mut Vec<Buffer>) -> Result<usize, String> {
    let placed = match t.dtype {
        DType::String => Some(string_records(t, placement, keep)?),
        _ => placement.input(&t.data, t.dtype.size())?,
    };
    Ok(match placed {
        Some(b) => {
            let p = b.ptr() as usize;
            keep.push(b);
            p
        }
        None => t.data.as_ptr() as usize,
    })
}

/// The scratch memory of a call, and whether the call also gets the
/// allocator hook (when no workspace size bounds the data-dependent values).
pub struct Workspace {
    buffer: Buffer,
    use_hook: bool,
    /// The kernels' `parallel_for` (serial unless [`Workspace::set_parallel`]).
    parallel: Parallel,
}

impl Workspace {
    /// Calls through this workspace run the kernels' tasks with `parallel`
    /// (e.g. `onnxc_runtime_std::thread_pool::ThreadPool::parallel`), which must
    /// stay valid while it is used.
    pub fn set_parallel(&mut self, parallel: Parallel) {
        self.parallel = parallel;
    }
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
    /// `desc` holds the `onnxc_sequence` or `onnxc_optional` the model fills.
    Composite {
        desc: Buffer,
    },
    /// `desc` holds the `onnxc_tensor` of an output of symbolic shape:
    /// `data` has the upper bounds' bytes, the model writes `dims`.
    Described {
        desc: Buffer,
        data: Buffer,
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
        let ty = match &io.kind {
            IoKind::Tensor(ty) => ty,
            IoKind::Composite { .. } => {
                return Ok(Output::Composite { desc: buffer(Some(2 * std::mem::size_of::<usize>()), 8)? })
            }
            IoKind::Symbolic { dtype, most, .. } => {
                let bytes = crate::ir::shape::element_count(most).and_then(|n| dtype.bytes_for(n));
                let data = buffer(bytes, dtype.size())?;
                let dims = buffer(most.len().checked_mul(8), 8)?;
                let words = [data.ptr() as usize, most.len(), dims.ptr() as usize];
                let desc = placement.copy(bytemuck::cast_slice(&words), 8).map_err(|e| format!("{}: {e}", io.name))?;
                return Ok(Output::Described { desc, data, dims, dtype: *dtype });
            }
        };
        if ty.is_dynamic() {
            let dims = buffer(ty.shape.len().checked_mul(8), 8)?;
            let desc = buffer(Some(std::mem::size_of::<DynamicOutput>()), 8)?;
            // SAFETY: `desc` holds exactly one suitably aligned descriptor.
            unsafe {
                (desc.ptr() as *mut DynamicOutput)
                    .write(DynamicOutput { data: std::ptr::null_mut(), dims: dims.ptr() as *mut i64 })
            };
            return Ok(Output::Dynamic { desc, dims, dtype: ty.dtype });
        }
        let shape = ty.known_shape().ok_or_else(|| format!("output \"{}\" has no known shape", io.name))?;
        let bytes = crate::ir::shape::element_count(&shape).and_then(|n| ty.dtype.bytes_for(n));
        Ok(Output::Static { data: buffer(bytes, ty.dtype.size())?, dtype: ty.dtype, shape })
    }

    fn pointer(&mut self) -> *mut u8 {
        match self {
            Output::Static { data, .. } => data.ptr(),
            Output::Dynamic { desc, .. } | Output::Composite { desc } | Output::Described { desc, .. } => desc.ptr(),
        }
    }

    fn finish(self, io: &Io) -> Result<Datum, String> {
        let (desc, dims, dtype) = match self {
            Output::Static { data, dtype: DType::String, shape } => {
                let count = data.len() / DType::String.size();
                // SAFETY: the model wrote every record of this static output.
                return unsafe { read_strings(data.ptr(), count, shape, &io.name) }.map(Datum::Tensor);
            }
            Output::Static { data, dtype, shape } => {
                let bad = || format!("output \"{}\" is too large", io.name);
                return Tensor::from_bytes(dtype, shape, data.bytes().to_vec()).map(Datum::Tensor).ok_or_else(bad);
            }
            Output::Composite { desc } => {
                let IoKind::Composite { ty, held } = &io.kind else { return Err("not a composite".into()) };
                // SAFETY: the model filled the descriptor and everything it
                // points to, with the shapes it was compiled for (checked).
                return unsafe { read_composite(desc.ptr() as *const usize, ty, held.as_deref(), &io.name) };
            }
            Output::Described { data, dims, dtype, .. } => {
                let IoKind::Symbolic { dims: exprs, most, .. } = &io.kind else { return Err("not symbolic".into()) };
                let bad = || format!("output \"{}\": the model reported invalid dims", io.name);
                let shape = read_dims(&dims).into_iter().map(|d| usize::try_from(d).map_err(|_| bad()));
                let shape: Vec<usize> = shape.collect::<Result<_, _>>()?;
                symbolic_dims_fit(&io.name, exprs, most, &shape, "output")?;
                // SAFETY: the dims are within the upper bounds, whose bytes `data` holds.
                return unsafe { read_bytes(data.ptr(), dtype, shape, &io.name) }.map(Datum::Tensor);
            }
            Output::Dynamic { desc, dims, dtype } => (desc, dims, dtype),
        };
        let IoKind::Tensor(io_ty) = &io.kind else { return Err("not a tensor".into()) };
        let dims = read_dims(&dims);
        let bad = || format!("output \"{}\": the model reported an invalid shape {dims:?}", io.name);
        let shape: Vec<usize> =
            dims.iter().map(|&d| usize::try_from(d).map_err(|_| bad())).collect::<Result<_, _>>()?;
        for (d, want) in shape.iter().zip(&io_ty.shape) {
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
            return unsafe { read_strings(data, count, shape, &io.name) }.map(Datum::Tensor);
        }
        // SAFETY: `desc` holds the descriptor the model filled; it
        // allocated `data` for exactly these dims.
        unsafe { read_bytes(data, dtype, shape, &io.name) }.map(Datum::Tensor)
    }
}

/// The i64 dims a model wrote to `dims`.
fn read_dims(dims: &Buffer) -> Vec<i64> {
    dims.bytes().chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect()
}

/// A tensor of `shape` read from `data`.
///
/// # Safety
/// `data` points to the tensor's bytes (or records), written by the model.
unsafe fn read_bytes(data: *const u8, dtype: DType, shape: Vec<usize>, name: &str) -> Result<Tensor, String> {
    let bad = || format!("output \"{name}\" is too large");
    if dtype == DType::String {
        let count = crate::ir::shape::element_count(&shape).ok_or_else(bad)?;
        // SAFETY: see the function's contract.
        return unsafe { read_strings(data, count, shape, name) };
    }
    let mut t = Tensor::zeros(dtype, shape).ok_or_else(bad)?;
    if !t.data.is_empty() {
        // SAFETY: see the function's contract.
        let len = t.data.len();
        t.data.copy_from_slice(unsafe { std::slice::from_raw_parts(data, len) });
    }
    Ok(t)
}

/// Reads the sequence or optional output whose descriptor is at `desc`,
/// checking that what the model reports is what it was compiled to write
/// (`held`: the tensors' shapes, `None` for an empty optional).
///
/// # Safety
/// `desc` points to the descriptor the model filled; its addresses point
/// to memory the model allocated for the reported dims.
unsafe fn read_composite(
    desc: *const usize,
    ty: &CompositeType,
    held: Option<&[Vec<usize>]>,
    name: &str,
) -> Result<Datum, String> {
    let bad = |what: &str| format!("output \"{name}\": the model reported {what} it was not compiled for");
    // SAFETY: every pointer read below was written by the model into the
    // caller's descriptor or into memory it allocated (see the contract).
    let word = |p: *const usize, i: usize| unsafe { p.add(i).read() };
    let tensor = |t: *const usize, shape: &[usize]| -> Result<Tensor, String> {
        let (data, rank, dims) = (word(t, 0), word(t, 1), word(t, 2) as *const i64);
        if rank != shape.len() {
            return Err(bad("a rank"));
        }
        // SAFETY: see above.
        let given: Vec<i64> = (0..rank).map(|j| unsafe { dims.add(j).read() }).collect();
        if given.iter().zip(shape).any(|(&g, &s)| g != s as i64) {
            return Err(bad("dims"));
        }
        // SAFETY: see above.
        unsafe { read_bytes(data as *const u8, ty.dtype, shape.to_vec(), name) }
    };
    let sequence = |seq: *const usize, shapes: &[Vec<usize>]| -> Result<Vec<Tensor>, String> {
        if word(seq, 0) != shapes.len() {
            return Err(bad("an element count"));
        }
        let elements = word(seq, 1) as *const usize;
        shapes.iter().enumerate().map(|(i, s)| tensor(elements.wrapping_add(3 * i), s)).collect()
    };
    if let Some(key) = ty.map_key {
        let [keys, values] = held.unwrap_or_default() else { return Err(bad("a map layout")) };
        let (columns, rows) = crate::ops::sequence::map_rows(values).ok_or_else(|| bad("a map layout"))?;
        if word(desc, 0) != rows || keys != &[columns] {
            return Err(bad("a map count"));
        }
        let records = word(desc, 1) as *const usize;
        return (0..rows)
            .map(|i| {
                let map = records.wrapping_add(3 * i);
                if word(map, 0) != columns {
                    return Err(bad("a map size"));
                }
                // SAFETY: see above; the model wrote `columns` keys and values.
                let keys = unsafe { read_bytes(word(map, 1) as *const u8, key, vec![columns], name) }?;
                // SAFETY: as for the keys.
                let values = unsafe { read_bytes(word(map, 2) as *const u8, ty.dtype, vec![columns], name) }?;
                Ok(Map { keys, values })
            })
            .collect::<Result<_, _>>()
            .map(Datum::Maps);
    }
    if !ty.optional {
        return sequence(desc, held.unwrap_or_default()).map(Datum::Sequence);
    }
    let (has, value) = (word(desc, 0), word(desc, 1) as *const usize);
    match (held, has) {
        (None, 0) => Ok(Datum::Optional(None)),
        (Some(shapes), 1) if ty.sequence => {
            Ok(Datum::Optional(Some(Box::new(Datum::Sequence(sequence(value, shapes)?)))))
        }
        (Some([shape]), 1) => Ok(Datum::Optional(Some(Box::new(Datum::Tensor(tensor(value, shape)?))))),
        _ => Err(bad("a presence")),
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
