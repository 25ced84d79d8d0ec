//! Broken structure: protobuf bytes, IR version and opsets, the graph rules
//! (SSA, order, cycles, scopes, types, attributes), subgraphs and
//! model-local functions.

use super::{check, graph, graph_model, mutated, valid, Case};
use crate::models::{float_attr, node, value};
use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::*;
use prost::Message;

pub fn cases() -> Vec<Case> {
    let mut cases = protobuf();
    cases.extend(versions());
    cases.extend(graph_rules());
    cases.extend(attributes());
    cases.extend(subgraphs());
    cases.extend(functions());
    cases
}

fn protobuf() -> Vec<Case> {
    vec![
        check("garbage bytes", &["not a valid ONNX model"], |_| b"\xff\xff\xff\xffnot a model".to_vec()),
        check("truncated model", &["not a valid ONNX model"], |_| {
            let bytes = valid().encode_to_vec();
            bytes[..bytes.len() / 2].to_vec()
        }),
        // An empty file is an empty ModelProto: nothing required is there.
        check("empty file", &["ir_version is not set", "opset_import is empty", "has no graph"], |_| Vec::new()),
        // Field 1 (ir_version, a varint) sent as a length-delimited field.
        check("wrong wire type", &["not a valid ONNX model"], |_| vec![0x0a, 0x01, 0x08]),
        // Field 7 (graph) claiming 2^32 bytes in a 9-byte file.
        check("length beyond the file", &["not a valid ONNX model"], |_| {
            vec![0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x0a, 0x00, 0x00]
        }),
        // Field 2 (producer_name) with bytes that are not UTF-8.
        check("string not utf-8", &["not a valid ONNX model"], |_| vec![0x12, 0x02, 0xff, 0xfe]),
        check("varint of eleven bytes", &["not a valid ONNX model"], |_| {
            let mut b = vec![0x08];
            b.extend([0xff; 10]);
            b.push(0x01);
            b
        }),
        // Subgraphs nested 40 deep pass prost's 100-message recursion limit.
        check("messages nested past the decoder's limit", &["not a valid ONNX model", "recursion limit"], |_| {
            nested_ifs(40).encode_to_vec()
        }),
        check(
            "compile time over --max-compile-seconds",
            &["node \"relu\" (Relu): compiling took longer than the limit of 0 s"],
            |_| valid().encode_to_vec(),
        )
        .with_args(&["--max-compile-seconds", "0"]),
        check("file over --max-file-bytes", &["more than the limit of 64 (--max-file-bytes)"], |_| {
            valid().encode_to_vec()
        })
        .with_args(&["--max-file-bytes", "64"]),
    ]
}

fn versions() -> Vec<Case> {
    vec![
        check("ir_version too old", &["ir_version 2 is not supported"], |_| mutated(|m| m.ir_version = Some(2))),
        check("ir_version too new", &["ir_version 15 is not supported"], |_| mutated(|m| m.ir_version = Some(15))),
        check("ir_version negative", &["ir_version -1 is not supported"], |_| mutated(|m| m.ir_version = Some(-1))),
        check("ir_version missing", &["ir_version is not set"], |_| mutated(|m| m.ir_version = None)),
        check("no opset_import", &["opset_import is empty"], |_| mutated(|m| m.opset_import.clear())),
        check("opset listed twice", &["lists domain \"\" more than once"], |_| {
            mutated(|m| m.opset_import.push(OperatorSetIdProto { domain: Some("ai.onnx".into()), version: Some(13) }))
        }),
        check("opset without version", &["entry for domain \"\" has no version"], |_| {
            mutated(|m| m.opset_import[0].version = None)
        }),
        check("domain not imported", &["no entry for domain \"com.example\"", "node \"relu\""], |_| {
            mutated(|m| graph(m).node[0].domain = Some("com.example".into()))
        }),
        check("no graph", &["has no graph"], |_| mutated(|m| m.graph = None)),
        check(
            "unsupported operators listed at once",
            &["node \"first\" (NoSuchOp): unsupported operator NoSuchOp", "node \"second\" (AlsoMissing)"],
            |_| {
                mutated(|m| {
                    graph(m).node =
                        vec![node("NoSuchOp", "first", &["x"], &["t"]), node("AlsoMissing", "second", &["t"], &["y"])]
                })
            },
        ),
    ]
}

