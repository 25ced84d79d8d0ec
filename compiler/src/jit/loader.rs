//! `MemoryModule`: a Cranelift `Module` that links its functions and data
//! into this process's memory, so that `run`, `test`, `bench` and constant
//! folding execute exactly the code an object file would hold.
//!
//! Why our own rather than cranelift-jit: a build script that calls
//! `onnxc::Build` folds constants through this loader, and the library
//! should pull no more crates than that needs. What a model's code needs
//! from a loader is small: one mapping holding the code, the read-only data
//! and the (rarely used) writable data, the few relocation kinds Cranelift
//! emits for the host without PIC, and symbols resolved from the kernel
//! tables. So the whole loader is this file, on top of `libc`'s `mmap`.
//!
//! Layout: functions first (each at its own alignment), then read-only
//! data and writable data, each part starting on a page so that the code
//! pages become read+execute and the read-only pages read-only before any
//! of it runs. Everything lies within one mapping, so PC-relative
//! references between parts always reach (the mapping is refused above
//! 2 GiB, which 32-bit displacements cannot span).

use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir;
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_module::{
    DataDescription, DataId, FuncId, Init, Linkage, Module, ModuleDeclarations, ModuleError, ModuleReloc,
    ModuleRelocTarget, ModuleResult,
};
use std::collections::HashMap;

/// Where a symbol the code imports lives in this process.
pub type Resolver = dyn Fn(&str) -> Option<*const u8>;

/// Functions and data collected for [`MemoryModule::load`].
pub struct MemoryModule {
    isa: OwnedTargetIsa,
    declarations: ModuleDeclarations,
    resolve: Box<Resolver>,
    functions: Vec<(FuncId, Piece)>,
    data: Vec<(DataId, Piece)>,
}

/// One function's code or one data object, before it is placed.
struct Piece {
    bytes: Vec<u8>,
    align: u64,
    relocs: Vec<ModuleReloc>,
}

/// The three parts of the mapping, in address order.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    Code,
    ReadOnly,
    Writable,
}

/// The loaded code and data; unmapped on drop, so function pointers taken
/// from it must not outlive it.
pub struct LoadedCode {
    base: *mut u8,
    len: usize,
    functions: HashMap<FuncId, usize>,
}

impl MemoryModule {
    /// A module for `isa` (the host's), importing symbols through `resolve`.
    pub fn new(isa: OwnedTargetIsa, resolve: Box<Resolver>) -> MemoryModule {
        MemoryModule {
            isa,
            declarations: ModuleDeclarations::default(),
            resolve,
            functions: Vec::new(),
            data: Vec::new(),
        }
    }

    /// Maps, relocates and protects everything defined so far.
    pub fn load(self) -> Result<LoadedCode, String> {
        let layout = Layout::of(&self);
        let region = Mapping::new(layout.len)?;
        let base = region.base;
        let pieces = self.functions.iter().map(|(id, p)| (Target::Func(*id), p));
        let pieces = pieces.chain(self.data.iter().map(|(id, p)| (Target::Data(*id), p)));
        for (target, piece) in pieces {
            let at = layout.offsets[&target];
            // SAFETY: `Layout::of` reserved `piece.bytes.len()` bytes at `at`
            // inside the mapping, which is writable until `protect`.
            unsafe { std::ptr::copy_nonoverlapping(piece.bytes.as_ptr(), base.add(at), piece.bytes.len()) };
            for reloc in &piece.relocs {
                let symbol = self.address_of(&reloc.name, base, &layout)?;
                // SAFETY: as above; `patch` writes within the piece's bytes.
                unsafe { patch(base.add(at), piece.bytes.len(), reloc, symbol)? };
            }
        }
        region.protect(&layout)?;
        let functions = self.functions.iter().map(|(id, _)| (*id, layout.offsets[&Target::Func(*id)])).collect();
        Ok(LoadedCode { base: region.into_raw(), len: layout.len, functions })
    }

    /// The run-time address of a relocation's target.
    fn address_of(&self, target: &ModuleRelocTarget, base: *mut u8, layout: &Layout) -> Result<u64, String> {
        let placed = |t: Target| layout.offsets.get(&t).map(|&at| base as u64 + at as u64);
        let imported = |name: Option<&str>| {
            let name = name.ok_or("an anonymous declaration has no definition")?;
            (self.resolve)(name).map(|p| p as u64).ok_or_else(|| format!("undefined symbol {name}"))
        };
        match target {
            ModuleRelocTarget::User { namespace: 0, index } => {
                let id = FuncId::from_u32(*index);
                placed(Target::Func(id))
                    .map_or_else(|| imported(self.declarations.get_function_decl(id).name.as_deref()), Ok)
            }
            ModuleRelocTarget::User { namespace: 1, index } => {
                let id = DataId::from_u32(*index);
                placed(Target::Data(id))
                    .map_or_else(|| imported(self.declarations.get_data_decl(id).name.as_deref()), Ok)
            }
            ModuleRelocTarget::FunctionOffset(id, offset) => placed(Target::Func(*id))
                .map(|a| a + u64::from(*offset))
                .ok_or_else(|| format!("function {id} is not defined")),
            ModuleRelocTarget::LibCall(call) => c_library_symbol(&(cranelift_module::default_libcall_names())(*call)),
            other => Err(format!("unsupported relocation target {other}")),
        }
    }

