use super::*;
use onnx_proto::{AttributeProto, OperatorSetIdProto, StringStringEntryProto, TrainingInfoProto};
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh folder under the system temp dir, removed on drop.
struct TmpDir(PathBuf);

impl TmpDir {
    fn new(tag: &str) -> TmpDir {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("onnxc-load-{}-{tag}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TmpDir(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, bytes).unwrap();
        p
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn f32_raw(vals: &[f32]) -> Vec<u8> {
    vals.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn tensor(name: &str, dt: DataType, dims: &[i64]) -> TensorProto {
    TensorProto { name: Some(name.into()), data_type: Some(dt as i32), dims: dims.to_vec(), ..Default::default() }
}

fn raw_f32(name: &str, dims: &[i64], vals: &[f32]) -> TensorProto {
    TensorProto { raw_data: Some(f32_raw(vals)), ..tensor(name, DataType::Float, dims) }
}

fn external(name: &str, dims: &[i64], kv: &[(&str, &str)]) -> TensorProto {
    TensorProto {
        data_location: Some(DataLocation::External as i32),
        external_data: kv
            .iter()
            .map(|(k, v)| StringStringEntryProto { key: Some(k.to_string()), value: Some(v.to_string()) })
            .collect(),
        ..tensor(name, DataType::Float, dims)
    }
}

fn model_with(inits: Vec<TensorProto>, nodes: Vec<NodeProto>) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto { name: Some("main".into()), initializer: inits, node: nodes, ..Default::default() }),
        ..Default::default()
    }
}

fn constant(name: &str, t: TensorProto) -> NodeProto {
    NodeProto {
        name: Some(name.into()),
        op_type: Some("Constant".into()),
        output: vec![format!("{name}_out")],
        attribute: vec![AttributeProto {
            name: Some("value".into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Tensor as i32),
            t: Some(t),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn write_model(dir: &TmpDir, m: &ModelProto) -> PathBuf {
    dir.write("model.onnx", &m.encode_to_vec())
}

fn load(dir: &TmpDir, m: &ModelProto) -> Result<ModelProto, LoadError> {
    let p = write_model(dir, m);
    load_model(&p, &Limits::default())
}

fn load_err(tag: &str, m: &ModelProto) -> String {
    let dir = TmpDir::new(tag);
    match load(&dir, m) {
        Ok(_) => panic!("expected an error for {tag}"),
        Err(e) => e.to_string(),
    }
}

fn load_ext_err(dir: &TmpDir, t: TensorProto) -> String {
    match load(dir, &model_with(vec![t], vec![])) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

fn assert_contains(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} lacks {p:?}");
    }
}

// ---- positive ----

#[test]
fn valid_raw_and_typed_tensors_load() {
    let dir = TmpDir::new("valid");
    let typed = TensorProto { float_data: vec![1.0, 2.0], ..tensor("typed", DataType::Float, &[2]) };
    let i64s = TensorProto { int64_data: vec![1, 2, 3], ..tensor("i64", DataType::Int64, &[3]) };
    let halfs = TensorProto { int32_data: vec![0x3c00; 4], ..tensor("h", DataType::Float16, &[2, 2]) };
    let cplx = TensorProto { float_data: vec![1.0, 0.0, 2.0, 0.0], ..tensor("c", DataType::Complex64, &[2]) };
    let u32s = TensorProto { uint64_data: vec![7], ..tensor("u", DataType::Uint32, &[]) };
    let strings =
        TensorProto { string_data: vec![b"a".to_vec(), b"bc".to_vec()], ..tensor("s", DataType::String, &[2]) };
    let int4_raw = TensorProto { raw_data: Some(vec![0x21, 0x03]), ..tensor("i4", DataType::Int4, &[3]) };
    let int2_raw = TensorProto { raw_data: Some(vec![0xff, 0x01]), ..tensor("i2", DataType::Uint2, &[5]) };
    let uint4_typed = TensorProto { int32_data: vec![0x21, 0x03], ..tensor("u4", DataType::Uint4, &[3]) };
    let empty = tensor("empty", DataType::Float, &[0, 3]);
    let m = model_with(
        vec![
            raw_f32("w", &[2, 3], &[0.0; 6]),
            typed,
            i64s,
            halfs,
            cplx,
            u32s,
            strings,
            int4_raw,
            int2_raw,
            uint4_typed,
            empty,
        ],
        vec![constant("c", raw_f32("cv", &[1], &[1.0]))],
    );
    let loaded = load(&dir, &m).unwrap();
    assert_eq!(loaded, m);
}

#[test]
fn valid_external_data_is_inlined() {
    let dir = TmpDir::new("ext_ok");
    let mut data = vec![9u8; 4];
    data.extend(f32_raw(&[1.0, 2.0, 3.0]));
    dir.write("data/weights.bin", &data);
    dir.write("all.bin", &f32_raw(&[5.0, 6.0]));
    let t1 = external("w", &[3], &[("location", "data/weights.bin"), ("offset", "4"), ("length", "12")]);
    let t2 = external("v", &[2], &[("location", "./all.bin")]);
    // Also inside a subgraph attribute and a function body.
    let sub = GraphProto {
        name: Some("then".into()),
        initializer: vec![external("sw", &[2], &[("location", "all.bin")])],
        ..Default::default()
    };
    let if_node = NodeProto {
        name: Some("if1".into()),
        op_type: Some("If".into()),
        attribute: vec![AttributeProto { name: Some("then_branch".into()), g: Some(sub), ..Default::default() }],
        ..Default::default()
    };
    let mut m = model_with(vec![t1, t2], vec![if_node]);
    m.functions.push(FunctionProto {
        name: Some("F".into()),
        node: vec![constant("fc", external("fw", &[2], &[("location", "all.bin")]))],
        ..Default::default()
    });
    let loaded = load(&dir, &m).unwrap();
    let g = loaded.graph.as_ref().unwrap();
    assert_eq!(g.initializer[0].raw_data, Some(f32_raw(&[1.0, 2.0, 3.0])));
    assert!(g.initializer[0].external_data.is_empty());
    assert_eq!(g.initializer[0].data_location, None);
    assert_eq!(g.initializer[1].raw_data, Some(f32_raw(&[5.0, 6.0])));
    let sub = g.node[0].attribute[0].g.as_ref().unwrap();
    assert_eq!(sub.initializer[0].raw_data, Some(f32_raw(&[5.0, 6.0])));
    let ft = loaded.functions[0].node[0].attribute[0].t.as_ref().unwrap();
    assert_eq!(ft.raw_data, Some(f32_raw(&[5.0, 6.0])));
    assert!(ft.external_data.is_empty());
}

#[cfg(unix)]
#[test]
fn symlink_inside_folder_is_fine() {
    let dir = TmpDir::new("symlink_in");
    dir.write("real.bin", &f32_raw(&[1.0]));
    std::os::unix::fs::symlink(dir.path("real.bin"), dir.path("link.bin")).unwrap();
    let t = external("w", &[1], &[("location", "link.bin")]);
    load(&dir, &model_with(vec![t], vec![])).unwrap();
}

// ---- file-level ----

#[test]
fn missing_file_names_the_file() {
    let dir = TmpDir::new("missing");
    let p = dir.path("nope.onnx");
    let e = load_model(&p, &Limits::default()).unwrap_err();
    assert_contains(&e.to_string(), &["nope.onnx", "cannot read"]);
}

#[test]
fn garbage_names_the_file() {
    let dir = TmpDir::new("garbage");
    let p = dir.write("junk.onnx", &[0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]);
    let e = load_model(&p, &Limits::default()).unwrap_err();
    assert!(matches!(e, LoadError::Decode { .. }));
    assert_contains(&e.to_string(), &["junk.onnx", "not a valid ONNX model"]);
}

#[test]
fn file_size_limit() {
    let dir = TmpDir::new("filesize");
    let p = write_model(&dir, &model_with(vec![raw_f32("w", &[4], &[0.0; 4])], vec![]));
    let limits = Limits { max_file_bytes: 10, ..Limits::default() };
    let e = load_model(&p, &limits).unwrap_err().to_string();
    assert_contains(&e, &["model.onnx", "more than the limit of 10"]);
}

#[test]
fn tensor_size_limit() {
    let dir = TmpDir::new("tensorsize");
    let p = write_model(&dir, &model_with(vec![raw_f32("big", &[4], &[0.0; 4])], vec![]));
    let limits = Limits { max_tensor_bytes: 15, ..Limits::default() };
    let e = load_model(&p, &limits).unwrap_err().to_string();
    assert_contains(&e, &["model.onnx: initializer \"big\"", "16 bytes", "limit of 15"]);
}

// ---- tensor metadata ----

#[test]
fn unknown_data_type() {
    let t = TensorProto { data_type: Some(99), ..raw_f32("w", &[1], &[1.0]) };
    let e = load_err("unknown_dt", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"w\"", "unknown data_type code 99"]);
}

#[test]
fn undefined_data_type() {
    let t = TensorProto { data_type: None, ..raw_f32("w", &[1], &[1.0]) };
    let e = load_err("undef_dt", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"w\"", "UNDEFINED"]);
}

#[test]
fn negative_dim() {
    let e = load_err("neg", &model_with(vec![raw_f32("w", &[2, -3], &[0.0; 6])], vec![]));
    assert_contains(&e, &["initializer \"w\"", "[2,-3]", "negative"]);
}

#[test]
fn element_count_overflow() {
    let t = tensor("huge", DataType::Float, &[i64::MAX, i64::MAX, 4]);
    let e = load_err("overflow", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"huge\"", "overflows"]);
}

#[test]
fn byte_size_overflow() {
    // 2^62 elements fit in u64, but 2^62 × 32 bits do not.
    let t = tensor("huge", DataType::Float, &[1 << 31, 1 << 31]);
    let e = load_err("overflow_bytes", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"huge\"", "overflows"]);
}

