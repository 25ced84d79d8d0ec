//! Stage 8: the artefacts a user links — an object file (cranelift-object),
//! a C header describing its entry point, static archives (`archive`), and
//! a typed Rust module over the entry point (`rust`).

mod archive;
mod header;
mod rust;

pub use archive::{archive, object_archive};
pub use header::header;
pub use rust::rust_module;

use crate::codegen::{self, CodegenError, Footprint};
use crate::ir::Graph;
use crate::limits::Limits;
use crate::plan::Plan;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_module::default_libcall_names;
use cranelift_object::{ObjectBuilder, ObjectModule};
use target_lexicon::{Architecture, BinaryFormat, Triple};

/// A relocatable object file and what each node put in it.
pub struct Object {
    pub bytes: Vec<u8>,
    pub footprint: Footprint,
}

/// True when `onnxc compile` cannot give objects for `triple` a kernel
/// library (`libonnxc_runtime.a` is built for this machine only), so they
/// are compiled in portable mode. (Build scripts can: Cargo builds the
/// `onnxc-runtime` rlib for whatever target it builds.)
pub fn needs_portable(triple: &Triple) -> bool {
    *triple != Triple::host()
}

/// Refuses targets whose objects onnxc cannot write: besides x86-64, ELF
/// for 64-bit ARM and RISC-V (the Cranelift back ends built in).
pub fn check_target(triple: &Triple) -> Result<(), CodegenError> {
    let elf = matches!(triple.binary_format, BinaryFormat::Elf);
    match triple.architecture {
        Architecture::X86_64 => Ok(()),
        Architecture::Aarch64(_) | Architecture::Riscv64(_) if elf => Ok(()),
        _ => Err(CodegenError::Module(format!(
            "target {triple} is not supported: onnxc emits objects for x86_64, and ELF objects for aarch64 and \
             riscv64 (e.g. aarch64-unknown-linux-gnu, riscv64gc-unknown-linux-gnu)"
        ))),
    }
}

/// Compiles the model's `PREFIX_run` function into a relocatable object;
/// `portable` keeps it free of kernel-library calls (see `codegen`), and
/// code generation stops once `limits`' compile time is spent.
pub fn object(
    graph: &Graph,
    plan: &Plan,
    triple: &Triple,
    prefix: &str,
    portable: bool,
    limits: &Limits,
) -> Result<Object, CodegenError> {
    check_target(triple)?;
    if graph.symbolic.is_some() {
        // The header and Rust module describe static shapes only.
        return Err(CodegenError::Module(
            "symbolic dims: object files are not emitted yet (the code runs through the JIT: onnxc test --dynamic)"
                .into(),
        ));
    }
    let mut flags = settings::builder();
    for (k, v) in [("opt_level", "speed"), ("is_pic", "true")] {
        flags.set(k, v).map_err(|e| CodegenError::Module(format!("{k}: {e}")))?;
    }
    let isa = cranelift_codegen::isa::lookup(triple.clone())
        .map_err(|e| CodegenError::Module(format!("target {triple}: {e}")))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| CodegenError::Module(format!("target {triple}: {e}")))?;
    let builder = ObjectBuilder::new(isa, prefix.as_bytes().to_vec(), default_libcall_names())?;
    let mut module = ObjectModule::new(builder);
    let (_, footprint) = codegen::define_model(
        &mut module,
        graph,
        plan,
        &format!("{prefix}_run"),
        codegen::Mode { portable, profile: false },
        limits,
    )?;
    let bytes = module.finish().emit().map_err(|e| CodegenError::Module(e.to_string()))?;
    Ok(Object { bytes, footprint })
}

/// Turns a user-chosen name into a C identifier.
pub fn c_identifier(name: &str) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}
