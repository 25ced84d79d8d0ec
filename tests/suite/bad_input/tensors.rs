//! Broken tensors: data that disagrees with its dims or type, and external
//! data that points outside the model's folder (`..`, absolute paths,
//! symlinks, hardlinks — in initializers, sparse initializers, Constant
//! values and sparse values, subgraphs and functions), past the end of its
//! file, or at offsets that overflow.

use super::{check, graph, mutated, Case, Folders};
use crate::models::{node, raw_tensor, value};
use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::tensor_proto::DataLocation;
use onnx_proto::*;
use std::path::Path;

pub fn cases() -> Vec<Case> {
    let mut cases = data();
    cases.extend(external_paths());
    cases.extend(external_ranges());
    cases
}

/// [`super::valid`] plus `z = Add(y, w)` reading the initializer `w`.
fn with_weight(w: TensorProto) -> Vec<u8> {
    mutated(|m| {
        let g = graph(m);
        g.node.push(node("Add", "add", &["y", "w"], &["z"]));
        g.output = vec![value("z", Some(&[2]))];
        g.initializer.push(w);
    })
}

fn f32s(dims: &[i64], bytes: usize) -> TensorProto {
    raw_tensor("w", 1, dims, vec![0; bytes])
}

/// `w` with `f` applied.
fn weight(f: impl FnOnce(&mut TensorProto)) -> Vec<u8> {
    let mut t = f32s(&[2], 8);
    f(&mut t);
    with_weight(t)
}

