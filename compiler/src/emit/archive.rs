//! Static archives: the model object alone (what a Rust build links with
//! `cargo:rustc-link-lib=static=...`, the kernels coming from the
//! `onnxc-runtime` crate), or bundled with the members of the kernel
//! library it needs, so `cc main.c model.a` links with nothing else.
//!
//! A linker pulls only the archive members that define a symbol it still
//! needs; the bundle makes the same choice up front, so it carries the
//! kernels (and the pieces of `core` and `compiler_builtins` behind them)
//! that the model reaches, not the whole library.

use ar_archive_writer::{write_archive_to_stream, ArchiveKind, NewArchiveMember, DEFAULT_OBJECT_READER};
use object::{Object, ObjectSymbol};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// An archive holding `object` as its only member.
pub fn object_archive(object: &[u8], object_name: &str) -> Result<Vec<u8>, String> {
    write(vec![(object_name.to_string(), object.to_vec())])
}

/// An archive holding `object` and the members of the kernel library
/// archive `runtime_lib` that it needs, directly or through each other.
pub fn archive(object: &[u8], object_name: &str, runtime_lib: &Path) -> Result<Vec<u8>, String> {
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", runtime_lib.display());
    let runtime = std::fs::read(runtime_lib).map_err(|e| at(&e))?;
    let parsed = object::read::archive::ArchiveFile::parse(runtime.as_slice()).map_err(|e| at(&e))?;
    let mut members = Vec::new();
    for member in parsed.members() {
        let member = member.map_err(|e| at(&e))?;
        let name = String::from_utf8_lossy(member.name()).into_owned();
        if name.ends_with(".o") {
            let data = member.data(runtime.as_slice()).map_err(|e| at(&e))?;
            members.push(Member::parse(name, data).map_err(|e| at(&e))?);
        }
    }
    let model = Member::parse(object_name.to_string(), object).map_err(|e| format!("{object_name}: {e}"))?;
    let chosen = needed_members(&model, &members);
    let mut out = vec![(model.name, object.to_vec())];
    out.extend(members.into_iter().enumerate().filter(|(i, _)| chosen.contains(i)).map(|(_, m)| (m.name, m.data)));
    write(out)
}

/// One object of an archive and the global symbols it defines and needs.
struct Member {
    name: String,
    data: Vec<u8>,
    defines: Vec<Vec<u8>>,
    needs: Vec<Vec<u8>>,
}

impl Member {
    fn parse(name: String, data: &[u8]) -> Result<Member, object::Error> {
        let file = object::File::parse(data)?;
        let (mut defines, mut needs) = (Vec::new(), Vec::new());
        for symbol in file.symbols() {
            let symbol_name = symbol.name_bytes()?.to_vec();
            if symbol_name.is_empty() {
                continue;
            }
            if symbol.is_undefined() {
                needs.push(symbol_name);
            } else if symbol.is_global() {
                defines.push(symbol_name);
            }
        }
        Ok(Member { name, data: data.to_vec(), defines, needs })
    }
}

/// Indices of the members a linker would pull for `model`: the first
/// member defining each needed symbol, transitively. Symbols no member
/// defines (`memcpy`, `memset`...) are left to the final link.
fn needed_members(model: &Member, members: &[Member]) -> BTreeSet<usize> {
    let mut definer: HashMap<&[u8], usize> = HashMap::new();
    for (i, m) in members.iter().enumerate() {
        for s in &m.defines {
            definer.entry(s.as_slice()).or_insert(i);
        }
    }
    let mut chosen = BTreeSet::new();
    let mut wanted: Vec<&[u8]> = model.needs.iter().map(Vec::as_slice).collect();
    while let Some(symbol) = wanted.pop() {
        if let Some(&i) = definer.get(symbol) {
            if chosen.insert(i) {
                wanted.extend(members[i].needs.iter().map(Vec::as_slice));
            }
        }
    }
    chosen
}

fn write(members: Vec<(String, Vec<u8>)>) -> Result<Vec<u8>, String> {
    let members: Vec<NewArchiveMember> = members
        .into_iter()
        .map(|(name, data)| NewArchiveMember::new(data.into_boxed_slice(), &DEFAULT_OBJECT_READER, name))
        .collect();
    let mut out = std::io::Cursor::new(Vec::new());
    write_archive_to_stream(&mut out, &members, ArchiveKind::Gnu, false, None)
        .map_err(|e| format!("writing the archive: {e}"))?;
    Ok(out.into_inner())
}
