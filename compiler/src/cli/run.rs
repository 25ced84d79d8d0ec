//! `onnxc run` and `onnxc bench`: compile for this machine (JIT) and call
//! the model on inputs from files, or on generated ones for timing. With
//! `--portable` both run the code cross-target objects run, without the
//! kernel library, so `bench --portable` against plain `bench` on this
//! host (whose 128-bit vectors match NEON's) is the per-model proxy for
//! how far portable code is from the kernels.

use crate::{LimitArgs, ShapeArgs};
use onnxc::host::call::{Datum, IoKind};
use onnxc::host::tensor_io::{read_datum, write_datum_pb, NamedDatum};
use onnxc::infer::Bindings;
use onnxc::ir::{Graph, Tensor, ValueId};
use onnxc::limits::Limits;
use onnxc::{driver, jit::JitModel};
use onnxc_runtime_std::thread_pool::ThreadPool;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct RunArgs {
    pub model: PathBuf,
    /// Inputs (.pb TensorProto or .npy; SequenceProto or OptionalProto .pb
    /// for sequence and optional inputs), matched by name, else by position
    pub inputs: Vec<PathBuf>,
    /// Folder for output_K.pb (default: the current folder)
    #[arg(short = 'o', long = "output-dir", default_value = ".")]
    pub out_dir: PathBuf,
    /// Run with a workspace of exactly BYTES and no allocator hook, as a
    /// caller with a fixed budget would (default: a workspace that always
    /// suffices, or a growing allocator when data-dependent sizes are unbounded)
    #[arg(long, value_name = "BYTES")]
    pub workspace: Option<usize>,
    /// Portable mode: no kernel-library calls (what cross-target objects run)
    #[arg(long)]
    pub portable: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
}

