//! Compiled code is re-entrant and deterministic: the same
//! JIT-compiled model called from several threads at once, each call with
//! its own workspace and outputs, gives bit-identical results, and so do a
//! hundred calls in a row. Models: whole CNNs with random weights (SIMD
//! gemm, Winograd and conv kernels; with the wheel's constant weights every
//! output would be the same number whatever happened inside, so the first
//! run is also checked against ONNX Runtime's output), a data-dependent
//! output (Compress, memory from the workspace at run time) and random
//! operators (seeded and unseeded). A CNN's object file, linked into a C
//! program (`c/threads.c`), is called from threads too.
//! And the kernels' own threads (the context's `parallel_for`) never change
//! a bit: CNNs run with thread pools of 1 to 3 threads and with a hook that
//! runs the tasks in reverse give the serial result.

use crate::common::{data_dir, onnxc, repo_root, run_ok, write_model};
use crate::models::{f32s_of_bytes, float_attr, int_attr, ints_attr, model, node, typed_value};
use onnxc::driver;
use onnxc::host::call::Datum;
use onnxc::host::tensor_io;
use onnxc::infer::Bindings;
use onnxc::ir::Tensor;
use onnxc::jit::JitModel;
use onnxc::limits::Limits;
use onnxc_runtime::parallel::{Parallel, TaskFn};
use onnxc_runtime_std::thread_pool::ThreadPool;
use std::path::Path;

/// JIT-compiles `dir/model.onnx` for the inputs of `dir/test_data_set_0`.
fn compile_case(dir: &Path) -> (JitModel, Vec<Tensor>) {
    let path = dir.join("model.onnx");
    let limits = Limits::default();
    let model = driver::load(&path, &limits).expect("load");
    let graph = driver::import(&path, &model, &limits).expect("import");
    let inputs: Vec<Tensor> = (0..)
        .map(|k| dir.join(format!("test_data_set_0/input_{k}.pb")))
        .take_while(|p| p.is_file())
        .map(|p| tensor_io::read_datum(&p, None).expect("input").datum.into_tensor().expect("a tensor"))
        .collect();
    let mut bindings = Bindings::default();
    for (&v, t) in graph.inputs.iter().zip(&inputs) {
        bindings.shapes.insert(graph.value(v).name.clone(), t.shape.clone());
    }
    let inputs = inputs.into_iter().map(Datum::Tensor).collect();
    let (graph, inputs) =
        driver::finish_mir_for_inputs(&path, graph, inputs, &bindings, &limits, false).expect("infer");
    let inputs = inputs.into_iter().map(|d| d.into_tensor().expect("a tensor")).collect();
    let plan = driver::plan(&path, &graph).expect("plan");
    (driver::jit(&path, &graph, &plan, false, &limits).expect("jit"), inputs)
}

/// The case's expected output `k` (ONNX Runtime's), as floats.
fn expected_output(dir: &Path, k: usize) -> Vec<f64> {
    let path = dir.join(format!("test_data_set_0/output_{k}.pb"));
    let t = tensor_io::read_datum(&path, None).expect("an expected output").datum.into_tensor().expect("a tensor");
    (0..t.len()).map(|i| t.get_f64(i)).collect()
}

/// Asserts that `got` is ONNX Runtime's output within the light models'
/// tolerance (rtol 1e-3, atol 1e-4) and that it is not one repeated number.
fn assert_matches_onnx_runtime(name: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{name}: output length");
    let differ = got.iter().zip(want).filter(|&(&g, &w)| !onnxc_runtime::tolerance::close(g, w, 1e-3, 1e-4)).count();
    assert_eq!(differ, 0, "{name}: {differ} of {} values differ from ONNX Runtime's", got.len());
    assert!(
        want.iter().any(|&w| w != want[0]),
        "{name}: every expected value is the same; the test could not see a race"
    );
}

/// Seeded and unseeded RandomUniform and RandomNormal, in a fresh folder.
fn random_case() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary folder");
    let seeded = |op: &str, name: &str, out: &str| {
        let mut n = node(op, name, &[], &[out]);
        n.attribute.extend([ints_attr("shape", &[256]), float_attr("seed", 7.0)]);
        n
    };
    let mut unseeded = node("RandomNormal", "unseeded", &[], &["c"]);
    unseeded.attribute.extend([ints_attr("shape", &[256]), int_attr("dtype", 1)]);
    let nodes = vec![seeded("RandomUniform", "u", "a"), seeded("RandomNormal", "n", "b"), unseeded];
    let outputs = ["a", "b", "c"].map(|o| typed_value(o, 1, Some(&[256]))).to_vec();
    write_model(dir.path(), "model.onnx", &model(nodes, vec![], outputs));
    std::fs::create_dir(dir.path().join("test_data_set_0")).expect("mkdir");
    dir
}

/// The outputs' bytes, for bit-for-bit comparison.
fn bits(outputs: &[Tensor]) -> Vec<(Vec<usize>, Vec<u8>)> {
    outputs.iter().map(|t| (t.shape.clone(), t.data.clone())).collect()
}

