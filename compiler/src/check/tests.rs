use super::*;
use onnx_proto::tensor_proto::DataType;
use onnx_proto::tensor_shape_proto::{dimension, Dimension};
use onnx_proto::{TensorProto, TensorShapeProto, TypeProto};

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn tensor_type(elem: DataType, dims: Option<&[&str]>) -> TypeProto {
    TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem as i32),
            shape: dims.map(|d| TensorShapeProto {
                dim: d
                    .iter()
                    .map(|s| Dimension {
                        value: Some(match s.parse::<i64>() {
                            Ok(v) => dimension::Value::DimValue(v),
                            Err(_) => dimension::Value::DimParam(s.to_string()),
                        }),
                        ..Default::default()
                    })
                    .collect(),
            }),
        })),
        ..Default::default()
    }
}

fn value(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(tensor_type(DataType::Float, Some(&["N", "3"]))),
        ..Default::default()
    }
}

fn untyped(name: &str) -> ValueInfoProto {
    ValueInfoProto { name: Some(name.into()), ..Default::default() }
}

fn init(name: &str) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(DataType::Float as i32),
        dims: vec![1],
        float_data: vec![1.0],
        ..Default::default()
    }
}

fn graph(
    name: &str,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
) -> GraphProto {
    GraphProto {
        name: Some(name.into()),
        node: nodes,
        input: inputs,
        output: outputs,
        initializer: inits,
        ..Default::default()
    }
}

fn opset(domain: &str, version: i64) -> OperatorSetIdProto {
    OperatorSetIdProto { domain: Some(domain.into()), version: Some(version) }
}

fn model(nodes: Vec<NodeProto>, inputs: &[&str], outputs: &[&str], inits: Vec<TensorProto>) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![opset("", 17)],
        graph: Some(graph(
            "main",
            nodes,
            inputs.iter().map(|n| value(n)).collect(),
            outputs.iter().map(|n| value(n)).collect(),
            inits,
        )),
        ..Default::default()
    }
}

fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(g),
        ..Default::default()
    }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(i),
        ..Default::default()
    }
}