#[derive(clap::Args)]
pub struct BenchArgs {
    pub model: PathBuf,
    /// Inputs as for `run`, matched by name, else by position (default:
    /// pseudo-random floats in [-1, 1), zeros for other types)
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub shapes: ShapeArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Threads the kernels split their work over (a persistent pool; the
    /// calling thread is one of them)
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Timed runs after warm-up
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Also time every node (its median over the timed runs), printed by
    /// time and summed by operator; the code calls a clock after each node
    #[arg(long)]
    pub profile: bool,
    /// The kernels' instruction-set level (generic, avx2-fma, avx512f;
    /// default: the best this CPU has), to time a slower level's kernels
    #[arg(long)]
    pub isa: Option<String>,
    /// Time the portable code (no kernel-library calls, what cross-target
    /// objects run) on this machine, against the kernel path's time
    #[arg(long)]
    pub portable: bool,
    /// Time the code compiled once over the --dim ranges (SYM=LO..HI), at
    /// the inputs' sizes (default: the ranges' upper bounds)
    #[arg(long)]
    pub dynamic: bool,
}

/// Reads the value files `paths`, the k-th as what the graph declares
/// for its k-th input (or output, with `outputs`).
pub fn read_values(graph: &Graph, paths: &[PathBuf], outputs: bool) -> Result<Vec<NamedDatum>, String> {
    let ports: &[ValueId] = if outputs { &graph.outputs } else { &graph.inputs };
    paths.iter().enumerate().map(|(k, p)| read_datum(p, ports.get(k).and_then(|v| graph.port_types.get(v)))).collect()
}

/// Orders `given` like the graph's inputs: by name where a value has one
/// that matches, else by position; also returns the shape bindings.
pub fn match_inputs(graph: &Graph, given: Vec<NamedDatum>) -> Result<(Vec<Datum>, Bindings), String> {
    let names: Vec<String> = graph.inputs.iter().map(|&v| graph.value(v).name.clone()).collect();
    if given.len() != names.len() {
        return Err(format!("the model has {} inputs, {} were given", names.len(), given.len()));
    }
    let by_name = given.iter().all(|g| g.name.as_ref().is_some_and(|n| names.contains(n)));
    let mut slots: Vec<Option<Datum>> = vec![None; names.len()];
    for (k, g) in given.into_iter().enumerate() {
        let at = if by_name { names.iter().position(|n| Some(n) == g.name.as_ref()).unwrap_or(k) } else { k };
        if slots[at].is_some() {
            return Err(format!("input \"{}\" was given twice", names[at]));
        }
        slots[at] = Some(g.datum);
    }
    let data: Vec<Datum> = slots.into_iter().flatten().collect();
    let mut bindings = Bindings::default();
    for (name, d) in names.iter().zip(&data) {
        match (d, driver::composite_shape(d)) {
            (Datum::Tensor(t), _) => {
                bindings.shapes.insert(name.clone(), t.shape.clone());
            }
            (_, Some(shape)) => {
                bindings.composites.insert(name.clone(), shape);
            }
            (d, None) => return Err(format!("input \"{name}\": {} is not supported", d.describe())),
        }
    }
    Ok((data, bindings))
}

/// Imports, binds shapes to the given inputs (files), and JIT-compiles.
pub fn compile_for_inputs(
    model_path: &Path,
    paths: &[PathBuf],
    limits: &Limits,
    portable: bool,
) -> Result<(JitModel, Vec<Datum>), String> {
    let model = driver::load(model_path, limits).map_err(|e| e.to_string())?;
    let graph = driver::import(model_path, &model, limits).map_err(|e| e.to_string())?;
    let given = read_values(&graph, paths, false)?;
    let (data, bindings) = match_inputs(&graph, given)?;
    let (graph, data) = driver::finish_mir_for_inputs(model_path, graph, data, &bindings, limits, portable)
        .map_err(|e| e.to_string())?;
    let plan = driver::plan(model_path, &graph).map_err(|e| e.to_string())?;
    let jit = driver::jit(model_path, &graph, &plan, portable, limits).map_err(|e| e.to_string())?;
    Ok((jit, data))
}

pub fn run(a: &RunArgs) -> Result<ExitCode, String> {
    let (jit, data) = compile_for_inputs(&a.model, &a.inputs, &super::limits(&a.limits)?, a.portable)?;
    let outputs = jit.run_data(&data, a.workspace, onnxc::host::buffer::Placement::Heap)?;
    std::fs::create_dir_all(&a.out_dir).map_err(|e| format!("{}: {e}", a.out_dir.display()))?;
    for (k, (d, io)) in outputs.iter().zip(&jit.interface().outputs).enumerate() {
        let path = a.out_dir.join(format!("output_{k}.pb"));
        write_datum_pb(&path, &io.name, d)?;
        println!("{}: {} {}", path.display(), io.name, d.describe());
    }
    Ok(ExitCode::SUCCESS)
}

/// The model's graph for `bench`, with shapes bound by the input files
/// when there are some (and those inputs), else by `--shape`/`--dim`.
fn bench_graph(a: &BenchArgs, limits: &Limits) -> Result<(Graph, Option<Vec<Datum>>), String> {
    let model = driver::load(&a.model, limits).map_err(|e| e.to_string())?;
    if a.dynamic {
        let bindings = super::bindings(&a.shapes)?;
        let graph = driver::lower_to_mir(&a.model, &model, &bindings, limits, a.portable).map_err(|e| e.to_string())?;
        if graph.symbolic.is_none() {
            return Err("--dynamic: no dim is left symbolic (give a range: --dim SYM=LO..HI)".into());
        }
        let given = read_values(&graph, &a.inputs, false)?;
        let data = (!a.inputs.is_empty()).then(|| match_inputs(&graph, given)).transpose()?.map(|(d, _)| d);
        return Ok((graph, data));
    }
    if a.inputs.is_empty() {
        let bindings = super::bindings(&a.shapes)?;
        let graph = driver::lower_to_mir(&a.model, &model, &bindings, limits, a.portable).map_err(|e| e.to_string())?;
        return Ok((graph, None));
    }
    let graph = driver::import(&a.model, &model, limits).map_err(|e| e.to_string())?;
    let given = read_values(&graph, &a.inputs, false)?;
    let (data, bindings) = match_inputs(&graph, given)?;
    let (graph, data) = driver::finish_mir_for_inputs(&a.model, graph, data, &bindings, limits, a.portable)
        .map_err(|e| e.to_string())?;
    Ok((graph, Some(data)))
}

fn synthetic_inputs(jit: &JitModel) -> Result<Vec<Datum>, String> {
    let ports = jit.interface().inputs.iter();
    ports
        .map(|io| match &io.kind {
            IoKind::Tensor(ty) => synthetic_input(ty.dtype, &ty.known_shape().unwrap_or_default()).map(Datum::Tensor),
            IoKind::Composite { .. } => Err(format!("bench: input \"{}\" is a sequence or optional", io.name)),
            IoKind::Symbolic { dtype, most, .. } => synthetic_input(*dtype, most).map(Datum::Tensor),
        })
        .collect()
}

/// Deterministic pseudo-random inputs in [-1, 1) (zeros for non-floats).
fn synthetic_input(dtype: onnxc::ir::DType, shape: &[usize]) -> Result<Tensor, String> {
    let mut t = Tensor::zeros(dtype, shape.to_vec()).ok_or("input too large")?;
    if dtype == onnxc::ir::DType::F32 {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for chunk in t.data.chunks_exact_mut(4) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let v = (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
            chunk.copy_from_slice(&v.to_le_bytes());
        }
    }
    Ok(t)
}

/// Limits the kernels to the level `name` for the rest of the process.
pub(super) fn limit_isa(name: &str) -> Result<(), String> {
    use onnxc_runtime::isa::Isa;
    let names: Vec<&str> = Isa::ALL.iter().map(|k| k.name()).collect();
    let level = Isa::named(name).ok_or_else(|| format!("--isa {name}: expected one of {}", names.join(", ")))?;
    if !level.limit_to() {
        return Err(format!("--isa {name}: this CPU does not support it"));
    }
    Ok(())
}

pub fn bench(a: &BenchArgs) -> Result<ExitCode, String> {
    if a.threads == 0 {
        return Err("--threads: at least 1".into());
    }
    if let Some(name) = &a.isa {
        limit_isa(name)?;
    }
    if a.portable && a.profile {
        return Err("--profile times the kernel path's nodes; it does not combine with --portable yet".into());
    }
    let limits = super::limits(&a.limits)?;
    let (graph, given) = bench_graph(a, &limits)?;
    let plan = driver::plan(&a.model, &graph).map_err(|e| e.to_string())?;
    let jit = if a.profile {
        onnxc::jit::compile_profiled(&graph, &plan, &limits)
            .map_err(|error| driver::Error::Codegen { file: a.model.clone(), error }.to_string())?
    } else {
        driver::jit(&a.model, &graph, &plan, a.portable, &limits).map_err(|e| e.to_string())?
    };
    let inputs = match given {
        Some(inputs) => inputs,
        None => synthetic_inputs(&jit)?,
    };
    // One workspace for every call, as a caller of the object file keeps it.
    let mut workspace = jit.interface().workspace(None, onnxc::host::buffer::Placement::Heap)?;
    let pool = ThreadPool::new(a.threads).map_err(|e| format!("--threads {}: {e}", a.threads))?;
    workspace.set_parallel(pool.parallel());
    // Inputs and outputs stay where they are between calls, as a caller of
    // the object file passes its own buffers: the times are the model's,
    // not those of copying inputs into and allocating outputs in fresh memory.
    let mut call = jit.prepare(&inputs, &workspace)?;
    // The first call pays what a program pays on its first inference (cold
    // caches and predictors; the workspace was written when allocated):
    // onnxc leaves no other start-up work.
    let start = Instant::now();
    call.run()?;
    let first = start.elapsed().as_secs_f64() * 1e3;
    let warmup = (a.iters / 10).max(1);
    for _ in 0..warmup {
        call.run()?;
    }
    onnxc::host::profile::take(0);
    let mut times = Vec::with_capacity(a.iters);
    let mut node_times = Vec::new();
    for _ in 0..a.iters.max(1) {
        let start = Instant::now();
        call.run()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        if a.profile {
            node_times.push(onnxc::host::profile::take(graph.nodes.len()));
        }
    }
    if a.profile {
        super::profile::print(&graph, &node_times);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!("median {median:.2} ms, min {:.2} ms ({} runs), first call {first:.2} ms", times[0], times.len());
    Ok(ExitCode::SUCCESS)
}
