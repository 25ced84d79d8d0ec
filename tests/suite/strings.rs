//! String tensors end to end: string inputs given as `.pb` files to
//! `onnxc run` and read back, and the same model through the C ABI of the
//! real object file (`c/strings.c`): records in, records out, a constant
//! string in read-only data, a data-dependent string output, and the
//! run-time bytes running out as a status.

use crate::common::{onnxc_in, run_c_program, run_model, succeeded, write_model};
use crate::models::{f32s, floats, i64s, int_attr, model, node, typed_value};
use onnx_proto::*;

const STRING: i32 = 8;

fn strings(name: &str, values: &[&str]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![values.len() as i64],
        data_type: Some(STRING),
        string_data: values.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    }
}

fn attr(name: &str, kind: attribute_proto::AttributeType, fill: impl FnOnce(&mut AttributeProto)) -> AttributeProto {
    let mut a = AttributeProto { name: Some(name.into()), r#type: Some(kind as i32), ..Default::default() };
    fill(&mut a);
    a
}

fn string_attr(name: &str, v: &str) -> AttributeProto {
    attr(name, attribute_proto::AttributeType::String, |a| a.s = Some(v.as_bytes().to_vec()))
}

/// x → x + "!" (a constant), whether that matches a pattern, x split at
/// "-" (a data-dependent width) with the counts, and x upper-cased.
fn string_model() -> ModelProto {
    let mut suffix = node("Constant", "suffix", &[], &["suffix"]);
    suffix.attribute.push(attr("value", attribute_proto::AttributeType::Tensor, |a| a.t = Some(strings("", &["!"]))));
    let mut regex = node("RegexFullMatch", "regex", &["loud"], &["ok"]);
    regex.attribute.push(string_attr("pattern", "[a-z]+-[a-z]+!"));
    let mut split = node("StringSplit", "split", &["x"], &["parts", "counts"]);
    split.attribute.push(string_attr("delimiter", "-"));
    let mut upper = node("StringNormalizer", "upper", &["x"], &["upper"]);
    upper.attribute.push(string_attr("case_change_action", "UPPER"));
    let mut m = model(
        vec![suffix, node("StringConcat", "concat", &["x", "suffix"], &["loud"]), regex, split, upper],
        vec![typed_value("x", STRING, Some(&[3]))],
        vec![
            typed_value("loud", STRING, Some(&[3])),
            typed_value("ok", 9, Some(&[3])),
            typed_value("parts", STRING, Some(&[3, -1])),
            typed_value("counts", 7, Some(&[3])),
            typed_value("upper", STRING, Some(&[3])),
        ],
    );
    m.opset_import[0].version = Some(20);
    m
}

fn texts(t: &TensorProto) -> Vec<String> {
    t.string_data.iter().map(|s| String::from_utf8(s.clone()).expect("UTF-8")).collect()
}

#[test]
fn string_inputs_and_outputs_through_the_cli() {
    let out = run_model(&string_model(), &[strings("x", &["ab-cd", "xyz", "ß-q"])])
        .unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    assert_eq!(texts(&out[0]), ["ab-cd!", "xyz!", "ß-q!"]);
    assert_eq!(out[1].raw_data.as_deref(), Some(&[1u8, 0, 0][..]));
    assert_eq!(out[2].dims, [3, 2]);
    assert_eq!(texts(&out[2]), ["ab", "cd", "xyz", "", "ß", "q"]);
    assert_eq!(i64s(&out[3]), [2, 1, 2], "StringSplit's counts");
    assert_eq!(texts(&out[4]), ["AB-CD", "XYZ", "SS-Q"]);
}

#[test]
fn cast_to_string_and_back() {
    let mut to_text = node("Cast", "to_text", &["x"], &["text"]);
    to_text.attribute.push(int_attr("to", STRING as i64));
    let mut to_float = node("Cast", "to_float", &["text"], &["back"]);
    to_float.attribute.push(int_attr("to", 1));
    let m = model(
        vec![to_text, to_float],
        vec![typed_value("x", 1, Some(&[5]))],
        vec![typed_value("text", STRING, Some(&[5])), typed_value("back", 1, Some(&[5]))],
    );
    let x = [1.0, 1e-7, -2.5, f32::INFINITY, 123456790.0];
    let out = run_model(&m, &[floats("x", &[5], &x)]).unwrap_or_else(|e| panic!("onnxc run failed: {}", e.stderr));
    assert_eq!(texts(&out[0]), ["1.0", "1e-07", "-2.5", "inf", "1.2345679e+08"]);
    assert_eq!(f32s(&out[1]), x);

    // Text that is not a number: status 6 naming the node.
    let mut parse = node("Cast", "parse", &["s"], &["y"]);
    parse.attribute.push(int_attr("to", 6));
    let m = model(vec![parse], vec![typed_value("s", STRING, Some(&[2]))], vec![typed_value("y", 6, Some(&[2]))]);
    let failed = run_model(&m, &[strings("s", &["12", "twelve"])]).expect_err("a failed run");
    assert!(failed.stderr.contains("\"parse\"") && failed.stderr.contains("not a number"), "{}", failed.stderr);
}

#[test]
fn string_records_through_the_c_abi() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &string_model());
    let compiled = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "model.o", "--emit", "header,archive"]);
    assert!(succeeded(&compiled), "{}", compiled.stderr);
    let header = std::fs::read_to_string(dir.path().join("model.h")).expect("header");
    assert!(header.contains("typedef onnxc_string model_input0_t;"), "{header}");
    run_c_program(dir.path(), "strings", &["model.a"]);
}

#[test]
fn unsupported_regex_syntax_names_the_node_and_attribute() {
    let mut regex = node("RegexFullMatch", "lookahead", &["x"], &["y"]);
    regex.attribute.push(string_attr("pattern", "a(?=b)"));
    let mut m = model(vec![regex], vec![typed_value("x", STRING, Some(&[1]))], vec![typed_value("y", 9, Some(&[1]))]);
    m.opset_import[0].version = Some(20);
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &m);
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "model.o"]);
    assert!(!succeeded(&out));
    assert!(out.stderr.contains("\"lookahead\"") && out.stderr.contains("\"pattern\""), "{}", out.stderr);
}
