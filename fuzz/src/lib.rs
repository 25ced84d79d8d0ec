//! What the fuzz targets check, as plain functions (the targets in
//! `fuzz_targets/` only hand them libFuzzer's bytes). A panic or a crash is
//! a finding; ASan (cargo-fuzz's default) reports any out-of-bounds access
//! in Rust or in the kernels, and the compiled models run against guard
//! pages.
//!
//! - [`load_check`]: bytes → load + check + import, never a panic.
//! - [`compile_run`]: a random small model ([`gen`]) → the full pipeline →
//!   JIT run on random inputs, cross-checked against the unoptimised
//!   pipeline (no constant folding, no graph passes but dead-code removal);
//!   `ONNXC_FUZZ_VERBOSE=1` prints both outcomes.
//! - [`kernels`]: the kernel library's entry points on random shapes
//!   against naive references.

pub mod choices;
pub mod gen;
mod kernel_checks;

use onnxc::host::buffer::Placement;
use onnxc::host::call::Datum;
use onnxc::infer::Bindings;
use onnxc::ir::Tensor;
use onnxc::limits::Limits;
use prost::Message;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

pub use kernel_checks::kernels;

/// Limits that keep one fuzz input fast.
fn limits() -> Limits {
    Limits {
        max_tensor_bytes: 1 << 24,
        max_fold_total_bytes: 1 << 26,
        max_nodes: 10_000,
        max_compile_time: Duration::from_secs(20),
        ..Limits::default()
    }
}

/// A folder holding `w.bin` (64 bytes) for models with external data.
fn model_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("onnxc-fuzz-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join("w.bin"), [7u8; 64]);
        dir
    })
}

/// Bytes → load, check and import; every outcome but a panic is fine.
pub fn load_check(data: &[u8]) {
    let limits = limits();
    let path = model_dir().join("model.onnx");
    let Ok(model) = onnxc::load::load_bytes(data, &path, &limits) else {
        return;
    };
    if onnxc::check::check_model(&model, &limits).is_ok() {
        let _ = onnxc::import::import_model(&model, &limits);
    }
}

/// Outputs of one pipeline, or why it stopped.
type Outcome = Result<Vec<Tensor>, String>;

/// Import → infer (`limits`) → graph passes (when `optimise`) → plan → JIT
/// → run with buffers from `placement`.
fn pipeline(
    model: &onnx_proto::ModelProto,
    inputs: &[Tensor],
    limits: &Limits,
    optimise: bool,
    placement: Placement,
) -> Outcome {
    let path = Path::new("fuzz.onnx");
    let mut graph = onnxc::driver::import(path, model, limits).map_err(|e| e.to_string())?;
    let mut bindings = Bindings::default();
    for (&v, t) in graph.inputs.iter().zip(inputs) {
        bindings.shapes.insert(graph.value(v).name.clone(), t.shape.clone());
    }
    onnxc::infer::infer(&mut graph, &bindings, limits).map_err(|e| e.to_string())?;
    if optimise {
        onnxc::passes::run(&mut graph, false);
    } else {
        // Both drop dead nodes, so a failing node nobody reads fails neither.
        onnxc::passes::eliminate_dead_nodes(&mut graph);
    }
    let plan = onnxc::driver::plan(path, &graph).map_err(|e| e.to_string())?;
    let jit = onnxc::driver::jit(path, &graph, &plan, false, limits).map_err(|e| e.to_string())?;
    let given: Vec<Datum> = inputs.iter().cloned().map(Datum::Tensor).collect();
    let outputs = jit.run_data(&given, None, placement)?;
    outputs.into_iter().map(|d| d.into_tensor().ok_or_else(|| "an output is not a tensor".to_string())).collect()
}

/// A random model through the optimised pipeline (folding, passes, guard
/// pages) and the plain one; both must fail, or both give the same outputs.
pub fn compile_run(data: &[u8]) {
    let g = gen::model(data);
    let inputs: Vec<Tensor> = g.inputs.iter().map(|(shape, v)| Tensor::from_f32s(shape.clone(), v)).collect();
    // Through the loader as a file would go.
    let limits = limits();
    let bytes = g.model.encode_to_vec();
    let Ok(model) = onnxc::load::load_bytes(&bytes, &model_dir().join("gen.onnx"), &limits) else {
        return;
    };
    if onnxc::check::check_model(&model, &limits).is_err() {
        return;
    }
    let optimised = pipeline(&model, &inputs, &limits, true, Placement::Guarded);
    let plain_limits = Limits { max_fold_bytes: 0, max_fold_total_bytes: 0, ..limits };
    let plain = pipeline(&model, &inputs, &plain_limits, false, Placement::Heap);
    if std::env::var_os("ONNXC_FUZZ_VERBOSE").is_some() {
        eprintln!("optimised: {}\n  plain: {}", describe(&optimised), describe(&plain));
    }
    match (optimised, plain) {
        (Ok(a), Ok(b)) => compare(&a, &b),
        (Err(_), Err(_)) => {}
        // Folding evaluates a constant node before dead code is known.
        (Err(e), Ok(_)) if e.contains("constant folding failed") => {}
        (a, b) => panic!("the pipelines disagree:\n  optimised: {}\n  plain: {}", describe(&a), describe(&b)),
    }
}

fn describe(o: &Outcome) -> String {
    match o {
        Ok(ts) => format!("{} outputs {:?}", ts.len(), ts.iter().map(|t| t.shape.clone()).collect::<Vec<_>>()),
        Err(e) => format!("error: {e}"),
    }
}

fn compare(a: &[Tensor], b: &[Tensor]) {
    assert_eq!(a.len(), b.len(), "output counts differ");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!((x.dtype, &x.shape), (y.dtype, &y.shape), "output {k}: type or shape differs");
        for i in 0..x.len() {
            let (p, q) = (x.get_f64(i), y.get_f64(i));
            let close = onnxc_runtime::tolerance::close(p, q, 1e-3, 1e-4);
            assert!(close, "output {k} element {i}: optimised {p}, plain {q}");
        }
    }
}
