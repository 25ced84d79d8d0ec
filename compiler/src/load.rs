//! Stage 1: bytes → [`ModelProto`].
//!
//! Reads a model file (size-limited), decodes it with prost, resolves every
//! external tensor relative to the model file's folder and checks every
//! reachable tensor's data against its `data_type` and `dims`.
//!
//! Invariant on success: no reachable [`TensorProto`] has external data
//! (`external_data` is empty and `data_location` is unset), every reachable
//! tensor has a known, non-UNDEFINED `data_type`, non-negative dims whose
//! element count and byte size fit in `u64` and the size limit, no `segment`,
//! and its data in exactly one place (`raw_data` or the typed field for its
//! type) with exactly the length its dims require — or no data at all when
//! the tensor has zero elements.
//!
//! Reachable tensors: graph initializers and sparse initializers (values and
//! indices), node attribute tensors (`t`, `tensors`, `sparse_tensor`,
//! `sparse_tensors`) and the graphs in attributes (`g`, `graphs`) recursively,
//! in the main graph, in function bodies (and function attribute defaults)
//! and in `training_info` graphs (which are validated here and never
//! compiled).
//!
//! An external `location` is refused when it is empty or absolute, has a
//! `..` component, leaves the model's folder through a symlink, is not a
//! regular file, is hardlinked, or its offset and length run past the end
//! of the file ([`ExternalProblem`]).

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use onnx_proto::tensor_proto::{DataLocation, DataType};
use onnx_proto::{
    AttributeProto, FunctionProto, GraphProto, Message, ModelProto, NodeProto, SparseTensorProto, TensorProto,
};
use thiserror::Error;

use crate::limits::Limits;

/// Why a model could not be loaded. Every message starts with the model file.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("{file}: cannot read the model: {source}")]
    Read {
        file: String,
        #[source]
        source: io::Error,
    },
    #[error("{file}: the model file has {size} bytes, more than the limit of {limit} (--max-file-bytes)")]
    FileTooLarge { file: String, size: u64, limit: u64 },
    #[error("{file}: not a valid ONNX model (protobuf decoding failed: {source})")]
    Decode {
        file: String,
        #[source]
        source: prost::DecodeError,
    },
    /// A problem with one tensor; `place` says where it is, e.g.
    /// `initializer "w"` or `node "c" (Constant): attribute "value": tensor "t"`.
    #[error("{file}: {place}: {problem}")]
    Tensor { file: String, place: String, problem: Box<TensorProblem> },
}