fn data() -> Vec<Case> {
    vec![
        check("raw_data shorter than dims", &["initializer \"w\"", "raw_data has 4 bytes", "need 8"], |_| {
            with_weight(f32s(&[2], 4))
        }),
        check("raw_data longer than dims", &["initializer \"w\"", "raw_data has 12 bytes"], |_| {
            with_weight(f32s(&[2], 12))
        }),
        check("float_data shorter than dims", &["initializer \"w\"", "float_data has 1 values"], |_| {
            weight(|t| {
                t.raw_data = None;
                t.float_data = vec![1.0];
            })
        }),
        check("negative dim", &["initializer \"w\"", "dims [-2] contain a negative value"], |_| {
            with_weight(f32s(&[-2], 8))
        }),
        check("dims overflow", &["initializer \"w\"", "element count or byte size overflows"], |_| {
            with_weight(f32s(&[i64::MAX, i64::MAX], 8))
        }),
        check("byte size overflows", &["initializer \"w\"", "overflows"], |_| {
            with_weight(raw_tensor("w", 11, &[1 << 62], vec![]))
        }),
        check(
            "tensor over the default size limit",
            &["initializer \"w\"", "more than the limit of 4294967296"],
            |_| with_weight(f32s(&[1 << 31], 0)),
        ),
        check(
            "tensor over --max-tensor-bytes",
            &["initializer \"w\"", "need 8 bytes, more than the limit of 4"],
            |_| with_weight(f32s(&[2], 8)),
        )
        .with_args(&["--max-tensor-bytes", "4"]),
        check("unknown data_type", &["initializer \"w\"", "unknown data_type code 99"], |_| {
            weight(|t| t.data_type = Some(99))
        }),
        check("UNDEFINED data_type", &["initializer \"w\"", "data_type is UNDEFINED"], |_| {
            weight(|t| t.data_type = Some(0))
        }),
        check("data in two places", &["initializer \"w\"", "more than one place (raw_data, float_data)"], |_| {
            weight(|t| t.float_data = vec![1.0, 2.0])
        }),
        check(
            "data in the wrong typed field",
            &["initializer \"w\"", "has int64_data but FLOAT data belongs in float_data"],
            |_| {
                weight(|t| {
                    t.raw_data = None;
                    t.int64_data = vec![1, 2];
                })
            },
        ),
        check("STRING tensor with raw_data", &["initializer \"w\"", "STRING tensors cannot use raw_data"], |_| {
            weight(|t| t.data_type = Some(8))
        }),
        check("segmented tensor", &["initializer \"w\"", "segment"], |_| {
            weight(|t| t.segment = Some(tensor_proto::Segment { begin: Some(0), end: Some(2) }))
        }),
        check("unknown data_location", &["initializer \"w\"", "unknown data_location 5"], |_| {
            weight(|t| t.data_location = Some(5))
        }),
        check("no data for a non-empty tensor", &["initializer \"w\"", "has no data"], |_| {
            weight(|t| t.raw_data = None)
        }),
        check("sparse initializer with negative dims", &["sparse initializer \"s\"", "negative"], |_| {
            sparse_init(|s| s.dims = vec![-4])
        }),
        check("sparse initializer without values", &["sparse initializer #0", "sparse tensor has no values"], |_| {
            sparse_init(|s| s.values = None)
        }),
        check(
            "sparse initializer with short indices",
            &["sparse initializer \"s\": indices", "raw_data has 4 bytes"],
            |_| sparse_init(|s| s.indices = Some(raw_tensor("i", 7, &[1], vec![0; 4]))),
        ),
        check(
            "sparse index out of range",
            &["sparse initializer: sparse tensor \"s\"", "linearized index 0 is 4, outside [0, 4)"],
            |_| sparse_init(|s| s.indices = Some(indices(&[1], &[4]))),
        ),
        check(
            "sparse index tuple out of range",
            &["sparse initializer: sparse tensor \"s\"", "index 0 has 9 on axis 0"],
            |_| sparse_init(|s| s.indices = Some(indices(&[1, 1], &[9]))),
        ),
        check(
            "sparse indices not ascending",
            &["sparse initializer: sparse tensor \"s\"", "index 1 is not after index 0"],
            |_| {
                sparse_init(|s| {
                    s.values = Some(raw_tensor("s", 1, &[2], vec![0; 8]));
                    s.indices = Some(indices(&[2], &[3, 1]));
                })
            },
        ),
        check(
            "sparse indices of the wrong shape",
            &["sparse initializer: sparse tensor \"s\"", "must be [1] or [1, 1]"],
            |_| sparse_init(|s| s.indices = Some(indices(&[1, 2], &[0, 0]))),
        ),
        check(
            "sparse values fewer than indices",
            &["sparse initializer: sparse tensor \"s\"", "indices have dims [2]"],
            |_| sparse_init(|s| s.indices = Some(indices(&[2], &[0, 1]))),
        ),
        check(
            "sparse_value index out of range",
            &["node \"c\" (Constant): attribute \"sparse_value\": sparse tensor \"s\"", "outside [0, 4)"],
            |_| {
                let mut s = sparse("s");
                s.indices = Some(indices(&[1], &[7]));
                constant_model(AttributeProto {
                    name: Some("sparse_value".into()),
                    r#type: Some(AttributeType::SparseTensor as i32),
                    sparse_tensor: Some(s),
                    ..Default::default()
                })
            },
        ),
        check(
            "Constant tensor shorter than its dims",
            &["node \"c\" (Constant): attribute \"value\"", "raw_data has 4 bytes"],
            |_| constant_model(value_attr(f32s(&[2], 4))),
        ),
        check("Constant tensor of unknown type", &["node \"c\" (Constant)", "unknown data_type code 77"], |_| {
            constant_model(value_attr(TensorProto { data_type: Some(77), ..f32s(&[2], 8) }))
        }),
    ]
}

/// A model whose graph holds `s` as a sparse initializer.
fn sparse_init(f: impl FnOnce(&mut SparseTensorProto)) -> Vec<u8> {
    let mut s = sparse("s");
    f(&mut s);
    mutated(|m| graph(m).sparse_initializer.push(s))
}

/// A 4-element sparse f32 vector with one value at index 0.
fn sparse(name: &str) -> SparseTensorProto {
    SparseTensorProto {
        values: Some(raw_tensor(name, 1, &[1], vec![0; 4])),
        indices: Some(raw_tensor("i", 7, &[1], vec![0; 8])),
        dims: vec![4],
    }
}

/// i64 sparse indices of `dims`.
fn indices(dims: &[i64], values: &[i64]) -> TensorProto {
    raw_tensor("i", 7, dims, values.iter().flat_map(|v| v.to_le_bytes()).collect())
}

fn value_attr(t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: Some("value".into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(t),
        ..Default::default()
    }
}

/// `w = Constant(attr)`; `z = Add(Relu(x), w)`.
fn constant_model(attr: AttributeProto) -> Vec<u8> {
    mutated(|m| {
        let g = graph(m);
        let mut c = node("Constant", "c", &[], &["w"]);
        c.attribute.push(attr);
        g.node.insert(0, c);
        g.node.push(node("Add", "add", &["y", "w"], &["z"]));
        g.output = vec![value("z", Some(&[2]))];
    })
}