#[test]
fn segment_rejected() {
    let t = TensorProto {
        segment: Some(onnx_proto::tensor_proto::Segment { begin: Some(0), end: Some(1) }),
        ..raw_f32("w", &[1], &[1.0])
    };
    let e = load_err("segment", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"w\"", "segment"]);
}

// ---- data consistency ----

#[test]
fn raw_data_length_mismatch() {
    let t = TensorProto { raw_data: Some(vec![0; 12]), ..tensor("w", DataType::Float, &[2, 3]) };
    let e = load_err("rawlen", &model_with(vec![t], vec![]));
    assert!(e.ends_with("model.onnx: initializer \"w\": raw_data has 12 bytes, dims [2,3] of FLOAT need 24"), "{e}");
}

#[test]
fn raw_data_sub_byte_rounding() {
    // 3 int4 values need 2 bytes; 3 bytes is wrong.
    let t = TensorProto { raw_data: Some(vec![0; 3]), ..tensor("q", DataType::Int4, &[3]) };
    let e = load_err("int4", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"q\"", "raw_data has 3 bytes", "INT4 need 2"]);
    // 5 int2 values need 2 bytes.
    let t = TensorProto { raw_data: Some(vec![0; 1]), ..tensor("q2", DataType::Int2, &[5]) };
    let e = load_err("int2", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"q2\"", "raw_data has 1 bytes", "INT2 need 2"]);
}

