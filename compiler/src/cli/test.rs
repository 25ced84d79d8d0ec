//! `onnxc test`: runs ONNX backend-test case folders (model.onnx plus
//! test_data_set_N/input_K.pb and output_K.pb), one line per case and, last,
//! exactly `N passed, N failed`.

use super::object_runner::ObjectModel;
use super::run::{match_inputs, read_values};
use crate::{LimitArgs, ShapeArgs};
use onnxc::driver;
use onnxc::host::buffer::Placement;
use onnxc::host::call::{Datum, Map};
use onnxc::host::tensor_io::NamedDatum;
use onnxc::ir::{DType, Tensor};
use onnxc::limits::Limits;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    Jit,
    Object,
}

#[derive(clap::Args)]
pub struct Args {
    /// Case folders, or folders of case folders
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    #[arg(long, default_value_t = 1e-3)]
    pub rtol: f64,
    #[arg(long, default_value_t = 1e-7)]
    pub atol: f64,
    /// Only cases whose name matches (a substring, or `^`/`$`-anchored)
    #[arg(long)]
    pub filter: Option<String>,
    #[arg(long, value_enum, default_value_t = Via::Jit)]
    pub via: Via,
    /// Place every input, output, the workspace and each allocation against
    /// PROT_NONE guard pages, so that an access out of bounds faults
    #[arg(long)]
    pub guard_pages: bool,
    /// Portable mode: every operator lowered in Cranelift alone, without
    /// the kernel library (what cross-target objects run)
    #[arg(long)]
    pub portable: bool,
    /// The kernels' instruction-set level (generic, avx2-fma, avx512f;
    /// default: the best this CPU has), to test a slower level's kernels
    #[arg(long)]
    pub isa: Option<String>,
    /// Compile each case's model once, the symbols that --dim gives a
    /// range left symbolic, and run every data set through that one code
    #[arg(long)]
    pub dynamic: bool,
    #[command(flatten)]
    pub shapes: ShapeArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Case folders under `dir` (itself if it holds model.onnx), sorted.
fn cases(dir: &Path) -> Result<Vec<PathBuf>, String> {
    if dir.join("model.onnx").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    out.sort();
    Ok(out)
}

/// A small pattern language: `^` and `$` anchor, otherwise substring.
fn matches(filter: &str, name: &str) -> bool {
    match (filter.strip_prefix('^'), filter.strip_suffix('$')) {
        (Some(rest), _) if rest.ends_with('$') => name == &rest[..rest.len() - 1],
        (Some(rest), _) => name.starts_with(rest),
        (None, Some(rest)) => name.ends_with(rest),
        (None, None) => name.contains(filter),
    }
}

fn numbered(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            let k = name.strip_prefix(prefix)?.strip_suffix(".pb")?.parse().ok()?;
            Some((k, p))
        })
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

fn run_case(dir: &Path, a: &Args, limits: &Limits) -> Result<(), String> {
    let model_path = dir.join("model.onnx");
    let model = driver::load(&model_path, limits).map_err(|e| e.to_string())?;
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir() && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("test_data_set_"))
        })
        .collect();
    sets.sort();
    if sets.is_empty() {
        return Err("no test_data_set_* folder".into());
    }
    if a.dynamic {
        return run_sets_dynamic(&model_path, &model, &sets, a, limits);
    }
    for set in sets {
        // Import first: an unsupported model is reported as such, not as
        // input files it cannot read (sequences, optionals...).
        let graph = driver::import(&model_path, &model, limits).map_err(|e| e.to_string())?;
        let given = read_values(&graph, &numbered(&set, "input_")?, false)?;
        let expected = read_values(&graph, &numbered(&set, "output_")?, true)?;
        let (inputs, bindings) = match_inputs(&graph, given)?;
        let (graph, inputs) = driver::finish_mir_for_inputs(&model_path, graph, inputs, &bindings, limits, a.portable)
            .map_err(|e| e.to_string())?;
        let plan = driver::plan(&model_path, &graph).map_err(|e| e.to_string())?;
        let placement = if a.guard_pages { Placement::Guarded } else { Placement::Heap };
        let outputs = match a.via {
            Via::Jit => driver::jit(&model_path, &graph, &plan, a.portable, limits)
                .map_err(|e| e.to_string())?
                .run_data(&inputs, None, placement)?,
            Via::Object => ObjectModel::build(&graph, &plan, a.portable, limits)?.run(&inputs, placement)?,
        };
        compare_outputs(&outputs, &expected, a)?;
    }
    Ok(())
}

