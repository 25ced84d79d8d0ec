//! ImageDecoder end to end: a PNG encoded here (by the `image` crate) is
//! decoded through the CLI in each pixel format and checked pixel by pixel,
//! also through the real object file linked with `libonnxc_runtime_std.a`
//! (`onnxc test --via object`); bytes that are not an image give the
//! spec's empty image, an image over `--max-tensor-bytes` a status naming
//! the node, and portable mode (no std) a compile-time error naming it.

use crate::common::{onnxc_in, run_model, succeeded, write_model};
use crate::models::{model, node, raw_tensor, typed_value};
use onnx_proto::*;
use prost::Message;

/// A 3x2 RGBA image whose alpha the decoder drops.
const WIDTH: u32 = 3;
const HEIGHT: u32 = 2;
const RGBA: [[u8; 4]; 6] =
    [[255, 0, 0, 255], [0, 255, 0, 128], [0, 0, 255, 0], [10, 20, 30, 255], [200, 100, 50, 255], [7, 7, 7, 255]];

fn png() -> Vec<u8> {
    let pixels: Vec<u8> = RGBA.iter().flatten().copied().collect();
    let image = image::RgbaImage::from_raw(WIDTH, HEIGHT, pixels).expect("a 3x2 image");
    let mut bytes = std::io::Cursor::new(Vec::new());
    image.write_to(&mut bytes, image::ImageFormat::Png).expect("PNG encoding");
    bytes.into_inner()
}

fn decoder_model(pixel_format: &str) -> ModelProto {
    let mut decode = node("ImageDecoder", "decode", &["bytes"], &["image"]);
    decode.attribute.push(AttributeProto {
        name: Some("pixel_format".into()),
        r#type: Some(attribute_proto::AttributeType::String as i32),
        s: Some(pixel_format.as_bytes().to_vec()),
        ..Default::default()
    });
    let mut m = model(
        vec![decode],
        vec![typed_value("bytes", 2, Some(&[-1]))],
        vec![typed_value("image", 2, Some(&[-1, -1, -1]))],
    );
    m.opset_import[0].version = Some(20);
    m
}

fn stream(bytes: &[u8]) -> TensorProto {
    raw_tensor("bytes", 2, &[bytes.len() as i64], bytes.to_vec())
}

/// What ImageDecoder must give for [`RGBA`] in `pixel_format`.
fn expected(pixel_format: &str) -> (Vec<i64>, Vec<u8>) {
    let (channels, pixels): (i64, Vec<u8>) = match pixel_format {
        "RGB" => (3, RGBA.iter().flat_map(|p| [p[0], p[1], p[2]]).collect()),
        "BGR" => (3, RGBA.iter().flat_map(|p| [p[2], p[1], p[0]]).collect()),
        // Pillow's convert("L"), which the ONNX reference uses.
        _ => (
            1,
            RGBA.iter()
                .map(|p| ((19595 * p[0] as u32 + 38470 * p[1] as u32 + 7471 * p[2] as u32 + 0x8000) >> 16) as u8)
                .collect(),
        ),
    };
    (vec![HEIGHT as i64, WIDTH as i64, channels], pixels)
}

#[test]
fn a_png_decodes_in_every_pixel_format() {
    let bytes = png();
    for format in ["RGB", "BGR", "Grayscale"] {
        let out = run_model(&decoder_model(format), &[stream(&bytes)]).unwrap_or_else(|o| panic!("{}", o.stderr));
        let (dims, pixels) = expected(format);
        assert_eq!((out[0].dims.clone(), out[0].raw_data.clone().unwrap_or_default()), (dims, pixels), "{format}");
    }
}

#[test]
fn bytes_that_are_no_image_give_an_empty_image() {
    let bytes = png();
    for bad in [&b"definitely not an image"[..], &bytes[..bytes.len() / 2], &[]] {
        let out = run_model(&decoder_model("BGR"), &[stream(bad)]).unwrap_or_else(|o| panic!("{}", o.stderr));
        assert_eq!(out[0].dims, vec![0, 0, 3], "{bad:?}");
        assert!(out[0].raw_data.clone().unwrap_or_default().is_empty());
    }
}

#[test]
fn an_image_over_the_tensor_limit_is_a_status_naming_the_node() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &decoder_model("RGB"));
    std::fs::write(dir.path().join("bytes.pb"), stream(&png()).encode_to_vec()).expect("write input");
    // 18 bytes of RGB output, but the decoder's RGBA buffer is 24.
    for limit in ["17", "20"] {
        let out = onnxc_in(dir.path(), &["run", "model.onnx", "bytes.pb", "-o", "out", "--max-tensor-bytes", limit]);
        assert!(!succeeded(&out), "limit {limit}: {}", out.stdout);
        assert!(out.stderr.contains("\"decode\"") && out.stderr.contains("out of memory"), "{}", out.stderr);
    }
    let out = onnxc_in(dir.path(), &["run", "model.onnx", "bytes.pb", "-o", "out", "--max-tensor-bytes", "24"]);
    assert!(succeeded(&out), "{}", out.stderr);
}

#[test]
fn the_object_file_decodes_with_the_std_archive() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let case = dir.path().join("test_png_bgr");
    std::fs::create_dir_all(case.join("test_data_set_0")).expect("case folder");
    write_model(&case, "model.onnx", &decoder_model("BGR"));
    let data = case.join("test_data_set_0");
    std::fs::write(data.join("input_0.pb"), stream(&png()).encode_to_vec()).expect("write input");
    let (dims, pixels) = expected("BGR");
    std::fs::write(data.join("output_0.pb"), raw_tensor("image", 2, &dims, pixels).encode_to_vec()).expect("write");
    let out = onnxc_in(dir.path(), &["test", "test_png_bgr", "--via", "object"]);
    assert!(succeeded(&out) && out.stdout.contains("1 passed, 0 failed"), "{}{}", out.stdout, out.stderr);
}

#[test]
fn portable_mode_refuses_the_node_at_compile_time() {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", &decoder_model("RGB"));
    let out = onnxc_in(dir.path(), &["compile", "model.onnx", "-o", "model.o", "--portable", "--dim", "d0=100"]);
    assert!(!succeeded(&out));
    assert!(out.stderr.contains("decode") && out.stderr.contains("needs std"), "{}", out.stderr);
}