#[test]
fn typed_field_count_mismatch() {
    let t = TensorProto { float_data: vec![1.0; 5], ..tensor("w", DataType::Float, &[2, 3]) };
    let e = load_err("typedlen", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"w\"", "float_data has 5 values, dims [2,3] of FLOAT need 6"]);
}

#[test]
fn complex_needs_pairs() {
    let t = TensorProto { double_data: vec![1.0; 2], ..tensor("c", DataType::Complex128, &[2]) };
    let e = load_err("complex", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"c\"", "double_data has 2 values", "need 4"]);
}

#[test]
fn wrong_typed_field() {
    let t = TensorProto { int64_data: vec![1, 2], ..tensor("w", DataType::Float, &[2]) };
    let e = load_err("wrongfield", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"w\"", "has int64_data but FLOAT data belongs in float_data"]);
    // UINT32 belongs in uint64_data, not int32_data.
    let t = TensorProto { int32_data: vec![1], ..tensor("u", DataType::Uint32, &[1]) };
    let e = load_err("wrongfield2", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"u\"", "belongs in uint64_data"]);
}

#[test]
fn data_in_two_places() {
    let t = TensorProto { float_data: vec![1.0], ..raw_f32("w", &[1], &[1.0]) };
    let e = load_err("twoplaces", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"w\"", "more than one place (raw_data, float_data)"]);
}

#[test]
fn no_data_for_nonempty_tensor() {
    let e = load_err("nodata", &model_with(vec![tensor("w", DataType::Float, &[2])], vec![]));
    assert_contains(&e, &["initializer \"w\"", "has no data", "need 2"]);
}

#[test]
fn strings_cannot_be_raw() {
    let t = TensorProto { raw_data: Some(b"ab".to_vec()), ..tensor("s", DataType::String, &[1]) };
    let e = load_err("strraw", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"s\"", "STRING tensors cannot use raw_data"]);
}

#[test]
fn unknown_data_location() {
    let t = TensorProto { data_location: Some(7), ..raw_f32("w", &[1], &[1.0]) };
    let e = load_err("loc7", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"w\"", "unknown data_location 7"]);
}