/// What is wrong with a tensor.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TensorProblem {
    #[error("segmented tensors (field `segment`) are not supported")]
    Segment,
    #[error("data_type is UNDEFINED")]
    UndefinedType,
    #[error("unknown data_type code {0}")]
    UnknownType(i32),
    #[error("dims {dims} contain a negative value")]
    NegativeDim { dims: String },
    #[error("dims {dims} of {dtype}: element count or byte size overflows")]
    SizeOverflow { dims: String, dtype: &'static str },
    #[error("dims {dims} of {dtype} need {bytes} bytes, more than the limit of {limit} (--max-tensor-bytes)")]
    TooLarge { dims: String, dtype: &'static str, bytes: u64, limit: u64 },
    #[error("data is in more than one place ({})", .0.join(", "))]
    MultiplePlaces(Vec<&'static str>),
    #[error("has {field} but {dtype} data belongs in {expected}")]
    WrongField { field: &'static str, dtype: &'static str, expected: &'static str },
    #[error("raw_data has {got} bytes, dims {dims} of {dtype} need {need}")]
    RawLength { got: u64, dims: String, dtype: &'static str, need: u64 },
    #[error("{field} has {got} values, dims {dims} of {dtype} need {need}")]
    TypedLength { field: &'static str, got: u64, dims: String, dtype: &'static str, need: u64 },
    #[error("has no data, dims {dims} of {dtype} need {need} values")]
    NoData { dims: String, dtype: &'static str, need: u64 },
    #[error("STRING tensors cannot use raw_data or external data")]
    StringRaw,
    #[error("unknown data_location {0}")]
    UnknownLocation(i32),
    #[error("external_data is set but data_location is not EXTERNAL")]
    ExternalDataNotExternal,
    #[error("external_data key \"{0}\" appears more than once")]
    DuplicateExternalKey(String),
    #[error("external_data has no \"location\" key")]
    NoExternalLocation,
    #[error("external data {key} \"{value}\" is not a non-negative integer")]
    BadExternalNumber { key: &'static str, value: String },
    #[error("external data location \"{location}\" {problem}")]
    External { location: String, problem: ExternalProblem },
    #[error("sparse tensor has no {0}")]
    SparseMissing(&'static str),
    #[error("sparse tensor dims {0} contain a negative value")]
    SparseNegativeDim(String),
}

/// What is wrong with an external data reference.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExternalProblem {
    #[error("is empty")]
    Empty,
    #[error("is an absolute path")]
    Absolute,
    #[error("leaves the model's folder")]
    LeavesFolder,
    #[error("leaves the model's folder (through a symlink)")]
    SymlinkLeavesFolder,
    #[error("cannot be opened: {0}")]
    Open(String),
    #[error("is not a regular file")]
    NotRegularFile,
    #[error("is a hardlinked file ({0} links); refusing it")]
    Hardlinked(u64),
    #[error("offset {offset} + length {length} is beyond the end of the file ({file_len} bytes)")]
    OutOfRange { offset: u64, length: u64, file_len: u64 },
    #[error("has {got} bytes, dims {dims} of {dtype} need {need}")]
    Length { got: u64, dims: String, dtype: &'static str, need: u64 },
    #[error("could not be read: {0}")]
    ReadFailed(String),
    #[error("takes the model's external data past the limit of {limit} bytes in all (--max-external-bytes)")]
    TotalTooLarge { limit: u64 },
}

/// Reads, decodes and validates the model at `path`, inlining external data.
pub fn load_model(path: &Path, limits: &Limits) -> Result<ModelProto, LoadError> {
    let file = path.display().to_string();
    let bytes = read_limited(path, limits.max_file_bytes).map_err(|e| match e {
        ReadLimited::Io(source) => LoadError::Read { file: file.clone(), source },
        ReadLimited::TooLarge(size) => {
            LoadError::FileTooLarge { file: file.clone(), size, limit: limits.max_file_bytes }
        }
    })?;
    let model = decode(&bytes, path)?;
    drop(bytes);
    resolve(model, path, limits)
}

/// [`load_model`] for bytes already read: `path` names the model in
/// messages, and its folder is where external data is looked for.
pub fn load_bytes(bytes: &[u8], path: &Path, limits: &Limits) -> Result<ModelProto, LoadError> {
    resolve(decode(bytes, path)?, path, limits)
}

fn decode(bytes: &[u8], path: &Path) -> Result<ModelProto, LoadError> {
    ModelProto::decode(bytes).map_err(|source| LoadError::Decode { file: path.display().to_string(), source })
}

/// Resolves external data and checks every tensor.
fn resolve(mut model: ModelProto, path: &Path, limits: &Limits) -> Result<ModelProto, LoadError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file = path.display().to_string();
    let mut loader = Loader {
        file,
        dir,
        canon_dir: None,
        max_tensor_bytes: limits.max_tensor_bytes,
        external_budget: limits.max_external_bytes,
        max_external_bytes: limits.max_external_bytes,
    };
    loader.model(&mut model)?;
    Ok(model)
}

enum ReadLimited {
    Io(io::Error),
    TooLarge(u64),
}

fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ReadLimited> {
    let f = File::open(path).map_err(ReadLimited::Io)?;
    let meta = f.metadata().map_err(ReadLimited::Io)?;
    if meta.len() > limit {
        return Err(ReadLimited::TooLarge(meta.len()));
    }
    let mut buf = Vec::new();
    f.take(limit.saturating_add(1)).read_to_end(&mut buf).map_err(ReadLimited::Io)?;
    let got = buf.len() as u64;
    if got > limit {
        return Err(ReadLimited::TooLarge(got));
    }
    Ok(buf)
}

/// `[2,3]`
fn fmt_dims(dims: &[i64]) -> String {
    let mut s = String::from("[");
    for (i, d) in dims.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&d.to_string());
    }
    s.push(']');
    s
}

/// `"name"`, or `#index` when the name is empty.
fn label(name: &str, index: usize) -> String {
    if name.is_empty() {
        format!("#{index}")
    } else {
        format!("{name:?}")
    }
}

/// Where a data type's elements live when not in `raw_data`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Field {
    Float,
    Int32,
    String,
    Int64,
    Double,
    Uint64,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Float => "float_data",
            Field::Int32 => "int32_data",
            Field::String => "string_data",
            Field::Int64 => "int64_data",
            Field::Double => "double_data",
            Field::Uint64 => "uint64_data",
        }
    }

    fn len(self, t: &TensorProto) -> usize {
        match self {
            Field::Float => t.float_data.len(),
            Field::Int32 => t.int32_data.len(),
            Field::String => t.string_data.len(),
            Field::Int64 => t.int64_data.len(),
            Field::Double => t.double_data.len(),
            Field::Uint64 => t.uint64_data.len(),
        }
    }

    const ALL: [Field; 6] = [Field::Float, Field::Int32, Field::String, Field::Int64, Field::Double, Field::Uint64];
}

/// What a tensor's dims and type say its data must be.
struct Expected {
    dims: String,
    dtype: &'static str,
    count: u64,
    /// Bytes in raw form (`None` for STRING).
    raw_bytes: Option<u64>,
    /// Entries needed in the typed field.
    typed_need: u64,
}

/// The fields of `t` holding data: `raw_data` (when not empty), then the
/// typed fields.
fn data_places(t: &TensorProto) -> Vec<&'static str> {
    let mut places: Vec<&'static str> = Vec::new();
    if t.raw_data.as_ref().is_some_and(|r| !r.is_empty()) {
        places.push("raw_data");
    }
    for f in Field::ALL {
        if f.len(t) > 0 {
            places.push(f.name());
        }
    }
    places
}

