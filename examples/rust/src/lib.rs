//! A `no_std` crate that uses onnxc's build-script integration: `build.rs`
//! compiles a 784-128-10 perceptron with `onnxc::Build`, and the typed
//! module it writes is included below. Nothing here is `unsafe`, and
//! nothing allocates: the workspace is a value on the caller's stack.
#![no_std]
#![deny(unsafe_code, missing_docs)]

/// The compiled model: `mlp::Model`, `mlp::Workspace`, `mlp::WORKSPACE_BYTES`,
/// and the shapes and element types under `mlp::inputs` / `mlp::outputs`.
pub mod mlp {
    include!(concat!(env!("OUT_DIR"), "/mlp.rs"));
}

use onnxc_runtime::model::RunError;

/// The most likely class of a 28×28 image and its probability.
pub fn classify(image: &[f32; mlp::inputs::image::LEN]) -> Result<(usize, f32), RunError> {
    let mut workspace = mlp::Workspace::new();
    let mut probs = [0.0; mlp::outputs::probs::LEN];
    mlp::Model.run(&mut workspace, image, &mut probs)?;
    let best = (0..probs.len()).fold(0, |best, k| if probs[k] > probs[best] { k } else { best });
    Ok((best, probs[best]))
}