#[test]
fn external_data_without_external_location() {
    let mut t = external("w", &[1], &[("location", "x.bin")]);
    t.data_location = None;
    let e = load_err("extnotext", &model_with(vec![t], vec![]));
    assert_contains(&e, &["initializer \"w\"", "data_location is not EXTERNAL"]);
}

// ---- every reachable tensor ----

#[test]
fn constant_attribute_names_the_node() {
    let bad = TensorProto { raw_data: Some(vec![0; 3]), ..tensor("cv", DataType::Float, &[1]) };
    let e = load_err("constattr", &model_with(vec![], vec![constant("c1", bad)]));
    assert_contains(
        &e,
        &["model.onnx: node \"c1\" (Constant): attribute \"value\": tensor \"cv\"", "raw_data has 3 bytes"],
    );
}

#[test]
fn attribute_tensors_list_and_sparse() {
    let bad = TensorProto { raw_data: Some(vec![0; 3]), ..tensor("lt", DataType::Float, &[1]) };
    let n = NodeProto {
        name: Some("n".into()),
        op_type: Some("Foo".into()),
        attribute: vec![AttributeProto {
            name: Some("ts".into()),
            tensors: vec![raw_f32("ok", &[1], &[1.0]), bad],
            ..Default::default()
        }],
        ..Default::default()
    };
    let e = load_err("tensorslist", &model_with(vec![], vec![n]));
    assert_contains(&e, &["node \"n\" (Foo): attribute \"ts\": tensor \"lt\""]);

    let sparse = SparseTensorProto {
        values: Some(raw_f32("sv", &[2], &[1.0, 2.0])),
        indices: Some(TensorProto { int64_data: vec![0], ..tensor("si", DataType::Int64, &[2]) }),
        dims: vec![4],
    };
    let n = NodeProto {
        name: Some("c2".into()),
        op_type: Some("Constant".into()),
        attribute: vec![AttributeProto {
            name: Some("sparse_value".into()),
            sparse_tensor: Some(sparse),
            ..Default::default()
        }],
        ..Default::default()
    };
    let e = load_err("sparseattr", &model_with(vec![], vec![n]));
    assert_contains(
        &e,
        &["node \"c2\" (Constant): attribute \"sparse_value\": sparse tensor: indices", "int64_data has 1 values"],
    );
}

#[test]
fn sparse_initializer_values_and_indices() {
    let mut m = model_with(vec![], vec![]);
    let g = m.graph.as_mut().unwrap();
    g.sparse_initializer.push(SparseTensorProto {
        values: Some(TensorProto { raw_data: Some(vec![0; 5]), ..tensor("sp", DataType::Float, &[2]) }),
        indices: Some(TensorProto { int64_data: vec![0, 1], ..tensor("spi", DataType::Int64, &[2]) }),
        dims: vec![4],
    });
    let e = load_err("sparseinit", &m);
    assert_contains(&e, &["sparse initializer \"sp\": values", "raw_data has 5 bytes"]);

    let mut m = model_with(vec![], vec![]);
    m.graph.as_mut().unwrap().sparse_initializer.push(SparseTensorProto {
        values: Some(raw_f32("sp", &[1], &[1.0])),
        indices: None,
        dims: vec![4],
    });
    let e = load_err("sparsenoidx", &m);
    assert_contains(&e, &["sparse initializer \"sp\"", "no indices"]);
}

#[test]
fn subgraph_initializer_is_checked() {
    let sub = GraphProto {
        name: Some("body".into()),
        initializer: vec![tensor("inner", DataType::Float, &[3])],
        ..Default::default()
    };
    let n = NodeProto {
        name: Some("loop".into()),
        op_type: Some("Loop".into()),
        attribute: vec![AttributeProto { name: Some("body".into()), g: Some(sub.clone()), ..Default::default() }],
        ..Default::default()
    };
    let e = load_err("subgraph", &model_with(vec![], vec![n]));
    assert_contains(
        &e,
        &["node \"loop\" (Loop): attribute \"body\": graph \"body\": initializer \"inner\"", "no data"],
    );
    let n = NodeProto {
        name: Some("seq".into()),
        op_type: Some("Foo".into()),
        attribute: vec![AttributeProto { name: Some("branches".into()), graphs: vec![sub], ..Default::default() }],
        ..Default::default()
    };
    let e = load_err("subgraphs", &model_with(vec![], vec![n]));
    assert_contains(&e, &["attribute \"branches\": graph \"body\": initializer \"inner\""]);
}