/// An f32[2] tensor `w` whose data is in `location`.
fn ext(location: &str, offset: Option<&str>, length: Option<&str>) -> TensorProto {
    let entry = |k: &str, v: &str| StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) };
    let mut t = f32s(&[2], 0);
    t.raw_data = None;
    t.data_location = Some(DataLocation::External as i32);
    t.external_data.push(entry("location", location));
    t.external_data.extend(offset.map(|o| entry("offset", o)));
    t.external_data.extend(length.map(|l| entry("length", l)));
    t
}

fn at(location: &str) -> TensorProto {
    ext(location, None, None)
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
}

fn external_paths() -> Vec<Case> {
    vec![
        check(
            "external data through ..",
            &["initializer \"w\"", "\"../secret.bin\" leaves the model's folder"],
            |_| with_weight(at("../secret.bin")),
        ),
        check("external data through a folder and ..", &["\"sub/../../secret.bin\" leaves the model's folder"], |_| {
            with_weight(at("sub/../../secret.bin"))
        }),
        check("external data at an absolute path", &["initializer \"w\"", "is an absolute path"], |f| {
            with_weight(at(&f.root.join("secret.bin").to_string_lossy()))
        }),
        check("external data at a drive path", &["\"C:\\secret.bin\" is an absolute path"], |_| {
            with_weight(at("C:\\secret.bin"))
        }),
        check("external data at a backslash path", &["is an absolute path"], |_| with_weight(at("\\secret.bin"))),
        check(
            "external data through a symlink",
            &["\"link.bin\" leaves the model's folder (through a symlink)"],
            |f| {
                symlink(&f.root.join("secret.bin"), &f.model.join("link.bin"));
                with_weight(at("link.bin"))
            },
        ),
        check("external data through a symlinked folder", &["\"dir/secret.bin\"", "through a symlink"], |f| {
            symlink(&f.root, &f.model.join("dir"));
            with_weight(at("dir/secret.bin"))
        }),
        check("external data in a hardlink", &["\"hard.bin\" is a hardlinked file"], |f| {
            std::fs::hard_link(f.root.join("secret.bin"), f.model.join("hard.bin")).expect("hardlink");
            with_weight(at("hard.bin"))
        }),
        check("external data in a folder", &["\"sub\" is not a regular file"], |f| {
            std::fs::create_dir(f.model.join("sub")).expect("mkdir");
            with_weight(at("sub"))
        }),
        check("external data file missing", &["\"missing.bin\" cannot be opened"], |_| with_weight(at("missing.bin"))),
        check("external data location empty", &["location \"\" is empty"], |_| with_weight(at(""))),
        check("external data location with NUL", &["is empty"], |_| with_weight(at("w.bin\0../secret.bin"))),
        check("external data without location", &["external_data has no \"location\" key"], |_| {
            weight(|t| {
                *t = ext("x", None, None);
                t.external_data[0].key = Some("place".into());
            })
        }),
        check("external data key twice", &["external_data key \"location\" appears more than once"], |_| {
            weight(|t| {
                *t = at("w.bin");
                t.external_data.push(t.external_data[0].clone());
            })
        }),
        check(
            "external_data without EXTERNAL location",
            &["external_data is set but data_location is not EXTERNAL"],
            |_| {
                weight(|t| {
                    *t = at("w.bin");
                    t.data_location = None;
                })
            },
        ),
        check("external data and raw_data", &["more than one place (external data, raw_data)"], |_| {
            weight(|t| {
                *t = at("w.bin");
                t.raw_data = Some(vec![0; 8]);
            })
        }),
        check(
            "sparse initializer values through ..",
            &["sparse initializer \"w\": values", "leaves the model's folder"],
            |_| {
                let mut s = sparse("w");
                s.values = Some(TensorProto { dims: vec![1], ..at("../secret.bin") });
                mutated(|m| graph(m).sparse_initializer.push(s))
            },
        ),
        check(
            "sparse initializer indices through ..",
            &["sparse initializer \"s\": indices", "leaves the model's folder"],
            |_| {
                let mut s = sparse("s");
                s.indices = Some(TensorProto { data_type: Some(7), dims: vec![1], ..at("../secret.bin") });
                mutated(|m| graph(m).sparse_initializer.push(s))
            },
        ),
        check(
            "Constant sparse_value through ..",
            &["node \"c\" (Constant): attribute \"sparse_value\"", "leaves the model's folder"],
            |_| {
                let mut s = sparse("w");
                s.values = Some(TensorProto { dims: vec![1], ..at("../secret.bin") });
                constant_model(AttributeProto {
                    name: Some("sparse_value".into()),
                    r#type: Some(AttributeType::SparseTensor as i32),
                    sparse_tensor: Some(s),
                    ..Default::default()
                })
            },
        ),
        check(
            "Constant value at an absolute path",
            &["node \"c\" (Constant): attribute \"value\"", "is an absolute path"],
            |f| constant_model(value_attr(at(&f.root.join("secret.bin").to_string_lossy()))),
        ),
        check(
            "subgraph initializer through ..",
            &["graph \"then\": initializer \"w\"", "leaves the model's folder"],
            |_| {
                let branch = GraphProto {
                    name: Some("then".into()),
                    initializer: vec![at("../secret.bin")],
                    output: vec![ValueInfoProto { name: Some("w".into()), ..Default::default() }],
                    ..Default::default()
                };
                let mut n = node("If", "if", &["x"], &["y"]);
                n.attribute.push(AttributeProto {
                    name: Some("then_branch".into()),
                    r#type: Some(AttributeType::Graph as i32),
                    g: Some(branch),
                    ..Default::default()
                });
                mutated(|m| graph(m).node = vec![n])
            },
        ),
        check("function Constant through ..", &["function \"local::f\"", "leaves the model's folder"], |_| {
            let mut c = node("Constant", "c", &[], &["y"]);
            c.attribute.push(value_attr(at("../secret.bin")));
            mutated(|m| {
                m.functions.push(FunctionProto {
                    name: Some("f".into()),
                    domain: Some("local".into()),
                    output: vec!["y".into()],
                    node: vec![c],
                    ..Default::default()
                })
            })
        }),
    ]
}

