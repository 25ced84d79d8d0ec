//! End to end through the artefacts users link: compile the example CNN to
//! an object, header and static archive, build `examples/c/main.c` against
//! the archive with the system `cc`, run it, and compare with ONNX Runtime.

use crate::common::{data_dir, onnxc, repo_root, run_ok as run};
use std::process::Command;

#[test]
fn c_program_links_the_static_archive_and_matches_onnx_runtime() {
    let case = data_dir().join("examples/cnn");
    let dir = tempfile::tempdir().expect("temporary folder");
    let obj = dir.path().join("model.o");

    let mut compile = Command::new(onnxc());
    compile.arg("compile").arg(case.join("model.onnx")).arg("-o").arg(&obj).arg("--emit").arg("obj,header,archive");
    run(compile, "onnxc compile");
    for artefact in ["model.o", "model.h", "model.a"] {
        assert!(dir.path().join(artefact).is_file(), "{artefact} was not written");
    }
    // The archive bundles only the kernel-library members the model reaches.
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).expect("an archive");
    let runtime = onnxc().with_file_name("libonnxc_runtime.a");
    assert!(size(&dir.path().join("model.a")) < size(&runtime), "model.a carries the whole kernel library");
    let header = std::fs::read_to_string(dir.path().join("model.h")).expect("header");
    assert!(header.contains("#define MODEL_WORKSPACE_BYTES"), "header lacks the workspace size:\n{header}");
    assert!(header.contains("int32_t model_run(const onnxc_context *ctx"), "header lacks the entry point:\n{header}");

    let exe = dir.path().join("cnn");
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-O2", "-Wall", "-Werror", "-I"])
        .arg(dir.path())
        .arg(repo_root().join("examples/c/main.c"))
        .arg(dir.path().join("model.a"))
        .arg("-o")
        .arg(&exe);
    run(cc, "cc (linking only the archive)");

    let mut program = Command::new(&exe);
    program.arg(case.join("input.bin")).arg(case.join("expected.bin"));
    let stdout = run(program, "the C program");
    assert!(stdout.contains("0 of 10 outputs differ"), "unexpected output: {stdout}");
}
