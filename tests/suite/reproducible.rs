//! Compilation is a function of the model and the flags: two `onnxc`
//! processes (with different hash seeds) write byte-identical objects,
//! headers, Rust modules and archives; and `--max-ram` refuses a model
//! whose workspace does not fit.

use crate::common::{data_dir, header_number, onnxc, run_with_timeout};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn compile(model: &Path, out: &Path, extra: &[&str]) -> crate::common::Output {
    let mut cmd = Command::new(onnxc());
    cmd.arg("compile").arg(model).arg("-o").arg(out).args(extra);
    run_with_timeout(cmd, Duration::from_secs(300)).expect("onnxc runs")
}

#[test]
fn the_same_model_and_flags_give_identical_artefacts() {
    let dir = tempfile::tempdir().expect("temporary folder");
    for case in ["examples/cnn", "light-random/squeezenet"] {
        let model = data_dir().join(case).join("model.onnx");
        let [a, b] = ["a", "b"].map(|run| {
            let out = dir.path().join(run).join("model.o");
            std::fs::create_dir_all(out.parent().expect("a folder")).expect("output folder");
            let result = compile(&model, &out, &["--emit", "obj,header,rust,archive", "--name", "net"]);
            assert!(result.status.is_some_and(|s| s.success()), "{case}: {}", result.stderr);
            out
        });
        for ext in ["o", "h", "rs", "a"] {
            let read = |p: &Path| std::fs::read(p.with_extension(ext)).expect("artefact");
            assert!(read(&a) == read(&b), "{case}: the .{ext} files of two compilations differ");
        }
    }
}

#[test]
fn max_ram_refuses_a_workspace_that_does_not_fit() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let model = data_dir().join("examples/cnn/model.onnx");
    let out = dir.path().join("model.o");
    let header = compile(&model, &out, &["--emit", "header"]);
    assert!(header.status.is_some_and(|s| s.success()), "{}", header.stderr);
    let needed = header_number(&out.with_extension("h"), "MODEL_WORKSPACE_BYTES");

    let refused = compile(&model, &out, &["--max-ram", &(needed - 1).to_string()]);
    assert_eq!(refused.status.and_then(|s| s.code()), Some(1), "{}", refused.stderr);
    for part in ["model.onnx", &format!("needs {needed} bytes"), "max-ram"] {
        assert!(refused.stderr.contains(part), "the error lacks {part:?}: {}", refused.stderr);
    }
    let fits = compile(&model, &out, &["--max-ram", &needed.to_string()]);
    assert!(fits.status.is_some_and(|s| s.success()), "{}", fits.stderr);
}