/// `--dynamic`: the model compiled once over the `--dim` ranges, every
/// data set run through it.
fn run_sets_dynamic(
    model_path: &Path,
    model: &onnx_proto::ModelProto,
    sets: &[PathBuf],
    a: &Args,
    limits: &Limits,
) -> Result<(), String> {
    if a.via == Via::Object {
        return Err("--dynamic runs through the JIT only yet".into());
    }
    let bindings = super::bindings(&a.shapes)?;
    let graph = driver::lower_to_mir(model_path, model, &bindings, limits, a.portable).map_err(|e| e.to_string())?;
    if graph.symbolic.is_none() {
        return Err("--dynamic: no dim is left symbolic (give a range: --dim SYM=LO..HI)".into());
    }
    let plan = driver::plan(model_path, &graph).map_err(|e| e.to_string())?;
    let jit = driver::jit(model_path, &graph, &plan, a.portable, limits).map_err(|e| e.to_string())?;
    let placement = if a.guard_pages { Placement::Guarded } else { Placement::Heap };
    for set in sets {
        let given = read_values(&graph, &numbered(set, "input_")?, false)?;
        let expected = read_values(&graph, &numbered(set, "output_")?, true)?;
        let (inputs, _) = match_inputs(&graph, given)?;
        let outputs = jit.run_data(&inputs, None, placement)?;
        compare_outputs(&outputs, &expected, a).map_err(|e| format!("{}: {e}", set.display()))?;
    }
    Ok(())
}

fn compare_outputs(outputs: &[Datum], expected: &[NamedDatum], a: &Args) -> Result<(), String> {
    if outputs.len() != expected.len() {
        return Err(format!("{} outputs, expected {}", outputs.len(), expected.len()));
    }
    for (k, (got, want)) in outputs.iter().zip(expected).enumerate() {
        compare_data(got, &want.datum, a.rtol, a.atol).map_err(|e| format!("output {k}: {e}"))?;
    }
    Ok(())
}

/// [`compare`] through sequences, optionals and sequences of maps: the
/// same kind, the same number of tensors, each tensor close (map keys
/// equal, in the same order).
pub fn compare_data(got: &Datum, want: &Datum, rtol: f64, atol: f64) -> Result<(), String> {
    match (got, want) {
        (Datum::Tensor(g), Datum::Tensor(w)) => compare(g, w, rtol, atol),
        (Datum::Sequence(g), Datum::Sequence(w)) if g.len() == w.len() => g
            .iter()
            .zip(w)
            .enumerate()
            .try_for_each(|(i, (g, w))| compare(g, w, rtol, atol).map_err(|e| format!("element {i}: {e}"))),
        (Datum::Maps(g), Datum::Maps(w)) if g.len() == w.len() => {
            g.iter().zip(w).enumerate().try_for_each(|(i, (g, w))| {
                let (g, w) = (sorted(g).ok_or("a map is malformed")?, sorted(w).ok_or("a map is malformed")?);
                compare(&g.keys, &w.keys, 0.0, 0.0)
                    .and_then(|()| compare(&g.values, &w.values, rtol, atol))
                    .map_err(|e| format!("map {i}: {e}"))
            })
        }
        (Datum::Optional(None), Datum::Optional(None)) => Ok(()),
        (Datum::Optional(Some(g)), Datum::Optional(Some(w))) => compare_data(g, w, rtol, atol),
        _ => Err(format!("{}, expected {}", got.describe(), want.describe())),
    }
}