    /// Keeps `piece` as `target`'s definition; `Err` names a target that
    /// already has one.
    fn define(&mut self, target: Target, piece: Piece) -> Result<(), String> {
        let name = |t: Target| match t {
            Target::Func(id) => self.declarations.get_function_decl(id).linkage_name(id).into_owned(),
            Target::Data(id) => self.declarations.get_data_decl(id).linkage_name(id).into_owned(),
        };
        let defined = match target {
            Target::Func(id) => self.functions.iter().any(|(f, _)| *f == id),
            Target::Data(id) => self.data.iter().any(|(d, _)| *d == id),
        };
        if defined {
            return Err(name(target));
        }
        match target {
            Target::Func(id) => self.functions.push((id, piece)),
            Target::Data(id) => self.data.push((id, piece)),
        }
        Ok(())
    }
}

/// A function or data object of the module.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Target {
    Func(FuncId),
    Data(DataId),
}

/// Where each piece goes, and how long the mapping is.
struct Layout {
    offsets: HashMap<Target, usize>,
    /// Where the read-only part and the writable part start.
    read_only: usize,
    writable: usize,
    len: usize,
}

impl Layout {
    fn of(module: &MemoryModule) -> Layout {
        let page = page_size();
        let mut offsets = HashMap::new();
        let mut end = 0usize;
        let mut starts = [0; 3];
        for (i, part) in [Part::Code, Part::ReadOnly, Part::Writable].into_iter().enumerate() {
            end = end.next_multiple_of(page);
            starts[i] = end;
            for (target, piece) in module.pieces_in(part) {
                let at = end.next_multiple_of(piece.align.max(1) as usize);
                offsets.insert(target, at);
                end = at + piece.bytes.len();
            }
        }
        Layout { offsets, read_only: starts[1], writable: starts[2], len: end.next_multiple_of(page).max(page) }
    }
}

impl MemoryModule {
    fn pieces_in(&self, part: Part) -> Vec<(Target, &Piece)> {
        match part {
            Part::Code => self.functions.iter().map(|(id, p)| (Target::Func(*id), p)).collect(),
            _ => {
                let writable = part == Part::Writable;
                let wanted = |id: &DataId| self.declarations.get_data_decl(*id).writable == writable;
                self.data.iter().filter(|(id, _)| wanted(id)).map(|(id, p)| (Target::Data(*id), p)).collect()
            }
        }
    }
}

/// Writes `symbol + addend` at the relocation's offset inside the piece at
/// `at` (`len` bytes), in the encoding its kind asks for.
///
/// # Safety
/// `at..at + len` must be writable memory of the mapping.
unsafe fn patch(at: *mut u8, len: usize, reloc: &ModuleReloc, symbol: u64) -> Result<(), String> {
    let site = reloc.offset as usize;
    let value = symbol.wrapping_add_signed(reloc.addend);
    let pc_relative = || {
        let delta = value.wrapping_sub(at as u64 + site as u64) as i64;
        i32::try_from(delta).map_err(|_| format!("a {:?} relocation does not reach its target", reloc.kind))
    };
    let (bytes, width) = match reloc.kind {
        Reloc::Abs8 => (value.to_le_bytes(), 8),
        Reloc::X86PCRel4 | Reloc::X86CallPCRel4 | Reloc::X86CallPLTRel4 => ((pc_relative()? as i64).to_le_bytes(), 4),
        Reloc::Arm64Call => return patch_arm64_call(at.add(site), value.wrapping_sub(at as u64 + site as u64) as i64),
        kind => return Err(format!("unsupported relocation kind {kind:?}")),
    };
    if site + width > len {
        return Err(format!("a {:?} relocation lies outside its code", reloc.kind));
    }
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), at.add(site), width);
    Ok(())
}

/// Sets the 26-bit word offset of an aarch64 `bl` at `site`.
///
/// # Safety
/// `site` must point at a writable instruction word of the mapping.
unsafe fn patch_arm64_call(site: *mut u8, delta: i64) -> Result<(), String> {
    let words = delta >> 2;
    if delta & 3 != 0 || !(-(1 << 25)..1 << 25).contains(&words) {
        return Err("an Arm64Call relocation does not reach its target".into());
    }
    let word = site.cast::<u32>().read_unaligned();
    site.cast::<u32>().write_unaligned((word & !0x03ff_ffff) | (words as u32 & 0x03ff_ffff));
    Ok(())
}

