//! The malformed-model corpus: hostile or broken models, each built here in
//! code and paired with what its error must say. Every case runs through
//! the CLI, `onnxc check` and `onnxc compile` (check runs everything up to
//! shape inference, so it sees what compile sees), and must exit with
//! status 1, name the model file and the culprit, never panic, and never
//! open a file outside the model's folder — watched with inotify on the
//! folder around it and on the "secret" files there that the cases point at.
//!
//! The cases live by theme: `structure.rs` (protobuf, IR version, opsets,
//! graph and subgraph rules, functions), `tensors.rs` (tensor data and
//! external data), `sizes.rs` (huge values, attributes inconsistent with
//! their tensors, window arithmetic), `ml.rs` (ai.onnx.ml attributes that
//! do not fit together).

mod inotify;
mod ml;
mod sizes;
mod structure;
mod tensors;

use crate::common::{onnxc, run_with_timeout, Output};
use crate::models::{node, value};
use onnx_proto::*;
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where a case lives: `root/` holds files the model must not reach
/// (`secret.bin`, 8 bytes), `root/model/` the model and its own files.
pub struct Folders {
    pub root: PathBuf,
    pub model: PathBuf,
}

/// Writes any files a case needs and returns the model's bytes.
type Build = Box<dyn Fn(&Folders) -> Vec<u8>>;

pub struct Case {
    pub name: &'static str,
    /// Extra command-line arguments (e.g. a lowered limit).
    pub args: &'static [&'static str],
    /// Fragments stderr must contain (besides the model file's name).
    pub expect: &'static [&'static str],
    pub build: Build,
}

/// A case that `check` and `compile` must reject.
pub fn check(
    name: &'static str,
    expect: &'static [&'static str],
    build: impl Fn(&Folders) -> Vec<u8> + 'static,
) -> Case {
    Case { name, args: &[], expect, build: Box::new(build) }
}

impl Case {
    pub fn with_args(mut self, args: &'static [&'static str]) -> Case {
        self.args = args;
        self
    }
}

fn all_cases() -> Vec<Case> {
    let mut cases = structure::cases();
    cases.extend(tensors::cases());
    cases.extend(sizes::cases());
    cases.extend(ml::cases());
    cases
}

/// `y = Relu(x)` with x, y: f32[2]; cases mutate it.
pub fn valid() -> ModelProto {
    crate::models::model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![value("x", Some(&[2]))],
        vec![value("y", Some(&[2]))],
    )
}

pub fn graph(m: &mut ModelProto) -> &mut GraphProto {
    m.graph.as_mut().expect("the valid model has a graph")
}

/// [`valid`] changed by `f`, encoded.
pub fn mutated(f: impl FnOnce(&mut ModelProto)) -> Vec<u8> {
    let mut m = valid();
    f(&mut m);
    m.encode_to_vec()
}

/// A graph computing `outputs` from `nodes` and initializers, encoded.
pub fn graph_model(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
    outputs: Vec<ValueInfoProto>,
) -> Vec<u8> {
    let mut m = crate::models::model(nodes, inputs, outputs);
    graph(&mut m).initializer = inits;
    m.encode_to_vec()
}

/// Runs one command on the case's model; `None` when it behaved.
fn verdict(case: &Case, folders: &Folders, cmd: &str, out: &Output, opened: &[String]) -> Option<String> {
    let mut problems = Vec::new();
    if out.status.and_then(|s| s.code()) != Some(1) {
        problems.push(format!("should exit 1, {}", out.describe_status()));
    }
    if out.stderr.contains("panicked") {
        problems.push("panicked".into());
    }
    if !out.stderr.contains("model.onnx") {
        problems.push("stderr does not name model.onnx".into());
    }
    for e in case.expect {
        if !out.stderr.contains(e) {
            problems.push(format!("stderr lacks {e:?}"));
        }
    }
    if !opened.is_empty() {
        problems.push(format!("opened files outside {}: {opened:?}", folders.model.display()));
    }
    (!problems.is_empty())
        .then(|| format!("{} (onnxc {cmd}): {}\n  stderr: {}", case.name, problems.join("; "), out.stderr_tail(6)))
}

