//! The object needs no runtime, no heap and no OS: `examples/freestanding`
//! (a `#![no_std]` Rust program with its own `_start`, built with stable
//! rustc as an object) is linked with `cc -nostdlib -static` against the
//! archive onnxc wrote, and runs the example CNN with its workspace in a
//! static buffer of exactly the header's size, reporting through the exit
//! syscall whether the outputs match ONNX Runtime's.

use crate::common::{data_dir, header_number, onnxc, repo_root, run_ok as run};
use object::Object;
use std::process::Command;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[test]
fn no_std_program_without_libc_runs_the_model() {
    let case = data_dir().join("examples/cnn");
    let dir = tempfile::tempdir().expect("temporary folder");
    let out = dir.path();

    let mut compile = Command::new(onnxc());
    compile.arg("compile").arg(case.join("model.onnx")).arg("-o").arg(out.join("model.o"));
    compile.args(["--emit", "obj,header,archive"]);
    run(compile, "onnxc compile");

    let mut rustc = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    rustc.env("ONNXC_WORKSPACE_BYTES", header_number(&out.join("model.h"), "MODEL_WORKSPACE_BYTES").to_string());
    rustc.env("ONNXC_INPUT", case.join("input.bin")).env("ONNXC_EXPECTED", case.join("expected.bin"));
    rustc.args(["--edition", "2021", "--crate-type", "lib", "--emit", "obj", "-C", "panic=abort", "-C", "opt-level=2"]);
    rustc.arg(repo_root().join("examples/freestanding/main.rs")).arg("-o").arg(out.join("main.o"));
    run(rustc, "rustc (the freestanding program)");

    let exe = out.join("freestanding");
    let mut cc = Command::new("cc");
    cc.args(["-nostdlib", "-static", "-Wl,--gc-sections"]).arg(out.join("main.o")).arg(out.join("model.a"));
    cc.arg("-o").arg(&exe);
    run(cc, "cc -nostdlib -static");

    let binary = std::fs::read(&exe).expect("the program");
    let elf = object::read::File::parse(binary.as_slice()).expect("an ELF file");
    assert!(elf.dynamic_symbols().next().is_none(), "the program has dynamic symbols: it is not freestanding");
    assert!(elf.section_by_name(".interp").is_none(), "the program asks for a dynamic loader");

    let stdout = run(Command::new(&exe), "the freestanding program");
    assert!(stdout.contains("outputs match"), "unexpected output: {stdout}");
}