/// An error for what generated code never asks of the loader.
fn unsupported(what: &str) -> ModuleError {
    ModuleError::Backend(std::io::Error::other(format!("the in-process loader does not support {what}")).into())
}

/// A C-library function Cranelift calls for an operation the host's
/// instructions lack (e.g. `fmaf` without FMA).
fn c_library_symbol(name: &str) -> Result<u64, String> {
    let c_name = std::ffi::CString::new(name).map_err(|_| format!("bad symbol name {name}"))?;
    // SAFETY: `c_name` is a NUL-terminated string; RTLD_DEFAULT searches the
    // libraries already loaded.
    let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c_name.as_ptr()) };
    if address.is_null() {
        return Err(format!("undefined symbol {name}"));
    }
    Ok(address as u64)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(4096)
}

/// An anonymous read+write mapping, unmapped on drop unless handed over.
struct Mapping {
    base: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Result<Mapping, String> {
        if len > i32::MAX as usize {
            return Err(format!("{len} bytes of code and data are more than the loader places (2 GiB)"));
        }
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: a fresh anonymous mapping aliases nothing.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if base == libc::MAP_FAILED {
            return Err(format!("cannot map {len} bytes for the compiled code: {}", std::io::Error::last_os_error()));
        }
        Ok(Mapping { base: base.cast(), len })
    }

    /// Code pages to read+execute, read-only data to read-only.
    fn protect(&self, layout: &Layout) -> Result<(), String> {
        let parts = [
            (0, layout.read_only, libc::PROT_READ | libc::PROT_EXEC),
            (layout.read_only, layout.writable, libc::PROT_READ),
        ];
        for (start, end, protection) in parts {
            // SAFETY: `start..end` are page-aligned offsets inside the mapping.
            if end > start && unsafe { libc::mprotect(self.base.add(start).cast(), end - start, protection) } != 0 {
                return Err(format!("cannot protect the compiled code: {}", std::io::Error::last_os_error()));
            }
        }
        flush_instruction_cache(self.base, layout.read_only);
        Ok(())
    }

    fn into_raw(self) -> *mut u8 {
        let base = self.base;
        std::mem::forget(self);
        base
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and nothing points into it any more.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// x86-64 keeps instruction fetch coherent with stores; aarch64 must be told.
#[cfg(target_arch = "aarch64")]
fn flush_instruction_cache(start: *mut u8, len: usize) {
    extern "C" {
        fn __clear_cache(start: *mut libc::c_char, end: *mut libc::c_char);
    }
    // SAFETY: the range lies inside the mapping.
    unsafe { __clear_cache(start.cast(), start.add(len).cast()) };
}

#[cfg(not(target_arch = "aarch64"))]
fn flush_instruction_cache(_start: *mut u8, _len: usize) {}

impl LoadedCode {
    /// The address of a function the module defined.
    pub fn function(&self, id: FuncId) -> *const u8 {
        // SAFETY: the offset lies inside the mapping (`Layout::of`).
        unsafe { self.base.add(self.functions[&id]) }
    }
}

impl Drop for LoadedCode {
    fn drop(&mut self) {
        drop(Mapping { base: self.base, len: self.len });
    }
}

// SAFETY: the mapping is never written after `load` (no mutable globals in
// generated code); sharing or moving its address between threads is sound.
unsafe impl Send for LoadedCode {}
unsafe impl Sync for LoadedCode {}

impl Module for MemoryModule {
    fn isa(&self) -> &dyn TargetIsa {
        &*self.isa
    }

    fn declarations(&self) -> &ModuleDeclarations {
        &self.declarations
    }

    fn declare_function(&mut self, name: &str, linkage: Linkage, signature: &ir::Signature) -> ModuleResult<FuncId> {
        Ok(self.declarations.declare_function(name, linkage, signature)?.0)
    }

    fn declare_anonymous_function(&mut self, signature: &ir::Signature) -> ModuleResult<FuncId> {
        self.declarations.declare_anonymous_function(signature)
    }

    fn declare_data(&mut self, name: &str, linkage: Linkage, writable: bool, tls: bool) -> ModuleResult<DataId> {
        if tls {
            return Err(unsupported("thread-local data"));
        }
        Ok(self.declarations.declare_data(name, linkage, writable, tls)?.0)
    }

    fn declare_anonymous_data(&mut self, writable: bool, tls: bool) -> ModuleResult<DataId> {
        self.declarations.declare_anonymous_data(writable, tls)
    }

    fn define_function_with_control_plane(
        &mut self,
        func: FuncId,
        ctx: &mut cranelift_codegen::Context,
        ctrl_plane: &mut ControlPlane,
    ) -> ModuleResult<()> {
        ctx.compile(&*self.isa, ctrl_plane)?;
        let compiled = ctx.compiled_code().expect("compiled just above");
        let align = u64::from(compiled.buffer.alignment.max(self.isa.function_alignment().preferred));
        let bytes = compiled.code_buffer().to_vec();
        let relocs =
            compiled.buffer.relocs().iter().map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, func)).collect();
        self.define(Target::Func(func), Piece { bytes, align, relocs }).map_err(ModuleError::DuplicateDefinition)
    }