fn with_attrs(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

fn function(name: &str, domain: &str, inputs: &[&str], outputs: &[&str], nodes: Vec<NodeProto>) -> FunctionProto {
    FunctionProto {
        name: Some(name.into()),
        domain: Some(domain.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        node: nodes,
        ..Default::default()
    }
}

/// The error lines of a model that must fail.
fn errors(m: &ModelProto) -> Vec<String> {
    match check_model(m, &Limits::default()) {
        Ok(()) => panic!("expected check errors"),
        Err(e) => {
            let text = e.to_string();
            let lines: Vec<String> = text.lines().map(str::to_string).collect();
            assert_eq!(lines.len(), e.0.len(), "one line per error: {text}");
            lines
        }
    }
}

/// Exactly one error, containing every part.
fn one_error(m: &ModelProto, parts: &[&str]) {
    let errs = errors(m);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    for p in parts {
        assert!(errs[0].contains(p), "{:?} lacks {p:?}", errs[0]);
    }
}

fn relu_model() -> ModelProto {
    model(vec![node("Relu", "r", &["x"], &["y"])], &["x"], &["y"], vec![])
}

// ---- positive ----

#[test]
fn valid_model_passes() {
    let m = model(
        vec![
            node("Add", "a", &["x", "w"], &["t"]),
            node("Relu", "r", &["t"], &["y"]),
            node("Dropout", "d", &["y"], &["z", ""]),
            node("Clip", "c", &["z", "", "w"], &["out"]),
        ],
        &["x", "w"],
        &["out"],
        vec![init("w")], // defaulted input
    );
    check_model(&m, &Limits::default()).unwrap();
}

#[test]
fn nested_subgraph_using_outer_value_passes() {
    let inner = graph("inner", vec![node("Add", "ia", &["x", "t"], &["iy"])], vec![], vec![untyped("iy")], vec![]);
    let then = graph(
        "then",
        vec![
            node("Neg", "tn", &["x"], &["t"]),
            with_attrs(node("If", "if2", &["c"], &["ty"]), vec![graph_attr("then_branch", inner)]),
        ],
        vec![],
        vec![untyped("ty")],
        vec![],
    );
    let m = model(
        vec![
            node("Relu", "r", &["x"], &["c"]),
            with_attrs(node("If", "if1", &["c"], &["y"]), vec![graph_attr("then_branch", then)]),
        ],
        &["x"],
        &["y"],
        vec![],
    );
    check_model(&m, &Limits::default()).unwrap();
}

#[test]
fn local_function_call_and_ai_onnx_domain_pass() {
    let mut m = model(
        vec![
            {
                let mut n = node("MyFn", "f", &["x"], &["t"]);
                n.domain = Some("com.me".into());
                n
            },
            {
                let mut n = node("Relu", "r", &["t"], &["y"]);
                n.domain = Some("ai.onnx".into());
                n
            },
        ],
        &["x"],
        &["y"],
        vec![],
    );
    m.functions.push(function("MyFn", "com.me", &["a"], &["b"], vec![node("Relu", "fr", &["a"], &["b"])]));
    check_model(&m, &Limits::default()).unwrap();
}

#[test]
fn symbolic_and_missing_dims_pass() {
    let mut m = relu_model();
    let g = m.graph.as_mut().unwrap();
    g.input[0].r#type = Some(tensor_type(DataType::Float, Some(&["batch", "3"])));
    if let Some(type_proto::Value::TensorType(t)) = g.input[0].r#type.as_mut().and_then(|t| t.value.as_mut()) {
        t.shape.as_mut().unwrap().dim.push(Dimension::default());
    }
    check_model(&m, &Limits::default()).unwrap();
}

// ---- model-level ----

#[test]
fn ir_version_missing_and_out_of_range() {
    let mut m = relu_model();
    m.ir_version = None;
    one_error(&m, &["model: ir_version is not set"]);
    m.ir_version = Some(2);
    one_error(&m, &["model: ir_version 2 is not supported"]);
    m.ir_version = Some(15);
    one_error(&m, &["model: ir_version 15"]);
    m.ir_version = Some(3);
    check_model(&m, &Limits::default()).unwrap();
    m.ir_version = Some(14);
    check_model(&m, &Limits::default()).unwrap();
}

#[test]
fn opset_import_empty() {
    let mut m = relu_model();
    m.opset_import.clear();
    let errs = errors(&m);
    assert!(errs.contains(&"model: opset_import is empty".to_string()), "{errs:#?}");
    // The Relu node's domain then has no import either.
    assert!(errs.iter().any(|e| e.contains("no entry for domain \"\" used by node \"r\" (Relu)")));
}

#[test]
fn opset_import_duplicate_domain() {
    let mut m = relu_model();
    m.opset_import.push(opset("ai.onnx", 18));
    one_error(&m, &["model: opset_import lists domain \"\" more than once"]);
    let mut m = relu_model();
    m.opset_import.push(opset("com.foo", 1));
    m.opset_import.push(opset("com.foo", 2));
    one_error(&m, &["lists domain \"com.foo\" more than once"]);
}

#[test]
fn opset_import_without_version() {
    let mut m = relu_model();
    m.opset_import[0].version = None;
    one_error(&m, &["model: opset_import entry for domain \"\" has no version"]);
}

#[test]
fn node_domain_without_opset() {
    let mut n = node("Foo", "n1", &["x"], &["y"]);
    n.domain = Some("com.foo".into());
    let mut n2 = node("Bar", "n2", &["y"], &["z"]);
    n2.domain = Some("com.foo".into());
    let m = model(vec![n, n2], &["x"], &["z"], vec![]);
    let errs = errors(&m);
    assert_eq!(
        errs,
        vec!["model: opset_import has no entry for domain \"com.foo\" used by node \"n1\" (Foo) (and 1 more node)"]
    );
}

#[test]
fn function_opsets_own_or_model() {
    // Function with its own opset_import lacking the default domain.
    let mut f = function("F", "com.me", &["a"], &["b"], vec![node("Relu", "fr", &["a"], &["b"])]);
    f.opset_import.push(opset("com.other", 1));
    let mut m = relu_model();
    m.functions.push(f.clone());
    one_error(&m, &["function \"com.me::F\": opset_import has no entry for domain \"\" used by node \"fr\" (Relu)"]);
    // Without its own list it falls back to the model's.
    f.opset_import.clear();
    let mut m = relu_model();
    m.functions.push(f);
    check_model(&m, &Limits::default()).unwrap();
}

#[test]
fn no_graph() {
    let mut m = relu_model();
    m.graph = None;
    one_error(&m, &["model: has no graph"]);
}

// ---- graph: definitions ----

#[test]
fn value_defined_twice_by_nodes() {
    let m = model(vec![node("Relu", "a", &["x"], &["y"]), node("Neg", "b", &["x"], &["y"])], &["x"], &["y"], vec![]);
    one_error(&m, &["graph \"main\": value \"y\" is defined twice (node \"a\", node \"b\")"]);
}

#[test]
fn value_defined_twice_inputs_and_initializers() {
    let m = model(vec![node("Relu", "a", &["x"], &["y"])], &["x", "x"], &["y"], vec![]);
    one_error(&m, &["graph \"main\": value \"x\" is defined twice (graph input, graph input)"]);
    let m = model(vec![node("Relu", "a", &["x"], &["y"])], &["x"], &["y"], vec![init("w"), init("w")]);
    one_error(&m, &["value \"w\" is defined twice (initializer, initializer)"]);
    // A node output may not reuse an input's or initializer's name.
    let m = model(vec![node("Relu", "a", &["x"], &["w"])], &["x"], &["w"], vec![init("w")]);
    one_error(&m, &["graph \"main\": value \"w\" is defined twice (initializer, node \"a\")"]);
}

#[test]
fn empty_value_names() {
    let m = model(vec![node("Relu", "a", &["x"], &["y"])], &["x", ""], &["y"], vec![]);
    let errs = errors(&m);
    assert!(errs.iter().any(|e| e == "graph \"main\": graph input #1 has an empty name"), "{errs:#?}");
    let m = model(vec![node("Relu", "a", &["x"], &["y"])], &["x"], &["y"], vec![init("")]);
    one_error(&m, &["graph \"main\": initializer #0 has an empty name"]);
}

#[test]
fn undefined_input() {
    let m = model(vec![node("Conv", "conv_3", &["x", "x9"], &["y"])], &["x"], &["y"], vec![]);
    let errs = errors(&m);
    assert_eq!(errs, vec!["graph \"main\": node \"conv_3\" (Conv): input \"x9\" is undefined"]);
}

#[test]
fn out_of_order_input() {
    let m = model(vec![node("Relu", "a", &["t"], &["y"]), node("Neg", "b", &["x"], &["t"])], &["x"], &["y"], vec![]);
    one_error(
        &m,
        &["graph \"main\": node \"a\" (Relu): input \"t\" is out of order: it is defined later by node \"b\""],
    );
}

#[test]
fn graph_output_undefined() {
    let m = model(vec![node("Relu", "a", &["x"], &["y"])], &["x"], &["y", "z"], vec![]);
    one_error(&m, &["graph \"main\": output \"z\" is not defined"]);
}

#[test]
fn empty_node_outputs_and_inputs_allowed() {
    let m = model(vec![node("Split", "s", &["x", ""], &["", "y"])], &["x"], &["y"], vec![]);
    check_model(&m, &Limits::default()).unwrap();
}

// ---- subgraphs ----

fn if_model(branch: GraphProto, main_nodes_after: Vec<NodeProto>) -> ModelProto {
    let mut nodes = vec![
        node("Relu", "r", &["x"], &["c"]),
        with_attrs(node("If", "if1", &["c"], &["y"]), vec![graph_attr("then_branch", branch)]),
    ];
    nodes.extend(main_nodes_after);
    model(nodes, &["x"], &["y"], vec![])
}

#[test]
fn subgraph_undefined_input() {
    let b = graph("then", vec![node("Neg", "tn", &["nope"], &["t"])], vec![], vec![untyped("t")], vec![]);
    one_error(
        &if_model(b, vec![]),
        &["graph \"main\": node \"if1\" (If): attribute \"then_branch\": graph \"then\": node \"tn\" (Neg): input \"nope\" is undefined"],
    );
}

#[test]
fn subgraph_cannot_see_later_outer_values() {
    let b = graph("then", vec![node("Neg", "tn", &["late"], &["t"])], vec![], vec![untyped("t")], vec![]);
    let m = if_model(b, vec![node("Relu", "later", &["x"], &["late"])]);
    one_error(
        &m,
        &["graph \"then\": node \"tn\" (Neg): input \"late\" is out of order: it is defined later by node \"later\""],
    );
}

#[test]
fn subgraph_shadowing_rejected() {
    let b = graph("then", vec![node("Neg", "tn", &["x"], &["c"])], vec![], vec![untyped("c")], vec![]);
    one_error(
        &if_model(b, vec![]),
        &["attribute \"then_branch\": graph \"then\": value \"c\" (node \"tn\") shadows the outer-scope value defined by node \"r\" in graph \"main\""],
    );
    // Subgraph inputs may not shadow either.
    let b = graph("body", vec![], vec![untyped("x")], vec![untyped("x")], vec![]);
    one_error(
        &if_model(b, vec![]),
        &["graph \"body\": value \"x\" (graph input) shadows the outer-scope value defined by graph input in graph \"main\""],
    );
}

#[test]
fn subgraph_output_may_be_outer_value_and_io_untyped() {
    let b = graph("then", vec![], vec![], vec![untyped("x")], vec![]);
    check_model(&if_model(b, vec![]), &Limits::default()).unwrap();
}

#[test]
fn graphs_attribute_is_checked() {
    let b = graph("g0", vec![node("Neg", "tn", &["nope"], &["t"])], vec![], vec![untyped("t")], vec![]);
    let n = with_attrs(
        node("Foo", "f", &["x"], &["y"]),
        vec![AttributeProto {
            name: Some("branches".into()),
            r#type: Some(AttributeType::Graphs as i32),
            graphs: vec![b],
            ..Default::default()
        }],
    );
    let m = model(vec![n], &["x"], &["y"], vec![]);
    one_error(&m, &["attribute \"branches\": graph \"g0\": node \"tn\" (Neg): input \"nope\" is undefined"]);
}

// ---- attributes ----

#[test]
fn duplicate_attribute_names() {
    let n = with_attrs(node("Conv", "c", &["x"], &["y"]), vec![int_attr("group", 1), int_attr("group", 2)]);
    one_error(
        &model(vec![n], &["x"], &["y"], vec![]),
        &["graph \"main\": node \"c\" (Conv): attribute \"group\" appears more than once"],
    );
}

#[test]
fn attribute_type_mismatch() {
    let mut a = int_attr("axis", 1);
    a.f = Some(1.0);
    let n = with_attrs(node("Foo", "n", &["x"], &["y"]), vec![a]);
    one_error(
        &model(vec![n], &["x"], &["y"], vec![]),
        &["node \"n\" (Foo): attribute \"axis\": has type INT but carries f"],
    );
    let a = AttributeProto {
        name: Some("k".into()),
        r#type: Some(AttributeType::Ints as i32),
        floats: vec![1.0],
        ..Default::default()
    };
    let n = with_attrs(node("Foo", "n", &["x"], &["y"]), vec![a]);
    one_error(&model(vec![n], &["x"], &["y"], vec![]), &["attribute \"k\": has type INTS but carries floats"]);
}

#[test]
fn attribute_missing_value_and_graph_without_g() {
    let a = AttributeProto {
        name: Some("then_branch".into()),
        r#type: Some(AttributeType::Graph as i32),
        ..Default::default()
    };
    let n = with_attrs(node("If", "i", &["x"], &["y"]), vec![a]);
    one_error(
        &model(vec![n], &["x"], &["y"], vec![]),
        &["node \"i\" (If): attribute \"then_branch\": has type GRAPH but no g value"],
    );
    // Empty lists are fine.
    let a =
        AttributeProto { name: Some("pads".into()), r#type: Some(AttributeType::Ints as i32), ..Default::default() };
    let n = with_attrs(node("Foo", "n", &["x"], &["y"]), vec![a]);
    check_model(&model(vec![n], &["x"], &["y"], vec![]), &Limits::default()).unwrap();
}

#[test]
fn attribute_unknown_type_and_untyped_multiple_values() {
    let a = AttributeProto { name: Some("k".into()), r#type: Some(42), i: Some(1), ..Default::default() };
    let n = with_attrs(node("Foo", "n", &["x"], &["y"]), vec![a]);
    one_error(&model(vec![n], &["x"], &["y"], vec![]), &["attribute \"k\": unknown attribute type code 42"]);
    let a = AttributeProto { name: Some("k".into()), i: Some(1), s: Some(b"x".to_vec()), ..Default::default() };
    let n = with_attrs(node("Foo", "n", &["x"], &["y"]), vec![a]);
    one_error(&model(vec![n], &["x"], &["y"], vec![]), &["attribute \"k\": carries more than one value (i, s)"]);
}

#[test]
fn ref_attr_name_only_in_functions() {
    let a = AttributeProto {
        name: Some("alpha".into()),
        ref_attr_name: Some("a".into()),
        r#type: Some(AttributeType::Float as i32),
        ..Default::default()
    };
    let n = with_attrs(node("Elu", "e", &["x"], &["y"]), vec![a.clone()]);
    one_error(
        &model(vec![n], &["x"], &["y"], vec![]),
        &["graph \"main\": node \"e\" (Elu): attribute \"alpha\": ref_attr_name \"a\" is only allowed inside functions"],
    );
    let mut m = relu_model();
    let mut f = function("F", "com.me", &["i"], &["o"], vec![with_attrs(node("Elu", "fe", &["i"], &["o"]), vec![a])]);
    f.attribute.push("a".into());
    m.functions.push(f);
    check_model(&m, &Limits::default()).unwrap();
}

// ---- main-graph I/O types ----

#[test]
fn main_io_needs_type() {
    let mut m = relu_model();
    let g = m.graph.as_mut().unwrap();
    g.input[0] = untyped("x");
    g.output[0] = untyped("y");
    let errs = errors(&m);
    assert_eq!(errs, vec!["graph \"main\": input \"x\" has no type", "graph \"main\": output \"y\" has no type"]);
}

#[test]
fn main_io_needs_elem_type_and_input_shape() {
    let mut m = relu_model();
    let g = m.graph.as_mut().unwrap();
    g.input[0].r#type = Some(tensor_type(DataType::Undefined, Some(&["2"])));
    g.output[0].r#type = Some(tensor_type(DataType::Undefined, None));
    let errs = errors(&m);
    assert_eq!(
        errs,
        vec!["graph \"main\": input \"x\" has no element type", "graph \"main\": output \"y\" has no element type"]
    );
    // An output's shape is inference's to give; an input's is not.
    let mut m = relu_model();
    m.graph.as_mut().unwrap().output[0].r#type = Some(tensor_type(DataType::Float, None));
    check_model(&m, &Limits::default()).unwrap();
    m.graph.as_mut().unwrap().input[0].r#type = Some(tensor_type(DataType::Float, None));
    one_error(&m, &["graph \"main\": input \"x\" has no shape (rank unknown)"]);
    let mut m = relu_model();
    if let Some(type_proto::Value::TensorType(t)) =
        m.graph.as_mut().unwrap().input[0].r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = Some(77);
    }
    one_error(&m, &["input \"x\" has unknown element type code 77"]);
}

#[test]
fn initializer_backed_input_needs_no_type() {
    let mut m = model(vec![node("Add", "a", &["x", "w"], &["y"])], &["x", "w"], &["y"], vec![init("w")]);
    m.graph.as_mut().unwrap().input[1] = untyped("w");
    check_model(&m, &Limits::default()).unwrap();
}

// ---- functions ----

#[test]
fn duplicate_functions() {
    let mut m = relu_model();
    let f = function("F", "com.me", &["a"], &["b"], vec![node("Relu", "r", &["a"], &["b"])]);
    m.functions.push(f.clone());
    m.functions.push(f.clone());
    one_error(&m, &["model: function \"com.me::F\" is defined more than once"]);
    // A different overload is a different function.
    let mut g = f.clone();
    g.overload = Some("v2".into());
    let mut m = relu_model();
    m.functions.push(f);
    m.functions.push(g);
    check_model(&m, &Limits::default()).unwrap();
}

#[test]
fn function_body_checked_like_a_graph() {
    let mut m = relu_model();
    m.functions.push(function("F", "com.me", &["a", "a"], &["b", "c"], vec![node("Relu", "fr", &["a", "zz"], &["b"])]));
    let errs = errors(&m);
    assert_eq!(
        errs,
        vec![
            "function \"com.me::F\": value \"a\" is defined twice (function input, function input)",
            "function \"com.me::F\": node \"fr\" (Relu): input \"zz\" is undefined",
            "function \"com.me::F\": output \"c\" is not defined",
        ]
    );
}

#[test]
fn function_recursion_rejected() {
    let mut call_g = node("G", "cg", &["a"], &["b"]);
    call_g.domain = Some("com.me".into());
    let mut call_f = node("F", "cf", &["a"], &["b"]);
    call_f.domain = Some("com.me".into());
    let mut m = relu_model();
    m.opset_import.push(opset("com.me", 1));
    m.functions.push(function("F", "com.me", &["a"], &["b"], vec![call_g]));
    m.functions.push(function("G", "com.me", &["a"], &["b"], vec![call_f.clone()]));
    one_error(&m, &["model: function recursion: function \"com.me::F\" calls itself (F -> G -> F)"]);

    // Direct self-call, hidden in a subgraph.
    let body = graph("b", vec![call_f], vec![], vec![untyped("b")], vec![]);
    let mut m = relu_model();
    m.functions.push(function(
        "F",
        "com.me",
        &["a"],
        &["b"],
        vec![with_attrs(node("If", "i", &["a"], &["b"]), vec![graph_attr("then_branch", body)])],
    ));
    let errs = errors(&m);
    assert!(errs.iter().any(|e| e.contains("function \"com.me::F\" calls itself (F -> F)")), "{errs:#?}");
}

// ---- collection ----

#[test]
fn reports_all_problems_together() {
    let mut m = model(
        vec![
            node("Relu", "a", &["x"], &["y"]),
            node("Neg", "b", &["undef"], &["y"]),
            with_attrs(node("Conv", "c", &["late"], &["z"]), vec![int_attr("g", 1), int_attr("g", 1)]),
            node("Relu", "d", &["x"], &["late"]),
        ],
        &["x"],
        &["y", "missing"],
        vec![],
    );
    m.ir_version = Some(1);
    let errs = errors(&m);
    let expect = [
        "model: ir_version 1 is not supported",
        "node \"b\" (Neg): input \"undef\" is undefined",
        "value \"y\" is defined twice (node \"a\", node \"b\")",
        "node \"c\" (Conv): input \"late\" is out of order",
        "attribute \"g\" appears more than once",
        "output \"missing\" is not defined",
    ];
    assert_eq!(errs.len(), expect.len(), "{errs:#?}");
    for (e, want) in errs.iter().zip(expect) {
        assert!(e.contains(want), "{e:?} lacks {want:?}");
    }
}

#[test]
fn empty_model_does_not_panic() {
    let errs = errors(&ModelProto::default());
    assert_eq!(errs, vec!["model: ir_version is not set", "model: opset_import is empty", "model: has no graph"]);
}

#[test]
fn subgraph_node_domain_without_opset_names_the_path() {
    let mut foo = node("Foo", "inner", &["x"], &["t"]);
    foo.domain = Some("com.foo".into());
    let b = graph("then", vec![foo], vec![], vec![untyped("t")], vec![]);
    one_error(
        &if_model(b, vec![]),
        &["model: opset_import has no entry for domain \"com.foo\" used by node \"if1\" (If): attribute \"then_branch\": graph \"then\": node \"inner\" (Foo)"],
    );
}

#[test]
fn function_attribute_defaults_are_checked() {
    let mut m = relu_model();
    let mut f = function("F", "com.me", &["a"], &["b"], vec![node("Relu", "r", &["a"], &["b"])]);
    let mut bad = int_attr("alpha", 1);
    bad.s = Some(b"x".to_vec());
    f.attribute_proto.push(bad);
    m.functions.push(f);
    one_error(&m, &["function \"com.me::F\": default: attribute \"alpha\": has type INT but carries s"]);
}

#[test]
fn subgraphs_nested_past_the_limit_are_reported_once() {
    // then_branch graphs nested three deep inside the main graph's If.
    let mut inner = graph("g3", vec![], vec![], vec![untyped("x")], vec![]);
    for name in ["g2", "g1"] {
        let n = with_attrs(node("If", &format!("if_{name}"), &["x"], &["t"]), vec![graph_attr("then_branch", inner)]);
        inner = graph(name, vec![n], vec![], vec![untyped("t")], vec![]);
    }
    let m = if_model(inner, vec![]);
    assert_eq!(check_model(&m, &Limits::default()), Ok(()));
    let limits = Limits { max_subgraph_depth: 2, ..Limits::default() };
    let e = check_model(&m, &limits).unwrap_err().to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("graph \"g3\": subgraph nested 3 deep, more than the limit of 2"), "{e}");
}
