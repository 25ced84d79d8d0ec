//! The library API that Cargo build scripts call:
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), onnxc::BuildError> {
//!     onnxc::Build::new("models/mnist.onnx").dim("batch", 1).name("mnist").compile()?;
//!     Ok(())
//! }
//! ```
//!
//! `compile` runs the same pipeline as `onnxc compile`, for the target
//! Cargo builds for, and writes two files to `OUT_DIR`: a static archive
//! holding the model object, and the typed Rust module of
//! `emit::rust_module` to `include!`. It prints the `cargo:` lines that
//! link the archive and rerun the script when the model changes. The
//! kernels come from the `onnxc-runtime` crate, which the including crate
//! lists as an ordinary dependency: the generated module names it, so
//! Cargo links its rlib for every target it builds.

use crate::infer::Bindings;
use crate::{driver, emit};
use std::path::{Path, PathBuf};

/// A model to compile from a build script (see the module docs).
#[derive(Clone, Debug)]
pub struct Build {
    model: PathBuf,
    name: Option<String>,
    bindings: Bindings,
    max_ram: Option<usize>,
    out_dir: Option<PathBuf>,
    target: Option<String>,
    portable: bool,
}

/// What [`Build::compile`] wrote.
#[derive(Clone, Debug)]
pub struct Built {
    /// The Rust module to `include!`: `OUT_DIR/NAME.rs`.
    pub module: PathBuf,
    /// The static archive with the model object: `OUT_DIR/libonnxc_NAME.a`.
    pub library: PathBuf,
    /// The workspace one call needs (the module's `WORKSPACE_BYTES`).
    pub workspace_bytes: usize,
}

/// Why [`Build::compile`] failed, naming the model and the value or node
/// at fault. Its `Debug` is its message too, so a build script whose
/// `main` returns the error shows Cargo a readable line.
pub struct BuildError(String);

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "onnxc: {}", self.0)
    }
}

impl std::fmt::Debug for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for BuildError {}

impl Build {
    pub fn new(model: impl Into<PathBuf>) -> Build {
        Build {
            model: model.into(),
            name: None,
            bindings: Bindings::default(),
            max_ram: None,
            out_dir: None,
            target: None,
            portable: false,
        }
    }

    /// Prefix of the exported symbol (`NAME_run`) and name of the written
    /// files; default: the model's file stem. Make it unique in the final
    /// program: two models with one name clash at link time.
    pub fn name(&mut self, name: &str) -> &mut Build {
        self.name = Some(name.to_string());
        self
    }

    /// Binds a symbolic dim (`dim_param`), like `--dim SYM=N`.
    pub fn dim(&mut self, symbol: &str, size: usize) -> &mut Build {
        self.bindings.dims.insert(symbol.to_string(), size);
        self
    }

    /// Fixes an input's shape, like `--shape NAME=AxB`.
    pub fn shape(&mut self, input: &str, dims: &[usize]) -> &mut Build {
        self.bindings.shapes.insert(input.to_string(), dims.to_vec());
        self
    }

    /// Fails the build when the workspace would exceed `bytes`, like `--max-ram`.
    pub fn max_ram(&mut self, bytes: usize) -> &mut Build {
        self.max_ram = Some(bytes);
        self
    }

    /// Where to write; default: `$OUT_DIR`.
    pub fn out_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Build {
        self.out_dir = Some(dir.into());
        self
    }

    /// Target triple; default: `$TARGET` (set by Cargo), else this machine.
    pub fn target(&mut self, triple: &str) -> &mut Build {
        self.target = Some(triple.to_string());
        self
    }

    /// Portable mode: the object calls no kernel (see `onnxc compile
    /// --portable`); for targets whose `onnxc-runtime` is not wanted.
    pub fn portable(&mut self, portable: bool) -> &mut Build {
        self.portable = portable;
        self
    }

    /// Compiles the model, writes the archive and the Rust module, and
    /// prints the `cargo:` directives that link the archive.
    pub fn compile(&self) -> Result<Built, BuildError> {
        let model = self.model.display();
        let out_dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("OUT_DIR").map(PathBuf::from).ok_or_else(|| {
                BuildError(format!("{model}: OUT_DIR is not set: call compile() from a build script, or set out_dir"))
            })?,
        };
        let triple_name = self.target.clone().or_else(|| std::env::var("TARGET").ok());
        let triple = match &triple_name {
            None => target_lexicon::Triple::host(),
            Some(t) => t.parse().map_err(|e| BuildError(format!("{model}: target {t}: {e}")))?,
        };
        let stem = self.model.file_stem().map(|s| s.to_string_lossy().into_owned());
        let prefix = emit::c_identifier(self.name.as_deref().or(stem.as_deref()).unwrap_or("model"));

        let limits = crate::limits::Limits::default();
        let (graph, plan) = driver::compile(&self.model, &self.bindings, self.max_ram, &limits, self.portable)
            .map_err(|e| BuildError(e.to_string()))?;
        let module = emit::rust_module(&graph, &plan, &prefix).map_err(|e| BuildError(format!("{model}: {e}")))?;
        let object = emit::object(&graph, &plan, &triple, &prefix, self.portable, &limits)
            .map_err(|e| BuildError(format!("{model}: {e}")))?
            .bytes;
        let archive = emit::object_archive(&object, &format!("{prefix}.o")).map_err(BuildError)?;

        let library = out_dir.join(format!("libonnxc_{prefix}.a"));
        let module_path = out_dir.join(format!("{prefix}.rs"));
        write(&library, &archive)?;
        write(&module_path, module.as_bytes())?;

        // A model the build script wrote into OUT_DIR itself is newer than
        // the script's last run every time: watching it would rerun forever.
        if !self.model.starts_with(&out_dir) {
            println!("cargo:rerun-if-changed={}", self.model.display());
        }
        println!("cargo:rustc-link-search=native={}", out_dir.display());
        println!("cargo:rustc-link-lib=static=onnxc_{prefix}");
        Ok(Built { module: module_path, library, workspace_bytes: plan.workspace_bytes })
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), BuildError> {
    std::fs::write(path, bytes).map_err(|e| BuildError(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_model_and_read_the_same_in_debug() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let missing = dir.path().join("absent.onnx");
        let err = Build::new(&missing).out_dir(dir.path()).compile().expect_err("no such model");
        let text = format!("{err:?}");
        assert_eq!(text, err.to_string());
        assert!(text.starts_with("onnxc: ") && text.contains("absent.onnx"), "{text}");
    }
}