/// Storage facts about a (defined) data type.
struct Layout {
    /// Bits per element; `None` for STRING.
    bits: Option<u64>,
    /// Typed field holding the elements when not raw.
    field: Field,
    /// Typed-field values per element (2 for complex), when not packed.
    per_elem: u64,
    /// Sub-byte types are packed into bytes in the typed field too.
    packed: bool,
}

fn layout(dt: DataType) -> Option<Layout> {
    use DataType as D;
    let l = |bits: u64, field: Field| Layout { bits: Some(bits), field, per_elem: 1, packed: bits < 8 };
    Some(match dt {
        D::Undefined => return None,
        D::Float => l(32, Field::Float),
        D::Complex64 => Layout { per_elem: 2, ..l(64, Field::Float) },
        D::Double => l(64, Field::Double),
        D::Complex128 => Layout { per_elem: 2, ..l(128, Field::Double) },
        D::Int64 => l(64, Field::Int64),
        D::Uint32 => l(32, Field::Uint64),
        D::Uint64 => l(64, Field::Uint64),
        D::String => Layout { bits: None, field: Field::String, per_elem: 1, packed: false },
        D::Int32 => l(32, Field::Int32),
        D::Uint16 | D::Int16 | D::Float16 | D::Bfloat16 => l(16, Field::Int32),
        D::Uint8
        | D::Int8
        | D::Bool
        | D::Float8e4m3fn
        | D::Float8e4m3fnuz
        | D::Float8e5m2
        | D::Float8e5m2fnuz
        | D::Float8e8m0 => l(8, Field::Int32),
        D::Uint4 | D::Int4 | D::Float4e2m1 => l(4, Field::Int32),
        D::Uint2 | D::Int2 => l(2, Field::Int32),
    })
}

struct Loader {
    file: String,
    dir: PathBuf,
    canon_dir: Option<PathBuf>,
    max_tensor_bytes: u64,
    /// External-data bytes the model may still pull in.
    external_budget: u64,
    max_external_bytes: u64,
}

impl Loader {
    fn err(&self, place: &str, problem: TensorProblem) -> LoadError {
        LoadError::Tensor { file: self.file.clone(), place: place.to_string(), problem: Box::new(problem) }
    }

