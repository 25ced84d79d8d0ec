//! End to end through the artefacts users link: compile the example CNN to
//! an object, header and static archive, build `examples/c/main.c` against
//! the archive with the system `cc`, run it, and compare with ONNX Runtime.
//! The program's comparison is checked too: a NaN on either side is a
//! mismatch.

use crate::common::{data_dir, onnxc, repo_root, run_ok as run};
use crate::models::{f32_bytes, f32s_of_bytes};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles the example CNN into `dir` and links `examples/c/main.c`
/// against its archive; returns the program.
fn build_example(dir: &Path) -> PathBuf {
    let case = data_dir().join("examples/cnn");
    let obj = dir.join("model.o");
    let mut compile = Command::new(onnxc());
    compile.arg("compile").arg(case.join("model.onnx")).arg("-o").arg(&obj).arg("--emit").arg("obj,header,archive");
    run(compile, "onnxc compile");
    for artefact in ["model.o", "model.h", "model.a"] {
        assert!(dir.join(artefact).is_file(), "{artefact} was not written");
    }
    let exe = dir.join("cnn");
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-O2", "-Wall", "-Werror", "-I"])
        .arg(dir)
        .arg(repo_root().join("examples/c/main.c"))
        .arg(dir.join("model.a"))
        .arg("-o")
        .arg(&exe);
    run(cc, "cc (linking only the archive)");
    exe
}

#[test]
fn c_program_links_the_static_archive_and_matches_onnx_runtime() {
    let case = data_dir().join("examples/cnn");
    let dir = tempfile::tempdir().expect("temporary folder");
    let exe = build_example(dir.path());
    // The archive bundles only the kernel-library members the model reaches.
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).expect("an archive");
    let runtime = onnxc().with_file_name("libonnxc_runtime.a");
    assert!(size(&dir.path().join("model.a")) < size(&runtime), "model.a carries the whole kernel library");
    let header = std::fs::read_to_string(dir.path().join("model.h")).expect("header");
    assert!(header.contains("#define MODEL_WORKSPACE_BYTES"), "header lacks the workspace size:\n{header}");
    assert!(header.contains("int32_t model_run(const onnxc_context *ctx"), "header lacks the entry point:\n{header}");

    let mut program = Command::new(&exe);
    program.arg(case.join("input.bin")).arg(case.join("expected.bin"));
    let stdout = run(program, "the C program");
    assert!(stdout.contains("0 of 10 outputs differ"), "unexpected output: {stdout}");
}

fn read_f32s(path: &Path) -> Vec<f32> {
    f32s_of_bytes(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn write_f32s(path: &Path, values: &[f32]) {
    std::fs::write(path, f32_bytes(values)).expect("a raw file");
}

/// Runs the program on `input` and `expected`; it must fail, reporting
/// `differ` mismatches.
fn assert_mismatches(exe: &Path, input: &Path, expected: &Path, differ: usize) {
    let out = Command::new(exe).arg(input).arg(expected).output().expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "the program did not fail: {stdout}");
    assert!(stdout.contains(&format!(" {differ} of 10 outputs differ")), "unexpected output: {stdout}");
}

#[test]
fn c_program_counts_a_nan_on_either_side_as_a_mismatch() {
    let case = data_dir().join("examples/cnn");
    let dir = tempfile::tempdir().expect("temporary folder");
    let exe = build_example(dir.path());
    let (input, expected) = (read_f32s(&case.join("input.bin")), read_f32s(&case.join("expected.bin")));

    // A NaN input makes every output NaN: none matches ONNX Runtime's.
    let nan_input = dir.path().join("nan_input.bin");
    write_f32s(&nan_input, &vec![f32::NAN; input.len()]);
    assert_mismatches(&exe, &nan_input, &case.join("expected.bin"), 10);

    // A finite output where NaN (or an infinity) is expected.
    let mut odd = expected.clone();
    (odd[2], odd[5]) = (f32::NAN, f32::INFINITY);
    let odd_expected = dir.path().join("odd_expected.bin");
    write_f32s(&odd_expected, &odd);
    assert_mismatches(&exe, &case.join("input.bin"), &odd_expected, 2);
}
