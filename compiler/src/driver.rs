//! The pipeline as the CLI and library users call it: each function runs
//! a prefix of the stages and wraps their errors in [`Error`], which names
//! the model file. The [`Limits`] given bound every stage that reads them.

use crate::host::call::Datum;
use crate::infer::Bindings;
use crate::ir::Graph;
use crate::limits::Limits;
use crate::plan::Plan;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Load(#[from] crate::load::LoadError),
    #[error("{file}: invalid model:\n{errors}")]
    Check { file: PathBuf, errors: crate::check::CheckErrors },
    #[error("{file}: {errors}")]
    Import { file: PathBuf, errors: crate::import::ImportError },
    #[error("{file}: {errors}")]
    Infer { file: PathBuf, errors: crate::infer::InferError },
    #[error("{file}: {error}")]
    Plan { file: PathBuf, error: crate::plan::PlanError },
    #[error("{file}: {error}")]
    Codegen { file: PathBuf, error: crate::codegen::CodegenError },
    #[error("{file}: {}", over_budget(*needed, *budget))]
    Budget { file: PathBuf, needed: Option<usize>, budget: usize },
    #[error("{0}")]
    Other(String),
}

fn over_budget(needed: Option<usize>, budget: usize) -> String {
    match needed {
        Some(n) => format!("the workspace needs {n} bytes, more than the RAM budget of {budget} bytes (max-ram)"),
        None => format!(
            "the workspace has no bound (a data-dependent value is unbounded), so it cannot fit \
             the RAM budget of {budget} bytes (max-ram)"
        ),
    }
}

/// Stages 1–2: read, resolve external data, validate.
pub fn load(path: &Path, limits: &Limits) -> Result<onnx_proto::ModelProto, Error> {
    let model = crate::load::load_model(path, limits)?;
    crate::check::check_model(&model, limits).map_err(|errors| Error::Check { file: path.to_path_buf(), errors })?;
    Ok(model)
}

/// Stage 3 only: the mid-IR before shapes are known.
/// Prints import's warnings on stderr, naming the file.
pub fn import(path: &Path, model: &onnx_proto::ModelProto, limits: &Limits) -> Result<Graph, Error> {
    let graph = crate::import::import_model(model, limits)
        .map_err(|errors| Error::Import { file: path.to_path_buf(), errors })?;
    for warning in &graph.warnings {
        eprintln!("warning: {}: {warning}", path.display());
    }
    Ok(graph)
}

/// Stages 3–5: mid-IR with static shapes, constants folded, passes run
/// (for `portable` code, which calls no kernels, if true).
pub fn lower_to_mir(
    path: &Path,
    model: &onnx_proto::ModelProto,
    bindings: &Bindings,
    limits: &Limits,
    portable: bool,
) -> Result<Graph, Error> {
    finish_mir(path, import(path, model, limits)?, bindings, limits, portable)
}

/// Stages 4–5 on an imported graph.
pub fn finish_mir(
    path: &Path,
    mut graph: Graph,
    bindings: &Bindings,
    limits: &Limits,
    portable: bool,
) -> Result<Graph, Error> {
    crate::infer::infer(&mut graph, bindings, limits)
        .map_err(|errors| Error::Infer { file: path.to_path_buf(), errors })?;
    crate::passes::run(&mut graph, portable);
    Ok(graph)
}

/// Stages 4–5 when the input values are known (`run`, `test`): a graph
/// input that some node needs at compile time (a Reshape shape, Slice
/// starts, reduction axes... given as an input) becomes a constant with its
/// given value, and inference runs again. `given` is in graph-input order;
/// returns the graph and the tensors that remain run-time inputs.
pub fn finish_mir_for_inputs(
    path: &Path,
    mut graph: Graph,
    mut given: Vec<crate::host::call::Datum>,
    bindings: &Bindings,
    limits: &Limits,
    portable: bool,
) -> Result<(Graph, Vec<crate::host::call::Datum>), Error> {
    let mut bindings = bindings.clone();
    loop {
        let mut attempt = graph.clone();
        match crate::infer::infer(&mut attempt, &bindings, limits) {
            Ok(()) => {
                crate::passes::run(&mut attempt, portable);
                return Ok((attempt, given));
            }
            Err(errors) if !errors.wanted_inputs.is_empty() => {
                let wanted: Vec<usize> = graph
                    .inputs
                    .iter()
                    .zip(&given)
                    .enumerate()
                    .filter(|(_, (v, d))| errors.wanted_inputs.contains(v) && matches!(d, Datum::Tensor(_)))
                    .map(|(k, _)| k)
                    .collect();
                if wanted.is_empty() || given.len() != graph.inputs.len() {
                    return Err(Error::Infer { file: path.to_path_buf(), errors });
                }
                for &k in &wanted {
                    bindings.shapes.remove(&graph.value(graph.inputs[k]).name);
                }
                specialise_inputs(&mut graph, &mut given, &wanted);
            }
            Err(errors) => return Err(Error::Infer { file: path.to_path_buf(), errors }),
        }
    }
}