    fn model(&mut self, m: &mut ModelProto) -> Result<(), LoadError> {
        if let Some(g) = &mut m.graph {
            self.graph(g, "")?;
        }
        for f in &mut m.functions {
            self.function(f)?;
        }
        for (i, ti) in m.training_info.iter_mut().enumerate() {
            if let Some(g) = &mut ti.initialization {
                let p = format!("training_info #{i}: initialization graph {:?}: ", g.name());
                self.graph(g, &p)?;
            }
            if let Some(g) = &mut ti.algorithm {
                let p = format!("training_info #{i}: algorithm graph {:?}: ", g.name());
                self.graph(g, &p)?;
            }
        }
        Ok(())
    }

    fn function(&mut self, f: &mut FunctionProto) -> Result<(), LoadError> {
        let prefix = format!("{}: ", function_label(f));
        for a in &mut f.attribute_proto {
            let p = format!("{prefix}attribute default {:?}", a.name());
            self.attribute(a, &p)?;
        }
        for (i, n) in f.node.iter_mut().enumerate() {
            self.node(n, i, &prefix)?;
        }
        Ok(())
    }

    /// `prefix` is empty for the main graph, else ends in `": "`.
    fn graph(&mut self, g: &mut GraphProto, prefix: &str) -> Result<(), LoadError> {
        for (i, t) in g.initializer.iter_mut().enumerate() {
            let p = format!("{prefix}initializer {}", label(t.name(), i));
            self.tensor(t, &p)?;
        }
        for (i, s) in g.sparse_initializer.iter_mut().enumerate() {
            let name = s.values.as_ref().map(|v| v.name()).unwrap_or("");
            let p = format!("{prefix}sparse initializer {}", label(name, i));
            self.sparse(s, &p)?;
        }
        for (i, n) in g.node.iter_mut().enumerate() {
            self.node(n, i, prefix)?;
        }
        Ok(())
    }

    fn node(&mut self, n: &mut NodeProto, index: usize, prefix: &str) -> Result<(), LoadError> {
        let np = format!("{prefix}{}", node_label(n, index));
        for a in &mut n.attribute {
            let p = format!("{np}: attribute {:?}", a.name());
            self.attribute(a, &p)?;
        }
        Ok(())
    }

    fn attribute(&mut self, a: &mut AttributeProto, p: &str) -> Result<(), LoadError> {
        if let Some(t) = &mut a.t {
            let tp = format!("{p}: tensor {}", label(t.name(), 0));
            self.tensor(t, &tp)?;
        }
        for (i, t) in a.tensors.iter_mut().enumerate() {
            let tp = format!("{p}: tensor {}", label(t.name(), i));
            self.tensor(t, &tp)?;
        }
        if let Some(s) = &mut a.sparse_tensor {
            let tp = format!("{p}: sparse tensor");
            self.sparse(s, &tp)?;
        }
        for (i, s) in a.sparse_tensors.iter_mut().enumerate() {
            let tp = format!("{p}: sparse tensor #{i}");
            self.sparse(s, &tp)?;
        }
        if let Some(g) = &mut a.g {
            let gp = format!("{p}: graph {:?}: ", g.name());
            self.graph(g, &gp)?;
        }
        for g in &mut a.graphs {
            let gp = format!("{p}: graph {:?}: ", g.name());
            self.graph(g, &gp)?;
        }
        Ok(())
    }

    fn sparse(&mut self, s: &mut SparseTensorProto, place: &str) -> Result<(), LoadError> {
        if s.dims.iter().any(|&d| d < 0) {
            return Err(self.err(place, TensorProblem::SparseNegativeDim(fmt_dims(&s.dims))));
        }
        match &mut s.values {
            Some(v) => self.tensor(v, &format!("{place}: values"))?,
            None => return Err(self.err(place, TensorProblem::SparseMissing("values"))),
        }
        match &mut s.indices {
            Some(v) => self.tensor(v, &format!("{place}: indices"))?,
            None => return Err(self.err(place, TensorProblem::SparseMissing("indices"))),
        }
        Ok(())
    }

