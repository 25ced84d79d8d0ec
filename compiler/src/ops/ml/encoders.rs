//! ai.onnx.ml keyed encoders: LabelEncoder (opsets 1, 2 and 4), CategoryMapper
//! and OneHotEncoder, all lookups of an element among keys known at
//! compile time.
//!
//! The importer sorts the keys once (refusing duplicates) and reorders the
//! values with them, so the kernel (`onnxc_runtime::generic::ml`) finds an
//! element by binary search instead of scanning every key. A NaN float key
//! is kept apart: it matches NaN elements (LabelEncoder 4). String keys and
//! values become [`StringRef`]s into one byte blob in read-only data; a
//! string output points into that blob, so nothing is allocated at run time.
//!
//! Type constraints (ONNX): LabelEncoder maps string, int64 or float (opset
//! 4 also int32, int16, double through `keys_tensor`/`values_tensor`) to any
//! of those; the input's type is the keys'. CategoryMapper maps string ↔
//! int64 (by position in `cats_strings`/`cats_int64s`), as does
//! LabelEncoder 1 (string ↔ position in `classes_strings`). OneHotEncoder takes
//! int64, int32, float, double or string `[N]` or `[N, C]` and gives f32
//! with one more dim of `len(cats)`; elements that are no category give a
//! zero row (`zeros=1`) or fail the node (status 2).

use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{Lower, Value};
use crate::import::NodeImport;
use crate::ir::{DType, Tensor};
use crate::ops::{InferCx, Inferred, Op, Operator};
use onnxc_runtime::abi::ml::{
    CategoryOneHotParams, LabelEncodeParams, LookupParams, StringRef, KEY_FLOAT, KEY_INT, KEY_STRING, VALUE_BYTES,
    VALUE_STRING,
};

/// Strings as [`StringRef`]s into one blob.
pub fn string_table(items: &[Vec<u8>]) -> (Vec<StringRef>, Vec<u8>) {
    let mut blob = Vec::new();
    let refs = items
        .iter()
        .map(|s| {
            let r = StringRef { offset: blob.len() as i64, len: s.len() as i64 };
            blob.extend_from_slice(s);
            r
        })
        .collect();
    (refs, blob)
}

/// Keys sorted for the kernel's binary search.
#[derive(Clone, Debug)]
pub enum SortedKeys {
    Ints(Vec<i64>),
    /// Without NaN (see [`KeyTable::nan_entry`]).
    Floats(Vec<f64>),
    Strings(Vec<Vec<u8>>),
}

/// Keys of one type, sorted, with where each came from.
#[derive(Clone, Debug)]
pub struct KeyTable {
    /// The keys' element type (what the input must be).
    pub dtype: DType,
    pub keys: SortedKeys,
    /// For each sorted entry, the key's position in the attribute.
    pub positions: Vec<usize>,
    /// The position of a NaN float key, if there is one.
    pub nan_position: Option<usize>,
}

impl KeyTable {
    /// Sorts `keys` (a tensor of any key type); duplicates are an error.
    pub fn new(keys: &Tensor, what: &str) -> Result<KeyTable, String> {
        let dtype = keys.dtype;
        let duplicate = |i: usize| format!("attribute \"{what}\": key {i} appears twice");
        let mut nan_position = None;
        let (keys, positions) = if dtype == DType::String {
            let mut order: Vec<usize> = (0..keys.strings.len()).collect();
            order.sort_by(|&a, &b| keys.strings[a].cmp(&keys.strings[b]));
            if let Some(w) = order.windows(2).find(|w| keys.strings[w[0]] == keys.strings[w[1]]) {
                return Err(duplicate(w[1]));
            }
            (SortedKeys::Strings(order.iter().map(|&i| keys.strings[i].clone()).collect()), order)
        } else if matches!(dtype, DType::I64 | DType::I32 | DType::I16) {
            let v = keys.to_i64s();
            let mut order: Vec<usize> = (0..v.len()).collect();
            order.sort_by_key(|&i| v[i]);
            if let Some(w) = order.windows(2).find(|w| v[w[0]] == v[w[1]]) {
                return Err(duplicate(w[1]));
            }
            (SortedKeys::Ints(order.iter().map(|&i| v[i]).collect()), order)
        } else if matches!(dtype, DType::F32 | DType::F64) {
            let v = keys.to_f64s();
            let mut order = Vec::new();
            for (i, x) in v.iter().enumerate() {
                if !x.is_nan() {
                    order.push(i);
                } else if nan_position.replace(i).is_some() {
                    return Err(duplicate(i));
                }
            }
            order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
            if let Some(w) = order.windows(2).find(|w| v[w[0]] == v[w[1]]) {
                return Err(duplicate(w[1]));
            }
            (SortedKeys::Floats(order.iter().map(|&i| v[i]).collect()), order)
        } else {
            return Err(format!(
                "attribute \"{what}\" is {dtype}, expected string, int64, int32, int16, float or double keys"
            ));
        };
        Ok(KeyTable { dtype, keys, positions, nan_position })
    }