/// Turns the tensor graph inputs at positions `which` into constants
/// holding their given values, and renumbers the remaining inputs.
fn specialise_inputs(graph: &mut Graph, given: &mut Vec<Datum>, which: &[usize]) {
    use crate::ir::{TensorType, ValueDef};
    let inputs = std::mem::take(&mut graph.inputs);
    let data = std::mem::take(given);
    for (k, (v, d)) in inputs.into_iter().zip(data).enumerate() {
        let next = graph.inputs.len();
        let value = graph.value_mut(v);
        match d {
            Datum::Tensor(t) if which.contains(&k) => {
                value.ty = Some(TensorType::known(t.dtype, &t.shape));
                value.def = ValueDef::Const(t);
            }
            d => {
                value.def = ValueDef::Input(next);
                graph.inputs.push(v);
                given.push(d);
            }
        }
    }
}

/// What a sequence or optional value holds, as a binding for the input
/// it is given for (`run`, `test`).
pub fn composite_shape(d: &Datum) -> Option<crate::infer::CompositeShape> {
    use crate::infer::CompositeShape;
    let shapes = |items: &[crate::ir::Tensor]| items.iter().map(|t| t.shape.clone()).collect();
    Some(match d {
        Datum::Tensor(_) | Datum::Maps(_) => return None,
        Datum::Map(m) => CompositeShape::Tensor(vec![m.keys.len()]),
        Datum::Sequence(items) => CompositeShape::Sequence(shapes(items)),
        Datum::Optional(None) => CompositeShape::Absent,
        Datum::Optional(Some(inner)) => match &**inner {
            Datum::Tensor(t) => CompositeShape::Tensor(t.shape.clone()),
            Datum::Sequence(items) => CompositeShape::Sequence(shapes(items)),
            Datum::Optional(_) | Datum::Maps(_) | Datum::Map(_) => return None,
        },
    })
}

/// Stage 6.
pub fn plan(path: &Path, graph: &Graph) -> Result<Plan, Error> {
    crate::plan::plan(graph).map_err(|error| Error::Plan { file: path.to_path_buf(), error })
}

/// Stages 1–6 as `compile` runs them: the planned graph, refused when
/// its workspace (arena plus data-dependent values) would exceed `max_ram`.
pub fn compile(
    path: &Path,
    bindings: &Bindings,
    max_ram: Option<usize>,
    limits: &Limits,
    portable: bool,
) -> Result<(Graph, Plan), Error> {
    let model = load(path, limits)?;
    let graph = lower_to_mir(path, &model, bindings, limits, portable)?;
    let plan = plan(path, &graph)?;
    match (max_ram, plan.sufficient_workspace_bytes()) {
        (Some(budget), needed) if needed.is_none_or(|n| n > budget) => {
            Err(Error::Budget { file: path.to_path_buf(), needed, budget })
        }
        _ => Ok((graph, plan)),
    }
}

/// Compiles into this process (in portable mode: without kernel calls).
pub fn jit(
    path: &Path,
    graph: &Graph,
    plan: &Plan,
    portable: bool,
    limits: &Limits,
) -> Result<crate::jit::JitModel, Error> {
    crate::jit::compile_with(graph, plan, portable, limits)
        .map_err(|error| Error::Codegen { file: path.to_path_buf(), error })
}

/// Where the kernel library archive is: `$ONNXC_RUNTIME_LIB`, or
/// `libonnxc_runtime.a` next to the running executable (cargo puts both
/// in the same target folder). With `needs_std` (the object calls a kernel
/// that needs std, `Footprint::needs_std`) it is the archive with std,
/// `$ONNXC_RUNTIME_STD_LIB` or `libonnxc_runtime_std.a`.
pub fn runtime_lib(needs_std: bool) -> Result<PathBuf, Error> {
    let (variable, file) = match needs_std {
        false => ("ONNXC_RUNTIME_LIB", "libonnxc_runtime.a"),
        true => ("ONNXC_RUNTIME_STD_LIB", "libonnxc_runtime_std.a"),
    };
    if let Some(p) = std::env::var_os(variable) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| Error::Other(format!("cannot locate onnxc: {e}")))?;
    let mut dirs: Vec<PathBuf> = exe.parent().map(Path::to_path_buf).into_iter().collect();
    // Test binaries live one level below (target/<profile>/deps).
    if let Some(up) = exe.parent().and_then(Path::parent) {
        dirs.push(up.to_path_buf());
    }
    dirs.iter().map(|d| d.join(file)).find(|p| p.is_file()).ok_or_else(|| {
        Error::Other(format!("{file} not found next to onnxc; build it with `cargo build --release` or set {variable}"))
    })
}
