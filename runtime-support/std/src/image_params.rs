//! The parameters of ImageDecoder's kernels ([`crate::image`]), apart from
//! the kernels: the compiler fills them in read-only data whether or not
//! it was built with the decoders (feature `decoders`), so they must not
//! pull the `image` crate in.

/// `pixel_format` "RGB": `[H, W, 3]`.
pub const PIXEL_RGB: i64 = 0;
/// `pixel_format` "BGR": `[H, W, 3]`, channels reversed.
pub const PIXEL_BGR: i64 = 1;
/// `pixel_format` "Grayscale": `[H, W, 1]`.
pub const PIXEL_GRAYSCALE: i64 = 2;

/// Parameters of `onnxc_image_dims` and `onnxc_image_decode`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ImageDecodeParams {
    /// One of the `PIXEL_*` codes.
    pub pixel_format: i64,
    /// Most bytes the decoded image may take.
    pub max_bytes: i64,
}

impl ImageDecodeParams {
    /// The output's channel count, `None` for an unknown format.
    pub fn channels(&self) -> Option<usize> {
        match self.pixel_format {
            PIXEL_RGB | PIXEL_BGR => Some(3),
            PIXEL_GRAYSCALE => Some(1),
            _ => None,
        }
    }
}
