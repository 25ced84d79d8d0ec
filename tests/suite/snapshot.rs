//! Snapshots of the textual mid-IR: a model compiled with `--emit mir`,
//! compared exactly with a checked-in `snapshots/<name>.mir`, so what the
//! passes make of a graph (a fusion, a fold, a loop kept or unrolled) is
//! a file a review reads as a diff. With `ONNXC_UPDATE_SNAPSHOTS=1` the
//! comparison writes the new text instead (then review `git diff`).

use crate::common::{onnxc_in, repo_root, succeeded, write_model};
use onnx_proto::ModelProto;

/// The textual mid-IR of `m` compiled by `onnxc compile` with `flags`.
pub fn compiled_mir(m: &ModelProto, flags: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", m);
    let mut args = vec!["compile", "model.onnx", "-o", "model.o", "--emit", "obj,mir"];
    args.extend(flags);
    let out = onnxc_in(dir.path(), &args);
    assert!(succeeded(&out), "{}", out.stderr);
    std::fs::read_to_string(dir.path().join("model.mir")).expect("mir")
}

/// Fails unless `mir` is `snapshots/<name>.mir` (or rewrites the file,
/// under `ONNXC_UPDATE_SNAPSHOTS=1`).
pub fn assert_snapshot(name: &str, mir: &str) {
    let path = repo_root().join(format!("tests/suite/snapshots/{name}.mir"));
    if std::env::var_os("ONNXC_UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::write(&path, mir).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (ONNXC_UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    assert!(
        mir == want,
        "{name}: the mid-IR differs from {} (ONNXC_UPDATE_SNAPSHOTS=1 rewrites it):\n--- want\n{want}\n--- got\n{mir}",
        path.display()
    );
}
