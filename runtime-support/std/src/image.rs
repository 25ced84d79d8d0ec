//! ImageDecoder (opset 20): encoded bytes → an `[H, W, C]` u8 image, with
//! the pure-Rust decoders of the `image` crate (BMP, JPEG, PNG, PNM, TIFF,
//! WebP; it has no JPEG 2000 decoder).
//!
//! The image's size is in its bytes, so the output is a data-dependent
//! value and the generated code must allocate it between two calls:
//! [`onnxc_image_dims`] decodes and reports the dims, the code allocates
//! exactly that, and [`onnxc_image_decode`] decodes again into it, checking
//! the room it was given. Decoding twice keeps the kernels stateless: no
//! decoded image is kept across the allocation, which may fail and leave
//! the model.
//!
//! As the ONNX spec says, bytes that cannot be decoded for any reason (not
//! an image, a format without a decoder here, corrupt data) give an empty
//! image, `[0, 0, C]`, not an error. An image whose output (or the
//! decoder's own buffer) would exceed `max_bytes`, the compiler's
//! `--max-tensor-bytes`, is refused with `STATUS_OUT_OF_MEMORY` before its
//! pixels are decoded; the same bound caps the decoder's allocations.
//!
//! Pixel formats: RGB drops alpha and widens gray; BGR is RGB reversed;
//! Grayscale is Pillow's `convert("L")` (the ONNX reference decodes with
//! Pillow): ITU-R 601-2 weights in 16-bit fixed point, rounded half up.
//! A gray source stays exact (the weights sum to 65536).
//!
//! Panics: the decoders report bad data as errors; a panic that escaped
//! one would count as "cannot decode" where panics unwind, but onnxc's
//! builds abort on panic, so that guard only serves rlib users that unwind.

use crate::image_params::{ImageDecodeParams, PIXEL_BGR, PIXEL_GRAYSCALE};
use image::{DynamicImage, ImageDecoder, ImageError, ImageReader, Limits, RgbImage};
use onnxc_runtime::abi::{STATUS_INVALID_PARAMS, STATUS_OK, STATUS_OUT_OF_MEMORY};
use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Decodes `bytes` into RGB; `Ok(None)` when they cannot be decoded,
/// `Err(status)` for bad params or an image over `max_bytes`.
fn decode(p: &ImageDecodeParams, bytes: &[u8]) -> Result<Option<RgbImage>, i32> {
    let channels = p.channels().ok_or(STATUS_INVALID_PARAMS)? as u64;
    let max_bytes = u64::try_from(p.max_bytes).map_err(|_| STATUS_INVALID_PARAMS)?;
    let refused = |e: ImageError| match e {
        ImageError::Limits(_) => Err(STATUS_OUT_OF_MEMORY),
        _ => Ok(None),
    };
    let Ok(mut reader) = ImageReader::new(Cursor::new(bytes)).with_guessed_format() else {
        return Ok(None);
    };
    let mut limits = Limits::no_limits();
    limits.max_alloc = Some(max_bytes);
    reader.limits(limits);
    let decoder = match reader.into_decoder() {
        Ok(d) => d,
        Err(e) => return refused(e),
    };
    let (width, height) = decoder.dimensions();
    let output = u64::from(width).checked_mul(u64::from(height)).and_then(|n| n.checked_mul(channels));
    if output.is_none_or(|n| n > max_bytes) || decoder.total_bytes() > max_bytes {
        return Err(STATUS_OUT_OF_MEMORY);
    }
    match DynamicImage::from_decoder(decoder) {
        Ok(image) => Ok(Some(image.into_rgb8())),
        Err(e) => refused(e),
    }
}

/// [`decode`], with a panic inside a decoder taken as "cannot decode".
fn decode_guarded(p: &ImageDecodeParams, bytes: &[u8]) -> Result<Option<RgbImage>, i32> {
    catch_unwind(AssertUnwindSafe(|| decode(p, bytes))).unwrap_or(Ok(None))
}

/// Pillow's RGB → L: `(19595 R + 38470 G + 7471 B + 0x8000) >> 16`.
fn luma(rgb: &[u8]) -> u8 {
    let weighted = 19595 * u32::from(rgb[0]) + 38470 * u32::from(rgb[1]) + 7471 * u32::from(rgb[2]);
    ((weighted + 0x8000) >> 16) as u8
}

/// Writes `image` in pixel format `format` to `out` (exactly its size).
fn write_pixels(format: i64, image: &RgbImage, out: &mut [u8]) {
    let rgb = image.as_raw().chunks_exact(3);
    match format {
        PIXEL_BGR => {
            for (px, dst) in rgb.zip(out.chunks_exact_mut(3)) {
                dst.copy_from_slice(&[px[2], px[1], px[0]]);
            }
        }
        PIXEL_GRAYSCALE => {
            for (px, dst) in rgb.zip(out.iter_mut()) {
                *dst = luma(px);
            }
        }
        _ => out.copy_from_slice(image.as_raw()),
    }
}

/// The encoded stream as a slice (`None` for a negative length).
///
/// # Safety
/// `data` holds `len` bytes (it is not read when `len` is 0).
unsafe fn stream<'a>(data: *const u8, len: i64) -> Option<&'a [u8]> {
    match usize::try_from(len).ok()? {
        0 => Some(&[]),
        n => Some(core::slice::from_raw_parts(data, n)),
    }
}