    /// Entries the kernel can return: the sorted keys, then the NaN key.
    pub fn entries(&self) -> Vec<usize> {
        self.positions.iter().copied().chain(self.nan_position).collect()
    }

    /// Checks that input 0 has the keys' type; returns its shape.
    pub fn check_input<'a>(&self, cx: &'a InferCx) -> Result<&'a [usize], String> {
        let x = cx.input(0)?;
        if x.dtype != self.dtype {
            return Err(format!("input 0 is {}, but the keys are {}", x.dtype, self.dtype));
        }
        Ok(x.shape)
    }

    /// The lookup parameters and the addresses of the key table and blob.
    pub fn lower(&self, cx: &mut Lower, count: usize) -> Result<(LookupParams, Value, Value), String> {
        let (x_dtype, _) = cx.input_type(0)?;
        let (kind, table, blob, keys) = match &self.keys {
            SortedKeys::Ints(v) => (KEY_INT, cx.table(v)?, Vec::new(), v.len()),
            SortedKeys::Floats(v) => (KEY_FLOAT, cx.table(v)?, Vec::new(), v.len()),
            SortedKeys::Strings(v) => {
                let (refs, blob) = string_table(v);
                (KEY_STRING, cx.table(&refs)?, blob, v.len())
            }
        };
        let p = LookupParams {
            count: count as i64,
            key_kind: kind,
            x_elem: x_dtype.onnx_code() as i64,
            keys: keys as i64,
            nan_entry: if self.nan_position.is_some() { keys as i64 } else { -1 },
            key_blob: blob.len() as i64,
        };
        let blob = cx.data_bytes(&blob)?;
        Ok((p, table, blob))
    }
}

/// LabelEncoder (and CategoryMapper, imported as one).
#[derive(Clone, Debug)]
pub struct LabelEncoder {
    pub keys: KeyTable,
    /// One value per kernel entry (sorted keys, then NaN), then the default.
    pub values: Tensor,
}

/// A list attribute `{prefix}_strings`, `_int64s` or `_floats`, or (opset
/// 4) `{prefix}_tensor`, as a tensor.
fn list_attr(cx: &NodeImport, prefix: &str) -> Result<Option<Tensor>, String> {
    let a = &cx.attrs;
    let mut found = Vec::new();
    if let Some(v) = a.strings(&format!("{prefix}_strings"))? {
        let n = v.len();
        found.push(Tensor::from_strings(vec![n], v.into_iter().map(String::into_bytes).collect()));
    }
    if let Some(v) = a.ints(&format!("{prefix}_int64s"))? {
        found.push(Some(Tensor::from_i64s(vec![v.len()], &v)));
    }
    if let Some(v) = a.floats(&format!("{prefix}_floats"))? {
        found.push(Some(Tensor::from_f32s(vec![v.len()], &v)));
    }
    if let Some(t) = a.tensor(&format!("{prefix}_tensor"))? {
        found.push(Some(t));
    }
    match found.len() {
        0 => Ok(None),
        1 => found.pop().flatten().map(Some).ok_or_else(|| format!("attribute \"{prefix}_*\" is malformed")),
        _ => Err(format!("more than one \"{prefix}_*\" attribute is set")),
    }
}

/// Element `i` of `t` as a one-element tensor.
fn element(t: &Tensor, i: usize) -> Tensor {
    if t.dtype == DType::String {
        return Tensor { dtype: DType::String, shape: vec![1], data: Vec::new(), strings: vec![t.strings[i].clone()] };
    }
    let size = t.dtype.bytes_for(1).unwrap_or(0);
    Tensor { dtype: t.dtype, shape: vec![1], data: t.data[i * size..(i + 1) * size].to_vec(), strings: Vec::new() }
}

/// `values` reordered as the kernel's entries, with `default` appended.
fn entry_values(keys: &KeyTable, values: &Tensor, default: Tensor) -> Tensor {
    let mut parts: Vec<Tensor> = keys.entries().into_iter().map(|i| element(values, i)).collect();
    parts.push(default);
    let n = parts.len();
    if values.dtype == DType::String {
        return Tensor {
            dtype: DType::String,
            shape: vec![n],
            data: Vec::new(),
            strings: parts.into_iter().flat_map(|t| t.strings).collect(),
        };
    }
    Tensor {
        dtype: values.dtype,
        shape: vec![n],
        data: parts.into_iter().flat_map(|t| t.data).collect(),
        strings: Vec::new(),
    }
}

