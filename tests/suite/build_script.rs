//! What a crate gets that compiles its models in `build.rs` with
//! `onnxc::Build` (`examples/rust`, built and run by `cargo test
//! --workspace`): the library without the command line's crates.

use crate::common::repo_root;
use std::process::Command;

/// Crates that only the `onnxc` command line needs (its argument parser,
/// the loader of `test --via object`, the image decoders), which a build
/// dependency on `onnxc` with `default-features = false` must not compile.
const CLI_ONLY: [&str; 4] = ["clap", "libloading", "cranelift-jit", "image"];

#[test]
fn a_build_dependency_on_the_library_pulls_no_cli_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-p", "onnxc-example-rust", "-e", "normal,build", "--prefix", "none"])
        .args(["--format", "{p}"])
        .current_dir(repo_root())
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).expect("utf-8");
    let crate_names: Vec<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    assert!(crate_names.contains(&"onnxc"), "onnxc is not a build dependency of the example:\n{tree}");
    for name in CLI_ONLY {
        assert!(!crate_names.contains(&name), "{name} is in the example crate's dependency graph:\n{tree}");
    }
}