/// Decodes the `len` bytes at `data` and writes the image's `[height,
/// width]` to `dims` (`[0, 0]` when they cannot be decoded).
///
/// # Safety
/// `p` is null or valid, `data` holds `len` bytes, `dims` has room for two.
#[no_mangle]
pub unsafe extern "C" fn onnxc_image_dims(
    p: *const ImageDecodeParams,
    data: *const u8,
    len: i64,
    dims: *mut i64,
) -> i32 {
    let (Some(p), Some(bytes)) = (p.as_ref(), stream(data, len)) else {
        return STATUS_INVALID_PARAMS;
    };
    match decode_guarded(p, bytes) {
        Ok(image) => {
            let (height, width) = image.map_or((0, 0), |i| (i.height(), i.width()));
            *dims = i64::from(height);
            *dims.add(1) = i64::from(width);
            STATUS_OK
        }
        Err(status) => status,
    }
}

/// Decodes the `len` bytes at `data` into `out`, which holds `out_bytes`
/// bytes: exactly the image [`onnxc_image_dims`] reported, or the status is
/// `STATUS_INVALID_PARAMS` and nothing is written.
///
/// # Safety
/// `p` is null or valid, `data` holds `len` bytes, `out` holds `out_bytes`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_image_decode(
    p: *const ImageDecodeParams,
    data: *const u8,
    len: i64,
    out: *mut u8,
    out_bytes: i64,
) -> i32 {
    let (Some(p), Some(bytes)) = (p.as_ref(), stream(data, len)) else {
        return STATUS_INVALID_PARAMS;
    };
    let image = match decode_guarded(p, bytes) {
        Ok(image) => image,
        Err(status) => return status,
    };
    let channels = p.channels().unwrap_or(0);
    let needed = image.as_ref().map_or(0, |i| i.as_raw().len() / 3 * channels);
    if usize::try_from(out_bytes).ok() != Some(needed) {
        return STATUS_INVALID_PARAMS;
    }
    if let Some(image) = image.filter(|_| needed > 0) {
        write_pixels(p.pixel_format, &image, core::slice::from_raw_parts_mut(out, needed));
    }
    STATUS_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image_params::PIXEL_RGB;

    fn params(pixel_format: i64) -> ImageDecodeParams {
        ImageDecodeParams { pixel_format, max_bytes: 1 << 20 }
    }

    /// A 2x1 binary PPM: a red pixel, then a gray one.
    const PPM: &[u8] = b"P6 2 1 255\n\xff\x00\x00\x40\x40\x40";

    fn run(p: &ImageDecodeParams, bytes: &[u8]) -> (i32, [i64; 2], Vec<u8>) {
        let mut dims = [-1i64; 2];
        let status = unsafe { onnxc_image_dims(p, bytes.as_ptr(), bytes.len() as i64, dims.as_mut_ptr()) };
        if status != STATUS_OK {
            return (status, dims, vec![]);
        }
        let mut out = vec![0u8; (dims[0] * dims[1]) as usize * p.channels().unwrap()];
        let n = out.len() as i64;
        let status = unsafe { onnxc_image_decode(p, bytes.as_ptr(), bytes.len() as i64, out.as_mut_ptr(), n) };
        (status, dims, out)
    }

    #[test]
    fn pixel_formats() {
        assert_eq!(run(&params(PIXEL_RGB), PPM), (STATUS_OK, [1, 2], vec![255, 0, 0, 64, 64, 64]));
        assert_eq!(run(&params(PIXEL_BGR), PPM), (STATUS_OK, [1, 2], vec![0, 0, 255, 64, 64, 64]));
        // 19595 * 255 + 0x8000 = 5029493, >> 16 = 76; gray stays gray.
        assert_eq!(run(&params(PIXEL_GRAYSCALE), PPM), (STATUS_OK, [1, 2], vec![76, 64]));
    }

    #[test]
    fn undecodable_bytes_give_an_empty_image() {
        for bytes in [&b""[..], b"not an image", &PPM[..PPM.len() - 2], b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR"] {
            assert_eq!(run(&params(PIXEL_RGB), bytes), (STATUS_OK, [0, 0], vec![]), "{bytes:?}");
        }
    }

    #[test]
    fn images_over_the_limit_and_bad_params_are_refused() {
        let small = ImageDecodeParams { pixel_format: PIXEL_RGB, max_bytes: 5 };
        assert_eq!(run(&small, PPM).0, STATUS_OUT_OF_MEMORY);
        assert_eq!(run(&params(7), PPM).0, STATUS_INVALID_PARAMS);
        let mut out = [0u8; 5];
        let p = params(PIXEL_RGB);
        let status = unsafe { onnxc_image_decode(&p, PPM.as_ptr(), PPM.len() as i64, out.as_mut_ptr(), 5) };
        assert_eq!(status, STATUS_INVALID_PARAMS, "a buffer one byte short is refused");
        assert_eq!(out, [0; 5]);
        let mut dims = [0i64; 2];
        let status = unsafe { onnxc_image_dims(core::ptr::null(), PPM.as_ptr(), 3, dims.as_mut_ptr()) };
        assert_eq!(status, STATUS_INVALID_PARAMS);
    }
}