fn check_model(name: &str, model: &JitModel, inputs: &[Tensor]) -> Vec<Tensor> {
    let first = model.run(inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    let reference = bits(&first);
    std::thread::scope(|s| {
        for t in 0..4 {
            let reference = &reference;
            s.spawn(move || {
                for i in 0..5 {
                    let got = bits(&model.run(inputs).unwrap_or_else(|e| panic!("{name}: {e}")));
                    assert!(got == *reference, "{name}: thread {t}, run {i} differs from the first run");
                }
            });
        }
    });
    for i in 0..100 {
        let got = bits(&model.run(inputs).unwrap_or_else(|e| panic!("{name}: {e}")));
        assert!(got == reference, "{name}: run {i} of 100 differs from the first run");
    }
    first
}

#[test]
fn threads_and_repeated_runs_give_identical_bits() {
    let data = data_dir();
    let random = random_case();
    for cnn in ["light-random/squeezenet", "light-random/resnet50"].map(|c| data.join(c)) {
        let (model, inputs) = compile_case(&cnn);
        let name = cnn.display().to_string();
        let first = check_model(&name, &model, &inputs);
        let got: Vec<f64> = (0..first[0].len()).map(|i| first[0].get_f64(i)).collect();
        assert_matches_onnx_runtime(&name, &got, &expected_output(&cnn, 0));
    }
    for dir in [data.join("node/test_compress_0"), random.path().to_path_buf()] {
        let (model, inputs) = compile_case(&dir);
        check_model(&dir.display().to_string(), &model, &inputs);
    }
}

#[test]
fn object_called_from_c_threads_gives_identical_bits() {
    let case = data_dir().join("light-random/squeezenet");
    let dir = tempfile::tempdir().expect("temporary folder");
    let mut compile = std::process::Command::new(onnxc());
    compile
        .arg("compile")
        .arg(case.join("model.onnx"))
        .arg("-o")
        .arg(dir.path().join("model.o"))
        .args(["--emit", "obj,header,archive"]);
    run_ok(compile, "onnxc compile");
    let exe = dir.path().join("threads");
    let mut cc = std::process::Command::new("cc");
    cc.args(["-std=c11", "-O2", "-Wall", "-Werror", "-pthread", "-I"])
        .arg(dir.path())
        .arg(repo_root().join("tests/suite/c/threads.c"))
        .arg(dir.path().join("model.a"))
        .arg("-lm")
        .arg("-o")
        .arg(&exe);
    run_ok(cc, "cc");
    let input = tensor_io::read_datum(&case.join("test_data_set_0/input_0.pb"), None).expect("the input");
    let input = input.datum.into_tensor().expect("a tensor");
    std::fs::write(dir.path().join("input.bin"), &input.data).expect("input.bin");
    let mut threads = std::process::Command::new(&exe);
    threads.arg(dir.path().join("input.bin")).arg(dir.path().join("reference.bin"));
    let stdout = run_ok(threads, "the threads program");
    assert!(stdout.contains("0 of 20 concurrent calls differ"), "unexpected output: {stdout}");
    let reference = std::fs::read(dir.path().join("reference.bin")).expect("reference.bin");
    let got: Vec<f64> = f32s_of_bytes(&reference).into_iter().map(f64::from).collect();
    assert_matches_onnx_runtime("the C program", &got, &expected_output(&case, 0));
}

/// A `parallel_for` that runs the tasks last to first on the calling thread.
unsafe extern "C" fn reversed(_user: *mut u8, count: usize, task: TaskFn, env: *mut u8) {
    for i in (0..count).rev() {
        unsafe { task(env, i) };
    }
}

#[test]
fn kernel_threads_give_identical_bits() {
    let data = data_dir();
    for name in ["light-random/resnet50", "light-random/shufflenet", "light-random/squeezenet"] {
        let (model, inputs) = compile_case(&data.join(name));
        let inputs: Vec<Datum> = inputs.into_iter().map(Datum::Tensor).collect();
        let run = |parallel: Parallel| {
            let mut workspace =
                model.interface().workspace(None, onnxc::host::buffer::Placement::Heap).expect("workspace");
            workspace.set_parallel(parallel);
            let outputs = model.run_in(&inputs, &workspace).unwrap_or_else(|e| panic!("{name}: {e}"));
            bits(&outputs.into_iter().map(|d| d.into_tensor().expect("a tensor")).collect::<Vec<_>>())
        };
        let serial = run(Parallel::SERIAL);
        let hostile = run(Parallel { run: Some(reversed), user: std::ptr::null_mut() });
        assert!(hostile == serial, "{name}: tasks run in reverse differ from the serial run");
        for threads in 1..=3 {
            let pool = ThreadPool::new(threads).expect("threads");
            for round in 0..3 {
                assert!(run(pool.parallel()) == serial, "{name}: {threads} threads, round {round} differs");
            }
        }
    }
}
