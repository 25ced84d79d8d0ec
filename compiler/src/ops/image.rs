//! ImageDecoder (opset 20): a 1-D u8 tensor of encoded bytes (BMP, JPEG,
//! PNG, PNM, TIFF, WebP; JPEG 2000 has no decoder here) → the u8 image
//! `[H, W, 3]` for `pixel_format` "RGB" (the default) or "BGR", `[H, W, 1]`
//! for "Grayscale".
//!
//! H and W are in the bytes, so they are [`Dim::Dynamic`] and unbounded:
//! the lowering asks `onnxc_image_dims` for them, allocates the output
//! ([`Lower::alloc_output`]) and has `onnxc_image_decode` fill it, which
//! checks that the room matches. Bytes that cannot be decoded give `[0, 0,
//! C]` (the spec's empty matrix); an image larger than `--max-tensor-bytes`
//! (fixed into the parameters at import) stops the model with the
//! out-of-memory status naming the node. The decoders need std
//! (`onnxc-runtime-std`, `runtime-support/std/src/image.rs` says why and
//! how), so only host objects, linked with `libonnxc_runtime_std.a`, and
//! the JIT have them; portable mode refuses the node. An onnxc built
//! without its `image-decoder` feature (a build script's, usually) refuses
//! the node at import: it could neither fold nor test what it compiled.

use super::{InferCx, Inferred, Op, Operator};
use crate::codegen::kernels::{self, Ptr, I64};
use crate::codegen::{InstBuilder, Lower, MemFlagsData};
use crate::import::NodeImport;
use crate::ir::{DType, Dim};
use onnxc_runtime_std::{ImageDecodeParams, PIXEL_BGR, PIXEL_GRAYSCALE, PIXEL_RGB};

#[derive(Clone, Debug)]
pub struct ImageDecoder {
    pub params: ImageDecodeParams,
}

impl ImageDecoder {
    fn channels(&self) -> usize {
        self.params.channels().unwrap_or(3)
    }
}

pub fn import(cx: &mut NodeImport) -> Result<Op, String> {
    if !cfg!(feature = "image-decoder") {
        return Err("needs the image decoders: build onnxc with its `image-decoder` feature".into());
    }
    let pixel_format = match cx.attrs.string_or("pixel_format", "RGB")?.as_str() {
        "RGB" => PIXEL_RGB,
        "BGR" => PIXEL_BGR,
        "Grayscale" => PIXEL_GRAYSCALE,
        other => {
            return Err(format!("attribute pixel_format: {other:?} is not one of \"RGB\", \"BGR\", \"Grayscale\""))
        }
    };
    let max_bytes = i64::try_from(cx.max_tensor_bytes).unwrap_or(i64::MAX);
    Ok(Op::ImageDecoder(ImageDecoder { params: ImageDecodeParams { pixel_format, max_bytes } }))
}

impl Operator for ImageDecoder {
    fn name(&self) -> &'static str {
        "ImageDecoder"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if x.dtype != DType::U8 || x.shape.len() != 1 {
            return Err(format!("input 0 (encoded_stream) must be a 1-D uint8 tensor, got {}{:?}", x.dtype, x.shape));
        }
        let dims = vec![Dim::Dynamic(None), Dim::Dynamic(None), Dim::Known(self.channels())];
        Ok(vec![Inferred::data_dependent(DType::U8, dims)])
    }

    /// The two dims `onnxc_image_dims` reports.
    fn scratch_bytes(&self, _cx: &InferCx) -> usize {
        16
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let params = cx.params(&self.params)?;
        let (data, dims) = (cx.input_ptr(0)?, cx.scratch_ptr()?);
        let len = cx.iconst(shape[0] as i64);
        cx.call_checked(kernels::onnxc_image_dims, (params, Ptr(data), I64(len), Ptr(dims)))?;
        let ptr = cx.ptr_type();
        let height = cx.ins().load(ptr, MemFlagsData::trusted(), dims, 0);
        let width = cx.ins().load(ptr, MemFlagsData::trusted(), dims, 8);
        let channels = cx.iconst(self.channels() as i64);
        // alloc_output leaves the model when this product overflows.
        let image = cx.alloc_output(0, &[height, width, channels])?;
        let pixels = cx.ins().imul(height, width);
        let bytes = cx.ins().imul(pixels, channels);
        cx.call_checked(kernels::onnxc_image_decode, (params, Ptr(data), I64(len), Ptr(image), I64(bytes)))
    }
}