fn graph_rules() -> Vec<Case> {
    vec![
        check("undefined input", &["node \"relu\" (Relu)", "input \"nope\" is undefined"], |_| {
            mutated(|m| graph(m).node[0].input = vec!["nope".into()])
        }),
        check("value defined twice", &["value \"y\" is defined twice"], |_| {
            mutated(|m| graph(m).node.push(node("Relu", "again", &["x"], &["y"])))
        }),
        check("node output redefines a graph input", &["value \"x\" is defined twice"], |_| {
            mutated(|m| graph(m).node.push(node("Relu", "clobber", &["y"], &["x"])))
        }),
        check("initializer defined twice", &["value \"w\" is defined twice"], |_| {
            let w = || crate::models::raw_tensor("w", 1, &[2], vec![0; 8]);
            mutated(|m| {
                let g = graph(m);
                g.initializer = vec![w(), w()];
                g.node.push(node("Add", "add", &["y", "w"], &["z"]));
            })
        }),
        check("nodes out of order", &["node \"early\"", "\"y\" is out of order"], |_| {
            mutated(|m| {
                let g = graph(m);
                g.node.insert(0, node("Relu", "early", &["y"], &["z"]));
                g.output.push(value("z", Some(&[2])));
            })
        }),
        check("cycle of two nodes", &["node \"a\" (Relu)", "\"q\" is out of order"], |_| {
            graph_model(
                vec![node("Relu", "a", &["q"], &["p"]), node("Relu", "b", &["p"], &["q"])],
                vec![value("x", Some(&[2]))],
                vec![],
                vec![value("q", Some(&[2]))],
            )
        }),
        check("node reading its own output", &["node \"self\" (Add)", "\"y\" is out of order"], |_| {
            mutated(|m| graph(m).node = vec![node("Add", "self", &["x", "y"], &["y"])])
        }),
        check("graph output undefined", &["output \"ghost\" is not defined"], |_| {
            mutated(|m| graph(m).output.push(value("ghost", Some(&[2]))))
        }),
        check("graph output with an empty name", &["output #1 has an empty name"], |_| {
            mutated(|m| graph(m).output.push(value("", Some(&[2]))))
        }),
        check("input without a type", &["input \"x\" has no type"], |_| mutated(|m| graph(m).input[0].r#type = None)),
        // An output's shape is inferred, and a dim declared -1 is an unknown
        // one (issue #32, tests/suite/symbolic_dims.rs); an input's rank is not.
        check("input without a shape", &["input \"x\" has no shape"], |_| {
            mutated(|m| graph(m).input[0] = value("x", None))
        }),
        check("input of unknown element type", &["input \"x\" has unknown element type code 99"], |_| {
            mutated(|m| graph(m).input[0] = crate::models::typed_value("x", 99, Some(&[2])))
        }),
        check("input without element type", &["input \"x\" has no element type"], |_| {
            mutated(|m| graph(m).input[0] = crate::models::typed_value("x", 0, Some(&[2])))
        }),
        check(
            "all problems reported together",
            &["ir_version 99", "\"nope\" is undefined", "input \"x\" has no type"],
            |_| {
                mutated(|m| {
                    m.ir_version = Some(99);
                    let g = graph(m);
                    g.node[0].input = vec!["nope".into()];
                    g.input[0].r#type = None;
                })
            },
        ),
    ]
}

fn attr(name: &str, f: impl FnOnce(&mut AttributeProto)) -> AttributeProto {
    let mut a = AttributeProto { name: Some(name.into()), ..Default::default() };
    f(&mut a);
    a
}

/// [`valid`] with `attrs` on its Relu node.
fn relu_with(attrs: Vec<AttributeProto>) -> Vec<u8> {
    mutated(|m| graph(m).node[0].attribute = attrs)
}

fn attributes() -> Vec<Case> {
    vec![
        check("attribute twice", &["attribute \"alpha\" appears more than once"], |_| {
            relu_with(vec![float_attr("alpha", 1.0), float_attr("alpha", 2.0)])
        }),
        check("attribute of unknown type", &["attribute \"alpha\"", "unknown attribute type code 99"], |_| {
            relu_with(vec![attr("alpha", |a| {
                a.r#type = Some(99);
                a.f = Some(1.0);
            })])
        }),
        check("attribute type and payload disagree", &["attribute \"alpha\"", "has type INT but carries f"], |_| {
            relu_with(vec![attr("alpha", |a| {
                a.r#type = Some(AttributeType::Int as i32);
                a.f = Some(1.0);
            })])
        }),
        check("attribute without its value", &["attribute \"alpha\"", "has type FLOAT but no f value"], |_| {
            relu_with(vec![attr("alpha", |a| a.r#type = Some(AttributeType::Float as i32))])
        }),
        check("untyped attribute with two values", &["attribute \"alpha\"", "more than one value (f, i)"], |_| {
            relu_with(vec![attr("alpha", |a| {
                a.f = Some(1.0);
                a.i = Some(1);
            })])
        }),
        check("attribute without a name", &["node \"relu\" (Relu)", "attribute has an empty name"], |_| {
            relu_with(vec![attr("", |a| {
                a.r#type = Some(AttributeType::Float as i32);
                a.f = Some(1.0);
            })])
        }),
        check("ref_attr_name outside a function", &["ref_attr_name \"a\" is only allowed inside functions"], |_| {
            relu_with(vec![attr("alpha", |a| {
                a.r#type = Some(AttributeType::Float as i32);
                a.ref_attr_name = Some("a".into());
            })])
        }),
        check("unknown element type in Cast", &["node \"cast\" (Cast)", "attribute \"to\""], |_| {
            let mut n = node("Cast", "cast", &["x"], &["y"]);
            n.attribute.push(crate::models::int_attr("to", 99));
            mutated(|m| graph(m).node = vec![n])
        }),
    ]
}

/// `x → If(then_branch: g) → y` around a branch graph.
fn if_node(name: &str, cond: &str, out: &str, branch: GraphProto) -> NodeProto {
    let mut n = node("If", name, &[cond], &[out]);
    n.attribute.push(attr("then_branch", |a| {
        a.r#type = Some(AttributeType::Graph as i32);
        a.g = Some(branch);
    }));
    n
}

fn branch(name: &str, nodes: Vec<NodeProto>, inputs: Vec<ValueInfoProto>, out: &str) -> GraphProto {
    GraphProto {
        name: Some(name.into()),
        node: nodes,
        input: inputs,
        output: vec![ValueInfoProto { name: Some(out.into()), ..Default::default() }],
        ..Default::default()
    }
}

/// The main graph's `y` from an If whose branch is `b`.
fn with_branch(b: GraphProto) -> Vec<u8> {
    mutated(|m| graph(m).node = vec![if_node("if", "x", "y", b)])
}

/// Ifs nested `depth` deep, the innermost branch returning `x`.
fn nested_ifs(depth: usize) -> ModelProto {
    let mut inner = branch("g0", vec![], vec![], "x");
    for level in 1..depth {
        let out = format!("t{level}");
        inner = branch(&format!("g{level}"), vec![if_node(&format!("if{level}"), "x", &out, inner)], vec![], &out);
    }
    let mut m = valid();
    graph(&mut m).node = vec![if_node("if", "x", "y", inner)];
    m
}

fn subgraphs() -> Vec<Case> {
    vec![
        check(
            "subgraph input shadows an outer value",
            &["graph \"then\"", "value \"x\" (graph input) shadows"],
            |_| with_branch(branch("then", vec![], vec![value("x", Some(&[2]))], "x")),
        ),
        check("subgraph node output shadows an outer value", &["value \"x\" (node \"inner\") shadows"], |_| {
            with_branch(branch("then", vec![node("Relu", "inner", &["x"], &["x"])], vec![], "x"))
        }),
        check(
            "subgraph input undefined",
            &["graph \"then\": node \"tn\" (Neg)", "input \"nope\" is undefined"],
            |_| with_branch(branch("then", vec![node("Neg", "tn", &["nope"], &["t"])], vec![], "t")),
        ),
        check("subgraph output undefined", &["graph \"then\"", "output \"gone\" is not defined"], |_| {
            with_branch(branch("then", vec![], vec![], "gone"))
        }),
        check(
            "subgraphs nested past the default limit",
            &["subgraph nested 17 deep, more than the limit of 16"],
            |_| nested_ifs(17).encode_to_vec(),
        ),
        check("subgraphs nested past --max-subgraph-depth", &["graph \"g1\": subgraph nested 2 deep"], |_| {
            nested_ifs(3).encode_to_vec()
        })
        .with_args(&["--max-subgraph-depth", "1"]),
    ]
}

/// A model-local function `name` in domain `local`: `y = body(x)`.
fn function(name: &str, body: Vec<NodeProto>) -> FunctionProto {
    FunctionProto {
        name: Some(name.into()),
        domain: Some("local".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        node: body,
        opset_import: vec![
            OperatorSetIdProto { domain: Some(String::new()), version: Some(17) },
            OperatorSetIdProto { domain: Some("local".into()), version: Some(1) },
        ],
        ..Default::default()
    }
}

fn call(f: &str, name: &str, x: &str, y: &str) -> NodeProto {
    NodeProto { domain: Some("local".into()), ..node(f, name, &[x], &[y]) }
}

/// The main graph calls `f0`; `functions` are the model's.
fn calling(functions: Vec<FunctionProto>) -> Vec<u8> {
    mutated(|m| {
        m.opset_import.push(OperatorSetIdProto { domain: Some("local".into()), version: Some(1) });
        m.functions = functions;
        graph(m).node = vec![call("f0", "call", "x", "y")];
    })
}

/// `f0 → f1 → … → f(n-1)`, the last one a Relu.
fn chain(n: usize) -> Vec<FunctionProto> {
    (0..n)
        .map(|i| {
            let body = if i + 1 == n {
                node("Relu", "r", &["x"], &["y"])
            } else {
                call(&format!("f{}", i + 1), "c", "x", "y")
            };
            function(&format!("f{i}"), vec![body])
        })
        .collect()
}

/// `f(k)` calls `f(k+1)` twice, so inlining `f0` makes 2^n nodes.
fn doubling(n: usize) -> Vec<FunctionProto> {
    (0..n)
        .map(|i| {
            let body = if i + 1 == n {
                vec![node("Relu", "r", &["x"], &["y"])]
            } else {
                let next = format!("f{}", i + 1);
                vec![call(&next, "c1", "x", "t"), call(&next, "c2", "t", "y")]
            };
            function(&format!("f{i}"), body)
        })
        .collect()
}

fn functions() -> Vec<Case> {
    vec![
        check("function calling itself", &["function \"local::f0\" calls itself (f0 -> f0)"], |_| {
            calling(vec![function("f0", vec![call("f0", "again", "x", "y")])])
        }),
        check("functions calling each other", &["function recursion", "(f0 -> f1 -> f0)"], |_| {
            calling(vec![
                function("f0", vec![call("f1", "c", "x", "y")]),
                function("f1", vec![call("f0", "c", "x", "y")]),
            ])
        }),
        check("function defined twice", &["function \"local::f0\" is defined more than once"], |_| {
            let f = || function("f0", vec![node("Relu", "r", &["x"], &["y"])]);
            calling(vec![f(), f()])
        }),
        check(
            "function body with an undefined input",
            &["function \"local::f0\"", "input \"nope\" is undefined"],
            |_| calling(vec![function("f0", vec![node("Relu", "r", &["nope"], &["y"])])]),
        ),
        check("function output not computed", &["function \"local::f0\"", "output \"y\" is not defined"], |_| {
            calling(vec![function("f0", vec![node("Relu", "r", &["x"], &["z"])])])
        }),
        check(
            "functions nested past the default depth",
            &["nest deeper than 32 (raise the limit with --max-function-depth)"],
            |_| calling(chain(40)),
        ),
        check("functions nested past --max-function-depth", &["nest deeper than 3"], |_| calling(chain(5)))
            .with_args(&["--max-function-depth", "3"]),
        check(
            "functions inlined past --max-nodes",
            &["more than 1000 nodes once functions are inlined (raise the limit with --max-nodes)"],
            |_| calling(doubling(30)),
        )
        .with_args(&["--max-nodes", "1000"]),
    ]
}