    fn tensor(&mut self, t: &mut TensorProto, place: &str) -> Result<(), LoadError> {
        if t.segment.is_some() {
            return Err(self.err(place, TensorProblem::Segment));
        }
        let code = t.data_type.unwrap_or(0);
        let dt = DataType::try_from(code).map_err(|_| self.err(place, TensorProblem::UnknownType(code)))?;
        let lay = layout(dt).ok_or_else(|| self.err(place, TensorProblem::UndefinedType))?;
        let want = self.expected(t, place, dt.as_str_name(), &lay)?;
        let size = match want.raw_bytes {
            Some(b) => b,
            None => t.string_data.iter().fold(0u64, |acc, s| acc.saturating_add(s.len() as u64)),
        };
        if size > self.max_tensor_bytes {
            let (dims, dtype, limit) = (want.dims, want.dtype, self.max_tensor_bytes);
            return Err(self.err(place, TensorProblem::TooLarge { dims, dtype, bytes: size, limit }));
        }
        let mut places = data_places(t);
        if self.is_external(t, place)? {
            if !places.is_empty() {
                places.insert(0, "external data");
                return Err(self.err(place, TensorProblem::MultiplePlaces(places)));
            }
            let Some(need) = want.raw_bytes else {
                return Err(self.err(place, TensorProblem::StringRaw));
            };
            let data = self.external(t, place, need, &want.dims, want.dtype)?;
            t.raw_data = Some(data);
            t.external_data.clear();
            t.data_location = None;
            return Ok(());
        }
        if !t.external_data.is_empty() {
            return Err(self.err(place, TensorProblem::ExternalDataNotExternal));
        }
        if places.len() > 1 {
            return Err(self.err(place, TensorProblem::MultiplePlaces(places)));
        }
        self.check_inline(t, place, places.first().copied(), &lay, want)
    }

    /// What `t`'s dims and type say its data must be; an error for a
    /// negative dim or a size that overflows.
    fn expected(&self, t: &TensorProto, place: &str, dtype: &'static str, lay: &Layout) -> Result<Expected, LoadError> {
        let dims = fmt_dims(&t.dims);
        let overflow = || self.err(place, TensorProblem::SizeOverflow { dims: dims.clone(), dtype });
        let mut count: u64 = 1;
        for &d in &t.dims {
            let d = u64::try_from(d).map_err(|_| self.err(place, TensorProblem::NegativeDim { dims: dims.clone() }))?;
            count = count.checked_mul(d).ok_or_else(overflow)?;
        }
        let raw_bytes = match lay.bits {
            Some(bits) => Some(count.checked_mul(bits).and_then(|b| b.checked_add(7)).ok_or_else(overflow)? / 8),
            None => None,
        };
        let typed_need = match (lay.packed, raw_bytes) {
            (true, Some(b)) => b,
            _ => count.checked_mul(lay.per_elem).ok_or_else(overflow)?,
        };
        Ok(Expected { dims, dtype, count, raw_bytes, typed_need })
    }

    /// Whether `t`'s data is external (`data_location`).
    fn is_external(&self, t: &TensorProto, place: &str) -> Result<bool, LoadError> {
        match t.data_location {
            None => Ok(false),
            Some(c) if c == DataLocation::Default as i32 => Ok(false),
            Some(c) if c == DataLocation::External as i32 => Ok(true),
            Some(c) => Err(self.err(place, TensorProblem::UnknownLocation(c))),
        }
    }

