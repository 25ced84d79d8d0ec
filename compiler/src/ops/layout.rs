//! Reorder: a tensor between the ONNX layout (`[N, C, H, W]`) and the
//! blocked layout the blocked convolutions read and write.
//!
//! A blocked tensor is an ordinary mid-IR value of shape `[N, C/8, H, W, 8]`
//! (`onnxc_runtime::BLOCK` channels per block, `C` a multiple of it): its
//! bytes are the blocked layout's, so sizes, the memory plan and
//! elementwise code need nothing new. Only `passes::choose_layout` makes
//! these nodes, at the edges of the parts of a graph it runs blocked; no
//! ONNX operator imports to them.

use super::{InferCx, Inferred, Operator};
use crate::codegen::kernels::{self, Ptr, I64};
use crate::codegen::Lower;
use crate::ir::DType;
use onnxc_runtime::BLOCK;

/// The blocked shape of an `[N, C, H, W]` shape whose channels are whole
/// blocks.
pub fn blocked_shape(shape: &[usize]) -> Option<Vec<usize>> {
    match *shape {
        [n, c, h, w] if c % BLOCK == 0 => Some(vec![n, c / BLOCK, h, w, BLOCK]),
        _ => None,
    }
}

/// Whether a blocked Conv reads an input of this shape in NCHW, as it is:
/// an image, of fewer channels than a block (`onnxc_runtime::conv_reads_nchw`).
pub fn read_as_image(shape: &[usize]) -> bool {
    matches!(*shape, [_, c, _, _] if c < BLOCK)
}

/// The `[N, C, H, W]` shape of a blocked shape.
pub fn unblocked_shape(shape: &[usize]) -> Option<Vec<usize>> {
    match *shape {
        [n, blocks, h, w, BLOCK] => Some(vec![n, blocks * BLOCK, h, w]),
        _ => None,
    }
}

#[derive(Clone, Debug)]
pub struct Reorder {
    /// Into the blocked layout, else out of it.
    pub to_blocked: bool,
}

impl Operator for Reorder {
    fn name(&self) -> &'static str {
        if self.to_blocked {
            "ToBlocked"
        } else {
            "FromBlocked"
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let x = cx.input(0)?;
        if x.dtype != DType::F32 {
            return Err(format!("input 0 is {}, expected f32", x.dtype));
        }
        let shape = if self.to_blocked { blocked_shape(x.shape) } else { unblocked_shape(x.shape) };
        let shape =
            shape.ok_or_else(|| format!("input 0 has shape {:?}, which {} cannot reorder", x.shape, self.name()))?;
        Ok(vec![Inferred::new(DType::F32, shape)])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let nchw = if self.to_blocked { shape } else { unblocked_shape(&shape).ok_or("input 0 is not blocked")? };
        let [n, c, h, w] = nchw[..] else { return Err(format!("input 0 has shape {nchw:?}, expected rank 4")) };
        let (x, y) = (Ptr(cx.input_ptr(0)?), Ptr(cx.output_ptr(0)?));
        let [n, c, plane] = [n, c, h * w].map(|v| I64(cx.iconst(v as i64)));
        let kernel = if self.to_blocked { kernels::onnxc_to_blocked_f32 } else { kernels::onnxc_from_blocked_f32 };
        let parallel = cx.parallel_ptr();
        cx.call_checked(kernel, (x, y, n, c, plane, parallel))
    }
}