/// `w.bin` of 8 bytes in the model's folder.
fn w_bin(f: &Folders) {
    std::fs::write(f.model.join("w.bin"), [0u8; 8]).expect("write");
}

fn external_ranges() -> Vec<Case> {
    vec![
        check("external offset past the end", &["\"w.bin\" offset 16", "beyond the end of the file (8 bytes)"], |f| {
            w_bin(f);
            with_weight(ext("w.bin", Some("16"), None))
        }),
        check("external range past the end", &["offset 4 + length 8 is beyond the end of the file"], |f| {
            w_bin(f);
            with_weight(ext("w.bin", Some("4"), Some("8")))
        }),
        check("external offset plus length overflows", &["\"w.bin\" offset 18446744073709551615 + length 8"], |f| {
            w_bin(f);
            with_weight(ext("w.bin", Some("18446744073709551615"), Some("8")))
        }),
        check("external length overflows", &["length 18446744073709551615"], |f| {
            w_bin(f);
            with_weight(ext("w.bin", Some("1"), Some("18446744073709551615")))
        }),
        check("external length shorter than dims", &["\"w.bin\" has 4 bytes, dims [2] of FLOAT need 8"], |f| {
            w_bin(f);
            with_weight(ext("w.bin", None, Some("4")))
        }),
        check("external offset not a number", &["external data offset \"-4\" is not a non-negative integer"], |f| {
            w_bin(f);
            with_weight(ext("w.bin", Some("-4"), None))
        }),
        check("external length not a number", &["external data length \"8 bytes\""], |f| {
            w_bin(f);
            with_weight(ext("w.bin", None, Some("8 bytes")))
        }),
        check("external file shorter than dims", &["\"short.bin\" has 4 bytes, dims [2] of FLOAT need 8"], |f| {
            std::fs::write(f.model.join("short.bin"), [0u8; 4]).expect("write");
            with_weight(at("short.bin"))
        }),
        // Each reference is small; together they pass the total budget.
        check("external data repeated past the total", &["initializer \"w2\"", "--max-external-bytes"], |f| {
            w_bin(f);
            mutated(|m| {
                let g = graph(m);
                g.node.push(node("Add", "add", &["y", "w"], &["z"]));
                g.output = vec![value("z", Some(&[2]))];
                for k in ["w", "w1", "w2", "w3"] {
                    g.initializer.push(TensorProto { name: Some(k.to_string()), ..at("w.bin") });
                }
            })
        })
        .with_args(&["--max-external-bytes", "20"]),
    ]
}