fn run_case(case: &Case) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temporary folder");
    let folders = Folders { root: dir.path().to_path_buf(), model: dir.path().join("model") };
    std::fs::create_dir(&folders.model).expect("mkdir");
    let secret = folders.root.join("secret.bin");
    std::fs::write(&secret, [0u8; 8]).expect("write");
    let path = folders.model.join("model.onnx");
    std::fs::write(&path, (case.build)(&folders)).expect("write the model");
    let mut failures = Vec::new();
    for cmd in ["check", "compile"] {
        let watch = inotify::OpenWatch::new(&[&folders.root, &secret]).expect("inotify");
        let out = run_with_timeout(command(cmd, &path, &folders.model, case.args), Duration::from_secs(60))
            .expect("run onnxc");
        failures.extend(verdict(case, &folders, cmd, &out, &watch.opened_files()));
    }
    failures
}

fn command(cmd: &str, model: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(onnxc());
    c.arg(cmd).arg(model).args(args);
    if cmd == "compile" {
        c.arg("-o").arg(dir.join("out.o"));
    }
    c
}

#[test]
fn every_malformed_model_is_rejected_cleanly() {
    let cases = all_cases();
    assert!(cases.len() >= 80, "the corpus has {} cases, fewer than 80", cases.len());
    let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "case names must be unique");
    let failures: Vec<String> = cases.iter().flat_map(run_case).collect();
    assert!(failures.is_empty(), "{} of {} cases misbehaved:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// `check` infers shapes with the symbolic dims `--dim` leaves unbound
/// set to 1, and says so; a shape error at that size fails it.
#[test]
fn check_infers_unbound_dims_at_one() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join("model.onnx");
    let run = |m: &ModelProto, args: &[&str]| {
        std::fs::write(&path, m.encode_to_vec()).expect("write");
        let mut c = Command::new(onnxc());
        c.arg("check").arg(&path).args(args);
        run_with_timeout(c, Duration::from_secs(60)).expect("run")
    };
    // y = x + c with x: f32[batch], c: f32[2]: fine at batch 1 (or 2), not at 3.
    let mut batched =
        crate::models::model(vec![node("Add", "add", &["x", "c"], &["y"])], vec![value("x", Some(&[1]))], vec![]);
    graph(&mut batched).initializer.push(crate::models::floats("c", &[2], &[1.0, 2.0]));
    graph(&mut batched).output.push(value("y", Some(&[2])));
    let x = graph(&mut batched).input[0].r#type.as_mut().and_then(|t| t.value.as_mut());
    let Some(type_proto::Value::TensorType(t)) = x else { panic!("a tensor input") };
    let dim = t.shape.as_mut().map(|s| &mut s.dim[0]).expect("a dim");
    dim.value = Some(tensor_shape_proto::dimension::Value::DimParam("batch".into()));
    let out = run(&batched, &[]);
    assert!(out.status.is_some_and(|s| s.success()), "{}", out.stderr);
    assert!(out.stdout.contains("note: dim \"batch\" is unbound: checked at batch=1"), "{}", out.stdout);
    let out = run(&batched, &["--dim", "batch=3"]);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1), "{}", out.stdout);
    assert!(out.stderr.contains("model.onnx") && !out.stdout.contains("note:"), "{}", out.stderr);
}

#[test]
fn the_valid_model_passes_check() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join("model.onnx");
    std::fs::write(&path, valid().encode_to_vec()).expect("write");
    let mut c = Command::new(onnxc());
    c.arg("check").arg(&path);
    let out = run_with_timeout(c, Duration::from_secs(60)).expect("run");
    assert!(out.status.is_some_and(|s| s.success()), "{}", out.stderr);
}
