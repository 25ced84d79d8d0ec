//! The one integration-test binary of the workspace.
//!
//! Registered by the compiler crate (`compiler/Cargo.toml`):
//!
//! ```toml
//! [[test]]
//! name = "suite"
//! path = "../tests/suite/main.rs"
//! harness = true
//! ```
//!
//! so that `env!("CARGO_BIN_EXE_onnxc")` names the freshly built CLI. Each
//! area of testing is one module here; add end-to-end tests as new files and
//! a `mod` line below. Run everything with `bash tests/run.sh`.

mod bad_input;
mod build_script;
mod common;
mod concurrency;
mod conformance;
mod control_flow;
mod cross;
mod dynamic;
mod dynamic_codegen;
mod end_to_end;
mod freestanding;
mod fusion;
mod gradient;
mod image;
mod judging;
mod maps;
mod models;
mod pipeline;
mod quantized;
mod random;
mod reproducible;
mod runtime_faults;
mod sequences;
mod sklearn;
mod snapshot;
mod sparse;
mod strings;
mod symbolic_dims;