    /// Checks the data held in the model: in `field` (`raw_data` or the
    /// type's typed field), of the expected length, or none for no elements.
    fn check_inline(
        &self,
        t: &TensorProto,
        place: &str,
        field: Option<&'static str>,
        lay: &Layout,
        want: Expected,
    ) -> Result<(), LoadError> {
        let Expected { dims, dtype, count, raw_bytes, typed_need } = want;
        match field {
            None if t.raw_data.is_some() || count == 0 => {
                // Empty raw_data (or nothing) — fine only for zero elements.
                let need = raw_bytes.unwrap_or(0);
                if t.raw_data.is_some() && raw_bytes.is_none() {
                    return Err(self.err(place, TensorProblem::StringRaw));
                }
                if need != 0 {
                    return Err(self.err(place, TensorProblem::RawLength { got: 0, dims, dtype, need }));
                }
                Ok(())
            }
            None => Err(self.err(place, TensorProblem::NoData { dims, dtype, need: count })),
            Some("raw_data") => {
                let Some(need) = raw_bytes else {
                    return Err(self.err(place, TensorProblem::StringRaw));
                };
                let got = t.raw_data.as_ref().map_or(0, |r| r.len() as u64);
                if got != need {
                    return Err(self.err(place, TensorProblem::RawLength { got, dims, dtype, need }));
                }
                Ok(())
            }
            Some(field) => {
                let expected = lay.field.name();
                if field != expected {
                    return Err(self.err(place, TensorProblem::WrongField { field, dtype, expected }));
                }
                let got = lay.field.len(t) as u64;
                if got != typed_need {
                    return Err(
                        self.err(place, TensorProblem::TypedLength { field, got, dims, dtype, need: typed_need })
                    );
                }
                Ok(())
            }
        }
    }

    fn canon_dir(&mut self, place: &str, location: &str) -> Result<PathBuf, LoadError> {
        if let Some(d) = &self.canon_dir {
            return Ok(d.clone());
        }
        let d = fs::canonicalize(&self.dir).map_err(|e| {
            self.err(
                place,
                TensorProblem::External {
                    location: location.to_string(),
                    problem: ExternalProblem::Open(format!("the model's folder {}: {e}", self.dir.display())),
                },
            )
        })?;
        self.canon_dir = Some(d.clone());
        Ok(d)
    }

    /// Resolves `t`'s external data and returns exactly `need` bytes.
    fn external(
        &mut self,
        t: &TensorProto,
        place: &str,
        need: u64,
        dims: &str,
        dtype: &'static str,
    ) -> Result<Vec<u8>, LoadError> {
        let (loc, offset, length) = self.external_keys(t, place)?;
        let ext =
            |problem: ExternalProblem| self.err(place, TensorProblem::External { location: loc.to_string(), problem });
        inside_folder(loc).map_err(ext)?;
        let canon_dir = self.canon_dir(place, loc)?;
        let ext =
            |problem: ExternalProblem| self.err(place, TensorProblem::External { location: loc.to_string(), problem });
        let (mut file, file_len) = open_plain_file(&self.dir.join(loc), &canon_dir).map_err(ext)?;
        let off = offset.unwrap_or(0);
        let len = match length {
            Some(l) => l,
            None => file_len.saturating_sub(off),
        };
        let end = off.checked_add(len);
        if off > file_len || end.is_none_or(|e| e > file_len) {
            return Err(ext(ExternalProblem::OutOfRange { offset: off, length: len, file_len }));
        }
        if len != need {
            return Err(ext(ExternalProblem::Length { got: len, dims: dims.to_string(), dtype, need }));
        }
        let Some(budget_left) = self.external_budget.checked_sub(len) else {
            return Err(ext(ExternalProblem::TotalTooLarge { limit: self.max_external_bytes }));
        };
        let buf = read_range(&mut file, off, len).map_err(ext)?;
        self.external_budget = budget_left;
        Ok(buf)
    }

    /// The `location`, `offset` and `length` entries of `t`'s external
    /// data (each at most once; numbers parsed).
    fn external_keys<'t>(
        &self,
        t: &'t TensorProto,
        place: &str,
    ) -> Result<(&'t str, Option<u64>, Option<u64>), LoadError> {
        let mut location: Option<&str> = None;
        let mut offset: Option<&str> = None;
        let mut length: Option<&str> = None;
        for e in &t.external_data {
            let slot = match e.key() {
                "location" => &mut location,
                "offset" => &mut offset,
                "length" => &mut length,
                _ => continue,
            };
            if slot.is_some() {
                return Err(self.err(place, TensorProblem::DuplicateExternalKey(e.key().to_string())));
            }
            *slot = Some(e.value());
        }
        let loc = location.ok_or_else(|| self.err(place, TensorProblem::NoExternalLocation))?;
        let number = |key: &'static str, v: Option<&str>| -> Result<Option<u64>, LoadError> {
            match v {
                None => Ok(None),
                Some(s) => s
                    .trim()
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| self.err(place, TensorProblem::BadExternalNumber { key, value: s.to_string() })),
            }
        };
        Ok((loc, number("offset", offset)?, number("length", length)?))
    }
}

