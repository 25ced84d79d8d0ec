//! scikit-learn models converted by skl2onnx (`tests/data/sklearn`, made by
//! `tests/make_sklearn_data.sh`): every case must pass `onnxc test` against
//! ONNX Runtime's outputs, through the JIT and through the object file.
//! Labels are compared exactly; scores and regression outputs at rtol 1e-3,
//! atol 1e-5 (ONNX Runtime computes in f32 where onnxc uses f64).

use crate::common::{data_dir, onnxc_in};

/// `onnxc test`'s tolerance arguments for these cases (also used by the
/// conformance ratchet and `tests/update_passing.sh`).
pub const TOLERANCE: &[&str] = &["--atol", "1e-5"];

fn every_case_passes(via: &str) {
    let folder = data_dir().join("sklearn");
    assert!(folder.is_dir(), "{} does not exist: run `bash tests/make_sklearn_data.sh`", folder.display());
    let cases = std::fs::read_dir(&folder)
        .expect("read tests/data/sklearn")
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().join("model.onnx").is_file()))
        .count();
    assert!(cases >= 16, "tests/data/sklearn has {cases} cases, expected at least 16");
    let mut args = vec!["test", ".", "--via", via];
    args.extend_from_slice(TOLERANCE);
    let out = onnxc_in(&folder, &args);
    let last = out.stdout.lines().last().unwrap_or("");
    assert_eq!(last, format!("{cases} passed, 0 failed"), "onnxc test --via {via}:\n{}{}", out.stdout, out.stderr);
}

#[test]
fn sklearn_models_match_onnx_runtime() {
    every_case_passes("jit");
}

#[test]
fn sklearn_models_match_onnx_runtime_as_objects() {
    every_case_passes("object");
}