    fn define_function_bytes(
        &mut self,
        func: FuncId,
        align: u64,
        bytes: &[u8],
        relocs: &[ModuleReloc],
    ) -> ModuleResult<()> {
        let piece = Piece { bytes: bytes.to_vec(), align, relocs: relocs.to_vec() };
        self.define(Target::Func(func), piece).map_err(ModuleError::DuplicateDefinition)
    }

    fn define_data(&mut self, data: DataId, description: &DataDescription) -> ModuleResult<()> {
        let bytes = match &description.init {
            Init::Uninitialized => return Err(unsupported("data without contents")),
            Init::Zeros { size } => vec![0; *size],
            Init::Bytes { contents } => contents.to_vec(),
        };
        let relocs = description.all_relocs(Reloc::Abs8).collect();
        let piece = Piece { bytes, align: description.align.unwrap_or(8), relocs };
        self.define(Target::Data(data), piece).map_err(ModuleError::DuplicateDefinition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_codegen::ir::{types, AbiParam, InstBuilder};
    use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

    /// Defines `name() -> i64` in `module` from the instructions `body` emits.
    fn define(
        module: &mut MemoryModule,
        name: &str,
        linkage: Linkage,
        body: impl FnOnce(&mut MemoryModule, &mut FunctionBuilder) -> ir::Value,
    ) -> FuncId {
        let mut ctx = module.make_context();
        ctx.func.signature.returns.push(AbiParam::new(types::I64));
        let id = module.declare_function(name, linkage, &ctx.func.signature).unwrap();
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.switch_to_block(entry);
        b.seal_block(entry);
        let result = body(module, &mut b);
        b.ins().return_(&[result]);
        b.finalize(module.target_config());
        module.define_function(id, &mut ctx).unwrap();
        id
    }

    fn module(resolve: Box<Resolver>) -> MemoryModule {
        MemoryModule::new(super::super::host_isa().unwrap(), resolve)
    }

    extern "C" fn forty() -> i64 {
        40
    }

    #[test]
    fn calls_and_data_are_linked_in_place() {
        let mut m = module(Box::new(|name| (name == "forty").then_some(forty as *const u8)));
        let data = m.declare_data("two", Linkage::Local, false, false).unwrap();
        let mut description = DataDescription::new();
        description.define(2i64.to_le_bytes().into());
        m.define_data(data, &description).unwrap();
        let sig = m.make_signature();
        let mut returns_i64 = sig.clone();
        returns_i64.returns.push(AbiParam::new(types::I64));
        let imported = m.declare_function("forty", Linkage::Import, &returns_i64).unwrap();
        let main = define(&mut m, "main", Linkage::Local, |m, b| {
            let f = m.declare_func_in_func(imported, b.func);
            let call = b.ins().call(f, &[]);
            let forty = b.inst_results(call)[0];
            let g = m.declare_data_in_func(data, b.func);
            let address = b.ins().symbol_value(types::I64, g);
            let two = b.ins().load(types::I64, ir::MemFlagsData::trusted(), address, 0);
            b.ins().iadd(forty, two)
        });
        let code = m.load().unwrap();
        // SAFETY: `main` was defined as `extern "C" fn() -> i64`.
        let f = unsafe { std::mem::transmute::<*const u8, extern "C" fn() -> i64>(code.function(main)) };
        assert_eq!(f(), 42);
    }

    #[test]
    fn an_undefined_symbol_is_an_error_naming_it() {
        let mut m = module(Box::new(|_| None));
        let mut returns_i64 = m.make_signature();
        returns_i64.returns.push(AbiParam::new(types::I64));
        let imported = m.declare_function("onnxc_nowhere", Linkage::Import, &returns_i64).unwrap();
        define(&mut m, "main", Linkage::Local, |m, b| {
            let f = m.declare_func_in_func(imported, b.func);
            let call = b.ins().call(f, &[]);
            b.inst_results(call)[0]
        });
        assert_eq!(m.load().err().as_deref(), Some("undefined symbol onnxc_nowhere"));
    }
}