#[test]
fn function_and_training_info_are_checked() {
    let mut m = model_with(vec![], vec![]);
    m.functions.push(FunctionProto {
        name: Some("MyFn".into()),
        domain: Some("com.me".into()),
        node: vec![constant("fc", tensor("ft", DataType::Float, &[2]))],
        ..Default::default()
    });
    let e = load_err("function", &m);
    assert_contains(&e, &["function \"com.me::MyFn\": node \"fc\" (Constant): attribute \"value\": tensor \"ft\""]);

    let mut m = model_with(vec![], vec![]);
    m.training_info.push(TrainingInfoProto {
        algorithm: Some(GraphProto {
            name: Some("train".into()),
            initializer: vec![tensor("lr", DataType::Float, &[1])],
            ..Default::default()
        }),
        ..Default::default()
    });
    let e = load_err("training", &m);
    assert_contains(&e, &["training_info #0: algorithm graph \"train\": initializer \"lr\""]);
}

// ---- external data ----

#[test]
fn external_absolute_path() {
    let dir = TmpDir::new("ext_abs");
    let abs = dir.write("w.bin", &f32_raw(&[1.0]));
    let e = load_ext_err(&dir, external("w", &[1], &[("location", abs.to_str().unwrap())]));
    assert_contains(&e, &["initializer \"w\"", "is an absolute path"]);
}

#[test]
fn external_parent_dir() {
    let dir = TmpDir::new("ext_dotdot");
    dir.write("sub/w.bin", &f32_raw(&[1.0]));
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "../x.bin")]));
    assert!(
        e.ends_with("model.onnx: initializer \"w\": external data location \"../x.bin\" leaves the model's folder"),
        "{e}"
    );
    // `..` anywhere, even if it would come back inside.
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "sub/../sub/w.bin")]));
    assert_contains(&e, &["\"sub/../sub/w.bin\" leaves the model's folder"]);
}

#[cfg(unix)]
#[test]
fn external_symlink_leaving_folder() {
    let outside = TmpDir::new("ext_outside");
    let target = outside.write("secret.bin", &f32_raw(&[1.0]));
    let dir = TmpDir::new("ext_symlink");
    std::os::unix::fs::symlink(&target, dir.path("w.bin")).unwrap();
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "w.bin")]));
    assert_contains(&e, &["\"w.bin\" leaves the model's folder (through a symlink)"]);
    // A symlinked folder leaving too.
    std::os::unix::fs::symlink(&outside.0, dir.path("d")).unwrap();
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "d/secret.bin")]));
    assert_contains(&e, &["\"d/secret.bin\" leaves the model's folder (through a symlink)"]);
}

#[cfg(unix)]
#[test]
fn external_hardlink_rejected() {
    let dir = TmpDir::new("ext_hardlink");
    dir.write("a.bin", &f32_raw(&[1.0]));
    fs::hard_link(dir.path("a.bin"), dir.path("b.bin")).unwrap();
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "b.bin")]));
    assert_contains(&e, &["initializer \"w\"", "\"b.bin\" is a hardlinked file (2 links)"]);
}

#[test]
fn external_not_regular_file() {
    let dir = TmpDir::new("ext_dir");
    fs::create_dir_all(dir.path("folder.bin")).unwrap();
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "folder.bin")]));
    assert_contains(&e, &["\"folder.bin\" is not a regular file"]);
}

#[test]
fn external_missing_file() {
    let dir = TmpDir::new("ext_missing");
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "gone.bin")]));
    assert_contains(&e, &["initializer \"w\"", "\"gone.bin\" cannot be opened"]);
}

#[test]
fn external_offset_length_out_of_range() {
    let dir = TmpDir::new("ext_range");
    dir.write("w.bin", &f32_raw(&[1.0, 2.0]));
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "w.bin"), ("offset", "6"), ("length", "4")]));
    assert_contains(&e, &["\"w.bin\" offset 6 + length 4 is beyond the end of the file (8 bytes)"]);
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "w.bin"), ("offset", "20")]));
    assert_contains(&e, &["offset 20", "beyond the end"]);
    // offset + length overflows u64.
    let e = load_ext_err(
        &dir,
        external("w", &[1], &[("location", "w.bin"), ("offset", "4"), ("length", "18446744073709551615")]),
    );
    assert_contains(&e, &["beyond the end"]);
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "w.bin"), ("offset", "-1")]));
    assert_contains(&e, &["offset \"-1\" is not a non-negative integer"]);
}

