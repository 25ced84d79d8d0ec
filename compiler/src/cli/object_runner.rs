//! Runs a model through its real object file: emit the object, link it
//! with the kernel library into a shared library with the system `cc`,
//! load that, and call `PREFIX_run` through the C ABI. This is how
//! `onnxc test --via object` checks the artefact users link.

use onnxc::host::buffer::Placement;
use onnxc::host::call::{Datum, Interface, RunFn};
use onnxc::ir::Graph;
use onnxc::limits::Limits;
use onnxc::plan::Plan;
use onnxc::{driver, emit};
use std::process::Command;

pub struct ObjectModel {
    // Keeps the mapping alive while `run` is callable.
    _lib: libloading::Library,
    _dir: tempfile::TempDir,
    run: RunFn,
    interface: Interface,
}

impl ObjectModel {
    pub fn build(graph: &Graph, plan: &Plan, portable: bool, limits: &Limits) -> Result<ObjectModel, String> {
        let triple = target_lexicon::Triple::host();
        let object = emit::object(graph, plan, &triple, "model", portable, limits).map_err(|e| e.to_string())?;
        let needs_std = object.footprint.needs_std();
        let runtime = driver::runtime_lib(needs_std).map_err(|e| e.to_string())?;
        let dir = tempfile::tempdir().map_err(|e| format!("temporary folder: {e}"))?;
        let obj_path = dir.path().join("model.o");
        let so_path = dir.path().join("libmodel.so");
        std::fs::write(&obj_path, object.bytes).map_err(|e| format!("{}: {e}", obj_path.display()))?;
        let out = Command::new("cc")
            .arg("-shared")
            .arg("-o")
            .arg(&so_path)
            .arg(&obj_path)
            .arg(&runtime)
            .arg("-lm")
            .output()
            .map_err(|e| format!("running cc: {e}"))?;
        if !out.status.success() {
            return Err(format!("cc failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        // SAFETY: the library is our own freshly linked model, without
        // initialisers beyond those of the kernel archive.
        let lib = unsafe { libloading::Library::new(&so_path) }.map_err(|e| e.to_string())?;
        let run = unsafe { lib.get::<RunFn>(b"model_run\0") }.map_err(|e| e.to_string())?;
        let run = *run;
        Ok(ObjectModel { _lib: lib, _dir: dir, run, interface: Interface::of(graph, plan)? })
    }

    pub fn run(&self, inputs: &[Datum], placement: Placement) -> Result<Vec<Datum>, String> {
        self.interface.call(self.run, inputs, None, placement)
    }
}