/// The default of a value type when no attribute gives one: "_Unused", -1
/// or -0.0.
fn default_value(cx: &NodeImport, dtype: DType) -> Result<Tensor, String> {
    let a = &cx.attrs;
    if let Some(t) = a.tensor("default_tensor")? {
        if t.dtype != dtype || t.len() != 1 {
            return Err(format!("attribute \"default_tensor\" must be one {dtype}, got {} {}", t.len(), t.dtype));
        }
        return Ok(t);
    }
    Ok(match dtype {
        DType::String => {
            let s = a.string_or("default_string", "_Unused")?;
            Tensor { dtype, shape: vec![1], data: Vec::new(), strings: vec![s.into_bytes()] }
        }
        DType::I64 => Tensor::from_i64s(vec![1], &[a.int_or("default_int64", -1)?]),
        DType::F32 => Tensor::from_f32s(vec![1], &[a.float_or("default_float", -0.0)?]),
        DType::F64 => Tensor::from_bytes(dtype, vec![1], (-0.0f64).to_le_bytes().to_vec()).ok_or("bad default")?,
        // -1 in two's complement, whatever the width.
        _ => Tensor::from_bytes(dtype, vec![1], vec![0xff; dtype.size()]).ok_or("bad default")?,
    })
}

pub fn import_label_encoder(cx: &mut NodeImport) -> Result<Op, String> {
    if cx.opset < 2 {
        // Opset 1: strings ↔ their positions in `classes_strings`.
        let classes = cx.attrs.strings("classes_strings")?.ok_or("attribute \"classes_strings\" is required")?;
        let positions = (0..classes.len() as i64).collect();
        return string_int_mapping(cx, classes, positions, ["classes_strings", "classes_strings"]);
    }
    let keys = list_attr(cx, "keys")?.ok_or("one of the attributes \"keys_*\" is required")?;
    let values = list_attr(cx, "values")?.ok_or("one of the attributes \"values_*\" is required")?;
    if keys.len() != values.len() {
        return Err(format!("there are {} keys but {} values", keys.len(), values.len()));
    }
    if !matches!(values.dtype, DType::String | DType::F32 | DType::F64 | DType::I64 | DType::I32 | DType::I16) {
        return Err(format!("values of type {} are not supported", values.dtype));
    }
    let table = KeyTable::new(&keys, "keys")?;
    let default = default_value(cx, values.dtype)?;
    let values = entry_values(&table, &values, default);
    Ok(Op::LabelEncoder(LabelEncoder { keys: table, values }))
}

pub fn import_category_mapper(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let strings = a.strings("cats_strings")?.ok_or("attribute \"cats_strings\" is required")?;
    let ints = a.ints("cats_int64s")?.ok_or("attribute \"cats_int64s\" is required")?;
    if strings.len() != ints.len() {
        return Err(format!("\"cats_strings\" has {} values, \"cats_int64s\" {}", strings.len(), ints.len()));
    }
    string_int_mapping(cx, strings, ints, ["cats_strings", "cats_int64s"])
}

/// A CategoryMapper over `strings[i] ↔ ints[i]` (attribute names for
/// errors), with `default_string` ("_Unused") and `default_int64` (-1).
fn string_int_mapping(cx: &NodeImport, strings: Vec<String>, ints: Vec<i64>, names: [&str; 2]) -> Result<Op, String> {
    let a = &cx.attrs;
    let default_string = a.string_or("default_string", "_Unused")?.into_bytes();
    let default_int = a.int_or("default_int64", -1)?;
    let n = ints.len();
    let strings = Tensor::from_strings(vec![n], strings.into_iter().map(String::into_bytes).collect())
        .ok_or("the string list does not match its length")?;
    let ints = Tensor::from_i64s(vec![n], &ints);
    let direction = |keys: &Tensor, values: &Tensor, name: &str, default: Tensor| -> Result<LabelEncoder, String> {
        let table = KeyTable::new(keys, name)?;
        let values = entry_values(&table, values, default);
        Ok(LabelEncoder { keys: table, values })
    };
    let default_string = Tensor::from_strings(vec![1], vec![default_string]).ok_or("bad default_string")?;
    let to_int = direction(&strings, &ints, names[0], Tensor::from_i64s(vec![1], &[default_int]))?;
    let to_string = direction(&ints, &strings, names[1], default_string)?;
    Ok(Op::CategoryMapper(CategoryMapper { to_int, to_string }))
}