#[test]
fn external_length_must_match_dims() {
    let dir = TmpDir::new("ext_len");
    dir.write("w.bin", &f32_raw(&[1.0, 2.0]));
    let e = load_ext_err(&dir, external("w", &[3], &[("location", "w.bin")]));
    assert_contains(&e, &["initializer \"w\"", "\"w.bin\" has 8 bytes, dims [3] of FLOAT need 12"]);
}

#[test]
fn external_key_problems() {
    let dir = TmpDir::new("ext_keys");
    dir.write("w.bin", &f32_raw(&[1.0]));
    let e = load_ext_err(&dir, external("w", &[1], &[("offset", "0")]));
    assert_contains(&e, &["initializer \"w\"", "no \"location\" key"]);
    let e = load_ext_err(&dir, external("w", &[1], &[("location", "w.bin"), ("location", "w.bin")]));
    assert_contains(&e, &["key \"location\" appears more than once"]);
    let mut t = external("w", &[1], &[("location", "w.bin")]);
    t.raw_data = Some(f32_raw(&[1.0]));
    let e = load_ext_err(&dir, t);
    assert_contains(&e, &["more than one place (external data, raw_data)"]);
}

#[test]
fn external_strings_rejected() {
    let dir = TmpDir::new("ext_str");
    dir.write("w.bin", b"abc");
    let mut t = external("s", &[1], &[("location", "w.bin")]);
    t.data_type = Some(DataType::String as i32);
    let e = load_ext_err(&dir, t);
    assert_contains(&e, &["initializer \"s\"", "STRING tensors cannot use"]);
}

#[test]
fn external_size_limit_before_reading() {
    let dir = TmpDir::new("ext_limit");
    dir.write("w.bin", &f32_raw(&[1.0; 8]));
    let p = write_model(&dir, &model_with(vec![external("w", &[8], &[("location", "w.bin")])], vec![]));
    let limits = Limits { max_tensor_bytes: 16, ..Limits::default() };
    let e = load_model(&p, &limits).unwrap_err().to_string();
    assert_contains(&e, &["initializer \"w\"", "32 bytes, more than the limit of 16"]);
}

#[test]
fn fmt_dims_formats() {
    assert_eq!(fmt_dims(&[]), "[]");
    assert_eq!(fmt_dims(&[2, 3]), "[2,3]");
}

/// Mutated and truncated encodings of a model never panic `load` or `check`.
#[test]
fn mutated_models_never_panic() {
    let dir = TmpDir::new("fuzz");
    dir.write("w.bin", &f32_raw(&[1.0, 2.0]));
    let sub = GraphProto {
        name: Some("then".into()),
        node: vec![constant("sc", raw_f32("st", &[1], &[3.0]))],
        output: vec![onnx_proto::ValueInfoProto { name: Some("sc_out".into()), ..Default::default() }],
        ..Default::default()
    };
    let if_node = NodeProto {
        name: Some("if1".into()),
        op_type: Some("If".into()),
        input: vec!["w".into()],
        output: vec!["y".into()],
        attribute: vec![AttributeProto { name: Some("then_branch".into()), g: Some(sub), ..Default::default() }],
        ..Default::default()
    };
    let mut m = model_with(
        vec![
            external("w", &[2], &[("location", "w.bin"), ("offset", "0")]),
            TensorProto { int32_data: vec![1, 2, 3], ..tensor("i", DataType::Int4, &[5]) },
        ],
        vec![if_node],
    );
    m.functions.push(FunctionProto {
        name: Some("F".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        node: vec![NodeProto {
            op_type: Some("Relu".into()),
            input: vec!["a".into()],
            output: vec!["b".into()],
            ..Default::default()
        }],
        ..Default::default()
    });
    let base = m.encode_to_vec();
    assert!(load(&dir, &m).is_ok());
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let path = dir.path("fuzz.onnx");
    for _ in 0..1500 {
        let mut bytes = base.clone();
        let r = rand();
        if r % 5 == 0 {
            bytes.truncate((rand() as usize) % bytes.len());
        } else {
            for _ in 0..1 + r % 4 {
                let i = (rand() as usize) % bytes.len();
                bytes[i] = rand() as u8;
            }
        }
        fs::write(&path, &bytes).unwrap();
        if let Ok(loaded) = load_model(&path, &Limits::default()) {
            let _ = crate::check::check_model(&loaded, &Limits::default());
        }
    }
}
