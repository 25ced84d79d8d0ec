//! `onnxc compile`: object file plus the artefacts `--emit` asks for.

use crate::{LimitArgs, ShapeArgs};
use onnxc::{driver, emit};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    pub model: PathBuf,
    /// Output path; other artefacts are written beside it with their own extension
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    #[command(flatten)]
    pub shapes: ShapeArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Target triple (default: this machine): x86_64, or ELF for aarch64
    /// and riscv64, e.g. aarch64-unknown-linux-gnu (implies --portable)
    #[arg(long)]
    pub target: Option<String>,
    /// Portable mode: every operator lowered in Cranelift alone, so the
    /// object references no symbol beyond memcpy/memset and needs no kernel
    /// library (automatic for targets other than this machine)
    #[arg(long)]
    pub portable: bool,
    /// Prefix of the exported symbols and header macros (default: model)
    #[arg(long)]
    pub name: Option<String>,
    /// Comma-separated: obj, header, rust, archive, mir
    #[arg(long, value_delimiter = ',', default_values_t = vec!["obj".to_string(), "header".to_string()])]
    pub emit: Vec<String>,
    /// Fail when the workspace (all the memory a call writes besides its
    /// outputs) would exceed BYTES
    #[arg(long, value_name = "BYTES")]
    pub max_ram: Option<usize>,
}

pub fn compile(a: &Args) -> Result<ExitCode, String> {
    for e in &a.emit {
        if !["obj", "header", "rust", "archive", "mir"].contains(&e.as_str()) {
            return Err(format!("--emit {e}: expected obj, header, rust, archive or mir"));
        }
    }
    let triple = match &a.target {
        None => target_lexicon::Triple::host(),
        Some(t) => t.parse().map_err(|e| format!("--target {t}: {e}"))?,
    };
    emit::check_target(&triple).map_err(|e| format!("--target: {e}"))?;
    let portable = a.portable || emit::needs_portable(&triple);
    let bindings = super::bindings(&a.shapes)?;
    let limits = super::limits(&a.limits)?;
    let (graph, plan) =
        driver::compile(&a.model, &bindings, a.max_ram, &limits, portable).map_err(|e| e.to_string())?;
    let prefix = emit::c_identifier(a.name.as_deref().unwrap_or("model"));
    let wants = |e: &str| a.emit.iter().any(|x| x == e);
    let write = |ext: &str, bytes: &[u8]| -> Result<(), String> {
        let path = a.output.with_extension(ext);
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))
    };
    if wants("mir") {
        write("mir", graph.to_string().as_bytes())?;
    }
    let object = if wants("obj") || wants("archive") {
        Some(
            emit::object(&graph, &plan, &triple, &prefix, portable, &limits)
                .map_err(|e| format!("{}: {e}", a.model.display()))?,
        )
    } else {
        None
    };
    if let (true, Some(obj)) = (wants("obj"), &object) {
        std::fs::write(&a.output, &obj.bytes).map_err(|e| format!("{}: {e}", a.output.display()))?;
    }
    if wants("header") {
        write("h", emit::header(&graph, &plan, &prefix).as_bytes())?;
    }
    if wants("rust") {
        let module = emit::rust_module(&graph, &plan, &prefix).map_err(|e| format!("{}: {e}", a.model.display()))?;
        write("rs", module.as_bytes())?;
    }
    if let (true, Some(obj)) = (wants("archive"), &object) {
        // A portable object needs no kernel library: it is archived alone.
        let ar = if portable {
            emit::object_archive(&obj.bytes, &format!("{prefix}.o"))?
        } else {
            let lib = driver::runtime_lib(obj.footprint.needs_std()).map_err(|e| e.to_string())?;
            emit::archive(&obj.bytes, &format!("{prefix}.o"), &lib)?
        };
        write("a", &ar)?;
    }
    Ok(ExitCode::SUCCESS)
}