/// A map's entries in key order: maps have no order of their own (ONNX
/// Runtime returns them sorted, ZipMap writes them in label order).
fn sorted(m: &Map) -> Option<Map> {
    let n = m.keys.len();
    let key = |i: usize| match m.keys.dtype {
        DType::String => (0, m.keys.strings.get(i).map_or(&[][..], |s| s.as_slice())),
        _ => (m.keys.get_i64(i), &[][..]),
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| key(a).cmp(&key(b)));
    let permute = |t: &Tensor| -> Option<Tensor> {
        if t.dtype == DType::String {
            return Tensor::from_strings(
                vec![n],
                order.iter().map(|&i| t.strings.get(i).cloned()).collect::<Option<_>>()?,
            );
        }
        let size = t.dtype.size();
        let data = order.iter().map(|&i| t.data.get(i * size..(i + 1) * size)).collect::<Option<Vec<_>>>()?.concat();
        Tensor::from_bytes(t.dtype, vec![n], data)
    };
    (m.values.len() == n).then_some(())?;
    Some(Map { keys: permute(&m.keys)?, values: permute(&m.values)? })
}

/// Checks every element by [`onnxc_runtime::tolerance::close`] (NaN only
/// for NaN, an infinity only for the same one, else `|got - want| <= atol +
/// rtol * |want|`); integers and bools exactly.
pub fn compare(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if got.dtype != want.dtype {
        return Err(format!("element type {}, expected {}", got.dtype, want.dtype));
    }
    if got.shape != want.shape {
        return Err(format!("shape {:?}, expected {:?}", got.shape, want.shape));
    }
    if got.dtype == DType::String {
        let differ = got.strings.iter().zip(&want.strings).position(|(g, w)| g != w);
        return match differ {
            None => Ok(()),
            Some(i) => Err(format!(
                "{} of {} strings differ; first at {i}: got {:?}, expected {:?}",
                got.strings.iter().zip(&want.strings).filter(|(g, w)| g != w).count(),
                got.len(),
                String::from_utf8_lossy(&got.strings[i]),
                String::from_utf8_lossy(&want.strings[i])
            )),
        };
    }
    let float = got.dtype.is_float() || got.dtype.is_minifloat();
    let mut bad = 0usize;
    let mut first = None;
    let mut largest = 0f64;
    for i in 0..got.len() {
        let ok = if float {
            onnxc_runtime::tolerance::close(got.get_f64(i), want.get_f64(i), rtol, atol)
        } else if got.dtype == DType::U64 {
            got.get_i64(i) as u64 == want.get_i64(i) as u64
        } else {
            got.get_i64(i) == want.get_i64(i)
        };
        if !ok {
            bad += 1;
            first.get_or_insert(i);
            largest = largest.max((got.get_f64(i) - want.get_f64(i)).abs());
        }
    }
    match first {
        None => Ok(()),
        Some(i) => Err(format!(
            "{bad} of {} values differ, by up to {largest}; first at {i}: got {}, expected {}",
            got.len(),
            got.get_f64(i),
            want.get_f64(i)
        )),
    }
}

/// One line of the report; a closed stdout (`onnxc test | head`) ends the
/// run with an error instead of a panic.
fn report(line: std::fmt::Arguments) -> Result<(), String> {
    use std::io::Write;
    writeln!(std::io::stdout(), "{line}").map_err(|e| format!("writing the report: {e}"))
}

pub fn test(a: &Args) -> Result<ExitCode, String> {
    if let Some(name) = &a.isa {
        super::run::limit_isa(name)?;
    }
    let mut all = Vec::new();
    for d in &a.dirs {
        all.extend(cases(d)?);
    }
    let mut limits = super::limits(&a.limits)?;
    let (mut passed, mut failed) = (0usize, 0usize);
    for case in all {
        let name = case.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
        if a.filter.as_deref().is_some_and(|f| !matches(f, &name)) {
            continue;
        }
        limits.restart_clock();
        match run_case(&case, a, &limits) {
            Ok(()) => {
                passed += 1;
                report(format_args!("PASS {name}"))?;
            }
            Err(e) => {
                failed += 1;
                report(format_args!("FAIL {name}: {}", e.replace('\n', "; ")))?;
            }
        }
    }
    report(format_args!("{passed} passed, {failed} failed"))?;
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