/// CategoryMapper: a LabelEncoder in the direction the input's type picks.
#[derive(Clone, Debug)]
pub struct CategoryMapper {
    pub to_int: LabelEncoder,
    pub to_string: LabelEncoder,
}

impl CategoryMapper {
    fn direction(&self, input: DType) -> &LabelEncoder {
        if input == DType::String {
            &self.to_int
        } else {
            &self.to_string
        }
    }
}

impl Operator for CategoryMapper {
    fn name(&self) -> &'static str {
        "CategoryMapper"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        self.direction(cx.input(0)?.dtype).infer(cx)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, _) = cx.input_type(0)?;
        self.direction(dtype).lower(cx)
    }
}

impl Operator for LabelEncoder {
    fn name(&self) -> &'static str {
        "LabelEncoder"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let shape = self.keys.check_input(cx)?;
        Ok(vec![Inferred::new(self.values.dtype, shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let (lookup, keys, key_blob) = self.keys.lower(cx, shape.iter().product())?;
        let (value_kind, value_size, values, blob) = if self.values.dtype == DType::String {
            let (refs, blob) = string_table(&self.values.strings);
            (VALUE_STRING, 16, cx.table(&refs)?, blob)
        } else {
            let size = self.values.dtype.bytes_for(1).ok_or("bad value type")?;
            (VALUE_BYTES, size as i64, cx.data_bytes(&self.values.data)?, Vec::new())
        };
        let p = LabelEncodeParams { lookup, value_kind, value_size, value_blob: blob.len() as i64 };
        let p = cx.params(&p)?;
        let value_blob = cx.data_bytes(&blob)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(
            kernels::onnxc_label_encode,
            (p, Ptr(keys), Ptr(key_blob), Ptr(values), Ptr(value_blob), Ptr(x), Ptr(y)),
        )
    }
}

/// OneHotEncoder (ai.onnx.ml).
#[derive(Clone, Debug)]
pub struct CategoryOneHot {
    pub keys: KeyTable,
    pub zeros: bool,
}

pub fn import_one_hot_encoder(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let keys = match (a.ints("cats_int64s")?, a.strings("cats_strings")?) {
        (Some(v), None) => Tensor::from_i64s(vec![v.len()], &v),
        (None, Some(v)) => {
            Tensor::from_strings(vec![v.len()], v.into_iter().map(String::into_bytes).collect()).ok_or("bad cats")?
        }
        _ => return Err("exactly one of the attributes \"cats_int64s\" and \"cats_strings\" is required".into()),
    };
    if keys.is_empty() {
        return Err("the categories are empty".into());
    }
    let keys = KeyTable::new(&keys, "cats")?;
    Ok(Op::CategoryOneHot(CategoryOneHot { keys, zeros: a.int_or("zeros", 1)? != 0 }))
}

impl Operator for CategoryOneHot {
    fn name(&self) -> &'static str {
        "OneHotEncoder"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        // Numbers are compared as the categories' int64 values.
        let numeric =
            self.keys.dtype == DType::I64 && matches!(x.dtype, DType::I64 | DType::I32 | DType::F32 | DType::F64);
        if x.dtype != self.keys.dtype && !numeric {
            return Err(format!("input 0 is {}, but the categories are {}", x.dtype, self.keys.dtype));
        }
        let mut shape = x.shape.to_vec();
        shape.push(self.keys.positions.len());
        Ok(vec![Inferred::new(DType::F32, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let count = shape.iter().product();
        let (lookup, keys, key_blob) = match (&self.keys.keys, dtype.is_float()) {
            // Float inputs meet the int64 categories as floats.
            (SortedKeys::Ints(ints), true) => {
                let floats: Vec<f64> = ints.iter().map(|&v| v as f64).collect();
                let table = KeyTable { keys: SortedKeys::Floats(floats), ..self.keys.clone() };
                table.lower(cx, count)?
            }
            _ => self.keys.lower(cx, count)?,
        };
        let positions: Vec<i64> = self.keys.positions.iter().map(|&p| p as i64).collect();
        let p = cx.params(&CategoryOneHotParams { lookup, zeros: self.zeros as i64 })?;
        let positions = cx.table(&positions)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(kernels::onnxc_ml_one_hot, (p, Ptr(keys), Ptr(key_blob), Ptr(positions), Ptr(x), Ptr(y)))
    }
}