/// An external data location must be a relative path that stays inside
/// the model's folder (no root, drive, `..`, or NUL).
fn inside_folder(loc: &str) -> Result<(), ExternalProblem> {
    if loc.is_empty() || loc.contains('\0') {
        return Err(ExternalProblem::Empty);
    }
    let bytes = loc.as_bytes();
    let drive = bytes.len() >= 2 && bytes.get(1) == Some(&b':');
    let rel = Path::new(loc);
    if rel.has_root() || rel.is_absolute() || loc.starts_with('/') || loc.starts_with('\\') || drive {
        return Err(ExternalProblem::Absolute);
    }
    for c in rel.components() {
        match c {
            Component::ParentDir => return Err(ExternalProblem::LeavesFolder),
            Component::RootDir | Component::Prefix(_) => return Err(ExternalProblem::Absolute),
            Component::CurDir | Component::Normal(_) => {}
        }
    }
    if loc.split(['/', '\\']).any(|c| c == "..") {
        return Err(ExternalProblem::LeavesFolder);
    }
    Ok(())
}

/// Opens `path` if, symlinks resolved, it is inside `canon_dir` and a
/// plain file ([`plain_file`]); returns it with its length.
fn open_plain_file(path: &Path, canon_dir: &Path) -> Result<(File, u64), ExternalProblem> {
    let canon = fs::canonicalize(path).map_err(|e| ExternalProblem::Open(e.to_string()))?;
    if !canon.starts_with(canon_dir) {
        return Err(ExternalProblem::SymlinkLeavesFolder);
    }
    // Checked before opening (a hardlink's target is never opened) and
    // again on the open file (in case the path changed in between).
    let meta = fs::metadata(&canon).map_err(|e| ExternalProblem::Open(e.to_string()))?;
    plain_file(&meta)?;
    let file = File::open(&canon).map_err(|e| ExternalProblem::Open(e.to_string()))?;
    let meta = file.metadata().map_err(|e| ExternalProblem::Open(e.to_string()))?;
    plain_file(&meta)?;
    Ok((file, meta.len()))
}

/// Exactly `len` bytes of `file` from `offset`, memory reserved first.
fn read_range(file: &mut File, offset: u64, len: u64) -> Result<Vec<u8>, ExternalProblem> {
    let ulen = usize::try_from(len).map_err(|_| ExternalProblem::ReadFailed("too large for this machine".into()))?;
    file.seek(SeekFrom::Start(offset)).map_err(|e| ExternalProblem::ReadFailed(e.to_string()))?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(ulen).map_err(|e| ExternalProblem::ReadFailed(e.to_string()))?;
    file.take(len).read_to_end(&mut buf).map_err(|e| ExternalProblem::ReadFailed(e.to_string()))?;
    if buf.len() != ulen {
        return Err(ExternalProblem::ReadFailed(format!("got {} bytes, expected {len}", buf.len())));
    }
    Ok(buf)
}

/// External data must be a regular file with one name: a hardlink could
/// make a file from anywhere on the volume look like it is in the folder.
fn plain_file(meta: &fs::Metadata) -> Result<(), ExternalProblem> {
    if !meta.is_file() {
        return Err(ExternalProblem::NotRegularFile);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            return Err(ExternalProblem::Hardlinked(meta.nlink()));
        }
    }
    Ok(())
}

/// `node "conv_3" (Conv)`, or `node #4 (Conv)` when unnamed.
fn node_label(n: &NodeProto, index: usize) -> String {
    format!("node {} ({})", label(n.name(), index), n.op_type())
}

/// `function "Name"`, or `function "com.foo::Name"` outside the default domain.
fn function_label(f: &FunctionProto) -> String {
    let mut s = String::new();
    if !f.domain().is_empty() {
        s.push_str(f.domain());
        s.push_str("::");
    }
    s.push_str(f.name());
    if !f.overload().is_empty() {
        s.push_str(" overload ");
        s.push_str(f.overload());
    }
    format!("function {s:?}")
}

#[cfg(test)]
mod tests;
